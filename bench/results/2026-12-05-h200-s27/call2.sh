#!/bin/bash
# Session 27 call 2 (the machine of call 1, warm: its synthetic files and build-cuda are there). tg128 of the
# tree's engine ("turbospark") against main's (489db5e's, the same CUDA code as 6b950da: "base"), 5 alternating
# groups on the 7B Q4_K_M, 3 on the 1.5B and SmolLM2; a CUPTI trace of each on the 7B (the replay span and
# what lies between replays); greedy ids cuda = cpu on the 7B; the device copy ceiling (bench_matvec) around a
# quiet 7B bench run.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ls /tmp/b /tmp/*.gguf || exit 1
ab() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$tag-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$tag.log 2>&1
  el "ab $tag rc=$?"; cat $OUT/ab-$tag-tg.tsv; }
ab 7b 5 /tmp/7b.gguf
tr() { local tag=$1 bin=$2
  LD_LIBRARY_PATH=/tmp/b:$LD_LIBRARY_PATH KTRACE_MEMCPY=1 CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv \
    timeout 150 $bin bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 1 > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" > $OUT/$tag-summary.md 2>&1
  head -4 $OUT/$tag-summary.md; tail -4 $OUT/$tag-summary.md; xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; }
tr trace-7b-new /tmp/b/ts
tr trace-7b-base /tmp/b/ts-b0
ab 1.5b 3 /tmp/1.5b.gguf
ab smol 3 /tmp/smol.gguf
a=$(timeout 100 /tmp/b/ts run -m /tmp/7b.gguf --backend cpu -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
b=$(timeout 60 /tmp/b/ts run -m /tmp/7b.gguf --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
[ -n "$a" ] && [ "$a" = "$b" ] && echo "ids 7b: equal" || { echo "ids 7b: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
for i in 1 2; do
  BENCH_QUICK=0 build-cuda/bench_matvec none 2>&1 | grep -E 'copy' | head -2 | tee -a $OUT/roofline.txt
  [ $i = 1 ] && /tmp/b/ts bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 5 2>&1 | grep -E 'tg128|backend' | tee -a $OUT/roofline.txt
done
el end
