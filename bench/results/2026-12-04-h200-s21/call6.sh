#!/bin/bash
# Session 21 call 6: scripts/gpu-check.sh (no sanitizers, no bench) of the working tree: 54f59e7 + a decode step's
# logits copied without a sync of their own (to_host_async: the step's one sync waits for them) and positions and
# ids uploaded in one copy; then tg128 of that build ("turbospark", built here by gpu-check) against 4f5af02
# ("base", built on the dev box), alternating groups, 7B and SmolLM2.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $OUT/ab-*.tsv $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 ) &
GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -40 $OUT/summary.txt
wait
mkdir -p /tmp/b; xz -dc .pb/ts-early.xz > /tmp/b/base; chmod +x /tmp/b/base
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
bench/cuda/gpu_pairs.sh -o $OUT/ab-7b-tg.tsv -T build-cuda/turbospark -B /tmp/b/base -k 4 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $OUT/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $OUT/ab-smol-tg.tsv -T build-cuda/turbospark -B /tmp/b/base -k 4 -p 0 -n 128 -r 3 $SMOL > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $OUT/ab-smol-tg.tsv
el end
