#!/usr/bin/env python3
"""One line per A/B TSV of bench/cuda/gpu_pairs.sh -B: the medians of the group means of each engine and the
median, min and max of the per-group ratios turbospark / base."""
import statistics as st
import sys

rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip() and not l.startswith("model")]
groups = {}
for r in rows:
    groups.setdefault((r[1], r[2]), {})[r[4]] = float(r[5])
for test in sorted({t for t, _ in groups}):
    g = [v for (t, _), v in groups.items() if t == test and "base" in v and "turbospark" in v]
    if not g:
        sys.exit("ab_summary: %s: no group with both engines" % sys.argv[1])
    rat = [v["turbospark"] / v["base"] for v in g]
    print("%-7s %-5s %-6s variant %8.2f  base %8.2f  ratio %.4f (%.4f..%.4f)  groups %d" %
          (sys.argv[2], sys.argv[3], test, st.median(v["turbospark"] for v in g), st.median(v["base"] for v in g),
           st.median(rat), min(rat), max(rat), len(g)))
