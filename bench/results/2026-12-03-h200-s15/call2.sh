#!/bin/bash
# Session 15 call 2: profiles only, carried binary of cbb4e49 (no build here): ncu of a 30B-A3B resident
# decode token (per-kernel times) and --set full on one of its layers; --set full on the 7B's Q6_K down.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${BUDGET:-230} - $(date +%s) + T0 )); }
mkdir -p .deps/root && for d in .deps/*.deb; do dpkg -x $d .deps/root; done
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
xz -dc .pb/ts-head.xz > /tmp/ts; chmod +x /tmp/ts; T=/tmp/ts
( nice -n 19 python3 bench/make_synthetic_dense.py .hd/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1; touch /tmp/dense.done ) &
.pb/msm /tmp/moe30b.gguf --threads 12 --no-sync > $OUT/msm.log 2>&1; el "msm rc=$?"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
$T bench -m /tmp/moe30b.gguf --backend cuda --expert-residency resident -p 0 -n 32 -r 1 > $OUT/moe-bench.txt 2>&1; el "bench rc=$?"; tail -3 $OUT/moe-bench.txt
timeout 90 $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 1800 \
    $T bench -m /tmp/moe30b.gguf --backend cuda --expert-residency resident -p 0 -n 8 -r 1 > $OUT/ncu-moe30b-tg.csv 2>$OUT/ncu-moe30b-tg.err; el "ncu moe rc=$?"
xz -9 $OUT/ncu-moe30b-tg.csv
timeout 70 $NCU --set full --cache-control none --clock-control none --launch-skip 700 --launch-count 14 \
    $T bench -m /tmp/moe30b.gguf --backend cuda --expert-residency resident -p 0 -n 4 -r 1 > $OUT/ncu-moe30b-full.txt 2>&1; el "ncu moe full rc=$?"
xz -9 $OUT/ncu-moe30b-full.txt
while [ ! -f /tmp/dense.done ]; do sleep 2; [ $(left) -lt 40 ] && break; done; el "7b file"
timeout $(( $(left) - 5 )) $NCU --set full --cache-control none --clock-control none --kernel-name-base demangled -k 'regex:mv_q_q8<14, 1, 4' --launch-skip 2 --launch-count 2 \
    $T bench -m /tmp/7b.gguf --backend cuda -p 0 -n 4 -r 1 > $OUT/ncu-7b-q6k-full.txt 2>&1; el "ncu q6k rc=$?"
grep -E 'mv_q_q8|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|L2 Hit|Eligible Warps|Grid Size' $OUT/ncu-7b-q6k-full.txt | head -30
xz -9 $OUT/ncu-7b-q6k-full.txt
el end
