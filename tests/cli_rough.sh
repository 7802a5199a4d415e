#!/usr/bin/env bash
# Issue 9's rough edges, each as a user meets it: instrument paths refused
# before the model loads, equal capture paths refused, TURBOSPARK_ROUTER_TRACE=0
# is off, a ROUTER_LOGITS_PASS beyond the run prints FAILED, --ctx beyond the
# trained context warns with the KV size, an unknown --chat-template fails
# with --prompt, input caps on -f / --messages-file, --save-logits over -f
# refused, bench --logits' values, and SIGINT mid-run writes the captures
# marked partial; TS_FORCE_ISA that cannot be applied refused, as is a
# TS_PREFETCH that is neither near nor far.
cli=$1; fix=$2
. "$(dirname "$0")/lib.sh"
M="$fix/ref/tiny-llama-f32.gguf"; MOE="$fix/ref/tiny-qwen3moe-f32.gguf"

# instrument paths: refused before the model loads (one line: no expert-cache lines before it)
expect_err "missing directory" "directory $tmp/nope" -- env TURBOSPARK_ROUTER_HIST="$tmp/nope/x.json" "$cli" run -m "$MOE" -p hi --max-new 2
expect_err "directory as capture" "is a directory" -- env TURBOSPARK_ROUTER_HIST="$tmp" "$cli" run -m "$MOE" -p hi --max-new 2
expect_err "/proc" "not a place for files" -- env TURBOSPARK_FFN_HIST=/proc/x.json "$cli" run -m "$M" -p hi --max-new 2
expect_err "equal capture paths" "both name" -- env TURBOSPARK_ROUTER_HIST="$tmp/a.json" TURBOSPARK_FFN_HIST="$tmp/a.json" "$cli" run -m "$MOE" -p hi --max-new 2
[ ! -e "$tmp/a.json" ] && ok || bad "equal paths: a file was written"
expect_err "trace without hist" "TURBOSPARK_ROUTER_HIST" -- env TURBOSPARK_ROUTER_TRACE=1 "$cli" run -m "$MOE" -p hi --max-new 2

# TURBOSPARK_ROUTER_TRACE=0 is off (as PHASES=0 is), =1 on
for v in 0 1; do
  TURBOSPARK_ROUTER_HIST="$tmp/r$v.json" TURBOSPARK_ROUTER_TRACE=$v "$cli" run -m "$MOE" -p hi --max-new 2 >/dev/null 2>&1 || bad "ROUTER_TRACE=$v run"
done
python3 - "$tmp/r0.json" "$tmp/r1.json" <<'PY' && ok || bad "ROUTER_TRACE=0 should leave the trace out, =1 put it in"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
def has_trace(j): return any('trace' in k for k in json.dumps(j).split('"'))
sys.exit(0 if not has_trace(a) and has_trace(b) else 1)
PY

# ROUTER_LOGITS_PASS beyond the run: a FAILED line and a non-zero exit, no silent null
TURBOSPARK_ROUTER_HIST="$tmp/l.json" TURBOSPARK_ROUTER_LOGITS_LAYER=1 TURBOSPARK_ROUTER_LOGITS_PASS=999 \
  "$cli" run -m "$MOE" -p hi --max-new 2 >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -ne 0 ] && grep -q "FAILED.*ROUTER_LOGITS_PASS=999" "$tmp/e" && ok || bad "logits pass beyond the run: rc=$rc $(cat "$tmp/e")"

# --ctx beyond the trained context: a warning naming both and the KV size, then the run
"$cli" run -m "$M" -p hi --max-new 2 --ctx 100000 >/dev/null 2>"$tmp/e" && grep -q "exceeds the model's trained context of [0-9]*; the KV cache takes [0-9.]* [KMG]iB" "$tmp/e" \
  && ok || bad "--ctx warning: $(cat "$tmp/e")"

# bench --logits takes auto, device or host, and nothing else
expect_err "bench --logits bogus" "expected auto, device or host" -- "$cli" bench -m "$M" -p 0 -n 2 -r 1 --logits bogus
"$cli" bench -m "$M" -p 0 -n 2 -r 1 --logits host >/dev/null 2>&1 && ok || bad "bench --logits host on the cpu (ignored there)"

# TS_FORCE_ISA: a name that is no kernel level refuses to start, as does a
# level above the CPU's (read from the backend line); a lower one runs it
expect_err "TS_FORCE_ISA typo" "TS_FORCE_ISA=native: not one of" -- env TS_FORCE_ISA=native "$cli" run -m "$M" -p hi --max-new 2
best=$(env -u TS_FORCE_ISA "$cli" bench -m "$M" -p 0 -n 2 -r 1 2>&1 >/dev/null | sed -n 's/^bench: backend cpu: \([a-z0-9]*\),.*/\1/p')
case $best in # the level above the CPU's; none above amx, so that check is not counted there
  scalar) above=avx2 ;; avx2) above=avx512 ;; avx512) above=amx ;; amx) above= ;;
  *) above=; bad "bench named no cpu level: [$best]" ;;
esac
[ -n "$above" ] && expect_err "TS_FORCE_ISA above the CPU" "TS_FORCE_ISA=$above: this CPU's best kernel level is $best" -- env TS_FORCE_ISA=$above "$cli" run -m "$M" -p hi --max-new 2
TS_FORCE_ISA=scalar "$cli" bench -m "$M" -p 0 -n 2 -r 1 2>&1 >/dev/null | grep -q "^bench: backend cpu: scalar," && ok || bad "TS_FORCE_ISA=scalar not applied"
# TS_PREFETCH (the K-quant dots' decode prefetch): near and far applied and named, anything else refused
expect_err "TS_PREFETCH typo" "TS_PREFETCH=l2: not near or far" -- env TS_PREFETCH=l2 "$cli" run -m "$M" -p hi --max-new 2
for pf in near far; do
  TS_PREFETCH=$pf "$cli" bench -m "$M" -p 0 -n 2 -r 1 2>&1 >/dev/null | grep -q "^bench: backend cpu: .*, $pf prefetch$" && ok || bad "TS_PREFETCH=$pf not applied"
done

# unknown --chat-template with --prompt fails as with --messages-file
expect_err "unknown template with --prompt" "unknown chat template" -- "$cli" run -m "$M" -p hi --chat-template nosuch

# input caps
head -c 5000 /dev/urandom | base64 > "$tmp/big.txt"
expect_err "perplexity -f over --max-input" "--max-input" -- "$cli" perplexity -m "$M" -f "$tmp/big.txt" --max-input 1K
printf '[{"role":"user","content":"%s"}]' "$(head -c 3000 "$tmp/big.txt" | tr -d '\n')" > "$tmp/msgs.json"
expect_err "--messages-file over --max-input" "--max-input" -- "$cli" run -m "$M" --messages-file "$tmp/msgs.json" --chat-template chatml --max-input 1K
# --save-logits over the input
cp "$tmp/big.txt" "$tmp/big.orig"
expect_err "--save-logits over -f" "$tmp/big.txt" -- "$cli" perplexity -m "$M" -f "$tmp/big.txt" --save-logits "$tmp/big.txt"
cmp -s "$tmp/big.txt" "$tmp/big.orig" && ok || bad "--save-logits over -f changed the input"

# greedy on this fixture never samples EOS: it runs until the signal
# SIGINT mid-run: exit 130, captures written whole and marked partial
TURBOSPARK_ROUTER_HIST="$tmp/p.json" TURBOSPARK_ROUTER_TRACE=1 "$cli" run -m "$MOE" --prompt-ids "1 5 6 7" --max-new 100000 \
  --ctx 100000 --temperature 0 >/dev/null 2>"$tmp/e" &
pid=$!
sleep 1.5; kill -INT $pid; wait $pid; rc=$?
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j.get("partial") is True else 1)' "$tmp/p.json" 2>/dev/null; prc=$?
[ $rc -eq 130 ] && [ $prc -eq 0 ] && ok || bad "SIGINT: rc=$rc, capture: $(head -c 120 "$tmp/p.json" 2>&1) stderr: $(tail -2 "$tmp/e")"
ls "$tmp" | grep -q '\.tmp' && bad "SIGINT left a temporary file" || ok

finish
