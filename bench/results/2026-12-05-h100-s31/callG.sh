#!/bin/bash
# Session 31 call G: scripts/gpu-check.sh on this tree, whole (built on the device with the carried .deps, every CUDA
# test, memcheck and racecheck, the CLI's cuda = cpu checks, the micro-benchmarks in what the budget leaves). Its logs
# are packed in one archive (the device tool returns at most 8 files), the summary beside it.
set -u
REAL=$OUT; export OUT=/tmp/og; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/og.tgz og; cp $OUT/summary.txt $REAL/ 2>/dev/null; }
trap pack EXIT
GPU_CHECK_BUDGET_S=${BUDGET:-530} scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
echo "gpu-check rc=$?"
sed -n '/== summary/,$p' $OUT/gpucheck.log
