#!/usr/bin/env bash
# session 10, call 3 (part A of the llama.cpp side by side): stash half of the stripped llama-bench (xz) in /tmp, build
# turbospark, make the 4 dense files; part B (dev38.sh) follows on the warm machine
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/stash && cp .pa/lb.xz.part1 /tmp/stash/
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x "$f" "$DR"; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig
M=/tmp/m; mkdir -p $M
( for n in qwen1.5b r1-7b; do xz -dc .hd/$n.header.gguf.xz > $M/$n.header.gguf && python3 bench/make_synthetic_dense.py $M/$n.header.gguf $M/$n.gguf > $M/$n.log 2>&1; done
  python3 bench/make_synthetic_dense.py $M/r1-7b.header.gguf $M/r1-7b-q4_0.gguf --retype Q4_0 > $M/q40.log 2>&1; echo "synth done $(el)s" ) &
SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
( mkdir -p /tmp/gpu-check-models; python3 bench/make_synthetic_dense.py .deps/SmolLM2-135M-Instruct.Q4_1.header.gguf $SMOL > /dev/null 2>&1; echo "smol rc=$?" ) &
GPU_CHECK_JOBS=16 GPU_CHECK_ONLY_BUILD=1 scripts/gpu-check.sh > /tmp/stash/build.txt 2>&1; echo "build rc=$? at $(el)s"
tail -2 /tmp/stash/build.txt
wait
ls -la $M/*.gguf $SMOL build-cuda/turbospark /tmp/stash | cut -c1-120
echo "done at $(el)s"
