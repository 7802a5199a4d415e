#!/bin/bash
# Session 25's capped rounds (Zen 3): a 512-token prompt (old and new trees) and
# one token at a time (new tree), 25% of the 17.3 GB file, the file dropped from
# the page cache before each run, streamed, 16 slots a layer. Binaries: CPU-only
# Release builds of c8030c6 (session start) and eddc730.
cd /work/main
O=bench/results/2026-12-04-zen3-s25/cap
M=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; }
cap() { n=$1; b=$2; shift 2; drop
  bench/run_capped.sh -m 4325446616 -r $O/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/$n.txt)" >> $O/summary.txt; }
for r in $(seq 1 ${ROUNDS:-5}); do
  if [ $((r % 2)) = 1 ]; then
    cap eddc730-pp512-r$r /tmp/bins/eddc730 -p 512 -n 0 -r 1
    cap eddc730-tg32-r$r /tmp/bins/eddc730 -p 0 -n 32 -r 1
    cap c8030c6-pp512-r$r /tmp/bins/c8030c6 -p 512 -n 0 -r 1
  else
    cap c8030c6-pp512-r$r /tmp/bins/c8030c6 -p 512 -n 0 -r 1
    cap eddc730-tg32-r$r /tmp/bins/eddc730 -p 0 -n 32 -r 1
    cap eddc730-pp512-r$r /tmp/bins/eddc730 -p 512 -n 0 -r 1
  fi
done
echo done >> $O/summary.txt
