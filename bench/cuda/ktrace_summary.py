#!/usr/bin/env python3
"""Where a replayed decode token's time goes, from a ktrace.tsv (bench/cuda/ktrace.c).

Each cudaGraphLaunch is one group of kernels (same correlation id). Within a
replay, kernels sorted by start; for kernel k after k-1:

  advance  = end[k] - end[k-1]          the token's progress while k was last to
                                        finish: these sum to the replay's span
                                        (first start to last end), exactly
  overlap  = end[k-1] - start[k]        > 0: k was launched before k-1 ended
                                        (programmatic dependent launch)
  idle     = max(0, start[k] - end[k-1]) no kernel of the token on the GPU

Invariants checked (a violation fails the run, exit 1):
  - the trace ends with ktrace's "# kernels N dropped 0" line (no lost records,
    the process flushed);
  - at least --min-replays replays of one graph, all with the same kernel
    sequence (names, grids, blocks);
  - end[k] >= end[k-1]: no kernel of a token completes before its predecessor.
    The engine's PDL rule (every kernel waits in ts_pdl_enter before it writes)
    promises this; the trace sees it from outside.
  - the advances sum to the span (the arithmetic above, per replay).
With --tok-s X (bench's own figure from the same run, CUDA events), the mean
replay period (start to next start) is compared with 1e9 / X ns.

A trace taken with KTRACE_MEMCPY=1 also holds the device's copies (rows named
memcpy:KIND:BYTES); those outside any graph that start between the end of a
summarized replay and the start of the next are reported per gap: what a
token spends on copies outside its graph (the logits out, the next id in).

--self-test runs the arithmetic and the checks on a made-up trace.
"""
import argparse
import collections
import re
import shutil
import statistics
import subprocess
import sys


def fail(msg):
    print(f"ktrace_summary: {msg}", file=sys.stderr)
    sys.exit(1)


def read_trace(path):
    rows, footer = [], None
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        if head[:2] != ["start", "end"]:
            fail(f"{path}: not a ktrace file (header {head[:3]})")
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                footer = line
                continue
            p = line.split("\t")
            if len(p) != 10:
                fail(f"{path}: a row of {len(p)} fields: {line[:80]}")
            rows.append(dict(start=int(p[0]), end=int(p[1]), corr=int(p[2]), graph=int(p[3]), node=int(p[4]),
                             stream=int(p[5]), grid=int(p[6]), block=int(p[7]), regs=int(p[8]), name=p[9]))
    if footer is None:
        fail(f"{path}: no footer line: the traced process did not flush (it crashed or was killed)")
    m = re.match(r"# kernels (\d+) dropped (\d+)(?: copies (\d+))?(.*)", footer)
    if not m:
        fail(f"{path}: unreadable footer {footer!r}")
    if int(m.group(2)) != 0:
        fail(f"{path}: CUPTI dropped {m.group(2)} records: the trace is incomplete")
    if "errors" in m.group(4):
        fail(f"{path}: ktrace reported CUPTI errors")
    n_copies = sum(1 for r in rows if r["name"].startswith("memcpy:"))
    if int(m.group(1)) != len(rows) - n_copies or int(m.group(3) or 0) != n_copies:
        fail(f"{path}: footer says {m.group(1)} kernels and {m.group(3) or 0} copies, the file holds "
             f"{len(rows) - n_copies} and {n_copies}")
    return rows


def demangle(names):
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True)
    outs = r.stdout.split("\n")
    if r.returncode != 0 or len(outs) < len(names):
        return {n: n for n in names}
    return dict(zip(names, outs))


def short(dm):
    """'void mv_q_q8<12, 1, 4>(MvArgs)' -> 'mv_q_q8<12, 1, 4>': the name without
    its return type and its trailing parameter list (the demanglers differ on
    namespaces: cu++filt's '<unnamed>::', c++filt's '(anonymous namespace)::')"""
    s = re.sub(r"^void ", "", dm.strip())
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += s[i] == ")"
            depth -= s[i] == "("
            if depth == 0:
                return s[:i] or s
    return s


def replays(rows, min_replays):
    g = collections.defaultdict(list)
    for r in rows:
        if r["graph"] != 0 and not r["name"].startswith("memcpy:"):
            g[(r["graph"], r["corr"])].append(r)
    if not g:
        fail("no kernel ran from a CUDA graph: nothing to summarize (was this a decode run on --backend cuda?)")
    by_graph = collections.defaultdict(list)
    for (graph, _), ks in g.items():
        ks.sort(key=lambda r: (r["start"], r["end"]))
        by_graph[graph].append(ks)
    graph, reps = max(by_graph.items(), key=lambda kv: len(kv[1]))
    reps.sort(key=lambda ks: ks[0]["start"])
    if len(reps) < min_replays:
        fail(f"graph {graph}: {len(reps)} replays, fewer than --min-replays {min_replays}")
    sig0 = [(k["name"], k["grid"], k["block"]) for k in reps[0]]
    for i, ks in enumerate(reps):
        sig = [(k["name"], k["grid"], k["block"]) for k in ks]
        if sig != sig0:
            fail(f"graph {graph}: replay {i} ran a different kernel sequence ({len(sig)} kernels against {len(sig0)})")
    return graph, reps, len(by_graph)


def analyze(reps, skip):
    if skip >= len(reps):
        fail(f"--skip {skip} leaves no replay of {len(reps)}")
    n = len(reps[0])
    per_pos = [collections.defaultdict(list) for _ in range(n)]
    spans, periods, idles, violations = [], [], [], 0
    for ri, ks in enumerate(reps):
        if ri < skip:
            continue
        span = ks[-1]["end"] - ks[0]["start"]
        adv_sum, idle = 0, 0
        for k, r in enumerate(ks):
            if k == 0:
                adv, ov, idl = r["end"] - r["start"], 0, 0
            else:
                p = ks[k - 1]
                adv = r["end"] - p["end"]
                ov = p["end"] - r["start"]
                idl = max(0, r["start"] - p["end"])
                if adv < 0:
                    violations += 1
            adv_sum += adv
            idle += idl
            d = per_pos[k]
            d["advance"].append(adv)
            d["overlap"].append(ov)
            d["idle"].append(idl)
            d["dur"].append(r["end"] - r["start"])
        if adv_sum != span:
            fail(f"replay {ri}: advances sum to {adv_sum} ns, the span is {span} ns")
        spans.append(span)
        idles.append(idle)
        if ri + 1 < len(reps):
            periods.append(reps[ri + 1][0]["start"] - ks[0]["start"])
    if violations:
        fail(f"{violations} kernels ended before their predecessor in the same replay: stream order broken")
    return per_pos, spans, periods, idles


def report(rows, graph, reps, n_graphs, per_pos, spans, periods, idles, tok_s, positions_out):
    names = sorted({k["name"] for k in reps[0]})
    dm = demangle(names)
    n = len(reps[0])
    nrep = len(spans)
    span = statistics.median(spans)
    period = statistics.mean(periods) if periods else float("nan")
    print(f"graph {graph}: {len(reps)} replays ({nrep} summarized), {n} kernels each; {n_graphs} graph(s) in the trace")
    print(f"replay span (first kernel start to last end): median {span / 1e3:.1f} us")
    if periods:
        print(f"replay period (start to next start): mean {period / 1e3:.1f} us -> {1e9 / period:.1f} replays/s; "
              f"between replays (period - span): {(period - statistics.mean(spans[:len(periods)])) / 1e3:.1f} us")
    print(f"idle inside a replay (no kernel of it on the GPU): median {statistics.median(idles) / 1e3:.1f} us "
          f"({100 * statistics.median(idles) / span:.1f}% of the span)")
    if tok_s:
        want = 1e9 / tok_s
        print(f"bench's tok/s {tok_s}: {want / 1e3:.1f} us a token; trace period / that = {period / want:.3f}")
    # by class
    cls = collections.OrderedDict()
    for k, r in enumerate(reps[0]):
        key = (r["name"], r["grid"], r["block"])  # mangled: two kernels never merge under one short name
        c = cls.setdefault(key, dict(launches=0, adv=0.0, dur=0.0, ov=0.0, idle=0.0, regs=r["regs"]))
        c["launches"] += 1
        c["adv"] += statistics.median(per_pos[k]["advance"])
        c["dur"] += statistics.median(per_pos[k]["dur"])
        c["ov"] += statistics.median(per_pos[k]["overlap"])
        c["idle"] += statistics.median(per_pos[k]["idle"])
    tot = sum(c["adv"] for c in cls.values())
    print()
    print("| kernel | grid x block | regs | launches | advance us/token | share | us/launch | overlap us/launch | idle us/token |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (mangled, grid, block), c in sorted(cls.items(), key=lambda kv: -kv[1]["adv"]):
        name = short(dm[mangled])
        print(f"| `{name}` | {grid} x {block} | {c['regs']} | {c['launches']} | {c['adv'] / 1e3:.1f} | "
              f"{100 * c['adv'] / tot:.1f}% | {c['adv'] / c['launches'] / 1e3:.2f} | "
              f"{c['ov'] / c['launches'] / 1e3:.2f} | {c['idle'] / 1e3:.1f} |")
    print(f"| total (medians per position) | | | {n} | {tot / 1e3:.1f} | 100% | | | |")
    copies = sorted((r for r in rows if r["name"].startswith("memcpy:") and r["graph"] == 0), key=lambda r: r["start"])
    if copies:
        gaps = between_copies(reps, copies, len(reps) - len(spans))
        if gaps:
            print()
            print(f"copies outside the graph between replays ({len(gaps)} gaps; medians per gap):")
            kinds = sorted({k for g in gaps for k in g})
            for k in kinds:
                n = statistics.median(g.get(k, (0, 0, 0))[0] for g in gaps)
                b = statistics.median(g.get(k, (0, 0, 0))[1] for g in gaps)
                t = statistics.median(g.get(k, (0, 0, 0))[2] for g in gaps)
                print(f"  {k}: {n:g} copies, {b:.0f} bytes, {t / 1e3:.1f} us of copy time")
    if positions_out:
        with open(positions_out, "w") as f:
            f.write("pos\tkernel\tgrid\tblock\tadvance_ns\toverlap_ns\tidle_ns\tdur_ns\n")
            for k, r in enumerate(reps[0]):
                d = per_pos[k]
                f.write(f"{k}\t{short(dm[r['name']])}\t{r['grid']}\t{r['block']}\t{statistics.median(d['advance']):.0f}\t"
                        f"{statistics.median(d['overlap']):.0f}\t{statistics.median(d['idle']):.0f}\t"
                        f"{statistics.median(d['dur']):.0f}\n")


def between_copies(reps, copies, skip):
    """Per gap after a summarized replay: {kind: (copies, bytes, ns)} of the
    copies outside graphs that start after the replay's last kernel ends and
    before the next replay's first kernel starts."""
    gaps, j = [], 0
    for ri in range(skip, len(reps) - 1):
        lo, hi = reps[ri][-1]["end"], reps[ri + 1][0]["start"]
        while j < len(copies) and copies[j]["start"] < lo:
            j += 1
        d, k = {}, j
        while k < len(copies) and copies[k]["start"] < hi:
            _, kind, nbytes = copies[k]["name"].split(":")
            n, b, t = d.get(kind, (0, 0, 0))
            d[kind] = (n + 1, b + int(nbytes), t + copies[k]["end"] - copies[k]["start"])
            k += 1
        gaps.append(d)
    return gaps


def self_test():
    import os
    import tempfile

    # two kernels a replay, 4 replays 1000 ns apart; kernel b launched 50 ns
    # before a ends (overlap), then one idle case
    lines = ["start\tend\tcorr\tgraph\tnode\tstream\tgrid\tblock\tregs\tname"]
    for i in range(4):
        t = 10_000 + 1000 * i
        lines.append(f"{t}\t{t + 300}\t{7 + i}\t5\t1\t13\t132\t128\t96\t_Z1av")
        lines.append(f"{t + 250}\t{t + 700}\t{7 + i}\t5\t2\t13\t14\t256\t32\t_Z1bv")
    lines.append("0\t100\t1\t0\t0\t13\t1\t32\t16\t_Z1cv")  # not from a graph: ignored
    body = "\n".join(lines) + "\n"

    def run(text, expect_fail):
        fd, p = tempfile.mkstemp(suffix=".tsv")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            rows = read_trace(p)
            graph, reps, ng = replays(rows, 2)
            per_pos, spans, periods, idles = analyze(reps, 1)
            got = (statistics.median(spans), statistics.mean(periods), statistics.median(per_pos[1]["advance"]),
                   statistics.median(per_pos[1]["overlap"]), statistics.median(idles))
            if expect_fail:
                print(f"self-test: a bad trace passed ({text[-60:]!r})", file=sys.stderr)
                return False
            return got == (700, 1000, 400, 50, 0)
        except SystemExit:
            return expect_fail
        finally:
            os.unlink(p)

    ok = [
        run(body + "# kernels 9 dropped 0\n", False),
        run(body + "# kernels 9 dropped 3\n", True),  # dropped records
        run(body, True),  # no footer
        run(body + "# kernels 8 dropped 0\n", True),  # count mismatch
        # b ends before a in one replay: stream order broken
        run(body.replace("11250\t11700", "11250\t11290") + "# kernels 9 dropped 0\n", True),
        # a replay with a different sequence
        run(body.replace("12250\t12700\t9\t5\t2\t13\t14", "12250\t12700\t9\t5\t2\t13\t15") + "# kernels 9 dropped 0\n", True),
    ]
    # copies: after each replay's end a 608 KB DtoH (40 ns) and before the next an 8-byte HtoD (5 ns)
    copy_lines = []
    for i in range(4):
        t = 10_000 + 1000 * i
        copy_lines.append(f"{t + 720}\t{t + 760}\t{90 + i}\t0\t0\t13\t0\t0\t0\tmemcpy:DtoH:608256")
        copy_lines.append(f"{t + 990}\t{t + 995}\t{95 + i}\t0\t0\t13\t0\t0\t0\tmemcpy:HtoD:8")
    cbody = body + "\n".join(copy_lines) + "\n"
    fd, p = tempfile.mkstemp(suffix=".tsv")
    with os.fdopen(fd, "w") as f:
        f.write(cbody + "# kernels 9 dropped 0 copies 8\n")
    try:
        rows = read_trace(p)
        graph, reps, ng = replays(rows, 2)
        cps = sorted((r for r in rows if r["name"].startswith("memcpy:")), key=lambda r: r["start"])
        gaps = between_copies(reps, cps, 1)
        ok.append(len(gaps) == 2 and all(g == {"DtoH": (1, 608256, 40), "HtoD": (1, 8, 5)} for g in gaps))
    except SystemExit:
        ok.append(False)
    finally:
        os.unlink(p)
    ok.append(run(cbody + "# kernels 9 dropped 0 copies 7\n", True))  # copy count mismatch
    ok.append(short("void <unnamed>::mv_q_q8<(int)12, (int)1>(MvArgs)") == "<unnamed>::mv_q_q8<(int)12, (int)1>"
              and short("(anonymous namespace)::mv_q_q8<12, 1>(MvArgs)") == "(anonymous namespace)::mv_q_q8<12, 1>"
              and short("rope_table_kernel(float const*, int)") == "rope_table_kernel"
              and short("_Z1av") == "_Z1av")
    print(f"ktrace_summary self-test: {sum(ok)}/{len(ok)} passed")
    return all(ok)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--skip", type=int, default=1, help="replays to leave out at the start (default 1)")
    ap.add_argument("--min-replays", type=int, default=8)
    ap.add_argument("--tok-s", type=float, help="bench's tok/s from the same run, to compare with")
    ap.add_argument("--positions", help="write per-position medians to this TSV")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        sys.exit(0 if self_test() else 1)
    if not a.trace:
        ap.error("a trace file is needed")
    rows = read_trace(a.trace)
    graph, reps, ng = replays(rows, a.min_replays)
    per_pos, spans, periods, idles = analyze(reps, a.skip)
    report(rows, graph, reps, ng, per_pos, spans, periods, idles, a.tok_s, a.positions)


if __name__ == "__main__":
    main()
