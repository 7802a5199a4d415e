#!/usr/bin/env python3
"""Issue 13's CPU targets against what bench/cpu_targets.sh measured in DIR:
one markdown row a target and level, with the measured median, its spread over
groups or rounds, and met / NOT MET. A target whose rows are missing is listed
as NOT MEASURED (never as met), and the exit status is 1 unless every target
that was measured is met and at least one was. A roofline share above 100%
in any run is UNRELIABLE (the bandwidth reading was under what the decode
had), counted as not met.

usage: cpu_targets.py DIR
"""
import csv, glob, os, re, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pair_summary import read_rows, summarize  # noqa: E402


def pair_ratio(path, test):
    """median, min, max, groups of turbospark / llama.cpp for test in a pair_bench TSV, and turbospark's
    median tok/s; None when the file or the test is absent"""
    if not os.path.exists(path):
        return None
    _, table = summarize(read_rows([path]))
    for _, t, done, ratios in table:
        if t == test and ratios.get("turbospark / llama.cpp"):
            v = ratios["turbospark / llama.cpp"]
            tps = statistics.median(float(e["turbospark"]["tps_mean"]) for _, e in done)
            return statistics.median(v), min(v), max(v), len(v), tps
    return None


def membw_medians(path):
    """the most threads membw ran at, and every median read GB/s it gave at that count (one a reading)"""
    most, got = 0, []
    for line in open(path):
        m = re.match(r"threads\s+(\d+)\s+read\s+best\s+[\d.]+ GB/s\s+median\s+([\d.]+) GB/s", line)
        if not m:
            continue
        t, v = int(m.group(1)), float(m.group(2))
        if t > most:
            most, got = t, []
        if t == most:
            got.append(v)
    return most, got


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    levels = []
    for f in sorted(glob.glob(os.path.join(d, "dense-*-*.tsv")) + glob.glob(os.path.join(d, "moe30b-*.tsv")) +
                    glob.glob(os.path.join(d, "roof-*.tsv"))):
        lv = f.rsplit("-", 1)[1][:-4]
        if lv not in levels:
            levels.append(lv)
    rows, measured, failed = [], 0, 0

    def add(target, level, res, goal, fmt="%.3fx", bound=None, why=None):
        """why: the measurement cannot be trusted for that reason (UNRELIABLE, not met)"""
        nonlocal measured, failed
        if res is None:
            rows.append((target, level, "-", "-", "NOT MEASURED"))
            return
        med, lo, hi, n = res[:4]
        # a share of a bound above the bound: the bound was not measured
        if why is None and bound is not None and hi > bound:
            why = "a run above " + fmt % bound + " (the probe read under what the decode had)"
        ok = med >= goal and why is None
        measured += 1
        failed += not ok
        verdict = "UNRELIABLE: " + why if why else "met" if ok else "NOT MET"
        rows.append((target, level, "**" + fmt % med + "**", (fmt + " .. " + fmt + " (%d)") % (lo, hi, n), verdict))

    for lv in levels:
        for m in ("1.5b", "7b"):
            add("%s pp512 >= 1.5x llama.cpp" % m, lv, pair_ratio(os.path.join(d, "dense-%s-%s.tsv" % (m, lv)), "pp512"), 1.5)
        tg = pair_ratio(os.path.join(d, "dense-7b-%s.tsv" % lv), "tg128")
        add("7b tg128 >= 1.1x llama.cpp", lv, tg, 1.1)
        bw, nb = os.path.join(d, "membw.txt"), os.path.join(d, "7b-bytes-a-token.txt")
        t, gbs = membw_medians(bw) if os.path.exists(bw) else (0, [])
        roof = os.path.join(d, "roof-%s.tsv" % lv)
        rr = list(csv.DictReader(open(roof), delimiter="\t")) if os.path.exists(roof) else []
        if rr and "kind" in rr[0]:  # bench/roof: the probe read after every decode token (cpu_targets.sh's roof part)
            for col, what in (("share_pct", "whole run"), ("top_share_pct", "its quarter with the most bandwidth")):
                name = "7b tg128 >= 70%% of the roofline, %s (probe read after every token" % what
                share = [float(r[col]) for r in rr if r["kind"] == "decode" and r.get(col)]
                # the bandwidth the rounds' quarters had: a run that never left a slow state says so here
                probe = [float(r["top_probe_gbs" if col == "top_share_pct" else "probe_gbs"]) for r in rr
                         if r["kind"] == "decode" and r.get(col)]
                if probe:
                    name += "; probe %.0f-%.0f GB/s" % (min(probe), max(probe))
                test = [float(r[col]) for r in rr if r["kind"] == "selftest" and r.get(col)]
                tests = ", ".join("%.0f%%" % x for x in test) or "missing"
                res = (statistics.median(share), min(share), max(share), len(share)) if share else None
                # the method's own noise: its self-test reads the same way in both phases, so it must give ~100%
                why = None if test and all(abs(x - 100) <= 10 for x in test) else "self-test %s, not within 90-110%%" % tests
                add(name + "; self-test %s)" % tests, lv, res, 70, "%.0f%%", 100, why)
        elif rr:  # older records: each tg128 against the higher membw reading around it
            share = []
            for r in rr:
                got = [float(r[k]) for k in ("membw_median_gbs", "membw_after_gbs") if r.get(k)]
                if r["tg128_tps"] and got:
                    share.append(100 * float(r["tg128_tps"]) * int(r["bytes_a_token"]) / 1e9 / max(got))
            add("7b tg128 >= 70% of the roofline (each run against membw read around it)", lv,
                (statistics.median(share), min(share), max(share), len(share)) if share else None, 70, "%.0f%%", 100)
        elif tg and gbs and os.path.exists(nb):
            # judged against the highest reading, the bandwidth the core showed it can have; the range covers them all
            share = sorted(100 * tg[4] * int(open(nb).read()) / 1e9 / g for g in gbs)
            add("7b tg128 >= 70%% of the roofline (membw %s GB/s, %d threads; judged at the highest)"
                % (", ".join("%.1f" % g for g in gbs), t), lv, (share[0], share[0], share[-1], len(share)), 70, "%.0f%%",
                100)
        else:
            add("7b tg128 >= 70% of the roofline", lv, None, 70)
    for f in sorted(glob.glob(os.path.join(d, "moe30b-*.tsv"))):
        lv = f.rsplit("-", 1)[1][:-4]
        add("30B-A3B warm pp512 >= 1.0x llama.cpp", lv, pair_ratio(f, "pp512"), 1.0)
        add("30B-A3B warm tg64 >= 1.0x llama.cpp", lv, pair_ratio(f, "tg64"), 1.0)
    cap = os.path.join(d, "cap", "rows.tsv")
    if os.path.exists(cap):
        by = {}
        for r in csv.reader(open(cap), delimiter="\t"):
            name, lv, tps = r[0], r[1], r[2]
            m = re.match(r".*-(pp512|tg32)-r(\d+)$", name)
            if m and tps:
                by.setdefault(lv, {}).setdefault(int(m.group(2)), {})[m.group(1)] = float(tps)
        for lv, rounds in by.items():
            v = [x["pp512"] / x["tg32"] for x in rounds.values() if "pp512" in x and "tg32" in x]
            add("30B-A3B at the 25% cap: prompt >= 10x the one-token path", lv,
                (statistics.median(v), min(v), max(v), len(v)) if v else None, 10.0)
    print("| target | level | median | min .. max (groups) | verdict |")
    print("| --- | --- | ---: | --- | --- |")
    for r in rows:
        print("| %s | %s | %s | %s | %s |" % r)
    print("\n%d measured, %d not met, %d not measured" % (measured, failed, sum(r[4] == "NOT MEASURED" for r in rows)))
    sys.exit(0 if measured and not failed else 1)


if __name__ == "__main__":
    main()
