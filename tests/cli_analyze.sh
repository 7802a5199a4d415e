#!/usr/bin/env bash
# analyze: hand-checked numbers on the synthetic captures (derivations in
# tests/fixtures/captures/README.md), bad captures refused with one line, and
# the --html pages: self-contained, written atomically, text output unchanged,
# and rendered in headless Chromium to a PNG that is checked not to be blank.
# Without Chromium the render part is skipped, except under CI=true, where it fails.
cli=$1; fix=$2
cap=$fix/captures
. "$(dirname "$0")/lib.sh"

# has FILE REGEX: a line of FILE matches the extended regex
has() { if grep -Eq -- "$2" "$1"; then ok; else bad "$1: no line matching /$2/"; sed 's/^/    /' "$1" >&2; fi; }
hasnt() { if grep -Eq -- "$2" "$1"; then bad "$1: unexpected line matching /$2/"; else ok; fi; }
run() { out=$1; shift; if "$cli" analyze "$@" >"$out" 2>"$out.err"; then ok; else bad "analyze $* failed: $(cat "$out.err")"; fi; }

# ---- text output: hand-derived numbers ----
run "$tmp/cache" cache "$cap/cache_hand.json" --slots 1,2,3 --skip 12
has "$tmp/cache" '^lfu +1 +50\.00% +600 +300 +300 +0\.500 +0 +300 '
has "$tmp/cache" '^lfu +2 +66\.67% +600 +400 +200 +0\.333 +0 +200 '
has "$tmp/cache" '^lru +2 +50\.00% +600 +300 +300 +0\.500 +0 +300 '
has "$tmp/cache" '^belady +2 +75\.00% +600 +450 +150 +0\.250 +0 +150 '
has "$tmp/cache" '^lru +3 +100\.00% +600 +600 +0 +0\.000 '
has "$tmp/cache" '^belady +1 +50\.00% '
# without skip the warm-up counts: 3 cold misses at 3 slots
run "$tmp/cache0" cache "$cap/cache_hand.json" --slots 3 --policy lru
has "$tmp/cache0" '^lru +3 +99\.51% +612 +609 +3 +0\.005 +3 +0 '
hasnt "$tmp/cache0" '^(lfu|belady) '

# the run's own pilot prefetches, placed before their passes (README.md)
run "$tmp/pf" cache "$cap/prefetch.json" --slots 2 --policy lru,belady
has "$tmp/pf" '^the capture holds the run.s pilot prefetches'
has "$tmp/pf" '^lru +2 +45\.00% +20 +9 +11 +0\.550 +2 +9 '
has "$tmp/pf" '^  pilot prefetch replayed \(lru, 2 slots\): 5 copies, 5 saved, 0 wasted$'
hasnt "$tmp/pf" 'replayed \(belady'

run "$tmp/win" window "$cap/cache_hand.json" --skip 5 --m 1,2,6,8
has "$tmp/win" '^ +1 +1\.00 +1\.00x +1\.00x$'
has "$tmp/win" '^ +2 +1\.50 +1\.50x +1\.33x$'
has "$tmp/win" '^ +6 +3\.00 +3\.00x +2\.00x$'
has "$tmp/win" '^ +8 +3\.00 +3\.00x +2\.67x$'

run "$tmp/router" router "$cap/router_a.json" "$cap/router_b.json"
has "$tmp/router" '^router concentration: 3 layers, 8 experts, top_k 2$'
has "$tmp/router" '^0 +490 +5 +7 +1 \| +8 +8 +0 +0\.625$'
has "$tmp/router" '^1 +400 +8 +8 +0 \| +5 +7 +1 +0\.625$'
has "$tmp/router" '^mean +6\.5 +7\.5 +0\.5 \| +6\.5 +7\.5 +0\.5 +0\.625$'
hasnt "$tmp/router" '^2 '
run "$tmp/router2" router "$cap/router_a.json,$cap/router_a.json"
has "$tmp/router2" '^0 +980 +5 +7 +1$'
has "$tmp/router2" '^1 +800 +8 +8 +0$'

run "$tmp/moe" cache "$cap/moe.json" --slots 4,8
has "$tmp/moe" '^PILOT recall: 100\.00% '
has "$tmp/moe" '^2 +4 +100\.00% +1\.00 +1\.00x '
# Belady is optimal: never below LFU or LRU at the same slot count
if awk '$1=="lfu"||$1=="lru"||$1=="belady"{h=$3; sub("%","",h); if($1=="belady") b[$2]=h; else if(h>m[$2]) m[$2]=h}
        END{n=0; for(s in b){n++; if(b[s]+0<m[s]+0) exit 1} exit n?0:1}' "$tmp/moe"; then ok; else bad "belady below lfu/lru in $tmp/moe"; fi

run "$tmp/ffn1" ffn "$cap/ffn_a.json"
has "$tmp/ffn1" '^FFN activation census: 3 layers, inter 1024, 8 decode passes \(3 prefill'
has "$tmp/ffn1" '^0 +68 +121 +128 +433 \| +0\.07% +0\.07% +4\.54% \| +1\.000 '
has "$tmp/ffn1" '^2 +512 +922 +973 +1014 \| +0\.00% +0\.00% +0\.00% \| +0\.000 +1\.000 '
hasnt "$tmp/ffn1" '^1 '
has "$tmp/ffn1" '^verdict: not sparse enough'
run "$tmp/ffn2" ffn "$cap/ffn_a.json,$cap/ffn_b.json"
has "$tmp/ffn2" '16 decode passes \(6 prefill'
# merging two equal captures leaves every share unchanged
if diff <(grep -E '^(0|2|mean|chance) ' "$tmp/ffn1") <(grep -E '^(0|2|mean|chance) ' "$tmp/ffn2") >/dev/null; then ok; else bad "ffn merge changed the shares"; fi

# ---- bad captures and arguments: one line on stderr, exit 1 ----
python3 - "$cap" "$tmp" <<'EOF' || bad "could not make the bad captures"
import json, sys
cap, tmp = sys.argv[1], sys.argv[2]
def load(n): return json.load(open(f"{cap}/{n}"))
def save(n, d): json.dump(d, open(f"{tmp}/{n}", "w"))
d = load("router_a.json"); d["counts"][0][0] += 1; save("bad_topk.json", d)
d = load("router_a.json"); d["counts"] = [[0] * 8 for _ in range(3)]; save("bad_zero.json", d)
d = load("router_a.json"); d["counts"] = d["counts"][:2]; save("bad_rows.json", d)
d = load("router_b.json"); d["counts"][1] = [0] * 8; save("b_quiet1.json", d)  # valid: B does not route at layer 1
d = load("cache_hand.json"); d["trace"][0][4] = 3; save("bad_trace.json", d)
d = load("cache_hand.json"); d["trace"][0][4] = 9; d["counts"][0].append(0); save("bad_id.json", d)
d = load("moe.json"); d["pred"][1] = d["pred"][1][:-2]; save("bad_pred.json", d)
d = load("moe.json"); d["pred"][0] = [1, 2]; save("bad_pred0.json", d)
d = load("ffn_a.json"); d["hist_count"][0][5] += 1; save("bad_hist.json", d)
d = load("ffn_a.json"); d["bucket_exp_offset"] = 32; save("bad_off.json", d)
d = load("ffn_a.json"); d["mass"] = [[0.0] * 1024 for _ in range(3)]; d["hist_mass"] = [[0.0] * 64 for _ in range(3)]; save("bad_mass.json", d)
d = load("ffn_a.json"); d["tapped"][1] = True; save("bad_tap.json", d)
EOF
head -c 300 "$cap/moe.json" >"$tmp/trunc.json"
: >"$tmp/empty.json"
echo 'not json' >"$tmp/text.json"
one_line() { # rc 1, exactly one stderr line naming the command
  "$cli" analyze "$@" >"$tmp/o" 2>"$tmp/e"; rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q '^turbospark analyze: ' "$tmp/e"; then ok
  else bad "analyze $*: rc=$rc stderr: $(cat "$tmp/e")"; fi
}
for f in bad_topk bad_zero bad_rows bad_id trunc empty text missing; do
  one_line router "$tmp/$f.json"
  [ -s "$tmp/o" ] && bad "router $f printed to stdout" || ok
done
one_line cache "$tmp/bad_trace.json"
one_line cache "$tmp/bad_pred.json"
one_line window "$tmp/bad_pred0.json"
one_line cache "$cap/router_a.json"            # no trace
one_line window "$cap/router_a.json"
one_line router "$cap/router_a.json" "$cap/cache_hand.json"   # shapes differ
for f in bad_hist bad_off bad_mass bad_tap trunc empty missing; do one_line ffn "$tmp/$f.json"; done
one_line ffn "$cap/ffn_a.json,$cap/moe.json"
one_line cache "$cap/moe.json" --slots 1          # below top_k
one_line cache "$cap/moe.json" --slots 0
one_line cache "$cap/moe.json" --policy fifo
one_line window "$cap/moe.json" --m x
one_line router "$cap/router_a.json" --bogus
one_line ffn "$cap/ffn_a.json" --html
one_line router "$cap/router_a.json" --html "$tmp/a.html" --html "$tmp/b.html"
one_line router

# ---- issue 9 regressions ----
# nothing on stdout on error, even when the bad value is not the first one
# (--slots 4,1 used to print the slots-4 rows before refusing slots 1)
for sl in 4,1 1,4 4,8,1; do
  one_line cache "$cap/moe.json" --slots $sl
  [ -s "$tmp/o" ] && bad "cache --slots $sl printed to stdout: $(head -c 200 "$tmp/o")" || ok
  grep -q 'below top_k 2' "$tmp/e" && ok || bad "cache --slots $sl: $(cat "$tmp/e")"
done
# a prediction naming one expert twice in a pass is refused, naming file,
# layer and pass (predictions 0,0 | 2,2 against a trace 0,1 | 2,3 counted the
# repeated prefetch twice: 100% coverage where the truth is 50%)
python3 - "$tmp" <<'EOF2' || bad "could not make the pilot captures"
import json, sys
t = sys.argv[1]
base = {"num_layers": 2, "num_experts": 4, "top_k": 2, "counts": [[0, 0, 0, 0], [1, 1, 1, 1]], "trace": [[], [0, 1, 2, 3]]}
json.dump(dict(base, pred=[[], [0, 0, 2, 2]]), open(f"{t}/pred_dup.json", "w"))
json.dump(dict(base, pred=[[], [0, 2, 2, 2]]), open(f"{t}/pred_dup2.json", "w"))
json.dump(dict(base, pred=[[], [0, 2, 2, 3]]), open(f"{t}/pred_ok.json", "w"))
EOF2
one_line cache "$tmp/pred_dup.json" --slots 4
grep -q 'pred_dup.json: inconsistent router capture: pred layer 1 pass 0 names expert 0 twice' "$tmp/e" && ok || bad "pred_dup: $(cat "$tmp/e")"
[ -s "$tmp/o" ] && bad "pred_dup printed to stdout" || ok
one_line cache "$tmp/pred_dup2.json" --slots 4
grep -q 'pred layer 1 pass 1 names expert 2 twice' "$tmp/e" && ok || bad "pred_dup2: $(cat "$tmp/e")"
one_line window "$tmp/pred_dup.json"
# distinct predictions: pass 0 prefetches 0 (used) and 2 (not yet), pass 1
# finds 2 and 3 missing and uses both: 3 of the 4 misses covered
run "$tmp/pilot" cache "$tmp/pred_ok.json" --slots 4 --policy lfu
has "$tmp/pilot" '^PILOT recall: 75\.00% '
has "$tmp/pilot" '^2 +4 +75\.00% +1\.33 +1\.25x +4$'
# the input cap: over it, one line naming the cap and the flag
for a in "router $cap/moe.json" "cache $cap/moe.json" "window $cap/moe.json" "ffn $cap/ffn_a.json"; do
  # shellcheck disable=SC2086
  one_line $a --max-input 4K
  grep -q 'is over the 4.0 KiB input cap (raise it with --max-input)' "$tmp/e" && ok || bad "analyze $a --max-input 4K: $(cat "$tmp/e")"
  # shellcheck disable=SC2086
  "$cli" analyze $a --max-input 1M >/dev/null 2>"$tmp/e" && ok || bad "analyze $a --max-input 1M: $(cat "$tmp/e")"
done
one_line router "$cap/router_a.json" "$cap/moe.json,$cap/moe.json" --max-input 4K   # a later file of group B too
one_line ffn "$cap/ffn_a.json" --max-input 0
one_line cache "$cap/moe.json" --max-input lots
one_line window "$cap/moe.json" --max-input
# a FIFO as a capture: refused at once, not a hang
mkfifo "$tmp/fifo.json"
for w in router cache window ffn; do
  timeout 10 "$cli" analyze $w "$tmp/fifo.json" >"$tmp/o" 2>"$tmp/e"; rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q 'fifo.json: not a regular file' "$tmp/e" && [ ! -s "$tmp/o" ]; then ok
  else bad "analyze $w FIFO: rc=$rc (124 = hung) $(cat "$tmp/e")"; fi
done
# --html must not write over a capture of the same run: same path, another
# spelling of it, a symlink or a hard link to it
mkdir "$tmp/in"
for f in moe ffn_a ffn_b router_a; do cp "$cap/$f.json" "$tmp/in/$f.json"; done
ln -s "$tmp/in/moe.json" "$tmp/in/sym.html"
ln "$tmp/in/moe.json" "$tmp/in/hard.html"
for h in "$tmp/in/moe.json" "$tmp/in/../in/moe.json" "$tmp/in/sym.html" "$tmp/in/hard.html"; do
  for w in cache window router; do
    one_line $w "$tmp/in/moe.json" --html "$h"
    grep -q 'refusing to write over an input' "$tmp/e" && ok || bad "analyze $w --html $h: $(cat "$tmp/e")"
  done
done
one_line router "$tmp/in/router_a.json" "$tmp/in/router_a.json,$tmp/in/moe.json" --html "$tmp/in/moe.json"   # in group B
one_line ffn "$tmp/in/ffn_a.json,$tmp/in/ffn_b.json" --html "$tmp/in/ffn_b.json"
cmp -s "$tmp/in/moe.json" "$cap/moe.json" && cmp -s "$tmp/in/ffn_b.json" "$cap/ffn_b.json" && ok || bad "a capture was overwritten"
[ "$(ls -A "$tmp/in" | tr '\n' ' ')" = "ffn_a.json ffn_b.json hard.html moe.json router_a.json sym.html " ] && ok || bad "files left in $tmp/in: $(ls -A "$tmp/in")"
# --html failures: one line, exit 1, nothing left behind
mkdir "$tmp/h"
one_line cache "$cap/cache_hand.json" --html "$tmp/nodir/x.html"
one_line window "$cap/cache_hand.json" --html "$tmp/h"
one_line cache "$cap/moe.json" --slots 1 --html "$tmp/h/fail.html"
one_line router "$tmp/bad_topk.json" --html "$tmp/h/fail2.html"
one_line ffn "$tmp/bad_hist.json" --html "$tmp/h/fail3.html"
[ -z "$(ls -A "$tmp/h")" ] && ok || bad "failed --html runs left files: $(ls -A "$tmp/h")"

# ---- --html pages ----
page() { # NAME ARGS...: writes $tmp/h/NAME.html; the text output must not change
  name=$1; shift
  "$cli" analyze "$@" >"$tmp/plain.$name" 2>/dev/null
  if "$cli" analyze "$@" --html "$tmp/h/$name.html" >"$tmp/with.$name" 2>"$tmp/e"; then ok; else bad "--html $name: $(cat "$tmp/e")"; return; fi
  cmp -s "$tmp/plain.$name" "$tmp/with.$name" && ok || bad "$name: --html changed the text output"
}
page router router "$cap/router_a.json" "$cap/router_b.json"
page router1 router "$cap/router_a.json,$cap/router_a.json"
page routerz router "$cap/router_a.json" "$tmp/b_quiet1.json"
page cache cache "$cap/cache_hand.json" --slots 2 --skip 12
page cachemoe cache "$cap/moe.json" --slots 4,8
page window window "$cap/moe.json" --m 2,4,8
page ffn ffn "$cap/ffn_a.json,$cap/ffn_b.json"
# an awkward capture name must come out escaped
cp "$cap/router_a.json" "$tmp/a<b>&\"q'.json"
page odd router "$tmp/a<b>&\"q'.json"
grep -q 'a&lt;b&gt;&amp;&quot;q&#39;.json' "$tmp/h/odd.html" && ok || bad "capture path not escaped"
grep -q 'a<b>' "$tmp/h/odd.html" && bad "raw < in page" || ok
ls "$tmp/h" | grep -q '\.tmp\.' && bad "temporary files left: $(ls "$tmp/h")" || ok

for p in router router1 routerz cache cachemoe window ffn odd; do
  f=$tmp/h/$p.html
  [ -s "$f" ] || { bad "$p.html missing"; continue; }
  head -c 15 "$f" | grep -q '<!DOCTYPE html>' && tail -n 1 "$f" | grep -q '</html>' && ok || bad "$p.html is not a whole page"
  # self-contained: no scripts, no src/href, no URL other than the SVG namespace
  if grep -Eiq '<script|<link|<img|<iframe|@import|(src|href) *=' "$f"; then bad "$p.html loads something"; else ok; fi
  if grep -Eo 'https?://[^"'"'"' )>]*' "$f" | grep -vqx 'http://www.w3.org/2000/svg'; then bad "$p.html has an external URL"; else ok; fi
  if grep -Eo 'url\([^)]*\)' "$f" | grep -vq '^url(#'; then bad "$p.html has an external url()"; else ok; fi
done
for p in router:2 router1:2 cache:1 cachemoe:1 window:1 ffn:2; do
  n=$(grep -c '<svg ' "$tmp/h/${p%:*}.html"); [ "$n" -eq "${p#*:}" ] && ok || bad "${p%:*}.html has $n charts, want ${p#*:}"
done
for p in router cache window; do grep -qi 'hit rates from random routers are a floor' "$tmp/h/$p.html" && ok || bad "$p.html lacks the random-router note"; done
grep -q 'cache_hand.json' "$tmp/h/cache.html" && ok || bad "cache.html lacks the capture path"
# the pages' tables and chart data carry the same numbers as the text
python3 - "$tmp/h" <<'EOF' && ok || bad "page tables/chart data disagree with the hand-derived numbers"
import sys, html.parser
class T(html.parser.HTMLParser):
    def __init__(s): super().__init__(); s.tables = []; s.cell = None
    def handle_starttag(s, t, a):
        if t == "table": s.tables.append([])
        elif t == "tr": s.tables[-1].append([])
        elif t in ("td", "th"): s.cell = ""
    def handle_endtag(s, t):
        if t in ("td", "th"): s.tables[-1][-1].append(s.cell.strip()); s.cell = None
    def handle_data(s, d):
        if s.cell is not None: s.cell += d
def tables(p):
    t = T(); t.feed(open(p, encoding="utf-8").read()); return t.tables
d = sys.argv[1]
t = tables(f"{d}/cache.html")
main = {(r[0], r[1]): r[2] for r in t[0][1:]}
assert main[("lfu", "2")] == "66.67%" and main[("lru", "2")] == "50.00%" and main[("belady", "2")] == "75.00%", main
chart = t[-1]  # hit rate vs slots: slots 1..4 x lfu, lru, belady
assert chart[0] == ["slots per layer", "lfu", "lru", "belady"], chart[0]
got = {r[0]: r[1:] for r in chart[1:]}
want = {"1": ["50.00%"] * 3, "2": ["66.67%", "50.00%", "75.00%"], "3": ["100.00%"] * 3, "4": ["100.00%"] * 3}
assert got == want, got
t = tables(f"{d}/router.html")
assert t[0][1] == ["0", "490", "5", "7", "1", "8", "8", "0", "0.625"], t[0][1]
cov = {r[0]: r for r in t[1][1:]}   # coverage curves: A layer 0 at k = 5 holds 950/980
hdr = t[1][0]
assert abs(float(cov["5"][hdr.index("A layer 0")].rstrip("%")) - 100 * 950 / 980) < 0.01, cov["5"]
t = tables(f"{d}/ffn.html")
assert t[0][1][:5] == ["0", "68", "121", "128", "433"], t[0][1]
sweep = {r[0]: r for r in t[-1][1:]}  # threshold sweep at t = 2^-4: layer 0 mass 4.54%, activations 87.5%
h = t[-1][0]
r = sweep["0.0625"]
assert r[h.index("mass below, layer 0")] == "4.54%" and r[h.index("activations below, layer 0")] == "87.50%", r
EOF

# ---- render in headless Chromium and check the screenshots are not blank ----
chrome=""
for b in chromium chromium-browser google-chrome; do command -v "$b" >/dev/null 2>&1 && { chrome=$(command -v "$b"); break; }; done
if [ -z "$chrome" ]; then
  if [ "${CI:-}" = "true" ]; then bad "chromium not found (scripts/install_deps.sh installs it); CI=true requires the render test"
  else echo "skipped: render test (chromium not found; scripts/install_deps.sh installs it)"; fi
else
  render() { # HTML PNG
    timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
      --user-data-dir="$tmp/profile" --window-size=1100,2400 --screenshot="$2" "file://$1" >"$tmp/chrome.log" 2>&1
    [ -s "$2" ]
  }
  # A tiny PNG decoder (zlib only): prints non-white share, distinct colours, saturated pixels, hue families
  cat >"$tmp/png.py" <<'EOF'
import sys, zlib, struct
from collections import Counter
from itertools import accumulate
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat = 8, b""
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if typ == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        assert depth == 8 and ctype in (2, 6) and not interlace, "unsupported PNG layout"
        bpp = 3 if ctype == 2 else 4
    elif typ == b"IDAT": idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
LO, HI = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
def add(x, y):  # bytewise (x + y) mod 256, all bytes at once
    a, b = int.from_bytes(x, "big"), int.from_bytes(y, "big")
    return bytearray((((a & LO) + (b & LO)) ^ ((a ^ b) & HI)).to_bytes(stride, "big"))
prev = bytearray(stride)
nonwhite = sat = 0
colours, hues = set(), set()
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 1:
        for ch in range(bpp): line[ch::bpp] = bytes(accumulate(line[ch::bpp], lambda s, v: (s + v) & 255))
    elif f == 2:
        line = add(line, prev)
    elif f in (3, 4):
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            if f == 3: line[i] = (line[i] + ((a + b) >> 1)) & 255
            else:
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    for (r, g, bl), n in Counter(zip(line[0::bpp], line[1::bpp], line[2::bpp])).items():
        colours.add((r >> 4, g >> 4, bl >> 4))
        mx, mn = max(r, g, bl), min(r, g, bl)
        if mn < 235: nonwhite += n
        if mx - mn > 70:  # a chart line's colour, not grey text
            sat += n
            hues.add((0 if g >= bl else 5) if mx == r else (1 if bl >= r else 2) if mx == g else (3 if r >= g else 4))
print(f"{nonwhite / (w * h):.4f} {len(colours)} {sat} {len(hues)}")
EOF
  # the checker must call an empty page blank, or it proves nothing
  echo '<!DOCTYPE html><html><body></body></html>' >"$tmp/blank.html"
  if render "$tmp/blank.html" "$tmp/blank.png"; then
    read -r share ncol nsat nhue < <(python3 "$tmp/png.py" "$tmp/blank.png")
    awk -v s="$share" -v n="$nsat" 'BEGIN{exit !(s < 0.001 && n == 0)}' && ok || bad "empty page not seen as blank: $share $ncol $nsat $nhue"
  else bad "chromium could not render an empty page: $(tail -n 3 "$tmp/chrome.log")"; fi
  for p in router cache cachemoe window ffn; do
    if ! render "$tmp/h/$p.html" "$tmp/$p.png"; then bad "chromium did not render $p.html: $(tail -n 3 "$tmp/chrome.log")"; continue; fi
    read -r share ncol nsat nhue < <(python3 "$tmp/png.py" "$tmp/$p.png")
    # text and charts: >= 2% non-white pixels, >= 12 distinct colours, >= 800 strongly coloured pixels in >= 3 hue families
    echo "$p.png: non-white $share, colours $ncol, coloured px $nsat, hues $nhue"
    if awk -v s="$share" -v c="$ncol" -v n="$nsat" -v h="$nhue" 'BEGIN{exit !(s >= 0.02 && c >= 12 && n >= 800 && h >= 3)}'; then ok
    else bad "$p.png looks blank: non-white $share, colours $ncol, coloured px $nsat, hues $nhue"; fi
  done
fi
# --backend, as on every command: the same report and one stderr line saying it selects nothing; a bad value refused
run "$tmp/bk0" cache "$cap/cache_hand.json" --slots 1,2,3 --skip 12
for k in cpu cuda auto; do
  if "$cli" analyze cache "$cap/cache_hand.json" --backend $k --slots 1,2,3 --skip 12 >"$tmp/bk1" 2>"$tmp/bk1.err" &&
     [ -s "$tmp/bk0" ] && cmp -s "$tmp/bk0" "$tmp/bk1" &&
     [ "$(cat "$tmp/bk1.err")" = "backend: none (analyze runs no model; --backend $k selects nothing)" ]; then ok
  else bad "analyze cache --backend $k: $(cat "$tmp/bk1.err")"; fi
done
"$cli" analyze router "$cap/cache_hand.json" --backend gpu >"$tmp/bk2" 2>"$tmp/bk2.err"; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/bk2.err")" -eq 1 ] && [ ! -s "$tmp/bk2" ] && grep -q "^turbospark analyze: --backend" "$tmp/bk2.err"; then ok
else bad "analyze --backend gpu: rc=$rc $(cat "$tmp/bk2.err")"; fi
finish
