#!/bin/bash
# Session 19 call 3: streamed prefill before/after on the H200 without gpu-check: this tree's CLI and c9e933c's,
# built in parallel; the 30B-A3B at 32 slots from the file tier (page cache dropped) and at 8 slots (the top-k
# minimum: no room for a second pass, so both trees fetch one pass at a time: a control) from the host tier,
# alternating; resident pp512 once as the anchor.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
DR=$PWD/.deps/root; mkdir -p $DR; for f in .deps/*.deb; do dpkg -x "$f" $DR; done
LIBD=$DR/usr/lib/x86_64-linux-gnu
sed -i "s|^prefix=/usr\$|prefix=$DR/usr|" $LIBD/pkgconfig/*.pc; sed -i '/^Requires.private/d' $LIBD/pkgconfig/libmicrohttpd.pc
export PKG_CONFIG_PATH=$LIBD/pkgconfig LD_LIBRARY_PATH=$LIBD
GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
CF=(-DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DTS_CUDA_WERROR=OFF -DCJSON_INCLUDE_DIR=$DR/usr/include -DCJSON_LIBRARY=$LIBD/libcjson.so -DPCRE2_INCLUDE_DIR=$DR/usr/include -DPCRE2_LIBRARY=$LIBD/libpcre2-8.so)
mkdir -p /tmp/old && tar -C /tmp/old -xf .pb/old-c9e933c.tar
( cmake -S . -B /tmp/bnew "${GEN[@]}" "${CF[@]}" > $OUT/new-cmake.log 2>&1 && cmake --build /tmp/bnew -j8 --target turbospark-cli > $OUT/new-build.log 2>&1; echo "new rc=$?" >> $OUT/new-build.log ) &
( cd /tmp/old && cmake -S . -B /tmp/bold "${GEN[@]}" "${CF[@]}" > $OUT/old-cmake.log 2>&1 && cmake --build /tmp/bold -j8 --target turbospark-cli > $OUT/old-build.log 2>&1; echo "old rc=$?" >> $OUT/old-build.log )
wait; tail -1 $OUT/new-build.log $OUT/old-build.log; el builds
.pb/msm /tmp/moe30b.gguf --threads 14 --no-sync > $OUT/msm.log 2>&1; el "msm rc=$?"
M=/tmp/moe30b.gguf; NEW=/tmp/bnew/turbospark; OLD=/tmp/bold/turbospark
run() { log=$1; shift; echo "== $*" >> $OUT/$log; timeout 60 "$@" >> $OUT/$log 2>&1; el "$log: $(grep -E 'pp512' $OUT/$log | tail -1 | cut -c60-) $(grep -oE '[0-9]+ hits \([0-9.]+%\)' $OUT/$log | tail -1)"; }
for r in 1 2; do for b in NEW OLD; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  TURBOSPARK_EXPERT_NOCACHE=1 run file32-$b.log ${!b} bench -m $M --backend cuda --expert-residency streamed --expert-cache-slots 32 --gpu-expert-source file -p 512 -n 0 -r 1
done; done
for r in 1 2; do for b in NEW OLD; do
  run host8-$b.log ${!b} bench -m $M --backend cuda --expert-residency streamed --expert-cache-slots 8 --gpu-expert-source host -p 512 -n 0 -r 3
done; done
run resident-NEW.log $NEW bench -m $M --backend cuda -p 512 -n 0 -r 3
el end
