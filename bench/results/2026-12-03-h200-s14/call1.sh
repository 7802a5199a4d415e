#!/bin/bash
# Session 14 call 1: gpu-check (route_watch's first GPU run), then ncu kernel durations:
# 7B Q4_0 and Q4_K_M pp512 prefill, 7B Q4_K_M decode, SmolLM2 decode.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
( for f in 7bq40:.hd/7b.hdr:--retype\ Q4_0 7b:.hd/7b.hdr:; do IFS=: read n h a <<< "$f";
    nice -n 19 python3 bench/make_synthetic_dense.py $h /tmp/$n.gguf $a > $OUT/synth-$n.log 2>&1; done ) &
GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -14 $OUT/summary.txt; grep -E 'FAIL|smollm2|overall' $OUT/summary.txt | head
grep -h -i 'near-tie\|not compared\|excluded' $OUT/*.txt $OUT/*.log 2>/dev/null | head -20
wait; el "files"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
B=build-cuda
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
prof() { # name launch-count args...
  local n=$1 c=$2; shift 2
  timeout 120 $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count $c \
    $B/turbospark bench "$@" > $OUT/ncu-$n.csv 2>$OUT/ncu-$n.err
  el "ncu $n rc=$? lines=$(wc -l < $OUT/ncu-$n.csv)"; tail -1 $OUT/ncu-$n.err; xz -9 $OUT/ncu-$n.csv
}
$B/turbospark bench -m /tmp/7bq40.gguf --backend cuda -p 512 -n 0 -r 3 2>&1 | tail -2
$B/turbospark bench -m /tmp/7b.gguf --backend cuda -p 512 -n 0 -r 3 2>&1 | tail -2
prof 7bq40-pp512 1200 -m /tmp/7bq40.gguf --backend cuda -p 512 -n 0 -r 1
prof 7b-pp512 1200 -m /tmp/7b.gguf --backend cuda -p 512 -n 0 -r 1
prof 7b-tg 1200 -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 1
prof smollm2-tg 1200 -m /tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf --backend cuda -p 0 -n 128 -r 1
el end
