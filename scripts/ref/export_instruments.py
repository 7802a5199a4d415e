#!/usr/bin/env python3
"""What turbospark's instruments should see, from transformers' forward hooks.

For every tiny F32 model of make_tiny.py (same weights, same prompts as the
logit fixtures in tests/fixtures/ref/), run transformers in float64 with
forward hooks and write tests/fixtures/instr/tiny-<name>-f32.json:

  * dense FFN and shared experts: the activation act(gate(x)) * up(x) that
    feeds down_proj, per layer and position (a forward pre-hook on down_proj),
    plus the per-neuron sum of |up(x)| over the prompt, the quantity a census
    tapping ffn_up by mistake would record (the negative control);
  * MoE: per layer and position, the router logits and the experts
    transformers selected (its own top-k indices, from the router module's
    output);
  * MoE: the pilot probe's guess of layer l+1's experts made from layer l's
    post-attention residual (a pre-hook on layer l's post_attention_layernorm,
    whose input that residual is), computed with layer l+1's own
    post_attention_layernorm module and router weight, and its recall against
    what layer l+1 then selected.

Nothing here runs turbospark. Before writing, the script rebuilds each GGUF in
a temporary directory and checks it is byte-identical to the committed
tests/fixtures/ref/ file (so the fixture belongs to exactly that file), and
that the hooked model's logits equal the committed logit fixture.

Usage: python3 scripts/ref/export_instruments.py [--only NAME[,NAME]] [--check]
  --check: regenerate into a temporary directory and compare with the
  committed fixtures (ids and selections exactly, numbers to 1e-5 relative),
  e.g. after upgrading transformers or torch; writes nothing.
Format and provenance: docs/REFERENCE.md ("Instrument fixtures").
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny as mt  # noqa: E402
import refcommon as rc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
REF_DIR = os.path.join(ROOT, "tests", "fixtures", "ref")
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "instr")

# the tiny F32 models; the F16 variants add nothing the instruments see
MODELS = ["llama", "llama31", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen2moe", "mixtral", "olmoe"]


def sig(x) -> float:
    """7 significant digits: activations span decades, so an absolute
    rounding would erase the small ones the census buckets count."""
    return float(f"{float(x):.7g}")


def rows(a) -> list:
    return [[sig(v) for v in r] for r in np.asarray(a, dtype=np.float64)]


def flat(x) -> np.ndarray:
    """(batch 1, seq, width) or (seq, width) -> (seq, width) float64: the
    shared expert runs on the flattened tokens."""
    return x.detach().double().reshape(-1, x.shape[-1]).numpy().copy()


def topk_ids(logits: np.ndarray, k: int) -> list:
    """Top-k by logit, descending, ties to the lower id."""
    order = np.lexsort((np.arange(logits.size), -logits))
    return [int(i) for i in order[:k]]


def kth_gap(logits: np.ndarray, k: int) -> float:
    s = np.sort(logits)[::-1]
    return float(s[k - 1] - s[k])


def export_one(name: str, spec, out_dir: str = OUT_DIR) -> str:
    import torch
    import torch.nn.functional as F
    family = spec[0]
    fname = f"tiny-{name}-f32"
    model = mt.build(name, spec)
    with tempfile.TemporaryDirectory() as td:
        gpath = os.path.join(td, fname + ".gguf")
        mt.write_gguf(gpath, model, family, fname, f16=False)
        sha = rc.sha256_file(gpath)
    committed = os.path.join(REF_DIR, fname + ".gguf")
    if sha != rc.sha256_file(committed):
        raise SystemExit(f"{fname}: rebuilt GGUF differs from {committed}: refusing to write a fixture for another file")
    import json
    with open(os.path.join(REF_DIR, fname + ".json")) as f:
        logit_fx = json.load(f)

    ref = model.to(torch.float64).eval()
    cfg = ref.config
    layers = ref.model.layers
    n_layer = cfg.num_hidden_layers
    is_moe = hasattr(layers[0].mlp, "gate") and hasattr(layers[0].mlp, "experts")
    k = getattr(cfg, "num_experts_per_tok", 0) if is_moe else 0
    n_exp = (getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)) if is_moe else 0

    # the dense FFN, or the shared expert: the module whose down_proj input the census taps
    def ffn_mod(layer):
        if not is_moe:
            return layer.mlp
        return getattr(layer.mlp, "shared_expert", None)

    cap = {}
    hooks = []
    for l, layer in enumerate(layers):
        m = ffn_mod(layer)
        if m is not None:
            hooks.append(m.down_proj.register_forward_pre_hook(
                lambda _m, inp, l=l: cap.__setitem__(("act", l), flat(inp[0]))))
            hooks.append(m.up_proj.register_forward_hook(
                lambda _m, _i, out, l=l: cap.__setitem__(("up", l), flat(out))))
        if is_moe:
            def gate_hook(_m, _i, out, l=l):
                logits, _scores, idx = out  # the router module returns (logits, top-k weights, top-k ids)
                cap[("rlog", l)] = logits.detach().double().numpy().copy()
                cap[("rsel", l)] = idx.detach().numpy().copy()
            hooks.append(layer.mlp.gate.register_forward_hook(gate_hook))
            hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
                lambda _m, inp, l=l: cap.__setitem__(("resid", l), inp[0].detach().clone())))

    ffn_layers = [l for l in range(n_layer) if ffn_mod(layers[l]) is not None]
    out_prompts = []
    worst_dlogit = 0.0
    pilot_hits = pilot_total = 0
    gaps, pilot_gaps = [], []
    for pi, ids in enumerate(mt.prompts(cfg.vocab_size)):
        assert ids == logit_fx["prompts"][pi]["ids"], "prompts differ from the logit fixture"
        cap.clear()
        with torch.no_grad():
            logits = ref(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].double().numpy()
        for t, top in enumerate(logit_fx["prompts"][pi]["top"]):
            for tid, lg in top:
                worst_dlogit = max(worst_dlogit, abs(logits[t, tid] - lg))
        n = len(ids)
        p = {"ids": ids}
        if ffn_layers:
            # (position, layer, width); layers in ffn_layers order
            p["ffn_act"] = [[rows(cap[("act", l)][t:t + 1])[0] for l in ffn_layers] for t in range(n)]
            p["ffn_up_abs_sum"] = [[sig(v) for v in np.abs(cap[("up", l)]).sum(axis=0)] for l in ffn_layers]
        if is_moe:
            rl, rs = [], []
            for t in range(n):
                rl.append([[sig(v) for v in cap[("rlog", l)][t]] for l in range(n_layer)])
                row = []
                for l in range(n_layer):
                    sel = [int(e) for e in cap[("rsel", l)][t]]
                    lg = cap[("rlog", l)][t]
                    # transformers picks by softmax probability: the same order as the logits
                    assert sorted(sel) == sorted(topk_ids(lg, k)), (name, pi, t, l, sel)
                    gaps.append(kth_gap(lg, k))
                    row.append(sel)
                rs.append(row)
            p["router_logits"] = rl
            p["router_selected"] = rs
            # the pilot: layer l's post-attention residual through layer l+1's norm and router
            pl, ps, hits = [], [], []
            for t in range(n):
                prow, srow, hrow = [None], [None], [None]
                for l in range(n_layer - 1):
                    nxt = layers[l + 1]
                    with torch.no_grad():
                        h = nxt.post_attention_layernorm(cap[("resid", l)][:, t:t + 1, :])
                        lg = F.linear(h, nxt.mlp.gate.weight)[0, 0].double().numpy()
                    guess = topk_ids(lg, k)
                    actual = set(int(e) for e in cap[("rsel", l + 1)][t])
                    hit = len(actual & set(guess))
                    pilot_hits += hit
                    pilot_total += k
                    pilot_gaps.append(kth_gap(lg, k))
                    prow.append([sig(v) for v in lg])
                    srow.append(guess)
                    hrow.append(hit)
                pl.append(prow)
                ps.append(srow)
                hits.append(hrow)
            p["pilot_logits"] = pl
            p["pilot_selected"] = ps
            p["pilot_hits"] = hits
        out_prompts.append(p)
    for h in hooks:
        h.remove()
    if worst_dlogit > 1e-5:  # the fixture rounds to 1e-6; float64 runs agree to ~3e-6
        raise SystemExit(f"{fname}: hooked model's logits differ from the committed fixture by {worst_dlogit}")

    fx = {
        "gguf": fname + ".gguf",
        "gguf_sha256": sha,
        "family": family,
        "hf_class": spec[1],
        "source": rc.source_desc("cpu", "float64"),
        "machine": rc.machine_desc(),
        "produced_by": "scripts/ref/export_instruments.py",
        "n_layer": n_layer,
        "ffn_layers": ffn_layers,
        "ffn_width": int(cap_width(ref, ffn_layers, ffn_mod)) if ffn_layers else 0,
        "prompts": out_prompts,
    }
    if is_moe:
        fx["n_expert"] = int(n_exp)
        fx["top_k"] = int(k)
        fx["router_min_gap"] = round(min(gaps), 6)
        fx["pilot_min_gap"] = round(min(pilot_gaps), 6)
        fx["pilot_hits"] = pilot_hits
        fx["pilot_total"] = pilot_total
        fx["pilot_recall"] = pilot_hits / pilot_total
        fx["pilot_chance"] = k / n_exp
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, fname + ".json")
    rc.write_json(path, fx)
    msg = f"{fname}: {os.path.getsize(path)} bytes, logits vs fixture max|d| {worst_dlogit:.2g}"
    if ffn_layers:
        msg += f", ffn layers {ffn_layers} width {fx['ffn_width']}"
    if is_moe:
        msg += (f", router min gap {fx['router_min_gap']}, pilot recall {pilot_hits}/{pilot_total} = "
                f"{fx['pilot_recall']:.4f} (chance {fx['pilot_chance']:.2f}), pilot min gap {fx['pilot_min_gap']}")
    return msg


def cap_width(ref, ffn_layers, ffn_mod) -> int:
    return ffn_mod(ref.model.layers[ffn_layers[0]]).down_proj.in_features


def diff(a, b, where="") -> list:
    """Differences between two fixture trees: structure, ints and strings
    exactly (source/machine excepted), floats to 1e-5 relative + 1e-7."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a if k not in ("source", "machine") for d in diff(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-5 * abs(b) + 1e-7
        return [] if ok else [f"{where}: {a} != {b}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main():
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    sp = mt.specs()
    bad = 0
    with tempfile.TemporaryDirectory() as td:
        for n in MODELS:
            if args.only and n not in args.only.split(","):
                continue
            msg = export_one(n, sp[n], td if args.check else OUT_DIR)
            if args.check:
                fname = f"tiny-{n}-f32.json"
                with open(os.path.join(td, fname)) as f:
                    new = json.load(f)
                with open(os.path.join(OUT_DIR, fname)) as f:
                    old = json.load(f)
                d = diff(new, old)
                bad += bool(d)
                msg = f"{fname}: {'OK' if not d else 'DIFFERS: ' + '; '.join(d[:4])}"
            print(msg, flush=True)
    if bad:
        raise SystemExit(f"{bad} fixture(s) differ from what this transformers/torch computes")


if __name__ == "__main__":
    main()
