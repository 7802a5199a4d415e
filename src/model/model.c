#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/quant.h"

/* ---- the family table ---- */

static const ts_family families[] = {
    {.name = "llama", .arch = TS_ARCH_LLAMA, .rope_mode = TS_ROPE_NORMAL, .act = TS_ACT_SILU},
    {.name = "qwen2", .arch = TS_ARCH_QWEN2, .rope_mode = TS_ROPE_NEOX, .act = TS_ACT_SILU, .qkv_bias = true},
    {.name = "qwen3", .arch = TS_ARCH_QWEN3, .rope_mode = TS_ROPE_NEOX, .act = TS_ACT_SILU, .qk_norm = true},
    {.name = "gemma3",
     .arch = TS_ARCH_GEMMA3,
     .rope_mode = TS_ROPE_NEOX,
     .act = TS_ACT_GELU_TANH,
     .qk_norm = true,
     .post_norms = true,
     .embd_scale = true,
     .swa_pattern = 6,
     .swa_rope_base = 10000.0f},
    {.name = "qwen2moe", .arch = TS_ARCH_QWEN2MOE, .rope_mode = TS_ROPE_NEOX, .act = TS_ACT_SILU, .qkv_bias = true, .moe = true,
     .moe_norm_topk = false, .shared_expert = true},
    {.name = "qwen3moe", .arch = TS_ARCH_QWEN3MOE, .rope_mode = TS_ROPE_NEOX, .act = TS_ACT_SILU, .qk_norm = true, .moe = true,
     .moe_norm_topk = true},
    {.name = "olmoe", .arch = TS_ARCH_OLMOE, .rope_mode = TS_ROPE_NEOX, .act = TS_ACT_SILU, .qk_norm_full = true, .moe = true,
     .moe_norm_topk = false},
};
#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))

const ts_family *ts_family_find(const char *arch) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (strcmp(families[i].name, arch) == 0) return &families[i];
    return NULL;
}

const char *ts_family_list(void) { return "llama, qwen2, qwen3, gemma3, qwen2moe, qwen3moe, olmoe (Mixtral: llama with experts)"; }

/* ---- metadata helpers ---- */

typedef struct {
    const gguf_file *f;
    const char *arch;
    char key[160];
} meta;

static const char *mkey(meta *m, const char *suffix) {
    snprintf(m->key, sizeof m->key, "%s.%s", m->arch, suffix);
    return m->key;
}

/* Sane maxima for the hyperparameters read from the file: far above every
 * released model (in brackets), low enough that no product of them formed
 * below can overflow 64 bits or an int, and that a crafted header is refused
 * here, naming its key, before it reaches an allocation. */
#define HP_MAX_EMBD (1 << 16)     /* embedding_length (16384, Llama 3.1 405B) */
#define HP_MAX_LAYER 4096         /* block_count (126) */
#define HP_MAX_FF (1 << 20)       /* feed_forward_length and expert widths (53248) */
#define HP_MAX_HEAD 1024          /* head_count, head_count_kv (128) */
#define HP_MAX_HEAD_DIM 4096      /* key_length = value_length (256, Gemma) */
#define HP_MAX_PROJ (1 << 20)     /* head_count * key_length (16384) */
#define HP_MAX_CTX (1 << 24)      /* context_length, sliding_window: the session's own cap */
#define HP_MAX_EXPERT 4096        /* expert_count (512) */
#define HP_MAX_VOCAB (1 << 24)    /* rows of token_embd (262144, Gemma 3) */

/* An integer key in [lo, hi], or one given as a per-layer array of equal
 * values. Missing: an error when required, else def (unchecked: the caller
 * checks what it derives). */
static ts_status get_int(meta *m, const char *suffix, bool required, int def, int lo, int hi, int *out) {
    const char *k = mkey(m, suffix);
    const gguf_kv *kv = gguf_get_kv(m->f, k);
    if (!kv) {
        if (required) return ts_fail(TS_ERR_FORMAT, "%s: missing key %s", m->f->path, k);
        *out = def;
        return TS_OK;
    }
    const gguf_value *v = &kv->val;
    int64_t x;
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        if (v->v.u64 > (uint64_t)hi)
            return ts_fail(TS_ERR_FORMAT, "%s: key %s = %llu is out of range [%d, %d]", m->f->path, k, (unsigned long long)v->v.u64, lo, hi);
        x = (int64_t)v->v.u64;
        break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        x = v->v.i64;
        break;
    case GGUF_VT_ARRAY: {
        const gguf_array *a = &v->v.arr;
        bool ints = a->type <= GGUF_VT_INT32 || a->type == GGUF_VT_UINT64 || a->type == GGUF_VT_INT64;
        if (!ints || a->n == 0 || !a->raw) return ts_fail(TS_ERR_FORMAT, "%s: key %s has the wrong type", m->f->path, k);
        x = gguf_arr_int(a, 0);
        for (uint64_t i = 1; i < a->n; i++)
            if (gguf_arr_int(a, i) != x)
                return ts_fail(TS_ERR_UNSUPPORTED, "%s: key %s differs between layers; per-layer shapes are not supported", m->f->path, k);
        if (a->type == GGUF_VT_UINT64 && x < 0)
            return ts_fail(TS_ERR_FORMAT, "%s: key %s = %llu is out of range [%d, %d]", m->f->path, k, (unsigned long long)x, lo, hi);
        break;
    }
    default:
        return ts_fail(TS_ERR_FORMAT, "%s: key %s has the wrong type (%s)", m->f->path, k, gguf_vtype_name(v->type));
    }
    if (x < lo || x > hi) return ts_fail(TS_ERR_FORMAT, "%s: key %s = %lld is out of range [%d, %d]", m->f->path, k, (long long)x, lo, hi);
    *out = (int)x;
    return TS_OK;
}

static ts_status get_float(meta *m, const char *suffix, float def, float *out) {
    const char *k = mkey(m, suffix);
    gguf_get_result r = gguf_get_f32(m->f, k, out);
    if (r == GGUF_GET_MISSING) {
        *out = def;
        return TS_OK;
    }
    if (r != GGUF_GET_OK) return ts_fail(TS_ERR_FORMAT, "%s: key %s has the wrong type", m->f->path, k);
    if (!isfinite(*out)) return ts_fail(TS_ERR_FORMAT, "%s: key %s is not finite", m->f->path, k);
    return TS_OK;
}

/* ---- tensor binding ---- */

static void supported_types(char *buf, size_t n) {
    buf[0] = 0;
    size_t used = 0;
    for (uint32_t t = 0; t < TS_TYPE_COUNT; t++) {
        if (!ts_type_supported(t)) continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", ts_type_name(t));
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
}

static void shape_str(const gguf_tensor *t, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (uint32_t d = 0; d < t->n_dims && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* The tensor `name`, checked to be ne = [n0, n1] (n1 = 1 for vectors). */
static ts_status find_shaped(const gguf_file *f, const char *name, int64_t n0, int64_t n1, bool required, const char *what,
                             const gguf_tensor **out) {
    *out = NULL;
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        if (required) return ts_fail(TS_ERR_FORMAT, "%s: missing tensor '%s'", f->path, name);
        return TS_OK;
    }
    bool ok = t->ne[0] == (uint64_t)n0 && t->ne[1] == (uint64_t)n1 && t->ne[2] == 1 && t->ne[3] == 1;
    if (!ok) {
        char got[96];
        shape_str(t, got, sizeof got);
        if (n1 == 1)
            return ts_fail(TS_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%lld] (%s)", f->path, name, got, (long long)n0, what);
        return ts_fail(TS_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%lld, %lld] (%s)", f->path, name, got, (long long)n0,
                       (long long)n1, what);
    }
    if (!ts_type_supported(t->type)) {
        char list[512];
        supported_types(list, sizeof list);
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which is not supported (supported: %s)", f->path, name,
                       ts_type_name(t->type), list);
    }
    *out = t;
    return TS_OK;
}

static ts_status bind_mat(const gguf_file *f, const char *name, int64_t n_in, int64_t n_out, bool required, const char *what,
                          ts_mat *m) {
    memset(m, 0, sizeof *m);
    const gguf_tensor *t;
    ts_status st = find_shaped(f, name, n_in, n_out, required, what, &t);
    if (st != TS_OK || !t) return st;
    m->data = t->data;
    m->type = t->type;
    m->n_in = n_in;
    m->n_out = n_out;
    m->row_bytes = ts_type_row_bytes(t->type, (uint64_t)n_in);
    if (!m->row_bytes || m->row_bytes * (uint64_t)n_out != t->nbytes)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor '%s': rows of %lld elements are not whole %s blocks", f->path, name, (long long)n_in,
                       ts_type_name(t->type));
    m->name = NULL; /* set by the caller from a stable string */
    return TS_OK;
}

float *ts_model_desc_alloc(ts_model_desc *md, size_t n) {
    float *c = ts_malloc(sizeof(float) * n);
    float **list = c ? ts_realloc(md->owned, sizeof(float *) * (size_t)(md->n_owned + 1)) : NULL;
    if (!c || !list) {
        free(c);
        return NULL;
    }
    md->owned = list;
    md->owned[md->n_owned++] = c;
    return c;
}

/* A vector as F32: in place when the file has F32, else an owned copy. */
static ts_status bind_vec(ts_model_desc *md, const gguf_file *f, const char *name, int64_t n, bool required, const char *what,
                          const float **out) {
    *out = NULL;
    const gguf_tensor *t;
    ts_status st = find_shaped(f, name, n, 1, required, what, &t);
    if (st != TS_OK || !t) return st;
    if (t->type == TS_TYPE_F32 && ((uintptr_t)t->data & 3) == 0) {
        *out = (const float *)t->data;
        return TS_OK;
    }
    if (ts_type_get(t->type)->block_elems != 1 && n % ts_type_get(t->type)->block_elems)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor '%s' is not whole %s blocks", f->path, name, ts_type_name(t->type));
    float *c = ts_model_desc_alloc(md, (size_t)n);
    if (!c) return TS_ERR_NOMEM;
    ts_dequant_row(t->type, t->data, c, n);
    *out = c;
    return TS_OK;
}

/* ---- RoPE ---- */

typedef struct {
    float base;
    float freq_scale;   /* 1/factor for linear and YaRN */
    bool yarn;
    float yarn_ext;     /* extrapolation mix, 1 for YaRN */
    float yarn_attn;    /* attention factor */
    float beta_fast, beta_slow;
    int n_ctx_orig;
    const float *factors; /* (n_rot/2) Llama 3 frequency divisors, or NULL */
} rope_cfg;

static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static ts_status rope_build(ts_rope *r, int n_rot, const rope_cfg *c) {
    int half = n_rot / 2;
    r->n_rot = n_rot;
    r->mscale = 1.0f;
    r->freq = ts_malloc(sizeof(float) * (size_t)(half ? half : 1));
    if (!r->freq) return TS_ERR_NOMEM;
    float lo = 0, hi = 0;
    if (c->yarn) {
        lo = floorf(yarn_corr_dim(n_rot, c->n_ctx_orig, c->beta_fast, c->base));
        hi = ceilf(yarn_corr_dim(n_rot, c->n_ctx_orig, c->beta_slow, c->base));
        if (lo < 0) lo = 0;
        if (hi > n_rot - 1) hi = (float)(n_rot - 1);
        r->mscale = c->yarn_attn * (1.0f + 0.1f * logf(1.0f / c->freq_scale));
    }
    for (int i = 0; i < half; i++) {
        float f = (float)pow((double)c->base, -2.0 * i / (double)n_rot);
        if (c->factors) f /= c->factors[i];
        if (c->yarn) {
            /* pairs turning fewer than beta_slow times over the original
             * context are interpolated, more than beta_fast extrapolated */
            float y = ((float)i - lo) / fmaxf(0.001f, hi - lo);
            float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
            float mix = ramp * c->yarn_ext;
            f = f * c->freq_scale * (1.0f - mix) + f * mix;
        } else {
            f *= c->freq_scale;
        }
        r->freq[i] = f;
    }
    return TS_OK;
}

/* Llama 3.1 frequency divisors from the rope.scaling.* keys, for files that
 * carry the keys but not the rope_freqs tensor. */
static void llama3_factors(float *out, int half, int n_rot, float base, float factor, float low, float high, int n_ctx_orig) {
    float low_wl = (float)n_ctx_orig / low, high_wl = (float)n_ctx_orig / high;
    for (int i = 0; i < half; i++) {
        float inv = (float)pow((double)base, -2.0 * i / (double)n_rot);
        float wl = 2.0f * (float)M_PI / inv;
        if (wl < high_wl) out[i] = 1.0f;
        else if (wl > low_wl) out[i] = factor;
        else {
            float smooth = ((float)n_ctx_orig / wl - low) / (high - low);
            out[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

/* ---- build ---- */

void ts_model_desc_free(ts_model_desc *m) {
    if (!m) return;
    if (m->has_moe || m->emap.slices) expert_map_free(&m->emap);
    free(m->layers);
    free(m->rope_global.freq);
    free(m->rope_swa.freq);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    memset(m, 0, sizeof *m);
}

uint64_t ts_model_desc_weight_bytes(const ts_model_desc *m) {
    uint64_t b = (uint64_t)m->output.row_bytes * (uint64_t)m->output.n_out;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const ts_layer *L = &m->layers[l];
        const ts_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down, &L->ffn_router,
                              &L->ffn_gate_shexp, &L->ffn_up_shexp, &L->ffn_down_shexp, &L->ffn_gate_inp_shexp};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) b += ms[i]->row_bytes * (uint64_t)ms[i]->n_out;
        /* the experts one token reads: top-k of this layer's */
        if (L->moe) b += (uint64_t)m->hp.n_expert_used * m->emap.layers[m->emap.moe_of_block[l]].expert_bytes;
    }
    return b;
}

#define TRY(x)                        \
    do {                              \
        ts_status st_ = (x);          \
        if (st_ != TS_OK) {           \
            ts_model_desc_free(md);   \
            return st_;               \
        }                             \
    } while (0)

static ts_status read_hparams(meta *m, const ts_family *fam, ts_hparams *hp, rope_cfg *rc, int *n_rot, bool *llama3_keys,
                              float l3[3]) {
    const gguf_file *f = m->f;
    ts_status st;
    if ((st = get_int(m, "embedding_length", true, 0, 1, HP_MAX_EMBD, &hp->n_embd))) return st;
    if ((st = get_int(m, "block_count", true, 0, 1, HP_MAX_LAYER, &hp->n_layer))) return st;
    /* every block binds several tensors: a count the file cannot hold is
     * refused before the per-layer tables are allocated */
    if ((uint64_t)hp->n_layer > f->n_tensors)
        return ts_fail(TS_ERR_FORMAT, "%s: key %s.block_count = %d, but the file has only %llu tensors", f->path, m->arch, hp->n_layer,
                       (unsigned long long)f->n_tensors);
    if ((st = get_int(m, "feed_forward_length", true, 0, 1, HP_MAX_FF, &hp->n_ff))) return st;
    if ((st = get_int(m, "attention.head_count", true, 0, 1, HP_MAX_HEAD, &hp->n_head))) return st;
    if ((st = get_int(m, "attention.head_count_kv", false, hp->n_head, 1, HP_MAX_HEAD, &hp->n_head_kv))) return st;
    if ((st = get_int(m, "context_length", true, 0, 1, HP_MAX_CTX, &hp->n_ctx_train))) return st;
    if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv)
        return ts_fail(TS_ERR_FORMAT, "%s: %s.attention.head_count %d is not a multiple of head_count_kv %d", f->path, m->arch, hp->n_head,
                       hp->n_head_kv);
    /* heads default to n_embd / n_head wide, as in llama.cpp */
    bool have_klen = gguf_find_key(f, mkey(m, "attention.key_length")) >= 0;
    if (!have_klen && hp->n_embd % hp->n_head)
        return ts_fail(TS_ERR_FORMAT, "%s: no %s.attention.key_length, and embedding_length %d is not a multiple of head_count %d", f->path,
                       m->arch, hp->n_embd, hp->n_head);
    int def_hd = hp->n_embd / hp->n_head, k_len, v_len;
    if ((st = get_int(m, "attention.key_length", false, def_hd, 1, HP_MAX_HEAD_DIM, &k_len))) return st;
    if ((st = get_int(m, "attention.value_length", false, k_len, 1, HP_MAX_HEAD_DIM, &v_len))) return st;
    if (k_len != v_len)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: key_length %d != value_length %d is not supported", f->path, k_len, v_len);
    if (k_len < 1 || k_len > HP_MAX_HEAD_DIM)
        return ts_fail(TS_ERR_FORMAT, "%s: head width %d (embedding_length / head_count) is out of range [1, %d]", f->path, k_len,
                       HP_MAX_HEAD_DIM);
    hp->head_dim = k_len;
    /* the projection widths the binder and the session size buffers by */
    uint64_t q_dim;
    if (!ts_mul_u64((uint64_t)hp->n_head, (uint64_t)k_len, &q_dim) || q_dim > HP_MAX_PROJ)
        return ts_fail(TS_ERR_FORMAT, "%s: head_count %d x key_length %d = %llu is over the supported %d", f->path, hp->n_head, k_len,
                       (unsigned long long)q_dim, HP_MAX_PROJ);
    if ((st = get_int(m, "rope.dimension_count", false, k_len, 1, HP_MAX_HEAD_DIM, n_rot))) return st;
    if (*n_rot > k_len || *n_rot % 2)
        return ts_fail(TS_ERR_FORMAT, "%s: %s.rope.dimension_count %d is invalid for heads of %d (even, at most the head width)", f->path,
                       m->arch, *n_rot, k_len);
    if ((st = get_float(m, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps))) return st;
    if (hp->norm_eps < 0) return ts_fail(TS_ERR_FORMAT, "%s: negative rms epsilon", f->path);

    /* RoPE */
    memset(rc, 0, sizeof *rc);
    if ((st = get_float(m, "rope.freq_base", 10000.0f, &rc->base))) return st;
    if (rc->base <= 1.0f) return ts_fail(TS_ERR_FORMAT, "%s: rope.freq_base %g is invalid", f->path, rc->base);
    rc->freq_scale = 1.0f;
    float factor = 0, lin = 0;
    if ((st = get_float(m, "rope.scaling.factor", 0.0f, &factor))) return st;
    if ((st = get_float(m, "rope.scale_linear", 0.0f, &lin))) return st;
    /* both divide the frequencies: a tiny one would make them infinite */
    if (factor > 1e6f || (factor > 0 && factor < 1e-6f))
        return ts_fail(TS_ERR_FORMAT, "%s: %s.rope.scaling.factor %g is out of range [1e-6, 1e6]", f->path, m->arch, factor);
    if (lin > 1e6f || (lin > 0 && lin < 1e-6f))
        return ts_fail(TS_ERR_FORMAT, "%s: %s.rope.scale_linear %g is out of range [1e-6, 1e6]", f->path, m->arch, lin);
    gguf_str stype = {0};
    gguf_get_result rt = gguf_get_str(f, mkey(m, "rope.scaling.type"), &stype);
    if (rt == GGUF_GET_WRONG_TYPE) return ts_fail(TS_ERR_FORMAT, "%s: key %s has the wrong type", f->path, m->key);
    int orig;
    if ((st = get_int(m, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, HP_MAX_CTX, &orig))) return st;
    rc->n_ctx_orig = orig;
    if (rt == GGUF_GET_MISSING || gguf_str_eq(stype, "none")) {
        if (lin > 0 && lin != 1.0f) rc->freq_scale = 1.0f / lin;
    } else if (gguf_str_eq(stype, "linear")) {
        float fct = factor > 0 ? factor : lin;
        if (fct > 0) rc->freq_scale = 1.0f / fct;
    } else if (gguf_str_eq(stype, "yarn")) {
        if (factor <= 0) return ts_fail(TS_ERR_FORMAT, "%s: yarn scaling without rope.scaling.factor", f->path);
        rc->yarn = true;
        rc->freq_scale = 1.0f / factor;
        if ((st = get_float(m, "rope.scaling.yarn_ext_factor", 1.0f, &rc->yarn_ext))) return st;
        if (rc->yarn_ext < 0) rc->yarn_ext = 1.0f;
        float af1, af2;
        if ((st = get_float(m, "rope.scaling.attn_factor", 1.0f, &af1))) return st;
        if ((st = get_float(m, "rope.scaling.yarn_attn_factor", 1.0f, &af2))) return st;
        rc->yarn_attn = af1 * af2;
        if ((st = get_float(m, "rope.scaling.yarn_beta_fast", 32.0f, &rc->beta_fast))) return st;
        if ((st = get_float(m, "rope.scaling.yarn_beta_slow", 1.0f, &rc->beta_slow))) return st;
        if (rc->beta_fast <= 0 || rc->beta_slow <= 0)
            return ts_fail(TS_ERR_FORMAT, "%s: yarn_beta_fast %g and yarn_beta_slow %g must be positive", f->path, rc->beta_fast,
                           rc->beta_slow);
    } else if (gguf_str_eq(stype, "llama3")) {
        if (factor <= 0) return ts_fail(TS_ERR_FORMAT, "%s: llama3 scaling without rope.scaling.factor", f->path);
        *llama3_keys = true;
        l3[0] = factor;
        if ((st = get_float(m, "rope.scaling.low_freq_factor", 1.0f, &l3[1]))) return st;
        if ((st = get_float(m, "rope.scaling.high_freq_factor", 4.0f, &l3[2]))) return st;
        if (l3[1] <= 0 || l3[2] <= l3[1])
            return ts_fail(TS_ERR_FORMAT, "%s: llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor (%g, %g)", f->path, l3[1],
                           l3[2]);
    } else {
        char *s = gguf_strdup(stype);
        ts_fail(TS_ERR_UNSUPPORTED, "%s: rope scaling type '%s' is not supported (supported: none, linear, yarn, llama3)", f->path,
                s ? s : "?");
        free(s);
        return TS_ERR_UNSUPPORTED;
    }

    /* mixture of experts: the MoE families, and a dense family with experts
     * (Mixtral is "llama" with expert_count > 0, top-k renormalised) */
    if ((st = get_int(m, "expert_count", false, 0, 0, HP_MAX_EXPERT, &hp->n_expert))) return st;
    if (fam->moe && hp->n_expert <= 0) return ts_fail(TS_ERR_FORMAT, "%s: missing key %s.expert_count", f->path, m->arch);
    if (hp->n_expert > 0) {
        if ((st = get_int(m, "expert_used_count", true, 0, 1, HP_MAX_EXPERT, &hp->n_expert_used))) return st;
        if (hp->n_expert_used > hp->n_expert)
            return ts_fail(TS_ERR_FORMAT, "%s: %s.expert_used_count = %d is not in [1, expert_count = %d]", f->path, m->arch,
                           hp->n_expert_used, hp->n_expert);
        if ((st = get_int(m, "expert_feed_forward_length", false, hp->n_ff, 1, HP_MAX_FF, &hp->n_ff_exp))) return st;
        if ((st = get_int(m, "expert_shared_feed_forward_length", false, 0, 0, HP_MAX_FF, &hp->n_ff_shexp))) return st;
        hp->expert_norm = fam->moe ? fam->moe_norm_topk : true;
        bool b;
        gguf_get_result r = gguf_get_bool(f, mkey(m, "expert_weights_norm"), &b);
        if (r == GGUF_GET_OK) hp->expert_norm = b;
        else if (r == GGUF_GET_WRONG_TYPE) return ts_fail(TS_ERR_FORMAT, "%s: key %s has the wrong type", f->path, m->key);
        uint32_t gating;
        r = gguf_get_u32(f, mkey(m, "expert_gating_func"), &gating);
        if (r == GGUF_GET_OK && gating != 1) /* llama.cpp: 1 = softmax, 2 = sigmoid */
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: %s = %u: only softmax expert gating is supported", f->path, m->key, gating);
    }

    /* sliding window */
    hp->n_swa = 0;
    if (fam->swa_pattern) {
        if ((st = get_int(m, "attention.sliding_window", false, 0, 0, HP_MAX_CTX, &hp->n_swa))) return st;
    }

    /* attention scale */
    float ascale = 0;
    if ((st = get_float(m, "attention.scale", 0.0f, &ascale))) return st;
    if (ascale > 0) hp->attn_scale = ascale;
    else if (fam->arch == TS_ARCH_GEMMA3 && hp->n_layer == 62)
        /* Gemma 3 27B: query_pre_attn_scalar = n_embd / n_head, not head_dim */
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    else hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);

    hp->embd_scale = fam->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if ((st = get_float(m, "final_logit_softcapping", 0.0f, &hp->logit_softcap))) return st;
    if (hp->logit_softcap < 0) hp->logit_softcap = 0;
    return TS_OK;
}

ts_status ts_model_desc_build(const gguf_file *f, ts_model_desc *md) {
    memset(md, 0, sizeof *md);
    gguf_str sarch;
    gguf_get_result ra = gguf_get_str(f, "general.architecture", &sarch);
    if (ra != GGUF_GET_OK) return ts_fail(TS_ERR_FORMAT, "%s: missing key general.architecture", f->path);
    char arch[64];
    size_t al = sarch.len < sizeof arch - 1 ? (size_t)sarch.len : sizeof arch - 1;
    memcpy(arch, sarch.ptr, al);
    arch[al] = 0;
    const ts_family *fam = ts_family_find(arch);
    if (!fam || sarch.len >= sizeof arch)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)", f->path, arch, ts_family_list());
    md->fam = fam;

    meta m = {.f = f, .arch = fam->name};
    ts_hparams *hp = &md->hp;
    rope_cfg rc;
    int n_rot = 0;
    bool l3keys = false;
    float l3[3] = {0};
    TRY(read_hparams(&m, fam, hp, &rc, &n_rot, &l3keys, l3));

    const int E = hp->n_embd, HD = hp->head_dim, QD = hp->n_head * HD, KVD = hp->n_head_kv * HD, FF = hp->n_ff;

    /* token embeddings fix the vocabulary size */
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) TRY(ts_fail(TS_ERR_FORMAT, "%s: missing tensor 'token_embd.weight'", f->path));
    if (te->ne[1] == 0 || te->ne[1] > HP_MAX_VOCAB)
        TRY(ts_fail(TS_ERR_FORMAT, "%s: token_embd.weight has %llu rows, a vocabulary size out of range [1, %d]", f->path,
                    (unsigned long long)te->ne[1], HP_MAX_VOCAB));
    hp->n_vocab = (int)te->ne[1];
    TRY(bind_mat(f, "token_embd.weight", E, hp->n_vocab, true, "n_embd, n_vocab", &md->tok_embd));
    md->tok_embd.name = "token_embd.weight";
    TRY(bind_vec(md, f, "output_norm.weight", E, true, "n_embd", &md->out_norm));
    TRY(bind_mat(f, "output.weight", E, hp->n_vocab, false, "n_embd, n_vocab", &md->output));
    if (!md->output.data) {
        md->output = md->tok_embd;
        md->tied = true;
    }
    md->output.name = "output.weight";

    /* RoPE: frequency factors from the tensor (Llama 3.1 files) or the keys */
    const float *factors = NULL;
    float *l3f = NULL;
    TRY(bind_vec(md, f, "rope_freqs.weight", n_rot / 2, false, "n_rot/2", &factors));
    if (!factors && l3keys) {
        l3f = ts_malloc(sizeof(float) * (size_t)(n_rot / 2));
        if (!l3f) TRY(TS_ERR_NOMEM);
        llama3_factors(l3f, n_rot / 2, n_rot, rc.base, l3[0], l3[1], l3[2], rc.n_ctx_orig);
        factors = l3f;
    }
    rc.factors = factors;
    ts_status rst = rope_build(&md->rope_global, n_rot, &rc);
    free(l3f);
    TRY(rst);
    if (fam->swa_pattern && hp->n_swa > 0) {
        rope_cfg sc = {.base = fam->swa_rope_base, .freq_scale = 1.0f};
        TRY(rope_build(&md->rope_swa, n_rot, &sc));
    }

    md->layers = ts_calloc((size_t)hp->n_layer, sizeof(ts_layer));
    if (!md->layers) TRY(TS_ERR_NOMEM);
    if (hp->n_expert > 0) {
        /* the locator checks every expert tensor's shape against the metadata */
        TRY(expert_map_build(f, fam->name, &md->emap));
        md->has_moe = md->emap.n_moe > 0;
        if (!md->has_moe) TRY(ts_fail(TS_ERR_FORMAT, "%s: %s.expert_count = %d but no layer has expert tensors", f->path, fam->name, hp->n_expert));
        if (md->emap.n_ff_exp != hp->n_ff_exp)
            TRY(ts_fail(TS_ERR_FORMAT, "%s: expert tensors are %lld wide, metadata says %d", f->path, (long long)md->emap.n_ff_exp, hp->n_ff_exp));
    }
    char name[96];
#define TN(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
    for (int l = 0; l < hp->n_layer; l++) {
        ts_layer *L = &md->layers[l];
        TRY(bind_vec(md, f, TN("attn_norm.weight"), E, true, "n_embd", &L->attn_norm));
        TRY(bind_mat(f, TN("attn_q.weight"), E, QD, true, "n_embd, n_head*head_dim", &L->wq));
        TRY(bind_mat(f, TN("attn_k.weight"), E, KVD, true, "n_embd, n_head_kv*head_dim", &L->wk));
        TRY(bind_mat(f, TN("attn_v.weight"), E, KVD, true, "n_embd, n_head_kv*head_dim", &L->wv));
        TRY(bind_mat(f, TN("attn_output.weight"), QD, E, true, "n_head*head_dim, n_embd", &L->wo));
        if (fam->qkv_bias) {
            TRY(bind_vec(md, f, TN("attn_q.bias"), QD, true, "n_head*head_dim", &L->wq.bias));
            TRY(bind_vec(md, f, TN("attn_k.bias"), KVD, true, "n_head_kv*head_dim", &L->wk.bias));
            TRY(bind_vec(md, f, TN("attn_v.bias"), KVD, true, "n_head_kv*head_dim", &L->wv.bias));
        }
        if (fam->qk_norm) {
            TRY(bind_vec(md, f, TN("attn_q_norm.weight"), HD, true, "head_dim", &L->q_norm));
            TRY(bind_vec(md, f, TN("attn_k_norm.weight"), HD, true, "head_dim", &L->k_norm));
        }
        if (fam->qk_norm_full) {
            TRY(bind_vec(md, f, TN("attn_q_norm.weight"), QD, true, "n_head*head_dim", &L->q_norm));
            TRY(bind_vec(md, f, TN("attn_k_norm.weight"), KVD, true, "n_head_kv*head_dim", &L->k_norm));
        }
        if (fam->post_norms) {
            TRY(bind_vec(md, f, TN("post_attention_norm.weight"), E, true, "n_embd", &L->attn_post_norm));
            TRY(bind_vec(md, f, TN("post_ffw_norm.weight"), E, true, "n_embd", &L->ffn_post_norm));
        }
        TRY(bind_vec(md, f, TN("ffn_norm.weight"), E, true, "n_embd", &L->ffn_norm));
        L->moe = md->has_moe && md->emap.moe_of_block[l] >= 0;
        if (L->moe) {
            TRY(bind_mat(f, TN("ffn_gate_inp.weight"), E, hp->n_expert, true, "n_embd, n_expert", &L->ffn_router));
            L->ffn_router.name = "ffn_gate_inp";
            if (fam->shared_expert && hp->n_ff_shexp > 0) {
                const int SF = hp->n_ff_shexp;
                TRY(bind_mat(f, TN("ffn_gate_shexp.weight"), E, SF, true, "n_embd, n_ff_shexp", &L->ffn_gate_shexp));
                TRY(bind_mat(f, TN("ffn_up_shexp.weight"), E, SF, true, "n_embd, n_ff_shexp", &L->ffn_up_shexp));
                TRY(bind_mat(f, TN("ffn_down_shexp.weight"), SF, E, true, "n_ff_shexp, n_embd", &L->ffn_down_shexp));
                TRY(bind_mat(f, TN("ffn_gate_inp_shexp.weight"), E, 1, true, "n_embd", &L->ffn_gate_inp_shexp));
                L->ffn_gate_shexp.name = "ffn_gate_shexp";
                L->ffn_up_shexp.name = "ffn_up_shexp";
                L->ffn_down_shexp.name = "ffn_down_shexp";
                L->ffn_gate_inp_shexp.name = "ffn_gate_inp_shexp";
            }
        } else {
            TRY(bind_mat(f, TN("ffn_gate.weight"), E, FF, true, "n_embd, n_ff", &L->ffn_gate));
            TRY(bind_mat(f, TN("ffn_up.weight"), E, FF, true, "n_embd, n_ff", &L->ffn_up));
            TRY(bind_mat(f, TN("ffn_down.weight"), FF, E, true, "n_ff, n_embd", &L->ffn_down));
        }
        L->wq.name = "attn_q";
        L->wk.name = "attn_k";
        L->wv.name = "attn_v";
        L->wo.name = "attn_output";
        L->ffn_gate.name = "ffn_gate";
        L->ffn_up.name = "ffn_up";
        L->ffn_down.name = "ffn_down";
        L->swa = fam->swa_pattern && hp->n_swa > 0 && (l % fam->swa_pattern) < fam->swa_pattern - 1;
        L->rope = L->swa ? &md->rope_swa : &md->rope_global;
    }
#undef TN
    return TS_OK;
}
