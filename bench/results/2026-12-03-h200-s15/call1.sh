#!/bin/bash
# Session 15 call 1: gpu-check of 13bebad (sanitizers on attention: the Q8_K tickets' first GPU run);
# A/B against 3098ba2 (carried): 7B and 1.5B tg128, 30B-A3B resident tg128; ncu of a 7B token.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${BUDGET:-540} - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
( for f in 7b:.hd/7b.hdr: 1.5b:.hd/1.5b.hdr:; do IFS=: read n h a <<< "$f";
    nice -n 19 python3 bench/make_synthetic_dense.py $h /tmp/$n.gguf $a > $OUT/synth-$n.log 2>&1; done; touch /tmp/dense.done
  nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 6 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
GPU_CHECK_SAN_ONLY=test_cuda_attention GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=240 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -14 $OUT/summary.txt; grep -E 'FAIL|smollm2|overall' $OUT/summary.txt | head
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
xz -dc .pb/ts-base.xz > /tmp/tsbase; chmod +x /tmp/tsbase
T=build-cuda/turbospark
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
ab() { # name k p n file [args]
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$1.tsv -T $T -B /tmp/tsbase -k $2 -p $3 -n $4 -r 3 ${6:+-a "$6"} $5 > $OUT/ab-$1.log 2>&1; el "ab $1"; sum $OUT/ab-$1.tsv; }
while [ ! -f /tmp/dense.done ]; do sleep 2; [ $(left) -lt 100 ] && break; done
el "dense files"; tail -1 $OUT/synth-7b.log
ab 7b-tg 3 0 128 /tmp/7b.gguf
[ $(left) -gt 60 ] && ab 1.5b-tg 3 0 128 /tmp/1.5b.gguf
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ $(left) -gt 40 ] && { timeout $(( $(left) - 5 )) $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 600 \
    $T bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 1 > $OUT/ncu-7b-tg.csv 2>$OUT/ncu-7b-tg.err; el "ncu rc=$?"; xz -9 $OUT/ncu-7b-tg.csv; }
wait; cat $OUT/msm.log | tail -2; el "moe file"
[ $(left) -gt 70 ] && [ -f /tmp/moe30b.gguf ] && ab moe30b-tg 2 0 128 /tmp/moe30b.gguf "--expert-residency resident"
el end
