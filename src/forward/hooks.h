/* The forward pass's named points (../shared/ARCHITECTURE.md's "one decode
 * step, as data"). Instruments subscribe here and nowhere else: the forward
 * pass calls a hook only through HOOK(), which is one pointer test when the
 * session has no instruments. A hook may read the buffers it is handed and
 * compute into its own scratch; it never writes the forward pass's buffers,
 * so output is byte-identical with hooks on. */
#ifndef TS_FORWARD_HOOKS_H
#define TS_FORWARD_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

struct ts_session;

typedef struct ts_hooks {
    void *user;
    /* The span since the previous mark belongs to phase p (a ts_phase), or
     * to none (-1: an instrument's own cost, or bookkeeping). */
    void (*mark)(void *user, struct ts_session *s, int phase);
    /* Seconds the expert cache waited for reads inside the current span. */
    void (*io_wait)(void *user, double seconds);
    /* Layer l routes a chunk of n_tok tokens: n_tok route calls follow, one
     * per token in order; the expert cache then serves the chunk's distinct
     * experts (forward/moe.c), which is what the trace's chunk lengths let
     * analyze cache replay. */
    ts_status (*route_chunk)(void *user, int32_t layer, int32_t n_tok);
    /* A token routed at layer l: top-k ids in rank order, the router logits
     * row (host, n_expert). */
    ts_status (*route)(void *user, int32_t layer, const int32_t *ids, const float *logits);
    /* After layer l's attention, with the post-attention residual in s->x
     * (n tokens): the pilot probe runs here. */
    void (*after_attention)(void *user, struct ts_session *s, int32_t layer, int32_t n);
    /* act(gate)*up of a dense FFN or shared expert at layer l: rows (n_tok,
     * width) in backend memory; last_row_is_final: the chunk's last row is
     * the last token of its eval (the decode pass). */
    void (*ffn_act)(void *user, struct ts_session *s, int32_t layer, const float *rows, int32_t n_tok, int32_t width,
                    bool last_row_is_final);
    /* Pilot prefetch placed guesses in layer's slots ahead of its next pass
     * (streamed decode, expert_cache_prefetch_on ran its plan): ids (k) as
     * given to the cache, best first. With the trace, analyze cache replays
     * the run exactly. */
    ts_status (*prefetch)(void *user, int32_t layer, const int32_t *ids, int32_t k);
} ts_hooks;

/* Calls hook `name` of h when both are set: HOOK(s->hooks, mark, s, TS_PHASE_ATTENTION). */
#define HOOK(h, name, ...)                                        \
    do {                                                          \
        if (TS_UNLIKELY((h) != NULL) && (h)->name) (h)->name((h)->user, __VA_ARGS__); \
    } while (0)

#endif
