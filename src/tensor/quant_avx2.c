/* AVX2 (+FMA, F16C) kernels: entered only after runtime detection (quant.c).
 *
 * Shape of every quantized dot: the weight block is decoded to int8 lanes
 * once, multiplied against the activation's int8 quants with
 * maddubs (u8 x s8 -> pairs of i16) and madd (-> i32), so each block's sum
 * is exact; only the per-block scale products are float. Each kernel takes
 * up to TS_Q_MAXCOLS activation columns so the tile entry point decodes a
 * weight block once for several tokens; the single dot is the same code with
 * one column (inlined with a constant, so the column loop disappears).
 *
 * int16 saturation: maddubs adds two u8*s8 products. Unsigned operands here
 * are at most 63 (Q6_K) or |w| <= 128 via the sign trick, and activations are
 * in [-127, 127] (partner contract), so |pair| <= 2*128*127 < 32767. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define KQ_VNNI 0
#define KQ_FN static
#include "tensor/quant_x86.h"

INLINE int hsum_i32_8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 32 signed w x 32 signed x -> 8 x i32, via |w| (u8) * sign(x, w). */
INLINE __m256i dot_ss(__m256i w, __m256i x) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
/* 32 unsigned w (<= 127) x 32 signed x -> 8 x i32 */
INLINE __m256i dot_us(__m256i w, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

/* 16 packed nibbles -> 32 bytes: low nibbles in bytes 0..15, high in 16..31 */
INLINE __m256i nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, 0xff where the bit is set (bit i -> byte i) */
INLINE __m256i bits32(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    __m256i v = _mm256_set1_epi32((int)u);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    v = _mm256_shuffle_epi8(v, shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* ------------------------------------------------------------------ */
/* 32-element quants against Q8_0                                      */

/* Decoded block: w int8 (signed unless has_min), d, m. */
typedef struct {
    __m256i q;
    float d, m;
} sdec;

INLINE sdec dec_q4_0(const uint8_t *p) {
    sdec r = {_mm256_sub_epi8(nibbles32(p + 2), _mm256_set1_epi8(8)), h2f(p), 0};
    return r;
}
INLINE sdec dec_q4_1(const uint8_t *p) {
    sdec r = {nibbles32(p + 4), h2f(p), h2f(p + 2)};
    return r;
}
INLINE sdec dec_q5_0(const uint8_t *p) {
    /* nibble | 0xf0 where the high bit is clear == nibble + 16*h - 16 as int8 */
    __m256i hi = _mm256_andnot_si256(bits32(p + 2), _mm256_set1_epi8((char)0xf0));
    sdec r = {_mm256_or_si256(nibbles32(p + 6), hi), h2f(p), 0};
    return r;
}
INLINE sdec dec_q5_1(const uint8_t *p) {
    __m256i hi = _mm256_and_si256(bits32(p + 4), _mm256_set1_epi8(0x10));
    sdec r = {_mm256_or_si256(nibbles32(p + 8), hi), h2f(p), h2f(p + 2)};
    return r;
}
INLINE sdec dec_q8_0(const uint8_t *p) {
    sdec r = {loadu(p + 2), h2f(p), 0};
    return r;
}
INLINE sdec dec_iq4_nl(const uint8_t *p) {
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_kvalues_iq4nl));
    sdec r = {_mm256_shuffle_epi8(tab, nibbles32(p + 2)), h2f(p), 0};
    return r;
}
INLINE sdec dec_mxfp4(const uint8_t *p) {
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_kvalues_mxfp4));
    sdec r = {_mm256_shuffle_epi8(tab, nibbles32(p + 1)), ts_e8m0_half_to_f32(p[0]), 0};
    return r;
}

/* One weight row against nc Q8_0 rows. Two blocks per step for ILP. */
#define SMALL_KERNEL(NAME, DEC, BYTES, HAS_MIN)                                                                  \
    INLINE void NAME##_k(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        const uint8_t *pw = w, *px = x;                                                                       \
        __m256 acc[TS_Q_MAXCOLS], acc2[TS_Q_MAXCOLS];                                                         \
        for (int c = 0; c < nc; c++) acc[c] = acc2[c] = _mm256_setzero_ps();                                   \
        int64_t nb = n / 32, i = 0;                                                                           \
        for (; i + 1 < nb; i += 2) {                                                                          \
            sdec a = DEC(pw + i * BYTES), b = DEC(pw + (i + 1) * BYTES);                                      \
            for (int c = 0; c < nc; c++) {                                                                    \
                const uint8_t *xa = px + c * xs + i * 34, *xb = xa + 34;                                      \
                __m256i qa = loadu(xa + 2), qb = loadu(xb + 2);                                               \
                float da = h2f(xa), db = h2f(xb);                                                             \
                if (HAS_MIN) {                                                                                \
                    __m256i sa = dot_us(a.q, qa), sb = dot_us(b.q, qb);                                       \
                    __m256i ma = dot_ss(_mm256_set1_epi8(1), qa), mb = dot_ss(_mm256_set1_epi8(1), qb);      \
                    acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a.d * da), _mm256_cvtepi32_ps(sa), acc[c]);       \
                    acc2[c] = _mm256_fmadd_ps(_mm256_set1_ps(b.d * db), _mm256_cvtepi32_ps(sb), acc2[c]);     \
                    acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a.m * da), _mm256_cvtepi32_ps(ma), acc[c]);       \
                    acc2[c] = _mm256_fmadd_ps(_mm256_set1_ps(b.m * db), _mm256_cvtepi32_ps(mb), acc2[c]);     \
                } else {                                                                                      \
                    acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a.d * da), _mm256_cvtepi32_ps(dot_ss(a.q, qa)), acc[c]); \
                    acc2[c] = _mm256_fmadd_ps(_mm256_set1_ps(b.d * db), _mm256_cvtepi32_ps(dot_ss(b.q, qb)), acc2[c]); \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
        for (; i < nb; i++) {                                                                                 \
            sdec a = DEC(pw + i * BYTES);                                                                     \
            for (int c = 0; c < nc; c++) {                                                                    \
                const uint8_t *xa = px + c * xs + i * 34;                                                     \
                __m256i qa = loadu(xa + 2);                                                                   \
                float da = h2f(xa);                                                                           \
                if (HAS_MIN) {                                                                                \
                    acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a.d * da), _mm256_cvtepi32_ps(dot_us(a.q, qa)), acc[c]); \
                    acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a.m * da),                                        \
                                             _mm256_cvtepi32_ps(dot_ss(_mm256_set1_epi8(1), qa)), acc[c]);    \
                } else {                                                                                      \
                    acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a.d * da), _mm256_cvtepi32_ps(dot_ss(a.q, qa)), acc[c]); \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
        for (int c = 0; c < nc; c++) out[c * os] = hsum8(_mm256_add_ps(acc[c], acc2[c]));                      \
    }                                                                                                         \
    static float NAME##_dot(int64_t n, const void *w, const void *x) {                                        \
        float r;                                                                                              \
        NAME##_k(n, w, x, 0, 1, &r, 0);                                                                       \
        return r;                                                                                             \
    }                                                                                                         \
    static void NAME##_dotc(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        NAME##_k(n, w, x, xs, nc, out, os);                                                                   \
    }

SMALL_KERNEL(q4_0, dec_q4_0, 18, 0)
SMALL_KERNEL(q4_1, dec_q4_1, 20, 1)
SMALL_KERNEL(q5_0, dec_q5_0, 22, 0)
SMALL_KERNEL(q5_1, dec_q5_1, 24, 1)
SMALL_KERNEL(q8_0, dec_q8_0, 34, 0)
SMALL_KERNEL(iq4_nl, dec_iq4_nl, 18, 0)
SMALL_KERNEL(mxfp4, dec_mxfp4, 17, 0)

/* Matrix entry points for the 32-element quants. The activation side of each
 * Q8_0 block (its f16 scale, and for Q4_1/Q5_1 the scaled quant sum
 * dx*sum(q), which replaces the min term's extra multiply) is computed once
 * per call into a stack buffer and shared by every weight row, so a block
 * costs the weight decode, maddubs+madd per column, and one float
 * conversion + FMA per column. The weight's d (and m) come from one 64-bit
 * load + cvtph (lanes beyond d/m are junk and never used).
 * Long rows are processed in segments of SB_SEG blocks; later segments add. */
#define SB_SEG 512

/* How a type's quants meet the activation: SB_SIGNED (int8 weights, sign
 * trick), SB_MIN (unsigned, plus m*dx*sum(q)) or SB_OFF (unsigned q_u with
 * value q_u - off: the integer sum drops off*sum(q), exactly). */
#define SB_SIGNED 0
#define SB_MIN 1
#define SB_OFF 2

/* xsc[2b] = dx_b; xsc[2b+1] = dx_b * sum(q_b) (SB_MIN) or the int32
 * off * sum(q_b) (SB_OFF) */
INLINE void sb_prep(const uint8_t *x, int64_t nb, float *xsc, int mode, int off) {
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = x + 34 * b;
        float dx = h2f(p);
        xsc[2 * b] = dx;
        xsc[2 * b + 1] = 0;
        if (mode != SB_SIGNED) {
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), loadu(p + 2)), _mm256_set1_epi16(1));
            int32_t is = hsum_i32_8(s);
            if (mode == SB_MIN) xsc[2 * b + 1] = dx * (float)is;
            else is *= off, memcpy(xsc + 2 * b + 1, &is, 4);
        }
    }
}

INLINE __m128 wsc_e8m0(const uint8_t *p) {
    uint32_t e = p[0];
    return _mm_castsi128_ps(_mm_cvtsi32_si128((int)(e < 2 ? 0x00200000u << e : (e - 1) << 23)));
}
/* weight quants of a block as int8 (signed) or uint8 (Q4_1/Q5_1) */
INLINE __m256i wq_q4_0(const uint8_t *p) { return nibbles32(p + 2); } /* q_u, off 8 */
INLINE __m256i wq_q4_1(const uint8_t *p) { return nibbles32(p + 4); }
INLINE __m256i wq_q5_0(const uint8_t *p) { /* q_u, off 16 */
    return _mm256_or_si256(nibbles32(p + 6), _mm256_and_si256(bits32(p + 2), _mm256_set1_epi8(0x10)));
}
INLINE __m256i wq_q5_1(const uint8_t *p) {
    return _mm256_or_si256(nibbles32(p + 8), _mm256_and_si256(bits32(p + 4), _mm256_set1_epi8(0x10)));
}
INLINE __m256i wq_q8_0(const uint8_t *p) { return loadu(p + 2); }
INLINE __m256i wq_iq4_nl(const uint8_t *p) {
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_kvalues_iq4nl));
    return _mm256_shuffle_epi8(tab, nibbles32(p + 2));
}
INLINE __m256i wq_mxfp4(const uint8_t *p) { /* codebook + 12 (>= 0), off 12 */
    const __m256i tab = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ts_kvalues_mxfp4)),
                                        _mm256_set1_epi8(12));
    return _mm256_shuffle_epi8(tab, nibbles32(p + 1));
}

/* one block, column c: integer dot, then acc += (d*dx) * isum; accm lane 1 += m*dx*sum(q) */
#define SB_COL(c, ACC, b)                                                                                     \
    if (NC_ > (c)) {                                                                                          \
        __m256i xq_ = loadu(xr##c + 34 * (b) + 2);                                                            \
        const float *xs_ = xsc + 2 * (c) * SB_SEG + 2 * (b);                                                  \
        /* lane 1 only where it holds floats: int bits there would be denormals (slow) */                     \
        __m128 p_ = MODE_ == SB_MIN ? _mm_mul_ps(ws_, _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)xs_))) \
                                    : _mm_mul_ss(ws_, _mm_load_ss(xs_));                                      \
        __m256i i_ = MODE_ == SB_SIGNED ? _mm256_maddubs_epi16(wa_, _mm256_sign_epi8(xq_, wq_))               \
                                        : _mm256_maddubs_epi16(wq_, xq_);                                     \
        i_ = _mm256_madd_epi16(i_, _mm256_set1_epi16(1));                                                     \
        if (MODE_ == SB_OFF) {                                                                                \
            int32_t o_;                                                                                       \
            memcpy(&o_, xs_ + 1, 4);                                                                          \
            i_ = _mm256_sub_epi32(i_, _mm256_castsi128_si256(_mm_cvtsi32_si128(o_)));                         \
        }                                                                                                     \
        ACC##c = _mm256_fmadd_ps(_mm256_broadcastss_ps(p_), _mm256_cvtepi32_ps(i_), ACC##c);                 \
        if (MODE_ == SB_MIN) accm##c = _mm_add_ps(accm##c, p_);                                               \
    }
#define SB_BLOCK(ACC, b, WQ, WSC)                                                                                    \
    do {                                                                                                      \
        const uint8_t *wb_ = wr + (b) * BYTES;                                                                \
        __m256i wq_ = WQ(wb_);                                                                                \
        __m256i wa_ = MODE_ == SB_SIGNED ? _mm256_sign_epi8(wq_, wq_) : wq_;                                            \
        __m128 ws_ = WSC(wb_);                                                                                \
        SB_COL(0, ACC, b) SB_COL(1, ACC, b) SB_COL(2, ACC, b) SB_COL(3, ACC, b)                               \
    } while (0)
#define SB_OUT(c)                                                                                             \
    if (NC_ > (c)) {                                                                                          \
        float v_ = hsum8(_mm256_add_ps(acc##c, bcc##c));                                                      \
        if (MODE_ == SB_MIN) v_ += _mm_cvtss_f32(_mm_movehdup_ps(accm##c));                                          \
        float *o_ = out + (c) * os + r;                                                                       \
        *o_ = add ? *o_ + v_ : v_;                                                                            \
    }

/* rows r of one segment (nb blocks) against NC columns whose scales are in xsc */
#define SB_SEGK(NAME, WQ_, WSC_, BYTES_, MODE, NC)                                                         \
    static void NAME##_seg##NC(int64_t nb, const uint8_t *w, uint64_t ws, int64_t nrows, const uint8_t *x,     \
                               uint64_t xs, const float *xsc, float *out, int64_t os, int add) {              \
        enum { NC_ = NC, BYTES = BYTES_ };                                                                   \
        const int MODE_ = MODE;                                                \
        const uint8_t *xr0 = x, *xr1 = x + xs, *xr2 = x + 2 * xs, *xr3 = x + 3 * xs;                          \
        (void)xr1, (void)xr2, (void)xr3;                                                                      \
        for (int64_t r = 0; r < nrows; r++) {                                                                 \
            const uint8_t *wr = w + r * ws;                                                                   \
            __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;                         \
            __m256 bcc0 = acc0, bcc1 = acc0, bcc2 = acc0, bcc3 = acc0;                                        \
            __m128 accm0 = _mm_setzero_ps(), accm1 = accm0, accm2 = accm0, accm3 = accm0;                     \
            int64_t b = 0;                                                                                    \
            if (NC_ == 1) /* two blocks per step: the FMA chain is the limit with one column */              \
                for (; b + 1 < nb; b += 2) {                                                                  \
                    SB_BLOCK(acc, b, WQ_, WSC_);                                                                         \
                    SB_BLOCK(bcc, b + 1, WQ_, WSC_);                                                                     \
                }                                                                                             \
            for (; b < nb; b++) SB_BLOCK(acc, b, WQ_, WSC_);                                                             \
            SB_OUT(0) SB_OUT(1) SB_OUT(2) SB_OUT(3)                                                           \
        }                                                                                                     \
    }
#define SB_KERNEL(NAME, WQF, WSCF, BYTES_, MODE, OFF)                                                           \
    SB_SEGK(NAME, WQF, WSCF, BYTES_, MODE, 1)                                                                 \
    SB_SEGK(NAME, WQF, WSCF, BYTES_, MODE, 2)                                                                 \
    SB_SEGK(NAME, WQF, WSCF, BYTES_, MODE, 3)                                                                 \
    SB_SEGK(NAME, WQF, WSCF, BYTES_, MODE, 4)                                                                 \
    static void NAME##_rows(int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, float *out) { \
        float xsc[2 * SB_SEG];                                                                                \
        int64_t nb = n / 32;                                                                                  \
        for (int64_t b0 = 0; b0 < nb; b0 += SB_SEG) {                                                         \
            int64_t m = nb - b0 < SB_SEG ? nb - b0 : SB_SEG;                                                  \
            sb_prep((const uint8_t *)x + 34 * b0, m, xsc, MODE, OFF);                                               \
            NAME##_seg1(m, (const uint8_t *)w + b0 * BYTES_, ws, nrows, (const uint8_t *)x + 34 * b0, 0, xsc, out, 0, b0 > 0); \
        }                                                                                                     \
    }                                                                                                         \
    static void NAME##_tile(int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,  \
                            int64_t ncols, float *out, int64_t os) {                                          \
        float xsc[4 * 2 * SB_SEG];                                                                            \
        int64_t nb = n / 32;                                                                                  \
        for (int64_t c0 = 0; c0 < ncols; c0 += 4) {                                                           \
            int nc = (int)(ncols - c0 < 4 ? ncols - c0 : 4);                                                  \
            const uint8_t *xc = (const uint8_t *)x + c0 * xs;                                                 \
            float *oc = out + c0 * os;                                                                        \
            for (int64_t b0 = 0; b0 < nb; b0 += SB_SEG) {                                                     \
                int64_t m = nb - b0 < SB_SEG ? nb - b0 : SB_SEG;                                              \
                for (int c = 0; c < nc; c++) sb_prep(xc + c * xs + 34 * b0, m, xsc + 2 * SB_SEG * c, MODE, OFF); \
                const uint8_t *wb = (const uint8_t *)w + b0 * BYTES_, *xb = xc + 34 * b0;                     \
                switch (nc) {                                                                                 \
                case 1: NAME##_seg1(m, wb, ws, nrows, xb, xs, xsc, oc, os, b0 > 0); break;                    \
                case 2: NAME##_seg2(m, wb, ws, nrows, xb, xs, xsc, oc, os, b0 > 0); break;                    \
                case 3: NAME##_seg3(m, wb, ws, nrows, xb, xs, xsc, oc, os, b0 > 0); break;                    \
                default: NAME##_seg4(m, wb, ws, nrows, xb, xs, xsc, oc, os, b0 > 0); break;                   \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }

SB_KERNEL(sb_q4_0, wq_q4_0, wsc_f16, 18, SB_OFF, 8)
SB_KERNEL(sb_q4_1, wq_q4_1, wsc_f16, 20, SB_MIN, 0)
SB_KERNEL(sb_q5_0, wq_q5_0, wsc_f16, 22, SB_OFF, 16)
SB_KERNEL(sb_q5_1, wq_q5_1, wsc_f16, 24, SB_MIN, 0)
SB_KERNEL(sb_q8_0, wq_q8_0, wsc_f16, 34, SB_SIGNED, 0)
SB_KERNEL(sb_iq4_nl, wq_iq4_nl, wsc_f16, 18, SB_SIGNED, 0)
SB_KERNEL(sb_mxfp4, wq_mxfp4, wsc_e8m0, 17, SB_OFF, 12)

/* ------------------------------------------------------------------ */
/* K-quants against Q8_K: quant_kdot.h's kernels with the maddubs + madd step */

K_KERNEL(q2_K, Q2K, 84)
K_KERNEL(q3_K, Q3K, 110)
K_KERNEL(q4_K, Q4K, 144)
K_KERNEL(q5_K, Q5K, 176)
K_KERNEL(q6_K, Q6K, 210)

/* ------------------------------------------------------------------ */
/* float rows against F32                                              */

INLINE __m256 ld_f32(const uint8_t *p) { return _mm256_loadu_ps((const float *)p); }
INLINE __m256 ld_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
INLINE __m256 ld_bf16(const uint8_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

#define FLOAT_KERNEL(NAME, LD, ESZ, CONV)                                                                      \
    INLINE void NAME##_k(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        const uint8_t *pw = w, *px = x;                                                                       \
        __m256 a0[TS_Q_MAXCOLS], a1[TS_Q_MAXCOLS];                                                            \
        _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) a0[c] = a1[c] = _mm256_setzero_ps();              \
        int64_t i = 0;                                                                                        \
        for (; i + 16 <= n; i += 16) {                                                                        \
            __m256 w0 = LD(pw + i * ESZ), w1 = LD(pw + (i + 8) * ESZ);                                        \
            _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) {                                            \
                const uint8_t *xc = px + c * xs + i * 4;                                                      \
                a0[c] = _mm256_fmadd_ps(w0, ld_f32(xc), a0[c]);                                               \
                a1[c] = _mm256_fmadd_ps(w1, ld_f32(xc + 32), a1[c]);                                          \
            }                                                                                                 \
        }                                                                                                     \
        for (; i + 8 <= n; i += 8) {                                                                          \
            __m256 w0 = LD(pw + i * ESZ);                                                                     \
            _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++)                                              \
                a0[c] = _mm256_fmadd_ps(w0, ld_f32(px + c * xs + i * 4), a0[c]);                              \
        }                                                                                                     \
        for (int c = 0; c < nc; c++) {                                                                        \
            float s = hsum8(_mm256_add_ps(a0[c], a1[c]));                                                     \
            for (int64_t j = i; j < n; j++) {                                                                 \
                float xv;                                                                                     \
                memcpy(&xv, px + c * xs + j * 4, 4);                                                          \
                s += CONV(pw + j * ESZ) * xv;                                                                 \
            }                                                                                                 \
            out[c * os] = s;                                                                                  \
        }                                                                                                     \
    }                                                                                                         \
    static float NAME##_dot(int64_t n, const void *w, const void *x) {                                        \
        float r;                                                                                              \
        NAME##_k(n, w, x, 0, 1, &r, 0);                                                                       \
        return r;                                                                                             \
    }                                                                                                         \
    /* columns 4 at a time through the kernel inlined with a constant count, \
     * so its accumulators stay in registers (a variable count kept them on  \
     * the stack: the 30B-A3B's F32 router ran ~0.4 FMA a cycle); each       \
     * column's sum is the same, bit for bit */                              \
    static void NAME##_dotc(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        const uint8_t *px = x;                                                                                \
        int c = 0;                                                                                            \
        for (; c + 4 <= nc; c += 4) NAME##_k(n, w, px + c * xs, xs, 4, out + c * os, os);                     \
        switch (nc - c) {                                                                                     \
        case 3: NAME##_k(n, w, px + c * xs, xs, 3, out + c * os, os); break;                                  \
        case 2: NAME##_k(n, w, px + c * xs, xs, 2, out + c * os, os); break;                                  \
        case 1: NAME##_k(n, w, px + c * xs, xs, 1, out + c * os, os); break;                                  \
        default: break;                                                                                       \
        }                                                                                                     \
    }

INLINE float c_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
INLINE float c_f16(const uint8_t *p) { return h2f(p); }
INLINE float c_bf16(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return ts_bf16_to_f32(h); }

FLOAT_KERNEL(f32, ld_f32, 4, c_f32)
FLOAT_KERNEL(f16, ld_f16, 2, c_f16)
FLOAT_KERNEL(bf16, ld_bf16, 2, c_bf16)

/* ------------------------------------------------------------------ */
/* conversions and activation quantization                             */

static void dq_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ld_f16(p + 2 * i));
    for (; i < n; i++) dst[i] = h2f(p + 2 * i);
}
static void dq_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ld_bf16(p + 2 * i));
    for (; i < n; i++) dst[i] = c_bf16(p + 2 * i);
}
static void qz_f16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        uint16_t h = (uint16_t)_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
        memcpy(p + 2 * i, &h, 2);
    }
}

INLINE float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* round(v * s) to nearest even, clamped to [-127, 127], 32 floats -> 32 int8 */
INLINE __m256i quant32(const float *x, __m256 s) {
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), s));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), s));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), s));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), s));
    __m256i a = _mm256_packs_epi32(i0, i1), b = _mm256_packs_epi32(i2, i3);
    __m256i r = _mm256_packs_epi16(a, b);
    /* packs interleave lanes: restore element order */
    r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return _mm256_max_epi8(r, _mm256_set1_epi8(-127));
}

INLINE __m256 absmax32(const float *x, __m256 m) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < 32; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    return m;
}

static void qz_q8_0(const float *x, void *dst, int64_t n) {
    uint8_t *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 34) {
        float amax = hmax8(absmax32(x, _mm256_setzero_ps()));
        float d = amax / 127.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        uint16_t dh = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        memcpy(y, &dh, 2);
        _mm256_storeu_si256((__m256i *)(y + 2), quant32(x, _mm256_set1_ps(id)));
    }
}

static void qz_q8_K(const float *x, void *dst, int64_t n) {
    uint8_t *y = dst;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < 256; j += 32) m = absmax32(x + j, m);
        float amax = hmax8(m);
        ts_block_q8_K blk;
        if (amax == 0) {
            memset(&blk, 0, sizeof blk);
        } else {
            float iscale = 127.0f / amax;
            for (int j = 0; j < 256; j += 32) _mm256_storeu_si256((__m256i *)(blk.qs + j), quant32(x + j, _mm256_set1_ps(iscale)));
            for (int j = 0; j < 256; j += 32) {
                /* sums of 16: maddubs with ones gives pairs, madd gives quads, then pack */
                __m256i q = loadu(blk.qs + j);
                __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
                /* s: 8 x i32 sums of 4; add adjacent quads -> 16-sums at lanes 0,1 (low) and 4,5 (high) */
                __m256i t = _mm256_hadd_epi32(s, s);
                t = _mm256_hadd_epi32(t, t);
                blk.bsums[j / 16] = (int16_t)_mm256_extract_epi32(t, 0);
                blk.bsums[j / 16 + 1] = (int16_t)_mm256_extract_epi32(t, 4);
            }
            blk.d = 1.0f / iscale;
        }
        memcpy(y + i * sizeof blk, &blk, sizeof blk);
    }
}

void ts_q_fill_avx2(ts_q_kernels *k) {
#define SET(T, name) k->dot[TS_TYPE_##T] = name##_dot, k->dotc[TS_TYPE_##T] = name##_dotc
    SET(Q4_0, q4_0);
    SET(Q4_1, q4_1);
    SET(Q5_0, q5_0);
    SET(Q5_1, q5_1);
    SET(Q8_0, q8_0);
    SET(IQ4_NL, iq4_nl);
    SET(MXFP4, mxfp4);
    SET(Q2_K, q2_K);
    SET(Q3_K, q3_K);
    SET(Q4_K, q4_K);
    SET(Q5_K, q5_K);
    SET(Q6_K, q6_K);
    SET(F32, f32);
    SET(F16, f16);
    SET(BF16, bf16);
#undef SET
#define SETM(T, name) k->rows[TS_TYPE_##T] = name##_rows, k->tile[TS_TYPE_##T] = name##_tile
    SETM(Q4_0, sb_q4_0);
    SETM(Q4_1, sb_q4_1);
    SETM(Q5_0, sb_q5_0);
    SETM(Q5_1, sb_q5_1);
    SETM(Q8_0, sb_q8_0);
    SETM(IQ4_NL, sb_iq4_nl);
    SETM(MXFP4, sb_mxfp4);
#undef SETM
    k->dequant[TS_TYPE_F16] = dq_f16;
    k->dequant[TS_TYPE_BF16] = dq_bf16;
    k->quantize[TS_TYPE_F16] = qz_f16;
    k->quantize[TS_TYPE_Q8_0] = qz_q8_0;
    k->quantize[TS_TYPE_Q8_K] = qz_q8_K;
}
#endif
