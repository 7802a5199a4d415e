/* The routed-expert FFN (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE), one chunk
 * of n tokens at a time:
 *
 *   r = h Wrouter                      (all n tokens in one matmul)
 *   for each token t:
 *     p = softmax(r_t) ; top-k by logit, ties to the lower expert id
 *     w_t = p[top-k] (/ sum when the family renormalises)
 *   for each distinct expert e of the chunk (first appearance over (t, rank)),
 *   fetched from the cache k at a time (resident, mapped, or slots + pread):
 *     Y_e = down_e(act(gate_e X_e) * up_e X_e)   X_e: e's tokens, one matmul each
 *   out_t = sum_i w_t,i * Y_{e_i}[t]   in rank order
 *   (+ sigmoid(h Wshgate) * shared_expert(h), qwen2moe)
 *
 * Determinism. The routing, so the groups, their sizes and the order of the
 * sums, depends only on the activations; which bytes the cache returns
 * never changes, nor does the arithmetic. Output is therefore byte-identical
 * whatever the mode or slot count, and whatever other sessions do with the
 * shared cache meanwhile (fetch pins the slots it hands out until release).
 * It is NOT byte-identical to running the same tokens one at a time: an
 * expert's matmul over m > 1 tokens takes the backend's GEMM path, whose
 * sums round differently from the matvec's (within the kernels' tested
 * tolerance); a chunk of one token (decode) is the per-token path exactly.
 *
 * Where the routing lives. The router's top-k runs on the backend
 * (moe_route), so the ids and weights are in backend memory. Decode with
 * every expert addressable by id (resident and mapped modes,
 * expert_cache_tables) reads them there: the expert matmuls index the tables
 * with the ids, nothing comes back to the host, and a device backend records
 * the token as one graph. A prefill chunk, and streamed mode, bring the ids
 * to the host to group the chunk and ask the cache. Both paths run the same
 * products and the same rank-order sums for one token, so decode output is
 * byte-identical across modes. */
#include <math.h>
#include <string.h>

#include "forward/forward_internal.h"
#include "tensor/types.h"

static ts_mat expert_mat(const void *data, ts_type type, int64_t n_in, int64_t n_out, const char *name) {
    ts_mat m = {.data = data, .type = type, .n_in = n_in, .n_out = n_out, .row_bytes = ts_type_row_bytes(type, (uint64_t)n_in),
                .bias = NULL, .name = name};
    return m;
}

/* Projection p of MoE block l through the tables (expert_cache_tables). */
static ts_expert_mat expert_set(const ts_session *s, int l, const void *const *tab[EXPERT_PROJ_COUNT],
                                const void *const *host_tab[EXPERT_PROJ_COUNT], int p) {
    const ts_hparams *hp = &s->model->desc.hp;
    const expert_layer_info *li = &s->model->desc.emap.layers[s->model->desc.emap.moe_of_block[l]];
    static const char *const names[EXPERT_PROJ_COUNT] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const bool down = p == EXPERT_PROJ_DOWN;
    const int64_t n_in = down ? hp->n_ff_exp : hp->n_embd;
    ts_expert_mat m = {.table = tab[p], .host_table = host_tab[p], .n_expert = hp->n_expert, .type = li->type[p], .n_in = n_in,
                       .n_out = down ? hp->n_embd : hp->n_ff_exp, .row_bytes = ts_type_row_bytes(li->type[p], (uint64_t)n_in),
                       .name = names[p]};
    return m;
}

/* The chunk's expert-cache passes: its distinct experts in order of first
 * appearance over (token, rank), at most k per pass. One token (decode)
 * gives exactly its top-k in rank order, one pass. analyze cache's replay
 * (router_capture.c, router_replay_layer) rebuilds the same sequence from
 * the trace and its chunk lengths: change both together. */
static int group_chunk(ts_session *s, int n, int NE, int K) {
    int32_t *cnt = s->moe_cnt, *order = s->moe_order, *off = s->moe_off;
    int nd = 0;
    for (int e = 0; e < NE; e++) cnt[e] = 0;
    for (int j = 0; j < n * K; j++) {
        int32_t e = s->moe_ids[j];
        if (cnt[e]++ == 0) order[nd++] = e;
    }
    int32_t o = 0;
    for (int i = 0; i < nd; i++) off[order[i]] = o, o += cnt[order[i]];
    /* tokens ascending inside each group; cnt becomes the fill position */
    for (int i = 0; i < nd; i++) cnt[order[i]] = 0;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < K; i++) {
            int32_t e = s->moe_ids[t * K + i];
            int32_t r = off[e] + cnt[e]++;
            s->moe_tok[r] = t;
            s->moe_row[t * K + i] = r;
        }
    return nd;
}

/* Decode through the expert tables: the ids and weights stay where they
 * were routed, so a device backend runs the token without a host round trip
 * (one recorded graph). The same products and sums as the fetch path for
 * one token: gate/up of each expert from the one xb row, act_mul over the k
 * rows, each down from its own row, the weighted sum in rank order. */
static void moe_decode_tables(ts_session *s, int l, const void *const *tab[EXPERT_PROJ_COUNT],
                              const void *const *host_tab[EXPERT_PROJ_COUNT]) {
    const ts_model_desc *md = &s->model->desc;
    const ts_backend_ops *op = s->be->ops;
    const int K = md->hp.n_expert_used;
    ts_expert_mat g = expert_set(s, l, tab, host_tab, EXPERT_PROJ_GATE);
    ts_expert_mat u = expert_set(s, l, tab, host_tab, EXPERT_PROJ_UP);
    ts_expert_mat d = expert_set(s, l, tab, host_tab, EXPERT_PROJ_DOWN);
    const ts_expert_mat *gu[2] = {&g, &u};
    float *gu_out[2] = {s->exp_gate, s->exp_up};
    op->moe_matmul(s->st, 2, gu, gu_out, s->moe_ids_dev, K, s->xb, false);
    op->moe_act_matmul(s->st, md->fam->act, s->exp_gate, s->exp_up, &d, s->exp_out, s->moe_ids_dev, K);
    expert_cache_count(s->model->ecache, l, K);
}

/* A prefill chunk through the tables: every (token, rank) row gathered in
 * expert order at once, each projection one grouped matmul over all the
 * chunk's experts, no expert fetched. The same products as the fetch path
 * (each expert over its gathered rows) and the same rank-order sums. */
static void moe_prefill_tables(ts_session *s, int l, int n, int nd, const void *const *tab[EXPERT_PROJ_COUNT],
                               const void *const *host_tab[EXPERT_PROJ_COUNT]) {
    const ts_model_desc *md = &s->model->desc;
    const ts_backend_ops *op = s->be->ops;
    const int E = md->hp.n_embd, K = md->hp.n_expert_used, FE = md->hp.n_ff_exp;
    const int rows = n * K;
    int32_t *gid = s->moe_order, *goff = s->moe_goff, *gcnt = s->moe_gcnt;
    for (int i = 0; i < nd; i++) goff[i] = s->moe_off[gid[i]], gcnt[i] = s->moe_cnt[gid[i]];
    const ts_expert_groups grp = {.n_group = nd, .id = gid, .off = goff, .cnt = gcnt, .n_rows = rows};
    ts_expert_mat g = expert_set(s, l, tab, host_tab, EXPERT_PROJ_GATE);
    ts_expert_mat u = expert_set(s, l, tab, host_tab, EXPERT_PROJ_UP);
    ts_expert_mat d = expert_set(s, l, tab, host_tab, EXPERT_PROJ_DOWN);
    const ts_expert_mat *gu[2] = {&g, &u}, *dn[1] = {&d};
    float *gu_out[2] = {s->exp_gate, s->exp_up}, *dn_out[1] = {s->exp_out};
    op->gather_rows(s->st, s->exp_x, s->xb, s->moe_tok_dev, rows, E);
    op->moe_matmul_grouped(s->st, 2, gu, gu_out, &grp, s->exp_x);
    op->act_mul(s->st, md->fam->act, s->exp_gate, s->exp_up, (int64_t)rows * FE, s->exp_gate);
    op->moe_matmul_grouped(s->st, 1, dn, dn_out, &grp, s->exp_gate);
    /* the cache's passes as the fetch path asks them: k distinct experts at a time */
    for (int g0 = 0; g0 < nd; g0 += K) expert_cache_count(s->model->ecache, l, nd - g0 < K ? nd - g0 : K);
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
    const size_t NK = (size_t)n * (size_t)K;

    /* 1. route the whole chunk where the activations are: router logits for
     * every token in one matmul, top-k and weights by the moe_route op */
    const ts_mat *rw[1] = {&L->ffn_router};
    op->matmul(st, 1, rw, &s->router, s->xb, n);
    op->moe_route(st, s->router, n, NE, K, hp->expert_norm, s->moe_ids_dev, s->moe_w_dev);
    const void *const *tab[EXPERT_PROJ_COUNT], *const *host_tab[EXPERT_PROJ_COUNT];
    const bool tables = expert_cache_tables(ec, l, tab, host_tab);
    const bool by_table = n == 1 && tables;
    /* the host needs the routing to group a chunk, and the hooks see every token */
    if (!by_table || TS_UNLIKELY(h != NULL)) {
        op->to_host(st, s->moe_ids, s->moe_ids_dev, sizeof(int32_t) * NK);
        op->to_host(st, s->moe_w, s->moe_w_dev, sizeof(float) * NK);
    }
    if (TS_UNLIKELY(h != NULL)) {
        op->to_host(st, s->router_host, s->router, sizeof(float) * (size_t)n * (size_t)NE);
        if (h->route_chunk) {
            ts_status rs = h->route_chunk(h->user, l, n);
            if (rs != TS_OK) return rs;
        }
        for (int t = 0; t < n && h->route; t++) {
            ts_status rs = h->route(h->user, l, s->moe_ids + (size_t)t * K, s->router_host + (size_t)t * NE);
            if (rs != TS_OK) return rs;
        }
    }
    HOOK(h, mark, s, TS_PHASE_ROUTER);

    /* without a shared expert the weighted sum goes straight into the
     * residual (moe_combine_add); the caller's add is then skipped */
    const bool into_x = by_table && !L->ffn_gate_shexp.data;
    if (by_table) {
        moe_decode_tables(s, l, tab, host_tab);
        if (into_x) op->moe_combine_add(st, s->x, s->xb2, s->exp_out, s->moe_w_dev, K, E);
        else op->moe_combine(st, s->xb2, s->exp_out, s->moe_w_dev, NULL, 1, K, E);
        HOOK(h, mark, s, TS_PHASE_EXPERT);
    } else {
        /* 2. each distinct expert fetched once, run once over its tokens */
        const int nd = group_chunk(s, n, NE, K);
        op->to_device(st, s->moe_tok_dev, s->moe_tok, sizeof(int32_t) * NK);
        op->to_device(st, s->moe_row_dev, s->moe_row, sizeof(int32_t) * NK);
        if (tables) {
            moe_prefill_tables(s, l, n, nd, tab, host_tab);
            HOOK(h, mark, s, TS_PHASE_EXPERT);
        }
        for (int g0 = 0; g0 < nd && !tables; g0 += K) {
            const int gk = nd - g0 < K ? nd - g0 : K;
            const int32_t *gid = s->moe_order + g0;
            /* the experts' bytes: pinned in the shared cache until released */
            const void *g[CACHE_MAX_K], *u[CACHE_MAX_K], *d[CACHE_MAX_K];
            expert_cache_pass pass;
            ts_status rc = expert_cache_fetch(ec, l, gid, gk, g, u, d, &pass);
            if (rc != TS_OK) return rc;
            HOOK(h, io_wait, pass.io_wait_s);
            if (n == 1) {
                /* decode: every expert reads the one token's xb, so the gate and
                 * up projections of several experts go in one matmul call and
                 * one act_mul covers them all: fewer pool wake-ups per layer,
                 * the same products (each row is computed alone) */
                ts_mat mg[CACHE_MAX_K], mu[CACHE_MAX_K];
                for (int i0 = 0; i0 < gk; i0 += TS_MATMUL_MAX_W / 2) {
                    const int ni = gk - i0 < TS_MATMUL_MAX_W / 2 ? gk - i0 : TS_MATMUL_MAX_W / 2;
                    const ts_mat *gu[TS_MATMUL_MAX_W];
                    float *gu_out[TS_MATMUL_MAX_W];
                    for (int i = i0; i < i0 + ni; i++) {
                        mg[i] = expert_mat(g[i], li->type[EXPERT_PROJ_GATE], E, FE, "ffn_gate_exps");
                        mu[i] = expert_mat(u[i], li->type[EXPERT_PROJ_UP], E, FE, "ffn_up_exps");
                        gu[2 * (i - i0)] = &mg[i], gu[2 * (i - i0) + 1] = &mu[i];
                        gu_out[2 * (i - i0)] = s->exp_gate + (size_t)i * FE, gu_out[2 * (i - i0) + 1] = s->exp_up + (size_t)i * FE;
                    }
                    op->matmul(st, 2 * ni, gu, gu_out, s->xb, 1);
                }
                op->act_mul(st, md->fam->act, s->exp_gate, s->exp_up, (int64_t)gk * FE, s->exp_gate);
                for (int i = 0; i < gk; i++) {
                    ts_mat mdn = expert_mat(d[i], li->type[EXPERT_PROJ_DOWN], FE, E, "ffn_down_exps");
                    const ts_mat *dn[1] = {&mdn};
                    float *dn_out[1] = {s->exp_out + (size_t)s->moe_off[gid[i]] * E};
                    op->matmul(st, 1, dn, dn_out, s->exp_gate + (size_t)i * FE, 1);
                }
            }
            for (int i = 0; i < gk && n > 1; i++) {
                const int32_t e = gid[i], ne = s->moe_cnt[e], o = s->moe_off[e];
                const float *x = s->xb + (size_t)s->moe_tok[o] * E;
                if (ne > 1) {
                    op->gather_rows(st, s->exp_x, s->xb, s->moe_tok_dev + o, ne, E);
                    x = s->exp_x;
                }
                ts_mat mg = expert_mat(g[i], li->type[EXPERT_PROJ_GATE], E, FE, "ffn_gate_exps");
                ts_mat mu = expert_mat(u[i], li->type[EXPERT_PROJ_UP], E, FE, "ffn_up_exps");
                ts_mat mdn = expert_mat(d[i], li->type[EXPERT_PROJ_DOWN], FE, E, "ffn_down_exps");
                const ts_mat *gu[2] = {&mg, &mu};
                float *gu_out[2] = {s->exp_gate, s->exp_up};
                op->matmul(st, 2, gu, gu_out, x, ne);
                op->act_mul(st, md->fam->act, s->exp_gate, s->exp_up, (int64_t)ne * FE, s->exp_gate);
                const ts_mat *dn[1] = {&mdn};
                float *dn_out[1] = {s->exp_out + (size_t)o * E};
                op->matmul(st, 1, dn, dn_out, s->exp_gate, ne);
            }
            /* pinned slots are free again once the stream has read them;
             * unpinned experts (resident, mapped) never move: no wait */
            if (pass.pinned) rc = op->sync(st);
            expert_cache_release(ec, l, &pass);
            if (rc != TS_OK) return rc;
            HOOK(h, mark, s, TS_PHASE_EXPERT);
        }

        /* 3. scatter: each token's weighted outputs summed in rank order, the
         * same sum whatever order the experts ran in */
        op->moe_combine(st, s->xb2, s->exp_out, s->moe_w_dev, s->moe_row_dev, n, K, E);
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
        op->gated_add(st, s->xb2, s->sh_out, s->sh_gate, n, E);
        HOOK(h, mark, s, TS_PHASE_DENSE_FFN);
    }
    if (!into_x) op->add(st, s->x, s->xb2, (int64_t)n * E);
    return TS_OK;
}

void ts_forward_moe_count_replay(ts_session *s) {
    const ts_model_desc *md = &s->model->desc;
    const void *const *tab[EXPERT_PROJ_COUNT];
    for (int l = 0; l < md->hp.n_layer; l++)
        if (md->layers[l].moe && expert_cache_tables(s->model->ecache, l, tab, NULL))
            expert_cache_count(s->model->ecache, l, md->hp.n_expert_used);
}
