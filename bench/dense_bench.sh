#!/usr/bin/env bash
# dense_bench: turbospark against the llama.cpp peer on dense GGUF models,
# pp and tg, alternating the engines back to back so that each pair shares
# the machine's load; plus the memory-bandwidth roofline for tg.
# docs/BENCHMARKS.md records a run ("Dense models on the CPU").
#
#   bench/dense_bench.sh [-B BUILD] [-d WORKDIR] [-t THREADS] [-p 512] [-n 128]
#                        [-k PAIRS] [--tests pp,tg] [--no-build] MODEL[:REPS] ...
#     MODEL       a GGUF path or a scripts/fetch_models.sh name (smollm2, ...)
#     :REPS       timed repetitions per run for this model (default 5)
#     -B BUILD    turbospark build directory (default build; built if missing)
#     -d WORKDIR  results go to WORKDIR/run-STAMP/ (default /var/tmp/ts-dense-bench)
#     -t THREADS  threads for both engines (default 2)
#     -p N, -n N  pp and tg token counts (defaults 512, 128)
#     -k PAIRS    A/B pairs per model and test (default 2)
#     --tests     which of pp,tg to run (default both)
#
# Protocol, per model: read the file once (page cache), then PAIRS times
#   for test in pp, tg: turbospark bench --json, then peer_llamacpp.py bench -o json
# each run a separate process: one untimed warm-up, REPS timed runs, mean ± sd
# of tokens/s (both tools use llama-bench's method: ppN = one batched prefill
# of N random ids from an empty context, tgN = N single-token decodes from an
# empty context). The ratio turbospark / llama.cpp is taken per pair; the
# machine is shared, so only ratios within a pair are meaningful.
# `membw -t THREADS -r 10` (bench/membw.c) runs at the start and the end; the
# tg roofline is best read GB/s / bytes per token, bytes per token =
# ts_model_weight_bytes (the bench JSON's size_bytes: every weight a decode
# step reads, the embedding table counted as one row), used for both engines.
# The 1-minute load average is recorded before and after every run.
#
# Output: WORKDIR/run-STAMP/{runs.tsv,table.md,membw.txt,*.json,*.err}.
set -uo pipefail

me=dense_bench
die() { echo "$me: error: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }

src=$(cd "$(dirname "$0")/.." && pwd)
work=/var/tmp/ts-dense-bench
build=build
threads=2 np=512 nt=128 pairs=2 tests=pp,tg nobuild=0
models=()
while [ $# -gt 0 ]; do
    case $1 in
        -B) build=${2:?}; shift 2 ;;
        -d) work=${2:?}; shift 2 ;;
        -t) threads=${2:?}; shift 2 ;;
        -p) np=${2:?}; shift 2 ;;
        -n) nt=${2:?}; shift 2 ;;
        -k) pairs=${2:?}; shift 2 ;;
        --tests) tests=${2:?}; shift 2 ;;
        --no-build) nobuild=1; shift ;;
        -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option '$1' (see -h)" ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || die "no model given (see -h)"
for v in threads np nt pairs; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "bad value '${!v}' for $v"
done
[[ $tests =~ ^(pp|tg)(,(pp|tg))?$ ]] || die "bad --tests '$tests' (pp, tg or pp,tg)"
case $build in /*) ;; *) build=$src/$build ;; esac
ts=$build/turbospark
if [ ! -x "$ts" ]; then
    [ $nobuild = 1 ] && die "$ts not found (--no-build)"
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$build" -j2 >/dev/null \
        || die "build failed"
fi
mkdir -p "$work" || die "cannot create $work"
out=$work/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" || die "cannot create $out"
cc -O3 -march=native -pthread -o "$out/membw" "$src/bench/membw.c" || die "cannot build membw"

load1() { cut -d' ' -f1 /proc/loadavg; }
membw() { # label
    local r
    r=$("$out/membw" -t "$threads" -r 10 | grep '^threads') || die "membw failed"
    echo "$1 load $(load1) $r" | tee -a "$out/membw.txt" >&2
}

{
    echo "commit $(git -C "$src" rev-parse --short HEAD)$(git -C "$src" diff --quiet HEAD -- src tools || echo ' (dirty)')"
    echo "date $(date -u +%FT%TZ)"
    echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs"
    echo "threads $threads pp $np tg $nt pairs $pairs"
} > "$out/machine.txt"
cat "$out/machine.txt" >&2
printf 'model\tfile\ttest\tpair\tengine\ttps_mean\ttps_sd\treps\tsize_bytes\tload_before\tload_after\n' > "$out/runs.tsv"
membw start

# run_one ENGINE PATH NAME TEST PAIR REPS -> appends a runs.tsv row
run_one() {
    local eng=$1 path=$2 name=$3 test=$4 pair=$5 reps=$6 pf nf
    if [ "$test" = pp ]; then pf=$np nf=0; else pf=0 nf=$nt; fi
    local tag=$out/$name.$test.$pair.$eng l0 l1
    l0=$(load1)
    if [ "$eng" = ts ]; then
        "$ts" bench -m "$path" -p "$pf" -n "$nf" -r "$reps" -t "$threads" --json > "$tag.json" 2> "$tag.err"
    else
        python3 "$src/bench/peer_llamacpp.py" bench -m "$path" -p "$pf" -n "$nf" -r "$reps" \
            -t "$threads" -o json > "$tag.json" 2> "$tag.err"
    fi
    local rc=$?
    l1=$(load1)
    if [ $rc -ne 0 ]; then
        log "$eng $name $test pair $pair failed (exit $rc): $(tail -1 "$tag.err")"
        return
    fi
    python3 - "$tag.json" "$eng" "$name" "$path" "$test" "$pair" "$reps" "$l0" "$l1" >> "$out/runs.tsv" <<'EOF' || log "cannot parse $tag.json"
import json, sys
f, eng, name, path, test, pair, reps, l0, l1 = sys.argv[1:]
txt = open(f).read().strip()
rows = json.loads(txt) if txt.startswith("[") else [json.loads(l) for l in txt.splitlines() if l.strip()]
r = rows[0]
mean = r.get("tps_mean", r.get("avg_ts"))
sd = r.get("tps_sd", r.get("stddev_ts"))
# turbospark: bytes one decode step reads (active_bytes_per_token; builds
# before f6839b8 gave it as size_bytes); the peer only gives its file size
size = r.get("active_bytes_per_token", r.get("size_bytes", r.get("size")))
print("\t".join(map(str, [name, path, r["test"], pair, eng, "%.4f" % mean, "%.4f" % sd, reps, size, l0, l1])))
EOF
    tail -1 "$out/runs.tsv" | awk -F'\t' '{printf "'$me': %-10s %s %s pair %s: %.2f ± %.2f t/s (load %s -> %s)\n", $5, $1, $3, $4, $6, $7, $10, $11}' >&2
}

for spec in "${models[@]}"; do
    name=${spec%%:*} reps=5
    [ "$name" != "$spec" ] && reps=${spec#*:}
    [[ $reps =~ ^[0-9]+$ ]] && [ "$reps" -ge 1 ] || die "bad REPS in '$spec'"
    if [ -f "$name" ]; then path=$name
    else path=$("$src/scripts/fetch_models.sh" --path "$name") || die "'$name' is neither a file nor a fetched model"
    fi
    name=$(basename "$path" .gguf)
    cat "$path" > /dev/null
    echo "turbospark $("$ts" --version 2>/dev/null | head -1) (binary $(stat -c %y "$ts" | cut -d. -f1))" >> "$out/machine.txt"
    for pair in $(seq 1 "$pairs"); do
        for test in ${tests//,/ }; do
            run_one ts "$path" "$name" "$test" "$pair" "$reps"
            run_one llama "$path" "$name" "$test" "$pair" "$reps"
        done
    done
done
membw end

python3 - "$out" > "$out/table.md" <<'EOF'
import csv, re, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/runs.tsv"), delimiter="\t"))
bw = []
for line in open(out + "/membw.txt"):
    m = re.search(r"best\s+([\d.]+) GB/s\s+median\s+([\d.]+)", line)
    if m:
        bw.append((float(m.group(1)), float(m.group(2))))
bw_best = max(b for b, _ in bw)
bw_med = statistics.median(m for _, m in bw)
print("memory read bandwidth (membw, %d runs): best %.2f GB/s, median of medians %.2f GB/s\n"
      % (len(bw), bw_best, bw_med))
print("| model | test | pair | turbospark t/s | llama.cpp t/s | ratio | load before -> after |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
summary = []
seen = []
for r in rows:
    if (r["model"], r["test"]) not in seen:
        seen.append((r["model"], r["test"]))
for model, test in seen:
    sel = [r for r in rows if r["model"] == model and r["test"] == test]
    ts_all, ll_all, ratios = [], [], []
    size = None
    for pair in sorted({r["pair"] for r in sel}, key=int):
        a = [r for r in sel if r["pair"] == pair and r["engine"] == "ts"]
        b = [r for r in sel if r["pair"] == pair and r["engine"] == "llama"]
        if not a or not b:
            continue
        a, b = a[0], b[0]
        size = int(a["size_bytes"])
        ta, tb = float(a["tps_mean"]), float(b["tps_mean"])
        ts_all.append(ta); ll_all.append(tb); ratios.append(ta / tb)
        print("| %s | %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.2f | %s -> %s, %s -> %s |" % (
            model, test, pair, ta, float(a["tps_sd"]), tb, float(b["tps_sd"]), ta / tb,
            a["load_before"], a["load_after"], b["load_before"], b["load_after"]))
    if ratios:
        summary.append((model, test, statistics.mean(ts_all), statistics.mean(ll_all),
                        ratios, size))
print("\n| model | test | turbospark t/s (mean of pairs) | llama.cpp t/s | ratio per pair | mean ratio | bytes/token | roofline t/s (best / median bw) | turbospark % roofline | llama.cpp % roofline |")
print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for model, test, ta, tb, ratios, size in summary:
    roof = ""
    if test.startswith("tg"):
        rb, rm = bw_best * 1e9 / size, bw_med * 1e9 / size
        roof = "%.2f MB | %.2f / %.2f | %.0f%% | %.0f%%" % (size / 1e6, rb, rm, 100 * ta / rb, 100 * tb / rb)
    else:
        roof = " |  |  | "
    print("| %s | %s | %.2f | %.2f | %s | %.2f | %s |" % (
        model, test, ta, tb, ", ".join("%.2f" % x for x in ratios), statistics.mean(ratios), roof))
EOF
cat "$out/machine.txt" "$out/table.md"
log "results in $out"
