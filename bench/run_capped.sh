#!/usr/bin/env bash
# run_capped: run a command under a hard memory cap, so a benchmark of a model
# bigger than the cap measures streaming, not a machine with RAM to spare.
#
#   bench/run_capped.sh -m SIZE [-r REPORT] [-M MECH] -- COMMAND [ARGS...]
#   bench/run_capped.sh --self-test [-M MECH]
#     -m SIZE    the cap: bytes, or with K/M/G/T (powers of 1024): 8G, 1536M
#     -r REPORT  also write key=value lines (mechanism, limit_bytes,
#                peak_bytes, maxrss_bytes, oom_kills, exit_status) to REPORT
#     -M MECH    only try this mechanism: systemd, cgroup2 or cgroup1
#
# Mechanisms, tried in order, the first that works is used and printed:
#   systemd   systemd-run --scope -p MemoryMax=SIZE -p MemorySwapMax=0
#             (needs systemd as PID 1 and a bus)
#   cgroup2   a child of this process's own cgroup v2 group, memory.max and
#             memory.swap.max=0 (needs the memory controller delegated there)
#   cgroup1   a child of this process's own memory cgroup (v1),
#             memory.limit_in_bytes (+ memsw when present)
# The cap counts what the kernel charges to the group: anonymous memory AND
# page cache the command faults in (an mmap'd model), which the kernel
# reclaims before it OOM-kills. If no mechanism can set the cap, or the
# command did not land in the capped group, nothing is run and the exit
# status is 3. Otherwise the exit status is the command's.
#
# Peak memory is reported from the group (memory.peak / memory.max_usage_in_bytes,
# page cache included) and from /usr/bin/time (max RSS of the command).
#
# --self-test caps 256 MiB and checks that a process touching 768 MiB is
# killed (or fails) while one touching 64 MiB runs and shows a peak >= 64 MiB.
set -uo pipefail

me=run_capped
die() { echo "$me: error: $*" >&2; exit 3; }
log() { echo "$me: $*" >&2; }

parse_size() {
    local s=$1 n u
    [[ $s =~ ^([0-9]+)([KkMmGgTt]?)[iI]?[bB]?$ ]] || return 1
    n=${BASH_REMATCH[1]}; u=${BASH_REMATCH[2]}
    case $u in
        K|k) n=$(( n << 10 )) ;; M|m) n=$(( n << 20 )) ;;
        G|g) n=$(( n << 30 )) ;; T|t) n=$(( n << 40 )) ;;
    esac
    [ "$n" -ge 4096 ] || return 1
    echo "$n"
}

# ---------------------------------------------------------------- mechanisms
# Each try_* sets up a cap of $limit bytes and sets:
#   mech (name), cg_dir (group directory or empty), run_prefix (array)
# or returns 1 with a reason in $why.
mech= cg_dir= why=
run_prefix=()
created_dir=

try_systemd() {
    command -v systemd-run >/dev/null 2>&1 || { why="no systemd-run"; return 1; }
    [ -d /run/systemd/system ] || { why="systemd is not PID 1 (no /run/systemd/system)"; return 1; }
    # A trial scope proves the bus works and MemoryMax is accepted.
    if ! systemd-run --scope --quiet -p MemoryMax="$limit" -p MemorySwapMax=0 true >/dev/null 2>&1; then
        why="systemd-run --scope failed"
        return 1
    fi
    mech=systemd
    run_prefix=(systemd-run --scope --quiet --collect -p MemoryMax="$limit" -p MemorySwapMax=0 --)
    return 0
}

# Mount point of a hierarchy: $1 = fs type, $2 = a super option to match (or '').
mount_of() {
    awk -v t="$1" -v o="$2" '{
        for (i = 1; i <= NF; i++) if ($i == "-") break;
        if ($(i+1) != t) next;
        if (o != "") { n = split($(i+3), a, ","); ok = 0; for (j = 1; j <= n; j++) if (a[j] == o) ok = 1; if (!ok) next }
        print $5; exit }' /proc/self/mountinfo
}

new_child() { # $1 = parent directory; sets created_dir
    local d=$1/turbospark-cap.$$.$RANDOM
    mkdir "$d" 2>/dev/null || return 1
    created_dir=$d
}

try_cgroup2() {
    local mnt rel parent d
    mnt=$(mount_of cgroup2 '')
    [ -n "$mnt" ] || { why="no cgroup2 mount"; return 1; }
    rel=$(awk -F: '$1 == "0" && $2 == "" { print $3; exit }' /proc/self/cgroup)
    [ -n "$rel" ] || { why="no cgroup v2 entry in /proc/self/cgroup"; return 1; }
    parent=$mnt$rel
    [ -d "$parent" ] || parent=$mnt # cgroup namespace: our group is the mount root
    grep -qw memory "$parent/cgroup.controllers" 2>/dev/null ||
        { why="memory controller not available in $parent (cgroup.controllers: $(cat "$parent/cgroup.controllers" 2>/dev/null))"; return 1; }
    if ! grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null; then
        echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null ||
            { why="cannot enable +memory in $parent/cgroup.subtree_control"; return 1; }
    fi
    new_child "$parent" || { why="cannot create a child group in $parent"; return 1; }
    d=$created_dir
    if ! echo "$limit" >"$d/memory.max" 2>/dev/null; then
        why="cannot write $d/memory.max"; return 1
    fi
    [ -f "$d/memory.swap.max" ] && echo 0 >"$d/memory.swap.max" 2>/dev/null
    local got; got=$(cat "$d/memory.max")
    [ "$got" != max ] && [ "$got" -le "$limit" ] 2>/dev/null || { why="memory.max reads back '$got'"; return 1; }
    mech=cgroup2 cg_dir=$d
    return 0
}

try_cgroup1() {
    local mnt rel parent d got
    mnt=$(mount_of cgroup memory)
    [ -n "$mnt" ] || { why="no cgroup v1 memory mount"; return 1; }
    rel=$(awk -F: '{ n = split($2, c, ","); for (i = 1; i <= n; i++) if (c[i] == "memory") { print $3; exit } }' /proc/self/cgroup)
    [ -n "$rel" ] || { why="no memory entry in /proc/self/cgroup"; return 1; }
    parent=$mnt$rel
    [ -d "$parent" ] || parent=$mnt
    new_child "$parent" || { why="cannot create a child group in $parent"; return 1; }
    d=$created_dir
    echo "$limit" >"$d/memory.limit_in_bytes" 2>/dev/null || { why="cannot write $d/memory.limit_in_bytes"; return 1; }
    # memsw (memory+swap) must be >= the memory limit; setting it equal forbids swapping out.
    [ -f "$d/memory.memsw.limit_in_bytes" ] && echo "$limit" >"$d/memory.memsw.limit_in_bytes" 2>/dev/null
    got=$(cat "$d/memory.limit_in_bytes")
    [ "$got" -le "$limit" ] 2>/dev/null || { why="memory.limit_in_bytes reads back '$got'"; return 1; }
    mech=cgroup1 cg_dir=$d
    return 0
}

drop_cap() {
    if [ -n "$created_dir" ] && [ -d "$created_dir" ]; then
        rmdir "$created_dir" 2>/dev/null || log "warning: could not remove $created_dir (processes left in it?)"
    fi
    created_dir= cg_dir=
}

cleanup() {
    drop_cap
    [ -n "${tmpd:-}" ] && rm -rf -- "$tmpd"
}

setup_cap() { # $1 = only this mechanism, or ''
    local reasons=() m
    for m in systemd cgroup2 cgroup1; do
        [ -n "$1" ] && [ "$1" != "$m" ] && continue
        why=
        if "try_$m"; then return 0; fi
        reasons+=("$m: $why")
        if [ -n "$created_dir" ]; then rmdir "$created_dir" 2>/dev/null; created_dir=; fi
    done
    local IFS=';'
    die "could not set a memory cap of $limit bytes (${reasons[*]}); refusing to run uncapped"
}

# Runs "$@" in the capped group; sets status, peak, maxrss, oom.
run_in_cap() {
    local marker=$tmpd/entered rssf=$tmpd/rss
    rm -f "$marker" "$rssf"
    local timer=()
    [ -x /usr/bin/time ] && timer=(/usr/bin/time -q -f %M -o "$rssf")
    local oom0=0
    [ -n "$cg_dir" ] && oom0=$(oom_kills)
    if [ "$mech" = systemd ]; then
        "${run_prefix[@]}" bash -c 'echo ok >"$0"; exec "$@"' "$marker" "${timer[@]}" "$@"
        status=$?
    else
        local procs=$cg_dir/cgroup.procs rel=${cg_dir#*/turbospark-cap.}
        bash -c '
            echo $$ >"$1" 2>/dev/null || exit 0
            grep -q "turbospark-cap.$2\$" /proc/self/cgroup || exit 0
            echo ok >"$0"
            shift 2
            exec "$@"' "$marker" "$procs" "$rel" "${timer[@]}" "$@"
        status=$?
    fi
    [ -f "$marker" ] || die "the command did not enter the capped group ($mech); it was not run"
    peak=unknown oom=unknown maxrss=unknown
    if [ -n "$cg_dir" ]; then
        if [ "$mech" = cgroup2 ]; then
            [ -f "$cg_dir/memory.peak" ] && peak=$(cat "$cg_dir/memory.peak")
        else
            peak=$(cat "$cg_dir/memory.max_usage_in_bytes")
        fi
        oom=$(( $(oom_kills) - oom0 ))
    fi
    if [ -s "$rssf" ]; then
        local kb; kb=$(tail -1 "$rssf")
        [[ $kb =~ ^[0-9]+$ ]] && maxrss=$(( kb * 1024 ))
    fi
}

oom_kills() {
    local f
    if [ "$mech" = cgroup2 ]; then f=$cg_dir/memory.events; else f=$cg_dir/memory.oom_control; fi
    awk '$1 == "oom_kill" { print $2; found = 1 } END { if (!found) print 0 }' "$f" 2>/dev/null || echo 0
}

human() { [[ $1 =~ ^[0-9]+$ ]] && awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }' || echo "$1"; }

report() { # $1 = report file or ''
    log "exit status $status; peak $(human "$peak") (group, page cache included), max RSS $(human "$maxrss"), OOM kills $oom"
    if [ -n "$1" ]; then
        printf 'mechanism=%s\nlimit_bytes=%s\npeak_bytes=%s\nmaxrss_bytes=%s\noom_kills=%s\nexit_status=%s\n' \
            "$mech" "$limit" "$peak" "$maxrss" "$oom" "$status" >"$1"
    fi
}

# A process that touches $1 MiB of memory and then exits 0.
hog() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import sys; b = b"\x01" * (int(sys.argv[1]) << 20); print(len(b) >> 20, "MiB touched")' "$1"
    else
        head -c "${1}M" /dev/zero | tail >/dev/null # tail buffers a line without newline: all of it
    fi
}
export -f hog

# ---------------------------------------------------------------- main
limit= rep= only= selftest=0
while [ $# -gt 0 ]; do
    case $1 in
        -m) limit=$(parse_size "${2:-}") || die "bad size '${2:-}'"; shift 2 ;;
        -r) rep=${2:-}; shift 2 ;;
        -M) only=${2:-}; [[ $only =~ ^(systemd|cgroup2|cgroup1)$ ]] || die "bad mechanism '$only'"; shift 2 ;;
        --self-test) selftest=1; shift ;;
        -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option '$1'" ;;
        *) break ;;
    esac
done

tmpd=$(mktemp -d) || die "mktemp failed"
trap cleanup EXIT

if [ "$selftest" = 1 ]; then
    limit=$(( 256 << 20 ))
    fail=0
    # A fresh group per run: the group's peak is sticky.
    setup_cap "$only"
    log "mechanism: $mech${cg_dir:+ ($cg_dir)}, limit $limit bytes"
    log "self-test 1: touching 768 MiB under a 256 MiB cap must fail"
    run_in_cap bash -c 'hog 768'
    drop_cap
    report ""
    if [ "$status" = 0 ]; then log "FAIL: the 768 MiB process succeeded: the cap does not hold"; fail=1; fi
    if [ "$oom" != unknown ] && [ "$oom" -lt 1 ] && [ "$status" != 0 ]; then
        log "note: it failed without a recorded OOM kill (allocation refused?)"
    fi
    log "self-test 2: touching 64 MiB under the same cap must succeed"
    setup_cap "$mech"
    run_in_cap bash -c 'hog 64'
    report ""
    if [ "$status" != 0 ]; then log "FAIL: the 64 MiB process failed (status $status)"; fail=1; fi
    if [ "$peak" != unknown ] && [ "$peak" -lt $(( 64 << 20 )) ]; then
        log "FAIL: group peak $peak < 64 MiB: peak accounting is wrong"; fail=1
    fi
    if [ "$peak" != unknown ] && [ "$peak" -gt "$limit" ]; then
        log "FAIL: group peak $peak above the cap"; fail=1
    fi
    [ "$fail" = 0 ] && log "self-test passed ($mech)" || log "self-test FAILED ($mech)"
    exit "$fail"
fi

[ -n "$limit" ] || die "no cap given (-m SIZE)"
[ $# -gt 0 ] || die "no command given"
setup_cap "$only"
log "mechanism: $mech${cg_dir:+ ($cg_dir)}, limit $limit bytes ($(human "$limit"))"
run_in_cap "$@"
report "$rep"
exit "$status"
