#!/usr/bin/env bash
# cpu_targets: issue 13's CPU targets on this machine in one command, each measured the way the sessions that
# recorded them did (docs/BENCHMARKS.md, "CPU prefill"), then one table of target, measured value and verdict.
# Written because the machines that decide the last targets (AMD cores) come rarely: a session that gets one
# should spend its time measuring, not rebuilding the method.
#
#   bench/cpu_targets.sh -L LLAMA_BENCH [-A LLAMA_BENCH_AVX2] [-o OUTDIR] [-k GROUPS] [-r ROUNDS] [-R ROUNDS] [-l LEVELS] [PART...]
#     -L PATH   llama-bench built for this CPU, out of the tree (bench/README.md: never committed)
#     -A PATH   llama-bench built AVX2-only, for the AVX2 rows on a CPU above AVX2; without it those dense pairs are
#               not run (they would set our AVX2 kernels against the peer's AVX-512 ones) and show NOT MEASURED
#     -o DIR    where rows, logs and summary.md go (default bench/results/DATE-cpu-targets)
#     -k N      alternating groups a dense or MoE comparison (default 5; the issue asks for at least 5)
#     -r N      rounds of the capped prompt and one-token path a level (default 3)
#     -R N      rounds of the roofline's interleaved 7B decode (bench-cpu/roof) a level (default 5)
#     -l LEVELS the kernel levels to run, e.g. "avx2" to finish a run in the same -o (default: the dispatcher's, and
#               avx2 below it)
#     PART      machine dense roof moe cap summary (default: all, in that order)
# Environment: TS (turbospark binary, default build-rel/turbospark), M15 (Qwen2.5-Coder-1.5B Q4_K_M), M7 (the 7B
# synthetic Q4_K_M: bench/make_synthetic_dense.py), M30 (the 30B-A3B synthetic: bench-cpu/make_synthetic_moe),
# THREADS (default 2), ROOF (default bench-cpu/roof beside TS).
#
# Levels: the dispatcher's own (what `turbospark bench` prints as the backend's ISA), and where that is above avx2
# the AVX2 kernels too (TS_FORCE_ISA=avx2, against -A): an AVX2 code path on this core, which is not an AVX2-only
# machine; the summary names the level of every row.
#
# Method (the issue's): both engines the same file, threads and thread wait policy (bench/pair_bench.sh), the
# order rotating by group; ratios within a group, medians over groups. The tg roofline: the bytes a decode token
# reads times tok/s over the memory read bandwidth at THREADS threads. A VM's bandwidth moves within seconds, so a
# membw reading before and after a tg128 did not read what the decode had (sessions 41-43: runs above 100%). `roof`
# runs bench-cpu/roof (bench/roof.c), which follows every decode token with a 1 GiB read by membw's loop on the same
# thread count and sums both over 128 tokens: R rounds a level, after one self-test round (-S: the decode replaced by
# a read of a token's bytes, which must come out near 100%). roof-LEVEL.tsv has a row a round, roof-rows/ a row a
# token. Two rows a level are judged, each on the median over rounds: the whole run, and the quarter of its tokens
# with the most bandwidth around them (where the decode's speed is tested hardest: on the Zen 4 VM the share was 91%
# at ~34 GB/s and 77% at ~55). A round above 100%, or a self-test outside 90-110%, marks a row UNRELIABLE. The capped
# prompt:
# the 30B-A3B file dropped from the page cache, a 25% memory cap (bench/run_capped.sh), O_DIRECT expert reads,
# streamed experts with 16 slots; the 512-token prompt's tok/s over the one-token path's (`-p 0 -n 32`).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
LB="" LA="" O="" K=5 R=3 RR=5 LV=
while [ $# -gt 0 ]; do
    case $1 in
        -L) LB=${2:?}; shift 2 ;;
        -A) LA=${2:?}; shift 2 ;;
        -o) O=${2:?}; shift 2 ;;
        -k) K=${2:?}; shift 2 ;;
        -r) R=${2:?}; shift 2 ;;
        -R) RR=${2:?}; shift 2 ;;
        -l) LV=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "cpu_targets: unknown option '$1'" >&2; exit 2 ;;
        *) break ;;
    esac
done
parts=${*:-machine dense roof moe cap summary}
TS=${TS:-build-rel/turbospark}
M15=${M15:-$HOME/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
M7=${M7:-/var/tmp/ts-bench-io/7b-synth-q4km.gguf}
M30=${M30:-/var/tmp/ts-bench-io/qwen3moe-synth-q4k.gguf}
T=${THREADS:-2}
O=${O:-bench/results/$(date +%F)-cpu-targets}
has() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
die() { echo "cpu_targets: $*" >&2; exit 1; }
[ -x "$TS" ] || die "no turbospark binary at $TS (set TS)"
for p in $parts; do case $p in machine | dense | roof | moe | cap | summary) ;; *) die "unknown part '$p'" ;; esac; done
if has dense || has moe; then [ -x "$LB" ] || die "-L: no llama-bench at '$LB'"; fi
mkdir -p "$O" || exit 1
# the dispatcher's level, from the CLI (the backend line of a one-token bench)
isa=$("$TS" bench -m "${M15}" -t 1 -p 0 -n 1 -r 1 2>&1 | sed -n 's/.*backend cpu: \([a-z0-9]*\),.*/\1/p' | head -1)
[ -n "$isa" ] || die "could not read the kernel level from '$TS bench' on $M15"
levels=$isa
[ "$isa" != avx2 ] && [ "$isa" != scalar ] && levels="$isa avx2"
[ -n "$LV" ] && levels=$LV
echo "cpu_targets: levels $levels, $T threads, out $O"

if has machine; then
    { lscpu | grep -E 'Model name|CPU family|Model:|^CPU\(s\)|Thread|L2|L3|Flags' | cut -c1-600; uname -r
      git log --oneline -1; echo "levels: $levels"; } > "$O/machine.txt"
    # the Release build's own probes (bench-cpu/, -march=native), the membw that roof's read loop comes from
    for b in membw peak_ops; do
        [ -x "$(dirname "$TS")/bench-cpu/$b" ] || die "no $b at $(dirname "$TS")/bench-cpu/ (built with the Release build)"
    done
    "$(dirname "$TS")/bench-cpu/membw" -t 1,$T > "$O/membw.txt" 2>&1
    "$(dirname "$TS")/bench-cpu/peak_ops" -t 1,$T > "$O/peak_ops.txt" 2>&1
    "$TS" bench -m "$M7" -t "$T" -p 0 -n 1 -r 1 --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["active_bytes_per_token"])' > "$O/7b-bytes-a-token.txt"
fi
lb_for() { [ "$1" = avx2 ] && [ "$isa" != avx2 ] && echo "$LA" || echo "$LB"; }
if has dense; then
    for lv in $levels; do
        if [ -z "$(lb_for $lv)" ]; then
            echo "cpu_targets: no -A (an AVX2-only llama-bench): the $lv level's dense pairs are not run" >&2
            continue
        fi
        [ -x "$(lb_for $lv)" ] || die "-A: no llama-bench at '$(lb_for $lv)'"
        for m in 1.5b:$M15 7b:$M7; do
            TS_FORCE_ISA=$lv bench/pair_bench.sh -o "$O/dense-${m%%:*}-$lv.tsv" -L "$(lb_for $lv)" -e turbospark="$TS" \
                -t "$T" -k "$K" -p 512 -n 128 --pp-reps 1 --tg-reps 1 "${m#*:}" > "$O/dense-${m%%:*}-$lv.log" 2>&1 ||
                echo "cpu_targets: dense ${m%%:*} $lv failed (see its log)" >&2
        done
    done
fi
if has roof; then # the 7B decode with a bandwidth probe read after every token (bench/roof.c)
    ROOF=${ROOF:-$(dirname "$TS")/bench-cpu/roof}
    [ -x "$ROOF" ] || die "no roof program at $ROOF (built with the Release build's bench-cpu/; or set ROOF)"
    rf() { # round kind [roof args]: one row of roof's two summary lines
        local r=$1 k=$2; shift 2
        TS_FORCE_ISA=$lv "$ROOF" -m "$M7" -t "$T" "$@" 2>>"$O/roof-$lv.log" | tee -a "$O/roof-$lv.log" | python3 -c '
import re, sys
t = sys.stdin.read()
a = re.search(r"^roof: decode ([0-9.]+) GB/s .*probe ([0-9.]+) GB/s, share ([0-9.]+)%; per token median ([0-9.]+)% .*, "
              r"([0-9]+) of ([0-9]+) tokens above 100%$", t, re.M)
b = re.search(r"^roof: top quarter .*probe ([0-9.]+) GB/s, share ([0-9.]+)%$", t, re.M)
if a and b:
    print("\t".join(sys.argv[1:] + list(a.groups()) + list(b.groups())))' "$r" "$lv" "$k" >> "$O/roof-$lv.tsv"
    }
    for lv in $levels; do
        printf 'round\tlevel\tkind\tdecode_gbs\tprobe_gbs\tshare_pct\ttoken_median_pct\ttokens_over_100\ttokens\ttop_probe_gbs\ttop_share_pct\n' \
            > "$O/roof-$lv.tsv"
        mkdir -p "$O/roof-rows" || exit 1 # a row a token (outside roof-*.tsv, which the summary reads as levels)
        rf 0 selftest -S -n 32 -o "$O/roof-rows/$lv-selftest.tsv"
        for r in $(seq 1 "$RR"); do rf "$r" decode -n 128 -o "$O/roof-rows/$lv-$r.tsv"; done
    done
fi
if has moe; then
    TS_FORCE_ISA=$isa bench/pair_bench.sh -o "$O/moe30b-$isa.tsv" -L "$LB" -e turbospark="$TS" -t "$T" -k "$K" -p 512 -n 64 \
        --pp-reps 1 --tg-reps 1 "$M30" > "$O/moe30b-$isa.log" 2>&1 || echo "cpu_targets: moe failed (see its log)" >&2
fi
if has cap; then
    mkdir -p "$O/cap"
    cap_bytes=$(( $(stat -c %s "$M30") / 4 ))
    drop() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$M30"; }
    cap() { local n=$1 lv=$2; shift 2; drop
        bench/run_capped.sh -m $cap_bytes -r "$O/cap/$n.report" -- env TURBOSPARK_EXPERT_NOCACHE=1 TS_FORCE_ISA=$lv "$TS" bench \
            -m "$M30" -t "$T" --expert-residency streamed --expert-cache-slots 16 "$@" > "$O/cap/$n.txt" 2>&1
        printf '%s\t%s\t%s\t%s\n' "$n" "$lv" "$(grep -E 'pp512|tg32' "$O/cap/$n.txt" | awk -F'|' '{print $(NF-1)}' | awk '{print $1}')" \
            "$(grep -oE '[0-9.]+ s I/O wait' "$O/cap/$n.txt" | awk '{print $1}')" >> "$O/cap/rows.tsv"; }
    for r in $(seq 1 "$R"); do
        for lv in $levels; do # the order of prompt and one-token path alternating by round
            if [ $((r % 2)) = 1 ]; then cap $lv-pp512-r$r $lv -p 512 -n 0 -r 1; cap $lv-tg32-r$r $lv -p 0 -n 32 -r 1
            else cap $lv-tg32-r$r $lv -p 0 -n 32 -r 1; cap $lv-pp512-r$r $lv -p 512 -n 0 -r 1; fi
        done
    done
fi
if has summary; then # its exit status: 0 only when something was measured and every measured target is met
    python3 bench/cpu_targets.py "$O" > "$O/summary.md"
    st=$?
    cat "$O/summary.md"
    exit $st
fi
