/* The AVX2 panel packer alone (src/tensor/gemm_avx2.c, ts_q_gemm_pack_avx2):
 * the time to pack a 512-row slice of one weight, every 32-row unit and
 * TS_GP_KSEG segment, as agemm does before its micro-kernel calls. A MoE
 * prefill gives each expert tens of tokens, so this cost is not amortized
 * the way a dense projection's is (docs/BENCHMARKS.md, session 27). The
 * weights are hot in cache: this is the packer's own work, not the first
 * touch of an expert's rows.
 *
 * Build (library in build-rel/, AVX2 machine):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/bench_pack_avx2.c \
 *       build-rel/libturbospark.a -lm -lpthread -o build-rel/bench_pack_avx2
 * Run: build-rel/bench_pack_avx2 (best of 5, five times, per shape) */
#define TS_QUANT_INTERNAL
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tensor/quant.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    if (ts_kernels_isa_max() < TS_ISA_AVX2) {
        fprintf(stderr, "bench_pack_avx2: this CPU has no AVX2\n");
        return 1;
    }
    static const struct { const char *name; ts_type t; int64_t rows, n; } shapes[] = {
        {"30B-A3B exp gate", TS_TYPE_Q4_K, 512, 2048}, {"30B-A3B exp down", TS_TYPE_Q4_K, 512, 768},
        {"7B up/gate Q5_K", TS_TYPE_Q5_K, 512, 3584},  {"1.5B ffn_down", TS_TYPE_Q6_K, 512, 8960},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const ts_type t = shapes[k].t;
        const int64_t rows = shapes[k].rows, n = shapes[k].n, nsb = n / TS_QK_K;
        const uint64_t ws = ts_type_row_bytes(t, (uint64_t)n);
        uint8_t *w = aligned_alloc(64, ws * (uint64_t)rows);
        float *f = malloc(sizeof(float) * (size_t)n);
        uint8_t *panel = aligned_alloc(64, (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(16));
        if (!w || !f || !panel) {
            fprintf(stderr, "bench_pack_avx2: out of memory\n");
            return 1;
        }
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t i = 0; i < n; i++) f[i] = (float)(((r * 131 + i * 7919) % 2001) - 1000) * 1e-3f;
            ts_quantize_row_ref(t, f, w + (uint64_t)r * ws, n);
        }
        printf("%-18s %-5s %lld x %lld:", shapes[k].name, ts_type_name(t), (long long)rows, (long long)n);
        for (int rep = 0; rep < 5; rep++) {
            double best = 1e30;
            for (int b = 0; b < 5; b++) {
                const double t0 = now();
                for (int64_t r0 = 0; r0 < rows; r0 += TS_GP_ROWS)
                    for (int64_t s0 = 0; s0 < nsb; s0 += TS_GP_KSEG)
                        ts_q_gemm_pack_avx2(t, w + (uint64_t)r0 * ws, ws, TS_GP_ROWS, s0,
                                            (int)(nsb - s0 < TS_GP_KSEG ? nsb - s0 : TS_GP_KSEG), panel);
                const double dt = now() - t0;
                if (dt < best) best = dt;
            }
            printf(" %.1f", best * 1e6);
        }
        printf(" us\n");
        free(w);
        free(f);
        free(panel);
    }
    return 0;
}
