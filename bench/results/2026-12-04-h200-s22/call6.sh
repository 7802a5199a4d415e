#!/bin/bash
# Session 22 call 6: test_cuda_gemm (built on the dev box) with its reference for weights in the compute type
# rounding x as the GEMM now does (hi + lo): the full run, then memcheck and racecheck in the small mode.
set -u
xz -dc .pb/test_cuda_gemm.xz > /tmp/tg; chmod +x /tmp/tg
timeout 100 /tmp/tg > $OUT/gemm-full.txt 2>&1; echo "full rc=$?"; grep -E "FAIL|passed" $OUT/gemm-full.txt | tail -5
grep -E "F16/F16|BF16/BF16" $OUT/gemm-full.txt | head -8
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  TS_CUDA_TEST_SMALL=1 timeout 120 $SAN --tool $tool --error-exitcode 99 /tmp/tg > $OUT/gemm-$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $OUT/gemm-$tool.txt
done
