/* Expert cache policy: the LFU/LRU rules worked by hand on small cases, and
 * invariants over long random runs checked against a brute-force model. */
#include <stdint.h>

#include "experts/policy.h"
#include "test_util.h"

static int32_t run(cache_layer *c, const int32_t *req, int k, cache_plan *p) {
    CHECK(cache_plan_make(c, req, k, p) == TS_OK);
    cache_commit(c, req, p);
    return p->n_miss;
}

static void test_lfu_rules(void) {
    cache_layer c;
    cache_plan p;
    CHECK(cache_layer_init(&c, 3, 8, CACHE_POLICY_LFU) == TS_OK);
    /* empty slots are taken first, lowest index first */
    int32_t r1[2] = {5, 2};
    CHECK(run(&c, r1, 2, &p) == 2 && p.slot[0] == 0 && p.slot[1] == 1 && p.evicted[0] == -1);
    int32_t r2[2] = {5, 7};
    CHECK(run(&c, r2, 2, &p) == 1 && p.hit[0] && p.slot[0] == 0 && p.slot[1] == 2);
    /* counts: 5->2, 2->1, 7->1. Request {1}: victim = lowest count among {2,7};
     * tie -> least recently used: 2 (tick 1) before 7 (tick 2). */
    int32_t r3[1] = {1};
    CHECK(run(&c, r3, 1, &p) == 1 && p.slot[0] == 1 && p.evicted[0] == 2);
    /* counts: 5->2, 7->1, 1->1; request {3, 5}: 5 hits (pinned), 3 evicts the
     * lowest count, tie between 7 (tick 2) and 1 (tick 3) -> 7 */
    int32_t r4[2] = {3, 5};
    CHECK(run(&c, r4, 2, &p) == 1 && p.evicted[0] == 7 && p.slot[0] == 2 && p.hit[1]);
    /* Bumps happen after victim choice: request {6, 1}: counts 5->3, 1->1, 3->1;
     * victims exclude 1 (requested, resident); 3 (count 1) goes before 5 (3). */
    int32_t r5[2] = {6, 1};
    CHECK(run(&c, r5, 2, &p) == 1 && p.evicted[0] == 3 && p.hit[1]);
    /* k > slots refused; duplicates and range refused */
    int32_t bad[4] = {0, 1, 2, 3};
    CHECK(cache_plan_make(&c, bad, 4, &p) == TS_ERR_ARG);
    int32_t dup[2] = {4, 4};
    CHECK(cache_plan_make(&c, dup, 2, &p) == TS_ERR_ARG);
    int32_t oob[1] = {8};
    CHECK(cache_plan_make(&c, oob, 1, &p) == TS_ERR_ARG);
    cache_layer_free(&c);
}

static void test_lru_rules(void) {
    cache_layer c;
    cache_plan p;
    CHECK(cache_layer_init(&c, 2, 4, CACHE_POLICY_LRU) == TS_OK);
    int32_t a[1] = {0}, b[1] = {1}, d[1] = {2};
    run(&c, a, 1, &p);
    run(&c, a, 1, &p);
    run(&c, a, 1, &p); /* 0 is frequent but... */
    run(&c, b, 1, &p); /* ...1 is more recent */
    CHECK(run(&c, d, 1, &p) == 1 && p.evicted[0] == 0); /* LRU evicts 0 */
    cache_layer_free(&c);
    CHECK(cache_layer_init(&c, 2, 4, CACHE_POLICY_LFU) == TS_OK);
    run(&c, a, 1, &p);
    run(&c, a, 1, &p);
    run(&c, b, 1, &p);
    CHECK(run(&c, d, 1, &p) == 1 && p.evicted[0] == 1); /* LFU keeps 0 */
    cache_layer_free(&c);
}

/* A prefetch places experts without a use: counts and ticks stay, so the
 * victim order still follows what was asked for; a prefetched expert then
 * hits, and a wrong guess is the next victim. */
static void test_prefetch_commit(void) {
    cache_layer c;
    cache_plan p;
    CHECK(cache_layer_init(&c, 3, 8, CACHE_POLICY_LFU) == TS_OK);
    int32_t a[2] = {0, 1}, b[1] = {0};
    run(&c, a, 2, &p);
    run(&c, b, 1, &p); /* counts 0->2, 1->1; ticks slot0=2, slot1=1 */
    uint64_t tick = c.tick;
    int32_t guess[2] = {4, 0}; /* 4 goes into the empty slot 2, 0 is resident */
    CHECK(cache_plan_make(&c, guess, 2, &p) == TS_OK && p.n_miss == 1 && p.slot[0] == 2 && p.hit[1]);
    cache_prefetch_commit(&c, guess, &p);
    CHECK(c.tick == tick && c.expert_count[4] == 0 && c.expert_count[0] == 2 && c.slot_tick[2] == 0);
    CHECK(c.expert_slot[4] == 2 && c.slot_expert[2] == 4);
    int32_t use[1] = {4};
    CHECK(run(&c, use, 1, &p) == 0 && p.hit[0] && p.slot[0] == 2 && c.expert_count[4] == 1);
    /* a wrong guess (count 0) is evicted before experts that were used */
    int32_t wrong[1] = {6};
    CHECK(cache_plan_make(&c, wrong, 1, &p) == TS_OK && p.n_miss == 1 && p.evicted[0] == 1);
    cache_prefetch_commit(&c, wrong, &p);
    CHECK(c.expert_slot[1] == -1 && c.expert_slot[6] == 1 && c.expert_count[6] == 0);
    int32_t next[1] = {7};
    CHECK(run(&c, next, 1, &p) == 1 && p.evicted[0] == 6);
    cache_layer_free(&c);
}

/* Brute-force model of the rules, independent of the implementation's data
 * structures: a list of (expert, last_tick) and a count table. */
static void test_random_against_model(cache_policy pol) {
    enum { E = 16, S = 6, K = 4, PASSES = 3000 };
    cache_layer c;
    cache_plan p;
    CHECK(cache_layer_init(&c, S, E, pol) == TS_OK);
    int32_t m_exp[S];
    uint64_t m_tick[S], m_cnt[E] = {0}, tick = 0;
    for (int s = 0; s < S; s++) m_exp[s] = -1, m_tick[s] = 0;
    uint64_t rng = 42;
    int mismatches = 0, hits = 0, reqs = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        int32_t req[K];
        for (int i = 0; i < K; i++) {
            for (;;) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                /* skewed: low ids more popular */
                int32_t e = (int32_t)(((rng >> 33) % (E * E)));
                e = (int32_t)(E - 1 - (int32_t)__builtin_sqrt((double)e));
                if (e < 0) e = 0;
                int dup = 0;
                for (int j = 0; j < i; j++) dup |= req[j] == e;
                if (!dup) { req[i] = e; break; }
            }
        }
        CHECK(cache_plan_make(&c, req, K, &p) == TS_OK);
        /* model */
        int pin[S] = {0}, slot_of[K];
        for (int i = 0; i < K; i++) {
            slot_of[i] = -1;
            for (int s = 0; s < S; s++)
                if (m_exp[s] == req[i]) slot_of[i] = s, pin[s] = 1;
        }
        for (int i = 0; i < K; i++) {
            if (slot_of[i] >= 0) continue;
            int best = -1;
            for (int s = 0; s < S; s++)
                if (!pin[s] && m_exp[s] < 0) { best = s; break; }
            if (best < 0)
                for (int s = 0; s < S; s++) {
                    if (pin[s]) continue;
                    if (best < 0) { best = s; continue; }
                    uint64_t cs = m_cnt[m_exp[s]], cb = m_cnt[m_exp[best]];
                    bool better = pol == CACHE_POLICY_LFU && cs != cb ? cs < cb : m_tick[s] < m_tick[best];
                    if (better) best = s;
                }
            slot_of[i] = best;
            pin[best] = 1;
        }
        tick++;
        for (int i = 0; i < K; i++) {
            if (slot_of[i] != p.slot[i]) mismatches++;
            if (p.hit[i]) hits++;
            reqs++;
            m_exp[slot_of[i]] = req[i];
            m_tick[slot_of[i]] = tick;
            m_cnt[req[i]]++;
        }
        cache_commit(&c, req, &p);
    }
    CHECKF(mismatches == 0, "%s: %d slot choices differ from the model", cache_policy_name(pol), mismatches);
    CHECKF(hits > 0 && hits < reqs, "degenerate run: %d hits of %d", hits, reqs);
    /* invariants: expert_slot and slot_expert are inverse */
    int inv = 0;
    for (int s = 0; s < S; s++)
        if (c.slot_expert[s] >= 0 && c.expert_slot[c.slot_expert[s]] != s) inv++;
    CHECK(inv == 0);
    cache_layer_free(&c);
}

int main(void) {
    test_lfu_rules();
    test_lru_rules();
    test_prefetch_commit();
    test_random_against_model(CACHE_POLICY_LFU);
    test_random_against_model(CACHE_POLICY_LRU);
    return tu_finish();
}
