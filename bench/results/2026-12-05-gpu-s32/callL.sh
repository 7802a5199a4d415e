#!/bin/bash
# Session 32 call L, for what device time is left (~430 s): on an H200 only (REQUIRE_GPU, else it stops at once), the
# carried GPU check without the sanitizers (they ran clean on the H200 in session 31 and on an H100 in call J), a
# short benchmark budget, then the 7B Q4_K_M decode on its own (turbospark only: no time for the peer's build).
# Carries .gpucheck, .deps and .c32 (the 7B's real header).
# REQUIRE_GPU=H200 (bench/cuda/device_env.sh): on another card it stops at once.
set -u
. bench/cuda/device_env.sh ol .c32
( dev_file 7b; touch /tmp/7b.done ) &
GPU_CHECK_PREBUILT=.gpucheck/build.tar.xz GPU_CHECK_SKIP_SAN=1 GPU_CHECK_BUDGET_S=${BUDGET:-170} OUT=$OUT/gc \
  scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"
sed -n '/== summary/,$p' $OUT/gpucheck.log > $REAL/summary.txt
export LD_LIBRARY_PATH=$PWD/build-gpucheck:$PWD/.deps/root/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
while [ ! -f /tmp/7b.done ]; do sleep 1; done
for i in 1 2 3; do
  build-gpucheck/turbospark bench -m /tmp/7b.gguf --backend cuda -p 512 -n 128 -r 3 >> $OUT/bench-7b.txt 2>> $OUT/bench-7b.err
done
grep -E '(pp|tg)[0-9]+' $OUT/bench-7b.txt | tee $REAL/bench-7b.txt
el end
