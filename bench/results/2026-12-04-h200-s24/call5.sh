#!/bin/bash
# Session 24 call 5: scripts/gpu-check.sh of the session's last CUDA tree (built on the device, sanitizers on
# test_cuda_matvec); then the CLI that build made: greedy ids cuda = cpu on the 7B Q4_K_M synthetic (16 tokens) and
# its tg128.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
git log --oneline -1 2>/dev/null
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 ) &
SYN=$!
GPU_CHECK_SAN_ONLY=test_cuda_matvec GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -16 $OUT/summary.txt; grep -E 'FAIL|DIFFER' $OUT/summary.txt | head
grep -E 'launch rule|launches:' $OUT/tests.log | grep -c ok
wait $SYN; el "7b file"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
T=build-cuda/turbospark
a=$(timeout 100 $T run -m /tmp/7b.gguf --backend cpu -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
b=$(timeout 60 $T run -m /tmp/7b.gguf --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
[ -n "$a" ] && [ "$a" = "$b" ] && echo "ids 7b: equal" || { echo "ids 7b: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
$T bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 3 2>&1 | grep -v '^bench:' | tee $REAL/bench-7b.txt
el end
