#!/usr/bin/env python3
"""How far off is a near-miss? Scores, against the committed tiny fixtures,
  * transformers itself in float32 (the noise floor a correct f32 engine sees), and
  * deliberately wrong variants of each model (sliding window ignored, rope
    scaling ignored, Gemma's (1+w) norm taken as w, no embedding scale, ...),
with the comparison of refcommon.compare_row. A correct engine should score
like the float32 row; each wrong variant must score far worse, or the fixture
could not catch that mistake. Usage: python3 scripts/ref/sensitivity.py

`--real NAME` instead scores transformers float32, with and without
Q8-rounded activations, against tests/fixtures/ref/real-NAME.json: the noise a
correct engine with integer dot products should expect.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny as mt  # noqa: E402
import refcommon as rc  # noqa: E402


def score(model, fx, dtype):
    import torch
    model = model.to(dtype)
    kls, dls, agree, n = [], [], 0, 0
    for p in fx["prompts"]:
        lg = mt.run_logits(model, p["ids"])
        for pos, (top, lse) in enumerate(zip(p["top"], p["logsumexp"])):
            kl, dl, same = rc.compare_row(top, lse, lg[pos])
            kls.append(kl); dls.append(dl); agree += same; n += 1
    return max(kls), float(np.mean(kls)), max(dls), agree / n


def variants(name, spec):
    """(label, builder) pairs of deliberately wrong models for this family."""
    import torch
    family, cls, kw = spec[:3]
    out = []

    def with_cfg(**changes):
        def b():
            return mt.build(name, (family, cls, dict(kw, **changes)) + tuple(spec[3:]))
        return b

    if family == "gemma3":
        out.append(("sliding window ignored", with_cfg(sliding_window=4096)))
        out.append(("local rope base = global", with_cfg(rope_parameters={
            "full_attention": kw["rope_parameters"]["full_attention"],
            "sliding_attention": kw["rope_parameters"]["full_attention"]})))

        def no_scale():
            m = mt.build(name, spec)
            m.model.embed_tokens.embed_scale.fill_(1.0)
            return m
        out.append(("no sqrt(d) embedding scale", no_scale))

        def w_not_1pw():
            m = mt.build(name, spec)
            with torch.no_grad():
                for n_, p in m.named_parameters():
                    if n_.endswith("norm.weight"):
                        p.add_(1.0)      # (1 + w) becomes (2 + w): off by the stored +1
            return m
        out.append(("norm weight shifted by +1 twice", w_not_1pw))
    if family == "llama" and kw["rope_parameters"].get("rope_type") == "llama3":
        out.append(("llama3 rope scaling ignored", with_cfg(rope_parameters={
            "rope_type": "default", "rope_theta": kw["rope_parameters"]["rope_theta"]})))
    if family in ("llama", "qwen2", "qwen3"):
        out.append(("rope theta x2", with_cfg(rope_parameters=dict(
            kw["rope_parameters"], rope_theta=kw["rope_parameters"]["rope_theta"] * 2))))
    if family == "qwen2":
        def no_bias():
            m = mt.build(name, spec)
            with torch.no_grad():
                for n_, p in m.named_parameters():
                    if n_.endswith("k_proj.bias"):
                        p.zero_()
            return m
        out.append(("k bias dropped", no_bias))
    if family == "qwen3":
        def no_qk_norm():
            m = mt.build(name, spec)
            with torch.no_grad():
                for n_, p in m.named_parameters():
                    if n_.endswith("q_norm.weight") or n_.endswith("k_norm.weight"):
                        p.fill_(1.0)
            return m
        out.append(("q/k norm weights = 1", no_qk_norm))

    if "norm_topk_prob" in kw:
        out.append(("top-k renormalization flipped", with_cfg(norm_topk_prob=not kw["norm_topk_prob"])))
    if family == "qwen2moe":
        def no_shexp_gate():
            m = mt.build(name, spec)
            with torch.no_grad():
                for n_, p in m.named_parameters():
                    if n_.endswith("shared_expert_gate.weight"):
                        p.zero_()          # sigmoid(0) = 0.5 for every token
            return m
        out.append(("shared-expert gate = 0.5", no_shexp_gate))
    if "num_experts_per_tok" in kw:
        out.append(("top-1 expert instead of top-2", with_cfg(num_experts_per_tok=1)))

    def eps_big():
        return mt.build(name, (family, cls, dict(kw, rms_norm_eps=1e-2)) + tuple(spec[3:]))
    out.append(("rms eps 1e-2", eps_big))
    return out


def q8_hooks(model, block=32):
    """Rounds every Linear's input to blocks of `block` int8 values with an F16
    scale (ggml's Q8_0/Q8_1 activation format), as an engine with integer dot
    products does; the weights stay as they are."""
    import torch

    def pre(_m, args):
        x = args[0]
        shp = x.shape
        xb = x.reshape(-1, block)
        d = (xb.abs().amax(dim=-1, keepdim=True) / 127.0).to(torch.float16).to(x.dtype)
        q = torch.where(d > 0, torch.round(xb / torch.where(d > 0, d, torch.ones_like(d))), torch.zeros_like(xb))
        return (q.clamp(-127, 127) * d).reshape(shp),
    return [m.register_forward_pre_hook(pre) for m in model.modules() if isinstance(m, torch.nn.Linear)]


def real(name):
    """Noise floors for a real-model fixture: transformers float32, and float32
    with Q8-rounded activations."""
    import torch
    import transformers
    import real_models as rm
    here = os.path.dirname(os.path.abspath(__file__))
    fx = json.load(open(os.path.join(here, "..", "..", "tests", "fixtures", "ref", f"real-{name}.json")))
    d, f = os.path.split(rm.model_path(name))
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    model.config._attn_implementation = "eager"
    for label, hooks in (("transformers float32", lambda m: []),
                         ("float32, activations Q8 (32-blocks)", q8_hooks)):
        hs = hooks(model)
        for pi, p in enumerate(fx["prompts"]):
            with torch.no_grad():
                lg = model(input_ids=torch.tensor([p["ids"]])).logits[0].double().numpy()
            kls, dls, agree, n = [], [], 0, 0
            for top, lse, row in zip(p["top"], p["logsumexp"], lg):
                kl, dl, same = rc.compare_row(top, lse, row)
                margin = top[0][1] - top[1][1]
                kls.append(kl); dls.append(dl)
                if margin > 0.1:
                    agree += same; n += 1
            print(f"real-{name} prompt {pi} ({len(p['ids'])} tok) {label:36} meanKL {np.mean(kls):.2e} "
                  f"maxKL {max(kls):.2e} max|dl| {max(dls):.2e} top1(margin>0.1) {agree}/{n}", flush=True)
        for h in hs:
            h.remove()


def main():
    import torch
    if len(sys.argv) > 2 and sys.argv[1] == "--real":
        return real(sys.argv[2])
    here = os.path.dirname(os.path.abspath(__file__))
    fxdir = os.path.join(here, "..", "..", "tests", "fixtures", "ref")
    print(f"{'fixture':22} {'variant':34} {'maxKL':>9} {'meanKL':>9} {'max|dl|':>8} top1")
    for name, spec in mt.specs().items():
        fx = json.load(open(os.path.join(fxdir, f"tiny-{name}-f32.json")))
        rows = [("transformers float32", lambda: mt.build(name, spec), torch.float32),
                ("transformers float64", lambda: mt.build(name, spec), torch.float64)]
        rows += [(lbl, b, torch.float64) for lbl, b in variants(name, spec)]
        for lbl, b, dt in rows:
            mx, mean, dl, agree = score(b().eval(), fx, dt)
            print(f"tiny-{name}-f32{'':{22 - len(name) - 9}} {lbl:34} {mx:9.2e} {mean:9.2e} {dl:8.2e} {agree:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
