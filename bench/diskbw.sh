#!/usr/bin/env bash
# diskbw: sequential O_DIRECT read bandwidth of the disk under a directory.
#
# The page cache is bypassed (O_DIRECT), so this is what streaming weights or
# MoE experts from disk can get when they are not already in memory.
#
#   bench/diskbw.sh [-d DIR] [-s GiB] [-r reps] [-k]
#     -d DIR   where the test file goes (default: /var/tmp); must not be tmpfs
#     -s GiB   test file size (default 4)
#     -r reps  passes per block size, best is reported (default 3)
#     -k       keep the test file (reused by the next run if the size matches)
#
# Writes the file once with incompressible data (a virtual disk may store
# zeros sparsely and read them back from nowhere), then reads it with dd
# iflag=direct at several block sizes, one stream and two parallel streams.
# 1 GB = 1e9 bytes.
set -euo pipefail

dir=/var/tmp
gib=4
reps=3
keep=0
die() { echo "diskbw: error: $*" >&2; exit 1; }
while getopts "d:s:r:kh" o; do
    case $o in
        d) dir=$OPTARG ;;
        s) gib=$OPTARG ;;
        r) reps=$OPTARG ;;
        k) keep=1 ;;
        h) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) exit 2 ;;
    esac
done
[[ $gib =~ ^[0-9]+$ ]] && [ "$gib" -ge 1 ] || die "bad -s '$gib' (whole GiB >= 1)"
[[ $reps =~ ^[0-9]+$ ]] && [ "$reps" -ge 1 ] || die "bad -r '$reps'"
[ -d "$dir" ] && [ -w "$dir" ] || die "'$dir' is not a writable directory"

fstype=$(stat -f -c %T -- "$dir")
[ "$fstype" != tmpfs ] || die "'$dir' is tmpfs (memory, not disk); pick another -d"
bytes=$(( gib << 30 ))
avail=$(df -P -B1 -- "$dir" | awk 'NR == 2 { print $4 }')
file=$dir/diskbw.$gib.dat

if [ ! -f "$file" ] || [ "$(stat -c %s -- "$file")" != "$bytes" ]; then
    [ "$avail" -gt $(( bytes + (1 << 30) )) ] || die "not enough space in $dir for $gib GiB"
    echo "diskbw: writing $gib GiB test file $file" >&2
    tmp=$file.tmp.$$
    trap 'rm -f -- "$tmp"' EXIT
    if command -v openssl >/dev/null 2>&1; then
        # AES-CTR keystream: incompressible and far faster than /dev/urandom.
        openssl enc -aes-128-ctr -nosalt -pass pass:turbospark -pbkdf2 </dev/zero 2>/dev/null |
            head -c "$bytes" >"$tmp" || true # openssl ends on SIGPIPE
    else
        head -c "$bytes" /dev/urandom >"$tmp"
    fi
    [ "$(stat -c %s -- "$tmp")" = "$bytes" ] || die "could not write $bytes bytes to $tmp"
    sync -- "$tmp"
    mv -f -- "$tmp" "$file"
    trap - EXIT
fi
[ "$keep" = 1 ] || trap 'rm -f -- "$file"' EXIT

# One dd pass; prints GB/s. $1 block size in MiB, $2 first block, $3 count.
dd_pass() {
    local out
    out=$(LC_ALL=C dd if="$file" of=/dev/null bs=$(( $1 << 20 )) skip="$2" count="$3" \
          iflag=direct 2>&1) || { echo "$out" >&2; die "dd O_DIRECT read failed"; }
    # "N bytes (...) copied, S s, ..." -> bytes / seconds
    echo "$out" | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) s = $(i-1);
                                   printf "%.3f\n", $1 / s / 1e9 }'
}

best_of() { sort -g | tail -1; }

model=$(awk -F: '/model name/ { sub(/^ +/, "", $2); print $2; exit }' /proc/cpuinfo)
dev=$(df -P -- "$dir" | awk 'NR == 2 { print $1 }')
echo "diskbw: $file ($gib GiB) on $dev ($fstype), CPU: $model, $(nproc) CPUs"
for bs in 1 4 16; do
    blocks=$(( bytes / (bs << 20) ))
    one=$(for _ in $(seq "$reps"); do dd_pass "$bs" 0 "$blocks"; done | best_of)
    half=$(( blocks / 2 ))
    two=$(for _ in $(seq "$reps"); do
        start=$(date +%s.%N)
        dd_pass "$bs" 0 "$half" >/dev/null &
        p1=$!
        dd_pass "$bs" "$half" "$half" >/dev/null &
        p2=$!
        wait "$p1" "$p2"
        end=$(date +%s.%N)
        awk -v b=$(( half * 2 * (bs << 20) )) -v s="$start" -v e="$end" \
            'BEGIN { printf "%.3f\n", b / (e - s) / 1e9 }'
    done | best_of)
    printf "bs %2d MiB  O_DIRECT seq read  1 stream %6.2f GB/s  2 streams %6.2f GB/s\n" \
        "$bs" "$one" "$two"
done
