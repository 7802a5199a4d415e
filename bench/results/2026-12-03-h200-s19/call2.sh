#!/bin/bash
# Session 19 call 2 (CPU only, the H200 host's Xeon): the 30B-A3B synthetic at the 25% cap with 2 threads, as on
# Zen 3: this tree's 512-token prompt and its one-token-at-a-time decode, and the issue-time tree 0f80e7c's prompt
# (its prefill ran the experts token by token). Binaries built on the dev box (runtime ISA dispatch), carried.
set -u
# logs straight into $OUT: what is there comes back even if the call runs out of time
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
lscpu > $OUT/lscpu.txt; grep -E "Model name|^CPU\(s\)" $OUT/lscpu.txt
mkdir -p /tmp/dr && for f in .deps/*.deb; do dpkg -x "$f" /tmp/dr; done
export LD_LIBRARY_PATH=/tmp/dr/usr/lib/x86_64-linux-gnu:/tmp/dr/lib/x86_64-linux-gnu
.pb/ts-new --version > $OUT/version.txt 2>&1; .pb/ts-old13 --version >> $OUT/version.txt 2>&1; cat $OUT/version.txt
bench/run_capped.sh --self-test > $OUT/selftest.txt 2>&1; echo "self-test rc=$?"; tail -3 $OUT/selftest.txt
.pb/msm /tmp/moe30b.gguf --threads 14 --no-sync > $OUT/msm.log 2>&1; el "msm rc=$?"
M=/tmp/moe30b.gguf
cap() { n=$1; b=$2; shift 2; sync; echo 3 > /proc/sys/vm/drop_caches
  timeout ${TO:-120} bench/run_capped.sh -m 4325446616 -r $OUT/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $OUT/$n.txt 2>&1
  el "$n: $(grep -E 'pp512|tg32' $OUT/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $OUT/$n.txt) $(grep -oE '\([0-9.]+%\)' $OUT/$n.txt | head -1)"; }
cap new-pp512-r1 .pb/ts-new -p 512 -n 0 -r 1
cap new-tg32-r1 .pb/ts-new -p 0 -n 32 -r 1
TO=330 cap old13-pp512-r1 .pb/ts-old13 -p 512 -n 0 -r 1
[ $(( $(date +%s) - T0 )) -lt 500 ] && cap new-pp512-r2 .pb/ts-new -p 512 -n 0 -r 1
[ $(( $(date +%s) - T0 )) -lt 530 ] && cap new-tg32-r2 .pb/ts-new -p 0 -n 32 -r 1
el end
