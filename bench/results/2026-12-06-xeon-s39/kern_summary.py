#!/usr/bin/env python3
"""bench_kernels rows of run.sh kern (ROUND VERSION TYPE ISA dram l2 tile4),
summarised: the median of the per-round NEW/BASE ratios per type and level,
with their range, and the median GB/s of each."""
import collections, statistics, sys

rows = collections.defaultdict(dict)
for line in open(sys.argv[1] if len(sys.argv) > 1 else 'kern.txt'):
    r, v, t, isa, dram, l2, t4 = line.split()
    rows[(t, isa, r)][v] = (float(dram), float(l2), float(t4))
ratio = collections.defaultdict(lambda: [[], [], []])
gbs = collections.defaultdict(lambda: [[], [], []])
for (t, isa, r), v in rows.items():
    for i in range(3):
        ratio[(t, isa)][i].append(v['new'][i] / v['base'][i])
        for w in ('base', 'new'): gbs[(t, isa, w)][i].append(v[w][i])
print('| type | level | l2 base | l2 new | l2 new/base | tile4 new/base | l3 ("dram", 64 MB) new/base |')
print('|---|---|---:|---:|---:|---:|---:|')
for (t, isa), a in sorted(ratio.items()):
    f = lambda x: '%.3f (%.2f..%.2f)' % (statistics.median(x), min(x), max(x))
    print('| %s | %s | %.2f | %.2f | %s | %s | %s |' % (t, isa, statistics.median(gbs[(t, isa, 'base')][1]),
          statistics.median(gbs[(t, isa, 'new')][1]), f(a[1]), f(a[2]), f(a[0])))
