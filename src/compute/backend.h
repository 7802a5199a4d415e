/* The op set the forward pass runs on. A backend (CPU now, CUDA later)
 * implements these few ops; the forward pass only calls them and does
 * pointer arithmetic on the buffers it got from the backend (alloc,
 * weight_bind), which it never dereferences: it never knows where the data
 * lives or how many threads run an op.
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
#include "tensor/types.h"

/* Recorded segments a stream keeps at most (capture_begin). */
#define TS_MAX_SEGMENTS 256

/* Weights one matmul call takes at most (every backend). */
#define TS_MATMUL_MAX_W 8

/* A weight matrix bound in place from the file: GGUF ne = [n_in, n_out], so
 * each output feature is one contiguous quantized row of n_in elements. */
typedef struct ts_mat {
    const void *data;   /* (n_out, row_bytes) in `type` */
    ts_type type;       /* of the rows */
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
    ts_type kv_type;   /* TS_TYPE_F16 or TS_TYPE_F32 */
    const int32_t *pos; /* (n_tok) pos0, pos0+1, ... in backend memory: a device backend reads
                           the positions from here, not pos0, so a recorded decode step
                           (capture_begin) stays valid as the position advances */
} ts_attn_desc;

/* RoPE of one layer's q and k (rope_kv_store). */
typedef struct ts_rope_args {
    const float *cs;     /* (n_tok, n_rot/2, 2) the chunk's cos/sin table (rope_table) */
    const float *freq;   /* (n_rot/2) the frequencies cs was made from, with mscale: a backend
                            may compute the angles from pos itself, as rope_table does */
    float mscale;
    int n_rot;           /* rotated dims of each head, even, <= head_dim */
    ts_rope_mode mode;
    const float *q_norm; /* (head_dim) per-head RMSNorm of q before the rotation, or NULL */
    const float *k_norm; /* (head_dim) per-head RMSNorm of k, or NULL (both or neither) */
    float eps;           /* of those norms */
} ts_rope_args;

/* The sampler chain of src/sample (docs/SAMPLING.md) run where the logits
 * are: the state goes in and comes back, so the host sampler stays the one
 * source of truth and a draw here equals its draw on the same logits. */
typedef struct ts_sample_desc {
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off */
    uint64_t rng[4];       /* xoshiro256** state: in, and advanced on return */
    const int32_t *recent; /* (recent_cap) host ring of accepted ids, -1 = empty; or NULL */
    int32_t recent_cap;
} ts_sample_desc;

/* What a session will ask of its stream, so the backend can size the
 * stream's scratch (quantized activations, attention scores) once, up front. */
typedef struct ts_backend_reserve {
    int64_t max_tokens; /* most rows of any activation passed to an op */
    int64_t max_in;     /* widest n_in of any matmul */
    int n_ctx;          /* longest attention span */
    int n_head;         /* query heads */
    int64_t max_expert_rows; /* most rows of a moe_matmul_grouped (n_batch * top-k), 0 without experts */
    bool exact_act;     /* matmuls keep activations in F32 (weights dequantized
                           per row) instead of quantizing them to Q8: the
                           reference-precision mode, slower */
} ts_backend_reserve;

/* The routed experts of one projection of one MoE layer, addressable by id
 * (expert_cache_tables): expert e's (n_out, row_bytes) matrix in `type` is
 * at table[e]. The table is backend memory, so a device backend reads the
 * selected ids and the pointers on the device and a decode step never waits
 * for the host. All experts of a projection share type and shape. */
typedef struct ts_expert_mat {
    const void *const *table; /* (n_expert) backend memory: backend addresses of each expert's matrix */
    const void *const *host_table; /* (n_expert) host memory: the same addresses, for an op that launches per expert */
    int32_t n_expert;
    ts_type type;             /* of the rows */
    int64_t n_in;             /* elements per row */
    int64_t n_out;            /* rows */
    uint64_t row_bytes;       /* bytes per row */
    const char *name;         /* tensor name, for messages */
} ts_expert_mat;

/* A prefill chunk's (token, rank) rows sorted by expert (forward/moe.c):
 * group g is expert id[g] over rows off[g] .. off[g] + cnt[g] - 1. */
typedef struct ts_expert_groups {
    int n_group;          /* distinct experts of the chunk */
    const int32_t *id;    /* (n_group) host: each group's expert */
    const int32_t *off;   /* (n_group) host: its first row */
    const int32_t *cnt;   /* (n_group) host: its rows (>= 1) */
    int n_rows;           /* all rows: the sum of cnt */
    /* (n_rows) host, or NULL: the token each row of x was gathered from.
     * Rows of one token hold the same activations, which a backend may then
     * convert once (gate/up: a token's k rows); NULL where rows differ */
    const int32_t *row_tok;
} ts_expert_groups;

/* One MoE layer's expert slot cache kept in backend memory, for streamed
 * decode planned by the backend (expert_pass): the policy's state, the
 * same fields as experts/policy.h's cache_layer; the slots; the tier the
 * misses are copied from; and the counters the passes add to. The expert
 * cache (experts/expert_cache.c) owns it and keeps its host copy in step. */
typedef enum ts_xpass_stat {
    TS_XP_PASSES, TS_XP_REQUESTS, TS_XP_HITS, TS_XP_MISSES, TS_XP_COLD, TS_XP_EVICT, TS_XP_BYTES_REQ, TS_XP_BYTES_UP,
    TS_XP_PF_COPIES, TS_XP_PF_SAVED, TS_XP_PF_WASTED, TS_XP_BYTES_PF, TS_XP_COUNT
} ts_xpass_stat; /* expert_cache_stats's fields of the same names */
#define TS_XP_LAYOUT_W 5 /* u64 per expert in ts_expert_slots.layout */
typedef struct ts_expert_slots {
    int32_t n_slots;        /* 1..1024 */
    int32_t n_experts;
    int32_t policy;         /* cache_policy's value */
    int32_t *slot_expert;   /* (n_slots) expert held, -1 = empty */
    uint64_t *slot_tick;    /* (n_slots) tick of last use */
    int32_t *expert_slot;   /* (n_experts) slot holding the expert, -1 = not resident */
    uint64_t *expert_count; /* (n_experts) cumulative requests */
    uint64_t *tick;         /* (1) passes committed so far */
    uint8_t *prefetched;    /* (n_slots) 1 = filled by a prefetch no pass has asked for yet */
    uint64_t *stats;        /* (TS_XP_COUNT) cumulative counters */
    const uint64_t *layout; /* (n_experts, TS_XP_LAYOUT_W): offsets inside a slot of the gate, up and down
                               slices; the laid-out length (what a miss copies, from the slot's start); the
                               slices' bytes */
    uint8_t *slots;         /* (n_slots, stride) */
    uint64_t stride;        /* bytes a slot */
    const uint8_t *tier;    /* (n_experts, stride) expert e laid out at tier + e * stride: host memory from
                               host_alloc, which the backend's ops read directly */
    int32_t *plan;          /* (3, 64) room for a pass's plan (slot, hit, evicted per request) */
} ts_expert_slots;

/* An execution context: the ops of one session run on it, in order. The CPU
 * backend gives each stream its own thread pool and scratch, a GPU backend
 * its own device stream and scratch, so sessions never share mutable state
 * through the backend. A stream is used by one thread at a time. */
typedef struct ts_stream ts_stream;
/* A point on a stream's timeline (phase timings): host clock on the CPU,
 * a device event on a GPU. */
typedef struct ts_event ts_event;

typedef struct ts_backend_ops {
    const char *name;
    void (*destroy)(ts_backend *be);
    /* One line: "cpu: avx512, 2 threads" */
    void (*describe)(const ts_backend *be, char *buf, size_t n);

    /* ---- memory; thread-safe, callable from any thread ---- */
    /* Device memory the ops read and write: zero-filled; NULL (error set) on failure. */
    void *(*alloc)(ts_backend *be, size_t bytes);
    void (*dealloc)(ts_backend *be, void *p, size_t bytes);
    /* Host memory the device can copy from/to fast (pinned on a GPU; plain
     * page-aligned memory on the CPU): staging and expert slots filled by pread. */
    void *(*host_alloc)(ts_backend *be, size_t bytes);
    void (*host_free)(ts_backend *be, void *p, size_t bytes);
    /* Free and total device memory now (sizing the expert slots); NULL on a
     * backend whose memory is the host's. */
    ts_status (*mem_info)(ts_backend *be, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Makes bytes of host memory that stay valid for the model's life (a
     * tensor in the file mapping) readable by the ops and returns the
     * address the ops take: the CPU returns host itself (zero-copy, nothing
     * repacked), a GPU uploads a copy it owns. unbind releases it. */
    ts_status (*weight_bind)(ts_backend *be, const void *host, size_t bytes, const void **dev);
    void (*weight_unbind)(ts_backend *be, const void *dev, size_t bytes);

    /* ---- streams ---- */
    ts_status (*stream_new)(ts_backend *be, int n_threads, ts_stream **out);
    void (*stream_free)(ts_stream *st);
    ts_status (*reserve)(ts_stream *st, const ts_backend_reserve *r);
    /* Copies, ordered with the stream's ops: to_host returns when the bytes
     * are in host memory; to_host_async may return before (the bytes are
     * there after the next sync, which a caller about to sync anyway saves
     * a round trip to the device with: a decode step's logits); to_device
     * may return before the copy is done (the host buffer must stay
     * unchanged until the next sync). Async copies need host memory from
     * host_alloc. */
    void (*to_host)(ts_stream *st, void *host, const void *dev, size_t bytes);
    void (*to_host_async)(ts_stream *st, void *host, const void *dev, size_t bytes);
    void (*to_device)(ts_stream *st, void *dev, const void *host, size_t bytes);
    /* Waits for everything enqueued; reports a device failure (TS_ERR_DEVICE
     * naming the op) that happened since the last sync. */
    ts_status (*sync)(ts_stream *st);
    ts_event *(*event_new)(ts_backend *be);
    void (*event_free)(ts_backend *be, ts_event *ev);
    void (*event_record)(ts_stream *st, ts_event *ev);
    /* st's later ops wait until ev, recorded on another stream, has passed;
     * the host does not wait (a backend whose streams run on the caller's
     * thread has nothing to do) */
    void (*event_wait)(ts_stream *st, ts_event *ev);
    /* The host waits until ev has passed (cheaper than sync: no error
     * check; a failure shows at the stream's next sync). */
    ts_status (*event_sync)(ts_backend *be, ts_event *ev);
    /* Seconds from a to b, both recorded (waits for b). */
    double (*event_elapsed)(ts_event *a, ts_event *b);

    /* ---- compute, enqueued on a stream ---- */
    /* out (n, emb->n_in) = rows ids of emb, dequantized, times scale */
    void (*embed)(ts_stream *st, const ts_mat *emb, const int32_t *ids, int n, float scale, float *out);
    /* For each i < n_w <= TS_MATMUL_MAX_W: y[i] (n_tok, w[i]->n_out) =
     * x (n_tok, n_in) . w[i]^T (+ bias). All w[i] share x and its n_in; x is
     * converted to each weight type's partner format once. */
    void (*matmul)(ts_stream *st, int n_w, const ts_mat *const *w, float *const *y, const float *x, int n_tok);
    /* out (rows, n) = x / rms(x) * w, per row; out may equal x */
    void (*rmsnorm)(ts_stream *st, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out);
    /* cs (n_tok, n_rot/2, 2): cos/sin of pos[t] * freq[i], times mscale; ready
     * for the chunk's ops (a backend whose fused ops compute the angles from
     * pos may make it only when an op first reads it: cuda's rope_due) */
    void (*rope_table)(ts_stream *st, const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs);
    /* x (n_tok, n_head, head_dim): rotates the first n_rot dims of each head */
    void (*rope)(ts_stream *st, float *x, int n_tok, int n_head, int head_dim, int n_rot, const float *cs, ts_rope_mode mode);
    /* Stores k, v (n_tok, n_head_kv, head_dim) at positions pos0.. in the cache. */
    void (*kv_store)(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *k, const float *v);
    /* out (n_tok, n_head, head_dim) = softmax(scale q.K^T + mask) V */
    void (*attention)(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *out);
    /* out (n) = act(gate) * up; out may equal gate */
    void (*act_mul)(ts_stream *st, ts_act act, const float *gate, const float *up, int64_t n, float *out);
    /* x (n) += y */
    void (*add)(ts_stream *st, float *x, const float *y, int64_t n);
    /* x (n) += a * y (MoE: an expert's output times its router weight) */
    void (*scale_add)(ts_stream *st, float *x, const float *y, float a, int64_t n);
    /* x (n) = a * y */
    void (*scale)(ts_stream *st, float *x, const float *y, float a, int64_t n);
    /* x (n) = cap * tanh(x / cap) */
    void (*softcap)(ts_stream *st, float *x, int64_t n, float cap);

    /* ---- routed experts (MoE), ids and weights in backend memory ---- */
    /* Per token t < n_tok: ids[t] (k) = the top-k of r[t] (n_expert) and w[t]
     * (k) their router weights, exactly ts_moe_route_row. */
    void (*moe_route)(ts_stream *st, const float *r, int n_tok, int n_expert, int k, bool renorm, int32_t *ids, float *w);
    /* For each s < n_set (1 or 2) and i < k: row i of y[s] (k, w[s]->n_out)
     * = x_i . W_s[ids[i]]^T, x_i = x (1, n_in) or, when x_per_expert, row i
     * of x (k, n_in). Each row is what matmul gives for that expert alone. */
    void (*moe_matmul)(ts_stream *st, int n_set, const ts_expert_mat *const *w, float *const *y, const int32_t *ids, int k,
                       const float *x, bool x_per_expert);
    /* Prefill: for each s < n_set (1 or 2), y[s] (g->n_rows, w[s]->n_out)
     * row r = x_r . W_s[id of r's group]^T, x (g->n_rows, n_in) sorted by
     * expert; each group's rows are what matmul gives for that expert over
     * those rows alone. */
    void (*moe_matmul_grouped)(ts_stream *st, int n_set, const ts_expert_mat *const *w, float *const *y, const ts_expert_groups *g,
                               const float *x);
    /* out (n_tok, n): out[t] = w[t][0] * y[r(t,0)], then out[t] += w[t][i] *
     * y[r(t,i)] for i = 1..k-1 in rank order (scale, then scale_add), with
     * r(t,i) = rows[t*k + i], or t*k + i when rows is NULL. */
    void (*moe_combine)(ts_stream *st, float *out, const float *y, const float *w, const int32_t *rows, int n_tok, int k,
                        int64_t n);
    /* out row j (n) = x row idx[j] for j < n_rows: an expert's tokens gathered */
    void (*gather_rows)(ts_stream *st, float *out, const float *x, const int32_t *idx, int n_rows, int64_t n);
    /* x[t] (n) += sigmoid(g[t]) * y[t] for t < n_tok (qwen2moe's gated shared
     * expert), sigmoid = 1 / (1 + expf(-g)) */
    void (*gated_add)(ts_stream *st, float *x, const float *y, const float *g, int n_tok, int64_t n);

    /* ---- fused forms: each is exactly the composition its comment gives
     * (the CPU runs that composition, see ts_backend_compose_*); a device
     * backend fuses it to save launches and passes over memory ---- */
    /* y[i] = matmul(rmsnorm(x, norm, eps)) for each w[i]; xn (n_tok, n_in)
     * receives the normalized rows when keep_xn (the MoE FFN reads them
     * again), else it is room, written or not (undefined after) */
    void (*norm_matmul)(ts_stream *st, const float *x, const float *norm, float eps, float *xn, bool keep_xn, int n_w,
                        const ts_mat *const *w, float *const *y, int n_tok);
    /* x (n_tok, w->n_out) += a (n_tok, w->n_in) . w^T; tmp (n_tok, n_out):
     * room for the product, written or not */
    void (*matmul_add)(ts_stream *st, const ts_mat *w, const float *a, int n_tok, float *x, float *tmp);
    /* act_mul(gate, up -> gate) over (n_tok, w->n_in), then matmul_add(w, gate,
     * x, tmp): the FFN's activation and its down projection into the residual */
    void (*act_matmul_add)(ts_stream *st, ts_act act, float *gate, const float *up, const ts_mat *w, int n_tok, float *x, float *tmp);
    /* attention(kv, d, q -> att), then matmul_add(w, att, x, tmp): the
     * attention output's projection into the residual */
    void (*attn_matmul_add)(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *att, const ts_mat *w,
                            float *x, float *tmp);
    /* act_mul(gate, up -> gate) over (k, w->n_in), then moe_matmul(1, w, y,
     * ids, k, gate, x_per_expert): the experts' activation and their down
     * projections */
    void (*moe_act_matmul)(ts_stream *st, ts_act act, float *gate, const float *up, const ts_expert_mat *w, float *y,
                           const int32_t *ids, int k);
    /* moe_combine(tmp, y, w, NULL, 1, k, n), then add(x, tmp, n): one token's
     * weighted expert sum into the residual; tmp (n) is room, written or not */
    void (*moe_combine_add)(ts_stream *st, float *x, float *tmp, const float *y, const float *w, int k, int64_t n);
    /* per-head norms (r->q_norm/k_norm), rope(q), rope(k), then kv_store(k, v) */
    void (*rope_kv_store)(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q, float *k,
                          const float *v);
    /* rope_kv_store(kv, d, r, q, k, v), then attn_matmul_add(kv, d, q, att, w,
     * x, tmp): a layer's attention from its q, k, v to the residual; q and k
     * are undefined after (rotated or not) */
    void (*rope_attn_matmul_add)(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q,
                                 float *k, const float *v, float *att, const ts_mat *w, float *x, float *tmp);

    /* ---- recorded decode steps; NULL on a backend without them ----
     * Between capture_begin(seg) and capture_end the stream's ops are
     * recorded, not run, as segment seg (0 <= seg < TS_MAX_SEGMENTS; seg 0
     * drops every earlier recording); replay(seg) runs segment seg. A step
     * that needs the host between its ops (streamed experts: the routing
     * decides what the cache copies) is several segments, with the host's
     * work between their replays. A recording keeps every host argument, so
     * whatever changes between steps must be read from backend memory
     * (positions: ts_attn_desc.pos; ids: the embed op's ids). A failed op
     * inside a recording makes capture_end fail and keeps no recording. */
    ts_status (*capture_begin)(ts_stream *st, int seg);
    ts_status (*capture_end)(ts_stream *st);
    ts_status (*replay)(ts_stream *st, int seg);

    /* One MoE layer's routed pass of streamed decode with no host in the
     * loop (NULL on a backend without it): over c's state exactly
     * cache_plan_make then cache_commit (a prefetch: cache_prefetch_commit),
     * with the prefetch judgement and the counters of the host cache's
     * passes (expert_cache.c: end_locked, expert_cache_prefetch_on); then
     * the misses copied from c->tier into their slots; then, not for a
     * prefetch, tab[p][ids[i]] (tab: 3 tables of n_experts, backend memory)
     * pointed at expert ids[i]'s slice p in its slot. ids (k <= min(64,
     * n_slots)) backend memory. k ids that are not distinct and in range
     * change nothing and fail the stream (an expert id error at its next
     * sync). A prefetch's copies may take fewer of the device's units: they
     * run beside the compute. The reference: ts_backend_expert_pass_ref. */
    void (*expert_pass)(ts_stream *st, const ts_expert_slots *c, const int32_t *ids, int k, bool prefetch, const void **const *tab);

    /* Draws a token from logits (n_vocab, backend memory; modified as the
     * host sampler modifies them) into *id (host), advancing d->rng; NULL
     * on a backend whose logits are host memory anyway. */
    ts_status (*sample)(ts_stream *st, float *logits, int32_t n_vocab, ts_sample_desc *d, int32_t *id);
} ts_backend_ops;

/* The compositions the fused ops stand for, in the plain ops: what the CPU
 * backend runs, and the reference a fused implementation is tested against. */
void ts_backend_compose_norm_matmul(ts_stream *st, const float *x, const float *norm, float eps, float *xn, bool keep_xn, int n_w,
                                    const ts_mat *const *w, float *const *y, int n_tok);
void ts_backend_compose_matmul_add(ts_stream *st, const ts_mat *w, const float *a, int n_tok, float *x, float *tmp);
void ts_backend_compose_act_matmul_add(ts_stream *st, ts_act act, float *gate, const float *up, const ts_mat *w, int n_tok, float *x,
                                       float *tmp);
void ts_backend_compose_attn_matmul_add(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *att,
                                        const ts_mat *w, float *x, float *tmp);
void ts_backend_compose_moe_act_matmul(ts_stream *st, ts_act act, float *gate, const float *up, const ts_expert_mat *w, float *y,
                                       const int32_t *ids, int k);
void ts_backend_compose_moe_combine_add(ts_stream *st, float *x, float *tmp, const float *y, const float *w, int k, int64_t n);
void ts_backend_compose_rope_kv_store(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q,
                                      float *k, const float *v);
void ts_backend_compose_rope_attn_matmul_add(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r,
                                             float *q, float *k, const float *v, float *att, const ts_mat *w, float *x, float *tmp);

/* The expert_pass op on host memory (every pointer of c and tab host
 * memory): the CPU backend's, and the reference the device's is tested
 * against. TS_ERR_ARG (message) and nothing changed for bad ids. */
ts_status ts_backend_expert_pass_ref(const ts_expert_slots *c, const int32_t *ids, int k, bool prefetch, const void **const *tab);

/* top-k of n values: descending, ties to the lower id, k <= n. */
void ts_topk(const float *x, int n, int k, int32_t *ids);
/* One token's routing (the moe_route op's reference): ids (k) = ts_topk of r
 * (n_expert); w (k) = their softmax probabilities over all n_expert or, with
 * renorm, over the k, in double so the value does not depend on the order. */
void ts_moe_route_row(const float *r, int n_expert, int k, bool renorm, int32_t *ids, float *w);

/* The public ts_backend (include/turbospark.h): made once by the caller,
 * owns device memory; backends extend it. */
struct ts_backend {
    const ts_backend_ops *ops;
    ts_backend_kind kind;
    bool host_memory;  /* alloc'd buffers are plain host memory (no copies needed) */
    int n_threads;     /* cpu: a stream's default thread count */
};

/* Backends extend it; ops reach their backend through be. */
struct ts_stream {
    ts_backend *be;
    int n_threads;     /* cpu: threads of this stream's pool */
};

/* The CPU backend: SIMD kernels; each stream has a persistent pool of
 * n_threads threads (<= 0: one per available core). */
ts_status ts_backend_cpu_new(int n_threads, ts_backend **out);
#if defined(TS_HAVE_CUDA)
ts_status ts_backend_cuda_new(int device, bool pdl, ts_backend **out);
#endif

#endif
