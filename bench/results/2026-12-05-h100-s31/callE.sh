#!/bin/bash
# Session 31 call E (ran on an H100): session 30's callE.sh (the Q6_K direct loader, MVQ_DIRECT_Q6K=1, against the tree's default,
# Q6_K on the cp.async ring), plus the 1.5B Q4_K_M (its Q6_K tensors too). Carries .c30 as
# bench/results/2026-12-05-h100-s30/prepE.sh makes it, plus .c30/1.5b.hdr.xz; nothing is built on the device.
set -u
REAL=$OUT; export OUT=/tmp/oe; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/oe.tgz oe; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -m1 'Model name'
mkdir -p .c30/root && for d in .c30/debs/*.deb; do dpkg-deb -x $d .c30/root; done
export LD_LIBRARY_PATH=$PWD/.c30/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
mkdir -p /tmp/b && xz -dc .c30/bins.tar.xz | tar -C /tmp/b -xf -
/tmp/b/q6k --version || exit 1
for m in 7b 1.5b; do
  xz -dc .c30/$m.hdr.xz > /tmp/$m.hdr
  python3 bench/make_synthetic_dense.py /tmp/$m.hdr /tmp/$m.gguf > $OUT/synth-$m.log 2>&1; el "file $m: $(ls -la /tmp/$m.gguf | awk '{print $5}')"
done
for m in 7b 1.5b; do
  for v in q6k q6koff; do
    timeout 120 /tmp/b/$v run -m /tmp/$m.gguf --backend cuda -p "the quick brown fox" -n 32 --temperature 0 --show-ids > $OUT/ids-$m-$v.txt 2>> $OUT/ids.log
    echo "rc=$?" >> $OUT/ids-$m-$v.txt
  done
  cmp -s $OUT/ids-$m-q6k.txt $OUT/ids-$m-q6koff.txt && r=same || r=DIFFER
  echo "greedy ids $m: q6k vs q6koff $r ($(tail -1 $OUT/ids-$m-q6k.txt))" | tee -a $OUT/ids-summary.txt
done
bench/cuda/gpu_pairs.sh -o $OUT/ab-q6k-vs-q6koff-7b-tg.tsv -T /tmp/b/q6k -B /tmp/b/q6koff -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-q6k-7b.log 2>&1
python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-q6k-vs-q6koff-7b-tg.tsv q6k-vs-q6koff 7b | tee $OUT/ab-summary.txt; el ab7b
cp $OUT/ab-summary.txt $OUT/ids-summary.txt $REAL/
timeout 100 /tmp/b/test_cuda_matvec > $OUT/test_cuda_matvec.log 2>&1; el "test_cuda_matvec rc=$?: $(tail -1 $OUT/test_cuda_matvec.log)"
grep -E "FAIL" $OUT/test_cuda_matvec.log | head -5; cp $OUT/test_cuda_matvec.log $REAL/
TS_CUDA_TEST_SMALL=1 timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_matvec > $OUT/san-memcheck.log 2>&1
el "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|passed' $OUT/san-memcheck.log | tr '\n' ' ')"
bench/cuda/gpu_pairs.sh -o $OUT/ab-q6k-vs-q6koff-1.5b-tg.tsv -T /tmp/b/q6k -B /tmp/b/q6koff -k 5 -p 0 -n 128 -r 3 /tmp/1.5b.gguf > $OUT/ab-q6k-1.5b.log 2>&1
python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-q6k-vs-q6koff-1.5b-tg.tsv q6k-vs-q6koff 1.5b | tee -a $OUT/ab-summary.txt; el ab1.5b
cp $OUT/ab-summary.txt $REAL/
CI=/usr/local/cuda/include; [ -f $CI/cupti.h ] || CI=/usr/local/cuda/extras/CUPTI/include
gcc -O2 -shared -fPIC -I$CI bench/cuda/ktrace.c -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -o /tmp/libktrace.so &&
for v in q6k q6koff; do CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=$OUT/kt-$v-7b.tsv /tmp/b/$v bench -m /tmp/7b.gguf --backend cuda -p 0 -n 64 -r 1 > $OUT/kt-$v.log 2>&1
  python3 bench/cuda/ktrace_summary.py $OUT/kt-$v-7b.tsv > $OUT/kt-$v-7b.sum 2>&1; sed -n 1,16p $OUT/kt-$v-7b.sum; xz -6 $OUT/kt-$v-7b.tsv; done
el end
