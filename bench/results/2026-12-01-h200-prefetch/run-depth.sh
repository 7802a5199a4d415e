#!/usr/bin/env bash
# quick gpu-check (no sanitizers), 30B streamed tg128: pilot prefetch off / on / depth 4,2,1 (event_wait build), ids; ncu kernel times of SmolLM2 decode
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
GPU_CHECK_BUDGET_S=200 GPU_CHECK_JOBS=16 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_SKIP_SAN=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | grep -v "PASS (greedy ids equal)" | cut -c1-250
rm -f $OUT/build.log $OUT/ptxas.txt $OUT/bench.log $OUT/sanitizer.log
B=build-cuda
[ -x $B/turbospark ] || { echo "no build"; exit 1; }
SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ -f "$SMOL" ]; then
  TURBOSPARK_PHASES=1 timeout 150 $NCU --csv --metrics gpu__time_duration.sum --launch-count 1500 $B/turbospark run -m $SMOL --backend cuda -p "a" -n 4 --temperature 0 > $OUT/ncu-smol.csv 2>$OUT/ncu-smol.err
  echo "ncu rc=$? at $(el)s lines=$(wc -l < $OUT/ncu-smol.csv)"; tail -3 $OUT/ncu-smol.err
fi
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c $B/libturbospark.a -lpthread -lm -o /tmp/msm && /tmp/msm /tmp/moe30b.gguf --threads 16 --no-sync >/dev/null 2>&1 || { echo synth failed; exit 1; }
echo "synth at $(el)s"
R=$OUT/moe30b.txt
P="Explain in detail how a mixture of experts model routes each token to a few experts and why that saves compute"
run() { local tag=$1; shift; echo "== $tag: $*" >> $R; timeout ${TMO:-90} $B/turbospark "$@" > /tmp/out-$tag.txt 2>> $R; echo "== $tag rc=$? at $(el)s" | tee -a $R; cat /tmp/out-$tag.txt >> $R; }
S="--backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host"
for i in 1 2; do
  for pf in off on 4 2 1; do
    [ $(el) -gt 500 ] && break 2
    TMO=60 run tg-$pf-$i bench -m /tmp/moe30b.gguf $S --pilot-prefetch $pf -p 0 -n 128 -r 3
  done
done
TMO=60 run resident-run run -m /tmp/moe30b.gguf --backend cuda --expert-residency resident -p "$P" -n 64 --temperature 0 --show-ids
TMO=60 run pf2-run run -m /tmp/moe30b.gguf $S --pilot-prefetch 2 -p "$P" -n 64 --temperature 0 --show-ids
cmp -s /tmp/out-pf2-run.txt /tmp/out-resident-run.txt && echo "pf2-run ids == resident" | tee -a $R || echo "pf2-run ids DIFFER" | tee -a $R
grep -E "^== [a-z0-9-]+ rc|expert cache: [0-9]|tg128" $R | cut -c1-300
