#!/bin/bash
# Session 30 call C (a fresh machine, nothing built on it): the CLIs built here (.c30/bins.tar.xz: the turbospark binaries of
# this checkout's build-cuda, sm_90a, CUDA 13.0.88 as on the device): "base" (the tree before row_sumsq_part's
# change), "new" (base with matvec_q8.cu recompiled at the change: bench/cuda/knob_build.sh, no -D), "a2" (new with
# -DMVQ_ASYNC=2: the 32-element types, Q4_0 here, through the cp.async ring too), "pf16" (new with
# -DMVQ_PREFETCH=16384: 4x the weight bytes each warp prefetches to L2 before its PDL wait). The synthetic files from the real
# headers (.pb), then: base and new must give the same greedy ids (decode path, the changed kernel) on every file;
# tg128 A/B new vs base on every file; a2 vs new on the 7B Q4_0; pf16 vs new on the 7B; a CUPTI trace of new on the 7B.
set -u
REAL=$OUT; export OUT=/tmp/oc; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/oc.tgz oc; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)'
mkdir -p .c30/root && for d in .c30/debs/*.deb; do dpkg-deb -x $d .c30/root; done
export LD_LIBRARY_PATH=$PWD/.c30/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
mkdir -p /tmp/b
xz -dc .c30/bins.tar.xz | tar -C /tmp/b -xf -
/tmp/b/base --version || exit 1
for h in 7b 1.5b smol; do xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; done
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth.log 2>&1 &
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 >> $OUT/synth.log 2>&1 &
for h in 1.5b smol; do python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf >> $OUT/synth.log 2>&1; done
wait; el "files: $(ls -la /tmp/*.gguf | awk '{print $5, $9}' | tr '\n' ' ')"
for m in smol 1.5b 7b 7bq40; do
  for v in base new a2; do
    timeout 120 /tmp/b/$v run -m /tmp/$m.gguf --backend cuda -p "the quick brown fox" -n 32 --temperature 0 --show-ids > $OUT/ids-$m-$v.txt 2>> $OUT/ids.log
    echo "rc=$?" >> $OUT/ids-$m-$v.txt
  done
  cmp -s $OUT/ids-$m-base.txt $OUT/ids-$m-new.txt && r1=same || r1=DIFFER
  cmp -s $OUT/ids-$m-new.txt $OUT/ids-$m-a2.txt && r2=same || r2=DIFFER
  echo "greedy ids $m: new vs base $r1, a2 vs new $r2 ($(tail -1 $OUT/ids-$m-base.txt))" | tee -a $OUT/ids-summary.txt
done
ab() { local v=$1 b=$2 m=$3 k=$4
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$v-vs-$b-$m-tg.tsv -T /tmp/b/$v -B /tmp/b/$b -k $k -p 0 -n 128 -r 3 /tmp/$m.gguf > $OUT/ab-$v-$m.log 2>&1
  python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-$v-vs-$b-$m-tg.tsv $v-vs-$b $m | tee -a $OUT/ab-summary.txt; el "ab $v $m"; }
ab new base 7b 5; ab new base smol 5; ab new base 1.5b 5; ab new base 7bq40 3; ab a2 new 7bq40 5; ab pf16 new 7b 5
cp $OUT/ab-summary.txt $OUT/ids-summary.txt $REAL/ 2>/dev/null
CI=/usr/local/cuda/include; [ -f $CI/cupti.h ] || CI=/usr/local/cuda/extras/CUPTI/include
gcc -O2 -shared -fPIC -I$CI bench/cuda/ktrace.c -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -o /tmp/libktrace.so &&
for v in base new; do CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=$OUT/kt-$v-7b.tsv /tmp/b/$v bench -m /tmp/7b.gguf --backend cuda -p 0 -n 64 -r 1 > $OUT/kt-$v-7b.log 2>&1
  python3 bench/cuda/ktrace_summary.py $OUT/kt-$v-7b.tsv > $OUT/kt-$v-7b.sum 2>&1; head -3 $OUT/kt-$v-7b.sum; grep q8_quant $OUT/kt-$v-7b.sum; xz -6 $OUT/kt-$v-7b.tsv; done
el end
