#!/bin/bash
# Session 22 call 3: scripts/gpu-check.sh of the working tree (aaec415 + ts_session_opts.logits_host: the LM head
# writes the logits into mapped host memory; bench set it unconditionally in this build), compute-sanitizer on
# test_cuda_attention; then tg128 of that tree ("turbospark", built on the dev box) against d62c0c9's engine ("base")
# in alternating groups, 7B and SmolLM2, and a CUPTI trace with the copies of the new build.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $OUT/sanitizer.log $OUT/ab-*.tsv $OUT/*-summary.md $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p /tmp/b; for f in ts ts-base; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
cp .pb/libktrace.so /tmp/b/; xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/smol.hdr.xz > /tmp/smol.hdr
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 ) &
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1 ) &
GPU_CHECK_SAN_ONLY=test_cuda_attention GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=430 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; cat $OUT/summary.txt | head -16; grep -iE "replay|sample  " $OUT/tests.log | head -30
wait; el files
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
trace() { local tag=$1 bin=$2 m=$3; shift 3
  KTRACE_MEMCPY=1 CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv timeout 150 $bin bench -m $m --backend cuda -p 0 -n 128 -r 1 "$@" > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" --positions $OUT/$tag-pos.tsv > $OUT/$tag-summary.md 2>&1
  echo "summary rc=$?"; head -5 $OUT/$tag-summary.md; grep -A4 "copies outside" $OUT/$tag-summary.md
  xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; rm -f /tmp/$tag.tsv; }
trace 7b-new /tmp/b/ts /tmp/7b.gguf
bench/cuda/gpu_pairs.sh -o $OUT/ab-7b-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-base -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $OUT/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $OUT/ab-smol-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-base -k 5 -p 0 -n 128 -r 3 /tmp/smol.gguf > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $OUT/ab-smol-tg.tsv
el end
