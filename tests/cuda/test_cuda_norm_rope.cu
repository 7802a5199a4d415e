/* RMSNorm, 1/rms and RoPE + KV store (norm_rope.cu) against the CPU
 * backend's rmsnorm, rope_table, rope and kv_store ops, on random data.
 *
 * rmsnorm: same formula and roundings as cpu.c (double sum of squares, two
 * float products); the double sums differ only in order, so the float 1/rms
 * is the CPU's except with probability ~1e-8: threshold 1e-6 (one differing
 * 1/rms moves its row by 6e-8 relative; any indexing error by O(1)).
 * rms_inv: with w = 1 the CPU's out is x * inv exactly, so x * inv_gpu must
 * equal it bit for bit in >= 99.9% of rows (checked: every row).
 * RoPE: the device cosf/sinf are within 2 ulp of glibc's, the rest is the
 * CPU's arithmetic: q and k within 1e-6. Cache: V is F16 of the same floats
 * (bit-exact); K is F16 of the rotated floats (a 2-ulp difference can flip an
 * f16 rounding: threshold 1e-4 on the F16 values, a misplaced row or head is
 * O(1)); every cache slot outside the written positions must keep its poison
 * bits. A position outside the cache must set TS_CUDA_ERR_POS and write nothing. */
#include "cpu_ref.h"
#include "cuda_test_util.h"

static void test_rmsnorm(int64_t n, int64_t rows, bool in_place) {
    const size_t sz = (size_t)(n * rows);
    float *x = (float *)malloc(4 * sz), *w = (float *)malloc(4 * n), *ref = (float *)malloc(4 * sz),
          *got = (float *)malloc(4 * sz);
    tcu_fill_normal(x, sz, 3.0f);
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f + 0.5f * tcu_normal();
    cref_rmsnorm(x, w, n, rows, 1e-6f, ref);
    float *dx = (float *)tcu_dalloc(4 * sz), *dw = (float *)tcu_dalloc(4 * n), *dout = (float *)tcu_dalloc(4 * sz);
    tcu_up(dx, x, 4 * sz);
    tcu_up(dw, w, 4 * n);
    float *o = in_place ? dx : dout;
    if (!in_place) tcu_poison(dout, 4 * sz);
    char what[96];
    snprintf(what, sizeof what, "rmsnorm n=%lld rows=%lld%s", (long long)n, (long long)rows, in_place ? " in-place" : "");
    TCU_OK(ts_cuda_rmsnorm(NULL, dx, dw, n, rows, 1e-6f, o), what);
    tcu_sync(what);
    tcu_down(got, o, 4 * sz);
    tcu_report(what, tcu_rel_err(got, ref, sz), 1e-6, tcu_unwritten(got, sz, 4));

    /* 1/rms: x * inv must reproduce the CPU rmsnorm with unit weights exactly */
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f;
    cref_rmsnorm(x, w, n, rows, 1e-6f, ref);
    float *dinv = (float *)tcu_dalloc(4 * rows), *inv = (float *)malloc(4 * rows);
    tcu_up(dx, x, 4 * sz);
    tcu_poison(dinv, 4 * rows);
    TCU_OK(ts_cuda_rms_inv(NULL, dx, n, rows, 1e-6f, dinv), "rms_inv");
    tcu_sync("rms_inv");
    tcu_down(inv, dinv, 4 * rows);
    int64_t bad_rows = 0;
    for (int64_t r = 0; r < rows; r++) {
        bool same = true;
        for (int64_t i = 0; i < n; i++) {
            const float v = x[r * n + i] * inv[r];
            same &= memcmp(&v, &ref[r * n + i], 4) == 0;
        }
        bad_rows += !same;
    }
    snprintf(what, sizeof what, "rms_inv n=%lld rows=%lld", (long long)n, (long long)rows);
    printf("%-60s %lld rows differ from the CPU's 1/rms %s\n", what, (long long)bad_rows, bad_rows ? "FAIL" : "ok");
    CHECKF(bad_rows == 0, "%s: %lld rows", what, (long long)bad_rows);
    free(x), free(w), free(ref), free(got), free(inv);
    cudaFree(dx), cudaFree(dw), cudaFree(dout), cudaFree(dinv);
}

struct RopeCase {
    int n_tok, n_head, n_head_kv, head_dim, n_rot, mode, pos0, n_ctx;
    bool qk_norm, store;
    float base, mscale;
};

static void test_rope(const RopeCase &c) {
    const int hd = c.head_dim, half = c.n_rot / 2;
    const size_t nq = (size_t)c.n_tok * c.n_head * hd, nk = (size_t)c.n_tok * c.n_head_kv * hd;
    const size_t ncache = (size_t)c.n_head_kv * c.n_ctx * hd;
    float *q = (float *)malloc(4 * nq), *k = (float *)malloc(4 * nk), *v = (float *)malloc(4 * nk);
    float *freq = (float *)malloc(4 * (half + 1)), *qn = (float *)malloc(4 * hd), *kn = (float *)malloc(4 * hd);
    int32_t *pos = (int32_t *)malloc(4 * c.n_tok);
    tcu_fill_normal(q, nq, 2.0f);
    tcu_fill_normal(k, nk, 2.0f);
    tcu_fill_normal(v, nk, 2.0f);
    for (int i = 0; i < half; i++) freq[i] = powf(c.base, -2.0f * i / c.n_rot);
    for (int i = 0; i < hd; i++) qn[i] = 1.0f + 0.2f * tcu_normal(), kn[i] = 1.0f + 0.2f * tcu_normal();
    for (int t = 0; t < c.n_tok; t++) pos[t] = c.pos0 + t;

    float *dq = (float *)tcu_dalloc(4 * nq), *dk = (float *)tcu_dalloc(4 * nk), *dv = (float *)tcu_dalloc(4 * nk);
    float *dfreq = (float *)tcu_dalloc(4 * (half + 1)), *dqn = (float *)tcu_dalloc(4 * hd), *dkn = (float *)tcu_dalloc(4 * hd);
    int32_t *dpos = (int32_t *)tcu_dalloc(4 * c.n_tok);
    uint16_t *dkc = (uint16_t *)tcu_dalloc(2 * ncache), *dvc = (uint16_t *)tcu_dalloc(2 * ncache);
    unsigned *derr = (unsigned *)tcu_dalloc(4);
    tcu_up(dq, q, 4 * nq), tcu_up(dk, k, 4 * nk), tcu_up(dv, v, 4 * nk), tcu_up(dfreq, freq, 4 * half);
    tcu_up(dqn, qn, 4 * hd), tcu_up(dkn, kn, 4 * hd), tcu_up(dpos, pos, 4 * c.n_tok);
    tcu_poison(dkc, 2 * ncache), tcu_poison(dvc, 2 * ncache);
    TCU(cudaMemset(derr, 0, 4));

    ts_cuda_rope_kv a;
    memset(&a, 0, sizeof a);
    a.q = dq, a.k = dk, a.v = dv, a.pos = dpos, a.freq = dfreq;
    a.q_norm = c.qk_norm ? dqn : NULL, a.k_norm = c.qk_norm ? dkn : NULL;
    a.k_cache = c.store ? dkc : NULL, a.v_cache = c.store ? dvc : NULL, a.err = derr;
    a.n_tok = c.n_tok, a.n_head = c.n_head, a.n_head_kv = c.n_head_kv, a.head_dim = hd, a.n_rot = c.n_rot;
    a.n_ctx = c.n_ctx, a.mode = c.mode, a.mscale = c.mscale, a.eps = 1e-6f;
    char what[128];
    snprintf(what, sizeof what, "rope%s %s t=%d h=%d/%d hd=%d rot=%d pos0=%d%s", c.store ? "+kv" : "",
             c.mode ? "neox" : "norm", c.n_tok, c.n_head, c.n_head_kv, hd, c.n_rot, c.pos0, c.qk_norm ? " qknorm" : "");
    TCU_OK(ts_cuda_rope_kv_store(NULL, &a), what);
    tcu_sync(what);

    /* CPU: per-head norm, rope table, rope, kv store */
    if (c.qk_norm) {
        cref_rmsnorm(q, qn, hd, (int64_t)c.n_tok * c.n_head, 1e-6f, q);
        cref_rmsnorm(k, kn, hd, (int64_t)c.n_tok * c.n_head_kv, 1e-6f, k);
    }
    float *cs = (float *)malloc(4 * (size_t)c.n_tok * (half + 1) * 2);
    cref_rope_table(freq, c.n_rot, pos, c.n_tok, c.mscale, cs);
    cref_rope(q, c.n_tok, c.n_head, hd, c.n_rot, cs, c.mode);
    cref_rope(k, c.n_tok, c.n_head_kv, hd, c.n_rot, cs, c.mode);
    float *gq = (float *)malloc(4 * nq), *gk = (float *)malloc(4 * nk);
    tcu_down(gq, dq, 4 * nq), tcu_down(gk, dk, 4 * nk);
    char w2[160];
    snprintf(w2, sizeof w2, "%s q", what);
    tcu_report(w2, tcu_rel_err(gq, q, nq), 1e-6, tcu_unwritten(gq, nq, 4));
    snprintf(w2, sizeof w2, "%s k", what);
    tcu_report(w2, tcu_rel_err(gk, k, nk), 1e-6, tcu_unwritten(gk, nk, 4));
    if (c.store) {
        uint16_t *kc = (uint16_t *)malloc(2 * ncache), *vc = (uint16_t *)malloc(2 * ncache);
        uint16_t *gkc = (uint16_t *)malloc(2 * ncache), *gvc = (uint16_t *)malloc(2 * ncache);
        memset(kc, TCU_POISON_BYTE, 2 * ncache), memset(vc, TCU_POISON_BYTE, 2 * ncache);
        cref_kv_store(kc, vc, c.n_tok, c.pos0, c.n_head_kv, hd, c.n_ctx, k, v);
        tcu_down(gkc, dkc, 2 * ncache), tcu_down(gvc, dvc, 2 * ncache);
        size_t touched = 0, vbad = 0;
        float *fk = (float *)malloc(4 * nk), *fr = (float *)malloc(4 * nk);
        size_t m = 0;
        for (size_t i = 0; i < ncache; i++) {
            const bool written = kc[i] != 0xffff || vc[i] != 0xffff;
            if (!written) {
                touched += gkc[i] != 0xffff || gvc[i] != 0xffff;
                continue;
            }
            vbad += gvc[i] != vc[i];
            if (m < nk) fk[m] = ts_f16_to_f32(gkc[i]), fr[m] = ts_f16_to_f32(kc[i]), m++;
        }
        snprintf(w2, sizeof w2, "%s kcache", what);
        tcu_report(w2, m == nk ? tcu_rel_err(fk, fr, m) : INFINITY, 1e-4, 0);
        snprintf(w2, sizeof w2, "%s vcache/untouched", what);
        printf("%-60s %zu V values differ, %zu slots outside the positions written %s\n", w2, vbad, touched,
               vbad || touched ? "FAIL" : "ok");
        CHECKF(vbad == 0 && touched == 0 && m == nk, "%s: %zu V differ, %zu stray writes, %zu/%zu K slots", w2, vbad,
               touched, m, nk);
        free(kc), free(vc), free(gkc), free(gvc), free(fk), free(fr);
    }
    unsigned err = 0;
    tcu_down(&err, derr, 4);
    CHECKF(err == 0, "%s: err %u", what, err);

    /* a position outside the cache: flagged, nothing stored */
    if (c.store) {
        int32_t badpos = c.n_ctx;
        tcu_up(dpos, &badpos, 4);
        tcu_poison(dkc, 2 * ncache), tcu_poison(dvc, 2 * ncache);
        a.n_tok = 1;
        TCU_OK(ts_cuda_rope_kv_store(NULL, &a), "rope bad pos");
        tcu_sync("rope bad pos");
        tcu_down(&err, derr, 4);
        uint16_t *gkc = (uint16_t *)malloc(2 * ncache);
        tcu_down(gkc, dkc, 2 * ncache);
        size_t stray = tcu_unwritten(gkc, ncache, 2);
        CHECKF(err == TS_CUDA_ERR_POS && stray == ncache, "%s bad pos: err %u, %zu of %zu slots untouched", what, err,
               stray, ncache);
        free(gkc);
    }
    free(q), free(k), free(v), free(freq), free(qn), free(kn), free(pos), free(cs), free(gq), free(gk);
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dfreq), cudaFree(dqn), cudaFree(dkn), cudaFree(dpos);
    cudaFree(dkc), cudaFree(dvc), cudaFree(derr);
}

int main(void) {
    tcu_seed_init("test_cuda_norm_rope");
    tcu_require_gpu("test_cuda_norm_rope");
    if (tcu_small()) {
        test_rmsnorm(576, 3, false);
        test_rmsnorm(1536, 2, true);
        test_rmsnorm(64, 9, true);
        test_rope({2, 6, 2, 64, 64, TS_CUDA_ROPE_NEOX, 5, 16, true, true, 10000.0f, 1.0f});
        test_rope({1, 4, 1, 256, 256, TS_CUDA_ROPE_NORMAL, 3, 8, false, true, 10000.0f, 1.0f});
        return tu_finish();
    }
    test_rmsnorm(576, 1, false);
    test_rmsnorm(576, 37, true);
    test_rmsnorm(3584, 3, false);
    test_rmsnorm(8960, 2, true);
    test_rmsnorm(64, 9 * 7, false);  /* per-head: SmolLM2 heads x tokens */
    test_rmsnorm(128, 28 * 5, true); /* per-head, in place */
    test_rmsnorm(256, 4, false);
    /* n_tok, n_head, n_kv, hd, n_rot, mode, pos0, n_ctx, qk_norm, store, base, mscale */
    test_rope({1, 9, 3, 64, 64, TS_CUDA_ROPE_NORMAL, 0, 64, false, true, 10000.0f, 1.0f});
    test_rope({1, 12, 2, 128, 128, TS_CUDA_ROPE_NEOX, 4000, 4096, false, true, 1000000.0f, 1.0f});
    test_rope({5, 28, 4, 128, 128, TS_CUDA_ROPE_NEOX, 31000, 32768, true, true, 1000000.0f, 1.0f});
    test_rope({70, 4, 1, 256, 256, TS_CUDA_ROPE_NEOX, 3, 128, true, true, 10000.0f, 1.0f});
    test_rope({8, 8, 8, 128, 64, TS_CUDA_ROPE_NORMAL, 100, 200, false, true, 10000.0f, 1.25f}); /* partial rotation, mscale */
    test_rope({3, 6, 2, 64, 32, TS_CUDA_ROPE_NEOX, 17, 64, true, false, 500000.0f, 0.9f});     /* rotate only */
    return tu_finish();
}
