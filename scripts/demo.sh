#!/usr/bin/env bash
# make demo: the main job for a new user. Inspects and tokenizes with a
# shipped vocabulary (the forward pass lands next).
set -euo pipefail
cli=${1:-build/turbospark}
here=$(cd "$(dirname "$0")/.." && pwd)
vocab="$here/tests/fixtures/vocab/ggml-vocab-llama-spm.gguf"
echo "== turbospark inspect $vocab"
"$cli" inspect "$vocab"
echo
echo "== printf 'Hello, world! Привет 👋' | turbospark tokenize -m $vocab --pieces"
printf 'Hello, world! Привет 👋' | "$cli" tokenize -m "$vocab" --pieces
printf 'Hello, world! Привет 👋' | "$cli" tokenize -m "$vocab"
