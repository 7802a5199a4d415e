#!/bin/bash
# Session 19 call 4 (CPU only): this session's CPU tests, built on the dev box (Zen 3, runtime ISA dispatch), on the
# H200 host's Xeon (AVX-512 VNNI + AMX): the same gates on the other machine type. The real models are not on the
# device: TS_ALLOW_MISSING_MODELS=1 skips them explicitly (the summary line names them).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
lscpu | grep -E "Model name|^Flags" | cut -c1-300 > $OUT/lscpu.txt; head -1 $OUT/lscpu.txt
mkdir -p /tmp/dr && for f in .deps/*.deb; do dpkg -x "$f" /tmp/dr; done
export LD_LIBRARY_PATH=/tmp/dr/usr/lib/x86_64-linux-gnu:/tmp/dr/lib/x86_64-linux-gnu
# the tests name their fixtures by the dev box's absolute path
[ -e /work/main/tests/fixtures ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ls /work/main/tests/fixtures/ref | head -2
export TS_ALLOW_MISSING_MODELS=1
for t in test_attention test_gguf test_analyze test_expert_cache test_moe test_concurrency test_quant test_forward; do
  timeout 200 .pb/t/$t > $OUT/$t.log 2>&1; rc=$?
  el "$t rc=$rc: $(tail -1 $OUT/$t.log | cut -c1-200)"
  [ $(( $(date +%s) - T0 )) -gt 380 ] && break
done
