#!/usr/bin/env bash
# A model file that shrinks under a running command (weights are used in place
# from the mapping, so the next touch of a lost page raises SIGBUS) must end
# with one line naming the file and exit status 1: no bare "Bus error", no core.
#
# Deterministic: `chat` reads its first line from a FIFO, so the model is
# loaded and waiting when the copy is truncated, and the first evaluation is
# what touches the lost pages. A second case truncates between two chat
# turns, after every weight page has been used. Dense, and MoE in every residency mode (the attention and
# embedding weights stay mapped in all of them).
cli=$1; fix=$2
. "$(dirname "$0")/lib.sh"
ulimit -c 0 2>/dev/null || true

# check DESC RC: exit status 1, and the expected line is stderr's last and
# only error line (MoE loads print their residency lines before it; several
# threads fault at once, one line must come out)
check() {
  local desc=$1 rc=$2 want="turbospark: $tmp/m.gguf changed size under the mapping (truncated?)"
  if [ "$rc" -eq 1 ] && [ "$(tail -n 1 "$tmp/e")" = "$want" ] && [ "$(grep -c 'turbospark' "$tmp/e")" -eq 1 ]; then ok
  else bad "$desc: rc=$rc stderr=[$(head -c 400 "$tmp/e")]"; fi
  [ -z "$(ls "$tmp" | grep -i core)" ] && ok || bad "$desc: core file left"
}

# chat_case DESC MODEL [flags...]: truncate while chat waits for its first line
chat_case() {
  local desc=$1 model=$2; shift 2
  rm -f "$tmp/in" "$tmp/o" "$tmp/e"
  cp "$model" "$tmp/m.gguf"
  mkfifo "$tmp/in"
  "$cli" chat -m "$tmp/m.gguf" --chat-template chatml --max-new 4 "$@" <"$tmp/in" >"$tmp/o" 2>"$tmp/e" &
  local pid=$!
  exec 3>"$tmp/in"
  local i
  for i in $(seq 600); do grep -qF '> ' "$tmp/o" 2>/dev/null && break; sleep 0.1; done
  if ! grep -qF '> ' "$tmp/o"; then
    bad "$desc: chat never prompted: [$(cat "$tmp/e")]"; exec 3>&-; kill "$pid" 2>/dev/null; wait "$pid"; return
  fi
  truncate -s 4096 "$tmp/m.gguf"
  echo "hello" >&3
  exec 3>&-
  wait "$pid"; local rc=$?
  check "$desc" "$rc"
}

chat_case "dense" "$fix/ref/tiny-llama-f32.gguf"
chat_case "moe mapped" "$fix/ref/tiny-qwen3moe-f32.gguf" --expert-residency mapped
chat_case "moe resident" "$fix/ref/tiny-qwen3moe-f32.gguf" --expert-residency resident
chat_case "moe streamed" "$fix/ref/tiny-qwen3moe-f32.gguf" --expert-residency streamed --expert-cache-slots 2

# mid-run: one whole chat turn first (every weight page touched and resident),
# then the truncation, then the second turn
rm -f "$tmp/in" "$tmp/o" "$tmp/e"
cp "$fix/ref/tiny-llama-f32.gguf" "$tmp/m.gguf"
mkfifo "$tmp/in"
"$cli" chat -m "$tmp/m.gguf" --chat-template chatml --max-new 8 <"$tmp/in" >"$tmp/o" 2>"$tmp/e" &
pid=$!
exec 3>"$tmp/in"
echo "hello" >&3
for i in $(seq 600); do grep -q '^\[stop=' "$tmp/e" 2>/dev/null && break; sleep 0.1; done
if grep -q '^\[stop=' "$tmp/e"; then
  truncate -s 4096 "$tmp/m.gguf"
  echo "again" >&3
  exec 3>&-
  wait "$pid"; rc=$?
  sed -i '/^\[stop=/d' "$tmp/e"
  check "second turn after truncation" "$rc"
else
  bad "first turn did not finish: [$(cat "$tmp/e")]"; exec 3>&-; kill "$pid" 2>/dev/null; wait "$pid"
fi

# the file whole again: the same commands succeed (the handler only speaks
# for a file that really changed)
cp "$fix/ref/tiny-llama-f32.gguf" "$tmp/m.gguf"
"$cli" run -m "$tmp/m.gguf" --prompt-ids "1 5 6 7" --max-new 4 --show-ids >/dev/null 2>"$tmp/e" && ok || bad "whole file: $(cat "$tmp/e")"

finish
