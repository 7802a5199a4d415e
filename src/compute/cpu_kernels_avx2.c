/* AVX2 + FMA + F16C versions of the cpu_kernels.h float kernels. Entered only
 * after runtime detection (see ts_cpu_kernels_get). Summation order differs
 * from the scalar reference, but is fixed, so results never depend on the
 * thread count. */
#include <immintrin.h>
#include <math.h>

#include "compute/cpu_kernels.h"

static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static float dot_f32(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static float dot_f16(const float *a, const uint16_t *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i + 8)));
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i))), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * _cvtsh_ss(b[i]);
    return s;
}

static void axpy_f32(float a, const float *x, float *y, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void axpy_f16(float a, const uint16_t *x, float *y, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, vx, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++) y[i] += a * _cvtsh_ss(x[i]);
}

static void to_f16(const float *x, uint16_t *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

/* NR query rows x 16 keys per step: per element i of the head, two loads of
 * the transposed keys and NR broadcasts of q feed 2 NR FMAs into register
 * accumulators (no horizontal sums: key j is lane j). Each score is a
 * sequential sum over i. */
static inline __attribute__((always_inline)) void qk_rows(const float *q, int qs, const int NR, const float *kt, int kts, int nk,
                                                          int n, float scale, float *s, int ss) {
    const __m256 sc = _mm256_set1_ps(scale);
    for (int j0 = 0; j0 < nk; j0 += 16) {
        __m256 a[TS_ATT_NR][2];
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
        const float *k = kt + j0;
        for (int i = 0; i < n; i++, k += kts) {
            const __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8);
    #pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
                const __m256 b = _mm256_broadcast_ss(q + (size_t)r * qs + i);
                a[r][0] = _mm256_fmadd_ps(b, k0, a[r][0]);
                a[r][1] = _mm256_fmadd_ps(b, k1, a[r][1]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
            float *o = s + (size_t)r * ss + j0;
            if (j0 + 16 <= nk) {
                _mm256_storeu_ps(o, _mm256_mul_ps(a[r][0], sc));
                _mm256_storeu_ps(o + 8, _mm256_mul_ps(a[r][1], sc));
            } else {
                float t[16];
                _mm256_storeu_ps(t, _mm256_mul_ps(a[r][0], sc));
                _mm256_storeu_ps(t + 8, _mm256_mul_ps(a[r][1], sc));
                for (int j = 0; j < nk - j0; j++) o[j] = t[j];
            }
        }
    }
}
static void qk_f32(const float *q, int qs, int nr, const float *kt, int kts, int nk, int n, float scale, float *s, int ss) {
    switch (nr) {
    case 1: qk_rows(q, qs, 1, kt, kts, nk, n, scale, s, ss); break;
    case 2: qk_rows(q, qs, 2, kt, kts, nk, n, scale, s, ss); break;
    case 3: qk_rows(q, qs, 3, kt, kts, nk, n, scale, s, ss); break;
    default: qk_rows(q, qs, 4, kt, kts, nk, n, scale, s, ss); break;
    }
}

/* exp(x) for x <= 0 (arguments here are s - max): 2^k * p(r), r = x - k ln2,
 * |r| <= ln2/2, with Cephes' degree-6 polynomial for expf (~1-2 ulp); below
 * -87.3 (where expf is subnormal or 0) it gives ~1e-38 or 0, which the
 * softmax sum cannot tell apart. */
static inline __m256 exp_neg(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static float exp_sum(float *s, int n, float m) {
    const __m256 vm = _mm256_set1_ps(m), floor = _mm256_set1_ps(TS_SOFTMAX_FLOOR);
    __m256 acc = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(s + j), vm);
        __m256 e = _mm256_and_ps(exp_neg(x), _mm256_cmp_ps(x, floor, _CMP_GE_OQ));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (j < n) { /* tail through the same approximation; padded lanes masked to 0 */
        float t[8];
        for (int i = 0; i < 8; i++) t[i] = j + i < n ? s[j + i] - m : 0.0f;
        __m256 keep = _mm256_castsi256_ps(
            _mm256_cmpgt_epi32(_mm256_set1_epi32(n - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        const __m256 x = _mm256_loadu_ps(t);
        __m256 ev = _mm256_and_ps(_mm256_and_ps(exp_neg(x), keep), _mm256_cmp_ps(x, floor, _CMP_GE_OQ));
        _mm256_storeu_ps(t, ev);
        for (int i = 0; j + i < n; i++) s[j + i] = t[i];
        acc = _mm256_add_ps(acc, ev);
    }
    return hsum256(acc);
}

/* silu(g) u = g sigmoid(g) u with e = exp(-|g|) <= 1 from exp_neg (no
 * overflow either side): g / (1 + e) for g >= 0, the reference's order of
 * operations, and g e / (1 + e) below. The tail goes through the same
 * vector path, padded, so an element's value does not depend on where a
 * thread's share ends. */
static inline __m256 silu_mul8(__m256 g, __m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp_neg(_mm256_or_ps(g, _mm256_set1_ps(-0.0f)));
    const __m256 num = _mm256_blendv_ps(_mm256_mul_ps(g, e), g, _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), u);
}
static void silu_mul(const float *g, const float *u, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float tg[8] = {0}, tu[8] = {0};
        for (int j = 0; i + j < n; j++) tg[j] = g[i + j], tu[j] = u[i + j];
        _mm256_storeu_ps(tg, silu_mul8(_mm256_loadu_ps(tg), _mm256_loadu_ps(tu)));
        for (int j = 0; i + j < n; j++) out[i + j] = tg[j];
    }
}

/* y += sum_j p[j] V[j]: 64 elements of y stay in 8 registers while all keys pass */
/* NR rows x 16 elements of the output per step: per key, two loads of V and
 * NR broadcasts of the weights feed 2 NR FMAs; each element's sum runs over
 * j in order (the axpy chain), whatever NR. */
static inline __attribute__((always_inline)) void pv_rows(const float *p, int ps, const int NR, const float *V, int nk, int n, float *y,
                                                          int ys) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a[TS_ATT_NR][2];
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) a[r][0] = _mm256_loadu_ps(y + (size_t)r * ys + i), a[r][1] = _mm256_loadu_ps(y + (size_t)r * ys + i + 8);
        const float *v = V + i;
        for (int j = 0; j < nk; j++, v += n) {
            const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
#pragma GCC unroll 4
            for (int r = 0; r < NR; r++) {
                const __m256 b = _mm256_broadcast_ss(p + (size_t)r * ps + j);
                a[r][0] = _mm256_fmadd_ps(b, v0, a[r][0]);
                a[r][1] = _mm256_fmadd_ps(b, v1, a[r][1]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) _mm256_storeu_ps(y + (size_t)r * ys + i, a[r][0]), _mm256_storeu_ps(y + (size_t)r * ys + i + 8, a[r][1]);
    }
    for (; i + 8 <= n; i += 8)
        for (int r = 0; r < NR; r++) {
            __m256 a = _mm256_loadu_ps(y + (size_t)r * ys + i);
            for (int j = 0; j < nk; j++) a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + (size_t)r * ps + j), _mm256_loadu_ps(V + (size_t)j * n + i), a);
            _mm256_storeu_ps(y + (size_t)r * ys + i, a);
        }
    for (; i < n; i++)
        for (int r = 0; r < NR; r++) {
            float a = y[(size_t)r * ys + i];
            for (int j = 0; j < nk; j++) a = fmaf(p[(size_t)r * ps + j], V[(size_t)j * n + i], a);
            y[(size_t)r * ys + i] = a;
        }
}
static void pv_f32(const float *p, int ps, int nr, const float *V, int nk, int n, float *y, int ys) {
    switch (nr) {
    case 1: pv_rows(p, ps, 1, V, nk, n, y, ys); break;
    case 2: pv_rows(p, ps, 2, V, nk, n, y, ys); break;
    case 3: pv_rows(p, ps, 3, V, nk, n, y, ys); break;
    default: pv_rows(p, ps, 4, V, nk, n, y, ys); break;
    }
}

/* Two chains of 8: the serial loop was one 4-cycle maxss latency per score,
 * ~40% of the tiled attention loop's own time in a 30B-A3B prefill. maxps
 * (s, m) is s > m ? s : m per lane, so a NaN score leaves m as it was. */
static float row_max(const float *s, int n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(s + j), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(s + j + 8), m1);
    }
    if (j + 8 <= n) m0 = _mm256_max_ps(_mm256_loadu_ps(s + j), m0), j += 8;
    m0 = _mm256_max_ps(m1, m0);
    _Alignas(32) float l[8];
    _mm256_store_ps(l, m0);
    float mx = l[0];
    for (int i = 1; i < 8; i++) mx = l[i] > mx ? l[i] : mx;
    for (; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    return mx;
}

void ts_cpu_kernels_avx2(ts_cpu_kernels *k) {
    k->row_max = row_max;
    k->qk_f32 = qk_f32;
    k->exp_sum = exp_sum;
    k->pv_f32 = pv_f32;
    k->silu_mul = silu_mul;
    k->dot_f32 = dot_f32;
    k->dot_f16 = dot_f16;
    k->axpy_f32 = axpy_f32;
    k->axpy_f16 = axpy_f16;
    k->to_f16 = to_f16;
}
