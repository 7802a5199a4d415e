/* Engine internals shared by engine.c (model and session lifetime) and
 * forward.c (the transformer). */
#ifndef TS_FORWARD_INTERNAL_H
#define TS_FORWARD_INTERNAL_H

#include "compute/backend.h"
#include "diag/diag.h"
#include "forward/engine.h"

struct ts_model {
    gguf_file *gguf;     /* the open file; weights point into its mapping */
    ts_model_desc desc;  /* hyperparameters and bound weights */
    expert_cache *ecache;/* routed experts (MoE models), else NULL */
    ts_diag *diag;       /* instruments from the environment; NULL = all off */
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

    /* MoE (NULL for dense models) */
    float *router;        /* (n_batch, n_expert) router logits */
    float *exp_gate;      /* (n_ff_exp) one expert's gate, then act(gate)*up */
    float *exp_up;        /* (n_ff_exp) */
    float *exp_out;       /* (n_embd) one expert's output */
    float *sh_act;        /* (n_batch, n_ff_shexp) shared expert gate, then act*up */
    float *sh_up;         /* (n_batch, n_ff_shexp) */
    float *sh_out;        /* (n_batch, n_embd) */
    float *sh_gate;       /* (n_batch, 1) shared expert gate logits */
    float *router_host;   /* (n_batch, n_expert) host copy of router logits */
    float *sh_gate_host;  /* (n_batch) host copy */
    float *pilot_h;       /* (n_batch, n_embd) pilot probe: the residual through the target's norm */
    float *pilot_r;       /* (n_batch, n_expert) pilot probe router logits */
    float *pilot_host;    /* (n_batch, n_expert) host copy */
    bool chunk_final;     /* the chunk being run is the last of its eval */

    /* host memory */
    float *out;           /* (out_rows, n_vocab) returned logits: all-logits mode, or a non-host backend */
    int64_t out_rows;

    ts_timings timings;
    ts_tap_fn tap;
    void *tap_user;
};

/* Runs the transformer over n <= n_batch tokens at positions n_past.. and
 * writes logits of the last token (rows = 1) or of all n tokens into
 * s->logits. Does not advance n_past. Fails only on expert I/O. */
ts_status ts_forward_chunk(ts_session *s, const int32_t *ids, int n, bool all_rows, bool is_final_chunk);

/* The routed-expert FFN of layer l: s->xb (n, n_embd) normalized input ->
 * s->xb2 (n, n_embd). Experts run per token, in router rank order, the same
 * way whatever the residency, so output never depends on the cache. */
ts_status ts_forward_moe(ts_session *s, int l, int n);

/* TURBOSPARK_PILOT_PROBE: at layer l, with the post-attention residual in
 * s->x, run the target layer's router (l+1, or l itself in self mode) through
 * its own norm and record its top-k as that layer's "pred". Scratch only. */
void ts_forward_pilot(ts_session *s, int l, int n);

#endif
