cd /work/main
O=bench/results/2026-12-07-zen4-s42/targets-after; mkdir -p $O
TS_FORCE_ISA=avx512 bench/pair_bench.sh -o $O/dense-7b-avx512.tsv -L /work/peer/b-native/bin/llama-bench -e turbospark=build-rel/turbospark -e base=/tmp/s42/A-turbospark -t 2 -k 5 -n 128 --tg-reps 1 --tests tg /var/tmp/ts-bench-io/7b-synth-q4km.gguf > $O/dense-7b-avx512.log 2>&1
bench/.ct-run.sh -L /work/peer/b-native/bin/llama-bench -A /work/peer/b-avx2/bin/llama-bench -o $O -l avx512 roof > $O/ct-roof.log 2>&1
bench/.ct-run.sh -L /work/peer/b-native/bin/llama-bench -A /work/peer/b-avx2/bin/llama-bench -o bench/results/2026-12-07-zen4-s42/targets moe cap > bench/results/2026-12-07-zen4-s42/targets/ct-moe-cap.log 2>&1
echo AFTER_DONE
