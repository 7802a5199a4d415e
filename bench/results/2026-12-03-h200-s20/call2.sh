#!/bin/bash
# Session 20 call 2: gpu-check (memcheck/racecheck on test_cuda_matvec) of the reverted rows rule (81c3191 + the
# bench's loader switch); bench_matvec 7B Q6_K/Q4_K, register loaders against the cp.async ring, alternating; tg128
# A/B of a build with the ring for Q6_K launches (MVQ_ASYNC=3, built on the dev box, carried) against this tree.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 570 - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
( for f in 7b:/tmp/7b.hdr 1.5b:/tmp/1.5b.hdr; do IFS=: read n h <<< "$f"; xz -dc .pb/hd/$n.hdr.xz > $h;
    nice -n 19 python3 bench/make_synthetic_dense.py $h /tmp/$n.gguf > $OUT/synth-$n.log 2>&1; echo "rc=$?" >> $OUT/synth-$n.log; done ) &
GPU_CHECK_SAN_ONLY=test_cuda_matvec GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -16 $OUT/summary.txt; grep -E 'FAIL|overall' $OUT/summary.txt | head
grep -E "rows per group rule|18944x3584" $OUT/tests.log | head -4
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
xz -dc .pb/ts-v3.xz > /tmp/tsv3; chmod +x /tmp/tsv3
for r in 1 2; do for ld in 0 1; do
  BENCH_QUICK=1 BENCH_MATVEC_PATHS=int8 BENCH_MATVEC_BATCH=0 BENCH_MATVEC_LOADER=$ld timeout 60 build-cuda/bench_matvec qwen2-7b,smollm2 Q6_K Q4_K > $OUT/bench_matvec-ld$ld-$r.txt 2>&1
done; done; el "bench_matvec"
for ld in 0 1; do echo "== loader $ld"; grep -h RESULT $OUT/bench_matvec-ld$ld-*.txt | grep -v copy | awk '{print $3, $4, $10}' | sort | awk '{k=$1" "$2; a[k]=a[k]" "$3} END{for(k in a) print k": "a[k]}' | sort; done
T=build-cuda/turbospark; S=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
ab() { # name k p n file
  [ $(left) -gt 40 ] || { echo "$1: no time"; return; }
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$1.tsv -T /tmp/tsv3 -B $T -k $2 -p $3 -n $4 -r 3 $5 > $OUT/ab-$1.log 2>&1; el "ab $1"; sum $OUT/ab-$1.tsv; }
wait; tail -n1 $OUT/synth-7b.log; el "files"
ab 7b-tg 3 0 128 /tmp/7b.gguf
ab smollm2-tg 3 0 128 $S
ab 1.5b-tg 2 0 128 /tmp/1.5b.gguf
ab 7b-tg2 2 0 128 /tmp/7b.gguf
el end
