#!/usr/bin/env bash
# inspect: works on every shipped vocab GGUF; bad input gives one line and exit 1.
cli=$1; fix=$2
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0
for f in "$fix"/vocab/*.gguf; do
  [ -e "$f" ] || continue
  n=$((n+1))
  if "$cli" inspect "$f" >"$tmp/o" 2>"$tmp/e" && grep -q '^tokenizer:' "$tmp/o"; then ok; else bad "inspect $f"; fi
  if "$cli" inspect --json --tensors "$f" >"$tmp/j" 2>"$tmp/e" && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['tokenizer']['n_vocab']>0" "$tmp/j"; then ok; else bad "inspect --json $f"; fi
done
[ $n -gt 0 ] && ok || bad "no vocab fixtures found"
# bad input: one line on stderr, exit 1, nothing on stdout
printf 'GGUF\x07\x00\x00\x00' >"$tmp/v7.gguf"
head -c 100 /dev/urandom >"$tmp/rand.gguf"
: >"$tmp/empty.gguf"
for f in "$tmp/v7.gguf" "$tmp/rand.gguf" "$tmp/empty.gguf" "$tmp/missing.gguf" "$tmp"; do
  "$cli" inspect "$f" >"$tmp/o" 2>"$tmp/e"; rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && [ ! -s "$tmp/o" ] && grep -q "turbospark inspect: " "$tmp/e"; then ok; else bad "inspect $f: rc=$rc $(cat "$tmp/e")"; fi
done
"$cli" inspect >/dev/null 2>&1 && bad "inspect with no file succeeded" || ok
"$cli" inspect --bogus x >/dev/null 2>&1 && bad "unknown flag accepted" || ok
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
