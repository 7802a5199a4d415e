#!/bin/bash
# Session 31 call H: the Q/K+V pair's V rows (Q6_K) on the cp.async ring. The 7B pair launch gives each warp 2
# items (runs of 2 row groups, one chunk each), under MVQ_ASYNC_MIN_ITEMS (4), so V streams through the staged
# loader (mv_q_q8_pair<Q4_K, Q6_K, 4, staged>: 96 registers, 24/28 bytes spilled). Carries .c32 (ignored by git):
# "base" (this tree's CLI, built here), "mi2" and "mi1" (matvec_q8.cu recompiled -DMVQ_ASYNC_MIN_ITEMS=2 / =1 by
# bench/cuda/knob_build.sh), the Debian runtime libraries, the 7B and 1.5B headers. Greedy ids, then tg128 A/B.
set -u
REAL=$OUT; export OUT=/tmp/oh; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/oh.tgz oh; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p .c32/root && for d in .c32/debs/*.deb; do dpkg-deb -x $d .c32/root; done
export LD_LIBRARY_PATH=$PWD/.c32/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
mkdir -p /tmp/b && xz -dc .c32/bins.tar.xz | tar -C /tmp/b -xf -
/tmp/b/mi2 --version || exit 1
for m in 7b 1.5b; do xz -dc .c32/$m.hdr.xz > /tmp/$m.hdr; python3 bench/make_synthetic_dense.py /tmp/$m.hdr /tmp/$m.gguf > $OUT/synth-$m.log 2>&1 & done
wait; el "files: $(ls -la /tmp/*.gguf | awk '{print $5, $9}' | tr '\n' ' ')"
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
ab mi2 7b 5; ab mi1 7b 5; ab mi1 1.5b 5
cp $OUT/ab-summary.txt $OUT/ids-summary.txt $REAL/
CI=/usr/local/cuda/include; [ -f $CI/cupti.h ] || CI=/usr/local/cuda/extras/CUPTI/include
gcc -O2 -shared -fPIC -I$CI bench/cuda/ktrace.c -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -o /tmp/libktrace.so &&
for v in mi2; do CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=$OUT/kt-$v-7b.tsv /tmp/b/$v bench -m /tmp/7b.gguf --backend cuda -p 0 -n 64 -r 1 > $OUT/kt-$v.log 2>&1
  python3 bench/cuda/ktrace_summary.py $OUT/kt-$v-7b.tsv > $OUT/kt-$v-7b.sum 2>&1; sed -n 1,14p $OUT/kt-$v-7b.sum; xz -6 $OUT/kt-$v-7b.tsv; done
el end
