#!/usr/bin/env python3
"""Per shape: base and new ms (min and median over rounds), and the median of
the per-round ratios base/new (each round runs both, the order flipping)."""
import re, statistics, sys
for f in sys.argv[1:]:
    rows = {}  # (round, variant) -> {shape: ms}
    cur = None
    for l in open(f):
        m = re.match(r'== (\w+) r(\d+)', l)
        if m: cur = (int(m.group(2)), m.group(1)); rows[cur] = {}; continue
        m = re.match(r'(.{18}) (\S+)\s+\d+\s+\d+\s+([\d.]+)\s+([\d.]+)', l)
        if m and cur: rows[cur][(m.group(1).strip(), m.group(2))] = float(m.group(3))
    rounds = sorted({r for r, _ in rows})
    shapes = list(rows[(rounds[0], 'base')].keys())
    print(f'{f}: {len(rounds)} rounds')
    print('%-18s %-5s %9s %9s %9s %9s %7s %s' % ('shape', 'type', 'base min', 'new min', 'base med', 'new med', 'ratio', 'ratio min..max'))
    for s in shapes:
        b = [rows[(r, 'base')][s] for r in rounds]; n = [rows[(r, 'new')][s] for r in rounds]
        rt = [x / y for x, y in zip(b, n)]
        print('%-18s %-5s %9.3f %9.3f %9.3f %9.3f %7.3f %.2f..%.2f' % (s[0], s[1], min(b), min(n), statistics.median(b), statistics.median(n), statistics.median(rt), min(rt), max(rt)))
