# tests/api_example.c, the docs/API.md example: two chat turns run, the
# second re-uses the first's KV prefix, and the first reply equals
# `turbospark run --messages-file` on the same message.
ex=$1; cli=$2; fix=$3; src=$(cd "$(dirname "$0")/.." && pwd)
pass=0; fail=0; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1" >&2; fi; }
one() { # MODEL [TEMPLATE]
  local m=$1 tpl=${2:-}
  "$ex" "$m" $tpl >"$tmp/out" 2>"$tmp/err"; local rc=$?
  cat "$tmp/out"
  check "$m: exits 0 ($(cat "$tmp/err"))" '[ $rc = 0 ]'
  check "$m: two turns" '[ $(grep -c "^\[prompt [0-9]* tokens, [0-9]* cached, [0-9]* new\]$" "$tmp/out") = 2 ]'
  check "$m: turn 2 re-uses the prefix" 'grep "^\[prompt" "$tmp/out" | sed -n 2p | grep -Eq "tokens, [1-9][0-9]* cached"'
  # first reply: between "> Name a colour." and its [prompt ...] line
  awk '/^> Name a colour\.$/{on=1; next} /^\[prompt /{exit} on' "$tmp/out" > "$tmp/reply"
  printf '[{"role":"user","content":"Name a colour."}]' > "$tmp/m.json"
  "$cli" run -m "$m" --messages-file "$tmp/m.json" ${tpl:+--chat-template $tpl} --max-new 16 --temperature 0 2>/dev/null > "$tmp/cli"
  echo >> "$tmp/cli"
  check "$m: first reply equals turbospark run's" 'cmp -s "$tmp/reply" "$tmp/cli"'
}
one "$fix/ref/tiny-llama-f32.gguf" chatml
if m=$("$src/scripts/fetch_models.sh" --path smollm2 2>/dev/null); then one "$m"
elif [ "${TS_ALLOW_MISSING_MODELS:-}" = 1 ]; then echo "SKIPPED (TS_ALLOW_MISSING_MODELS=1): smollm2"; skipped=1
else check "model smollm2 in the cache (scripts/fetch_models.sh --ci, or TS_ALLOW_MISSING_MODELS=1)" false; fi
"$ex" /nonexistent.gguf >/dev/null 2>"$tmp/e"; rc=$?
check "missing model: exit 1 with one line naming it" '[ $rc = 1 ] && [ $(wc -l < "$tmp/e") = 1 ] && grep -q nonexistent "$tmp/e"'
echo "$pass passed, $fail failed${skipped:+, 1 skipped (TS_ALLOW_MISSING_MODELS=1: smollm2)}"
[ $fail = 0 ]
