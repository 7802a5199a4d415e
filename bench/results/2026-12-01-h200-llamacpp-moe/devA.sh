#!/usr/bin/env bash
# last calls, part A: quick gpu-check (the folded pilot), ncu kernel times with free clocks (SmolLM2),
# the 30B-A3B synthetic, prefetch on/off with the fold; stash half of the llama-bench binary for part B
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/stash && cp .pa/llama-bench.xz.part1 /tmp/stash/
GPU_CHECK_BUDGET_S=200 GPU_CHECK_JOBS=16 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_SKIP_SAN=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | grep -v "PASS (greedy ids equal)" | cut -c1-250
rm -f $OUT/build.log $OUT/ptxas.txt $OUT/bench.log $OUT/sanitizer.log
B=build-cuda
[ -x $B/turbospark ] || { echo "no build"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ -f "$SMOL" ]; then
  TURBOSPARK_PHASES=1 timeout 90 $NCU --clock-control none --csv --metrics gpu__time_duration.sum --launch-count 1500 $B/turbospark run -m $SMOL --backend cuda -p "a" -n 4 --temperature 0 > $OUT/ncu-smol-free.csv 2>/dev/null
  echo "ncu rc=$? at $(el)s"
  timeout 30 $B/turbospark bench -m $SMOL --backend cuda -p 0 -n 128 -r 5 2>/dev/null | grep tg128
fi
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c $B/libturbospark.a -lpthread -lm -o /tmp/msm && /tmp/msm /tmp/moe30b.gguf --threads 16 --no-sync >/dev/null 2>&1 || { echo synth failed; exit 1; }
echo "synth at $(el)s"
R=$OUT/moe30b.txt
run() { local tag=$1; shift; echo "== $tag: $*" >> $R; timeout 60 $B/turbospark "$@" > /tmp/out-$tag.txt 2>> $R; echo "== $tag rc=$? at $(el)s" | tee -a $R; cat /tmp/out-$tag.txt >> $R; }
S="--backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host"
for i in 1; do
  [ $(el) -gt 300 ] && break
  if [ $i = 1 ]; then o="off on"; else o="on off"; fi
  for pf in $o; do run tg-$pf-$i bench -m /tmp/moe30b.gguf $S --pilot-prefetch $pf -p 0 -n 128 -r 3; done
done
ls -la /tmp/stash /tmp/moe30b.gguf
grep -E "^== [a-z0-9-]+ rc|expert cache: [0-9]|tg128" $R | cut -c1-300
