/* Decode matrix-vector kernels (matvec.cu, matvec_q8.cu) against the CPU
 * references, every weight type, on random data.
 *
 * F32 path: reference = ts_dequant_row_ref rows dotted with x' in double
 * (ts_vec_dot_ref(F32)), x' = x or the CPU backend's rmsnorm of x. Threshold
 * ||y - ref|| / ||ref|| <= 1e-5: the kernel's weights are the CPU's bit for
 * bit, so the only difference is float accumulation of n_in products in
 * another order (~sqrt(n_in / 32) * 2^-24, about 1e-7 here); a single wrong
 * element of a 4096-long row already moves that row by ~1e-2.
 *
 * int8 path: the quantizer must reproduce ts_quantize_row_ref's partner
 * blocks exactly (quants, scales, sums: compared bit for bit), and
 * matvec_q8 must match ts_vec_dot_ref (the CPU's int8 structure, integer
 * block sums exact) within 1e-5: only the per-unit float scale products and
 * their accumulation differ.
 *
 * Shapes: n_in 576 (SmolLM2: a partial chunk), 2816 (11 K super-blocks: two
 * full chunks and a partial one), 4096; 2643 rows at one token (enough for
 * the 4-row groups of large launches, the last one 3 rows); n_out odd (a group with one row);
 * 1, 3 and 8 tokens; bias, accumulate (y += W x), the RMSNorm fold (1/rms
 * from ts_cuda_rms_inv, and ts_cuda_norm_matvec's own in every block, which
 * must give the same outputs bit for bit and store the CPU rmsnorm's rows),
 * and several weights of mixed types in one call. Weights are allocated to their
 * exact size, so an over-read past the matrix shows under compute-sanitizer. */
#include "cpu_ref.h"
#include "cuda_test_util.h"

struct Case {
    uint32_t type[TS_CUDA_MAX_MATS];
    int n_w;
    int64_t n_in;
    int64_t n_out[TS_CUDA_MAX_MATS];
    int n_tok;
    bool bias, accumulate, rms, int8;
};

static const float EPS = 1e-6f;
static int g_kw1 = -1; /* ts_cuda_matvec_q8_force_kw1 for the int8 cases run_case runs */

/* Bytes of a quantized activation buffer that differ from the CPU's,
 * comparing only the defined parts (the 256-byte alignment pads are not
 * written). */
static size_t q8_bytes_differ(uint32_t partner, int64_t n_in, int nt, const uint8_t *want, const uint8_t *have) {
    const int64_t nd = partner == TS_TYPE_Q8_K ? n_in / 256 : n_in / 32, ns = partner == TS_TYPE_Q8_K ? n_in / 16 : n_in / 32;
    const size_t a = ((size_t)nt * n_in + 255) & ~(size_t)255, b = a + (((size_t)nt * nd * 4 + 255) & ~(size_t)255);
    size_t bad = 0;
    for (size_t k = 0; k < (size_t)nt * n_in; k++) bad += want[k] != have[k];
    for (size_t k = 0; k < (size_t)nt * nd * 4; k++) bad += want[a + k] != have[a + k];
    for (size_t k = 0; k < (size_t)nt * ns * 4; k++) bad += want[b + k] != have[b + k];
    return bad;
}

/* ts_cuda_norm_matvec (1/rms in every block, the normalized rows stored) on
 * the inputs of a launch that took 1/rms from ts_cuda_rms_inv: its outputs
 * must equal that launch's (dy) bit for bit, and xn the CPU rmsnorm's rows
 * (xr) bit for bit. */
static void check_norm_matvec(const Case &c, const ts_cuda_mat *m, float *const *dy, const float *dx, const float *dnw,
                              const float *xr, const char *what) {
    const int nt = c.n_tok;
    const size_t nx = (size_t)(c.n_in * nt);
    float *dy2[TS_CUDA_MAX_MATS], *dxn = (float *)tcu_dalloc(sizeof(float) * nx);
    for (int i = 0; i < c.n_w; i++) {
        dy2[i] = (float *)tcu_dalloc(sizeof(float) * (size_t)(c.n_out[i] * nt));
        tcu_poison(dy2[i], sizeof(float) * (size_t)(c.n_out[i] * nt));
    }
    tcu_poison(dxn, sizeof(float) * nx);
    char w2[200];
    snprintf(w2, sizeof w2, "%s self-norm", what);
    TCU_OK(ts_cuda_norm_matvec(NULL, c.n_w, m, dy2, dx, nt, dnw, EPS, dxn), w2);
    tcu_sync(w2);
    size_t ydiff = 0;
    for (int i = 0; i < c.n_w; i++) {
        const size_t ny = (size_t)(c.n_out[i] * nt);
        float *a = (float *)malloc(sizeof(float) * ny), *b = (float *)malloc(sizeof(float) * ny);
        tcu_down(a, dy[i], sizeof(float) * ny);
        tcu_down(b, dy2[i], sizeof(float) * ny);
        for (size_t j = 0; j < ny; j++) ydiff += memcmp(&a[j], &b[j], sizeof(float)) != 0;
        free(a), free(b);
        cudaFree(dy2[i]);
    }
    float *xn = (float *)malloc(sizeof(float) * nx);
    tcu_down(xn, dxn, sizeof(float) * nx);
    size_t xdiff = 0;
    for (size_t j = 0; j < nx; j++) xdiff += memcmp(&xn[j], &xr[j], sizeof(float)) != 0;
    printf("%-60s %zu outputs differ from the rms_inv launch, %zu of xn from the CPU rmsnorm %s\n", w2, ydiff, xdiff,
           ydiff || xdiff ? "FAIL" : "ok");
    CHECKF(ydiff == 0 && xdiff == 0, "%s: %zu outputs, %zu normalized elements differ", w2, ydiff, xdiff);
    free(xn);
    cudaFree(dxn);
}

/* ts_cuda_matvec_q8 on a case's inputs with its hooks forced (-1: the
 * launch's own rule), the outputs downloaded into out[i] (malloc'ed). */
static void q8_run_forced(const Case &c, const ts_cuda_mat *m, float *const *dy, float *const *hy0, uint32_t partner,
                          const void *dq8, int loader, int kw1, int rows, int split, float **out, const char *what) {
    const int nt = c.n_tok;
    for (int i = 0; i < c.n_w; i++) {
        const size_t ny = (size_t)(c.n_out[i] * nt);
        if (c.accumulate) tcu_up(dy[i], hy0[i], sizeof(float) * ny);
        else tcu_poison(dy[i], sizeof(float) * ny);
    }
    ts_cuda_matvec_q8_force_loader(loader);
    ts_cuda_matvec_q8_force_kw1(kw1);
    ts_cuda_matvec_q8_force_rows(rows);
    ts_cuda_matvec_q8_force_split(split);
    const ts_status st = ts_cuda_matvec_q8(NULL, c.n_w, m, dy, partner, dq8, nt, c.accumulate);
    ts_cuda_matvec_q8_force_loader(-1);
    ts_cuda_matvec_q8_force_kw1(-1);
    ts_cuda_matvec_q8_force_rows(-1);
    ts_cuda_matvec_q8_force_split(0);
    TCU_OK(st, what);
    tcu_sync(what);
    for (int i = 0; i < c.n_w; i++) {
        const size_t ny = (size_t)(c.n_out[i] * nt);
        out[i] = (float *)malloc(sizeof(float) * ny);
        tcu_down(out[i], dy[i], sizeof(float) * ny);
    }
}

/* Outputs of two q8_run_forced runs that differ bit-wise; frees both. */
static size_t q8_outputs_differ(const Case &c, float **a, float **b) {
    size_t diff = 0;
    for (int i = 0; i < c.n_w; i++) {
        const size_t ny = (size_t)(c.n_out[i] * c.n_tok);
        for (size_t j = 0; j < ny; j++) diff += memcmp(&a[i][j], &b[i][j], sizeof(float)) != 0;
        free(a[i]), free(b[i]);
    }
    return diff;
}

/* ts_cuda_matvec_q8 with the register loaders and with the cp.async ring,
 * each forced, on the same inputs: they sum in the same order, so their
 * outputs must be equal bit for bit. Leaves the ring's output in dy, which
 * run_case checks against the CPU reference (so both loaders are checked;
 * a launch's own choice is one of the two). */
static void check_loaders_agree(const Case &c, const ts_cuda_mat *m, float *const *dy, float *const *hy0, uint32_t partner,
                                const void *dq8, const char *what) {
    float *out[2][TS_CUDA_MAX_MATS];
    for (int mode = 0; mode < 2; mode++) q8_run_forced(c, m, dy, hy0, partner, dq8, mode, g_kw1, -1, 0, out[mode], what);
    const size_t diff = q8_outputs_differ(c, out[0], out[1]);
    printf("%-60s register vs cp.async loaders: %zu outputs differ %s\n", what, diff, diff ? "FAIL" : "ok");
    CHECKF(diff == 0, "%s: the register and cp.async loaders differ in %zu outputs", what, diff);
}

/* One token: 2 and 4 rows per group (ts_cuda_matvec_q8_force_rows) give
 * the same outputs bit for bit under either split of a group's chunks
 * (rows change which warp computes a row, not its sum); run_case checks the
 * launch's own choice against the CPU reference. */
static void check_rows_agree(const Case &c, const ts_cuda_mat *m, float *const *dy, float *const *hy0, uint32_t partner,
                             const void *dq8, const char *what) {
    size_t diff = 0;
    for (int kw1 = 0; kw1 < 2; kw1++) {
        float *out[2][TS_CUDA_MAX_MATS];
        for (int mode = 0; mode < 2; mode++) q8_run_forced(c, m, dy, hy0, partner, dq8, -1, kw1, mode ? 4 : 2, 0, out[mode], what);
        diff += q8_outputs_differ(c, out[0], out[1]);
    }
    printf("%-60s 2 vs 4 rows per group: %zu outputs differ %s\n", what, diff, diff ? "FAIL" : "ok");
    CHECKF(diff == 0, "%s: 2 and 4 rows per group differ in %zu outputs", what, diff);
}

/* One token, weights of two types: one launch for both (a pair the kernel
 * runs together: Q4_K/Q5_K with Q6_K) and a launch per type give the same
 * outputs bit for bit under either split of a group's chunks (the launch
 * changes which warps compute a row, not its sum). */
static void check_split_agree(const Case &c, const ts_cuda_mat *m, float *const *dy, float *const *hy0, uint32_t partner,
                              const void *dq8, const char *what) {
    /* the cases give the pair's two types, so the launch must be one (else
     * the comparison below would compare a launch per type with itself) */
    const int one = ts_cuda_matvec_q8_launches(c.n_w, m, 1);
    ts_cuda_matvec_q8_force_split(1);
    const int apart = ts_cuda_matvec_q8_launches(c.n_w, m, 1);
    ts_cuda_matvec_q8_force_split(0);
    printf("%-60s launches: %d, %d with the split forced %s\n", what, one, apart, one == 1 && apart == 2 ? "ok" : "FAIL");
    CHECKF(one == 1 && apart == 2, "%s: %d launches (want 1), %d with the split forced (want 2)", what, one, apart);
    size_t diff = 0;
    for (int kw1 = 0; kw1 < 2; kw1++) {
        float *out[2][TS_CUDA_MAX_MATS];
        for (int mode = 0; mode < 2; mode++) q8_run_forced(c, m, dy, hy0, partner, dq8, -1, kw1, -1, mode, out[mode], what);
        diff += q8_outputs_differ(c, out[0], out[1]);
    }
    printf("%-60s one launch vs a launch per type: %zu outputs differ %s\n", what, diff, diff ? "FAIL" : "ok");
    CHECKF(diff == 0, "%s: one launch and a launch per type differ in %zu outputs", what, diff);
}

static void run_case(const Case &c) {
    const int64_t n_in = c.n_in;
    const int nt = c.n_tok;
    float *x = (float *)malloc(sizeof(float) * n_in * nt), *xr = (float *)malloc(sizeof(float) * n_in * nt);
    float *nw = (float *)malloc(sizeof(float) * n_in);
    tcu_fill_normal(x, (size_t)(n_in * nt), 1.0f);
    for (int64_t i = 0; i < n_in; i++) nw[i] = 1.0f + 0.3f * tcu_normal();
    if (c.rms) cref_rmsnorm(x, nw, n_in, nt, EPS, xr);
    else memcpy(xr, x, sizeof(float) * n_in * nt);

    float *dx = (float *)tcu_dalloc(sizeof(float) * n_in * nt), *dnw = (float *)tcu_dalloc(sizeof(float) * n_in);
    float *dinv = (float *)tcu_dalloc(sizeof(float) * nt);
    tcu_up(dx, x, sizeof(float) * n_in * nt);
    tcu_up(dnw, nw, sizeof(float) * n_in);

    ts_cuda_mat m[TS_CUDA_MAX_MATS];
    float *dy[TS_CUDA_MAX_MATS];
    uint8_t *hw[TS_CUDA_MAX_MATS];
    float *hb[TS_CUDA_MAX_MATS], *hy0[TS_CUDA_MAX_MATS];
    for (int i = 0; i < c.n_w; i++) {
        const uint64_t rb = ts_type_row_bytes(c.type[i], (uint64_t)n_in);
        const size_t wbytes = (size_t)(rb * (uint64_t)c.n_out[i]);
        hw[i] = (uint8_t *)malloc(wbytes);
        tcu_fill_weights(c.type[i], hw[i], c.n_out[i], n_in);
        void *dw = tcu_dalloc(wbytes);
        tcu_up(dw, hw[i], wbytes);
        hb[i] = (float *)malloc(sizeof(float) * c.n_out[i]);
        tcu_fill_normal(hb[i], (size_t)c.n_out[i], 1.0f);
        float *db = NULL;
        if (c.bias) {
            db = (float *)tcu_dalloc(sizeof(float) * c.n_out[i]);
            tcu_up(db, hb[i], sizeof(float) * c.n_out[i]);
        }
        m[i] = ts_cuda_mat{dw, c.type[i], n_in, c.n_out[i], rb, db};
        const size_t ny = (size_t)(c.n_out[i] * nt);
        dy[i] = (float *)tcu_dalloc(sizeof(float) * ny);
        hy0[i] = (float *)malloc(sizeof(float) * ny);
        tcu_fill_normal(hy0[i], ny, 2.0f);
        if (c.accumulate) tcu_up(dy[i], hy0[i], sizeof(float) * ny);
        else tcu_poison(dy[i], sizeof(float) * ny);
    }

    char what[160];
    int len = snprintf(what, sizeof what, "%s", c.int8 ? "matvec_q8" : "matvec");
    for (int i = 0; i < c.n_w; i++) len += snprintf(what + len, sizeof what - len, "%s%s", i ? "+" : " ", ts_type_name(c.type[i]));
    snprintf(what + len, sizeof what - len, " %lldx%lld t=%d%s%s%s%s", (long long)n_in, (long long)c.n_out[0], nt,
             c.bias ? " bias" : "", c.accumulate ? " acc" : "", c.rms ? " rms" : "",
             !c.int8 || g_kw1 < 0 ? "" : g_kw1 ? " kw=1" : " teams");

    uint32_t partner = c.int8 ? ts_cuda_q8_partner(c.type[0]) : (uint32_t)TS_TYPE_COUNT;
    void *dq8 = NULL;
    if (c.int8) {
        const size_t qb = ts_cuda_q8_bytes(partner, n_in, nt);
        dq8 = tcu_dalloc(qb);
        tcu_poison(dq8, qb);
        TCU_OK(ts_cuda_quantize_q8(NULL, partner, dx, n_in, nt, c.rms ? dnw : NULL, EPS, dq8), what);
        if (nt == 1 && c.type[0] != TS_TYPE_Q8_0) check_rows_agree(c, m, dy, hy0, partner, dq8, what);
        /* a pair's types: one of Q4_K/Q5_K with Q6_K, and no third */
        int types = 0, k45 = 0, k6 = 0;
        for (int i = 0; i < c.n_w; i++) {
            bool seen = false;
            for (int j = 0; j < i; j++) seen |= c.type[j] == c.type[i];
            if (seen) continue;
            types++;
            k45 += c.type[i] == TS_TYPE_Q4_K || c.type[i] == TS_TYPE_Q5_K;
            k6 += c.type[i] == TS_TYPE_Q6_K;
        }
        if (nt == 1 && types == 2 && k45 == 1 && k6 == 1) check_split_agree(c, m, dy, hy0, partner, dq8, what);
        check_loaders_agree(c, m, dy, hy0, partner, dq8, what); /* runs the matvec (both loaders) */
    } else {
        if (c.rms) TCU_OK(ts_cuda_rms_inv(NULL, dx, n_in, nt, EPS, dinv), what);
        TCU_OK(ts_cuda_matvec(NULL, c.n_w, m, dy, dx, nt, c.rms ? dinv : NULL, c.rms ? dnw : NULL, c.accumulate), what);
        tcu_sync(what);
        if (c.rms && !c.accumulate) check_norm_matvec(c, m, dy, dx, dnw, xr, what);
    }
    tcu_sync(what);

    /* the CPU's partner rows, for the int8 reference */
    uint8_t *xq = NULL;
    uint64_t xqb = 0;
    if (c.int8) {
        xqb = ts_type_row_bytes(partner, (uint64_t)n_in);
        xq = (uint8_t *)malloc(xqb * nt);
        for (int t = 0; t < nt; t++) ts_quantize_row_ref((ts_type)partner, xr + t * n_in, xq + t * xqb, n_in);
    }
    float *wf = (float *)malloc(sizeof(float) * n_in);
    for (int i = 0; i < c.n_w; i++) {
        const size_t ny = (size_t)(c.n_out[i] * nt);
        float *got = (float *)malloc(sizeof(float) * ny), *ref = (float *)malloc(sizeof(float) * ny);
        tcu_down(got, dy[i], sizeof(float) * ny);
        const uint64_t rb = m[i].row_bytes;
        for (int64_t r = 0; r < c.n_out[i]; r++) {
            const uint8_t *row = hw[i] + r * rb;
            const bool flt = c.type[i] == TS_TYPE_F32 || c.type[i] == TS_TYPE_F16 || c.type[i] == TS_TYPE_BF16;
            if (!c.int8 && !flt) ts_dequant_row_ref((ts_type)c.type[i], row, wf, n_in);
            for (int t = 0; t < nt; t++) {
                double v;
                if (c.int8) v = ts_vec_dot_ref((ts_type)c.type[i], n_in, row, xq + t * xqb);
                else if (flt) v = ts_vec_dot_ref((ts_type)c.type[i], n_in, row, xr + t * n_in);
                else v = ts_vec_dot_ref(TS_TYPE_F32, n_in, wf, xr + t * n_in);
                float f = (float)v;
                if (c.bias) f += hb[i][r];
                if (c.accumulate) f = hy0[i][t * c.n_out[i] + r] + f;
                ref[t * c.n_out[i] + r] = f;
            }
        }
        char w2[200];
        snprintf(w2, sizeof w2, "%s [%d]", what, i);
        tcu_report(c.n_w > 1 ? w2 : what, tcu_rel_err(got, ref, ny), 1e-5, c.accumulate ? 0 : tcu_unwritten(got, ny, 4));
        free(got), free(ref), free(hw[i]), free(hb[i]), free(hy0[i]);
        cudaFree((void *)m[i].data), cudaFree((void *)m[i].bias), cudaFree(dy[i]);
    }
    if (c.int8) {
        /* the quantized activations themselves, bit for bit */
        const size_t qb = ts_cuda_q8_bytes(partner, n_in, nt);
        uint8_t *want = (uint8_t *)calloc(1, qb), *have = (uint8_t *)malloc(qb);
        tcu_q8_from_cpu(partner, xq, n_in, nt, want);
        tcu_down(have, dq8, qb);
        const size_t bad = q8_bytes_differ(partner, n_in, nt, want, have);
        char w2[200];
        snprintf(w2, sizeof w2, "quantize_q8 %s n_in=%lld t=%d%s", ts_type_name(partner), (long long)n_in, nt,
                 c.rms ? " rms" : "");
        printf("%-60s %zu bytes differ from ts_quantize_row_ref %s\n", w2, bad, bad ? "FAIL" : "ok");
        CHECKF(bad == 0, "%s: %zu bytes differ", w2, bad);
        free(want), free(have);
        cudaFree(dq8);
    }
    free(wf), free(xq), free(x), free(xr), free(nw);
    cudaFree(dx), cudaFree(dnw), cudaFree(dinv);
}

static Case one(uint32_t type, int64_t n_in, int64_t n_out, int n_tok, bool bias, bool acc, bool rms, bool int8) {
    Case c;
    memset(&c, 0, sizeof c);
    c.type[0] = type;
    c.n_w = 1;
    c.n_in = n_in;
    c.n_out[0] = n_out;
    c.n_tok = n_tok;
    c.bias = bias, c.accumulate = acc, c.rms = rms, c.int8 = int8;
    return c;
}

/* ts_cuda_quantize_q8_act: act(gate) * up stored (equal to cref_act_mul
 * within the CPU formulas' rounding: the same float operations) and its
 * partner-format quantization bit for bit ts_quantize_row_ref's of that
 * product, in place (gate_out = gate) as the backend calls it. */
static void check_quantize_act(uint32_t partner, int act, int64_t n_in, int nt) {
    const size_t n = (size_t)(n_in * nt);
    float *g = (float *)malloc(sizeof(float) * n), *u = (float *)malloc(sizeof(float) * n);
    float *want = (float *)malloc(sizeof(float) * n), *got = (float *)malloc(sizeof(float) * n);
    tcu_fill_normal(g, n, 2.0f);
    tcu_fill_normal(u, n, 1.0f);
    cref_act_mul(act, g, u, (int64_t)n, want);
    float *dg = (float *)tcu_dalloc(sizeof(float) * n), *du = (float *)tcu_dalloc(sizeof(float) * n);
    tcu_up(dg, g, sizeof(float) * n);
    tcu_up(du, u, sizeof(float) * n);
    const size_t qb = ts_cuda_q8_bytes(partner, n_in, nt);
    void *dq8 = tcu_dalloc(qb);
    tcu_poison(dq8, qb);
    char what[160];
    snprintf(what, sizeof what, "quantize_q8_act %s %s n_in=%lld t=%d", ts_type_name(partner), act ? "gelu" : "silu",
             (long long)n_in, nt);
    /* act_mul's own kernel on the same input: the fused product must equal it bit for bit */
    float *dref = (float *)tcu_dalloc(sizeof(float) * n), *same = (float *)malloc(sizeof(float) * n);
    TCU_OK(ts_cuda_act_mul(NULL, act, dg, du, (int64_t)n, dref), what);
    TCU_OK(ts_cuda_quantize_q8_act(NULL, partner, act, dg, du, n_in, nt, dg, dq8), what);
    tcu_sync(what);
    tcu_down(got, dg, sizeof(float) * n);
    tcu_down(same, dref, sizeof(float) * n);
    tcu_report(what, tcu_rel_err(got, want, n), 1e-6, 0);
    CHECKF(memcmp(got, same, sizeof(float) * n) == 0, "%s: the stored product differs from ts_cuda_act_mul's", what);
    free(same);
    cudaFree(dref);
    /* the quantization of what the kernel stored, as the CPU quantizes it */
    const uint64_t xqb = ts_type_row_bytes(partner, (uint64_t)n_in);
    uint8_t *xq = (uint8_t *)malloc(xqb * nt), *wq = (uint8_t *)calloc(1, qb), *hq = (uint8_t *)malloc(qb);
    for (int t = 0; t < nt; t++) ts_quantize_row_ref((ts_type)partner, got + t * n_in, xq + t * xqb, n_in);
    tcu_q8_from_cpu(partner, xq, n_in, nt, wq);
    tcu_down(hq, dq8, qb);
    const size_t bad = q8_bytes_differ(partner, n_in, nt, wq, hq);
    printf("%-60s %zu quantized bytes differ %s\n", what, bad, bad ? "FAIL" : "ok");
    CHECKF(bad == 0, "%s: %zu quantized bytes differ", what, bad);
    free(g), free(u), free(want), free(got), free(xq), free(wq), free(hq);
    cudaFree(dg), cudaFree(du), cudaFree(dq8);
}

/* Calls that must be refused, each with its status. */
static void check_refusals(void) {
    void *dw = tcu_dalloc(4096 * 64);
    float *dx = (float *)tcu_dalloc(4096 * 8 * 4), *dy = (float *)tcu_dalloc(4096 * 8 * 4);
    float *ys[4] = {dy, dy, dy, dy};
    ts_cuda_mat m = {dw, TS_TYPE_Q4_K, 4096, 16, ts_type_row_bytes(TS_TYPE_Q4_K, 4096), NULL};
    CHECK(ts_cuda_matvec(NULL, 1, &m, ys, dx, 0, NULL, NULL, false) == TS_ERR_ARG);
    CHECK(ts_cuda_matvec(NULL, 1, &m, ys, dx, 9, NULL, NULL, false) == TS_ERR_ARG);
    CHECK(ts_cuda_matvec(NULL, 5, &m, ys, dx, 1, NULL, NULL, false) == TS_ERR_ARG);
    ts_cuda_mat bad = m;
    bad.data = (const uint8_t *)dw + 2;
    CHECK(ts_cuda_matvec(NULL, 1, &bad, ys, dx, 1, NULL, NULL, false) == TS_ERR_ARG);
    bad = m;
    bad.row_bytes += 1;
    CHECK(ts_cuda_matvec(NULL, 1, &bad, ys, dx, 1, NULL, NULL, false) == TS_ERR_ARG);
    bad = m;
    bad.type = TS_TYPE_IQ2_XXS;
    CHECK(ts_cuda_matvec(NULL, 1, &bad, ys, dx, 1, NULL, NULL, false) == TS_ERR_ARG);
    bad = m;
    bad.n_in = 4000;
    CHECK(ts_cuda_matvec(NULL, 1, &bad, ys, dx, 1, NULL, NULL, false) == TS_ERR_ARG);
    CHECK(ts_cuda_matvec(NULL, 1, &m, ys, dx, 1, dx, NULL, false) == TS_ERR_ARG);
    CHECK(ts_cuda_norm_matvec(NULL, 1, &m, ys, dx, 1, NULL, EPS, NULL) == TS_ERR_ARG);        /* no norm weights */
    CHECK(ts_cuda_norm_matvec(NULL, 1, &m, ys, dx, 1, dx, EPS, dx + 100) == TS_ERR_ARG);     /* xn overlaps x */
    CHECK(ts_cuda_norm_matvec(NULL, 1, &m, ys, dx, 9, dx, EPS, NULL) == TS_ERR_ARG);         /* 9 tokens */
    ts_cuda_mat two[2] = {m, m};
    two[1].n_in = 2048;
    two[1].row_bytes = ts_type_row_bytes(TS_TYPE_Q4_K, 2048);
    CHECK(ts_cuda_matvec(NULL, 2, two, ys, dx, 1, NULL, NULL, false) == TS_ERR_ARG);
    /* int8: partner mismatch, type without an int8 path */
    CHECK(ts_cuda_matvec_q8(NULL, 1, &m, ys, TS_TYPE_Q8_0, dx, 1, false) == TS_ERR_ARG);
    bad = m;
    bad.type = TS_TYPE_IQ4_NL;
    bad.row_bytes = ts_type_row_bytes(TS_TYPE_IQ4_NL, 4096);
    CHECK(ts_cuda_matvec_q8(NULL, 1, &bad, ys, TS_TYPE_Q8_0, dx, 1, false) == TS_ERR_ARG);
    CHECK(ts_cuda_q8_bytes(TS_TYPE_Q8_K, 576, 1) == 0);
    CHECK(ts_cuda_quantize_q8(NULL, TS_TYPE_Q8_K, dx, 576, 1, NULL, EPS, dy) == TS_ERR_ARG);
    CHECK(cudaGetLastError() == cudaSuccess); /* refusals launch nothing */
    cudaFree(dw), cudaFree(dx), cudaFree(dy);
    printf("%-60s %s\n", "argument refusals", "checked");
}

/* The rows-per-group rule (ts_cuda_matvec_q8_rows, host only) on 7B and
 * 1.5B shapes of an H200 (132 SMs: 660 team slots of 4 warps at one token)
 * and a small GPU: 4 rows where every slot gets a group of 4. */
/* ts_cuda_matvec_q8_launches (host only): a pair of types shares a launch at
 * one token only, and not with the first type's loader forced to the ring. */
static void check_launch_rule(void) {
    struct {
        const char *name;
        uint32_t t[3];
        int n_w, n_tok, loader, want;
    } cases[] = {
        {"Q4_K q+k, Q6_K v", {TS_TYPE_Q4_K, TS_TYPE_Q4_K, TS_TYPE_Q6_K}, 3, 1, -1, 1},
        {"Q6_K, Q5_K, Q5_K", {TS_TYPE_Q6_K, TS_TYPE_Q5_K, TS_TYPE_Q5_K}, 3, 1, -1, 1},
        {"Q4_K q+k+v", {TS_TYPE_Q4_K, TS_TYPE_Q4_K, TS_TYPE_Q4_K}, 3, 1, -1, 1},
        {"Q4_K, Q6_K, 2 tokens", {TS_TYPE_Q4_K, TS_TYPE_Q4_K, TS_TYPE_Q6_K}, 3, 2, -1, 2},
        {"Q4_K, Q6_K, ring forced", {TS_TYPE_Q4_K, TS_TYPE_Q4_K, TS_TYPE_Q6_K}, 3, 1, 1, 2},
        {"Q4_K, Q6_K, registers forced", {TS_TYPE_Q4_K, TS_TYPE_Q4_K, TS_TYPE_Q6_K}, 3, 1, 0, 1},
        {"Q4_K, Q5_K, Q6_K", {TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K}, 3, 1, -1, 3},
        {"Q4_K, Q5_K", {TS_TYPE_Q4_K, TS_TYPE_Q5_K, 0}, 2, 1, -1, 2},
        {"Q4_0, Q8_0", {TS_TYPE_Q4_0, TS_TYPE_Q8_0, 0}, 2, 1, -1, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_cuda_mat m[3];
        memset(m, 0, sizeof m);
        for (int j = 0; j < cases[i].n_w; j++) m[j].type = cases[i].t[j];
        ts_cuda_matvec_q8_force_loader(cases[i].loader);
        const int got = ts_cuda_matvec_q8_launches(cases[i].n_w, m, cases[i].n_tok);
        ts_cuda_matvec_q8_force_loader(-1);
        printf("launch rule %-54s %d launches (want %d) %s\n", cases[i].name, got, cases[i].want, got == cases[i].want ? "ok" : "FAIL");
        CHECKF(got == cases[i].want, "launch rule %s: %d launches, want %d", cases[i].name, got, cases[i].want);
    }
}

static void check_rows_rule(void) {
    struct {
        const char *name;
        uint32_t type;
        int64_t n_in, n_out0, n_out1;
        int n_tok, sms, want;
    } cases[] = {
        {"7B down Q6_K", TS_TYPE_Q6_K, 18944, 3584, 0, 1, 132, 4},
        {"7B down Q4_K", TS_TYPE_Q4_K, 18944, 3584, 0, 1, 132, 4},
        {"7B o", TS_TYPE_Q4_K, 3584, 3584, 0, 1, 132, 4},
        {"1.5B down", TS_TYPE_Q4_K, 8960, 1536, 0, 1, 132, 2},
        {"7B q+k", TS_TYPE_Q4_K, 3584, 3584, 512, 1, 132, 4},
        {"7B gate+up", TS_TYPE_Q4_K, 3584, 18944, 18944, 1, 132, 4},
        {"7B lm_head", TS_TYPE_Q6_K, 3584, 152064, 0, 1, 132, 4},
        {"7B down, 16 SMs", TS_TYPE_Q6_K, 18944, 3584, 0, 1, 16, 4},
        {"SmolLM2 o", TS_TYPE_Q4_0, 576, 576, 0, 1, 132, 2},
        {"7B down, 2 tokens", TS_TYPE_Q6_K, 18944, 3584, 0, 2, 132, 2},
        {"7B gate+up Q8_0", TS_TYPE_Q8_0, 3584, 18944, 18944, 1, 132, 2},
    };
    int bad = 0;
    for (const auto &c : cases) {
        ts_cuda_mat w[2];
        for (int i = 0; i < 2; i++)
            w[i] = ts_cuda_mat{(void *)256, c.type, c.n_in, i ? c.n_out1 : c.n_out0,
                               ts_type_row_bytes(c.type, (uint64_t)c.n_in), NULL};
        const int got = ts_cuda_matvec_q8_rows(c.n_out1 ? 2 : 1, w, c.n_tok, c.sms);
        CHECKF(got == c.want, "rows rule: %s: %d rows per group, want %d", c.name, got, c.want);
        bad += got != c.want;
    }
    ts_cuda_mat w = {(void *)256, TS_TYPE_Q4_K, 3584, 0, ts_type_row_bytes(TS_TYPE_Q4_K, 3584), NULL};
    CHECKF(ts_cuda_matvec_q8_rows(1, &w, 1, 132) == 0, "rows rule: a weight without rows is refused");
    printf("%-60s %s\n", "rows per group rule (11 launch shapes)", bad ? "FAIL" : "ok");
}

int main(void) {
    tcu_seed_init("test_cuda_matvec");
    tcu_require_gpu("test_cuda_matvec");
    check_rows_rule();
    check_launch_rule();
    if (tcu_small()) {
        run_case(one(TS_TYPE_Q4_0, 576, 67, 1, true, false, true, false));
        run_case(one(TS_TYPE_Q6_K, 512, 33, 3, false, true, false, false));
        run_case(one(TS_TYPE_F16, 288, 19, 2, false, false, true, false));
        run_case(one(TS_TYPE_Q4_K, 512, 33, 2, true, false, true, true));
        run_case(one(TS_TYPE_Q5_0, 320, 17, 1, false, false, false, true));
        Case s = one(TS_TYPE_Q4_K, 256, 64, 1, true, false, true, false);
        s.n_w = 3, s.type[1] = TS_TYPE_Q4_K, s.type[2] = TS_TYPE_Q6_K, s.n_out[1] = 16, s.n_out[2] = 16;
        run_case(s);
        s.int8 = true; /* the same on the int8 path: one launch for both types (the pair) */
        run_case(s);
        run_case(one(TS_TYPE_Q4_K, 4096, 2643, 1, false, true, false, true)); /* 4 rows per group, a partial last group */
        /* runs of 9 groups of 4 rows (kw 1): one store for 8 groups' outputs, then one for the run's last */
        run_case(one(TS_TYPE_Q4_0, 64, 89761, 1, true, true, false, true));
        /* 25 blocks a row (an odd count): Q4_0's direct loader sees rows that
         * alternate between 4-byte and 2 mod 4 starts, and a last block whose
         * fifth 4-byte word would end past the matrix */
        run_case(one(TS_TYPE_Q4_0, 800, 37, 1, true, true, false, true));
        run_case(one(TS_TYPE_Q4_0, 800, 37, 3, false, false, true, true));
        /* Q6_K rows of 3 blocks of 210 bytes: alternating 4-byte and 2 mod 4 starts, on the staged and ring loaders */
        run_case(one(TS_TYPE_Q6_K, 768, 37, 1, true, true, false, true));
        /* both splits of a group's chunks (MVQ_KW1), whichever the rule picks above */
        for (g_kw1 = 0; g_kw1 < 2; g_kw1++) {
            run_case(one(TS_TYPE_Q4_K, 4096, 2643, 1, false, true, false, true));
            run_case(one(TS_TYPE_Q5_K, 2048, 37, 3, true, false, true, true)); /* 2 chunks: 1024 had 1, no split */
        }
        g_kw1 = -1;
        run_case(one(TS_TYPE_F32, 2048, 128, 1, false, false, true, false)); /* a 30B-A3B router, self-normalized too */
        check_quantize_act(TS_TYPE_Q8_0, 0, 576, 1);
        check_quantize_act(TS_TYPE_Q8_K, 1, 512, 2);
        return tu_finish();
    }
    for (size_t ti = 0; ti < TCU_N_TYPES; ti++) {
        const uint32_t t = tcu_all_types[ti];
        const bool k = ts_type_get(t)->block_elems == 256;
        if (!k) run_case(one(t, 576, 301, 1, false, false, false, false));
        run_case(one(t, 2816, 301, 1, false, false, false, false));
        run_case(one(t, 2816, 67, 3, true, false, true, false));
        run_case(one(t, 4096, 37, 8, true, true, false, false));
        run_case(one(t, 4096, 64, 5, false, false, true, false));
        if (ts_cuda_q8_partner(t) != TS_TYPE_COUNT) {
            if (!k) run_case(one(t, 576, 301, 1, false, false, false, true));
            if (!k) run_case(one(t, 800, 37, 1, true, true, false, true)); /* an odd block count a row */
            run_case(one(t, 2816, 301, 1, false, false, false, true));
            run_case(one(t, 2816, 67, 3, true, false, true, true));
            run_case(one(t, 4096, 37, 8, true, true, false, true));
            /* enough rows for 4 per group at one token (MVQ_R1_BIG), the last group partial */
            run_case(one(t, 4096, 2643, 1, true, true, false, true));
            /* runs longer than the groups one gathered store takes (kw 1) */
            run_case(one(t, 256, 89761, 1, true, true, false, true));
            /* both splits of a group's chunks (MVQ_KW1), whichever the rule picks above */
            for (g_kw1 = 0; g_kw1 < 2; g_kw1++) {
                run_case(one(t, 2816, 301, 1, false, false, false, true));
                run_case(one(t, 4096, 37, 8, true, true, false, true));
            }
            g_kw1 = -1;
        }
    }
    /* several weights sharing x: Q/K/V of a Q4_K_M model (V in Q6_K), gate/up */
    Case q = one(TS_TYPE_Q4_K, 1536, 1536, 1, true, false, true, false);
    q.n_w = 3, q.type[1] = TS_TYPE_Q4_K, q.type[2] = TS_TYPE_Q6_K, q.n_out[1] = 256, q.n_out[2] = 256;
    run_case(q);
    q.int8 = true;
    run_case(q);
    q.n_tok = 3;
    run_case(q);
    /* a 7B Q4_K_M layer's Q/K/V (V in Q6_K on half the layers), and Q5_K_M's */
    Case v = one(TS_TYPE_Q4_K, 3584, 3584, 1, true, false, true, true);
    v.n_w = 3, v.type[1] = TS_TYPE_Q4_K, v.type[2] = TS_TYPE_Q6_K, v.n_out[1] = 512, v.n_out[2] = 512;
    run_case(v);
    v.type[0] = v.type[1] = TS_TYPE_Q5_K, v.type[2] = TS_TYPE_Q6_K;
    run_case(v);
    v.type[0] = TS_TYPE_Q6_K, v.type[2] = TS_TYPE_Q5_K; /* the V first: the launch orders them */
    run_case(v);
    q.n_tok = 4;
    q.int8 = false;
    run_case(q);
    Case f = one(TS_TYPE_F16, 576, 1536, 2, false, false, true, false);
    f.n_w = 4, f.type[1] = TS_TYPE_Q4_0, f.type[2] = TS_TYPE_BF16, f.type[3] = TS_TYPE_Q8_0;
    f.n_out[1] = 1536, f.n_out[2] = 193, f.n_out[3] = 64;
    run_case(f);
    Case gu = one(TS_TYPE_Q8_0, 896, 4864, 1, false, false, true, true);
    gu.n_w = 2, gu.type[1] = TS_TYPE_Q5_0, gu.n_out[1] = 4864;
    run_case(gu);
    /* residual add fused into a large down projection */
    run_case(one(TS_TYPE_Q6_K, 8960, 1536, 1, false, true, false, false));
    run_case(one(TS_TYPE_F32, 2048, 128, 1, false, false, true, false)); /* a 30B-A3B router, self-normalized too */
    run_case(one(TS_TYPE_F32, 2048, 130, 2, false, false, true, false)); /* with a folded pilot: 2 tokens' rows */
    run_case(one(TS_TYPE_Q6_K, 8960, 1536, 1, false, true, false, true));
    /* 7B down projections (4 rows per group on an H200; check_rows_agree
     * runs them with 2 as well) */
    run_case(one(TS_TYPE_Q6_K, 18944, 3584, 1, false, true, false, true));
    run_case(one(TS_TYPE_Q4_K, 18944, 3584, 1, false, true, false, true));
    for (int act = 0; act < 2; act++) {
        check_quantize_act(TS_TYPE_Q8_0, act, 1536, 1);
        check_quantize_act(TS_TYPE_Q8_K, act, 8960, 1);
        check_quantize_act(TS_TYPE_Q8_K, act, 4864, 5);
    }
    check_refusals();
    return tu_finish();
}
