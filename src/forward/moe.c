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
 * is byte-identical whatever the cache holds. */
#include <math.h>
#include <string.h>

#include "forward/forward_internal.h"
#include "tensor/types.h"

/* top-k of n logits: descending, ties to the lower id (k <= CACHE_MAX_K). */
static void topk(const float *x, int n, int k, int32_t *ids) {
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

static ts_mat expert_mat(const void *data, uint32_t type, int64_t n_in, int64_t n_out, const char *name) {
    ts_mat m = {.data = data, .type = type, .n_in = n_in, .n_out = n_out, .row_bytes = ts_type_row_bytes(type, (uint64_t)n_in),
                .bias = NULL, .name = name};
    return m;
}

ts_status ts_forward_moe(ts_session *s, int l, int n) {
    const ts_model_desc *md = &s->model->desc;
    const ts_hparams *hp = &md->hp;
    const ts_layer *L = &md->layers[l];
    ts_backend *be = s->be;
    const ts_backend_ops *op = be->ops;
    const int E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used, FE = hp->n_ff_exp;
    const int moe = md->emap.moe_of_block[l];
    const expert_layer_info *li = &md->emap.layers[moe];
    ts_diag *dg = s->model->diag;
    const bool ph = dg && dg->phases;
    const bool rec = dg && dg->router_on;
    double t0 = ph ? ts_now() : 0, t1;

    /* router logits for every token, to the host for the top-k */
    const ts_mat *rw[1] = {&L->ffn_router};
    op->matmul(be, 1, rw, &s->router, s->xb, n);
    op->download(be, s->router_host, s->router, (size_t)n * (size_t)NE);

    for (int t = 0; t < n; t++) {
        const float *r = s->router_host + (size_t)t * NE;
        int32_t ids[CACHE_MAX_K];
        float w[CACHE_MAX_K];
        topk(r, NE, K, ids);
        double mx = r[ids[0]], z = 0, sel = 0;
        for (int e = 0; e < NE; e++) z += exp((double)r[e] - mx);
        for (int i = 0; i < K; i++) sel += exp((double)r[ids[i]] - mx);
        for (int i = 0; i < K; i++) w[i] = (float)(exp((double)r[ids[i]] - mx) / (hp->expert_norm ? sel : z));
        if (TS_UNLIKELY(rec)) {
            ts_status rs = diag_router_record(&dg->router, l, ids, r);
            if (rs != TS_OK) return rs;
        }
        if (ph) {
            t1 = ts_now();
            dg->phase_s[TS_PHASE_ROUTER] += t1 - t0;
            t0 = t1;
        }

        const void *g[CACHE_MAX_K], *u[CACHE_MAX_K], *d[CACHE_MAX_K];
        expert_cache_stats before;
        if (ph) expert_cache_get_stats(s->model->ecache, moe, &before);
        ts_status st = expert_cache_fetch(s->model->ecache, l, ids, K, g, u, d, NULL);
        if (st != TS_OK) return st;
        if (ph) {
            expert_cache_stats after;
            expert_cache_get_stats(s->model->ecache, moe, &after);
            dg->phase_s[TS_PHASE_EXPERT_IO] += after.io_wait_s - before.io_wait_s;
            dg->phase_s[TS_PHASE_EXPERT] -= after.io_wait_s - before.io_wait_s; /* the wait is inside the span below */
        }

        const float *h = s->xb + (size_t)t * E;
        float *out = s->xb2 + (size_t)t * E;
        for (int i = 0; i < K; i++) {
            ts_mat mg = expert_mat(g[i], li->type[EXPERT_PROJ_GATE], E, FE, "ffn_gate_exps");
            ts_mat mu = expert_mat(u[i], li->type[EXPERT_PROJ_UP], E, FE, "ffn_up_exps");
            ts_mat mdn = expert_mat(d[i], li->type[EXPERT_PROJ_DOWN], FE, E, "ffn_down_exps");
            const ts_mat *gu[2] = {&mg, &mu};
            float *gu_out[2] = {s->exp_gate, s->exp_up};
            op->matmul(be, 2, gu, gu_out, h, 1);
            op->act_mul(be, md->fam->act, s->exp_gate, s->exp_up, FE, s->exp_gate);
            const ts_mat *dn[1] = {&mdn};
            op->matmul(be, 1, dn, &s->exp_out, s->exp_gate, 1);
            if (i == 0) op->scale(be, out, s->exp_out, w[0], E);
            else op->scale_add(be, out, s->exp_out, w[i], E);
        }
        if (ph) {
            t1 = ts_now();
            dg->phase_s[TS_PHASE_EXPERT] += t1 - t0;
            t0 = t1;
        }
    }

    /* shared expert behind a sigmoid gate (qwen2moe), batched over tokens */
    if (L->ffn_gate_shexp.data) {
        const int SF = hp->n_ff_shexp;
        const ts_mat *gu[3] = {&L->ffn_gate_shexp, &L->ffn_up_shexp, &L->ffn_gate_inp_shexp};
        float *gu_out[3] = {s->sh_act, s->sh_up, s->sh_gate};
        op->matmul(be, 3, gu, gu_out, s->xb, n);
        op->act_mul(be, md->fam->act, s->sh_act, s->sh_up, (int64_t)n * SF, s->sh_act);
        if (TS_UNLIKELY(s->tap != NULL)) s->tap(s->tap_user, TS_TAP_FFN_ACT, l, s->sh_act, n, SF, s->chunk_final);
        const ts_mat *dn[1] = {&L->ffn_down_shexp};
        op->matmul(be, 1, dn, &s->sh_out, s->sh_act, n);
        op->download(be, s->sh_gate_host, s->sh_gate, (size_t)n);
        for (int t = 0; t < n; t++) {
            float gsig = 1.0f / (1.0f + expf(-s->sh_gate_host[t]));
            op->scale_add(be, s->xb2 + (size_t)t * E, s->sh_out + (size_t)t * E, gsig, E);
        }
        if (ph) dg->phase_s[TS_PHASE_DENSE_FFN] += ts_now() - t0;
    }
    return TS_OK;
}

void ts_forward_pilot(ts_session *s, int l, int n) {
    const ts_model_desc *md = &s->model->desc;
    ts_diag *dg = s->model->diag;
    if (!dg->router_on) return;
    /* next-layer mode guesses layer l+1 from layer l's post-attention
     * residual; self mode aims at layer l's own router, whose input this
     * is exactly, so its recall must be 100% (a mis-wired probe shows) */
    int target = dg->pilot == TS_PILOT_SELF ? l : l + 1;
    if (target < 1 || target >= md->hp.n_layer || !md->layers[target].moe) return;
    ts_backend *be = s->be;
    const ts_backend_ops *op = be->ops;
    const int E = md->hp.n_embd, NE = md->hp.n_expert, K = md->hp.n_expert_used;
    const ts_layer *T = &md->layers[target];
    op->rmsnorm(be, s->x, T->ffn_norm, E, n, md->hp.norm_eps, s->pilot_h);
    const ts_mat *rw[1] = {&T->ffn_router};
    op->matmul(be, 1, rw, &s->pilot_r, s->pilot_h, n);
    op->download(be, s->pilot_host, s->pilot_r, (size_t)n * (size_t)NE);
    for (int t = 0; t < n; t++) {
        int32_t ids[CACHE_MAX_K];
        topk(s->pilot_host + (size_t)t * NE, NE, K, ids);
        diag_router_record_pred(&dg->router, target, ids);
    }
}
