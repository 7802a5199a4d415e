/* The expert slot cache's policy (experts/policy.c) on the device: one MoE
 * layer's residency state in device memory, a routed pass planned and
 * committed by one warp (ts_cuda_cache_pass). It is the first piece of a
 * streamed mode without a host round trip per layer: a decode token whose
 * slots are chosen on the device stays one graph (the plan: issue 12's notes,
 * "read-through"). Nothing calls it yet.
 *
 * Exactly cache_plan_make then cache_commit (or cache_prefetch_commit), the
 * CPU module being the reference: hits pin their slots; misses take victims
 * in request order, each the lowest key (empty before occupied, then LFU's
 * use count, then the slot's last tick, then the slot index; LRU without the
 * count) over the slots neither pinned nor taken by an earlier miss; the
 * commit bumps the tick once, then per request in order moves a miss into its
 * slot (its old holder made non-resident) and, unless a prefetch, stamps the
 * slot's tick and the expert's count. The warp computes each victim as a
 * reduction over the slots (a lane per 32nd slot); the state changes are made
 * by lane 0 in request order, as the CPU makes them.
 *
 * A request that is not k distinct ids in [0, n_experts) changes nothing and
 * sets TS_CUDA_ERR_EXPERT (the CPU returns TS_ERR_ARG); outputs are then not
 * written.
 *
 * The fill (ts_cuda_expert_fill) copies a pass's misses into their slots with
 * the SMs' own loads, from any device-accessible source (the host tier's
 * pinned memory, which the device addresses directly with unified
 * addressing): no host round trip decides what to copy. Grid (chunks, k,
 * sets): a block copies one chunk of one request's expert of one set, or
 * exits at once for a hit; 16-byte words four in flight a thread when the
 * source, the slot and the size allow, else bytes. */
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

/* One block of 32 threads. */
__global__ void __launch_bounds__(32) cache_pass_kernel(const ts_cuda_cache_layer c, const int32_t *req, int k, int prefetch,
                                                        int32_t *slot, int32_t *hit, int32_t *evicted, unsigned *err) {
    ts_pdl_enter();
    __shared__ int32_t rq[TS_CUDA_CACHE_MAX_K], sl[TS_CUDA_CACHE_MAX_K], ev[TS_CUDA_CACHE_MAX_K];
    __shared__ uint8_t ht[TS_CUDA_CACHE_MAX_K];
    __shared__ uint8_t pin[TS_CUDA_CACHE_MAX_SLOTS]; /* hit or already a miss's victim in this pass */
    const int lane = threadIdx.x;
    bool bad = false;
    for (int i = lane; i < k; i += 32) {
        const int32_t e = req[i];
        rq[i] = e;
        bad |= e < 0 || e >= c.n_experts;
    }
    for (int s = lane; s < c.n_slots; s += 32) pin[s] = 0;
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
        if (s >= 0) pin[s] = 1;
    }
    __syncwarp();
    /* misses in request order; k <= n_slots leaves each one a slot */
    for (int i = 0; i < k; i++) {
        if (ht[i]) continue; /* shared: warp-uniform */
        Cand best = {2u, 0ull, 0ull, INT_MAX};
        for (int s = lane; s < c.n_slots; s += 32) {
            if (pin[s]) continue;
            const int32_t e = c.slot_expert[s];
            const Cand cs = e < 0 ? Cand{0u, 0ull, 0ull, s}
                                  : Cand{1u, c.policy == TS_CUDA_CACHE_LFU ? (unsigned long long)c.expert_count[e] : 0ull,
                                         (unsigned long long)c.slot_tick[s], s};
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
            pin[best.slot] = 1;
            sl[i] = best.slot;
            ev[i] = c.slot_expert[best.slot];
        }
        __syncwarp();
    }
    /* the commit, in request order */
    if (lane == 0) {
        uint64_t tick = 0;
        if (!prefetch) *c.tick = tick = *c.tick + 1;
        for (int i = 0; i < k; i++) {
            const int32_t s = sl[i], e = rq[i];
            if (!ht[i]) {
                const int32_t old = c.slot_expert[s];
                if (old >= 0) c.expert_slot[old] = -1;
                c.slot_expert[s] = e;
                c.expert_slot[e] = s;
            }
            if (!prefetch) {
                c.slot_tick[s] = tick;
                c.expert_count[e]++;
            }
        }
    }
    __syncwarp();
    for (int i = lane; i < k; i += 32) slot[i] = sl[i], hit[i] = ht[i], evicted[i] = ev[i];
}

#define FILL_THREADS 256
#define FILL_UNROLL 4                                        /* 16-byte words in flight a thread */
#define FILL_CHUNK ((uint64_t)FILL_THREADS * FILL_UNROLL * 16) /* bytes a block copies per step */
#define FILL_MAX_SETS 4

struct FillArgs {
    ts_cuda_fill_set set[FILL_MAX_SETS];
    int n_experts, n_slots, k;
};

/* Grid (chunks, k, sets), FILL_THREADS threads. */
__global__ void __launch_bounds__(FILL_THREADS) expert_fill_kernel(const FillArgs a, const int32_t *req, const int32_t *slot,
                                                                   const int32_t *hit, unsigned *err) {
    ts_pdl_enter();
    const int i = blockIdx.y;
    if (hit[i]) return;
    const int32_t e = req[i], s = slot[i];
    if (e < 0 || e >= a.n_experts || s < 0 || s >= a.n_slots) {
        if (err && blockIdx.x == 0 && blockIdx.z == 0 && threadIdx.x == 0) atomicOr(err, TS_CUDA_ERR_EXPERT);
        return;
    }
    const ts_cuda_fill_set &F = a.set[blockIdx.z];
    const uint8_t *src = (const uint8_t *)F.src[e];
    uint8_t *dst = F.slots + (uint64_t)s * F.stride;
    const uint64_t n = F.bytes;
    if ((((uintptr_t)src | (uintptr_t)dst | n) & 15) == 0) {
        const uint4 *s4 = (const uint4 *)src;
        uint4 *d4 = (uint4 *)dst;
        const uint64_t nw = n / 16;
        for (uint64_t w0 = (uint64_t)blockIdx.x * (FILL_CHUNK / 16); w0 < nw; w0 += (uint64_t)gridDim.x * (FILL_CHUNK / 16)) {
            uint4 v[FILL_UNROLL];
#pragma unroll
            for (int u = 0; u < FILL_UNROLL; u++) {
                const uint64_t w = w0 + (uint64_t)u * FILL_THREADS + threadIdx.x;
                if (w < nw) v[u] = s4[w];
            }
#pragma unroll
            for (int u = 0; u < FILL_UNROLL; u++) {
                const uint64_t w = w0 + (uint64_t)u * FILL_THREADS + threadIdx.x;
                if (w < nw) d4[w] = v[u];
            }
        }
    } else {
        for (uint64_t b = (uint64_t)blockIdx.x * FILL_THREADS + threadIdx.x; b < n; b += (uint64_t)gridDim.x * FILL_THREADS)
            dst[b] = src[b];
    }
}

} // namespace

ts_status ts_cuda_expert_fill(void *stream, int n_set, const ts_cuda_fill_set *sets, int n_experts, int n_slots,
                              const int32_t *req, const int32_t *slot, const int32_t *hit, int k, unsigned *err) {
    TS_ARG_CHECK(sets && req && slot && hit, "cuda expert_fill: NULL pointer");
    TS_ARG_CHECK(n_set >= 1 && n_set <= FILL_MAX_SETS, "cuda expert_fill: %d sets (1..%d)", n_set, FILL_MAX_SETS);
    TS_ARG_CHECK(n_experts >= 1 && n_slots >= 1, "cuda expert_fill: %d experts, %d slots", n_experts, n_slots);
    TS_ARG_CHECK(k >= 0 && k <= TS_CUDA_CACHE_MAX_K && k <= n_slots, "cuda expert_fill: %d requests for %d slots", k, n_slots);
    FillArgs a;
    memset(&a, 0, sizeof a);
    uint64_t most = 0;
    for (int p = 0; p < n_set; p++) {
        const ts_cuda_fill_set &F = sets[p];
        TS_ARG_CHECK(F.src && F.slots, "cuda expert_fill: set %d: NULL sources or slots", p);
        TS_ARG_CHECK(F.bytes >= 1 && F.bytes <= F.stride, "cuda expert_fill: set %d: %llu bytes in a slot of %llu", p,
                     (unsigned long long)F.bytes, (unsigned long long)F.stride);
        a.set[p] = F;
        if (F.bytes > most) most = F.bytes;
    }
    if (k == 0) return TS_OK;
    a.n_experts = n_experts;
    a.n_slots = n_slots;
    a.k = k;
    uint64_t chunks = (most + FILL_CHUNK - 1) / FILL_CHUNK;
    if (chunks > 1024) chunks = 1024; /* the blocks stride past it */
    const dim3 grid((unsigned)chunks, (unsigned)k, (unsigned)n_set);
    ts_launch(&expert_fill_kernel, grid, FILL_THREADS, 0, ts_stream(stream))(a, req, slot, hit, err);
    TS_CUDA_LAUNCHED("expert_fill");
    return TS_OK;
}

ts_status ts_cuda_cache_pass(void *stream, const ts_cuda_cache_layer *c, const int32_t *req, int k, bool prefetch, int32_t *slot,
                             int32_t *hit, int32_t *evicted, unsigned *err) {
    TS_ARG_CHECK(c && req && slot && hit && evicted, "cuda cache_pass: NULL pointer");
    TS_ARG_CHECK(c->slot_expert && c->slot_tick && c->expert_slot && c->expert_count && c->tick,
                 "cuda cache_pass: NULL state array");
    TS_ARG_CHECK(c->n_slots >= 1 && c->n_slots <= TS_CUDA_CACHE_MAX_SLOTS && c->n_experts >= 1,
                 "cuda cache_pass: %d slots (1..%d) for %d experts", c->n_slots, TS_CUDA_CACHE_MAX_SLOTS, c->n_experts);
    TS_ARG_CHECK(c->policy == TS_CUDA_CACHE_LFU || c->policy == TS_CUDA_CACHE_LRU, "cuda cache_pass: policy %d", c->policy);
    TS_ARG_CHECK(k >= 0 && k <= TS_CUDA_CACHE_MAX_K && k <= c->n_slots, "cuda cache_pass: %d requests for %d slots (at most %d)",
                 k, c->n_slots, TS_CUDA_CACHE_MAX_K);
    ts_launch(&cache_pass_kernel, 1, 32, 0, ts_stream(stream))(*c, req, k, prefetch ? 1 : 0, slot, hit, evicted, err);
    TS_CUDA_LAUNCHED("cache_pass");
    return TS_OK;
}
