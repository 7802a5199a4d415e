#!/bin/bash
# Session 38's measurements on the 2-core Emerald Rapids VM (README here).
# BASE: turbospark at c77968b (before the VNNI kernel's vpdpwssd scale step
# and correction per 32) built at /tmp/wexp/build; NEW: this tree's build-rel.
# Parts: ./run.sh machine | gemm ROUNDS TOKENS | ppab ROUNDS | moeab ROUNDS | pairs ROUNDS | thr | peer
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s38
M15=$HOME/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
BASE=/tmp/wexp/build
LB=/work/peer/b-noamx/bin/llama-bench # b11434 without its AMX code (its native build dies with SIGILL here)
pp() { TS_FORCE_ISA=$2 $1/turbospark bench -m $3 -t 2 -p 512 -n 0 -r $4 2>/dev/null | awk -F'|' '/pp512/{print $8}'; }
bin() { [ ${1%%:*} = base ] && echo $BASE || echo build-rel; }
case $1 in
gemm) # bench_gemm, one thread, the avx512 (VNNI) level, base and new alternating, the order flipping by round
  for r in $(seq $2); do vs="base new"; [ $((r % 2)) = 0 ] && vs="new base"
    for v in $vs; do echo "== $v r$r"; TS_FORCE_ISA=avx512 $(bin $v)/bench-cpu/bench_gemm $3; done; done ;;
ppab) # dense pp512 at the avx512 and amx levels, base and new rotating
  for r in $(seq $2); do for v in base:avx512 new:avx512 base:amx new:amx; do
    echo "$v r$r 7B $(pp $(bin $v) ${v#*:} $M7 1) 1.5B $(pp $(bin $v) ${v#*:} $M15 2)"; done; done ;;
moeab) # the 30B-A3B synthetic warm (resident) pp512, the same rotation
  cat $M30 > /dev/null
  for r in $(seq $2); do for v in base:avx512 new:avx512 base:amx new:amx; do
    echo "$v r$r 30B-A3B $(pp $(bin $v) ${v#*:} $M30 1)"; done; done ;;
pairs) # base and new back to back for each file and level, the order flipping by round (the VM's slow phases last minutes)
  cat $M30 > /dev/null
  for r in $(seq $2); do for fl in 30B-A3B:amx 30B-A3B:avx512 1.5B:avx512 7B:avx512; do
    f=${fl%%:*} l=${fl#*:}; m=$M7 reps=1; [ $f = 1.5B ] && m=$M15 reps=2; [ $f = 30B-A3B ] && m=$M30
    vs="base new"; [ $((r % 2)) = 0 ] && vs="new base"
    for v in $vs; do echo "$v:$l r$r $f $(pp $(bin $v:) $l $m $reps)"; done; done; done ;;
thr) # the AMX threshold: session 37's harness with a Q5_K shape added, against this tree with the thresholds at 16
  rm -rf /tmp/wthr && git worktree add -f --detach /tmp/wthr HEAD > /dev/null && cd /tmp/wthr &&
  sed -i 's/^#define TS_GP_AMX_MIN_COLS\( \| \)[ ]*[0-9]*/#define TS_GP_AMX_MIN_COLS 16/; s/^#define TS_GP_AMX_MIN_COLS_OFF [0-9]*/#define TS_GP_AMX_MIN_COLS_OFF 16/; s/^#define TS_GP_AMX_MIN_COLS_Q4K [0-9]*/#define TS_GP_AMX_MIN_COLS_Q4K 16/' src/tensor/quant.h &&
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF > /dev/null && cmake --build build -j2 --target turbospark > /dev/null &&
  sed -e 's|{TS_TYPE_Q6_K, 256, 8960, "Q6_K 256x8960"}};|{TS_TYPE_Q6_K, 256, 8960, "Q6_K 256x8960"}, {TS_TYPE_Q5_K, 512, 3584, "Q5_K 512x3584"}};|' \
      -e 's/for (int k = 0; k < 3; k++)/for (int k = 0; k < 4; k++)/' /work/main/bench/results/2026-12-06-xeon-s37/amx_threshold.c > /tmp/amx_threshold_s38.c &&
  gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude /tmp/amx_threshold_s38.c build/libturbospark.a -lm -lpthread -o /tmp/amxt && /tmp/amxt ;;
machine)
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|L2|L3|Flags' | cut -c1-600; uname -r; git log --oneline -1; } > $O/machine.txt ;;
peer) # issue 13's dense prompts against llama.cpp at the avx512 level (the Zen 4 path), base and new rotating, 5 groups
  for m in 1.5b:$M15 7b:$M7; do
    TS_FORCE_ISA=avx512 bench/pair_bench.sh -o $O/sbs-avx512-${m%%:*}.tsv -L $LB -e base=$BASE/turbospark -e turbospark=build-rel/turbospark -t 2 -k 5 -p 512 \
      --tests pp --pp-reps $([ ${m%%:*} = 7b ] && echo 1 || echo 3) ${m#*:} > $O/sbs-avx512-${m%%:*}.log 2>&1; done ;;
esac
