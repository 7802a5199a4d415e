/* Scalar references for every supported type: conversions, dequantization,
 * quantization and dot products. These are the oracles of the fast paths
 * (tests compare against them), so they favour plainness over speed; the dots
 * accumulate across blocks in double. Layouts follow ggml bit for bit. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#include <math.h>
#include <string.h>

const int8_t ts_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t ts_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ------------------------------------------------------------------ */
/* conversions                                                         */

static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

float ts_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan (payload kept) */
    if (exp == 0) {
        if (!man) return bits_f32(sign);
        /* subnormal: man * 2^-24, exact in float */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ts_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x3ff); /* nan, quieted */
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {
        /* result is subnormal (or zero): value / 2^-24 rounded to nearest even */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to 0 (2^-25 itself ties to even 0) */
        uint32_t e = a >> 23;               /* 102..112 */
        uint32_t m = (a & 0x7fffff) | 0x800000; /* 24-bit significand, value = m * 2^(e-150) */
        uint32_t shift = 126 - e;           /* to units of 2^-24: m >> (126-e) ... (e-150+24 = e-126) */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q; /* q may reach 0x400: the smallest normal, still correct */
    }
    /* normal: rebias and round 13 dropped bits to nearest even; carries roll into the exponent */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return sign | (uint16_t)q;
}

float ts_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ts_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* nan, quieted */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float ts_e8m0_half_to_f32(uint8_t e) {
    /* 2^(e-128): subnormal for e < 2 */
    return bits_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

#define F16(x) ts_f16_to_f32(x)

/* ------------------------------------------------------------------ */
/* unpacking helpers shared by dequant and dot                         */

/* Q4_K / Q5_K: 8 six-bit scales and mins packed in 12 bytes. */
static void k4_scales(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            sc[j] = q[j] & 63;
            mn[j] = q[j + 4] & 63;
        } else {
            sc[j] = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
            mn[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
    }
}

/* Q3_K: 16 six-bit scales (stored +32) in 12 bytes. */
static void q3k_scales(const uint8_t *s, int sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
        int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        sc[j] = (lo | (hi << 4)) - 32;
    }
}

/* kblock = ts_q_kblock (quant.h): one K-quant super-block as integers. */
typedef ts_q_kblock kblock;

static void unpack_q2_K(const void *p_, kblock *k) {
    ts_block_q2_K b_;
    memcpy(&b_, p_, sizeof b_);
    const ts_block_q2_K *b = &b_;
    k->d = F16(b->d);
    k->dmin = F16(b->dmin);
    for (int j = 0; j < 16; j++) {
        k->scale[j] = b->scales[j] & 0xf;
        k->min[j] = b->scales[j] >> 4;
    }
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) k->q[h * 128 + s * 32 + l] = (int8_t)((b->qs[h * 32 + l] >> (2 * s)) & 3);
}

static void unpack_q3_K(const void *p_, kblock *k) {
    ts_block_q3_K b_;
    memcpy(&b_, p_, sizeof b_);
    const ts_block_q3_K *b = &b_;
    k->d = F16(b->d);
    k->dmin = 0;
    q3k_scales(b->scales, k->scale);
    for (int j = 0; j < 16; j++) k->min[j] = 0;
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                int q = (b->qs[h * 32 + l] >> (2 * s)) & 3;
                int hb = (b->hmask[l] >> (h * 4 + s)) & 1;
                k->q[h * 128 + s * 32 + l] = (int8_t)(q - (hb ? 0 : 4));
            }
}

static void unpack_q4_K(const void *p_, kblock *k) {
    ts_block_q4_K b_;
    memcpy(&b_, p_, sizeof b_);
    const ts_block_q4_K *b = &b_;
    uint8_t sc[8], mn[8];
    k->d = F16(b->d);
    k->dmin = F16(b->dmin);
    k4_scales(b->scales, sc, mn);
    for (int j = 0; j < 16; j++) {
        k->scale[j] = sc[j / 2];
        k->min[j] = mn[j / 2];
    }
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            k->q[g * 64 + l] = (int8_t)(b->qs[g * 32 + l] & 0xf);
            k->q[g * 64 + 32 + l] = (int8_t)(b->qs[g * 32 + l] >> 4);
        }
}

static void unpack_q5_K(const void *p_, kblock *k) {
    ts_block_q5_K b_;
    memcpy(&b_, p_, sizeof b_);
    const ts_block_q5_K *b = &b_;
    uint8_t sc[8], mn[8];
    k->d = F16(b->d);
    k->dmin = F16(b->dmin);
    k4_scales(b->scales, sc, mn);
    for (int j = 0; j < 16; j++) {
        k->scale[j] = sc[j / 2];
        k->min[j] = mn[j / 2];
    }
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            int h0 = (b->qh[l] >> (2 * g)) & 1, h1 = (b->qh[l] >> (2 * g + 1)) & 1;
            k->q[g * 64 + l] = (int8_t)((b->qs[g * 32 + l] & 0xf) | (h0 << 4));
            k->q[g * 64 + 32 + l] = (int8_t)((b->qs[g * 32 + l] >> 4) | (h1 << 4));
        }
}

static void unpack_q6_K(const void *p_, kblock *k) {
    ts_block_q6_K b_;
    memcpy(&b_, p_, sizeof b_);
    const ts_block_q6_K *b = &b_;
    k->d = F16(b->d);
    k->dmin = 0;
    for (int j = 0; j < 16; j++) {
        k->scale[j] = b->scales[j];
        k->min[j] = 0;
    }
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                int lo = b->ql[h * 64 + (s & 1) * 32 + l];
                lo = s < 2 ? lo & 0xf : lo >> 4;
                int hi = (b->qh[h * 32 + l] >> (2 * s)) & 3;
                k->q[h * 128 + s * 32 + l] = (int8_t)((lo | (hi << 4)) - 32);
            }
}

typedef void (*kunpack_fn)(const void *, kblock *);

static kunpack_fn kunpack_for(ts_type t) {
    switch (t) {
    case TS_TYPE_Q2_K: return (kunpack_fn)unpack_q2_K;
    case TS_TYPE_Q3_K: return (kunpack_fn)unpack_q3_K;
    case TS_TYPE_Q4_K: return (kunpack_fn)unpack_q4_K;
    case TS_TYPE_Q5_K: return (kunpack_fn)unpack_q5_K;
    case TS_TYPE_Q6_K: return (kunpack_fn)unpack_q6_K;
    default: return NULL;
    }
}

int ts_q_unpack_k(ts_type t, const void *blk, ts_q_kblock *k) {
    kunpack_fn un = kunpack_for(t);
    if (!un) return -1;
    un(blk, k);
    return 0;
}

/* The 32-element quants as integer q[32] with value = d*q[i] + m. */
typedef struct {
    int q[TS_QK];
    float d, m;
} sblock;

static void unpack_small(ts_type t, const uint8_t *p, sblock *s) {
    s->m = 0;
    switch (t) {
    case TS_TYPE_Q4_0: {
        ts_block_q4_0 b_;
        memcpy(&b_, p, sizeof b_);
        const ts_block_q4_0 *b = &b_;
        s->d = F16(b->d);
        for (int j = 0; j < 16; j++) {
            s->q[j] = (b->qs[j] & 0xf) - 8;
            s->q[j + 16] = (b->qs[j] >> 4) - 8;
        }
        break;
    }
    case TS_TYPE_Q4_1: {
        ts_block_q4_1 b_;
        memcpy(&b_, p, sizeof b_);
        const ts_block_q4_1 *b = &b_;
        s->d = F16(b->d);
        s->m = F16(b->m);
        for (int j = 0; j < 16; j++) {
            s->q[j] = b->qs[j] & 0xf;
            s->q[j + 16] = b->qs[j] >> 4;
        }
        break;
    }
    case TS_TYPE_Q5_0:
    case TS_TYPE_Q5_1: {
        /* byte layout: [d][m if Q5_1][qh 4][qs 16]; all fields byte-addressed */
        int hdr = t == TS_TYPE_Q5_0 ? 2 : 4;
        uint16_t d16, m16;
        memcpy(&d16, p, 2);
        s->d = F16(d16);
        if (t == TS_TYPE_Q5_1) {
            memcpy(&m16, p + 2, 2);
            s->m = F16(m16);
        }
        const uint8_t *qh8 = p + hdr, *qs = p + hdr + 4;
        uint32_t qh = (uint32_t)qh8[0] | (uint32_t)qh8[1] << 8 | (uint32_t)qh8[2] << 16 | (uint32_t)qh8[3] << 24;
        int off = t == TS_TYPE_Q5_0 ? 16 : 0;
        for (int j = 0; j < 16; j++) {
            s->q[j] = ((qs[j] & 0xf) | (((qh >> j) & 1) << 4)) - off;
            s->q[j + 16] = ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off;
        }
        break;
    }
    case TS_TYPE_Q8_0: {
        ts_block_q8_0 b_;
        memcpy(&b_, p, sizeof b_);
        const ts_block_q8_0 *b = &b_;
        s->d = F16(b->d);
        for (int j = 0; j < 32; j++) s->q[j] = b->qs[j];
        break;
    }
    case TS_TYPE_IQ4_NL: {
        ts_block_iq4_nl b_;
        memcpy(&b_, p, sizeof b_);
        const ts_block_iq4_nl *b = &b_;
        s->d = F16(b->d);
        for (int j = 0; j < 16; j++) {
            s->q[j] = ts_kvalues_iq4nl[b->qs[j] & 0xf];
            s->q[j + 16] = ts_kvalues_iq4nl[b->qs[j] >> 4];
        }
        break;
    }
    case TS_TYPE_MXFP4: {
        ts_block_mxfp4 b_;
        memcpy(&b_, p, sizeof b_);
        const ts_block_mxfp4 *b = &b_;
        s->d = ts_e8m0_half_to_f32(b->e);
        for (int j = 0; j < 16; j++) {
            s->q[j] = ts_kvalues_mxfp4[b->qs[j] & 0xf];
            s->q[j + 16] = ts_kvalues_mxfp4[b->qs[j] >> 4];
        }
        break;
    }
    default: break;
    }
}

static int is_small(ts_type t) {
    return t == TS_TYPE_Q4_0 || t == TS_TYPE_Q4_1 || t == TS_TYPE_Q5_0 || t == TS_TYPE_Q5_1 || t == TS_TYPE_Q8_0 ||
           t == TS_TYPE_IQ4_NL || t == TS_TYPE_MXFP4;
}

int ts_type_supported(ts_type t) {
    return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16 || is_small(t) || kunpack_for(t) != NULL;
}

ts_type ts_type_dot_partner(ts_type t) {
    if (t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16) return TS_TYPE_F32;
    if (is_small(t)) return TS_TYPE_Q8_0;
    if (kunpack_for(t)) return TS_TYPE_Q8_K;
    return TS_TYPE_COUNT;
}

/* ------------------------------------------------------------------ */
/* dequantization                                                      */

/* Operation order matches ggml's dequantize_row_* (d*sc first, then *q, then
 * -dmin*m), so results are bit-identical to ggml and to gguf-py. */
static void dequant_k(ts_type t, const uint8_t *src, float *y, int64_t nb) {
    kunpack_fn un = kunpack_for(t);
    uint32_t bytes = ts_type_get(t)->block_bytes;
    kblock k;
    for (int64_t i = 0; i < nb; i++) {
        un(src + i * bytes, &k);
        for (int j = 0; j < 256; j++) {
            float dl = k.d * (float)k.scale[j / 16];
            float ml = k.dmin * (float)k.min[j / 16];
            *y++ = dl * (float)k.q[j] - ml;
        }
    }
}

static void dequant_small(ts_type t, const uint8_t *src, float *y, int64_t nb) {
    uint32_t bytes = ts_type_get(t)->block_bytes;
    sblock s;
    for (int64_t i = 0; i < nb; i++) {
        unpack_small(t, src + i * bytes, &s);
        if (t == TS_TYPE_Q4_1 || t == TS_TYPE_Q5_1)
            for (int j = 0; j < 32; j++) *y++ = (float)s.q[j] * s.d + s.m;
        else if (t == TS_TYPE_IQ4_NL)
            for (int j = 0; j < 32; j++) *y++ = s.d * (float)s.q[j];
        else
            for (int j = 0; j < 32; j++) *y++ = (float)s.q[j] * s.d;
    }
}

static void dequant_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }
static void dequant_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = ts_f16_to_f32(h);
    }
}
static void dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = ts_bf16_to_f32(h);
    }
}
static void dequant_q8_K(const void *src, float *y, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        ts_block_q8_K b;
        memcpy(&b, p + i * sizeof b, sizeof b);
        for (int j = 0; j < 256; j++) *y++ = b.d * (float)b.qs[j];
    }
}

void ts_dequant_row_ref(ts_type type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case TS_TYPE_F32: dequant_f32(src, dst, n); return;
    case TS_TYPE_F16: dequant_f16(src, dst, n); return;
    case TS_TYPE_BF16: dequant_bf16(src, dst, n); return;
    case TS_TYPE_Q8_K: dequant_q8_K(src, dst, n); return;
    default: break;
    }
    if (is_small(type)) dequant_small(type, src, dst, n / TS_QK);
    else if (kunpack_for(type)) dequant_k(type, src, dst, n / TS_QK_K);
}

/* ------------------------------------------------------------------ */
/* quantization (round to nearest, ties to even everywhere so that SIMD
 * versions can match bit for bit)                                     */

static inline int rne(float v) { return (int)lrintf(v); }
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void quant_q8_0(const float *x, void *dst, int64_t n) {
    uint8_t *out = dst;
    for (int64_t i = 0; i < n / TS_QK; i++, x += TS_QK) {
        ts_block_q8_0 y[1];
        float amax = 0;
        for (int j = 0; j < TS_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        y[0].d = ts_f32_to_f16(d);
        for (int j = 0; j < TS_QK; j++) y[0].qs[j] = (int8_t)clampi(rne(x[j] * id), -127, 127);
        memcpy(out + i * sizeof y[0], y, sizeof y[0]);
    }
}

static void quant_q8_K(const float *x, void *dst, int64_t n) {
    uint8_t *out = dst;
    for (int64_t i = 0; i < n / TS_QK_K; i++, x += TS_QK_K) {
        ts_block_q8_K y[1];
        float amax = 0;
        for (int j = 0; j < TS_QK_K; j++) amax = fmaxf(amax, fabsf(x[j]));
        if (amax == 0) {
            memset(&y[0], 0, sizeof y[0]);
            memcpy(out + i * sizeof y[0], y, sizeof y[0]);
            continue;
        }
        float iscale = 127.0f / amax;
        for (int j = 0; j < TS_QK_K; j++) y[0].qs[j] = (int8_t)clampi(rne(iscale * x[j]), -127, 127);
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[0].qs[j * 16 + l];
            y[0].bsums[j] = (int16_t)s;
        }
        y[0].d = 1.0f / iscale;
        memcpy(out + i * sizeof y[0], y, sizeof y[0]);
    }
}

static void quant_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * 4); }
static void quant_f16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = ts_f32_to_f16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}
static void quant_bf16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = ts_f32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* Weight quantizers: plain min/max round-to-nearest, for fixtures and tools. */
static void quant_small(ts_type t, const float *x, uint8_t *out, int64_t n) {
    uint32_t bytes = ts_type_get(t)->block_bytes;
    _Alignas(8) uint8_t dst[64];
    for (int64_t i = 0; i < n / TS_QK; i++, x += TS_QK, out += bytes, memcpy(out - bytes, dst, bytes)) {
        float amax = 0, vmax = 0, mn = x[0], mx = x[0];
        for (int j = 0; j < TS_QK; j++) {
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); vmax = x[j]; }
            mn = fminf(mn, x[j]);
            mx = fmaxf(mx, x[j]);
        }
        int q[TS_QK];
        switch (t) {
        case TS_TYPE_Q4_0:
        case TS_TYPE_Q5_0: {
            /* the signed extreme maps to -8 (-16), as in ggml */
            int lv = t == TS_TYPE_Q4_0 ? 8 : 16;
            float d = vmax / (float)-lv, id = d != 0 ? 1.0f / d : 0;
            uint16_t dh = ts_f32_to_f16(d);
            for (int j = 0; j < TS_QK; j++) q[j] = clampi(rne(x[j] * id) + lv, 0, 2 * lv - 1);
            if (t == TS_TYPE_Q4_0) {
                ts_block_q4_0 *b = (ts_block_q4_0 *)dst;
                b->d = dh;
                for (int j = 0; j < 16; j++) b->qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            } else {
                ts_block_q5_0 *b = (ts_block_q5_0 *)dst;
                uint32_t qh = 0;
                b->d = dh;
                for (int j = 0; j < 16; j++) {
                    b->qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
                    qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
                }
                memcpy(b->qh, &qh, 4);
            }
            break;
        }
        case TS_TYPE_Q4_1:
        case TS_TYPE_Q5_1: {
            int lv = t == TS_TYPE_Q4_1 ? 15 : 31;
            float d = (mx - mn) / (float)lv, id = d != 0 ? 1.0f / d : 0;
            for (int j = 0; j < TS_QK; j++) q[j] = clampi(rne((x[j] - mn) * id), 0, lv);
            if (t == TS_TYPE_Q4_1) {
                ts_block_q4_1 *b = (ts_block_q4_1 *)dst;
                b->d = ts_f32_to_f16(d);
                b->m = ts_f32_to_f16(mn);
                for (int j = 0; j < 16; j++) b->qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            } else {
                ts_block_q5_1 *b = (ts_block_q5_1 *)dst;
                uint32_t qh = 0;
                b->d = ts_f32_to_f16(d);
                b->m = ts_f32_to_f16(mn);
                for (int j = 0; j < 16; j++) {
                    b->qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + 16] & 0xf) << 4));
                    qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
                }
                memcpy(b->qh, &qh, 4);
            }
            break;
        }
        case TS_TYPE_Q8_0: quant_q8_0(x, dst, TS_QK); break;
        case TS_TYPE_IQ4_NL: {
            ts_block_iq4_nl *b = (ts_block_iq4_nl *)dst;
            float d = vmax / -127.0f, id = d != 0 ? 1.0f / d : 0;
            b->d = ts_f32_to_f16(d);
            for (int j = 0; j < TS_QK; j++) {
                float v = x[j] * id;
                int best = 0;
                for (int k = 1; k < 16; k++)
                    if (fabsf(ts_kvalues_iq4nl[k] - v) < fabsf(ts_kvalues_iq4nl[best] - v)) best = k;
                q[j] = best;
            }
            for (int j = 0; j < 16; j++) b->qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            break;
        }
        case TS_TYPE_MXFP4: {
            ts_block_mxfp4 *b = (ts_block_mxfp4 *)dst;
            /* smallest power-of-two scale with amax/scale <= 6 (codebook max 12 halved) */
            int e = amax > 0 ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
            e = clampi(e, 0, 254);
            while (e < 254 && amax / (2.0f * ts_e8m0_half_to_f32((uint8_t)e)) > 6.0f) e++;
            float dh = ts_e8m0_half_to_f32((uint8_t)e);
            b->e = (uint8_t)e;
            for (int j = 0; j < TS_QK; j++) {
                float v = x[j] / dh;
                int best = 0;
                for (int k = 1; k < 16; k++)
                    if (fabsf(ts_kvalues_mxfp4[k] - v) < fabsf(ts_kvalues_mxfp4[best] - v)) best = k;
                q[j] = best;
            }
            for (int j = 0; j < 16; j++) b->qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            break;
        }
        default: break;
        }
    }
}

/* K-quants: per 16 (or 32) elements a scale (and min) chosen from min/max, the
 * sub-block scales quantized against the super-block maximum. */
static void quant_k(ts_type t, const float *x, uint8_t *out, int64_t n) {
    uint32_t bytes = ts_type_get(t)->block_bytes;
    _Alignas(8) uint8_t dst[256];
    for (int64_t i = 0; i < n / TS_QK_K; i++, x += TS_QK_K, out += bytes, memcpy(out - bytes, dst, bytes)) {
        if (t == TS_TYPE_Q6_K || t == TS_TYPE_Q3_K) {
            int lv = t == TS_TYPE_Q6_K ? 32 : 4; /* q in [-lv, lv-1] */
            float sc[16], maxsc = 0, maxabs = 0;
            for (int j = 0; j < 16; j++) {
                float am = 0, vm = 0;
                for (int l = 0; l < 16; l++)
                    if (fabsf(x[16 * j + l]) > am) { am = fabsf(x[16 * j + l]); vm = x[16 * j + l]; }
                sc[j] = vm / (float)-lv;
                if (fabsf(sc[j]) > maxabs) { maxabs = fabsf(sc[j]); maxsc = sc[j]; }
            }
            int slv = t == TS_TYPE_Q6_K ? 128 : 32;
            float d = maxsc / (float)-slv, id = d != 0 ? 1.0f / d : 0;
            uint16_t dh = ts_f32_to_f16(d);
            float dd = ts_f16_to_f32(dh);
            int isc[16], q[256];
            for (int j = 0; j < 16; j++) {
                isc[j] = clampi(rne(sc[j] * id), -slv, slv - 1);
                float dl = dd * (float)isc[j];
                float idl = dl != 0 ? 1.0f / dl : 0;
                for (int l = 0; l < 16; l++) q[16 * j + l] = clampi(rne(x[16 * j + l] * idl), -lv, lv - 1) + lv;
            }
            if (t == TS_TYPE_Q6_K) {
                ts_block_q6_K *b = (ts_block_q6_K *)dst;
                memset(b, 0, sizeof *b);
                b->d = dh;
                for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)isc[j];
                for (int h = 0; h < 2; h++)
                    for (int s = 0; s < 4; s++)
                        for (int l = 0; l < 32; l++) {
                            int v = q[h * 128 + s * 32 + l];
                            int qi = h * 64 + (s & 1) * 32 + l;
                            b->ql[qi] |= (uint8_t)((v & 0xf) << (s < 2 ? 0 : 4));
                            b->qh[h * 32 + l] |= (uint8_t)((v >> 4) << (2 * s));
                        }
            } else {
                ts_block_q3_K *b = (ts_block_q3_K *)dst;
                memset(b, 0, sizeof *b);
                b->d = dh;
                for (int j = 0; j < 16; j++) {
                    int u = isc[j] + 32;
                    if (j < 8) b->scales[j] |= (uint8_t)(u & 0xf);
                    else b->scales[j - 8] |= (uint8_t)((u & 0xf) << 4);
                    b->scales[8 + (j & 3)] |= (uint8_t)((u >> 4) << (2 * (j >> 2)));
                }
                for (int h = 0; h < 2; h++)
                    for (int s = 0; s < 4; s++)
                        for (int l = 0; l < 32; l++) {
                            int v = q[h * 128 + s * 32 + l]; /* 0..7: low 2 bits + high bit */
                            b->qs[h * 32 + l] |= (uint8_t)((v & 3) << (2 * s));
                            b->hmask[l] |= (uint8_t)(((v >> 2) & 1) << (h * 4 + s));
                        }
            }
            continue;
        }
        /* asymmetric: Q2_K (16 x 16, 4-bit scale/min), Q4_K / Q5_K (8 x 32, 6-bit) */
        int sub = t == TS_TYPE_Q2_K ? 16 : 32, nsub = 256 / sub;
        int lv = t == TS_TYPE_Q2_K ? 3 : t == TS_TYPE_Q4_K ? 15 : 31;
        int slv = t == TS_TYPE_Q2_K ? 15 : 63;
        float sc[16], mn[16], maxsc = 0, maxmn = 0;
        for (int j = 0; j < nsub; j++) {
            float lo = x[sub * j], hi = x[sub * j];
            for (int l = 0; l < sub; l++) {
                lo = fminf(lo, x[sub * j + l]);
                hi = fmaxf(hi, x[sub * j + l]);
            }
            if (lo > 0) lo = 0;
            sc[j] = (hi - lo) / (float)lv;
            mn[j] = -lo;
            maxsc = fmaxf(maxsc, sc[j]);
            maxmn = fmaxf(maxmn, mn[j]);
        }
        uint16_t dh = ts_f32_to_f16(maxsc / (float)slv), mh = ts_f32_to_f16(maxmn / (float)slv);
        float dd = ts_f16_to_f32(dh), dm = ts_f16_to_f32(mh);
        int isc[16], imn[16], q[256];
        for (int j = 0; j < nsub; j++) {
            isc[j] = dd != 0 ? clampi(rne(sc[j] / dd), 0, slv) : 0;
            imn[j] = dm != 0 ? clampi(rne(mn[j] / dm), 0, slv) : 0;
            float dl = dd * (float)isc[j], ml = dm * (float)imn[j];
            for (int l = 0; l < sub; l++) q[sub * j + l] = dl != 0 ? clampi(rne((x[sub * j + l] + ml) / dl), 0, lv) : 0;
        }
        if (t == TS_TYPE_Q2_K) {
            ts_block_q2_K *b = (ts_block_q2_K *)dst;
            memset(b, 0, sizeof *b);
            b->d = dh;
            b->dmin = mh;
            for (int j = 0; j < 16; j++) b->scales[j] = (uint8_t)(isc[j] | (imn[j] << 4));
            for (int h = 0; h < 2; h++)
                for (int s = 0; s < 4; s++)
                    for (int l = 0; l < 32; l++) b->qs[h * 32 + l] |= (uint8_t)(q[h * 128 + s * 32 + l] << (2 * s));
        } else {
            uint8_t *scales, *qs, *qh = NULL;
            if (t == TS_TYPE_Q4_K) {
                ts_block_q4_K *b = (ts_block_q4_K *)dst;
                memset(b, 0, sizeof *b);
                b->d = dh;
                b->dmin = mh;
                scales = b->scales;
                qs = b->qs;
            } else {
                ts_block_q5_K *b = (ts_block_q5_K *)dst;
                memset(b, 0, sizeof *b);
                b->d = dh;
                b->dmin = mh;
                scales = b->scales;
                qs = b->qs;
                qh = b->qh;
            }
            for (int j = 0; j < 8; j++) {
                if (j < 4) {
                    scales[j] = (uint8_t)isc[j];
                    scales[j + 4] = (uint8_t)imn[j];
                } else {
                    scales[j + 4] = (uint8_t)((isc[j] & 0xf) | ((imn[j] & 0xf) << 4));
                    scales[j - 4] |= (uint8_t)((isc[j] >> 4) << 6);
                    scales[j] |= (uint8_t)((imn[j] >> 4) << 6);
                }
            }
            for (int g = 0; g < 4; g++)
                for (int l = 0; l < 32; l++) {
                    int v0 = q[g * 64 + l], v1 = q[g * 64 + 32 + l];
                    qs[g * 32 + l] = (uint8_t)((v0 & 0xf) | ((v1 & 0xf) << 4));
                    if (qh) qh[l] |= (uint8_t)(((v0 >> 4) << (2 * g)) | ((v1 >> 4) << (2 * g + 1)));
                }
        }
    }
}

void ts_quantize_row_ref(ts_type type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case TS_TYPE_F32: quant_f32(src, dst, n); return;
    case TS_TYPE_F16: quant_f16(src, dst, n); return;
    case TS_TYPE_BF16: quant_bf16(src, dst, n); return;
    case TS_TYPE_Q8_0: quant_q8_0(src, dst, n); return;
    case TS_TYPE_Q8_K: quant_q8_K(src, dst, n); return;
    default: break;
    }
    if (is_small(type)) quant_small(type, src, dst, n);
    else if (kunpack_for(type)) quant_k(type, src, dst, n);
}

/* ------------------------------------------------------------------ */
/* dot products                                                        */

static float dot_f32(int64_t n, const void *w, const void *x) {
    const uint8_t *a = w, *b = x;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        float u, v;
        memcpy(&u, a + 4 * i, 4);
        memcpy(&v, b + 4 * i, 4);
        s += (double)u * v;
    }
    return (float)s;
}

static float dot_h16(int64_t n, const void *w, const void *x, float (*cv)(uint16_t)) {
    const uint8_t *a = w, *b = x;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        float v;
        memcpy(&h, a + 2 * i, 2);
        memcpy(&v, b + 4 * i, 4);
        s += (double)cv(h) * v;
    }
    return (float)s;
}
static float dot_f16(int64_t n, const void *w, const void *x) { return dot_h16(n, w, x, ts_f16_to_f32); }
static float dot_bf16(int64_t n, const void *w, const void *x) { return dot_h16(n, w, x, ts_bf16_to_f32); }

/* block: (d_w*d_x) * sum(q*qx) [+ m_w*d_x*sum(qx)] */
static float dot_small(ts_type t, int64_t n, const void *w, const void *x) {
    uint32_t bytes = ts_type_get(t)->block_bytes;
    const uint8_t *pw = w;
    const uint8_t *px = x;
    double acc = 0;
    sblock s;
    for (int64_t i = 0; i < n / TS_QK; i++) {
        ts_block_q8_0 xb;
        memcpy(&xb, px + i * sizeof xb, sizeof xb);
        unpack_small(t, pw + i * bytes, &s);
        int sumi = 0, sumx = 0;
        for (int j = 0; j < TS_QK; j++) {
            sumi += s.q[j] * xb.qs[j];
            sumx += xb.qs[j];
        }
        float dx = ts_f16_to_f32(xb.d);
        acc += (double)(s.d * dx) * sumi;
        if (t == TS_TYPE_Q4_1 || t == TS_TYPE_Q5_1) acc += (double)(s.m * dx) * sumx;
    }
    return (float)acc;
}

/* super-block: d_w*d_x * sum_j scale_j*sum(q*qx) - dmin_w*d_x * sum_j min_j*bsum_j */
static float dot_k(ts_type t, int64_t n, const void *w, const void *x) {
    kunpack_fn un = kunpack_for(t);
    uint32_t bytes = ts_type_get(t)->block_bytes;
    const uint8_t *pw = w, *px = x;
    double acc = 0;
    kblock k;
    for (int64_t i = 0; i < n / TS_QK_K; i++) {
        ts_block_q8_K xb;
        memcpy(&xb, px + i * sizeof xb, sizeof xb);
        un(pw + i * bytes, &k);
        int64_t sumi = 0, summ = 0;
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += k.q[16 * j + l] * xb.qs[16 * j + l];
            sumi += (int64_t)k.scale[j] * s;
            summ += (int64_t)k.min[j] * xb.bsums[j];
        }
        acc += (double)(k.d * xb.d) * (double)sumi - (double)(k.dmin * xb.d) * (double)summ;
    }
    return (float)acc;
}

#define SMALL_DOT(T)                                                                                  \
    static float dot_##T(int64_t n, const void *w, const void *x) { return dot_small(TS_TYPE_##T, n, w, x); }
#define K_DOT(T) \
    static float dot_##T(int64_t n, const void *w, const void *x) { return dot_k(TS_TYPE_##T, n, w, x); }
SMALL_DOT(Q4_0)
SMALL_DOT(Q4_1)
SMALL_DOT(Q5_0)
SMALL_DOT(Q5_1)
SMALL_DOT(Q8_0)
SMALL_DOT(IQ4_NL)
SMALL_DOT(MXFP4)
K_DOT(Q2_K)
K_DOT(Q3_K)
K_DOT(Q4_K)
K_DOT(Q5_K)
K_DOT(Q6_K)

static const ts_q_dot_fn ref_dots[TS_TYPE_COUNT] = {
    [TS_TYPE_F32] = dot_f32, [TS_TYPE_F16] = dot_f16, [TS_TYPE_BF16] = dot_bf16,
    [TS_TYPE_Q4_0] = dot_Q4_0, [TS_TYPE_Q4_1] = dot_Q4_1, [TS_TYPE_Q5_0] = dot_Q5_0,
    [TS_TYPE_Q5_1] = dot_Q5_1, [TS_TYPE_Q8_0] = dot_Q8_0, [TS_TYPE_IQ4_NL] = dot_IQ4_NL,
    [TS_TYPE_MXFP4] = dot_MXFP4, [TS_TYPE_Q2_K] = dot_Q2_K, [TS_TYPE_Q3_K] = dot_Q3_K,
    [TS_TYPE_Q4_K] = dot_Q4_K, [TS_TYPE_Q5_K] = dot_Q5_K, [TS_TYPE_Q6_K] = dot_Q6_K,
};

float ts_vec_dot_ref(ts_type wtype, int64_t n, const void *w, const void *x) {
    if (wtype >= TS_TYPE_COUNT || !ref_dots[wtype]) return 0;
    return ref_dots[wtype](n, w, x);
}

/* ------------------------------------------------------------------ */

#define DQ_SMALL(T) \
    static void dq_##T(const void *s, float *d, int64_t n) { dequant_small(TS_TYPE_##T, s, d, n / TS_QK); }
#define DQ_K(T) \
    static void dq_##T(const void *s, float *d, int64_t n) { dequant_k(TS_TYPE_##T, s, d, n / TS_QK_K); }
DQ_SMALL(Q4_0)
DQ_SMALL(Q4_1)
DQ_SMALL(Q5_0)
DQ_SMALL(Q5_1)
DQ_SMALL(Q8_0)
DQ_SMALL(IQ4_NL)
DQ_SMALL(MXFP4)
DQ_K(Q2_K)
DQ_K(Q3_K)
DQ_K(Q4_K)
DQ_K(Q5_K)
DQ_K(Q6_K)

#define QW_SMALL(T) \
    static void qw_##T(const float *s, void *d, int64_t n) { quant_small(TS_TYPE_##T, s, d, n); }
#define QW_K(T) \
    static void qw_##T(const float *s, void *d, int64_t n) { quant_k(TS_TYPE_##T, s, d, n); }
QW_SMALL(Q4_0)
QW_SMALL(Q4_1)
QW_SMALL(Q5_0)
QW_SMALL(Q5_1)
QW_SMALL(IQ4_NL)
QW_SMALL(MXFP4)
QW_K(Q2_K)
QW_K(Q3_K)
QW_K(Q4_K)
QW_K(Q5_K)
QW_K(Q6_K)

void ts_q_fill_ref(ts_q_kernels *k) {
    memset(k, 0, sizeof *k);
#define ALL(T) k->dequant[TS_TYPE_##T] = dq_##T
    ALL(Q4_0); ALL(Q4_1); ALL(Q5_0); ALL(Q5_1); ALL(Q8_0); ALL(IQ4_NL); ALL(MXFP4);
    ALL(Q2_K); ALL(Q3_K); ALL(Q4_K); ALL(Q5_K); ALL(Q6_K);
#undef ALL
#define QW(T) k->quantize[TS_TYPE_##T] = qw_##T
    QW(Q4_0); QW(Q4_1); QW(Q5_0); QW(Q5_1); QW(IQ4_NL); QW(MXFP4);
    QW(Q2_K); QW(Q3_K); QW(Q4_K); QW(Q5_K); QW(Q6_K);
#undef QW
    memcpy(k->dot, ref_dots, sizeof k->dot);
    k->dequant[TS_TYPE_F32] = dequant_f32;
    k->dequant[TS_TYPE_F16] = dequant_f16;
    k->dequant[TS_TYPE_BF16] = dequant_bf16;
    k->dequant[TS_TYPE_Q8_K] = dequant_q8_K;
    k->quantize[TS_TYPE_F32] = quant_f32;
    k->quantize[TS_TYPE_F16] = quant_f16;
    k->quantize[TS_TYPE_BF16] = quant_bf16;
    k->quantize[TS_TYPE_Q8_0] = quant_q8_0;
    k->quantize[TS_TYPE_Q8_K] = quant_q8_K;
}
