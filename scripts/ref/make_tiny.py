#!/usr/bin/env python3
"""Tiny random models per family -> GGUF (our own exporter) + reference logits.

For each model below:
  1. build it with transformers' own config and model classes, weights drawn
     from a fixed numpy RNG (not torch's init, so the weights do not depend on
     the torch version or device);
  2. export it to GGUF with the `gguf` package's GGUFWriter, using llama.cpp's
     tensor names, metadata keys and conventions (Q/K row permutation for
     `llama`, Gemma's stored norm = 1 + w, rope_freqs for llama3 rope scaling);
     two variants, F32 and F16 (1-D tensors and the MoE router stay F32, as
     llama.cpp's converter does);
  3. run transformers in float64 on fixed prompts with exactly the weights the
     GGUF holds (the F16 variant's reference uses the F16-rounded weights) and
     write tests/fixtures/ref/<name>.json (format: docs/REFERENCE.md);
  4. (--verify) load the GGUF back through transformers' own GGUF loader and
     check its logits equal the original model's, which catches naming and
     permutation mistakes in our exporter independently of turbospark.

Usage: python3 scripts/ref/make_tiny.py [--out DIR] [--only NAME[,NAME]] [--no-verify]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refcommon as rc  # noqa: E402

VOCAB = 320
SEED = 20240601


# ---------------------------------------------------------------- model specs
def specs():
    """name -> (GGUF arch, HF class name, HF config kwargs[, variants]); variants default ("f32", "f16")."""
    rp = lambda theta, **kw: dict(rope_type=kw.pop("rope_type", "default"), rope_theta=theta, **kw)  # noqa: E731
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  bos_token_id=1, eos_token_id=2, pad_token_id=None)
    s = {}
    s["llama"] = ("llama", "LlamaForCausalLM",
                  dict(common, head_dim=16, rms_norm_eps=1e-5, rope_parameters=rp(10000.0),
                       tie_word_embeddings=False, attention_bias=False, mlp_bias=False))
    # Llama 3.1-style rope scaling; original_max_position_embeddings is small so
    # that all three bands (unscaled, smoothed, scaled by `factor`) occur with head_dim 16.
    s["llama31"] = ("llama", "LlamaForCausalLM",
                    dict(common, head_dim=16, rms_norm_eps=1e-5,
                         rope_parameters=rp(500000.0, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                            high_freq_factor=4.0, original_max_position_embeddings=64),
                         tie_word_embeddings=True, attention_bias=False, mlp_bias=False))
    s["qwen2"] = ("qwen2", "Qwen2ForCausalLM",
                  dict(common, rms_norm_eps=1e-6, rope_parameters=rp(1000000.0), tie_word_embeddings=True,
                       use_sliding_window=False))
    # head_dim 32 != hidden/heads = 16, as in real Qwen3 (key_length/value_length keys)
    s["qwen3"] = ("qwen3", "Qwen3ForCausalLM",
                  dict(common, head_dim=32, rms_norm_eps=1e-6, rope_parameters=rp(1000000.0),
                       tie_word_embeddings=False, attention_bias=False, use_sliding_window=False))
    # 6 layers: llama.cpp fixes gemma3's pattern at 5 sliding-window layers then 1
    # global (HF's default sliding_window_pattern=6 gives the same layer_types).
    g = dict(common, num_hidden_layers=6, num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32,
             sliding_window=8, rms_norm_eps=1e-6, tie_word_embeddings=True, pad_token_id=0,
             hidden_activation="gelu_pytorch_tanh",
             rope_parameters={"full_attention": rp(1000000.0), "sliding_attention": rp(10000.0)})
    s["gemma3"] = ("gemma3", "Gemma3ForCausalLM", g)

    # MoE (F32 only). Router semantics follow llama.cpp's graphs: qwen3moe and
    # mixtral renormalize the top-k softmax weights, qwen2moe and olmoe do not.
    moe = dict(common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    s["qwen3moe"] = ("qwen3moe", "Qwen3MoeForCausalLM",
                     dict(moe, rms_norm_eps=1e-6, rope_parameters=rp(1000000.0), norm_topk_prob=True,
                          decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False,
                          use_sliding_window=False), ("f32",))
    s["qwen2moe"] = ("qwen2moe", "Qwen2MoeForCausalLM",
                     dict(moe, rms_norm_eps=1e-6, rope_parameters=rp(1000000.0), norm_topk_prob=False,
                          shared_expert_intermediate_size=64, decoder_sparse_step=1, mlp_only_layers=[],
                          tie_word_embeddings=False, use_sliding_window=False), ("f32",))
    s["mixtral"] = ("llama", "MixtralForCausalLM",
                    dict(common, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                         rms_norm_eps=1e-5, rope_parameters=rp(1000000.0), tie_word_embeddings=False),
                    ("f32",))
    s["olmoe"] = ("olmoe", "OlmoeForCausalLM",
                  dict(common, intermediate_size=32, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                       rms_norm_eps=1e-5, rope_parameters=rp(10000.0), tie_word_embeddings=False,
                       clip_qkv=None), ("f32",))
    return s


# ---------------------------------------------------------------- weights
def init_weights(model, family: str):
    """Deterministic weights from numpy, scaled up so logits are decisive."""
    import torch
    sd = model.state_dict()
    new = {}
    for name in sorted(sd):
        t = sd[name]
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
        shape = tuple(t.shape)
        if name.endswith("norm.weight"):
            if family == "gemma3":          # HF Gemma norms multiply by (1 + w)
                a = rng.normal(0.0, 0.1, shape)
            else:
                a = 1.0 + rng.normal(0.0, 0.1, shape)
        elif name.endswith(".bias"):
            a = rng.normal(0.0, 0.2, shape)
        elif "embed_tokens" in name:
            a = rng.normal(0.0, 0.5 if family != "gemma3" else 0.15, shape)
        elif name == "lm_head.weight":
            a = rng.normal(0.0, 0.35, shape)
        elif name.endswith("mlp.gate.weight") or name.endswith("shared_expert_gate.weight"):
            a = rng.normal(0.0, 0.5, shape)  # router: well-separated expert scores
        else:
            fan_in = shape[-1]
            a = rng.normal(0.0, 1.2 / math.sqrt(fan_in), shape)
        new[name] = torch.from_numpy(a.astype(np.float32))
    missing, unexpected = model.load_state_dict(new, strict=False)
    assert not unexpected, unexpected
    assert all(k == "lm_head.weight" for k in missing), missing
    if model.config.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def keep_f32(gguf_name: str, arr: np.ndarray) -> bool:
    # llama.cpp's converter keeps 1-D tensors (norms, biases), rope_freqs and the
    # MoE router in F32 whatever the output type.
    return arr.ndim <= 1 or gguf_name.endswith("ffn_gate_inp.weight")


def round_model_to_f16(model):
    """Rounds in place every parameter that the F16 GGUF stores as F16."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2 and not name.endswith(("mlp.gate.weight", "shared_expert_gate.weight")):
                p.copy_(p.to(torch.float16).to(p.dtype))


# ---------------------------------------------------------------- export
def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF stores Q/K rows for rotate_half (pairs (i, i+d/2)); llama.cpp's `llama`
    graph ropes adjacent pairs (2i, 2i+1), so its converter interleaves the rows
    of each head: row order [0, d/2, 1, d/2+1, ...]."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    # MoE: router, stacked experts (n_expert, rows, cols), shared expert
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.experts.down_proj": "ffn_down_exps.weight",
    "mlp.experts.gate_up_proj": None,  # split below into ffn_gate_exps / ffn_up_exps
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
}
GEMMA3_LAYER_MAP = dict(LAYER_MAP, **{
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
})


def llama3_rope_factors(rp: dict, head_dim: int) -> np.ndarray:
    """rope_freqs.weight as llama.cpp's converter writes it: per frequency pair,
    the divisor applied to theta_i (ggml_rope_ext freq_factors). Computed from
    the HF rope parameters (HF keeps original_max_position_embeddings there)."""
    base = rp["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor = rp.get("factor", 8.0)
    lo, hi = rp.get("low_freq_factor", 1.0), rp.get("high_freq_factor", 4.0)
    old = rp.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def hf_head_dim(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def gguf_tensors(model, family: str):
    """[(gguf_name, np.float32 array in HF (out, in) layout)] in llama.cpp order."""
    cfg = model.config
    sd = {k: v.detach().to("cpu").float().numpy() for k, v in model.state_dict().items()}
    out = [("token_embd.weight", sd["model.embed_tokens.weight"])]
    rpar = cfg.rope_parameters
    if family == "llama" and rpar.get("rope_type") == "llama3":
        out.append(("rope_freqs.weight", llama3_rope_factors(rpar, hf_head_dim(cfg))))
    lmap = GEMMA3_LAYER_MAP if family == "gemma3" else LAYER_MAP
    for i in range(cfg.num_hidden_layers):
        pre = f"model.layers.{i}."
        names = sorted(k[len(pre):] for k in sd if k.startswith(pre))
        for hf in names:
            if hf not in lmap:
                raise ValueError(f"exporter has no GGUF name for {pre + hf}")
            a = sd[pre + hf]
            if hf == "mlp.experts.gate_up_proj":
                # HF fuses (gate; up) along dim 1, gate first
                n = a.shape[1] // 2
                out.append((f"blk.{i}.ffn_gate_exps.weight", a[:, :n, :]))
                out.append((f"blk.{i}.ffn_up_exps.weight", a[:, n:, :]))
                continue
            if hf == "mlp.shared_expert_gate.weight":
                a = a.reshape(-1)  # llama.cpp reads it as a vector {n_embd}
            if family == "llama" and hf == "self_attn.q_proj.weight":
                a = llama_permute(a, cfg.num_attention_heads)
            if family == "llama" and hf == "self_attn.k_proj.weight":
                a = llama_permute(a, cfg.num_key_value_heads)
            if family == "gemma3" and hf.endswith("norm.weight"):
                a = (a.astype(np.float32) + np.float32(1.0)).astype(np.float32)
            out.append((f"blk.{i}.{lmap[hf]}", a))
    norm = sd["model.norm.weight"]
    if family == "gemma3":
        norm = (norm + np.float32(1.0)).astype(np.float32)
    out.append(("output_norm.weight", norm))
    if not cfg.tie_word_embeddings:
        out.append(("output.weight", sd["lm_head.weight"]))
    return out


def write_gguf(path: str, model, family: str, name: str, f16: bool):
    import gguf
    cfg = model.config
    w = gguf.GGUFWriter(path, family)
    w.add_name(name)
    w.add_file_type(1 if f16 else 0)  # LLAMA_FTYPE_MOSTLY_F16 / ALL_F32
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    head_dim = hf_head_dim(cfg)
    if family == "gemma3":
        w.add_rope_freq_base(cfg.rope_parameters["full_attention"]["rope_theta"])
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_sliding_window(cfg.sliding_window)
    else:
        w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
        if head_dim != cfg.hidden_size // cfg.num_attention_heads:
            w.add_key_length(head_dim)
            w.add_value_length(head_dim)
    if family == "llama":
        w.add_vocab_size(cfg.vocab_size)
        w.add_rope_dimension_count(head_dim)
    n_exp = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
    if n_exp:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(cfg.num_experts_per_tok)
        if getattr(cfg, "moe_intermediate_size", None):
            w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        if getattr(cfg, "shared_expert_intermediate_size", None):
            w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
    rc.add_spm_tokenizer(w, cfg.vocab_size, add_space_prefix=False if family == "gemma3" else None)
    for tname, a in gguf_tensors(model, family):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if f16 and not keep_f32(tname, a):
            a = a.astype(np.float16)
        w.add_tensor(tname, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------- reference run
def prompts(vocab: int):
    """BOS-led prompts: lengths 1, 7 and 40 (40 > gemma3's window of 8)."""
    rng = np.random.default_rng(SEED + 1)
    return [[1],
            [1] + rng.integers(3, vocab, 6).tolist(),
            [1] + rng.integers(3, vocab, 39).tolist()]


def router_gaps(model):
    """Forward hooks on MoE routers recording the top-k / next gap."""
    st = {"hooks": [], "min": []}
    k = getattr(model.config, "num_experts_per_tok", None)
    for n, mod in model.named_modules():
        if k and n.endswith("mlp.gate") and hasattr(mod, "weight"):
            def hook(_m, _inp, out):
                lg = out[0] if isinstance(out, tuple) else out
                srt = lg.double().sort(dim=-1, descending=True).values
                st["min"].append(float((srt[:, k - 1] - srt[:, k]).min()))
            st["hooks"].append(mod.register_forward_hook(hook))
    return st


def run_logits(model, ids, device="cpu"):
    import torch
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long, device=device)
        return model(input_ids=x).logits[0].double().cpu().numpy()


def build(name: str, spec, dtype_name="float64", device="cpu"):
    import torch
    import transformers
    family, cls_name, kw = spec[:3]
    cls = getattr(transformers, cls_name)
    cfg_cls = cls.config_class
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"  # the grouped-mm path has no float64
    torch.manual_seed(0)
    model = cls(cfg).to(torch.float32).eval()
    init_weights(model, family)
    return model


def make_one(name: str, spec, outdir: str, verify: bool, device: str):
    import torch
    family = spec[0]
    results = {}
    for variant in (spec[3] if len(spec) > 3 else ("f32", "f16")):
        model = build(name, spec)
        if variant == "f16":
            round_model_to_f16(model)
        fname = f"tiny-{name}-{variant}"
        gpath = os.path.join(outdir, fname + ".gguf")
        write_gguf(gpath, model, family, fname, f16=(variant == "f16"))
        ref = model.to(torch.float64).to(device)
        ps = prompts(model.config.vocab_size)
        out_prompts = []
        gaps = router_gaps(ref)
        for ids in ps:
            lg = run_logits(ref, ids, device)
            top, lse = rc.topk_and_lse(lg)
            out_prompts.append({"ids": ids, "top": top, "logsumexp": lse})
        cfg = model.config
        fx = {
            "gguf": fname + ".gguf",
            "gguf_sha256": rc.sha256_file(gpath),
            "family": family,
            "variant": variant,
            "hf_class": spec[1],
            "hf_config": {k: v for k, v in cfg.to_diff_dict().items()
                          if k not in ("transformers_version", "architectures", "dtype", "torch_dtype")},
            "source": rc.source_desc(device, "float64"),
            "machine": rc.machine_desc(),
            "produced_by": "scripts/ref/make_tiny.py",
            "prompts": out_prompts,
        }
        if gaps["hooks"]:
            # smallest gap between the k-th and (k+1)-th router logit over all
            # tokens and layers: an engine's rounding can only flip an expert
            # choice where this is tiny
            fx["router_min_gap"] = round(min(gaps["min"]), 6)
        for h in gaps["hooks"]:
            h.remove()
        rc.write_json(os.path.join(outdir, fname + ".json"), fx)
        results[variant] = (gpath, ps, model)
        msg = f"{fname}: {os.path.getsize(gpath)} bytes"
        if verify:
            msg += " | " + check_names(gpath, model, family)
            v = verify_roundtrip(gpath, model, ps, family)
            if v.startswith("VERIFY FAILED TO LOAD"):
                v = v.split(":")[0] + " (transformers has no GGUF loader for this arch) | " + \
                    roundtrip(gpath, model, family, ps)
            msg += " | " + v
        print(msg, flush=True)


def verify_roundtrip(gpath: str, model, ps, family: str) -> str:
    """Loads our GGUF through transformers' GGUF loader and compares logits
    (float64) with the model it was exported from. The HF config is passed in
    explicitly where the loader's metadata mapping cannot express it (llama3
    rope scaling, qwen3 head_dim, gemma3 rope bases); tensors come only from
    the GGUF file and are de-permuted / un-shifted by transformers' own code."""
    import torch
    import transformers
    d, f = os.path.split(gpath)
    cfg = model.config
    try:
        loaded = transformers.AutoModelForCausalLM.from_pretrained(
            d, gguf_file=f, config=cfg, dtype=torch.float32)
    except Exception as e:  # report, don't hide
        return f"VERIFY FAILED TO LOAD: {type(e).__name__}: {e}"
    loaded = loaded.to(torch.float64).eval()
    loaded.config._attn_implementation = "eager"
    loaded.config._experts_implementation = "eager"
    ref = model.to(torch.float64).eval()
    worst = 0.0
    for ids in ps:
        a = run_logits(ref, ids)
        b = run_logits(loaded, ids)
        worst = max(worst, float(np.abs(a - b).max()))
    # also compare every parameter exactly
    sa, sb = ref.state_dict(), loaded.state_dict()
    def same(k):
        a, b = sa[k], sb[k]
        if family == "gemma3" and k.endswith("norm.weight"):
            # stored as f32(1 + w); HF uses 1.0 + w in f32, so compare that
            return torch.equal(1.0 + a.float(), 1.0 + b.float())
        return torch.equal(a, b)
    bad = [k for k in sa if k in sb and not same(k)] + [k for k in sa if k not in sb]
    status = "OK" if worst < 1e-9 and not bad else "MISMATCH"
    # metadata: what transformers' GGUF parser reads back must match the HF config
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    parsed = load_gguf_checkpoint(gpath)["config"]
    meta_bad = []
    for k, v in parsed.items():
        if k in ("model_type", "_model_name_or_path", "rope_theta"):
            continue
        if hasattr(cfg, k) and getattr(cfg, k) != v and not (isinstance(v, float) and
                                                              abs(getattr(cfg, k) - v) < 1e-6 * abs(v)):
            meta_bad.append(f"{k}: gguf {v} != hf {getattr(cfg, k)}")
    theta = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)["rope_theta"]
    if "rope_theta" in parsed and parsed["rope_theta"] != theta:
        meta_bad.append(f"rope_theta: gguf {parsed['rope_theta']} != hf {theta}")
    status += f", metadata {'OK' if not meta_bad else 'MISMATCH ' + '; '.join(meta_bad)}" \
              f" ({len(parsed)} keys)"
    rpar = cfg.rope_parameters
    if family == "llama" and rpar.get("rope_type") == "llama3":
        # rope_freqs.weight is ignored by transformers' loader: check it against
        # HF's own llama3 inv_freq (default inv_freq / factor = scaled inv_freq).
        import gguf
        r = gguf.GGUFReader(gpath)
        stored = next(np.array(t.data) for t in r.tensors if t.name == "rope_freqs.weight")
        hd = hf_head_dim(cfg)
        inv_default = 1.0 / (rpar["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        inv_hf = ref.model.rotary_emb.inv_freq.double().cpu().numpy()
        rel = float(np.abs(inv_default / stored / inv_hf - 1.0).max())
        status += f", rope_freqs vs HF inv_freq rel err {rel:.2g} ({'OK' if rel < 1e-5 else 'MISMATCH'})"
    return f"verify via transformers GGUF loader: {status} max|dlogit|={worst:.3g} params differing={bad[:4]}"


def gguf_py_name(family: str, n_blocks: int, hf_name: str):
    """The GGUF name llama.cpp's own gguf-py table gives an HF tensor name."""
    import gguf
    arch = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[family]
    n = gguf.get_tensor_name_map(arch, n_blocks).get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if n is not None and not n.endswith((".weight", ".bias")):
        n += ".weight"
    return n


def check_names(gpath: str, model, family: str) -> str:
    """Every tensor name in our GGUF must be what gguf-py's TensorNameMap (the
    table llama.cpp's converter uses) gives for the HF tensor it came from."""
    import gguf
    cfg = model.config
    names = {t.name for t in gguf.GGUFReader(gpath).tensors}
    want = set()
    for k in model.state_dict():
        if k == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if k.endswith("mlp.experts.gate_up_proj"):
            for part in ("gate_proj", "up_proj"):
                want.add(gguf_py_name(family, cfg.num_hidden_layers, k.replace("gate_up_proj", part)))
            continue
        want.add(gguf_py_name(family, cfg.num_hidden_layers, k))
    if family == "llama" and cfg.rope_parameters.get("rope_type") == "llama3":
        want.add("rope_freqs.weight")
    if None in want:
        return "names: gguf-py has no name for some HF tensor"
    return "names OK" if want == names else f"names MISMATCH ours-only={sorted(names - want)[:4]} " \
                                             f"gguf-py-only={sorted(want - names)[:4]}"


def roundtrip(gpath: str, model, family: str, ps) -> str:
    """Fallback where transformers' GGUF loader lacks the arch: rebuild the HF
    state dict from the GGUF file, mapping names with gguf-py's table and
    undoing the Q/K permutation with transformers' own reverse-permute code,
    then compare logits with the original."""
    import gguf
    import torch
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor
    cfg = model.config
    tensors = {t.name: np.array(t.data) for t in gguf.GGUFReader(gpath).tensors}
    rev = LlamaTensorProcessor(config={})._reverse_permute_weights
    sd = {}
    for k, v in model.state_dict().items():
        if k == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if k.endswith("mlp.experts.gate_up_proj"):
            g = tensors[gguf_py_name(family, cfg.num_hidden_layers, k.replace("gate_up_proj", "gate_proj"))]
            u = tensors[gguf_py_name(family, cfg.num_hidden_layers, k.replace("gate_up_proj", "up_proj"))]
            a = np.concatenate([g, u], axis=1)
        else:
            a = tensors[gguf_py_name(family, cfg.num_hidden_layers, k)]
            if family == "llama" and k.endswith("q_proj.weight"):
                a = rev(a, cfg.num_attention_heads, cfg.num_attention_heads)
            if family == "llama" and k.endswith("k_proj.weight"):
                a = rev(a, cfg.num_attention_heads, cfg.num_key_value_heads)
        sd[k] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32).reshape(v.shape))
    import copy
    other = copy.deepcopy(model).to(torch.float32)
    with torch.no_grad():
        for p in other.parameters():
            p.zero_()
    other.load_state_dict(sd, strict=False)
    other = other.to(torch.float64).eval()
    ref = model.to(torch.float64).eval()
    worst = max(float(np.abs(run_logits(ref, ids) - run_logits(other, ids)).max()) for ids in ps)
    return f"round trip (gguf-py names, transformers de-permute): " \
           f"{'OK' if worst < 1e-9 else 'MISMATCH'} max|dlogit|={worst:.3g}"


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "fixtures", "ref"))
    ap.add_argument("--only", default="")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sp = specs()
    names = [n for n in sp if not args.only or n in args.only.split(",")]
    for n in names:
        make_one(n, sp[n], args.out, not args.no_verify, args.device)


if __name__ == "__main__":
    main()
