#!/bin/bash
# Session 14 call 2: gpu-check (sanitizers on attention and gemm) of 3098ba2; A/B against d686ffa (carried);
# bench_gemm 7B; llama.cpp pairs on four files; ncu of the new decode and prefill.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 575 - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
mkdir -p /tmp/peer && tar -xJf .pb/llama-src.tar.xz -C /tmp/peer
( cmake -S /tmp/peer/llama.cpp -B /tmp/lb -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release > $OUT/llama-build.log 2>&1 &&
  nice -n 5 cmake --build /tmp/lb -j16 --target llama-bench >> $OUT/llama-build.log 2>&1; echo "llama build rc=$?" >> $OUT/llama-build.log ) &
( for f in 7b:.hd/7b.hdr: 7bq40:.hd/7b.hdr:--retype\ Q4_0 1.5b:.hd/1.5b.hdr:; do IFS=: read n h a <<< "$f";
    nice -n 19 python3 bench/make_synthetic_dense.py $h /tmp/$n.gguf $a > $OUT/synth-$n.log 2>&1; done ) &
GPU_CHECK_SAN_ONLY=test_cuda_attention,test_cuda_gemm GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -14 $OUT/summary.txt; grep -E 'FAIL|smollm2|overall' $OUT/summary.txt | head
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
xz -dc .pb/ts-base.xz > /tmp/tsbase; chmod +x /tmp/tsbase
T=build-cuda/turbospark; S=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
ab() { # name k p n file
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$1.tsv -T $T -B /tmp/tsbase -k $2 -p $3 -n $4 -r 3 $5 > $OUT/ab-$1.log 2>&1; el "ab $1"; sum $OUT/ab-$1.tsv; }
ab smollm2-tg 3 0 128 $S
wait; tail -1 $OUT/llama-build.log; el "builds and files"
ab 7b-tg 3 0 128 /tmp/7b.gguf
ab 7bq40-pp 2 512 0 /tmp/7bq40.gguf
BENCH_QUICK=1 timeout 40 build-cuda/bench_gemm 7b > $OUT/bench_gemm-7b.txt 2>&1; grep -E 'down|gate' $OUT/bench_gemm-7b.txt | grep -E 'Q4_K|Q4_0' | cut -c1-150
L=/tmp/lb/bin/llama-bench; $L --version 2>&1 | head -1
for f in smollm2:$S:5 7b:/tmp/7b.gguf:3 7bq40:/tmp/7bq40.gguf:3 1.5b:/tmp/1.5b.gguf:3; do
    IFS=: read n p k <<< "$f"
    [ $(left) -gt 60 ] || { echo "$n: no time"; continue; }
    bench/cuda/gpu_pairs.sh -o $OUT/pairs-$n.tsv -T $T -L $L -k $k -p 512 -n 128 -r 3 $p > $OUT/pairs-$n.log 2>&1
    el $n; sum $OUT/pairs-$n.tsv
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
prof() { local n=$1 c=$2; shift 2; [ $(left) -gt 25 ] || return
  timeout $(( $(left) - 5 )) $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count $c \
    $T bench "$@" > $OUT/ncu-$n.csv 2>$OUT/ncu-$n.err; el "ncu $n rc=$?"; xz -9 $OUT/ncu-$n.csv; }
prof smollm2-tg 600 -m $S --backend cuda -p 0 -n 128 -r 1
prof 7b-tg 600 -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 1
prof 7bq40-pp512 1200 -m /tmp/7bq40.gguf --backend cuda -p 512 -n 0 -r 1
el end
# detailed metrics of the 7B's small and large int8 matvecs (first decode token of bench's warm-up)
if [ $(left) -gt 40 ]; then
  timeout $(( $(left) - 3 )) $NCU --set full --cache-control none --clock-control none -k regex:mv_q_q8 --launch-skip 30 --launch-count 6 \
    $T bench -m /tmp/7b.gguf --backend cuda -p 0 -n 4 -r 1 > $OUT/ncu-7b-matvec-full.txt 2>&1; el "ncu full rc=$?"
  grep -E 'mv_q_q8|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Stall|Warp Cycles Per Issued' $OUT/ncu-7b-matvec-full.txt | head -80
fi
