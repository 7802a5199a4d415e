/* AVX-512 (F/BW/VL/DQ) kernels: entered only after runtime detection
 * (quant.c). Only the types where 512-bit lanes pay are here; the others
 * keep their AVX2 kernels (quant.c overlays this table on the AVX2 one).
 * Same arithmetic as quant_avx2.c (see its header for the int16 argument),
 * two 32-quant chunks per instruction. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE float h2f(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
INLINE __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
INLINE __m512i loadu512(const void *p) { return _mm512_loadu_si512(p); }
INLINE __m512i cat256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* ---- Q6_K: two chunks (64 quants) per step ---- */

/* i16 index vector: 8 consecutive lanes per scale */
INLINE __m512i idx_rep(int a, int b, int c, int d) {
    __m256i lo = _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
    __m256i hi = _mm256_set_m128i(_mm_set1_epi16((short)d), _mm_set1_epi16((short)c));
    return cat256(lo, hi);
}

#define K512_KERNEL(NAME, BYTES, ...)                                                                  \
    INLINE void NAME##_k(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        const uint8_t *pw = w, *px = x;                                                               \
        __m512 acc[TS_Q_MAXCOLS];                                                                     \
        __m256 accc[TS_Q_MAXCOLS];                                                                    \
        for (int c = 0; c < nc; c++) acc[c] = _mm512_setzero_ps(), accc[c] = _mm256_setzero_ps();   \
        for (int64_t i = 0; i < n / 256; i++) {                                                       \
            const uint8_t *blk = pw + i * BYTES;                                                      \
            if (nc == 1) ts_q_prefetch_ahead(blk, BYTES); /* decode (quant.h) */                         \
            const uint8_t *xb[TS_Q_MAXCOLS]; /* ts_block_q8_K */                                                    \
            __m512i si[TS_Q_MAXCOLS];                                                                 \
            for (int c = 0; c < nc; c++) xb[c] = px + c * xs + i * sizeof(ts_block_q8_K), si[c] = _mm512_setzero_si512(); \
            float d, dcorr;                                                                           \
            __m256i corr;                                                                             \
            __VA_ARGS__                                                                               \
            for (int c = 0; c < nc; c++) {                                                            \
                float dx;                                                                             \
                memcpy(&dx, xb[c] + offsetof(ts_block_q8_K, d), 4);                                                            \
                __m256i cv = _mm256_madd_epi16(corr, loadu256((xb[c] + offsetof(ts_block_q8_K, bsums))));                         \
                acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(d * dx), _mm512_cvtepi32_ps(si[c]), acc[c]);  \
                accc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dcorr * dx), _mm256_cvtepi32_ps(cv), accc[c]); \
            }                                                                                         \
        }                                                                                             \
        for (int c = 0; c < nc; c++) out[c * os] = _mm512_reduce_add_ps(acc[c]) - hsum8(accc[c]);    \
    }                                                                                                 \
    static float NAME##_dot(int64_t n, const void *w, const void *x) {                                \
        float r;                                                                                      \
        NAME##_k(n, w, x, 0, 1, &r, 0);                                                               \
        return r;                                                                                     \
    }

#define K512_STEP(Q, SC, OFF)                                                                          \
    for (int c = 0; c < nc; c++)                                                                      \
        si[c] = _mm512_add_epi32(si[c], _mm512_madd_epi16(_mm512_maddubs_epi16(Q, loadu512((xb[c] + offsetof(ts_block_q8_K, qs)) + (OFF))), SC));

K512_KERNEL(q6_K, 210, {
    const uint8_t *b = blk; /* ts_block_q6_K */
    __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + offsetof(ts_block_q6_K, scales))));
    __m512i sc = _mm512_castsi256_si512(s16);
    corr = _mm256_slli_epi16(s16, 5); /* q = q_u - 32 */
    d = h2f((b + offsetof(ts_block_q6_K, d)));
    dcorr = d;
    const __m512i sh01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m512i ql = loadu512((b + offsetof(ts_block_q6_K, ql)) + 64 * h);
        __m512i qh = _mm512_broadcast_i64x4(loadu256((b + offsetof(ts_block_q6_K, qh)) + 32 * h));
        /* chunks 4h, 4h+1: low nibbles of ql[0..63]; qh bits 0-1 / 2-3 */
        __m512i h01 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m3), 4);
        __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m4), h01);
        __m512i s01 = _mm512_permutexvar_epi16(idx_rep(8 * h, 8 * h + 1, 8 * h + 2, 8 * h + 3), sc);
        K512_STEP(q01, s01, 128 * h)
        __m512i h23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m3), 4);
        __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h23);
        __m512i s23 = _mm512_permutexvar_epi16(idx_rep(8 * h + 4, 8 * h + 5, 8 * h + 6, 8 * h + 7), sc);
        K512_STEP(q23, s23, 128 * h + 64)
    }
})

/* ---- float rows ---- */
INLINE __m512 ld_f32(const uint8_t *p) { return _mm512_loadu_ps(p); }
INLINE __m512 ld_f16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
INLINE __m512 ld_bf16(const uint8_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
INLINE float c_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
INLINE float c_f16(const uint8_t *p) { return h2f(p); }
INLINE float c_bf16(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return ts_bf16_to_f32(h); }

#define FLOAT512(NAME, LD, ESZ, CONV)                                                                  \
    INLINE void NAME##_k(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        const uint8_t *pw = w, *px = x;                                                               \
        __m512 a0[TS_Q_MAXCOLS], a1[TS_Q_MAXCOLS];                                                    \
        for (int c = 0; c < nc; c++) a0[c] = a1[c] = _mm512_setzero_ps();                            \
        int64_t i = 0;                                                                                \
        for (; i + 32 <= n; i += 32) {                                                                \
            __m512 w0 = LD(pw + i * ESZ), w1 = LD(pw + (i + 16) * ESZ);                               \
            for (int c = 0; c < nc; c++) {                                                            \
                const uint8_t *xc = px + c * xs + i * 4;                                              \
                a0[c] = _mm512_fmadd_ps(w0, ld_f32(xc), a0[c]);                                       \
                a1[c] = _mm512_fmadd_ps(w1, ld_f32(xc + 64), a1[c]);                                  \
            }                                                                                         \
        }                                                                                             \
        for (; i + 16 <= n; i += 16) {                                                                \
            __m512 w0 = LD(pw + i * ESZ);                                                             \
            for (int c = 0; c < nc; c++) a0[c] = _mm512_fmadd_ps(w0, ld_f32(px + c * xs + i * 4), a0[c]); \
        }                                                                                             \
        for (int c = 0; c < nc; c++) {                                                                \
            float s = _mm512_reduce_add_ps(_mm512_add_ps(a0[c], a1[c]));                              \
            for (int64_t j = i; j < n; j++) s += CONV(pw + j * ESZ) * c_f32(px + c * xs + j * 4);     \
            out[c * os] = s;                                                                          \
        }                                                                                             \
    }                                                                                                 \
    static float NAME##_dot(int64_t n, const void *w, const void *x) {                                \
        float r;                                                                                      \
        NAME##_k(n, w, x, 0, 1, &r, 0);                                                               \
        return r;                                                                                     \
    }

FLOAT512(f32, ld_f32, 4, c_f32)
FLOAT512(f16, ld_f16, 2, c_f16)
FLOAT512(bf16, ld_bf16, 2, c_bf16)

void ts_q_fill_avx512(ts_q_kernels *k) {
    /* Registered only where they beat AVX2 on the measuring machine (docs/KERNELS.md):
     * the one-column dots of Q6_K and the float types. Their multi-column forms
     * (dotc: ts_gemm_tile, a MoE expert's few tokens, the F32 router of a
     * prefill) ran 1.2-1.9x slower than the AVX2 ones, which hold each column
     * count's accumulators in registers (a 2-core Xeon, session 33); so did
     * Q4_K's 4-column tile, whose 512-bit kernel is gone. Q4_0/Q8_0 at 512 bits
     * were slower too (mask/abs/insert overhead). */
    k->dot[TS_TYPE_Q6_K] = q6_K_dot;
    k->dot[TS_TYPE_F32] = f32_dot;
    k->dot[TS_TYPE_F16] = f16_dot;
    k->dot[TS_TYPE_BF16] = bf16_dot;
}
#endif
