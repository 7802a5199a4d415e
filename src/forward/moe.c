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
 * (moe_route), so the ids and weights are in backend memory. Every mode runs
 * the experts through tables indexed by expert id: the cache's own (resident
 * and mapped: every expert addressable for the cache's life) or the
 * session's, pointed at the slots of each streamed fetch. Decode with the
 * cache's tables reads the ids where they were routed: nothing comes back to
 * the host, and a device backend records the token as one graph. A prefill
 * chunk, and streamed mode, bring the ids to the host to group the chunk and
 * ask the cache. The products and sums are the same ops on the same bytes
 * either way, so output is byte-identical across modes by construction. */
#include <math.h>
#include <string.h>

#include "forward/forward_internal.h"
#include "tensor/types.h"

/* Where a pass's experts are, addressable by id: the cache's own tables
 * (resident, mapped: every expert, for the cache's life), or the session's
 * (streamed: the experts of one fetch, in the slots it pinned). */
typedef struct moe_tables {
    const void *const *tab[EXPERT_PROJ_COUNT];      /* backend memory */
    const void *const *host_tab[EXPERT_PROJ_COUNT]; /* host memory, the same addresses */
} moe_tables;

/* Projection p of MoE block l through the tables. */
static ts_expert_mat expert_set(const ts_session *s, int l, const moe_tables *t, int p) {
    const ts_hparams *hp = &s->model->desc.hp;
    const expert_layer_info *li = &s->model->desc.emap.layers[s->model->desc.emap.moe_of_block[l]];
    static const char *const names[EXPERT_PROJ_COUNT] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const bool down = p == EXPERT_PROJ_DOWN;
    const int64_t n_in = down ? hp->n_ff_exp : hp->n_embd;
    ts_expert_mat m = {.table = t->tab[p], .host_table = t->host_tab[p], .n_expert = hp->n_expert, .type = li->type[p], .n_in = n_in,
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
    for (int i = 0; i < nd; i++) s->moe_goff[i] = off[order[i]], s->moe_gcnt[i] = cnt[order[i]];
    return nd;
}

/* Decode: the ids and weights stay where they were routed, so with the
 * cache's tables a device backend runs the token without a host round trip
 * (one recorded graph). gate/up of each expert from the one xb row, act_mul
 * over the k rows, each down from its own row (rank order). */
static void moe_decode(ts_session *s, int l, const moe_tables *t) {
    const ts_model_desc *md = &s->model->desc;
    const ts_backend_ops *op = s->be->ops;
    const int K = md->hp.n_expert_used;
    ts_expert_mat g = expert_set(s, l, t, EXPERT_PROJ_GATE);
    ts_expert_mat u = expert_set(s, l, t, EXPERT_PROJ_UP);
    ts_expert_mat d = expert_set(s, l, t, EXPERT_PROJ_DOWN);
    const ts_expert_mat *gu[2] = {&g, &u};
    float *gu_out[2] = {s->exp_gate, s->exp_up};
    op->moe_matmul(s->st, 2, gu, gu_out, s->moe_ids_dev, K, s->xb, false);
    op->moe_act_matmul(s->st, md->fam->act, s->exp_gate, s->exp_up, &d, s->exp_out, s->moe_ids_dev, K);
}

/* Prefill: groups g0 .. g0+ng-1 of the chunk (group_chunk; their rows are
 * consecutive in expert order, gathered into exp_x), each projection one
 * grouped matmul over those experts. Each group's rows are what a matmul of
 * that expert alone gives, so how the groups are split into passes changes
 * nothing. */
static void moe_groups(ts_session *s, int l, int g0, int ng, int n_rows, const moe_tables *t) {
    const ts_model_desc *md = &s->model->desc;
    const ts_backend_ops *op = s->be->ops;
    const int FE = md->hp.n_ff_exp;
    const ts_expert_groups grp = {.n_group = ng, .id = s->moe_order + g0, .off = s->moe_goff + g0, .cnt = s->moe_gcnt + g0, .n_rows = n_rows};
    int64_t r0 = s->moe_goff[g0], nr = 0;
    for (int i = g0; i < g0 + ng; i++) nr += s->moe_gcnt[i];
    ts_expert_mat g = expert_set(s, l, t, EXPERT_PROJ_GATE);
    ts_expert_mat u = expert_set(s, l, t, EXPERT_PROJ_UP);
    ts_expert_mat d = expert_set(s, l, t, EXPERT_PROJ_DOWN);
    const ts_expert_mat *gu[2] = {&g, &u}, *dn[1] = {&d};
    float *gu_out[2] = {s->exp_gate, s->exp_up}, *dn_out[1] = {s->exp_out};
    ts_expert_groups in = grp;
    in.row_tok = s->moe_tok; /* exp_x: the token rows gathered (a token's k rows are equal) */
    op->moe_matmul_grouped(s->st, 2, gu, gu_out, &in, s->exp_x);
    op->act_mul(s->st, md->fam->act, s->exp_gate + r0 * FE, s->exp_up + r0 * FE, nr * FE, s->exp_gate + r0 * FE);
    op->moe_matmul_grouped(s->st, 1, dn, dn_out, &grp, s->exp_gate);
}

/* Streamed mode's tables: the session's (fetch_pass fills them). */
static moe_tables session_tables(const ts_session *s) {
    const size_t NE = (size_t)s->model->desc.hp.n_expert;
    moe_tables t;
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) t.tab[p] = s->moe_tab_dev + p * NE, t.host_tab[p] = s->moe_tab_host + p * NE;
    return t;
}

/* Streamed: experts ids[0..k) fetched into slots (pinned until release),
 * the session's tables pointed at them and copied where the ops read them
 * (on st: behind the work already there, ahead of the pass's matmuls).
 * ahead: a chunk's next pass, fetched while the current one (pinned) still
 * computes (expert_cache_fetch_ahead: TS_ERR_LIMIT when the slots do not
 * allow it): host slots return with the reads in flight (fetch_finish waits);
 * backend slots copy on copy_st, and ahead_ev marks the copies' end. A
 * pass's ids are distinct from every other pass's of the chunk, so the
 * entries it points do not touch the ones the current pass reads. */
static ts_status fetch_pass(ts_session *s, int l, const int32_t *ids, int k, bool ahead, expert_cache_pass *pass) {
    const size_t NE = (size_t)s->model->desc.hp.n_expert;
    expert_cache *ec = s->model->ecache;
    const void *w[EXPERT_PROJ_COUNT][CACHE_MAX_K];
    ts_status rc;
    if (!ahead) {
        rc = expert_cache_fetch_on(ec, s->st, l, ids, k, w[0], w[1], w[2], pass);
    } else if (expert_cache_backend_slots(ec)) {
        rc = expert_cache_fetch_ahead(ec, s->copy_st, l, ids, k, w[0], w[1], w[2], pass);
        if (rc == TS_OK) {
            s->be->ops->event_record(s->copy_st, s->ahead_ev);
            s->pf_unsynced = true;
        }
    } else {
        rc = expert_cache_fetch_ahead(ec, NULL, l, ids, k, w[0], w[1], w[2], pass);
    }
    if (rc != TS_OK) return rc;
    if (!pass->ahead) HOOK(s->hooks, io_wait, pass->io_wait_s);
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++)
        for (int i = 0; i < k; i++) s->moe_tab_host[p * NE + (size_t)ids[i]] = w[p][i];
    s->be->ops->to_device(s->st, (void *)s->moe_tab_dev, s->moe_tab_host, sizeof(void *) * EXPERT_PROJ_COUNT * NE);
    return TS_OK;
}

/* The pass's slots may be taken by the next fetch once the stream has run
 * the kernels that read them; the session's table copy is then done too. */
static ts_status end_pass(ts_session *s, int l, expert_cache_pass *pass) {
    ts_status rc = pass->pinned ? s->be->ops->sync(s->st) : TS_OK;
    expert_cache_release(s->model->ecache, l, pass);
    return rc;
}

/* A decode pass is not waited for: its slots stay pinned until the next
 * layer's routing readback, which has waited for the stream anyway (one
 * sync per layer, not two), or until the chunk's end. */
static void release_held(ts_session *s) {
    if (s->moe_held_l < 0) return;
    expert_cache_release(s->model->ecache, s->moe_held_l, &s->moe_held);
    s->moe_held_l = -1;
}

/* The last prefetch's copies are done (they had the layer's attention and
 * routing to run in, so this rarely waits) and its slots unpinned: the
 * layer's fetch may now use or evict them. */
static ts_status settle_prefetch(ts_session *s) {
    if (s->pf_l < 0) return TS_OK;
    ts_status rc = s->pf_pass.plan.k ? s->be->ops->event_sync(s->be, s->pf_done_ev) : TS_OK;
    expert_cache_release(s->model->ecache, s->pf_l, &s->pf_pass);
    s->pf_l = -1;
    return rc;
}

ts_status ts_forward_moe_release(ts_session *s) {
    if (s->capturing) return TS_OK;
    ts_status rp = settle_prefetch(s);
    if (s->pf_unsynced) {
        /* once a chunk: a copy that failed on the device shows here */
        ts_status rs = s->be->ops->sync(s->copy_st);
        s->pf_unsynced = false;
        if (rp == TS_OK) rp = rs;
    }
    if (s->moe_held_l < 0) return rp;
    ts_status rc = s->be->ops->sync(s->st);
    release_held(s);
    return rc != TS_OK ? rc : rp;
}

/* Pilot prefetch's target for streamed decode at MoE layer l: the next
 * layer when it routes too, else -1 (no pilot runs). */
static int prefetch_target(const ts_session *s, int l) {
    const ts_model_desc *md = &s->model->desc;
    return s->prefetch && l + 1 < md->hp.n_layer && md->layers[l + 1].moe ? l + 1 : -1;
}

ts_status ts_forward_moe_host(ts_session *s, int l) {
    const int K = s->model->desc.hp.n_expert_used;
    const int nl = prefetch_target(s, l);
    /* the routed ids and, behind them, the pilot's guess for layer nl */
    s->be->ops->to_host(s->st, s->moe_ids, s->moe_ids_dev, sizeof(int32_t) * (size_t)K * (nl >= 0 ? 2 : 1));
    release_held(s); /* the readback waited for the stream */
    ts_status rc = settle_prefetch(s);
    if (rc != TS_OK) return rc;
    expert_cache_pass pass = {0};
    if ((rc = fetch_pass(s, l, s->moe_ids, K, false, &pass)) != TS_OK) return rc;
    s->moe_held = pass, s->moe_held_l = l;
    if (nl >= 0) {
        /* copies on their own stream, after this layer's own misses (the
         * copies its experts wait for get the bus first), under its experts
         * and the next layer's attention */
        s->be->ops->event_record(s->st, s->demand_ev);
        if ((rc = expert_cache_prefetch_on(s->model->ecache, s->copy_st, s->demand_ev, s->pf_done_ev, nl, s->moe_ids + K,
                                           s->prefetch_depth, &s->pf_pass)) != TS_OK)
            return rc;
        s->pf_l = nl;
        s->pf_unsynced |= s->pf_pass.plan.k > 0;
        const ts_hooks *h = s->hooks;
        if (TS_UNLIKELY(h != NULL) && h->prefetch && s->pf_pass.tracked &&
            (rc = h->prefetch(h->user, nl, s->moe_ids + K, s->prefetch_depth)) != TS_OK)
            return rc;
    }
    return TS_OK;
}

/* The prefetch pilot for streamed decode at layer l: layer l+1's router on
 * this layer's post-attention residual through l+1's FFN norm (the pilot
 * probe's NEXT guess, instruments.c), its top-k into row 1 of the routing
 * buffers, where the host point's readback picks it up. */
static void prefetch_pilot(ts_session *s, int l) {
    const ts_model_desc *md = &s->model->desc;
    const ts_backend_ops *op = s->be->ops;
    const int nl = prefetch_target(s, l);
    if (nl < 0 || md->layers[l].pilot_router.data) return; /* folded into the routing (ts_forward_moe) */
    const ts_layer *T = &md->layers[nl];
    const int E = md->hp.n_embd, NE = md->hp.n_expert, K = md->hp.n_expert_used;
    op->rmsnorm(s->st, s->x, T->ffn_norm, E, 1, md->hp.norm_eps, s->pilot_h);
    const ts_mat *rw[1] = {&T->ffn_router};
    op->matmul(s->st, 1, rw, &s->pilot_r, s->pilot_h, 1);
    op->moe_route(s->st, s->pilot_r, 1, NE, K, md->hp.expert_norm, s->moe_ids_dev + K, s->moe_w_dev + K);
}

/* Streamed decode inside a recorded step: what was recorded so far is a
 * segment; it runs, the host does its part, and recording goes on as the
 * next segment. A replayed step runs the same sequence (decode_step). */
static ts_status host_point(ts_session *s, int l) {
    const ts_backend_ops *op = s->be->ops;
    ts_status rc;
    if (s->capturing) {
        if (s->n_seg + 1 >= TS_MAX_SEGMENTS)
            return ts_fail(TS_ERR_LIMIT, "recording a decode step: more than %d MoE layers with streamed experts", TS_MAX_SEGMENTS - 1);
        s->capture_open = false;
        if ((rc = op->capture_end(s->st)) != TS_OK || (rc = op->replay(s->st, s->n_seg)) != TS_OK) return rc;
        s->seg_layer[s->n_seg++] = l;
    }
    if ((rc = ts_forward_moe_host(s, l)) != TS_OK) return rc;
    if (s->capturing) {
        if ((rc = op->capture_begin(s->st, s->n_seg)) != TS_OK) return rc;
        s->capture_open = true;
    }
    return TS_OK;
}

/* Streamed decode planned on the backend: layer l's pass (its misses copied
 * into slots, the session's tables pointed at them) where the routing left
 * the ids, and the pilot's guesses for the next layer placed on copy_st,
 * after l's own copies and beside l's experts and the next attention. No
 * host round trip: the step stays one recording. */
static ts_status device_pass(ts_session *s, int l) {
    const ts_backend_ops *op = s->be->ops;
    expert_cache *ec = s->model->ecache;
    const int K = s->model->desc.hp.n_expert_used;
    const size_t NE = (size_t)s->model->desc.hp.n_expert;
    const void **tab[EXPERT_PROJ_COUNT];
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) tab[p] = s->moe_tab_dev + p * NE;
    ts_status rc = expert_cache_device_pass(ec, s->st, l, s->moe_ids_dev, K, false, tab);
    const int nl = prefetch_target(s, l);
    if (rc != TS_OK || nl < 0) return rc;
    op->event_record(s->st, s->demand_ev);
    op->event_wait(s->copy_st, s->demand_ev);
    if ((rc = expert_cache_device_pass(ec, s->copy_st, nl, s->moe_ids_dev + K, s->prefetch_depth, true, NULL)) != TS_OK) return rc;
    op->event_record(s->copy_st, s->pf_done_ev);
    s->dpf_l = nl;
    return TS_OK;
}

/* Streamed prefill: the chunk's nd groups, k distinct experts per cache
 * pass. Pass g+1 is fetched while pass g computes, planned around g's pinned
 * slots: host slots submit g+1's reads before g's matmuls (which run on the
 * calling threads); backend slots enqueue g's matmuls first and copy g+1 on
 * copy_st beside them (st waits for ahead_ev before g+1's). When the slots
 * cannot spare g's, g+1 is fetched after g is released, as a lone pass is.
 * Which of the two happens depends only on the cache's state, so analyze
 * cache replays it (router_replay_layer). Every earlier pass's matmuls are
 * done when g+1 is planned (end_pass syncs st), so its victims are free. */
static ts_status streamed_passes(ts_session *s, int l, int nd, int n_rows, const moe_tables *t) {
    const int K = s->model->desc.hp.n_expert_used;
    const bool dev = expert_cache_backend_slots(s->model->ecache);
    expert_cache_pass cur = {0}, nxt = {0};
    bool cur_ahead = false; /* cur was copied on copy_st */
    ts_status rc = fetch_pass(s, l, s->moe_order, nd < K ? nd : K, false, &cur);
    for (int g0 = 0; g0 < nd && rc == TS_OK; g0 += K) {
        const int gk = nd - g0 < K ? nd - g0 : K, g1 = g0 + K, gk1 = nd - g1 < K ? nd - g1 : K;
        if (dev) {
            if (cur_ahead) s->be->ops->event_wait(s->st, s->ahead_ev);
            moe_groups(s, l, g0, gk, n_rows, t);
        }
        bool have = false;
        if (g1 < nd) {
            rc = fetch_pass(s, l, s->moe_order + g1, gk1, true, &nxt);
            have = rc == TS_OK;
            if (rc == TS_ERR_LIMIT) rc = TS_OK; /* no room beside pass g: after it */
        }
        if (!dev && rc == TS_OK) moe_groups(s, l, g0, gk, n_rows, t);
        if (have && nxt.ahead) {
            ts_status rf = expert_cache_fetch_finish(s->model->ecache, l, &nxt);
            if (rf == TS_OK) HOOK(s->hooks, io_wait, nxt.io_wait_s);
            else have = false;
            if (rc == TS_OK) rc = rf;
        }
        ts_status re = end_pass(s, l, &cur);
        if (rc == TS_OK) rc = re;
        HOOK(s->hooks, mark, s, TS_PHASE_EXPERT);
        if (rc != TS_OK) break;
        cur = nxt;
        cur_ahead = have && dev;
        memset(&nxt, 0, sizeof nxt);
        if (g1 < nd && !have) rc = fetch_pass(s, l, s->moe_order + g1, gk1, false, &cur);
    }
    if (nxt.pinned) expert_cache_release(s->model->ecache, l, &nxt);
    if (rc != TS_OK && cur.pinned) expert_cache_release(s->model->ecache, l, &cur);
    return rc;
}

ts_status ts_forward_moe(ts_session *s, int l, int n) {
    const ts_model_desc *md = &s->model->desc;
    const ts_hparams *hp = &md->hp;
    const ts_layer *L = &md->layers[l];
    ts_stream *st = s->st;
    const ts_backend_ops *op = s->be->ops;
    const ts_hooks *h = s->hooks;
    const int E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used;
    expert_cache *ec = s->model->ecache;
    const size_t NK = (size_t)n * (size_t)K;

    /* 1. route the whole chunk where the activations are: router logits for
     * every token in one matmul, top-k and weights by the moe_route op.
     * Streamed decode's prefetch pilot rides along where it is folded: its
     * matrix is a second weight of the same matmul, its top-k row 1 of the
     * same route (the weights of row 1 are never read) */
    moe_tables t;
    const bool tables = expert_cache_tables(ec, l, t.tab, t.host_tab);
    const bool folded = n == 1 && !tables && prefetch_target(s, l) >= 0 && L->pilot_router.data;
    /* a prefetch planned on the backend for this layer reads the routing
     * buffers' row 1 and fills this layer's slots: both done before the
     * routing overwrites the one and the pass reads the other */
    if (s->dpf_l == l) {
        op->event_wait(st, s->pf_done_ev);
        s->dpf_l = -1;
    }
    const ts_mat *rw[2] = {&L->ffn_router, &L->pilot_router};
    float *ro[2] = {s->router, s->router + NE};
    op->norm_matmul(st, s->x, L->ffn_norm, hp->norm_eps, s->xb, true, folded ? 2 : 1, rw, ro, n); /* xb: the normalized rows */
    op->moe_route(st, s->router, folded ? 2 : n, NE, K, hp->expert_norm, s->moe_ids_dev, s->moe_w_dev);
    if (!tables) t = session_tables(s); /* streamed: filled by each fetch */
    /* the host needs the routing to group a chunk or ask the cache (streamed
     * decode: host_point), and the hooks see every token; the weights stay
     * where they are (moe_combine reads them there) */
    if (n > 1 || TS_UNLIKELY(h != NULL)) {
        op->to_host(st, s->moe_ids, s->moe_ids_dev, sizeof(int32_t) * NK);
        release_held(s); /* the readback waited for the stream */
    }
    if (TS_UNLIKELY(h != NULL)) {
        op->to_host(st, s->router_host, s->router, sizeof(float) * (size_t)n * (size_t)NE);
        if (h->route_chunk) {
            ts_status rs = h->route_chunk(h->user, l, n);
            if (rs != TS_OK) return rs;
        }
        for (int t0 = 0; t0 < n && h->route; t0++) {
            ts_status rs = h->route(h->user, l, s->moe_ids + (size_t)t0 * K, s->router_host + (size_t)t0 * NE);
            if (rs != TS_OK) return rs;
        }
    }
    HOOK(h, mark, s, TS_PHASE_ROUTER);

    /* without a shared expert one token's weighted sum goes straight into
     * the residual (moe_combine_add); the caller's add is then skipped */
    const bool into_x = n == 1 && !L->ffn_gate_shexp.data;
    if (n == 1) {
        /* 2. decode: the top-k in rank order, one pass; the same products and
         * rank-order sum whether the tables are the cache's or a fetch's */
        if (!tables) {
            prefetch_pilot(s, l);
            ts_status rc = s->dplan_on ? device_pass(s, l) : host_point(s, l);
            if (rc != TS_OK) return rc;
        }
        moe_decode(s, l, &t);
        if (into_x) op->moe_combine_add(st, s->x, s->xb2, s->exp_out, s->moe_w_dev, K, E);
        else op->moe_combine(st, s->xb2, s->exp_out, s->moe_w_dev, NULL, 1, K, E);
        if (tables) expert_cache_count(ec, l, K);
        HOOK(h, mark, s, TS_PHASE_EXPERT);
    } else {
        /* 2. prefill: every (token, rank) row gathered in expert order; each
         * distinct expert run once over its rows, k experts per cache pass */
        const int nd = group_chunk(s, n, NE, K);
        op->to_device(st, s->moe_tok_dev, s->moe_tok, sizeof(int32_t) * NK);
        op->to_device(st, s->moe_row_dev, s->moe_row, sizeof(int32_t) * NK);
        op->gather_rows(st, s->exp_x, s->xb, s->moe_tok_dev, (int)NK, E);
        if (tables) {
            moe_groups(s, l, 0, nd, (int)NK, &t);
            /* the cache's passes as a fetch would ask them: k distinct experts at a time */
            for (int g0 = 0; g0 < nd; g0 += K) expert_cache_count(ec, l, nd - g0 < K ? nd - g0 : K);
            HOOK(h, mark, s, TS_PHASE_EXPERT);
        }
        if (!tables) {
            ts_status rc = streamed_passes(s, l, nd, (int)NK, &t);
            if (rc != TS_OK) return rc;
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
    moe_tables t;
    for (int l = 0; l < md->hp.n_layer; l++)
        if (md->layers[l].moe && expert_cache_tables(s->model->ecache, l, t.tab, NULL))
            expert_cache_count(s->model->ecache, l, md->hp.n_expert_used);
}
