#!/usr/bin/env bash
# Before/after pairs of `turbospark bench` on one file: A and B alternate which
# goes first in each pair (A B, B A, ...), same threads and the same (the
# engine's only) thread wait policy, one load per run. Prints one TSV row
# per run: pair, position, engine, test, tok/s.
#   bench/cpu_pairs.sh A_BIN B_BIN MODEL THREADS PAIRS [bench args...]
set -u
A=$1 B=$2 M=$3 T=$4 N=$5; shift 5
printf 'pair\tpos\tengine\ttest\ttps\n'
one() { # engine-label binary pair pos [bench args...]
  local lab=$1 bin=$2 pair=$3 pos=$4; shift 4
  "$bin" bench -m "$M" -t "$T" -r 1 "$@" --json 2>/dev/null | python3 -c '
import json, sys
lab, pair, pos = sys.argv[1:4]
for r in json.load(sys.stdin):
    print("%s\t%s\t%s\t%s\t%.2f" % (pair, pos, lab, r["test"], r["tps_mean"]))
' "$lab" "$pair" "$pos"
}
for i in $(seq 1 "$N"); do
  if [ $((i % 2)) = 1 ]; then one A "$A" "$i" 0 "$@"; one B "$B" "$i" 1 "$@"
  else one B "$B" "$i" 0 "$@"; one A "$A" "$i" 1 "$@"; fi
done
