#!/bin/bash
# Session 30: what callE.sh carries, made here (no GPU needed; ~10 min on 2 cores). .c30 is ignored by git
# (add /.c30/ to .git/info/exclude); the device call then carries only .c30 (the tracked tree is ~34 MB of the 64).
#   q6k     this tree's CLI with matvec_q8.cu recompiled -DMVQ_DIRECT_Q6K=1 (bench/cuda/knob_build.sh)
#   q6koff  this tree's CLI (Q6_K on the cp.async ring, the default)
#   test_cuda_matvec  built with the knob on (build-q6k), so the GPU run checks the direct loader
# Needs build-cuda (cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON), .deps (scripts/gpu-check.sh
# --fetch-deps) and .pb (bench/cuda/prep_headers.sh).
set -euo pipefail
mkdir -p /tmp/b .c30/debs
cmake --build build-cuda -j2 --target turbospark-cli
cp build-cuda/turbospark /tmp/b/q6koff
bench/cuda/knob_build.sh build-cuda /tmp/b/q6k src/compute/cuda/matvec_q8.cu -DMVQ_DIRECT_Q6K=1
cmake -S . -B build-q6k -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON -DCMAKE_CUDA_FLAGS=-DMVQ_DIRECT_Q6K=1 > /dev/null
cmake --build build-q6k -j2 --target test_cuda_matvec
cp build-q6k/test_cuda_matvec /tmp/b/
for d in .deps/*.deb; do case $d in *-dev_*) ;; *) cp "$d" .c30/debs/ ;; esac; done
cp .pb/7b.hdr.xz .c30/
(cd /tmp/b && tar -cf - q6k q6koff test_cuda_matvec | xz -T1 -9) > .c30/bins.tar.xz
du -sb .c30
