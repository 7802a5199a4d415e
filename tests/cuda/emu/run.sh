#!/usr/bin/env bash
# Runs the CUDA tests on the CPU through the emulation in emu.h (no GPU
# needed): the kernel sources are copied with their <<<grid, block, ...>>>
# launches rewritten into emu::launch(&kernel, grid, block, ...) calls and
# compiled with g++ (C++20) and AddressSanitizer, linked with a CPU-only
# libturbospark for the references. Slow (a host thread per CUDA thread): the
# tests run in their small mode unless EMU_FULL=1.
#
#   tests/cuda/emu/run.sh [test_cuda_NAME ...]     (default: all but
#   test_cuda_backend, which needs a full CPU build and runs whole models,
#   and test_cuda_graph, whose device buffers are never freed (LSan): name
#   them to run them, the latter with ASAN_OPTIONS=detect_leaks=0)
# Env: EMU_BUILD (default build-emu in this checkout), EMU_JOBS (2), EMU_FULL=1.
set -eu
cd "$(dirname "$0")/../../.."
ROOT=$(pwd -P)
B=${EMU_BUILD:-$ROOT/build-emu}
JOBS=${EMU_JOBS:-2}
mkdir -p "$B/src"
CUDA_INC=$(dirname "$(command -v nvcc)")/../include

# configured once, built every time (incremental): a library older than
# backend.h would hand the tests an op table of another layout. A tree
# configured from another checkout (a shared EMU_BUILD; the default was once
# /tmp/ts-cuda-emu for every checkout) would build that checkout's library, or
# fail once it is gone: such a tree is configured anew. The same for "full".
fresh() { [ -f "$1/CMakeCache.txt" ] && grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$1/CMakeCache.txt" && return 0
          rm -rf "$1"; return 1; }
fresh "$B/lib" || cmake -S . -B "$B/lib" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF -DTS_CUDA_KERNELS_ONLY=ON >/dev/null
cmake --build "$B/lib" -j "$JOBS" --target turbospark >/dev/null

# rewrite launches: NAME<...>?<<<cfg>>>(args) -> emu::launch(&NAME<...>, cfg)(args)
for f in src/compute/cuda/*.cu; do
    python3 - "$f" "$B/src/$(basename "${f%.cu}").cpp" <<'EOF'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r"([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)<<<(.*?)>>>", r"emu::launch(&\1, \2)", s, flags=re.S)
open(sys.argv[2], "w").write(s)
EOF
done
FLAGS=(-std=c++20 -O1 -g -fsanitize=address -fno-omit-frame-pointer -include "$ROOT/tests/cuda/emu/emu.h"
       -I"$ROOT/src" -I"$ROOT/include" -I"$CUDA_INC" -I"$ROOT/tests/cuda/emu" -Wno-unknown-pragmas -pthread)
objs=()
for f in "$B"/src/*.cpp "$ROOT/tests/cuda/emu/emu_runtime.cpp"; do
    o="$B/$(basename "${f%.cpp}").o"
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find src/compute/cuda tests/cuda/emu -newer "$o" 2>/dev/null | head -1)" ]; then
        g++ "${FLAGS[@]}" -c "$f" -o "$o" &
        while [ "$(jobs -r | wc -l)" -ge "$JOBS" ]; do sleep 0.2; done
    fi
    objs+=("$o")
done
wait
gcc -O1 -g -fsanitize=address -D_GNU_SOURCE -I"$ROOT/src" -I"$ROOT/include" -c tests/cuda/cpu_ref.c -o "$B/cpu_ref.o"

tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=($(cd tests/cuda && ls test_cuda_*.cu | sed 's/\.cu$//' | grep -v -e test_cuda_decode -e test_cuda_graph -e test_cuda_backend))
rc=0
for t in "${tests[@]}"; do
    lib=("$B/lib/libturbospark.a")
    extra=()
    if [ "$t" = test_cuda_backend ]; then
        # the engine runs whole models: a full CPU-only library (no CUDA, so
        # the test makes the backend with ts_backend_cuda_new itself); real
        # models are far too slow emulated, so only the fixtures run
        fresh "$B/full" || cmake -S . -B "$B/full" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF >/dev/null
        cmake --build "$B/full" -j "$JOBS" --target turbospark >/dev/null
        lib=("$B/full/libturbospark.a" -lpcre2-8 -lcjson)
        extra=(-DTS_HAVE_CUDA=1 -DTS_FIXTURES="\"$ROOT/tests/fixtures\"")
        export TS_ALLOW_MISSING_MODELS=1 TS_MODEL_CACHE=/nonexistent ASAN_OPTIONS=allocator_may_return_null=1
    fi
    g++ "${FLAGS[@]}" "${extra[@]}" -x c++ "tests/cuda/$t.cu" -x none "${objs[@]}" "$B/cpu_ref.o" "${lib[@]}" -lm -o "$B/$t"
    echo "== $t (emulated$([ "${EMU_FULL:-0}" = 1 ] || echo ', small'))"
    if [ "${EMU_FULL:-0}" = 1 ]; then "$B/$t" || rc=1; else TS_CUDA_TEST_SMALL=1 "$B/$t" || rc=1; fi
done
exit $rc
