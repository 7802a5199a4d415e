#include "experts/expert_locator.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experts/policy.h"

/* Sanity bounds: far above any real model, low enough that the slice table
 * (n_moe * n_expert * 3 entries) cannot be asked to be absurd. */
#define LOC_MAX_BLOCKS 4096
#define LOC_MAX_EXPERTS 65536

static const char *const proj_names[EXPERT_PROJ_COUNT] = {"gate", "up", "down"};

const char *expert_proj_name(int p) { return p >= 0 && p < EXPERT_PROJ_COUNT ? proj_names[p] : "?"; }

const char *expert_layout_name(expert_layout l) {
    switch (l) {
    case EXPERT_LAYOUT_NONE: return "dense";
    case EXPERT_LAYOUT_STACKED: return "stacked";
    case EXPERT_LAYOUT_PER_EXPERT: return "per-expert";
    }
    return "?";
}

static const char *fname(const gguf_file *f) { return f->path ? f->path : "gguf"; }

/* Reads a required/optional positive integer key {arch}.{suffix}. */
static ts_status get_key(const gguf_file *f, const char *arch, const char *suffix, bool required, uint64_t *out,
                         bool *present) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    gguf_get_result r = gguf_get_u64(f, key, out);
    if (present) *present = r == GGUF_GET_OK;
    if (r == GGUF_GET_WRONG_TYPE) return TS_ERR_FORMAT; /* message set by the getter */
    if (r == GGUF_GET_MISSING) {
        *out = 0;
        if (required) return ts_fail(TS_ERR_FORMAT, "%s: missing key %s", fname(f), key);
    }
    return TS_OK;
}

static void fmt_shape(char *buf, size_t n, const gguf_tensor *t) {
    int w = snprintf(buf, n, "[");
    for (uint32_t d = 0; d < t->n_dims && w > 0 && (size_t)w < n; d++)
        w += snprintf(buf + w, n - (size_t)w, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
    if (w > 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, "]");
}

typedef struct loc_ctx {
    const gguf_file *f;
    const char *arch;
    expert_map *m;
} loc_ctx;

/* Expected ne of projection p for one expert (2-D part). */
static void proj_ne(const expert_map *m, int p, uint64_t *ne0, uint64_t *ne1) {
    if (p == EXPERT_PROJ_DOWN) {
        *ne0 = (uint64_t)m->n_ff_exp;
        *ne1 = (uint64_t)m->n_embd;
    } else {
        *ne0 = (uint64_t)m->n_embd;
        *ne1 = (uint64_t)m->n_ff_exp;
    }
}

static ts_status shape_error(const loc_ctx *c, const gguf_tensor *t, uint64_t e0, uint64_t e1, int with_experts) {
    char got[128];
    fmt_shape(got, sizeof got, t);
    char want[128];
    if (with_experts)
        snprintf(want, sizeof want, "[%" PRIu64 ", %" PRIu64 ", %d]", e0, e1, c->m->n_expert);
    else
        snprintf(want, sizeof want, "[%" PRIu64 ", %" PRIu64 "]", e0, e1);
    return ts_fail(TS_ERR_FORMAT,
                   "%s: tensor %.*s has shape %s, expected %s from %s.embedding_length=%" PRId64
                   ", expert ffn length=%" PRId64 ", %s.expert_count=%d",
                   fname(c->f), (int)t->name.len, t->name.ptr, got, want, c->arch, c->m->n_embd, c->m->n_ff_exp,
                   c->arch, c->m->n_expert);
}

/* Row bytes of t's rows, with a message when the type cannot hold them. */
static ts_status row_bytes(const loc_ctx *c, const gguf_tensor *t, uint64_t *rb) {
    *rb = ts_type_row_bytes(t->type, t->ne[0]);
    if (*rb == 0)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %.*s: type %s (id %u) cannot hold rows of %" PRIu64 " elements",
                       fname(c->f), (int)t->name.len, t->name.ptr, ts_type_name(t->type), t->type, t->ne[0]);
    return TS_OK;
}

/* Absolute offset of byte `rel` of tensor t, checked to lie with `len` bytes
 * inside both the tensor and the file. */
static ts_status abs_range(const loc_ctx *c, const gguf_tensor *t, uint64_t rel, uint64_t len, uint64_t *off) {
    uint64_t end_rel, start, end;
    if (!ts_add_u64(rel, len, &end_rel) || end_rel > t->nbytes || !ts_add_u64(c->f->data_offset, t->offset, &start) ||
        !ts_add_u64(start, rel, off) || !ts_add_u64(*off, len, &end) || end > c->f->map.size)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %.*s: expert slice [%" PRIu64 ", +%" PRIu64 ") lies outside the tensor (%" PRIu64
                       " bytes) or the file",
                       fname(c->f), (int)t->name.len, t->name.ptr, rel, len, t->nbytes);
    return TS_OK;
}

static ts_status check_type_same(const loc_ctx *c, const gguf_tensor *t, ts_type want, const char *first) {
    if (t->type == want) return TS_OK;
    return ts_fail(TS_ERR_UNSUPPORTED, "%s: tensor %.*s is %s but %s is %s (one type per projection and layer)",
                   fname(c->f), (int)t->name.len, t->name.ptr, ts_type_name(t->type), first, ts_type_name(want));
}

static ts_status bind_stacked(const loc_ctx *c, int32_t block, int32_t l) {
    expert_map *m = c->m;
    expert_layer_info *li = &m->layers[l];
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", block, proj_names[p]);
        const gguf_tensor *t = gguf_find_tensor(c->f, name);
        if (!t)
            return ts_fail(TS_ERR_FORMAT, "%s: layer %d has stacked expert tensors but lacks %s", fname(c->f), block,
                           name);
        uint64_t e0, e1, rb, nb2, total;
        proj_ne(m, p, &e0, &e1);
        if (t->n_dims != 3 || t->ne[0] != e0 || t->ne[1] != e1 || t->ne[2] != (uint64_t)m->n_expert)
            return shape_error(c, t, e0, e1, 1);
        ts_status st = row_bytes(c, t, &rb);
        if (st) return st;
        if (!ts_mul_u64(rb, e1, &nb2) || !ts_mul_u64(nb2, (uint64_t)m->n_expert, &total) || total != t->nbytes)
            return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: %" PRIu64 " bytes, but %d experts of %" PRIu64 " bytes",
                           fname(c->f), name, t->nbytes, m->n_expert, nb2);
        li->type[p] = t->type;
        li->proj_bytes[p] = nb2;
        for (int32_t e = 0; e < m->n_expert; e++) {
            expert_slice *s = &m->slices[((uint64_t)l * (uint64_t)m->n_expert + (uint64_t)e) * EXPERT_PROJ_COUNT + (uint64_t)p];
            if ((st = abs_range(c, t, (uint64_t)e * nb2, nb2, &s->offset))) return st;
            s->nbytes = nb2;
            s->type = t->type;
        }
    }
    return TS_OK;
}

static ts_status bind_per_expert(const loc_ctx *c, int32_t block, int32_t l) {
    expert_map *m = c->m;
    expert_layer_info *li = &m->layers[l];
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
        uint64_t e0, e1;
        proj_ne(m, p, &e0, &e1);
        char first[96];
        snprintf(first, sizeof first, "blk.%d.ffn_%s.0.weight", block, proj_names[p]);
        for (int32_t e = 0; e < m->n_expert; e++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", block, proj_names[p], e);
            const gguf_tensor *t = gguf_find_tensor(c->f, name);
            if (!t)
                return ts_fail(TS_ERR_FORMAT, "%s: layer %d has per-expert tensors but lacks %s (%s.expert_count=%d)",
                               fname(c->f), block, name, c->arch, m->n_expert);
            if (t->n_dims != 2 || t->ne[0] != e0 || t->ne[1] != e1) return shape_error(c, t, e0, e1, 0);
            uint64_t rb, nb;
            ts_status st = row_bytes(c, t, &rb);
            if (st) return st;
            if (!ts_mul_u64(rb, e1, &nb) || nb != t->nbytes)
                return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: %" PRIu64 " bytes, expected %" PRIu64, fname(c->f), name,
                               t->nbytes, nb);
            if (e == 0) {
                li->type[p] = t->type;
                li->proj_bytes[p] = nb;
            } else if ((st = check_type_same(c, t, li->type[p], first))) {
                return st;
            }
            expert_slice *s = &m->slices[((uint64_t)l * (uint64_t)m->n_expert + (uint64_t)e) * EXPERT_PROJ_COUNT + (uint64_t)p];
            if ((st = abs_range(c, t, 0, nb, &s->offset))) return st;
            s->nbytes = nb;
            s->type = t->type;
        }
        char extra[96];
        snprintf(extra, sizeof extra, "blk.%d.ffn_%s.%d.weight", block, proj_names[p], m->n_expert);
        if (gguf_find_tensor(c->f, extra))
            return ts_fail(TS_ERR_FORMAT, "%s: tensor %s exists but %s.expert_count=%d", fname(c->f), extra, c->arch,
                           m->n_expert);
    }
    return TS_OK;
}

static expert_layout detect(const gguf_file *f, int32_t block, bool *both) {
    char name[96];
    bool st = false, pe = false;
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", block, proj_names[p]);
        if (gguf_find_tensor(f, name)) st = true;
        snprintf(name, sizeof name, "blk.%d.ffn_%s.0.weight", block, proj_names[p]);
        if (gguf_find_tensor(f, name)) pe = true;
    }
    *both = st && pe;
    return st ? EXPERT_LAYOUT_STACKED : pe ? EXPERT_LAYOUT_PER_EXPERT : EXPERT_LAYOUT_NONE;
}

static ts_status check_router(const loc_ctx *c, int32_t block) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", block);
    const gguf_tensor *t = gguf_find_tensor(c->f, name);
    if (!t) return TS_OK; /* binding the router is the model's business */
    if (t->n_dims != 2 || t->ne[0] != (uint64_t)c->m->n_embd || t->ne[1] != (uint64_t)c->m->n_expert) {
        char got[128];
        fmt_shape(got, sizeof got, t);
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s has shape %s, expected [%" PRId64 ", %d] (%s.expert_count=%d)",
                       fname(c->f), name, got, c->m->n_embd, c->m->n_expert, c->arch, c->m->n_expert);
    }
    return TS_OK;
}

ts_status expert_map_build(const gguf_file *f, const char *arch, expert_map *out) {
    memset(out, 0, sizeof *out);
    char archbuf[64];
    if (!arch) {
        gguf_str s;
        gguf_get_result r = gguf_get_str(f, "general.architecture", &s);
        if (r == GGUF_GET_MISSING) return ts_fail(TS_ERR_FORMAT, "%s: missing key general.architecture", fname(f));
        if (r != GGUF_GET_OK) return TS_ERR_FORMAT;
        if (s.len == 0 || s.len >= sizeof archbuf || memchr(s.ptr, 0, s.len))
            return ts_fail(TS_ERR_FORMAT, "%s: bad general.architecture", fname(f));
        memcpy(archbuf, s.ptr, s.len);
        archbuf[s.len] = 0;
        arch = archbuf;
    }
    expert_map *m = out;
    loc_ctx c = {f, arch, m};
    ts_status st;
    uint64_t n_block, n_expert, n_used, n_embd, n_ff = 0;
    bool have_count, have_ffx;
    if ((st = get_key(f, arch, "block_count", true, &n_block, NULL))) return st;
    if (n_block == 0 || n_block > LOC_MAX_BLOCKS)
        return ts_fail(TS_ERR_FORMAT, "%s: %s.block_count=%" PRIu64 " is out of range (1..%d)", fname(f), arch,
                       n_block, LOC_MAX_BLOCKS);
    m->n_block = (int32_t)n_block;
    if ((st = get_key(f, arch, "expert_count", false, &n_expert, &have_count))) return st;

    /* Which blocks carry experts, before trusting the counts. */
    int32_t n_moe = 0;
    for (int32_t b = 0; b < m->n_block; b++) {
        bool both;
        expert_layout lay = detect(f, b, &both);
        if (both)
            return ts_fail(TS_ERR_FORMAT, "%s: layer %d has both stacked (ffn_*_exps) and per-expert (ffn_*.E) tensors",
                           fname(f), b);
        if (lay != EXPERT_LAYOUT_NONE) n_moe++;
    }
    if (n_moe == 0) {
        if (n_expert > 0)
            return ts_fail(TS_ERR_FORMAT, "%s: %s.expert_count=%" PRIu64 " but no expert tensors (blk.N.ffn_gate_exps.weight or blk.N.ffn_gate.0.weight)",
                           fname(f), arch, n_expert);
        m->moe_of_block = ts_malloc((size_t)m->n_block * sizeof *m->moe_of_block);
        if (!m->moe_of_block) return TS_ERR_NOMEM;
        for (int32_t b = 0; b < m->n_block; b++) m->moe_of_block[b] = -1;
        return TS_OK;
    }
    if (!have_count) return ts_fail(TS_ERR_FORMAT, "%s: expert tensors present but key %s.expert_count is missing", fname(f), arch);
    if (n_expert == 0 || n_expert > LOC_MAX_EXPERTS)
        return ts_fail(TS_ERR_FORMAT, "%s: %s.expert_count=%" PRIu64 " is out of range (1..%d)", fname(f), arch,
                       n_expert, LOC_MAX_EXPERTS);
    if ((st = get_key(f, arch, "expert_used_count", true, &n_used, NULL))) return st;
    if (n_used == 0 || n_used > n_expert)
        return ts_fail(TS_ERR_FORMAT, "%s: %s.expert_used_count=%" PRIu64 " must be in 1..%s.expert_count=%" PRIu64,
                       fname(f), arch, n_used, arch, n_expert);
    if (n_used > CACHE_MAX_K)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: %s.expert_used_count=%" PRIu64 " exceeds the supported top-k of %d",
                       fname(f), arch, n_used, CACHE_MAX_K);
    if ((st = get_key(f, arch, "embedding_length", true, &n_embd, NULL))) return st;
    if ((st = get_key(f, arch, "expert_feed_forward_length", false, &n_ff, &have_ffx))) return st;
    if (!have_ffx && (st = get_key(f, arch, "feed_forward_length", true, &n_ff, NULL))) {
        ts_error_prefix("no %s.expert_feed_forward_length either", arch);
        return st;
    }
    if (n_embd == 0 || n_embd > (1u << 24) || n_ff == 0 || n_ff > (1u << 24))
        return ts_fail(TS_ERR_FORMAT, "%s: embedding length %" PRIu64 " or expert ffn length %" PRIu64 " out of range",
                       fname(f), n_embd, n_ff);
    m->n_expert = (int32_t)n_expert;
    m->n_expert_used = (int32_t)n_used;
    m->n_embd = (int64_t)n_embd;
    m->n_ff_exp = (int64_t)n_ff;
    m->n_moe = n_moe;

    m->moe_of_block = ts_malloc((size_t)m->n_block * sizeof *m->moe_of_block);
    m->layers = ts_calloc((size_t)n_moe, sizeof *m->layers);
    m->slices = ts_calloc((size_t)n_moe * (size_t)n_expert * EXPERT_PROJ_COUNT, sizeof *m->slices);
    if (!m->moe_of_block || !m->layers || !m->slices) {
        expert_map_free(m);
        return TS_ERR_NOMEM;
    }
    int32_t l = 0;
    for (int32_t b = 0; b < m->n_block; b++) {
        bool both;
        expert_layout lay = detect(f, b, &both);
        m->moe_of_block[b] = -1;
        if (lay == EXPERT_LAYOUT_NONE) continue;
        m->moe_of_block[b] = l;
        expert_layer_info *li = &m->layers[l];
        li->block = b;
        li->layout = lay;
        st = lay == EXPERT_LAYOUT_STACKED ? bind_stacked(&c, b, l) : bind_per_expert(&c, b, l);
        if (!st) st = check_router(&c, b);
        if (st) {
            expert_map_free(m);
            return st;
        }
        li->expert_bytes = li->proj_bytes[0] + li->proj_bytes[1] + li->proj_bytes[2];
        li->layer_bytes = li->expert_bytes * (uint64_t)m->n_expert;
        if (li->expert_bytes > m->max_expert_bytes) m->max_expert_bytes = li->expert_bytes;
        m->total_bytes += li->layer_bytes;
        l++;
    }
    return TS_OK;
}

void expert_map_free(expert_map *m) {
    if (!m) return;
    free(m->moe_of_block);
    free(m->layers);
    free(m->slices);
    memset(m, 0, sizeof *m);
}

uint64_t expert_map_expert_bytes(const expert_map *m, int32_t l, int32_t e) {
    uint64_t s = 0;
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) s += expert_map_slice(m, l, e, p)->nbytes;
    return s;
}
