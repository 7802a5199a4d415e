#!/usr/bin/env bash
# gpu_pairs: turbospark --backend cuda and llama.cpp's llama-bench (CUDA,
# all layers on the GPU, flash attention on), or another turbospark build
# (-B), on the same file, in rotating order: group i runs the engines
# starting from engine i mod n, so each goes first in turn. One process per engine and group runs pp and tg together (a
# 17 GB file is loaded once per run, not once per test; each test in its own context of N + 1, as llama-bench's), each with one
# untimed warm-up and REPS timed runs (llama-bench's method for both).
# docs/BENCHMARKS.md records runs; commit the TSV under bench/results/.
#
#   bench/cuda/gpu_pairs.sh -o OUT.tsv -T TURBOSPARK [-L LLAMA_BENCH] [-B BASE_TURBOSPARK] [-k 5]
#                           [-p 512] [-n 128] [-r 3] [-a "TS ARGS"] [-l "LLAMA ARGS"] MODEL
#     -T PATH   turbospark binary (run as: PATH bench --backend cuda ...)
#     -L PATH   llama-bench built with CUDA, outside the repository; without
#               it only turbospark runs (and the TSV says so: no pairs)
#     -B PATH   a second turbospark build (e.g. the parent commit's, built beside
#               this one): engine "base", run with the same arguments, so an
#               A/B of two trees gets the same alternating method
#     -a ARGS   extra turbospark bench arguments (e.g. "--expert-residency resident")
#     -l ARGS   extra llama-bench arguments (default "-ngl 99 -fa 1")
# Output rows (TSV): model test group pos engine tps_mean tps_sd reps
set -uo pipefail
me=gpu_pairs
die() { echo "$me: error: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }
out='' ts='' llama='' base='' pairs=5 np=512 nt=128 reps=3 ts_args='' llama_args='-ngl 99 -fa 1'
while [ $# -gt 0 ]; do
    case $1 in
        -o) out=${2:?}; shift 2 ;;
        -T) ts=${2:?}; shift 2 ;;
        -L) llama=${2:?}; shift 2 ;;
        -B) base=${2:?}; shift 2 ;;
        -k) pairs=${2:?}; shift 2 ;;
        -p) np=${2:?}; shift 2 ;;
        -n) nt=${2:?}; shift 2 ;;
        -r) reps=${2:?}; shift 2 ;;
        -a) ts_args=${2?}; shift 2 ;;
        -l) llama_args=${2?}; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option '$1' (see -h)" ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || die "one MODEL expected (see -h)"
model=$1
[ -f "$model" ] || die "'$model' is not a file"
[ -n "$out" ] || die "-o OUT.tsv is required"
[ -x "$ts" ] || die "turbospark '$ts' not executable (-T)"
[ -z "$llama" ] || [ -x "$llama" ] || die "llama-bench '$llama' not executable (-L)"
[ -z "$base" ] || [ -x "$base" ] || die "base turbospark '$base' not executable (-B)"
for v in pairs reps; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "bad value '${!v}' for $v"
done
for v in np nt; do # 0: that test is not run (-p 0: tg only)
    [[ ${!v} =~ ^[0-9]+$ ]] || die "bad value '${!v}' for $v"
done
[ "$np" -ge 1 ] || [ "$nt" -ge 1 ] || die "-p 0 and -n 0: nothing to run"
names=(turbospark) ne=1
[ -n "$llama" ] && names+=(llama.cpp) && ne=$((ne + 1))
[ -n "$base" ] && names+=(base) && ne=$((ne + 1))
mname=$(basename "$model" .gguf)
[ -s "$out" ] || printf 'model\ttest\tgroup\tpos\tengine\ttps_mean\ttps_sd\treps\n' >"$out"
tmp=$(mktemp -d) || die "mktemp"
trap 'rm -rf "$tmp"' EXIT
run_one() { # engine-index group pos
    local i=$1 g=$2 pos=$3 rc
    if [ "${names[$i]}" = llama.cpp ]; then
        # shellcheck disable=SC2086
        "$llama" -m "$model" -p "$np" -n "$nt" -r "$reps" $llama_args -o jsonl >"$tmp/o.json" 2>"$tmp/e.txt"
    else
        local bin=$ts
        [ "${names[$i]}" = base ] && bin=$base
        # shellcheck disable=SC2086
        "$bin" bench -m "$model" --backend cuda -p "$np" -n "$nt" -r "$reps" $ts_args --json >"$tmp/o.json" 2>"$tmp/e.txt"
    fi
    rc=$?
    if [ $rc -ne 0 ]; then
        log "${names[$i]} group $g failed (exit $rc): $(tail -2 "$tmp/e.txt" | tr '\n' ' ')"
        fails=$((fails + 1))
        return
    fi
    # this run's rows, logged as they are appended (one row a test: with -p 0 or -n 0 only one)
    python3 - "$tmp/o.json" "$mname" "$g" "$pos" "${names[$i]}" "$reps" >"$tmp/rows" <<'PY' || { log "cannot parse output of ${names[$i]}"; fails=$((fails + 1)); return; }
import json, sys
f, model, g, pos, eng, reps = sys.argv[1:]
txt = open(f).read().strip()
rows = json.loads(txt) if txt.startswith("[") else [json.loads(l) for l in txt.splitlines() if l.strip().startswith("{")]
for r in rows:
    mean = r.get("tps_mean", r.get("avg_ts"))
    sd = r.get("tps_sd", r.get("stddev_ts"))
    name = r.get("test") or ("pp%d" % r["n_prompt"] if r.get("n_prompt") else "tg%d" % r["n_gen"])
    print("\t".join(map(str, [model, name, g, pos, eng, "%.4f" % mean, "%.4f" % sd, reps])))
PY
    [ -s "$tmp/rows" ] || { log "${names[$i]} group $g gave no rows"; fails=$((fails + 1)); return; }
    cat "$tmp/rows" >>"$out"
    awk -F'\t' '{printf "'$me': group %s %-10s %s: %.1f ± %.1f t/s\n", $3, $5, $2, $6, $7}' "$tmp/rows" >&2
}
fails=0 # runs that failed or gave no rows: the exit status says so after the summary of the rest
for g in $(seq 1 "$pairs"); do
    for k in $(seq 0 $((ne - 1))); do
        run_one $(( (g - 1 + k) % ne )) "$g" "$k"
    done
done
python3 - "$out" "$mname" <<'PY' >&2
import sys, statistics, collections
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
by = collections.defaultdict(list)
grp = collections.defaultdict(dict) # (test, engine) -> {group: t/s}
for r in rows:
    if r[0] == sys.argv[2]:
        by[(r[1], r[4])].append(float(r[5]))
        grp[(r[1], r[4])][r[2]] = float(r[5])
for (t, e), v in sorted(by.items()):
    print(f"gpu_pairs: {t} {e:10} median {statistics.median(v):9.1f} t/s over {len(v)} groups")
# turbospark against each other engine, group by group (the same group ran them back to back)
for (t, e), other in sorted(grp.items()):
    ours = grp.get((t, "turbospark"), {})
    q = [ours[g] / other[g] for g in ours if g in other and other[g] > 0]
    if e != "turbospark" and q:
        print(f"gpu_pairs: {t} turbospark / {e}: {statistics.median(q):.3f}x median ({min(q):.3f}..{max(q):.3f}) over {len(q)} groups")
PY
log "rows in $out"
[ "$fails" -eq 0 ] || die "$fails of $((pairs * ne)) runs failed; their rows are missing from $out"
