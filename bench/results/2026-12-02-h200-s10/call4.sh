#!/usr/bin/env bash
# session 10, call 4 (part B): turbospark (b882cc1's tree) against llama.cpp (PyPI llama_cpp_python-0.3.36's vendored
# tree, ggml 0c1e570, built out of the tree for sm_90a in an earlier session; the binary is carried xz-compressed in two
# halves over two calls, never committed) on the 4 dense files, 5 alternating groups each (bench/cuda/gpu_pairs.sh:
# pp512 + tg128, -r 3 after a warm-up, each engine first in turn)
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
LIMIT=${LIMIT:-500}
M=/tmp/m; B=build-cuda; SMOL=/tmp/gpu-check-models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -x $B/turbospark ] && [ -f /tmp/stash/lb.xz.part1 ] && [ -f $M/r1-7b-q4_0.gguf ] || { echo "machine not warm: $(ls $B/turbospark /tmp/stash $M 2>&1)"; exit 1; }
cat /tmp/stash/lb.xz.part1 .pb/lb.xz.part2 | xz -dc > /tmp/llama-bench && chmod +x /tmp/llama-bench || { echo "unpack failed"; exit 1; }
LIBD=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
NL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$NL" ] || NL=$(dirname "$(find / -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$NL:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LIBD
ldd /tmp/llama-bench | grep "not found"; /tmp/llama-bench --version 2>&1 | tail -2
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
echo "ready at $(el)s"
for f in $M/r1-7b.gguf $SMOL $M/r1-7b-q4_0.gguf $M/qwen1.5b.gguf; do
  [ $(el) -gt $LIMIT ] && { echo "time: skipped $f"; continue; }
  n=$(basename $f .gguf)
  timeout $((585 - $(el))) bench/cuda/gpu_pairs.sh -o $OUT/pairs-$n.tsv -T $B/turbospark -L /tmp/llama-bench -k 5 -r 3 $f 2> $OUT/pairs-$n.err
  echo "== $n rc=$? at $(el)s"; tail -1 $OUT/pairs-$n.err
done
for t in $OUT/pairs-*.tsv; do python3 - "$t" <<'PY'
import sys,statistics,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.rstrip('\n').split('\t')
    if len(f)<6 or f[0]=='model': continue
    try: d[(f[1],f[4])].append(float(f[5]))
    except ValueError: pass
for (t,e),v in sorted(d.items()): print(sys.argv[1].split('/')[-1], t, e, 'n=%d'%len(v), 'median=%.1f'%statistics.median(v), 'min=%.1f max=%.1f'%(min(v),max(v)))
PY
done
echo "done at $(el)s"
