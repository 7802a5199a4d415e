#!/usr/bin/env bash
# prep_headers: the real GGUF headers (metadata, tokenizer, tensor table: the
# bytes before the tensor data) of the files the GPU side by side runs, xz'd
# into DIR (default .pb, ignored: add it to .git/info/exclude), from which
# bench/make_synthetic_dense.py makes the full-size files on the device
# machine (it has no internet, and the files are over what a call carries).
#
#   bench/cuda/prep_headers.sh [DIR]    -> DIR/{7b,1.5b,smol}.hdr.xz (~3 MB)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.pb}
mkdir -p "$out"
python3 -c 'import numpy' 2>/dev/null || { echo "prep_headers: error: python3 needs numpy (make_synthetic_dense.py imports it)" >&2; exit 1; }
for p in "7b deepseek-r1-7b-partial" "1.5b qwen2.5-coder-1.5b" "smol smollm2"; do
    set -- $p
    f=$(scripts/fetch_models.sh "$2" | tail -1)
    n=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import make_synthetic_dense as m; print(m.read_header(sys.argv[1])[1])' "$f")
    head -c "$n" "$f" | xz -T2 -c >"$out/$1.hdr.xz.tmp" && mv "$out/$1.hdr.xz.tmp" "$out/$1.hdr.xz"
    echo "prep_headers: $out/$1.hdr.xz: the first $n bytes of $(basename "$f")"
done
