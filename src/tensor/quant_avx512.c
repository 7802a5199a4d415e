/* AVX-512 kernels: entered only after runtime detection (quant.c); the
 * AVX2 table stays under them for every type not set here (quant.c
 * overlays this one on it).
 * - K-quant dots and tiles (Q2_K..Q6_K) where the CPU has AVX-512 VNNI:
 *   quant_x86.h's kernels with the vpdpbusd + vpdpwssd step, on ymm (the
 *   tiles give the AVX2 ones' bits; the one-column dot packs chunk pairs,
 *   docs/KERNELS.md). One thread, 192 KiB of weights in L2, against the AVX2
 *   step on the same core (Emerald Rapids VM, session 39, bench_kernels,
 *   alternating medians): one column 1.09-1.20x (Q4_K 20.0 against 18.1
 *   GB/s, Q6_K 25.7 against 21.7), 4 columns 1.19-1.29x. They replace a 512-bit
 *   Q6_K dot (two chunks an instruction), which they outran by 1.12x here
 *   and which ran decode ~9% slower than the AVX2 dot on Zen 4 (session 34).
 * - One-column dots of the float types, 512 bits wide. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define KQ_VNNI 1
#define KQ_FN static __attribute__((target("avx512vnni")))
#include "tensor/quant_x86.h"

/* ---- K-quants: quant_x86.h's kernels with the VNNI step ---- */
K_KERNEL(vq2_K, Q2K, 84)
K_KERNEL(vq3_K, Q3K, 110)
K_KERNEL(vq4_K, Q4K, 144)
K_KERNEL(vq5_K, Q5K, 176)
K_KERNEL(vq6_K, Q6K, 210)

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

void ts_q_fill_avx512(ts_q_kernels *k, int vnni) {
    /* The float dots: only the one-column forms beat AVX2 (docs/KERNELS.md).
     * Their multi-column forms (dotc: ts_gemm_tile, a MoE expert's few
     * tokens, the F32 router of a prefill) ran 1.2-1.9x slower than the AVX2
     * ones, which hold each column count's accumulators in registers (a
     * 2-core Xeon, session 33); Q4_0/Q8_0 at 512 bits were slower too
     * (mask/abs/insert overhead). */
    if (vnni) {
#define SET(T, name) k->dot[TS_TYPE_##T] = name##_dot, k->dotc[TS_TYPE_##T] = name##_dotc
        SET(Q2_K, vq2_K);
        SET(Q3_K, vq3_K);
        SET(Q4_K, vq4_K);
        SET(Q5_K, vq5_K);
        SET(Q6_K, vq6_K);
#undef SET
    }
    k->dot[TS_TYPE_F32] = f32_dot;
    k->dot[TS_TYPE_F16] = f16_dot;
    k->dot[TS_TYPE_BF16] = bf16_dot;
}
#endif
