#!/usr/bin/env bash
# Instruments on real runs of the tiny fixture models:
#  - stdout is byte-identical with every instrument on and off (greedy and seeded sampling);
#  - PILOT_PROBE=self reads 100% recall (a mis-wired probe cannot);
#  - replaying a run's own trace through the analyzer reproduces the run's own hits and misses;
#  - captures from paths not wired for them fail loudly and leave no file;
#  - the FFN census keeps sum(hist_count) = decode_passes x inter; the phase footer adds up.
cli=$1; fix=$2
. "$(dirname "$0")/lib.sh"
MOE="$fix/ref/tiny-qwen2moe-f32.gguf"
DENSE="$fix/ref/tiny-llama-f32.gguf"
ALL=(TURBOSPARK_PHASES=1 TURBOSPARK_EXPERT_DISK_IO=1 TURBOSPARK_ROUTER_HIST="$tmp/r.json" TURBOSPARK_ROUTER_TRACE=1
     TURBOSPARK_PILOT_PROBE=1 TURBOSPARK_ROUTER_LOGITS_LAYER=1 TURBOSPARK_ROUTER_LOGITS_PASS=2 TURBOSPARK_FFN_HIST="$tmp/f.json")

for model in "$MOE" "$DENSE"; do
  for mode in "--temperature 0" "--temperature 1 --seed 11"; do
    extra=""; [ "$model" = "$MOE" ] && extra="--expert-residency streamed --expert-cache-slots 2"
    off=$("$cli" run -m "$model" --prompt "hello there" --max-new 40 $mode $extra 2>/dev/null | od -An -tx1)
    on=$(env "${ALL[@]}" "$cli" run -m "$model" --prompt "hello there" --max-new 40 $mode $extra 2>"$tmp/err" | od -An -tx1)
    [ -n "$off" ] && [ "$off" = "$on" ] && ok || bad "stdout differs with instruments on ($(basename "$model") $mode)"
  done
done

# replay reproduces the engine's own counts, for two slot counts and both
# policies; the long prompt is prefilled in chunks of 256 and the rest, each
# asking the cache once per (layer, expert): the trace's chunk lengths let the
# replay make the same requests
long=$(for i in $(seq 1 40); do printf 'word%d and ' $i; done)
for prompt in "count the hits" "$long"; do
for pol in lfu lru; do
  for slots in 2 3; do
    env TURBOSPARK_ROUTER_HIST="$tmp/t.json" TURBOSPARK_ROUTER_TRACE=1 "$cli" run -m "$MOE" --prompt "$prompt" --max-new 48 \
      --temperature 1 --seed 5 --expert-residency streamed --expert-cache-slots $slots --expert-policy $pol >/dev/null 2>"$tmp/e"
    eng=$(grep -oE '^expert cache: [0-9]+ requests, [0-9]+ hits \([0-9.]+%\), [0-9]+ misses' "$tmp/e" | head -1 | awk '{print $3, $5, $8}')
    rep=$("$cli" analyze cache "$tmp/t.json" --slots $slots --policy $pol | awk -v p=$pol '$1==p {print $4, $5, $6}')
    [ -n "$eng" ] && [ "$eng" = "$rep" ] && ok || bad "replay $pol/$slots (${#prompt}-char prompt): engine [$eng] vs analyzer [$rep]"
  done
done
done
# with the pilot prefetch (streamed into backend slots: the CPU backend runs
# the device path's slots too) the trace records each prefetch, and the
# replay places them as the engine did: hits, misses and the prefetch's
# copies / saved / wasted all equal the run's own
for pol in lfu lru; do
  for slots in 2 3; do
    for depth in on 1; do
      env TURBOSPARK_ROUTER_HIST="$tmp/p.json" TURBOSPARK_ROUTER_TRACE=1 "$cli" run -m "$MOE" --prompt "count the hits" --max-new 48 \
        --temperature 1 --seed 5 --backend cpu --expert-residency streamed --expert-cache-slots $slots --expert-policy $pol \
        --gpu-expert-source host --pilot-prefetch $depth >/dev/null 2>"$tmp/e"
      eng=$(grep -oE '^expert cache: [0-9]+ requests, [0-9]+ hits \([0-9.]+%\), [0-9]+ misses' "$tmp/e" | head -1 | awk '{print $3, $5, $8}')
      epf=$(grep -oE 'pilot prefetch: [0-9]+ copies, [0-9]+ saved, [0-9]+ wasted' "$tmp/e" | awk '{print $3, $5, $7}')
      "$cli" analyze cache "$tmp/p.json" --slots $slots --policy $pol >"$tmp/a" 2>&1
      rep=$(awk -v p=$pol '$1==p {print $4, $5, $6}' "$tmp/a")
      rpf=$(grep -oE 'replayed .*: [0-9]+ copies, [0-9]+ saved, [0-9]+ wasted' "$tmp/a" | awk '{print $5, $7, $9}')
      [ -n "$eng" ] && [ -n "$epf" ] && [ "${epf%% *}" != 0 ] && [ "$eng" = "$rep" ] && [ "$epf" = "$rpf" ] && ok ||
        bad "replay with pilot prefetch $depth, $pol/$slots: engine [$eng | $epf] vs analyzer [$rep | $rpf]"
    done
  done
done

# a plain run plans its decode passes on the backend (--expert-plan device:
# the CPU backend runs the reference), an instrumented one on the host: the
# same policy, so the same hits, misses and prefetch counts as the run whose
# trace replays exactly above; the start says which plan ran, and the device
# plan on the file tier is refused with one line
for depth in on 1; do
  args=(run -m "$MOE" --prompt "count the hits" --max-new 48 --temperature 1 --seed 5 --backend cpu --expert-residency streamed
        --expert-cache-slots 2 --gpu-expert-source host --pilot-prefetch $depth)
  env TURBOSPARK_ROUTER_HIST="$tmp/q.json" TURBOSPARK_ROUTER_TRACE=1 "$cli" "${args[@]}" >/dev/null 2>"$tmp/eh"
  "$cli" "${args[@]}" --expert-plan device >/dev/null 2>"$tmp/ed"
  pat='^expert cache: [0-9]+ requests, [0-9]+ hits \([0-9.]+%\), [0-9]+ misses \([0-9]+ cold, [0-9]+ evict\)|pilot prefetch: [0-9]+ copies, [0-9]+ saved, [0-9]+ wasted'
  h=$(grep -oE "$pat" "$tmp/eh" | tr '\n' ' '); d=$(grep -oE "$pat" "$tmp/ed" | tr '\n' ' ')
  [ -n "$h" ] && [ "$h" = "$d" ] && grep -q '^expert plan: host' "$tmp/eh" && grep -q '^expert plan: device' "$tmp/ed" && ok ||
    bad "device-planned run vs host-planned (instrumented) run, prefetch $depth: [$d] vs [$h]"
done
"$cli" run -m "$MOE" --prompt hi --max-new 2 --backend cpu --expert-residency streamed --expert-cache-slots 2 --gpu-expert-source file \
  --expert-plan device >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -ne 0 ] && [ "$(grep -c 'turbospark run:' "$tmp/e")" = 1 ] && grep -q 'host tier' "$tmp/e" && ok || bad "--expert-plan device on the file tier: rc $rc, $(cat "$tmp/e")"

# the long prompt's trace: prefill chunks of 256 and the rest, then one per decode token
python3 - "$tmp/t.json" <<'PY' && ok || bad "chunk lengths in the trace"
import json, sys
d = json.load(open(sys.argv[1]))
for l in range(d["num_layers"]):
    ch, passes = d["chunks"][l], len(d["trace"][l]) // d["top_k"]
    if not passes: continue
    assert sum(ch) == passes, (l, sum(ch), passes)
    pre = [c for c in ch if c > 1]
    assert len(pre) >= 2 and all(c == 256 for c in pre[:-1]) and ch[:len(pre)] == pre, ch[:8]
    assert all(c == 1 for c in ch[len(pre):]) and len(ch) - len(pre) in (47, 48), ch[len(pre):]
PY

# pilot self-test: aimed at its own layer, recall must be exactly 100%
env TURBOSPARK_ROUTER_HIST="$tmp/s.json" TURBOSPARK_PILOT_PROBE=self "$cli" run -m "$MOE" --prompt "self test" --max-new 20 --seed 3 >/dev/null 2>&1
"$cli" analyze cache "$tmp/s.json" --slots 2 | grep -q 'PILOT recall: 100.00%' && ok || bad "PILOT_PROBE=self recall is not 100%"
# next-layer probe: a real (weaker) predictor, below 100% on random routers
env TURBOSPARK_ROUTER_HIST="$tmp/n.json" TURBOSPARK_PILOT_PROBE=1 "$cli" run -m "$MOE" --prompt "self test" --max-new 20 --seed 3 >/dev/null 2>&1
python3 - "$tmp/n.json" "$tmp/s.json" <<'PY' && ok || bad "pilot capture shape"
import json, sys
n, s = (json.load(open(p)) for p in sys.argv[1:3])
for d in (n, s):
    assert d["pred"][0] == [], "row 0 must stay empty"
    for l in range(1, d["num_layers"]):
        assert len(d["pred"][l]) == len(d["trace"][l]), "pred lines up with trace"
    for l in range(d["num_layers"]):
        passes = len(d["trace"][l]) // d["top_k"]
        assert passes > 0 and sum(d["counts"][l]) == d["top_k"] * passes, "counts sum = top_k x passes"
        assert [d["trace"][l].count(e) for e in range(d["num_experts"])] == d["counts"][l], "counts = histogram of the trace"
assert s["pred"][1] == s["trace"][1]
PY
# router logits row: layer 1, pass 2
python3 -c "
import json,sys; d=json.load(open('$tmp/r.json')); r=d['router_logits']
assert r['layer']==1 and r['pass']==2 and len(r['values'])==d['num_experts']" && ok || bad "router_logits row"

# a dense model has no router: loud failure, no file, non-zero exit
env TURBOSPARK_ROUTER_HIST="$tmp/d.json" "$cli" run -m "$DENSE" --prompt hi --max-new 3 >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -ne 0 ] && grep -q "^\[router-hist\] FAILED writing $tmp/d.json: .*no routed layers" "$tmp/e" && [ ! -e "$tmp/d.json" ] && ok || bad "dense router capture: rc=$rc $(cat "$tmp/e")"
# a pure-MoE model without shared experts has no FFN to census: refused, no file
env TURBOSPARK_FFN_HIST="$tmp/g.json" "$cli" run -m "$fix/ref/tiny-qwen3moe-f32.gguf" --prompt hi --max-new 3 >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -ne 0 ] && grep -q '^\[ffn-hist\] FAILED' "$tmp/e" && [ ! -e "$tmp/g.json" ] && ok || bad "moe census without shared expert: rc=$rc"
# bad settings are refused before any work
env TURBOSPARK_PILOT_PROBE=maybe TURBOSPARK_ROUTER_HIST="$tmp/x.json" "$cli" run -m "$MOE" --prompt hi >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q PILOT_PROBE "$tmp/e" && ok || bad "bad PILOT_PROBE accepted"
env TURBOSPARK_ROUTER_TRACE=1 "$cli" run -m "$MOE" --prompt hi >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -ne 0 ] && grep -q ROUTER_HIST "$tmp/e" && ok || bad "trace without hist accepted"

# FFN census invariant on a dense run, and the analyzer reads it
env TURBOSPARK_FFN_HIST="$tmp/c.json" "$cli" run -m "$DENSE" --prompt "a census" --max-new 12 --seed 2 >/dev/null 2>&1
python3 - "$tmp/c.json" <<'PY' && ok || bad "ffn census invariant"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["decode_passes"] == 12 and d["prefill_passes"] > 0, (d["decode_passes"], d["prefill_passes"])
for l in range(d["num_layers"]):
    assert sum(d["hist_count"][l]) == d["decode_passes"] * d["inter"]
PY
"$cli" analyze ffn "$tmp/c.json" | grep -q '^verdict:' && ok || bad "analyze ffn"
# the CPU-vs-GPU census comparison (gpu-check.sh) on captures it must accept
# (two identical runs) and refuse (one neuron's mass off by 1%; a capture
# with nothing tapped)
env TURBOSPARK_FFN_HIST="$tmp/c2.json" "$cli" run -m "$DENSE" --prompt "a census" --max-new 12 --seed 2 >/dev/null 2>&1
python3 "$(dirname "$0")/../scripts/ffn_census_agree.py" "$tmp/c.json" "$tmp/c2.json" | grep -q '^PASS' && ok || bad "ffn_census_agree: equal runs"
python3 - "$tmp/c.json" "$tmp/c3.json" "$tmp/c4.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
l = [i for i, t in enumerate(d["tapped"]) if t][0]
d["mass"][l][max(range(d["inter"]), key=lambda i: d["mass"][l][i])] *= 1.01
json.dump(d, open(sys.argv[2], "w"))
d["tapped"] = [0] * d["num_layers"]
json.dump(d, open(sys.argv[3], "w"))
PY
python3 "$(dirname "$0")/../scripts/ffn_census_agree.py" "$tmp/c.json" "$tmp/c3.json" | grep -q '^FAIL' && ok || bad "ffn_census_agree: a perturbed neuron passed"
python3 "$(dirname "$0")/../scripts/ffn_census_agree.py" "$tmp/c4.json" "$tmp/c4.json" | grep -q '^FAIL (degenerate' && ok || bad "ffn_census_agree: an empty capture passed"

# phases: rows add up to the total
env TURBOSPARK_PHASES=1 "$cli" run -m "$MOE" --prompt "phases" --max-new 8 >/dev/null 2>"$tmp/e"
python3 - "$tmp/e" <<'PY' && ok || bad "phase footer"
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"\[phases over (\d+) forward passes, ([0-9.]+) ms total\]", t)
assert m, t
rows = re.findall(r"^  (attention|dense FFN|router \+ top-k|expert I/O wait|expert compute|LM head \+ sampling|rest)\s+([0-9.]+)\s+([0-9.]+)%", t, re.M)
assert len(rows) == 7, rows
assert abs(sum(float(r[1]) for r in rows) - float(m.group(2))) < 0.05 * float(m.group(2)) + 0.1
assert abs(sum(float(r[2]) for r in rows) - 100) < 0.5
assert re.search(r"expert cache: \d+ requests, \d+ hits", t)
PY
finish
