#!/bin/bash
# Prepared in session 31, not run (no device time left): issue 11's GPU check with the build made here. Here first:
# scripts/gpu-check.sh --pack (~10 min on 2 cores; .gpucheck/build.tar.xz, ~12 MB). Carry .gpucheck and .deps.
# The 7B side by side then needs its own call (callF.sh: the peer's build takes ~290 s of a call).
set -u
REAL=$OUT; export OUT=/tmp/oi; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/oi.tgz oi; cp $OUT/summary.txt $REAL/ 2>/dev/null; }
trap pack EXIT
GPU_CHECK_PREBUILT=.gpucheck/build.tar.xz GPU_CHECK_BUDGET_S=${BUDGET:-520} scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
echo "gpu-check rc=$?"
sed -n '/== summary/,$p' $OUT/gpucheck.log
