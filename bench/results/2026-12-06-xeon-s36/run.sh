#!/bin/bash
# Session 36: issue 13's table on the 2-core Emerald Rapids Xeon (AVX-512 + AMX) at this tree, against llama.cpp
# b11434 built out of the tree with GGML_NATIVE=ON and its AMX code off (-mno-amx-tile -mno-amx-int8 -mno-amx-bf16:
# its native build stops with SIGILL in prompt processing on this VM, checked this session), and the capped prompt.
# Parts: ./run.sh machine | d15 | d7 | moe | capa TAG BUILD ISA ROUNDS | amxvs
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s36
LB=/work/peer/b-noamx/bin/llama-bench
M15=$HOME/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
TS=build-rel/turbospark
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
mbw() { gcc -O3 -march=native -pthread -o /tmp/membw bench/membw.c && /tmp/membw -t 1,2 > $O/membw-$1.txt 2>&1; }
cap1() { n=$1; isa=$2; b=$3; shift 3; drop
  bench/run_capped.sh -m 4325446616 -r $O/cap/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 TURBOSPARK_PHASES=1 TS_FORCE_ISA=$isa $b/turbospark bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/cap/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/cap/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap/$n.txt | head -1)" >> $O/cap/summary.txt; }
case "${1:-}" in
machine)
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|L2|L3|Flags' | cut -c1-600; uname -r; git log --oneline -1; } > $O/machine.txt
  mbw start
  gcc -O2 -march=native -pthread -o /tmp/peak_ops bench/peak_ops.c && /tmp/peak_ops -t 1,2 > $O/peak_ops.txt 2>&1 ;;
d15) # Qwen2.5-Coder-1.5B Q4_K_M, pp512 and tg128, 5 rotating groups
  mbw d15-before
  bench/pair_bench.sh -o $O/sbs-1.5b.tsv -L $LB -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 3 --tg-reps 3 $M15 > $O/sbs-1.5b.log 2>&1 ;;
d7) # the 7B synthetic, pp512 and tg128, 5 rotating groups, membw before and after
  mbw d7-before
  bench/pair_bench.sh -o $O/sbs-7b.tsv -L $LB -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 1 --tg-reps 1 $M7 > $O/sbs-7b.log 2>&1
  mbw d7-after ;;
moe) # the 30B-A3B synthetic warm, pp512 and tg64, 5 rotating groups
  cat $M30 > /dev/null
  bench/pair_bench.sh -o $O/sbs-30b.tsv -L $LB -e turbospark=$TS -t 2 -k 5 -p 512 -n 64 --pp-reps 1 --tg-reps 1 $M30 > $O/sbs-30b.log 2>&1 ;;
capa) # capa TAG BUILD ISA ROUNDS: the capped prompt and the one-token path at one level, the order alternating
  mkdir -p $O/cap; t=$2; b=$3; isa=$4
  for r in $(seq $5); do
    if [ $((r % 2)) = 1 ]; then cap1 $t-$isa-pp512-r$r $isa $b -p 512 -n 0 -r 1; cap1 $t-$isa-tg32-r$r $isa $b -p 0 -n 32 -r 1
    else cap1 $t-$isa-tg32-r$r $isa $b -p 0 -n 32 -r 1; cap1 $t-$isa-pp512-r$r $isa $b -p 512 -n 0 -r 1; fi
  done ;;
amxvs) # the amx level against the avx512 (VNNI) level on this VM: the dense prompts and bench_gemm, alternating
  for r in 1 2 3; do for isa in avx512 amx; do
    echo "7B $isa r$r $(TS_FORCE_ISA=$isa $TS bench -m $M7 -t 2 -p 512 -n 0 -r 1 2>/dev/null | grep pp512 | cut -c80-)"
    echo "1.5B $isa r$r $(TS_FORCE_ISA=$isa $TS bench -m $M15 -t 2 -p 512 -n 0 -r 2 2>/dev/null | grep pp512 | cut -c80-)"
  done; done > $O/amx-vs-avx512-pp512.txt
  for r in 1 2; do for isa in avx512 amx; do TS_FORCE_ISA=$isa build-rel/bench-cpu/bench_gemm 512; done; done > $O/amx-vs-avx512-bench_gemm-512.txt 2>&1 ;;
esac
