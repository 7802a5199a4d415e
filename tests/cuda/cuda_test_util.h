/* Helpers shared by the CUDA tests (tests/cuda/test_cuda_*.cu).
 *
 * Rules every test follows (docs/KERNELS.md, CUDA section):
 * - fresh random inputs each run (seed printed; TS_TEST_SEED=N repeats one);
 * - device outputs poisoned (all bits set: a NaN) before each launch, and
 *   every element checked written afterwards;
 * - error ||out - ref|| / ||ref|| (double) against a threshold justified where
 *   it is used; NaN never passes;
 * - one line per kernel/type/shape, then "N passed, N failed"; exit 1 on any
 *   failure;
 * - no CUDA device: fail, unless TS_ALLOW_NO_GPU=1, which prints a SKIPPED
 *   line and exits 77 (CTest reports it as skipped, not passed). */
#ifndef TS_CUDA_TEST_UTIL_H
#define TS_CUDA_TEST_UTIL_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "base/base.h"
#include "tensor/quant.h"
#include "tensor/types.h"
}
#include "../test_util.h"
#include "compute/cuda/cuda_kernels.h"

#define TCU_SKIP_CODE 77

/* Aborts the test program: used for failures of the harness itself (an
 * allocation, a copy), which are not results. */
#define TCU(call)                                                                                      \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));     \
            tu_failed++;                                                                               \
            exit(tu_finish());                                                                         \
        }                                                                                              \
    } while (0)

/* A launcher's status: a failure is a test failure with its message. */
#define TCU_OK(call, what)                                                                             \
    do {                                                                                               \
        ts_status st_ = (call);                                                                        \
        CHECKF(st_ == TS_OK, "%s: %s: %s", what, ts_status_name(st_), ts_last_error());              \
    } while (0)

/* No GPU: fail, or skip visibly with TS_ALLOW_NO_GPU=1. Returns only with a device. */
static inline void tcu_require_gpu(const char *prog) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
            printf("%s: device 0: %s, sm_%d%d, %d SMs, %.0f MiB\n", prog, p.name, p.major, p.minor,
                   p.multiProcessorCount, (double)p.totalGlobalMem / 1048576.0);
        return;
    }
    const char *allow = getenv("TS_ALLOW_NO_GPU");
    if (allow && strcmp(allow, "1") == 0) {
        printf("%s: SKIPPED: no CUDA device (%s); TS_ALLOW_NO_GPU=1. Nothing was tested.\n", prog,
               e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
        exit(TCU_SKIP_CODE);
    }
    fprintf(stderr, "%s: no CUDA device (%s): FAIL (set TS_ALLOW_NO_GPU=1 to skip on a machine without one)\n", prog,
            e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    tu_failed++;
    exit(tu_finish());
}

/* TS_CUDA_TEST_SMALL=1: a few small cases only, for runs under
 * compute-sanitizer (memcheck / racecheck), which are 10-100x slower. */
static inline bool tcu_small(void) {
    const char *s = getenv("TS_CUDA_TEST_SMALL");
    return s && strcmp(s, "1") == 0;
}

/* ---- random data ---- */
static ts_rng tcu_rng_state;

static inline uint64_t tcu_seed_init(const char *prog) {
    const char *s = getenv("TS_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)clock();
    ts_rng_seed(&tcu_rng_state, seed);
    printf("%s: seed %llu (TS_TEST_SEED=%llu repeats this run)\n", prog, (unsigned long long)seed,
           (unsigned long long)seed);
    return seed;
}
static inline uint64_t tcu_u64(void) { return ts_rng_next(&tcu_rng_state); }
static inline double tcu_uniform(void) { return (double)(tcu_u64() >> 11) * 0x1.0p-53; }
/* uniform in [lo, hi) */
static inline float tcu_uf(float lo, float hi) { return lo + (hi - lo) * (float)tcu_uniform(); }
/* standard normal (Box-Muller) */
static inline float tcu_normal(void) {
    double u1 = tcu_uniform(), u2 = tcu_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline void tcu_fill_normal(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * tcu_normal();
}
static inline void tcu_fill_bytes(void *p, size_t n) {
    uint8_t *b = (uint8_t *)p;
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)tcu_u64();
}

/* A finite f16 scale of moderate size, random sign: |s| in [2^-14, 2^-2). */
static inline uint16_t tcu_f16_scale(void) {
    float v = ldexpf(tcu_uf(1.0f, 2.0f), -2 - (int)(tcu_u64() % 12));
    if (tcu_u64() & 1) v = -v;
    return ts_f32_to_f16(v);
}

/* Weight rows of a type: half the blocks quantized from normal data (the
 * realistic case), half random bytes with every scale field made a finite
 * f16 (all quant bit patterns, negative and tiny scales). Rows are
 * row_bytes apart. */
static inline void tcu_fill_weights(uint32_t type, uint8_t *w, int64_t n_rows, int64_t n_in) {
    const ts_type_traits *tt = ts_type_get(type);
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    float *tmp = (float *)malloc(sizeof(float) * (size_t)n_in);
    for (int64_t r = 0; r < n_rows; r++) {
        uint8_t *row = w + (uint64_t)r * rb;
        if (type == TS_TYPE_F32 || type == TS_TYPE_F16 || type == TS_TYPE_BF16 || (r & 1) == 0) {
            tcu_fill_normal(tmp, (size_t)n_in, 0.5f);
            ts_quantize_row_ref((ts_type)type, tmp, row, n_in);
            continue;
        }
        tcu_fill_bytes(row, rb);
        const int64_t nb = n_in / tt->block_elems;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = row + (uint64_t)b * tt->block_bytes;
            uint16_t h;
            switch (type) {
            case TS_TYPE_Q4_0: case TS_TYPE_Q5_0: case TS_TYPE_Q8_0: case TS_TYPE_IQ4_NL:
                h = tcu_f16_scale(); memcpy(blk, &h, 2); break;
            case TS_TYPE_Q4_1: case TS_TYPE_Q5_1:
                h = tcu_f16_scale(); memcpy(blk, &h, 2);
                h = tcu_f16_scale(); memcpy(blk + 2, &h, 2); break;
            case TS_TYPE_MXFP4: blk[0] = (uint8_t)(110 + tcu_u64() % 30); break;
            case TS_TYPE_Q2_K:
                h = tcu_f16_scale(); memcpy(blk + 80, &h, 2);
                h = tcu_f16_scale(); memcpy(blk + 82, &h, 2); break;
            case TS_TYPE_Q3_K: h = tcu_f16_scale(); memcpy(blk + 108, &h, 2); break;
            case TS_TYPE_Q4_K: case TS_TYPE_Q5_K:
                h = tcu_f16_scale(); memcpy(blk, &h, 2);
                h = tcu_f16_scale(); memcpy(blk + 2, &h, 2); break;
            case TS_TYPE_Q6_K: h = tcu_f16_scale(); memcpy(blk + 208, &h, 2); break;
            default: break;
            }
        }
    }
    free(tmp);
}

/* ---- comparisons ---- */
/* ||a - b|| / ||b|| in double; +inf when anything is NaN/inf or b is zero. */
static inline double tcu_rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

#define TCU_POISON_BYTE 0xff
/* Elements still bit-equal to the poison (all ones, a NaN) after a launch. */
static inline size_t tcu_unwritten(const void *p, size_t n_elems, size_t elem_bytes) {
    const uint8_t *b = (const uint8_t *)p;
    size_t bad = 0;
    for (size_t i = 0; i < n_elems; i++) {
        size_t k = 0;
        while (k < elem_bytes && b[i * elem_bytes + k] == TCU_POISON_BYTE) k++;
        bad += k == elem_bytes;
    }
    return bad;
}

static inline void *tcu_dalloc(size_t bytes) {
    void *p = NULL;
    TCU(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
static inline void tcu_poison(void *d, size_t bytes) { TCU(cudaMemset(d, TCU_POISON_BYTE, bytes)); }
static inline void tcu_up(void *d, const void *h, size_t bytes) { TCU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }
static inline void tcu_down(void *h, const void *d, size_t bytes) { TCU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost)); }
static inline void tcu_sync(const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "%s: kernel failed: %s", what, cudaGetErrorString(e));
    if (e != cudaSuccess) exit(tu_finish()); /* the context is unusable after a device fault */
}

/* One result line; returns whether it passed. */
static inline int tcu_report(const char *what, double err, double tol, size_t unwritten) {
    int ok = err <= tol && unwritten == 0;
    printf("%-60s rel %.3e (tol %.0e)%s %s\n", what, err, tol, unwritten ? " UNWRITTEN" : "", ok ? "ok" : "FAIL");
    if (unwritten) printf("    %zu elements never written\n", unwritten);
    CHECKF(ok, "%s: rel %.3e > %.0e or %zu unwritten", what, err, tol, unwritten);
    return ok;
}

/* Host copy of activation rows in the CPU partner format converted to the
 * device's q8 layout (ts_cuda_q8_bytes): what ts_cuda_quantize_q8 must produce. */
static inline void tcu_q8_from_cpu(uint32_t partner, const uint8_t *cpu_rows, int64_t n_in, int n_tok, uint8_t *out) {
    const bool k = partner == TS_TYPE_Q8_K;
    const int64_t nd = k ? n_in / 256 : n_in / 32, ns = k ? n_in / 16 : n_in / 32;
    const size_t a = ((size_t)n_tok * (size_t)n_in + 255) & ~(size_t)255;
    const size_t b = a + (((size_t)n_tok * (size_t)nd * 4 + 255) & ~(size_t)255);
    const uint64_t rb = ts_type_row_bytes(partner, (uint64_t)n_in);
    for (int t = 0; t < n_tok; t++) {
        const uint8_t *row = cpu_rows + (uint64_t)t * rb;
        int8_t *qs = (int8_t *)out + (size_t)t * (size_t)n_in;
        float *d = (float *)(out + a) + (size_t)t * (size_t)nd;
        int32_t *s = (int32_t *)(out + b) + (size_t)t * (size_t)ns;
        for (int64_t i = 0; i < nd; i++) {
            if (k) {
                ts_block_q8_K blk;
                memcpy(&blk, row + (size_t)i * sizeof blk, sizeof blk);
                d[i] = blk.d;
                memcpy(qs + i * 256, blk.qs, 256);
                for (int j = 0; j < 16; j++) s[i * 16 + j] = blk.bsums[j];
            } else {
                ts_block_q8_0 blk;
                memcpy(&blk, row + (size_t)i * sizeof blk, sizeof blk);
                d[i] = ts_f16_to_f32(blk.d);
                memcpy(qs + i * 32, blk.qs, 32);
                int sum = 0;
                for (int j = 0; j < 32; j++) sum += blk.qs[j];
                s[i] = sum;
            }
        }
    }
}

static const uint32_t tcu_all_types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q4_0, TS_TYPE_Q4_1,
                                         TS_TYPE_Q5_0, TS_TYPE_Q5_1, TS_TYPE_Q8_0, TS_TYPE_Q2_K, TS_TYPE_Q3_K,
                                         TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K, TS_TYPE_IQ4_NL, TS_TYPE_MXFP4};
#define TCU_N_TYPES (sizeof tcu_all_types / sizeof tcu_all_types[0])

#endif
