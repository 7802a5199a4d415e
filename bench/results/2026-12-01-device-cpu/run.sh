#!/usr/bin/env bash
# device host CPU: old (e794333, before the engine API) vs new (HEAD) turbospark bench pairs
set -u; cd "$(dirname "$0")/.."; t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*\(avx512[a-z_]*\).*/Flags: ... avx512 .../' | tee $OUT/machine.txt
grep -o 'avx512[a-z_0-9]*\|avx2\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ' >> $OUT/machine.txt; echo >> $OUT/machine.txt
DR=$PWD/.deps/root; LIBD=$DR/usr/lib/x86_64-linux-gnu; mkdir -p $DR
for f in .deps/*.deb; do dpkg -x $f $DR; done
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; export PKG_CONFIG_PATH=$LIBD/pkgconfig LD_LIBRARY_PATH=$LIBD
CFG="-DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF -DCJSON_INCLUDE_DIR=$DR/usr/include -DCJSON_LIBRARY=$LIBD/libcjson.so -DPCRE2_INCLUDE_DIR=$DR/usr/include -DPCRE2_LIBRARY=$LIBD/libpcre2-8.so"
(cmake -S . -B /tmp/bn $CFG && cmake --build /tmp/bn -j16 --target turbospark-cli) > $OUT/build.log 2>&1 || { el new build failed; tail -20 $OUT/build.log; exit 1; }
(cmake -S .old -B /tmp/bo $CFG && cmake --build /tmp/bo -j16 --target turbospark-cli) >> $OUT/build.log 2>&1 || { el old build failed; tail -20 $OUT/build.log; exit 1; }
el built
cc -O3 -march=native -pthread -o /tmp/membw bench/membw.c && /tmp/membw -t 1,8,16 -r 3 | tee -a $OUT/machine.txt
python3 bench/make_synthetic_dense.py .deps/SmolLM2-135M-Instruct.Q4_1.header.gguf /tmp/smol.gguf > /dev/null && python3 bench/make_synthetic_dense.py .deps/7b.header.gguf /tmp/7b.gguf > /dev/null || { el synth failed; exit 1; }
el synth done
for T in 16; do
bench/cpu_pairs.sh /tmp/bo/turbospark /tmp/bn/turbospark /tmp/smol.gguf $T 5 -p 512 -n 128 | sed "s/^/smollm2-synth\t$T\t/" | tee -a $OUT/pairs.tsv
el smol
bench/cpu_pairs.sh /tmp/bo/turbospark /tmp/bn/turbospark /tmp/7b.gguf $T 5 -p 512 -n 128 | sed "s/^/7b-synth\t$T\t/" | tee -a $OUT/pairs.tsv
el 7b
done
