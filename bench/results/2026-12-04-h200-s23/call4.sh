#!/bin/bash
# Session 23 call 4: 24 resident warps per SM for the one-token int8 matvec (MVQ_SM_WARPS 24: an 80-register bound,
# the grid sized for 6 blocks an SM) against 20 (96 registers, 5 blocks). scripts/gpu-check.sh of that tree
# (sanitizers on test_cuda_matvec) while the files are made; then tg128 of the tree built on the dev box
# ("turbospark") against main (25f969f, "base"), 5 alternating groups on the 7B Q4_K_M synthetic and on SmolLM2.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/b; for f in ts ts-b0; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/smol.hdr.xz > /tmp/smol.hdr
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1 ) &
SYN=$!
GPU_CHECK_SAN_ONLY=test_cuda_matvec GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; cat $OUT/summary.txt | head -40
wait $SYN; el "files"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for m in /tmp/smol.gguf /tmp/7b.gguf; do
  a=$(timeout 120 /tmp/b/ts run -m $m --backend cpu -p hello -n 24 --temperature 0 --show-ids 2>>$OUT/ids.log)
  b=$(timeout 60 /tmp/b/ts run -m $m --backend cuda -p hello -n 24 --temperature 0 --show-ids 2>>$OUT/ids.log)
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "ids $m: equal" || { echo "ids $m: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
done
bench/cuda/gpu_pairs.sh -o $REAL/ab-7b-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $REAL/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $REAL/ab-smol-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k 5 -p 0 -n 128 -r 3 /tmp/smol.gguf > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $REAL/ab-smol-tg.tsv
el end
