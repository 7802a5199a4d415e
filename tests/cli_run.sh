#!/usr/bin/env bash
# run / chat / perplexity / bench on a tiny fixture model: determinism, and
# every kind of bad input gets one clear line and a non-zero exit.
cli=$1; fix=$2
. "$(dirname "$0")/lib.sh"
M="$fix/ref/tiny-llama-f32.gguf"

# determinism: greedy twice, seeded sampling twice, threads 1 vs 2
a=$("$cli" run -m "$M" --prompt-ids "1 5 6 7" --max-new 24 --show-ids --temperature 0 2>/dev/null)
b=$("$cli" run -m "$M" --prompt-ids "1 5 6 7" --max-new 24 --show-ids --temperature 0 --threads 1 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "greedy differs across runs/threads: [$a] [$b]"
[ "$(echo "$a" | wc -w)" -eq 24 ] && ok || bad "greedy did not produce 24 ids: [$a]"
s1=$("$cli" run -m "$M" --prompt-ids "1 5 6 7" --max-new 24 --show-ids --seed 7 --temperature 1 2>/dev/null)
s2=$("$cli" run -m "$M" --prompt-ids "1 5 6 7" --max-new 24 --show-ids --seed 7 --temperature 1 --threads 1 2>/dev/null)
s3=$("$cli" run -m "$M" --prompt-ids "1 5 6 7" --max-new 24 --show-ids --seed 8 --temperature 1 2>/dev/null)
[ -n "$s1" ] && [ "$s1" = "$s2" ] && ok || bad "seeded sampling not reproducible"
[ "$s1" != "$s3" ] && ok || bad "different seeds gave the same 24 tokens"
# footer
"$cli" run -m "$M" --prompt "hi" --max-new 3 >/dev/null 2>"$tmp/e"
grep -qE '^\[stop=length prefill=[0-9]+tok/[0-9.]+s new=3tok decode=[0-9.]+s tok/s=[0-9.]+\]$' "$tmp/e" && ok || bad "footer: $(cat "$tmp/e")"
# stop string: generate greedy text, then stop at its 3rd character
txt=$("$cli" run -m "$M" --prompt-ids "1 70 71" --max-new 12 --temperature 0 2>/dev/null | od -An -c | head -1)
# messages file
echo '[{"role":"user","content":"hello"}]' >"$tmp/m.json"
"$cli" run -m "$M" --messages-file "$tmp/m.json" --chat-template chatml --max-new 4 >/dev/null 2>&1 && ok || bad "messages file with chatml"

# bad input
expect_err "missing model" "cannot open" -- "$cli" run -m "$tmp/nope.gguf" --prompt hi
printf 'GGUF\x03\x00\x00\x00' >"$tmp/trunc.gguf"
expect_err "invalid model" "truncated" -- "$cli" run -m "$tmp/trunc.gguf" --prompt hi
expect_err "unsupported family" "phi3" -- "$cli" run -m "$fix/vocab/ggml-vocab-phi-3.gguf" --prompt hi
expect_err "prompt longer than ctx" "context" -- "$cli" run -m "$M" --prompt-ids "1 2 3 4 5 6 7 8 9 10" --ctx 8
expect_err "bad --max-new" "--max-new" -- "$cli" run -m "$M" --prompt hi --max-new -3
expect_err "bad --temperature" "--temperature" -- "$cli" run -m "$M" --prompt hi --temperature abc
expect_err "bad --top-p" "--top-p" -- "$cli" run -m "$M" --prompt hi --top-p 1.5
expect_err "bad --threads" "--threads" -- "$cli" run -m "$M" --prompt hi --threads 0
expect_err "id out of vocab" "outside the vocabulary" -- "$cli" run -m "$M" --prompt-ids "1 999999"
expect_err "two inputs" "exactly one" -- "$cli" run -m "$M" --prompt hi --prompt-ids 1
expect_err "unknown flag" "unknown option" -- "$cli" run -m "$M" --prompt hi --bogus
echo '[{"role":"user","content":"hi"' >"$tmp/bad.json"
expect_err "malformed JSON" "bad.json" -- "$cli" run -m "$M" --messages-file "$tmp/bad.json" --chat-template chatml
echo '[{"role":"wizard","content":"hi"}]' >"$tmp/role.json"
expect_err "unknown role" "wizard" -- "$cli" run -m "$M" --messages-file "$tmp/role.json" --chat-template chatml
expect_err "no chat template" "chat template" -- "$cli" run -m "$M" --messages-file "$tmp/m.json"
expect_err "unknown template name" "chatml" -- "$cli" run -m "$M" --messages-file "$tmp/m.json" --chat-template nosuch
expect_err "perplexity missing file" "cannot open" -- "$cli" perplexity -m "$M" -f "$tmp/none.txt"
expect_err "bench bad -r" "-r" -- "$cli" bench -m "$M" -r 0
# output to a closed pipe: one line, non-zero exit
python3 - "$cli" "$M" <<'PY' && ok || bad "closed pipe"
import subprocess, sys, os
r, w = os.pipe()
os.close(r)  # nobody will ever read
p = subprocess.run([sys.argv[1], "run", "-m", sys.argv[2], "--prompt", "hello", "--max-new", "200", "--seed", "1"],
                   stdout=w, stderr=subprocess.PIPE)
os.close(w)
err = p.stderr.decode().strip().splitlines()
ok = p.returncode != 0 and len(err) == 1 and "writing to stdout failed" in err[0]
if not ok: print("closed pipe: rc", p.returncode, err, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
# chat REPL: two turns through stdin, the second reuses the KV prefix
printf 'hello\nsecond turn\n' | "$cli" chat -m "$M" --chat-template chatml --max-new 4 --temperature 0 >"$tmp/o" 2>"$tmp/e"
[ $? -eq 0 ] && [ "$(grep -c '^\[stop=' "$tmp/e")" -eq 2 ] && ok || bad "chat two turns: $(cat "$tmp/e")"
# perplexity save + kl-base against itself: KL 0, same top-1 100%
head -c 3000 "$fix/vocab/ggml-vocab-llama-spm.gguf.inp" >"$tmp/t.txt"
"$cli" perplexity -m "$M" -f "$tmp/t.txt" --ctx 64 --chunks 2 --save-logits "$tmp/l.bin" >/dev/null 2>&1 && ok || bad "perplexity save"
"$cli" perplexity -m "$M" -f "$tmp/t.txt" --ctx 64 --chunks 2 --kl-base "$tmp/l.bin" --threads 1 2>/dev/null | grep -q 'mean 0.000000.*same top-1 100.00%' && ok || bad "kl-base vs itself"
expect_err "kl-base mismatch" "positions" -- "$cli" perplexity -m "$M" -f "$tmp/t.txt" --ctx 32 --chunks 2 --kl-base "$tmp/l.bin"
"$cli" bench -m "$M" -p 16 -n 4 -r 1 --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); assert len(d)==2 and d[0]['test']=='pp16'" && ok || bad "bench --json"
"$cli" bench -m "$M" --backend cpu -p 4 -n 0 -r 1 2>&1 >/dev/null | grep -Eq "^bench: backend cpu: [a-z0-9]+, [0-9]+ threads, (near|far) prefetch$" && ok || bad "bench names the backend, kernel level and decode prefetch it ran"
# a model path with a quote and a backslash stays valid JSON
ln -s "$(cd "$(dirname "$M")" && pwd)/$(basename "$M")" "$tmp/q\"b\\s.gguf"
"$cli" bench -m "$tmp/q\"b\\s.gguf" -p 4 -n 0 -r 1 --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[0]['file'].endswith('q\"b\\\\s.gguf')" && ok || bad "bench --json path escaping"
# MoE: refusals before any work
MOE="$fix/ref/tiny-qwen3moe-f32.gguf"
expect_err "slots below top-k" "below top-k" -- "$cli" run -m "$MOE" --prompt hi --expert-residency streamed --expert-cache-slots 1
expect_err "budget too small" "cannot hold" -- "$cli" run -m "$MOE" --prompt hi --expert-residency streamed --expert-budget 1K
expect_err "bad residency" "--expert-residency" -- "$cli" run -m "$MOE" --prompt hi --expert-residency sometimes
expect_err "expert flags on a dense model" "dense" -- "$cli" run -m "$M" --prompt hi --expert-cache-slots 4
expect_err "gpu expert source on a dense model" "dense" -- "$cli" run -m "$M" --prompt hi --gpu-expert-source host
expect_err "bad gpu expert source" "--gpu-expert-source" -- "$cli" run -m "$MOE" --prompt hi --gpu-expert-source disk
expect_err "bad gpu expert budget" "--gpu-expert-budget" -- "$cli" run -m "$MOE" --prompt hi --gpu-expert-budget lots
expect_err "gpu expert budget on the cpu" "device backend" -- "$cli" run -m "$MOE" --prompt hi --backend cpu --gpu-expert-budget 1G
# the device path's slots and copies, run on the cpu (--gpu-expert-source): the same ids as resident
"$cli" run -m "$MOE" --prompt "the same text" --max-new 12 --temperature 0 --show-ids --backend cpu --expert-residency resident >"$tmp/a" 2>/dev/null
for src in host file; do
    if "$cli" run -m "$MOE" --prompt "the same text" --max-new 12 --temperature 0 --show-ids --backend cpu --expert-residency streamed \
         --expert-cache-slots 2 --gpu-expert-source $src >"$tmp/b" 2>"$tmp/e" && [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" &&
         grep -q "of cpu slots" "$tmp/e"; then ok
    else bad "backend slots from $src differ from resident or did not run: $(tail -2 "$tmp/e")"; fi
done
# the expert I/O variables are read by the command (the library reads no environment)
expect_err "bad TURBOSPARK_EXPERT_NOCACHE" "TURBOSPARK_EXPERT_NOCACHE" -- env TURBOSPARK_EXPERT_NOCACHE=yes "$cli" run -m "$MOE" --prompt hi
expect_err "bad TURBOSPARK_EXPERT_IO_THREADS" "TURBOSPARK_EXPERT_IO_THREADS" -- env TURBOSPARK_EXPERT_IO_THREADS=-2 "$cli" run -m "$MOE" --prompt hi
if TURBOSPARK_EXPERT_NOCACHE=1 TURBOSPARK_EXPERT_IO_THREADS=3 "$cli" run -m "$MOE" --prompt hi --max-new 2 --expert-residency streamed \
     --expert-cache-slots 4 >/dev/null 2>"$tmp/e" && grep -q "3 I/O threads, nocache o_direct" "$tmp/e"; then ok
else bad "TURBOSPARK_EXPERT_NOCACHE=1 / IO_THREADS=3 not applied: $(cat "$tmp/e")"; fi
finish
