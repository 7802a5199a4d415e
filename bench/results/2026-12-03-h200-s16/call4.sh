#!/bin/bash
# Session 16 call 4 (no build: binaries built here, sm_90a): this tree (b3ee283 + the router's first weights loaded
# before the PDL wait) against 1e79e0d: greedy ids of every tiny fixture and of the 30B-A3B (must be equal: both
# changes keep every operation), then A/B on the 30B-A3B resident tg128 (5 alternating groups), ncu of a token.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 6 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
mkdir -p /tmp/dr; for f in .deps/*.deb; do dpkg -x "$f" /tmp/dr; done
export LD_LIBRARY_PATH=/tmp/dr/usr/lib/x86_64-linux-gnu
xz -dc .pb/ts-new.xz > /tmp/tsnew; xz -dc .pb/ts-route.xz > /tmp/tsroute; chmod +x /tmp/tsnew /tmp/tsroute
T=/tmp/tsnew; B=/tmp/tsroute; M=/tmp/moe30b.gguf; R="--expert-residency resident"
ok=0; bad=0
for f in tests/fixtures/ref/tiny-*.gguf; do
  a=$(timeout 60 $T run -m $f --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/cli.log)
  b=$(timeout 60 $B run -m $f --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/cli.log)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then ok=$((ok+1)); echo "same $f" >> $OUT/ids.txt; else bad=$((bad+1)); echo "DIFF $f: [$a] [$b]" >> $OUT/ids.txt; fi
done
el "tiny fixtures: $ok same, $bad differ"; grep DIFF $OUT/ids.txt | head -5
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; done; tail -1 $OUT/msm.log; el msm
a=$(timeout 120 $T run -m $M --backend cuda $R -p "the router" -n 32 --temperature 0 --show-ids 2>>$OUT/cli.log)
b=$(timeout 120 $B run -m $M --backend cuda $R -p "the router" -n 32 --temperature 0 --show-ids 2>>$OUT/cli.log)
[ -n "$a" ] && [ "$a" = "$b" ] && echo "30B greedy ids: same" || echo "30B greedy ids: DIFF [$a] [$b]"
echo "$a" > $OUT/ids-30b-new.txt; echo "$b" > $OUT/ids-30b-route.txt; el "30B ids"
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
bench/cuda/gpu_pairs.sh -o $OUT/ab-vs-route.tsv -T $T -B $B -k 5 -p 0 -n 128 -r 3 -a "$R" $M > $OUT/ab.log 2>&1; el "ab"; sum $OUT/ab-vs-route.tsv
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 40 $NCU --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-count 1200 \
    $T bench -m $M --backend cuda $R -p 0 -n 4 -r 1 > $OUT/ncu-moe30b-tg.csv 2>$OUT/ncu-moe30b-tg.err; el "ncu rc=$?"; xz -9 $OUT/ncu-moe30b-tg.csv
el end
