/* libFuzzer harness for the model loader and one forward pass: whatever the
 * file says, loading either refuses it with a message or gives a model that
 * evaluates a token without touching memory it does not own.
 *
 * Two input modes, chosen by the low bit of the first byte:
 *
 *   structured (even): the bytes pick a small model (family, widths, heads,
 *     layers, experts, weight type, RoPE scaling, weight bytes) that the GGUF
 *     writer builds, then a list of edits: replace or delete any
 *     hyperparameter key (with boundary values: 0, -1, 2^31, 2^32-1, ...),
 *     drop a tensor, or change one's shape or type. Every input gets past the
 *     GGUF parser, so the mutations land on the loader's checks and the
 *     forward pass, not on the header syntax (fuzz_gguf covers that).
 *   raw (odd): the rest of the input is a GGUF file as is (seeds in
 *     fuzz/corpus/model/, written with TS_FUZZ_WRITE_SEEDS=DIR).
 *
 * Tensors stay tiny (widths <= 256, <= 3 layers, <= 64 vocabulary rows), so
 * one execution is a few hundred microseconds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward/engine.h"
#include "gguf/gguf.h"
#include "tensor/quant.h"
#include "tensor/types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the engine: every engine call of the harness is here ---- */

/* Loads f (taking it), evaluates ids (prefill), then one more token, reading
 * every logit. Failures are fine; crashes and sanitizer reports are not. */
static void run_engine(gguf_file *f, const int32_t *ids, int n, int residency) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = residency ? TS_EXPERTS_RESIDENT : TS_EXPERTS_MAPPED;
    ts_model *m = NULL;
    static int verbose = -1; /* TS_FUZZ_VERBOSE=1: say how far each input got */
    if (verbose < 0) verbose = getenv("TS_FUZZ_VERBOSE") != NULL;
    if (ts_model_load_gguf(f, &mo, &m) != TS_OK) {
        if (verbose) fprintf(stderr, "load: %s\n", ts_last_error());
        return;
    }
    ts_model_info info;
    ts_model_get_info(m, &info);
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = 8;
    so.n_threads = 1;
    so.n_batch = 4;
    ts_session *s = NULL;
    if (ts_session_new(m, &so, &s) == TS_OK) {
        float *logits = NULL;
        ts_status est = ts_session_eval(s, ids, n, &logits);
        if (verbose) fprintf(stderr, "eval of %d tokens (first %d): %s\n", n, ids[0], est ? ts_last_error() : "ok");
        if (est == TS_OK) {
            volatile float sink = 0;
            int32_t V = ts_session_n_vocab(s);
            for (int32_t i = 0; i < V; i++) sink += logits[i];
            int32_t next = ids[0];
            if (ts_session_eval(s, &next, 1, &logits) == TS_OK)
                for (int32_t i = 0; i < V; i++) sink += logits[i];
            (void)sink;
        }
        ts_session_free(s);
    } else if (verbose) {
        fprintf(stderr, "session: %s\n", ts_last_error());
    }
    ts_model_free(m);
}

/* ---- reading the input ---- */

typedef struct {
    const uint8_t *p;
    size_t n, at;
} rd;

static uint8_t u8(rd *r) { return r->at < r->n ? r->p[r->at++] : 0; }
static uint32_t u24(rd *r) {
    uint32_t a = u8(r), b = u8(r), c = u8(r);
    return a | b << 8 | c << 16;
}
static int pick(rd *r, int n) { return u8(r) % n; }

/* boundary values for replaced integer keys */
static const int64_t interesting[] = {0, 1, 2, -1, -2, 3, 7, 8, 16, 63, 64, 255, 256, 4095, 4096, 4097, 65535, 65536,
                                      (1 << 20), (1 << 20) + 1, (1 << 24), (1 << 24) + 1, (1 << 30), INT32_MAX,
                                      (int64_t)INT32_MAX + 1, UINT32_MAX, (int64_t)1 << 40, INT64_MAX, INT64_MIN};
#define N_INTERESTING ((int)(sizeof interesting / sizeof interesting[0]))

static int64_t int_value(rd *r) {
    uint8_t how = u8(r);
    if (how & 1) return interesting[(how >> 1) % N_INTERESTING];
    return (int64_t)u24(r) - (how & 2 ? 0x800000 : 0);
}

static float float_value(rd *r) {
    static const float fl[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-6f, 1e-30f, 1e30f, 1e6f, 10000.0f, 1e-45f, INFINITY, -INFINITY, NAN};
    uint8_t how = u8(r);
    if (how & 1) return fl[(how >> 1) % (sizeof fl / sizeof fl[0])];
    return ((float)u24(r) - 8388608.0f) / 1024.0f;
}

/* ---- the model description picked by the input ---- */

typedef struct {
    const char *arch;
    bool moe, qkv_bias, qk_norm, qk_norm_full, post_norms, shexp, swa;
} fam;

static const fam fams[] = {
    {"llama", 0, 0, 0, 0, 0, 0, 0},   {"qwen2", 0, 1, 0, 0, 0, 0, 0},    {"qwen3", 0, 0, 1, 0, 0, 0, 0},
    {"gemma3", 0, 0, 1, 0, 1, 0, 1},  {"qwen2moe", 1, 1, 0, 0, 0, 1, 0}, {"qwen3moe", 1, 0, 1, 0, 0, 0, 0},
    {"olmoe", 1, 0, 0, 1, 0, 0, 0},   {"llama", 1, 0, 0, 0, 0, 0, 0}, /* Mixtral */
};

static const uint32_t wtypes[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q8_0, TS_TYPE_Q4_0,
                                  TS_TYPE_Q4_1, TS_TYPE_Q5_0, TS_TYPE_Q5_1, TS_TYPE_Q2_K, TS_TYPE_Q3_K,
                                  TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K, TS_TYPE_IQ4_NL, TS_TYPE_MXFP4};

typedef struct {
    const fam *fm;
    uint32_t wtype;
    int n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_layer, n_vocab, n_ctx;
    int n_expert, n_used, n_ff_exp, n_ff_shexp, swa;
    bool tied, per_expert, raw_weights;
    int rope_kind; /* 0 none, 1 linear, 2 yarn, 3 llama3 */
} cfg;

static void pick_cfg(rd *r, cfg *c) {
    static const int widths[] = {8, 16, 32, 64, 256};
    static const int hds[] = {2, 4, 8, 16, 32, 64};
    c->fm = &fams[pick(r, (int)(sizeof fams / sizeof fams[0]))];
    c->wtype = wtypes[pick(r, (int)(sizeof wtypes / sizeof wtypes[0]))];
    c->n_embd = widths[pick(r, 5)];
    c->n_ff = widths[pick(r, 5)];
    c->n_head = 1 + pick(r, 4);
    int div = 1 + pick(r, c->n_head);
    while (c->n_head % div) div--;
    c->n_head_kv = c->n_head / div;
    c->head_dim = hds[pick(r, 6)];
    c->n_rot = c->head_dim - 2 * pick(r, c->head_dim / 2);
    c->n_layer = 1 + pick(r, 3);
    c->n_vocab = 1 + pick(r, 64);
    c->n_ctx = 1 + (int)(u24(r) % 8192);
    c->n_expert = c->fm->moe ? 1 + pick(r, 8) : 0;
    c->n_used = c->fm->moe ? 1 + pick(r, c->n_expert) : 0;
    c->n_ff_exp = widths[pick(r, 4)];
    c->n_ff_shexp = c->fm->shexp ? widths[pick(r, 4)] : 0;
    c->swa = c->fm->swa ? pick(r, 9) : 0;
    uint8_t b = u8(r);
    c->tied = b & 1;
    c->per_expert = b & 2;
    c->raw_weights = b & 4;
    c->rope_kind = (b >> 3) & 3;
}

/* ---- edits ---- */

enum { ED_KEY, ED_DEL, ED_DROP_TENSOR, ED_RESHAPE, ED_RETYPE, ED_COUNT };

static const char *key_suffixes[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length", "attention.layer_norm_rms_epsilon",
    "rope.dimension_count", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor", "rope.scale_linear",
    "rope.scaling.original_context_length", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow",
    "rope.scaling.low_freq_factor", "rope.scaling.high_freq_factor", "expert_count", "expert_used_count",
    "expert_feed_forward_length", "expert_shared_feed_forward_length", "expert_weights_norm", "expert_gating_func",
    "attention.sliding_window", "attention.scale", "final_logit_softcapping", "vocab_size",
};
#define N_KEYS ((int)(sizeof key_suffixes / sizeof key_suffixes[0]))

typedef struct {
    int op;
    int key;         /* ED_KEY/ED_DEL: index into key_suffixes, N_KEYS = general.architecture */
    int vtype;       /* ED_KEY: 0 u32, 1 i32, 2 u64, 3 i64, 4 f32, 5 string, 6 bool, 7 i32 array */
    int64_t i;
    float f;
    int tensor;      /* ordinal of the tensor written */
    int dim;
    uint32_t type;
} edit;

#define MAX_EDITS 8

typedef struct {
    gguf_writer *w;
    const cfg *c;
    const edit *ed;
    int n_ed;
    int n_written;     /* tensors so far (the ordinal edits refer to) */
    uint64_t rng;
    const uint8_t *raw; /* input bytes to draw raw weights from */
    size_t n_raw;
} builder;

static bool key_edited(const builder *b, int key) {
    for (int i = 0; i < b->n_ed; i++)
        if ((b->ed[i].op == ED_KEY || b->ed[i].op == ED_DEL) && b->ed[i].key == key) return true;
    return false;
}

static void wkey_u32(builder *b, int key, uint32_t v) {
    if (key_edited(b, key)) return;
    char k[128];
    snprintf(k, sizeof k, "%s.%s", b->c->fm->arch, key_suffixes[key]);
    gguf_w_u32(b->w, k, v);
}
static void wkey_f32(builder *b, int key, float v) {
    if (key_edited(b, key)) return;
    char k[128];
    snprintf(k, sizeof k, "%s.%s", b->c->fm->arch, key_suffixes[key]);
    gguf_w_f32(b->w, k, v);
}
static void wkey_str(builder *b, int key, const char *v) {
    if (key_edited(b, key)) return;
    char k[128];
    snprintf(k, sizeof k, "%s.%s", b->c->fm->arch, key_suffixes[key]);
    gguf_w_str(b->w, k, v);
}

static float frand(builder *b) {
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    return (float)((double)(b->rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Weight bytes come from one pool per type, filled once with quantized
 * random values (near 1 for F32 vectors, the norms): a tensor is whole blocks
 * copied from the pool, so building a model costs copies, not quantization
 * (which was three quarters of the time per input). */
#define POOL_BYTES (1u << 16)
static uint8_t *g_pool[TS_TYPE_COUNT];
static uint8_t *g_pool_vec;
static uint64_t g_pool_len[TS_TYPE_COUNT];

static const uint8_t *pool_of(builder *b, uint32_t type, bool vector, uint64_t *len) {
    if (vector && type == TS_TYPE_F32) {
        if (!g_pool_vec) {
            float *v = malloc(POOL_BYTES);
            if (!v) return NULL;
            for (uint32_t i = 0; i < POOL_BYTES / 4; i++) v[i] = 1.0f + 0.2f * frand(b);
            g_pool_vec = (uint8_t *)v;
        }
        *len = POOL_BYTES;
        return g_pool_vec;
    }
    if (!g_pool[type]) {
        const ts_type_traits *tt = ts_type_get(type);
        uint64_t blocks = POOL_BYTES / tt->block_bytes, n = blocks * tt->block_elems;
        float *x = malloc(sizeof(float) * n);
        uint8_t *q = malloc(blocks * tt->block_bytes);
        if (!x || !q) {
            free(x);
            free(q);
            return NULL;
        }
        for (uint64_t i = 0; i < n; i++) x[i] = frand(b);
        ts_quantize_row_ref(type, x, q, (int64_t)n);
        free(x);
        g_pool[type] = q;
        g_pool_len[type] = blocks * tt->block_bytes;
    }
    *len = g_pool_len[type];
    return g_pool[type];
}

/* One tensor of ne (n_dims), in type unless an edit says otherwise; weight
 * bytes are valid blocks from the pool, or raw bytes from the input (NaN and
 * infinite scales included). */
static void put_tensor(builder *b, const char *name, uint32_t type, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2) {
    int ord = b->n_written++;
    bool vector = n_dims == 1;
    uint64_t ne[3] = {ne0, ne1, ne2};
    for (int i = 0; i < b->n_ed; i++) {
        const edit *e = &b->ed[i];
        if (e->tensor != ord) continue;
        if (e->op == ED_DROP_TENSOR) return;
        if (e->op == ED_RESHAPE) {
            int d = e->dim % 3;
            if ((uint32_t)d >= n_dims) n_dims = (uint32_t)d + 1;
            ne[d] = (uint64_t)(e->i & 0x3ff);
        }
        if (e->op == ED_RETYPE) type = e->type;
    }
    const ts_type_traits *tt = ts_type_get(type);
    if (!tt || !tt->name) return;
    if (ne[0] % tt->block_elems || (!ts_type_supported(type) && type != TS_TYPE_F32)) type = TS_TYPE_F32;
    uint64_t rows = ne[1] * (n_dims > 2 ? ne[2] : 1), rb = ts_type_row_bytes(type, ne[0]), nb;
    if (!rb || !ts_mul_u64(rb, rows, &nb) || nb > (1u << 22)) return;
    uint8_t *data = malloc(nb ? nb : 1);
    if (!data) return;
    /* the input repeated, or the pool from a block-aligned start (plen is
     * whole blocks); memcpy, not a byte loop: the harness is instrumented */
    uint64_t plen = 0, off = 0, at = 0;
    const uint8_t *pool;
    if (b->c->raw_weights && b->n_raw) {
        pool = b->raw;
        plen = b->n_raw;
        off = (uint64_t)ord % plen;
    } else {
        pool = pool_of(b, type, vector, &plen);
        if (pool) off = ((uint64_t)ord * 7 * ts_type_get(type)->block_bytes) % plen;
    }
    if (!pool) {
        free(data);
        return;
    }
    while (at < nb) {
        uint64_t k = nb - at < plen - off ? nb - at : plen - off;
        memcpy(data + at, pool + off, k);
        at += k;
        off = 0;
    }
    gguf_w_tensor(b->w, name, type, n_dims, ne, data, nb);
    free(data);
}

static void mat(builder *b, const char *name, int n_in, int n_out) {
    put_tensor(b, name, b->c->wtype, 2, (uint64_t)n_in, (uint64_t)n_out, 1);
}
static void vec(builder *b, const char *name, int n) { put_tensor(b, name, TS_TYPE_F32, 1, (uint64_t)n, 1, 1); }

static uint8_t *build_model(const cfg *c, const edit *ed, int n_ed, const uint8_t *raw, size_t n_raw, uint64_t *size) {
    builder b = {.w = gguf_writer_new(3, 32), .c = c, .ed = ed, .n_ed = n_ed, .rng = 0x9E3779B97F4A7C15ull, .raw = raw, .n_raw = n_raw};
    if (!b.w) return NULL;
    if (!key_edited(&b, N_KEYS)) gguf_w_str(b.w, "general.architecture", c->fm->arch);
    wkey_u32(&b, 0, (uint32_t)c->n_ctx);
    wkey_u32(&b, 1, (uint32_t)c->n_embd);
    wkey_u32(&b, 2, (uint32_t)c->n_layer);
    wkey_u32(&b, 3, (uint32_t)c->n_ff);
    wkey_u32(&b, 4, (uint32_t)c->n_head);
    wkey_u32(&b, 5, (uint32_t)c->n_head_kv);
    wkey_u32(&b, 6, (uint32_t)c->head_dim);
    wkey_u32(&b, 7, (uint32_t)c->head_dim);
    wkey_f32(&b, 8, 1e-5f);
    wkey_u32(&b, 9, (uint32_t)c->n_rot);
    wkey_f32(&b, 10, 10000.0f);
    static const char *rope_types[] = {"none", "linear", "yarn", "llama3"};
    if (c->rope_kind) {
        wkey_str(&b, 11, rope_types[c->rope_kind]);
        wkey_f32(&b, 12, 4.0f);
        wkey_u32(&b, 14, (uint32_t)(c->n_ctx / 4 + 1));
    }
    if (c->fm->moe) {
        wkey_u32(&b, 19, (uint32_t)c->n_expert);
        wkey_u32(&b, 20, (uint32_t)c->n_used);
        wkey_u32(&b, 21, (uint32_t)c->n_ff_exp);
        if (c->n_ff_shexp) wkey_u32(&b, 22, (uint32_t)c->n_ff_shexp);
    }
    if (c->swa) wkey_u32(&b, 25, (uint32_t)c->swa);
    /* the edited keys, with the fuzzer's types and values */
    for (int i = 0; i < n_ed; i++) {
        const edit *e = &ed[i];
        if (e->op != ED_KEY) continue;
        char k[128];
        if (e->key == N_KEYS) snprintf(k, sizeof k, "general.architecture");
        else snprintf(k, sizeof k, "%s.%s", c->fm->arch, key_suffixes[e->key]);
        switch (e->vtype) {
        case 0: gguf_w_u32(b.w, k, (uint32_t)e->i); break;
        case 1: gguf_w_i32(b.w, k, (int32_t)e->i); break;
        case 2: gguf_w_u64(b.w, k, (uint64_t)e->i); break;
        case 3: gguf_w_i64(b.w, k, e->i); break;
        case 4: gguf_w_f32(b.w, k, e->f); break;
        case 5: gguf_w_str(b.w, k, e->key == N_KEYS ? fams[(uint64_t)e->i % 8].arch : rope_types[(uint64_t)e->i % 4]); break;
        case 6: gguf_w_bool(b.w, k, e->i & 1); break;
        default: {
            int32_t a[3] = {(int32_t)e->i, (int32_t)e->i, (int32_t)(e->i >> 8)};
            gguf_w_arr(b.w, k, GGUF_VT_INT32, a, 1 + (uint64_t)(e->i & 0xff) % 3);
        }
        }
    }

    const int E = c->n_embd, QD = c->n_head * c->head_dim, KVD = c->n_head_kv * c->head_dim;
    mat(&b, "token_embd.weight", E, c->n_vocab);
    vec(&b, "output_norm.weight", E);
    if (!c->tied) mat(&b, "output.weight", E, c->n_vocab);
    char n[96];
#define T(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
    for (int l = 0; l < c->n_layer; l++) {
        vec(&b, T("attn_norm.weight"), E);
        mat(&b, T("attn_q.weight"), E, QD);
        mat(&b, T("attn_k.weight"), E, KVD);
        mat(&b, T("attn_v.weight"), E, KVD);
        mat(&b, T("attn_output.weight"), QD, E);
        if (c->fm->qkv_bias) {
            vec(&b, T("attn_q.bias"), QD);
            vec(&b, T("attn_k.bias"), KVD);
            vec(&b, T("attn_v.bias"), KVD);
        }
        if (c->fm->qk_norm) {
            vec(&b, T("attn_q_norm.weight"), c->head_dim);
            vec(&b, T("attn_k_norm.weight"), c->head_dim);
        }
        if (c->fm->qk_norm_full) {
            vec(&b, T("attn_q_norm.weight"), QD);
            vec(&b, T("attn_k_norm.weight"), KVD);
        }
        if (c->fm->post_norms) {
            vec(&b, T("post_attention_norm.weight"), E);
            vec(&b, T("post_ffw_norm.weight"), E);
        }
        vec(&b, T("ffn_norm.weight"), E);
        if (c->fm->moe) {
            mat(&b, T("ffn_gate_inp.weight"), E, c->n_expert);
            static const char *proj[] = {"gate", "up", "down"};
            for (int p = 0; p < 3; p++) {
                int n_in = p == 2 ? c->n_ff_exp : E, n_out = p == 2 ? E : c->n_ff_exp;
                if (c->per_expert) {
                    for (int e = 0; e < c->n_expert; e++) {
                        snprintf(n, sizeof n, "blk.%d.ffn_%s.%d.weight", l, proj[p], e);
                        mat(&b, n, n_in, n_out);
                    }
                } else {
                    snprintf(n, sizeof n, "blk.%d.ffn_%s_exps.weight", l, proj[p]);
                    put_tensor(&b, n, c->wtype, 3, (uint64_t)n_in, (uint64_t)n_out, (uint64_t)c->n_expert);
                }
            }
            if (c->n_ff_shexp) {
                mat(&b, T("ffn_gate_shexp.weight"), E, c->n_ff_shexp);
                mat(&b, T("ffn_up_shexp.weight"), E, c->n_ff_shexp);
                mat(&b, T("ffn_down_shexp.weight"), c->n_ff_shexp, E);
                mat(&b, T("ffn_gate_inp_shexp.weight"), E, 1);
            }
        } else {
            mat(&b, T("ffn_gate.weight"), E, c->n_ff);
            mat(&b, T("ffn_up.weight"), E, c->n_ff);
            mat(&b, T("ffn_down.weight"), c->n_ff, E);
        }
    }
#undef T
    uint8_t *buf = NULL;
    ts_status st = gguf_writer_to_buffer(b.w, &buf, size);
    gguf_writer_free(b.w);
    return st == TS_OK ? buf : NULL;
}

static void read_edits(rd *r, edit *ed, int *n_ed) {
    *n_ed = 0;
    int want = pick(r, MAX_EDITS + 1);
    while (*n_ed < want && r->at < r->n) {
        edit *e = &ed[(*n_ed)++];
        memset(e, 0, sizeof *e);
        e->op = pick(r, ED_COUNT);
        e->key = pick(r, N_KEYS + 1);
        e->vtype = pick(r, 8);
        e->i = int_value(r);
        e->f = float_value(r);
        e->tensor = pick(r, 64);
        e->dim = pick(r, 3);
        e->type = (uint32_t)pick(r, TS_TYPE_COUNT + 2);
    }
}

/* ---- seeds ---- */

static void write_seeds(const char *dir) {
    /* raw mode: one valid model per family and a few weight types */
    for (int i = 0; i < (int)(sizeof fams / sizeof fams[0]); i++) {
        cfg c = {.fm = &fams[i], .wtype = i % 2 ? TS_TYPE_Q8_0 : TS_TYPE_F16, .n_embd = 32, .n_ff = 32, .n_head = 2, .n_head_kv = 1,
                 .head_dim = 8, .n_rot = 8, .n_layer = 1, .n_vocab = 16, .n_ctx = 64, .n_expert = fams[i].moe ? 4 : 0,
                 .n_used = fams[i].moe ? 2 : 0, .n_ff_exp = 16, .n_ff_shexp = fams[i].shexp ? 16 : 0, .swa = fams[i].swa ? 4 : 0,
                 .per_expert = i == 7};
        uint64_t size = 0;
        uint8_t *buf = build_model(&c, NULL, 0, NULL, 0, &size);
        if (!buf) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/raw-%s%s.bin", dir, fams[i].arch, i == 7 ? "-experts" : "");
        FILE *fp = fopen(path, "wb");
        if (fp) {
            fputc(1, fp); /* odd: raw mode */
            fwrite(buf, 1, size, fp);
            fputc(5, fp); /* the token, from the tail */
            fclose(fp);
        }
        free(buf);
    }
    /* structured mode: every family and weight type, no edits, spelled as
     * the bytes pick_cfg reads */
    for (int i = 0; i < (int)(sizeof fams / sizeof fams[0]); i++) {
        for (int wt = 0; wt < (int)(sizeof wtypes / sizeof wtypes[0]); wt += 2) {
            uint8_t in[40];
            int n = 0;
            in[n++] = 0;                    /* structured */
            in[n++] = (uint8_t)i;           /* family */
            in[n++] = (uint8_t)wt;          /* weight type */
            in[n++] = wt >= 8 ? 4 : 2;      /* n_embd 256 for the K-quants, else 32 */
            in[n++] = 2;                    /* n_ff 32 */
            in[n++] = 1;                    /* 2 heads */
            in[n++] = 1;                    /* kv heads 1 */
            in[n++] = 2;                    /* head_dim 8 */
            in[n++] = 0;                    /* n_rot = head_dim */
            in[n++] = 1;                    /* 2 layers */
            in[n++] = 15;                   /* 16 tokens */
            in[n++] = 64, in[n++] = 0, in[n++] = 0; /* context 65 */
            if (fams[i].moe) in[n++] = 3, in[n++] = 1; /* 4 experts, top-2 */
            in[n++] = 1;                    /* expert width 16 */
            if (fams[i].shexp) in[n++] = 1; /* shared expert 16 */
            if (fams[i].swa) in[n++] = 4;   /* window 4 */
            in[n++] = (uint8_t)(i == 7 ? 2 : 0); /* flags: per-expert tensors for Mixtral */
            in[n++] = 2;                    /* 3 tokens */
            in[n++] = 5, in[n++] = 6, in[n++] = 7;
            in[n++] = (uint8_t)(wt & 1);    /* residency */
            in[n++] = 0;                    /* no edits */
            char path[4096];
            snprintf(path, sizeof path, "%s/structured-%s%s-%s.bin", dir, fams[i].arch, i == 7 ? "-experts" : "",
                     ts_type_name(wtypes[wt]));
            FILE *fp = fopen(path, "wb");
            if (fp) {
                fwrite(in, 1, (size_t)n, fp);
                fclose(fp);
            }
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("TS_FUZZ_WRITE_SEEDS");
    if (dir && *dir) {
        write_seeds(dir);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    int32_t ids[3];
    if (data[0] & 1) {
        /* raw GGUF; the last byte is the token */
        if (size < 2) return 0;
        ids[0] = data[size - 1] % 24 - 2; /* mostly in range of the seeds' 16, a few outside */
        /* an aligned copy: a GGUF's tensors are aligned to the file start */
        uint8_t *copy = malloc(size - 2 ? size - 2 : 1);
        if (!copy) return 0;
        memcpy(copy, data + 1, size - 2);
        gguf_file *f = NULL;
        if (gguf_open_memory(copy, size - 2, "fuzz.gguf", &f) == TS_OK) run_engine(f, ids, 1, data[0] & 2);
        free(copy);
        return 0;
    }
    rd r = {data, size, 1};
    cfg c;
    pick_cfg(&r, &c);
    int n_tok = 1 + pick(&r, 3);
    for (int i = 0; i < n_tok; i++) ids[i] = pick(&r, c.n_vocab + 4) - 2; /* a few out of range */
    int residency = u8(&r) & 1;
    edit ed[MAX_EDITS];
    int n_ed;
    read_edits(&r, ed, &n_ed);
    uint64_t fsize = 0;
    uint8_t *buf = build_model(&c, ed, n_ed, data, size, &fsize);
    if (!buf) return 0;
    gguf_file *f = NULL;
    if (gguf_open_memory(buf, fsize, "fuzz.gguf", &f) == TS_OK) run_engine(f, ids, n_tok, residency);
    free(buf);
    return 0;
}
