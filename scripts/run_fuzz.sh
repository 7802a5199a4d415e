#!/usr/bin/env bash
# Runs every fuzz harness in BUILD_DIR for a bounded number of iterations,
# seeded from the committed corpora and fixtures. Any crash, leak or sanitizer
# report fails.
#
#   scripts/run_fuzz.sh [BUILD_DIR] [RUNS] [HARNESS...]
#
# FUZZ_SECONDS bounds each harness's wall-clock time (whichever of RUNS and
# the time comes first); FUZZ_KEEP=DIR keeps each harness's grown corpus and
# log in DIR/<harness>/ instead of a temporary directory (long runs:
# docs/RELIABILITY.md). Crashing inputs are kept in BUILD_DIR/fuzz-artifacts/.
set -euo pipefail
build=$(cd "${1:-build-fuzz}" && pwd)
runs=${2:-20000}
shift $(( $# > 2 ? 2 : $# ))
only=("$@")
secs=${FUZZ_SECONDS:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
fail=0
ran=0
artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
for h in "$build"/fuzz_*; do
  [ -x "$h" ] || continue
  name=$(basename "$h")
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  if [ -n "${FUZZ_KEEP:-}" ]; then
    corpus=$FUZZ_KEEP/$name/corpus; mkdir -p "$corpus"; log=$FUZZ_KEEP/$name/run.log
  else
    corpus=$(mktemp -d); log=$corpus.log
  fi
  maxlen=8192
  dict=()
  case "$name" in
    fuzz_gguf)
      # small seeds only: the largest fixtures would dominate the budget
      cp "$here"/fuzz/corpus/gguf/* "$corpus/" 2>/dev/null || true
      find "$here/tests/fixtures" -name "*.gguf" -size -300k -exec cp {} "$corpus/" \; 2>/dev/null || true
      dict=(-dict="$here/fuzz/gguf.dict") ;;
    fuzz_tokenizer)
      find "$here/tests/fixtures/vocab" -name '*.inp' -exec cp {} "$corpus/" \; 2>/dev/null || true ;;
    fuzz_model)
      # structured and raw seeds (fuzz/fuzz_model.c says how they are made);
      # raw ones are whole tiny GGUFs of up to ~24 KiB
      cp "$here"/fuzz/corpus/model/* "$corpus/" 2>/dev/null || true
      maxlen=32768
      dict=(-dict="$here/fuzz/gguf.dict") ;;
    fuzz_chat)
      cp "$here"/fuzz/corpus/chat/* "$corpus/" 2>/dev/null || true
      dict=(-dict="$here/fuzz/chat.dict") ;;
    fuzz_server_request)
      cp "$here"/fuzz/corpus/server/* "$corpus/" 2>/dev/null || true
      dict=(-dict="$here/fuzz/server.dict") ;;
    fuzz_captures)
      cp "$here"/tests/fixtures/captures/*.json "$corpus/" 2>/dev/null || true
      maxlen=16384 ;;
  esac
  echo "== $name: $runs runs, $(ls "$corpus" | wc -l) seeds"
  if ! "$h" -runs="$runs" -max_total_time="$secs" -max_len="$maxlen" -rss_limit_mb=2048 -timeout=30 \
        -artifact_prefix="$artifacts/$name-" ${dict[@]+"${dict[@]}"} "$corpus" >"$log" 2>&1; then
    echo "FAIL: $name (input kept in $artifacts)"; tail -40 "$log"; fail=1
  else
    grep -E '^Done|stat::number_of_executed_units' "$log" | tail -1 || true
  fi
  ran=$((ran+1))
  [ -n "${FUZZ_KEEP:-}" ] || rm -rf "$corpus" "$log"
done
[ "$ran" -gt 0 ] || { echo "no fuzz harnesses in $build"; exit 1; }
exit $fail
