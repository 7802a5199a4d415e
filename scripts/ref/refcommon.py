"""Shared helpers for the reference-logit scripts (scripts/ref/).

Nothing here knows about turbospark: these scripts build or load models with
Hugging Face transformers, run them, and write what transformers computed as
JSON fixtures that turbospark's tests read (format: docs/REFERENCE.md).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess

import numpy as np

TOP_K = 20  # entries kept per position in a fixture

# llama.cpp token types (llama_token_type in llama-vocab.h; gguf.TokenType)
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def machine_desc() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = ""
    try:
        import torch
        if torch.cuda.is_available():
            gpu = ", GPU " + torch.cuda.get_device_name(0)
    except Exception:
        pass
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores{gpu}"


def source_desc(device: str, dtype: str) -> str:
    import torch
    import transformers
    return (f"transformers {transformers.__version__}, torch {torch.__version__}, "
            f"numpy {np.__version__}, {dtype} on {device}")


def spm_vocab(n_vocab: int):
    """A minimal SentencePiece-style ("llama") vocabulary of exactly n_vocab pieces:
    <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then filler pieces."""
    assert n_vocab >= 259 + 26
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL] + [TT_BYTE] * 256
    scores = [0.0] * len(tokens)
    letters = "abcdefghijklmnopqrstuvwxyz"
    fillers = []
    for c in letters:                      # single letters, then word-initial letters
        fillers.append(c)
    for c in letters:
        fillers.append("\u2581" + c)
    for a in letters:                      # then pairs, both plain and word-initial
        for b in letters:
            fillers.append(a + b)
            fillers.append("\u2581" + a + b)
    need = n_vocab - len(tokens)
    assert need <= len(fillers)
    for i, piece in enumerate(fillers[:need]):
        tokens.append(piece)
        types.append(TT_NORMAL)
        scores.append(-float(i))
    assert len(set(tokens)) == n_vocab
    return tokens, scores, types


def add_spm_tokenizer(w, n_vocab: int, add_space_prefix: bool | None = None):
    tokens, scores, types = spm_vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)


def topk_and_lse(logits: np.ndarray, k: int = TOP_K):
    """logits: (n_pos, n_vocab) float64. Returns per position the top-k
    [[id, logit], ...] sorted by logit descending (ties by id ascending), and
    logsumexp over the whole vocabulary."""
    logits = np.asarray(logits, dtype=np.float64)
    tops, lses = [], []
    for row in logits:
        order = np.lexsort((np.arange(row.size), -row))[:k]
        tops.append([[int(i), round(float(row[i]), 6)] for i in order])
        m = float(row.max())
        lses.append(round(m + math.log(float(np.exp(row - m).sum())), 6))
    return tops, lses


def write_json(path: str, obj) -> None:
    """Writes compactly but one prompt position per line, so diffs stay readable."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(obj, separators=(",", ":")))
        f.write("\n")
    os.replace(tmp, path)


def git_head(repo_dir: str) -> str:
    try:
        return subprocess.check_output(["git", "-C", repo_dir, "rev-parse", "--short", "HEAD"],
                                       text=True).strip()
    except Exception:
        return "unknown"


def compare_row(top, lse: float, ours: np.ndarray):
    """The comparison docs/REFERENCE.md recommends, for one position.
    top: [[id, ref_logit], ...] (K entries), lse: ref logsumexp over the vocab,
    ours: our full logits row. Returns (kl, max_abs_dlogit_topk, top1_same).

    KL(P || Q) over K+1 buckets (the K reference ids, plus one bucket for the
    rest of the vocabulary). Coarse-graining never increases KL, so this is a
    lower bound on the full KL(ref || ours)."""
    ours = np.asarray(ours, dtype=np.float64)
    m = ours.max()
    o_lse = m + math.log(np.exp(ours - m).sum())
    ids = np.array([t[0] for t in top], dtype=np.int64)
    lp = np.array([t[1] for t in top], dtype=np.float64) - lse       # log p_i
    lq = ours[ids] - o_lse                                           # log q_i
    kl = float(np.sum(np.exp(lp) * (lp - lq)))
    p_tail = max(0.0, 1.0 - float(np.exp(lp).sum()))
    mask = np.ones(ours.size, dtype=bool)
    mask[ids] = False
    q_tail = float(np.exp(ours[mask] - o_lse).sum()) if mask.any() else 0.0
    if p_tail > 0.0:
        kl += p_tail * (math.log(p_tail) - math.log(max(q_tail, 1e-300)))
    dl = float(np.abs(ours[ids] - np.array([t[1] for t in top])).max())
    top1_same = int(np.argmax(ours)) == int(top[0][0])
    return kl, dl, top1_same
