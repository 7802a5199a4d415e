#!/bin/bash
# Session 17 call 2: the device-planned streamed decode on CUDA (expert_pass: the cache pass kernel with its
# bookkeeping and the SM fill). gpu-check (sanitizers on test_cuda_policy), bench_policy; the 30B-A3B streamed at 25%
# (32 slots, host tier): greedy ids resident / host-planned / device-planned, then decode-only bench of
# {host, device} x {prefetch on, off}, alternating, 2 rounds, with the end lines (hits, copies).
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 4 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
GPU_CHECK_SAN_ONLY=test_cuda_policy GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
rc=$?; el "gpu-check rc=$rc"; head -14 $OUT/summary.txt; grep -E 'FAIL|overall' $OUT/summary.txt | head
grep -E 'device-planned' $OUT/tests.log | head -12
[ -x build-cuda/turbospark ] || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
T=build-cuda/turbospark; M=/tmp/moe30b.gguf; R="--expert-residency resident"
S="--expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host"
BENCH_QUICK=1 timeout 30 build-cuda/bench_policy > $OUT/bench_policy.txt 2>&1; el "bench_policy rc=$?"; cat $OUT/bench_policy.txt
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; done; tail -1 $OUT/msm.log; el "msm"
for mode in "$R" "$S --expert-plan host" "$S --expert-plan device"; do
  a=$(timeout 120 $T run -m $M --backend cuda $mode -p "the router" -n 32 --temperature 0 --show-ids 2>>$OUT/cli.log)
  echo "$mode: $a" >> $OUT/ids-30b.txt
done
el "30B ids"; cut -c1-200 $OUT/ids-30b.txt; n=$(cut -d: -f2 $OUT/ids-30b.txt | sort -u | wc -l); echo "distinct id lines: $n (1 = all equal)"
for round in 1 2; do
  for plan in host device; do
    for pf in on off; do
      [ $(( $(date +%s) - T0 )) -gt 520 ] && break 3
      echo "== round $round plan $plan prefetch $pf" >> $OUT/bench-streamed.log
      timeout 90 $T bench -m $M --backend cuda $S --expert-plan $plan --pilot-prefetch $pf -p 0 -n 128 -r 3 >> $OUT/bench-streamed.log 2>&1
      el "round $round $plan $pf: $(grep -E 'tg128' $OUT/bench-streamed.log | tail -1 | cut -c1-120)"
    done
  done
done
grep -E '^==|tg128|expert cache|prefetch' $OUT/bench-streamed.log | cut -c1-260
if [ $(( $(date +%s) - T0 )) -lt 500 ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  timeout 70 $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 2500 \
      $T bench -m $M --backend cuda $S --expert-plan device --pilot-prefetch off -p 0 -n 8 -r 1 > $OUT/ncu-streamed-device.csv 2>$OUT/ncu-streamed.err
  el "ncu rc=$?"; xz -9 $OUT/ncu-streamed-device.csv
fi
el end
