#!/bin/bash
# Session 18 call 2: gpu-check of 08fa029 (pilot prefetch AUTO: tests and the CLI's prefetch on/off checks, no
# sanitizers: no kernel changed since call 1's clean run); the 30B-A3B streamed at 25% from the file, decode only,
# prefetch auto (= off on the file) against the pilot's 2 best guesses, alternating, two rounds; the host tier
# at auto (= 2 guesses, device plan) once, for its 'expert prefetch' line.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 4 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
rc=$?; el "gpu-check rc=$rc"; head -16 $OUT/summary.txt; grep -E 'FAIL|overall|streamed' $OUT/summary.txt | head
[ -x build-cuda/turbospark ] || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
T=build-cuda/turbospark; M=/tmp/moe30b.gguf
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; done; tail -1 $OUT/msm.log; el "msm"
S="--expert-residency streamed --expert-cache-slots 32 --gpu-expert-source file"
for round in 1 2; do
  for pf in auto 2; do
    [ $(( $(date +%s) - T0 )) -gt 480 ] && break 2
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo "== round $round file tier prefetch $pf" >> $OUT/bench-file.log
    TURBOSPARK_EXPERT_NOCACHE=1 timeout 100 $T bench -m $M --backend cuda $S --pilot-prefetch $pf -p 0 -n 64 -r 2 >> $OUT/bench-file.log 2>&1
    el "round $round $pf: $(grep -E 'tg64' $OUT/bench-file.log | tail -1 | cut -c1-140)"
  done
done
grep -E '^==|tg64|expert cache|expert plan|prefetch' $OUT/bench-file.log | cut -c1-260
if [ $(( $(date +%s) - T0 )) -lt 500 ]; then
  echo "== host tier, auto" > $OUT/bench-host.log
  timeout 90 $T bench -m $M --backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host -p 0 -n 128 -r 3 >> $OUT/bench-host.log 2>&1
  el "host auto"; grep -E 'tg128|expert cache|expert plan|prefetch' $OUT/bench-host.log | cut -c1-260
fi
el end
