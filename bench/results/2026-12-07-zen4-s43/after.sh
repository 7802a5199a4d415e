cd /work/main
O=bench/results/2026-12-07-zen4-s43/targets
TS_FORCE_ISA=avx512 bench/pair_bench.sh -o $O/dense-7b-avx512.tsv -L /work/peer/b-native/bin/llama-bench -e turbospark=build-rel/turbospark -e near=/tmp/s43/near.sh -t 2 -k 5 -n 128 --tg-reps 1 --tests tg /var/tmp/ts-bench-io/7b-synth-q4km.gguf > $O/dense-7b-avx512.log 2>&1
TS_FORCE_ISA=avx2 bench/pair_bench.sh -o $O/dense-7b-avx2.tsv -L /work/peer/b-avx2/bin/llama-bench -e turbospark=build-rel/turbospark -e near=/tmp/s43/near.sh -t 2 -k 5 -n 128 --tg-reps 1 --tests tg /var/tmp/ts-bench-io/7b-synth-q4km.gguf > $O/dense-7b-avx2.log 2>&1
bench/.ct-run.sh -L /work/peer/b-native/bin/llama-bench -A /work/peer/b-avx2/bin/llama-bench -o $O machine roof moe > $O/ct.log 2>&1
echo AFTER_DONE
