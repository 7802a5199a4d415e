#!/bin/bash
# Session 24 call 2: two knobs of the int8 matvec, each built on the dev box as the tree of call 1 (5dc0ca5) with
# matvec_q8.cu recompiled with one -D and relinked: "a12" = -DMVQ_ASYNC_BYTES=12288 (the Q6_K cp.async ring 3 items
# deep, not 2, on 4-row launches: the 7B's Q6_K downs and LM head), "pf8" = -DMVQ_PREFETCH=8192 (each warp's L2
# prefetch before the PDL wait 8 KB, not 4). tg128 A/B against call 1's binary ("base" = 5dc0ca5), 5 alternating
# groups on the 7B Q4_K_M synthetic, 3 on the 1.5B.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/b; for f in ts a12 pf8; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
for h in 7b 1.5b; do xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; done
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1; el "7b file"
( python3 bench/make_synthetic_dense.py /tmp/1.5b.hdr /tmp/1.5b.gguf > $OUT/synth-1.5b.log 2>&1 ) &
SYN=$!
mkdir -p .deps/root; for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done  # the binaries' cJSON, PCRE2, libmicrohttpd
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ab() { local v=$1 tag=$2 k=$3 m=$4
  bench/cuda/gpu_pairs.sh -o $REAL/ab-$v-$tag-tg.tsv -T /tmp/b/$v -B /tmp/b/ts -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$v-$tag.log 2>&1
  el "ab $v $tag rc=$?"; cat $REAL/ab-$v-$tag-tg.tsv; }
ab a12 7b 5 /tmp/7b.gguf
ab pf8 7b 5 /tmp/7b.gguf
wait $SYN; el "1.5b file"
ab a12 1.5b 3 /tmp/1.5b.gguf
ab pf8 1.5b 3 /tmp/1.5b.gguf
for v in ts a12; do /tmp/b/$v run -m /tmp/7b.gguf --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>/dev/null > $OUT/ids-$v.txt; done
cmp -s $OUT/ids-ts.txt $OUT/ids-a12.txt && echo "ids a12 = ts" || echo "ids a12 DIFFER"
el end
