#!/bin/bash
# Session 37's measurements on the 2-core Emerald Rapids VM (README here).
# BASE: turbospark at 257804a (before the AMX gather) built at /tmp/base/build;
# NEW: this tree's build-rel. Parts: ./run.sh machine | amxab ROUNDS | gemm ROUNDS | moeab ROUNDS | peer
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s37
M15=$HOME/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
BASE=/tmp/base/build
LB=/work/peer/b-noamx/bin/llama-bench # b11434 without its AMX code (its native build dies with SIGILL here)
pp() { TS_FORCE_ISA=$2 $1/turbospark bench -m $3 -t 2 -p 512 -n 0 -r $4 2>/dev/null | awk -F'|' '/pp512/{print $8}'; }
case $1 in
amxab) # dense pp512: base at the amx level, new at the amx and avx512 levels, rotating
  for r in $(seq $2); do for v in base:amx new:amx new:avx512; do b=build-rel; [ ${v%%:*} = base ] && b=$BASE
    echo "$v r$r 7B $(pp $b ${v#*:} $M7 1) 1.5B $(pp $b ${v#*:} $M15 2)"; done; done ;;
gemm) # bench_gemm 512, one thread, the same rotation
  for r in $(seq $2); do for v in base:amx new:amx new:avx512; do b=build-rel; [ ${v%%:*} = base ] && b=$BASE
    echo "== $v r$r"; TS_FORCE_ISA=${v#*:} $b/bench-cpu/bench_gemm 512; done; done ;;
moeab) # the 30B-A3B synthetic warm (resident) pp512, the same rotation
  cat $M30 > /dev/null
  for r in $(seq $2); do for v in base:amx new:amx new:avx512; do b=build-rel; [ ${v%%:*} = base ] && b=$BASE
    echo "$v r$r 30B-A3B $(pp $b ${v#*:} $M30 1)"; done; done ;;
machine)
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|L2|L3|Flags' | cut -c1-600; uname -r; git log --oneline -1; } > $O/machine.txt ;;
peer) # issue 13's dense prompts against llama.cpp, base and new in the same rotation, 5 groups
  for m in 1.5b:$M15 7b:$M7; do
    bench/pair_bench.sh -o $O/sbs-${m%%:*}.tsv -L $LB -e base=$BASE/turbospark -e turbospark=build-rel/turbospark -t 2 -k 5 -p 512 \
      --tests pp --pp-reps $([ ${m%%:*} = 7b ] && echo 1 || echo 3) ${m#*:} > $O/sbs-${m%%:*}.log 2>&1; done ;;
esac
