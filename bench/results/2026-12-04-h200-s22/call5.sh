#!/bin/bash
# Session 22 call 5: scripts/gpu-check.sh of the working tree (ca62adc + the prefill GEMM multiplying F16
# weights by x as F16 hi + lo), compute-sanitizer on test_cuda_gemm; then test_cuda_backend again with the seed whose
# F16 fixture failed in call 4 (TS_TEST_SEED=1883650996202716: tiny-llama31-f16 gemm KL 1.009e-4 >= 1e-4).
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $OUT/seed.txt $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
GPU_CHECK_SAN_ONLY=test_cuda_gemm GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -16 $OUT/summary.txt; grep -E "FAIL|overall" $OUT/summary.txt | head
grep -E "f16 .*default|f32 .*default" $OUT/tests.log | head -12
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
TS_MODEL_CACHE=/tmp/gpu-check-models TS_TEST_SEED=1883650996202716 timeout 150 build-cuda/test_cuda_backend > $OUT/seed.txt 2>&1
el "seed run rc=$?"; grep -E "default|FAIL|passed" $OUT/seed.txt | head -24
el end
