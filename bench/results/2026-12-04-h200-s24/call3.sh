#!/bin/bash
# Session 24 call 3: (a) a control for call 2's method: "ctl" = call 1's tree with matvec_q8.cu recompiled and
# relinked exactly as call 2's variants but with no -D, tg128 A/B against call 1's binary ("base"), 5 alternating
# groups on the 7B; (b) the roofline in the same call: bench_matvec's device copy ceiling (1 GiB d2d, read + write)
# before, between and after three `turbospark bench --backend cuda -p 0 -n 128 -r 5` runs of the 7B Q4_K_M synthetic.
set -u
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
pack() { tar -C /tmp -czf $REAL/o.tgz o; }
trap pack EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/b; for f in ts ctl bench_matvec; do xz -dc .pb/$f.xz > /tmp/b/$f; chmod +x /tmp/b/$f; done
xz -dc .pb/7b.hdr.xz > /tmp/7b.hdr
python3 bench/make_synthetic_dense.py /tmp/7b.hdr /tmp/7b.gguf > $OUT/synth-7b.log 2>&1; el "7b file"
mkdir -p .deps/root; for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done  # the binaries' cJSON, PCRE2, libmicrohttpd
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
bench/cuda/gpu_pairs.sh -o $REAL/ab-ctl-7b-tg.tsv -T /tmp/b/ctl -B /tmp/b/ts -k 5 -p 0 -n 128 -r 3 /tmp/7b.gguf > $OUT/ab-ctl-7b.log 2>&1
el "ab ctl rc=$?"; cat $REAL/ab-ctl-7b-tg.tsv
for i in 1 2 3; do
  BENCH_QUICK=0 /tmp/b/bench_matvec none 2>&1 | grep -E '^copy|copy' | head -2 | tee -a $REAL/roofline.txt
  /tmp/b/ts bench -m /tmp/7b.gguf --backend cuda -p 0 -n 128 -r 5 2>&1 | tail -3 | tee -a $REAL/roofline.txt
done
BENCH_QUICK=0 /tmp/b/bench_matvec none 2>&1 | grep -E 'copy' | head -2 | tee -a $REAL/roofline.txt
el end
