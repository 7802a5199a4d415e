#!/bin/bash
# Session 20 call 4: the fused quantization (ts_cuda_matvec_q8_norm, --cuda-fused-quant) on the GPU for the first time:
# test_cuda_matvec (full, then memcheck/racecheck small), greedy ids of the 1.5B with and without it, tg128 A/B on the 1.5B.
# Binaries built on the dev box from the working tree (stripped, carried).
set -u
mkdir -p $OUT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 330 - $(date +%s) + T0 )); }
mkdir -p /tmp/deps && for d in .deps/*.deb; do dpkg -x $d /tmp/deps; done; export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu
xz -dc .pb/turbospark.xz > /tmp/ts; xz -dc .pb/test_cuda_matvec.xz > /tmp/tm; chmod +x /tmp/ts /tmp/tm
printf '#!/bin/sh\nexec /tmp/ts "$@" --cuda-fused-quant on\n' > /tmp/tsf; chmod +x /tmp/tsf
( xz -dc .pb/hd/1.5b.hdr.xz > /tmp/1.5b.hdr; python3 bench/make_synthetic_dense.py /tmp/1.5b.hdr /tmp/1.5b.gguf > $OUT/synth.log 2>&1; echo "rc=$?" >> $OUT/synth.log ) &
timeout 120 /tmp/tm > $OUT/test_cuda_matvec.log 2>&1; echo "test rc=$?"; tail -1 $OUT/test_cuda_matvec.log; grep -c "fused quantize" $OUT/test_cuda_matvec.log; grep -E "FAIL" $OUT/test_cuda_matvec.log | head -5
el test
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  TS_CUDA_TEST_SMALL=1 timeout 75 $SAN --tool $tool --error-exitcode 99 /tmp/tm > $OUT/san-$tool.log 2>&1; echo "$tool rc=$?"; tail -2 $OUT/san-$tool.log
done; el san
wait; tail -1 $OUT/synth.log; el file
M=/tmp/1.5b.gguf
a=$(timeout 60 /tmp/ts run -m $M --backend cuda -p hello -n 32 --temperature 0 --show-ids 2>$OUT/run-a.err); b=$(timeout 60 /tmp/tsf run -m $M --backend cuda -p hello -n 32 --temperature 0 --show-ids 2>$OUT/run-b.err)
echo "$a" > $OUT/ids-off.txt; echo "$b" > $OUT/ids-on.txt; [ -n "$a" ] && [ "$a" = "$b" ] && echo "ids equal (32)" || echo "ids DIFFER"; el ids
sum() { grep -v '^model' $1 | awk '{print $2, $5, $6}' | sort | awk '{a[$1" "$2]=a[$1" "$2]" "$3} END {for (k in a) print k": "a[k]}' | sort; }
[ $(left) -gt 30 ] && { bench/cuda/gpu_pairs.sh -o $OUT/ab-1.5b-tg.tsv -T /tmp/tsf -B /tmp/ts -k 4 -p 0 -n 128 -r 3 $M > $OUT/ab.log 2>&1; el ab; sum $OUT/ab-1.5b-tg.tsv; }
el end
