#define TS_QUANT_INTERNAL
#include "tensor/quant.h"
#include <immintrin.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define INLINE static inline __attribute__((always_inline))
#define KQ_VNNI 0
#define KQ_FN static __attribute__((noinline))
#include "tensor/quant_x86.h"

/* baseline: the library's macro, compiled here */
K_KERNEL_NC(base, Q4K, 144, 1)

/* V1: prefetch far hard-coded (no mode branch) */
#define PF_FAR(blk) do { const char *p_ = (const char *)(blk); __asm__ volatile("prefetcht1 %0" ::"m"(p_[8192])); \
  __asm__ volatile("prefetcht1 %0" ::"m"(p_[8192+64])); __asm__ volatile("prefetcht1 %0" ::"m"(p_[8192+128])); } while (0)

static __attribute__((noinline)) void v1(int64_t n, const void *w, const void *x, float *out) {
    enum { NC_ = 1 }; const int64_t os = 0;
    const uint8_t *pw = w, *px = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, cc0 = acc0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *blk = pw + i * 144;
        PF_FAR(blk);
        Q4K_HEAD
        const uint8_t *xb0 = px + i * sizeof(ts_block_q8_K), *xb1 = xb0, *xb2 = xb0, *xb3 = xb0;
        __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0;
        K_STEP(0, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(1, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(2, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(3, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(4, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(5, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(6, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(7, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        KC_FIN(0)
    }
    (void)acc1; (void)acc2; (void)acc3;
    KC_OUT(0)
}

/* V2: V1 + the chunk scales as dword broadcast loads from a stack table */
static __attribute__((noinline)) void v2(int64_t n, const void *w, const void *x, float *out) {
    enum { NC_ = 1 }; const int64_t os = 0;
    const uint8_t *pw = w, *px = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, cc0 = acc0;
    __attribute__((aligned(32))) int32_t tab[8];
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *blk = pw + i * 144;
        PF_FAR(blk);
        Q4K_HEAD
        {
            __m128i s16 = _mm_cvtepu8_epi16(_mm256_castsi256_si128(sc8));
            _mm_store_si128((__m128i *)tab, _mm_unpacklo_epi16(s16, s16));
            _mm_store_si128((__m128i *)tab + 1, _mm_unpackhi_epi16(s16, s16));
        }
#undef Q4K_SCALE
#define Q4K_SCALE(j) ({ __m256i r_; __asm__("vpbroadcastd %1, %0" : "=x"(r_) : "m"(tab[j])); r_; })
        const uint8_t *xb0 = px + i * sizeof(ts_block_q8_K), *xb1 = xb0, *xb2 = xb0, *xb3 = xb0;
        __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0;
        K_STEP(0, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(1, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(2, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(3, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(4, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(5, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(6, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(7, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        KC_FIN(0)
#undef Q4K_SCALE
#define Q4K_SCALE(j) chunk_scales8(sc8, j)
    }
    (void)acc1; (void)acc2; (void)acc3;
    KC_OUT(0)
}

/* V3: V1 without prefetch */
static __attribute__((noinline)) void v3(int64_t n, const void *w, const void *x, float *out) {
    enum { NC_ = 1 }; const int64_t os = 0;
    const uint8_t *pw = w, *px = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, cc0 = acc0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *blk = pw + i * 144;
        Q4K_HEAD
        const uint8_t *xb0 = px + i * sizeof(ts_block_q8_K), *xb1 = xb0, *xb2 = xb0, *xb3 = xb0;
        __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0;
        K_STEP(0, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(1, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(2, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(3, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(4, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(5, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        K_STEP(6, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(7, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2);
        KC_FIN(0)
    }
    (void)acc1; (void)acc2; (void)acc3;
    KC_OUT(0)
}

typedef void (*fn)(int64_t, const void *, const void *, float *);
static void b_base(int64_t n, const void *w, const void *x, float *out) { base_k1(n, w, x, 0, out, 0); }

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double run(fn f, int64_t n, const uint8_t *w, uint64_t rs, int64_t rows, const void *x, float *out, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int64_t i = 0; i < rows; i++) f(n, w + i * rs, x, out + i);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return (double)rs * rows / best / 1e9;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atol(argv[1]) : 4096;
    double mb = argc > 2 ? atof(argv[2]) : 0.192;
    int reps = argc > 3 ? atoi(argv[3]) : 50;
    uint64_t rs = ts_type_row_bytes(TS_TYPE_Q4_K, n);
    int64_t rows = (int64_t)(mb * 1e6 / rs); if (rows < 1) rows = 1;
    uint8_t *w = aligned_alloc(64, rs * rows + 16384);
    float *xf = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) xf[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    uint8_t *x = malloc(ts_type_row_bytes(TS_TYPE_Q8_K, n));
    ts_quantize_row_ref(TS_TYPE_Q8_K, xf, x, n);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++) xf[i] = (float)(((i + r) * 2654435761u >> 7) % 2001) / 1000.0f - 1.0f;
        if (r < 64) ts_quantize_row_ref(TS_TYPE_Q4_K, xf, w + r * rs, n); else memcpy(w + r * rs, w + (r % 64) * rs, rs);
    }
    float *o0 = malloc(4 * rows), *o1 = malloc(4 * rows);
    fn fs[] = {b_base, v1, v2, v3};
    const char *names[] = {"base", "v1-nobranch", "v2-bcast", "v3-nopf"};
    int nf = 4;
    for (int f = 0; f < nf; f++) { /* correctness against base */
        for (int64_t i = 0; i < rows && i < 64; i++) { b_base(n, w + i * rs, x, o0 + i); fs[f](n, w + i * rs, x, o1 + i);
            if (memcmp(o0 + i, o1 + i, 4)) { printf("%s differs row %ld: %g %g\n", names[f], (long)i, o0[i], o1[i]); break; } }
    }
    for (int round = 0; round < 3; round++) {
        for (int f = 0; f < nf; f++) printf("%-12s %6.2f GB/s  ", names[f], run(fs[f], n, w, rs, rows, x, o1, reps));
        printf("\n");
    }
    return 0;
}
