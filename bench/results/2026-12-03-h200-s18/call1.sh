#!/bin/bash
# Session 18 call 1: gpu-check of HEAD (the C side of the device plan, 35bea93/867100b, not yet run on a GPU);
# the disk's O_DIRECT read bandwidth on the 30B file (1 stream, 8 parallel); the 30B-A3B streamed at 25% from the
# file (NOCACHE, O_DIRECT, page cache dropped), decode only, prefetch on (2) and off, alternating, for the disk-floor ratio.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 4 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
GPU_CHECK_SAN_ONLY=test_cuda_policy GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
rc=$?; el "gpu-check rc=$rc"; head -16 $OUT/summary.txt; grep -E 'FAIL|overall' $OUT/summary.txt | head
[ -x build-cuda/turbospark ] || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
T=build-cuda/turbospark; M=/tmp/moe30b.gguf
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; done; tail -1 $OUT/msm.log; el "msm"
sync; echo 3 > /proc/sys/vm/drop_caches
{ lsblk -o NAME,SIZE,ROTA,MODEL 2>/dev/null; df -h /tmp; 
  echo "== 1 stream, 4 MiB blocks, 4 GiB"; dd if=$M of=/dev/null iflag=direct bs=4M count=1024 skip=256 2>&1 | tail -1
  echo "== 8 streams, 1 MiB blocks, 512 MiB each"; s=$(date +%s.%N)
  for i in 0 1 2 3 4 5 6 7; do dd if=$M of=/dev/null iflag=direct bs=1M count=512 skip=$((6000 + i*1024)) 2>/dev/null & done; wait
  e=$(date +%s.%N); python3 -c "print('8x512 MiB: %.2f GB/s' % (8*512*1048576/1e9/($e-$s)))"
  echo "== 8 streams, 4 MiB blocks, 512 MiB each"; s=$(date +%s.%N)
  for i in 0 1 2 3 4 5 6 7; do dd if=$M of=/dev/null iflag=direct bs=4M count=128 skip=$((3000 + i*128)) 2>/dev/null & done; wait
  e=$(date +%s.%N); python3 -c "print('8x512 MiB: %.2f GB/s' % (8*512*1048576/1e9/($e-$s)))"
} > $OUT/diskbw.txt 2>&1; el "diskbw"; cat $OUT/diskbw.txt
S="--expert-residency streamed --expert-cache-slots 32 --gpu-expert-source file"
for round in 1 2; do
  for pf in on off; do
    [ $(( $(date +%s) - T0 )) -gt 540 ] && break 2
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo "== round $round file tier prefetch $pf" >> $OUT/bench-file.log
    TURBOSPARK_EXPERT_NOCACHE=1 /usr/bin/time -v timeout 100 $T bench -m $M --backend cuda $S --pilot-prefetch $pf -p 0 -n 64 -r 2 >> $OUT/bench-file.log 2>&1
    el "round $round $pf: $(grep -E 'tg64' $OUT/bench-file.log | tail -1 | cut -c1-140)"
  done
done
grep -E '^==|tg64|expert cache|expert plan|prefetch|Maximum resident' $OUT/bench-file.log | cut -c1-260
el end
