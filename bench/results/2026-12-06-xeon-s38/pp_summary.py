#!/usr/bin/env python3
"""ppab.txt / moeab.txt: per level and file, new/base tok/s per round (the
two run next to each other) and their median."""
import re, statistics, sys, collections
for f in sys.argv[1:]:
    v = collections.defaultdict(dict)
    for l in open(f):
        m = re.match(r'(\w+):(\w+) r(\d+) (.*)', l)
        if not m: continue
        for name, val in re.findall(r'(\S+)\s+([\d.]+) ±\s+[\d.]+', m.group(4)):
            v[(m.group(2), name)][(int(m.group(3)), m.group(1))] = float(val)
    for (lvl, name), d in sorted(v.items()):
        rs = sorted({r for r, _ in d})
        rat = [d[(r, 'new')] / d[(r, 'base')] for r in rs if (r, 'new') in d and (r, 'base') in d]
        print('%s %-8s %-8s base %s | new %s | new/base %s median %.3f' % (f, lvl, name, ' '.join('%.1f' % d[(r, 'base')] for r in rs),
              ' '.join('%.1f' % d[(r, 'new')] for r in rs), ' '.join('%.2f' % x for x in rat), statistics.median(rat)))
