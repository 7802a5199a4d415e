#!/bin/bash
# Session 33 call M: the GPU check after this session's change to the backend interface (ts_expert_groups gained
# row_tok, which the CPU backend uses and the CUDA one ignores; src/forward/moe.c sets it for gate/up). The build
# is carried: `scripts/gpu-check.sh --pack` of 415e6f0 on the dev box (6 min 13 s with CI running beside it).
# Sanitizers on, micro-benchmarks skipped (no CUDA source changed). Carries .gpucheck and .deps.
set -u
. bench/cuda/device_env.sh cm .deps
GPU_CHECK_PREBUILT=.gpucheck/build.tar.xz GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=${BUDGET:-420} OUT=$OUT/gc \
  scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"
sed -n '/== summary/,$p' $OUT/gpucheck.log | tee $REAL/summary.txt
el end
