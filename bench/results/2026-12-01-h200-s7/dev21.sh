#!/usr/bin/env bash
# session 7, call 2: quick gpu-check (tensor-core MoE prefill, head-parallel attention merge); baseline 90b3c28 built
# alongside; tg A/B on SmolLM2 + 1.5B; 30B-A3B synthetic: pp512/tg128 resident and streamed-25%-host, new vs baseline
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x "$f" "$DR"; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig LD_LIBRARY_PATH=$LIBD
M=/tmp/m; mkdir -p $M
( xz -dc .hd/qwen1.5b.header.gguf.xz > $M/qwen1.5b.header.gguf && python3 bench/make_synthetic_dense.py $M/qwen1.5b.header.gguf $M/qwen1.5b.gguf > $M/q.log 2>&1; echo "synth 1.5b $(el)s" ) &
( cp -r tests bench fuzz scripts .old/base/ && cd .old/base && nice cmake -S . -B /tmp/b-old -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DTS_CUDA_WERROR=OFF \
      "-DTS_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" -DCJSON_INCLUDE_DIR=$DR/usr/include -DCJSON_LIBRARY=$LIBD/libcjson.so >/dev/null \
    && nice cmake --build /tmp/b-old -j6 --target turbospark-cli > /tmp/b-old.log 2>&1; echo "baseline rc=$? at $(el)s" ) &
GPU_CHECK_BUDGET_S=300 GPU_CHECK_JOBS=16 GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | grep -v "PASS (greedy ids equal)\|PASS (greedy and seeded" | cut -c1-200 | head -30
grep -h "CHECK failed\|FAIL\|DIFFER" $OUT/tests.log | head -10
grep -h "moe_gemm_items Q4_K+Q4_K 2048x768\|regrouped" $OUT/tests.log | head -4
grep -h -A2 "moe_gemm" $OUT/ptxas.txt | grep -E "registers|spill" | sort | uniq -c | head -6
B=build-cuda
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c $B/libturbospark.a -lpthread -lm -o /tmp/msm && /tmp/msm /tmp/moe30b.gguf --threads 16 --no-sync >/dev/null 2>&1 || echo "moe synth failed"
echo "moe synth at $(el)s"; wait
SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
R=$OUT/ab.txt
one() { local tag=$1 b=$2 f=$3; shift 3; echo "== $tag $(basename $f) $*" >> $R; timeout 100 $b bench -m $f --backend cuda "$@" >> $R 2>&1; }
for i in 1 2; do
  for f in $SMOL $M/qwen1.5b.gguf; do
    if [ $i = 1 ]; then one new $B/turbospark $f -p 0 -n 128 -r 3; one old /tmp/b-old/turbospark $f -p 0 -n 128 -r 3
    else one old /tmp/b-old/turbospark $f -p 0 -n 128 -r 3; one new $B/turbospark $f -p 0 -n 128 -r 3; fi
  done
done
echo "dense A/B at $(el)s"
one new $B/turbospark /tmp/moe30b.gguf --expert-residency resident -p 512 -n 128 -r 3
one old /tmp/b-old/turbospark /tmp/moe30b.gguf --expert-residency resident -p 512 -n 128 -r 3
one new $B/turbospark /tmp/moe30b.gguf --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host -p 512 -n 128 -r 2
one old /tmp/b-old/turbospark /tmp/moe30b.gguf --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host -p 512 -n 128 -r 2
one new $B/turbospark /tmp/moe30b.gguf --expert-residency resident -p 512 -n 0 -r 3
echo "moe at $(el)s"
grep -E "^== |pp512|tg128|bench: (memory|expert)|hit" $R | cut -c1-150
echo "done at $(el)s"
