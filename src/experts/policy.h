/* Expert slot-cache POLICY: pure, deterministic, no I/O.
 *
 * One cache_layer holds the residency state of one MoE layer's N slots. A
 * routed pass asks for its top-k experts: cache_plan() decides, without
 * changing anything, which requests hit and which slot each miss goes to;
 * the engine then reads the missed experts into those slots and calls
 * cache_commit(). The offline replay analyzer calls the very same two
 * functions over a recorded trace, so its hit/miss counts reproduce the
 * engine's exactly.
 *
 * Victim order (LFU, the default):
 *   1. empty slots, lowest index first;
 *   2. then the slot whose expert has the lowest cumulative use count;
 *   3. ties to the least recently used slot (then the lower slot index).
 * LRU skips step 2. Slots holding an expert of the current request are never
 * victims. Use counts are per expert and cumulative over the run; they are
 * bumped for every requested expert (hits and misses) in cache_commit, i.e.
 * only after the victim order of the pass is fixed. */
#ifndef TS_EXPERTS_POLICY_H
#define TS_EXPERTS_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

#define CACHE_MAX_K 64

typedef enum cache_policy {
    CACHE_POLICY_LFU = 0,
    CACHE_POLICY_LRU = 1,
} cache_policy;

const char *cache_policy_name(cache_policy p);
/* "lfu" / "lru" -> policy; false if unknown. */
bool cache_policy_parse(const char *s, cache_policy *out);

typedef struct cache_layer {
    int32_t n_slots;
    int32_t n_experts;
    cache_policy policy;
    int32_t *slot_expert;   /* (n_slots) expert held, -1 = empty */
    uint64_t *slot_tick;    /* (n_slots) tick of last use */
    int32_t *expert_slot;   /* (n_experts) slot holding the expert, -1 = not resident */
    uint64_t *expert_count; /* (n_experts) cumulative requests */
    uint64_t tick;          /* passes committed so far */
} cache_layer;

typedef struct cache_plan {
    int32_t k;                    /* requests in this pass */
    int32_t slot[CACHE_MAX_K];    /* (k) slot serving request i */
    bool hit[CACHE_MAX_K];        /* (k) request i was resident */
    int32_t evicted[CACHE_MAX_K]; /* (k) expert evicted for request i; -1 if hit or cold (empty slot) */
    int32_t n_miss;
} cache_plan;

ts_status cache_layer_init(cache_layer *c, int32_t n_slots, int32_t n_experts, cache_policy policy);
void cache_layer_free(cache_layer *c);
/* Empties the slots and forgets counts. */
void cache_layer_reset(cache_layer *c);

/* req: k distinct expert ids in [0, n_experts). Fails (TS_ERR_ARG) on bad
 * ids, duplicates, or k > n_slots. Does not modify c. */
ts_status cache_plan_make(const cache_layer *c, const int32_t *req, int32_t k, cache_plan *out);
/* Same, but slots with busy[s] != 0 (in use by another pass that has not
 * finished with them) are never victims; they still serve hits. TS_ERR_LIMIT
 * (no message) when a miss finds no slot that is neither busy nor part of
 * this pass: the caller waits for a release and plans again. busy may be
 * NULL (= cache_plan_make). */
ts_status cache_plan_make_avoiding(const cache_layer *c, const int32_t *req, int32_t k, const uint16_t *busy, cache_plan *out);
/* Applies a plan made from the same state and request. */
void cache_commit(cache_layer *c, const int32_t *req, const cache_plan *p);
/* A prefetch: puts the plan's misses into their slots (evicting what was
 * there) but bumps no use count and no tick. A guess is not a use: the
 * victim order of later passes sees the prefetched expert as it saw the
 * slot's previous holder's age, and its count as it was, until a pass asks
 * for it. Hits are left alone. */
void cache_prefetch_commit(cache_layer *c, const int32_t *req, const cache_plan *p);

#endif
