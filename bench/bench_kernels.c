/* Dot-kernel throughput in GB/s of weight bytes, per type and ISA.
 * Build (from the repo root, after building the library in build-quant):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/bench_kernels.c build-quant/libturbospark.a -lm -lpthread -o build-quant/bench_kernels
 * Run: build-quant/bench_kernels [MB of weights, default 256] [types...]
 * "dram": one matvec over a matrix much larger than the caches (decode);
 * "l2": the same over 192 KiB of weights (kernel compute limit);
 * "tile4": ts_gemm_tile with 4 activation rows, weight GB/s per activation row
 * (i.e. 4x the weight bytes / time); "read": a plain vector read of the
 * same buffer, the memory bandwidth this thread can reach. */
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

static volatile float sink;

static double bench_rows(uint32_t t, int64_t n, const uint8_t *w, uint64_t rs, int64_t rows, const void *x, float *out,
                         double min_time) {
    double best = 1e30, total = 0;
    int reps = 0;
    while (total < min_time || reps < 3) {
        double t0 = now();
        ts_vec_dot_rows(t, n, w, rs, rows, x, out);
        double dt = now() - t0;
        total += dt;
        reps++;
        if (dt < best) best = dt;
        sink = out[0];
    }
    return (double)rs * rows / best / 1e9;
}

static double bench_tile(uint32_t t, int64_t n, const uint8_t *w, uint64_t rs, int64_t rows, const void *x, uint64_t xs,
                         float *out, double min_time) {
    double best = 1e30, total = 0;
    int reps = 0;
    while (total < min_time || reps < 3) {
        double t0 = now();
        ts_gemm_tile(t, n, w, rs, rows, x, xs, 4, out, rows);
        double dt = now() - t0;
        total += dt;
        reps++;
        if (dt < best) best = dt;
        sink = out[0];
    }
    return 4.0 * (double)rs * rows / best / 1e9;
}

int main(int argc, char **argv) {
    double mb = argc > 1 ? atof(argv[1]) : 256;
    static const uint32_t types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q8_0, TS_TYPE_Q4_0,
                                     TS_TYPE_Q4_1, TS_TYPE_Q5_0, TS_TYPE_Q5_1, TS_TYPE_IQ4_NL, TS_TYPE_MXFP4,
                                     TS_TYPE_Q2_K, TS_TYPE_Q3_K, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};
    const int64_t n = 4096;
    uint64_t cap = (uint64_t)(mb * 1e6);
    uint8_t *w = aligned_alloc(64, cap + 4096);
    for (uint64_t i = 0; i < cap; i++) w[i] = (uint8_t)(i * 2654435761u >> 13);
    float *xf = malloc(sizeof(float) * n * 4), *out = malloc(sizeof(float) * 4 * (cap / 64 + 16));
    uint8_t *x = malloc(ts_type_row_bytes(TS_TYPE_F32, n) * 4);
    for (int64_t i = 0; i < n * 4; i++) xf[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;

    /* read bandwidth of this thread */
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        uint64_t s = 0;
        const uint64_t *p = (const uint64_t *)w;
        for (uint64_t i = 0; i < cap / 8; i += 8) s += p[i] ^ p[i + 1] ^ p[i + 2] ^ p[i + 3] ^ p[i + 4] ^ p[i + 5] ^ p[i + 6] ^ p[i + 7];
        double dt = now() - t0;
        if (dt < best) best = dt;
        sink = (float)s;
    }
    printf("read %.1f GB/s (%.0f MB, 1 thread)\n", cap / best / 1e9, mb);
    printf("%-7s %-7s %8s %8s %8s\n", "type", "isa", "dram", "l2", "tile4");
    int max = ts_kernels_isa_max();
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        uint32_t t = types[ti];
        if (argc > 2) {
            int want = 0;
            for (int a = 2; a < argc; a++) want |= !strcmp(argv[a], ts_type_name(t));
            if (!want) continue;
        }
        uint64_t rs = ts_type_row_bytes(t, n);
        int64_t rows = (int64_t)(cap / rs), rows_l2 = (int64_t)(192 * 1024 / rs);
        uint32_t p = ts_type_dot_partner(t);
        uint64_t xs = ts_type_row_bytes(p, n);
        for (int c = 0; c < 4; c++) ts_quantize_row_ref(p, xf + c * n, x + c * xs, n);
        /* make the weights valid blocks of moderate scale */
        for (int64_t r = 0; r < rows; r += 1) {
            if (r < 64) ts_quantize_row_ref(t, xf, w + r * rs, n);
            else memcpy(w + r * rs, w + (r % 64) * rs, rs);
        }
        for (int isa = max; isa >= 0; isa--) {
            ts_kernels_set_isa(isa);
            double dram = bench_rows(t, n, w, rs, rows, x, out, 0.5);
            double l2 = bench_rows(t, n, w, rs, rows_l2, x, out, 0.2);
            double tile = bench_tile(t, n, w, rs, rows_l2, x, xs, out, 0.2);
            printf("%-7s %-7s %8.2f %8.2f %8.2f\n", ts_type_name(t), ts_isa_name(isa), dram, l2, tile);
            fflush(stdout);
        }
        ts_kernels_set_isa(max);
    }
    free(w);
    free(xf);
    free(out);
    free(x);
    return 0;
}
