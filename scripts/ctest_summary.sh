#!/usr/bin/env bash
# ctest, then one summary line that counts skipped tests apart from passed
# ones. ctest's own line ("100% tests passed, 0 tests failed out of 43")
# leaves a skipped test out of "failed" and does not say how many were not
# run; a skip (exit 77, e.g. a CUDA test with TS_ALLOW_NO_GPU=1 on a machine
# without a GPU) must never read as a pass.
#   scripts/ctest_summary.sh BUILD_DIR JOBS [ctest args...]
set -u
build=${1:?usage: ctest_summary.sh BUILD_DIR JOBS [ctest args]}
jobs=${2:-2}
shift 2
junit=$(realpath -m "$build/ctest-junit.xml")
rm -f "$junit"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --output-junit "$junit" "$@"
rc=$?
python3 - "$junit" "${TS_ALLOW_NO_GPU:-}" <<'PY' || rc=1
import sys, xml.etree.ElementTree as ET
try:
    cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
except (OSError, ET.ParseError) as e:
    print(f"summary: no ctest results ({e})")
    sys.exit(1)
failed = [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None]
skipped = [c.get("name") for c in cases if c.find("skipped") is not None or c.get("status") == "notrun"]
passed = len(cases) - len(failed) - len(skipped)
line = f"summary: {passed} passed, {len(failed)} failed, {len(skipped)} skipped (not run, not passed)"
if skipped:
    why = "TS_ALLOW_NO_GPU=1 allowed the CUDA tests to skip without a GPU" if sys.argv[2] == "1" else "see each test's SKIPPED line"
    line += f": {', '.join(skipped)}; {why}"
print(line)
PY
exit $rc
