#!/usr/bin/env python3
"""llama.cpp's own agreement with the Hugging Face reference fixtures.

The real-model fixtures (tests/fixtures/ref/real-*.json, docs/REFERENCE.md)
hold, per prompt and position, the reference's top-20 logits and logsumexp
from transformers running the GGUF's dequantized weights in float64.
tests/test_forward.c judges turbospark against them; this script runs the
llama.cpp peer (an installed llama-cpp-python, see bench/README.md; it never
fetches or builds one) on the same ids and computes the same numbers, so the
thresholds can be judged against what llama.cpp itself reaches:

  top-1        argmax agrees with the reference top-1 over all positions
               (a reference near-tie, top-2 within 1e-5, counts as agreement)
  margin>0.1   the same over positions where the reference top-1 leads top-2 by > 0.1
  mean KL      KL(ref || engine) over the reference top-20 + one tail bucket,
               averaged over every position of every prompt
  max KL, max |dlogit| (top-20 ids)

These follow test_forward.c's compare_row line for line (q_tail = 1 - sum of
our top-20 probabilities, as there).

  peer_agreement.py [-t THREADS] [--ts BUILD/test_forward] [--json] [FIXTURE.json ...]

Default fixtures: tests/fixtures/ref/real-{smollm2,gemma3-270m,qwen2.5-coder-0.5b}.json.
The GGUF named by each fixture is looked up in $TS_MODEL_CACHE (default
~/.cache/turbospark/models; scripts/fetch_models.sh). llama.cpp runs with
Llama(model_path, logits_all=True, n_ctx=1024, n_threads=T), its defaults
otherwise (F16 KV cache), evaluating each prompt's ids from an empty cache
in n_batch (512) pieces and reading every position's logits.

--ts runs turbospark's test_forward on the real fixtures (TS_FIXTURE=real-)
and prints its lines next to llama.cpp's as one markdown table.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

DEFAULT_PY = "/opt/llamacpp-venv/bin/python"
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FIXTURES = ["real-smollm2.json", "real-gemma3-270m.json", "real-qwen2.5-coder-0.5b.json"]


def die(msg):
    sys.stderr.write("peer_agreement: error: %s\n" % msg)
    sys.exit(1)


def import_llama_cpp():
    try:
        import llama_cpp  # noqa: F401
        import numpy  # noqa: F401
        return llama_cpp
    except ImportError:
        pass
    py = os.environ.get("LLAMACPP_PYTHON", DEFAULT_PY)
    if os.environ.get("_PEER_REEXEC") != "1" and os.path.isfile(py):
        os.environ["_PEER_REEXEC"] = "1"
        os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
    die("llama_cpp (and numpy) not importable here nor in %s; see bench/README.md "
        "or set LLAMACPP_PYTHON" % py)


def compare_row(np, top, lse, ours, st):
    """test_forward.c compare_row, in float64."""
    ours = np.asarray(ours, dtype=np.float64)
    am = int(np.argmax(ours))
    m = ours[am]
    o_lse = m + math.log(float(np.exp(ours - m).sum()))
    kl = p_top = q_top = dl = 0.0
    for tid, rl in top:
        lp = rl - lse
        lq = ours[tid] - o_lse
        kl += math.exp(lp) * (lp - lq)
        p_top += math.exp(lp)
        q_top += math.exp(lq)
        dl = max(dl, abs(ours[tid] - rl))
    p_tail, q_tail = 1.0 - p_top, 1.0 - q_top
    if p_tail > 0:
        kl += p_tail * (math.log(p_tail) - math.log(max(q_tail, 1e-300)))
    ref0, ref0l = int(top[0][0]), top[0][1]
    decisive = len(top) < 2 or ref0l - top[1][1] > 0.1
    st["n_decisive"] += decisive
    st["top1_decisive"] += decisive and am == ref0
    if am == ref0:
        st["top1_same"] += 1
    elif len(top) > 1 and int(top[1][0]) == am and ref0l - top[1][1] < 1e-5:
        st["top1_near_tie"] += 1
    st["kl_sum"] += kl
    st["kl_max"] = max(st["kl_max"], kl)
    st["dl_max"] = max(st["dl_max"], dl)
    st["n_pos"] += 1


def run_peer(L, np, fixture, threads):
    with open(fixture) as f:
        fx = json.load(f)
    cache = os.environ.get("TS_MODEL_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "turbospark", "models")
    gguf = os.path.join(cache, fx["gguf"])
    if not os.path.isfile(gguf):
        return dict(fixture=os.path.basename(fixture), skipped="model file %s is absent "
                    "(scripts/fetch_models.sh %s)" % (gguf, fx.get("model", "")))
    max_len = max(len(p["ids"]) for p in fx["prompts"])
    n_ctx = max(1024, max_len)
    llm = L.Llama(model_path=gguf, logits_all=True, n_ctx=n_ctx, n_threads=threads,
                  n_threads_batch=threads, verbose=False)
    st = dict(n_pos=0, top1_same=0, top1_near_tie=0, n_decisive=0, top1_decisive=0,
              kl_sum=0.0, kl_max=0.0, dl_max=0.0)
    t0 = time.perf_counter()
    for p in fx["prompts"]:
        ids = p["ids"]
        llm.reset()
        llm.eval(ids)
        scores = llm.scores[:len(ids)]
        for t in range(len(ids)):
            compare_row(np, p["top"][t], p["logsumexp"][t], scores[t], st)
    dt = time.perf_counter() - t0
    if hasattr(llm, "close"):
        llm.close()
    n = st["n_pos"]
    return dict(fixture=os.path.basename(fixture), model=fx["gguf"], engine="llama.cpp",
                llama_cpp_python=L.__version__, threads=threads, n_pos=n,
                top1=(st["top1_same"] + st["top1_near_tie"]) / n,
                top1_margin=st["top1_decisive"] / st["n_decisive"] if st["n_decisive"] else 1.0,
                n_decisive=st["n_decisive"], mean_kl=st["kl_sum"] / n, max_kl=st["kl_max"],
                max_dlogit=st["dl_max"], seconds=dt)


LINE = re.compile(r"^(\S+\.json)\s+\S+\s+kv (\S+)\s+pos\s+(\d+)\s+top-1\s+([\d.]+)%\s+"
                  r"\(margin>0\.1:\s+([\d.]+)% of (\d+)\)\s+mean KL (\S+)\s+max KL (\S+)\s+"
                  r"max\|dlogit\| (\S+)")


def run_turbospark(test_forward):
    env = dict(os.environ, TS_FIXTURE="real-")
    r = subprocess.run([test_forward], capture_output=True, text=True, env=env)
    rows = {}
    for line in r.stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            rows[m.group(1)] = dict(fixture=m.group(1), engine="turbospark", kv=m.group(2),
                                    n_pos=int(m.group(3)), top1=float(m.group(4)) / 100,
                                    top1_margin=float(m.group(5)) / 100,
                                    n_decisive=int(m.group(6)), mean_kl=float(m.group(7)),
                                    max_kl=float(m.group(8)), max_dlogit=float(m.group(9)))
    if not rows:
        die("%s printed no real-* fixture lines (exit %d): %s"
            % (test_forward, r.returncode, (r.stdout + r.stderr)[-500:]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fixtures", nargs="*")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--ts", metavar="TEST_FORWARD", help="also run turbospark's test_forward")
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    a = ap.parse_args()
    if a.threads < 1:
        die("-t must be >= 1")
    fixtures = a.fixtures or [os.path.join(SRC, "tests", "fixtures", "ref", f)
                              for f in DEFAULT_FIXTURES]
    for f in fixtures:
        if not os.path.isfile(f):
            die("fixture %s not found" % f)
    ts_rows = run_turbospark(a.ts) if a.ts else {}
    L = import_llama_cpp()
    import numpy as np
    rows = []
    for f in fixtures:
        r = run_peer(L, np, f, a.threads)
        rows.append(r)
        if a.json:
            print(json.dumps(r))
        elif "skipped" in r:
            print("%-28s skipped: %s" % (r["fixture"], r["skipped"]))
        else:
            print("%-28s llama.cpp  pos %4d  top-1 %6.2f%% (margin>0.1: %6.2f%% of %d)  "
                  "mean KL %.2e  max KL %.2e  max|dlogit| %.1e  %.1fs"
                  % (r["fixture"], r["n_pos"], 100 * r["top1"], 100 * r["top1_margin"],
                     r["n_decisive"], r["mean_kl"], r["max_kl"], r["max_dlogit"], r["seconds"]))
        sys.stdout.flush()
    if a.json:
        for t in ts_rows.values():
            print(json.dumps(t))
        return 0
    print("\n| fixture | engine | positions | top-1 | top-1, ref margin > 0.1 | mean KL | max KL | max \\|dlogit\\| |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "skipped" in r:
            continue
        for e in [r] + ([ts_rows[r["fixture"]]] if r["fixture"] in ts_rows else []):
            print("| %s | %s | %d | %.2f%% | %.2f%% (of %d) | %.2e | %.2e | %.2f |"
                  % (r["fixture"].replace(".json", ""), e["engine"], e["n_pos"], 100 * e["top1"],
                     100 * e["top1_margin"], e["n_decisive"], e["mean_kl"], e["max_kl"],
                     e["max_dlogit"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
