/* Prefill GEMM throughput (ts_gemm, one thread) in int8 GOPS: 2 ops per
 * weight x activation multiply-add, as the panel kernels do them. Compare
 * with bench/peak_ops.c (the core's vpdpbusd / maddubs peak).
 * Build (library in build/):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/bench_gemm.c build/libturbospark.a -lm -lpthread -o build/bench_gemm
 * Run: build/bench_gemm [tokens, default 512] [cold]; TS_FORCE_ISA=avx2 for the AVX2 kernels;
 * BENCH_GEMM_SHAPE=text runs only the shapes whose name contains it (to profile one).
 * cold: each call gets another copy of the weights, ~600 MB of copies in
 * turn (more than the L3s here), so every call reads its weights from
 * memory, as a MoE prefill reads each expert from its slot once a chunk;
 * the time is per call, the best of 3 passes over the copies.
 * Shapes: the Qwen2.5-Coder-1.5B and 7B (Qwen2) matmuls, rows x n_in, with
 * the weights made by the reference quantizer (values do not change speed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "tensor/quant.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *hp_alloc(size_t n) {
    size_t a = (size_t)2 << 20;
    void *p = aligned_alloc(a, (n + a - 1) / a * a);
    if (p) madvise(p, (n + a - 1) / a * a, MADV_HUGEPAGE);
    return p;
}

int main(int argc, char **argv) {
    int ntok = argc > 1 ? atoi(argv[1]) : 512;
    if (ntok < 1 || ntok > 4096) {
        fprintf(stderr, "bench_gemm: tokens must be 1..4096\n");
        return 1;
    }
    const int cold = argc > 2 && strcmp(argv[2], "cold") == 0;
    if (argc > 2 && !cold) {
        fprintf(stderr, "bench_gemm: the second argument is 'cold' or nothing\n");
        return 1;
    }
    static const struct { const char *name; uint32_t t; int64_t rows, n; } shapes[] = {
        {"1.5B ffn_up/gate", TS_TYPE_Q4_K, 8960, 1536}, {"1.5B ffn_down", TS_TYPE_Q6_K, 1536, 8960},
        {"1.5B attn_q", TS_TYPE_Q4_K, 1536, 1536},      {"7B ffn_up/gate", TS_TYPE_Q4_K, 18944, 3584},
        {"7B ffn_down", TS_TYPE_Q4_K, 3584, 18944},     {"7B ffn_down Q6_K", TS_TYPE_Q6_K, 3584, 18944},
        {"7B up/gate Q5_K", TS_TYPE_Q5_K, 18944, 3584}, /* Q5_K_M files */
        /* a Qwen3-30B-A3B expert (bench/make_synthetic_moe.c): a MoE prefill
         * chunk gives each expert tens of tokens, not 512 (try 36) */
        {"30B-A3B exp gate", TS_TYPE_Q4_K, 768, 2048},   {"30B-A3B exp down", TS_TYPE_Q4_K, 2048, 768},
    };
    void *scratch = aligned_alloc(64, ts_gemm_scratch_bytes());
    printf("isa %s, %d tokens, 1 thread%s\n%-18s %-5s %7s %7s %9s %8s\n", ts_kernels_isa(), ntok, cold ? ", weights cold (a copy a call)" : "", "shape", "type", "rows", "n_in",
           "ms", "GOPS");
    const char *only = getenv("BENCH_GEMM_SHAPE");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        if (only && !strstr(shapes[s].name, only)) continue;
        uint32_t t = shapes[s].t;
        int64_t rows = shapes[s].rows, n = shapes[s].n;
        /* a 512-row slice: what one thread of a split matmul gets */
        int64_t rr = rows < 512 ? rows : 512;
        uint64_t ws = ts_type_row_bytes(t, (uint64_t)n), xs = ts_type_row_bytes(TS_TYPE_Q8_K, (uint64_t)n);
        /* the engine's buffers are huge-page backed (cpu.c): so are these */
        const uint64_t wb = ws * (uint64_t)rr;
        const int64_t ncopy = cold ? (int64_t)(600e6 / (double)wb) + 1 : 1;
        uint8_t *w = hp_alloc(wb * (uint64_t)ncopy), *x = hp_alloc(xs * (uint64_t)ntok);
        float *f = malloc(sizeof(float) * (size_t)n), *out = hp_alloc(sizeof(float) * (size_t)rr * (size_t)ntok);
        if (!w || !x || !f || !out) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            return 1;
        }
        for (int64_t r = 0; r < rr; r++) {
            for (int64_t i = 0; i < n; i++) f[i] = (float)(((r * 131 + i * 7919) % 2001) - 1000) * 1e-3f;
            ts_quantize_row_ref(t, f, w + r * ws, n);
        }
        for (int64_t k = 1; k < ncopy; k++) memcpy(w + (uint64_t)k * wb, w, wb);
        for (int c = 0; c < ntok; c++) {
            for (int64_t i = 0; i < n; i++) f[i] = (float)(((c * 31 + i * 104729) % 2001) - 1000) * 1e-3f;
            ts_quantize_row_ref(TS_TYPE_Q8_K, f, x + (uint64_t)c * xs, n);
        }
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now();
            for (int64_t k = 0; k < ncopy; k++) ts_gemm(t, n, w + (uint64_t)k * wb, ws, rr, x, xs, ntok, out, rr, scratch);
            double dt = (now() - t0) / (double)ncopy;
            if (dt < best) best = dt;
        }
        printf("%-18s %-5s %7lld %7lld %9.2f %8.1f\n", shapes[s].name, ts_type_name(t), (long long)rr, (long long)n, best * 1e3,
               2.0 * (double)rr * (double)n * ntok / best / 1e9);
        free(w);
        free(x);
        free(f);
        free(out);
    }
    free(scratch);
    return 0;
}
