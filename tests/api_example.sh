# tests/api_example.c, the docs/API.md example: it runs, and its greedy text
# equals `turbospark run`'s on the same model and prompt.
ex=$1; cli=$2; fix=$3
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
m=$fix/ref/tiny-llama-f32.gguf
out=$("$ex" "$m" "Hello world" 12 2>&1); rc=$?
echo "$out"
check "example exits 0" '[ $rc = 0 ]'
check "example prints its summary" 'echo "$out" | grep -Eq "^\[[0-9]+ prompt tokens, [0-9]+ new, stop: (length|eos)\]$"'
text=$(printf '%s\n' "$out" | sed '$d')
cli_text=$("$cli" run -m "$m" -p "Hello world" -n 12 --temp 0 2>/dev/null)
check "same text as turbospark run" '[ "$text" = "$cli_text" ]'
"$ex" /nonexistent.gguf hi >/dev/null 2>err.$$; rc=$?
check "missing model: exit 1 with one line" '[ $rc = 1 ] && [ $(wc -l < err.$$) = 1 ] && grep -q "nonexistent" err.$$'
rm -f err.$$
echo "$pass passed, $fail failed"
[ $fail = 0 ]
