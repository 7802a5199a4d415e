#!/bin/bash
# Session 30 call D (a fresh machine, nothing built on it). Carried in .c30: bins.tar.xz with two CLIs built here
# ("q40": 370db57's build with matvec_q8.cu recompiled at the Q4_0 direct loader, MVQ_DIRECT_Q40 on by default;
# "q40off": the same with -DMVQ_DIRECT_Q40=0, i.e. Q4_0 on the staged loader as before) and test_cuda_matvec
# built from this tree for sm_90a; the Debian runtime libraries; the 7B's real header. Then: the 7B Q4_0 file;
# greedy ids q40 = q40off; tg128 A/B q40 vs q40off (5 groups); test_cuda_matvec on the GPU in full mode, and
# under compute-sanitizer memcheck in its small mode (the loader uses no shared memory: no racecheck); a CUPTI trace of q40 on the 7B Q4_0.
set -u
REAL=$OUT; export OUT=/tmp/od; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/od.tgz od; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p .c30/root && for d in .c30/debs/*.deb; do dpkg-deb -x $d .c30/root; done
export LD_LIBRARY_PATH=$PWD/.c30/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
mkdir -p /tmp/b && xz -dc .c30/bins.tar.xz | tar -C /tmp/b -xf -
/tmp/b/q40 --version || exit 1
xz -dc .c30/7b.hdr.xz > /tmp/7b.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 > $OUT/synth.log 2>&1 &
SYN=$!
wait $SYN; el "file: $(ls -la /tmp/7bq40.gguf | awk '{print $5}')"
for v in q40 q40off; do
  timeout 120 /tmp/b/$v run -m /tmp/7bq40.gguf --backend cuda -p "the quick brown fox" -n 32 --temperature 0 --show-ids > $OUT/ids-$v.txt 2>> $OUT/ids.log
  echo "rc=$?" >> $OUT/ids-$v.txt
done
cmp -s $OUT/ids-q40.txt $OUT/ids-q40off.txt && r=same || r=DIFFER
echo "greedy ids 7bq40: q40 vs q40off $r ($(tail -1 $OUT/ids-q40.txt))" | tee $OUT/ids-summary.txt
bench/cuda/gpu_pairs.sh -o $OUT/ab-q40-vs-q40off-7bq40-tg.tsv -T /tmp/b/q40 -B /tmp/b/q40off -k 5 -p 0 -n 128 -r 3 /tmp/7bq40.gguf > $OUT/ab-q40.log 2>&1
python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-q40-vs-q40off-7bq40-tg.tsv q40-vs-q40off 7bq40 | tee $OUT/ab-summary.txt; el ab
cp $OUT/ab-summary.txt $OUT/ids-summary.txt $REAL/
timeout 100 /tmp/b/test_cuda_matvec > $OUT/test_cuda_matvec.log 2>&1; el "test_cuda_matvec rc=$?: $(tail -1 $OUT/test_cuda_matvec.log)"
grep -E "FAIL" $OUT/test_cuda_matvec.log | head -5; cp $OUT/test_cuda_matvec.log $REAL/
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck; do
  TS_CUDA_TEST_SMALL=1 timeout 90 $CS --tool $tool --error-exitcode 9 /tmp/b/test_cuda_matvec > $OUT/san-$tool.log 2>&1
  el "$tool rc=$?: $(grep -E 'ERROR SUMMARY|passed' $OUT/san-$tool.log | tr '\n' ' ')"
done
CI=/usr/local/cuda/include; [ -f $CI/cupti.h ] || CI=/usr/local/cuda/extras/CUPTI/include
gcc -O2 -shared -fPIC -I$CI bench/cuda/ktrace.c -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -o /tmp/libktrace.so &&
for v in q40; do CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=$OUT/kt-$v-7bq40.tsv /tmp/b/$v bench -m /tmp/7bq40.gguf --backend cuda -p 0 -n 64 -r 1 > $OUT/kt-$v.log 2>&1
  python3 bench/cuda/ktrace_summary.py $OUT/kt-$v-7bq40.tsv > $OUT/kt-$v-7bq40.sum 2>&1; sed -n 1,16p $OUT/kt-$v-7bq40.sum; xz -6 $OUT/kt-$v-7bq40.tsv; done
el end
