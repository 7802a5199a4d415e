#!/bin/bash
# Session 30 call E, prepared and NOT run (the session's device time ran out): carry .c30 as prepE.sh makes it
# (a fresh machine, nothing built on it): bins.tar.xz with two CLIs built here ("q6k": MVQ_DIRECT_Q6K=1, the Q6_K
# direct loader; "q6koff": the tree's default, Q6_K on the cp.async ring) and test_cuda_matvec built with the knob
# on, for sm_90a; the Debian runtime libraries; the 7B's real header.
# Then: the 7B Q4_K_M file (its V, half its downs and the LM head are Q6_K); greedy ids q6k = q6koff; tg128 A/B
# q6k vs q6koff (5 groups); test_cuda_matvec on the GPU in full mode and under compute-sanitizer memcheck in its
# small mode (the loader uses no shared memory: no racecheck); a CUPTI trace of q6k on the 7B.
set -u
REAL=$OUT; export OUT=/tmp/oe; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/oe.tgz oe; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p .c30/root && for d in .c30/debs/*.deb; do dpkg-deb -x $d .c30/root; done
export LD_LIBRARY_PATH=$PWD/.c30/root/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
mkdir -p /tmp/b && xz -dc .c30/bins.tar.xz | tar -C /tmp/b -xf -
/tmp/b/q6k --version || exit 1
xz -dc .c30/7b.hdr.xz > /tmp/7b.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth.log 2>&1; el "file: $(ls -la /tmp/7b.gguf | awk '{print $5}')"
for v in q6k q6koff; do
  timeout 120 /tmp/b/$v run -m /tmp/7b.gguf --backend cuda -p "the quick brown fox" -n 32 --temperature 0 --show-ids > $OUT/ids-$v.txt 2>> $OUT/ids.log
  echo "rc=$?" >> $OUT/ids-$v.txt
done
cmp -s $OUT/ids-q6k.txt $OUT/ids-q6koff.txt && r=same || r=DIFFER
echo "greedy ids 7b: q6k vs q6koff $r ($(tail -1 $OUT/ids-q6k.txt))" | tee $OUT/ids-summary.txt
bench/cuda/gpu_pairs.sh -o $OUT/ab-q6k-vs-q6koff-7b-tg.tsv -T /tmp/b/q6k -B /tmp/b/q6koff -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-q6k.log 2>&1
python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-q6k-vs-q6koff-7b-tg.tsv q6k-vs-q6koff 7b | tee $OUT/ab-summary.txt; el ab
cp $OUT/ab-summary.txt $OUT/ids-summary.txt $REAL/
timeout 100 /tmp/b/test_cuda_matvec > $OUT/test_cuda_matvec.log 2>&1; el "test_cuda_matvec rc=$?: $(tail -1 $OUT/test_cuda_matvec.log)"
grep -E "FAIL" $OUT/test_cuda_matvec.log | head -5; cp $OUT/test_cuda_matvec.log $REAL/
TS_CUDA_TEST_SMALL=1 timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_matvec > $OUT/san-memcheck.log 2>&1
el "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|passed' $OUT/san-memcheck.log | tr '\n' ' ')"
CI=/usr/local/cuda/include; [ -f $CI/cupti.h ] || CI=/usr/local/cuda/extras/CUPTI/include
gcc -O2 -shared -fPIC -I$CI bench/cuda/ktrace.c -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -o /tmp/libktrace.so &&
for v in q6k; do CUDA_INJECTION64_PATH=/tmp/libktrace.so KTRACE_OUT=$OUT/kt-$v-7b.tsv /tmp/b/$v bench -m /tmp/7b.gguf --backend cuda -p 0 -n 64 -r 1 > $OUT/kt-$v.log 2>&1
  python3 bench/cuda/ktrace_summary.py $OUT/kt-$v-7b.tsv > $OUT/kt-$v-7b.sum 2>&1; sed -n 1,16p $OUT/kt-$v-7b.sum; xz -6 $OUT/kt-$v-7b.tsv; done
el end
