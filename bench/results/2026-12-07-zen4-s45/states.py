# one-off split of the session's roof decode rounds (targets/roof-rows/LEVEL-[1-5].tsv, and
# roof-avx2-more/roof-rows/avx2-[1-5].tsv) by the token's own probe reading, above or below 45 GB/s, as session 44's
# roof/states.txt. Sums as roof's: bytes over seconds on each side.
import csv, glob, sys
for label, pat in [("avx512 targets", "targets/roof-rows/avx512-[1-5].tsv"), ("avx2 targets", "targets/roof-rows/avx2-[1-5].tsv"),
                   ("avx2 more", "roof-avx2-more/roof-rows/avx2-[1-5].tsv")]:
    rows = [r for f in sorted(glob.glob(pat)) for r in csv.DictReader(open(f), delimiter="\t")]
    for name, keep in [("probe > 45 GB/s", lambda g: g > 45), ("probe <= 45 GB/s", lambda g: g <= 45)]:
        s = [r for r in rows if keep(float(r["probe_gbs"]))]
        if not s:
            print("%-15s %-17s   0 tokens" % (label, name)); continue
        ds = sum(float(r["decode_s"]) for r in s); db = sum(float(r["decode_bytes"]) for r in s)
        ps = sum(float(r["probe_s"]) for r in s); pb = sum(float(r["probe_bytes"]) for r in s)
        print("%-15s %-17s %4d tokens: decode %.1f GB/s (%.2f tok/s), probe %.1f GB/s, share %.1f%%" % (
            label, name, len(s), db / ds / 1e9, len(s) / ds, pb / ps / 1e9, 100 * (db / ds) / (pb / ps)))
