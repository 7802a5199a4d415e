#!/bin/bash
# Session 20 call 1: gpu-check (racecheck/memcheck on test_cuda_matvec) of the rows-per-group rule; bench_matvec 7B
# int8 rows, the old rule (BENCH_MATVEC_ROWS=0) against the new, alternating; tg128 A/B against 3463bf9 (built on the
# dev box, carried) on the 7B Q4_K_M, SmolLM2 and the 1.5B, alternating groups.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 570 - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
lscpu | grep -E "Model name" > $OUT/lscpu.txt
( for f in 7b:/tmp/7b.hdr 1.5b:/tmp/1.5b.hdr; do IFS=: read n h <<< "$f"; xz -dc .pb/hd/$n.hdr.xz > $h;
    nice -n 19 python3 bench/make_synthetic_dense.py $h /tmp/$n.gguf > $OUT/synth-$n.log 2>&1; echo "rc=$?" >> $OUT/synth-$n.log; done ) &
GPU_CHECK_SAN_ONLY=test_cuda_matvec GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -16 $OUT/summary.txt; grep -E 'FAIL|overall' $OUT/summary.txt | head
grep -E "rows per group rule|18944x3584" $OUT/tests.log | head -12
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
xz -dc .pb/ts-base.xz > /tmp/tsbase; chmod +x /tmp/tsbase
for r in 1 2; do for mode in old new; do
  R=; [ $mode = old ] && R=0
  BENCH_QUICK=1 BENCH_MATVEC_PATHS=int8 BENCH_MATVEC_BATCH=0 BENCH_MATVEC_ROWS=$R timeout 60 build-cuda/bench_matvec qwen2-7b Q4_K Q6_K > $OUT/bench_matvec-$mode-$r.txt 2>&1
done; done; el "bench_matvec"
grep -h RESULT $OUT/bench_matvec-*-1.txt | cut -c1-160 | head -24
T=build-cuda/turbospark; S=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
ab() { # name k p n file
  [ $(left) -gt 40 ] || { echo "$1: no time"; return; }
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$1.tsv -T $T -B /tmp/tsbase -k $2 -p $3 -n $4 -r 3 $5 > $OUT/ab-$1.log 2>&1; el "ab $1"; sum $OUT/ab-$1.tsv; }
wait; tail -1 $OUT/synth-7b.log $OUT/synth-1.5b.log; el "files"
ab 7b-tg 3 0 128 /tmp/7b.gguf
ab smollm2-tg 3 0 128 $S
ab 1.5b-tg 2 0 128 /tmp/1.5b.gguf
ab 7b-tg2 2 0 128 /tmp/7b.gguf
el end
