#!/bin/bash
# Session 29 call A (a fresh machine): the tree's CUDA build (scripts/gpu-check.sh, build only), the 7B Q4_K_M
# synthetic from its real header (.pb), the int8 matvec's knob variants (bench/cuda/knob_build.sh: matvec_q8.cu
# recompiled with -D knobs, relinked), then tg128 A/B of each variant ("turbospark") against the build's own
# binary ("base"), 5 alternating groups (bench/cuda/gpu_pairs.sh -B). Logs are packed into one file.
set -u
REAL=$OUT; export OUT=/tmp/oa; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/oa.tgz oa; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)'
git log --oneline -1
for h in 7b 1.5b smol; do xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; done
( python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth.log 2>&1 ) &
SYN=$!
GPU_CHECK_ONLY_BUILD=1 GPU_CHECK_JOBS=16 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "build rc=$?"; grep -E "^build:|FAILED" $OUT/gpucheck.log
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
ls -la build-cuda/turbospark || exit 1
cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON build-cuda > /dev/null
mkdir -p /tmp/b
V=${KNOBS:-"ctl: deep12:-DMVQ_DEEP_BYTES=12288 deepq4:-DMVQ_DEEP_BYTES=12288@-DMVQ_DEEP_TYPES=2 ef:-DMVQ_LDG=3@-DMVQ_CPA=2"}
KB=()
for v in $V; do n=${v%%:*}; d=${v#*:}
  bench/cuda/knob_build.sh build-cuda /tmp/b/$n src/compute/cuda/matvec_q8.cu ${d//@/ } > $OUT/knob-$n.log 2>&1 &
  KB+=($!)
done
wait "${KB[@]}"
for v in $V; do n=${v%%:*}; tail -1 $OUT/knob-$n.log; done
el "variants"
wait $SYN; el "7b file: $(ls -la /tmp/7b.gguf | awk '{print $5}')"
ab() { local n=$1 tag=$2 k=$3 m=$4
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$n-$tag-tg.tsv -T /tmp/b/$n -B build-cuda/turbospark -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$n-$tag.log 2>&1
  python3 bench/results/2026-12-05-h200-s29/ab_summary.py $OUT/ab-$n-$tag-tg.tsv $n $tag; }
for v in $V; do n=${v%%:*}; [ -x /tmp/b/$n ] && ab $n 7b 5 /tmp/7b.gguf | tee -a $OUT/ab-summary.txt; el $n; done
cp $OUT/ab-summary.txt $REAL/ 2>/dev/null
el end
