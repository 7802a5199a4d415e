#!/usr/bin/env bash
# moe_bench: streamed-expert decode on a synthetic Qwen3-30B-A3B-shaped GGUF
# (Q4_K, random weights, ~17.3 GB), warm and disk-bound under memory caps,
# against llama.cpp's mmap path on the same file. docs/BENCHMARKS.md records
# a run ("MoE: streamed experts").
#
#   bench/moe_bench.sh [-d WORKDIR] [-B BUILD] [-t THREADS] [-n N] [-r R]
#                      [-T SECONDS] [--rows LIST] [--no-build]
#     -d WORKDIR  where the model, logs and results go (default /var/tmp/ts-moe-bench);
#                 the model is WORKDIR/qwen3moe-synth-q4k.gguf, made if missing
#     -B BUILD    turbospark build directory (default build); `turbospark` and
#                 make_synthetic_moe are built there if missing
#     -t THREADS  compute threads for both engines (default 2)
#     -n N        decode tokens per run (default 16; tgN, -p 0)
#     -r R        timed runs after one warm-up (default 3)
#     -T SECONDS  wall-clock limit of a llama.cpp run under a cap (default 300):
#                 mmap under a cap thrashes; its speed is then taken from the
#                 per-token progress it printed before the limit
#     --rows LIST comma-separated rows to run (default: all but lwr), in order:
#        bw       sequential O_DIRECT read bandwidth of the disk (dd on the model file)
#        res      turbospark, resident experts, warm (file in the page cache)
#        s16,s32  turbospark, streamed, 16 / 32 slots per layer, warm
#        c50s16 c50s32 c25s16 c25s32
#                 streamed under a cap of 50% / 25% of the file size, page cache
#                 of the file dropped first, TURBOSPARK_EXPERT_NOCACHE=1 (O_DIRECT)
#        c50s16pc c25s16pc
#                 the same without NOCACHE (buffered pread; the page cache it
#                 fills is charged to the capped group)
#        lw       llama.cpp mmap, repack off, warm
#        lwr      llama.cpp mmap, repack on (its default), warm: ~17 GB anonymous memory
#        l50r l25r  llama.cpp mmap, repack on (default), under the 50% / 25% cap
#        l50 l25    llama.cpp mmap, repack off (use_extra_bufts=false), under the caps
#
# Every run feeds seeded-random token ids and reports how many were distinct
# (random weights collapse greedy decoding into one repeated token). turbospark
# runs with TURBOSPARK_EXPERT_DISK_IO=1 and TURBOSPARK_PHASES=1. Caps use
# bench/run_capped.sh, which refuses (exit 3) when it cannot set the cap; a
# refused row is reported as refused, never as a number.
#
# Warm rows read the file once first (cat > /dev/null) so it is in the page
# cache. Capped rows first drop the file's pages (POSIX_FADV_DONTNEED via
# `dd iflag=nocache count=0`, checked with fincore): with cgroup v1 a page
# already cached is charged to whoever faulted it in first, so a capped run on
# a warm file would not be capped at all.
#
# I/O floor of a streamed row = (bytes read into slots per token) / (disk
# bandwidth from the bw row): the tok/s a run would reach if nothing but the
# misses' reads took time. Results: WORKDIR/run-STAMP/{results.tsv,table.md,*.log}.
set -uo pipefail

me=moe_bench
die() { echo "$me: error: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }

src=$(cd "$(dirname "$0")/.." && pwd)
work=/var/tmp/ts-moe-bench
build=build
threads=2 ntok=16 reps=3 tlimit=300 nobuild=0
rows=bw,res,s16,s32,c50s16,c50s32,c25s16,c25s32,c50s16pc,c25s16pc,lw,l50r,l25r,l50,l25
while [ $# -gt 0 ]; do
    case $1 in
        -d) work=${2:?}; shift 2 ;;
        -B) build=${2:?}; shift 2 ;;
        -t) threads=${2:?}; shift 2 ;;
        -n) ntok=${2:?}; shift 2 ;;
        -r) reps=${2:?}; shift 2 ;;
        -T) tlimit=${2:?}; shift 2 ;;
        --rows) rows=${2:?}; shift 2 ;;
        --no-build) nobuild=1; shift ;;
        -h|--help) sed -n '2,48p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1' (see -h)" ;;
    esac
done
for v in threads ntok reps tlimit; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "bad -$v value '${!v}'"
done
case $build in /*) ;; *) build=$src/$build ;; esac
mkdir -p "$work" || die "cannot create $work"
work=$(cd "$work" && pwd)
model=$work/qwen3moe-synth-q4k.gguf
ts=$build/turbospark
gen=$build/make_synthetic_moe
peer_py=${LLAMACPP_PYTHON:-/opt/llamacpp-venv/bin/python}
out=$work/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" || die "cannot create $out"
res=$out/results.tsv

# ---------------------------------------------------------------- build + model
if [ ! -x "$ts" ] || [ ! -x "$gen" ]; then
    [ "$nobuild" = 0 ] || die "$ts or $gen missing and --no-build given"
    log "building in $build"
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null || die "cmake configure failed"
    cmake --build "$build" -j"$(nproc)" --target turbospark-cli >/dev/null || die "build failed"
    gcc -O2 -std=c11 -D_GNU_SOURCE -I"$src/src" -I"$src/include" "$src/bench/make_synthetic_moe.c" \
        "$build/libturbospark.a" -lpthread -lm -o "$gen" || die "building make_synthetic_moe failed"
fi
if [ ! -f "$model" ]; then
    log "making $model (~17.3 GB)"
    "$gen" "$model" >&2 || die "make_synthetic_moe failed"
fi
fsize=$(stat -L -c %s -- "$model")
cap50=$(( fsize / 2 ))
cap25=$(( fsize / 4 ))

{
    echo "commit: $(git -C "$src" rev-parse --short HEAD 2>/dev/null)$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' (working tree has local changes)')"
    echo "cpu: $(awk -F: '/model name/ { sub(/^ +/, "", $2); print $2; exit }' /proc/cpuinfo), $(nproc) CPUs"
    echo "mem: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "disk: $(df -P -- "$work" | awk 'NR == 2 { print $1 }') ($(stat -f -c %T -- "$work")), read_ahead_kb $(cat /sys/block/"$(basename "$(df -P -- "$work" | awk 'NR == 2 { print $1 }')")"/queue/read_ahead_kb 2>/dev/null)"
    echo "model: $model ($fsize bytes); caps: 50% = $cap50, 25% = $cap25 bytes"
    echo "threads $threads, tg$ntok, $reps runs after 1 warm-up; llama.cpp capped limit ${tlimit}s"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.txt" >&2

printf 'row\tengine\tmode\tslots\tcap_bytes\tstatus\ttps_mean\ttps_sd\thit_pct\treq_mib_tok\tread_mib_tok\tphys_mib_tok\tpeak_bytes\tmaxrss_bytes\tfloor_tps\tdistinct\tfed\tnote\n' >"$res"
bw_bytes=  # bytes/s, from the bw row

# ---------------------------------------------------------------- page cache
warm_file() {
    log "warming: reading $model into the page cache"
    cat -- "$model" >/dev/null
    command -v fincore >/dev/null && log "page cache: $(fincore -b -n -o RES -- "$model" | awk '{ printf "%.2f GB of the file resident", $1 / 1e9 }')"
}
cold_file() {
    dd if="$model" iflag=nocache count=0 status=none 2>/dev/null
    local r=0
    command -v fincore >/dev/null && r=$(fincore -b -n -o RES -- "$model" | awk '{ print $1 }')
    log "page cache dropped for the file: $r bytes still resident"
    [ "${r:-0}" -lt $(( 256 << 20 )) ] || log "warning: $r bytes of the file are still cached (mapped by another process?)"
}

# ---------------------------------------------------------------- disk bandwidth
row_bw() {
    # dd O_DIRECT over 4 GiB of the model file (random bytes: nothing a virtual
    # disk could shortcut), 4 MiB blocks, one stream, two regions; best one.
    local best=0 g
    for skip in 256 2304; do # in 4 MiB blocks: offsets 1 GiB and 9 GiB
        g=$(LC_ALL=C dd if="$model" of=/dev/null bs=4M skip=$skip count=1024 iflag=direct 2>&1 |
            awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) s = $(i-1); printf "%.0f\n", $1 / s }')
        log "O_DIRECT sequential read, 4 MiB blocks, 4 GiB at block $skip: $(awk -v b="$g" 'BEGIN { printf "%.3f GB/s", b / 1e9 }')"
        [ "${g:-0}" -gt "$best" ] && best=$g
    done
    bw_bytes=$best
    echo "$bw_bytes" >"$out/bw_bytes"
    printf 'bw\tdd\tO_DIRECT 4MiB seq\t-\t-\tok\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%.3f GB/s (best of 2 x 4 GiB)\n' \
        "$(awk -v b="$bw_bytes" 'BEGIN { print b / 1e9 }')" >>"$res"
}

# ---------------------------------------------------------------- turbospark
# $1 row $2 residency $3 slots $4 cap bytes or 0 $5 nocache 0/1
row_ts() {
    local row=$1 mode=$2 slots=$3 cap=$4 nc=$5 logf=$out/$1.log rep=$out/$1.cap
    local args=(bench -m "$model" -p 0 -n "$ntok" -r "$reps" -t "$threads" --json --expert-residency "$mode")
    [ "$slots" != - ] && args+=(--expert-cache-slots "$slots")
    local envs=(TURBOSPARK_EXPERT_DISK_IO=1 TURBOSPARK_PHASES=1)
    [ "$nc" = 1 ] && envs+=(TURBOSPARK_EXPERT_NOCACHE=1)
    local st
    if [ "$cap" = 0 ]; then
        log "$row: env ${envs[*]} $ts ${args[*]}"
        env "${envs[@]}" /usr/bin/time -f 'maxrss_kb=%M' -o "$out/$row.time" "$ts" "${args[@]}" >"$logf" 2>&1
        st=$?
    else
        log "$row: bench/run_capped.sh -m $cap -r $rep -- env ${envs[*]} $ts ${args[*]}"
        "$src/bench/run_capped.sh" -m "$cap" -r "$rep" -- env "${envs[@]}" "$ts" "${args[@]}" >"$logf" 2>&1
        st=$?
    fi
    parse_ts "$row" "$mode" "$slots" "$cap" "$st" "$logf" "$rep" "$nc"
}

parse_ts() {
    local row=$1 mode=$2 slots=$3 cap=$4 st=$5 logf=$6 rep=$7 nc=$8
    local peak=- maxrss=- status=ok note=
    if [ "$cap" != 0 ]; then
        if [ ! -f "$rep" ]; then status=refused; note="cap not set: $(grep -m1 'run_capped: error' "$logf")"; fi
        if [ -f "$rep" ]; then
            peak=$(awk -F= '$1 == "peak_bytes" { print $2 }' "$rep")
            maxrss=$(awk -F= '$1 == "maxrss_bytes" { print $2 }' "$rep")
            local oom; oom=$(awk -F= '$1 == "oom_kills" { print $2 }' "$rep")
            [ "${oom:-0}" != 0 ] && [ "$oom" != unknown ] && { status=oom-killed; note="$oom OOM kill(s), exit $st"; }
        fi
    else
        maxrss=$(awk -F= '/maxrss_kb/ { printf "%.0f\n", $2 * 1024 }' "$out/$row.time" 2>/dev/null)
    fi
    [ "$st" != 0 ] && [ "$status" = ok ] && { status="exit-$st"; note="$(grep -m1 -i 'error' "$logf")"; }
    local tm=- tsd=- dist=- fed=- hit=- req=- rd=- phys=- floor=-
    if [ "$status" = ok ]; then
        local j; j=$(grep -m1 '"tps_mean"' "$logf")
        tm=$(sed -E 's/.*"tps_mean": ([0-9.]+).*/\1/' <<<"$j")
        tsd=$(sed -E 's/.*"tps_sd": ([0-9.]+).*/\1/' <<<"$j")
        dist=$(sed -E 's/.*"distinct_tokens": ([0-9]+).*/\1/' <<<"$j")
        fed=$(sed -nE 's/.*fed ([0-9]+) seeded-random.*/\1/p' "$logf" | head -1)
        local endl; endl=$(grep -oE 'expert cache: [0-9]+ requests.*requested/token.*' "$logf" | tail -1)
        hit=$(sed -nE 's/.* hits \(([0-9.]+)%\).*/\1/p' <<<"$endl")
        grep -q 'all resident' <<<"$endl" && hit=100
        req=$(sed -nE 's/.* ([0-9.]+) MiB requested\/token.*/\1/p' <<<"$endl")
        rd=$(sed -nE 's/.* ([0-9.]+) MiB read\/token.*/\1/p' <<<"$endl")
        [ "$mode" = resident ] && rd=0
        phys=$(sed -nE 's/.* ([0-9.]+) MiB\/token from disk.*/\1/p' <<<"$endl")
        if [ "${bw_bytes:-0}" -gt 0 ] && [ -n "$rd" ] && awk -v r="$rd" 'BEGIN { exit !(r > 0) }'; then
            floor=$(awk -v b="$bw_bytes" -v r="$rd" 'BEGIN { printf "%.3f", b / (r * 1048576) }')
        fi
        note="$(grep -m1 '^expert cache: [a-z]' "$logf" | sed 's/^expert cache: //')"
    fi
    printf '%s\tturbospark\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$row" "$mode" "$([ "$nc" = 1 ] && echo ' nocache')" "$slots" "$cap" "$status" "$tm" "$tsd" "${hit:--}" \
        "${req:--}" "${rd:--}" "${phys:--}" "$peak" "$maxrss" "$floor" "${dist:--}" "${fed:--}" "$note" >>"$res"
    log "$row: $status ${tm} ± ${tsd} tok/s, hit ${hit:--}%, req ${req:--} / read ${rd:--} / phys ${phys:--} MiB/tok, peak $peak, floor $floor tok/s"
}

# ---------------------------------------------------------------- llama.cpp peer
# Our own small driver of llama.cpp's C API through llama-cpp-python (installed
# outside the repo; bench/README.md): mmap load, repack (use_extra_bufts) on or
# off, n_threads as ours, tgN = N single-token decodes from an empty KV cache,
# each feeding a fresh seeded-random token id (as llama-bench); one warm-up.
# Progress per token on stderr, so a run stopped at the time limit still gives
# its speed. /proc/self/io read_bytes over the timed runs = physical bytes.
# OMP_WAIT_POLICY: the pip build uses OpenMP, whose threads spin between ops
# by default; on a shared 2-CPU machine the spinning threads are descheduled
# and tg falls 10-50x (measured on the small synthetic MoE: 1.3-30 tok/s
# active, 87 passive), so the peer runs passive unless MOE_BENCH_OMP_WAIT says.
omp_wait=${MOE_BENCH_OMP_WAIT:-passive}
peer_drv=$out/peer_driver.py
cat >"$peer_drv" <<'PY'
import ctypes, json, os, random, statistics, sys, time
import llama_cpp as L
path, threads, n, reps, repack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
def rb():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"): return int(line.split()[1])
def say(*a):
    sys.stderr.write(" ".join(str(x) for x in a) + "\n"); sys.stderr.flush()
L.llama_backend_init()
mp = L.llama_model_default_params()
mp.load_mode = L.LLAMA_LOAD_MODE_MMAP
mp.use_extra_bufts = repack
say("peer: llama.cpp via llama-cpp-python", L.__version__, "| load_mode MMAP, lazy_mode", mp.lazy_mode,
    "| use_extra_bufts (repack)", mp.use_extra_bufts, "| threads", threads)
say("peer:", L.llama_print_system_info().decode())
t0 = time.perf_counter(); r0 = rb()
model = L.llama_model_load_from_file(path.encode(), mp)
if not model: say("peer: error: model load failed"); sys.exit(2)
cp = L.llama_context_default_params()
cp.n_ctx = n + 16; cp.n_batch = 32; cp.n_ubatch = 32; cp.n_threads = threads; cp.n_threads_batch = threads
ctx = L.llama_init_from_model(model, cp)
if not ctx: say("peer: error: context failed"); sys.exit(2)
say("peer: loaded in %.1f s, %.2f GB read from disk during load" % (time.perf_counter() - t0, (rb() - r0) / 1e9))
vocab = L.llama_model_get_vocab(model); nv = L.llama_vocab_n_tokens(vocab)
mem = L.llama_get_memory(ctx)
fed = []
T0 = time.perf_counter()
def run(rep):
    L.llama_memory_clear(mem, True)
    rng = random.Random(1000 + rep)
    t = time.perf_counter()
    for i in range(n):
        tok = rng.randrange(nv); fed.append(tok)
        arr = (L.llama_token * 1)(tok)
        rc = L.llama_decode(ctx, L.llama_batch_get_one(arr, 1))
        if rc != 0: say("peer: error: llama_decode", rc); sys.exit(2)
        L.llama_synchronize(ctx)
        say("peer: progress rep %d token %d t %.3f" % (rep, i + 1, time.perf_counter() - T0))
    return n / (time.perf_counter() - t)
run(-1)
r1 = rb(); tps = [run(k) for k in range(reps)]; r2 = rb()
print(json.dumps({"tps_mean": statistics.mean(tps), "tps_sd": statistics.stdev(tps) if len(tps) > 1 else 0.0,
                  "tps": tps, "distinct_tokens": len(set(fed)), "fed": len(fed),
                  "phys_mib_tok": (r2 - r1) / 1048576 / (n * reps)}))
PY

# $1 row $2 cap bytes or 0 $3 repack 0/1
row_peer() {
    local row=$1 cap=$2 rp=$3 logf=$out/$1.log rep=$out/$1.cap st
    [ -x "$peer_py" ] || { printf '%s\tllama.cpp\tmmap\t-\t%s\tskipped\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tno %s\n' "$row" "$cap" "$peer_py" >>"$res"; return; }
    local cmd=(env OMP_WAIT_POLICY="$omp_wait" "$peer_py" "$peer_drv" "$model" "$threads" "$ntok" "$reps" "$rp")
    if [ "$cap" = 0 ]; then
        log "$row: ${cmd[*]}"
        /usr/bin/time -f 'maxrss_kb=%M' -o "$out/$row.time" "${cmd[@]}" >"$logf" 2>&1
        st=$?
    else
        log "$row: timeout ${tlimit} bench/run_capped.sh -m $cap -r $rep -- ${cmd[*]}"
        # timeout signals run_capped, which keeps its group until the child ends
        "$src/bench/run_capped.sh" -m "$cap" -r "$rep" -- timeout -s KILL "$tlimit" "${cmd[@]}" >"$logf" 2>&1
        st=$?
    fi
    local peak=- maxrss=- status=ok note= tm=- tsd=- dist=- fed=- phys=-
    if [ "$cap" != 0 ]; then
        if [ ! -f "$rep" ]; then status=refused; note="cap not set"; else
            peak=$(awk -F= '$1 == "peak_bytes" { print $2 }' "$rep")
            maxrss=- # /usr/bin/time in run_capped measures `timeout`, not the peer
            local oom; oom=$(awk -F= '$1 == "oom_kills" { print $2 }' "$rep")
            if [ "${oom:-0}" != 0 ] && [ "$oom" != unknown ]; then status=oom-killed; note="$oom OOM kill(s), exit $st"
            elif [ "$st" = 137 ]; then status=time-limit; note="killed at the ${tlimit} s limit"; fi
        fi
    else
        maxrss=$(awk -F= '/maxrss_kb/ { printf "%.0f\n", $2 * 1024 }' "$out/$row.time" 2>/dev/null)
    fi
    [ "$st" != 0 ] && [ "$status" = ok ] && { status="exit-$st"; note="$(grep -m1 -i 'error' "$logf")"; }
    local loadl; loadl=$(grep -m1 '^peer: loaded' "$logf" | sed 's/^peer: //')
    if [ "$status" = ok ]; then
        local j; j=$(grep -m1 '"tps_mean"' "$logf")
        tm=$(sed -E 's/.*"tps_mean": ([0-9.e-]+).*/\1/' <<<"$j"); tm=$(awk -v x="$tm" 'BEGIN { printf "%.4f", x }')
        tsd=$(sed -E 's/.*"tps_sd": ([0-9.e-]+).*/\1/' <<<"$j"); tsd=$(awk -v x="$tsd" 'BEGIN { printf "%.4f", x }')
        dist=$(sed -E 's/.*"distinct_tokens": ([0-9]+).*/\1/' <<<"$j")
        fed=$(sed -E 's/.*"fed": ([0-9]+).*/\1/' <<<"$j")
        phys=$(sed -E 's/.*"phys_mib_tok": ([0-9.e-]+).*/\1/' <<<"$j"); phys=$(awk -v x="$phys" 'BEGIN { printf "%.2f", x }')
    elif grep -q '^peer: progress' "$logf"; then
        # speed from progress lines: tokens after the first one / their time
        read -r done tps <<<"$(awk '/^peer: progress/ { n++; t[n] = $NF } END {
            if (n >= 2) printf "%d %.4f\n", n, (n - 1) / (t[n] - t[1]); else printf "%d -\n", n }' "$logf")"
        tm=$tps; fed=$done
        dist=$(awk '/^peer: progress/ { n++ } END { print n }' "$logf")" (<=)"
        note="$note; $done tokens decoded before it ended"
    fi
    note="${note:+$note; }${loadl}"
    printf '%s\tllama.cpp\tmmap%s\t-\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\t%s\t%s\t-\t%s\t%s\t%s\n' \
        "$row" "$([ "$rp" = 1 ] && echo ', repack on' || echo ', repack off')" "$cap" "$status" "$tm" "$tsd" \
        "$phys" "$peak" "$maxrss" "$dist" "$fed" "$note" >>"$res"
    log "$row: $status $tm ± $tsd tok/s, phys $phys MiB/tok, peak $peak, maxrss $maxrss; $note"
}

# ---------------------------------------------------------------- rows
[ -f "$work/bw_bytes.last" ] && bw_bytes=$(cat "$work/bw_bytes.last")
state=
IFS=, read -ra todo <<<"$rows"
for row in "${todo[@]}"; do
    case $row in
        res|s16|s32|lw|lwr) [ "$state" = warm ] || { warm_file; state=warm; } ;;
        c*|l50*|l25*) cold_file; state=cold ;;
    esac
    case $row in
        bw) row_bw; cp -f "$out/bw_bytes" "$work/bw_bytes.last" ;;
        res) row_ts res resident - 0 0 ;;
        s16) row_ts s16 streamed 16 0 0 ;;
        s32) row_ts s32 streamed 32 0 0 ;;
        c50s16) row_ts c50s16 streamed 16 "$cap50" 1 ;;
        c50s32) row_ts c50s32 streamed 32 "$cap50" 1 ;;
        c25s16) row_ts c25s16 streamed 16 "$cap25" 1 ;;
        c25s32) row_ts c25s32 streamed 32 "$cap25" 1 ;;
        c50s16pc) row_ts c50s16pc streamed 16 "$cap50" 0 ;;
        c25s16pc) row_ts c25s16pc streamed 16 "$cap25" 0 ;;
        lw) row_peer lw 0 0 ;;
        lwr) row_peer lwr 0 1 ;;
        l50r) row_peer l50r "$cap50" 1 ;;
        l25r) row_peer l25r "$cap25" 1 ;;
        l50) row_peer l50 "$cap50" 0 ;;
        l25) row_peer l25 "$cap25" 0 ;;
        *) die "unknown row '$row'" ;;
    esac
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

# ---------------------------------------------------------------- table
awk -F'\t' -v bw="${bw_bytes:-0}" '
function mib(b) { return (b ~ /^[0-9]+$/) ? sprintf("%.2f GiB", b / 1073741824) : b }
NR == 1 { print "| row | engine, mode | slots | cap | status | tok/s (mean ± sd) | hit rate | requested MiB/tok | read into slots MiB/tok | physical MiB/tok | peak (group) | max RSS | I/O floor tok/s (floor/measured) | distinct / fed |";
          print "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"; next }
$1 == "bw" { next }
{ ratio = ($15 != "-" && $7 != "-" && $7 > 0) ? sprintf("%s (%.2fx)", $15, $15 / $7) : "-";
  cap = ($5 ~ /^[0-9]+$/ && $5 > 0) ? mib($5) : "none";
  hr = ($9 == "-") ? "-" : $9 "%";
  printf "| %s | %s %s | %s | %s | %s | %s ± %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n",
    $1, $2, $3, $4, cap, $6, $7, $8, hr, $10, $11, $12, mib($13), mib($14), ratio, $16, $17 }' "$res" >"$out/table.md"
grep -P '^bw\t' "$res" | cut -f18 | sed 's/^/disk: /' >>"$out/table.md"
cat "$out/table.md"
log "results in $out"
