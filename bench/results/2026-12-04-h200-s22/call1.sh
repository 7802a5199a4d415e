#!/bin/bash
# Session 22 call 1: the int8 matvec's row groups dealt over every team slot (MVQ_BALANCE 1) against runs of
# gpt (the same tree built -DMVQ_BALANCE=0): bench_matvec 7B Q4_K/Q6_K with the hook forced both ways, ncu on
# the down projections, a CUPTI trace of a 7B decode with the copies (KTRACE_MEMCPY=1), and tg128 in
# alternating groups (gpu_pairs.sh -B) on the 7B and SmolLM2.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; cp $OUT/*-summary.md $OUT/ab-*.tsv $OUT/mv-*.txt $REAL/ 2>/dev/null; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tail -1
lscpu | grep -m1 'Model name' > $OUT/lscpu.txt
mkdir -p /tmp/deps /tmp/b; for f in .pb/deps/*.deb; do dpkg -x $f /tmp/deps; done
for f in ts ts-b0 bench_matvec; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
cp .pb/libktrace.so /tmp/b/; xz -dc .pb/libcupti.so.13.xz > /tmp/b/libcupti.so.13
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/b:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr; xz -dc .pb/smol.hdr.xz > /tmp/smol.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1 &
python3 bench/make_synthetic_dense.py /tmp/smol.hdr /tmp/smol.gguf > $OUT/synth-smol.log 2>&1 &
# bench_matvec while the files are made (GPU only; the synthesis is CPU)
for round in 1 2; do for bal in 0 1; do
  BENCH_MATVEC_BALANCE=$bal BENCH_MATVEC_BATCH=0 BENCH_MATVEC_PATHS=int8 timeout 100 /tmp/b/bench_matvec qwen2-7b Q4_K Q6_K > $OUT/mv-bal$bal-r$round.txt 2>&1
  el "bench_matvec bal=$bal round $round rc=$?"; grep -E "RESULT" $OUT/mv-bal$bal-r$round.txt | head -12
done; done
for bal in 0 1; do for t in Q6_K Q4_K; do
  BENCH_MATVEC_BALANCE=$bal BENCH_MATVEC_BATCH=0 BENCH_MATVEC_PATHS=int8 BENCH_MATVEC_MATS=down BENCH_QUICK=1 timeout 120 \
    ncu --clock-control none -k regex:mv_q_q8 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    /tmp/b/bench_matvec qwen2-7b $t > $OUT/ncu-down-$t-bal$bal.txt 2>&1
  el "ncu $t bal=$bal rc=$?"; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Grid Size|Registers|Issued Ipc|No Eligible" $OUT/ncu-down-$t-bal$bal.txt | head -12
done; done
wait; el "files"; tail -qn1 $OUT/synth-*.log
# greedy ids of the balanced build on cuda against cpu (synthetic SmolLM2 and 7B: 24 tokens)
for m in /tmp/smol.gguf /tmp/7b.gguf; do
  a=$(timeout 120 /tmp/b/ts run -m $m --backend cpu -p hello -n 24 --temperature 0 --show-ids 2>>$OUT/ids.log)
  b=$(timeout 60 /tmp/b/ts run -m $m --backend cuda -p hello -n 24 --temperature 0 --show-ids 2>>$OUT/ids.log)
  [ -n "$a" ] && [ "$a" = "$b" ] && echo "ids $m: equal" || { echo "ids $m: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
done
trace() { local tag=$1 bin=$2 m=$3; shift 3
  KTRACE_MEMCPY=1 CUDA_INJECTION64_PATH=/tmp/b/libktrace.so KTRACE_OUT=/tmp/$tag.tsv timeout 150 $bin bench -m $m --backend cuda -p 0 -n 128 -r 1 "$@" > $OUT/$tag.txt 2>&1
  el "$tag rc=$?"; grep -E "tg128|ktrace" $OUT/$tag.txt
  tps=$(awk -F'|' '/tg128/{split($8,a," "); print a[1]}' $OUT/$tag.txt)
  python3 bench/cuda/ktrace_summary.py /tmp/$tag.tsv --tok-s "$tps" --positions $OUT/$tag-pos.tsv > $OUT/$tag-summary.md 2>&1
  echo "summary rc=$?"; head -12 $OUT/$tag-summary.md; grep -iE "memcpy|copy|between" $OUT/$tag-summary.md | head
  xz -T8 -c /tmp/$tag.tsv > $OUT/$tag.tsv.xz; rm -f /tmp/$tag.tsv; }
trace 7b-bal /tmp/b/ts /tmp/7b.gguf
trace 7b-b0 /tmp/b/ts-b0 /tmp/7b.gguf
bench/cuda/gpu_pairs.sh -o $OUT/ab-7b-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-7b.log 2>&1
el "ab 7b rc=$?"; cat $OUT/ab-7b-tg.tsv
bench/cuda/gpu_pairs.sh -o $OUT/ab-smol-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-b0 -k 5 -p 0 -n 128 -r 3 /tmp/smol.gguf > $OUT/ab-smol.log 2>&1
el "ab smol rc=$?"; cat $OUT/ab-smol-tg.tsv
el end
