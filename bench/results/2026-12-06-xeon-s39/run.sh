#!/bin/bash
# Session 39's measurements on the 2-core Emerald Rapids VM (README here).
# BASE: turbospark at cc5e569 (before the K-quant dots' VNNI step and vector
# heads), built at /tmp/s39/basewt/build (git worktree); NEW: this tree's build-rel.
# Parts: ./run.sh machine | kern ROUNDS | bits | loops | tg GROUPS | moetg GROUPS
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s39
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
BASE=/tmp/s39/basewt/build
LB=/work/peer/b-noamx/bin/llama-bench # b11434 without its AMX code (its native build dies with SIGILL here)
case $1 in
machine)
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|Thread|L2|L3|Flags' | cut -c1-600; uname -r; git log --oneline -1; } > $O/machine.txt ;;
kern) # bench_kernels (64 MB: "dram" is L3 here), one thread, base and new alternating, the order flipping by round;
      # rows: ROUND VERSION TYPE ISA dram l2 tile4 (GB/s of weight bytes); kern_summary.py makes the table
  for r in $(seq $2); do vs="base new"; [ $((r % 2)) = 0 ] && vs="new base"
    for v in $vs; do b=build-rel; [ $v = base ] && b=$BASE
      $b/bench-cpu/bench_kernels 64 Q3_K Q4_K Q5_K Q6_K Q2_K 2>&1 | grep -E "avx2|avx512" | sed "s/^/$r $v /"; done; done ;;
bits) # the K-quant dots' outputs of base and new at every level, compared byte for byte per level
  for v in base new; do b=build-rel; [ $v = base ] && b=$BASE
    gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude $O/dotdump.c $b/libturbospark.a -lm -lpthread -o /tmp/dotdump_$v && /tmp/dotdump_$v > /tmp/dotdump_$v.bin; done
  python3 -c "
b=open('/tmp/dotdump_base.bin','rb').read(); n=open('/tmp/dotdump_new.bin','rb').read(); L=len(b)//3
for i,l in enumerate(['avx2','avx512','amx']): print(l, 'base==new', b[i*L:(i+1)*L]==n[i*L:(i+1)*L], ' new==new avx2', n[i*L:(i+1)*L]==n[:L])" ;;
loops) # instructions in the one-column K-quant dots' super-block loop, gcc -O2 (the build's flags), base and new
  A2="-mavx2 -mfma -mf16c -mbmi2" A5="-mavx512f -mavx512bw -mavx512vl -mavx512dq $A2"
  cc() { gcc -O2 -std=c11 -D_GNU_SOURCE -I$1/src -I$1/include $3 -S -o $4 $1/src/tensor/$2; }
  cc $BASE/.. quant_avx2.c "$A2" /tmp/qb.s; cc . quant_avx2.c "$A2" /tmp/qn.s; cc . quant_avx512.c "$A5" /tmp/qv.s
  n() { L=$(grep -n "^$2" $1 | head -1 | cut -d: -f1)
        awk -v s=$L 'NR>=s' $1 | awk '/^\.L[0-9]+:/ && !f {f=1; next} f && /j[a-z]+\t\.L/ {print; exit} f {print}' | wc -l; }
  for k in q2_K q3_K q4_K q5_K q6_K; do echo "$k base-avx2 $(n /tmp/qb.s ${k}_k1) new-avx2 $(n /tmp/qn.s ${k}_k1) new-vnni $(n /tmp/qv.s v${k}_k1)"; done ;;
tg) # 7B synthetic tg128 at the avx512 level (Zen 4's path), base, new and the peer rotating (pair_bench: same wait policy)
  TS_FORCE_ISA=avx512 bench/pair_bench.sh -o $O/tg-7b.tsv -L $LB -e base=$BASE/turbospark -e turbospark=build-rel/turbospark -t 2 -k $2 \
    -n 128 --tg-reps 1 --tests tg $M7 > $O/tg-7b.log 2>&1 ;;
moetg) # the 30B-A3B synthetic warm (resident), tg64, the same rotation
  cat $M30 > /dev/null
  TS_FORCE_ISA=avx512 bench/pair_bench.sh -o $O/tg-30b.tsv -L $LB -e base=$BASE/turbospark -e turbospark=build-rel/turbospark -t 2 -k $2 \
    -n 64 --tg-reps 1 --tests tg $M30 > $O/tg-30b.log 2>&1 ;;
esac
