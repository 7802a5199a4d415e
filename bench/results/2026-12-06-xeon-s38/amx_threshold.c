/* Session 38 harness (the AMX threshold after the VNNI kernel's vpdpwssd scale step and correction per 32; session 37's
 * amx_threshold.c with a Q5_K shape): one thread, ts_gemm at the AVX-512
 * level against the AMX level on the same weights and tokens, interleaved in one process (the VM's speed moves),
 * best of 9 x 10 calls, by token count, for three shapes: Q4_K 384 x 2048 (one thread's share of a 30B-A3B
 * expert gate), Q4_K 512 x 3584 (a 7B ffn_up slice), Q6_K 256 x 8960 (a 1.5B ffn_down slice). Build against a
 * library whose TS_GP_AMX_MIN_COLS is 16 (else the AMX level runs the AVX-512 kernels under it):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude amx_threshold.c build-rel/libturbospark.a -lm -lpthread */
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
int main(void) {
    static const struct { ts_type t; int64_t rows, n; const char *name; } sh[] = {
        {TS_TYPE_Q4_K, 384, 2048, "Q4_K 384x2048"}, {TS_TYPE_Q4_K, 512, 3584, "Q4_K 512x3584"}, {TS_TYPE_Q6_K, 256, 8960, "Q6_K 256x8960"}, {TS_TYPE_Q5_K, 512, 3584, "Q5_K 512x3584"}};
    static const int nts[] = {16, 32, 48, 64, 96, 128, 192, 256};
    printf("isa %s\n", ts_kernels_isa());
    void *scr = aligned_alloc(64, ts_gemm_scratch_bytes());
    for (int k = 0; k < 4; k++) {
        const ts_type t = sh[k].t;
        const int64_t rows = sh[k].rows, n = sh[k].n;
        const uint64_t ws = ts_type_row_bytes(t, n), xs = ts_type_row_bytes(TS_TYPE_Q8_K, n);
        uint8_t *w = aligned_alloc(64, ws * rows), *x = aligned_alloc(64, xs * 256);
        float *f = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * rows * 256);
        srand(1);
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < n; i++) f[i] = (float)rand() / RAND_MAX - 0.5f;
            ts_quantize_row(t, f, w + r * ws, n);
        }
        for (int c = 0; c < 256; c++) {
            for (int i = 0; i < n; i++) f[i] = (float)rand() / RAND_MAX - 0.5f;
            ts_quantize_row(TS_TYPE_Q8_K, f, x + c * xs, n);
        }
        for (size_t q = 0; q < sizeof nts / sizeof *nts; q++) {
            const int nt = nts[q];
            double ba = 1e9, bm = 1e9;
            for (int rep = 0; rep < 9; rep++) {
                ts_kernels_set_isa(TS_ISA_AVX512);
                double t0 = now();
                for (int i = 0; i < 10; i++) ts_gemm(t, n, w, ws, rows, x, xs, nt, out, rows, scr);
                ts_kernels_set_isa(TS_ISA_AMX);
                double t1 = now();
                for (int i = 0; i < 10; i++) ts_gemm(t, n, w, ws, rows, x, xs, nt, out, rows, scr);
                double t2 = now();
                if ((t1 - t0) / 10 < ba) ba = (t1 - t0) / 10;
                if ((t2 - t1) / 10 < bm) bm = (t2 - t1) / 10;
            }
            printf("%s nt %3d  avx512 %8.1f us  amx %8.1f us  amx/avx512 %.2f\n", sh[k].name, nt, ba * 1e6, bm * 1e6, bm / ba);
        }
        free(w), free(x), free(f), free(out);
    }
    free(scr);
    return 0;
}
