/* CPU attention: the tiled prefill path (n_tok > 1: blocks of queries x
 * blocks of keys, online softmax) and the decode path (n_tok == 1, one
 * scores row per (token, head)) against a double-precision softmax computed
 * here from the cached K/V, on random data: F16 and F32 caches, GQA and MHA,
 * sliding windows, chunks that start after earlier context, query blocks and
 * key blocks that do not divide the chunk; and bit-identical results for 1,
 * 2 and 3 threads. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/backend.h"
#include "compute/cpu_kernels.h"
#include "tensor/quant.h"
#include "test_util.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float frand(void) { /* [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1p-53) * 2.0f - 1.0f;
}

typedef struct {
    int n_head, n_head_kv, hd, window, pos0, n_tok;
    ts_type kv_type;
    float qscale; /* magnitude of q: large values make the running max move */
} acase;

static float kv_at(const void *buf, ts_type type, size_t i) {
    return type == TS_TYPE_F16 ? ts_f16_to_f32(((const uint16_t *)buf)[i]) : ((const float *)buf)[i];
}

/* out (n_tok, n_head, hd) in double from the cache contents; ahead > 0
 * lets each token see that many keys past its own position (a broken causal
 * mask, for the self-check) */
static void naive(const acase *c, int n_ctx, const void *K, const void *V, const float *q, float scale, int window, int ahead,
                  double *out) {
    int group = c->n_head / c->n_head_kv;
    double *s = malloc(sizeof(double) * (size_t)n_ctx);
    for (int t = 0; t < c->n_tok; t++)
        for (int h = 0; h < c->n_head; h++) {
            int pos = c->pos0 + t, kvh = h / group;
            int start = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
            const int last = pos + ahead < c->pos0 + c->n_tok ? pos + ahead : c->pos0 + c->n_tok - 1;
            const float *qv = q + ((size_t)t * c->n_head + h) * c->hd;
            double mx = -INFINITY, sum = 0;
            for (int j = start; j <= last; j++) {
                double d = 0;
                for (int i = 0; i < c->hd; i++) d += (double)qv[i] * kv_at(K, c->kv_type, ((size_t)kvh * n_ctx + j) * c->hd + i);
                s[j] = d * scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = start; j <= last; j++) sum += s[j] = exp(s[j] - mx);
            double *o = out + ((size_t)t * c->n_head + h) * c->hd;
            for (int i = 0; i < c->hd; i++) {
                double v = 0;
                for (int j = start; j <= last; j++) v += s[j] * kv_at(V, c->kv_type, ((size_t)kvh * n_ctx + j) * c->hd + i);
                o[i] = v / sum;
            }
        }
    free(s);
}

/* Runs case c on a backend with nth threads; tiled = one call for the chunk,
 * else one decode-path call per token. Returns the output (malloc'd). */
static float *run(const acase *c, int nth, int tiled, const float *kin, const float *vin, const float *q, float scale,
                  void **kcache, void **vcache, int *n_ctx_out) {
    ts_backend *be = NULL;
    if (ts_backend_cpu_new(nth, &be) != TS_OK) return NULL;
    ts_stream *st = NULL;
    if (be->ops->stream_new(be, nth, &st) != TS_OK) {
        ts_backend_free(be);
        return NULL;
    }
    int total = c->pos0 + c->n_tok, n_ctx = total + 3;
    ts_backend_reserve r = {.max_tokens = total, .max_in = 256, .n_ctx = n_ctx, .n_head = c->n_head};
    float *out = NULL;
    if (be->ops->reserve(st, &r) != TS_OK) goto done;
    size_t esz = c->kv_type == TS_TYPE_F16 ? 2 : 4, cache = (size_t)c->n_head_kv * n_ctx * c->hd * esz;
    ts_kv_layer kv = {be->ops->alloc(be, cache), be->ops->alloc(be, cache)};
    ts_attn_desc d = {.n_tok = total, .pos0 = 0, .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = c->hd,
                      .n_ctx = n_ctx, .window = c->window, .scale = scale, .kv_type = c->kv_type};
    be->ops->kv_store(st, &kv, &d, kin, vin);
    size_t on = (size_t)c->n_tok * c->n_head * c->hd;
    float *o = be->ops->alloc(be, on * sizeof(float));
    if (tiled) {
        d.n_tok = c->n_tok;
        d.pos0 = c->pos0;
        be->ops->attention(st, &kv, &d, q, o);
    } else {
        for (int t = 0; t < c->n_tok; t++) {
            d.n_tok = 1;
            d.pos0 = c->pos0 + t;
            be->ops->attention(st, &kv, &d, q + (size_t)t * c->n_head * c->hd, o + (size_t)t * c->n_head * c->hd);
        }
    }
    out = malloc(on * sizeof(float));
    memcpy(out, o, on * sizeof(float));
    if (kcache) {
        *kcache = malloc(cache), *vcache = malloc(cache);
        memcpy(*kcache, kv.k, cache);
        memcpy(*vcache, kv.v, cache);
        *n_ctx_out = n_ctx;
    }
    be->ops->dealloc(be, o, on * sizeof(float));
    be->ops->dealloc(be, kv.k, cache);
    be->ops->dealloc(be, kv.v, cache);
done:
    be->ops->stream_free(st);
    ts_backend_free(be);
    return out;
}

/* max |got - want| over max |V|: the output is a convex combination of V rows */
static double max_err(const float *got, const double *want, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= e)) e = d; /* NaN propagates */
    }
    return e;
}

static void test_case(const acase *c) {
    int total = c->pos0 + c->n_tok;
    size_t kvn = (size_t)total * c->n_head_kv * c->hd, qn = (size_t)c->n_tok * c->n_head * c->hd;
    float *kin = malloc(kvn * sizeof(float)), *vin = malloc(kvn * sizeof(float)), *q = malloc(qn * sizeof(float));
    for (size_t i = 0; i < kvn; i++) kin[i] = frand(), vin[i] = frand();
    /* a drift along the positions makes later keys score higher for some heads,
     * so the running max moves inside and across key blocks */
    for (int t = 0; t < total; t++)
        for (int i = 0; i < c->hd; i++) kin[((size_t)t * c->n_head_kv) * c->hd + i] += 0.02f * (float)t * (i % 2 ? 1 : -1);
    for (size_t i = 0; i < qn; i++) q[i] = frand() * c->qscale;
    float scale = 1.0f / sqrtf((float)c->hd);
    void *K = NULL, *V = NULL;
    int n_ctx = 0;
    float *tiled1 = run(c, 1, 1, kin, vin, q, scale, &K, &V, &n_ctx);
    float *tiled2 = run(c, 2, 1, kin, vin, q, scale, NULL, NULL, NULL);
    float *tiled3 = run(c, 3, 1, kin, vin, q, scale, NULL, NULL, NULL);
    float *dec = run(c, 2, 0, kin, vin, q, scale, NULL, NULL, NULL);
    CHECK(tiled1 && tiled2 && tiled3 && dec && K);
    if (!(tiled1 && tiled2 && tiled3 && dec && K)) return;
    double *want = malloc(qn * sizeof(double)), *other = malloc(qn * sizeof(double));
    naive(c, n_ctx, K, V, q, scale, c->window, 0, want);
    /* the float paths: scores rounded to float, exp in float, sums of up to
     * total terms; V in [-1, 1) */
    double tol = 2e-6 * sqrt((double)total) + 1e-6;
    double et = max_err(tiled1, want, qn), ed = max_err(dec, want, qn);
    char name[160];
    snprintf(name, sizeof name, "%s heads %d/%d hd %d window %d pos0 %d n_tok %d", ts_type_name(c->kv_type), c->n_head,
             c->n_head_kv, c->hd, c->window, c->pos0, c->n_tok);
    CHECKF(et <= tol, "%s: tiled max error %.3g (tol %.3g)", name, et, tol);
    CHECKF(ed <= tol, "%s: decode path max error %.3g (tol %.3g)", name, ed, tol);
    CHECKF(!memcmp(tiled1, tiled2, qn * sizeof(float)) && !memcmp(tiled1, tiled3, qn * sizeof(float)),
           "%s: tiled result depends on the thread count", name);
    /* the comparison can fail: a window one position off, or a causal mask
     * one key late, is far outside tol. (Without a window, a window of total - 1
     * moved only the last token, by key 0's weight, which the drift above can
     * make as small as tol: the causal edge moves every token but the last,
     * the first by half its output or so.) */
    if (c->window > 0) {
        naive(c, n_ctx, K, V, q, scale, c->window + 1, 0, other);
        CHECKF(max_err(tiled1, other, qn) > 10 * tol, "%s: an off-by-one window went unnoticed", name);
    }
    naive(c, n_ctx, K, V, q, scale, c->window, 1, other);
    CHECKF(max_err(tiled1, other, qn) > 10 * tol, "%s: a causal mask one key late went unnoticed", name);
    free(want);
    free(other);
    free(tiled1);
    free(tiled2);
    free(tiled3);
    free(dec);
    free(K);
    free(V);
    free(kin);
    free(vin);
    free(q);
}

/* The attention kernels of this CPU (ts_cpu_kernels_get: the SIMD ones, or
 * the references under TS_FORCE_ISA=scalar) against the references. */
static void test_kernels(void) {
    ts_cpu_kernels ref;
    ts_cpu_kernels_ref(&ref);
    const ts_cpu_kernels *k = ts_cpu_kernels_get();
    /* row_max: every length to 70 from each start, scores with NaNs, -inf,
     * +inf and zeros of both signs; the same value as the reference */
    {
        float v[80];
        int bad_max = 0, cases = 0;
        for (int rep = 0; rep < 40; rep++) {
            for (int i = 0; i < 80; i++) {
                float x = frand() * 50;
                int c = (int)((frand() + 1) * 20); /* 0..39 */
                v[i] = c == 0 ? NAN : c == 1 ? -INFINITY : c == 2 ? 0.0f : c == 3 ? -0.0f : c == 4 && rep % 4 == 0 ? INFINITY : x;
            }
            for (int st = 0; st < 8; st++)
                for (int n = 0; n <= 70; n++, cases++) {
                    float a = ref.row_max(v + st, n), b = k->row_max(v + st, n);
                    bad_max += !(a == b);
                }
        }
        CHECKF(bad_max == 0, "row_max: %d of %d differ from the reference", bad_max, cases);
    }
    static const int ns[] = {16, 80, 128, 131};
    enum { KTS = 96 }; /* transposed-key row stride: nk rounded up to 16, and more */
    float *q = malloc(sizeof(float) * 4 * 131), *K = malloc(sizeof(float) * 70 * 131), *KT = malloc(sizeof(float) * 131 * KTS);
    float s1[4 * KTS], s2[4 * KTS], y1[4 * 131], y2[4 * 131];
    int bad_dot = 0, bad_exp = 0, bad_sum = 0, bad_axpy = 0, bad_floor = 0, n_under = 0, bad_tail = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (int nk = 1; nk <= 70; nk += 3) {
            int n = ns[a], nr = 1 + nk % 4; /* 1..4 rows */
            for (int i = 0; i < nr * n; i++) q[i] = frand() * 2;
            for (int i = 0; i < nk * n; i++) K[i] = frand();
            for (int i = 0; i < n; i++)
                for (int j = 0; j < KTS; j++) KT[i * KTS + j] = j < nk ? K[j * n + i] : frand() * 1e3f; /* past nk: finite garbage */
            for (int j = 0; j < 4 * KTS; j++) s1[j] = s2[j] = -7.0f; /* past nk: must stay untouched */
            ref.qk_f32(q, n, nr, KT, KTS, nk, n, 0.3f, s1, KTS);
            k->qk_f32(q, n, nr, KT, KTS, nk, n, 0.3f, s2, KTS);
            for (int r = 0; r < nr; r++) {
                for (int j = 0; j < nk; j++) {
                    double mag = 0;
                    for (int i = 0; i < n; i++) mag += fabs((double)q[r * n + i] * K[j * n + i]) * 0.3;
                    bad_dot += !(fabs((double)s1[r * KTS + j] - s2[r * KTS + j]) <= 1e-6 * mag + 1e-30);
                }
                for (int j = nk; j < KTS; j++) bad_tail += s2[r * KTS + j] != -7.0f;
            }
            /* exp of s - max over a wide range, down to the underflow region */
            for (int j = 0; j < nk; j++) s1[j] = s2[j] = frand() * (j % 5 == 0 ? 120.0f : 12.0f);
            float m = -INFINITY; /* the running max, as the callers pass it */
            for (int j = 0; j < nk; j++) m = s1[j] > m ? s1[j] : m;
            float s0[70];
            memcpy(s0, s1, sizeof(float) * (size_t)nk);
            float e1 = ref.exp_sum(s1, nk, m), e2 = k->exp_sum(s2, nk, m);
            for (int j = 0; j < nk; j++) bad_exp += !(fabs((double)s1[j] - s2[j]) <= 4e-7 * s1[j] + 1e-37);
            /* the floor: exactly 0 under it (no subnormal weights), never above */
            for (int j = 0; j < nk; j++) {
                int under = s0[j] - m < TS_SOFTMAX_FLOOR;
                bad_floor += under ? s1[j] != 0.0f || s2[j] != 0.0f : !(s1[j] > 0.0f && s2[j] > 0.0f);
                n_under += under;
            }
            bad_sum += !(fabs((double)e1 - e2) <= 1e-6 * e1 + 1e-36);
            /* nr rows of weights against the same V rows (K here) */
            for (int i = 0; i < nr * n; i++) y1[i] = y2[i] = frand();
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < nk; j++) s1[r * KTS + j] = (frand() + 1) * 0.5f;
            ref.pv_f32(s1, KTS, nr, K, nk, n, y1, n);
            k->pv_f32(s1, KTS, nr, K, nk, n, y2, n);
            for (int i = 0; i < nr * n; i++) bad_axpy += !(fabs((double)y1[i] - y2[i]) <= 1e-6 * (nk + 1));
        }
    CHECKF(bad_dot == 0 && bad_tail == 0, "qk_f32: %d differ from the reference, %d written past nk", bad_dot, bad_tail);
    CHECKF(bad_exp == 0 && bad_sum == 0, "exp_sum: %d values, %d sums differ from the reference", bad_exp, bad_sum);
    CHECKF(bad_floor == 0 && n_under > 0, "exp_sum: %d weights on the wrong side of TS_SOFTMAX_FLOOR (%d under it)", bad_floor,
           n_under);
    CHECKF(bad_axpy == 0, "pv_f32: %d differ from the reference", bad_axpy);

    /* silu_mul: gates from -100 to 100 (both tails of the sigmoid, where
     * exp(-g) over- and underflows), lengths that end inside a vector, and
     * in place (out = g). Within 4 ulp of the reference's value; the same
     * bits for an element wherever its run starts. */
    enum { NS = 300 };
    float g[NS], u[NS], o1[NS], o2[NS], o3[NS];
    int bad_silu = 0, bad_pos = 0;
    uint32_t st = 12345; /* its own stream: frand's feeds the cases after this */
    for (int i = 0; i < NS; i++) {
        float r[2];
        for (int h = 0; h < 2; h++) st = st * 1664525u + 1013904223u, r[h] = (float)(st >> 8) / 8388608.0f - 1.0f;
        g[i] = r[0] * (i % 7 == 0 ? 100.0f : i % 3 == 0 ? 20.0f : 4.0f), u[i] = r[1] * 3;
    }
    g[5] = 0.0f, g[6] = -0.0f, g[7] = 88.0f, g[8] = -88.0f, g[9] = 1e-30f;
    for (int n = 1; n <= NS; n += n < 20 ? 1 : 37) {
        ref.silu_mul(g, u, o1, n);
        k->silu_mul(g, u, o2, n);
        /* below g ~ -87 both are under 1e-35 (exp(g) g u), where the reference's
         * expf(-g) overflows and the kernel's clamps: no use tells them apart */
        for (int i = 0; i < n; i++) {
            int b = !(fabs((double)o1[i] - o2[i]) <= 4.8e-7 * fabs((double)o1[i]) + 1e-30);
            if (b && bad_silu < 5) fprintf(stderr, "silu_mul: g %.9g u %.9g ref %.9g got %.9g\n", g[i], u[i], o1[i], o2[i]);
            bad_silu += b;
        }
        memcpy(o3, g, sizeof(float) * (size_t)n);
        k->silu_mul(o3 + 1, u + 1, o3 + 1, n - 1); /* in place, from the second element */
        for (int i = 1; i < n; i++) bad_pos += memcmp(&o3[i], &o2[i], sizeof(float)) != 0;
    }
    CHECKF(bad_silu == 0, "silu_mul: %d differ from the reference by more than 4 ulp", bad_silu);
    CHECKF(bad_pos == 0, "silu_mul: %d elements change with where the run starts", bad_pos);
    free(q);
    free(K);
    free(KT);
}

int main(void) {
    test_kernels();
    static const acase cases[] = {
        {6, 2, 64, 0, 0, 70, TS_TYPE_F16, 1.0f},   /* GQA; 70 tokens cross the 64-key block and 16-query blocks */
        {6, 2, 64, 0, 0, 70, TS_TYPE_F32, 1.0f},
        {4, 4, 80, 0, 37, 17, TS_TYPE_F16, 3.0f},  /* MHA, hd not a SIMD multiple, chunk after context */
        {4, 4, 80, 0, 37, 17, TS_TYPE_F32, 3.0f},
        {8, 2, 128, 5, 0, 40, TS_TYPE_F16, 2.0f},  /* sliding window */
        {8, 2, 128, 23, 60, 33, TS_TYPE_F32, 2.0f},/* window crossing key blocks, after context */
        {7, 1, 32, 0, 100, 2, TS_TYPE_F16, 1.0f},  /* two tokens, long context */
        {2, 1, 16, 0, 0, 130, TS_TYPE_F16, 4.0f},  /* many key blocks, peaky softmax */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_case(&cases[i]);
    return tu_finish();
}
