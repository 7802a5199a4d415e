#!/bin/bash
# Session 26 call 2 (call 1 ran past 600 s: its sanitizer run of test_cuda_backend; its A/B stopped in group 4):
# test_cuda_backend with the auto session's prompt no longer compared against the all-logits session's first row
# (call 1's 15 failures: a test error, memcheck clean); then the tg128 A/B of call 1 ("turbospark" = 489db5e built
# on the dev box, "base" = 628e92d), 5 groups on the 7B, 3 on SmolLM2 and the 1.5B; the device copy ceiling.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/b; for f in ts ts-b0; do [ -x /tmp/b/$f ] || { xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; }; done
mkdir -p .deps/root; for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for h in 7b smol 1.5b; do [ -f /tmp/$h.gguf ] || { xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf > $OUT/synth-$h.log 2>&1 & }; done
if [ -d build-cuda ]; then
  cmake --build build-cuda -j 16 --target test_cuda_backend > $OUT/build.log 2>&1; el "build rc=$?"
  build-cuda/test_cuda_backend > $OUT/test_cuda_backend.log 2>&1; el "test_cuda_backend rc=$?"
  tail -1 $OUT/test_cuda_backend.log; grep -E 'CHECK failed' $OUT/test_cuda_backend.log | head -5
  grep -E 'auto switching' $OUT/test_cuda_backend.log | head -3
else el "no build-cuda (a fresh machine)"; fi
wait; el files
ab() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$tag-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$tag.log 2>&1
  el "ab $tag rc=$?"; cat $OUT/ab-$tag-tg.tsv; }
ab 7b 5 /tmp/7b.gguf
ab smol 3 /tmp/smol.gguf
ab 1.5b 3 /tmp/1.5b.gguf
if [ -x build-cuda/bench_matvec ]; then
  for i in 1 2; do
    BENCH_QUICK=0 build-cuda/bench_matvec none 2>&1 | grep -E 'copy' | head -2 | tee -a $OUT/roofline.txt
    [ $i = 1 ] && /tmp/b/ts bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 5 2>&1 | grep -E 'tg128|backend' | tee -a $OUT/roofline.txt
  done
fi
el end
