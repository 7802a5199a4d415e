#!/bin/bash
# Session 17 call 1 (prepared in session 16): gpu-check of HEAD (sanitizers on test_cuda_moe and test_cuda_matvec:
# b3ee283 and 0a7c807 have run only in the emulation and as CLI id checks); llama.cpp built here; 5 rotating groups
# on the 30B-A3B resident (pp512 + tg128) of HEAD, 1e79e0d and llama.cpp, to settle the 1.5x in one call; ncu.
# Carry: .deps .pb (msm, ts-route.xz, llama-src.tar.xz) .old
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${BUDGET:-560} - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
mkdir -p /tmp/peer && tar -xJf .pb/llama-src.tar.xz -C /tmp/peer
( cmake -S /tmp/peer/llama.cpp -B /tmp/lb -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release > $OUT/llama-build.log 2>&1 &&
  nice -n 5 cmake --build /tmp/lb -j16 --target llama-bench >> $OUT/llama-build.log 2>&1; echo "llama build rc=$?" >> $OUT/llama-build.log ) &
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 4 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
xz -dc .pb/ts-route.xz > /tmp/tsroute; chmod +x /tmp/tsroute
GPU_CHECK_SAN_ONLY=test_cuda_moe,test_cuda_matvec,test_cuda_policy GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
rc=$?; el "gpu-check rc=$rc"; head -14 $OUT/summary.txt; grep -E 'FAIL|overall' $OUT/summary.txt | head
[ -x build-cuda/turbospark ] || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
T=build-cuda/turbospark; M=/tmp/moe30b.gguf; R="--expert-residency resident"
BENCH_QUICK=1 timeout 30 build-cuda/bench_policy > $OUT/bench_policy.txt 2>&1; el "bench_policy rc=$?"; cat $OUT/bench_policy.txt
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; done; tail -1 $OUT/msm.log
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 60 $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 1800 \
    $T bench -m $M --backend cuda $R -p 0 -n 8 -r 1 > $OUT/ncu-moe30b-tg.csv 2>$OUT/ncu-moe30b-tg.err; el "ncu rc=$?"; xz -9 $OUT/ncu-moe30b-tg.csv
while ! grep -q "llama build rc" $OUT/llama-build.log; do sleep 3; [ $(left) -lt 150 ] && break; done
tail -1 $OUT/llama-build.log; el "llama built"
L=/tmp/lb/bin/llama-bench; $L --version 2>&1 | head -2
if [ -x $L ] && [ $(left) -gt 110 ]; then
  bench/cuda/gpu_pairs.sh -o $OUT/pairs-moe30b.tsv -T $T -B /tmp/tsroute -L $L -k 5 -p 512 -n 128 -r 3 -a "$R" $M > $OUT/pairs-moe30b.log 2>&1; el "pairs"; sum $OUT/pairs-moe30b.tsv
fi
el end
