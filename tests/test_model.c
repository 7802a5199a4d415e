/* The model loader's hyperparameter checks: crafted GGUFs (a tiny fixture
 * copied through the writer with some keys changed) must be refused with one
 * message naming the key and the file, never overflow a product (UBSan) or
 * reach a huge allocation first. Each case would misbehave without its check:
 * head_count x key_length overflowed an int, block_count = 2^30 went
 * straight to calloc, 2^24+ vocabulary rows and rope factors near zero passed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "forward/engine.h"
#include "model/model.h"
#include "test_util.h"

typedef enum { E_DEL, E_U32, E_I32, E_U64, E_I64, E_F32, E_STR, E_STRN, E_ARR_I32 } edit_kind;

/* One change to the base file's metadata: E_DEL drops key; the others drop it
 * too and append it with the new value. E_ARR_I32: n values from arr; E_STRN:
 * the string of n bytes at s, NUL bytes and all. */
typedef struct {
    const char *key;
    edit_kind kind;
    int64_t i;         /* E_U32 E_I32 E_U64 E_I64 */
    double f;          /* E_F32 */
    const char *s;     /* E_STR */
    int32_t arr[4];    /* E_ARR_I32 */
    int n;
} kv_edit;

static char *str_of(gguf_str s) {
    char *c = malloc(s.len + 1);
    memcpy(c, s.ptr, s.len);
    c[s.len] = 0;
    return c;
}

static bool edited(const kv_edit *e, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].key, key)) return true;
    return false;
}

/* Copies every kv and tensor of f (the edited keys left out), then appends
 * the edits. extra_tensor: optional replacement for token_embd.weight. */
static uint8_t *build(const gguf_file *f, const kv_edit *ed, int n_ed, uint64_t *size, const uint64_t *embd_ne, ts_type embd_type) {
    gguf_writer *w = gguf_writer_new(3, f->alignment);
    for (uint64_t k = 0; k < f->n_kv; k++) {
        const gguf_kv *kv = &f->kv[k];
        char *key = str_of(kv->key);
        if (!strcmp(key, "general.alignment") || edited(ed, n_ed, key)) {
            free(key);
            continue;
        }
        gguf_w_copy_kv(w, kv);
        free(key);
    }
    for (int i = 0; i < n_ed; i++) {
        const kv_edit *e = &ed[i];
        switch (e->kind) {
        case E_DEL: break;
        case E_U32: gguf_w_u32(w, e->key, (uint32_t)e->i); break;
        case E_I32: gguf_w_i32(w, e->key, (int32_t)e->i); break;
        case E_U64: gguf_w_u64(w, e->key, (uint64_t)e->i); break;
        case E_I64: gguf_w_i64(w, e->key, e->i); break;
        case E_F32: gguf_w_f32(w, e->key, (float)e->f); break;
        case E_STR: gguf_w_str(w, e->key, e->s); break;
        case E_STRN: { /* by hand: the writer takes C strings (GGUF: u64 length, key, u32 type 8, u64 length, bytes) */
            uint64_t kl = strlen(e->key), vl = (uint64_t)e->n;
            uint32_t vt = 8;
            uint8_t *raw = malloc(8 + kl + 4 + 8 + vl), *p = raw;
            memcpy(p, &kl, 8), p += 8, memcpy(p, e->key, kl), p += kl, memcpy(p, &vt, 4), p += 4;
            memcpy(p, &vl, 8), p += 8, memcpy(p, e->s, vl), p += vl;
            gguf_w_raw_kv(w, raw, (size_t)(p - raw));
            free(raw);
            break;
        }
        case E_ARR_I32: gguf_w_arr(w, e->key, GGUF_VT_INT32, e->arr, (uint64_t)e->n); break;
        }
    }
    void *big = NULL;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *gt = &f->tensors[t];
        char *name = str_of(gt->name);
        if (embd_ne && !strcmp(name, "token_embd.weight")) {
            uint64_t nb = ts_type_row_bytes(embd_type, embd_ne[0]) * embd_ne[1];
            big = calloc(1, nb);
            gguf_w_tensor(w, name, embd_type, 2, embd_ne, big, nb);
        } else {
            gguf_w_tensor(w, name, gt->type, gt->n_dims, gt->ne, gt->data, gt->nbytes);
        }
        free(name);
    }
    free(big);
    uint8_t *buf = NULL;
    ts_status st = gguf_writer_to_buffer(w, &buf, size);
    gguf_writer_free(w);
    return st == TS_OK ? buf : NULL;
}

static gguf_file *open_fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/%s", TS_FIXTURES, name);
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    CHECKF(st == TS_OK, "%s: %s", path, ts_last_error());
    return f;
}

static char g_msg[1024];

/* Builds the edited copy of base and runs the loader's description build on
 * it; the message is left in g_msg. */
static ts_status load_edited_ext(const char *base, const kv_edit *ed, int n_ed, const uint64_t *embd_ne, ts_type embd_type) {
    g_msg[0] = 0;
    gguf_file *bf = open_fixture(base);
    if (!bf) return TS_ERR_IO;
    uint64_t size = 0;
    uint8_t *buf = build(bf, ed, n_ed, &size, embd_ne, embd_type);
    gguf_close(bf);
    CHECK(buf != NULL);
    if (!buf) return TS_ERR_NOMEM;
    gguf_file *f = NULL;
    ts_status st = gguf_open_memory(buf, size, "crafted.gguf", &f);
    if (st == TS_OK) {
        ts_model_desc md;
        st = ts_model_desc_build(f, &md);
        if (st == TS_OK) ts_model_desc_free(&md);
    }
    snprintf(g_msg, sizeof g_msg, "%s", st == TS_OK ? "" : ts_last_error());
    gguf_close(f);
    free(buf);
    return st;
}

static ts_status load_edited(const char *base, const kv_edit *ed, int n_ed) { return load_edited_ext(base, ed, n_ed, NULL, 0); }

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* expect_refused: a format error whose message names the file and every
 * listed fragment (the key, the bound) */
#define EXPECT_REFUSED(call, ...)                                                                          \
    do {                                                                                                   \
        const char *frags_[] = {__VA_ARGS__};                                                              \
        ts_status st_ = (call);                                                                            \
        if (getenv("TS_VERBOSE")) printf("%s\n", g_msg);                                                  \
        CHECKF(st_ == TS_ERR_FORMAT || st_ == TS_ERR_UNSUPPORTED, "status %d, message [%s]", (int)st_, g_msg); \
        CHECKF(strstr(g_msg, "crafted.gguf") != NULL, "no file name in [%s]", g_msg);                     \
        for (int k_ = 0; k_ < N(frags_); k_++) CHECKF(strstr(g_msg, frags_[k_]) != NULL, "no '%s' in [%s]", frags_[k_], g_msg); \
    } while (0)

static const char *LL = "tiny-llama-f32.gguf";

static void test_base_loads(void) {
    /* the copy itself is a working model: every refusal below is the edit's */
    CHECKF(load_edited(LL, NULL, 0) == TS_OK, "%s", g_msg);
    CHECKF(load_edited("tiny-qwen3moe-f32.gguf", NULL, 0) == TS_OK, "%s", g_msg);
    CHECKF(load_edited("tiny-gemma3-f16.gguf", NULL, 0) == TS_OK, "%s", g_msg);
    /* a per-layer array of equal values is the same as the scalar */
    kv_edit e[] = {{.key = "llama.attention.head_count_kv", .kind = E_ARR_I32, .arr = {2, 2}, .n = 2}};
    CHECKF(load_edited(LL, e, N(e)) == TS_OK, "%s", g_msg);
}

static void test_products(void) {
    /* head_count x key_length overflowed `int QD` (UBSan) */
    kv_edit a[] = {{.key = "llama.attention.head_count", .kind = E_U32, .i = 1 << 20},
                   {.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 1 << 20},
                   {.key = "llama.attention.key_length", .kind = E_U32, .i = 4096},
                   {.key = "llama.attention.value_length", .kind = E_U32, .i = 4096}};
    EXPECT_REFUSED(load_edited(LL, a, N(a)), "llama.attention.head_count", "1048576", "out of range");
    /* each within its own bound, the product over the supported width */
    kv_edit b[] = {{.key = "llama.attention.head_count", .kind = E_U32, .i = 1024},
                   {.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 1024},
                   {.key = "llama.attention.key_length", .kind = E_U32, .i = 4096},
                   {.key = "llama.attention.value_length", .kind = E_U32, .i = 4096},
                   {.key = "llama.rope.dimension_count", .kind = E_U32, .i = 16}};
    EXPECT_REFUSED(load_edited(LL, b, N(b)), "head_count 1024 x key_length 4096");
    /* no key_length: n_embd / n_head must divide */
    kv_edit c[] = {{.key = "llama.attention.head_count", .kind = E_U32, .i = 3},
                   {.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 3}};
    EXPECT_REFUSED(load_edited(LL, c, N(c)), "key_length", "not a multiple");
    /* more heads than embedding: the default head width would be 0 */
    kv_edit d[] = {{.key = "llama.attention.head_count", .kind = E_U32, .i = 128},
                   {.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 128}};
    EXPECT_REFUSED(load_edited(LL, d, N(d)), "head_count 128");
    /* huge embedding with one head: head width over the bound */
    kv_edit e[] = {{.key = "llama.embedding_length", .kind = E_U32, .i = 1 << 16},
                   {.key = "llama.attention.head_count", .kind = E_U32, .i = 1},
                   {.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 1}};
    EXPECT_REFUSED(load_edited(LL, e, N(e)), "head width 65536");
}

static void test_ranges(void) {
    /* block_count 2^30 went straight to calloc(2^30, sizeof(ts_layer)) */
    kv_edit a[] = {{.key = "llama.block_count", .kind = E_U32, .i = 1 << 30}};
    EXPECT_REFUSED(load_edited(LL, a, N(a)), "llama.block_count", "1073741824", "out of range");
    kv_edit b[] = {{.key = "llama.block_count", .kind = E_U32, .i = 4000}};
    EXPECT_REFUSED(load_edited(LL, b, N(b)), "llama.block_count = 4000", "tensors");
    kv_edit c[] = {{.key = "llama.embedding_length", .kind = E_U32, .i = 0}};
    EXPECT_REFUSED(load_edited(LL, c, N(c)), "llama.embedding_length = 0", "out of range");
    kv_edit d[] = {{.key = "llama.feed_forward_length", .kind = E_U32, .i = 0xFFFFFFFFu}};
    EXPECT_REFUSED(load_edited(LL, d, N(d)), "llama.feed_forward_length = 4294967295");
    kv_edit e[] = {{.key = "llama.feed_forward_length", .kind = E_U64, .i = INT64_MIN}}; /* 2^63 as u64 */
    EXPECT_REFUSED(load_edited(LL, e, N(e)), "llama.feed_forward_length = 9223372036854775808");
    kv_edit f[] = {{.key = "llama.feed_forward_length", .kind = E_I32, .i = -5}};
    EXPECT_REFUSED(load_edited(LL, f, N(f)), "llama.feed_forward_length = -5");
    kv_edit g[] = {{.key = "llama.context_length", .kind = E_U32, .i = 1u << 30}};
    EXPECT_REFUSED(load_edited(LL, g, N(g)), "llama.context_length", "out of range");
    kv_edit h[] = {{.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 8}};
    EXPECT_REFUSED(load_edited(LL, h, N(h)), "head_count 4 is not a multiple of head_count_kv 8");
    kv_edit i[] = {{.key = "llama.attention.head_count_kv", .kind = E_U32, .i = 3}};
    EXPECT_REFUSED(load_edited(LL, i, N(i)), "head_count_kv 3");
    kv_edit j[] = {{.key = "llama.attention.key_length", .kind = E_U32, .i = 5000}};
    EXPECT_REFUSED(load_edited(LL, j, N(j)), "llama.attention.key_length = 5000");
    kv_edit k[] = {{.key = "llama.rope.dimension_count", .kind = E_U32, .i = 15}};
    EXPECT_REFUSED(load_edited(LL, k, N(k)), "rope.dimension_count 15");
    kv_edit l[] = {{.key = "llama.rope.dimension_count", .kind = E_U32, .i = 32}};
    EXPECT_REFUSED(load_edited(LL, l, N(l)), "rope.dimension_count 32");
    kv_edit m[] = {{.key = "llama.rope.scaling.original_context_length", .kind = E_I64, .i = INT64_MAX}};
    EXPECT_REFUSED(load_edited(LL, m, N(m)), "original_context_length");
    /* per-layer arrays: equal values still range-checked; different ones refused */
    kv_edit n[] = {{.key = "llama.attention.head_count_kv", .kind = E_ARR_I32, .arr = {0, 0}, .n = 2}};
    EXPECT_REFUSED(load_edited(LL, n, N(n)), "llama.attention.head_count_kv = 0");
    kv_edit o[] = {{.key = "llama.attention.head_count_kv", .kind = E_ARR_I32, .arr = {2, 4}, .n = 2}};
    EXPECT_REFUSED(load_edited(LL, o, N(o)), "llama.attention.head_count_kv differs between layers");
    /* wrong types */
    kv_edit p[] = {{.key = "llama.embedding_length", .kind = E_STR, .s = "64"}};
    EXPECT_REFUSED(load_edited(LL, p, N(p)), "llama.embedding_length has the wrong type");
    kv_edit q[] = {{.key = "llama.block_count", .kind = E_F32, .f = 2.0}};
    EXPECT_REFUSED(load_edited(LL, q, N(q)), "llama.block_count has the wrong type");
    /* missing required key */
    kv_edit r[] = {{.key = "llama.context_length", .kind = E_DEL}};
    EXPECT_REFUSED(load_edited(LL, r, N(r)), "missing key llama.context_length");
}

static void test_rope_floats(void) {
    kv_edit a[] = {{.key = "llama.rope.scaling.type", .kind = E_STR, .s = "linear"},
                   {.key = "llama.rope.scaling.factor", .kind = E_F32, .f = 1e-30}};
    EXPECT_REFUSED(load_edited(LL, a, N(a)), "rope.scaling.factor");
    kv_edit b[] = {{.key = "llama.rope.scale_linear", .kind = E_F32, .f = 1e30}};
    EXPECT_REFUSED(load_edited(LL, b, N(b)), "rope.scale_linear");
    kv_edit c[] = {{.key = "llama.rope.scaling.type", .kind = E_STR, .s = "yarn"},
                   {.key = "llama.rope.scaling.factor", .kind = E_F32, .f = 4},
                   {.key = "llama.rope.scaling.yarn_beta_fast", .kind = E_F32, .f = -1}};
    EXPECT_REFUSED(load_edited(LL, c, N(c)), "yarn_beta_fast");
    kv_edit d[] = {{.key = "llama.rope.scaling.type", .kind = E_STR, .s = "llama3"},
                   {.key = "llama.rope.scaling.factor", .kind = E_F32, .f = 8},
                   {.key = "llama.rope.scaling.low_freq_factor", .kind = E_F32, .f = 0}};
    EXPECT_REFUSED(load_edited(LL, d, N(d)), "low_freq_factor");
    kv_edit e[] = {{.key = "llama.rope.freq_base", .kind = E_F32, .f = INFINITY}};
    EXPECT_REFUSED(load_edited(LL, e, N(e)), "llama.rope.freq_base is not finite");
}

static void test_experts(void) {
    const char *Q = "tiny-qwen3moe-f32.gguf";
    kv_edit a[] = {{.key = "qwen3moe.expert_count", .kind = E_U32, .i = 100000}};
    EXPECT_REFUSED(load_edited(Q, a, N(a)), "qwen3moe.expert_count = 100000");
    kv_edit b[] = {{.key = "qwen3moe.expert_used_count", .kind = E_U32, .i = 0}};
    EXPECT_REFUSED(load_edited(Q, b, N(b)), "qwen3moe.expert_used_count = 0");
    kv_edit c[] = {{.key = "qwen3moe.expert_used_count", .kind = E_U32, .i = 64}};
    EXPECT_REFUSED(load_edited(Q, c, N(c)), "expert_used_count = 64");
    kv_edit d[] = {{.key = "qwen3moe.expert_feed_forward_length", .kind = E_U32, .i = 1u << 31}};
    EXPECT_REFUSED(load_edited(Q, d, N(d)), "qwen3moe.expert_feed_forward_length");
    kv_edit e[] = {{.key = "qwen3moe.expert_shared_feed_forward_length", .kind = E_I32, .i = -1}};
    EXPECT_REFUSED(load_edited(Q, e, N(e)), "qwen3moe.expert_shared_feed_forward_length = -1");
}

static void test_sliding_window(void) {
    const char *G = "tiny-gemma3-f16.gguf";
    kv_edit a[] = {{.key = "gemma3.attention.sliding_window", .kind = E_U32, .i = 1u << 30}};
    EXPECT_REFUSED(load_edited(G, a, N(a)), "gemma3.attention.sliding_window = 1073741824");
}

static void test_vocab_rows(void) {
    /* 2^24 + 1 one-element F16 rows (32 MiB): past the vocabulary bound */
    uint64_t ne[2] = {1, (1u << 24) + 1};
    EXPECT_REFUSED(load_edited_ext(LL, NULL, 0, ne, TS_TYPE_F16), "token_embd.weight has 16777217 rows");
}


/* A tokenizer whose size differs from the output rows is refused at load
 * (issue 9): fewer tokens gave silent empty text, more gave "token id
 * outside the vocabulary" mid-run. Gemma 3's output is tied to token_embd,
 * so changing its rows changes the output rows alone. */
static void test_vocab_mismatch(void) {
    gguf_file *bf = open_fixture("tiny-gemma3-f32.gguf");
    if (!bf) return;
    const gguf_tensor *te = NULL;
    for (uint64_t t = 0; t < bf->n_tensors; t++)
        if (bf->tensors[t].name.len == 17 && !memcmp(bf->tensors[t].name.ptr, "token_embd.weight", 17)) te = &bf->tensors[t];
    CHECK(te != NULL);
    if (!te) {
        gguf_close(bf);
        return;
    }
    for (int d = -8; d <= 8; d += 16) {
        uint64_t ne[2] = {te->ne[0], te->ne[1] + (uint64_t)d}, size = 0;
        uint8_t *buf = build(bf, NULL, 0, &size, ne, TS_TYPE_F32);
        gguf_file *f = NULL;
        CHECK(buf && gguf_open_memory(buf, size, "crafted.gguf", &f) == TS_OK);
        ts_model *m = NULL;
        ts_status st = f ? ts_model_load_gguf(f, NULL, &m) : TS_ERR_IO; /* takes f */
        CHECKF(st == TS_ERR_FORMAT && strstr(ts_last_error(), "crafted.gguf") && strstr(ts_last_error(), "tokenizer has") &&
                   strstr(ts_last_error(), "output layer has"),
               "rows %+d: status %d [%s]", d, (int)st, ts_last_error());
        ts_model_free(m);
        free(buf);
    }
    gguf_close(bf);
}

/* The chat template is the file's text and trusts nothing: one that is not
 * UTF-8, or holds a NUL byte, is refused with a message, never cut at the NUL
 * or handed on as bytes (a chatml default system prompt carried them into
 * every rendering: fuzz/fuzz_chat.c). */
static void test_chat_template_bytes(void) {
    static const char good[] = "{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}<|im_start|>";
    static const char bad[] = "{{ '<|im_start|>system\\nBe \xff brief.<|im_end|>\\n' }}<|im_start|>";
    static const char nul[] = "{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}<|im_start|>\0{% raise %}";
    const struct {
        kv_edit e;
        ts_status want;
        const char *msg;
    } cases[] = {
        {{"tokenizer.chat_template", E_STR, 0, 0, good, {0}, 0}, TS_OK, ""},
        {{"tokenizer.chat_template", E_STR, 0, 0, bad, {0}, 0}, TS_ERR_FORMAT, "not valid UTF-8"},
        {{"tokenizer.chat_template", E_STRN, 0, 0, nul, {0}, (int)sizeof nul - 1}, TS_ERR_FORMAT, "NUL byte at offset 61"},
    };
    gguf_file *bf = open_fixture("tiny-llama-f32.gguf");
    if (!bf) return;
    for (int c = 0; c < N(cases); c++) {
        uint64_t size = 0;
        uint8_t *buf = build(bf, &cases[c].e, 1, &size, NULL, 0);
        gguf_file *f = NULL;
        CHECK(buf && gguf_open_memory(buf, size, "crafted.gguf", &f) == TS_OK);
        ts_model *m = NULL;
        ts_status st = f ? ts_model_load_gguf(f, NULL, &m) : TS_ERR_IO; /* takes f */
        CHECKF(st == TS_OK, "case %d: load: %s", c, ts_last_error());
        ts_chat_template *t = NULL;
        if (st == TS_OK) {
            ts_clear_error();
            st = ts_chat_template_from_model(m, &t);
            CHECKF(st == cases[c].want && strstr(ts_last_error(), cases[c].msg), "case %d: status %d [%s]", c, (int)st,
                   ts_last_error());
            CHECK((t != NULL) == (st == TS_OK));
            if (t) CHECK(!strcmp(ts_chat_template_name(t), "chatml"));
        }
        ts_chat_template_free(t);
        ts_model_free(m);
        free(buf);
    }
    gguf_close(bf);
}

int main(void) {
    test_base_loads();
    test_products();
    test_ranges();
    test_rope_floats();
    test_experts();
    test_sliding_window();
    test_vocab_rows();
    test_vocab_mismatch();
    test_chat_template_bytes();
    return tu_finish();
}
