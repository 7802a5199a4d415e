#!/usr/bin/env bash
# Command-line checks of `turbospark tokenize`.
# usage: cli_tokenize.sh CLI FIXTURES SRCDIR
set -u
CLI=$1
FIX=$2
VOC=$FIX/vocab
. "$(dirname "$0")/lib.sh"

# expect_out NAME WANT CMD...: stdout of CMD (stdin from $tmp/in) equals WANT, exit 0
expect_out() {
    local name=$1 want=$2
    shift 2
    local got rc
    got=$("$@" <"$tmp/in" 2>"$tmp/err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -s "$tmp/err" ]; then ok; else bad "$name: rc=$rc got '$got' want '$want' err '$(cat "$tmp/err")'"; fi
}

# expect_tok_err NAME CMD... (stdin from $tmp/in; not lib.sh's expect_err, which reads no stdin): exit 1, exactly one stderr line "turbospark tokenize: ...", no stdout
expect_tok_err() {
    local name=$1
    shift
    "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -q '^turbospark tokenize: ' "$tmp/err" && [ ! -s "$tmp/out" ]; then
        ok
    else
        bad "$name: rc=$rc stderr lines=$lines '$(head -c 300 "$tmp/err")' stdout '$(head -c 100 "$tmp/out")'"
    fi
}

# every vocabulary fixture tokenizes, with and without BOS, specials, pieces
printf 'Hello world! <|endoftext|> 123\n' >"$tmp/in"
n=0
for g in "$VOC"/*.gguf; do
    n=$((n + 1))
    for flags in "" "--no-bos" "--special" "--pieces"; do
        # shellcheck disable=SC2086
        out=$("$CLI" tokenize -m "$g" $flags <"$tmp/in" 2>"$tmp/err")
        rc=$?
        lines=$(printf '%s\n' "$out" | wc -l)
        if [ $rc -ne 0 ] || [ "$lines" -ne 1 ] || [ -s "$tmp/err" ]; then
            bad "tokenize $(basename "$g") $flags: rc=$rc lines=$lines err '$(cat "$tmp/err")'"
        elif [ "$flags" != "--pieces" ] && ! printf '%s\n' "$out" | grep -Eq '^[0-9]+( [0-9]+)*$'; then
            bad "tokenize $(basename "$g") $flags: not a line of ids: '$out'"
        else
            ok
        fi
    done
done
[ $n -ge 9 ] && ok || bad "expected >= 9 vocab fixtures, found $n"

# known ids (Hugging Face reference values)
printf 'Hello world' >"$tmp/in"
expect_out "gpt-2 ids" "15496 995" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf"
expect_out "spm ids + BOS" "1 15043 3186" "$CLI" tokenize -m "$VOC/ggml-vocab-llama-spm.gguf"
expect_out "spm --no-bos" "15043 3186" "$CLI" tokenize -m "$VOC/ggml-vocab-llama-spm.gguf" --no-bos
expect_out "gpt-2 pieces" '"Hello" "Ġworld"' "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --pieces
expect_out "spm pieces" '"<s>" "▁Hello" "▁world"' "$CLI" tokenize -m "$VOC/ggml-vocab-llama-spm.gguf" --pieces
# the text is exactly stdin: a trailing newline is a token
printf 'Hello world\n' >"$tmp/in"
expect_out "trailing newline kept" "15496 995 198" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf"
# pieces are JSON strings
printf 'a"b\\c\td' >"$tmp/in"
expect_out "json escapes" '"a" "\"" "b" "\\" "c" "ĉ" "d"' "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --pieces
# special tokens only with --special
printf 'a<|endoftext|>b' >"$tmp/in"
expect_out "special parsed" "64 50256 65" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --special
got=$("$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" <"$tmp/in")
case " $got " in *" 50256 "*) bad "special parsed without --special: $got" ;; *) ok ;; esac
# empty input: an empty line (plus BOS where the vocabulary adds one)
: >"$tmp/in"
expect_out "empty gpt-2" "" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf"
expect_out "empty spm" "1" "$CLI" tokenize -m "$VOC/ggml-vocab-llama-spm.gguf"
# NULs and invalid UTF-8 are text like any other
printf 'a\000b\377\300c' >"$tmp/in"
got=$("$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" <"$tmp/in")
[ $? -eq 0 ] && [ -n "$got" ] && ok || bad "NUL/invalid UTF-8 input"
# a large input
for i in $(seq 1 300); do cat "$VOC/ggml-vocab-gpt-2.gguf.inp"; done >"$tmp/in"
got=$("$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" <"$tmp/in" | wc -w)
[ "$got" -gt 100000 ] && ok || bad "large input gave $got ids"

# errors: one line, exit 1
printf 'x' >"$tmp/in"
expect_tok_err "no -m" "$CLI" tokenize
expect_tok_err "-m without value" "$CLI" tokenize -m
expect_tok_err "unknown option" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --frobnicate
expect_tok_err "stray argument" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" hello
expect_tok_err "missing file" "$CLI" tokenize -m "$tmp/does-not-exist.gguf"
expect_tok_err "directory" "$CLI" tokenize -m "$tmp"
printf 'this is not a gguf file at all' >"$tmp/bad.gguf"
expect_tok_err "not gguf" "$CLI" tokenize -m "$tmp/bad.gguf"
head -c 5000 "$VOC/ggml-vocab-gpt-2.gguf" >"$tmp/trunc.gguf"
expect_tok_err "truncated gguf" "$CLI" tokenize -m "$tmp/trunc.gguf"
: >"$tmp/empty.gguf"
expect_tok_err "empty file" "$CLI" tokenize -m "$tmp/empty.gguf"

# the input cap: over it, one line naming the cap and the flag, nothing on stdout
head -c 1025 /dev/zero | tr '\0' 'a' >"$tmp/in"
expect_tok_err "over --max-input" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --max-input 1K
grep -q 'over the 1.0 KiB cap (raise it with --max-input)' "$tmp/err" && ok || bad "cap message: '$(cat "$tmp/err")'"
head -c 1024 /dev/zero | tr '\0' 'a' >"$tmp/in"
got=$("$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --max-input 1K <"$tmp/in" 2>"$tmp/err")
[ $? -eq 0 ] && [ -n "$got" ] && ok || bad "exactly at the cap: $(cat "$tmp/err")"
expect_tok_err "--max-input junk" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --max-input lots
expect_tok_err "--max-input 0" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --max-input 0
expect_tok_err "--max-input without value" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --max-input
# a FIFO as the model: refused at once, not a hang in open()
mkfifo "$tmp/fifo.gguf"
printf 'x' >"$tmp/in"
expect_tok_err "FIFO model" timeout 10 "$CLI" tokenize -m "$tmp/fifo.gguf"
grep -q 'fifo.gguf: not a regular file' "$tmp/err" && ok || bad "FIFO model message: '$(cat "$tmp/err")'"

# a closed pipe is an error, reported once
for i in $(seq 1 60000); do echo "line $i of some text"; done >"$tmp/in"
"$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" <"$tmp/in" 2>"$tmp/err" | head -c 1 >/dev/null
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^turbospark tokenize: ' "$tmp/err"; then ok; else bad "closed pipe: rc=$rc err '$(cat "$tmp/err")'"; fi
if [ -w /dev/full ]; then
    "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" <"$tmp/in" >/dev/full 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then ok; else bad "/dev/full: rc=$rc"; fi
fi

# unreadable stdin: the context said once ("stdin: read error", not "reading stdin: stdin: ...")
"$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" </ >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(cat "$tmp/err")" = "turbospark tokenize: stdin: read error: Is a directory" ] && ok || bad "stdin a directory: '$(cat "$tmp/err")'"
# --help
"$CLI" tokenize --help >"$tmp/out" 2>&1 && grep -q 'usage: turbospark tokenize' "$tmp/out" && ok || bad "--help"

# --backend, as on every command: the same ids and one stderr line saying it selects nothing; a bad value refused
printf 'Hello world' >"$tmp/in"
for k in cpu cuda auto; do
    got=$("$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --backend $k <"$tmp/in" 2>"$tmp/err")
    if [ $? -eq 0 ] && [ "$got" = "15496 995" ] &&
        [ "$(cat "$tmp/err")" = "backend: none (tokenize runs no model; --backend $k selects nothing)" ]; then ok
    else bad "tokenize --backend $k: got '$got' err '$(cat "$tmp/err")'"; fi
done
expect_tok_err "--backend gpu" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --backend gpu
expect_tok_err "--backend without a value" "$CLI" tokenize -m "$VOC/ggml-vocab-gpt-2.gguf" --backend
finish
