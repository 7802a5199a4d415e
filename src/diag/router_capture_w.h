/* Router instruments: histogram, trace, pilot predictions, one router-logit
 * row (TURBOSPARK_ROUTER_HIST / _TRACE / PILOT_PROBE / ROUTER_LOGITS_*).
 *
 * Invariants the writer checks before writing (and the analyzer checks again
 * when reading): each routed layer's counts sum to top_k x passes; counts equal
 * the histogram of the trace; pred rows line up with trace rows pass by pass,
 * row 0 empty; a layer's chunk lengths sum to its passes; prefetches name
 * passes in increasing order, each within the layer's passes (a partial run's
 * last one may name the pass it did not reach).
 *
 * "Pass" here is one token's routing at one layer (a trace row). The expert
 * cache is asked once per (layer, expert) per forward chunk instead
 * (forward/moe.c), so the trace also keeps the chunk lengths: with them,
 * analyze cache replays the requests the engine made. */
#ifndef TS_DIAG_ROUTER_CAPTURE_W_H
#define TS_DIAG_ROUTER_CAPTURE_W_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

typedef struct diag_ids {
    int32_t *v; /* (cap) */
    uint64_t n, cap;
} diag_ids;

typedef struct diag_router {
    int32_t num_layers, num_experts, top_k;
    bool trace, pilot;
    uint64_t *counts;   /* (num_layers, num_experts) */
    uint64_t *passes;   /* (num_layers) routed passes seen */
    diag_ids *tr;       /* (num_layers) trace, top_k ids per pass */
    diag_ids *pred;     /* (num_layers) pilot guesses, top_k per pass; row 0 empty */
    diag_ids *chunks;   /* (num_layers) tokens per forward chunk, in order (with the trace) */
    diag_ids *pf;       /* (num_layers) pilot prefetches, flat (pass, k, k ids) each, pass order (with the trace) */
    int32_t logits_layer;  /* -1: no logit capture */
    int64_t logits_pass;
    float *logits;      /* (num_experts) the captured row, once captured */
    bool logits_done;
} diag_router;

ts_status diag_router_init(diag_router *r, int32_t num_layers, int32_t num_experts, int32_t top_k, bool trace, bool pilot,
                           int32_t logits_layer, int64_t logits_pass);
void diag_router_free(diag_router *r);
/* One routed pass at layer l: the top-k ids in rank order, and the full
 * router-logit row (for the logits capture; may be NULL). */
ts_status diag_router_record(diag_router *r, int32_t l, const int32_t *ids, const float *router_logits);
/* Layer l routes a forward chunk of n_tok tokens: n_tok records follow. */
ts_status diag_router_record_chunk(diag_router *r, int32_t l, int32_t n_tok);
/* The pilot's guess for layer l (l >= 1) for the pass about to run there. */
ts_status diag_router_record_pred(diag_router *r, int32_t l, const int32_t *ids);
/* The engine's pilot prefetch placed ids (k, best first) in layer l's slots
 * before l's next pass (recorded with the trace: that pass is the trace row
 * l gets next). */
ts_status diag_router_record_prefetch(diag_router *r, int32_t l, const int32_t *ids, int32_t k);
/* partial: the run was interrupted (the capture says "partial": true). */
ts_status diag_router_write(const diag_router *r, const char *path, bool partial);

#endif
