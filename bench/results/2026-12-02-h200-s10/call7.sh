#!/usr/bin/env bash
# session 10, call 6 (last, ~270 s of device time left): the working tree (q8_quant loads its element first; the fused
# attention merge preloads its first splits' outputs): build, the attention/matvec/backend/graph tests, memcheck on
# test_cuda_attention and test_cuda_matvec, tg128 on SmolLM2 and the 7B Q4_K_M (3 runs each)
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x "$f" "$DR"; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig
M=/tmp/m; mkdir -p $M; SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
( xz -dc .hd/r1-7b.header.gguf.xz > $M/r1-7b.header.gguf && python3 bench/make_synthetic_dense.py $M/r1-7b.header.gguf $M/r1-7b.gguf > $M/s.log 2>&1
  mkdir -p /tmp/gpu-check-models; python3 bench/make_synthetic_dense.py .deps/SmolLM2-135M-Instruct.Q4_1.header.gguf $SMOL > /dev/null 2>&1; echo "synth done $(el)s" ) &
GPU_CHECK_JOBS=16 GPU_CHECK_ONLY_BUILD=1 scripts/gpu-check.sh > $OUT/build.txt 2>&1; echo "build rc=$? at $(el)s"; tail -2 $OUT/build.txt
B=build-cuda; export LD_LIBRARY_PATH=$LIBD:${LD_LIBRARY_PATH:-}
wait
export TS_MODEL_CACHE=/tmp/gpu-check-models
for t in test_cuda_attention test_cuda_matvec test_cuda_backend test_cuda_graph test_cuda_sample; do
  timeout 60 $B/$t > $OUT/$t.log 2>&1; echo "$t rc=$? $(tail -1 $OUT/$t.log | cut -c1-100) at $(el)s"
done
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for t in test_cuda_attention test_cuda_matvec; do
  [ $(el) -gt 215 ] && break
  timeout 40 $SAN --tool memcheck $B/$t > $OUT/san-$t.log 2>&1; echo "memcheck $t rc=$? $(grep 'ERROR SUMMARY' $OUT/san-$t.log) at $(el)s"
done
for f in $SMOL $M/r1-7b.gguf; do
  [ $(el) -gt 245 ] && break
  timeout 25 $B/turbospark bench -m $f --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128 | cut -c1-150
done
echo "done at $(el)s"
