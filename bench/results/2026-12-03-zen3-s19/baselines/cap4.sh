#!/bin/bash
cd /work/main
O=.old/s19/cap3
M=/work/models/moe30b.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; }
cap() { n=$1; b=$2; shift 2; drop
  bench/run_capped.sh -m 4325446616 -r $O/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/$n.txt)" >> $O/summary.txt; }
cap old13-pp512-r6 /work/bin/ts-old13 -p 512 -n 0 -r 1
cap final-pp512-r6 /work/bin/ts-final -p 512 -n 0 -r 1
cap final-tg32-r6 /work/bin/ts-final -p 0 -n 32 -r 1
echo done2 >> $O/summary.txt
