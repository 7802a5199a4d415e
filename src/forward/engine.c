/* Model and session lifetime: loading onto a backend, binding the weights,
 * sizing the one arena per session, chunking evals into forward passes, the
 * step API and timings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward/forward_internal.h"
#include "tensor/types.h"

/* ---- model ---- */

ts_model_opts ts_model_opts_default(void) {
    ts_model_opts o;
    memset(&o, 0, sizeof o);
    o.expert_residency = TS_EXPERTS_AUTO;
    o.expert_policy = TS_CACHE_LFU;
    o.expert_io_threads = -1;
    return o;
}

ts_status ts_expert_residency_parse(const char *s, ts_expert_residency *out) {
    expert_residency r;
    ts_status st = expert_cache_parse_residency(s, &r);
    if (st == TS_OK) *out = (ts_expert_residency)r;
    return st;
}

ts_status ts_cache_policy_parse(const char *s, ts_cache_policy *out) {
    cache_policy p;
    if (!s || !cache_policy_parse(s, &p)) return ts_fail(TS_ERR_ARG, "'%s': expected lfu or lru", s ? s : "");
    *out = (ts_cache_policy)p;
    return TS_OK;
}

const char *ts_expert_residency_name(ts_expert_residency r) { return expert_residency_name((expert_residency)r); }

ts_status ts_expert_source_parse(const char *s, ts_expert_source *out) {
    expert_source r;
    ts_status st = expert_cache_parse_source(s, &r);
    if (st == TS_OK) *out = (ts_expert_source)r;
    return st;
}
const char *ts_cache_policy_name(ts_cache_policy p) { return cache_policy_name((cache_policy)p); }

ts_status ts_expert_plan_parse(const char *s, ts_expert_plan *out) {
    static const char *const names[] = {"auto", "host", "device"};
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (ts_expert_plan)i;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "'%s': expected auto, host or device", s ? s : "");
}

ts_status ts_logits_dest_parse(const char *s, ts_logits_dest *out) {
    static const char *const names[] = {"auto", "device", "host"}; /* ts_logits_dest's order */
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, names[i])) {
            *out = (ts_logits_dest)i;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "'%s': expected auto, device or host", s ? s : "");
}

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

/* Progress in bytes, reported about every 1% and at the end. */
typedef struct progress {
    const ts_model_opts *o;
    uint64_t total, done, next;
} progress;

static void progress_add(progress *p, uint64_t bytes) {
    if (bytes > p->total - p->done) bytes = p->total - p->done; /* page rounding of expert ranges may overshoot */
    p->done += bytes;
    if (p->o->progress && (p->done >= p->next || p->done == p->total)) {
        p->o->progress(p->o->progress_user, p->done, p->total);
        p->next = p->done + p->total / 100 + 1;
    }
}

static void experts_loaded(void *user, uint64_t bytes) { progress_add(user, bytes); }

/* Reads every non-expert weight page (routed experts: their residency mode
 * decides what is read). */
static void prefault(const ts_model *m, progress *pr) {
    const gguf_file *f = m->gguf;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (m->desc.has_moe && is_expert_tensor(t->name)) continue;
        for (uint64_t off = 0; off < t->nbytes; off += 4096) sink ^= t->data[off];
        progress_add(pr, t->nbytes);
    }
    (void)sink;
}

/* Makes one weight readable by the ops: its pointer becomes the backend's
 * address for it. Vectors and matrices alike; a pointer bound before (the
 * tied output layer) reuses the first binding. */
static ts_status bind_one(ts_model *m, const void **ptr, size_t bytes, progress *pr) {
    if (!*ptr || !bytes) return TS_OK;
    const void *dev;
    ts_status st = m->be->ops->weight_bind(m->be, *ptr, bytes, &dev);
    if (st != TS_OK) return st;
    ts_bound *b = ts_realloc(m->bound, sizeof *b * (size_t)(m->n_bound + 1));
    if (!b) {
        m->be->ops->weight_unbind(m->be, dev, bytes);
        return TS_ERR_NOMEM;
    }
    m->bound = b;
    m->bound[m->n_bound++] = (ts_bound){dev, bytes};
    *ptr = dev;
    if (!m->be->host_memory) progress_add(pr, bytes);
    return TS_OK;
}

static ts_status bind_mat(ts_model *m, ts_mat *w, progress *pr) {
    if (!w->data) return TS_OK;
    ts_status st = bind_one(m, &w->data, (size_t)(w->row_bytes * (uint64_t)w->n_out), pr);
    if (st == TS_OK && w->bias) st = bind_one(m, (const void **)&w->bias, sizeof(float) * (size_t)w->n_out, pr);
    return st;
}

static ts_status bind_vec(ts_model *m, const float **v, int64_t n, progress *pr) {
    return bind_one(m, (const void **)v, sizeof(float) * (size_t)n, pr);
}

/* A RoPE table is the desc's own allocation (ts_model_desc_free frees the
 * field). On a device backend the field becomes the device copy, so the host
 * table moves to the desc's owned list, freed with it, and ts_model_free
 * clears the field once the copy is unbound. */
static ts_status bind_table(ts_model *m, float **tab, int64_t n, progress *pr) {
    float *host = *tab;
    if (!host) return TS_OK;
    float **list = ts_realloc(m->desc.owned, sizeof(float *) * (size_t)(m->desc.n_owned + 1));
    if (!list) return TS_ERR_NOMEM;
    m->desc.owned = list;
    ts_status st = bind_vec(m, (const float **)tab, n, pr);
    if (st == TS_OK && *tab != host) m->desc.owned[m->desc.n_owned++] = host;
    return st;
}

/* The prefetch pilot of streamed decode (moe.c) runs layer l+1's router on
 * layer l's residual through l+1's FFN norm. RMSNorm's weight is a diagonal
 * after the same x / rms(x), so
 *   R[l+1] . (xhat * w[l+1]) = (R[l+1] diag(w[l+1] / w[l])) . (xhat * w[l])
 * and the right side's input is the xb layer l's router reads anyway: the
 * pilot becomes a second matrix of the router's own matmul, with no norm or
 * launch of its own. Columns where |w[l]| is below 1e-6 of its largest are
 * left out (the guess ignores that dimension; a guess never changes output).
 * Built for F32 routers without bias when streamed experts may use device
 * slots (a device backend, or backend slots asked for); the matrices are
 * the desc's own allocations, bound like every weight. */
static ts_status fold_pilot_routers(ts_model *m, const ts_model_opts *o) {
    ts_model_desc *md = &m->desc;
    const int64_t E = md->hp.n_embd, NE = md->hp.n_expert;
    if (!md->has_moe || (m->be->host_memory && o->expert_source == TS_EXPERT_SOURCE_AUTO) ||
        o->expert_residency == TS_EXPERTS_RESIDENT || o->expert_residency == TS_EXPERTS_MAPPED)
        return TS_OK;
    for (int l = 0; l + 1 < md->hp.n_layer; l++) {
        ts_layer *L = &md->layers[l], *N = &md->layers[l + 1];
        if (!L->moe || !N->moe || N->ffn_router.type != TS_TYPE_F32 || N->ffn_router.bias || !L->ffn_norm || !N->ffn_norm) continue;
        float *p = ts_model_desc_alloc(md, (size_t)(NE * E));
        if (!p) return TS_ERR_NOMEM;
        float big = 0;
        for (int64_t i = 0; i < E; i++) big = fabsf(L->ffn_norm[i]) > big ? fabsf(L->ffn_norm[i]) : big;
        for (int64_t e = 0; e < NE; e++) {
            const float *r = (const float *)((const uint8_t *)N->ffn_router.data + (uint64_t)e * N->ffn_router.row_bytes);
            for (int64_t i = 0; i < E; i++) {
                const float w = L->ffn_norm[i];
                p[e * E + i] = fabsf(w) > 1e-6f * big ? r[i] * (N->ffn_norm[i] / w) : 0.0f;
            }
        }
        L->pilot_router = (ts_mat){.data = p, .type = TS_TYPE_F32, .n_in = E, .n_out = NE, .row_bytes = sizeof(float) * (uint64_t)E,
                                   .name = "pilot_router"};
    }
    return TS_OK;
}

/* Every weight, vector and table the ops read goes through the backend. */
static ts_status bind_weights(ts_model *m, progress *pr) {
    ts_model_desc *md = &m->desc;
    const ts_hparams *hp = &md->hp;
    const int64_t E = hp->n_embd, HD = hp->head_dim;
    ts_status st;
#define B(x)                                    \
    do {                                        \
        if ((st = (x)) != TS_OK) return st;     \
    } while (0)
    B(bind_mat(m, &md->tok_embd, pr));
    if (md->tied) md->output.data = md->tok_embd.data;
    else B(bind_mat(m, &md->output, pr));
    B(bind_vec(m, &md->out_norm, E, pr));
    B(bind_table(m, &md->rope_global.freq, md->rope_global.n_rot / 2, pr));
    B(bind_table(m, &md->rope_swa.freq, md->rope_swa.n_rot / 2, pr));
    for (int l = 0; l < hp->n_layer; l++) {
        ts_layer *L = &md->layers[l];
        ts_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down, &L->ffn_router,
                        &L->ffn_gate_shexp, &L->ffn_up_shexp, &L->ffn_down_shexp, &L->ffn_gate_inp_shexp, &L->pilot_router};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) B(bind_mat(m, ms[i], pr));
        B(bind_vec(m, &L->attn_norm, E, pr));
        B(bind_vec(m, &L->ffn_norm, E, pr));
        B(bind_vec(m, &L->attn_post_norm, E, pr));
        B(bind_vec(m, &L->ffn_post_norm, E, pr));
        int64_t qn = m->desc.fam->qk_norm_full ? (int64_t)hp->n_head * HD : HD;
        int64_t kn = m->desc.fam->qk_norm_full ? (int64_t)hp->n_head_kv * HD : HD;
        B(bind_vec(m, &L->q_norm, qn, pr));
        B(bind_vec(m, &L->k_norm, kn, pr));
    }
#undef B
    return TS_OK;
}

/* A tokenizer whose size differs from the output layer's rows gives silent
 * empty text (fewer) or ids it cannot decode (more): refused at load. */
static ts_status check_vocab(const ts_model *m) {
    int32_t nt = tok_n_vocab(m->vocab), nv = m->desc.hp.n_vocab;
    if (nt != nv)
        return ts_fail(TS_ERR_FORMAT, "%s: the tokenizer has %d tokens but the output layer has %d rows", m->gguf->path ? m->gguf->path : "model",
                       nt, nv);
    return TS_OK;
}

ts_status ts_model_load_gguf(gguf_file *f, const ts_model_opts *opts, ts_model **out) {
    *out = NULL;
    ts_model_opts o = opts ? *opts : ts_model_opts_default();
    ts_model *m = ts_calloc(1, sizeof *m);
    if (!m) {
        gguf_close(f);
        return TS_ERR_NOMEM;
    }
    m->gguf = f;
    ts_status st = ts_model_desc_build(f, &m->desc);
    if (st != TS_OK) goto fail;
    gguf_str nm;
    if (gguf_get_str(f, "general.name", &nm) == GGUF_GET_OK)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(nm.len < 255 ? nm.len : 255), nm.ptr);

    /* the tokenizer, when the file has one */
    if (gguf_find_key(f, "tokenizer.ggml.model") >= 0) {
        if ((st = tok_load(f, &m->vocab)) != TS_OK) goto fail;
        if ((st = check_vocab(m)) != TS_OK) goto fail;
    }

    if (o.backend) {
        m->be = o.backend;
    } else {
        if ((st = ts_backend_cpu_new(0, &m->be)) != TS_OK) goto fail;
        m->own_be = true;
    }
    if (!m->desc.has_moe && (o.expert_residency != TS_EXPERTS_AUTO || o.expert_slots || o.expert_budget || o.expert_policy != TS_CACHE_LFU ||
                             o.gpu_expert_budget || o.expert_source != TS_EXPERT_SOURCE_AUTO)) {
        st = ts_fail(TS_ERR_ARG, "expert options apply to mixture-of-experts models; %s is dense", f->path ? f->path : "the model");
        goto fail;
    }

    /* the total counts the experts too: the cache reports what it loads at
     * open (prefault, device upload, host tier); a mode that loads none
     * (streamed from the file, mapped) jumps to the end */
    progress pr = {.o = &o};
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!(m->desc.has_moe && is_expert_tensor(f->tensors[i].name))) pr.total += f->tensors[i].nbytes;
    if (m->desc.has_moe) pr.total += m->desc.emap.total_bytes;
    if (o.prefault && m->be->host_memory) prefault(m, &pr);
    if ((st = fold_pilot_routers(m, &o)) != TS_OK) goto fail;
    for (int l = 0; l < m->desc.hp.n_layer && !m->be->host_memory; l++)
        if (m->desc.layers[l].pilot_router.data) pr.total += m->desc.layers[l].pilot_router.row_bytes * (uint64_t)m->desc.layers[l].pilot_router.n_out;
    if ((st = bind_weights(m, &pr)) != TS_OK) goto fail;

    if (m->desc.has_moe) {
        expert_cache_opts eo;
        expert_cache_opts_default(&eo);
        eo.residency = (expert_residency)o.expert_residency;
        eo.n_slots = o.expert_slots;
        eo.budget_bytes = o.expert_budget;
        eo.policy = (cache_policy)o.expert_policy;
        eo.mlock = o.expert_mlock;
        eo.io.nocache = o.expert_direct_io;
        eo.io.disk_io = o.expert_disk_io;
        if (o.expert_io_threads >= 0) eo.io.n_workers = o.expert_io_threads;
        eo.be = m->be;
        eo.progress = experts_loaded;
        eo.progress_user = &pr;
        eo.device_budget_bytes = o.gpu_expert_budget;
        eo.source = (expert_source)o.expert_source;
        eo.backend_slots = o.expert_source != TS_EXPERT_SOURCE_AUTO;
        if (m->be->host_memory && o.gpu_expert_budget) {
            st = ts_fail(TS_ERR_ARG, "a GPU expert budget applies to a device backend; the %s backend's experts take --expert-budget",
                         m->be->ops->name);
            goto fail;
        }
        /* auto sizing leaves room for what is resident anyway */
        uint64_t total = 0;
        for (uint64_t i = 0; i < f->n_tensors; i++) total += f->tensors[i].nbytes;
        eo.reserve_bytes = total - m->desc.emap.total_bytes;
        if ((st = expert_cache_new(&m->desc.emap, f, &eo, &m->ecache)) != TS_OK) goto fail;
    }
    if (o.progress && pr.done < pr.total) {
        pr.done = pr.total - 1;
        progress_add(&pr, 1);
    }
    *out = m;
    return TS_OK;
fail:
    ts_model_free(m);
    return st;
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
    for (int i = 0; i < m->n_bound; i++) {
        /* a bound RoPE table on a device: the host table is in desc.owned (bind_table) */
        if (!m->be->host_memory && m->bound[i].dev == m->desc.rope_global.freq) m->desc.rope_global.freq = NULL;
        if (!m->be->host_memory && m->bound[i].dev == m->desc.rope_swa.freq) m->desc.rope_swa.freq = NULL;
        m->be->ops->weight_unbind(m->be, m->bound[i].dev, m->bound[i].bytes);
    }
    free(m->bound);
    tok_free(m->vocab);
    if (m->own_be) ts_backend_free(m->be);
    ts_model_desc_free(&m->desc);
    gguf_close(m->gguf);
    free(m);
}

const gguf_file *ts_model_gguf(const ts_model *m) { return m->gguf; }
const char *ts_model_arch(const ts_model *m) { return m->desc.fam->name; }
int32_t ts_model_n_vocab(const ts_model *m) { return m->desc.hp.n_vocab; }
const ts_model_desc *ts_model_desc_of(const ts_model *m) { return &m->desc; }
expert_cache *ts_model_expert_cache(const ts_model *m) { return m->ecache; }
const ts_vocab *ts_model_vocab(const ts_model *m) { return m->vocab; }
ts_backend *ts_model_backend(const ts_model *m) { return m->be; }
bool ts_model_has_experts(const ts_model *m) { return m->ecache != NULL; }

void ts_model_get_info(const ts_model *m, ts_model_info *out) {
    const ts_hparams *hp = &m->desc.hp;
    memset(out, 0, sizeof *out);
    out->arch = m->desc.fam->name;
    out->name = m->name;
    out->n_vocab = hp->n_vocab;
    out->n_ctx_train = hp->n_ctx_train;
    out->n_layer = hp->n_layer;
    out->n_embd = hp->n_embd;
    out->n_head = hp->n_head;
    out->n_head_kv = hp->n_head_kv;
    out->head_dim = hp->head_dim;
    out->n_ff = hp->n_ff;
    out->n_expert = m->desc.has_moe ? hp->n_expert : 0;
    out->n_expert_used = m->desc.has_moe ? hp->n_expert_used : 0;
    const gguf_file *f = m->gguf;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        out->n_params += f->tensors[t].ne[0] * f->tensors[t].ne[1] * f->tensors[t].ne[2] * f->tensors[t].ne[3];
        out->file_bytes += f->tensors[t].nbytes;
    }
    out->active_bytes = ts_model_desc_weight_bytes(&m->desc);
    out->kv_bytes_per_pos = 2ull * 2ull * (uint64_t)hp->n_layer * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;
}

ts_status ts_model_meta_str(const ts_model *m, const char *key, const char **val, size_t *len) {
    gguf_str s;
    if (gguf_get_str(m->gguf, key, &s) != GGUF_GET_OK) return ts_fail(TS_ERR_ARG, "the model has no string %s", key);
    *val = s.ptr;
    *len = (size_t)s.len;
    return TS_OK;
}

const char *ts_model_expert_choice(const ts_model *m) { return m->ecache ? expert_cache_choice(m->ecache) : ""; }

const char *ts_model_expert_start_line(const ts_model *m, char *buf, size_t n) {
    if (n) buf[0] = 0;
    if (m->ecache) expert_cache_format_start(m->ecache, buf, n);
    return buf;
}

const char *ts_model_expert_end_line(const ts_model *m, uint64_t n_tokens, char *buf, size_t n) {
    if (n) buf[0] = 0;
    if (m->ecache) expert_cache_format_end(m->ecache, n_tokens, buf, n);
    return buf;
}

void ts_model_expert_stats(const ts_model *m, ts_expert_stats *out) {
    memset(out, 0, sizeof *out);
    if (!m->ecache) return;
    expert_cache_stats s;
    expert_cache_get_stats(m->ecache, -1, &s);
    out->passes = s.passes;
    out->requests = s.requests;
    out->hits = s.hits;
    out->misses = s.misses;
    out->cold_misses = s.cold_misses;
    out->evict_misses = s.evict_misses;
    out->bytes_requested = s.bytes_requested;
    out->bytes_read = s.bytes_read;
    out->io_wait_s = s.io_wait_s;
    out->bytes_uploaded = s.bytes_uploaded;
    out->prefetch_copies = s.prefetch_copies;
    out->prefetch_saved = s.prefetch_saved;
    out->prefetch_wasted = s.prefetch_wasted;
    out->bytes_prefetched = s.bytes_prefetched;
}

void ts_model_expert_reset_stats(ts_model *m) {
    if (m->ecache) expert_cache_reset_stats(m->ecache);
}

static sampler_params to_internal(const ts_sampler_params *p) {
    sampler_params q = {.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p, .min_p = p->min_p,
                        .repeat_penalty = p->repeat_penalty, .repeat_last_n = p->repeat_last_n, .seed = p->seed};
    return q;
}

/* ---- session ---- */

ts_session_opts ts_session_opts_default(void) {
    ts_session_opts o;
    memset(&o, 0, sizeof o);
    o.n_batch = 256;
    o.pilot_prefetch = true;
    /* the pilot's two most confident guesses: on the H200 they cost nothing
     * measurable, all top-k cost 20% (docs/BENCHMARKS.md, session 17) */
    o.pilot_prefetch_depth = 2;
    return o;
}

/* Entries of moe_ids (host) and moe_ids_dev: a chunk's (token, rank) ids,
 * and at least two rows (decode's ids and the prefetch pilot's guess). */
static size_t moe_ids_len(const ts_session *s) {
    return (size_t)(s->n_batch < 2 ? 2 : s->n_batch) * (size_t)s->model->desc.hp.n_expert_used;
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
    if (s->logits_dest != TS_LOGITS_HOST) s->logits_dev = carve(c, sizeof(float) * (size_t)s->logits_rows * (size_t)hp->n_vocab);
    s->pos = carve(c, sizeof(int32_t) * 2 * B); /* then the ids: pos_host's layout, so one upload moves both */
    s->ids_dev = s->pos ? s->pos + B : NULL;
    if (s->model->desc.has_moe) {
        size_t NE = (size_t)hp->n_expert, FE = (size_t)hp->n_ff_exp, SF = (size_t)hp->n_ff_shexp, K = (size_t)hp->n_expert_used;
        s->router = carve(c, sizeof(float) * (B < 2 ? 2 : B) * NE); /* row 1: the folded pilot's logits */
        /* a prefill chunk gathers all its (token, rank) rows at once */
        s->exp_x = carve(c, sizeof(float) * B * K * E);
        s->exp_gate = carve(c, sizeof(float) * B * K * FE);
        s->exp_up = carve(c, sizeof(float) * B * K * FE);
        s->exp_out = carve(c, sizeof(float) * B * K * E);
        const size_t BK2 = (B < 2 ? 2 : B) * K; /* row 1: the prefetch pilot's guess */
        s->moe_ids_dev = carve(c, sizeof(int32_t) * BK2);
        s->moe_w_dev = carve(c, sizeof(float) * BK2);
        s->moe_tok_dev = carve(c, sizeof(int32_t) * B * K);
        s->moe_row_dev = carve(c, sizeof(int32_t) * B * K);
        s->moe_tab_dev = carve(c, sizeof(void *) * EXPERT_PROJ_COUNT * NE);
        if ((s->diag && s->diag->pilot != TS_PILOT_OFF) || s->prefetch) {
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

/* TS_LOGITS_AUTO's bar, lowered by tests (ts_session_logits_auto_bar) to
 * run the switching on models whose heads are short. */
static uint64_t logits_auto_bar = TS_LOGITS_HOST_MIN_ROW_BYTES;

void ts_session_logits_auto_bar(uint64_t row_bytes) { logits_auto_bar = row_bytes; }

ts_status ts_session_new(ts_model *m, const ts_session_opts *opts, ts_session **out) {
    *out = NULL;
    ts_session_opts o = opts ? *opts : ts_session_opts_default();
    const ts_hparams *hp = &m->desc.hp;
    if (o.n_ctx < 0 || o.n_batch < 0 || o.n_threads < 0) return ts_fail(TS_ERR_ARG, "session: negative size option");
    if ((unsigned)o.logits_dest > TS_LOGITS_HOST) return ts_fail(TS_ERR_ARG, "session: logits destination %d is not a ts_logits_dest", (int)o.logits_dest);
    int n_ctx = o.n_ctx ? o.n_ctx : hp->n_ctx_train;
    if (n_ctx > (1 << 24)) return ts_fail(TS_ERR_ARG, "session: context of %d positions is too large", n_ctx);
    int n_batch = o.n_batch ? o.n_batch : 256;
    if (n_batch > n_ctx) n_batch = n_ctx;

    ts_session *s = ts_calloc(1, sizeof *s);
    if (!s) return TS_ERR_NOMEM;
    s->model = m;
    s->be = m->be;
    s->moe_held_l = -1;
    s->pf_l = -1;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->all_logits = o.all_logits;
    s->kv_type = o.kv_f32 ? TS_TYPE_F32 : TS_TYPE_F16;
    s->logits_rows = o.all_logits ? n_batch : 1;
    ts_status st;
    /* instruments first: a bad path is refused before anything large is made */
    if ((st = ts_diag_new(o.instruments, &s->diag)) != TS_OK) goto fail;
    /* mapped host logits: one row, from a device backend, without instruments
     * (they copy the logits from the device); AUTO where the head's rows hide
     * the stores across the bus (ts_logits_dest) */
    s->logits_dest = o.logits_dest;
    if (o.all_logits || s->be->host_memory || s->diag ||
        (o.logits_dest == TS_LOGITS_AUTO && m->desc.output.row_bytes < logits_auto_bar))
        s->logits_dest = TS_LOGITS_DEVICE;
    if (s->diag) {
        if ((st = ts_diag_bind(s->diag, hp->n_layer, m->desc.has_moe ? hp->n_expert : 0, hp->n_expert_used, m->desc.fam->name)) != TS_OK)
            goto fail;
        s->hook_tab = ts_diag_hooks;
        s->hook_tab.user = s->diag;
        s->hooks = &s->hook_tab;
    }
    if ((st = s->be->ops->stream_new(s->be, o.n_threads, &s->st)) != TS_OK) goto fail;
    const bool dev_slots = m->ecache && expert_cache_backend_slots(m->ecache) && expert_cache_residency(m->ecache) == EXPERT_RESIDENCY_STREAMED;
    s->prefetch = o.pilot_prefetch && dev_slots;
    if (o.pilot_prefetch_depth < 0) {
        st = ts_fail(TS_ERR_ARG, "session: pilot prefetch depth %d", o.pilot_prefetch_depth);
        goto fail;
    }
    s->prefetch_depth = o.pilot_prefetch_depth && o.pilot_prefetch_depth < hp->n_expert_used ? o.pilot_prefetch_depth : hp->n_expert_used;
    /* device-planned streamed decode: backend slots from the host tier */
    const bool can_plan = m->ecache && expert_cache_residency(m->ecache) == EXPERT_RESIDENCY_STREAMED && expert_cache_device_plan(m->ecache);
    if (o.expert_plan == TS_EXPERT_PLAN_DEVICE && !can_plan) {
        st = ts_fail(TS_ERR_ARG, "session: expert passes planned on the device need streamed experts in device slots fed from the host tier (--gpu-expert-source host)");
        goto fail;
    }
    s->dev_plan = can_plan && o.expert_plan != TS_EXPERT_PLAN_HOST && !s->diag;
    s->dpf_l = -1;
    /* backend slots: prefill's next pass and the pilot's guesses are copied on their own stream */
    if (dev_slots && (st = s->be->ops->stream_new(s->be, 1, &s->copy_st)) != TS_OK) goto fail;
    if (dev_slots && !(s->ahead_ev = s->be->ops->event_new(s->be))) {
        st = TS_ERR_NOMEM;
        goto fail;
    }
    if (s->prefetch && (!(s->demand_ev = s->be->ops->event_new(s->be)) || !(s->pf_done_ev = s->be->ops->event_new(s->be)))) {
        st = TS_ERR_NOMEM;
        goto fail;
    }
    s->kv = ts_calloc((size_t)hp->n_layer, sizeof(ts_kv_layer));
    /* the backend's host memory (pinned on a GPU): the per-token upload is
     * then an asynchronous copy, not a staged one */
    s->pos_host = s->be->ops->host_alloc(s->be, sizeof(int32_t) * 2 * (size_t)n_batch);
    s->tokens = ts_calloc((size_t)n_ctx, sizeof(int32_t));
    if (!s->kv || !s->pos_host || !s->tokens) {
        st = TS_ERR_NOMEM;
        goto fail;
    }
    memset(s->pos_host, 0, sizeof(int32_t) * 2 * (size_t)n_batch); /* sent whole up to the ids (ts_forward_send) */
    int64_t max_in = hp->n_embd;
    if ((int64_t)hp->n_head * hp->head_dim > max_in) max_in = (int64_t)hp->n_head * hp->head_dim;
    if (hp->n_ff > max_in) max_in = hp->n_ff;
    if (hp->n_ff_exp > max_in) max_in = hp->n_ff_exp;
    if (hp->n_ff_shexp > max_in) max_in = hp->n_ff_shexp;
    if (m->desc.has_moe) {
        s->router_host = ts_calloc((size_t)n_batch * (size_t)hp->n_expert, sizeof(float));
        s->pilot_host = ts_calloc((size_t)n_batch * (size_t)hp->n_expert, sizeof(float));
        size_t BK = (size_t)n_batch * (size_t)hp->n_expert_used;
        s->moe_ids = s->be->ops->host_alloc(s->be, sizeof(int32_t) * moe_ids_len(s)); /* read back every MoE layer: pinned on a GPU */
        s->moe_row = ts_calloc(BK, sizeof(int32_t));
        s->moe_tok = ts_calloc(BK, sizeof(int32_t));
        s->moe_order = ts_calloc((size_t)hp->n_expert, sizeof(int32_t));
        s->moe_cnt = ts_calloc((size_t)hp->n_expert, sizeof(int32_t));
        s->moe_off = ts_calloc((size_t)hp->n_expert, sizeof(int32_t));
        s->moe_goff = ts_calloc((size_t)hp->n_expert, sizeof(int32_t));
        s->moe_gcnt = ts_calloc((size_t)hp->n_expert, sizeof(int32_t));
        s->moe_tab_host = s->be->ops->host_alloc(s->be, sizeof(void *) * EXPERT_PROJ_COUNT * (size_t)hp->n_expert);
        if (!s->moe_tab_host || !s->router_host || !s->pilot_host || !s->moe_ids || !s->moe_row || !s->moe_tok ||
            !s->moe_order || !s->moe_cnt || !s->moe_off || !s->moe_goff || !s->moe_gcnt) {
            st = TS_ERR_NOMEM;
            goto fail;
        }
    }
    ts_backend_reserve r = {.max_tokens = n_batch, .max_in = max_in, .n_ctx = n_ctx, .n_head = hp->n_head,
                            .max_expert_rows = m->desc.has_moe ? (int64_t)n_batch * hp->n_expert_used : 0, .exact_act = o.precise};
    if ((st = s->be->ops->reserve(s->st, &r)) != TS_OK) goto fail;

    carver c = {0};
    layout(s, &c);
    s->arena_bytes = c.used;
    s->arena = s->be->ops->alloc(s->be, s->arena_bytes);
    if (!s->arena) {
        char b[32];
        /* keeps the backend's reason (a GPU says how much memory is free) */
        ts_error_prefix("session: cannot allocate %s for the KV cache (%d positions) and activations",
                        ts_fmt_bytes(s->arena_bytes, 1, b, sizeof b), n_ctx);
        st = TS_ERR_NOMEM;
        goto fail;
    }
    c = (carver){.base = s->arena};
    layout(s, &c);
    if (s->logits_dest != TS_LOGITS_DEVICE && !(s->logits_map = s->be->ops->host_alloc(s->be, sizeof(float) * (size_t)hp->n_vocab))) {
        st = TS_ERR_NOMEM;
        goto fail;
    }
    s->logits = s->logits_dest == TS_LOGITS_HOST ? s->logits_map : s->logits_dev;
    s->sp = ts_sampler_params_default();
    sampler_params sp = to_internal(&s->sp);
    if ((st = sampler_new(&sp, hp->n_vocab, &s->smp)) != TS_OK) goto fail;
    *out = s;
    return TS_OK;
fail:
    ts_session_free(s);
    return st;
}

void ts_session_free(ts_session *s) {
    if (!s) return;
    if (s->arena) s->be->ops->dealloc(s->be, s->arena, s->arena_bytes);
    if (s->st) s->be->ops->stream_free(s->st);
    if (s->copy_st) s->be->ops->stream_free(s->copy_st);
    if (s->demand_ev) s->be->ops->event_free(s->be, s->demand_ev);
    if (s->pf_done_ev) s->be->ops->event_free(s->be, s->pf_done_ev);
    if (s->ahead_ev) s->be->ops->event_free(s->be, s->ahead_ev);
    ts_diag_free(s->diag, s->be);
    sampler_free(s->smp);
    free(s->kv);
    if (s->pos_host) s->be->ops->host_free(s->be, s->pos_host, sizeof(int32_t) * 2 * (size_t)s->n_batch);
    free(s->tokens);
    if (s->out) s->be->ops->host_free(s->be, s->out, sizeof(float) * (size_t)s->out_rows * (size_t)s->model->desc.hp.n_vocab);
    if (s->logits_map) s->be->ops->host_free(s->be, s->logits_map, sizeof(float) * (size_t)s->model->desc.hp.n_vocab);
    free(s->router_host);
    free(s->pilot_host);
    if (s->moe_ids) s->be->ops->host_free(s->be, s->moe_ids, sizeof(int32_t) * moe_ids_len(s));
    free(s->moe_row);
    free(s->moe_tok);
    free(s->moe_order);
    free(s->moe_cnt);
    free(s->moe_off);
    free(s->moe_goff);
    free(s->moe_gcnt);
    if (s->moe_tab_host) s->be->ops->host_free(s->be, s->moe_tab_host, sizeof(void *) * EXPERT_PROJ_COUNT * (size_t)s->model->desc.hp.n_expert);
    free(s);
}

ts_model *ts_session_model(const ts_session *s) { return s->model; }

/* The backend's host memory (pinned on a GPU, so the per-token copy of the
 * logits is a direct DMA); contents need not survive growth. */
static ts_status ensure_out(ts_session *s, int64_t rows) {
    if (rows <= s->out_rows) return TS_OK;
    const size_t V = (size_t)s->model->desc.hp.n_vocab;
    float *p = s->be->ops->host_alloc(s->be, sizeof(float) * (size_t)rows * V);
    if (!p) return TS_ERR_NOMEM;
    if (s->out) s->be->ops->host_free(s->be, s->out, sizeof(float) * (size_t)s->out_rows * V);
    s->out = p;
    s->out_rows = rows;
    return TS_OK;
}

/* One decode step of a session without instruments or all-logits mode, on a
 * backend that records: the first step runs plainly (it sizes the scratch a
 * step needs, which recording cannot), the second is recorded, and every
 * later one replays the recording: one submission per token, no host work
 * between its ops. With streamed experts the host must ask the cache after
 * each MoE layer's routing, so the step is recorded as segments cut at those
 * host points (moe.c, host_point), and a replay runs each segment, then that
 * layer's host work (ts_forward_moe_host), then the next. Instruments need
 * the host between ops (phase marks, FFN captures), so their sessions always
 * run plainly. */
static ts_status decode_step(ts_session *s) {
    const ts_backend_ops *op = s->be->ops;
    if (s->rec == TS_REC_READY) {
        if (s->model->ecache && s->n_seg == 0) ts_forward_moe_count_replay(s);
        for (int k = 0; k <= s->n_seg; k++) {
            ts_status st = op->replay(s->st, k);
            if (st == TS_OK && k < s->n_seg) st = ts_forward_moe_host(s, s->seg_layer[k]);
            if (st != TS_OK) {
                (void)ts_forward_moe_release(s);
                return st;
            }
        }
        return ts_forward_moe_release(s);
    }
    if (s->rec == TS_REC_NONE) {
        s->rec = TS_REC_WARM;
        ts_forward_send(s, 1);
        return ts_forward_chunk(s, 1, false, true);
    }
    s->n_seg = 0;
    ts_status st = op->capture_begin(s->st, 0);
    if (st != TS_OK) return st;
    s->capturing = s->capture_open = true;
    /* the copy of the staged id and position is the recording's first op:
     * a replay reads them from s->pos_host (one launch, no copy call) */
    ts_forward_send(s, 1);
    ts_status fst = ts_forward_chunk(s, 1, false, true);
    st = s->capture_open ? op->capture_end(s->st) : TS_OK;
    s->capturing = s->capture_open = false;
    if (fst == TS_OK && st == TS_OK) st = op->replay(s->st, s->n_seg);
    ts_status rst = ts_forward_moe_release(s);
    if (fst != TS_OK) return fst;
    if (st != TS_OK) return st;
    if (rst != TS_OK) return rst;
    s->rec = TS_REC_READY;
    return TS_OK;
}

ts_status ts_session_eval(ts_session *s, const int32_t *ids, int32_t n, float **logits) {
    if (logits) *logits = NULL;
    const int32_t V = s->model->desc.hp.n_vocab;
    const ts_backend_ops *op = s->be->ops;
    if (n < 1 || !ids) return ts_fail(TS_ERR_ARG, "eval: no tokens");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return ts_fail(TS_ERR_LIMIT, "eval: %d tokens after %d exceed the context of %d", n, s->n_past, s->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) return ts_fail(TS_ERR_ARG, "eval: token id %d is outside the vocabulary (0..%d)", ids[i], V - 1);
    bool host = s->be->host_memory;
    /* where this eval's LM head writes (ts_logits_dest): a recorded decode
     * step that wrote to the other buffer is recorded again at the next one */
    float *dest = s->logits_dest == TS_LOGITS_HOST || (s->logits_dest == TS_LOGITS_AUTO && logits) ? s->logits_map : s->logits_dev;
    if (dest != s->logits) {
        s->logits = dest;
        if (s->rec == TS_REC_READY) s->rec = TS_REC_WARM;
    }
    /* a device backend copies the logits out only when asked: a caller that
     * just samples (ts_session_sample) draws where they are; mapped ones are
     * written where the caller reads them */
    bool copy = s->all_logits || (!host && logits && s->logits != s->logits_map);
    if (copy) {
        ts_status st = ensure_out(s, s->all_logits ? n : 1);
        if (st != TS_OK) return st;
    }
    s->last_logits = NULL;
    s->dev_logits = false;
    bool record = op->replay && !s->diag && !s->all_logits;
    double t0 = ts_now();
    for (int32_t done = 0; done < n;) {
        int chunk = n - done < s->n_batch ? n - done : s->n_batch;
        bool final = done + chunk == n;
        const bool step = record && chunk == 1; /* decode_step sends (or replays the send) */
        ts_forward_stage(s, ids + done, chunk);
        if (!step) ts_forward_send(s, chunk);
        /* a decode step with its cache passes planned on the backend: the
         * cache is the session's from here to the sync (a recording
         * backend's first step runs plainly, planned on the host) */
        const bool dplan = chunk == 1 && s->dev_plan && !s->all_logits && (!record || s->rec != TS_REC_NONE);
        ts_status st = dplan ? ts_forward_moe_release(s) : TS_OK;
        if (st == TS_OK && dplan) st = expert_cache_device_enter(s->model->ecache, s->st);
        if (st == TS_OK) {
            s->dplan_on = dplan;
            st = step ? decode_step(s) : ts_forward_chunk(s, chunk, s->all_logits, final);
            s->dplan_on = false;
            if (st == TS_OK) {
                /* the sync below waits for the copy: one round trip a step, not two */
                if (s->all_logits) op->to_host_async(s->st, s->out + (size_t)done * V, s->logits, sizeof(float) * (size_t)chunk * V);
                else if (final && copy) op->to_host_async(s->st, s->out, s->logits, sizeof(float) * (size_t)V);
                st = op->sync(s->st);
            }
            if (dplan) {
                ts_status sl = expert_cache_device_leave(s->model->ecache, s->st, st == TS_OK);
                /* the prefetches ran on copy_st's error word */
                ts_status sp = s->prefetch ? op->sync(s->copy_st) : TS_OK;
                if (st == TS_OK) st = sl != TS_OK ? sl : sp;
            }
        }
        if (st != TS_OK) return st; /* n_past unchanged: the chunk is not in the context */
        ts_diag_phases_flush(s);
        memcpy(s->tokens + s->n_past, ids + done, sizeof(int32_t) * (size_t)chunk);
        s->n_past += chunk;
        done += chunk;
    }
    double dt = ts_now() - t0;
    if (s->diag) {
        s->diag->passes += (uint64_t)n;
        s->diag->total_s += dt;
    }
    if (n == 1) {
        s->timings.decode_tokens++;
        s->timings.decode_s += dt;
    } else {
        s->timings.prefill_tokens += n;
        s->timings.prefill_s += dt;
    }
    if (!host && !logits && !s->all_logits) {
        s->dev_logits = true; /* in s->logits, for ts_session_sample */
        return TS_OK;
    }
    float *res = copy ? s->out : s->logits;
    s->last_logits = s->all_logits ? res + (size_t)(n - 1) * V : res;
    if (logits) *logits = res;
    return TS_OK;
}

void ts_session_reset(ts_session *s) {
    s->n_past = 0;
    s->last_logits = NULL;
    s->dev_logits = false;
}

ts_status ts_session_truncate(ts_session *s, int32_t n_past) {
    if (n_past < 0 || n_past > s->n_past)
        return ts_fail(TS_ERR_ARG, "truncate: %d is outside the context (0..%d)", n_past, s->n_past);
    if (n_past != s->n_past) s->last_logits = NULL, s->dev_logits = false;
    s->n_past = n_past;
    return TS_OK;
}

int32_t ts_session_reuse_prefix(ts_session *s, const int32_t *ids, int32_t n) {
    int32_t common = 0;
    while (common < s->n_past && common < n && s->tokens[common] == ids[common]) common++;
    if (common == n && common > 0) common--; /* at least one token must be evaluated for fresh logits */
    ts_session_truncate(s, common);
    return common;
}

const int32_t *ts_session_tokens(const ts_session *s, int32_t *n_past) {
    if (n_past) *n_past = s->n_past;
    return s->tokens;
}

int32_t ts_session_n_ctx(const ts_session *s) { return s->n_ctx; }
ts_expert_plan ts_session_expert_plan(const ts_session *s) {
    const expert_cache *ec = s->model->ecache;
    if (!ec || !expert_cache_backend_slots(ec) || expert_cache_residency(ec) != EXPERT_RESIDENCY_STREAMED) return TS_EXPERT_PLAN_AUTO;
    return s->dev_plan ? TS_EXPERT_PLAN_DEVICE : TS_EXPERT_PLAN_HOST;
}
int32_t ts_session_pilot_prefetch(const ts_session *s) { return s->prefetch ? s->prefetch_depth : 0; }
int32_t ts_session_n_past(const ts_session *s) { return s->n_past; }
int32_t ts_session_n_vocab(const ts_session *s) { return s->model->desc.hp.n_vocab; }
int32_t ts_session_n_threads(const ts_session *s) { return s->st->n_threads; }
ts_timings ts_session_timings(const ts_session *s) { return s->timings; }
void ts_session_timings_reset(ts_session *s) { memset(&s->timings, 0, sizeof s->timings); }

/* ---- the session's sampler ---- */

ts_sampler_params ts_sampler_params_default(void) {
    sampler_params p;
    sampler_params_default(&p);
    ts_sampler_params o = {.temperature = p.temperature, .top_k = p.top_k, .top_p = p.top_p, .min_p = p.min_p,
                           .repeat_penalty = p.repeat_penalty, .repeat_last_n = p.repeat_last_n, .seed = p.seed};
    return o;
}

ts_status ts_session_set_sampler(ts_session *s, const ts_sampler_params *p) {
    sampler_params q = to_internal(p);
    sampler *smp;
    ts_status st = sampler_new(&q, s->model->desc.hp.n_vocab, &smp);
    if (st != TS_OK) return st;
    sampler_free(s->smp);
    s->smp = smp;
    s->sp = *p;
    return TS_OK;
}

void ts_session_sampler_reset(ts_session *s) { sampler_reset(s->smp); }
void ts_session_sampler_accept(ts_session *s, int32_t id) { sampler_accept(s->smp, id); }

/* The session sampler's next draw made where the logits are (the last eval's
 * s->logits on the backend): the same chain, RNG stream and ring of accepted
 * ids, so the id is the one the host sampler would draw. */
static ts_status sample_on_backend(ts_session *s, int32_t *id) {
    const sampler_params *p = sampler_get_params(s->smp);
    ts_sample_desc d = {.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p, .min_p = p->min_p,
                        .repeat_penalty = p->repeat_penalty};
    ts_rng *rng = sampler_rng(s->smp);
    memcpy(d.rng, rng->s, sizeof d.rng);
    d.recent = sampler_recent(s->smp, &d.recent_cap);
    ts_status st = s->be->ops->sample(s->st, s->logits, s->model->desc.hp.n_vocab, &d, id);
    if (st != TS_OK) return st;
    memcpy(rng->s, d.rng, sizeof d.rng);
    s->dev_logits = false; /* modified by the draw, as the host sampler modifies its row */
    return TS_OK;
}

int32_t ts_session_draw(ts_session *s, float *host_logits) {
    if (!host_logits) host_logits = s->last_logits;
    if (host_logits) return sampler_sample(s->smp, host_logits);
    if (!s->dev_logits) {
        ts_fail(TS_ERR_ARG, "sample: no logits (evaluate tokens first)");
        return -1;
    }
    if (s->be->ops->sample) {
        int32_t id = -1;
        ts_status st = sample_on_backend(s, &id);
        if (st != TS_ERR_UNSUPPORTED) return st == TS_OK ? id : -1;
    }
    /* the backend cannot draw with these parameters: the row comes to the
     * host (mapped logits are there: the eval synced) */
    float *row = s->logits;
    if (s->logits != s->logits_map) {
        if (ensure_out(s, 1) != TS_OK) return -1;
        s->be->ops->to_host(s->st, s->out, s->logits, sizeof(float) * (size_t)s->model->desc.hp.n_vocab);
        if (s->be->ops->sync(s->st) != TS_OK) return -1;
        row = s->out;
    }
    s->dev_logits = false;
    return sampler_sample(s->smp, row);
}

ts_status ts_session_sample(ts_session *s, int32_t *id) {
    *id = -1;
    if (!s->last_logits && !s->dev_logits) return ts_fail(TS_ERR_ARG, "sample: no logits (evaluate tokens first)");
    double t0 = ts_now();
    int32_t r = ts_session_draw(s, s->last_logits);
    double dt = ts_now() - t0;
    s->timings.sample_s += dt;
    if (s->diag && s->diag->phases) {
        s->diag->phase_s[TS_PHASE_LM_HEAD] += dt;
        s->diag->total_s += dt;
    }
    if (r < 0 || r >= s->model->desc.hp.n_vocab) {
        ts_error_prefix("no token sampled"); /* the sampler said why */
        return TS_ERR_ARG;
    }
    *id = r;
    return TS_OK;
}

/* ---- instruments ---- */

static void phases_footer(const ts_session *s, FILE *log) {
    const ts_diag *d = s->diag;
    const ts_model *m = s->model;
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
        uint64_t phys;
        double req = (double)st.bytes_requested / (1024.0 * 1024.0) / N;
        ts_status pst = expert_cache_physical_bytes(m->ecache, &phys);
        if (pst == TS_OK)
            fprintf(log, "  expert bytes: %.3f MiB/token requested, %.3f MiB/token physical, ratio %.3f\n", req,
                    (double)phys / (1024.0 * 1024.0) / N, st.bytes_requested ? (double)phys / (double)st.bytes_requested : 0.0);
        else if (expert_cache_disk_io_on(m->ecache))
            fprintf(log, "  expert bytes: %.3f MiB/token requested, physical n/a\n", req);
    }
}

ts_status ts_session_instruments_finish(ts_session *s, FILE *log, bool partial) {
    if (!s->diag) return TS_OK;
    if (s->diag->phases) phases_footer(s, log);
    return ts_diag_finish(s->diag, log, partial);
}
