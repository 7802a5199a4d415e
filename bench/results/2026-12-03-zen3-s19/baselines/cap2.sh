#!/bin/bash
# capped runs: this session's tree (pp512, tg32), the issue-time tree 0f80e7c (pp512: its per-token prefill)
cd /work/main
O=.old/s19/cap2; mkdir -p $O
M=/work/models/moe30b.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; }
cap() { # name bin args...
  n=$1; b=$2; shift 2; drop
  bench/run_capped.sh -m 4325446616 -r $O/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/$n.txt)" >> $O/summary.txt
}
cap s19-pp512-r1 /work/bin/ts-s19 -p 512 -n 0 -r 1
cap s19-tg32-r1 /work/bin/ts-s19 -p 0 -n 32 -r 1
cap old13-pp512-r1 /work/bin/ts-old13 -p 512 -n 0 -r 1
cap s19-pp512-r2 /work/bin/ts-s19 -p 512 -n 0 -r 1
cap s19-tg32-r2 /work/bin/ts-s19 -p 0 -n 32 -r 1
echo done >> $O/summary.txt
