#!/bin/bash
# Session 33, second part: 679c833 (the pack/sums/AMX-threshold/row-max/gate-up changes) against 415e6f0 (also the
# AVX2 multi-column dots at the AVX-512 level), both CPU-only Release (679c833: a worktree at /tmp/s33/wt2), the
# 30B-A3B synthetic's 512-token prompt at the machine's level (amx): warm (default residency, -r 2), 3 rounds,
# then under the 25% cap (as run.sh), 2 rounds; alternating which tree goes first.
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s33
A=/tmp/s33/wt2/build/turbospark
B=build-rel/turbospark
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
mkdir -p $O/warm2 $O/cap2
warm() { n=$1; ts=$2; $ts bench -m $M30 -t 2 -p 512 -n 0 -r 2 > $O/warm2/$n.txt 2>&1; echo "$n: $(grep pp512 $O/warm2/$n.txt | cut -c70-)" >> $O/warm2/summary.txt; }
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then warm 679c833-r$r $A; warm 415e6f0-r$r $B; else warm 415e6f0-r$r $B; warm 679c833-r$r $A; fi
done
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
cap() { n=$1; ts=$2; drop
  bench/run_capped.sh -m 4325446616 -r $O/cap2/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $ts bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 -p 512 -n 0 -r 1 > $O/cap2/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512' $O/cap2/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap2/$n.txt)" >> $O/cap2/summary.txt; }
for r in 1 2; do
  if [ $((r % 2)) = 1 ]; then cap 679c833-r$r $A; cap 415e6f0-r$r $B; else cap 415e6f0-r$r $B; cap 679c833-r$r $A; fi
done
echo done >> $O/cap2/summary.txt
