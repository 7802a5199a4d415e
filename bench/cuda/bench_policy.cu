/* Micro-benchmark of the expert cache's bookkeeping on the device
 * (expert_policy.cu): microseconds per routed pass, the latency it would add
 * to a decode layer, with prefetch marks, counters and the three weight
 * tables on, as the engine's streamed decode runs it. The 30B-A3B at 25% (32
 * slots of 128 experts, k = 8) and at the top-k minimum (8 slots), LFU and
 * LRU; each pass asks for one of 64 precomputed id vectors (8 distinct
 * experts each, uniform: the synthetic file's routing), so hits, misses and
 * evictions mix as they would there.
 *
 * Then the fill (ts_cuda_expert_fill): 8 misses of the 30B-A3B's expert as a
 * slot holds it (its three 884,736-byte slices one after another, 2,654,208
 * bytes, the stride that rounded to 4096) copied by the SMs from pinned host
 * memory, uncapped and with max_blocks 16 and 32 (a prefetch's fill beside
 * compute kernels), GB/s over the bus, against the same bytes by
 * cudaMemcpyAsync (the copy engines, one copy a miss as the host cache
 * issues them): whether SM loads over PCIe reach the DMA's rate decides
 * between the fill and the host's copies.
 *
 *   bench_policy            (BENCH_QUICK=1: fewer reps) */
#include "bench_util.h"

#define N_IDSETS 64

int main(void) {
    bench_require_gpu("bench_policy");
    bench_seed(12345);
    const int n_experts = 128, k = 8, slot_counts[2] = {32, 8};
    const uint64_t slice = 884736, len = 3 * slice, stride = (len + 4095) & ~(uint64_t)4095;
    int32_t *dids = (int32_t *)bench_dalloc(4 * (size_t)k * N_IDSETS);
    int32_t ids[N_IDSETS * 8];
    for (int s = 0; s < N_IDSETS; s++)
        for (int i = 0; i < k; i++)
            for (;;) {
                const int32_t e = (int32_t)(bench_uniform() * n_experts);
                bool dup = false;
                for (int j = 0; j < i; j++) dup |= ids[s * k + j] == e;
                if (!dup) {
                    ids[s * k + i] = e;
                    break;
                }
            }
    BCU(cudaMemcpy(dids, ids, sizeof ids, cudaMemcpyHostToDevice));
    /* every expert laid out alike: gate, up, down back to back */
    uint64_t layout[128 * TS_CUDA_LAYOUT_W];
    for (int e = 0; e < n_experts; e++) {
        uint64_t *L = layout + e * TS_CUDA_LAYOUT_W;
        L[0] = 0, L[1] = slice, L[2] = 2 * slice, L[3] = len, L[4] = len;
    }
    uint64_t *dlayout = (uint64_t *)bench_dalloc(sizeof layout);
    BCU(cudaMemcpy(dlayout, layout, sizeof layout, cudaMemcpyHostToDevice));
    uint8_t *dslots = (uint8_t *)bench_dalloc((size_t)(stride * 32));
    const void **dtab[3];
    for (int p = 0; p < 3; p++) dtab[p] = (const void **)bench_dalloc(sizeof(void *) * (size_t)n_experts);
    int32_t *dout = (int32_t *)bench_dalloc(4 * 3 * (size_t)k);

    printf("%-34s %10s\n", "pass (marks, counters, tables)", "us/pass");
    for (int si = 0; si < 2; si++)
        for (int pol = 0; pol < 2; pol++) {
            const int ns = slot_counts[si];
            ts_cuda_cache_layer c;
            memset(&c, 0, sizeof c);
            c.n_slots = ns;
            c.n_experts = n_experts;
            c.policy = pol ? TS_CUDA_CACHE_LRU : TS_CUDA_CACHE_LFU;
            c.slot_expert = (int32_t *)bench_dalloc(4 * (size_t)ns);
            c.slot_tick = (uint64_t *)bench_dalloc(8 * (size_t)ns);
            c.expert_slot = (int32_t *)bench_dalloc(4 * (size_t)n_experts);
            c.expert_count = (uint64_t *)bench_dalloc(8 * (size_t)n_experts);
            c.tick = (uint64_t *)bench_dalloc(8);
            c.prefetched = (uint8_t *)bench_dalloc((size_t)ns);
            c.stats = (uint64_t *)bench_dalloc(8 * TS_CUDA_CS_COUNT);
            c.layout = dlayout;
            c.slots = dslots;
            c.stride = stride;
            BCU(cudaMemset(c.slot_expert, 0xff, 4 * (size_t)ns)); /* -1: empty */
            BCU(cudaMemset(c.slot_tick, 0, 8 * (size_t)ns));
            BCU(cudaMemset(c.expert_slot, 0xff, 4 * (size_t)n_experts));
            BCU(cudaMemset(c.expert_count, 0, 8 * (size_t)n_experts));
            BCU(cudaMemset(c.tick, 0, 8));
            BCU(cudaMemset(c.prefetched, 0, (size_t)ns));
            BCU(cudaMemset(c.stats, 0, 8 * TS_CUDA_CS_COUNT));
            const double us = bench_time_us([&](size_t i) {
                BOK(ts_cuda_cache_pass(NULL, &c, dids + (i % N_IDSETS) * k, k, false, dout, dout + k, dout + 2 * k, dtab, NULL));
            });
            char name[64];
            snprintf(name, sizeof name, "%s %d slots, k=%d", pol ? "lru" : "lfu", ns, k);
            printf("%-34s %10.2f\n", name, us);
            cudaFree(c.slot_expert), cudaFree(c.slot_tick), cudaFree(c.expert_slot), cudaFree(c.expert_count), cudaFree(c.tick);
            cudaFree(c.prefetched), cudaFree(c.stats);
        }

    /* the fill: 8 misses into slots 0..7 from the pinned host tier */
    {
        uint8_t *tier = NULL;
        BCU(cudaHostAlloc((void **)&tier, (size_t)(stride * n_experts), cudaHostAllocDefault));
        memset(tier, 0x5a, (size_t)(stride * n_experts));
        ts_cuda_cache_layer c;
        memset(&c, 0, sizeof c);
        c.n_slots = k;
        c.n_experts = n_experts;
        c.layout = dlayout;
        c.slots = dslots;
        c.stride = stride;
        int32_t slots[8], hits[8];
        for (int i = 0; i < k; i++) slots[i] = i, hits[i] = 0;
        int32_t *dslot = (int32_t *)bench_dalloc(sizeof slots), *dhit = (int32_t *)bench_dalloc(sizeof hits);
        BCU(cudaMemcpy(dslot, slots, sizeof slots, cudaMemcpyHostToDevice));
        BCU(cudaMemcpy(dhit, hits, sizeof hits, cudaMemcpyHostToDevice));
        const double moved = (double)len * k;
        printf("%-34s %10s %10s  (%.2f MB an expert)\n", "fill 8 misses", "us", "GB/s", len / 1e6);
        const int caps[3] = {0, 16, 32};
        for (int ci = 0; ci < 3; ci++) {
            const double us = bench_time_us([&](size_t i) {
                BOK(ts_cuda_expert_fill(NULL, &c, tier, dids + (i % N_IDSETS) * k, dslot, dhit, k, caps[ci], NULL));
            });
            char name[64];
            if (caps[ci]) snprintf(name, sizeof name, "SM loads, max_blocks %d", caps[ci]);
            else snprintf(name, sizeof name, "SM loads, uncapped");
            printf("%-34s %10.2f %10.1f\n", name, us, moved / us / 1e3);
        }
        const double usc = bench_time_us([&](size_t i) {
            const int32_t *r = ids + (i % N_IDSETS) * k;
            for (int j = 0; j < k; j++)
                BCU(cudaMemcpyAsync(dslots + stride * j, tier + stride * r[j], (size_t)len, cudaMemcpyHostToDevice));
        });
        printf("%-34s %10.2f %10.1f\n", "cudaMemcpyAsync, one a miss", usc, moved / usc / 1e3);
        cudaFree(dslot), cudaFree(dhit);
        cudaFreeHost(tier);
    }
    for (int p = 0; p < 3; p++) cudaFree((void *)dtab[p]);
    cudaFree(dids), cudaFree(dout), cudaFree(dlayout), cudaFree(dslots);
    return 0;
}
