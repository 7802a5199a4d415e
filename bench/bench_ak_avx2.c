/* The AVX2 prefill micro-kernel alone (src/tensor/gemm_avx2.c's ak_Q4_K_3:
 * 16 rows x 3 tokens of a packed Q4_K panel), on a panel already packed and
 * resident in L1/L2, next to the ceiling of its inner loop: a register-only
 * vpmaddubsw + vpaddw pair (the kernel sums maddubs outputs in i16 before one
 * madd per sub-block, so that pair, not bench/peak_ops.c's maddubs + madd +
 * add, is its arithmetic). GOPS counts a multiply-add as 2. One thread.
 * Build (library in build-rel/, AVX2 machine):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -mavx2 -mfma -mf16c -Isrc -Iinclude bench/bench_ak_avx2.c \
 *       build-rel/libturbospark.a -lm -lpthread -o build-rel/bench_ak_avx2
 * Run: build-rel/bench_ak_avx2 (prints three lines per panel length) */
#include "../src/tensor/gemm_avx2.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* 12 independent maddubs + paddw chains: the i16-summing kernel's ceiling */
static double pair_gops(void) {
    __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(5), z = _mm256_setzero_si256();
    __m256i a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z, a8 = z, a9 = z, a10 = z, a11 = z;
    const long n = 20000000;
    double t = now();
    for (long i = 0; i < n; i++) {
#define P(a) a = _mm256_add_epi16(a, _mm256_maddubs_epi16(w, x)); __asm__ volatile("" : "+x"(x));
        P(a0) P(a1) P(a2) P(a3) P(a4) P(a5) P(a6) P(a7) P(a8) P(a9) P(a10) P(a11)
#undef P
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9),
                         "+x"(a10), "+x"(a11));
    }
    t = now() - t;
    return 12.0 * n * 64 / t / 1e9;
}

int main(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "bench_ak_avx2: this CPU has no AVX2/FMA\n");
        return 1;
    }
    const size_t sbb = TS_GP_SB_BYTES(8);
    uint8_t *panel = aligned_alloc(64, sbb * TS_GP_KSEG);
    uint8_t *x = aligned_alloc(64, 3 * TS_GP_KSEG * QK_BYTES + 64);
    float *out = aligned_alloc(64, sizeof(float) * 4096);
    if (!panel || !x || !out) return 1;
    srand(1);
    for (size_t i = 0; i < sbb * TS_GP_KSEG; i++) panel[i] = (uint8_t)(rand() & 15); /* quants and scales: speed only */
    for (size_t i = 0; i < 3 * TS_GP_KSEG * QK_BYTES; i++) x[i] = (uint8_t)(rand() & 63);
    /* but normal floats where the kernel reads floats (d, dm; each block's
     * dx): random bytes there are ~1e-30, whose products are subnormal, and
     * Intel cores take a microcode assist on each (session 35, the 2-core
     * Xeon: 2.2-2.4x the kernel's time with them, so it read 42 GOPS) */
    for (int s = 0; s < TS_GP_KSEG; s++) {
        float *d = (float *)(panel + (size_t)s * sbb + TS_GP_Q + 8 * 128 + 8 * 128);
        for (int i = 0; i < 64; i++) d[i] = 1e-3f * (float)(1 + (rand() & 7)); /* d[32], then dm[32] */
    }
    for (int b = 0; b < 3 * TS_GP_KSEG; b++) {
        const float dx = 1e-2f * (float)(1 + (rand() & 7));
        memcpy(x + (size_t)b * QK_BYTES, &dx, sizeof dx);
    }
    for (int i = 0; i < 4096; i++) out[i] = 0;
    const uint8_t *xr[3] = {x, x + TS_GP_KSEG * QK_BYTES, x + 2 * TS_GP_KSEG * QK_BYTES};
    _Alignas(32) uint8_t bp[3 * TS_GP_KSEG * 16];
    gp_bs32_pairs(xr, 3, TS_GP_KSEG, TS_GP_KSEG, bp);
    printf("maddubs+paddw register loop: %.1f GOPS\n", pair_gops());
    static const int nss[] = {1, TS_GP_KSEG};
    for (int k = 0; k < 2; k++) {
        const int ns = nss[k];
        const long iters = 1600000 / ns;
        for (int rep = 0; rep < 3; rep++) {
            double t = now();
            for (long it = 0; it < iters; it++) {
                ak_Q4_K_3(panel, ns, (int)(it & 1), xr, bp, TS_GP_KSEG, out, 64, 16, 0);
                __asm__ volatile("" ::: "memory");
            }
            t = now() - t;
            printf("ak_Q4_K_3, %d super-block(s) a call: %.1f GOPS (%.0f ns a call)\n", ns, (double)iters * 16 * 3 * 256 * ns * 2 / t / 1e9,
                   t / iters * 1e9);
        }
    }
    free(panel);
    free(x);
    free(out);
    return 0;
}
