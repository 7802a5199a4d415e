#!/bin/bash
# Session 26 call 3 (call 1 ran past 600 s: its sanitizer run of test_cuda_backend; its A/B stopped in group 4;
# call 2 got no machine; the device time left, ~880 s, does not hold the peer's ~470 s build as well). On a fresh
# machine: test_cuda_backend (built on the dev box from this tree, carried) with the auto session's prompt no longer compared
# against the all-logits session's first row (call 1's 15 failures: the test's error; memcheck clean); then tg128
# of the tree's engine (489db5e's) with the logits' default destination ("turbospark", TS_LOGITS_AUTO) against the
# same binary with --logits device ("device", main's behaviour), 5 alternating groups on the 7B, 3 on the 1.5B
# (SmolLM2's 612-byte head rows stay in device memory under auto); the CLI's greedy ids cuda = cpu on the 7B; a 7B
# bench run (-r 5) on the quiet machine.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( 590 - $(date +%s) + T0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
lscpu | grep -E 'Model name|^CPU\(s\)'
mkdir -p /tmp/b; for f in ts tcb; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
printf '#!/bin/sh\nexec /tmp/b/ts "$@" --logits device\n' > /tmp/b/ts-dev; chmod +x /tmp/b/ts-dev
mkdir -p .deps/root; for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
SP=""
for h in 7b smol 1.5b; do
  ( xz -dc .pb/$h.hdr.xz > /tmp/$h.hdr && python3 bench/make_synthetic_dense.py /tmp/$h.hdr /tmp/$h.gguf > $OUT/synth-$h.log 2>&1 ) &
  SP="$SP $!"
done
wait $SP
el files
mkdir -p /tmp/m; ln -sf /tmp/smol.gguf /tmp/m/SmolLM2-135M-Instruct.Q4_1.gguf
TS_MODEL_CACHE=/tmp/m /tmp/b/tcb > $OUT/test_cuda_backend.log 2>&1; el "test_cuda_backend rc=$?"
tail -1 $OUT/test_cuda_backend.log; grep -E 'CHECK failed' $OUT/test_cuda_backend.log | head -5
grep -E 'auto switching|kv f32' $OUT/test_cuda_backend.log | head -4
ab() { local tag=$1 k=$2 m=$3
  bench/cuda/gpu_pairs.sh -o $OUT/ab-$tag-tg.tsv -T /tmp/b/ts -B /tmp/b/ts-dev -k $k -p 0 -n 128 -r 3 $m > $OUT/ab-$tag.log 2>&1
  el "ab $tag rc=$?"; cat $OUT/ab-$tag-tg.tsv; }
ab 7b 5 /tmp/7b.gguf
ab 1.5b 3 /tmp/1.5b.gguf
a=$(timeout 100 /tmp/b/ts run -m /tmp/7b.gguf --backend cpu -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
b=$(timeout 60 /tmp/b/ts run -m /tmp/7b.gguf --backend cuda -p hello -n 16 --temperature 0 --show-ids 2>>$OUT/ids.log)
[ -n "$a" ] && [ "$a" = "$b" ] && echo "ids 7b: equal" || { echo "ids 7b: DIFFER"; echo "cpu: $a"; echo "cuda: $b"; }
/tmp/b/ts bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 5 2>&1 | grep -E 'tg128|backend' | tee $OUT/bench-7b.txt
el end
