#!/bin/bash
# Session 45's device call: scripts/gpu-check.sh on this tree with the build CI made on a fresh clone of HEAD
# (`scripts/gpu-check.sh --pack`, carried in .gpucheck) and .deps (`scripts/gpu-check.sh --fetch-deps`), as session
# 40's callA.sh. No nvcc runs on the device.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/machine.txt
lscpu | grep -E 'Model name|family|Model:|^CPU\(s\)' >> $OUT/machine.txt
cat .gpucheck/commit.txt >> $OUT/machine.txt 2>/dev/null
GPU_CHECK_PREBUILT=.gpucheck/build.tar.xz GPU_CHECK_BUDGET_S=${BUDGET:-420} OUT=$OUT/gc scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
echo "gpu-check rc=$?" >> $OUT/gpucheck.log
sed -n '/== summary/,$p' $OUT/gpucheck.log > $OUT/summary.txt
