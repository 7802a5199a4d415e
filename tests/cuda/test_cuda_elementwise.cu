/* Element-wise ops and the embedding lookup (elementwise.cu) against the CPU
 * backend's ops, on random data.
 *
 * add, scale, scale_add: the CPU's operations in its order, no FMA: must be
 * bit-identical (threshold 0). act_mul (SiLU, GELU-tanh) and softcap: the
 * device expf/tanhf are within 2 ulp of glibc's, so elements differ by a few
 * 2^-24 of the inputs' scale: threshold 1e-6 on the error's norm over that of
 * gate*up (act_err), not of the result, since GELU's 1 + tanh cancels for
 * negative gates (one element measured 1.4e-6 against its own tiny value). embed: rows dequantized bit-identically, times the
 * scale in float: threshold 0, every type; an id outside the vocabulary gives
 * a zero row and TS_CUDA_ERR_TOKEN. */
#include "cpu_ref.h"
#include "cuda_test_util.h"

/* |got - ref| over |gate * up| (norms): the scale a few-ulp error of
 * expf/tanhf carries into act(gate) * up, whatever the cancellation. */
static double act_err(const float *got, const float *ref, const float *g, const float *u, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) return INFINITY;
        const double d = (double)got[i] - ref[i], s = (double)g[i] * u[i];
        num += d * d;
        den += s * s;
    }
    return den == 0 ? (num == 0 ? 0 : INFINITY) : sqrt(num / den);
}

static void test_ew(int64_t n) {
    float *x = (float *)malloc(4 * n), *y = (float *)malloc(4 * n), *ref = (float *)malloc(4 * n),
          *got = (float *)malloc(4 * n);
    float *dx = (float *)tcu_dalloc(4 * n), *dy = (float *)tcu_dalloc(4 * n), *dout = (float *)tcu_dalloc(4 * n);
    char what[96];
    for (int act = 0; act < 2; act++) {
        tcu_fill_normal(x, n, 3.0f);
        tcu_fill_normal(y, n, 1.0f);
        cref_act_mul(act, x, y, n, ref);
        tcu_up(dx, x, 4 * n), tcu_up(dy, y, 4 * n), tcu_poison(dout, 4 * n);
        snprintf(what, sizeof what, "act_mul %s n=%lld", act ? "gelu" : "silu", (long long)n);
        TCU_OK(ts_cuda_act_mul(NULL, act, dx, dy, n, dout), what);
        tcu_sync(what);
        tcu_down(got, dout, 4 * n);
        tcu_report(what, act_err(got, ref, x, y, n), 1e-6, tcu_unwritten(got, n, 4));
        /* in place (out = gate), as the forward pass calls it */
        TCU_OK(ts_cuda_act_mul(NULL, act, dx, dy, n, dx), what);
        tcu_sync(what);
        tcu_down(got, dx, 4 * n);
        snprintf(what, sizeof what, "act_mul %s n=%lld in-place", act ? "gelu" : "silu", (long long)n);
        tcu_report(what, act_err(got, ref, x, y, n), 1e-6, 0);
    }
    for (int op = 0; op < 4; op++) {
        static const char *names[] = {"add", "scale", "scale_add", "softcap"};
        tcu_fill_normal(x, n, op == 3 ? 40.0f : 2.0f);
        tcu_fill_normal(y, n, 2.0f);
        const float a = op == 3 ? 30.0f : 0.37f;
        memcpy(ref, x, 4 * n);
        switch (op) {
        case 0: cref_add(ref, y, n); break;
        case 1: cref_scale(ref, y, a, n); break;
        case 2: cref_scale_add(ref, y, a, n); break;
        default: cref_softcap(ref, n, a); break;
        }
        tcu_up(dx, x, 4 * n), tcu_up(dy, y, 4 * n);
        snprintf(what, sizeof what, "%s n=%lld", names[op], (long long)n);
        ts_status st = op == 0 ? ts_cuda_add(NULL, dx, dy, n)
                       : op == 1 ? ts_cuda_scale(NULL, dx, dy, a, n)
                       : op == 2 ? ts_cuda_scale_add(NULL, dx, dy, a, n)
                                 : ts_cuda_softcap(NULL, dx, n, a);
        CHECKF(st == TS_OK, "%s: %s", what, ts_last_error());
        tcu_sync(what);
        tcu_down(got, dx, 4 * n);
        tcu_report(what, tcu_rel_err(got, ref, n), op == 3 ? 1e-6 : 0.0, 0);
    }
    /* scale in place (x = a * x) */
    tcu_fill_normal(x, n, 2.0f);
    memcpy(ref, x, 4 * n);
    cref_scale(ref, ref, 1.5f, n);
    tcu_up(dx, x, 4 * n);
    TCU_OK(ts_cuda_scale(NULL, dx, dx, 1.5f, n), "scale in place");
    tcu_sync("scale in place");
    tcu_down(got, dx, 4 * n);
    snprintf(what, sizeof what, "scale n=%lld in-place", (long long)n);
    tcu_report(what, tcu_rel_err(got, ref, n), 0.0, 0);
    free(x), free(y), free(ref), free(got);
    cudaFree(dx), cudaFree(dy), cudaFree(dout);
}

static void test_embed(uint32_t type, int64_t n_in, int64_t vocab, int n, float scale) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    uint8_t *w = (uint8_t *)malloc(rb * vocab);
    tcu_fill_weights(type, w, vocab, n_in);
    int32_t *ids = (int32_t *)malloc(4 * n);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(tcu_u64() % (uint64_t)vocab);
    ids[0] = (int32_t)vocab - 1; /* the last row: its last block ends the matrix */
    if (n > 2) ids[2] = ids[1];
    const size_t no = (size_t)n * n_in;
    float *ref = (float *)malloc(4 * no), *got = (float *)malloc(4 * no);
    cref_embed(w, type, n_in, vocab, rb, ids, n, scale, ref);
    void *dw = tcu_dalloc(rb * vocab);
    int32_t *dids = (int32_t *)tcu_dalloc(4 * n);
    float *dout = (float *)tcu_dalloc(4 * no);
    unsigned *derr = (unsigned *)tcu_dalloc(4);
    tcu_up(dw, w, rb * vocab), tcu_up(dids, ids, 4 * n), tcu_poison(dout, 4 * no);
    TCU(cudaMemset(derr, 0, 4));
    ts_cuda_mat m = {dw, type, n_in, vocab, rb, NULL};
    char what[96];
    snprintf(what, sizeof what, "embed %s n_in=%lld ids=%d scale=%g", ts_type_name(type), (long long)n_in, n, (double)scale);
    TCU_OK(ts_cuda_embed(NULL, &m, dids, n, scale, dout, derr), what);
    tcu_sync(what);
    tcu_down(got, dout, 4 * no);
    tcu_report(what, tcu_rel_err(got, ref, no), 0.0, tcu_unwritten(got, no, 4));
    unsigned err = 1;
    tcu_down(&err, derr, 4);
    CHECKF(err == 0, "%s: err %u", what, err);
    /* an id past the vocabulary */
    ids[n - 1] = (int32_t)vocab;
    tcu_up(dids, ids, 4 * n), tcu_poison(dout, 4 * no);
    TCU_OK(ts_cuda_embed(NULL, &m, dids, n, scale, dout, derr), what);
    tcu_sync(what);
    tcu_down(got, dout, 4 * no);
    tcu_down(&err, derr, 4);
    bool zero = true;
    for (int64_t i = 0; i < n_in; i++) zero &= got[(size_t)(n - 1) * n_in + i] == 0.0f;
    CHECKF(err == TS_CUDA_ERR_TOKEN && zero, "%s bad id: err %u, zero row %d", what, err, (int)zero);
    free(w), free(ids), free(ref), free(got);
    cudaFree(dw), cudaFree(dids), cudaFree(dout), cudaFree(derr);
}

int main(void) {
    tcu_seed_init("test_cuda_elementwise");
    tcu_require_gpu("test_cuda_elementwise");
    if (tcu_small()) {
        test_ew(1001);
        test_embed(TS_TYPE_Q3_K, 256, 20, 3, 1.0f);
        test_embed(TS_TYPE_MXFP4, 96, 20, 2, 2.0f);
        test_embed(TS_TYPE_BF16, 64, 20, 2, 1.0f);
        return tu_finish();
    }
    test_ew(1);
    test_ew(1000003);
    test_ew(8960 * 3);
    for (size_t i = 0; i < TCU_N_TYPES; i++) {
        const uint32_t t = tcu_all_types[i];
        const bool k = ts_type_get(t)->block_elems == 256;
        test_embed(t, k ? 1536 : 576, 1000, 5, 1.0f);
        test_embed(t, k ? 2816 : 640, 333, 3, 25.29822f); /* Gemma's sqrt(n_embd) */
    }
    CHECK(ts_cuda_softcap(NULL, (float *)8, 10, 0.0f) == TS_ERR_ARG);
    CHECK(ts_cuda_act_mul(NULL, 7, (float *)8, (float *)8, 10, (float *)8) == TS_ERR_ARG);
    return tu_finish();
}
