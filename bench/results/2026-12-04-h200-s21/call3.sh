#!/bin/bash
# Session 21 call 3: scripts/gpu-check.sh of the working tree (bcec525 + the decode attention's early first
# tile: K and V loaded with the query, the position's row from the block's own copy), sanitizers on
# test_cuda_attention; then tg128 A/B of that tree ("turbospark", built here) against bcec525 ("base",
# built here), 5 alternating groups on the 7B and SmolLM2, and a CUPTI trace of each file.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $OUT/*-summary.md $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 ) &
GPU_CHECK_SAN_ONLY=test_cuda_attention GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -60 $OUT/summary.txt
wait
mkdir -p /tmp/b; xz -dc .pb/ts-vb.xz > /tmp/b/base; xz -dc .pb/ts-early.xz > /tmp/b/turbospark; chmod +x /tmp/b/*
cp .pb/libktrace.so /tmp/b/; xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$SMOL" ] || { python3 bench/make_synthetic_dense.py .deps/SmolLM2-135M-Instruct.Q4_1.header.gguf /tmp/smol.gguf > $OUT/synth-smol.log 2>&1; SMOL=/tmp/smol.gguf; }
el "files: $SMOL"
trace() { local tag=$1 bin=$2 m=$3; shift 3
  CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv timeout 150 $bin bench -m $m --backend cuda -p 0 -n 128 -r 1 "$@" > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" --positions $OUT/$tag-pos.tsv > $OUT/$tag-summary.md 2>&1
  echo "summary rc=$?"; head -3 $OUT/$tag-summary.md; grep attn_decode $OUT/$tag-summary.md
  xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; rm -f /tmp/$tag.tsv; }
trace 7b-early /tmp/b/turbospark /tmp/7b.gguf
trace smol-early /tmp/b/turbospark $SMOL
bench/cuda/gpu_pairs.sh -o $OUT/ab-7b-tg.tsv -T /tmp/b/turbospark -B /tmp/b/base -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $OUT/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $OUT/ab-smol-tg.tsv -T /tmp/b/turbospark -B /tmp/b/base -k 5 -p 0 -n 128 -r 3 $SMOL > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $OUT/ab-smol-tg.tsv
el end
