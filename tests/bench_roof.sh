#!/usr/bin/env bash
# bench-cpu/roof as a user meets it: a short run on the tiny dense fixture prints its two summary lines with
# numbers and writes one row a token; -S runs; a MoE model, a window that can sit in a cache, too few tokens,
# a buffer under two windows and a missing file are each refused with one error line and exit 1, nothing on
# stdout. The shares are timings and are not judged here (on the tiny model a token's bytes sit in cache).
roof=$1; fix=$2
. "$(dirname "$0")/lib.sh"
M="$fix/ref/tiny-llama-f32.gguf"; MOE="$fix/ref/tiny-qwen3moe-f32.gguf"

num='[0-9]+\.[0-9]+'
"$roof" -m "$M" -t 2 -n 8 -w 64 -b 128 -o "$tmp/rows.tsv" >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 0 ] && ok || bad "run: rc=$rc $(cat "$tmp/e")"
grep -Eq "^roof: decode $num GB/s \($num tok/s\), probe $num GB/s, share $num%; per token median $num% \(p10 $num, p90 $num\), [0-9]+ of 8 tokens above 100%$" "$tmp/o" \
  && ok || bad "run: no whole-run line in [$(cat "$tmp/o")]"
grep -Eq "^roof: top quarter by the neighbours' probes \([0-9]+ tokens, >= $num GB/s around them\): decode $num GB/s, probe $num GB/s, share $num%$" "$tmp/o" \
  && ok || bad "run: no quarter line in [$(cat "$tmp/o")]"
# a header and one row a token, each with its 8 fields
[ "$(wc -l <"$tmp/rows.tsv")" -eq 9 ] && [ "$(awk -F'\t' 'NF != 8' "$tmp/rows.tsv" | wc -l)" -eq 0 ] && ok || bad "rows: $(head -3 "$tmp/rows.tsv")"
"$roof" -m "$M" -t 1 -n 8 -w 64 -b 128 -S >"$tmp/o" 2>"$tmp/e" && grep -q "^roof: self-test " "$tmp/o" && ok || bad "-S: $(cat "$tmp/o" "$tmp/e")"

expect_err "MoE" "is a MoE model" -- "$roof" -m "$MOE" -n 8 -w 64 -b 128
expect_err "window in cache" "-w wants an integer in 64.." -- "$roof" -m "$M" -w 32
expect_err "too few tokens" "-n wants an integer in 8.." -- "$roof" -m "$M" -n 3
expect_err "buffer under two windows" "under two windows" -- "$roof" -m "$M" -w 100 -b 128
expect_err "missing model" "$tmp/none.gguf" -- "$roof" -m "$tmp/none.gguf"
expect_err "no model" "no model given" -- "$roof"

finish
