#!/usr/bin/env bash
# knob_build: the turbospark CLI of an existing CUDA build with one kernel
# source recompiled under extra -D knobs and relinked into a new binary, the
# build directory left as it was. For an A/B of a compile-time knob (e.g. the
# MVQ_* of src/compute/cuda/matvec_q8.cu) against the build's own binary with
# bench/cuda/gpu_pairs.sh -B: one nvcc run a variant instead of a whole build,
# and every other object the same bytes as the base's.
#
#   bench/cuda/knob_build.sh BUILD_DIR OUT_BINARY SOURCE.cu [-DKNOB=VALUE ...]
#
# No -D builds a control: the base's code through the same recompile-and-
# relink path. Works with the Makefile and Ninja generators.
set -euo pipefail
die() { echo "knob_build: error: $*" >&2; exit 1; }
[ $# -ge 3 ] || die "usage: knob_build.sh BUILD_DIR OUT_BINARY SOURCE.cu [-DKNOB=VALUE ...]"
b=$(cd "$1" && pwd) || die "no build directory '$1'"
out=$(realpath -m "$2")
src=$(realpath "$3") || die "no source '$3'"
shift 3
[ -f "$b/libturbospark.a" ] && [ -x "$b/turbospark" ] || die "$b holds no built libturbospark.a and turbospark"
[ "$out" != "$b/turbospark" ] || die "the output would overwrite the build's own binary"
for d in "$@"; do case $d in -D*) ;; *) die "'$d' is not a -D definition" ;; esac; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the source's compile command (regenerating compile_commands.json changes no flag, so nothing rebuilds)
[ -f "$b/compile_commands.json" ] || cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "$b" >/dev/null || die "cmake could not reconfigure $b"
cmd=$(python3 - "$b/compile_commands.json" "$src" <<'PY'
import json, os, shlex, sys
for e in json.load(open(sys.argv[1])):
    if os.path.realpath(os.path.join(e["directory"], e["file"])) == sys.argv[2]:
        print(e["command"]); break
else:
    sys.exit("knob_build: error: %s is not compiled in this build" % sys.argv[2])
PY
)
obj=$(sed -E 's/.* -o ([^ ]+).*/\1/' <<<"$cmd")
member=$(basename "$obj")
[ -n "$obj" ] && ar t "$b/libturbospark.a" | grep -qx "$member" || die "libturbospark.a has no member $member"
(cd "$b" && eval "${cmd/ -o $obj/ -o $work/$member} $*") || die "the recompile failed"
cp "$b/libturbospark.a" "$work/libturbospark.a"
ar r "$work/libturbospark.a" "$work/$member"
# the CLI's link command, with the new archive and output
if [ -f "$b/build.ninja" ]; then
    link=$(cd "$b" && ninja -t commands turbospark | tail -1)
else
    link=$(cat "$b/CMakeFiles/turbospark-cli.dir/link.txt")
    rsp=$(grep -o '@[^ ]*linkLibs.rsp' <<<"$link" || true)
    if [ -n "$rsp" ]; then
        sed "s| libturbospark.a | $work/libturbospark.a |" "$b/${rsp#@}" >"$work/linkLibs.rsp"
        link=${link/$rsp/@$work/linkLibs.rsp}
    fi
fi
grep -Eq -- ' -o turbospark( |$)' <<<"$link" || die "unexpected link command: $link"
link=$(sed -E -e "s# -o turbospark( |\$)# -o $out\1#" -e "s# libturbospark.a # $work/libturbospark.a #g" <<<"$link")
grep -Fq -- " -o $out" <<<"$link" || die "could not redirect the link's output: $link"
rm -f "$out"
(cd "$b" && eval "$link") && [ -x "$out" ] || die "the relink failed"
echo "knob_build: $out = $(basename "$b")/turbospark with $(basename "$src") ${*:-(control: no -D)}"
