#!/bin/bash
# Session 21 call 1: decode tokens' kernel timelines from CUPTI (bench/cuda/ktrace.c, injected with
# CUDA_INJECTION64_PATH into the unchanged engine of 0ac0fce), summarized by bench/cuda/ktrace_summary.py:
# 7B Q4_K_M (PDL on and off), SmolLM2-135M Q4_1, Qwen2.5-1.5B Q4_K_M, each also untraced to see the tracer's cost.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/*-summary.md $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tail -1
lscpu | grep -m1 'Model name' > $OUT/lscpu.txt
mkdir -p /tmp/deps /tmp/b; for f in .deps/*.deb; do dpkg -x $f /tmp/deps; done
xz -dc .pb/ts.xz > /tmp/b/turbospark; chmod +x /tmp/b/turbospark; cp .pb/libktrace.so /tmp/b/
xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/1.5b.hdr.xz > /tmp/15.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 &
python3 bench/make_synthetic_dense.py /tmp/15.hdr /tmp/15.gguf > $OUT/synth-15.log 2>&1 &
python3 bench/make_synthetic_dense.py .deps/SmolLM2-135M-Instruct.Q4_1.header.gguf /tmp/smol.gguf > $OUT/synth-smol.log 2>&1 &
wait; el "files"; tail -qn1 $OUT/synth-*.log
B=/tmp/b/turbospark
plain() { local tag=$1 m=$2; shift 2
  timeout 150 $B bench -m $m --backend cuda -p 0 -n 128 -r 3 "$@" > $OUT/$tag.txt 2>&1; el "$tag rc=$?"; grep tg128 $OUT/$tag.txt; }
trace() { local tag=$1 m=$2; shift 2
  CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv timeout 150 $B bench -m $m --backend cuda -p 0 -n 128 -r 1 "$@" > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" --positions $OUT/$tag-pos.tsv > $OUT/$tag-summary.md 2>&1
  echo "summary rc=$?"; head -7 $OUT/$tag-summary.md
  xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; rm -f /tmp/$tag.tsv; }
plain 7b-plain-1 /tmp/7b.gguf
trace 7b-trace-1 /tmp/7b.gguf
plain 7b-plain-2 /tmp/7b.gguf
trace 7b-trace-2 /tmp/7b.gguf
trace 7b-nopdl-trace /tmp/7b.gguf --cuda-pdl off
plain 7b-nopdl-plain /tmp/7b.gguf --cuda-pdl off
plain smol-plain-1 /tmp/smol.gguf
trace smol-trace-1 /tmp/smol.gguf
trace smol-nopdl-trace /tmp/smol.gguf --cuda-pdl off
plain 15-plain-1 /tmp/15.gguf
trace 15-trace-1 /tmp/15.gguf
el end
