#!/bin/bash
# Session 24 call 4: the launch rule as a host query (ts_cuda_matvec_q8_launches) and the pair's decision moved into
# mvq_pairs: test_cuda_matvec of that tree (built on the dev box, carried) full size, then small shapes under
# compute-sanitizer memcheck and racecheck as gpu-check runs them; the CLI of that tree: greedy ids cuda = cpu on the
# 7B Q4_K_M synthetic (16 tokens) and its tg128.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/b; for f in ts2 tcm; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr
( python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 ) &
SYN=$!
mkdir -p .deps/root; for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
TS_ALLOW_NO_GPU=0 /tmp/b/tcm > $OUT/tcm.log 2>&1; echo "test_cuda_matvec rc=$? $(tail -1 $OUT/tcm.log)"
grep -E 'launch rule|launches:' $OUT/tcm.log | head -20; grep -c FAIL $OUT/tcm.log
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for tool in memcheck racecheck; do
  ( TS_CUDA_TEST_SMALL=1 TS_ALLOW_NO_GPU=0 timeout 200 $SAN --tool $tool --error-exitcode 99 --print-limit 20 /tmp/b/tcm > $OUT/san-$tool.log 2>&1
    echo "$tool rc=$?" >> $OUT/san-$tool.log ) &
done
wait $SYN; el "7b file"
a=$(timeout 100 /tmp/b/ts2 run -m /tmp/7b.gguf --backend cpu -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
b=$(timeout 60 /tmp/b/ts2 run -m /tmp/7b.gguf --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
[ -n "$a" ] && [ "$a" = "$b" ] && echo "ids 7b: equal" || { echo "ids 7b: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
wait
for tool in memcheck racecheck; do tail -n 3 $OUT/san-$tool.log; done
/tmp/b/ts2 bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/bench-7b.txt 2>&1; cat $OUT/bench-7b.txt | grep -v '^bench:'
cp $OUT/tcm.log $OUT/san-*.log $OUT/bench-7b.txt $REAL/ 2>/dev/null
el end
