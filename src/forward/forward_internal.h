/* Engine internals shared by engine.c (model and session lifetime),
 * forward.c / moe.c (the transformer) and instruments.c (the hooks). */
#ifndef TS_FORWARD_INTERNAL_H
#define TS_FORWARD_INTERNAL_H

#include <pthread.h>

#include "compute/backend.h"
#include "diag/diag.h"
#include "forward/engine.h"
#include "forward/hooks.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"

/* One weight made readable by the backend (unbound at model free). */
typedef struct ts_bound {
    const void *dev;
    size_t bytes;
} ts_bound;

/* Immutable after load: sessions on any threads read it; the expert cache
 * (shared on purpose) guards itself. */
struct ts_model {
    gguf_file *gguf;       /* the open file: host weights point into its mapping */
    ts_model_desc desc;    /* hyperparameters; every weight pointer is a backend address (weight_bind) */
    ts_backend *be;        /* where the weights live */
    bool own_be;           /* made by ts_model_load (opts->backend NULL) */
    tok_vocab *vocab;      /* the file's tokenizer, or NULL when it has none */
    expert_cache *ecache;  /* routed experts (MoE models), else NULL */
    ts_bound *bound;       /* (n_bound) weights bound on the backend */
    int n_bound;
    char name[256];        /* general.name, NUL-terminated */
};

/* Recording of a session's decode step on a backend that replays (capture_begin). */
typedef enum ts_rec_state {
    TS_REC_NONE = 0, /* no decode step run yet */
    TS_REC_WARM,     /* one ran plainly: the next is recorded */
    TS_REC_READY,    /* the stream holds the recording: steps replay it */
} ts_rec_state;

/* One conversation's state: one thread at a time. */
struct ts_session {
    ts_model *model;
    ts_backend *be;
    ts_stream *st;        /* this session's execution context on the backend */
    int n_ctx;            /* positions in the KV cache */
    int n_batch;          /* most tokens per forward chunk */
    int n_past;           /* positions filled */
    bool all_logits;
    ts_type kv_type;      /* TS_TYPE_F16 / TS_TYPE_F32 */

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
    float *logits;        /* (logits_rows, n_vocab) where the LM head writes this eval's logits: logits_dev or logits_map */
    float *logits_dev;    /* (logits_rows, n_vocab) in the arena; NULL with TS_LOGITS_HOST */
    float *logits_map;    /* (n_vocab) the backend's host memory, which it maps; NULL with TS_LOGITS_DEVICE */
    ts_logits_dest logits_dest; /* ts_session_opts.logits_dest resolved: DEVICE where mapped logits cannot be or
                                   (AUTO) do not pay; AUTO and HOST only on a device backend, one row, no instruments */
    int logits_rows;      /* 1, or n_batch in all-logits mode */
    ts_kv_layer *kv;      /* (n_layer) caches inside the arena */
    int32_t *pos;         /* (n_batch) positions of the chunk (backend memory) */
    int32_t *ids_dev;     /* (n_batch) token ids of the chunk (backend memory) */

    /* MoE (NULL for dense models) */
    float *router;        /* (max(n_batch, 2), n_expert) router logits; streamed decode: row 1 the folded pilot's */
    float *exp_x;         /* (n_batch * n_expert_used, n_embd) every (token, rank)'s input, gathered in expert order */
    float *exp_gate;      /* (n_batch * n_expert_used, n_ff_exp) every (token, rank)'s gate, then act(gate)*up, in
                             expert order; decode: the top-k experts' rows in rank order */
    float *exp_up;        /* the same shape as exp_gate */
    float *exp_out;       /* (n_batch * n_expert_used, n_embd) every (token, rank)'s expert output, grouped by expert */
    float *sh_act;        /* (n_batch, n_ff_shexp) shared expert gate, then act*up */
    float *sh_up;         /* (n_batch, n_ff_shexp) */
    float *sh_out;        /* (n_batch, n_embd) */
    float *sh_gate;       /* (n_batch, 1) shared expert gate logits */
    int32_t *moe_ids_dev; /* (max(n_batch, 2), n_expert_used) each token's top-k in rank order (moe_route);
                             streamed decode with pilot prefetch: row 1 is the pilot's guess for the next layer */
    float *moe_w_dev;     /* (max(n_batch, 2), n_expert_used) their router weights */
    int32_t *moe_tok_dev; /* (n_batch * n_expert_used) device copy of moe_tok (gather_rows) */
    int32_t *moe_row_dev; /* (n_batch, n_expert_used) device copy of moe_row (moe_combine) */
    const void **moe_tab_dev; /* (EXPERT_PROJ_COUNT, n_expert) streamed mode: the expert tables of the pass
                                 being run (backend addresses of the fetched slots), copied from moe_tab_host */
    float *pilot_h;       /* (n_batch, n_embd) pilot probe or prefetch: the residual through the target's norm */
    float *pilot_r;       /* (n_batch, n_expert) pilot probe or prefetch: the target's router logits */

    /* host memory */
    int32_t *pos_host;    /* (2, n_batch) backend host memory: the chunk's positions, then its ids */
    float *router_host;   /* (n_batch, n_expert) host copy of router logits */
    float *pilot_host;    /* (n_batch, n_expert) host copy */
    int32_t *moe_ids;     /* (max(n_batch, 2), n_expert_used) backend host memory: copy of moe_ids_dev (grouping, the cache, hooks) */
    int32_t *moe_row;     /* (n_batch, n_expert_used) row of exp_out holding (token, rank)'s expert output */
    int32_t *moe_tok;     /* (n_batch * n_expert_used) tokens, grouped by expert in moe_order, ascending within */
    int32_t *moe_order;   /* (n_expert) the chunk's distinct experts, by first appearance in (token, rank) order */
    int32_t *moe_cnt;     /* (n_expert) tokens routed to each expert in the chunk */
    int32_t *moe_off;     /* (n_expert) first moe_tok / exp_out row of each expert's group */
    int32_t *moe_goff;    /* (n_expert) moe_off in moe_order's order (ts_expert_groups.off) */
    int32_t *moe_gcnt;    /* (n_expert) moe_cnt in moe_order's order */
    expert_cache_pass moe_held; /* streamed decode: the last layer's pass, its slots pinned until the stream
                                   has run its kernels (released at the next sync: ts_forward_moe_release) */
    int32_t moe_held_l;   /* the layer of moe_held; -1: none held */
    /* pilot prefetch (streamed experts in backend slots, ts_session_opts.pilot_prefetch) */
    bool prefetch;        /* on for this session */
    int32_t prefetch_depth; /* guesses copied per layer, 1..top-k */
    ts_stream *copy_st;   /* backend slots: the prefetches' copies and prefill's next pass's, overlapped with the
                             compute stream's work */
    ts_event *ahead_ev;   /* recorded on copy_st after a prefill pass's copies (streamed_passes): st waits for it
                             before that pass's matmuls */
    ts_event *demand_ev;  /* recorded on st after a layer's own misses: the prefetch's copies start after it,
                             so they never share the bus with the copies the layer is waiting for */
    ts_event *pf_done_ev; /* recorded on copy_st after a prefetch's copies */
    bool pf_unsynced;     /* copies went on copy_st since its last sync (errors show there) */
    expert_cache_pass pf_pass; /* the last prefetch: its slots pinned until the layer's fetch */
    int32_t pf_l;         /* the layer pf_pass warmed; -1: none */
    /* streamed decode planned on the backend (expert_cache_device_*) */
    bool dev_plan;        /* this session's decode steps plan their passes on the backend (ts_session_opts.expert_plan) */
    bool dplan_on;        /* the step being run does (not a prefill chunk, nor a recording backend's first step) */
    int32_t dpf_l;        /* the layer a backend-planned prefetch on copy_st is filling; st waits for it before
                             that layer's routing; -1: none */
    const void **moe_tab_host; /* (EXPERT_PROJ_COUNT, n_expert) backend host memory: moe_tab_dev's source; an entry
                                  is set for the experts of each fetch, the others are stale and never read */
    float *out;           /* (out_rows, n_vocab) returned logits: all-logits mode, or a non-host backend */
    int64_t out_rows;
    float *last_logits;   /* the last row of the last eval's logits (host), for sampling; NULL before any eval
                             and when they stayed on the device (dev_logits) */
    bool dev_logits;      /* the last eval's logits (1, n_vocab) are in s->logits on a device backend, not copied out */
    ts_rec_state rec;     /* decode-step recording (decode_step in engine.c) */
    bool capturing;       /* a decode step is being recorded: a host point ends a segment and starts the next */
    bool capture_open;    /* a segment's recording is open on the stream */
    int n_seg;            /* host points of the recorded step (streamed experts): n_seg + 1 segments */
    int32_t seg_layer[TS_MAX_SEGMENTS]; /* (n_seg) the MoE layer whose host work follows segment i */
    int32_t *tokens;      /* (n_ctx) ids in the context, n_past of them */
    bool chunk_final;     /* the chunk being run is the last of its eval */

    sampler *smp;         /* the session's sampler */
    ts_sampler_params sp; /* its parameters */
    ts_timings timings;

    /* instruments: NULL when all are off (then hooks is NULL too) */
    ts_diag *diag;
    const ts_hooks *hooks; /* &hook_tab when diag is set */
    ts_hooks hook_tab;     /* ts_diag_hooks with user = diag */
};

/* A chunk's n ids and positions n_past.. into s->pos_host (stage, host
 * stores only), then the copy of them into s->pos and s->ids_dev, which the
 * forward pass reads (send, enqueued). A recorded decode step holds its
 * send: the copy reads s->pos_host when the recording is replayed, so a
 * replayed token stages and launches, no copy of its own. */
void ts_forward_stage(ts_session *s, const int32_t *ids, int n);
void ts_forward_send(ts_session *s, int n);

/* Tests: sessions made after this call take TS_LOGITS_AUTO's host path
 * where the LM head's rows are at least row_bytes long (default
 * TS_LOGITS_HOST_MIN_ROW_BYTES; 0: on every device backend). Not thread-safe. */
void ts_session_logits_auto_bar(uint64_t row_bytes);

/* Runs the transformer over the n <= n_batch tokens sent by
 * ts_forward_send and writes logits of the last token (rows = 1) or of all
 * n tokens into s->logits. Does not advance n_past. Fails only on expert I/O.
 * Host values it passes to the ops depend on n, all_rows and the session
 * only, and the ops read positions from s->pos: a decode step (n = 1) can be
 * recorded once and replayed (capture_begin). */
ts_status ts_forward_chunk(ts_session *s, int n, bool all_rows, bool is_final_chunk);

/* The routed-expert FFN of layer l: s->xb (n, n_embd) normalized input;
 * its output (s->xb2 as scratch) is added to the residual s->x. The sums
 * run in router rank order whatever the residency, so output never depends
 * on the cache. */
ts_status ts_forward_moe(ts_session *s, int l, int n);
/* Syncs the stream and releases a streamed decode pass still pinned (the
 * end of a chunk, or an error); TS_OK when none is held, or while a step is
 * being recorded (decode_step releases after). */
ts_status ts_forward_moe_release(ts_session *s);
/* Streamed decode's host work for MoE layer l, between two recorded
 * segments of a decode step (or inline when nothing records): the routed ids
 * read back (a sync), the previous layer's pass released, this layer's
 * experts fetched (the misses' copies and the session's tables enqueued) and
 * their pass held. */
ts_status ts_forward_moe_host(ts_session *s, int l);

/* A replayed decode step ran no host code: counts the expert-cache passes
 * its MoE layers made through the tables, as the plain step does. */
void ts_forward_moe_count_replay(ts_session *s);

/* The session sampler's next id from host_logits (n_vocab), or, when NULL,
 * from the last eval's logits where they are (dev_logits); -1 with the
 * reason left when none can be drawn. Does not accept it. */
int32_t ts_session_draw(ts_session *s, float *host_logits);


/* The hooks that feed a session's ts_diag (instruments.c). */
extern const ts_hooks ts_diag_hooks;
/* Resolves the phase marks recorded so far (after the stream synced). */
void ts_diag_phases_flush(ts_session *s);

#endif
