#!/bin/bash
# Session 22 call 4: scripts/gpu-check.sh (no sanitizers) of the working tree (aaec415 + logits_host, which bench set
# unconditionally in this build, + the int8 matvec's one-token kw=1 outputs gathered into 128-byte stores); tg128 of
# that tree ("turbospark", built on the dev box) against d62c0c9's engine ("base"), 5 alternating groups, 7B and
# SmolLM2; then llama.cpp side by side (llama-bench from PyPI's llama_cpp_python-0.3.36 sdist, trimmed and built here
# out of the tree by a script kept outside the repository, peer.sh): 7B Q4_K_M, SmolLM2, 7B Q4_0 as time allows.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/b; for f in ts ts-base; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/smol.hdr.xz > /tmp/smol.hdr
( bash .pb/peer.sh .pb/lc.tar.xz > $OUT/peer.log 2>&1; echo "peer rc=$?" >> $OUT/peer.log ) &
PEER=$!
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 > $OUT/synth-7bq40.log 2>&1 ) &
SYN=$!
GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -14 $OUT/summary.txt; grep -E "FAIL" $OUT/summary.txt | head
wait $PEER; el "peer: $(tail -2 $OUT/peer.log | tr '\n' ' ')"
wait $SYN; el "files"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
bench/cuda/gpu_pairs.sh -o $REAL/ab-7b-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-base -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $REAL/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $REAL/ab-smol-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-base -k 5 -p 0 -n 128 -r 3 /tmp/smol.gguf > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $REAL/ab-smol-tg.tsv
LB=/tmp/peer/b/bin/llama-bench
[ -x $LB ] || { el "no llama-bench"; exit 0; }
$LB --version > $OUT/llama-version.txt 2>&1
pairs() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $REAL/pairs-$tag.tsv -T /tmp/b/ts -L $LB -k $k -p 512 -n 128 -r 3 $m > $OUT/pairs-$tag.log 2>&1
  el "pairs $tag rc=$?"; cat $REAL/pairs-$tag.tsv; }
pairs 7b 5 /tmp/7b.gguf
[ $(( $(date +%s) - T0 )) -lt 470 ] && pairs smol 3 /tmp/smol.gguf
[ $(( $(date +%s) - T0 )) -lt 480 ] && pairs 7bq40 3 /tmp/7bq40.gguf
el end
