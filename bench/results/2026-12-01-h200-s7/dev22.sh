#!/usr/bin/env bash
# session 7, call 4: the full gpu-check (compute-sanitizer memcheck + racecheck) of the final CUDA tree; the 30B-A3B
# synthetic made and checked against the CPU backend (TS_CUDA_TEST_MOE_FILE: the tensor-core prefill on real shapes);
# llama-bench part 1 stashed for call 5
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/stash && cp .pa/llama-bench.xz.part1 /tmp/stash/
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x "$f" "$DR"; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig LD_LIBRARY_PATH=$LIBD
B=build-cuda
( while [ ! -f $B/libturbospark.a ] || pgrep -f "cmake --build" >/dev/null && [ $(el) -lt 200 ]; do sleep 3; done
  gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c $B/libturbospark.a -lpthread -lm -o /tmp/msm && /tmp/msm /tmp/moe30b.gguf --threads 8 --no-sync >/dev/null 2>&1 || echo "moe synth failed"; echo "moe synth at $(el)s" ) &
GPU_CHECK_BUDGET_S=430 GPU_CHECK_JOBS=16 GPU_CHECK_SKIP_BENCH=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | grep -v "PASS (greedy ids equal)\|PASS (greedy and seeded" | cut -c1-200 | head -40
grep -h "CHECK failed\|DIFFER" $OUT/tests.log | head -10
grep -h "ERROR SUMMARY" $OUT/sanitizer.log | sort | uniq -c
wait
ls -la /tmp/moe30b.gguf /tmp/stash
L=$((560 - $(el)))
if [ $L -gt 40 ]; then
  TS_CUDA_TEST_MOE_FILE=/tmp/moe30b.gguf timeout $L $B/test_cuda_backend > $OUT/moefile.txt 2>&1; echo "30B vs cpu rc=$? at $(el)s"
  grep -E "moe30b|KL|passed|failed|CHECK" $OUT/moefile.txt | cut -c1-200 | tail -15
fi
rm -f $OUT/build.log
echo "done at $(el)s"
