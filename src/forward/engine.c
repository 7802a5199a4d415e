/* Model and session lifetime: loading, sizing the one arena per session,
 * chunking evals into forward passes, timings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward/forward_internal.h"
#include "tensor/types.h"

/* ---- model ---- */

/* blk.N.ffn_{gate,up,down}_exps.weight or blk.N.ffn_{gate,up,down}.E.weight */
static bool is_expert_tensor(gguf_str n) {
    char buf[128];
    if (n.len >= sizeof buf) return false;
    memcpy(buf, n.ptr, (size_t)n.len);
    buf[n.len] = 0;
    if (strstr(buf, "_exps.")) return true;
    int blk, e, used = 0;
    char proj[8];
    return sscanf(buf, "blk.%d.ffn_%7[a-z].%d.weight%n", &blk, proj, &e, &used) == 3 && used == (int)n.len;
}

static void prefault(const ts_model *m, const ts_model_opts *o) {
    const gguf_file *f = m->gguf;
    uint64_t total = 0, done = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
    volatile uint8_t sink = 0;
    uint64_t next_report = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        /* routed experts: their residency mode decides what is read */
        if (m->desc.has_moe && is_expert_tensor(t->name)) continue;
        for (uint64_t off = 0; off < t->nbytes; off += 4096) sink ^= t->data[off];
        done += t->nbytes;
        if (o->progress && done >= next_report) {
            o->progress(o->progress_user, total ? (float)((double)done / (double)total) : 1.0f);
            next_report = done + total / 100;
        }
    }
    (void)sink;
}

ts_status ts_model_load_gguf(gguf_file *f, const ts_model_opts *opts, ts_model **out) {
    *out = NULL;
    ts_model_opts o = {0};
    if (opts) o = *opts;
    ts_model *m = ts_calloc(1, sizeof *m);
    if (!m) {
        gguf_close(f);
        return TS_ERR_NOMEM;
    }
    m->gguf = f;
    ts_status st = ts_model_desc_build(f, &m->desc);
    if (st != TS_OK) {
        ts_model_free(m);
        return st;
    }
    if ((st = ts_diag_from_env(&m->diag)) != TS_OK ||
        (m->diag && (st = ts_diag_bind(m->diag, m->desc.hp.n_layer, m->desc.has_moe ? m->desc.hp.n_expert : 0,
                                       m->desc.hp.n_expert_used, m->desc.fam->name)) != TS_OK)) {
        ts_model_free(m);
        return st;
    }
    if (m->desc.has_moe) {
        expert_cache_opts eo;
        if (o.experts) eo = *o.experts;
        else {
            expert_cache_opts_default(&eo);
            if ((st = expert_io_config_from_env(&eo.io)) != TS_OK) {
                ts_model_free(m);
                return st;
            }
        }
        /* auto sizing leaves room for what is resident anyway */
        if (!eo.reserve_bytes) {
            uint64_t total = 0;
            for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
            eo.reserve_bytes = total - m->desc.emap.total_bytes;
        }
        if ((st = expert_cache_new(&m->desc.emap, f, &eo, &m->ecache)) != TS_OK) {
            ts_model_free(m);
            return st;
        }
    }
    if (o.prefault) prefault(m, &o);
    if (o.progress) o.progress(o.progress_user, 1.0f);
    *out = m;
    return TS_OK;
}

ts_status ts_model_load(const char *path, const ts_model_opts *opts, ts_model **out) {
    *out = NULL;
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    if (st != TS_OK) return st;
    return ts_model_load_gguf(f, opts, out);
}

void ts_model_free(ts_model *m) {
    if (!m) return;
    expert_cache_free(m->ecache);
    ts_diag_free(m->diag);
    ts_model_desc_free(&m->desc);
    gguf_close(m->gguf);
    free(m);
}

const gguf_file *ts_model_gguf(const ts_model *m) { return m->gguf; }
const ts_model_desc *ts_model_desc_of(const ts_model *m) { return &m->desc; }
const char *ts_model_arch(const ts_model *m) { return m->desc.fam->name; }
int32_t ts_model_n_vocab(const ts_model *m) { return m->desc.hp.n_vocab; }
int32_t ts_model_n_ctx_train(const ts_model *m) { return m->desc.hp.n_ctx_train; }
uint64_t ts_model_weight_bytes(const ts_model *m) { return ts_model_desc_weight_bytes(&m->desc); }
expert_cache *ts_model_expert_cache(const ts_model *m) { return m->ecache; }

void ts_model_phase_add_sampling(ts_model *m, double seconds) {
    if (m->diag && m->diag->phases) {
        m->diag->phase_s[TS_PHASE_LM_HEAD] += seconds;
        m->diag->total_s += seconds;
    }
}

static void phases_footer(const ts_model *m, FILE *log) {
    const ts_diag *d = m->diag;
    static const char *names[TS_PHASE_COUNT] = {"attention", "dense FFN", "router + top-k", "expert I/O wait", "expert compute",
                                                "LM head + sampling"};
    double named = 0, N = d->passes ? (double)d->passes : 1;
    for (int p = 0; p < TS_PHASE_COUNT; p++) named += d->phase_s[p];
    double total = d->total_s > named ? d->total_s : named;
    fprintf(log, "[phases over %llu forward passes, %.1f ms total]\n", (unsigned long long)d->passes, total * 1e3);
    fprintf(log, "  %-20s %12s %7s %12s\n", "phase", "ms total", "%", "ms/token");
    for (int p = 0; p <= TS_PHASE_COUNT; p++) {
        double v = p < TS_PHASE_COUNT ? d->phase_s[p] : total - named;
        fprintf(log, "  %-20s %12.2f %6.1f%% %12.3f\n", p < TS_PHASE_COUNT ? names[p] : "rest", v * 1e3, total > 0 ? 100 * v / total : 0,
                v * 1e3 / N);
    }
    if (m->ecache) {
        expert_cache_stats st;
        expert_cache_get_stats(m->ecache, -1, &st);
        fprintf(log, "  expert cache: %llu requests, %llu hits (%.1f%%), %llu misses\n", (unsigned long long)st.requests,
                (unsigned long long)st.hits, st.requests ? 100.0 * (double)st.hits / (double)st.requests : 0.0,
                (unsigned long long)st.misses);
        const char *dio = getenv("TURBOSPARK_EXPERT_DISK_IO");
        if (dio && *dio && strcmp(dio, "0") != 0) {
            uint64_t phys;
            double req = (double)st.bytes_requested / (1024.0 * 1024.0) / N;
            if (expert_cache_physical_bytes(m->ecache, &phys) == TS_OK)
                fprintf(log, "  expert bytes: %.3f MiB/token requested, %.3f MiB/token physical, ratio %.3f\n", req,
                        (double)phys / (1024.0 * 1024.0) / N, st.bytes_requested ? (double)phys / (double)st.bytes_requested : 0.0);
            else
                fprintf(log, "  expert bytes: %.3f MiB/token requested, physical n/a\n", req);
        }
    }
}

ts_status ts_model_instruments_finish(ts_model *m, FILE *log) {
    if (!m->diag) return TS_OK;
    if (m->diag->phases) phases_footer(m, log);
    return ts_diag_finish(m->diag, log);
}

static void diag_tap(void *user, ts_tap_point point, int32_t layer, const float *rows, int32_t n_tok, int32_t width, bool final) {
    (void)point;
    ts_diag_ffn_observe(user, layer, rows, n_tok, width, final);
}

/* ---- session ---- */

ts_session_opts ts_session_opts_default(void) {
    ts_session_opts o = {.n_ctx = 0, .n_threads = 0, .n_batch = 256, .all_logits = false, .kv_f32 = false};
    return o;
}

/* Carves consecutive 64-byte aligned pieces out of one block; a first pass
 * with base NULL only measures. */
typedef struct {
    uint8_t *base;
    size_t used;
} carver;

static void *carve(carver *c, size_t bytes) {
    size_t off = (c->used + 63) & ~(size_t)63;
    c->used = off + bytes;
    return c->base ? c->base + off : NULL;
}

static void layout(ts_session *s, carver *c) {
    const ts_hparams *hp = &s->model->desc.hp;
    size_t B = (size_t)s->n_batch, E = (size_t)hp->n_embd, HD = (size_t)hp->head_dim;
    size_t QD = (size_t)hp->n_head * HD, KVD = (size_t)hp->n_head_kv * HD, FF = (size_t)hp->n_ff;
    size_t half = (size_t)s->model->desc.rope_global.n_rot / 2;
    s->x = carve(c, sizeof(float) * B * E);
    s->xb = carve(c, sizeof(float) * B * E);
    s->xb2 = carve(c, sizeof(float) * B * E);
    s->q = carve(c, sizeof(float) * B * QD);
    s->k = carve(c, sizeof(float) * B * KVD);
    s->v = carve(c, sizeof(float) * B * KVD);
    s->att = carve(c, sizeof(float) * B * QD);
    s->ffn_act = carve(c, sizeof(float) * B * FF);
    s->ffn_up = carve(c, sizeof(float) * B * FF);
    s->rope_cs[0] = carve(c, sizeof(float) * B * half * 2);
    s->rope_cs[1] = carve(c, sizeof(float) * B * half * 2);
    s->logits = carve(c, sizeof(float) * (size_t)s->logits_rows * (size_t)hp->n_vocab);
    if (s->model->desc.has_moe) {
        size_t NE = (size_t)hp->n_expert, FE = (size_t)hp->n_ff_exp, SF = (size_t)hp->n_ff_shexp;
        s->router = carve(c, sizeof(float) * B * NE);
        s->exp_gate = carve(c, sizeof(float) * FE);
        s->exp_up = carve(c, sizeof(float) * FE);
        s->exp_out = carve(c, sizeof(float) * E);
        if (s->model->diag && s->model->diag->pilot) {
            s->pilot_h = carve(c, sizeof(float) * B * E);
            s->pilot_r = carve(c, sizeof(float) * B * NE);
        }
        if (SF) {
            s->sh_act = carve(c, sizeof(float) * B * SF);
            s->sh_up = carve(c, sizeof(float) * B * SF);
            s->sh_out = carve(c, sizeof(float) * B * E);
            s->sh_gate = carve(c, sizeof(float) * B);
        }
    }
    size_t esz = s->kv_type == TS_TYPE_F16 ? 2 : 4;
    size_t per = (size_t)hp->n_head_kv * (size_t)s->n_ctx * HD * esz;
    for (int l = 0; l < hp->n_layer; l++) {
        void *k = carve(c, per), *v = carve(c, per);
        if (c->base) {
            s->kv[l].k = k;
            s->kv[l].v = v;
        }
    }
}

ts_status ts_session_new(ts_model *m, const ts_session_opts *opts, ts_session **out) {
    *out = NULL;
    ts_session_opts o = opts ? *opts : ts_session_opts_default();
    const ts_hparams *hp = &m->desc.hp;
    if (o.n_ctx < 0 || o.n_batch < 0 || o.n_threads < 0) return ts_fail(TS_ERR_ARG, "session: negative size option");
    int n_ctx = o.n_ctx ? o.n_ctx : hp->n_ctx_train;
    if (n_ctx > (1 << 24)) return ts_fail(TS_ERR_ARG, "session: context of %d positions is too large", n_ctx);
    int n_batch = o.n_batch ? o.n_batch : 256;
    if (n_batch > n_ctx) n_batch = n_ctx;

    ts_session *s = ts_calloc(1, sizeof *s);
    if (!s) return TS_ERR_NOMEM;
    s->model = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->all_logits = o.all_logits;
    s->kv_type = o.kv_f32 ? TS_TYPE_F32 : TS_TYPE_F16;
    s->logits_rows = o.all_logits ? n_batch : 1;
    ts_status st = ts_backend_cpu_new(o.n_threads, &s->be);
    if (st != TS_OK) goto fail;
    s->kv = ts_calloc((size_t)hp->n_layer, sizeof(ts_kv_layer));
    s->pos = ts_calloc((size_t)n_batch, sizeof(int32_t));
    if (!s->kv || !s->pos) {
        st = TS_ERR_NOMEM;
        goto fail;
    }
    int64_t max_in = hp->n_embd;
    if ((int64_t)hp->n_head * hp->head_dim > max_in) max_in = (int64_t)hp->n_head * hp->head_dim;
    if (hp->n_ff > max_in) max_in = hp->n_ff;
    if (hp->n_ff_exp > max_in) max_in = hp->n_ff_exp;
    if (hp->n_ff_shexp > max_in) max_in = hp->n_ff_shexp;
    if (m->desc.has_moe) {
        s->router_host = ts_calloc((size_t)n_batch * (size_t)hp->n_expert, sizeof(float));
        s->pilot_host = ts_calloc((size_t)n_batch * (size_t)hp->n_expert, sizeof(float));
        s->sh_gate_host = ts_calloc((size_t)n_batch, sizeof(float));
        if (!s->router_host || !s->sh_gate_host || !s->pilot_host) {
            st = TS_ERR_NOMEM;
            goto fail;
        }
    }
    ts_backend_reserve r = {.max_tokens = n_batch, .max_in = max_in, .n_ctx = n_ctx, .n_head = hp->n_head, .exact_act = o.precise};
    if ((st = s->be->ops->reserve(s->be, &r)) != TS_OK) goto fail;

    carver c = {0};
    layout(s, &c);
    s->arena_bytes = c.used;
    s->arena = s->be->ops->alloc(s->be, s->arena_bytes);
    if (!s->arena) {
        st = ts_fail(TS_ERR_NOMEM, "session: cannot allocate %zu bytes for the KV cache and activations", s->arena_bytes);
        goto fail;
    }
    c = (carver){.base = s->arena};
    layout(s, &c);
    if (m->diag && m->diag->ffn_path) ts_session_set_tap(s, diag_tap, m->diag);
    *out = s;
    return TS_OK;
fail:
    ts_session_free(s);
    return st;
}

void ts_session_free(ts_session *s) {
    if (!s) return;
    if (s->be) {
        if (s->arena) s->be->ops->dealloc(s->be, s->arena, s->arena_bytes);
        ts_backend_free(s->be);
    }
    free(s->kv);
    free(s->pos);
    free(s->out);
    free(s->router_host);
    free(s->pilot_host);
    free(s->sh_gate_host);
    free(s);
}

static ts_status ensure_out(ts_session *s, int64_t rows) {
    if (rows <= s->out_rows) return TS_OK;
    float *p = ts_realloc(s->out, sizeof(float) * (size_t)rows * (size_t)s->model->desc.hp.n_vocab);
    if (!p) return TS_ERR_NOMEM;
    s->out = p;
    s->out_rows = rows;
    return TS_OK;
}

ts_status ts_session_eval(ts_session *s, const int32_t *ids, int32_t n, float **logits) {
    if (logits) *logits = NULL;
    const int32_t V = s->model->desc.hp.n_vocab;
    if (n < 1 || !ids) return ts_fail(TS_ERR_ARG, "eval: no tokens");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return ts_fail(TS_ERR_LIMIT, "eval: %d tokens after %d exceed the context of %d", n, s->n_past, s->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) return ts_fail(TS_ERR_ARG, "eval: token id %d is outside the vocabulary (0..%d)", ids[i], V - 1);
    bool host = s->be->host_memory;
    if (s->all_logits || !host) {
        ts_status st = ensure_out(s, s->all_logits ? n : 1);
        if (st != TS_OK) return st;
    }
    double t0 = ts_now();
    for (int32_t done = 0; done < n;) {
        int chunk = n - done < s->n_batch ? n - done : s->n_batch;
        bool final = done + chunk == n;
        ts_status st = ts_forward_chunk(s, ids + done, chunk, s->all_logits, final);
        if (st != TS_OK) return st; /* n_past unchanged: the chunk is not in the context */
        if (s->all_logits) s->be->ops->download(s->be, s->out + (size_t)done * V, s->logits, (size_t)chunk * V);
        else if (final && !host) s->be->ops->download(s->be, s->out, s->logits, (size_t)V);
        s->n_past += chunk;
        done += chunk;
    }
    double dt = ts_now() - t0;
    if (s->model->diag) {
        s->model->diag->passes += (uint64_t)n;
        s->model->diag->total_s += dt;
    }
    if (n == 1) {
        s->timings.decode_tokens++;
        s->timings.decode_s += dt;
    } else {
        s->timings.prefill_tokens += n;
        s->timings.prefill_s += dt;
    }
    if (logits) *logits = (s->all_logits || !host) ? s->out : s->logits;
    return TS_OK;
}

void ts_session_reset(ts_session *s) { s->n_past = 0; }

ts_status ts_session_truncate(ts_session *s, int32_t n_past) {
    if (n_past < 0 || n_past > s->n_past)
        return ts_fail(TS_ERR_ARG, "truncate: %d is outside the context (0..%d)", n_past, s->n_past);
    s->n_past = n_past;
    return TS_OK;
}

int32_t ts_session_n_ctx(const ts_session *s) { return s->n_ctx; }
int32_t ts_session_n_past(const ts_session *s) { return s->n_past; }
int32_t ts_session_n_vocab(const ts_session *s) { return s->model->desc.hp.n_vocab; }
int32_t ts_session_n_threads(const ts_session *s) { return s->be->n_threads; }
ts_timings ts_session_timings(const ts_session *s) { return s->timings; }
void ts_session_timings_reset(ts_session *s) { memset(&s->timings, 0, sizeof s->timings); }

void ts_session_set_tap(ts_session *s, ts_tap_fn fn, void *user) {
    s->tap = fn;
    s->tap_user = user;
}
