#!/bin/bash
# Session 20 call 3: gpu-check of 49b8cc7 (the cp.async ring for Q6_K by default; memcheck/racecheck on
# test_cuda_matvec and test_cuda_decode); 7B Q4_K_M tg128 of this tree; ncu per-kernel durations of the 7B's decode.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 570 - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
( xz -dc .pb/hd/7b.hdr.xz > /tmp/7b.hdr; nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1; echo "rc=$?" >> $OUT/synth-7b.log ) &
GPU_CHECK_SAN_ONLY=test_cuda_matvec,test_cuda_decode GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; cat $OUT/summary.txt | head -40
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
wait; tail -n1 $OUT/synth-7b.log; el "file"
T=build-cuda/turbospark
timeout 60 $T bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/bench-7b-tg.txt 2>&1; el "bench"; grep -E "tg128" $OUT/bench-7b-tg.txt
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ $(left) -gt 50 ] && { timeout $(( $(left) - 10 )) $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 600 \
    $T bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 1 > $OUT/ncu-7b-tg.csv 2>$OUT/ncu-7b-tg.err; el "ncu rc=$?"; xz -9 $OUT/ncu-7b-tg.csv; }
el end
