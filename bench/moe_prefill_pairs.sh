#!/usr/bin/env bash
# moe_prefill_pairs: MoE prompt processing (ppN) of two turbospark builds on
# one file, in alternating pairs (which build goes first alternates), for
# several expert residency modes. Used for the per-token -> grouped-by-expert
# prefill change (forward/moe.c); the rows are bench/results/*-moe-prefill/.
#
#   bench/moe_prefill_pairs.sh OLD_CLI NEW_CLI MODEL.gguf OUT.tsv [-p 512] [-t 2] [-n PAIRS] [--modes resident,s16,mapped]
#     modes: resident | mapped | sN (streamed, N slots per layer)
# Each run is `CLI bench -m MODEL -p P -n 0 -r 1 -t T --json` (one warm-up,
# one timed run, fresh seeded-random ids) under nice -n 19. The file is read
# once first (cat > /dev/null) so every mode starts from a warm page cache.
# Rows: mode pair order build tps expert_cache_line (tab-separated).
set -uo pipefail
me=moe_prefill_pairs
die() { echo "$me: error: $*" >&2; exit 1; }
[ $# -ge 4 ] || die "usage: $0 OLD_CLI NEW_CLI MODEL.gguf OUT.tsv [-p 512] [-t 2] [-n PAIRS] [--modes LIST]"
old=$1 new=$2 model=$3 out=$4
shift 4
p=512 t=2 pairs=5 modes=resident,s16,mapped
while [ $# -gt 0 ]; do
  case $1 in
    -p) p=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -n) pairs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
for b in "$old" "$new"; do [ -x "$b" ] || die "$b is not an executable"; done
[ -r "$model" ] || die "cannot read $model"
cat "$model" > /dev/null
tmp=$(mktemp -d) || die "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
printf 'mode\tpair\torder\tbuild\ttps\texpert_cache\n' > "$tmp/rows"
one() { # mode pair order label cli
  local args
  case $1 in
    resident|mapped) args="--expert-residency $1" ;;
    s[0-9]*) args="--expert-residency streamed --expert-cache-slots ${1#s}" ;;
    *) die "unknown mode '$1'" ;;
  esac
  nice -n 19 "$5" bench -m "$model" -p "$p" -n 0 -r 1 -t "$t" --json $args > "$tmp/o" 2> "$tmp/e" || die "$4 $1 failed: $(tail -1 "$tmp/e")"
  local tps line
  tps=$(grep -oE '"tps_mean": [0-9.]+' "$tmp/o" | awk '{print $2}')
  line=$(grep -m1 '^expert cache: [0-9]' "$tmp/e")
  [ -n "$tps" ] || die "$4 $1: no tps in the output"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$tps" "$line" >> "$tmp/rows"
  echo "$me: $1 pair $2 $4: $tps tok/s" >&2
}
IFS=, read -ra ml <<< "$modes"
for m in "${ml[@]}"; do
  for i in $(seq 1 "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then one "$m" "$i" 1 old "$old"; one "$m" "$i" 2 new "$new"
    else one "$m" "$i" 1 new "$new"; one "$m" "$i" 2 old "$old"; fi
  done
done
mv "$tmp/rows" "$out" || die "cannot write $out"
echo "$me: wrote $out" >&2
