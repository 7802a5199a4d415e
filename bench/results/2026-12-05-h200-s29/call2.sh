#!/bin/bash
# Session 29 call 2 (call 1's machine, warm: build-cuda, the variants in /tmp/b, the files in /tmp): tg128 A/B of
# each knob variant (engine "turbospark") against the build's own binary ("base"), 5 alternating groups on the 7B
# Q4_K_M synthetic (bench/cuda/gpu_pairs.sh -B), then the best ones on the 1.5B and SmolLM2 (3 groups).
set -u
REAL=$OUT; export OUT=/tmp/o2; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o2.tgz o2; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ls /tmp/b /tmp/*.gguf >/dev/null || exit 1
ab() { local n=$1 tag=$2 k=$3 m=$4
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$n-$tag-tg.tsv -T /tmp/b/$n -B build-cuda/turbospark -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$n-$tag.log 2>&1
  python3 - $OUT/ab-$n-$tag-tg.tsv $n $tag <<'PY'
import sys, statistics as st
rows=[l.split('\t') for l in open(sys.argv[1]) if not l.startswith('model')]
g={}
for r in rows:
    g.setdefault(r[2],{})[r[4]]=float(r[5])
rat=[v['turbospark']/v['base'] for v in g.values() if 'base' in v and 'turbospark' in v]
t=[v['turbospark'] for v in g.values()]; b=[v['base'] for v in g.values()]
print("%-5s %-5s variant %.2f base %.2f ratio median %.4f (%.4f..%.4f) n=%d" % (sys.argv[2], sys.argv[3], st.median(t), st.median(b), st.median(rat), min(rat), max(rat), len(rat)))
PY
}
for n in ${VARIANTS:-ctl deep12 deepq4 ef ldg3 cpa1 pf2 sw16 ldg2}; do [ -x /tmp/b/$n ] && ab $n 7b 5 /tmp/7b.gguf | tee -a $REAL/ab-summary.txt; el $n; done
el end
