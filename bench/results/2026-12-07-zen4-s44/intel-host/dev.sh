#!/bin/bash
# session 44 device call: bench/roof (the decode with a membw read after every token) on the device's host CPU, against
# the old method (membw before and after a tg128) and `turbospark bench`'s own tok/s. Carries .s44 (roof and membw
# built -march=x86-64-v4, the CPU-only Release turbospark of the working tree, the DeepSeek-R1-Distill-Qwen-7B Q4_K_M
# header, runtime debs).
set -u
S=$(date +%s)
t() { echo "[$(( $(date +%s) - S )) s] $*" >> $OUT/times.txt; }
lscpu > $OUT/lscpu.txt
mkdir -p .s44/root && for f in .s44/deps/*.deb; do dpkg -x "$f" .s44/root; done
export LD_LIBRARY_PATH=$PWD/.s44/root/usr/lib/x86_64-linux-gnu:$PWD/.s44/root/lib/x86_64-linux-gnu
t start
python3 bench/make_synthetic_dense.py .s44/ds7b.header.gguf /tmp/7b.gguf > $OUT/synth.log 2>&1 || { echo synth failed; cat $OUT/synth.log; exit 1; }
cat /tmp/7b.gguf > /dev/null
t synth
R=.s44/roof M=/tmp/7b.gguf
for th in 16 2; do
    $R -m $M -t $th -n 32 -S -o $OUT/selftest-t$th.tsv >> $OUT/roof.txt 2>&1
    t "selftest $th"
done
for rep in 1 2 3; do
    for th in 16 2; do
        echo "== rep $rep threads $th" >> $OUT/old.txt
        .s44/membw -t $th -r 10 >> $OUT/old.txt 2>&1
        .s44/turbospark bench -m $M -t $th -p 0 -n 128 -r 1 >> $OUT/old.txt 2>&1
        .s44/membw -t $th -r 10 >> $OUT/old.txt 2>&1
        echo "== rep $rep threads $th" >> $OUT/roof.txt
        $R -m $M -t $th -n 128 -o $OUT/roof-t$th-r$rep.tsv >> $OUT/roof.txt 2>&1
        t "rep $rep threads $th"
    done
done
for th in 16 2; do
    echo "== avx2 threads $th" >> $OUT/roof.txt
    TS_FORCE_ISA=avx2 $R -m $M -t $th -n 128 -o $OUT/roof-avx2-t$th.tsv >> $OUT/roof.txt 2>&1
    t "avx2 $th"
done
