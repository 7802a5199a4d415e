/* The device port of the expert cache's bookkeeping (expert_policy.cu)
 * against experts/policy.c, the CPU module the engine and the offline replay
 * use, and against a mirror of the host cache's prefetch marks, counters and
 * weight tables written here from expert_cache.c's rules (end_locked,
 * expert_cache_prefetch_on, begin_locked's pointers): mirror_pass.
 *
 * Each case runs the same random sequence of routed passes through both: a
 * pass asks for k distinct experts drawn from a skewed distribution (so there
 * are hits, misses on empty slots and evictions), one pass in eight is a
 * prefetch, and the pass after a prefetch asks again for most of what it
 * guessed (so prefetches are saved as well as wasted). After every pass the
 * plan (slot, hit, evicted per request) must be the CPU's exactly, and so
 * must the prefetch marks, the counters and the three tables (poisoned at
 * the start: entries the pass does not write must keep what they had); every
 * 16 passes and at the end the whole policy state (slot_expert, slot_tick,
 * expert_slot, expert_count, tick). Both policies; k up to the slot count
 * (every free slot a victim in one pass); slot counts below, at and above 32
 * (one and several slots a lane) and 1,000; one case per policy without
 * marks, counters or tables (the NULL paths). A case whose sequence made no
 * hit, or no eviction where the experts outnumber the slots, fails, and so
 * does a run whose cases together saved no prefetch or wasted none: they
 * would test nothing.
 *
 * Then bad requests (a duplicate id, an id out of range either way), as a
 * pass and as a prefetch: the error bit, the outputs still poison, the state,
 * marks, counters and tables unchanged; and the calls the host side refuses
 * (TS_ERR_ARG, nothing launched).
 *
 * expert_fill (check_fill): passes of the device policy (one in four a
 * prefetch) each followed by the fill from pinned host memory, max_blocks
 * cycling 0, 2, 1 (one block striding over every item); per-expert layouts
 * with gaps and slice sizes drawn at random, so lengths mostly not a multiple
 * of 16, one expert exactly the stride long, one shorter than 16 bytes (the
 * first pass asks for both). A host shadow of the slots gets each miss's
 * first len bytes; after every pass the whole slot array must equal it:
 * every occupied slot holds its expert's bytes, and bytes past a length, and
 * never-filled slots, keep what they had (poison or an earlier expert's). A
 * case with the tier 4 bytes off 16 takes the byte path. Then requests with a
 * slot or id out of range and a length above the stride (skipped, the error
 * bit) and a hit (not copied). */
#include "cuda_test_util.h"

extern "C" {
#include "experts/policy.h"
}

static const void *const POISON_PTR = (const void *)~(uintptr_t)0; /* a poisoned table entry: all bits set */
static const char *const stat_names[TS_CUDA_CS_COUNT] = {
    "passes", "requests", "hits", "misses", "cold", "evict", "bytes_req", "bytes_up", "pf_copies", "pf_saved", "pf_wasted", "bytes_pf"};
static uint64_t g_saved, g_wasted; /* over every case with marks: the sequences must have made both */

/* Expert e's layout in a slot (layout[e * 5 ..]): three slices one after the
 * other, each after a gap of 0..63 bytes (the host cache aligns each slice to
 * its file offset mod 4096: any gap), sizes 1..max_slice; the length is the
 * down slice's end. Expert 0 ends exactly at the stride (a fill of the whole
 * slot); expert 1 is 9 bytes long (a fill that is all tail). */
static void make_layout(uint64_t *L, int n_experts, uint64_t stride, uint64_t max_slice) {
    for (int e = 0; e < n_experts; e++) {
        uint64_t *x = L + (size_t)e * TS_CUDA_LAYOUT_W, p = 0, sum = 0;
        for (int j = 0; j < 3; j++) {
            const uint64_t gap = tcu_u64() % 64, nb = 1 + tcu_u64() % max_slice;
            p += gap;
            x[j] = p;
            p += nb;
            sum += nb;
        }
        if (e == 0) sum += stride - p, p = stride;
        if (e == 1) x[0] = 0, x[1] = 3, x[2] = 5, p = sum = 9;
        x[3] = p;
        x[4] = sum;
    }
}

/* The host cache's view of one layer: the policy state (policy.c) and what
 * expert_cache.c keeps beside it. */
struct Mirror {
    cache_layer h;
    uint8_t *pf;                      /* (n_slots) prefetch marks */
    uint64_t stats[TS_CUDA_CS_COUNT]; /* the counters */
    const void **tab[3];              /* (n_experts) each: gate, up, down addresses */
    uint64_t *layout;                 /* (n_experts, TS_CUDA_LAYOUT_W) */
    const uint8_t *slots;             /* the device slots' address */
    uint64_t stride;
};

/* One pass of the host cache, from its rules: a pass judges the layer's
 * prefetches (end_locked), commits, counts (begin_locked's and end_locked's
 * sums) and points the tables at its slots (begin_locked's w[p][i]); a
 * prefetch commits, marks its misses' slots and counts them
 * (expert_cache_prefetch_on). */
static bool mirror_pass(Mirror &m, const int32_t *req, int k, bool pre, cache_plan *plan) {
    if (cache_plan_make(&m.h, req, k, plan) != TS_OK) return false;
    uint64_t *S = m.stats;
    if (pre) {
        cache_prefetch_commit(&m.h, req, plan);
        for (int i = 0; i < k; i++)
            if (!plan->hit[i]) {
                m.pf[plan->slot[i]] = 1;
                S[TS_CUDA_CS_PF_COPIES]++;
                S[TS_CUDA_CS_BYTES_PF] += m.layout[(size_t)req[i] * TS_CUDA_LAYOUT_W + 3];
            }
        return true;
    }
    for (int i = 0; i < k; i++)
        if (plan->hit[i] && m.pf[plan->slot[i]]) S[TS_CUDA_CS_PF_SAVED]++, m.pf[plan->slot[i]] = 0;
    for (int j = 0; j < m.h.n_slots; j++)
        if (m.pf[j]) S[TS_CUDA_CS_PF_WASTED]++, m.pf[j] = 0;
    cache_commit(&m.h, req, plan);
    S[TS_CUDA_CS_PASSES]++;
    S[TS_CUDA_CS_REQUESTS] += (uint64_t)k;
    S[TS_CUDA_CS_HITS] += (uint64_t)(k - plan->n_miss);
    S[TS_CUDA_CS_MISSES] += (uint64_t)plan->n_miss;
    for (int i = 0; i < k; i++) {
        const uint64_t *L = m.layout + (size_t)req[i] * TS_CUDA_LAYOUT_W;
        S[TS_CUDA_CS_BYTES_REQ] += L[4];
        if (!plan->hit[i]) {
            if (plan->evicted[i] >= 0) S[TS_CUDA_CS_EVICT]++;
            else S[TS_CUDA_CS_COLD]++;
            S[TS_CUDA_CS_BYTES_UP] += L[3];
        }
        if (m.slots) /* a layer without tables has no slot address either */
            for (int p = 0; p < 3; p++) m.tab[p][req[i]] = m.slots + (uint64_t)plan->slot[i] * m.stride + L[p];
    }
    return true;
}

static void mirror_init(Mirror &m, int n_slots, int n_experts, cache_policy policy, uint64_t stride, uint64_t max_slice) {
    CHECK(cache_layer_init(&m.h, n_slots, n_experts, policy) == TS_OK);
    m.pf = (uint8_t *)calloc((size_t)n_slots, 1);
    memset(m.stats, 0, sizeof m.stats);
    for (int p = 0; p < 3; p++) {
        m.tab[p] = (const void **)malloc(sizeof(void *) * (size_t)n_experts);
        for (int e = 0; e < n_experts; e++) m.tab[p][e] = POISON_PTR;
    }
    m.layout = (uint64_t *)malloc(8 * TS_CUDA_LAYOUT_W * (size_t)n_experts);
    make_layout(m.layout, n_experts, stride, max_slice);
    m.slots = NULL;
    m.stride = stride;
}

static void mirror_free(Mirror &m) {
    cache_layer_free(&m.h);
    free(m.pf), free(m.layout);
    for (int p = 0; p < 3; p++) free(m.tab[p]);
}

struct DevLayer {
    ts_cuda_cache_layer c;
    const void **tab[3]; /* (n_experts) device tables, or NULL */
    uint64_t *layout;    /* c.layout, writable */
};

/* The device layer; with extras, marks, counters, layout, slots and tables
 * too (the mirror's slot address becomes the device's). */
static DevLayer dev_make(Mirror &m, int policy, bool extras) {
    const int n_slots = m.h.n_slots, n_experts = m.h.n_experts;
    DevLayer d;
    memset(&d, 0, sizeof d);
    d.c.n_slots = n_slots;
    d.c.n_experts = n_experts;
    d.c.policy = policy;
    d.c.slot_expert = (int32_t *)tcu_dalloc(4 * (size_t)n_slots);
    d.c.slot_tick = (uint64_t *)tcu_dalloc(8 * (size_t)n_slots);
    d.c.expert_slot = (int32_t *)tcu_dalloc(4 * (size_t)n_experts);
    d.c.expert_count = (uint64_t *)tcu_dalloc(8 * (size_t)n_experts);
    d.c.tick = (uint64_t *)tcu_dalloc(8);
    if (extras) {
        d.c.prefetched = (uint8_t *)tcu_dalloc((size_t)n_slots);
        d.c.stats = (uint64_t *)tcu_dalloc(8 * TS_CUDA_CS_COUNT);
        d.c.layout = d.layout = (uint64_t *)tcu_dalloc(8 * TS_CUDA_LAYOUT_W * (size_t)n_experts);
        d.c.slots = (uint8_t *)tcu_dalloc((size_t)(m.stride * (uint64_t)n_slots));
        d.c.stride = m.stride;
        m.slots = d.c.slots;
        for (int p = 0; p < 3; p++) d.tab[p] = (const void **)tcu_dalloc(sizeof(void *) * (size_t)n_experts);
    }
    return d;
}

/* The device state := the mirror's. */
static void dev_set(DevLayer &d, const Mirror &m) {
    const cache_layer &h = m.h;
    tcu_up(d.c.slot_expert, h.slot_expert, 4 * (size_t)h.n_slots);
    tcu_up(d.c.slot_tick, h.slot_tick, 8 * (size_t)h.n_slots);
    tcu_up(d.c.expert_slot, h.expert_slot, 4 * (size_t)h.n_experts);
    tcu_up(d.c.expert_count, h.expert_count, 8 * (size_t)h.n_experts);
    tcu_up(d.c.tick, &h.tick, 8);
    if (!d.c.stats) return;
    tcu_up(d.c.prefetched, m.pf, (size_t)h.n_slots);
    tcu_up(d.c.stats, m.stats, sizeof m.stats);
    tcu_up(d.layout, m.layout, 8 * TS_CUDA_LAYOUT_W * (size_t)h.n_experts);
    for (int p = 0; p < 3; p++) tcu_up(d.tab[p], m.tab[p], sizeof(void *) * (size_t)h.n_experts);
}

/* Number of policy state words that differ between the device and the CPU. */
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

/* Marks, counters and table entries that differ from the mirror's (the first
 * few printed, under what). */
static size_t extras_diff(const DevLayer &d, const Mirror &m, const char *what, int pass) {
    const size_t ns = (size_t)m.h.n_slots, ne = (size_t)m.h.n_experts;
    uint8_t *pf = (uint8_t *)malloc(ns);
    const void **tab = (const void **)malloc(sizeof(void *) * ne);
    uint64_t stats[TS_CUDA_CS_COUNT];
    tcu_down(pf, d.c.prefetched, ns);
    tcu_down(stats, d.c.stats, sizeof stats);
    size_t bad = 0, shown = 0;
    for (size_t s = 0; s < ns; s++) bad += pf[s] != m.pf[s];
    for (int j = 0; j < TS_CUDA_CS_COUNT; j++)
        if (stats[j] != m.stats[j]) {
            if (shown++ < 3)
                printf("    %s pass %d: %s %llu, want %llu\n", what, pass, stat_names[j], (unsigned long long)stats[j],
                       (unsigned long long)m.stats[j]);
            bad++;
        }
    for (int p = 0; p < 3; p++) {
        tcu_down(tab, d.tab[p], sizeof(void *) * ne);
        for (size_t e = 0; e < ne; e++)
            if (tab[e] != m.tab[p][e]) {
                if (shown++ < 3) printf("    %s pass %d: table %d expert %zu: %p, want %p\n", what, pass, p, e, tab[e], m.tab[p][e]);
                bad++;
            }
    }
    free(pf), free(tab);
    return bad;
}

static void dev_free(DevLayer &d) {
    cudaFree(d.c.slot_expert), cudaFree(d.c.slot_tick), cudaFree(d.c.expert_slot), cudaFree(d.c.expert_count);
    cudaFree(d.c.tick), cudaFree(d.c.prefetched), cudaFree(d.c.stats), cudaFree(d.layout), cudaFree(d.c.slots);
    for (int p = 0; p < 3; p++) cudaFree(d.tab[p]);
}

/* A skewed id (u^2: the low ids popular) not among req[0..n). */
static int32_t draw_one(const int32_t *req, int n, int n_experts) {
    for (;;) {
        const double u = tcu_uniform();
        const int32_t e = (int32_t)(u * u * n_experts);
        bool dup = false;
        for (int j = 0; j < n; j++) dup |= req[j] == e;
        if (!dup) return e;
    }
}

/* k distinct ids. After a prefetch (prev, n_prev ids), each of its ids is
 * asked again with probability 3/4, in its place: the engine's guesses are
 * mostly right. */
static void draw(int32_t *req, int k, int n_experts, const int32_t *prev, int n_prev) {
    for (int i = 0; i < k; i++) {
        bool reuse = i < n_prev && tcu_u64() % 4 != 0;
        for (int j = 0; j < i && reuse; j++) reuse = req[j] != prev[i];
        req[i] = reuse ? prev[i] : draw_one(req, i, n_experts);
    }
}

/* The device's tables as ts_cuda_cache_pass takes them (a host array of 3). */
#define TABS(d) ((d).c.stats ? (const void **const *)(d).tab : NULL)

static void run_case(int n_slots, int n_experts, int k, cache_policy policy, int passes, bool extras) {
    char what[160];
    snprintf(what, sizeof what, "cache_pass %s slots=%d experts=%d k=%d passes=%d%s", cache_policy_name(policy), n_slots,
             n_experts, k, passes, extras ? "" : " bare");
    const uint64_t stride = 8192;
    Mirror m;
    mirror_init(m, n_slots, n_experts, policy, stride, stride / 3 - 64);
    DevLayer d = dev_make(m, policy == CACHE_POLICY_LRU ? TS_CUDA_CACHE_LRU : TS_CUDA_CACHE_LFU, extras);
    dev_set(d, m);
    int32_t *dreq = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dslot = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K),
            *dhit = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dev = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));
    TCU(cudaMemset(derr, 0, sizeof(unsigned)));
    size_t plan_bad = 0, state_bad = 0, extra_bad = 0, n_hit = 0, n_evict = 0;
    int32_t prev[TS_CUDA_CACHE_MAX_K];
    int n_prev = 0;
    for (int p = 0; p < passes; p++) {
        int32_t req[TS_CUDA_CACHE_MAX_K], slot[TS_CUDA_CACHE_MAX_K], hit[TS_CUDA_CACHE_MAX_K], ev[TS_CUDA_CACHE_MAX_K];
        const int kp = 1 + (int)(tcu_u64() % (uint64_t)k); /* 1..k requests */
        const bool pre = tcu_u64() % 8 == 0;
        draw(req, kp, n_experts, prev, n_prev);
        n_prev = pre ? kp : 0;
        memcpy(prev, req, sizeof(int32_t) * (size_t)kp);
        cache_plan plan;
        if (!mirror_pass(m, req, kp, pre, &plan)) {
            CHECKF(false, "%s: the CPU refused pass %d", what, p);
            break;
        }
        tcu_up(dreq, req, 4 * (size_t)kp);
        tcu_poison(dslot, 4 * (size_t)kp);
        tcu_poison(dhit, 4 * (size_t)kp);
        tcu_poison(dev, 4 * (size_t)kp);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, kp, pre, dslot, dhit, dev, TABS(d), derr), what);
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
        if (extras) extra_bad += extras_diff(d, m, what, p);
        if (p % 16 == 15 || p == passes - 1) state_bad += dev_diff(d, m.h);
    }
    unsigned err = 0;
    tcu_down(&err, derr, sizeof err);
    const bool ok = plan_bad == 0 && state_bad == 0 && extra_bad == 0 && err == 0;
    printf("%-64s %zu plan entries, %zu state words, %zu marks/counters/table entries differ (%zu hits, %zu evictions, "
           "%llu+%llu prefetches saved+wasted) %s\n",
           what, plan_bad, state_bad, extra_bad, n_hit, n_evict, (unsigned long long)m.stats[TS_CUDA_CS_PF_SAVED],
           (unsigned long long)m.stats[TS_CUDA_CS_PF_WASTED], ok ? "ok" : "FAIL");
    CHECKF(ok, "%s: %zu plan entries, %zu state words and %zu extras differ, error word %#x", what, plan_bad, state_bad, extra_bad,
           err);
    /* the sequence must have exercised the policy: hits and evictions both */
    CHECKF(n_hit > 0 && (n_slots >= n_experts || n_evict > 0), "%s: a degenerate sequence (%zu hits, %zu evictions)", what,
           n_hit, n_evict);
    if (extras) g_saved += m.stats[TS_CUDA_CS_PF_SAVED], g_wasted += m.stats[TS_CUDA_CS_PF_WASTED];
    mirror_free(m);
    dev_free(d);
    cudaFree(dreq), cudaFree(dslot), cudaFree(dhit), cudaFree(dev), cudaFree(derr);
}

/* Bad requests: nothing changes, nothing is written, the error bit is set;
 * then the refusals. */
static void check_bad_requests(void) {
    const int n_slots = 8, n_experts = 16;
    Mirror m;
    mirror_init(m, n_slots, n_experts, CACHE_POLICY_LFU, 4096, 1000);
    DevLayer d = dev_make(m, TS_CUDA_CACHE_LFU, true);
    dev_set(d, m);
    int32_t *dreq = (int32_t *)tcu_dalloc(16), *dslot = (int32_t *)tcu_dalloc(16), *dhit = (int32_t *)tcu_dalloc(16),
            *dev = (int32_t *)tcu_dalloc(16);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));
    /* a state with marks, counters and written table entries: a pass, then a prefetch */
    const int32_t warm[2][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    for (int w = 0; w < 2; w++) {
        cache_plan plan;
        CHECK(mirror_pass(m, warm[w], 4, w == 1, &plan));
        tcu_up(dreq, warm[w], 16);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, 4, w == 1, dslot, dhit, dev, TABS(d), NULL), "cache_pass warm-up");
    }
    tcu_sync("cache_pass warm-up");
    CHECKF(extras_diff(d, m, "warm-up", 0) == 0 && dev_diff(d, m.h) == 0, "cache_pass warm-up differs");
    const int32_t cases[3][4] = {{3, 5, 3, 1}, {3, 16, 2, 1}, {-1, 0, 1, 2}}; /* duplicate, >= n_experts, < 0 */
    for (int c = 0; c < 6; c++) {
        const bool pre = c >= 3;
        char what[96];
        snprintf(what, sizeof what, "cache_pass bad request %d%s", c % 3, pre ? " (prefetch)" : "");
        TCU(cudaMemset(derr, 0, sizeof(unsigned)));
        tcu_up(dreq, cases[c % 3], 16);
        tcu_poison(dslot, 16);
        tcu_poison(dhit, 16);
        tcu_poison(dev, 16);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, 4, pre, dslot, dhit, dev, TABS(d), derr), what);
        tcu_sync(what);
        unsigned err = 0;
        int32_t out[12];
        tcu_down(&err, derr, sizeof err);
        tcu_down(out, dslot, 16);
        tcu_down(out + 4, dhit, 16);
        tcu_down(out + 8, dev, 16);
        size_t written = 0;
        for (int i = 0; i < 12; i++) written += out[i] != -1; /* poison: all bits set */
        const size_t changed = dev_diff(d, m.h) + extras_diff(d, m, what, 0);
        const bool ok = err == TS_CUDA_ERR_EXPERT && written == 0 && changed == 0;
        printf("%-64s error %#x, %zu outputs written, %zu state words changed %s\n", what, err, written, changed, ok ? "ok" : "FAIL");
        CHECKF(ok, "%s: error %#x, %zu written, %zu changed", what, err, written, changed);
    }
    /* refused on the host: k above the slots or TS_CUDA_CACHE_MAX_K, no state, bad policy, too many slots */
    const void **const *tabs = TABS(d);
    CHECK(ts_cuda_cache_pass(NULL, &d.c, dreq, n_slots + 1, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_cache_pass(NULL, &d.c, dreq, -1, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_cache_pass(NULL, &d.c, NULL, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_cache_pass(NULL, NULL, dreq, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    ts_cuda_cache_layer bad = d.c;
    bad.policy = 2;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    bad = d.c, bad.tick = NULL;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    bad = d.c, bad.n_slots = TS_CUDA_CACHE_MAX_SLOTS + 1;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    bad = d.c, bad.n_slots = TS_CUDA_CACHE_MAX_K + 8;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, TS_CUDA_CACHE_MAX_K + 1, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    /* counters or tables without the layout, tables without the slots (a prefetch's too), a NULL table */
    bad = d.c, bad.layout = NULL;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, NULL, derr) == TS_ERR_ARG);
    bad.stats = NULL;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    bad = d.c, bad.slots = NULL;
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, false, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_cache_pass(NULL, &bad, dreq, 2, true, dslot, dhit, dev, tabs, derr) == TS_ERR_ARG);
    const void **holed[3] = {d.tab[0], NULL, d.tab[2]};
    CHECK(ts_cuda_cache_pass(NULL, &d.c, dreq, 2, false, dslot, dhit, dev, holed, derr) == TS_ERR_ARG);
    CHECK(cudaGetLastError() == cudaSuccess); /* refusals launch nothing */
    tcu_sync("cache_pass refusals");
    CHECKF(dev_diff(d, m.h) + extras_diff(d, m, "refusals", 0) == 0, "cache_pass: a refused call changed the state");
    printf("%-64s %s\n", "argument refusals", "checked");
    mirror_free(m);
    dev_free(d);
    cudaFree(dreq), cudaFree(dslot), cudaFree(dhit), cudaFree(dev), cudaFree(derr);
}

/* Bytes of the device slots that differ from the shadow. */
static size_t slots_diff(const DevLayer &d, const uint8_t *shadow, uint8_t *got, size_t bytes) {
    tcu_down(got, d.c.slots, bytes);
    size_t bad = 0;
    for (size_t b = 0; b < bytes; b++) bad += got[b] != shadow[b];
    return bad;
}

/* Passes of the device policy, each followed by the fill from pinned host
 * memory (tier + e * stride, misalign bytes into the allocation); after each
 * pass the slot array must be the shadow's: each miss's first len bytes put
 * in its slot, every other byte as it was. */
static void check_fill(int n_slots, int n_experts, int k, int passes, uint64_t stride, int misalign) {
    char what[128];
    snprintf(what, sizeof what, "expert_fill slots=%d experts=%d k=%d stride=%llu%s passes=%d", n_slots, n_experts, k,
             (unsigned long long)stride, misalign ? " unaligned" : "", passes);
    Mirror m;
    mirror_init(m, n_slots, n_experts, CACHE_POLICY_LFU, stride, stride / 3 - 64);
    DevLayer d = dev_make(m, TS_CUDA_CACHE_LFU, true);
    dev_set(d, m);
    const size_t slot_bytes = (size_t)(stride * (uint64_t)n_slots);
    tcu_poison(d.c.slots, slot_bytes);
    uint8_t *shadow = (uint8_t *)malloc(slot_bytes), *got = (uint8_t *)malloc(slot_bytes), *host = NULL;
    memset(shadow, 0xff, slot_bytes);
    TCU(cudaHostAlloc((void **)&host, (size_t)(stride * (uint64_t)n_experts) + 16, cudaHostAllocDefault));
    tcu_fill_bytes(host, (size_t)(stride * (uint64_t)n_experts) + 16);
    const uint8_t *tier = host + misalign;
    int32_t *dreq = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dslot = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K),
            *dhit = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K), *dev = (int32_t *)tcu_dalloc(4 * TS_CUDA_CACHE_MAX_K);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));
    TCU(cudaMemset(derr, 0, sizeof(unsigned)));
    size_t bad_bytes = 0, plan_bad = 0, n_miss = 0;
    int32_t prev[TS_CUDA_CACHE_MAX_K];
    int n_prev = 0;
    const int caps[3] = {0, 2, 1};
    for (int pass = 0; pass < passes; pass++) {
        int32_t req[TS_CUDA_CACHE_MAX_K], slot[TS_CUDA_CACHE_MAX_K];
        int kp = 1 + (int)(tcu_u64() % (uint64_t)k);
        bool pre = tcu_u64() % 4 == 0;
        draw(req, kp, n_experts, prev, n_prev);
        if (pass == 0) /* the stride-long expert and the 9-byte one, whatever the draws */
            kp = 2, pre = false, req[0] = 0, req[1] = 1;
        n_prev = pre ? kp : 0;
        memcpy(prev, req, sizeof(int32_t) * (size_t)kp);
        cache_plan plan;
        CHECK(mirror_pass(m, req, kp, pre, &plan));
        tcu_up(dreq, req, 4 * (size_t)kp);
        TCU_OK(ts_cuda_cache_pass(NULL, &d.c, dreq, kp, pre, dslot, dhit, dev, TABS(d), derr), what);
        TCU_OK(ts_cuda_expert_fill(NULL, &d.c, tier, dreq, dslot, dhit, kp, caps[pass % 3], derr), what);
        tcu_sync(what);
        tcu_down(slot, dslot, 4 * (size_t)kp);
        for (int i = 0; i < kp; i++) {
            plan_bad += slot[i] != plan.slot[i];
            if (plan.hit[i]) continue;
            const uint64_t len = m.layout[(size_t)req[i] * TS_CUDA_LAYOUT_W + 3];
            memcpy(shadow + (uint64_t)plan.slot[i] * stride, tier + (uint64_t)req[i] * stride, (size_t)len);
            n_miss++;
        }
        bad_bytes += slots_diff(d, shadow, got, slot_bytes);
    }
    unsigned err = 0;
    tcu_down(&err, derr, sizeof err);
    const bool ok = bad_bytes == 0 && plan_bad == 0 && err == 0;
    printf("%-64s %zu misses copied, %zu bytes of %zu slots wrong %s\n", what, n_miss, bad_bytes, slot_bytes, ok ? "ok" : "FAIL");
    CHECKF(ok, "%s: %zu bytes wrong, %zu plan entries differ, error word %#x", what, bad_bytes, plan_bad, err);
    CHECKF(n_miss > 0, "%s: no miss was copied", what);

    /* skipped with the error bit: a slot out of range, an id out of range
     * either way, a length above the stride; a hit, even a nonsensical one,
     * copies nothing and sets nothing */
    tcu_down(shadow, d.c.slots, slot_bytes); /* these calls' writes alone, whatever the passes left wrong */
    uint64_t *longer = (uint64_t *)malloc(8 * TS_CUDA_LAYOUT_W * (size_t)n_experts);
    memcpy(longer, m.layout, 8 * TS_CUDA_LAYOUT_W * (size_t)n_experts);
    longer[2 * TS_CUDA_LAYOUT_W + 3] = stride + 1;
    tcu_up(d.layout, longer, 8 * TS_CUDA_LAYOUT_W * (size_t)n_experts);
    const int32_t bads[5][3] = {{0, n_slots, 0}, {n_experts, 0, 0}, {-1, 0, 0}, {2, 0, 0}, {n_experts, -1, 1}}; /* req, slot, hit */
    for (int c = 0; c < 5; c++) {
        char w2[96];
        snprintf(w2, sizeof w2, "expert_fill bad request %d", c);
        tcu_up(dreq, &bads[c][0], 4);
        tcu_up(dslot, &bads[c][1], 4);
        tcu_up(dhit, &bads[c][2], 4);
        TCU(cudaMemset(derr, 0, sizeof(unsigned)));
        TCU_OK(ts_cuda_expert_fill(NULL, &d.c, tier, dreq, dslot, dhit, 1, c % 2 ? 1 : 0, derr), w2);
        tcu_sync(w2);
        tcu_down(&err, derr, sizeof err);
        const size_t wrong = slots_diff(d, shadow, got, slot_bytes);
        const unsigned want = bads[c][2] ? 0u : TS_CUDA_ERR_EXPERT;
        CHECKF(err == want && wrong == 0, "%s: error word %#x (want %#x), %zu bytes written", w2, err, want, wrong);
    }
    tcu_up(d.layout, m.layout, 8 * TS_CUDA_LAYOUT_W * (size_t)n_experts);
    free(longer);
    /* refusals */
    ts_cuda_cache_layer bad = d.c;
    CHECK(ts_cuda_expert_fill(NULL, NULL, tier, dreq, dslot, dhit, 1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, NULL, dreq, dslot, dhit, 1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, NULL, dslot, dhit, 1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, NULL, dhit, 1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, NULL, 1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, n_slots + 1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, -1, 0, derr) == TS_ERR_ARG);
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, 1, -1, derr) == TS_ERR_ARG);
    bad.n_slots = TS_CUDA_CACHE_MAX_K + 8;
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, TS_CUDA_CACHE_MAX_K + 1, 0, derr) == TS_ERR_ARG);
    bad = d.c, bad.layout = NULL;
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, 1, 0, derr) == TS_ERR_ARG);
    bad = d.c, bad.slots = NULL;
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, 1, 0, derr) == TS_ERR_ARG);
    bad = d.c, bad.stride = 0;
    CHECK(ts_cuda_expert_fill(NULL, &bad, tier, dreq, dslot, dhit, 1, 0, derr) == TS_ERR_ARG);
    CHECK(cudaGetLastError() == cudaSuccess);
    free(shadow), free(got);
    cudaFreeHost(host);
    mirror_free(m);
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
        run_case(8, 16, 8, pol, passes, true);   /* k = slots: every free slot a victim in one pass */
        run_case(8, 16, 8, pol, passes, false);  /* no marks, counters or tables */
        run_case(32, 128, 8, pol, passes, true); /* the 30B-A3B at 25% */
        run_case(45, 128, 8, pol, passes, true); /* two slots on some lanes */
        run_case(20, 60, 5, pol, passes, true);
        run_case(64, 64, TS_CUDA_CACHE_MAX_K, pol, passes / 4, true); /* every expert fits: no eviction after the cold misses */
        if (!small) run_case(1000, 1500, 16, pol, passes, true);      /* many slots a lane */
    }
    printf("%-64s %llu saved, %llu wasted\n", "prefetches judged over the cases", (unsigned long long)g_saved,
           (unsigned long long)g_wasted);
    CHECKF(g_saved > 0 && g_wasted > 0, "degenerate sequences: %llu prefetches saved, %llu wasted", (unsigned long long)g_saved,
           (unsigned long long)g_wasted);
    check_bad_requests();
    check_fill(5, 12, 3, small ? 15 : 45, 40960, 0); /* 3 items a request, one block striding over all with cap 1 */
    check_fill(4, 8, 2, small ? 6 : 24, 12288, 4);   /* the tier 4 bytes off: bytes throughout */
    if (!small) check_fill(32, 128, 8, 60, 81920, 0); /* the 30B-A3B at 25%, with smaller experts */
    return tu_finish();
}
