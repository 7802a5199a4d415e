#!/bin/bash
# Session 37, on the device machine's host CPU (no GPU used): the AMX gather's bench_gemm and test_quant there.
# Run from the repository root with .devcarry/base/ holding src/tensor/{gemm_avx512.c,gemm.c,quant.h} of 257804a
# (git show 257804a:PATH), carried. Builds NEW (this tree) and BASE (this tree with those three files), CPU only;
# then test_quant of NEW, and bench_gemm 512 on one pinned core: BASE amx, NEW amx, NEW avx512, 3 rotating rounds;
# then amx_threshold.c against NEW with the threshold at 16. Output under $OUT.
set -u
J=$(nproc)
{ lscpu; uname -r; } > $OUT/lscpu.txt
cmake -S . -B /tmp/bn -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF > /dev/null && cmake --build /tmp/bn -j$J --target test_quant cpubench_bench_gemm turbospark > $OUT/build-new.log 2>&1 || { echo "NEW build failed"; tail -20 $OUT/build-new.log; exit 1; }
rm -rf /tmp/sb && mkdir /tmp/sb && for d in *; do case $d in build*) ;; *) cp -r "$d" /tmp/sb/ ;; esac; done
cp .devcarry/base/gemm_avx512.c .devcarry/base/gemm.c .devcarry/base/quant.h /tmp/sb/src/tensor/
cmake -S /tmp/sb -B /tmp/bb -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF > /dev/null && cmake --build /tmp/bb -j$J --target cpubench_bench_gemm > $OUT/build-base.log 2>&1 || { echo "BASE build failed"; tail -20 $OUT/build-base.log; exit 1; }
/tmp/bn/test_quant > $OUT/test_quant.txt 2>&1; echo "test_quant rc=$? $(tail -1 $OUT/test_quant.txt)"
grep -E "^kernels|amx" $OUT/test_quant.txt
for r in 1 2 3; do for v in bb:amx bn:amx bn:avx512; do
  echo "== ${v%%:*} ${v#*:} r$r"; TS_FORCE_ISA=${v#*:} taskset -c 3 /tmp/${v%%:*}/bench-cpu/bench_gemm 512
done; done > $OUT/gemm.txt 2>&1
sed -i 's/^#define TS_GP_AMX_MIN_COLS 48/#define TS_GP_AMX_MIN_COLS 16/; s/^#define TS_GP_AMX_MIN_COLS_OFF 32/#define TS_GP_AMX_MIN_COLS_OFF 16/' src/tensor/quant.h
cmake --build /tmp/bn -j$J --target turbospark > /dev/null 2>&1
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/results/2026-12-06-xeon-s37/amx_threshold.c /tmp/bn/libturbospark.a -lm -lpthread -o /tmp/amxt && taskset -c 3 /tmp/amxt > $OUT/amx-threshold.txt 2>&1
git checkout src/tensor/quant.h 2>/dev/null || sed -i 's/^#define TS_GP_AMX_MIN_COLS 16/#define TS_GP_AMX_MIN_COLS 48/; s/^#define TS_GP_AMX_MIN_COLS_OFF 16/#define TS_GP_AMX_MIN_COLS_OFF 32/' src/tensor/quant.h
grep -E "==|7B ffn_down|1.5B ffn_down" $OUT/gemm.txt; cat $OUT/amx-threshold.txt
