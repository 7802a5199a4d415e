/* The vector panel packers' shared quant decode (gemm_avx2.c's pack_vec2,
 * gemm_avx512.c's pack_vec). Include only from files built with AVX2. */
#ifndef TS_GEMM_PACK_H
#define TS_GEMM_PACK_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "tensor/quant.h"

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

/* The halves in the low 16 bits of h's 8 dwords as floats at dst, by
 * vcvtph2ps, which is the scalar conversion's value for every half but a
 * signalling NaN (it quiets it): where one of the 8 is a NaN or an infinity,
 * all 8 go through the scalar one, so the panel is the scalar packer's, bit
 * for bit. */
static inline void gp_f16x8(__m256i h, float *dst) {
    const __m256i lo = _mm256_and_si256(h, _mm256_set1_epi32(0xffff)), ex = _mm256_set1_epi32(0x7c00);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(_mm256_and_si256(lo, ex), ex))) {
        _Alignas(32) uint32_t v[8];
        _mm256_store_si256((__m256i *)v, lo);
        for (int i = 0; i < 8; i++) dst[i] = ts_f16_to_f32((uint16_t)v[i]);
    } else {
        _mm256_storeu_ps(dst, _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1))));
    }
}

/* Rows 8 h8 .. 8 h8 + 7 of rb: their block of super-block s in b[] (zeros,
 * as long as a Q6_K block, past nrows), the block two ahead prefetched */
static inline void gp_rows8(const uint8_t *const *rb, int h8, int s, int ns, int bb, const uint8_t **b) {
    static const _Alignas(16) uint8_t zero[224] = {0};
    for (int i = 0; i < 8; i++) {
        b[i] = rb[8 * h8 + i] ? rb[8 * h8 + i] + (size_t)s * bb : zero;
        if (rb[8 * h8 + i]) ts_q_gemm_prefetch_ahead(b[i], s, ns, (uint32_t)bb);
    }
}

/* 8 rows' first 16 bytes from b[i] + off: dword k of rows 0..7 in out[k] */
static inline void gp_dwords8(const uint8_t *const *b, int off, __m256i out[4]) {
    __m256i R[4];
    for (int i = 0; i < 4; i++) /* rows i and i + 4 */
        R[i] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(b[i + 4] + off)), _mm_loadu_si128((const __m128i *)(b[i] + off)));
    const __m256i a0 = _mm256_unpacklo_epi32(R[0], R[1]), a1 = _mm256_unpackhi_epi32(R[0], R[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(R[2], R[3]), a3 = _mm256_unpackhi_epi32(R[2], R[3]);
    out[0] = _mm256_unpacklo_epi64(a0, a2), out[1] = _mm256_unpackhi_epi64(a0, a2);
    out[2] = _mm256_unpacklo_epi64(a1, a3), out[3] = _mm256_unpackhi_epi64(a1, a3);
}

/* ts_q_gemm_pack_heads for Q4_K and Q5_K, byte for byte, 8 rows
 * a vector: the rows' first 16 bytes (d, dmin, the 12 scale bytes) as 4
 * dwords each, transposed so that dword k of 8 rows is one ymm, then the
 * 6-bit scales and mins unpacked per lane. The scalar decoder of a row's head
 * cost a MoE prefill ~6% (the 30B-A3B synthetic on Zen 3; an expert's panels
 * serve only its tokens of the chunk), and ~6.6% on the AVX-512 level's
 * packer on Zen 4 (session 34). Rows without a block read zeros. sc_pair:
 * the AVX2 kernels' scales (1: each scale twice as i16) or the VNNI ones (0:
 * i32); the corrections are the mins of two sub-blocks a pair for both
 * (gemm.c's gp_cr_pair). */
static inline void gp_heads_q4(const uint8_t *const *rb, int lg, int s, int ns, int bb, int sc_pair, uint8_t *P) {
    int32_t *psc = (int32_t *)(P + TS_GP_Q), *pcr = psc + 8 * 32;
    float *d = (float *)(pcr + 8 * 32), *dm = d + 32;
    const __m256i b8 = _mm256_set1_epi32(0xff), m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15);
    for (int h8 = 0; h8 < 2; h8++) {
        const uint8_t *b[8];
        gp_rows8(rb, h8, s, ns, bb, b);
        __m256i T[4];
        gp_dwords8(b, 0, T);
        const __m256i T0 = T[0], T1 = T[1], T2 = T[2], T3 = T[3]; /* d|dmin; s0..s3; s4..s7; s8..s11 */
        __m256i sc[8], mn[8];
        for (int j = 0; j < 4; j++) {
            const __m256i c1 = _mm256_and_si256(_mm256_srli_epi32(T1, 8 * j), b8); /* s[j] */
            const __m256i c2 = _mm256_and_si256(_mm256_srli_epi32(T2, 8 * j), b8); /* s[j + 4] */
            const __m256i c3 = _mm256_and_si256(_mm256_srli_epi32(T3, 8 * j), b8); /* s[j + 8] */
            sc[j] = _mm256_and_si256(c1, m6);
            mn[j] = _mm256_and_si256(c2, m6);
            sc[j + 4] = _mm256_or_si256(_mm256_and_si256(c3, m4), _mm256_slli_epi32(_mm256_srli_epi32(c1, 6), 4));
            mn[j + 4] = _mm256_or_si256(_mm256_srli_epi32(c3, 4), _mm256_slli_epi32(_mm256_srli_epi32(c2, 6), 4));
        }
        for (int j = 0; j < 8; j++)
            _mm256_storeu_si256((__m256i *)(psc + (j * 2 + lg) * 16 + 8 * h8),
                                sc_pair ? _mm256_or_si256(sc[j], _mm256_slli_epi32(sc[j], 16)) : sc[j]);
        /* gemm.c's gp_cr_pair at nsub 8: (min_2p, min_2p+1) for p < 4, 0 after */
        for (int p = 0; p < 8; p++)
            _mm256_storeu_si256((__m256i *)(pcr + (p * 2 + lg) * 16 + 8 * h8),
                                p < 4 ? _mm256_or_si256(mn[2 * p], _mm256_slli_epi32(mn[2 * p + 1], 16)) : _mm256_setzero_si256());
        gp_f16x8(T0, d + lg * 16 + 8 * h8);
        gp_f16x8(_mm256_srli_epi32(T0, 16), dm + lg * 16 + 8 * h8);
    }
}

/* ts_q_gemm_pack_heads for Q6_K, byte for byte, 8 rows a vector: the rows'
 * 16 scale bytes (at 192) transposed as gp_heads_q4's head, each sign-extended
 * per lane; the corrections are 32 x scale (the offset of q_u = q + 32), two
 * 16-groups a pair; d = dm = the block's d. Rows without a block read zeros.
 * The scalar decoder of its 16 rows was ~1/3 of the vector packers' time on a
 * Q6_K matrix (a 1.5B ffn_down, bench_pack_avx2). */
static inline void gp_heads_q6(const uint8_t *const *rb, int lg, int s, int ns, int bb, int sc_pair, uint8_t *P) {
    int32_t *psc = (int32_t *)(P + TS_GP_Q), *pcr = psc + 16 * 32;
    float *d = (float *)(pcr + 8 * 32), *dm = d + 32;
    for (int h8 = 0; h8 < 2; h8++) {
        const uint8_t *b[8];
        _Alignas(32) uint32_t hd[8];
        gp_rows8(rb, h8, s, ns, bb, b);
        for (int i = 0; i < 8; i++) {
            uint16_t h;
            memcpy(&h, b[i] + 208, 2);
            hd[i] = h;
        }
        __m256i T[4];
        gp_dwords8(b, 192, T); /* T[k]: scales 4k .. 4k + 3 */
        __m256i prev = _mm256_setzero_si256();
        for (int j = 0; j < 16; j++) {
            const __m256i sc = _mm256_srai_epi32(_mm256_slli_epi32(T[j / 4], 24 - 8 * (j % 4)), 24);
            _mm256_storeu_si256((__m256i *)(psc + (j * 2 + lg) * 16 + 8 * h8),
                                sc_pair ? _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16)) : sc);
            /* gemm.c's gp_cr_pair at nsub 16: (u16)(32 sc_2p) | (u16)(32 sc_2p+1) << 16 */
            if (j % 2)
                _mm256_storeu_si256((__m256i *)(pcr + ((j / 2) * 2 + lg) * 16 + 8 * h8),
                                    _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(prev, 5), _mm256_set1_epi32(0xffff)),
                                                    _mm256_slli_epi32(sc, 21)));
            prev = sc;
        }
        gp_f16x8(_mm256_load_si256((const __m256i *)hd), d + lg * 16 + 8 * h8);
        memcpy(dm + lg * 16 + 8 * h8, d + lg * 16 + 8 * h8, 8 * sizeof(float));
    }
}

/* The sums per 32 elements of nt activation rows (Q8_K, xr[t] at a
 * segment's first super-block) over ns super-blocks, as the i16 pairs
 * (bs32_2p, bs32_2p+1), p < 4, that the nsub-8 corrections (min_2p,
 * min_2p+1) multiply: bp[((t * bst + s) * 4 + p) * 4], bst the super-blocks
 * a token's row of bp. |bs32| <= 32 * 128 fits i16. Both panel kernels
 * (gemm_avx2.c, gemm_avx512.c) compute them once a call where they fit
 * TS_GP_BP_BYTES, else once a token group and segment. */
static inline void gp_bs32_pairs(const uint8_t *const *xr, int nt, int ns, int bst, uint8_t *bp) {
    const __m256i one = _mm256_set1_epi16(1);
    for (int t = 0; t < nt; t++)
        for (int s = 0; s < ns; s++) {
            const __m256i b16 = _mm256_loadu_si256((const __m256i *)(xr[t] + (size_t)s * sizeof(ts_block_q8_K) + offsetof(ts_block_q8_K, bsums)));
            const __m256i b32 = _mm256_madd_epi16(b16, one);
            const __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(b32), _mm256_extracti128_si256(b32, 1));
            _mm_storeu_si128((__m128i *)(bp + (size_t)(t * bst + s) * 16), p);
        }
}

/* Columns [c0, c1) of the activations x (row stride xs), all nsb
 * super-blocks each, into all: column c's sums at all + c * nsb * 16 (a
 * call's sums at once; the caller has checked they fit TS_GP_BP_BYTES). */
static inline void gp_bs32_all(const uint8_t *x, uint64_t xs, int64_t c0, int64_t c1, int64_t nsb, uint8_t *all) {
    for (int64_t c = c0; c < c1; c++) {
        const uint8_t *xc = x + (uint64_t)c * xs;
        gp_bs32_pairs(&xc, 1, (int)nsb, (int)nsb, all + (size_t)c * (size_t)nsb * 16);
    }
}

/* The sums of a token group (columns c0.. of all, or xr[0..nt) at segment
 * s0 of ns super-blocks): from all where the call has them, else summed
 * into buf (nt x TS_GP_KSEG x 16 bytes) at nsub 8; *bst their row stride
 * in super-blocks. Types at nsub 16 take the Q8_K rows' own sums. */
static inline const uint8_t *gp_bs32_group(const uint8_t *all, int64_t nsb, int64_t c0, int64_t s0, int nsub,
                                           const uint8_t *const *xr, int nt, int ns, uint8_t *buf, int *bst) {
    if (all) {
        *bst = (int)nsb;
        return all + (size_t)(c0 * nsb + s0) * 16;
    }
    *bst = TS_GP_KSEG;
    if (nsub == 8) gp_bs32_pairs(xr, nt, ns, TS_GP_KSEG, buf);
    return buf;
}

#endif
