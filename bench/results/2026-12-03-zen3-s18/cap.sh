#!/bin/bash
cd /work/main
M=/work/models/moe30b.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M; fincore $M 2>/dev/null | tail -1; }
for round in 1 2; do
  for b in ts-pack ts-08fa029; do
    drop >> .old/z/cap-$b-pp512-r$round.txt
    bench/run_capped.sh -m 4325446616 -r .old/z/cap-$b-pp512-r$round.report -- env TURBOSPARK_EXPERT_NOCACHE=1 /work/bin/$b bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 -p 512 -n 0 -r 1 >> .old/z/cap-$b-pp512-r$round.txt 2>&1
  done
  drop >> .old/z/cap-ts-pack-tg32-r$round.txt
  bench/run_capped.sh -m 4325446616 -r .old/z/cap-ts-pack-tg32-r$round.report -- env TURBOSPARK_EXPERT_NOCACHE=1 /work/bin/ts-pack bench -m $M -t 2 --expert-residency streamed --expert-cache-slots 16 -p 0 -n 32 -r 1 >> .old/z/cap-ts-pack-tg32-r$round.txt 2>&1
done
echo cap-done > .old/z/cap.done
