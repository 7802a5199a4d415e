#!/usr/bin/env python3
"""Do the committed tiny fixtures still reproduce here?

For every tests/fixtures/ref/tiny-*.json: rebuilds the model from its spec in
make_tiny.py, re-exports the GGUF into a temporary directory and checks its
sha256 against the fixture's, then reruns transformers on the fixture's
prompts (float64, or --dtype float32) on --device and scores the result
against the stored top-20/logsumexp with refcommon.compare_row. Exit status
1 if any GGUF differs or any score is above the thresholds below.

Usage: python3 scripts/ref/check_fixtures.py [--device cuda] [--dtype float64]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny as mt  # noqa: E402
import refcommon as rc  # noqa: E402

MAX_KL = 1e-8
MAX_DLOGIT = 1e-4


def main():
    import torch
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--fixtures", default=os.path.join(here, "..", "..", "tests", "fixtures", "ref"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    specs = mt.specs()
    print(rc.source_desc(args.device, args.dtype), "|", rc.machine_desc())
    bad = 0
    tmp = tempfile.mkdtemp()
    for path in sorted(glob.glob(os.path.join(args.fixtures, "tiny-*.json"))):
        fx = json.load(open(path))
        name, variant = os.path.basename(path)[len("tiny-"):-len(".json")].rsplit("-", 1)
        spec = specs[name]
        model = mt.build(name, spec)
        if variant == "f16":
            mt.round_model_to_f16(model)
        g = os.path.join(tmp, fx["gguf"])
        mt.write_gguf(g, model, spec[0], fx["gguf"][:-len(".gguf")], f16=(variant == "f16"))
        same_gguf = rc.sha256_file(g) == fx["gguf_sha256"]
        model = model.to(dtype).to(args.device).eval()
        kls, dls, agree, n = [], [], 0, 0
        for p in fx["prompts"]:
            lg = mt.run_logits(model, p["ids"], args.device)
            for top, lse, row in zip(p["top"], p["logsumexp"], lg):
                kl, dl, same = rc.compare_row(top, lse, row)
                kls.append(kl)
                dls.append(dl)
                agree += same
                n += 1
        ok = same_gguf and max(kls) <= MAX_KL and max(dls) <= MAX_DLOGIT
        bad += not ok
        print(f"{os.path.basename(path):26} gguf {'same' if same_gguf else 'DIFFERS'}  maxKL {max(kls):.2e}"
              f"  max|dlogit| {max(dls):.2e}  top1 {agree}/{n}  {'OK' if ok else 'FAIL'}", flush=True)
    print(f"{bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
