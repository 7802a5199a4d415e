/* Helpers of the CUDA micro-benchmarks (bench/cuda/bench_*.cu).
 *
 * Method (.library METHOD.md): CUDA events around batches of launches, a
 * warm-up first, the median of many batches; inputs rotate among copies whose
 * total exceeds twice the L2 (60 MB on an H200) so memory-bound kernels are
 * timed from HBM, not from the cache; data is random, never zeros. Each
 * result is one line
 *   RESULT <family> <shape> <variant> <GB/s> GB/s <us> us [extra]
 * (GB/s = bytes read + written once / median time), which scripts/gpu-check.sh
 * collects into its summary. BENCH_QUICK=1 cuts the repetitions (smoke run). */
#ifndef TS_CUDA_BENCH_UTIL_H
#define TS_CUDA_BENCH_UTIL_H

#include <algorithm>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include "base/base.h"
#include "tensor/quant.h"
#include "tensor/types.h"
}
#include "compute/cuda/cuda_kernels.h"

#define BCU(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define BOK(call)                                                                                  \
    do {                                                                                           \
        ts_status st_ = (call);                                                                    \
        if (st_ != TS_OK) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ts_last_error());        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define BENCH_ROTATE_BYTES ((size_t)128 << 20) /* > 2 x the H200's 60 MB L2 */

static inline bool bench_quick(void) {
    const char *q = getenv("BENCH_QUICK");
    return q && strcmp(q, "1") == 0;
}

static inline void bench_require_gpu(const char *prog) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "%s: no CUDA device\n", prog);
        exit(1);
    }
    cudaDeviceProp p;
    BCU(cudaGetDeviceProperties(&p, 0));
    printf("# %s on %s (sm_%d%d, %d SMs, L2 %.0f MB, %.1f GB)\n", prog, p.name, p.major, p.minor, p.multiProcessorCount,
           p.l2CacheSize / 1e6, p.totalGlobalMem / 1e9);
}

static ts_rng bench_rng_state;
static inline void bench_seed(uint64_t s) { ts_rng_seed(&bench_rng_state, s); }
static inline double bench_uniform(void) { return (double)(ts_rng_next(&bench_rng_state) >> 11) * 0x1.0p-53; }
static inline float bench_normal(void) {
    double u1 = bench_uniform(), u2 = bench_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Random, realistic weight rows (quantized from normal data), built from a
 * few random rows repeated (quantizing 300 MB on the host would dominate the
 * run; the kernels' speed does not depend on which valid bits they read). */
static inline void bench_weights(uint32_t type, uint8_t *w, int64_t rows, int64_t n_in) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    const int distinct = 64;
    float *x = (float *)malloc(sizeof(float) * (size_t)n_in);
    for (int64_t r = 0; r < rows && r < distinct; r++) {
        for (int64_t i = 0; i < n_in; i++) x[i] = 0.05f * bench_normal();
        ts_quantize_row_ref((ts_type)type, x, w + (uint64_t)r * rb, n_in);
    }
    for (int64_t r = distinct; r < rows; r++) memcpy(w + (uint64_t)r * rb, w + (uint64_t)(r % distinct) * rb, rb);
    free(x);
}

static inline void *bench_dalloc(size_t bytes) {
    void *p = NULL;
    BCU(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

/* Copies of one device buffer so that they total >= BENCH_ROTATE_BYTES. */
struct Rotation {
    std::vector<void *> copy;
    size_t bytes;
    Rotation(const void *host, size_t b) : bytes(b) {
        size_t n = BENCH_ROTATE_BYTES / (b ? b : 1) + 1;
        if (n > 4096) n = 4096;
        for (size_t i = 0; i < n; i++) {
            void *d = bench_dalloc(b);
            BCU(cudaMemcpy(d, host, b, cudaMemcpyHostToDevice));
            copy.push_back(d);
        }
    }
    ~Rotation() {
        for (void *p : copy) cudaFree(p);
    }
    void *get(size_t i) const { return copy[i % copy.size()]; }
};

/* Median microseconds of one call of f(i) (i counts calls, for rotation). */
template <typename F> static inline double bench_time_us(F f) {
    const int batch = 10, reps = bench_quick() ? 5 : 25;
    cudaEvent_t e0, e1;
    BCU(cudaEventCreate(&e0));
    BCU(cudaEventCreate(&e1));
    size_t call = 0;
    for (int w = 0; w < 3 * batch; w++) f(call++);
    BCU(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int r = 0; r < reps; r++) {
        BCU(cudaEventRecord(e0));
        for (int b = 0; b < batch; b++) f(call++);
        BCU(cudaEventRecord(e1));
        BCU(cudaEventSynchronize(e1));
        float ms = 0;
        BCU(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.0f / batch);
    }
    BCU(cudaGetLastError());
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static inline void bench_result(const char *family, const char *shape, const char *variant, double bytes, double us,
                                const char *extra) {
    printf("RESULT %-9s %-28s %-22s %8.1f GB/s %10.2f us%s%s\n", family, shape, variant, bytes / (us * 1e3), us,
           extra ? " " : "", extra ? extra : "");
    fflush(stdout);
}

/* The model shapes the benchmarks use. */
struct Model {
    const char *name;
    int n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
};
static const Model bench_models[] = {
    {"smollm2-135m", 576, 1536, 9, 3, 64, 49152},
    {"qwen2.5-1.5b", 1536, 8960, 12, 2, 128, 151936},
    {"qwen2-7b", 3584, 18944, 28, 4, 128, 152064},
};

/* Device-to-device copy bandwidth (read + write), the ceiling for the
 * memory-bound kernels, measured in the same run. */
static inline double bench_copy_gbs(void) {
    const size_t n = (size_t)1 << 30;
    void *a = bench_dalloc(n), *b = bench_dalloc(n);
    BCU(cudaMemset(a, 1, n));
    const double us = bench_time_us([&](size_t) { BCU(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); });
    cudaFree(a);
    cudaFree(b);
    bench_result("copy", "1GiB", "d2d", 2.0 * n, us, NULL);
    return 2.0 * n / (us * 1e3);
}

#endif
