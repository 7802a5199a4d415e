/* The device port of the expert cache's policy (expert_policy.cu) against
 * experts/policy.c, the CPU module the engine and the offline replay use.
 *
 * Each case runs the same random sequence of routed passes through both: a
 * pass asks for k distinct experts drawn from a skewed distribution (so there
 * are hits, misses on empty slots and evictions), one pass in eight is a
 * prefetch. After every pass the plan (slot, hit, evicted per request) must
 * be the CPU's exactly, and every 16 passes and at the end the whole state
 * (slot_expert, slot_tick, expert_slot, expert_count, tick). Both policies;
 * k up to the slot count (every free slot a victim in one pass); slot counts
 * below, at and above 32 (one and several slots a lane) and 1,000. A case
 * whose sequence made no hit, or no eviction where the experts outnumber the
 * slots, fails: it would test nothing.
 *
 * Then a pass with a duplicate id and one with an id out of range: the
 * error bit, the outputs still poison, the state unchanged; and calls the
 * host side refuses (TS_ERR_ARG).
 *
 * expert_fill (check_fill): passes of the device policy each followed by the
 * fill from pinned host memory; after every pass each occupied slot must hold
 * its expert's bytes exactly, for every set (aligned, misaligned, and not a
 * multiple of 16 bytes), and empty slots must still be poison. */
#include "cuda_test_util.h"

extern "C" {
#include "experts/policy.h"
}

struct DevLayer {
    ts_cuda_cache_layer c;
};

static DevLayer dev_make(int n_slots, int n_experts, int policy) {
    DevLayer d;
    d.c.n_slots = n_slots;
    d.c.n_experts = n_experts;
    d.c.policy = policy;
    d.c.slot_expert = (int32_t *)tcu_dalloc(4 * (size_t)n_slots);
    d.c.slot_tick = (uint64_t *)tcu_dalloc(8 * (size_t)n_slots);
    d.c.expert_slot = (int32_t *)tcu_dalloc(4 * (size_t)n_experts);
    d.c.expert_count = (uint64_t *)tcu_dalloc(8 * (size_t)n_experts);
    d.c.tick = (uint64_t *)tcu_dalloc(8);
    return d;
}

/* The device state := the CPU's. */
static void dev_set(DevLayer &d, const cache_layer &h) {
    tcu_up(d.c.slot_expert, h.slot_expert, 4 * (size_t)h.n_slots);
    tcu_up(d.c.slot_tick, h.slot_tick, 8 * (size_t)h.n_slots);
    tcu_up(d.c.expert_slot, h.expert_slot, 4 * (size_t)h.n_experts);
    tcu_up(d.c.expert_count, h.expert_count, 8 * (size_t)h.n_experts);
    tcu_up(d.c.tick, &h.tick, 8);
}

/* Number of state words that differ between the device and the CPU. */
static size_t dev_diff(const DevLayer &d, const cache_layer &h) {
    const size_t ns = (size_t)h.n_slots, ne = (size_t)h.n_experts;
    int32_t *se = (int32_t *)malloc(4 * ns), *es = (int32_t *)malloc(4 * ne);
    uint64_t *st = (uint64_t *)malloc(8 * ns), *ec = (uint64_t *)malloc(8 * ne), tick = 0;
    tcu_down(se, d.c.slot_expert, 4 * ns);
    tcu_down(st, d.c.slot_tick, 8 * ns);
    tcu_down(es, d.c.expert_slot, 4 * ne);
    tcu_down(ec, d.c.expert_count, 8 * ne);
    tcu_down(&tick, d.c.tick, 8);
    size_t bad = tick != h.tick;
    for (size_t s = 0; s < ns; s++) bad += (se[s] != h.slot_expert[s]) + (st[s] != h.slot_tick[s]);
    for (size_t e = 0; e < ne; e++) bad += (es[e] != h.expert_slot[e]) + (ec[e] != h.expert_count[e]);
    free(se), free(es), free(st), free(ec);
    return bad;
}

static void dev_free(DevLayer &d) {
    cudaFree(d.c.slot_expert), cudaFree(d.c.slot_tick), cudaFree(d.c.expert_slot), cudaFree(d.c.expert_count);
    cudaFree(d.c.tick);
}

/* k distinct ids, skewed toward the low ids (u^2), in random order. */
static void draw(int32_t *req, int k, int n_experts) {
    for (int i = 0; i < k; i++) {
        for (;;) {
            const double u = (double)(tcu_u64() >> 11) * 0x1.0p-53;
            const int32_t e = (int32_t)(u * u * n_experts);
            bool dup = false;
            for (int j = 0; j < i; j++) dup |= req[j] == e;
            if (!dup) {
                req[i] = e;
                break;
            }
        }
    }
}

static void run_case(int n_slots, int n_experts, int k, cache_policy policy, int passes) {
    char what[160];
    snprintf(what, sizeof what, "cache_pass %s slots=%d experts=%d k=%d passes=%d", cache_policy_name(policy), n_slots,
             n_experts, k, passes);
    cache_layer h;
    if (cache_layer_init(&h, n_slots, n_experts, policy) != TS_OK) {
        CHECKF(false, "%s: cache_layer_init", what);
        return;
    }
    DevLayer d = dev_make(n_slots, n_experts, policy == CACHE_POLICY_LRU ? TS_CUDA_CACHE_LRU : TS_CUDA_CACHE_LFU);
    dev_set(d, h);
    int32_t *dreq = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dslot = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K),
            *dhit = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dev = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));
    TCU(cudaMemset(derr, 0, sizeof(unsigned)));
    size_t plan_bad = 0, state_bad = 0, n_hit = 0, n_evict = 0;
    for (int p = 0; p < passes; p++) {
        int32_t req[TS_CUDA_CACHE_MAX_K], slot[TS_CUDA_CACHE_MAX_K], hit[TS_CUDA_CACHE_MAX_K], ev[TS_CUDA_CACHE_MAX_K];
        const int kp = 1 + (int)(tcu_u64() % (uint64_t)k); /* 1..k requests */
        const bool pre = tcu_u64() % 8 == 0;
        draw(req, kp, n_experts);
        cache_plan plan;
        if (cache_plan_make(&h, req, kp, &plan) != TS_OK) {
            CHECKF(false, "%s: the CPU refused pass %d", what, p);
            break;
        }
        if (pre) cache_prefetch_commit(&h, req, &plan);
        else cache_commit(&h, req, &plan);
        tcu_up(dreq, req, 4 * (size_t)kp);
        tcu_poison(dslot, 4 * (size_t)kp);
        tcu_poison(dhit, 4 * (size_t)kp);
        tcu_poison(dev, 4 * (size_t)kp);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, kp, pre, dslot, dhit, dev, derr), what);
        tcu_sync(what);
        tcu_down(slot, dslot, 4 * (size_t)kp);
        tcu_down(hit, dhit, 4 * (size_t)kp);
        tcu_down(ev, dev, 4 * (size_t)kp);
        for (int i = 0; i < kp; i++) {
            const bool bad = slot[i] != plan.slot[i] || hit[i] != (plan.hit[i] ? 1 : 0) || ev[i] != plan.evicted[i];
            if (bad && plan_bad < 4)
                printf("    pass %d request %d (expert %d): slot %d hit %d evicted %d, want %d %d %d\n", p, i, req[i], slot[i],
                       hit[i], ev[i], plan.slot[i], plan.hit[i] ? 1 : 0, plan.evicted[i]);
            plan_bad += bad;
            n_hit += plan.hit[i];
            n_evict += plan.evicted[i] >= 0;
        }
        if (p % 16 == 15 || p == passes - 1) state_bad += dev_diff(d, h);
    }
    unsigned err = 0;
    tcu_down(&err, derr, sizeof err);
    const bool ok = plan_bad == 0 && state_bad == 0 && err == 0;
    printf("%-60s %zu plan entries, %zu state words differ (%zu hits, %zu evictions) %s\n", what, plan_bad, state_bad, n_hit,
           n_evict, ok ? "ok" : "FAIL");
    CHECKF(ok, "%s: %zu plan entries and %zu state words differ, error word %#x", what, plan_bad, state_bad, err);
    /* the sequence must have exercised the policy: hits and evictions both */
    CHECKF(n_hit > 0 && (n_slots >= n_experts || n_evict > 0), "%s: a degenerate sequence (%zu hits, %zu evictions)", what,
           n_hit, n_evict);
    cache_layer_free(&h);
    dev_free(d);
    cudaFree(dreq), cudaFree(dslot), cudaFree(dhit), cudaFree(dev), cudaFree(derr);
}

/* Bad requests: nothing changes, nothing is written, the error bit is set. */
static void check_bad_requests(void) {
    const int n_slots = 8, n_experts = 16;
    cache_layer h;
    CHECK(cache_layer_init(&h, n_slots, n_experts, CACHE_POLICY_LFU) == TS_OK);
    DevLayer d = dev_make(n_slots, n_experts, TS_CUDA_CACHE_LFU);
    dev_set(d, h);
    int32_t *dreq = (int32_t *)tcu_dalloc(16), *dslot = (int32_t *)tcu_dalloc(16), *dhit = (int32_t *)tcu_dalloc(16),
            *dev = (int32_t *)tcu_dalloc(16);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));
    const int32_t cases[3][4] = {{3, 5, 3, 1}, {3, 16, 2, 1}, {-1, 0, 1, 2}}; /* duplicate, >= n_experts, < 0 */
    for (int c = 0; c < 3; c++) {
        char what[96];
        snprintf(what, sizeof what, "cache_pass bad request %d", c);
        TCU(cudaMemset(derr, 0, sizeof(unsigned)));
        tcu_up(dreq, cases[c], 16);
        tcu_poison(dslot, 16);
        tcu_poison(dhit, 16);
        tcu_poison(dev, 16);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, 4, false, dslot, dhit, dev, derr), what);
        tcu_sync(what);
        unsigned err = 0;
        int32_t out[12];
        tcu_down(&err, derr, sizeof err);
        tcu_down(out, dslot, 16);
        tcu_down(out + 4, dhit, 16);
        tcu_down(out + 8, dev, 16);
        size_t written = 0;
        for (int i = 0; i < 12; i++) written += out[i] != -1; /* poison: all bits set */
        const size_t changed = dev_diff(d, h);
        const bool ok = err == TS_CUDA_ERR_EXPERT && written == 0 && changed == 0;
        printf("%-60s error %#x, %zu outputs written, %zu state words changed %s\n", what, err, written, changed, ok ? "ok" : "FAIL");
        CHECKF(ok, "%s: error %#x, %zu written, %zu changed", what, err, written, changed);
    }
    /* refused on the host: k above the slots or TS_CUDA_CACHE_MAX_K, no state, bad policy, too many slots */
    CHECK(ts_cuda_cache_pass(NULL, &d.c, dreq, n_slots + 1, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_cache_pass(NULL, &d.c, dreq, -1, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_cache_pass(NULL, &d.c, NULL, 2, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    ts_cuda_cache_layer bad = d.c;
    bad.policy = 2;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    bad = d.c, bad.tick = NULL;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    bad = d.c, bad.n_slots = TS_CUDA_CACHE_MAX_SLOTS + 1;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    bad = d.c, bad.n_slots = TS_CUDA_CACHE_MAX_K + 8;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, TS_CUDA_CACHE_MAX_K + 1, false, dslot, dhit, dev, derr) == TS_ERR_ARG);
    CHECK(cudaGetLastError() == cudaSuccess); /* refusals launch nothing */
    printf("%-60s %s\n", "argument refusals", "checked");
    cache_layer_free(&h);
    dev_free(d);
    cudaFree(dreq), cudaFree(dslot), cudaFree(dhit), cudaFree(dev), cudaFree(derr);
}

/* The fill after each pass: every occupied slot must then hold exactly its
 * expert's bytes (the CPU policy says which), for each set; never-filled
 * slots stay poison. Sources in pinned host memory (the host tier), one set
 * misaligned (bytes copied one by one), one not a multiple of 16 bytes. */
static void check_fill(int n_slots, int n_experts, int k, int passes) {
    const int n_set = 3;
    const uint64_t bytes[n_set] = {196608, 65536 + 48, 1001};
    const uint64_t offs[n_set] = {0, 0, 4}; /* set 2's sources start 4 bytes into their allocation */
    char what[128];
    snprintf(what, sizeof what, "expert_fill slots=%d experts=%d k=%d passes=%d", n_slots, n_experts, k, passes);
    cache_layer h;
    CHECK(cache_layer_init(&h, n_slots, n_experts, CACHE_POLICY_LFU) == TS_OK);
    DevLayer d = dev_make(n_slots, n_experts, TS_CUDA_CACHE_LFU);
    dev_set(d, h);
    ts_cuda_fill_set sets[n_set];
    uint8_t *host[n_set];
    uint64_t stride[n_set];
    void **dsrc[n_set];
    for (int p = 0; p < n_set; p++) {
        stride[p] = (bytes[p] + 255) & ~(uint64_t)255;
        TCU(cudaHostAlloc((void **)&host[p], (size_t)(stride[p] * n_experts + 16), cudaHostAllocDefault));
        for (uint64_t b = 0; b < stride[p] * n_experts + 16; b++) host[p][b] = (uint8_t)tcu_u64();
        void *src[4096];
        for (int e = 0; e < n_experts; e++) src[e] = host[p] + offs[p] + stride[p] * e;
        dsrc[p] = (void **)tcu_dalloc(sizeof(void *) * n_experts);
        tcu_up(dsrc[p], src, sizeof(void *) * n_experts);
        sets[p].src = (const void *const *)dsrc[p];
        sets[p].slots = (uint8_t *)tcu_dalloc((size_t)(stride[p] * n_slots));
        tcu_poison(sets[p].slots, (size_t)(stride[p] * n_slots));
        sets[p].stride = stride[p];
        sets[p].bytes = bytes[p];
    }
    int32_t *dreq = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dslot = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K),
            *dhit = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dev = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));
    TCU(cudaMemset(derr, 0, sizeof(unsigned)));
    size_t bad_slots = 0, checked = 0;
    uint8_t *got = (uint8_t *)malloc((size_t)stride[0]);
    for (int pass = 0; pass < passes; pass++) {
        int32_t req[TS_CUDA_CACHE_MAX_K];
        const int kp = 1 + (int)(tcu_u64() % (uint64_t)k);
        draw(req, kp, n_experts);
        cache_plan plan;
        CHECK(cache_plan_make(&h, req, kp, &plan) == TS_OK);
        cache_commit(&h, req, &plan);
        tcu_up(dreq, req, 4 * (size_t)kp);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, kp, false, dslot, dhit, dev, derr), what);
        TCU_OK(ts_cuda_expert_fill(NULL, n_set, sets, n_experts, n_slots, dreq, dslot, dhit, kp, derr), what);
        tcu_sync(what);
        for (int s = 0; s < n_slots; s++)
            for (int p = 0; p < n_set; p++) {
                tcu_down(got, sets[p].slots + stride[p] * s, (size_t)bytes[p]);
                const int32_t e = h.slot_expert[s];
                bool ok = true;
                if (e >= 0) ok = memcmp(got, host[p] + offs[p] + stride[p] * e, (size_t)bytes[p]) == 0;
                else
                    for (uint64_t b = 0; b < bytes[p] && ok; b++) ok = got[b] == 0xff;
                bad_slots += !ok;
                checked++;
            }
    }
    unsigned err = 0;
    tcu_down(&err, derr, sizeof err);
    const bool ok = bad_slots == 0 && err == 0;
    printf("%-60s %zu of %zu slot contents wrong %s\n", what, bad_slots, checked, ok ? "ok" : "FAIL");
    CHECKF(ok, "%s: %zu slot contents wrong, error word %#x", what, bad_slots, err);

    /* a request whose slot is out of range: skipped, the error bit */
    const int32_t req1[1] = {0}, slot1[1] = {n_slots}, hit1[1] = {0};
    tcu_up(dreq, req1, 4);
    tcu_up(dslot, slot1, 4);
    tcu_up(dhit, hit1, 4);
    TCU(cudaMemset(derr, 0, sizeof(unsigned)));
    TCU_OK(ts_cuda_expert_fill(NULL, n_set, sets, n_experts, n_slots, dreq, dslot, dhit, 1, derr), "expert_fill bad slot");
    tcu_sync("expert_fill bad slot");
    tcu_down(&err, derr, sizeof err);
    CHECKF(err == TS_CUDA_ERR_EXPERT, "expert_fill bad slot: error word %#x", err);
    /* refusals */
    ts_cuda_fill_set badset = sets[0];
    badset.bytes = badset.stride + 1;
    CHECK(ts_cuda_expert_fill(NULL, 1, &badset, n_experts, n_slots, dreq, dslot, dhit, 1, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, 5, sets, n_experts, n_slots, dreq, dslot, dhit, 1, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, n_set, sets, n_experts, n_slots, dreq, dslot, dhit, n_slots + 1, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, n_set, sets, n_experts, n_slots, NULL, dslot, dhit, 1, derr) == TS_ERR_ARG);
    CHECK(cudaGetLastError() == cudaSuccess);
    free(got);
    for (int p = 0; p < n_set; p++) cudaFreeHost(host[p]), cudaFree(dsrc[p]), cudaFree(sets[p].slots);
    cache_layer_free(&h);
    dev_free(d);
    cudaFree(dreq), cudaFree(dslot), cudaFree(dhit), cudaFree(dev), cudaFree(derr);
}

int main(void) {
    tcu_seed_init("test_cuda_policy");
    tcu_require_gpu("test_cuda_policy");
    const bool small = tcu_small();
    const int passes = small ? 80 : 600;
    for (int pi = 0; pi < 2; pi++) {
        const cache_policy pol = pi ? CACHE_POLICY_LRU : CACHE_POLICY_LFU;
        run_case(8, 16, 8, pol, passes);    /* k = slots: every free slot a victim in one pass */
        run_case(32, 128, 8, pol, passes);  /* the 30B-A3B at 25% */
        run_case(45, 128, 8, pol, passes);  /* two slots on some lanes */
        run_case(20, 60, 5, pol, passes);
        run_case(64, 64, TS_CUDA_CACHE_MAX_K, pol, passes / 4); /* every expert fits: no eviction after the cold misses */
        if (!small) run_case(1000, 1500, 16, pol, passes); /* many slots a lane */
    }
    check_bad_requests();
    check_fill(5, 12, 3, small ? 12 : 40);
    if (!small) check_fill(32, 128, 8, 60); /* the 30B-A3B at 25%, with smaller experts */
    return tu_finish();
}
