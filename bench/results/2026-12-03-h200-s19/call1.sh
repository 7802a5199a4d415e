#!/bin/bash
# Session 19 call 1: gpu-check of HEAD (no kernel changed; the engine's streamed prefill now copies a chunk's next
# cache pass on copy_st beside the current pass's matmuls; no sanitizers); test_quant (built on the dev box, carried)
# at every ISA level on the host Xeon (c9e933c's AVX-512 packer path, never run); the 30B-A3B streamed at 25% (32
# slots), pp512, host tier and file tier, this tree against c9e933c (built here from .pb/old-c9e933c.tar), alternating.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
lscpu | grep -E "Model name|Flags" | cut -c1-400 > $OUT/lscpu.txt
( nice -n 19 .pb/msm /tmp/moe30b.gguf --threads 4 --no-sync > $OUT/msm.log 2>&1; echo "msm rc=$?" >> $OUT/msm.log ) &
( .pb/test_quant > $OUT/test_quant.log 2>&1; echo "test_quant rc=$?" >> $OUT/test_quant.log ) 
tail -2 $OUT/test_quant.log; el "test_quant"
GPU_CHECK_SKIP_SAN=1 GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=300 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
rc=$?; el "gpu-check rc=$rc"; head -20 $OUT/summary.txt; grep -E 'FAIL|overall|streamed' $OUT/summary.txt | head
[ -x build-cuda/turbospark ] || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu
# the old tree: same deps, CLI only
mkdir -p /tmp/old && tar -C /tmp/old -xf .pb/old-c9e933c.tar
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; export PKG_CONFIG_PATH=$LIBD/pkgconfig
GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
( cd /tmp/old && cmake -S . -B b "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DTS_CUDA_WERROR=OFF -DCJSON_INCLUDE_DIR=$DR/usr/include \
    -DCJSON_LIBRARY=$LIBD/libcjson.so -DPCRE2_INCLUDE_DIR=$DR/usr/include -DPCRE2_LIBRARY=$LIBD/libpcre2-8.so > $OUT/old-cmake.log 2>&1 \
  && cmake --build b -j12 --target turbospark-cli > $OUT/old-build.log 2>&1; echo "old rc=$?" >> $OUT/old-build.log )
tail -2 $OUT/old-build.log; el "old build"
while ! grep -q "msm rc" $OUT/msm.log; do sleep 2; [ $(( $(date +%s) - T0 )) -gt 560 ] && break; done; tail -1 $OUT/msm.log; el "msm"
M=/tmp/moe30b.gguf; NEW=build-cuda/turbospark; OLD=/tmp/old/b/turbospark
[ -x $OLD ] || OLD=
for round in 1 2; do
  for b in new old; do
    [ $(( $(date +%s) - T0 )) -gt 530 ] && break 2
    B=$NEW; [ $b = old ] && B=$OLD; [ -z "$B" ] && continue
    echo "== round $round $b host tier" >> $OUT/pp-host.log
    timeout 60 $B bench -m $M --backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source host -p 512 -n 0 -r 3 >> $OUT/pp-host.log 2>&1
    el "$b host: $(grep -E 'pp512' $OUT/pp-host.log | tail -1 | cut -c60-140)"
  done
done
[ $(( $(date +%s) - T0 )) -lt 470 ] && { echo "== resident" >> $OUT/pp-host.log; timeout 40 $NEW bench -m $M --backend cuda -p 512 -n 0 -r 3 >> $OUT/pp-host.log 2>&1; el "resident: $(grep -E 'pp512' $OUT/pp-host.log | tail -1 | cut -c60-140)"; }
for b in new old; do
  [ $(( $(date +%s) - T0 )) -gt 520 ] && break
  B=$NEW; [ $b = old ] && B=$OLD; [ -z "$B" ] && continue
  sync; echo 3 > /proc/sys/vm/drop_caches
  echo "== $b file tier" >> $OUT/pp-file.log
  TURBOSPARK_EXPERT_NOCACHE=1 timeout 45 $B bench -m $M --backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source file -p 512 -n 0 -r 1 >> $OUT/pp-file.log 2>&1
  el "$b file: $(grep -E 'pp512' $OUT/pp-file.log | tail -1 | cut -c60-140)"
done
grep -E '^==|pp512|expert cache:' $OUT/pp-host.log $OUT/pp-file.log | cut -c1-240
el end
