/* Block decoders for the CUDA kernels, one struct per quantized type.
 *
 * The unit of work is 32 elements of one block, taken by one thread: a whole
 * block of the 32-element quants, an eighth of a K-quant super-block. A unit
 * is read as four "pairs": pair p is 8 weights forming two runs of 4
 * consecutive elements, at posA(u, p) and posB(u, p) from the block start
 * (always multiples of 4, so x is read as two float4 or two int8x4 words).
 * The runs follow the bytes: a pair is the low (or high) nibbles of 4 + 4
 * quant bytes, which in ggml's layouts are 4 consecutive elements each.
 *
 * Float path: pair() gives the 8 dequantized weights computed exactly as
 * ts_dequant_row_ref does (same operations, same order, no FMA contraction),
 * so the dequant kernel is bit-identical to the CPU and the matvec differs
 * from the CPU's --precise path only by the order of float accumulation.
 *
 * int8 path: iload() gives the unit's 32 weights as eight words of four
 * signed int8 (offsets already subtracted where ggml has them: Q4_0 -8,
 * Q5_0 -16, Q3_K -4*!hbit, Q6_K -32), W[2p] the run at posA, W[2p+1] posB;
 * idot() multiplies them with the activation's words in dp4a and applies the
 * scales of the CPU's integer structure (ts_vec_dot_ref): per 32-element
 * block (d_w*d_x)*sumi (+ (m_w*d_x)*sum(x_q)), per K super-block
 * d_w*d_x*sum_j(sc_j*sumi_j) - dmin_w*d_x*sum_j(m_j*bsum_j), the min term of
 * each sub-block counted by exactly one unit.
 *
 * Everything is __host__ __device__: tests/cuda/test_cuda_decode.cu runs the
 * same code on the CPU against the references, without a GPU. */
#ifndef TS_CUDA_QUANT_CUH
#define TS_CUDA_QUANT_CUH

#include <math.h>

#include "compute/cuda/cuda_common.cuh"

/* Non-linear codebooks packed in two 64-bit words (entries 0..7, 8..15), so a
 * lookup is a shift, not a divergent memory read. */
TS_HD int kv_iq4nl(uint32_t n) {
    const uint64_t t = (n & 8) ? 0x7159453526190d01ull : 0xf6eaddcfbfad9881ull;
    return (int)(int8_t)(uint8_t)(t >> (8 * (n & 7)));
}
TS_HD int kv_mxfp4(uint32_t n) {
    const uint64_t t = (n & 8) ? 0xf4f8fafcfdfeff00ull : 0x0c08060403020100ull;
    return (int)(int8_t)(uint8_t)(t >> (8 * (n & 7)));
}

/* 16 bytes from a 16-aligned address (host: memcpy). */
TS_HD uint4 ld_u4(const void *p) {
#if TS_DEVICE_PATH
    return *(const uint4 *)p;
#else
    uint4 v;
    memcpy(&v, p, 16);
    return v;
#endif
}
TS_HD uint2 ld_u2(const void *p) {
#if TS_DEVICE_PATH
    return *(const uint2 *)p;
#else
    uint2 v;
    memcpy(&v, p, 8);
    return v;
#endif
}

/* Scales of the activation for one unit: d_x, and the integer sums its min
 * or offset term needs (Q8_0 partner: the block's sum of quants in s[0];
 * Q8_K partner: from the bsums of the sub-blocks the unit owns, in the form
 * its idot takes: Q2_K the bsums, Q4_K/Q5_K two 16-bit pair sums in s[0],
 * Q3_K/Q6_K -offset x the bsums). */
struct XScale {
    float d;
    int s[4];
};

/* The quantized activation buffer (ts_cuda_q8_bytes): offsets of its parts. */
struct Q8Layout {
    size_t qs, d, s, total; /* byte offsets of the parts and the whole size */
    int64_t nd, ns;         /* scales and sums per token row */
};

TS_HD size_t align256(size_t v) { return (v + 255) & ~(size_t)255; }

TS_HD Q8Layout q8_layout(uint32_t partner, int64_t n_in, int n_tok) {
    Q8Layout L;
    const bool k = partner == TS_TYPE_Q8_K;
    L.nd = k ? n_in / 256 : n_in / 32;
    L.ns = k ? n_in / 16 : n_in / 32;
    L.qs = 0;
    L.d = align256((size_t)n_tok * (size_t)n_in);
    L.s = L.d + align256((size_t)n_tok * (size_t)L.nd * 4);
    L.total = L.s + align256((size_t)n_tok * (size_t)L.ns * 4);
    return L;
}

/* The activation quantizer's step for one element, shared by every kernel
 * that produces int8 activations (matvec_q8.cu's q8_quant, the attention's
 * merge of its splits): v is element e of token t's row of n_in, one element
 * per thread of a 256-thread block whose block b holds elements [256 b,
 * 256 b + 256), so a warp is one Q8_0 block and the block one Q8_K block.
 * Writes the quants, the scale and the sums exactly as ts_quantize_row (amax,
 * d = amax/127 stored as f16 for Q8_0, iscale = 127/amax for Q8_K, round half
 * to even, [-127, 127]). Every thread calls it (K: a __syncthreads); valid is
 * false past n_in, a whole warp at a time (n_in % 32 == 0). shf: 8 floats of
 * shared memory. */
template <bool K>
TS_DEV void q8_quant_elem(float v, bool valid, int64_t t, int64_t e, int64_t n_in, int8_t *qs, float *d, int32_t *s, int64_t nd,
                          int64_t ns, float *shf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (!K) {
        const float amax = warp_max(fabsf(v));
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        int q = rne_int(fmul_rn(v, id));
        q = q < -127 ? -127 : q > 127 ? 127 : q;
        const int sum = warp_sum_i(q);
        if (valid) {
            qs[t * n_in + e] = (int8_t)q;
            if (lane == 0) {
                d[t * nd + e / 32] = __half2float(__float2half_rn(dd));
                s[t * ns + e / 32] = sum;
            }
        }
    } else {
        float amax = warp_max(fabsf(v));
        if (lane == 0) shf[warp] = amax;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 8; i++) amax = fmaxf(amax, shf[i]);
        int q = 0;
        float dd = 0.0f;
        if (amax != 0.0f) {
            const float iscale = 127.0f / amax;
            q = rne_int(fmul_rn(iscale, v));
            q = q < -127 ? -127 : q > 127 ? 127 : q;
            dd = 1.0f / iscale;
        }
        /* bsums: lanes 0-15 and 16-31 are two sub-blocks of 16 */
        int b = q;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) b += __shfl_xor_sync(0xffffffffu, b, o);
        if (valid) {
            qs[t * n_in + e] = (int8_t)q;
            if ((lane & 15) == 0) s[t * ns + e / 16] = b;
            if (threadIdx.x == 0) d[t * nd + e / 256] = dd;
        }
    }
}

template <int TYPE> struct Dec;

/* ---------------------------------------------------------------- Q4_0 */
template <> struct Dec<TS_TYPE_Q4_0> {
    static constexpr int QK = 32, BB = 18, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = true;
    struct U {
        float d;
        uint32_t q[4];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = h2f(rd16(b));
#pragma unroll
        for (int k = 0; k < 4; k++) s.q[k] = rd32<2>(b + 2 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 4 * p; }
    TS_HD static int posB(int, int p) { return 16 + 4 * p; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fmul_rn((float)((int)((s.q[p] >> (8 * i)) & 15) - 8), s.d);
            w[4 + i] = fmul_rn((float)((int)((s.q[p] >> (8 * i + 4)) & 15) - 8), s.d);
        }
    }
    struct UI {
        float d;
        uint32_t W[8];
    };
    TS_HD static void iload(const uint8_t *b, int u, UI &s) {
        U t;
        load(b, u, t);
        iload_u(t, s);
    }
    /* the integer unit from a loaded one (matvec_q8.cu's direct loader loads U its own way) */
    TS_HD static void iload_u(const U &t, UI &s) {
        s.d = t.d;
#pragma unroll
        for (int p = 0; p < 4; p++) {
            s.W[2 * p] = t.q[p] & 0x0f0f0f0fu; /* 0..15: the -8 is applied through x's block sum in idot */
            s.W[2 * p + 1] = (t.q[p] >> 4) & 0x0f0f0f0fu;
        }
    }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        /* sum (q - 8) x = sum q x - 8 sum x, exactly: no per-byte subtraction per row */
        int sumi = -8 * x.s[0];
#pragma unroll
        for (int k = 0; k < 8; k++) sumi = dp4a(s.W[k], X[k], sumi);
        return fmul_rn(s.d, x.d) * (float)sumi;
    }
};

/* x words of a 32-element block for units whose pairs are (4p, 16+4p). */
TS_HD void xwords_nib32(const int8_t *xb, uint32_t X[8]) {
    const uint4 a = ld_u4(xb), c = ld_u4(xb + 16);
    X[0] = a.x, X[1] = c.x, X[2] = a.y, X[3] = c.y, X[4] = a.z, X[5] = c.z, X[6] = a.w, X[7] = c.w;
}

template <> struct Dec<TS_TYPE_Q4_1> {
    static constexpr int QK = 32, BB = 20, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = true;
    struct U {
        float d, m;
        uint32_t q[4];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = h2f(rd16(b));
        s.m = h2f(rd16(b + 2));
#pragma unroll
        for (int k = 0; k < 4; k++) s.q[k] = rd32<4>(b + 4 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 4 * p; }
    TS_HD static int posB(int, int p) { return 16 + 4 * p; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fadd_rn(fmul_rn((float)((s.q[p] >> (8 * i)) & 15), s.d), s.m);
            w[4 + i] = fadd_rn(fmul_rn((float)((s.q[p] >> (8 * i + 4)) & 15), s.d), s.m);
        }
    }
    struct UI {
        float d, m;
        uint32_t W[8];
    };
    TS_HD static void iload(const uint8_t *b, int, UI &s) {
        s.d = h2f(rd16(b));
        s.m = h2f(rd16(b + 2));
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const uint32_t q = rd32<4>(b + 4 + 4 * p);
            s.W[2 * p] = q & 0x0f0f0f0fu;
            s.W[2 * p + 1] = (q >> 4) & 0x0f0f0f0fu;
        }
    }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) sumi = dp4a(s.W[k], X[k], sumi);
        return fmul_rn(s.d, x.d) * (float)sumi + fmul_rn(s.m, x.d) * (float)x.s[0];
    }
};

/* Bit j0+i of qh moved to bit 4 of byte i (i < 4): Q5's fifth bits. */
TS_HD uint32_t spread4(uint32_t bits) {
    return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

template <> struct Dec<TS_TYPE_Q5_0> {
    static constexpr int QK = 32, BB = 22, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = true;
    struct U {
        float d;
        uint32_t qh, q[4];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = h2f(rd16(b));
        s.qh = rd32<2>(b + 2);
#pragma unroll
        for (int k = 0; k < 4; k++) s.q[k] = rd32<2>(b + 6 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 4 * p; }
    TS_HD static int posB(int, int p) { return 16 + 4 * p; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int lo = (int)(((s.q[p] >> (8 * i)) & 15) | (((s.qh >> (4 * p + i)) & 1) << 4));
            const int hi = (int)(((s.q[p] >> (8 * i + 4)) & 15) | (((s.qh >> (16 + 4 * p + i)) & 1) << 4));
            w[i] = fmul_rn((float)(lo - 16), s.d);
            w[4 + i] = fmul_rn((float)(hi - 16), s.d);
        }
    }
    struct UI {
        float d;
        uint32_t W[8];
    };
    TS_HD static void iload(const uint8_t *b, int, UI &s) {
        s.d = h2f(rd16(b));
        const uint32_t qh = rd32<2>(b + 2);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const uint32_t q = rd32<2>(b + 6 + 4 * p);
            s.W[2 * p] = (q & 0x0f0f0f0fu) | spread4((qh >> (4 * p)) & 15); /* 0..31: -16 in idot */
            s.W[2 * p + 1] = ((q >> 4) & 0x0f0f0f0fu) | spread4((qh >> (16 + 4 * p)) & 15);
        }
    }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int sumi = -16 * x.s[0]; /* sum (q - 16) x = sum q x - 16 sum x */
#pragma unroll
        for (int k = 0; k < 8; k++) sumi = dp4a(s.W[k], X[k], sumi);
        return fmul_rn(s.d, x.d) * (float)sumi;
    }
};

template <> struct Dec<TS_TYPE_Q5_1> {
    static constexpr int QK = 32, BB = 24, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = true;
    struct U {
        float d, m;
        uint32_t qh, q[4];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = h2f(rd16(b));
        s.m = h2f(rd16(b + 2));
        s.qh = rd32<4>(b + 4);
#pragma unroll
        for (int k = 0; k < 4; k++) s.q[k] = rd32<4>(b + 8 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 4 * p; }
    TS_HD static int posB(int, int p) { return 16 + 4 * p; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t lo = ((s.q[p] >> (8 * i)) & 15) | (((s.qh >> (4 * p + i)) & 1) << 4);
            const uint32_t hi = ((s.q[p] >> (8 * i + 4)) & 15) | (((s.qh >> (16 + 4 * p + i)) & 1) << 4);
            w[i] = fadd_rn(fmul_rn((float)lo, s.d), s.m);
            w[4 + i] = fadd_rn(fmul_rn((float)hi, s.d), s.m);
        }
    }
    struct UI {
        float d, m;
        uint32_t W[8];
    };
    TS_HD static void iload(const uint8_t *b, int, UI &s) {
        s.d = h2f(rd16(b));
        s.m = h2f(rd16(b + 2));
        const uint32_t qh = rd32<4>(b + 4);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const uint32_t q = rd32<4>(b + 8 + 4 * p);
            s.W[2 * p] = (q & 0x0f0f0f0fu) | spread4((qh >> (4 * p)) & 15);
            s.W[2 * p + 1] = ((q >> 4) & 0x0f0f0f0fu) | spread4((qh >> (16 + 4 * p)) & 15);
        }
    }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) sumi = dp4a(s.W[k], X[k], sumi);
        return fmul_rn(s.d, x.d) * (float)sumi + fmul_rn(s.m, x.d) * (float)x.s[0];
    }
};

template <> struct Dec<TS_TYPE_Q8_0> {
    static constexpr int QK = 32, BB = 34, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = true;
    struct U {
        float d;
        uint32_t q[8];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = h2f(rd16(b));
#pragma unroll
        for (int k = 0; k < 8; k++) s.q[k] = rd32<2>(b + 2 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 8 * p; }
    TS_HD static int posB(int, int p) { return 8 * p + 4; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fmul_rn((float)(int8_t)(s.q[2 * p] >> (8 * i)), s.d);
            w[4 + i] = fmul_rn((float)(int8_t)(s.q[2 * p + 1] >> (8 * i)), s.d);
        }
    }
    struct UI {
        float d;
        uint32_t W[8];
    };
    TS_HD static void iload(const uint8_t *b, int, UI &s) {
        s.d = h2f(rd16(b));
#pragma unroll
        for (int k = 0; k < 8; k++) s.W[k] = rd32<2>(b + 2 + 4 * k);
    }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int sumi = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) sumi = dp4a(s.W[k], X[k], sumi);
        return fmul_rn(s.d, x.d) * (float)sumi;
    }
};

template <> struct Dec<TS_TYPE_IQ4_NL> {
    static constexpr int QK = 32, BB = 18, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = false;
    struct U {
        float d;
        uint32_t q[4];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = h2f(rd16(b));
#pragma unroll
        for (int k = 0; k < 4; k++) s.q[k] = rd32<2>(b + 2 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 4 * p; }
    TS_HD static int posB(int, int p) { return 16 + 4 * p; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fmul_rn(s.d, (float)kv_iq4nl((s.q[p] >> (8 * i)) & 15));
            w[4 + i] = fmul_rn(s.d, (float)kv_iq4nl((s.q[p] >> (8 * i + 4)) & 15));
        }
    }
};

template <> struct Dec<TS_TYPE_MXFP4> {
    static constexpr int QK = 32, BB = 17, NU = 1, PARTNER = TS_TYPE_Q8_0;
    static constexpr bool INT8 = false;
    struct U {
        float d;
        uint32_t q[4];
    };
    TS_HD static void load(const uint8_t *b, int, U &s) {
        s.d = e8m0_half((uint8_t)rd8(b));
#pragma unroll
        for (int k = 0; k < 4; k++) s.q[k] = rd32<1>(b + 1 + 4 * k);
    }
    TS_HD static int posA(int, int p) { return 4 * p; }
    TS_HD static int posB(int, int p) { return 16 + 4 * p; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fmul_rn((float)kv_mxfp4((s.q[p] >> (8 * i)) & 15), s.d);
            w[4 + i] = fmul_rn((float)kv_mxfp4((s.q[p] >> (8 * i + 4)) & 15), s.d);
        }
    }
};

/* ---------------------------------------------------------------- K-quants
 * Q2_K, Q3_K, Q6_K: unit u = half h = u/4 of the super-block, column chunk
 * c = u%4 (bytes 8c..8c+7 of each 32-byte plane); pair p = plane s: elements
 * 128h + 32s + 8c + 0..7, sub-block (16 elements) 8h + 2s + c/2.
 * Q4_K, Q5_K: unit u = 64-element group g = u/2, half hf = u%2 (bytes
 * 16hf..16hf+15 of the group's 32); pairs 0,1 the low nibbles (elements
 * 64g + 16hf + 0..15, sub-block 2g), pairs 2,3 the high nibbles (64g + 32 +
 * 16hf + 0..15, sub-block 2g+1). */

TS_HD int kpos_plane(int u, int p) { return 128 * (u >> 2) + 32 * p + 8 * (u & 3); }
TS_HD int ksub_plane(int u, int p) { return 8 * (u >> 2) + 2 * p + ((u & 3) >> 1); }
TS_HD int kpos_group(int u, int p) { return 64 * (u >> 1) + 32 * (p >> 1) + 16 * (u & 1) + 8 * (p & 1); }

/* x words of a plane-type unit: pair p's 8 elements are contiguous. */
TS_HD void xwords_plane(const int8_t *xb, int u, uint32_t X[8]) {
    xb += kpos_plane(u, 0); /* then constant offsets: one address, not four */
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const uint2 v = ld_u2(xb + 32 * p);
        X[2 * p] = v.x, X[2 * p + 1] = v.y;
    }
}
/* group-type unit: pairs 0,1 are 16 contiguous elements, pairs 2,3 too. */
TS_HD void xwords_group(const int8_t *xb, int u, uint32_t X[8]) {
    xb += kpos_group(u, 0); /* pairs 2, 3 are 32 elements on */
    const uint4 a = ld_u4(xb), c = ld_u4(xb + 32);
    X[0] = a.x, X[1] = a.y, X[2] = a.z, X[3] = a.w, X[4] = c.x, X[5] = c.y, X[6] = c.z, X[7] = c.w;
}

/* x side of the plane-type units whose quants carry an offset (Q3_K: -4,
 * Q6_K: -32): x.s[p] = -off * the bsum of pair p's 16-element sub-block, so
 * idot starts pair p's dot product there and the weights need no per-byte
 * subtraction. The two units of a sub-block (column chunks c, c ^ 1) share
 * it: the even one counts it, the odd one gets 0. */
TS_HD void xscale_plane_off(const float *xd, const int32_t *xs, int64_t blk, int u, int off, XScale &x) {
    x.d = xd[blk];
    const int32_t *b = xs + blk * 16 + 8 * (u >> 2); /* the half's 8 sub-blocks: 16-aligned */
    const uint4 a = ld_u4(b), c = ld_u4(b + 4);
    const bool odd = (u >> 1) & 1; /* c / 2: which sub-block of each plane pair */
    const int m = (u & 1) ? 0 : -off;
    x.s[0] = m * (int)(odd ? a.y : a.x), x.s[1] = m * (int)(odd ? a.w : a.z);
    x.s[2] = m * (int)(odd ? c.y : c.x), x.s[3] = m * (int)(odd ? c.w : c.z);
}

template <> struct Dec<TS_TYPE_Q2_K> {
    static constexpr int QK = 256, BB = 84, NU = 8, PARTNER = TS_TYPE_Q8_K;
    static constexpr bool INT8 = true;
    struct U {
        float d, dmin;
        uint32_t q0, q1, sc; /* sc: the scale/min bytes of pairs 0..3 */
    };
    TS_HD static void load(const uint8_t *b, int u, U &s) {
        const int h = u >> 2, c = u & 3;
        s.d = h2f(rd16(b + 80));
        s.dmin = h2f(rd16(b + 82));
        s.q0 = rd32<4>(b + 16 + 32 * h + 8 * c);
        s.q1 = rd32<4>(b + 20 + 32 * h + 8 * c);
        const uint8_t *sp = b + 8 * h + (c >> 1);
        s.sc = rd8(sp) | rd8(sp + 2) << 8 | rd8(sp + 4) << 16 | rd8(sp + 6) << 24;
    }
    TS_HD static int posA(int u, int p) { return kpos_plane(u, p); }
    TS_HD static int posB(int u, int p) { return kpos_plane(u, p) + 4; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
        const uint32_t scb = (s.sc >> (8 * p)) & 255;
        const float dl = fmul_rn(s.d, (float)(scb & 15)), ml = fmul_rn(s.dmin, (float)(scb >> 4));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fsub_rn(fmul_rn(dl, (float)((s.q0 >> (8 * i + 2 * p)) & 3)), ml);
            w[4 + i] = fsub_rn(fmul_rn(dl, (float)((s.q1 >> (8 * i + 2 * p)) & 3)), ml);
        }
    }
    struct UI {
        float d, dmin;
        uint32_t W[8], sc;
    };
    TS_HD static void iload(const uint8_t *b, int u, UI &s) {
        U t;
        load(b, u, t);
        s.d = t.d, s.dmin = t.dmin, s.sc = t.sc;
#pragma unroll
        for (int p = 0; p < 4; p++) {
            s.W[2 * p] = (t.q0 >> (2 * p)) & 0x03030303u;
            s.W[2 * p + 1] = (t.q1 >> (2 * p)) & 0x03030303u;
        }
    }
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int u, XScale &x) {
        x.d = xd[blk];
#pragma unroll
        for (int p = 0; p < 4; p++) x.s[p] = xs[blk * 16 + ksub_plane(u, p)];
    }
    TS_HD static void xwords(const int8_t *xb, int u, uint32_t X[8]) { xwords_plane(xb, u, X); }
    TS_HD static float idot(const UI &s, int u, const uint32_t X[8], const XScale &x) {
        int sumi = 0, summ = 0;
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const int scb = (int)((s.sc >> (8 * p)) & 255);
            sumi += (scb & 15) * dp4a(s.W[2 * p + 1], X[2 * p + 1], dp4a(s.W[2 * p], X[2 * p], 0));
            summ += (scb >> 4) * x.s[p];
        }
        if (u & 1) summ = 0; /* the odd column chunk shares its sub-blocks with the even one */
        return fmul_rn(s.d, x.d) * (float)sumi - fmul_rn(s.dmin, x.d) * (float)summ;
    }
};

/* Q3_K's 6-bit scale j (16 of them, stored +32, packed in 12 bytes). */
TS_HD int q3k_scale(const uint8_t *sp, int j) {
    const uint32_t lo = j < 8 ? (rd8(sp + j) & 15) : (rd8(sp + j - 8) >> 4);
    const uint32_t hi = (rd8(sp + 8 + (j & 3)) >> (2 * (j >> 2))) & 3;
    return (int)(lo | hi << 4) - 32;
}

template <> struct Dec<TS_TYPE_Q3_K> {
    static constexpr int QK = 256, BB = 110, NU = 8, PARTNER = TS_TYPE_Q8_K;
    static constexpr bool INT8 = true;
    struct U {
        float d;
        uint32_t q0, q1, m0, m1;
        int sc[4];
    };
    TS_HD static void load(const uint8_t *b, int u, U &s) {
        const int h = u >> 2, c = u & 3;
        s.d = h2f(rd16(b + 108));
        s.q0 = rd32<2>(b + 32 + 32 * h + 8 * c);
        s.q1 = rd32<2>(b + 36 + 32 * h + 8 * c);
        s.m0 = rd32<2>(b + 8 * c);
        s.m1 = rd32<2>(b + 4 + 8 * c);
#pragma unroll
        for (int p = 0; p < 4; p++) s.sc[p] = q3k_scale(b + 96, ksub_plane(u, p));
    }
    TS_HD static int posA(int u, int p) { return kpos_plane(u, p); }
    TS_HD static int posB(int u, int p) { return kpos_plane(u, p) + 4; }
    TS_HD static void pair(const U &s, int u, int p, float w[8]) {
        const int h = u >> 2;
        const float dl = fmul_rn(s.d, (float)s.sc[p]);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q0 = (int)((s.q0 >> (8 * i + 2 * p)) & 3), q1 = (int)((s.q1 >> (8 * i + 2 * p)) & 3);
            const int h0 = (int)((s.m0 >> (8 * i + 4 * h + p)) & 1), h1 = (int)((s.m1 >> (8 * i + 4 * h + p)) & 1);
            w[i] = fmul_rn(dl, (float)(q0 - (h0 ? 0 : 4)));
            w[4 + i] = fmul_rn(dl, (float)(q1 - (h1 ? 0 : 4)));
        }
    }
    struct UI {
        float d;
        uint32_t W[8];
        int sc[4];
    };
    TS_HD static void iload(const uint8_t *b, int u, UI &s) {
        U t;
        load(b, u, t);
        const int h = u >> 2;
        s.d = t.d;
#pragma unroll
        for (int p = 0; p < 4; p++) {
            s.sc[p] = t.sc[p];
            const uint32_t h0 = (t.m0 >> (4 * h + p)) & 0x01010101u, h1 = (t.m1 >> (4 * h + p)) & 0x01010101u;
            s.W[2 * p] = ((t.q0 >> (2 * p)) & 0x03030303u) | h0 << 2; /* 0..7: the -4 comes from x.s (idot) */
            s.W[2 * p + 1] = ((t.q1 >> (2 * p)) & 0x03030303u) | h1 << 2;
        }
    }
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int u, XScale &x) {
        xscale_plane_off(xd, xs, blk, u, 4, x);
    }
    TS_HD static void xwords(const int8_t *xb, int u, uint32_t X[8]) { xwords_plane(xb, u, X); }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int sumi = 0;
#pragma unroll
        for (int p = 0; p < 4; p++)
            sumi += s.sc[p] * dp4a(s.W[2 * p + 1], X[2 * p + 1], dp4a(s.W[2 * p], X[2 * p], x.s[p]));
        return fmul_rn(s.d, x.d) * (float)sumi;
    }
};

/* Q4_K / Q5_K: 6-bit scale and min of 32-element sub-block j (k4 packing). */
TS_HD void k4_scale_min(const uint8_t *q, int j, int &sc, int &mn) {
    if (j < 4) {
        sc = (int)(rd8(q + j) & 63);
        mn = (int)(rd8(q + j + 4) & 63);
    } else {
        sc = (int)((rd8(q + j + 4) & 15) | ((rd8(q + j - 4) >> 6) << 4));
        mn = (int)((rd8(q + j + 4) >> 4) | ((rd8(q + j) >> 6) << 4));
    }
}

/* The scales and mins of sub-blocks 2g and 2g + 1 (g = u / 2: unit u's
 * pair) from the super-block's first 16 bytes held in registers (y, z, w =
 * bytes 4-7, 8-11, 12-15: the packed scales), as bytes [sc0, sc1, mn0, mn1].
 * Bytes i0, i0 + 1 (i0 = 2 (g & 1) = u & 2) of y and z hold the pair's low
 * 6 bits for g < 2; for g >= 2 the low 4 come from w's bytes (scale: low
 * nibble, min: high) and the top 2 from bits 6-7 of y's and z's. Every
 * selector and mask is the same for a lane from item to item (u is lane %
 * 8), so per row this is 2 byte permutes, 2 shifts and 2-3 logic ops
 * instead of ~30 instructions of byte-at-a-time extraction. Same values as
 * k4_scale_min. */
/* Its selectors for unit u. A lane's u is fixed (lane % 8), so a kernel
 * forms them once and keep()s them: left alone, the compiler rebuilt them
 * from u for every row (7 instructions a row, ~10% of a Q4_K item). */
struct K4Sel {
    uint32_t syz; /* bytes i0, i0 + 1 of y, then of z */
    uint32_t sw;  /* bytes i0, i0 + 1 of w, twice (u >= 4), or yz unchanged */
    uint32_t hi;  /* u >= 4 */
    TS_HD explicit K4Sel(int u) {
        const uint32_t i0 = (uint32_t)u & 2u;
        hi = u >= 4;
        syz = 0x5410u + 0x1111u * i0;
        sw = hi ? syz + 0x44u : 0x3210u;
    }
    /* opaque to the compiler from here on: kept in registers, not rebuilt */
    TS_HD void keep() {
#if defined(__CUDA_ARCH__)
        asm volatile("" : "+r"(syz), "+r"(sw), "+r"(hi));
#endif
    }
};
TS_HD uint32_t k4_scale_min_pair(uint32_t y, uint32_t z, uint32_t w, const K4Sel &k) {
    const uint32_t yz = byte_perm(y, z, k.syz); /* [y_i0, y_i0+1, z_i0, z_i0+1] */
    const uint32_t l = byte_perm(yz, w, k.sw);  /* the same, or w's bytes twice */
    if (!k.hi) return l & 0x3f3f3f3fu;
    return (l & 0x00000f0fu) | ((l >> 4) & 0x0f0f0000u) | ((yz >> 2) & 0x30303030u);
}

template <> struct Dec<TS_TYPE_Q4_K> {
    static constexpr int QK = 256, BB = 144, NU = 8, PARTNER = TS_TYPE_Q8_K;
    static constexpr bool INT8 = true;
    struct U {
        float dl[2], ml[2];
        uint4 q;
    };
    TS_HD static void load(const uint8_t *b, int u, U &s) {
        const int g = u >> 1;
        const float d = h2f(rd16(b)), dmin = h2f(rd16(b + 2));
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int sc, mn;
            k4_scale_min(b + 4, 2 * g + k, sc, mn);
            s.dl[k] = fmul_rn(d, (float)sc);
            s.ml[k] = fmul_rn(dmin, (float)mn);
        }
        s.q = ld_u4(b + 16 + 32 * g + 16 * (u & 1));
    }
    TS_HD static int posA(int u, int p) { return kpos_group(u, p); }
    TS_HD static int posB(int u, int p) { return kpos_group(u, p) + 4; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
        const uint32_t a = (p & 1) ? s.q.z : s.q.x, c = (p & 1) ? s.q.w : s.q.y;
        const int sh = 4 * (p >> 1);
        const float dl = s.dl[p >> 1], ml = s.ml[p >> 1];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = fsub_rn(fmul_rn(dl, (float)((a >> (8 * i + sh)) & 15)), ml);
            w[4 + i] = fsub_rn(fmul_rn(dl, (float)((c >> (8 * i + sh)) & 15)), ml);
        }
    }
    struct UI {
        float d, dmin;
        uint32_t W[8];
        uint32_t sm; /* bytes [sc0, sc1, mn0, mn1] of the unit's two sub-blocks (k4_scale_min_pair) */
    };
    /* Offsets of the 16-byte words unit u needs (super-blocks are 16-byte
     * aligned in a row, so these are aligned loads): the header (d, dmin,
     * scales) and the unit's quant bytes. */
    TS_HD static int qoff(int u) { return 16 + 32 * (u >> 1) + 16 * (u & 1); }
    TS_HD static void iload_w(const uint4 &hd, const uint4 &q, const K4Sel &k, UI &s) {
        s.d = h2f((uint16_t)(hd.x & 0xffff));
        s.dmin = h2f((uint16_t)(hd.x >> 16));
        s.sm = k4_scale_min_pair(hd.y, hd.z, hd.w, k);
        /* W[4..7]: the high nibbles left in place (16 q, as unsigned bytes): idot divides by 16 */
        s.W[0] = q.x & 0x0f0f0f0fu, s.W[1] = q.y & 0x0f0f0f0fu, s.W[2] = q.z & 0x0f0f0f0fu, s.W[3] = q.w & 0x0f0f0f0fu;
        s.W[4] = q.x & 0xf0f0f0f0u, s.W[5] = q.y & 0xf0f0f0f0u, s.W[6] = q.z & 0xf0f0f0f0u, s.W[7] = q.w & 0xf0f0f0f0u;
    }
    TS_HD static void iload(const uint8_t *b, int u, UI &s) { iload_w(ld_u4(b), ld_u4(b + qoff(u)), K4Sel(u), s); }
    /* x.s[0]: the bsums of the unit's two 32-element sub-blocks as 16-bit
     * halves (|sum| <= 32 * 127), for dp2a against the mins; 0 for the odd
     * half, since the even half counts the mins of both (it has the bsums). */
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int u, XScale &x) {
        x.d = xd[blk];
        const uint4 b = ld_u4(xs + blk * 16 + 4 * (u >> 1)); /* 16-aligned: blk * 64 + 16 g bytes */
        const uint32_t lo = (uint32_t)((int)b.x + (int)b.y), hi = (uint32_t)((int)b.z + (int)b.w);
        x.s[0] = (u & 1) ? 0 : (int)((lo & 0xffffu) | hi << 16);
        x.s[1] = x.s[2] = x.s[3] = 0;
    }
    TS_HD static void xwords(const int8_t *xb, int u, uint32_t X[8]) { xwords_group(xb, u, X); }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int s0 = 0, s16 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s0 = dp4a(s.W[k], X[k], s0);
            s16 = dp4a_us(s.W[4 + k], X[4 + k], s16);
        }
        const int s1 = s16 >> 4; /* exact: s16 = 16 s1 */
        /* |s0|, |s1| <= 16 * 15 * 127 < 2^15: both fit a dp2a's 16-bit halves */
        const int sumi = dp2a_lo(byte_perm((uint32_t)s0, (uint32_t)s1, 0x5410u), s.sm, 0);
        const int summ = dp2a_hi((uint32_t)x.s[0], s.sm, 0);
        /* x.d once (the caller's add fuses with it): 2 float ops fewer than d x.d sumi - dmin x.d summ */
        return x.d * fmaf(s.d, (float)sumi, -(s.dmin * (float)summ));
    }
};

template <> struct Dec<TS_TYPE_Q5_K> {
    static constexpr int QK = 256, BB = 176, NU = 8, PARTNER = TS_TYPE_Q8_K;
    static constexpr bool INT8 = true;
    struct U {
        float dl[2], ml[2];
        uint4 q, h;
    };
    TS_HD static void load(const uint8_t *b, int u, U &s) {
        const int g = u >> 1;
        const float d = h2f(rd16(b)), dmin = h2f(rd16(b + 2));
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int sc, mn;
            k4_scale_min(b + 4, 2 * g + k, sc, mn);
            s.dl[k] = fmul_rn(d, (float)sc);
            s.ml[k] = fmul_rn(dmin, (float)mn);
        }
        s.h = ld_u4(b + 16 + 16 * (u & 1));
        s.q = ld_u4(b + 48 + 32 * g + 16 * (u & 1));
    }
    TS_HD static int posA(int u, int p) { return kpos_group(u, p); }
    TS_HD static int posB(int u, int p) { return kpos_group(u, p) + 4; }
    TS_HD static void pair(const U &s, int u, int p, float w[8]) {
        const uint32_t a = (p & 1) ? s.q.z : s.q.x, c = (p & 1) ? s.q.w : s.q.y;
        const uint32_t ha = (p & 1) ? s.h.z : s.h.x, hc = (p & 1) ? s.h.w : s.h.y;
        const int sh = 4 * (p >> 1), hb = 2 * (u >> 1) + (p >> 1);
        const float dl = s.dl[p >> 1], ml = s.ml[p >> 1];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t v0 = ((a >> (8 * i + sh)) & 15) | (((ha >> (8 * i + hb)) & 1) << 4);
            const uint32_t v1 = ((c >> (8 * i + sh)) & 15) | (((hc >> (8 * i + hb)) & 1) << 4);
            w[i] = fsub_rn(fmul_rn(dl, (float)v0), ml);
            w[4 + i] = fsub_rn(fmul_rn(dl, (float)v1), ml);
        }
    }
    struct UI {
        float d, dmin;
        uint32_t W[8];
        uint32_t sm; /* bytes [sc0, sc1, mn0, mn1] (k4_scale_min_pair) */
    };
    /* 16-byte words of unit u (aligned, as Q4_K's): header, high bits, quants */
    TS_HD static int hoff(int u) { return 16 + 16 * (u & 1); }
    TS_HD static int qoff(int u) { return 48 + 32 * (u >> 1) + 16 * (u & 1); }
    TS_HD static void iload(const uint8_t *b, int u, UI &s) {
        iload_w(ld_u4(b), ld_u4(b + hoff(u)), ld_u4(b + qoff(u)), u, K4Sel(u), s);
    }
    TS_HD static void iload_w(const uint4 &hd, const uint4 &h, const uint4 &q, int u, const K4Sel &k, UI &s) {
        const int g = u >> 1;
        s.d = h2f((uint16_t)(hd.x & 0xffff));
        s.dmin = h2f((uint16_t)(hd.x >> 16));
        s.sm = k4_scale_min_pair(hd.y, hd.z, hd.w, k);
        const uint32_t qw[4] = {q.x, q.y, q.z, q.w}, hw[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s.W[k] = (qw[k] & 0x0f0f0f0fu) | (((hw[k] >> (2 * g)) & 0x01010101u) << 4);
            s.W[4 + k] = ((qw[k] >> 4) & 0x0f0f0f0fu) | (((hw[k] >> (2 * g + 1)) & 0x01010101u) << 4);
        }
    }
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int u, XScale &x) {
        Dec<TS_TYPE_Q4_K>::xscale(xd, xs, blk, u, x);
    }
    TS_HD static void xwords(const int8_t *xb, int u, uint32_t X[8]) { xwords_group(xb, u, X); }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s0 = dp4a(s.W[k], X[k], s0);
            s1 = dp4a(s.W[4 + k], X[4 + k], s1);
        }
        /* 5-bit quants: s0, s1 can pass 2^15, so the scales are multiplied in full */
        const int sumi = (int)(s.sm & 255) * s0 + (int)((s.sm >> 8) & 255) * s1;
        const int summ = dp2a_hi((uint32_t)x.s[0], s.sm, 0);
        /* x.d once (the caller's add fuses with it): 2 float ops fewer than d x.d sumi - dmin x.d summ */
        return x.d * fmaf(s.d, (float)sumi, -(s.dmin * (float)summ));
    }
};

template <> struct Dec<TS_TYPE_Q6_K> {
    static constexpr int QK = 256, BB = 210, NU = 8, PARTNER = TS_TYPE_Q8_K;
    static constexpr bool INT8 = true;
    struct U {
        float d;
        uint32_t a0, a1, b0, b1, h0, h1;
        int sc[4];
    };
    TS_HD static void load(const uint8_t *b, int u, U &s) {
        const int h = u >> 2, c = u & 3;
        s.d = h2f(rd16(b + 208));
        s.a0 = rd32<2>(b + 64 * h + 8 * c);
        s.a1 = rd32<2>(b + 64 * h + 8 * c + 4);
        s.b0 = rd32<2>(b + 64 * h + 32 + 8 * c);
        s.b1 = rd32<2>(b + 64 * h + 36 + 8 * c);
        s.h0 = rd32<2>(b + 128 + 32 * h + 8 * c);
        s.h1 = rd32<2>(b + 132 + 32 * h + 8 * c);
#pragma unroll
        for (int p = 0; p < 4; p++) s.sc[p] = (int)(int8_t)rd8(b + 192 + ksub_plane(u, p));
    }
    TS_HD static int posA(int u, int p) { return kpos_plane(u, p); }
    TS_HD static int posB(int u, int p) { return kpos_plane(u, p) + 4; }
    TS_HD static void pair(const U &s, int, int p, float w[8]) {
        const uint32_t l0 = (p & 1) ? s.b0 : s.a0, l1 = (p & 1) ? s.b1 : s.a1;
        const int sh = 4 * (p >> 1);
        const float dl = fmul_rn(s.d, (float)s.sc[p]);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int v0 = (int)(((l0 >> (8 * i + sh)) & 15) | (((s.h0 >> (8 * i + 2 * p)) & 3) << 4)) - 32;
            const int v1 = (int)(((l1 >> (8 * i + sh)) & 15) | (((s.h1 >> (8 * i + 2 * p)) & 3) << 4)) - 32;
            w[i] = fmul_rn(dl, (float)v0);
            w[4 + i] = fmul_rn(dl, (float)v1);
        }
    }
    struct UI {
        float d;
        uint32_t W[8];
        int sc[4];
    };
    TS_HD static void iload(const uint8_t *b, int u, UI &s) {
        U t;
        load(b, u, t);
        s.d = t.d;
#pragma unroll
        for (int p = 0; p < 4; p++) {
            s.sc[p] = t.sc[p];
            const uint32_t l0 = (p & 1) ? t.b0 : t.a0, l1 = (p & 1) ? t.b1 : t.a1;
            const int sh = 4 * (p >> 1);
            /* 0..63 (positive int8 for dp4a): the -32 comes from x.s (idot) */
            s.W[2 * p] = ((l0 >> sh) & 0x0f0f0f0fu) | (((t.h0 >> (2 * p)) & 0x03030303u) << 4);
            s.W[2 * p + 1] = ((l1 >> sh) & 0x0f0f0f0fu) | (((t.h1 >> (2 * p)) & 0x03030303u) << 4);
        }
    }
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int u, XScale &x) {
        xscale_plane_off(xd, xs, blk, u, 32, x);
    }
    TS_HD static void xwords(const int8_t *xb, int u, uint32_t X[8]) { xwords_plane(xb, u, X); }
    TS_HD static float idot(const UI &s, int, const uint32_t X[8], const XScale &x) {
        int sumi = 0;
#pragma unroll
        for (int p = 0; p < 4; p++)
            sumi += s.sc[p] * dp4a(s.W[2 * p + 1], X[2 * p + 1], dp4a(s.W[2 * p], X[2 * p], x.s[p]));
        return fmul_rn(s.d, x.d) * (float)sumi;
    }
};

/* x side of the 32-element types (Q8_0 partner): d and the block's sum. */
template <int TYPE> struct XSide32 {
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int, XScale &x) {
        x.d = xd[blk];
        x.s[0] = xs[blk];
        x.s[1] = x.s[2] = x.s[3] = 0;
    }
    TS_HD static void xwords(const int8_t *xb, int, uint32_t X[8]) {
        if (TYPE == TS_TYPE_Q8_0) {
            const uint4 a = ld_u4(xb), c = ld_u4(xb + 16);
            X[0] = a.x, X[1] = a.y, X[2] = a.z, X[3] = a.w, X[4] = c.x, X[5] = c.y, X[6] = c.z, X[7] = c.w;
        } else {
            xwords_nib32(xb, X);
        }
    }
};

/* Uniform access to the x side, whichever struct holds it. */
template <int TYPE, bool K = (Dec<TYPE>::QK == 256)> struct XSide;
template <int TYPE> struct XSide<TYPE, true> {
    TS_HD static void xscale(const float *xd, const int32_t *xs, int64_t blk, int u, XScale &x) {
        Dec<TYPE>::xscale(xd, xs, blk, u, x);
    }
    TS_HD static void xwords(const int8_t *xb, int u, uint32_t X[8]) { Dec<TYPE>::xwords(xb, u, X); }
};
template <int TYPE> struct XSide<TYPE, false> : XSide32<TYPE> {};

/* Calls f.template operator()<TYPE>() for a runtime type id; returns false
 * for types without a decoder. */
#define TS_FOR_QTYPES(X) \
    X(TS_TYPE_Q4_0) X(TS_TYPE_Q4_1) X(TS_TYPE_Q5_0) X(TS_TYPE_Q5_1) X(TS_TYPE_Q8_0) X(TS_TYPE_IQ4_NL) \
    X(TS_TYPE_MXFP4) X(TS_TYPE_Q2_K) X(TS_TYPE_Q3_K) X(TS_TYPE_Q4_K) X(TS_TYPE_Q5_K) X(TS_TYPE_Q6_K)
#define TS_FOR_INT8_TYPES(X) \
    X(TS_TYPE_Q4_0) X(TS_TYPE_Q4_1) X(TS_TYPE_Q5_0) X(TS_TYPE_Q5_1) X(TS_TYPE_Q8_0) \
    X(TS_TYPE_Q2_K) X(TS_TYPE_Q3_K) X(TS_TYPE_Q4_K) X(TS_TYPE_Q5_K) X(TS_TYPE_Q6_K)

#endif
