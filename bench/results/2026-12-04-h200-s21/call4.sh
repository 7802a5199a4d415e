#!/bin/bash
# Session 21 call 4: a matmul's later weight types on a side stream (ts_cuda_matvec_q8_fork: the 7B's Q6_K v
# beside its Q4_K q/k as parallel branches of the decode graph), built here ("turbospark") against 4f5af02
# ("base"): tg128 A/B, 5 alternating groups on the 7B, greedy text of both, and a CUPTI trace.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/*-summary.md $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p /tmp/deps /tmp/b; for f in .pb/deps/*.deb; do dpkg -x $f /tmp/deps; done
xz -dc .pb/ts-early.xz > /tmp/b/base; xz -dc .pb/ts-fork.xz > /tmp/b/turbospark; chmod +x /tmp/b/base /tmp/b/turbospark
cp .pb/libktrace.so /tmp/b/; xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1
el "file"
trace() { local tag=$1 bin=$2 m=$3; shift 3
  CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv timeout 150 $bin bench -m $m --backend cuda -p 0 -n 128 -r 1 "$@" > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" --positions $OUT/$tag-pos.tsv > $OUT/$tag-summary.md 2>&1
  echo "summary rc=$?"; head -4 $OUT/$tag-summary.md
  xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; rm -f /tmp/$tag.tsv; }
trace 7b-fork /tmp/b/turbospark /tmp/7b.gguf
# the same file's greedy ids on both builds (the kernels and their sums are the same)
for b in base turbospark; do timeout 60 /tmp/b/$b run -m /tmp/7b.gguf --backend cuda -n 24 --temp 0 -p "The capital of France is" > $OUT/ids-$b.txt 2> $OUT/ids-$b.err; done
cmp $OUT/ids-base.txt $OUT/ids-turbospark.txt && echo "run output identical" || { echo "run outputs differ"; diff $OUT/ids-base.txt $OUT/ids-turbospark.txt | head; }
bench/cuda/gpu_pairs.sh -o $OUT/ab-7b-tg.tsv -T /tmp/b/turbospark -B /tmp/b/base -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $OUT/ab-7b-tg.tsv
el end
