/* Engine internals shared by engine.c (model and session lifetime) and
 * forward.c (the transformer). */
#ifndef TS_FORWARD_INTERNAL_H
#define TS_FORWARD_INTERNAL_H

#include "compute/backend.h"
#include "forward/engine.h"

struct ts_model {
    gguf_file *gguf;     /* the open file; weights point into its mapping */
    ts_model_desc desc;  /* hyperparameters and bound weights */
};

struct ts_session {
    ts_model *model;
    ts_backend *be;
    int n_ctx;            /* positions in the KV cache */
    int n_batch;          /* most tokens per forward chunk */
    int n_past;           /* positions filled */
    bool all_logits;
    uint32_t kv_type;     /* TS_TYPE_F16 / TS_TYPE_F32 */

    /* backend memory, one arena: activations of up to n_batch tokens */
    void *arena;
    size_t arena_bytes;
    float *x;             /* (n_batch, n_embd) residual stream */
    float *xb;            /* (n_batch, n_embd) normalized input of a block */
    float *xb2;           /* (n_batch, n_embd) output of a block */
    float *q;             /* (n_batch, n_head*head_dim) */
    float *k;             /* (n_batch, n_head_kv*head_dim) */
    float *v;             /* (n_batch, n_head_kv*head_dim) */
    float *att;           /* (n_batch, n_head*head_dim) attention output */
    float *ffn_act;       /* (n_batch, n_ff) gate projection, then act(gate)*up: the FFN tap */
    float *ffn_up;        /* (n_batch, n_ff) up projection */
    float *rope_cs[2];    /* (n_batch, n_rot/2, 2) cos/sin: [0] global layers, [1] sliding */
    float *logits;        /* (logits_rows, n_vocab) */
    int logits_rows;      /* 1, or n_batch in all-logits mode */
    ts_kv_layer *kv;      /* (n_layer) caches inside the arena */
    int32_t *pos;         /* (n_batch) positions of the chunk, host */

    /* host memory */
    float *out;           /* (out_rows, n_vocab) returned logits: all-logits mode, or a non-host backend */
    int64_t out_rows;

    ts_timings timings;
    ts_tap_fn tap;
    void *tap_user;
};

/* Runs the transformer over n <= n_batch tokens at positions n_past.. and
 * writes logits of the last token (rows = 1) or of all n tokens into
 * s->logits. Does not advance n_past. */
void ts_forward_chunk(ts_session *s, const int32_t *ids, int n, bool all_rows, bool is_final_chunk);

#endif
