#!/usr/bin/env python3
"""Reference token ids for the extra vocab-only GGUFs, from llama.cpp.

llama.cpp ships vocab-only GGUFs for the deepseek-coder, falcon, refact and
starcoder pre-tokenizers without test strings. This writes, for each, a
tests/fixtures/vocab/ggml-vocab-<name>.gguf.inp/.out pair in the same format as
llama.cpp's own fixtures (see shared/data/vocab):

  .inp  each test string followed by "\\n__ggml_vocab_test__\\n"
  .out  one line per string: " id id id" (a space before every id), tokenized
        with add_special=False and parse_special=False (no BOS)

The ids come from llama.cpp's tokenizer through the PyPI package
llama-cpp-python (Llama(vocab_only=True).tokenize(text, add_bos=False,
special=False)), never from turbospark. Run it with a Python that has
llama-cpp-python installed, e.g.

  /opt/llamacpp-venv/bin/python scripts/gen_vocab_extra_refs.py
  /opt/llamacpp-venv/bin/python scripts/gen_vocab_extra_refs.py --check

The strings are llama.cpp's common test strings (read from an existing .inp)
followed by EXTRA below.
"""
import argparse
import ctypes
import os
import sys

SEP = "\n__ggml_vocab_test__\n"
NAMES = ["deepseek-coder", "falcon", "refact", "starcoder"]

# What the pre-tokenizers above treat differently: digit grouping (single
# digits for starcoder/refact, runs of 3 for falcon), punctuation classes,
# CJK/Hangul blocks (deepseek-coder), contractions, whitespace before words,
# and code.
EXTRA = [
    "1234567890 3.14 1e10",
    "0 00 000 0000 12345 1,000,000 -42 +7 0x1F 0b1010 1_000 3.14159e-10 ½ ² ٣ ๓",
    "Version 2.0.1-beta (build #4821) released on 2024-03-15 at 10:30:45.",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\n\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] * c; } // saxpy-ish",
    "{\"name\": \"turbospark\", \"version\": [1, 2, 3], \"ok\": true, \"x\": null}",
    "<div class=\"main\"><a href=\"https://example.com/path?q=1&r=2#frag\">link</a></div>",
    "SELECT id, name FROM users WHERE age >= 21 AND name LIKE '%son' ORDER BY id DESC;",
    "x=>x**2; a!==b || c&&d; $var ~= ^(foo|bar)+$; a<<=2; b>>>=1; p->q; ::std::vector<int>",
    "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![]; Ok(()) }",
    "    indented four\n\tindented tab\n        eight spaces\n\t\ttwo tabs",
    "trailing spaces   \nline\r\nwindows line\rcarriage",
    "a  b   c    d     e      f       g",
    "\t\t\t\t",
    "          ",
    "\n\n\n\n\n\n",
    " \n \n \n",
    "don't won't can't I'm you're they've we'll she'd it's DON'T I'M You'Re",
    "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll, ''quoted'' and \"double\" «guillemets» „low-high“",
    "你好，世界！这是一个测试。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트입니다. 안녕하세요!",
    "Ελληνικά κείμενο, Русский текст, עברית, العربية, हिन्दी, ภาษาไทย",
    "😀😃😄😁😆 👨‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇯🇵",
    "e\u0301 n\u0303 a\u030a (combining) vs é ñ å (precomposed)",
    "non\u00a0breaking\u00a0space, zero\u200bwidth, soft\u00adhyphen",
    "∀x∈ℝ: x² ≥ 0 → √(x²) = |x| ≠ -|x| ∞ ∑ ∫ ≈ ≡",
    "€100 £50 ¥1000 $5.99 ₹200 ₿0.001",
    "user@example.com https://www.example.org/a/b.html?x=1 C:\\Windows\\System32 /usr/bin/env",
    "ALLCAPS lowercase CamelCase snake_case kebab-case SCREAMING_SNAKE_CASE",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "=================================================================",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
    "<|endoftext|> <s> </s> [INST] <fim_prefix> (special-looking text, not parsed as special)",
]


def read_strings(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    parts = text.split(SEP)
    if parts[-1] != "":
        sys.exit("gen_vocab_extra_refs: error: %s does not end with the separator line" % path)
    return parts[:-1]


def render(strings, tokenize):
    inp = "".join(s + SEP for s in strings).encode("utf-8")
    out = "".join("".join(" %d" % t for t in tokenize(s)) + "\n" for s in strings).encode()
    return inp, out


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shared = os.path.join(os.path.dirname(repo), "shared", "data")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab-dir", default=os.path.join(shared, "vocab-extra"))
    ap.add_argument("--base-inp", default=os.path.join(shared, "vocab", "ggml-vocab-gpt-2.gguf.inp"))
    ap.add_argument("--out-dir", default=os.path.join(repo, "tests", "fixtures", "vocab"))
    ap.add_argument("--check", action="store_true",
                    help="compare with the committed files instead of writing")
    ap.add_argument("names", nargs="*", default=NAMES)
    args = ap.parse_args()

    try:
        import llama_cpp
    except ImportError:
        sys.exit("gen_vocab_extra_refs: error: llama_cpp not importable; run with the "
                 "Python of a venv that has llama-cpp-python installed")

    strings = read_strings(args.base_inp) + EXTRA
    for s in strings:
        if SEP in s or "\n__ggml_vocab_test__" in s:
            sys.exit("gen_vocab_extra_refs: error: a test string contains the separator")

    os.makedirs(args.out_dir, exist_ok=True)
    bad = 0
    for name in args.names:
        gguf = os.path.join(args.vocab_dir, "ggml-vocab-%s.gguf" % name)
        if not os.path.isfile(gguf):
            sys.exit("gen_vocab_extra_refs: error: %s not found" % gguf)
        llm = llama_cpp.Llama(model_path=gguf, vocab_only=True, verbose=False)

        def tokenize(s, llm=llm):
            return llm.tokenize(s.encode("utf-8"), add_bos=False, special=False)

        # Byte-level BPE must round-trip; a mismatch means the peer is broken.
        # (Llama.detokenize uses a 32-byte piece buffer and drops longer
        # pieces such as a 64-'=' token, so call llama_token_to_piece here.)
        vocab = llama_cpp.llama_model_get_vocab(llm._model.model)

        def detok(ids, vocab=vocab):
            out = b""
            buf = ctypes.create_string_buffer(1024)
            for t in ids:
                n = llama_cpp.llama_token_to_piece(vocab, t, buf, len(buf), 0, False)
                if n < 0:
                    sys.exit("gen_vocab_extra_refs: error: token %d piece too long" % t)
                out += buf.raw[:n]
            return out

        for s in strings:
            back = detok(tokenize(s)).decode("utf-8", "replace")
            if back != s:
                print("warning: %s does not round-trip %r -> %r" % (name, s[:40], back[:40]),
                      file=sys.stderr)
        inp, out = render(strings, tokenize)
        base = os.path.join(args.out_dir, "ggml-vocab-%s.gguf" % name)
        if args.check:
            for ext, data in ((".inp", inp), (".out", out)):
                try:
                    with open(base + ext, "rb") as f:
                        same = f.read() == data
                except OSError:
                    same = False
                print("%s%s: %s" % (name, ext, "ok" if same else "DIFFERS"))
                bad += not same
            continue
        for ext, data in ((".inp", inp), (".out", out)):
            tmp = base + ext + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, base + ext)
        print("wrote %s.{inp,out}: %d strings (llama-cpp-python %s)"
              % (base, len(strings), llama_cpp.__version__))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
