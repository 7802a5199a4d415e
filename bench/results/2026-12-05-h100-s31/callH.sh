#!/bin/bash
# Session 31 call H: the Q/K+V pair's V rows (Q6_K) on the cp.async ring. The 7B pair launch gives each warp 2
# items (runs of 2 row groups, one chunk each), under MVQ_ASYNC_MIN_ITEMS (4), so V streams through the staged
# loader (mv_q_q8_pair<Q4_K, Q6_K, 4, staged>: 96 registers, 24/28 bytes spilled). Carries .c32 (ignored by git):
# "base" (this tree's CLI, built here), "mi2" and "mi1" (matvec_q8.cu recompiled -DMVQ_ASYNC_MIN_ITEMS=2 / =1 by
# bench/cuda/knob_build.sh), the Debian runtime libraries, the 7B and 1.5B headers. Greedy ids, then tg128 A/B on the 7B (cut to fit the 323 s of device time left).
set -u
. bench/cuda/device_env.sh oh .c32
/tmp/b/mi2 --version || exit 1
dev_file 7b & dev_file 1.5b & wait
el "files: $(ls -la /tmp/*.gguf | awk '{print $5, $9}' | tr '\n' ' ')"
for m in 7b 1.5b; do
  for v in base mi2 mi1; do
    timeout 120 /tmp/b/$v run -m /tmp/$m.gguf --backend cuda -p "the quick brown fox" -n 32 --temperature 0 --show-ids > $OUT/ids-$m-$v.txt 2>> $OUT/ids.log
    echo "rc=$?" >> $OUT/ids-$m-$v.txt
  done
  cmp -s $OUT/ids-$m-base.txt $OUT/ids-$m-mi2.txt && r1=same || r1=DIFFER
  cmp -s $OUT/ids-$m-base.txt $OUT/ids-$m-mi1.txt && r2=same || r2=DIFFER
  echo "greedy ids $m: mi2 vs base $r1, mi1 vs base $r2 ($(tail -1 $OUT/ids-$m-base.txt))" | tee -a $OUT/ids-summary.txt
done
ab() { local v=$1 m=$2 k=$3
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$v-vs-base-$m-tg.tsv -T /tmp/b/$v -B /tmp/b/base -k $k -p 0 -n 128 -r 3 /tmp/$m.gguf > $OUT/ab-$v-$m.log 2>&1
  python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-$v-vs-base-$m-tg.tsv $v-vs-base $m | tee -a $OUT/ab-summary.txt; el "ab $v $m"; }
ab mi2 7b 5; ab mi1 7b 5
cp $OUT/ab-summary.txt $OUT/ids-summary.txt $REAL/
el end
