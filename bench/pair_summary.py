#!/usr/bin/env python3
"""Summarize bench/pair_bench.sh rows: per model and test, each group's t/s
per engine and its ratios to llama.cpp (and after/before), then the median
ratio with its spread (min..max over groups).

usage: pair_summary.py ROWS.tsv [ROWS.tsv ...]   -> markdown on stdout
"""
import csv, statistics, sys
from collections import defaultdict


def read_rows(files):
    rows = []
    for f in files:
        rows += list(csv.DictReader(open(f), delimiter="\t"))
    return rows


def summarize(rows):
    """Per (model, test), in print order: the complete groups (every engine
    ran) as (group, {engine: row}), and per ratio name the per-group ratios
    (each turbospark engine over llama.cpp, and after/before). Returns
    (engines, [(model, test, groups, ratios)])."""
    groups = defaultdict(dict)   # (model, test, group) -> engine -> row
    for r in rows:
        groups[(r["model"], r["test"], int(r["group"]))][r["engine"]] = r
    engines = []
    for r in rows:
        if r["engine"] not in engines:
            engines.append(r["engine"])
    tsn = [e for e in engines if e != "llama.cpp"]
    keys = sorted({(m, t) for (m, t, _) in groups}, key=lambda k: (k[0], k[1][:2] != "pp", k[1]))
    out = []
    for m, t in keys:
        done, ratios = [], defaultdict(list)
        for g in sorted(g for (mm, tt, g) in groups if (mm, tt) == (m, t)):
            e = groups[(m, t, g)]
            # a group in progress (a run stopped, or read while it runs) may
            # lack any engine, llama.cpp included: not a group to judge yet
            if "llama.cpp" not in e or not all(x in e for x in engines):
                continue
            v = {x: float(e[x]["tps_mean"]) for x in engines}
            for x in tsn:
                ratios[x + " / llama.cpp"].append(v[x] / v["llama.cpp"])
            if "after" in tsn and "before" in tsn:
                ratios["after/before"].append(v["after"] / v["before"])
            done.append((g, e))
        out.append((m, t, done, ratios))
    return engines, out


def main():
    rows = read_rows(sys.argv[1:])
    if not rows:
        sys.exit("pair_summary: no rows")
    engines, table = summarize(rows)
    tsn = [e for e in engines if e != "llama.cpp"]
    both = "after" in tsn and "before" in tsn
    print("| model | test | group | " + " | ".join(e + " t/s" for e in engines) + " | "
          + " | ".join(e + " / llama.cpp" for e in tsn)
          + (" | after / before" if both else "") + " | load (first -> last run) |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in engines) + " | " + " | ".join("---:" for _ in tsn)
          + (" | ---:" if both else "") + " | --- |")
    for m, t, done, ratios in table:
        for i, (g, e) in enumerate(done):
            cells = ["%.2f ± %.2f" % (float(e[x]["tps_mean"]), float(e[x]["tps_sd"])) for x in engines]
            rs = ["%.2f" % v[i] for v in ratios.values()]
            order = sorted(engines, key=lambda x: int(e[x]["pos"]))
            load = "%s -> %s" % (e[order[0]]["load_before"], e[order[-1]]["load_after"])
            print("| %s | %s | %d | %s | %s | %s |" % (m, t, g, " | ".join(cells), " | ".join(rs), load))
    print()
    print("| model | test | ratio | median | min .. max | groups |")
    print("| --- | --- | --- | ---: | --- | ---: |")
    for m, t, _, ratios in table:
        for k, v in ratios.items():
            print("| %s | %s | %s | **%.2f** | %.2f .. %.2f | %d |" % (m, t, k, statistics.median(v), min(v), max(v), len(v)))


if __name__ == "__main__":
    main()
