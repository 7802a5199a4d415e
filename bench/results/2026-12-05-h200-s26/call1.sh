#!/bin/bash
# Session 26 call 1: scripts/gpu-check.sh of the working tree (the logits destination per eval, TS_LOGITS_AUTO;
# the RoPE table made only when an op reads it), sanitizers on test_cuda_backend, while the synthetic files are made.
# Then tg128 of the new tree built on the dev box ("turbospark") against main's engine ("base", 628e92d), 5
# alternating groups on the 7B Q4_K_M synthetic, 3 on SmolLM2 and the 1.5B; then the device copy ceiling
# (bench_matvec) twice around a 7B bench run.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/summary.txt $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 585 - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)'
mkdir -p /tmp/b; for f in ts ts-b0; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
for h in 7b smol 1.5b; do xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr; done
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/1.5b.hdr /tmp/1.5b.gguf > $OUT/synth-1.5b.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1 ) &
SYN=$!
GPU_CHECK_SAN_ONLY=test_cuda_backend GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -18 $OUT/summary.txt; grep -E 'FAIL|DIFFER' $OUT/summary.txt | head
grep -hE 'kv f32|auto switching|FAIL' $OUT/tests.log $OUT/sanitizer.log 2>/dev/null | head -24
wait $SYN; el "files"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for m in /tmp/7b.gguf; do
  a=$(timeout 100 /tmp/b/ts run -m $m --backend cpu -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
  b=$(timeout 60 /tmp/b/ts run -m $m --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "ids $m: equal" || { echo "ids $m: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
done
ab() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $REAL/ab-$tag-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$tag.log 2>&1
  el "ab $tag rc=$?"; cat $REAL/ab-$tag-tg.tsv; }
ab 7b 5 /tmp/7b.gguf
ab smol 3 /tmp/smol.gguf
ab 1.5b 3 /tmp/1.5b.gguf
for i in 1 2; do
  BENCH_QUICK=0 build-cuda/bench_matvec none 2>&1 | grep -E 'copy' | head -2 | tee -a $REAL/roofline.txt
  [ $i = 1 ] && /tmp/b/ts bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 5 2>&1 | grep -E 'tg128|backend' | tee -a $REAL/roofline.txt
done
el end
