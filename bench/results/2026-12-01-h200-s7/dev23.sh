#!/usr/bin/env bash
# session 7, call 5 (warm from call 4): llama.cpp CUDA (PyPI llama_cpp_python-0.3.36's vendored tree, built out of the
# tree for sm_90a, commit 0c1e570) against turbospark on the 30B-A3B synthetic: 5 alternating groups all-on-GPU vs
# resident, then 3 groups -ncmoe 48 vs streamed 25% host tier
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
LIMIT=${LIMIT:-330}
B=build-cuda
M=/tmp/moe30b.gguf
[ -x $B/turbospark ] && [ -f $M ] && [ -f /tmp/stash/llama-bench.xz.part1 ] || { echo "machine not warm: $(ls $B/turbospark $M /tmp/stash 2>&1)"; exit 1; }
cat /tmp/stash/llama-bench.xz.part1 .pb/llama-bench.xz.part2 | python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.stdin.buffer), open('/tmp/llama-bench','wb'))" && chmod +x /tmp/llama-bench || { echo "unpack failed"; exit 1; }
NL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
[ -n "$NL" ] || NL=$(dirname "$(find / -name 'libnccl.so.2' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$NL:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
ldd /tmp/llama-bench | grep -E "not found" ; echo "llama-bench ready at $(el)s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
R=$OUT/pairs.txt
ts() { local tag=$1; shift; echo "== $tag: $*" >> $R; timeout 90 $B/turbospark bench -m $M "$@" > /tmp/o.txt 2>> $R; echo "== $tag rc=$? at $(el)s" >> $R; cat /tmp/o.txt >> $R; }
ll() { local tag=$1; shift; echo "== $tag: $*" >> $R; timeout 120 /tmp/llama-bench -m $M "$@" -o md > /tmp/o.txt 2>> $R; echo "== $tag rc=$? at $(el)s" >> $R; cat /tmp/o.txt >> $R; }
S="--backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host"
for i in 1 2 3 4 5; do
  [ $(el) -gt $LIMIT ] && break
  if [ $((i % 2)) = 1 ]; then
    ll llama-gpu-$i -p 512 -n 128 -r 3 -fa on -ngl 99; ts ours-resident-$i --backend cuda --expert-residency resident -p 512 -n 128 -r 3
  else
    ts ours-resident-$i --backend cuda --expert-residency resident -p 512 -n 128 -r 3; ll llama-gpu-$i -p 512 -n 128 -r 3 -fa on -ngl 99
  fi
done
echo "resident pairs at $(el)s"
for i in 1 2 3; do
  [ $(el) -gt $LIMIT ] && break
  if [ $((i % 2)) = 1 ]; then
    ll llama-ncmoe-$i -p 512 -n 128 -r 3 -fa on -ngl 99 -ncmoe 48 -t 16; ts ours-stream-$i $S -p 512 -n 128 -r 3
  else
    ts ours-stream-$i $S -p 512 -n 128 -r 3; ll llama-ncmoe-$i -p 512 -n 128 -r 3 -fa on -ngl 99 -ncmoe 48 -t 16
  fi
done
/tmp/llama-bench --version 2>&1 | tail -2 >> $R
grep -E "^== [a-z0-9-]+ rc|expert cache: [0-9]|tg128|pp512|error|build" $R | cut -c1-160
echo "done at $(el)s"
