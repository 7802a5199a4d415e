#!/usr/bin/env python3
"""Greedy continuations from Hugging Face transformers, for the CI
greedy-generation check on real models.

For each prompt: transformers (float64, weights dequantized by its GGUF
loader) generates N tokens greedily; we also record, at every generated step,
the margin between the top-1 and top-2 logits. An engine with 8-bit
activations may legitimately flip a near-tie, so the C-side check compares the
greedy ids up to the first step whose reference margin is below a threshold.

Usage: python3 scripts/ref/greedy_refs.py [--only smollm2] [--n 32]
Output: tests/fixtures/ref/greedy-<name>.json
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refcommon as rc  # noqa: E402
from real_models import model_path  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# chat-formatted and plain prompts, written for this file
PROMPTS = {
    "smollm2": [
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "The three primary colors are",
        "def fibonacci(n):\n",
    ],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="smollm2")
    ap.add_argument("--n", type=int, default=32)
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    for name in a.only.split(","):
        path = model_path(name)
        d, f = os.path.dirname(path), os.path.basename(path)
        tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float64)
        model.eval()
        out = {"gguf": f, "gguf_sha256": rc.sha256_file(path), "model": name,
               "source": rc.source_desc("cpu", "float64"), "machine": rc.machine_desc(),
               "produced_by": "scripts/ref/greedy_refs.py", "prompts": []}
        for text in PROMPTS[name]:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            seq = list(ids)
            margins = []
            with torch.no_grad():
                for _ in range(a.n):
                    logits = model(torch.tensor([seq])).logits[0, -1].numpy()
                    order = np.argsort(-logits, kind="stable")
                    margins.append(round(float(logits[order[0]] - logits[order[1]]), 6))
                    seq.append(int(order[0]))
            out["prompts"].append({"text": text, "ids": ids, "greedy": seq[len(ids):], "margin": margins})
            print(name, repr(text[:30]), seq[len(ids):][:8], "min margin", min(margins), file=sys.stderr)
        rc.write_json(os.path.join(ROOT, "tests", "fixtures", "ref", f"greedy-{name}.json"), out)


if __name__ == "__main__":
    main()
