#!/bin/bash
# Session 21 call 2: the decode attention with the tile's V rows loaded beside its K rows (one round trip
# a tile instead of 2 + 32/8), built here on the tree of d5cc46b + that change ("turbospark"), against d5cc46b's
# engine (0ac0fce's, "base"): tg128 in alternating groups (gpu_pairs.sh -B), and a CUPTI trace of each.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/*-summary.md $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p /tmp/deps /tmp/b; for f in .pb/deps/*.deb; do dpkg -x $f /tmp/deps; done
xz -dc .pb/ts.xz > /tmp/b/base; xz -dc .pb/ts-att.xz > /tmp/b/turbospark; chmod +x /tmp/b/base /tmp/b/turbospark
cp .pb/libktrace.so /tmp/b/; xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/SmolLM2-135M-Instruct.Q4_1.header.gguf.xz > /tmp/smol.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 &
python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1 &
wait; el "files"
trace() { local tag=$1 bin=$2 m=$3; shift 3
  CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv timeout 150 $bin bench -m $m --backend cuda -p 0 -n 128 -r 1 "$@" > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" --positions $OUT/$tag-pos.tsv > $OUT/$tag-summary.md 2>&1
  echo "summary rc=$?"; head -3 $OUT/$tag-summary.md; grep attn_decode $OUT/$tag-summary.md
  xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; rm -f /tmp/$tag.tsv; }
trace 7b-new /tmp/b/turbospark /tmp/7b.gguf
trace smol-new /tmp/b/turbospark /tmp/smol.gguf
bench/cuda/gpu_pairs.sh -o $OUT/ab-7b-tg.tsv -T /tmp/b/turbospark -B /tmp/b/base -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $OUT/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $OUT/ab-smol-tg.tsv -T /tmp/b/turbospark -B /tmp/b/base -k 5 -p 0 -n 128 -r 3 /tmp/smol.gguf > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $OUT/ab-smol-tg.tsv
el end
