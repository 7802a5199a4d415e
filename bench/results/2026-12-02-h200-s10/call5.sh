#!/usr/bin/env bash
# session 10, call 5: the 30B-A3B synthetic, experts resident, turbospark vs llama.cpp all on GPU (same binary as call 4), 5 alternating groups
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
B=build-cuda
LIBD=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
NL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$NL" ] || NL=$(dirname "$(find / -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$NL:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LIBD
[ -x /tmp/llama-bench ] && [ -x $B/turbospark ] || { echo "not warm"; exit 1; }
gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c $B/libturbospark.a -lpthread -lm -o /tmp/msm && /tmp/msm /tmp/moe30b.gguf --threads 16 --no-sync > /tmp/msm.log 2>&1 || { echo synth failed; tail -3 /tmp/msm.log; exit 1; }
echo "synth at $(el)s"; ls -la /tmp/moe30b.gguf
timeout $((560 - $(el))) bench/cuda/gpu_pairs.sh -o $OUT/pairs-moe30b-resident.tsv -T $B/turbospark -L /tmp/llama-bench -k 5 -r 3 -a "--expert-residency resident" /tmp/moe30b.gguf 2> $OUT/pairs-moe30b.err
echo "pairs rc=$? at $(el)s"; tail -3 $OUT/pairs-moe30b.err
python3 - $OUT/pairs-moe30b-resident.tsv <<'PY'
import sys,statistics,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.rstrip('\n').split('\t')
    if len(f)<6 or f[0]=='model': continue
    try: d[(f[1],f[4])].append(float(f[5]))
    except ValueError: pass
for (t,e),v in sorted(d.items()): print(t, e, 'n=%d'%len(v), 'median=%.1f'%statistics.median(v), 'min=%.1f max=%.1f'%(min(v),max(v)))
PY
echo "done at $(el)s"
