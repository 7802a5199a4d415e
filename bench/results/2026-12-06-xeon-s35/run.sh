#!/bin/bash
# Session 35: issue 13 on the 2-core Intel Xeon (AVX-512 + AMX). The AVX2 rows force the AVX2 kernels
# (TS_FORCE_ISA=avx2) on this Intel core: an AVX2 code path, not an AVX2-only machine.
# Parts: ./run.sh [machine] [cap TAG BUILD] [perf TAG BUILD ISA]
set -u
cd /work/main
O=bench/results/2026-12-06-xeon-s35
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
# one capped run: name isa build args...
cap1() { n=$1; isa=$2; b=$3; shift 3; drop
  bench/run_capped.sh -m 4325446616 -r $O/cap/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 TURBOSPARK_PHASES=1 TS_FORCE_ISA=$isa $b/turbospark bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/cap/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/cap/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap/$n.txt | head -1)" >> $O/cap/summary.txt; }
case "${1:-}" in
machine)
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|L2|L3|Flags' | cut -c1-600; uname -r; git log --oneline -1; } > $O/machine.txt
  gcc -O3 -march=native -pthread -o /tmp/membw bench/membw.c && /tmp/membw -t 1,2 > $O/membw-1.txt 2>&1
  gcc -O2 -march=native -pthread -o /tmp/peak_ops bench/peak_ops.c && /tmp/peak_ops -t 1,2 > $O/peak_ops.txt 2>&1 ;;
cap) # cap TAG BUILD ROUND: the prompt and the one-token path at avx2 and the machine's level
  mkdir -p $O/cap; t=$2; b=$3; r=$4
  for isa in avx2 amx; do
    cap1 $t-$isa-pp512-r$r $isa $b -p 512 -n 0 -r 1
    cap1 $t-$isa-tg32-r$r $isa $b -p 0 -n 32 -r 1
  done ;;
capp) # capp TAG BUILD ISA ROUND: the prompt only
  mkdir -p $O/cap; cap1 $2-$4-pp512-r$5 $4 $3 -p 512 -n 0 -r 1 ;;
capa) # capa TAG BUILD ISA ROUNDS: the prompt and the one-token path at one level, ROUNDS rounds, the order alternating
  mkdir -p $O/cap; t=$2; b=$3; isa=$4
  for r in $(seq $5); do
    if [ $((r % 2)) = 1 ]; then cap1 $t-$isa-pp512-r$r $isa $b -p 512 -n 0 -r 1; cap1 $t-$isa-tg32-r$r $isa $b -p 0 -n 32 -r 1
    else cap1 $t-$isa-tg32-r$r $isa $b -p 0 -n 32 -r 1; cap1 $t-$isa-pp512-r$r $isa $b -p 512 -n 0 -r 1; fi
  done ;;
d7) # the 7B synthetic against llama.cpp b11434 (native build, out of the tree), 5 rotating groups, membw before and after
  gcc -O3 -march=native -pthread -o /tmp/membw bench/membw.c && /tmp/membw -t 1,2 > $O/membw-d7-before.txt 2>&1
  bench/pair_bench.sh -o $O/sbs-7b-tg.tsv -L /work/peer/b-native/bin/llama-bench -e turbospark=build-rel/turbospark -t 2 -k 5 -n 128 --tg-reps 1 --tests tg /var/tmp/ts-bench-io/7b-synth-q4km.gguf > $O/sbs-7b-tg.log 2>&1
  /tmp/membw -t 1,2 > $O/membw-d7-after.txt 2>&1 ;;
perf) # perf TAG BUILD ISA: perf record of one capped prompt (warm-up included), the report by symbol
  drop; f=/tmp/perf-$2-$4.data
  bench/run_capped.sh -m 4325446616 -r /dev/null -- env TURBOSPARK_EXPERT_NOCACHE=1 TURBOSPARK_PHASES=1 TS_FORCE_ISA=$4 perf record -o $f -D 4000 -F 1999 -g $3/turbospark bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 -p 512 -n 0 -r 1 > $O/perf-cap-$4-$2-run.txt 2>&1
  perf report -i $f --no-children --sort symbol 2>/dev/null | grep -v '^#' | grep '%' | head -60 > $O/perf-cap-$4-$2.txt ;;
esac
