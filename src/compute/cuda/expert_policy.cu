/* The expert slot cache of a streamed MoE layer on the device: one layer's
 * residency state (experts/policy.c), prefetch marks and counters
 * (experts/expert_cache.c) in device memory, a routed pass's whole
 * bookkeeping done by one warp (ts_cuda_cache_pass) and its misses copied
 * into their slots by the SMs (ts_cuda_expert_fill). The engine's streamed
 * decode (being written now) plans each layer on the device with these, so
 * a decode token stays one graph instead of stopping at every MoE layer for
 * the host to read the routed ids, plan and copy (issue 12's notes,
 * "read-through"). The host cache stays the reference: the same plan, the
 * same state, the same counters, pass for pass.
 *
 * The plan and commit are exactly cache_plan_make then cache_commit (or
 * cache_prefetch_commit): hits pin their slots; misses take victims in
 * request order, each the lowest key (empty before occupied, then LFU's use
 * count, then the slot's last tick, then the slot index; LRU without the
 * count) over the slots neither pinned nor taken by an earlier miss; the
 * commit bumps the tick once, then per request in order moves a miss into its
 * slot (its old holder made non-resident) and, unless a prefetch, stamps the
 * slot's tick and the expert's count. The warp computes each victim as a
 * reduction over the slots (a lane per 32nd slot); the state changes are made
 * by lane 0 in request order, as the CPU makes them.
 *
 * Around the commit, what end_locked and expert_cache_prefetch_on do: a pass
 * first judges the layer's prefetches (a hit on a prefetched slot saved a
 * miss; every other prefetched slot, evicted now or not, was a wasted copy:
 * all marks cleared), a prefetch marks its misses' slots; the counters are
 * the host's expert_cache_stats fields, summed over the requests by the lanes
 * (sums of integers: any order gives the host's value); the tables, indexed
 * by expert id, get each request's three slice addresses in its slot, so the
 * expert kernels read the slots through them as they read resident experts.
 *
 * A request that is not k distinct ids in [0, n_experts) changes nothing and
 * sets TS_CUDA_ERR_EXPERT (the CPU returns TS_ERR_ARG); outputs, marks,
 * counters and tables are then not written.
 *
 * The fill (ts_cuda_expert_fill) copies a pass's misses into their slots with
 * the SMs' own loads from any device-accessible source (the host tier's
 * pinned memory, which the device addresses directly with unified
 * addressing): no host round trip decides what to copy, and the lengths are
 * the layout's, read on the device. The work is (request, 16 KiB chunk of the
 * slot) items, a block per item or, under max_blocks, each block striding
 * over them; a hit's or a chunk past the expert's length is skipped at once.
 * 16-byte words four in flight a thread when the tier, the slots and the
 * stride are 16-byte aligned (a PCIe read's latency is microseconds: the
 * bus stays busy only with many loads outstanding), then the length's last
 * 0..15 bytes one by one; bytes throughout only for an unaligned layout. */
#include <limits.h>

#include "compute/cuda/cuda_common.cuh"
#include "compute/cuda/cuda_kernels.h"

namespace {

/* A candidate victim: (class 0 empty / 1 occupied / 2 none, count, tick, slot), smaller is better. */
struct Cand {
    unsigned cls;
    unsigned long long cnt, tick;
    int slot;
};

TS_DEV bool cand_before(const Cand &a, const Cand &b) {
    if (a.cls != b.cls) return a.cls < b.cls;
    if (a.cnt != b.cnt) return a.cnt < b.cnt;
    if (a.tick != b.tick) return a.tick < b.tick;
    return a.slot < b.slot;
}

TS_DEV unsigned long long warp_sum_u64(unsigned long long v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The three tables a pass writes (tab[0..2]), or none. */
struct PassTabs {
    const void **p[3];
};

#define PIN_HIT 1  /* pin[s]: a hit's slot */
#define PIN_MISS 2 /* pin[s]: taken by a miss of this pass */

/* One block of 32 threads. */
__global__ void __launch_bounds__(32) cache_pass_kernel(const ts_cuda_cache_layer c, const int32_t *req, int k, int prefetch,
                                                        int32_t *slot, int32_t *hit, int32_t *evicted, const PassTabs tab,
                                                        unsigned *err) {
    ts_pdl_enter();
    __shared__ int32_t rq[TS_CUDA_CACHE_MAX_K], sl[TS_CUDA_CACHE_MAX_K], ev[TS_CUDA_CACHE_MAX_K];
    __shared__ uint64_t rcnt[TS_CUDA_CACHE_MAX_K]; /* each request's use count before the pass */
    __shared__ uint8_t ht[TS_CUDA_CACHE_MAX_K];
    __shared__ uint8_t pin[TS_CUDA_CACHE_MAX_SLOTS]; /* 0, PIN_HIT or PIN_MISS: never a victim of this pass */
    /* every slot's victim key, loaded once: the plan reads the state as it
     * was before the pass (cache_plan_make changes nothing), so the k
     * victim searches run on shared memory, not k chains of global loads */
    __shared__ int32_t s_exp[TS_CUDA_CACHE_MAX_SLOTS];
    __shared__ uint64_t s_cnt[TS_CUDA_CACHE_MAX_SLOTS], s_tick[TS_CUDA_CACHE_MAX_SLOTS];
    const int lane = threadIdx.x;
    const uint64_t tick = prefetch ? 0 : *c.tick + 1; /* read before any lane writes state (a __syncwarp follows) */
    bool bad = false;
    for (int i = lane; i < k; i += 32) {
        const int32_t e = req[i];
        rq[i] = e;
        bad |= e < 0 || e >= c.n_experts;
    }
    for (int s = lane; s < c.n_slots; s += 32) {
        pin[s] = 0;
        const int32_t e = c.slot_expert[s];
        s_exp[s] = e;
        s_tick[s] = c.slot_tick[s];
        s_cnt[s] = e >= 0 && c.policy == TS_CUDA_CACHE_LFU ? c.expert_count[e] : 0ull;
    }
    __syncwarp();
    for (int i = lane; i < k; i += 32)
        for (int j = 0; j < i; j++) bad |= rq[j] == rq[i];
    if (__any_sync(0xffffffffu, bad)) {
        if (lane == 0 && err) atomicOr(err, TS_CUDA_ERR_EXPERT);
        return;
    }
    /* hits (distinct experts: distinct slots) */
    for (int i = lane; i < k; i += 32) {
        const int32_t s = c.expert_slot[rq[i]];
        ht[i] = s >= 0;
        sl[i] = s;
        ev[i] = -1;
        rcnt[i] = c.expert_count[rq[i]];
        if (s >= 0) pin[s] = PIN_HIT;
    }
    __syncwarp();
    /* misses in request order; k <= n_slots leaves each one a slot */
    for (int i = 0; i < k; i++) {
        if (ht[i]) continue; /* shared: warp-uniform */
        Cand best = {2u, 0ull, 0ull, INT_MAX};
        for (int s = lane; s < c.n_slots; s += 32) {
            if (pin[s]) continue;
            const Cand cs = s_exp[s] < 0 ? Cand{0u, 0ull, 0ull, s} : Cand{1u, (unsigned long long)s_cnt[s], (unsigned long long)s_tick[s], s};
            if (cand_before(cs, best)) best = cs;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            Cand other;
            other.cls = __shfl_xor_sync(0xffffffffu, best.cls, o);
            other.cnt = __shfl_xor_sync(0xffffffffu, best.cnt, o);
            other.tick = __shfl_xor_sync(0xffffffffu, best.tick, o);
            other.slot = __shfl_xor_sync(0xffffffffu, best.slot, o);
            if (cand_before(other, best)) best = other;
        }
        if (lane == 0) {
            pin[best.slot] = PIN_MISS;
            sl[i] = best.slot;
            ev[i] = s_exp[best.slot];
        }
        __syncwarp();
    }
    /* end_locked's judgement of the layer's prefetches, before the commit: a
     * prefetched slot this pass hits saved a miss, any other (this pass's
     * victim or not) was copied for nothing; a slot at a time, so a lane per
     * 32nd slot, the counts summed */
    if (!prefetch && c.prefetched) {
        unsigned long long saved = 0, wasted = 0;
        for (int s = lane; s < c.n_slots; s += 32)
            if (c.prefetched[s]) {
                if (pin[s] == PIN_HIT) saved++;
                else wasted++;
                c.prefetched[s] = 0;
            }
        saved = warp_sum_u64(saved);
        wasted = warp_sum_u64(wasted);
        if (lane == 0 && c.stats) {
            c.stats[TS_CUDA_CS_PF_SAVED] += saved;
            c.stats[TS_CUDA_CS_PF_WASTED] += wasted;
        }
    }
    /* the commit: cache_commit's request-order loop touches, per request,
     * its own slot, its own expert and (a miss) its victim's old expert, all
     * distinct across the pass (distinct requests hold or take distinct
     * slots; a victim's expert is not requested, or its slot would be a
     * hit's), so the requests commit in parallel with the same result */
    for (int i = lane; i < k; i += 32) {
        const int32_t s = sl[i], e = rq[i];
        if (!ht[i]) {
            if (ev[i] >= 0) c.expert_slot[ev[i]] = -1;
            c.slot_expert[s] = e;
            c.expert_slot[e] = s;
        }
        if (!prefetch) {
            c.slot_tick[s] = tick;
            c.expert_count[e] = rcnt[i] + 1;
        }
    }
    if (lane == 0 && !prefetch) *c.tick = tick;
    /* expert_cache_prefetch_on marks the slots it filled (distinct slots) */
    if (prefetch && c.prefetched)
        for (int i = lane; i < k; i += 32)
            if (!ht[i]) c.prefetched[sl[i]] = 1;
    if (c.stats) {
        unsigned long long miss = 0, cold = 0, breq = 0, bup = 0;
        for (int i = lane; i < k; i += 32) {
            const uint64_t *L = c.layout + (uint64_t)rq[i] * TS_CUDA_LAYOUT_W;
            breq += L[4];
            if (!ht[i]) miss++, cold += ev[i] < 0, bup += L[3];
        }
        miss = warp_sum_u64(miss);
        cold = warp_sum_u64(cold);
        breq = warp_sum_u64(breq);
        bup = warp_sum_u64(bup);
        if (lane == 0) {
            uint64_t *S = c.stats;
            if (prefetch) {
                S[TS_CUDA_CS_PF_COPIES] += miss;
                S[TS_CUDA_CS_BYTES_PF] += bup;
            } else {
                S[TS_CUDA_CS_PASSES] += 1;
                S[TS_CUDA_CS_REQUESTS] += (uint64_t)k;
                S[TS_CUDA_CS_HITS] += (uint64_t)k - miss;
                S[TS_CUDA_CS_MISSES] += miss;
                S[TS_CUDA_CS_COLD] += cold;
                S[TS_CUDA_CS_EVICT] += miss - cold;
                S[TS_CUDA_CS_BYTES_REQ] += breq;
                S[TS_CUDA_CS_BYTES_UP] += bup;
            }
        }
    }
    /* begin_locked's weight pointers, by expert id: where each slice lies in
     * the request's slot */
    if (!prefetch && tab.p[0])
        for (int i = lane; i < k; i += 32) {
            const int32_t e = rq[i];
            const uint64_t *L = c.layout + (uint64_t)e * TS_CUDA_LAYOUT_W;
            const uint8_t *base = c.slots + (uint64_t)sl[i] * c.stride;
#pragma unroll
            for (int p = 0; p < 3; p++) tab.p[p][e] = base + L[p];
        }
    __syncwarp();
    for (int i = lane; i < k; i += 32) slot[i] = sl[i], hit[i] = ht[i], evicted[i] = ev[i];
}

#define FILL_THREADS 256
#define FILL_UNROLL 4                                        /* 16-byte words in flight a thread */
#define FILL_CHUNK ((uint64_t)FILL_THREADS * FILL_UNROLL * 16) /* bytes of one work item: one step of the block */

/* 1-D grid, FILL_THREADS threads; item w = request w / chunks, chunk w % chunks. */
__global__ void __launch_bounds__(FILL_THREADS) expert_fill_kernel(const uint8_t *tier, uint8_t *slots, const uint64_t *layout,
                                                                   uint64_t stride, int n_experts, int n_slots, const int32_t *req,
                                                                   const int32_t *slot, const int32_t *hit, int k, uint64_t chunks,
                                                                   int vec, unsigned *err) {
    ts_pdl_enter();
    const unsigned t = threadIdx.x;
    for (uint64_t w = blockIdx.x; w < chunks * (uint64_t)k; w += gridDim.x) {
        const int i = (int)(w / chunks);
        const uint64_t lo = (w % chunks) * FILL_CHUNK;
        if (hit[i]) continue; /* block-uniform, as everything up to the copy */
        const int32_t e = req[i], s = slot[i];
        const uint64_t n = e >= 0 && e < n_experts ? layout[(uint64_t)e * TS_CUDA_LAYOUT_W + 3] : 0;
        if (e < 0 || e >= n_experts || s < 0 || s >= n_slots || n > stride) {
            if (err && lo == 0 && t == 0) atomicOr(err, TS_CUDA_ERR_EXPERT);
            continue;
        }
        if (lo >= n) continue;
        const uint64_t hi = n - lo < FILL_CHUNK ? n : lo + FILL_CHUNK;
        const uint8_t *src = tier + (uint64_t)e * stride;
        uint8_t *dst = slots + (uint64_t)s * stride;
        uint64_t tail = lo;
        if (vec) {
            const uint4 *s4 = (const uint4 *)src;
            uint4 *d4 = (uint4 *)dst;
            const uint64_t w0 = lo / 16, w1 = hi / 16;
            uint4 v[FILL_UNROLL];
#pragma unroll
            for (int u = 0; u < FILL_UNROLL; u++) {
                const uint64_t j = w0 + (uint64_t)u * FILL_THREADS + t;
                if (j < w1) v[u] = s4[j];
            }
#pragma unroll
            for (int u = 0; u < FILL_UNROLL; u++) {
                const uint64_t j = w0 + (uint64_t)u * FILL_THREADS + t;
                if (j < w1) d4[j] = v[u];
            }
            tail = w1 * 16; /* the last item's 0..15 bytes past the last word */
        }
        for (uint64_t b = tail + t; b < hi; b += FILL_THREADS) dst[b] = src[b];
    }
}

} // namespace

ts_status ts_cuda_expert_fill(void *stream, const ts_cuda_cache_layer *c, const uint8_t *tier, const int32_t *req, const int32_t *slot,
                              const int32_t *hit, int k, int max_blocks, unsigned *err) {
    TS_ARG_CHECK(c && tier && req && slot && hit, "cuda expert_fill: NULL pointer");
    TS_ARG_CHECK(c->layout && c->slots && c->stride >= 1, "cuda expert_fill: no layout, slots or stride");
    TS_ARG_CHECK(c->n_experts >= 1 && c->n_slots >= 1, "cuda expert_fill: %d experts, %d slots", c->n_experts, c->n_slots);
    TS_ARG_CHECK(k >= 0 && k <= TS_CUDA_CACHE_MAX_K && k <= c->n_slots, "cuda expert_fill: %d requests for %d slots (at most %d)",
                 k, c->n_slots, TS_CUDA_CACHE_MAX_K);
    TS_ARG_CHECK(max_blocks >= 0, "cuda expert_fill: max_blocks %d", max_blocks);
    if (k == 0) return TS_OK;
    /* the lengths are on the device: items cover the stride, those past a length exit */
    const uint64_t chunks = ts_cdiv(c->stride, FILL_CHUNK);
    uint64_t blocks = chunks * (uint64_t)k;
    if (max_blocks > 0 && blocks > (uint64_t)max_blocks) blocks = (uint64_t)max_blocks;
    if (blocks > INT_MAX) blocks = INT_MAX; /* the blocks stride past it */
    const int vec = (((uintptr_t)tier | (uintptr_t)c->slots | c->stride) & 15) == 0;
    ts_launch(&expert_fill_kernel, dim3((unsigned)blocks), FILL_THREADS, 0, ts_stream(stream))(
        tier, c->slots, c->layout, c->stride, c->n_experts, c->n_slots, req, slot, hit, k, chunks, vec, err);
    TS_CUDA_LAUNCHED("expert_fill");
    return TS_OK;
}

ts_status ts_cuda_cache_pass(void *stream, const ts_cuda_cache_layer *c, const int32_t *req, int k, bool prefetch, int32_t *slot,
                             int32_t *hit, int32_t *evicted, const void **const *tab, unsigned *err) {
    TS_ARG_CHECK(c && req && slot && hit && evicted, "cuda cache_pass: NULL pointer");
    TS_ARG_CHECK(c->slot_expert && c->slot_tick && c->expert_slot && c->expert_count && c->tick,
                 "cuda cache_pass: NULL state array");
    TS_ARG_CHECK(c->n_slots >= 1 && c->n_slots <= TS_CUDA_CACHE_MAX_SLOTS && c->n_experts >= 1,
                 "cuda cache_pass: %d slots (1..%d) for %d experts", c->n_slots, TS_CUDA_CACHE_MAX_SLOTS, c->n_experts);
    TS_ARG_CHECK(c->policy == TS_CUDA_CACHE_LFU || c->policy == TS_CUDA_CACHE_LRU, "cuda cache_pass: policy %d", c->policy);
    TS_ARG_CHECK(k >= 0 && k <= TS_CUDA_CACHE_MAX_K && k <= c->n_slots, "cuda cache_pass: %d requests for %d slots (at most %d)",
                 k, c->n_slots, TS_CUDA_CACHE_MAX_K);
    TS_ARG_CHECK(c->layout || (!c->stats && !tab), "cuda cache_pass: counters or tables need the layout");
    PassTabs t = {{NULL, NULL, NULL}};
    if (tab) {
        TS_ARG_CHECK(c->slots, "cuda cache_pass: tables need the slots");
        TS_ARG_CHECK(tab[0] && tab[1] && tab[2], "cuda cache_pass: a NULL table");
        if (!prefetch) t = PassTabs{{tab[0], tab[1], tab[2]}};
    }
    ts_launch(&cache_pass_kernel, 1, 32, 0, ts_stream(stream))(*c, req, k, prefetch ? 1 : 0, slot, hit, evicted, t, err);
    TS_CUDA_LAUNCHED("cache_pass");
    return TS_OK;
}
