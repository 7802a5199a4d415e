#include "experts/policy.h"

#include <stdlib.h>
#include <string.h>

const char *cache_policy_name(cache_policy p) { return p == CACHE_POLICY_LRU ? "lru" : "lfu"; }

bool cache_policy_parse(const char *s, cache_policy *out) {
    if (!strcmp(s, "lfu")) *out = CACHE_POLICY_LFU;
    else if (!strcmp(s, "lru")) *out = CACHE_POLICY_LRU;
    else return false;
    return true;
}

ts_status cache_layer_init(cache_layer *c, int32_t n_slots, int32_t n_experts, cache_policy policy) {
    memset(c, 0, sizeof *c);
    if (n_slots < 1 || n_experts < 1) return ts_fail(TS_ERR_ARG, "expert cache: %d slots for %d experts", n_slots, n_experts);
    c->n_slots = n_slots;
    c->n_experts = n_experts;
    c->policy = policy;
    c->slot_expert = ts_malloc(sizeof(int32_t) * (size_t)n_slots);
    c->slot_tick = ts_malloc(sizeof(uint64_t) * (size_t)n_slots);
    c->expert_slot = ts_malloc(sizeof(int32_t) * (size_t)n_experts);
    c->expert_count = ts_malloc(sizeof(uint64_t) * (size_t)n_experts);
    if (!c->slot_expert || !c->slot_tick || !c->expert_slot || !c->expert_count) {
        cache_layer_free(c);
        return TS_ERR_NOMEM;
    }
    cache_layer_reset(c);
    return TS_OK;
}

void cache_layer_free(cache_layer *c) {
    free(c->slot_expert);
    free(c->slot_tick);
    free(c->expert_slot);
    free(c->expert_count);
    memset(c, 0, sizeof *c);
}

void cache_layer_reset(cache_layer *c) {
    for (int32_t s = 0; s < c->n_slots; s++) {
        c->slot_expert[s] = -1;
        c->slot_tick[s] = 0;
    }
    for (int32_t e = 0; e < c->n_experts; e++) {
        c->expert_slot[e] = -1;
        c->expert_count[e] = 0;
    }
    c->tick = 0;
}

/* true if slot a is a better victim than slot b (both occupied) */
static bool victim_before(const cache_layer *c, int32_t a, int32_t b) {
    if (c->policy == CACHE_POLICY_LFU) {
        uint64_t ca = c->expert_count[c->slot_expert[a]], cb = c->expert_count[c->slot_expert[b]];
        if (ca != cb) return ca < cb;
    }
    if (c->slot_tick[a] != c->slot_tick[b]) return c->slot_tick[a] < c->slot_tick[b];
    return a < b;
}

ts_status cache_plan_make(const cache_layer *c, const int32_t *req, int32_t k, cache_plan *out) {
    return cache_plan_make_avoiding(c, req, k, NULL, out);
}

ts_status cache_plan_make_avoiding(const cache_layer *c, const int32_t *req, int32_t k, const uint16_t *busy, cache_plan *out) {
    if (k < 0 || k > CACHE_MAX_K || k > c->n_slots)
        return ts_fail(TS_ERR_ARG, "expert cache: %d requests for %d slots", k, c->n_slots);
    out->k = k;
    out->n_miss = 0;
    bool pinned[1024];
    bool *pin = c->n_slots <= 1024 ? pinned : calloc((size_t)c->n_slots, 1);
    if (!pin) return ts_fail(TS_ERR_NOMEM, "out of memory");
    if (pin == pinned) memset(pinned, 0, (size_t)c->n_slots);
    ts_status st = TS_OK;
    for (int32_t i = 0; i < k; i++) {
        int32_t e = req[i];
        if (e < 0 || e >= c->n_experts) { st = ts_fail(TS_ERR_ARG, "expert cache: expert id %d out of range [0, %d)", e, c->n_experts); goto out; }
        for (int32_t j = 0; j < i; j++)
            if (req[j] == e) { st = ts_fail(TS_ERR_ARG, "expert cache: expert %d requested twice in one pass", e); goto out; }
        int32_t s = c->expert_slot[e];
        out->hit[i] = s >= 0;
        out->slot[i] = s;
        out->evicted[i] = -1;
        if (s >= 0) pin[s] = true;
        else out->n_miss++;
    }
    /* Misses take victims in request order; selection is a repeated minimum
     * over a small N (slots per layer are tens), cheaper than sorting. */
    for (int32_t i = 0; i < k; i++) {
        if (out->hit[i]) continue;
        int32_t best = -1;
        for (int32_t s = 0; s < c->n_slots && best < 0; s++)
            if (!pin[s] && c->slot_expert[s] < 0 && !(busy && busy[s])) best = s;
        if (best < 0)
            for (int32_t s = 0; s < c->n_slots; s++)
                if (!pin[s] && !(busy && busy[s]) && (best < 0 || victim_before(c, s, best))) best = s;
        if (best < 0) {
            st = TS_ERR_LIMIT; /* every candidate is busy elsewhere: wait and plan again */
            goto out;
        }
        pin[best] = true;
        out->slot[i] = best;
        out->evicted[i] = c->slot_expert[best];
    }
out:
    if (pin != pinned) free(pin);
    return st;
}

void cache_commit(cache_layer *c, const int32_t *req, const cache_plan *p) {
    c->tick++;
    for (int32_t i = 0; i < p->k; i++) {
        int32_t s = p->slot[i], e = req[i];
        if (!p->hit[i]) {
            int32_t old = c->slot_expert[s];
            if (old >= 0) c->expert_slot[old] = -1;
            c->slot_expert[s] = e;
            c->expert_slot[e] = s;
        }
        c->slot_tick[s] = c->tick;
        c->expert_count[e]++;
    }
}

void cache_prefetch_commit(cache_layer *c, const int32_t *req, const cache_plan *p) {
    for (int32_t i = 0; i < p->k; i++) {
        if (p->hit[i]) continue;
        int32_t s = p->slot[i], e = req[i], old = c->slot_expert[s];
        if (old >= 0) c->expert_slot[old] = -1;
        c->slot_expert[s] = e;
        c->expert_slot[e] = s;
    }
}
