#!/bin/bash
cd /work/main
O=.old/s19/att; mkdir -p $O
M=/work/models/moe30b.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; }
for r in 1 2; do
 for b in ts-att ts-s19; do
  drop
  bench/run_capped.sh -m 4325446616 -r $O/cap-$b-r$r.report -- env TURBOSPARK_EXPERT_NOCACHE=1 /work/bin/$b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 -p 512 -n 0 -r 1 > $O/cap-$b-r$r.txt 2>&1
  echo "cap $b r$r: $(grep -E 'pp512' $O/cap-$b-r$r.txt | cut -c70-)" >> $O/summary.txt
 done
done
for r in 1 2 3 4 5; do
 for b in ts-att ts-s19; do
  echo "1.5B $b r$r: $(/work/bin/$b bench -m /root/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -t 2 -p 512 -n 0 -r 1 2>&1 | grep pp512 | cut -c70-)" >> $O/summary.txt
 done
done
echo done >> $O/summary.txt
