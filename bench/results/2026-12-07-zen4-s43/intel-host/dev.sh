#!/bin/bash
# session 43 device call: the K-quant decode prefetch (near: L1 2 KB ahead; far: L2 8 KB ahead) on the device's
# host CPU. Carries .s43 (turbospark CPU-only Release build of the working tree, kx kernel harness, membw,
# the DeepSeek-R1-Distill-Qwen-7B Q4_K_M header) and .deps (runtime libraries).
set -u
S=$(date +%s)
t() { echo "[$(( $(date +%s) - S )) s] $*" >> $OUT/times.txt; }
lscpu > $OUT/lscpu.txt
mkdir -p .deps/root && for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:$PWD/.deps/root/lib/x86_64-linux-gnu
ldd .s43/turbospark > $OUT/ldd.txt 2>&1
t start
python3 bench/make_synthetic_dense.py .s43/ds7b.header.gguf /tmp/7b.gguf > $OUT/synth.log 2>&1 || { echo synth failed; cat $OUT/synth.log; exit 1; }
t synth
cat /tmp/7b.gguf > /dev/null
.s43/turbospark bench -m /tmp/7b.gguf -t 16 -r 1 -p 0 -n 16 > $OUT/first.txt 2>&1
t first
SWEEP=1 taskset -c 3 .s43/kx 18944 3 > $OUT/kx-18944.txt 2>&1
SWEEP=1 taskset -c 3 .s43/kx 3584 3 > $OUT/kx-3584.txt 2>&1
t kx
printf '#!/bin/sh\nTS_PREFETCH=near exec %s/.s43/turbospark "$@"\n' $PWD > /tmp/near.sh
printf '#!/bin/sh\nTS_PREFETCH=far exec %s/.s43/turbospark "$@"\n' $PWD > /tmp/far.sh
chmod +x /tmp/near.sh /tmp/far.sh
M=/tmp/7b.gguf R=5 THREADS="16 4 1" MEMBW=.s43/membw MEMBW_T=1,4,16 .s43/rot.sh near=/tmp/near.sh far=/tmp/far.sh > $OUT/rot-7b.tsv 2>&1
t rot
