#!/usr/bin/env python3
"""Summarize bench/pair_bench.sh rows: per model and test, each group's t/s
per engine and its ratios to llama.cpp (and after/before), then the median
ratio with its spread (min..max over groups).

usage: pair_summary.py ROWS.tsv [ROWS.tsv ...]   -> markdown on stdout
"""
import csv, statistics, sys
from collections import defaultdict


def main():
    rows = []
    for f in sys.argv[1:]:
        rows += list(csv.DictReader(open(f), delimiter="\t"))
    if not rows:
        sys.exit("pair_summary: no rows")
    groups = defaultdict(dict)   # (model, test, group) -> engine -> row
    for r in rows:
        groups[(r["model"], r["test"], int(r["group"]))][r["engine"]] = r
    engines = []
    for r in rows:
        if r["engine"] not in engines:
            engines.append(r["engine"])
    tsn = [e for e in engines if e != "llama.cpp"]
    keys = sorted({(m, t) for (m, t, _) in groups}, key=lambda k: (k[0], k[1][:2] != "pp", k[1]))
    print("| model | test | group | " + " | ".join(e + " t/s" for e in engines) + " | "
          + " | ".join(e + " / llama.cpp" for e in tsn)
          + (" | after / before" if "after" in tsn and "before" in tsn else "") + " | load (first -> last run) |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in engines) + " | " + " | ".join("---:" for _ in tsn)
          + (" | ---:" if "after" in tsn and "before" in tsn else "") + " | --- |")
    summary = []
    for m, t in keys:
        ratios = defaultdict(list)
        for g in sorted(g for (mm, tt, g) in groups if (mm, tt) == (m, t)):
            e = groups[(m, t, g)]
            if not all(x in e for x in engines):
                continue
            v = {x: float(e[x]["tps_mean"]) for x in engines}
            cells = ["%.2f ± %.2f" % (v[x], float(e[x]["tps_sd"])) for x in engines]
            rs = []
            for x in tsn:
                ratios[x].append(v[x] / v["llama.cpp"])
                rs.append("%.2f" % (v[x] / v["llama.cpp"]))
            if "after" in tsn and "before" in tsn:
                ratios["after/before"].append(v["after"] / v["before"])
                rs.append("%.2f" % (v["after"] / v["before"]))
            order = sorted(engines, key=lambda x: int(e[x]["pos"]))
            load = "%s -> %s" % (e[order[0]]["load_before"], e[order[-1]]["load_after"])
            print("| %s | %s | %d | %s | %s | %s |" % (m, t, g, " | ".join(cells), " | ".join(rs), load))
        summary.append((m, t, ratios))
    print()
    print("| model | test | ratio | median | min .. max | groups |")
    print("| --- | --- | --- | ---: | --- | ---: |")
    for m, t, ratios in summary:
        for k, v in ratios.items():
            name = k if "/" in k else k + " / llama.cpp"
            print("| %s | %s | %s | **%.2f** | %.2f .. %.2f | %d |" % (m, t, name, statistics.median(v), min(v), max(v), len(v)))


if __name__ == "__main__":
    main()
