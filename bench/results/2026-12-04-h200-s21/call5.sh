#!/bin/bash
# Session 21 call 5: side by side with llama.cpp in one call. The peer (llama-bench from PyPI's
# llama_cpp_python-0.3.36 sdist, trimmed) is built out of the tree by a script that is not in the repository
# (PEER_SH); turbospark is 4f5af02's engine built on the dev box. gpu_pairs.sh, pp512 + tg128, -fa 1 -ngl 99.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/pairs-*.tsv $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 585 - $(date +%s) + T0 )); }
( bash ${PEER_SH:?} > $OUT/peer-build.txt 2>&1; echo "rc=$?" >> $OUT/peer-build.txt ) &
PB=$!
mkdir -p /tmp/deps /tmp/b; for f in .pb/deps/*.deb; do dpkg -x $f /tmp/deps; done
xz -dc .pb/ts-early.xz > /tmp/b/turbospark; chmod +x /tmp/b/turbospark
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/1.5b.hdr.xz > /tmp/15.hdr
nice python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1
nice python3 bench/make_synthetic_dense.py /tmp/15.hdr /tmp/15.gguf > $OUT/synth-15.log 2>&1
nice python3 bench/make_synthetic_dense.py .old/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1
el "files"; wait $PB; el "peer built"; tail -3 $OUT/peer-build.txt
L=/tmp/peer/b/bin/llama-bench
[ -x $L ] || { tail -30 /tmp/peer/build.log > $OUT/peer-build-tail.txt; el "no llama-bench"; exit 1; }
$L --version > $OUT/llama-version.txt 2>&1; head -3 $OUT/llama-version.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
pairs() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $OUT/pairs-$tag.tsv -T /tmp/b/turbospark -L $L -k $k -p 512 -n 128 -r 3 $m > $OUT/pairs-$tag.log 2>&1
  el "pairs $tag rc=$?"; cat $OUT/pairs-$tag.tsv; }
pairs 7b 5 /tmp/7b.gguf
[ $(left) -gt 70 ] && pairs smol 5 /tmp/smol.gguf
[ $(left) -gt 80 ] && pairs 15 3 /tmp/15.gguf
el end
