/* experiment: Q4_K one-column dot variants on this core */
#define _GNU_SOURCE
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"
#include <immintrin.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
#define KQ_VNNI 1
#define KQ_FN static __attribute__((noinline))
#include "tensor/quant_x86.h"

K_KERNEL(vq4_K, Q4K, 144)

typedef void (*rows_fn)(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out);

static void base_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) vq4_K_k1(n, w + r * rs, x, 0, out + r, 0);
}

/* zmm: chunk pairs (2k low half, 2k+1 high half) */
static __attribute__((noinline)) void z_k1(int64_t n, const uint8_t *w, const uint8_t *x, float *out) {
    __m256 acc = _mm256_setzero_ps(), cc = acc;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i ctl[4];
    for (int k = 0; k < 4; k++)
        ctl[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32((int)(0x80808000u + 2 * k))),
                                    _mm256_set1_epi32((int)(0x80808000u + 2 * k + 1)), 1);
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *b = w + i * 144;
        ts_q_prefetch_ahead(b, 144);
        __m256i sc8, corr;
        k4_scales_vec(b + 4, &sc8, &corr);
        const __m512i sc = _mm512_broadcast_i64x4(sc8);
        const __m128 dd_ = wsc_f16(b);
        const uint8_t *xb = x + i * sizeof(ts_block_q8_K);
        __m512i s0 = _mm512_setzero_si512(), s1 = s0;
#define ZP(k, S)                                                                                               \
    {                                                                                                          \
        __m256i qv = loadu(b + 16 + 32 * (k));                                                                 \
        __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qv), _mm256_srli_epi16(qv, 4), 1), m4); \
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(xb + 4 + 64 * (k)));  \
        S = _mm512_dpwssd_epi32(S, p, _mm512_shuffle_epi8(sc, ctl[k]));                                       \
    }
        ZP(0, s0) ZP(1, s1) ZP(2, s0) ZP(3, s1)
        s0 = _mm512_add_epi32(s0, s1);
        __m256i si = _mm256_add_epi32(_mm512_castsi512_si256(s0), _mm512_extracti64x4_epi64(s0, 1));
        float dx_;
        memcpy(&dx_, xb, 4);
        const __m128 p_ = _mm_mul_ps(dd_, _mm_set1_ps(dx_));
        __m256i cv_ = _mm256_madd_epi16(corr, loadu(xb + offsetof(ts_block_q8_K, bsums)));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(p_), _mm256_cvtepi32_ps(si), acc);
        cc = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p_)), _mm256_cvtepi32_ps(cv_), cc);
    }
    *out = hsum8(_mm256_sub_ps(acc, cc));
}
static void z_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) z_k1(n, w + r * rs, x, out + r);
}

/* two rows interleaved, ymm, same per-row math as base */
static __m256i G_sc8, G_corr;
#define q4_blk(b, xb, a, c) q4_blkf(b, xb, a, c, 0)
INLINE void q4_blkf(const uint8_t *b, const uint8_t *xb, __m256 *acc, __m256 *cc, int fl) {
    __m256i sc8, corr;
    if (fl & 1) sc8 = G_sc8, corr = G_corr; else
    k4_scales_vec(b + 4, &sc8, &corr);
    const __m128 dd_ = wsc_f16(b);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, qv;
#define YP(j, S)                                                                                               \
    {                                                                                                          \
        __m256i q = KQ_NIBBLES(b + 16, j);                                                                     \
        S = _mm256_dpwssd_epi32(S, _mm256_dpbusd_epi32(zero_idiom256(), q, loadu(xb + 4 + 32 * (j))), chunk_scales8(sc8, j)); \
    }
    YP(0, s0) YP(1, s1) YP(2, s0) YP(3, s1) YP(4, s0) YP(5, s1) YP(6, s0) YP(7, s1)
    s0 = _mm256_add_epi32(s0, s1);
    if (fl & 2) { *acc = _mm256_add_ps(*acc, _mm256_castsi256_ps(s0)); return; }
    float dx_;
    memcpy(&dx_, xb, 4);
    const __m128 p_ = _mm_mul_ps(dd_, _mm_set1_ps(dx_));
    __m256i cv_ = _mm256_madd_epi16(corr, loadu(xb + offsetof(ts_block_q8_K, bsums)));
    *acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(p_), _mm256_cvtepi32_ps(s0), *acc);
    *cc = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p_)), _mm256_cvtepi32_ps(cv_), *cc);
}
static __attribute__((noinline)) void r2_k(int64_t n, const uint8_t *w0, const uint8_t *w1, const uint8_t *x, float *out) {
    __m256 a0 = _mm256_setzero_ps(), c0 = a0, a1 = a0, c1 = a0;
    for (int64_t i = 0; i < n / 256; i++) {
        ts_q_prefetch_ahead(w0 + i * 144, 144);
        ts_q_prefetch_ahead(w1 + i * 144, 144);
        const uint8_t *xb = x + i * sizeof(ts_block_q8_K);
        q4_blk(w0 + i * 144, xb, &a0, &c0);
        q4_blk(w1 + i * 144, xb, &a1, &c1);
    }
    out[0] = hsum8(_mm256_sub_ps(a0, c0));
    out[1] = hsum8(_mm256_sub_ps(a1, c1));
}
static void r2_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    int64_t r = 0;
    for (; r + 2 <= nrows; r += 2) r2_k(n, w + r * rs, w + (r + 1) * rs, x, out + r);
    for (; r < nrows; r++) vq4_K_k1(n, w + r * rs, x, 0, out + r, 0);
}
static int PF = 2048, PFL = 3;
INLINE void pf(const uint8_t *b) {
    if (PF <= 0) return;
    if (PFL == 3) for (int o = 0; o < 144; o += 64) __builtin_prefetch(b + PF + o, 0, 3);
    else if (PFL == 2) for (int o = 0; o < 144; o += 64) __builtin_prefetch(b + PF + o, 0, 2);
    else if (PFL == 5) for (int o = 0; o < 144; o += 64) __builtin_prefetch(b + PF + o, 0, 1);
    else if (PFL == 0) for (int o = 0; o < 144; o += 64) __builtin_prefetch(b + PF + o, 0, 0);
    else { /* one line per cache line crossed: only when a new line starts in this block */
        uintptr_t a = (uintptr_t)(b + PF), e = a + 144;
        for (uintptr_t l = (a + 63) & ~(uintptr_t)63; l < e; l += 64) __builtin_prefetch((const void *)l, 0, 3);
    }
}
/* one row via q4_blk (hand-written base: checks the harness) */
static __attribute__((noinline)) void h1_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) {
    __m256 a0 = _mm256_setzero_ps(), c0 = a0;
    for (int64_t i = 0; i < n / 256; i++) {
        pf(w + i * 144);
        q4_blk(w + i * 144, x + i * sizeof(ts_block_q8_K), &a0, &c0);
    }
    out[0] = hsum8(_mm256_sub_ps(a0, c0));
}
#define HV(NM, FL) static __attribute__((noinline)) void NM##_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) { \
    __m256 a0 = _mm256_setzero_ps(), c0 = a0; \
    for (int64_t i = 0; i < n / 256; i++) { pf(w + i * 144); q4_blkf(w + i * 144, x + i * sizeof(ts_block_q8_K), &a0, &c0, FL); } \
    out[0] = hsum8(_mm256_sub_ps(a0, c0)); } \
static void NM##_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) { \
    for (int64_t r = 0; r < nrows; r++) NM##_k(n, w + r * rs, x, out + r); }
HV(nohead, 1)
HV(nofin, 2)
HV(neither, 3)
INLINE void q4_blkp(const uint8_t *b, const uint8_t *xb, __m256 *acc, __m256 *cc) {
    __m256i sc8, corr;
    k4_scales_vec(b + 4, &sc8, &corr);
    const __m128 dd_ = wsc_f16(b);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, qv;
#define PP(j, S)                                                                                               \
    {                                                                                                          \
        __m256i qa = KQ_NIBBLES(b + 16, j);                                                                    \
        __m256i va = _mm256_dpbusd_epi32(zero_idiom256(), qa, loadu(xb + 4 + 32 * (j)));                       \
        __m256i qb = KQ_NIBBLES(b + 16, j + 1);                                                                \
        __m256i vb = _mm256_dpbusd_epi32(zero_idiom256(), qb, loadu(xb + 4 + 32 * (j + 1)));                   \
        const short c0 = (short)(0x8000 + (j)), c1 = (short)(0x8000 + (j) + 1);                               \
        __m256i sv = _mm256_shuffle_epi8(sc8, _mm256_setr_epi16(c0, c0, c0, c0, c1, c1, c1, c1, c0, c0, c0, c0, c1, c1, c1, c1)); \
        S = _mm256_dpwssd_epi32(S, _mm256_packs_epi32(va, vb), sv);                                           \
    }
    PP(0, s0) PP(2, s1) PP(4, s0) PP(6, s1)
    s0 = _mm256_add_epi32(s0, s1);
    float dx_;
    memcpy(&dx_, xb, 4);
    const __m128 p_ = _mm_mul_ps(dd_, _mm_set1_ps(dx_));
    __m256i cv_ = _mm256_madd_epi16(corr, loadu(xb + offsetof(ts_block_q8_K, bsums)));
    *acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(p_), _mm256_cvtepi32_ps(s0), *acc);
    *cc = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p_)), _mm256_cvtepi32_ps(cv_), *cc);
}
static __attribute__((noinline)) void pk_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) {
    __m256 a0 = _mm256_setzero_ps(), c0 = a0;
    for (int64_t i = 0; i < n / 256; i++) { pf(w + i * 144); q4_blkp(w + i * 144, x + i * sizeof(ts_block_q8_K), &a0, &c0); }
    out[0] = hsum8(_mm256_sub_ps(a0, c0));
}
static void pk_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) pk_k(n, w + r * rs, x, out + r);
}
/* head of two blocks in one ymm: same per-block values as k4_scales_vec */
INLINE void k4_scales_vec2(const uint8_t *qa, const uint8_t *qb, __m256i *ua, __m256i *ca, __m256i *ub, __m256i *cb) {
    const __m256i s = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)qa)), _mm_loadu_si128((const __m128i *)qb), 1);
    const __m256i p = _mm256_shuffle_epi8(s, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m256i h = _mm256_shuffle_epi8(s, _mm256_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(p, _mm256_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0, 63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
                                       _mm256_and_si256(_mm256_srli_epi16(p, 4), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m256i v = _mm256_or_si256(lo, _mm256_and_si256(_mm256_srli_epi16(h, 2), _mm256_set1_epi8(0x30)));
    *ua = _mm256_permute2x128_si256(v, v, 0x00);
    *ub = _mm256_permute2x128_si256(v, v, 0x11);
    const __m256i cc = _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1, 12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1);
    *ca = _mm256_shuffle_epi8(*ua, cc);
    *cb = _mm256_shuffle_epi8(*ub, cc);
}
#define BODY_Y(b, xb, sc8, corr, acc, cc) { \
    const __m128 dd_ = wsc_f16(b); \
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, qv; \
    YP(0, s0) YP(1, s1) YP(2, s0) YP(3, s1) YP(4, s0) YP(5, s1) YP(6, s0) YP(7, s1) \
    s0 = _mm256_add_epi32(s0, s1); FIN_(xb, s0, corr, acc, cc) }
#define BODY_P(b, xb, sc8, corr, acc, cc) { \
    const __m128 dd_ = wsc_f16(b); \
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, qv; \
    PP(0, s0) PP(2, s1) PP(4, s0) PP(6, s1) \
    s0 = _mm256_add_epi32(s0, s1); FIN_(xb, s0, corr, acc, cc) }
#define FIN_(xb, s0, corr, acc, cc) { float dx_; memcpy(&dx_, xb, 4); \
    const __m128 p_ = _mm_mul_ps(dd_, _mm_set1_ps(dx_)); \
    __m256i cv_ = _mm256_madd_epi16(corr, loadu(xb + offsetof(ts_block_q8_K, bsums))); \
    acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(p_), _mm256_cvtepi32_ps(s0), acc); \
    cc = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p_)), _mm256_cvtepi32_ps(cv_), cc); }
#define H2V(NM, BODY) static __attribute__((noinline)) void NM##_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) { \
    __m256 acc = _mm256_setzero_ps(), cc = acc; int64_t i = 0; \
    for (; i + 2 <= n / 256; i += 2) { \
        const uint8_t *b0 = w + i * 144, *b1 = b0 + 144, *x0 = x + i * sizeof(ts_block_q8_K), *x1 = x0 + sizeof(ts_block_q8_K); \
        pf(b0); pf(b1); \
        __m256i ua, ca, ub, cb; k4_scales_vec2(b0 + 4, b1 + 4, &ua, &ca, &ub, &cb); \
        { const uint8_t *b = b0, *xb = x0; __m256i sc8 = ua, corr = ca; BODY(b, xb, sc8, corr, acc, cc) } \
        { const uint8_t *b = b1, *xb = x1; __m256i sc8 = ub, corr = cb; BODY(b, xb, sc8, corr, acc, cc) } } \
    for (; i < n / 256; i++) { const uint8_t *b = w + i * 144, *xb = x + i * sizeof(ts_block_q8_K); __m256i sc8, corr; k4_scales_vec(b + 4, &sc8, &corr); BODY(b, xb, sc8, corr, acc, cc) } \
    out[0] = hsum8(_mm256_sub_ps(acc, cc)); } \
static void NM##_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) { \
    for (int64_t r = 0; r < nrows; r++) NM##_k(n, w + r * rs, x, out + r); }
H2V(h2, BODY_Y)
H2V(h2pk, BODY_P)
static void h1_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) h1_k(n, w + r * rs, x, out + r);
}

/* speed of light: dpbusd only (wrong result) */
static __attribute__((noinline)) void sol_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *b = w + i * 144, *xb = x + i * sizeof(ts_block_q8_K);
        pf(b);
        __m256i qv;
#define SP(j, S) { __m256i q = KQ_NIBBLES(b + 16, j); S = _mm256_dpbusd_epi32(S, q, loadu(xb + 4 + 32 * (j))); }
        SP(0, s0) SP(1, s1) SP(2, s0) SP(3, s1) SP(4, s0) SP(5, s1) SP(6, s0) SP(7, s1)
    }
    out[0] = hsum8(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)));
}
static void sol_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) sol_k(n, w + r * rs, x, out + r);
}

static __attribute__((noinline)) void read_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    (void)n; (void)x;
    const uint8_t *e = w + rs * nrows;
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (const uint8_t *p = w; p + 256 <= e; p += 256) {
        a = _mm512_add_epi32(a, _mm512_loadu_si512(p)); b = _mm512_add_epi32(b, _mm512_loadu_si512(p + 64));
        c = _mm512_add_epi32(c, _mm512_loadu_si512(p + 128)); d = _mm512_add_epi32(d, _mm512_loadu_si512(p + 192));
    }
    out[0] = (float)_mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d)));
}
static __attribute__((noinline)) void xs_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) {
    __m256 a0 = _mm256_setzero_ps(), c0 = a0;
    for (int64_t i = 0; i < n / 256; i++) {
        pf(w + i * 144);
        q4_blk(w + i * 144, x + (i % 14) * sizeof(ts_block_q8_K), &a0, &c0);
    }
    out[0] = hsum8(_mm256_sub_ps(a0, c0));
}
static void xs_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) xs_k(n, w + r * rs, x, out + r);
}
static int R2PF = 3; /* bit 0: prefetch row 0, bit 1: row 1 */
static __attribute__((noinline)) void r2b_k(int64_t n, const uint8_t *w0, const uint8_t *w1, const uint8_t *x, float *out) {
    __m256 a0 = _mm256_setzero_ps(), c0 = a0, a1 = a0, c1 = a0;
    for (int64_t i = 0; i < n / 256; i++) {
        if (R2PF & 1) pf(w0 + i * 144);
        if (R2PF & 2) pf(w1 + i * 144);
        const uint8_t *xb = x + i * sizeof(ts_block_q8_K);
        q4_blk(w0 + i * 144, xb, &a0, &c0);
        q4_blk(w1 + i * 144, xb, &a1, &c1);
    }
    out[0] = hsum8(_mm256_sub_ps(a0, c0));
    out[1] = hsum8(_mm256_sub_ps(a1, c1));
}
static void r2b_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    int64_t r = 0;
    for (; r + 2 <= nrows; r += 2) r2b_k(n, w + r * rs, w + (r + 1) * rs, x, out + r);
    for (; r < nrows; r++) h1_k(n, w + r * rs, x, out + r);
}
static int XPF = 2;
static __attribute__((noinline)) void xp_k(int64_t n, const uint8_t *w, const uint8_t *x, float *out) {
    __m256 a0 = _mm256_setzero_ps(), c0 = a0;
    for (int64_t i = 0; i < n / 256; i++) {
        pf(w + i * 144);
        const uint8_t *xb = x + i * sizeof(ts_block_q8_K), *xp = xb + XPF * sizeof(ts_block_q8_K);
        for (int o = 0; o < 292; o += 64) __builtin_prefetch(xp + o, 0, 3);
        q4_blk(w + i * 144, xb, &a0, &c0);
    }
    out[0] = hsum8(_mm256_sub_ps(a0, c0));
}
static void xp_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    for (int64_t r = 0; r < nrows; r++) xp_k(n, w + r * rs, x, out + r);
}
static int SLB = 16, SLR = 4; /* slice blocks, band rows */
static void sl_rows(int64_t n, const uint8_t *w, uint64_t rs, int64_t nrows, const uint8_t *x, float *out) {
    const int64_t nb = n / 256;
    for (int64_t r0 = 0; r0 < nrows; r0 += SLR) {
        int64_t nr = nrows - r0 < SLR ? nrows - r0 : SLR;
        float acc[64] = {0};
        for (int64_t b0 = 0; b0 < nb; b0 += SLB) {
            int64_t k = nb - b0 < SLB ? nb - b0 : SLB;
            for (int64_t r = 0; r < nr; r++) {
                float p;
                h1_k(k * 256, w + (r0 + r) * rs + b0 * 144, x + b0 * sizeof(ts_block_q8_K), &p);
                acc[r] += p;
            }
        }
        for (int64_t r = 0; r < nr; r++) out[r0 + r] = acc[r];
    }
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static double bench(rows_fn f, int64_t n, const uint8_t *w, uint64_t rs, int64_t rows, const uint8_t *x, float *out, double mt) {
    double best = 1e30, tot = 0;
    int reps = 0;
    while (tot < mt || reps < 3) {
        double t0 = now();
        f(n, w, rs, rows, x, out);
        double dt = now() - t0;
        tot += dt, reps++;
        if (dt < best) best = dt;
    }
    return (double)rs * rows / best / 1e9;
}

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 3584;
    const int rounds = argc > 2 ? atoi(argv[2]) : 3;
    uint64_t cap = 256u << 20;
    uint64_t rs = ts_type_row_bytes(TS_TYPE_Q4_K, n);
    int64_t rows = cap / rs, rows_l2 = 192 * 1024 / rs;
    uint8_t *w = aligned_alloc(64, rows * rs + 4096);
    float *xf = malloc(4 * n), *wf = malloc(4 * n), *out = malloc(4 * rows), *ref = malloc(4 * rows);
    uint8_t *x = malloc(ts_type_row_bytes(TS_TYPE_Q8_K, n));
    srand(1);
    for (int64_t i = 0; i < n; i++) xf[i] = (float)rand() / RAND_MAX * 2 - 1;
    ts_quantize_row_ref(TS_TYPE_Q8_K, xf, x, n);
    for (int64_t r = 0; r < rows; r++) {
        if (r < 64) {
            for (int64_t i = 0; i < n; i++) wf[i] = (float)rand() / RAND_MAX * 2 - 1;
            ts_quantize_row_ref(TS_TYPE_Q4_K, wf, w + r * rs, n);
        } else memcpy(w + r * rs, w + (r % 64) * rs, rs);
    }
    struct { const char *name; rows_fn f; } v[] = {{"base", base_rows}, {"h1", h1_rows}, {"zmm", z_rows}, {"pk", pk_rows}, {"h2", h2_rows}, {"r2", r2_rows}, {"h2pk", h2pk_rows}, {"nohead", nohead_rows}, {"nofin", nofin_rows}, {"neither", neither_rows}, {"sol", sol_rows}, {"read", read_rows}};
    if (argc > 3) PF = atoi(argv[3]);
    if (argc > 4) PFL = atoi(argv[4]);
    printf("PF %d PFL %d\n", PF, PFL);
    int nv = sizeof v / sizeof *v;
    base_rows(n, w, rs, 64, x, ref);
    for (int k = 1; k < 6; k++) {
        memset(out, 0, 4 * 64);
        v[k].f(n, w, rs, 64, x, out);
        double md = 0; for (int r = 0; r < 64; r++) { double d = fabs(out[r] - ref[r]) / (fabs(ref[r]) + 1e-3); if (d > md) md = d; }
        printf("%s same bits as base: %s (max rel %.2g)\n", v[k].name, memcmp(out, ref, 4 * 64) ? "NO" : "yes", md);
    }
    if (getenv("SWEEP")) {
        struct { const char *nm; int pf, pfl, slb, slr; rows_fn f; } c[] = {
            {"t1-2k", 2048, 2, 0, 0, h1_rows}, {"t1-4k", 4096, 2, 0, 0, h1_rows}, {"t1-8k", 8192, 2, 0, 0, h1_rows}, {"t2-4k", 4096, 5, 0, 0, h1_rows}, {"t2-8k", 8192, 5, 0, 0, h1_rows},
            {"t0-2k", 2048, 3, 0, 0, h1_rows}, {"nta-2k", 2048, 0, 0, 0, h1_rows}, {"none", 0, 3, 0, 0, h1_rows},
             {"xsmall", 2048, 3, 0, 0, xs_rows}, {"xsmall-nta", 2048, 0, 0, 0, xs_rows}};
        int nc = sizeof c / sizeof *c;
        for (int r = 0; r < rounds; r++) {
            for (int k0 = 0; k0 < nc; k0++) {
                int k = (k0 + r) % nc;
                PF = c[k].pf, PFL = c[k].pfl, SLB = c[k].slb, SLR = c[k].slr; if (c[k].f == xp_rows) XPF = c[k].slr;
                double d = bench(c[k].f, n, w, rs, rows, x, out, 0.4);
                printf("r%d %-10s dram %6.2f\n", r, c[k].nm, d);
            }
        }
        return 0;
    }
    for (int r = 0; r < rounds; r++) {
        for (int k0 = 0; k0 < nv; k0++) {
            int k = (k0 + r) % nv;
            double d = bench(v[k].f, n, w, rs, rows, x, out, 0.4);
            double l = bench(v[k].f, n, w, rs, rows_l2, x, out, 0.2);
            printf("r%d %-5s dram %6.2f  l2 %6.2f\n", r, v[k].name, d, l);
        }
    }
    return 0;
}
