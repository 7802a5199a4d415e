/* Reader for router captures (TURBOSPARK_ROUTER_HIST files) and the router,
 * cache-replay and window analyzers. A capture is checked for internal
 * consistency before any number is computed from it: a degenerate or
 * inconsistent capture is refused, never analysed. */
#ifndef TS_ANALYZE_ROUTER_CAPTURE_H
#define TS_ANALYZE_ROUTER_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "experts/policy.h"

typedef struct router_capture {
    char *path;
    int32_t num_layers;
    int32_t num_experts;
    int32_t top_k;
    uint64_t *counts;      /* (num_layers, num_experts) */
    bool has_trace;
    int32_t **trace;       /* (num_layers) -> (trace_len[l]) expert ids, top_k per pass, pass order */
    uint64_t *trace_len;   /* (num_layers) */
    bool has_pred;
    int32_t **pred;        /* (num_layers) -> (pred_len[l]); row 0 empty */
    uint64_t *pred_len;    /* (num_layers) */
    int32_t pred_k;        /* ids per pass in pred (0 when absent) */
    bool has_chunks;       /* the engine's forward chunks were recorded; absent: one pass per chunk */
    int32_t **chunks;      /* (num_layers) -> (chunks_len[l]) passes (tokens) per forward chunk, in order; they sum to the layer's passes */
    uint64_t *chunks_len;  /* (num_layers) */
    bool has_prefetch;     /* the engine's pilot prefetches were recorded (streamed into backend slots) */
    int32_t **prefetch;    /* (num_layers) -> (prefetch_len[l]) records (pass, k, k ids), passes increasing */
    uint64_t *prefetch_len;/* (num_layers) */
} router_capture;

/* Loads and checks a capture (counts against top_k and the trace, ids in
 * range, no expert twice in one pass of the trace or of pred). max_bytes caps
 * the file (0 = TS_READ_DEFAULT_CAP). */
ts_status router_capture_load(const char *path, uint64_t max_bytes, router_capture *out);
void router_capture_free(router_capture *c);
/* Passes routed at layer l (counts sum / top_k). */
uint64_t router_capture_passes(const router_capture *c, int32_t l);
bool router_capture_layer_routes(const router_capture *c, int32_t l);

/* Concentration of one layer's routing: smallest expert set covering a share
 * of the routed mass (experts taken by count, descending; ties to lower id). */
typedef struct router_capture_layer_stats {
    int32_t n95, n99, never;
} router_capture_layer_stats;
ts_status router_capture_concentration(const uint64_t *counts, int32_t n_experts, router_capture_layer_stats *out);
/* The set covering share of the routed mass as a bitmap (n_experts bools). */
ts_status router_layer_top_set(const uint64_t *counts, int32_t n_experts, double share, bool *set);

/* Cache replay of one layer's trace through the engine's own policy code. */
typedef enum replay_policy { REPLAY_LFU = 0, REPLAY_LRU = 1, REPLAY_BELADY = 2 } replay_policy;

typedef struct replay_result {
    uint64_t tokens;         /* counted trace passes (tokens, after skip) */
    uint64_t passes;         /* counted cache passes: one token's top-k, or up to top_k of a chunk's distinct experts */
    uint64_t requests, hits, misses;
    uint64_t cold_misses;    /* miss into an empty slot */
    uint64_t evict_misses;   /* miss that evicted a resident expert */
    uint64_t prev_named;     /* misses whose expert was in the previous pass's top-k */
    /* the run's own pilot prefetches, replayed before their passes (LFU/LRU,
     * when the capture has them): copies = saved + wasted, as the engine counts */
    uint64_t run_pf_copies, run_pf_saved, run_pf_wasted;
    /* pilot prefetch (only when the capture has pred, for pilot_k > 0) */
    uint64_t pred_total, pred_hits;   /* recall: actual ids that pred named */
    uint64_t prefetch_reads;          /* predicted experts not resident at snapshot */
    uint64_t prefetch_useful;         /* prefetched experts that were then requested */
    uint64_t residual_misses;         /* misses the prefetch did not cover */
} replay_result;

/* Replays layer l with n_slots slots, making the requests the engine made
 * (forward/moe.c): per forward chunk, its distinct experts in order of first
 * appearance over (token, rank), top_k per cache pass (the last one fewer); a
 * chunk of one token is one pass of its top-k in rank order. A chunk's pass
 * after its first is planned (LFU, LRU) with the previous pass's slots
 * never victims, or freely when the others cannot take its misses: the
 * engine fetches it while the previous pass still holds them (forward/moe.c
 * streamed_passes); Belady's ceiling is left free. Without chunk
 * lengths every trace pass is its own chunk. Chunks starting before trace
 * pass `skip` warm the cache but are not counted. pilot_k > 0 simulates
 * prefetching the first pilot_k predicted ids before each one-token chunk's
 * pass (residency snapshotted before the plan); recall counts every counted
 * token. */
ts_status router_replay_layer(const router_capture *c, int32_t l, int32_t n_slots, replay_policy pol, uint64_t skip,
                              int32_t pilot_k, replay_result *out);

/* Distinct experts over sliding windows of m passes at layer l (the expert
 * reads to verify m speculative tokens), averaged over windows. */
ts_status router_window_layer(const router_capture *c, int32_t l, int32_t m, uint64_t skip, double *mean_distinct);

#endif
