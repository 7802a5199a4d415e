#!/usr/bin/env bash
# session 7, call 1: quick gpu-check (no sanitizers) of the tree (coalesced dequant, attention+quantize fusion, MVQ_R1_BIG);
# baseline 90b3c28 CLI built alongside; A/B pp512/tg128 on 4 dense files, 2 alternating rounds; bench_gemm 7B rows
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*\(avx512[a-z_]*\).*/has avx512/' | head -3
lscpu | grep -o -E "avx512_vnni|avx512f|avx512_bf16|amx_int8" | sort -u | tr '\n' ' '; echo
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x "$f" "$DR"; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig LD_LIBRARY_PATH=$LIBD
M=/tmp/m; mkdir -p $M
( for n in qwen1.5b r1-7b; do xz -dc .hd/$n.header.gguf.xz > $M/$n.header.gguf && python3 bench/make_synthetic_dense.py $M/$n.header.gguf $M/$n.gguf > $M/$n.log 2>&1; done
  python3 bench/make_synthetic_dense.py $M/r1-7b.header.gguf $M/r1-7b-q4_0.gguf --retype Q4_0 > $M/q40.log 2>&1; echo "synth done $(el)s" ) &
( cp -r tests bench fuzz scripts .old/base/ && cd .old/base && nice cmake -S . -B /tmp/b-old -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DTS_CUDA_WERROR=OFF \
      "-DTS_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" -DCJSON_INCLUDE_DIR=$DR/usr/include -DCJSON_LIBRARY=$LIBD/libcjson.so >/dev/null \
    && nice cmake --build /tmp/b-old -j6 --target turbospark-cli > /tmp/b-old.log 2>&1; echo "baseline rc=$? at $(el)s" ) &
GPU_CHECK_BUDGET_S=300 GPU_CHECK_JOBS=16 GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | grep -v "PASS (greedy ids equal)" | cut -c1-200 | head -40
grep -h "CHECK failed\|FAIL\|DIFFERS" $OUT/tests.log | head -10
grep -h "q8 same\|q8 DIFF" $OUT/tests.log | head -4
rm -f $OUT/build.log
wait
B=build-cuda; SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
ls -la /tmp/b-old/turbospark $B/turbospark $M/*.gguf $SMOL 2>&1 | cut -c1-150
[ -x /tmp/b-old/turbospark ] || tail -20 /tmp/b-old.log
R=$OUT/ab.txt
one() { echo "== $1 $(basename $3) r$4" >> $R; timeout 90 $2 bench -m $3 --backend cuda -p 512 -n 128 -r 3 >> $R 2>&1; }
for i in 1 2; do
  for f in $SMOL $M/qwen1.5b.gguf $M/r1-7b.gguf $M/r1-7b-q4_0.gguf; do
    if [ $i = 1 ]; then one new $B/turbospark $f $i; one old /tmp/b-old/turbospark $f $i; else one old /tmp/b-old/turbospark $f $i; one new $B/turbospark $f $i; fi
  done
  echo "round $i at $(el)s"
done
grep -E "^== |pp512|tg128" $R | cut -c1-130
[ -x $B/bench_gemm ] && timeout 60 $B/bench_gemm 2>&1 | grep -E "qwen2-7b|smollm2-135m.gate" | grep -E "dequant|t=512" > $OUT/gemm.txt; cat $OUT/gemm.txt | cut -c1-120
echo "done at $(el)s"
