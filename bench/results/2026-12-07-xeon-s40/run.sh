#!/usr/bin/env bash
# Session 40's records. Parts: ./run.sh machine | mca
set -u
cd /work/main
O=bench/results/2026-12-07-xeon-s40
BASE=/tmp/s39/basewt # cc5e569, the tree before session 39's K-quant dots (a git worktree)
case $1 in
machine)
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|Thread|L2|L3|Flags' | cut -c1-600; uname -r; git log --oneline -1; } > $O/machine.txt ;;
mca) # llvm-mca-14's cycle estimates for the one-column K-quant dots' super-block loop (as session 39's run.sh loops
     # extracts it, gcc -O2, the build's flags), cc5e569 against this tree: a model's prediction, not a measurement.
     # znver3: Zen 3 (the AVX2 kernels on the AVX2-only machine); alderlake: a Golden Cove core (the AVX2
     # kernels on this Xeon's core type); icelake-server for the VNNI forms (LLVM 14 has no Zen 4 or Sapphire Rapids model).
  A2="-mavx2 -mfma -mf16c -mbmi2" A5="-mavx512f -mavx512bw -mavx512vl -mavx512dq $A2"
  cc() { gcc -O2 -std=c11 -D_GNU_SOURCE -I$1/src -I$1/include $3 -S -o $4 $1/src/tensor/$2; }
  cc $BASE quant_avx2.c "$A2" /tmp/qb.s; cc . quant_avx2.c "$A2" /tmp/qn.s; cc . quant_avx512.c "$A5" /tmp/qv.s
  body() { L=$(grep -n "^$2" $1 | head -1 | cut -d: -f1)
    awk -v s=$L 'NR>=s' $1 | awk '/^\.L[0-9]+:/ && !f {f=1; next} f && /j[a-z]+\t\.L/ {print; exit} f {print}' | grep -v '^\s*\.\|^\.L'; }
  cyc() { llvm-mca-14 -mcpu=$1 -iterations=200 $2 2>/dev/null | awk '/Total Cycles/ {printf "%.2f", $3 / 200}'; }
  { echo "type cpu base-avx2 new-avx2 new-vnni (cycles a super-block, llvm-mca-14, 200 iterations)"
    for k in q2_K q3_K q4_K q5_K q6_K; do
      body /tmp/qb.s ${k}_k1 > /tmp/mb.s; body /tmp/qn.s ${k}_k1 > /tmp/mn.s; body /tmp/qv.s v${k}_k1 > /tmp/mv.s
      for c in znver3 alderlake icelake-server; do v=$(cyc $c /tmp/mv.s); [ $c = znver3 ] && v=- # Zen 3 has no AVX-512: no model
        echo "$k $c $(cyc $c /tmp/mb.s) $(cyc $c /tmp/mn.s) $v"; done
    done
    echo; echo "q4_K new-avx2 on znver3: bottleneck analysis"
    body /tmp/qn.s q4_K_k1 > /tmp/mn.s; llvm-mca-14 -mcpu=znver3 -iterations=200 -bottleneck-analysis /tmp/mn.s 2>/dev/null |
      sed -n '/Cycles with backend pressure/,/Memory Dependencies/p'; } > $O/mca.txt ;;
esac
