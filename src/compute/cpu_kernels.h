/* Small float kernels of the CPU backend (attention dots over the KV cache,
 * element-wise activations), with a scalar reference and an AVX2+F16C+FMA
 * version picked once at runtime. Internal to src/compute. */
#ifndef TS_CPU_KERNELS_H
#define TS_CPU_KERNELS_H

#include <math.h>
#include <stdint.h>

/* A softmax weight under 2^-64 of its row's largest is 0 (exp_sum, the
 * reference, and the callers' rescales): far below what the float sums can
 * resolve, and it keeps p * V out of the subnormal range, where every such
 * multiply takes a microcode assist on x86 (the 7B prefill on a Xeon spent
 * about a third of its time there). exp(x - m) for x - m < this is 0. */
#define TS_SOFTMAX_FLOOR (-44.3614196f) /* ln 2^-64 */

/* query rows per qk_f32 / pv_f32 call */
#define TS_ATT_NR 4

/* exp(x) for a softmax argument x = s - max <= 0, 0 under the floor: the
 * scalar form every caller and the reference use */
static inline float ts_softmax_exp(float x) { return x < TS_SOFTMAX_FLOOR ? 0.0f : expf(x); }

typedef struct ts_cpu_kernels {
    float (*dot_f32)(const float *a, const float *b, int n);
    float (*dot_f16)(const float *a, const uint16_t *b, int n);
    void (*axpy_f32)(float a, const float *x, float *y, int n);      /* y += a x */
    void (*axpy_f16)(float a, const uint16_t *x, float *y, int n);   /* y += a x */
    void (*to_f16)(const float *x, uint16_t *y, int n);
    /* attention over a block of keys (tiled prefill path), nr = 1..TS_ATT_NR
     * query rows at a time so each key element loaded serves all of them:
     * qk: s[r*ss + j] = scale * sum_i q[r*qs + i] kt[i*kts + j] (i < n, j < nk;
     * kt: the keys transposed, n rows of kts floats, kts >= nk rounded up to
     * 16, the columns past nk finite) */
    void (*qk_f32)(const float *q, int qs, int nr, const float *kt, int kts, int nk, int n, float scale, float *s, int ss);
    float (*exp_sum)(float *s, int n, float m); /* s[j] = exp(s[j] - m) (0 under the floor); returns sum */
    /* max of s[0..n), NaNs passed over, -inf for none: the value of the
     * serial s[j] > m ? s[j] : m (max is exact; only a zero's sign may
     * differ, which no softmax step can see) */
    float (*row_max)(const float *s, int n);
    /* pv: y[r*ys + i] += sum_j p[r*ps + j] V[j*n + i], each element's sum in
     * increasing j */
    void (*pv_f32)(const float *p, int ps, int nr, const float *V, int nk, int n, float *y, int ys);
    /* out[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i]; out may be g */
    void (*silu_mul)(const float *g, const float *u, float *out, int64_t n);
} ts_cpu_kernels;

/* The kernels for this CPU (TS_FORCE_ISA=scalar selects the references). */
const ts_cpu_kernels *ts_cpu_kernels_get(void);
void ts_cpu_kernels_ref(ts_cpu_kernels *k);
#if defined(__x86_64__)
void ts_cpu_kernels_avx2(ts_cpu_kernels *k);
#endif

#endif
