/* AVX-512 VNNI panel GEMM for the K-quants (layout: quant.h, "GEMM panels").
 * Entered only after runtime detection of AVX-512 F/BW/VL/DQ (the file's
 * flags) and AVX512_VNNI (these functions' target attribute).
 *
 * Lanes are weight rows: one zmm holds 4 consecutive quants of 16 rows, so a
 * single vpdpbusd (u8 weights x s8 activations, 4 products per i32 lane)
 * advances 16 rows by 4 elements for one token, with the token's 4
 * activation bytes broadcast straight from its Q8_K row. The micro-kernel
 * holds 32 rows x NT tokens of accumulators: per sub-block an i32 partial per
 * (row, token), multiplied by the sub-block's integer scale into a
 * super-block i32 sum (exact: |sum| < 2^31, see the bounds in docs/KERNELS.md);
 * per super-block the integer correction sum_g cr_g * bsum_g (vpdpwssd), the
 * conversion to float and one FMA into the output with the token's scale. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define VN __attribute__((target("avx512vnni")))
#define VINL static inline __attribute__((always_inline, target("avx512vnni")))

#define QK_BYTES ((int)sizeof(ts_block_q8_K)) /* 292: f32 d, 256 x i8 qs, 16 x i16 bsums */
#define QK_QS 4
#define QK_BSUMS 260

VINL __m512i bc32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
VINL float ldf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* NT activation rows xr[] (Q8_K, at the segment's first super-block) against
 * one packed unit of ns super-blocks: out[t*os + r] += value, rows masked by
 * m0 (rows 0..15) and m1 (16..31). */
VINL void vk(const uint8_t *panel, int ns, const int NSUB, const int NT, const uint8_t *const *xr, float *out, int64_t os,
             __mmask16 m0, __mmask16 m1, int first) {
    const size_t sbb = TS_GP_SB_BYTES(NSUB);
    const int GPS = 64 / NSUB; /* k-groups of 4 per sub-block */
    for (int s = 0; s < ns; s++) {
        const uint8_t *P = panel + (size_t)s * sbb;
        const uint8_t *xq[6];
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) xq[t] = xr[t] + (size_t)s * QK_BYTES;
        __m512i sb0[6], sb1[6];
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) sb0[t] = sb1[t] = _mm512_setzero_si512();
        for (int j = 0; j < NSUB; j++) {
            __m512i a0[6], a1[6];
#pragma GCC unroll 6
            for (int t = 0; t < NT; t++) a0[t] = a1[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < GPS; g++) {
                const int gg = j * GPS + g;
                const __m512i w0 = _mm512_load_si512(P + gg * 128), w1 = _mm512_load_si512(P + gg * 128 + 64);
#pragma GCC unroll 6
                for (int t = 0; t < NT; t++) {
                    const __m512i xb = bc32(xq[t] + QK_QS + 4 * gg);
                    a0[t] = _mm512_dpbusd_epi32(a0[t], w0, xb);
                    a1[t] = _mm512_dpbusd_epi32(a1[t], w1, xb);
                }
            }
            const __m512i s0 = _mm512_load_si512(P + TS_GP_Q + j * 128), s1 = _mm512_load_si512(P + TS_GP_Q + j * 128 + 64);
#pragma GCC unroll 6
            for (int t = 0; t < NT; t++) {
                sb0[t] = _mm512_add_epi32(sb0[t], _mm512_mullo_epi32(a0[t], s0));
                sb1[t] = _mm512_add_epi32(sb1[t], _mm512_mullo_epi32(a1[t], s1));
            }
        }
        const uint8_t *C = P + TS_GP_Q + NSUB * 128, *D = C + 8 * 128;
        const __m512 d0 = _mm512_load_ps(D), d1 = _mm512_load_ps(D + 64);
        const __m512 dm0 = _mm512_load_ps(D + 128), dm1 = _mm512_load_ps(D + 192);
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            __m512i c0 = _mm512_setzero_si512(), c1 = c0;
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                const __m512i bs = bc32(xq[t] + QK_BSUMS + 4 * p);
                c0 = _mm512_dpwssd_epi32(c0, _mm512_load_si512(C + p * 128), bs);
                c1 = _mm512_dpwssd_epi32(c1, _mm512_load_si512(C + p * 128 + 64), bs);
            }
            const __m512 dx = _mm512_set1_ps(ldf(xq[t]));
            __m512 f0 = _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sb0[t]), d0), _mm512_mul_ps(_mm512_cvtepi32_ps(c0), dm0));
            __m512 f1 = _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sb1[t]), d1), _mm512_mul_ps(_mm512_cvtepi32_ps(c1), dm1));
            float *o = out + t * os;
            if (first && s == 0) { /* the row's first super-block: no zeroing pass over the output */
                _mm512_mask_storeu_ps(o, m0, _mm512_mul_ps(f0, dx));
                _mm512_mask_storeu_ps(o + 16, m1, _mm512_mul_ps(f1, dx));
            } else {
                _mm512_mask_storeu_ps(o, m0, _mm512_fmadd_ps(f0, dx, _mm512_maskz_loadu_ps(m0, o)));
                _mm512_mask_storeu_ps(o + 16, m1, _mm512_fmadd_ps(f1, dx, _mm512_maskz_loadu_ps(m1, o + 16)));
            }
        }
    }
}

#define VK_NT 6 /* tokens per micro-kernel call: 4*NT + 5 zmm live */
#define VK_FN(NSUB, NT)                                                                                          \
    static VN void vk_##NSUB##_##NT(const uint8_t *panel, int ns, const uint8_t *const *xr, float *out, int64_t os, \
                                   __mmask16 m0, __mmask16 m1, int first) {                                     \
        vk(panel, ns, NSUB, NT, xr, out, os, m0, m1, first);                                                           \
    }
#define VK_ALL(NSUB) VK_FN(NSUB, 1) VK_FN(NSUB, 2) VK_FN(NSUB, 3) VK_FN(NSUB, 4) VK_FN(NSUB, 5) VK_FN(NSUB, 6)
VK_ALL(8)
VK_ALL(16)
typedef void (*vk_fn)(const uint8_t *, int, const uint8_t *const *, float *, int64_t, __mmask16, __mmask16, int);
static const vk_fn vk8[VK_NT + 1] = {NULL, vk_8_1, vk_8_2, vk_8_3, vk_8_4, vk_8_5, vk_8_6};
static const vk_fn vk16[VK_NT + 1] = {NULL, vk_16_1, vk_16_2, vk_16_3, vk_16_4, vk_16_5, vk_16_6};

static __mmask16 rmask(int64_t nr) { return nr >= 16 ? (__mmask16)0xffff : nr <= 0 ? 0 : (__mmask16)((1u << nr) - 1); }

/* Rows in blocks of two units (64 rows); per block, K in segments of
 * TS_GP_KSEG super-blocks: pack both units, then every token passes over them. */
static void vgemm(ts_type t, int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,
                  int64_t ncols, float *out, int64_t os, void *scratch) {
    const int nsub = ts_q_gemm_nsub(t);
    const vk_fn *kf = nsub == 8 ? vk8 : vk16;
    const int64_t nsb = n / TS_QK_K;
    const size_t unit = (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(nsub);
    const uint8_t *pw = w, *px = x;
    uint8_t *sp = scratch;
    for (int64_t r0 = 0; r0 < nrows; r0 += 2 * TS_GP_ROWS) {
        int64_t nr = nrows - r0 < 2 * TS_GP_ROWS ? nrows - r0 : 2 * TS_GP_ROWS;
        int nu = nr > TS_GP_ROWS ? 2 : 1;
        for (int64_t s0 = 0; s0 < nsb; s0 += TS_GP_KSEG) {
            int ns = (int)(nsb - s0 < TS_GP_KSEG ? nsb - s0 : TS_GP_KSEG);
            for (int u = 0; u < nu; u++) {
                int64_t ru = nr - u * TS_GP_ROWS;
                ts_q_gemm_pack(t, pw + (uint64_t)(r0 + u * TS_GP_ROWS) * ws, ws, (int)(ru < TS_GP_ROWS ? ru : TS_GP_ROWS), s0,
                               ns, 0, sp + u * unit);
            }
            for (int64_t c0 = 0; c0 < ncols; c0 += VK_NT) {
                int nt = (int)(ncols - c0 < VK_NT ? ncols - c0 : VK_NT);
                const uint8_t *xr[VK_NT];
                for (int i = 0; i < nt; i++) xr[i] = px + (uint64_t)(c0 + i) * xs + (uint64_t)s0 * QK_BYTES;
                for (int u = 0; u < nu; u++) {
                    int64_t ru = nr - u * TS_GP_ROWS;
                    kf[nt](sp + u * unit, ns, xr, out + c0 * os + r0 + u * TS_GP_ROWS, os, rmask(ru), rmask(ru - 16), s0 == 0);
                }
            }
        }
    }
}

#define VG(T)                                                                                                    \
    static void vgemm_##T(int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,        \
                          int64_t ncols, float *out, int64_t os, void *scratch) {                              \
        vgemm(TS_TYPE_##T, n, w, ws, nrows, x, xs, ncols, out, os, scratch);                                    \
    }
VG(Q2_K)
VG(Q3_K)
VG(Q4_K)
VG(Q5_K)
VG(Q6_K)

void ts_q_fill_gemm_avx512(ts_q_kernels *k, int vnni) {
    if (!vnni) return; /* AVX-512 without VNNI keeps the AVX2 panel kernels */
    k->gemm[TS_TYPE_Q2_K] = vgemm_Q2_K;
    k->gemm[TS_TYPE_Q3_K] = vgemm_Q3_K;
    k->gemm[TS_TYPE_Q4_K] = vgemm_Q4_K;
    k->gemm[TS_TYPE_Q5_K] = vgemm_Q5_K;
    k->gemm[TS_TYPE_Q6_K] = vgemm_Q6_K;
}
#endif
