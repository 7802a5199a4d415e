/* make_synthetic_moe: writes a synthetic GGUF shaped like Qwen3-30B-A3B
 * (architecture qwen3moe) at Q4_K, ~17 GB, for benchmarking expert streaming
 * on a machine without the real model.
 *
 * Shape (defaults = Qwen3-30B-A3B): 48 layers, n_embd 2048, 32 query heads
 * and 4 KV heads of head_dim 128 with per-head q/k RMS norms, 128 experts of
 * width 768, 8 used per token, vocab 151936, context 40960, rope theta 1e6.
 * Tensors and metadata keys follow llama.cpp's qwen3moe (src/llama-arch.cpp,
 * src/llama-model.cpp): token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v,
 * attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate_inp,
 * ffn_{gate,up,down}_exps}, output_norm, output.
 * Types as a Q4_K_M file: matrices Q4_K, token_embd Q4_K, output Q6_K, norms
 * and the router F32.
 *
 * Weights are random but valid: quant bytes are uniform random and every
 * block's fp16 scales (d, dmin) come from a small table of sane magnitudes,
 * so dequantized weights are finite, zero-mean-ish and of ~0.01-0.05 size.
 * Norm weights are 1. Routing over random router rows is close to uniform,
 * the worst case for an expert cache. Bytes are a counter-based hash of
 * (seed, layer, projection, byte position in the layer's expert stream), so
 * --layout per-expert writes the same expert bytes as the stacked layout and
 * a file is reproducible regardless of --threads.
 *
 * The tokenizer is a SentencePiece-style ("llama") vocab: <unk>, <s>, </s>,
 * the 256 byte tokens <0x00>..<0xFF>, then filler pieces (a..z strings, with
 * and without the U+2581 space marker) up to the vocab size.
 *
 * The file is streamed: header, metadata and tensor infos first, then tensor
 * data piece by piece from a few fixed buffers (the in-memory gguf writer of
 * src/gguf would need the whole file in RAM). Generation runs on --threads
 * threads while a writer thread writes; written ranges are flushed and
 * dropped from the page cache as it goes (sync_file_range + fadvise), so the
 * timing is the disk's and other processes keep their cache. Output goes to
 * OUT.tmp and is renamed to OUT only when complete.
 *
 * Build (from the repo root, library built in build-io):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/make_synthetic_moe.c \
 *       build-io/libturbospark.a -lpthread -lm -o build-io/make_synthetic_moe
 * Run:
 *   make_synthetic_moe OUT.gguf [--layers N] [--experts N] [--used K]
 *       [--vocab N] [--layout stacked|per-expert] [--seed S] [--threads T]
 *       [--no-sync] [--dry-run]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/threadpool.h"
#include "tensor/quant.h"
#include "tensor/types.h"

#define ALIGNMENT 32u
#define PIECE_BYTES (32u << 20)
#define N_BUFS 3
#define FLUSH_BYTES (256ull << 20)

typedef struct cfg {
    const char *out;
    int n_layer, n_expert, n_used, n_vocab;
    int n_embd, n_head, n_head_kv, head_dim, n_ff_exp, n_ff_dense, n_ctx;
    bool per_expert, sync, dry_run;
    uint64_t seed;
    int threads;
} cfg;

/* ---------------------------------------------------------------- bytes */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static char g_tmp_path[4096];
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "make_synthetic_moe: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (g_tmp_path[0]) unlink(g_tmp_path);
    exit(1);
}

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 1 << 16;
        while (c < b->n + n) c *= 2;
        b->p = realloc(b->p, c);
        if (!b->p) die("out of memory");
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_f32(buf *b, float v) { b_put(b, &v, 4); }
static void b_str(buf *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}

enum { VT_U32 = 4, VT_I32 = 5, VT_F32 = 6, VT_BOOL = 7, VT_STRING = 8, VT_ARRAY = 9 };

static uint64_t g_n_kv;
static void kv_u32(buf *b, const char *k, uint32_t v) { b_str(b, k); b_u32(b, VT_U32); b_u32(b, v); g_n_kv++; }
static void kv_f32(buf *b, const char *k, float v) { b_str(b, k); b_u32(b, VT_F32); b_f32(b, v); g_n_kv++; }
static void kv_bool(buf *b, const char *k, bool v) { uint8_t x = v; b_str(b, k); b_u32(b, VT_BOOL); b_put(b, &x, 1); g_n_kv++; }
static void kv_str(buf *b, const char *k, const char *v) { b_str(b, k); b_u32(b, VT_STRING); b_str(b, v); g_n_kv++; }

/* ---------------------------------------------------------------- tensors */

typedef enum fill_kind { FILL_ONES, FILL_ROUTER, FILL_QUANT } fill_kind;

typedef struct tensor {
    char name[64];
    uint32_t type, n_dims;
    uint64_t ne[3];
    uint64_t nbytes;
    uint64_t offset;      /* in the data section */
    fill_kind fill;
    uint64_t stream;      /* hash key of the byte stream */
    uint64_t stream_pos;  /* position of byte 0 in the stream */
    bool expert;          /* a routed expert tensor */
} tensor;

static tensor *g_t;
static size_t g_nt, g_capt;

static tensor *add_tensor(const char *name, uint32_t type, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                          fill_kind fill, uint64_t stream, uint64_t stream_pos) {
    if (g_nt == g_capt) {
        g_capt = g_capt ? g_capt * 2 : 1024;
        g_t = realloc(g_t, g_capt * sizeof *g_t);
        if (!g_t) die("out of memory");
    }
    tensor *t = &g_t[g_nt++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    uint64_t rb = ts_type_row_bytes(type, ne0);
    if (!rb) die("%s: %s cannot hold rows of %" PRIu64, name, ts_type_name(type), ne0);
    t->nbytes = rb * ne1 * ne2;
    t->fill = fill;
    t->stream = stream;
    t->stream_pos = stream_pos;
    return t;
}

static uint64_t mix64(uint64_t x) { /* splitmix64 finalizer */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t stream_key(uint64_t seed, uint64_t a, uint64_t b) { return mix64(seed ^ mix64(a * 1000003u + b)); }

static void build_tensors(const cfg *c) {
    const uint32_t Q4K = TS_TYPE_Q4_K, Q6K = TS_TYPE_Q6_K, F32 = TS_TYPE_F32;
    uint64_t E = (uint64_t)c->n_embd, V = (uint64_t)c->n_vocab, HD = (uint64_t)c->head_dim;
    uint64_t QD = HD * (uint64_t)c->n_head, KD = HD * (uint64_t)c->n_head_kv, FF = (uint64_t)c->n_ff_exp;
    uint64_t X = (uint64_t)c->n_expert;
    char n[64];
    add_tensor("token_embd.weight", Q4K, 2, E, V, 1, FILL_QUANT, stream_key(c->seed, 1, 0), 0);
    for (int l = 0; l < c->n_layer; l++) {
        uint64_t L = (uint64_t)l + 100;
#define T2(suffix, type, a, b, fill, k)                                                             \
    do {                                                                                            \
        snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix);                                       \
        add_tensor(n, type, (b) == 1 ? 1 : 2, a, b, 1, fill, stream_key(c->seed, L, k), 0);          \
    } while (0)
        T2("attn_norm", F32, E, 1, FILL_ONES, 0);
        T2("attn_q", Q4K, E, QD, FILL_QUANT, 1);
        T2("attn_k", Q4K, E, KD, FILL_QUANT, 2);
        T2("attn_v", Q4K, E, KD, FILL_QUANT, 3);
        T2("attn_output", Q4K, QD, E, FILL_QUANT, 4);
        T2("attn_q_norm", F32, HD, 1, FILL_ONES, 5);
        T2("attn_k_norm", F32, HD, 1, FILL_ONES, 6);
        T2("ffn_norm", F32, E, 1, FILL_ONES, 7);
        T2("ffn_gate_inp", F32, E, X, FILL_ROUTER, 8);
#undef T2
        static const char *proj[3] = {"gate", "up", "down"};
        for (int p = 0; p < 3; p++) {
            uint64_t a = p == 2 ? FF : E, b = p == 2 ? E : FF;
            uint64_t key = stream_key(c->seed, L, 20 + (uint64_t)p);
            if (!c->per_expert) {
                snprintf(n, sizeof n, "blk.%d.ffn_%s_exps.weight", l, proj[p]);
                add_tensor(n, Q4K, 3, a, b, X, FILL_QUANT, key, 0)->expert = true;
            } else {
                uint64_t per = ts_type_row_bytes(Q4K, a) * b;
                for (uint64_t e = 0; e < X; e++) {
                    snprintf(n, sizeof n, "blk.%d.ffn_%s.%" PRIu64 ".weight", l, proj[p], e);
                    add_tensor(n, Q4K, 2, a, b, 1, FILL_QUANT, key, e * per)->expert = true;
                }
            }
        }
    }
    add_tensor("output_norm.weight", F32, 1, E, 1, 1, FILL_ONES, 0, 0);
    add_tensor("output.weight", Q6K, 2, E, V, 1, FILL_QUANT, stream_key(c->seed, 2, 0), 0);
    uint64_t off = 0;
    for (size_t i = 0; i < g_nt; i++) {
        off = (off + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
        g_t[i].offset = off;
        off += g_t[i].nbytes;
    }
}

/* ---------------------------------------------------------------- metadata */

/* Filler piece i: the i-th string over a..z in (length, lexicographic)
 * order, marked with U+2581 (the SentencePiece space) when `space`. */
static void filler(uint64_t i, bool space, char *out) {
    int len = 1;
    uint64_t span = 26;
    while (i >= span) {
        i -= span;
        span *= 26;
        len++;
    }
    char *p = out;
    if (space) {
        memcpy(p, "\xE2\x96\x81", 3);
        p += 3;
    }
    for (int k = len - 1; k >= 0; k--) {
        p[k] = (char)('a' + i % 26);
        i /= 26;
    }
    p[len] = 0;
}

static void build_metadata(const cfg *c, buf *kv) {
    const char *A = "qwen3moe";
    char k[128];
#define K(s) (snprintf(k, sizeof k, "%s.%s", A, s), k)
    kv_str(kv, "general.architecture", A);
    kv_str(kv, "general.name", "synthetic-qwen3moe (turbospark bench/make_synthetic_moe)");
    kv_u32(kv, "general.file_type", 15); /* MOSTLY_Q4_K_M */
    kv_u32(kv, "general.quantization_version", 2);
    kv_u32(kv, "general.alignment", ALIGNMENT);
    kv_u32(kv, K("block_count"), (uint32_t)c->n_layer);
    kv_u32(kv, K("context_length"), (uint32_t)c->n_ctx);
    kv_u32(kv, K("embedding_length"), (uint32_t)c->n_embd);
    kv_u32(kv, K("feed_forward_length"), (uint32_t)c->n_ff_dense);
    kv_u32(kv, K("attention.head_count"), (uint32_t)c->n_head);
    kv_u32(kv, K("attention.head_count_kv"), (uint32_t)c->n_head_kv);
    kv_u32(kv, K("attention.key_length"), (uint32_t)c->head_dim);
    kv_u32(kv, K("attention.value_length"), (uint32_t)c->head_dim);
    kv_f32(kv, K("rope.freq_base"), 1000000.0f);
    kv_f32(kv, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    kv_u32(kv, K("expert_count"), (uint32_t)c->n_expert);
    kv_u32(kv, K("expert_used_count"), (uint32_t)c->n_used);
    kv_u32(kv, K("expert_feed_forward_length"), (uint32_t)c->n_ff_exp);
#undef K
    kv_str(kv, "tokenizer.ggml.model", "llama");
    kv_str(kv, "tokenizer.ggml.pre", "default");
    uint64_t V = (uint64_t)c->n_vocab;
    /* tokens */
    b_str(kv, "tokenizer.ggml.tokens");
    b_u32(kv, VT_ARRAY);
    b_u32(kv, VT_STRING);
    b_u64(kv, V);
    char piece[32];
    uint64_t fill_i = 0;
    for (uint64_t i = 0; i < V; i++) {
        if (i == 0) b_str(kv, "<unk>");
        else if (i == 1) b_str(kv, "<s>");
        else if (i == 2) b_str(kv, "</s>");
        else if (i < 3 + 256) {
            snprintf(piece, sizeof piece, "<0x%02X>", (unsigned)(i - 3));
            b_str(kv, piece);
        } else {
            filler(fill_i / 2, fill_i % 2 == 0, piece);
            fill_i++;
            b_str(kv, piece);
        }
    }
    g_n_kv++;
    b_str(kv, "tokenizer.ggml.scores");
    b_u32(kv, VT_ARRAY);
    b_u32(kv, VT_F32);
    b_u64(kv, V);
    for (uint64_t i = 0; i < V; i++) b_f32(kv, i < 259 ? 0.0f : -(float)(i - 259));
    g_n_kv++;
    b_str(kv, "tokenizer.ggml.token_type");
    b_u32(kv, VT_ARRAY);
    b_u32(kv, VT_I32);
    b_u64(kv, V);
    for (uint64_t i = 0; i < V; i++) {
        int32_t t = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1; /* unknown, control, byte, normal */
        b_put(kv, &t, 4);
    }
    g_n_kv++;
    kv_u32(kv, "tokenizer.ggml.unknown_token_id", 0);
    kv_u32(kv, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(kv, "tokenizer.ggml.eos_token_id", 2);
    kv_bool(kv, "tokenizer.ggml.add_bos_token", true);
    kv_bool(kv, "tokenizer.ggml.add_eos_token", false);
}

/* ---------------------------------------------------------------- generation */

/* fp16 scale tables: Q4_K w = d*sc*q - dmin*m (sc, m in 0..63, q in 0..15),
 * dmin = 7.5 d centres it; Q6_K w = d*sc*(q-32) (sc int8). Magnitudes vary
 * by +-50% over the table. */
static uint16_t g_d4[256], g_dmin4[256], g_d6[256];

static void init_tables(void) {
    for (int i = 0; i < 256; i++) {
        float f = 0.5f + (float)i / 255.0f; /* 0.5 .. 1.5 */
        g_d4[i] = ts_f32_to_f16(1.4e-4f * f);
        g_dmin4[i] = ts_f32_to_f16(1.05e-3f * f);
        g_d6[i] = ts_f32_to_f16(1.5e-5f * f);
    }
}

/* Bytes [pos, pos+n) of stream `key`. */
static void fill_stream(uint64_t key, uint64_t pos, uint8_t *dst, uint64_t n) {
    uint64_t i = 0;
    while (i < n && ((pos + i) & 7)) {
        uint64_t w = mix64(key + ((pos + i) >> 3));
        dst[i] = (uint8_t)(w >> (8 * ((pos + i) & 7)));
        i++;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w = mix64(key + ((pos + i) >> 3));
        memcpy(dst + i, &w, 8);
    }
    for (; i < n; i++) {
        uint64_t w = mix64(key + ((pos + i) >> 3));
        dst[i] = (uint8_t)(w >> (8 * ((pos + i) & 7)));
    }
}

typedef struct job {
    const tensor *t;
    uint64_t rel;   /* first byte within the tensor */
    uint64_t n;     /* bytes; whole blocks */
    uint8_t *dst;
} job;

static void gen_fn(void *arg, int ith, int nth) {
    const job *j = arg;
    const tensor *t = j->t;
    if (t->fill == FILL_ONES || t->fill == FILL_ROUTER) {
        int64_t lo, hi;
        ts_pool_split((int64_t)(j->n / 4), 1024, ith, nth, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            float v = 1.0f;
            if (t->fill == FILL_ROUTER) {
                uint64_t h = mix64(t->stream + (j->rel / 4) + (uint64_t)i);
                v = ((float)(h >> 40) / (float)(1u << 24) - 0.5f) * 0.1f; /* uniform +-0.05 */
            }
            memcpy(j->dst + 4 * i, &v, 4);
        }
        return;
    }
    const ts_type_traits *tt = ts_type_get(t->type);
    uint64_t bb = tt->block_bytes, nblk = j->n / bb;
    int64_t lo, hi;
    ts_pool_split((int64_t)nblk, 256, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    uint8_t *d = j->dst + (uint64_t)lo * bb;
    fill_stream(t->stream, t->stream_pos + j->rel + (uint64_t)lo * bb, d, (uint64_t)(hi - lo) * bb);
    for (int64_t b = lo; b < hi; b++, d += bb) {
        if (t->type == TS_TYPE_Q4_K) { /* d, dmin at 0 and 2; pick by their own random bytes */
            uint16_t dv = g_d4[d[0]], mv = g_dmin4[d[2]];
            memcpy(d, &dv, 2);
            memcpy(d + 2, &mv, 2);
        } else { /* Q6_K: d at 208 */
            uint16_t dv = g_d6[d[208]];
            memcpy(d + 208, &dv, 2);
        }
    }
}

/* ---------------------------------------------------------------- writer */

typedef struct wbuf {
    uint8_t *p;
    uint64_t n;
    bool full;
} wbuf;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    wbuf b[N_BUFS];
    int head, tail; /* head: next to fill, tail: next to write */
    bool done;
    int fd;
    uint64_t pos, flushed;
    bool sync;
    int err;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void write_all(int fd, const uint8_t *p, uint64_t n) {
    while (n) {
        ssize_t r = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (r < 0) {
            if (errno == EINTR) continue;
            die("write %s: %s", g_tmp_path, strerror(errno));
        }
        p += r;
        n -= (uint64_t)r;
    }
}

/* Pushes written data to disk behind the writer and drops it from the cache. */
static void flush_behind(bool all) {
    while (W.pos - W.flushed >= FLUSH_BYTES || (all && W.pos > W.flushed)) {
        uint64_t n = W.pos - W.flushed;
        if (n > FLUSH_BYTES) n = FLUSH_BYTES;
        if (W.sync &&
            sync_file_range(W.fd, (off_t)W.flushed, (off_t)n,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0)
            die("sync_file_range %s: %s", g_tmp_path, strerror(errno));
        if (W.sync) (void)posix_fadvise(W.fd, (off_t)W.flushed, (off_t)n, POSIX_FADV_DONTNEED);
        W.flushed += n;
    }
}

static void *writer_main(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&W.mu);
        while (!W.b[W.tail].full && !W.done) pthread_cond_wait(&W.cv, &W.mu);
        if (!W.b[W.tail].full && W.done) {
            pthread_mutex_unlock(&W.mu);
            break;
        }
        wbuf *b = &W.b[W.tail];
        pthread_mutex_unlock(&W.mu);
        write_all(W.fd, b->p, b->n);
        W.pos += b->n;
        flush_behind(false);
        pthread_mutex_lock(&W.mu);
        b->full = false;
        W.tail = (W.tail + 1) % N_BUFS;
        pthread_cond_broadcast(&W.cv);
        pthread_mutex_unlock(&W.mu);
    }
    return NULL;
}

static wbuf *get_buf(void) {
    pthread_mutex_lock(&W.mu);
    while (W.b[W.head].full) pthread_cond_wait(&W.cv, &W.mu);
    wbuf *b = &W.b[W.head];
    pthread_mutex_unlock(&W.mu);
    b->n = 0;
    return b;
}

static void put_buf(wbuf *b) {
    pthread_mutex_lock(&W.mu);
    b->full = true;
    W.head = (W.head + 1) % N_BUFS;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

/* ---------------------------------------------------------------- main */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_int(const char *opt, const char *s, int lo, int hi) {
    char *end;
    errno = 0;
    long v = strtol(s ? s : "", &end, 10);
    if (!s || errno || *end || v < lo || v > hi) die("%s: expected an integer in %d..%d, got '%s'", opt, lo, hi, s ? s : "");
    return (int)v;
}

static void usage(void) {
    fprintf(stderr,
            "usage: make_synthetic_moe OUT.gguf [--layers N] [--experts N] [--used K] [--vocab N]\n"
            "         [--layout stacked|per-expert] [--seed S] [--threads T] [--no-sync] [--dry-run]\n"
            "Writes a synthetic qwen3moe GGUF (Qwen3-30B-A3B shape, Q4_K; ~17 GB at the defaults).\n");
}

int main(int argc, char **argv) {
    cfg c = {.out = NULL, .n_layer = 48, .n_expert = 128, .n_used = 8, .n_vocab = 151936, .n_embd = 2048,
             .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_ff_exp = 768, .n_ff_dense = 6144, .n_ctx = 40960,
             .per_expert = false, .sync = true, .dry_run = false, .seed = 1, .threads = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--layers")) c.n_layer = parse_int(a, v, 1, 4096), i++;
        else if (!strcmp(a, "--experts")) c.n_expert = parse_int(a, v, 1, 65536), i++;
        else if (!strcmp(a, "--used")) c.n_used = parse_int(a, v, 1, 64), i++;
        else if (!strcmp(a, "--vocab")) c.n_vocab = parse_int(a, v, 300, 1 << 22), i++;
        else if (!strcmp(a, "--seed")) c.seed = (uint64_t)parse_int(a, v, 0, 1 << 30), i++;
        else if (!strcmp(a, "--threads")) c.threads = parse_int(a, v, 1, 256), i++;
        else if (!strcmp(a, "--layout")) {
            if (!v || (strcmp(v, "stacked") && strcmp(v, "per-expert"))) die("--layout: stacked or per-expert");
            c.per_expert = !strcmp(v, "per-expert");
            i++;
        } else if (!strcmp(a, "--no-sync")) c.sync = false;
        else if (!strcmp(a, "--dry-run")) c.dry_run = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (a[0] == '-') {
            usage();
            die("unknown option '%s'", a);
        } else if (!c.out) c.out = a;
        else die("more than one output path ('%s', '%s')", c.out, a);
    }
    if (!c.out && !c.dry_run) {
        usage();
        die("no output path");
    }
    if (c.n_used > c.n_expert) die("--used %d > --experts %d", c.n_used, c.n_expert);
    init_tables();
    build_tensors(&c);
    buf kv = {0};
    build_metadata(&c, &kv);

    buf hdr = {0};
    b_put(&hdr, "GGUF", 4);
    b_u32(&hdr, 3);
    b_u64(&hdr, g_nt);
    b_u64(&hdr, g_n_kv);
    b_put(&hdr, kv.p, kv.n);
    for (size_t i = 0; i < g_nt; i++) {
        const tensor *t = &g_t[i];
        b_str(&hdr, t->name);
        b_u32(&hdr, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) b_u64(&hdr, t->ne[d]);
        b_u32(&hdr, t->type);
        b_u64(&hdr, t->offset);
    }
    static const uint8_t zeros[ALIGNMENT];
    b_put(&hdr, zeros, (ALIGNMENT - hdr.n % ALIGNMENT) % ALIGNMENT);
    const tensor *last = &g_t[g_nt - 1];
    uint64_t data_bytes = last->offset + last->nbytes, total = hdr.n + data_bytes;
    uint64_t expert_bytes = 0;
    for (size_t i = 0; i < g_nt; i++)
        if (g_t[i].expert) expert_bytes += g_t[i].nbytes;
    fprintf(stderr,
            "make_synthetic_moe: qwen3moe, %d layers, %d experts (%d used), vocab %d, %s layout: %zu tensors, "
            "%" PRIu64 " bytes (%.2f GB; routed experts %.2f GB, header %.1f MB)\n",
            c.n_layer, c.n_expert, c.n_used, c.n_vocab, c.per_expert ? "per-expert" : "stacked", g_nt, total,
            (double)total / 1e9, (double)expert_bytes / 1e9, (double)hdr.n / 1e6);
    if (c.dry_run) return 0;

    struct statvfs sv;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", c.out);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    else snprintf(dir, sizeof dir, ".");
    if (statvfs(dir, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < total + (1ull << 30))
        die("not enough space in %s: %.2f GB free, %.2f GB needed (+1 GB margin)", dir,
            (double)sv.f_bavail * (double)sv.f_frsize / 1e9, (double)total / 1e9);

    snprintf(g_tmp_path, sizeof g_tmp_path, "%s.tmp", c.out);
    W.fd = open(g_tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (W.fd < 0) {
        g_tmp_path[0] = 0;
        die("cannot create %s.tmp: %s", c.out, strerror(errno));
    }
    W.sync = c.sync;
    for (int i = 0; i < N_BUFS; i++) {
        void *p;
        if (posix_memalign(&p, 4096, PIECE_BYTES)) die("out of memory");
        W.b[i].p = p;
    }
    ts_pool *pool;
    if (ts_pool_new(c.threads, &pool) != TS_OK) die("cannot start threads");
    pthread_t wt;

    double t0 = now(), last_report = t0;
    write_all(W.fd, hdr.p, hdr.n); /* before the writer thread owns the descriptor */
    W.pos = hdr.n;
    if (pthread_create(&wt, NULL, writer_main, NULL)) die("cannot start the writer thread");
    wbuf *b = get_buf();
    uint64_t pos = 0; /* in the data section */
    for (size_t i = 0; i < g_nt; i++) {
        const tensor *t = &g_t[i];
        uint64_t pad = t->offset - pos;
        if (b->n + pad > PIECE_BYTES) {
            put_buf(b);
            b = get_buf();
        }
        memset(b->p + b->n, 0, pad);
        b->n += pad;
        pos += pad;
        uint64_t bb = t->fill == FILL_QUANT ? ts_type_get(t->type)->block_bytes : 4096;
        uint64_t rel = 0;
        while (rel < t->nbytes) {
            uint64_t room = (PIECE_BYTES - b->n) / bb * bb;
            if (room == 0) {
                put_buf(b);
                b = get_buf();
                continue;
            }
            uint64_t n = t->nbytes - rel < room ? t->nbytes - rel : room;
            job j = {t, rel, n, b->p + b->n};
            ts_pool_run(pool, gen_fn, &j);
            b->n += n;
            rel += n;
            pos += n;
        }
        double tn = now();
        if (tn - last_report > 10) {
            fprintf(stderr, "  %5.1f%%  %.2f GB in %.0f s\n", 100.0 * (double)pos / (double)data_bytes, (double)pos / 1e9,
                    tn - t0);
            last_report = tn;
        }
    }
    put_buf(b);
    pthread_mutex_lock(&W.mu);
    W.done = true;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    pthread_join(wt, NULL);
    flush_behind(true);
    if (c.sync && fdatasync(W.fd) != 0) die("fdatasync %s: %s", g_tmp_path, strerror(errno));
    if (W.pos != total) die("wrote %" PRIu64 " bytes, expected %" PRIu64, W.pos, total);
    if (close(W.fd) != 0) die("close %s: %s", g_tmp_path, strerror(errno));
    if (rename(g_tmp_path, c.out) != 0) die("rename %s -> %s: %s", g_tmp_path, c.out, strerror(errno));
    g_tmp_path[0] = 0;
    double dt = now() - t0;
    fprintf(stderr, "make_synthetic_moe: wrote %s: %" PRIu64 " bytes in %.1f s (%.2f GB/s%s, %d generator threads)\n", c.out,
            total, dt, (double)total / 1e9 / dt, c.sync ? ", synced" : ", not synced", ts_pool_size(pool));
    ts_pool_free(pool);
    for (int i = 0; i < N_BUFS; i++) free(W.b[i].p);
    free(kv.p);
    free(hdr.p);
    free(g_t);
    return 0;
}
