#!/usr/bin/env python3
"""The llama.cpp peer: prompt (pp) and generation (tg) speed, and tokenizing.

Uses an already installed llama-cpp-python (it never fetches or builds one;
bench/README.md says how the peer was installed). If this Python cannot
import llama_cpp, the script re-runs itself with $LLAMACPP_PYTHON
(default /opt/llamacpp-venv/bin/python) when that exists.

  peer_llamacpp.py bench -m MODEL [-t 1,2] [-p 512] [-n 128] [-b 2048] [-ub 512] [-r 5] [-o md|csv|json]
  peer_llamacpp.py tokenize -m MODEL [--bos] [--special] TEXT...

MODEL is a GGUF path or a name from scripts/fetch_models.sh (smollm2, ...),
resolved with `fetch_models.sh --path`.

bench follows llama-bench's method so the numbers compare with it: pp<N> is
one llama_decode of N random tokens into an empty KV cache (first token BOS
when the model adds one), in n_batch/n_ubatch pieces; tg<N> is N
single-token decodes from an empty cache, each feeding a random token. One
untimed warm-up run per test, then -r timed runs; the row shows mean ± sample
stddev of tokens/s. Rows are printed as llama-bench's markdown table.

tokenize prints the ids of each TEXT on one line, space-separated, with a
vocab-only load (add_special=--bos, parse_special=--special).
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import time

DEFAULT_PY = "/opt/llamacpp-venv/bin/python"


def die(msg):
    sys.stderr.write("peer_llamacpp: error: %s\n" % msg)
    sys.exit(1)


def import_llama_cpp():
    try:
        import llama_cpp  # noqa: F401
        return llama_cpp
    except ImportError:
        pass
    py = os.environ.get("LLAMACPP_PYTHON", DEFAULT_PY)
    # (A venv's python is often a symlink to the system one, so compare by
    # marker, not by path.)
    if os.environ.get("_PEER_REEXEC") != "1" and os.path.isfile(py):
        os.environ["_PEER_REEXEC"] = "1"
        os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])
    die("llama_cpp is not importable here and %s does not have it either; "
        "install llama-cpp-python in a venv outside the repo (see bench/README.md) "
        "or set LLAMACPP_PYTHON" % py)


def resolve_model(m):
    if os.path.isfile(m):
        return m
    if os.sep in m or m.endswith(".gguf"):
        die("model file %s not found" % m)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "scripts", "fetch_models.sh")
    r = subprocess.run([script, "--path", m], capture_output=True, text=True)
    if r.returncode != 0:
        die("'%s' is neither a file nor a fetched model: %s" % (m, r.stderr.strip()))
    return r.stdout.strip()


def int_list(s):
    try:
        v = [int(x) for x in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, got %r" % s)
    if any(x < 0 for x in v):
        raise argparse.ArgumentTypeError("negative value in %r" % s)
    return v


class Peer:
    """One loaded model and context, driven through llama.cpp's C API."""

    def __init__(self, L, path, threads, n_ctx, n_batch, n_ubatch):
        self.L = L
        self.llm = L.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch,
                           n_threads=threads, n_threads_batch=threads, logits_all=False,
                           verbose=False)
        self.model = self.llm._model.model
        self.ctx = self.llm._ctx.ctx
        self.n_batch = n_batch
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))
        self.bos = L.llama_vocab_bos(self.vocab)

    def clear(self):
        L = self.L
        if hasattr(L, "llama_get_memory"):
            L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
        else:
            L.llama_kv_self_clear(self.ctx)

    def decode(self, toks):
        L = self.L
        arr = (L.llama_token * len(toks))(*toks)
        rc = L.llama_decode(self.ctx, L.llama_batch_get_one(arr, len(toks)))
        if rc != 0:
            die("llama_decode returned %d" % rc)

    def sync(self):
        if hasattr(self.L, "llama_synchronize"):
            self.L.llama_synchronize(self.ctx)

    def run_pp(self, n):
        toks = [random.randrange(self.n_vocab) for _ in range(n)]
        if self.add_bos and toks:
            toks[0] = self.bos
        self.clear()
        t0 = time.perf_counter()
        for i in range(0, n, self.n_batch):
            self.decode(toks[i:i + self.n_batch])
        self.sync()
        return time.perf_counter() - t0

    def run_tg(self, n):
        self.clear()
        tok = self.bos if self.add_bos else random.randrange(self.n_vocab)
        t0 = time.perf_counter()
        for _ in range(n):
            self.decode([tok])
            tok = random.randrange(self.n_vocab)
        self.sync()
        return time.perf_counter() - t0

    def desc(self):
        L = self.L
        buf = ctypes.create_string_buffer(256)
        L.llama_model_desc(self.model, buf, len(buf))
        return (buf.value.decode("utf-8", "replace"), L.llama_model_size(self.model),
                L.llama_model_n_params(self.model))


def fmt_size(b):
    return "%.2f GiB" % (b / 2**30) if b >= 2**30 else "%.2f MiB" % (b / 2**20)


def fmt_params(n):
    return "%.2f B" % (n / 1e9) if n >= 1e9 else "%.2f M" % (n / 1e6)


def cmd_bench(L, a):
    path = resolve_model(a.model)
    tests = [("pp", n) for n in a.n_prompt if n > 0] + [("tg", n) for n in a.n_gen if n > 0]
    if not tests:
        die("nothing to run: every -p and -n is 0")
    random.seed(a.seed)
    # Two spinning OpenMP threads on two shared CPUs collapse when anything
    # else runs (tg can drop 20x), so say when the numbers are suspect.
    load1 = os.getloadavg()[0]
    if load1 > 0.5:
        sys.stderr.write("peer_llamacpp: warning: 1-minute load average %.2f before the run; "
                         "other work on this machine will distort these numbers\n" % load1)
    rows = []
    header = "| model | size | params | backend | threads | n_batch | n_ubatch | test | t/s |"
    if a.output == "md":
        print(header)
        print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    elif a.output == "csv":
        print("model,size,params,backend,threads,n_batch,n_ubatch,test,avg_ts,stddev_ts,samples_ns")
    for t in a.threads:
        n_ctx = max([n for _, n in tests] + [16]) + 16
        peer = Peer(L, path, t, n_ctx, a.batch, a.ubatch)
        desc, size, params = peer.desc()
        for kind, n in tests:
            run = peer.run_pp if kind == "pp" else peer.run_tg
            run(n)  # warm-up: page cache, allocations, thread spin-up
            secs = [run(n) for _ in range(a.reps)]
            ts = [n / s for s in secs]
            avg = statistics.mean(ts)
            sd = statistics.stdev(ts) if len(ts) > 1 else 0.0
            name = "%s%d" % (kind, n)
            row = dict(model=desc, size=size, params=params, backend="CPU", threads=t,
                       n_batch=a.batch, n_ubatch=a.ubatch, test=name, avg_ts=avg,
                       stddev_ts=sd, samples_ns=[int(s * 1e9) for s in secs],
                       model_path=path, llama_cpp_python=L.__version__,
                       load1_before=load1)
            rows.append(row)
            if a.output == "md":
                print("| %s | %s | %s | CPU | %d | %d | %d | %s | %.2f ± %.2f |" % (
                    desc, fmt_size(size), fmt_params(params), t, a.batch, a.ubatch,
                    name, avg, sd))
            elif a.output == "csv":
                print('"%s",%d,%d,CPU,%d,%d,%d,%s,%.4f,%.4f,"%s"' % (
                    desc, size, params, t, a.batch, a.ubatch, name, avg, sd,
                    ";".join(str(x) for x in row["samples_ns"])))
            else:
                print(json.dumps(row))
            sys.stdout.flush()
        if hasattr(peer.llm, "close"):
            peer.llm.close()
        del peer
    if a.output == "md":
        print("\nllama-cpp-python %s, model %s, load average before: %.2f"
              % (L.__version__, path, load1))
    return 0


def cmd_tokenize(L, a):
    path = resolve_model(a.model)
    llm = L.Llama(model_path=path, vocab_only=True, verbose=False)
    for text in a.text:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=a.bos, special=a.special)
        print(" ".join(str(i) for i in ids))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="pp/tg tokens per second, llama-bench style")
    b.add_argument("-m", "--model", required=True)
    b.add_argument("-t", "--threads", type=int_list, default=[os.cpu_count() or 1])
    b.add_argument("-p", "--n-prompt", type=int_list, default=[512])
    b.add_argument("-n", "--n-gen", type=int_list, default=[128])
    b.add_argument("-b", "--batch", type=int, default=2048)
    b.add_argument("-ub", "--ubatch", type=int, default=512)
    b.add_argument("-r", "--reps", type=int, default=5)
    b.add_argument("-o", "--output", choices=["md", "csv", "json"], default="md")
    b.add_argument("--seed", type=int, default=1234)
    k = sub.add_parser("tokenize", help="token ids of each TEXT, one line each")
    k.add_argument("-m", "--model", required=True)
    k.add_argument("--bos", action="store_true", help="add BOS/special tokens the model adds")
    k.add_argument("--special", action="store_true", help="parse special tokens in TEXT")
    k.add_argument("text", nargs="+")
    a = ap.parse_args()
    if a.cmd == "bench" and (a.reps < 1 or a.batch < 1 or a.ubatch < 1 or 0 in a.threads):
        die("-r, -b, -ub and -t must be >= 1")
    L = import_llama_cpp()
    return cmd_bench(L, a) if a.cmd == "bench" else cmd_tokenize(L, a)


if __name__ == "__main__":
    sys.exit(main())
