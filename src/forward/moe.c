/* The routed-expert FFN (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE).
 *
 *   r = h Wrouter                      (all n tokens in one matmul)
 *   for each token t:
 *     p = softmax(r_t) ; top-k by logit, ties to the lower expert id
 *     w = p[top-k] (/ sum when the family renormalises)
 *     experts = cache.fetch(top-k)     (resident, mapped, or slots + pread)
 *     out_t = sum_i w_i * down_i(act(gate_i h_t) * up_i h_t)   in rank order
 *   (+ sigmoid(h Wshgate) * shared_expert(h), qwen2moe)
 *
 * Experts run per token with the same ops in every residency mode: which
 * bytes the cache returns never changes, nor does the arithmetic, so output
 * is byte-identical whatever the cache holds, and whatever other sessions
 * do with the shared cache meanwhile (fetch pins the slots it hands out
 * until release). */
#include <math.h>
#include <string.h>

#include "forward/forward_internal.h"
#include "tensor/types.h"

void ts_topk(const float *x, int n, int k, int32_t *ids) {
    for (int i = 0; i < k; i++) ids[i] = -1;
    for (int e = 0; e < n; e++) {
        /* insertion: e goes before the first entry it strictly beats, so an
         * equal logit keeps the earlier (lower) id ahead */
        int pos = k;
        while (pos > 0 && (ids[pos - 1] < 0 || x[e] > x[ids[pos - 1]])) pos--;
        if (pos >= k) continue;
        memmove(ids + pos + 1, ids + pos, sizeof *ids * (size_t)(k - pos - 1));
        ids[pos] = e;
    }
}

static ts_mat expert_mat(const void *data, ts_type type, int64_t n_in, int64_t n_out, const char *name) {
    ts_mat m = {.data = data, .type = type, .n_in = n_in, .n_out = n_out, .row_bytes = ts_type_row_bytes(type, (uint64_t)n_in),
                .bias = NULL, .name = name};
    return m;
}

/* Router weights of the top-k: softmax over all experts, then (per family)
 * renormalised over the k, in double for a result independent of order. */
static void topk_weights(const float *r, int n_expert, const int32_t *ids, int k, bool renorm, float *w) {
    double mx = r[ids[0]], z = 0, sel = 0;
    for (int e = 0; e < n_expert; e++) z += exp((double)r[e] - mx);
    for (int i = 0; i < k; i++) sel += exp((double)r[ids[i]] - mx);
    for (int i = 0; i < k; i++) w[i] = (float)(exp((double)r[ids[i]] - mx) / (renorm ? sel : z));
}

ts_status ts_forward_moe(ts_session *s, int l, int n) {
    const ts_model_desc *md = &s->model->desc;
    const ts_hparams *hp = &md->hp;
    const ts_layer *L = &md->layers[l];
    ts_stream *st = s->st;
    const ts_backend_ops *op = s->be->ops;
    const ts_hooks *h = s->hooks;
    const int E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used, FE = hp->n_ff_exp;
    const expert_layer_info *li = &md->emap.layers[md->emap.moe_of_block[l]];
    expert_cache *ec = s->model->ecache;

    /* router logits for every token, to the host for the top-k */
    const ts_mat *rw[1] = {&L->ffn_router};
    op->matmul(st, 1, rw, &s->router, s->xb, n);
    op->to_host(st, s->router_host, s->router, sizeof(float) * (size_t)n * (size_t)NE);

    for (int t = 0; t < n; t++) {
        const float *r = s->router_host + (size_t)t * NE;
        int32_t ids[CACHE_MAX_K];
        float w[CACHE_MAX_K];
        ts_topk(r, NE, K, ids);
        topk_weights(r, NE, ids, K, hp->expert_norm, w);
        if (TS_UNLIKELY(h != NULL) && h->route) {
            ts_status rs = h->route(h->user, l, ids, r);
            if (rs != TS_OK) return rs;
        }
        HOOK(h, mark, s, TS_PHASE_ROUTER);

        /* the experts' bytes: pinned in the shared cache until released */
        const void *g[CACHE_MAX_K], *u[CACHE_MAX_K], *d[CACHE_MAX_K];
        expert_cache_pass pass;
        ts_status rc = expert_cache_fetch(ec, l, ids, K, g, u, d, &pass);
        if (rc != TS_OK) return rc;
        HOOK(h, io_wait, pass.io_wait_s);

        const float *x = s->xb + (size_t)t * E;
        float *out = s->xb2 + (size_t)t * E;
        for (int i = 0; i < K; i++) {
            ts_mat mg = expert_mat(g[i], li->type[EXPERT_PROJ_GATE], E, FE, "ffn_gate_exps");
            ts_mat mu = expert_mat(u[i], li->type[EXPERT_PROJ_UP], E, FE, "ffn_up_exps");
            ts_mat mdn = expert_mat(d[i], li->type[EXPERT_PROJ_DOWN], FE, E, "ffn_down_exps");
            const ts_mat *gu[2] = {&mg, &mu};
            float *gu_out[2] = {s->exp_gate, s->exp_up};
            op->matmul(st, 2, gu, gu_out, x, 1);
            op->act_mul(st, md->fam->act, s->exp_gate, s->exp_up, FE, s->exp_gate);
            const ts_mat *dn[1] = {&mdn};
            op->matmul(st, 1, dn, &s->exp_out, s->exp_gate, 1);
            if (i == 0) op->scale(st, out, s->exp_out, w[0], E);
            else op->scale_add(st, out, s->exp_out, w[i], E);
        }
        /* the ops above have read the slots once the stream reaches here */
        rc = op->sync(st);
        expert_cache_release(ec, l, &pass);
        if (rc != TS_OK) return rc;
        HOOK(h, mark, s, TS_PHASE_EXPERT);
    }

    /* shared expert behind a sigmoid gate (qwen2moe), batched over tokens */
    if (L->ffn_gate_shexp.data) {
        const int SF = hp->n_ff_shexp;
        const ts_mat *gu[3] = {&L->ffn_gate_shexp, &L->ffn_up_shexp, &L->ffn_gate_inp_shexp};
        float *gu_out[3] = {s->sh_act, s->sh_up, s->sh_gate};
        op->matmul(st, 3, gu, gu_out, s->xb, n);
        op->act_mul(st, md->fam->act, s->sh_act, s->sh_up, (int64_t)n * SF, s->sh_act);
        HOOK(h, ffn_act, s, l, s->sh_act, n, SF, s->chunk_final);
        const ts_mat *dn[1] = {&L->ffn_down_shexp};
        op->matmul(st, 1, dn, &s->sh_out, s->sh_act, n);
        op->to_host(st, s->sh_gate_host, s->sh_gate, sizeof(float) * (size_t)n);
        for (int t = 0; t < n; t++) {
            float gsig = 1.0f / (1.0f + expf(-s->sh_gate_host[t]));
            op->scale_add(st, s->xb2 + (size_t)t * E, s->sh_out + (size_t)t * E, gsig, E);
        }
        HOOK(h, mark, s, TS_PHASE_DENSE_FFN);
    }
    return TS_OK;
}
