#!/bin/bash
# Session 34's before/after under the 25% cap (as session 28's cap/cap.sh): per round the old tree's 512-token
# prompt (OLD), the new tree's (NEW) and the new tree's one-token decode, which goes first alternating per round;
# the file dropped from the page cache before each run, O_DIRECT expert reads, streamed, 16 slots a layer, 2 threads,
# at the kernel level ISA (TS_FORCE_ISA; avx512 is this machine's own).
set -u
cd /work/main
O=bench/results/2026-12-06-zen4-s34/${SUB:-cap2}
M=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
OLD=${OLD:?old binary}; NEW=${NEW:?new binary}; ON=${ON:-old}; NN=${NN:-new}; ISA=${ISA:-avx512}
mkdir -p $O
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; }
cap() { n=$1; b=$2; shift 2; drop
  bench/run_capped.sh -m 4325446616 -r $O/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 TS_FORCE_ISA=$ISA $b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/$n.txt)" >> $O/summary.txt; }
for r in $(seq ${FIRST:-1} ${LAST:-5}); do
  if [ $((r % 2)) = 1 ]; then
    cap $ON-pp512-r$r $OLD -p 512 -n 0 -r 1
    cap $NN-pp512-r$r $NEW -p 512 -n 0 -r 1
    cap $NN-tg32-r$r $NEW -p 0 -n 32 -r 1
  else
    cap $NN-tg32-r$r $NEW -p 0 -n 32 -r 1
    cap $NN-pp512-r$r $NEW -p 512 -n 0 -r 1
    cap $ON-pp512-r$r $OLD -p 512 -n 0 -r 1
  fi
done
echo done >> $O/summary.txt
