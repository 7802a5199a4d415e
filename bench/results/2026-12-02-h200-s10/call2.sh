#!/usr/bin/env bash
# session 10, call 2: gpu-check (sanitizers on attention, sample, matvec, moe) of the working tree (q8_quant norm: 16-byte
# row loads; attention: empty splits write only their max, the merges stop at the last live split; greedy sampling
# through the multi-block argmax; Q4_K/Q5_K scale selectors kept per lane); 65d186a built alongside; tg128 A/B on the
# 4 dense files, 2 swapped rounds; bench_matvec 7B int8 new/old; bench_moe; ncu kernel durations of 7B bench tg128 decode
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x "$f" "$DR"; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig LD_LIBRARY_PATH=$LIBD
M=/tmp/m; mkdir -p $M
( for n in qwen1.5b r1-7b; do xz -dc .hd/$n.header.gguf.xz > $M/$n.header.gguf && python3 bench/make_synthetic_dense.py $M/$n.header.gguf $M/$n.gguf > $M/$n.log 2>&1; done
  python3 bench/make_synthetic_dense.py $M/r1-7b.header.gguf $M/r1-7b-q4_0.gguf --retype Q4_0 > $M/q40.log 2>&1; echo "synth done $(el)s" ) &
( mkdir -p /tmp/old && tar xzf .old/base65d.tar.gz -C /tmp/old && cd /tmp/old && \
  nice cmake -S . -B /tmp/b-old -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DTS_CUDA_WERROR=OFF \
      "-DTS_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" -DCJSON_INCLUDE_DIR=$DR/usr/include -DCJSON_LIBRARY=$LIBD/libcjson.so >/dev/null \
    && nice cmake --build /tmp/b-old -j8 --target turbospark-cli bench_matvec bench_moe > /tmp/b-old.log 2>&1; echo "old build rc=$? at $(el)s" ) &
GPU_CHECK_BUDGET_S=420 GPU_CHECK_JOBS=16 GPU_CHECK_SAN_ONLY=test_cuda_attention,test_cuda_sample,test_cuda_matvec,test_cuda_moe GPU_CHECK_SKIP_BENCH=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | grep -v "PASS (greedy ids equal)\|PASS (greedy and seeded" | cut -c1-200 | head -40
grep -h "CHECK failed\|FAIL\|DIFFERS" $OUT/tests.log | head -10
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/sanitizer.log | sort | uniq -c
grep -E "mv_q_q8|moe_" $OUT/ptxas.txt > $OUT/ptxas-mvq.txt
rm -f $OUT/build.log $OUT/tests.log $OUT/bench.log
wait
B=build-cuda; SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -x /tmp/b-old/turbospark ] || tail -20 /tmp/b-old.log
R=$OUT/ab.txt
one() { echo "== $1 $(basename $3) r$4" >> $R; timeout 60 $2 bench -m $3 --backend cuda -p 0 -n 128 -r 3 >> $R 2>&1; }
for i in 1 2 3; do
  for f in $SMOL $M/qwen1.5b.gguf $M/r1-7b.gguf $M/r1-7b-q4_0.gguf; do
    [ $(el) -gt 450 ] && break 2
    if [ $((i % 2)) = 1 ]; then one new $B/turbospark $f $i; one old /tmp/b-old/turbospark $f $i; else one old /tmp/b-old/turbospark $f $i; one new $B/turbospark $f $i; fi
  done
  echo "round $i at $(el)s"
done
grep -E "^== |tg128" $R | awk '/^==/{h=$0; next} {n=split($0,a,"|"); print h " | " a[n-1]}' | cut -c1-120
for b in $B /tmp/b-old; do
  [ $(el) -lt 480 ] && BENCH_QUICK=1 BENCH_MATVEC_BATCH=0 BENCH_MATVEC_PATHS=int8 timeout 30 $b/bench_matvec 7b Q4_K Q6_K Q4_0 > $OUT/matvec-$(basename $b).txt 2>&1
  echo "== bench_matvec $b"; grep int8 $OUT/matvec-$(basename $b).txt | cut -c1-120
done
[ $(el) -lt 500 ] && BENCH_QUICK=1 timeout 20 $B/bench_moe > $OUT/moe-new.txt 2>&1
[ $(el) -lt 510 ] && BENCH_QUICK=1 timeout 20 /tmp/b-old/bench_moe > $OUT/moe-old.txt 2>&1
grep -E "int8" $OUT/moe-new.txt $OUT/moe-old.txt | cut -c1-140
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $(el) -lt 530 ]; then
  # bench's own setting (n_ctx 129: 2 attention splits): its warm-up's first tokens
  timeout $((585 - $(el))) $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 700 \
    $B/turbospark bench -m $M/r1-7b.gguf --backend cuda -p 0 -n 128 -r 1 > $OUT/ncu-7b-bench.csv 2>$OUT/ncu-7b.err
  echo "ncu rc=$? at $(el)s lines=$(wc -l < $OUT/ncu-7b-bench.csv)"; tail -2 $OUT/ncu-7b.err
  xz -9 $OUT/ncu-7b-bench.csv
fi
echo "done at $(el)s"
