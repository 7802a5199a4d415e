#!/bin/bash
# Session 27 call 1: scripts/gpu-check.sh of the working tree (the error word and the greedy id in mapped
# host memory, no copy at a sync; a recorded decode step holds the copy of its id and position), built on
# the device, every CUDA test, compute-sanitizer on every test with test_cuda_backend in five fixture shards
# run side by side (whole, its racecheck ran past 320 s in session 26), the CLI's cuda = cpu checks; the
# synthetic files are made meanwhile for call 2.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)'
mkdir -p /tmp/b; for f in ts ts-b0; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
cp .pb/libktrace.so /tmp/b/; xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
for h in 7b smol 1.5b; do xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; done
( for h in 7b 1.5b smol; do nice -n 19 python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf > /tmp/synth-$h.log 2>&1; done
  touch /tmp/synth.done ) &
GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=520 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"
sed -n '/== summary/,$p' $OUT/gpucheck.log | head -40
grep -hE 'shard [0-9]: rc' $OUT/sanitizer.log | head -12
wait; el "files: $(ls /tmp/*.gguf | tr '\n' ' ')"
