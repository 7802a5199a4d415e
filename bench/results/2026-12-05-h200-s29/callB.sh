#!/bin/bash
# Session 29 call B (call A's machine, warm: build-cuda, /tmp/b, /tmp/7b.gguf): llama.cpp b11434's llama-bench
# built out of the tree (.old: the peer's source and build script, never committed), the other synthetic files
# (the 7B retyped to Q4_0, the 1.5B, SmolLM2), then the side by side on every file (bench/cuda/gpu_pairs.sh),
# turbospark = build-cuda's binary, or /tmp/b/$TS_VARIANT when set.
set -u
REAL=$OUT; export OUT=/tmp/ob; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/ob.tgz ob; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
TS=build-cuda/turbospark; [ -n "${TS_VARIANT:-}" ] && TS=/tmp/b/$TS_VARIANT
ls -la $TS /tmp/7b.gguf || exit 1
( python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 > $OUT/synth.log 2>&1
  for h in 1.5b smol; do python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf >> $OUT/synth.log 2>&1; done ) &
SYN=$!
.old/peer.sh > $OUT/peer.log 2>&1; el "peer rc=$?: $(tail -3 $OUT/peer.log | tr '\n' ' ')"
wait $SYN; el "files: $(ls -la /tmp/*.gguf | awk '{print $5, $9}' | tr '\n' ' ')"
L=/tmp/peer/b/bin/llama-bench
pairs() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $REAL/pairs-$tag.tsv -T $TS -L $L -k $k -p 512 -n 128 -r 3 $m > $OUT/pairs-$tag.log 2>&1
  el "pairs $tag rc=$?"; column -t $REAL/pairs-$tag.tsv; }
[ -x $L ] && { pairs 7b 5 /tmp/7b.gguf; pairs 7bq40 3 /tmp/7bq40.gguf; pairs smol 3 /tmp/smol.gguf; pairs 1.5b 3 /tmp/1.5b.gguf; }
el end
