/* The public backend calls: choosing and making a backend. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compute/backend.h"
#include "experts/policy.h"

ts_backend_opts ts_backend_opts_default(void) {
    ts_backend_opts o = {.kind = TS_BACKEND_AUTO, .n_threads = 0, .device = 0};
    return o;
}

ts_status ts_backend_kind_parse(const char *s, ts_backend_kind *out) {
    if (s && !strcmp(s, "auto")) *out = TS_BACKEND_AUTO;
    else if (s && !strcmp(s, "cpu")) *out = TS_BACKEND_CPU;
    else if (s && !strcmp(s, "cuda")) *out = TS_BACKEND_CUDA;
    else return ts_fail(TS_ERR_ARG, "'%s': expected cpu, cuda or auto", s ? s : "");
    return TS_OK;
}

bool ts_backend_cuda_built(void) {
#if defined(TS_HAVE_CUDA)
    return true;
#else
    return false;
#endif
}

ts_status ts_backend_new(const ts_backend_opts *opts, ts_backend **out) {
    *out = NULL;
    ts_backend_opts o = opts ? *opts : ts_backend_opts_default();
    if (o.n_threads < 0) return ts_fail(TS_ERR_ARG, "backend: %d threads", o.n_threads);
    switch (o.kind) {
    case TS_BACKEND_CPU: return ts_backend_cpu_new(o.n_threads, out);
    case TS_BACKEND_CUDA:
#if defined(TS_HAVE_CUDA)
        return ts_backend_cuda_new(o.device, !o.cuda_no_pdl, out);
#else
        return ts_fail(TS_ERR_UNSUPPORTED, "backend cuda: this build has no CUDA support (rebuild with nvcc on the PATH, TS_CUDA=ON)");
#endif
    case TS_BACKEND_AUTO:
#if defined(TS_HAVE_CUDA)
        if (ts_backend_cuda_new(o.device, !o.cuda_no_pdl, out) == TS_OK) return TS_OK;
#endif
        return ts_backend_cpu_new(o.n_threads, out);
    }
    return ts_fail(TS_ERR_ARG, "backend: unknown kind %d", (int)o.kind);
}

void ts_backend_free(ts_backend *be) {
    if (be) be->ops->destroy(be);
}

ts_backend_kind ts_backend_kind_of(const ts_backend *be) { return be->kind; }
const char *ts_backend_name(const ts_backend *be) { return be->ops->name; }

ts_status ts_backend_device_memory(ts_backend *be, uint64_t *free_bytes, uint64_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    if (!be->ops->mem_info) return ts_fail(TS_ERR_UNSUPPORTED, "backend %s: its memory is the host's", be->ops->name);
    return be->ops->mem_info(be, free_bytes, total_bytes);
}

const char *ts_backend_describe(const ts_backend *be, char *buf, size_t n) {
    if (n) buf[0] = 0;
    be->ops->describe(be, buf, n);
    return buf;
}

/* ---- routing ---- */

void ts_topk(const float *x, int n, int k, int32_t *ids) {
    for (int i = 0; i < k; i++) ids[i] = -1;
    for (int e = 0; e < n; e++) {
        /* insertion: e goes before the first entry it strictly beats, so an
         * equal value keeps the earlier (lower) id ahead */
        int pos = k;
        while (pos > 0 && (ids[pos - 1] < 0 || x[e] > x[ids[pos - 1]])) pos--;
        if (pos >= k) continue;
        memmove(ids + pos + 1, ids + pos, sizeof *ids * (size_t)(k - pos - 1));
        ids[pos] = e;
    }
}

void ts_moe_route_row(const float *r, int n_expert, int k, bool renorm, int32_t *ids, float *w) {
    ts_topk(r, n_expert, k, ids);
    double mx = r[ids[0]], z = 0, sel = 0;
    for (int e = 0; e < n_expert; e++) z += exp((double)r[e] - mx);
    for (int i = 0; i < k; i++) sel += exp((double)r[ids[i]] - mx);
    for (int i = 0; i < k; i++) w[i] = (float)(exp((double)r[ids[i]] - mx) / (renorm ? sel : z));
}

/* ---- streamed experts planned by the backend: the reference ---- */

ts_status ts_backend_expert_pass_ref(const ts_expert_slots *c, const int32_t *ids, int k, bool prefetch, const void **const *tab) {
    /* the policy module over c's arrays, which are its own fields */
    cache_layer cl = {.n_slots = c->n_slots, .n_experts = c->n_experts, .policy = (cache_policy)c->policy,
                      .slot_expert = c->slot_expert, .slot_tick = c->slot_tick, .expert_slot = c->expert_slot,
                      .expert_count = c->expert_count, .tick = *c->tick};
    cache_plan plan;
    ts_status st = cache_plan_make(&cl, ids, k, &plan);
    if (st != TS_OK) return st;
    uint64_t *n = c->stats;
    uint64_t copied = 0;
    for (int i = 0; i < k; i++)
        if (!plan.hit[i]) copied += c->layout[(size_t)ids[i] * TS_XP_LAYOUT_W + 3];
    if (prefetch) {
        cache_prefetch_commit(&cl, ids, &plan);
        for (int i = 0; i < k; i++)
            if (!plan.hit[i]) c->prefetched[plan.slot[i]] = 1;
        n[TS_XP_PF_COPIES] += (uint64_t)plan.n_miss;
        n[TS_XP_BYTES_PF] += copied;
    } else {
        /* a layer's prefetches are judged by its next pass: asked for (a
         * miss saved) or not (a copy wasted) */
        for (int i = 0; i < k; i++)
            if (plan.hit[i] && c->prefetched[plan.slot[i]]) n[TS_XP_PF_SAVED]++, c->prefetched[plan.slot[i]] = 0;
        for (int j = 0; j < c->n_slots; j++)
            if (c->prefetched[j]) n[TS_XP_PF_WASTED]++, c->prefetched[j] = 0;
        cache_commit(&cl, ids, &plan);
        n[TS_XP_PASSES]++;
        n[TS_XP_REQUESTS] += (uint64_t)k;
        n[TS_XP_HITS] += (uint64_t)(k - plan.n_miss);
        n[TS_XP_MISSES] += (uint64_t)plan.n_miss;
        for (int i = 0; i < k; i++) {
            const uint64_t *lay = c->layout + (size_t)ids[i] * TS_XP_LAYOUT_W;
            n[TS_XP_BYTES_REQ] += lay[4];
            if (!plan.hit[i]) n[plan.evicted[i] >= 0 ? TS_XP_EVICT : TS_XP_COLD]++;
        }
        n[TS_XP_BYTES_UP] += copied;
    }
    *c->tick = cl.tick;
    for (int i = 0; i < k; i++) {
        const uint64_t *lay = c->layout + (size_t)ids[i] * TS_XP_LAYOUT_W;
        uint8_t *slot = c->slots + (uint64_t)plan.slot[i] * c->stride;
        if (!plan.hit[i]) memcpy(slot, c->tier + (uint64_t)ids[i] * c->stride, (size_t)lay[3]);
        if (!prefetch && tab)
            for (int p = 0; p < 3; p++) tab[p][ids[i]] = slot + lay[p];
    }
    return TS_OK;
}

/* ---- the fused ops' compositions ---- */

void ts_backend_compose_norm_matmul(ts_stream *st, const float *x, const float *norm, float eps, float *xn, bool keep_xn, int n_w,
                                    const ts_mat *const *w, float *const *y, int n_tok) {
    (void)keep_xn; /* xn always holds them here */
    const ts_backend_ops *op = st->be->ops;
    op->rmsnorm(st, x, norm, w[0]->n_in, n_tok, eps, xn);
    op->matmul(st, n_w, w, y, xn, n_tok);
}

void ts_backend_compose_matmul_add(ts_stream *st, const ts_mat *w, const float *a, int n_tok, float *x, float *tmp) {
    const ts_backend_ops *op = st->be->ops;
    op->matmul(st, 1, &w, &tmp, a, n_tok);
    op->add(st, x, tmp, (int64_t)n_tok * w->n_out);
}

void ts_backend_compose_act_matmul_add(ts_stream *st, ts_act act, float *gate, const float *up, const ts_mat *w, int n_tok, float *x,
                                       float *tmp) {
    const ts_backend_ops *op = st->be->ops;
    op->act_mul(st, act, gate, up, (int64_t)n_tok * w->n_in, gate);
    op->matmul_add(st, w, gate, n_tok, x, tmp);
}

void ts_backend_compose_attn_matmul_add(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *att,
                                        const ts_mat *w, float *x, float *tmp) {
    const ts_backend_ops *op = st->be->ops;
    op->attention(st, kv, d, q, att);
    op->matmul_add(st, w, att, d->n_tok, x, tmp);
}

void ts_backend_compose_moe_act_matmul(ts_stream *st, ts_act act, float *gate, const float *up, const ts_expert_mat *w, float *y,
                                       const int32_t *ids, int k) {
    const ts_backend_ops *op = st->be->ops;
    op->act_mul(st, act, gate, up, (int64_t)k * w->n_in, gate);
    float *ys[1] = {y};
    op->moe_matmul(st, 1, &w, ys, ids, k, gate, true);
}

void ts_backend_compose_moe_combine_add(ts_stream *st, float *x, float *tmp, const float *y, const float *w, int k, int64_t n) {
    const ts_backend_ops *op = st->be->ops;
    op->moe_combine(st, tmp, y, w, NULL, 1, k, n);
    op->add(st, x, tmp, n);
}

void ts_backend_compose_rope_kv_store(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q,
                                      float *k, const float *v) {
    const ts_backend_ops *op = st->be->ops;
    const int n = d->n_tok, HD = d->head_dim;
    if (r->q_norm) {
        op->rmsnorm(st, q, r->q_norm, HD, (int64_t)n * d->n_head, r->eps, q);
        op->rmsnorm(st, k, r->k_norm, HD, (int64_t)n * d->n_head_kv, r->eps, k);
    }
    op->rope(st, q, n, d->n_head, HD, r->n_rot, r->cs, r->mode);
    op->rope(st, k, n, d->n_head_kv, HD, r->n_rot, r->cs, r->mode);
    op->kv_store(st, kv, d, k, v);
}

void ts_backend_compose_rope_attn_matmul_add(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r,
                                             float *q, float *k, const float *v, float *att, const ts_mat *w, float *x, float *tmp) {
    const ts_backend_ops *op = st->be->ops;
    op->rope_kv_store(st, kv, d, r, q, k, v);
    op->attn_matmul_add(st, kv, d, q, att, w, x, tmp);
}
