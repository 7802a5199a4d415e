/* Session 39: dumps the K-quant dot and tile outputs (ts_vec_dot_rows,
 * ts_gemm_tile at 1-4 columns, ts_vec_dot) on random data at every x86 level
 * the CPU has, for a bit-for-bit comparison of two library builds (run.sh bits) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensor/quant.h"
#include "tensor/types.h"
static uint64_t st = 88172645463325252ull;
static uint32_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (uint32_t)st; }
static float frand(void) { return (rnd() & 0xffffff) / 16777216.0f * 2 - 1; }
int main(void) {
    const ts_type ts[] = {TS_TYPE_Q2_K, TS_TYPE_Q3_K, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};
    const int64_t n = 256 * 37, rows = 67;
    float *wf = malloc(sizeof(float) * n), *xf = malloc(sizeof(float) * n * 4), *out = malloc(sizeof(float) * rows * 4);
    for (int isa = 1; isa <= ts_kernels_isa_max(); isa++) {
        ts_kernels_set_isa(isa);
        st = 88172645463325252ull;
        for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
            ts_type t = ts[ti];
            size_t rs = ts_type_row_bytes(t, n), xs = ts_type_row_bytes(TS_TYPE_Q8_K, n);
            uint8_t *w = malloc(rs * rows), *x = malloc(xs * 4);
            for (int64_t r = 0; r < rows; r++) {
                float sc = r % 3 == 0 ? 100.f : 1.f;
                for (int64_t i = 0; i < n; i++) wf[i] = frand() * sc;
                ts_quantize_row_ref(t, wf, w + r * rs, n);
            }
            for (int c = 0; c < 4; c++) {
                for (int64_t i = 0; i < n; i++) xf[i] = frand() * (c + 1);
                ts_quantize_row(TS_TYPE_Q8_K, xf, x + c * xs, n);
            }
            ts_vec_dot_rows(t, n, w, rs, rows, x, out);
            fwrite(out, sizeof(float), rows, stdout);
            for (int nc = 1; nc <= 4; nc++) {
                ts_gemm_tile(t, n, w, rs, rows, x, xs, nc, out, rows);
                fwrite(out, sizeof(float), rows * nc, stdout);
            }
            for (int64_t r = 0; r < 3; r++) { float v = ts_vec_dot(t, n, w + r * rs, x); fwrite(&v, 4, 1, stdout); }
            free(w); free(x);
        }
        fprintf(stderr, "isa %s done\n", ts_kernels_isa());
    }
    return 0;
}
