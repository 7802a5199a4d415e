#!/bin/bash
# session 44 second device call: the 7B decode at 16 threads on the device host's Xeon at three kernel levels (amx,
# the dispatcher's default; avx512; avx2), after the first call's one AVX2 round beat three amx ones. 4 rounds, the
# order rotating by round; `turbospark bench -p 0 -n 128 -r 1`, one process a run. Carries .s44 as dev.sh.
set -u
S=$(date +%s)
t() { echo "[$(( $(date +%s) - S )) s] $*" >> $OUT/times.txt; }
mkdir -p .s44/root && for f in .s44/deps/*.deb; do dpkg -x "$f" .s44/root; done
export LD_LIBRARY_PATH=$PWD/.s44/root/usr/lib/x86_64-linux-gnu:$PWD/.s44/root/lib/x86_64-linux-gnu
python3 bench/make_synthetic_dense.py .s44/ds7b.header.gguf /tmp/7b.gguf > /dev/null 2>&1 || { echo synth failed; exit 1; }
cat /tmp/7b.gguf > /dev/null
t synth
printf 'round\tlevel\ttg128_tps\n' > $OUT/levels-t16.tsv
lv=(amx avx512 avx2)
for r in 0 1 2 3; do
    for k in 0 1 2; do
        l=${lv[$(( (r + k) % 3 ))]}
        tps=$(TS_FORCE_ISA=$l .s44/turbospark bench -m /tmp/7b.gguf -t 16 -p 0 -n 128 -r 1 2>>$OUT/bench.log | awk -F'|' '/tg128/{print $8}' | awk '{print $1}')
        printf '%s\t%s\t%s\n' $r $l "$tps" >> $OUT/levels-t16.tsv
    done
    t "round $r"
done
