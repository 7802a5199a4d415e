#!/bin/bash
# Session 33: the 30B-A3B synthetic's 512-token prompt, before (9bf9198) and after (679c833) this session's
# CPU changes, on the 2-core Xeon (AVX-512 + AMX). Both CPU-only Release builds (old: a worktree of 9bf9198
# at /tmp/s33/wt). Under the 25% cap (bench/run_capped.sh -m 4325446616, cgroup v1; streamed, 16 slots,
# TURBOSPARK_EXPERT_NOCACHE=1, the file dropped from the page cache before each run), at the AVX2 level
# (TS_FORCE_ISA=avx2: the AVX2 code path on this Intel core, not an AVX2-only machine) and at the machine's
# own level (amx); then warm (default residency, -r 2) at the machine's level. Rounds alternate which tree
# goes first.
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s33
OLD=/tmp/s33/wt/build/turbospark
NEW=build-rel/turbospark
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
{ lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | cut -c1-400; uname -r; git log --oneline -1; } > $O/machine.txt
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
cap() { n=$1; isa=$2; ts=$3; shift 3; drop
  bench/run_capped.sh -m 4325446616 -r $O/cap/$n.report -- env TS_FORCE_ISA=$isa TURBOSPARK_EXPERT_NOCACHE=1 $ts bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/cap/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/cap/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap/$n.txt)" >> $O/cap/summary.txt; }
mkdir -p $O/cap $O/warm
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then cap avx2-old-r$r avx2 $OLD -p 512 -n 0 -r 1; cap avx2-new-r$r avx2 $NEW -p 512 -n 0 -r 1
  else cap avx2-new-r$r avx2 $NEW -p 512 -n 0 -r 1; cap avx2-old-r$r avx2 $OLD -p 512 -n 0 -r 1; fi
done
cap avx2-new-tg32-r1 avx2 $NEW -p 0 -n 32 -r 1
for r in 1 2; do
  if [ $((r % 2)) = 1 ]; then cap amx-old-r$r amx $OLD -p 512 -n 0 -r 1; cap amx-new-r$r amx $NEW -p 512 -n 0 -r 1
  else cap amx-new-r$r amx $NEW -p 512 -n 0 -r 1; cap amx-old-r$r amx $OLD -p 512 -n 0 -r 1; fi
done
cap avx2-new-tg32-r2 avx2 $NEW -p 0 -n 32 -r 1
warm() { n=$1; ts=$2; $ts bench -m $M30 -t 2 -p 512 -n 0 -r 2 > $O/warm/$n.txt 2>&1; echo "$n: $(grep pp512 $O/warm/$n.txt | cut -c70-)" >> $O/warm/summary.txt; }
for r in 1 2; do
  if [ $((r % 2)) = 1 ]; then warm old-r$r $OLD; warm new-r$r $NEW; else warm new-r$r $NEW; warm old-r$r $OLD; fi
done
echo done >> $O/warm/summary.txt
