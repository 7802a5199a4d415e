#!/usr/bin/env bash
# inspect: works on every shipped vocab GGUF; bad input gives one line and exit 1.
cli=$1; fix=$2
. "$(dirname "$0")/lib.sh"
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
# a FIFO as the file: refused at once (opening it for reading used to block forever)
mkfifo "$tmp/fifo.gguf"
timeout 10 "$cli" inspect "$tmp/fifo.gguf" >"$tmp/o" 2>"$tmp/e"; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && [ ! -s "$tmp/o" ] && grep -q "turbospark inspect: .*fifo.gguf: not a regular file" "$tmp/e"; then ok
else bad "inspect FIFO: rc=$rc (124 = hung) $(cat "$tmp/e")"; fi
# hostile metadata: terminal escapes and invalid UTF-8 in general.name, keys
# and values. Text: nothing a terminal obeys; JSON: valid JSON, valid UTF-8.
python3 - "$tmp/evil.gguf" <<'EOF2' || bad "could not write the hostile GGUF"
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
kvs = [(b"general.architecture", b"llama"),
       (b"general.name", b"evil\x1b]0;pwned\x07\x1b[2J\x1bc\xc2\x9b\xff\x9b\\x"),
       (b"tokenizer.ggml.model", b"gpt2\x1b[31m"),
       (b"key\x1b[2J\xff", b"val\xfe\x00\x1b")]
body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
for k, v in kvs: body += s(k) + struct.pack("<I", 8) + s(v)
open(sys.argv[1], "wb").write(body)
EOF2
if "$cli" inspect "$tmp/evil.gguf" >"$tmp/o" 2>"$tmp/e"; then ok; else bad "inspect evil.gguf: $(cat "$tmp/e")"; fi
python3 - "$tmp/o" <<'EOF2' && ok || bad "inspect text output carries control characters: $(od -c "$tmp/o" | head -20)"
import sys
t = open(sys.argv[1], "rb").read().decode("utf-8")  # strict: invalid UTF-8 raises
bad = [c for c in t if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
assert not bad, bad
assert "name:         evil\\x1b]0;pwned\\x07\\x1b[2J\\x1bc\\u009b\\xff\\x9b\\\\x\n" in t, t
assert "tokenizer:    gpt2\\x1b[31m, 0 tokens\n" in t, t
EOF2
if "$cli" inspect --json "$tmp/evil.gguf" >"$tmp/j" 2>"$tmp/e"; then ok; else bad "inspect --json evil.gguf: $(cat "$tmp/e")"; fi
python3 - "$tmp/j" <<'EOF2' && ok || bad "inspect --json of evil.gguf is not valid JSON in UTF-8: $(od -c "$tmp/j" | head -20)"
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))  # strict UTF-8, then strict JSON
assert d["name"] == "evil\x1b]0;pwned\x07\x1b[2J\x1bc\x9b\ufffd\ufffd\\x", repr(d["name"])
assert d["metadata"]["key\x1b[2J\ufffd"] == "val\ufffd\ufffd\x1b", d["metadata"]
EOF2
"$cli" inspect >/dev/null 2>&1 && bad "inspect with no file succeeded" || ok
"$cli" inspect --bogus x >/dev/null 2>&1 && bad "unknown flag accepted" || ok
# --backend, as on every command: the same output and one stderr line saying it selects nothing; a bad value refused
f=$(ls "$fix"/vocab/*.gguf | head -1)
"$cli" inspect "$f" >"$tmp/b0" 2>/dev/null && [ -s "$tmp/b0" ] && ok || bad "inspect $f (the --backend checks' base)"
for k in cpu cuda auto; do
  if "$cli" inspect --backend $k "$f" >"$tmp/b1" 2>"$tmp/e" && cmp -s "$tmp/b0" "$tmp/b1" &&
     [ "$(cat "$tmp/e")" = "backend: none (inspect runs no model; --backend $k selects nothing)" ]; then ok
  else bad "inspect --backend $k: $(cat "$tmp/e")"; fi
done
for v in gpu ""; do
  "$cli" inspect "$f" --backend $v >"$tmp/o" 2>"$tmp/e"; rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && [ ! -s "$tmp/o" ] && grep -q "^turbospark inspect: .*--backend" "$tmp/e"; then ok
  else bad "inspect --backend '$v': rc=$rc $(cat "$tmp/e")"; fi
done
finish
