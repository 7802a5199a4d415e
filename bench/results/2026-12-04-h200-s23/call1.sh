#!/bin/bash
# Session 23 call 1: the int8 matvec's bulk loader (QBulk: cp.async.bulk copies into a shared ring, an
# mbarrier a slot) for Q4_K/Q5_K. test_cuda_matvec on the GPU (every loader bit-identical, against the CPU)
# plus compute-sanitizer memcheck/racecheck in its small mode; bench_matvec 7B and 1.5B Q4_K/Q6_K with the
# loader forced 0 (registers) / 2 (bulk), two alternating rounds. (The binaries of an engine A/B do not fit
# the carry beside these: the next call.)
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { cp $OUT/*.txt $OUT/*.tsv $OUT/*.log $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tail -1
lscpu | grep -m1 'Model name' > $OUT/lscpu.txt
mkdir -p /tmp/deps /tmp/b; for f in .pb/deps/*.deb; do dpkg -x $f /tmp/deps; done
for f in bench_matvec test_cuda_matvec; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
timeout 200 /tmp/b/test_cuda_matvec > $OUT/test-matvec.txt 2>&1; el "test_cuda_matvec rc=$?"; tail -3 $OUT/test-matvec.txt
grep -E "bulk loaders" $OUT/test-matvec.txt | head -3; grep -c "FAIL" $OUT/test-matvec.txt
for tool in memcheck racecheck; do
  TS_CUDA_TEST_SMALL=1 TS_ALLOW_NO_GPU=0 timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 /tmp/b/test_cuda_matvec > $OUT/san-$tool.txt 2>&1
  el "sanitizer $tool rc=$?"; tail -4 $OUT/san-$tool.txt
done
for round in 1 2; do for ld in 0 2; do
  BENCH_MATVEC_LOADER=$ld BENCH_MATVEC_BATCH=0 BENCH_MATVEC_PATHS=int8 timeout 100 /tmp/b/bench_matvec qwen2-7b,1.5b Q4_K Q6_K > $OUT/mv-ld$ld-r$round.txt 2>&1
  el "bench_matvec ld=$ld round $round rc=$?"; grep -E "RESULT" $OUT/mv-ld$ld-r$round.txt | head -24
done; done
el end
