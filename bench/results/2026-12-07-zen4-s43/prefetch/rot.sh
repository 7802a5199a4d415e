#!/bin/bash
# rotation of engines: label=binary pairs; prints TSV rows round, pos, engine, threads, test, tps
M=${M:-/var/tmp/ts-bench-io/7b-synth-q4km.gguf}
R=${R:-5}
declare -a L B
for a in "$@"; do L+=("${a%%=*}"); B+=("${a#*=}"); done
n=${#L[@]}
echo -e "round\tpos\tengine\tthreads\ttest\ttps"
for r in $(seq 1 $R); do
  /work/main/build-rel/bench-cpu/membw -t 1,2 -r 3 2>&1 | grep threads | sed "s/^/# r$r before: /"
  for p in $(seq 0 $((n-1))); do
    i=$(( (p + r) % n ))
    for t in ${THREADS:-2 1}; do
      nt=$([ $t = 1 ] && echo 32 || echo 64)
      "${B[$i]}" bench -m "$M" -t $t -r 1 -p 0 -n $nt --json 2>/dev/null | python3 -c '
import json,sys
for x in json.load(sys.stdin): print("%s\t%s\t%s\t%s\t%s\t%.3f" % (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], x["test"], x["tps_mean"]))' $r $p ${L[$i]} $t
    done
  done
done
/work/main/build-rel/bench-cpu/membw -t 1,2 -r 3 2>&1 | grep threads | sed "s/^/# end: /"
