/* Attention (attention.cu) against the CPU backend's attention op, on random
 * q and a random F16 cache.
 *
 * Threshold 1e-5 on ||out - ref|| / ||ref||: both compute the scores in float
 * from the same F16 keys (different summation orders), the softmax in float
 * (the CPU sums it in double) and the weighted sum of the same F16 values;
 * the online softmax adds one rescaling per 32-key tile. Observed differences
 * are expected near 1e-7-1e-6; a wrong mask, head or position is O(1).
 *
 * The cache past the last visible position is filled with NaN: a kernel that
 * reads a masked value into a sum (0 * NaN) fails. Decode (n_tok <= 8) runs the
 * split-K path over the whole n_ctx, prefill the tiled path; GQA groups of 1,
 * 3, 6, 7 and 16 (two head chunks), windows, head_dim 64/128/256, and a
 * position outside the cache (TS_CUDA_ERR_POS, zero output row). The same
 * launch is run twice and must agree bit for bit (a moving result is a race).
 * The scratch is poisoned before each launch: a split past the position
 * writes only its max and sum, so a merge that read its stale output, or
 * stopped short of a live split, fails.
 * Decode cases also run ts_cuda_attention_q8 (the split merge fused with the
 * activation quantization; with one split, a cache of at most two tiles per
 * warp, a Q8_0 partner is quantized by the decode kernel itself, cases at
 * n_ctx 129, 256 and 257) for each partner the row suits: its output and
 * quantized bytes must equal the plain attention's and ts_cuda_quantize_q8's
 * of it, bit for bit.
 * One-token decode cases with at most 8 query heads per kv head also run
 * ts_cuda_rope_attention (RoPE and the K/V store inside the decode kernel)
 * against ts_cuda_rope_kv_store then the attention, from the same unrotated
 * q, k, v: output, both caches (every byte) and the quantized bytes must be
 * equal bit for bit, normal and NeoX pairs, all or half of the dims rotated,
 * with and without the per-head norms;
 * q and k stay unrotated; a position outside the cache stores nothing. */
#include "cpu_ref.h"
#include "cuda_test_util.h"

struct AttCase {
    int n_tok, n_head, n_head_kv, head_dim, n_ctx, pos0, window;
};

static void run(const AttCase &c) {
    const int hd = c.head_dim;
    const size_t nq = (size_t)c.n_tok * c.n_head * hd, ncache = (size_t)c.n_head_kv * c.n_ctx * hd;
    float *q = (float *)malloc(4 * nq), *ref = (float *)malloc(4 * nq), *got = (float *)malloc(4 * nq),
          *got2 = (float *)malloc(4 * nq);
    uint16_t *kc = (uint16_t *)malloc(2 * ncache), *vc = (uint16_t *)malloc(2 * ncache);
    int32_t *pos = (int32_t *)malloc(4 * c.n_tok);
    tcu_fill_normal(q, nq, 1.0f);
    const int last = c.pos0 + c.n_tok - 1;
    for (int h = 0; h < c.n_head_kv; h++)
        for (int p = 0; p < c.n_ctx; p++)
            for (int d = 0; d < hd; d++) {
                const size_t i = ((size_t)h * c.n_ctx + p) * hd + d;
                if (p > last) kc[i] = vc[i] = 0x7e00; /* NaN: never visible */
                else kc[i] = ts_f32_to_f16(tcu_normal()), vc[i] = ts_f32_to_f16(tcu_normal());
            }
    for (int t = 0; t < c.n_tok; t++) pos[t] = c.pos0 + t;
    const float scale = 1.0f / sqrtf((float)hd);
    cref_attention(kc, vc, c.n_tok, c.pos0, c.n_head, c.n_head_kv, hd, c.n_ctx, c.window, scale, q, ref);

    float *dq = (float *)tcu_dalloc(4 * nq), *dout = (float *)tcu_dalloc(4 * nq);
    uint16_t *dk = (uint16_t *)tcu_dalloc(2 * ncache), *dv = (uint16_t *)tcu_dalloc(2 * ncache);
    int32_t *dpos = (int32_t *)tcu_dalloc(4 * c.n_tok);
    unsigned *derr = (unsigned *)tcu_dalloc(4);
    tcu_up(dq, q, 4 * nq), tcu_up(dk, kc, 2 * ncache), tcu_up(dv, vc, 2 * ncache), tcu_up(dpos, pos, 4 * c.n_tok);
    TCU(cudaMemset(derr, 0, 4));
    ts_cuda_attn a = {dq, dk, dv, dpos, dout, derr, c.n_tok, c.n_head, c.n_head_kv, hd, c.n_ctx, c.window, scale};
    const size_t sb = ts_cuda_attn_scratch_bytes(&a);
    void *scratch = sb ? tcu_dalloc(sb) : NULL;
    char what[128];
    snprintf(what, sizeof what, "attention %s t=%d h=%d/%d hd=%d ctx=%d pos0=%d win=%d", c.n_tok <= 8 ? "decode" : "prefill",
             c.n_tok, c.n_head, c.n_head_kv, hd, c.n_ctx, c.pos0, c.window);
    for (int rep = 0; rep < 2; rep++) {
        tcu_poison(dout, 4 * nq);
        if (scratch) tcu_poison(scratch, sb);
        TCU_OK(ts_cuda_attention(NULL, &a, scratch, sb), what);
        tcu_sync(what);
        tcu_down(rep ? got2 : got, dout, 4 * nq);
    }
    tcu_report(what, tcu_rel_err(got, ref, nq), 1e-5, tcu_unwritten(got, nq, 4));
    CHECKF(memcmp(got, got2, 4 * nq) == 0, "%s: two runs differ (a race?)", what);
    unsigned err = 1;
    tcu_down(&err, derr, 4);
    CHECKF(err == 0, "%s: err %u", what, err);

    /* attention + quantization for an int8 Wo: the output and the quantized
     * bytes must be those of ts_cuda_attention then ts_cuda_quantize_q8, bit
     * for bit (the split-K merge moves into the quantization kernel) */
    const int64_t n_in = (int64_t)c.n_head * hd;
    for (int k = 0; k < 2 && c.n_tok <= TS_CUDA_MAX_DECODE_TOK; k++) {
        const uint32_t partner = k ? TS_TYPE_Q8_K : TS_TYPE_Q8_0;
        const size_t qb = ts_cuda_q8_bytes(partner, n_in, c.n_tok);
        if (!qb) continue;
        uint8_t *dq8 = (uint8_t *)tcu_dalloc(qb), *dq8r = (uint8_t *)tcu_dalloc(qb);
        uint8_t *h8 = (uint8_t *)malloc(qb), *h8r = (uint8_t *)malloc(qb);
        char w2[160];
        snprintf(w2, sizeof w2, "%s + %s", what, ts_type_name(partner));
        tcu_poison(dq8, qb), tcu_poison(dq8r, qb);
        TCU_OK(ts_cuda_quantize_q8(NULL, partner, dout, n_in, c.n_tok, NULL, 0.0f, dq8r), w2); /* dout: the plain run's */
        tcu_poison(dout, 4 * nq);
        if (scratch) tcu_poison(scratch, sb);
        TCU_OK(ts_cuda_attention_q8(NULL, &a, scratch, sb, partner, dq8), w2);
        tcu_sync(w2);
        tcu_down(got2, dout, 4 * nq);
        tcu_down(h8, dq8, qb), tcu_down(h8r, dq8r, qb);
        const bool same_out = memcmp(got, got2, 4 * nq) == 0, same_q8 = memcmp(h8, h8r, qb) == 0;
        printf("%-60s out %s, q8 %s\n", w2, same_out ? "same" : "DIFFERS", same_q8 ? "same" : "DIFFERS");
        CHECKF(same_out && same_q8, "%s: fused output %s, quantized %s", w2, same_out ? "same" : "differs",
               same_q8 ? "same" : "differs");
        free(h8), free(h8r);
        cudaFree(dq8), cudaFree(dq8r);
    }

    /* one token past the cache: flagged, its rows zero, the others still right */
    if (c.n_tok >= 2) {
        pos[c.n_tok - 1] = c.n_ctx;
        tcu_up(dpos, pos, 4 * c.n_tok);
        tcu_poison(dout, 4 * nq);
        TCU_OK(ts_cuda_attention(NULL, &a, scratch, sb), "attention bad pos");
        tcu_sync("attention bad pos");
        tcu_down(got, dout, 4 * nq);
        tcu_down(&err, derr, 4);
        const size_t row = (size_t)c.n_head * hd, good = nq - row;
        bool zero = true;
        for (size_t i = good; i < nq; i++) zero &= got[i] == 0.0f;
        CHECKF(err == TS_CUDA_ERR_POS && zero, "%s bad pos: err %u, zero row %d", what, err, (int)zero);
        CHECKF(tcu_rel_err(got, ref, good) <= 1e-5, "%s bad pos: the other tokens changed", what);
    }
    free(q), free(ref), free(got), free(got2), free(kc), free(vc), free(pos);
    cudaFree(dq), cudaFree(dout), cudaFree(dk), cudaFree(dv), cudaFree(dpos), cudaFree(derr), cudaFree(scratch);
}

/* ts_cuda_rope_attention against ts_cuda_rope_kv_store + ts_cuda_attention(_q8) */
static void run_rope(const AttCase &c, int neox, int n_rot, uint32_t partner, bool bad_pos, bool norms) {
    const int hd = c.head_dim;
    const size_t nq = (size_t)c.n_head * hd, nk = (size_t)c.n_head_kv * hd, ncache = (size_t)c.n_head_kv * c.n_ctx * hd;
    const int64_t n_in = (int64_t)c.n_head * hd;
    const size_t qb = partner ? ts_cuda_q8_bytes(partner, n_in, 1) : 0;
    if (partner && !qb) return;
    float *q = (float *)malloc(4 * nq), *k = (float *)malloc(4 * nk), *v = (float *)malloc(4 * nk);
    float *freq = (float *)malloc(4 * (n_rot / 2 + 1));
    uint16_t *kc = (uint16_t *)malloc(2 * ncache), *vc = (uint16_t *)malloc(2 * ncache);
    tcu_fill_normal(q, nq, 1.0f), tcu_fill_normal(k, nk, 1.0f), tcu_fill_normal(v, nk, 1.0f);
    for (int i = 0; i < n_rot / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)n_rot);
    for (size_t i = 0; i < ncache; i++) {
        const int p = (int)((i / hd) % c.n_ctx);
        kc[i] = p < c.pos0 ? ts_f32_to_f16(tcu_normal()) : 0x7e00; /* the new row and past it: NaN */
        vc[i] = p < c.pos0 ? ts_f32_to_f16(tcu_normal()) : 0x7e00;
    }
    const int32_t pos = bad_pos ? c.n_ctx : c.pos0;
    float *dq[2], *dk[2], *dv, *dout[2], *dfreq;
    uint16_t *dkc[2], *dvc[2];
    uint8_t *dq8[2] = {NULL, NULL};
    int32_t *dpos;
    unsigned *derr[2];
    dv = (float *)tcu_dalloc(4 * nk), dfreq = (float *)tcu_dalloc(4 * (n_rot / 2 + 1)), dpos = (int32_t *)tcu_dalloc(4);
    tcu_up(dv, v, 4 * nk), tcu_up(dfreq, freq, 4 * (n_rot / 2 + 1)), tcu_up(dpos, &pos, 4);
    float *dnw = NULL; /* per-head norm weights: q's, then k's */
    if (norms) {
        float *nw = (float *)malloc(4 * 2 * hd);
        for (int i = 0; i < 2 * hd; i++) nw[i] = 1.0f + 0.25f * tcu_normal();
        dnw = (float *)tcu_dalloc(4 * 2 * hd);
        tcu_up(dnw, nw, 4 * 2 * hd);
        free(nw);
    }
    ts_cuda_attn a[2];
    ts_cuda_rope_kv r[2];
    size_t sb = 0;
    void *scratch[2];
    for (int f = 0; f < 2; f++) { /* 0: the two calls, 1: fused */
        dq[f] = (float *)tcu_dalloc(4 * nq), dk[f] = (float *)tcu_dalloc(4 * nk), dout[f] = (float *)tcu_dalloc(4 * nq);
        dkc[f] = (uint16_t *)tcu_dalloc(2 * ncache), dvc[f] = (uint16_t *)tcu_dalloc(2 * ncache);
        derr[f] = (unsigned *)tcu_dalloc(4);
        tcu_up(dq[f], q, 4 * nq), tcu_up(dk[f], k, 4 * nk), tcu_up(dkc[f], kc, 2 * ncache), tcu_up(dvc[f], vc, 2 * ncache);
        TCU(cudaMemset(derr[f], 0, 4));
        tcu_poison(dout[f], 4 * nq);
        if (qb) dq8[f] = (uint8_t *)tcu_dalloc(qb), tcu_poison(dq8[f], qb);
        a[f] = ts_cuda_attn{dq[f], dkc[f], dvc[f], dpos, dout[f], derr[f], 1, c.n_head, c.n_head_kv, hd, c.n_ctx, c.window,
                            1.0f / sqrtf((float)hd)};
        r[f] = ts_cuda_rope_kv{dq[f], dk[f], dv, dpos, dfreq, dnw, dnw ? dnw + hd : NULL, dkc[f], dvc[f], derr[f], 1, c.n_head, c.n_head_kv, hd,
                               n_rot, c.n_ctx, neox ? TS_CUDA_ROPE_NEOX : TS_CUDA_ROPE_NORMAL, 0.875f, 1e-6f};
        sb = ts_cuda_attn_scratch_bytes(&a[f]);
        scratch[f] = sb ? tcu_dalloc(sb) : NULL;
        if (sb) tcu_poison(scratch[f], sb);
    }
    char what[200];
    snprintf(what, sizeof what, "rope+attention h=%d/%d hd=%d ctx=%d pos=%d win=%d %s rot=%d %s%s", c.n_head, c.n_head_kv, hd,
             c.n_ctx, pos, c.window, neox ? "neox" : "normal", n_rot, partner ? ts_type_name(partner) : "f32",
             norms ? " qk-norm" : "");
    CHECKF(ts_cuda_rope_attention_fits(&r[1], &a[1]), "%s: does not fit", what);
    TCU_OK(ts_cuda_rope_kv_store(NULL, &r[0]), what);
    if (qb) TCU_OK(ts_cuda_attention_q8(NULL, &a[0], scratch[0], sb, partner, dq8[0]), what);
    else TCU_OK(ts_cuda_attention(NULL, &a[0], scratch[0], sb), what);
    TCU_OK(ts_cuda_rope_attention(NULL, &r[1], &a[1], scratch[1], sb, partner, dq8[1]), what);
    tcu_sync(what);
    float *out[2] = {(float *)malloc(4 * nq), (float *)malloc(4 * nq)}, *qa = (float *)malloc(4 * nq), *ka = (float *)malloc(4 * nk);
    uint16_t *kca[2] = {(uint16_t *)malloc(2 * ncache), (uint16_t *)malloc(2 * ncache)};
    uint16_t *vca[2] = {(uint16_t *)malloc(2 * ncache), (uint16_t *)malloc(2 * ncache)};
    uint8_t *q8h[2] = {(uint8_t *)malloc(qb + 1), (uint8_t *)malloc(qb + 1)};
    unsigned err[2];
    for (int f = 0; f < 2; f++) {
        tcu_down(out[f], dout[f], 4 * nq), tcu_down(kca[f], dkc[f], 2 * ncache), tcu_down(vca[f], dvc[f], 2 * ncache);
        tcu_down(&err[f], derr[f], 4);
        if (qb) tcu_down(q8h[f], dq8[f], qb);
    }
    tcu_down(qa, dq[1], 4 * nq), tcu_down(ka, dk[1], 4 * nk);
    const bool same_out = memcmp(out[0], out[1], 4 * nq) == 0, same_k = memcmp(kca[0], kca[1], 2 * ncache) == 0,
               same_v = memcmp(vca[0], vca[1], 2 * ncache) == 0, same_q8 = !qb || memcmp(q8h[0], q8h[1], qb) == 0,
               raw_qk = memcmp(qa, q, 4 * nq) == 0 && memcmp(ka, k, 4 * nk) == 0;
    printf("%-72s out %s, k %s, v %s, q8 %s\n", what, same_out ? "same" : "DIFFERS", same_k ? "same" : "DIFFERS",
           same_v ? "same" : "DIFFERS", same_q8 ? "same" : "DIFFERS");
    CHECKF(same_out && same_k && same_v && same_q8, "%s: fused differs from rope_kv_store + attention", what);
    CHECKF(raw_qk, "%s: the fused call changed q or k", what);
    CHECKF(tcu_unwritten(out[1], nq, 4) == 0, "%s: output not all written", what);
    if (bad_pos) {
        CHECKF(err[0] == TS_CUDA_ERR_POS && err[1] == TS_CUDA_ERR_POS, "%s: err %u / %u", what, err[0], err[1]);
        CHECKF(memcmp(kca[1], kc, 2 * ncache) == 0 && memcmp(vca[1], vc, 2 * ncache) == 0, "%s: the cache changed", what);
    } else {
        CHECKF(err[0] == 0 && err[1] == 0, "%s: err %u / %u", what, err[0], err[1]);
        /* the new row was stored (it held NaN) */
        const size_t row = ((size_t)(c.n_head_kv - 1) * c.n_ctx + pos) * hd;
        CHECKF(kca[1][row] != 0x7e00 && vca[1][row + hd - 1] != 0x7e00, "%s: the new row was not stored", what);
    }
    for (int f = 0; f < 2; f++) {
        free(out[f]), free(kca[f]), free(vca[f]), free(q8h[f]);
        cudaFree(dq[f]), cudaFree(dk[f]), cudaFree(dout[f]), cudaFree(dkc[f]), cudaFree(dvc[f]), cudaFree(derr[f]);
        cudaFree(dq8[f]), cudaFree(scratch[f]);
    }
    free(q), free(k), free(v), free(freq), free(kc), free(vc), free(qa), free(ka);
    cudaFree(dv), cudaFree(dfreq), cudaFree(dpos), cudaFree(dnw);
}

static void run_rope_all(const AttCase &c) {
    /* Q8_K where the row suits it (n_head * head_dim a multiple of 256), else no quantization */
    const uint32_t k8 = ts_cuda_q8_bytes(TS_TYPE_Q8_K, (int64_t)c.n_head * c.head_dim, 1) ? TS_TYPE_Q8_K : 0;
    const uint32_t partners[3] = {0, TS_TYPE_Q8_0, k8};
    for (int i = 0; i < 3; i++) run_rope(c, i & 1, i == 2 ? c.head_dim / 2 : c.head_dim, partners[i], false, false);
    run_rope(c, 1, c.head_dim, TS_TYPE_Q8_0, false, true); /* per-head norms (qwen3) */
    run_rope(c, 0, c.head_dim / 2, k8, false, true);
    run_rope(c, 1, c.head_dim, TS_TYPE_Q8_0, true, false);
}

static void check_refusals(void) {
    ts_cuda_attn a;
    memset(&a, 0, sizeof a);
    CHECK(ts_cuda_attention(NULL, &a, NULL, 0) == TS_ERR_ARG);
    float *d = (float *)tcu_dalloc(1 << 20);
    a = ts_cuda_attn{d, (uint16_t *)d, (uint16_t *)d, (int32_t *)d, d, NULL, 1, 12, 2, 96, 1024, 0, 0.1f};
    CHECK(ts_cuda_attention(NULL, &a, NULL, 0) == TS_ERR_ARG); /* head_dim 96 */
    a.head_dim = 128, a.n_head = 13;
    CHECK(ts_cuda_attention(NULL, &a, NULL, 0) == TS_ERR_ARG); /* 13 % 2 */
    a.n_head = 12;
    const size_t sb = ts_cuda_attn_scratch_bytes(&a);
    if (sb) CHECK(ts_cuda_attention(NULL, &a, d, sb - 1) == TS_ERR_ARG); /* scratch too small */
    a.k = (uint16_t *)((uint8_t *)d + 8);
    CHECK(ts_cuda_attention(NULL, &a, d, 1 << 20) == TS_ERR_ARG); /* misaligned cache */
    /* the fused RoPE: 16 query heads per kv head (two blocks would read the
     * new row), a q norm without a k norm, two tokens */
    a = ts_cuda_attn{d, (uint16_t *)d, (uint16_t *)d, (int32_t *)d, d, NULL, 1, 32, 2, 128, 1024, 0, 0.1f};
    ts_cuda_rope_kv r = {d, d, d, (int32_t *)d, d, NULL, NULL, (uint16_t *)d, (uint16_t *)d, NULL, 1, 32, 2, 128, 128, 1024,
                         TS_CUDA_ROPE_NEOX, 1.0f, 1e-6f};
    CHECK(!ts_cuda_rope_attention_fits(&r, &a) && ts_cuda_rope_attention(NULL, &r, &a, d, 1 << 20, 0, NULL) == TS_ERR_ARG);
    a.n_head = r.n_head = 8;
    CHECK(ts_cuda_rope_attention_fits(&r, &a));
    r.q_norm = d;
    CHECK(ts_cuda_rope_attention(NULL, &r, &a, d, 1 << 20, 0, NULL) == TS_ERR_ARG);
    r.q_norm = NULL, r.n_tok = a.n_tok = 2;
    CHECK(ts_cuda_rope_attention(NULL, &r, &a, d, 1 << 20, 0, NULL) == TS_ERR_ARG);
    CHECK(cudaGetLastError() == cudaSuccess);
    cudaFree(d);
    printf("%-60s checked\n", "argument refusals");
}

int main(void) {
    tcu_seed_init("test_cuda_attention");
    tcu_require_gpu("test_cuda_attention");
    if (tcu_small()) {
        run({2, 6, 2, 64, 300, 200, 0});    /* decode, several splits */
        run({1, 8, 2, 64, 700, 650, 0});    /* decode, splits, rows of 512: both partners */
        run({1, 4, 1, 64, 10000, 9000, 0}); /* 79 splits: the fused merge's second term per thread */
        run({1, 4, 1, 64, 10000, 3, 0});    /* 79 splits, all but the first past the position (empty states) */
        run({1, 4, 1, 256, 70, 40, 16});    /* decode, head_dim 256, window */
        run({1, 9, 3, 64, 129, 128, 0});    /* one split, Q8_0 quantized in the decode kernel */
        run({12, 6, 3, 128, 48, 20, 0});    /* prefill */
        run_rope_all({1, 9, 3, 64, 300, 200, 0});   /* fused RoPE: splits, the new row mid-split */
        run_rope_all({1, 7, 1, 128, 100, 0, 0});    /* the first token */
        run_rope_all({1, 4, 1, 256, 70, 40, 16});   /* head_dim 256, window */
        run_rope_all({1, 28, 4, 128, 129, 128, 0}); /* one split: a group's 7 heads over 7 blocks, each storing k, v */
        run({3, 8, 2, 64, 129, 100, 0});            /* one split, a Q8_K partner, 3 tokens */
        check_refusals();
        return tu_finish();
    }
    /* n_tok, n_head, n_kv, hd, n_ctx, pos0, window */
    run({1, 9, 3, 64, 100, 0, 0});       /* SmolLM2, first token */
    run({1, 9, 3, 64, 2048, 1500, 0});
    run({1, 12, 2, 128, 4096, 4095, 0}); /* Qwen2.5-1.5B at the end of the cache */
    run({1, 28, 4, 128, 8192, 3000, 0}); /* 7B, GQA 7 */
    run({1, 28, 4, 128, 8192, 2, 0});    /* 7B early in a long context: every split but the first empty */
    run({2, 4, 1, 256, 4096, 2000, 16}); /* a window mid-cache: empty splits below and above it */
    run({2, 32, 2, 128, 1024, 77, 0});   /* GQA 16: two head chunks */
    run({8, 12, 2, 128, 512, 300, 0});
    run({3, 4, 1, 256, 1024, 700, 512}); /* Gemma 3 270M, sliding window */
    run({1, 4, 1, 256, 600, 599, 17});
    run({5, 8, 8, 64, 333, 40, 0});      /* no GQA, odd n_ctx */
    run({1, 9, 3, 64, 129, 128, 0});     /* SmolLM2 in bench's tg128 cache: one split, Q8_0 in the kernel */
    run({2, 9, 3, 64, 256, 200, 0});     /* the longest one-split cache for head_dim 64 */
    run({1, 9, 3, 64, 257, 256, 0});     /* one past it: split again */
    run({1, 28, 4, 128, 129, 100, 0});   /* 7B, one split: Q8_K keeps its quantization launch */
    run({1, 4, 1, 256, 128, 127, 0});    /* head_dim 256: two warps, one split up to 128 */
    run({3, 8, 2, 128, 200, 150, 0});    /* one split, a Q8_K partner, 3 tokens */
    run({1, 8, 2, 64, 129, 0, 0});       /* the same, head_dim 64, the first token */
    run({1, 4, 1, 64, 10000, 9000, 0});  /* 79 splits: the fused merge's second term per thread */
    run({9, 9, 3, 64, 64, 0, 0});        /* prefill from 0 */
    run({33, 12, 2, 128, 256, 100, 0});  /* prefill after a prefix */
    run({200, 28, 4, 128, 512, 0, 0});
    run({70, 4, 1, 256, 300, 5, 32});    /* prefill with a window */
    run({40, 6, 3, 64, 100, 60, 0});     /* prefill ending at the cache's last slot */
    /* fused RoPE + attention, one token */
    run_rope_all({1, 9, 3, 64, 100, 0, 0});      /* SmolLM2, first token */
    run_rope_all({1, 9, 3, 64, 2048, 1500, 0});
    run_rope_all({1, 12, 2, 128, 4096, 4095, 0}); /* the cache's last slot */
    run_rope_all({1, 28, 4, 128, 8192, 3000, 0}); /* 7B, GQA 7 */
    run_rope_all({1, 28, 4, 128, 8192, 2, 0});    /* early in a long context */
    run_rope_all({1, 8, 2, 128, 1024, 95, 0});    /* the new row at a split's end (split_len 96 or 32k) */
    run_rope_all({1, 8, 2, 128, 1024, 96, 0});    /* and at a split's start */
    run_rope_all({1, 4, 1, 256, 600, 599, 17});  /* window */
    run_rope_all({1, 8, 8, 64, 333, 40, 0});      /* no GQA */
    run_rope_all({1, 9, 3, 64, 129, 70, 0});      /* one split with Q8_0 in the kernel */
    run_rope_all({1, 9, 3, 64, 256, 255, 0});     /* the cache's last slot */
    run_rope_all({1, 28, 4, 128, 129, 128, 0});  /* 7B, one split: a group's 7 heads over 7 blocks, each storing k, v */
    check_refusals();
    return tu_finish();
}
