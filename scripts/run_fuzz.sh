#!/usr/bin/env bash
# Runs every fuzz harness in BUILD_DIR for a bounded number of iterations,
# seeded from the committed fixtures. Any crash or sanitizer report fails.
set -euo pipefail
build=$(cd "${1:-build-fuzz}" && pwd)
runs=${2:-20000}
secs=${FUZZ_SECONDS:-60}  # wall-clock bound per harness, whichever comes first
here=$(cd "$(dirname "$0")/.." && pwd)
fail=0
ran=0
for h in "$build"/fuzz_*; do
  [ -x "$h" ] || continue
  name=$(basename "$h")
  corpus=$(mktemp -d)
  case "$name" in
    fuzz_gguf)
      # small seeds only: the largest fixtures would dominate the budget
      cp "$here"/fuzz/corpus/gguf/* "$corpus/" 2>/dev/null || true
      find "$here/tests/fixtures" -name "*.gguf" -size -300k -exec cp {} "$corpus/" \; 2>/dev/null || true ;;
    fuzz_tokenizer)
      find "$here/tests/fixtures/vocab" -name '*.inp' -exec cp {} "$corpus/" \; 2>/dev/null || true ;;
  esac
  echo "== $name: $runs runs, $(ls "$corpus" | wc -l) seeds"
  if ! (cd "$corpus" && "$h" -runs="$runs" -max_total_time="$secs" -max_len=8192 -rss_limit_mb=2048 -timeout=30 "$corpus" >"$corpus.log" 2>&1); then
    echo "FAIL: $name"; tail -40 "$corpus.log"; fail=1
  else
    grep -E '^Done|stat::number_of_executed_units' "$corpus.log" | tail -1 || true
  fi
  ran=$((ran+1))
  rm -rf "$corpus" "$corpus.log"
done
[ "$ran" -gt 0 ] || { echo "no fuzz harnesses in $build"; exit 1; }
exit $fail
