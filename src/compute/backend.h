/* The op set the forward pass runs on. A backend (CPU now, CUDA later)
 * implements these few ops; the forward pass only calls them and does
 * pointer arithmetic on the buffers it got from the backend's alloc, so it
 * never knows where the data lives or how many threads run an op.
 *
 * Shapes are (rows, cols) row-major with cols fastest, rows = tokens for
 * activations. Every op is deterministic: its result does not depend on the
 * number of threads. */
#ifndef TS_BACKEND_H
#define TS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* A weight matrix bound in place from the file: GGUF ne = [n_in, n_out], so
 * each output feature is one contiguous quantized row of n_in elements. */
typedef struct ts_mat {
    const void *data;   /* (n_out, row_bytes) in `type` */
    uint32_t type;      /* ts_type of the rows */
    int64_t n_in;       /* elements per row (GGUF ne[0]) */
    int64_t n_out;      /* rows (GGUF ne[1]) */
    uint64_t row_bytes; /* bytes per row */
    const float *bias;  /* (n_out) added to the product, or NULL */
    const char *name;   /* tensor name, for messages and instruments */
} ts_mat;

typedef enum ts_act {
    TS_ACT_SILU = 0,      /* x * sigmoid(x) */
    TS_ACT_GELU_TANH = 1, /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
} ts_act;

typedef enum ts_rope_mode {
    TS_ROPE_NORMAL = 0, /* rotate adjacent pairs (x[2i], x[2i+1]) */
    TS_ROPE_NEOX = 1,   /* rotate halves (x[i], x[i + n_rot/2]) */
} ts_rope_mode;

/* One layer's KV cache: for each kv head, n_ctx positions of head_dim
 * elements, so attention for a head reads one contiguous block. */
typedef struct ts_kv_layer {
    void *k; /* (n_head_kv, n_ctx, head_dim) in kv_type */
    void *v; /* (n_head_kv, n_ctx, head_dim) in kv_type */
} ts_kv_layer;

/* Attention over tokens at positions pos0 .. pos0+n_tok-1, whose K/V are
 * already in the cache: token t attends to positions
 * [max(0, pos0+t-window+1), pos0+t] (window 0 = no limit), causal. */
typedef struct ts_attn_desc {
    int n_tok;         /* query tokens */
    int pos0;          /* position of the first query token */
    int n_head;        /* query heads */
    int n_head_kv;     /* kv heads; n_head % n_head_kv == 0 (GQA) */
    int head_dim;      /* elements per head for q, k and v */
    int n_ctx;         /* positions per head in the cache (its stride) */
    int window;        /* sliding window in positions, 0 = global */
    float scale;       /* multiplies q.k before the softmax */
    uint32_t kv_type;  /* TS_TYPE_F16 or TS_TYPE_F32 */
} ts_attn_desc;

/* What a session will ask of the backend, so it can size its own scratch
 * (quantized activations, attention scores) once, up front. */
typedef struct ts_backend_reserve {
    int64_t max_tokens; /* most rows of any activation passed to an op */
    int64_t max_in;     /* widest n_in of any matmul */
    int n_ctx;          /* longest attention span */
    int n_head;         /* query heads */
    bool exact_act;     /* matmuls keep activations in F32 (weights dequantized
                           per row) instead of quantizing them to Q8: the
                           reference-precision mode, slower */
} ts_backend_reserve;

typedef struct ts_backend ts_backend;

typedef struct ts_backend_ops {
    const char *name;
    void (*destroy)(ts_backend *be);
    ts_status (*reserve)(ts_backend *be, const ts_backend_reserve *r);
    /* Memory the ops read and write: zero-filled; NULL (error set) on failure. */
    void *(*alloc)(ts_backend *be, size_t bytes);
    void (*dealloc)(ts_backend *be, void *p, size_t bytes);
    /* Copies n floats from backend memory to host memory. */
    void (*download)(ts_backend *be, float *host, const float *src, size_t n);

    /* out (n, emb->n_in) = rows ids of emb, dequantized, times scale */
    void (*embed)(ts_backend *be, const ts_mat *emb, const int32_t *ids, int n, float scale, float *out);
    /* For each i: y[i] (n_tok, w[i]->n_out) = x (n_tok, n_in) . w[i]^T (+ bias).
     * All w[i] share x and its n_in; x is converted to each weight type's
     * partner format once. */
    void (*matmul)(ts_backend *be, int n_w, const ts_mat *const *w, float *const *y, const float *x, int n_tok);
    /* out (rows, n) = x / rms(x) * w, per row; out may equal x */
    void (*rmsnorm)(ts_backend *be, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out);
    /* cs (n_tok, n_rot/2, 2): cos/sin of pos[t] * freq[i], times mscale */
    void (*rope_table)(ts_backend *be, const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs);
    /* x (n_tok, n_head, head_dim): rotates the first n_rot dims of each head */
    void (*rope)(ts_backend *be, float *x, int n_tok, int n_head, int head_dim, int n_rot, const float *cs, ts_rope_mode mode);
    /* Stores k, v (n_tok, n_head_kv, head_dim) at positions pos0.. in the cache. */
    void (*kv_store)(ts_backend *be, const ts_kv_layer *kv, const ts_attn_desc *d, const float *k, const float *v);
    /* out (n_tok, n_head, head_dim) = softmax(scale q.K^T + mask) V */
    void (*attention)(ts_backend *be, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *out);
    /* out (n) = act(gate) * up; out may equal gate */
    void (*act_mul)(ts_backend *be, ts_act act, const float *gate, const float *up, int64_t n, float *out);
    /* x (n) += y */
    void (*add)(ts_backend *be, float *x, const float *y, int64_t n);
    /* x (n) += a * y (MoE: an expert's output times its router weight) */
    void (*scale_add)(ts_backend *be, float *x, const float *y, float a, int64_t n);
    /* x (n) = a * y */
    void (*scale)(ts_backend *be, float *x, const float *y, float a, int64_t n);
    /* x (n) = cap * tanh(x / cap) */
    void (*softcap)(ts_backend *be, float *x, int64_t n, float cap);
} ts_backend_ops;

struct ts_backend {
    const ts_backend_ops *ops;
    bool host_memory; /* alloc'd buffers are plain host memory (no download needed) */
    int n_threads;
};

/* The CPU backend: SIMD kernels over a persistent pool of n_threads threads
 * (<= 0: one per available core). */
ts_status ts_backend_cpu_new(int n_threads, ts_backend **out);

static inline void ts_backend_free(ts_backend *be) {
    if (be) be->ops->destroy(be);
}

#endif
