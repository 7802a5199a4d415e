#!/usr/bin/env python3
"""Do two FFN census captures (TURBOSPARK_FFN_HIST) of the same run agree
within float tolerance? Used by gpu-check.sh for a CPU and a CUDA run of the
same greedy prompt: the counts that do not depend on rounding (shape,
passes, tapped layers, pair counts, each layer's histogram total) must be
equal; what does depend on it is compared with a tolerance:
  mass (layers x inter, cumulative |a| per neuron) and hist_mass:
      relative L1 distance per layer <= --mass-tol (2e-5 default: F32 sums
      in a different order), and each neuron's mass (those above 1e-3 of
      the layer's mean) within --neuron-tol (1e-3) of the other's;
  hist_count: the fraction of values that changed bucket <= --bucket-tol
      (1e-3: a value within rounding of a power of two may cross it);
  overlap_hits: relative difference <= --overlap-tol (1e-2: neurons tied
      near the top-K boundary may swap).
Refuses a degenerate capture (nothing tapped, no decode pass, zero mass).
Prints one line, PASS or FAIL with the worst deviations; exit status 0/1."""
import argparse
import json
import sys


def rel_l1(a, b):
    num = sum(abs(x - y) for x, y in zip(a, b))
    den = sum(abs(x) for x in a)
    return num / den if den else (0.0 if num == 0 else float("inf"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--mass-tol", type=float, default=2e-5)
    ap.add_argument("--neuron-tol", type=float, default=1e-3)
    ap.add_argument("--bucket-tol", type=float, default=1e-3)
    ap.add_argument("--overlap-tol", type=float, default=1e-2)
    o = ap.parse_args()
    try:
        a, b = (json.load(open(p)) for p in (o.a, o.b))
    except (OSError, ValueError) as e:
        print("FAIL (cannot read the captures: %s)" % e)
        return 1
    bad = []
    for k in ("num_layers", "inter", "decode_passes", "prefill_passes", "bucket_exp_offset", "tapped", "overlap_ks", "overlap_pairs"):
        if a.get(k) != b.get(k):
            bad.append("%s differs" % k)
    if bad:
        print("FAIL (%s)" % "; ".join(bad))
        return 1
    tapped = [l for l, t in enumerate(a["tapped"]) if t]
    if not tapped or not a["decode_passes"]:
        print("FAIL (degenerate capture: %d layers tapped, %d decode passes)" % (len(tapped), a["decode_passes"]))
        return 1
    worst = {"mass": 0.0, "hist_mass": 0.0, "bucket": 0.0, "overlap": 0.0, "neuron": 0.0}
    for l in tapped:
        if sum(a["mass"][l]) <= 0:
            bad.append("layer %d has zero mass" % l)
        worst["mass"] = max(worst["mass"], rel_l1(a["mass"][l], b["mass"][l]))
        mean = sum(a["mass"][l]) / max(len(a["mass"][l]), 1)
        for x, y in zip(a["mass"][l], b["mass"][l]):
            if x > 1e-3 * mean:
                worst["neuron"] = max(worst["neuron"], abs(x - y) / x)
        worst["hist_mass"] = max(worst["hist_mass"], rel_l1(a["hist_mass"][l], b["hist_mass"][l]))
        ca, cb = a["hist_count"][l], b["hist_count"][l]
        if sum(ca) != sum(cb):
            bad.append("layer %d: %d values against %d" % (l, sum(ca), sum(cb)))
        # each value that moved leaves one bucket and enters another
        worst["bucket"] = max(worst["bucket"], sum(abs(x - y) for x, y in zip(ca, cb)) / 2 / max(sum(ca), 1))
        for x, y in zip(a["overlap_hits"][l], b["overlap_hits"][l]):
            worst["overlap"] = max(worst["overlap"], abs(x - y) / max(x, 1))
    if worst["mass"] > o.mass_tol:
        bad.append("mass rel L1 %.2e > %.0e" % (worst["mass"], o.mass_tol))
    if worst["neuron"] > o.neuron_tol:
        bad.append("a neuron's mass differs by %.2e > %.0e" % (worst["neuron"], o.neuron_tol))
    if worst["hist_mass"] > o.mass_tol:
        bad.append("hist_mass rel L1 %.2e > %.0e" % (worst["hist_mass"], o.mass_tol))
    if worst["bucket"] > o.bucket_tol:
        bad.append("%.2e of values changed bucket > %.0e" % (worst["bucket"], o.bucket_tol))
    if worst["overlap"] > o.overlap_tol:
        bad.append("overlap hits differ by %.2e > %.0e" % (worst["overlap"], o.overlap_tol))
    desc = "%d layers tapped, %d decode passes; worst: mass %.1e, neuron %.1e, hist_mass %.1e, bucket moves %.1e, overlap %.1e" % (
        len(tapped), a["decode_passes"], worst["mass"], worst["neuron"], worst["hist_mass"], worst["bucket"], worst["overlap"])
    if bad:
        print("FAIL (%s; %s)" % ("; ".join(bad), desc))
        return 1
    print("PASS (%s)" % desc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
