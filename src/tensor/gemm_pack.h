/* The vector panel packers' shared quant decode (gemm_avx2.c's pack_vec2,
 * gemm_avx512.c's pack_vec). Include only from files built with AVX2. */
#ifndef TS_GEMM_PACK_H
#define TS_GEMM_PACK_H
#include <immintrin.h>
#include <stdint.h>

/* rb[l]: row lg*16 + l's first packed block (super-block sb0 of a row of
 * bb-byte blocks, stride ws), NULL past nrows. */
static inline void gp_row_blocks(const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int bb, int lg, const uint8_t **rb) {
    for (int l = 0; l < 16; l++) {
        const int r = lg * 16 + l;
        rb[l] = r < nrows ? w + (uint64_t)r * ws + (uint64_t)sb0 * (uint64_t)bb : NULL;
    }
}

/* Block b's 64 quants of k-step kk, in the panel's element order, as q_u
 * bytes: *lo the first 32, *hi the last 32. Q4_K: elements 64 kk + [0, 64),
 * a 32-byte run's low then high nibbles; Q5_K: the same with bits 2 kk and
 * 2 kk + 1 of qh on top; Q6_K: elements 128 hf + 64 (kk & 1) + [0, 64), ql's
 * nibbles with two bits of qh on top. */
static inline __attribute__((always_inline)) void gp_quants(int q6, int q5, const uint8_t *b, int kk, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    if (q6) {
        const int hf = kk >> 1, sh = 4 * (kk & 1);
        const __m256i A = _mm256_loadu_si256((const __m256i *)(b + 64 * hf));
        const __m256i B = _mm256_loadu_si256((const __m256i *)(b + 64 * hf + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * hf));
        const __m256i H0 = _mm256_and_si256(_mm256_srli_epi16(H, sh), m3);
        const __m256i H1 = _mm256_and_si256(_mm256_srli_epi16(H, sh + 2), m3);
        *lo = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, sh), m4), _mm256_slli_epi16(H0, 4));
        *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, sh), m4), _mm256_slli_epi16(H1, 4));
    } else if (q5) { /* qs at 48, qh at 16 */
        const __m256i x = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * kk));
        const __m256i H = _mm256_loadu_si256((const __m256i *)(b + 16));
        const __m256i H0 = _mm256_and_si256(_mm256_srli_epi16(H, 2 * kk), m1);
        const __m256i H1 = _mm256_and_si256(_mm256_srli_epi16(H, 2 * kk + 1), m1);
        *lo = _mm256_or_si256(_mm256_and_si256(x, m4), _mm256_slli_epi16(H0, 4));
        *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4), _mm256_slli_epi16(H1, 4));
    } else {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * kk));
        *lo = _mm256_and_si256(x, m4);
        *hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
    }
}

#endif
