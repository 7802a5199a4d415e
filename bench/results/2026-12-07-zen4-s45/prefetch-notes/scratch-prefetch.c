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


#define PFV(NAME, NL, DIST, HINT) \
static __attribute__((noinline)) void NAME(int64_t n, const void *w, const void *x, float *out) { \
    enum { NC_ = 1 }; const int64_t os = 0; \
    const uint8_t *pw = w, *px = x; \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, cc0 = acc0; \
    for (int64_t i = 0; i < n / 256; i++) { \
        const uint8_t *blk = pw + i * 144; \
        for (int l_ = 0; l_ < NL; l_++) __asm__ volatile(HINT " %0" ::"m"(((const char *)blk)[DIST + 64 * l_])); \
        Q4K_HEAD \
        const uint8_t *xb0 = px + i * sizeof(ts_block_q8_K), *xb1 = xb0, *xb2 = xb0, *xb3 = xb0; \
        __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0; \
        K_STEP(0, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(1, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); \
        K_STEP(2, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(3, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); \
        K_STEP(4, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(5, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); \
        K_STEP(6, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); K_STEP(7, Q4K_CHUNK, Q4K_SCALE, Q4K_SCALE2); \
        KC_FIN(0) \
    } \
    (void)acc1; (void)acc2; (void)acc3; \
    KC_OUT(0) \
}
PFV(far3, 3, 8192, "prefetcht1")
PFV(far1, 1, 8192, "prefetcht1")
PFV(far2, 2, 8192, "prefetcht1")
PFV(far3_16k, 3, 16384, "prefetcht1")
PFV(far3_4k, 3, 4096, "prefetcht1")
PFV(nta3, 3, 2048, "prefetchnta")
PFV(near3, 3, 2048, "prefetcht0")
PFV(none, 0, 0, "prefetcht1")
PFV(t2_3, 3, 8192, "prefetcht2")
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
    fn fs[] = {far3, far1, far2, far3_16k, far3_4k, nta3, near3, none, t2_3};
    const char *names[] = {"far3", "far1", "far2", "far3_16k", "far3_4k", "nta3", "near3", "none", "t2_3"};
    int nf = 9;
    for (int f = 0; f < nf; f++) { /* correctness against base */
        for (int64_t i = 0; i < rows && i < 64; i++) { far3(n, w + i * rs, x, o0 + i); fs[f](n, w + i * rs, x, o1 + i);
            if (memcmp(o0 + i, o1 + i, 4)) { printf("%s differs row %ld: %g %g\n", names[f], (long)i, o0[i], o1[i]); break; } }
    }
    int sel[16], ns = 0;
    for (int a = 5; a < argc; a++) for (int f = 0; f < nf; f++) if (!strcmp(argv[a], names[f])) sel[ns++] = f;
    int R = argc > 4 ? atoi(argv[4]) : 30;
    double *res = calloc((size_t)R * ns, sizeof(double));
    for (int r = 0; r < R; r++) for (int k = 0; k < ns; k++) { int kk = (k + r) % ns; res[kk * R + r] = run(fs[sel[kk]], n, w, rs, rows, x, o1, reps); }
    for (int k = 0; k < ns; k++) {
        double *v = res + k * R; int wins = 0;
        for (int r = 0; r < R; r++) if (v[r] > res[r]) wins++;
        for (int i = 0; i < R; i++) for (int j = i + 1; j < R; j++) if (v[j] < v[i]) { double t = v[i]; v[i] = v[j]; v[j] = t; }
        printf("%-9s median %5.2f  (%5.2f..%5.2f)\n", names[sel[k]], v[R / 2], v[0], v[R - 1]);
    }
    return 0;
}
