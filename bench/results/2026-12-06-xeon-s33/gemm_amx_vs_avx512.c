/* Session 33 scratch harness (the record of the AMX threshold): one thread, ts_gemm at the AVX-512 level against
 * the AMX level on the same weights and tokens, best of 7 x 20 calls, by token count. Without an argument: Q4_K,
 * 384 x 2048 (one thread's share of a 30B-A3B expert gate), gemm_amx_vs_avx512.txt; with "q6k": Q6_K, 256 x 8960,
 * gemm_amx_vs_avx512_q6k.txt. Build against 9bf9198's library (before the threshold; after it, the AMX level runs
 * the AVX-512 kernels under TS_GP_AMX_MIN_COLS tokens):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude gemm_amx_vs_avx512.c libturbospark.a -lm -lpthread
 * (The two runs were made from two copies of this file that differed only in the type, shape and token list;
 * merged afterwards.) */
#define TS_QUANT_INTERNAL
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tensor/quant.h"
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    const int q6 = argc > 1 && !strcmp(argv[1], "q6k");
    const ts_type t = q6 ? TS_TYPE_Q6_K : TS_TYPE_Q4_K;
    const int64_t rows = q6 ? 256 : 384, n = q6 ? 8960 : 2048;
    static const int nts4[] = {64, 80, 96, 112, 128, 160, 192, 256, 320, 384, 448, 512};
    static const int nts6[] = {32, 64, 128, 192, 256, 320, 384, 448, 512, 512, 512, 512};
    const int *nts = q6 ? nts6 : nts4;
    const uint64_t ws = ts_type_row_bytes(t, n), xs = ts_type_row_bytes(TS_TYPE_Q8_K, n);
    uint8_t *w = aligned_alloc(64, ws * rows), *x = aligned_alloc(64, xs * 512);
    float *f = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * rows * 512);
    srand(1);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) f[i] = (float)rand() / RAND_MAX - 0.5f;
        ts_quantize_row(t, f, w + r * ws, n);
    }
    for (int c = 0; c < 512; c++) {
        for (int i = 0; i < n; i++) f[i] = (float)rand() / RAND_MAX - 0.5f;
        ts_quantize_row(TS_TYPE_Q8_K, f, x + c * xs, n);
    }
    void *scr = aligned_alloc(64, ts_gemm_scratch_bytes());
    printf("isa %s\n", ts_kernels_isa());
    for (int q = 0; q < 12; q++) {
        const int nt = nts[q];
        double ba = 1e9, bm = 1e9;
        for (int rep = 0; rep < 7; rep++) {
            double t0 = now();
            ts_kernels_set_isa(TS_ISA_AVX512);
            for (int k = 0; k < 20; k++) ts_gemm(t, n, w, ws, rows, x, xs, nt, out, rows, scr);
            ts_kernels_set_isa(TS_ISA_AMX);
            double t1 = now();
            for (int k = 0; k < 20; k++) ts_gemm(t, n, w, ws, rows, x, xs, nt, out, rows, scr);
            double t2 = now();
            if ((t1 - t0) / 20 < ba) ba = (t1 - t0) / 20;
            if ((t2 - t1) / 20 < bm) bm = (t2 - t1) / 20;
        }
        printf("nt %d  avx512 %7.1f us  amx %7.1f us  amx/avx512 %.2f\n", nt, ba * 1e6, bm * 1e6, bm / ba);
    }
}
