#!/bin/bash
# Session 29 call 1 (a fresh machine): the tree's CUDA build (scripts/gpu-check.sh, build only), the synthetic
# files (7B Q4_K_M, the same 7B retyped to Q4_0, the 1.5B and SmolLM2, from the real headers in .pb), llama.cpp
# b11434's llama-bench built out of the tree (.old: the peer's source and build script, never committed), the
# int8 matvec's knob variants (bench/cuda/knob_build.sh: matvec_q8.cu recompiled with one -D, relinked), then
# the side by side on every file (bench/cuda/gpu_pairs.sh). Logs are packed into one file ($OUT returns 8).
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o1.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)'
git log --oneline -1
for h in 7b 1.5b smol; do xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; done
( python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth.log 2>&1
  python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 >> $OUT/synth.log 2>&1
  for h in 1.5b smol; do python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf >> $OUT/synth.log 2>&1; done
  touch /tmp/synth.done ) &
SYN=$!
( PEER_JOBS=8 nice -n 5 .old/peer.sh > $OUT/peer.log 2>&1; echo "peer rc=$?" >> $OUT/peer.log ) &
PEER=$!
GPU_CHECK_ONLY_BUILD=1 GPU_CHECK_JOBS=16 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "build rc=$?"; grep -E "^build:|FAILED" $OUT/gpucheck.log
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ls -la build-cuda/turbospark || exit 1
cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON build-cuda > /dev/null
mkdir -p /tmp/b
V="ctl: pf2:-DMVQ_PREFETCH=2048 sw16:-DMVQ_SM_WARPS=16 ldg2:-DMVQ_LDG=2 ldg3:-DMVQ_LDG=3 cpa1:-DMVQ_CPA=1 ef:-DMVQ_LDG=3@-DMVQ_CPA=2 deep12:-DMVQ_DEEP_BYTES=12288 deepq4:-DMVQ_DEEP_BYTES=12288@-DMVQ_DEEP_TYPES=2"
for v in $V; do n=${v%%:*}; d=${v#*:}
  bench/cuda/knob_build.sh build-cuda /tmp/b/$n src/compute/cuda/matvec_q8.cu ${d//@/ } > $OUT/knob-$n.log 2>&1 &
done
wait $(jobs -p | grep -v -e "^$SYN\$" -e "^$PEER\$") 2>/dev/null
for v in $V; do n=${v%%:*}; tail -1 $OUT/knob-$n.log; done
el "variants"; ls /tmp/b
wait $PEER; el "peer: $(tail -4 $OUT/peer.log | tr '\n' ' ')"
wait $SYN; el "files: $(ls -la /tmp/*.gguf | awk '{print $5, $9}' | tr '\n' ' ')"
L=/tmp/peer/b/bin/llama-bench
pairs() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $REAL/pairs-$tag.tsv -T build-cuda/turbospark -L $L -k $k -p 512 -n 128 -r 3 $m > $OUT/pairs-$tag.log 2>&1
  el "pairs $tag rc=$?"; cat $REAL/pairs-$tag.tsv | column -t; }
[ -x $L ] && { pairs 7b 5 /tmp/7b.gguf; pairs 7bq40 3 /tmp/7bq40.gguf; pairs smol 3 /tmp/smol.gguf; pairs 1.5b 3 /tmp/1.5b.gguf; }
el end
