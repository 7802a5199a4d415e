# What the shell tests share; each sources it first:  . "$(dirname "$0")/lib.sh"
#   ok, bad DESC   count a check (bad prints "FAIL: DESC" on stderr)
#   $tmp           a scratch directory, removed on exit (a test that sets its own EXIT trap removes it there)
#   expect_err DESC WANT -- CMD...
#                  CMD refuses cleanly: exit status 1, exactly one stderr line, holding WANT, nothing on stdout
#   finish         the summary line; the test's exit status (0 only with no failure)
# Not named cli_*.sh: CMakeLists.txt makes a test of every tests/cli_*.sh.
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d) || { echo "FAIL: mktemp -d" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT

expect_err() {
    local desc=$1 want=$2
    shift 3
    "$@" >"$tmp/o" 2>"$tmp/e" </dev/null
    local rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -qF -- "$want" "$tmp/e" && [ ! -s "$tmp/o" ]; then ok
    else bad "$desc: rc=$rc stderr=[$(cat "$tmp/e")] stdout=[$(head -c 200 "$tmp/o")]"; fi
}

finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
