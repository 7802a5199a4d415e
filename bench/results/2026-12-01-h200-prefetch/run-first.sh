#!/usr/bin/env bash
# full gpu-check, then the 30B-A3B synthetic streamed at 25% (host tier): pilot prefetch on vs off in alternating pairs; ids vs resident
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
GPU_CHECK_BUDGET_S=${GC_BUDGET:-275} GPU_CHECK_JOBS=16 GPU_CHECK_SKIP_BENCH=1 scripts/gpu-check.sh > $OUT/gpucheck.txt 2>&1
echo "gpu-check rc=$? at $(el)s"
sed -n '/== summary/,$p' $OUT/gpucheck.txt | cut -c1-200
rm -f $OUT/build.log $OUT/ptxas.txt $OUT/bench.log
B=build-cuda
[ -x $B/turbospark ] || { echo "no build"; exit 1; }
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c $B/libturbospark.a -lpthread -lm -o /tmp/msm && /tmp/msm /tmp/moe30b.gguf --threads 16 --no-sync >/dev/null 2>&1 || { echo synth failed; exit 1; }
echo "synth at $(el)s"; git rev-parse --short HEAD
R=$OUT/moe30b.txt
P="Explain in detail how a mixture of experts model routes each token to a few experts and why that saves compute"
run() { local tag=$1; shift; echo "== $tag: $*" >> $R; /usr/bin/time -f "wall %e s, maxrss %M KB" timeout ${TMO:-90} $B/turbospark "$@" > /tmp/out-$tag.txt 2>> $R; echo "== $tag rc=$? at $(el)s" | tee -a $R; cat /tmp/out-$tag.txt >> $R; }
S="--backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host"
for i in 1 2 3; do
  if [ $((i % 2)) = 1 ]; then o1=on; o2=off; else o1=off; o2=on; fi
  for pf in $o1 $o2; do
    [ $(( $(el) )) -gt 520 ] && break 2
    TMO=60 run tg-$pf-$i bench -m /tmp/moe30b.gguf $S --pilot-prefetch $pf -p 0 -n 128 -r 3
    TMO=60 run pp-$pf-$i bench -m /tmp/moe30b.gguf $S --pilot-prefetch $pf -p 512 -n 0 -r 3
  done
done
TMO=60 run resident-run run -m /tmp/moe30b.gguf --backend cuda --expert-residency resident -p "$P" -n 64 --temperature 0 --show-ids
TMO=60 run pf-run run -m /tmp/moe30b.gguf $S --pilot-prefetch on -p "$P" -n 64 --temperature 0 --show-ids
cmp -s /tmp/out-pf-run.txt /tmp/out-resident-run.txt && echo "pf-run ids == resident" | tee -a $R || echo "pf-run ids DIFFER" | tee -a $R
grep -E "^== |expert cache:|pp512|tg128|ids|error|wall" $R | grep -v "^== .*: " | cut -c1-300 | tail -60
