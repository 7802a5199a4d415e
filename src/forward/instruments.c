/* The hooks that feed a session's instruments (ts_diag): phase marks as
 * events on the session's stream, router records, the pilot probe, the FFN
 * census tap. The forward pass knows none of this: it calls the hooks at its
 * named points (forward/hooks.h). */
#include <string.h>

#include "forward/forward_internal.h"

static ts_diag *diag_of(void *user) { return user; }

void ts_diag_phases_flush(ts_session *s) {
    ts_diag *d = s->diag;
    if (!d || !d->phases || d->n_ev == 0) return;
    const ts_backend_ops *op = s->be->ops;
    for (int i = 1; i < d->n_ev; i++) {
        int p = d->ev_phase[i];
        if (p >= 0) d->phase_s[p] += op->event_elapsed(d->ev[i - 1], d->ev[i]);
    }
    /* the last mark opens the next span */
    ts_event *last = d->ev[d->n_ev - 1];
    d->ev[d->n_ev - 1] = d->ev[0];
    d->ev[0] = last;
    d->n_ev = 1;
}

static void h_mark(void *user, ts_session *s, int phase) {
    ts_diag *d = diag_of(user);
    if (!d->phases) return;
    const ts_backend_ops *op = s->be->ops;
    if (d->n_ev == DIAG_MAX_EVENTS) {
        /* resolve what is held: wait for the stream to reach the last mark */
        op->sync(s->st);
        ts_diag_phases_flush(s);
    }
    if (!d->ev[d->n_ev] && !(d->ev[d->n_ev] = op->event_new(s->be))) return; /* out of memory: the phase footer undercounts */
    op->event_record(s->st, d->ev[d->n_ev]);
    d->ev_phase[d->n_ev] = (int8_t)phase;
    d->n_ev++;
    /* I/O waits reported inside this span move from expert compute to I/O */
    if (phase == TS_PHASE_EXPERT && d->pending_io > 0) {
        d->phase_s[TS_PHASE_EXPERT_IO] += d->pending_io;
        d->phase_s[TS_PHASE_EXPERT] -= d->pending_io;
    }
    d->pending_io = 0;
}

static void h_io_wait(void *user, double seconds) { diag_of(user)->pending_io += seconds; }

static ts_status h_route_chunk(void *user, int32_t layer, int32_t n_tok) {
    ts_diag *d = diag_of(user);
    if (!d->router_on) return TS_OK;
    return diag_router_record_chunk(&d->router, layer, n_tok);
}

static ts_status h_route(void *user, int32_t layer, const int32_t *ids, const float *logits) {
    ts_diag *d = diag_of(user);
    if (!d->router_on) return TS_OK;
    return diag_router_record(&d->router, layer, ids, logits);
}

static ts_status h_prefetch(void *user, int32_t layer, const int32_t *ids, int32_t k) {
    ts_diag *d = diag_of(user);
    if (!d->router_on) return TS_OK;
    return diag_router_record_prefetch(&d->router, layer, ids, k);
}

/* The pilot probe: at layer l, with the post-attention residual in s->x, run
 * the target layer's router (l+1, or l itself in self mode) through its own
 * norm and record its top-k as that layer's "pred". Scratch only. */
static void h_pilot(void *user, ts_session *s, int32_t l, int32_t n) {
    ts_diag *d = diag_of(user);
    if (!d->router_on || d->pilot == TS_PILOT_OFF) return;
    const ts_model_desc *md = &s->model->desc;
    /* next-layer mode guesses layer l+1 from layer l's post-attention
     * residual; self mode aims at layer l's own router, whose input this
     * is exactly, so its recall must be 100% (a mis-wired probe shows) */
    int target = d->pilot == TS_PILOT_SELF ? l : l + 1;
    if (target < 1 || target >= md->hp.n_layer || !md->layers[target].moe) return;
    const ts_backend_ops *op = s->be->ops;
    const int E = md->hp.n_embd, NE = md->hp.n_expert, K = md->hp.n_expert_used;
    const ts_layer *T = &md->layers[target];
    op->rmsnorm(s->st, s->x, T->ffn_norm, E, n, md->hp.norm_eps, s->pilot_h);
    const ts_mat *rw[1] = {&T->ffn_router};
    op->matmul(s->st, 1, rw, &s->pilot_r, s->pilot_h, n);
    op->to_host(s->st, s->pilot_host, s->pilot_r, sizeof(float) * (size_t)n * (size_t)NE);
    for (int t = 0; t < n; t++) {
        int32_t ids[CACHE_MAX_K];
        ts_topk(s->pilot_host + (size_t)t * NE, NE, K, ids);
        diag_router_record_pred(&d->router, target, ids);
    }
}

static void h_ffn(void *user, ts_session *s, int32_t layer, const float *rows, int32_t n_tok, int32_t width, bool final) {
    ts_diag *d = diag_of(user);
    if (!d->ffn_path) return;
    const float *host = rows;
    if (!s->be->host_memory) {
        /* a device backend: one copy of the tap, the buffer the FFN wrote anyway */
        size_t need = (size_t)n_tok * (size_t)width;
        if (need > d->ffn_host_n) {
            float *p = ts_realloc(d->ffn_host, need * sizeof(float));
            if (!p) return;
            d->ffn_host = p;
            d->ffn_host_n = need;
        }
        s->be->ops->to_host(s->st, d->ffn_host, rows, need * sizeof(float));
        host = d->ffn_host;
    }
    ts_diag_ffn_observe(d, layer, host, n_tok, width, final);
}

const ts_hooks ts_diag_hooks = {
    .user = NULL, /* set per session: a copy with user = the session's diag */
    .mark = h_mark,
    .io_wait = h_io_wait,
    .route_chunk = h_route_chunk,
    .route = h_route,
    .after_attention = h_pilot,
    .ffn_act = h_ffn,
    .prefetch = h_prefetch,
};
