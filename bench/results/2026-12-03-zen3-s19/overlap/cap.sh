#!/bin/bash
# cap.sh OUTDIR BIN... : capped pp512 per binary, then capped tg32 with the first
cd /work/main
O=$1; shift
M=/work/models/moe30b.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; fincore $M 2>/dev/null | tail -1; }
mkdir -p $O
for round in ${ROUNDS:-1}; do
  for b in "$@"; do
    n=$(basename $b)
    drop >> $O/cap-$n-pp512-r$round.txt
    bench/run_capped.sh -m 4325446616 -r $O/cap-$n-pp512-r$round.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 -p 512 -n 0 -r 1 >> $O/cap-$n-pp512-r$round.txt 2>&1
    grep -E "pp512|I/O wait" $O/cap-$n-pp512-r$round.txt
  done
  if [ -n "$TG" ]; then
    n=$(basename $1)
    drop >> $O/cap-$n-tg32-r$round.txt
    bench/run_capped.sh -m 4325446616 -r $O/cap-$n-tg32-r$round.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $1 bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 -p 0 -n 32 -r 1 >> $O/cap-$n-tg32-r$round.txt 2>&1
    grep -E "tg32|I/O wait" $O/cap-$n-tg32-r$round.txt
  fi
done
