#!/bin/bash
# session 43 device call 2: the chunk pairs on the device host's CPU. Carries .s43 (73c2f94's CPU-only build,
# and the same tree with -DTS_KQ_PAIR=0; the 7B header; rot.sh; membw) and .deps.
set -u
S=$(date +%s)
t() { echo "[$(( $(date +%s) - S )) s] $*" >> $OUT/times.txt; }
lscpu > $OUT/lscpu.txt
mkdir -p .deps/root && for f in .s43/deps/*.deb; do dpkg -x "$f" .deps/root; done
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:$PWD/.deps/root/lib/x86_64-linux-gnu
t start
python3 bench/make_synthetic_dense.py .s43/ds7b.header.gguf /tmp/7b.gguf > $OUT/synth.log 2>&1 || { cat $OUT/synth.log; exit 1; }
cat /tmp/7b.gguf > /dev/null
.s43/ts-pk bench -m /tmp/7b.gguf -t 16 -r 1 -p 0 -n 16 > $OUT/first.txt 2>&1
t synth
M=/tmp/7b.gguf R=5 THREADS="16 4 1" MEMBW=.s43/membw MEMBW_T=1,4,16 .s43/rot.sh pk=$PWD/.s43/ts-pk nopk=$PWD/.s43/ts-nopk > $OUT/rot-pk-7b.tsv 2>&1
t rot
