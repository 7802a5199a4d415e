#!/usr/bin/env bash
# pair_bench: turbospark binaries (e.g. before/after a change) and llama.cpp's
# llama-bench on the same file, pp and tg, in rotating order, so that each
# group of runs shares the machine's load; ratios are taken within a group.
# docs/BENCHMARKS.md ("CPU prefill GEMM") records a run.
#
#   bench/pair_bench.sh -o OUT.tsv -L LLAMA_BENCH [-e NAME=TURBOSPARK_BIN]...
#                       [-t 2] [-k 5] [-p 512] [-n 128] [--pp-reps 3] [--tg-reps 3]
#                       [--tests pp,tg] [-g FIRST] [--cold] MODEL
#     -e NAME=BIN    a turbospark binary under a label (repeatable), e.g.
#                    -e before=/work/bin/turbospark-before -e after=build/turbospark
#     -L PATH        llama-bench, built by hand outside the repository (bench/README.md)
#     -k PAIRS       groups (default 5); group i starts with engine i mod E, so
#                    every engine goes first in turn
#     -g FIRST       number the groups from FIRST (default 1), to continue an
#                    interrupted run in the same OUT.tsv (rotation follows the number)
#     --cold         drop MODEL from the page cache before every run of every
#                    engine (fadvise DONTNEED), so each process brings the file
#                    in itself: on kernels with a large-folio page cache the way
#                    pages first come in changes decode speed (docs/BENCHMARKS.md,
#                    session 11); without it the file is read once up front
#     MODEL          a GGUF path
# Thread wait policy, the same for both engines: spin for at most 20000
# relax iterations, then block in the kernel (turbospark's pool: TS_POOL_SPIN
# 20000 with sched_yield every 1024; libgomp: GOMP_SPINCOUNT=20000, set here).
# Each run is a separate process with one untimed warm-up and REPS timed runs
# (llama-bench's method for both: ppN = one batch of N random tokens into an
# empty context, tgN = N single-token decodes). The 1-minute load average is
# read before and after every run and `uptime` is logged per group.
# Output rows (TSV): model test group pos engine tps_mean tps_sd reps load_before load_after
set -uo pipefail
me=pair_bench
die() { echo "$me: error: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }

out='' llama='' first=1 threads=2 pairs=5 np=512 nt=128 ppr=3 tgr=3 tests=pp,tg cold=0
names=() bins=()
while [ $# -gt 0 ]; do
    case $1 in
        -o) out=${2:?}; shift 2 ;;
        -L) llama=${2:?}; shift 2 ;;
        -e) names+=("${2%%=*}"); bins+=("${2#*=}"); shift 2 ;;
        -t) threads=${2:?}; shift 2 ;;
        -k) pairs=${2:?}; shift 2 ;;
        -g) first=${2:?}; shift 2 ;;
        -p) np=${2:?}; shift 2 ;;
        -n) nt=${2:?}; shift 2 ;;
        --pp-reps) ppr=${2:?}; shift 2 ;;
        --tg-reps) tgr=${2:?}; shift 2 ;;
        --tests) tests=${2:?}; shift 2 ;;
        --cold) cold=1; shift ;;
        -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option '$1' (see -h)" ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || die "one MODEL expected (see -h)"
model=$1
[ -f "$model" ] || die "'$model' is not a file"
[ -n "$out" ] || die "-o OUT.tsv is required"
[ -x "$llama" ] || die "llama-bench '$llama' not executable (-L)"
[ ${#bins[@]} -ge 1 ] || die "no turbospark binary (-e NAME=BIN)"
for b in "${bins[@]}"; do [ -x "$b" ] || die "'$b' not executable"; done
for v in first threads pairs np nt ppr tgr; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "bad value '${!v}' for $v"
done
[[ $tests =~ ^(pp|tg)(,(pp|tg))?$ ]] || die "bad --tests '$tests'"
names+=(llama.cpp) bins+=("$llama")
ne=${#names[@]}
export GOMP_SPINCOUNT=20000
unset OMP_WAIT_POLICY
load1() { cut -d' ' -f1 /proc/loadavg; }
mname=$(basename "$model" .gguf)
[ -s "$out" ] || printf 'model\ttest\tgroup\tpos\tengine\ttps_mean\ttps_sd\treps\tload_before\tload_after\n' > "$out"
[ $cold = 1 ] || cat "$model" > /dev/null
tmp=$(mktemp -d) || die "mktemp"
trap 'rm -rf "$tmp"' EXIT

run_one() { # engine-index test group pos
    local i=$1 test=$2 g=$3 pos=$4 pf nf reps l0 l1 rc
    if [ "$test" = pp ]; then pf=$np nf=0 reps=$ppr; else pf=0 nf=$nt reps=$tgr; fi
    [ $cold = 1 ] && { dd if="$model" iflag=nocache count=0 status=none || log "cannot drop $model from the page cache"; }
    l0=$(load1)
    if [ "${names[$i]}" = llama.cpp ]; then
        "${bins[$i]}" -m "$model" -p "$pf" -n "$nf" -r "$reps" -t "$threads" -o json > "$tmp/o.json" 2> "$tmp/e.txt"
    else
        "${bins[$i]}" bench -m "$model" -p "$pf" -n "$nf" -r "$reps" -t "$threads" --json > "$tmp/o.json" 2> "$tmp/e.txt"
    fi
    rc=$?
    l1=$(load1)
    if [ $rc -ne 0 ]; then log "${names[$i]} $test group $g failed (exit $rc): $(tail -1 "$tmp/e.txt")"; return; fi
    python3 - "$tmp/o.json" "$mname" "$g" "$pos" "${names[$i]}" "$reps" "$l0" "$l1" >> "$out" <<'PY' || log "cannot parse output of ${names[$i]}"
import json, sys
f, model, g, pos, eng, reps, l0, l1 = sys.argv[1:]
txt = open(f).read().strip()
rows = json.loads(txt) if txt.startswith("[") else [json.loads(l) for l in txt.splitlines() if l.strip()]
r = rows[0]
mean = r.get("tps_mean", r.get("avg_ts"))
sd = r.get("tps_sd", r.get("stddev_ts"))
# turbospark names the test; llama-bench gives n_prompt / n_gen
name = r.get("test") or ("pp%d" % r["n_prompt"] if r.get("n_prompt") else "tg%d" % r["n_gen"])
print("\t".join(map(str, [model, name, g, pos, eng, "%.4f" % mean, "%.4f" % sd, reps, l0, l1])))
PY
    tail -1 "$out" | awk -F'\t' '{printf "'$me': group %s %-10s %s: %.2f ± %.2f t/s (load %s -> %s)\n", $3, $5, $2, $6, $7, $9, $10}' >&2
}

for g in $(seq "$first" $((first + pairs - 1))); do
    log "group $g: $(uptime)"
    for test in ${tests//,/ }; do
        for k in $(seq 0 $((ne - 1))); do
            run_one $(( (g - 1 + k) % ne )) "$test" "$g" "$k"
        done
    done
done
log "rows in $out"
