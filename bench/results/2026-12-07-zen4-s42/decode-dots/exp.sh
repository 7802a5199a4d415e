set -e
cd /work/main
B=build-exp
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF >/dev/null
variant() { # name nacc bcast prefetch
  sed -i "s/^#define KQ_NACC .*/#define KQ_NACC $2/; s/^#define KQ_BCAST .*/#define KQ_BCAST $3/" src/tensor/quant_x86.h
  sed -i "s/^#define TS_K_PREFETCH .*/#define TS_K_PREFETCH $4/" src/tensor/quant.h
  cmake --build $B -j2 --target turbospark-cli cpubench_bench_kernels >/dev/null
  cp $B/turbospark /tmp/s42/$1-turbospark; cp $B/bench-cpu/bench_kernels /tmp/s42/$1-bench_kernels
  echo built $1
}
variant C 1 1 2048
variant D 4 1 2048
variant E 2 1 4096
variant F 2 0 2048
variant B 2 1 2048
git diff --stat
M7=/var/tmp/ts-bench-io/7b-synth-q4km.gguf
for r in 1 2 3; do
  for v in A B C D E F; do
    echo "== kern r$r $v"; /tmp/s42/$v-bench_kernels 256 Q4_K Q5_K Q6_K | grep -v scalar
  done
done > /tmp/s42/exp-kern.txt 2>&1
for r in 1 2 3; do
  vs="A B C D E F"; for i in $(seq 1 $r); do vs="${vs#* } ${vs%% *}"; done
  for v in $vs; do
    printf '%s\t%s\t' $r $v; /tmp/s42/$v-turbospark bench -m $M7 -t 2 -p 0 -n 64 -r 1 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["tps_mean"])'
  done
done > /tmp/s42/exp-tg.tsv 2>&1
echo EXP_DONE
