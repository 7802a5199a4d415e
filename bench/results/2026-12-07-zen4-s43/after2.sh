# session 43, at 999a86f (chunk pairs + far prefetch; c550434 plus a test fix): the 7B tg128 pair at the avx512 level with the unpaired
# build (-DTS_KQ_PAIR=0, the same tree) as a third engine, then the machine and roof parts at both levels
cd /work/main
O=bench/results/2026-12-07-zen4-s43/targets-head; mkdir -p $O
TS_FORCE_ISA=avx512 bench/pair_bench.sh -o $O/dense-7b-avx512.tsv -L /work/peer/b-native/bin/llama-bench -e turbospark=build-rel/turbospark -e nopk=/var/tmp/build-nopk/turbospark -t 2 -k 5 -n 128 --tg-reps 1 --tests tg /var/tmp/ts-bench-io/7b-synth-q4km.gguf > $O/dense-7b-avx512.log 2>&1
bench/.ct-run.sh -L /work/peer/b-native/bin/llama-bench -A /work/peer/b-avx2/bin/llama-bench -o $O machine roof > $O/ct.log 2>&1
echo AFTER2_DONE
