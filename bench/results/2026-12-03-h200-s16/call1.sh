#!/bin/bash
# Session 16 call 1: gpu-check of the fold tree (fast route kernel + routing folded into the experts' quantization;
# sanitizers on test_cuda_moe); A/B on the 30B-A3B resident tg128: fold vs d2a71e5, route-only (1e79e0d) vs d2a71e5;
# ncu of a 30B-A3B token (fold).
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 4 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
xz -dc .pb/ts-d2a.xz > /tmp/tsbase; xz -dc .pb/ts-route.xz > /tmp/tsroute; chmod +x /tmp/tsbase /tmp/tsroute
GPU_CHECK_SAN_ONLY=test_cuda_moe GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=280 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -14 $OUT/summary.txt; grep -E 'FAIL|overall' $OUT/summary.txt | head
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
T=build-cuda/turbospark; M=/tmp/moe30b.gguf; R="--expert-residency resident"
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; done; tail -1 $OUT/msm.log
bench/cuda/gpu_pairs.sh -o $OUT/ab-fold-vs-base.tsv -T $T -B /tmp/tsbase -k 3 -p 0 -n 128 -r 3 -a "$R" $M > $OUT/ab1.log 2>&1; el "ab1"; sum $OUT/ab-fold-vs-base.tsv
bench/cuda/gpu_pairs.sh -o $OUT/ab-route-vs-base.tsv -T /tmp/tsroute -B /tmp/tsbase -k 3 -p 0 -n 128 -r 3 -a "$R" $M > $OUT/ab2.log 2>&1; el "ab2"; sum $OUT/ab-route-vs-base.tsv
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 60 $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 1800 \
    $T bench -m $M --backend cuda $R -p 0 -n 8 -r 1 > $OUT/ncu-moe30b-tg.csv 2>$OUT/ncu-moe30b-tg.err; el "ncu rc=$?"; xz -9 $OUT/ncu-moe30b-tg.csv
el end
