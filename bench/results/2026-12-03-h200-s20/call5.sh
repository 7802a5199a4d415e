#!/bin/bash
# Session 20 call 5: test_cuda_matvec of the final tree (its check helpers shared, q8_run_forced) on the H200: full,
# then memcheck and racecheck in small mode. Built on the dev box from the working tree (stripped, carried).
set -u
mkdir -p $OUT
mkdir -p /tmp/deps && for d in .deps/*.deb; do dpkg -x $d /tmp/deps; done; export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu
xz -dc .pb/test_cuda_matvec.xz > /tmp/tm; chmod +x /tmp/tm
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 /tmp/tm > $OUT/test_cuda_matvec.txt 2>&1; echo "test rc=$?"; tail -1 $OUT/test_cuda_matvec.txt
grep -c "2 vs 4 rows" $OUT/test_cuda_matvec.txt; grep -c "register vs cp.async" $OUT/test_cuda_matvec.txt; grep FAIL $OUT/test_cuda_matvec.txt | head -3
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  TS_CUDA_TEST_SMALL=1 timeout 75 $SAN --tool $tool --error-exitcode 99 /tmp/tm > $OUT/san-$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $OUT/san-$tool.txt
done
