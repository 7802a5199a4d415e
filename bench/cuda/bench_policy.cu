/* Micro-benchmark of the expert cache's policy on the device
 * (expert_policy.cu): microseconds per routed pass, the latency it would add
 * to a decode layer. The 30B-A3B at 25% (32 slots of 128 experts, k = 8) and
 * at the top-k minimum (8 slots), LFU and LRU; each pass asks for one of 64
 * precomputed id vectors (8 distinct experts each, uniform: the synthetic
 * file's routing), so hits, misses and evictions mix as they would there.
 * Then the fill (ts_cuda_expert_fill): 8 misses of the three 884,736-byte
 * projections copied by the SMs from pinned host memory, GB/s, against the
 * same bytes by cudaMemcpyAsync (the copy engines): whether SM loads over
 * PCIe reach the DMA's rate decides between fill and read-through.
 *
 *   bench_policy            (BENCH_QUICK=1: fewer reps) */
#include "bench_util.h"

#define N_IDSETS 64

int main(void) {
    bench_require_gpu("bench_policy");
    bench_seed(12345);
    const int n_experts = 128, k = 8, slot_counts[2] = {32, 8};
    int32_t *dids = (int32_t *)bench_dalloc(4 * (size_t)k * N_IDSETS);
    {
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
    }
    int32_t *dout = (int32_t *)bench_dalloc(4 * 3 * (size_t)k);
    printf("%-28s %10s\n", "pass", "us/pass");
    for (int si = 0; si < 2; si++)
        for (int pol = 0; pol < 2; pol++) {
            const int ns = slot_counts[si];
            ts_cuda_cache_layer c;
            c.n_slots = ns;
            c.n_experts = n_experts;
            c.policy = pol ? TS_CUDA_CACHE_LRU : TS_CUDA_CACHE_LFU;
            c.slot_expert = (int32_t *)bench_dalloc(4 * (size_t)ns);
            c.slot_tick = (uint64_t *)bench_dalloc(8 * (size_t)ns);
            c.expert_slot = (int32_t *)bench_dalloc(4 * (size_t)n_experts);
            c.expert_count = (uint64_t *)bench_dalloc(8 * (size_t)n_experts);
            c.tick = (uint64_t *)bench_dalloc(8);
            BCU(cudaMemset(c.slot_expert, 0xff, 4 * (size_t)ns)); /* -1: empty */
            BCU(cudaMemset(c.slot_tick, 0, 8 * (size_t)ns));
            BCU(cudaMemset(c.expert_slot, 0xff, 4 * (size_t)n_experts));
            BCU(cudaMemset(c.expert_count, 0, 8 * (size_t)n_experts));
            BCU(cudaMemset(c.tick, 0, 8));
            const double us = bench_time_us([&](size_t i) {
                BOK(ts_cuda_cache_pass(NULL, &c, dids + (i % N_IDSETS) * k, k, false, dout, dout + k, dout + 2 * k, NULL));
            });
            char name[64];
            snprintf(name, sizeof name, "%s %d slots, k=%d", pol ? "lru" : "lfu", ns, k);
            printf("%-28s %10.2f\n", name, us);
            cudaFree(c.slot_expert), cudaFree(c.slot_tick), cudaFree(c.expert_slot), cudaFree(c.expert_count), cudaFree(c.tick);
        }

    /* the fill: 8 misses of the 30B-A3B's three 884,736-byte projections from
     * pinned host memory, against cudaMemcpyAsync of the same bytes */
    {
        const int n_set = 3;
        const uint64_t bytes = 884736, stride = bytes;
        uint8_t *host = NULL;
        BCU(cudaHostAlloc((void **)&host, (size_t)(stride * n_experts * n_set), cudaHostAllocDefault));
        memset(host, 0x5a, (size_t)(stride * n_experts * n_set));
        ts_cuda_fill_set sets[n_set];
        void *src[n_set][128];
        for (int p = 0; p < n_set; p++) {
            for (int e = 0; e < n_experts; e++) src[p][e] = host + (stride * n_experts) * p + stride * e;
            void **d = (void **)bench_dalloc(sizeof src[p]);
            BCU(cudaMemcpy(d, src[p], sizeof src[p], cudaMemcpyHostToDevice));
            sets[p] = ts_cuda_fill_set{(const void *const *)d, (uint8_t *)bench_dalloc((size_t)(stride * k)), stride, bytes};
        }
        int32_t slots[8], hits[8];
        for (int i = 0; i < k; i++) slots[i] = i, hits[i] = 0;
        int32_t *dslot = (int32_t *)bench_dalloc(sizeof slots), *dhit = (int32_t *)bench_dalloc(sizeof hits);
        BCU(cudaMemcpy(dslot, slots, sizeof slots, cudaMemcpyHostToDevice));
        BCU(cudaMemcpy(dhit, hits, sizeof hits, cudaMemcpyHostToDevice));
        const double moved = (double)bytes * n_set * k;
        const double us = bench_time_us([&](size_t i) {
            BOK(ts_cuda_expert_fill(NULL, n_set, sets, n_experts, k, dids + (i % N_IDSETS) * k, dslot, dhit, k, NULL));
        });
        printf("%-28s %10.2f us  %6.1f GB/s\n", "fill 8 misses x 3 (SM loads)", us, moved / us / 1e3);
        int32_t ids[N_IDSETS * 8];
        BCU(cudaMemcpy(ids, dids, sizeof ids, cudaMemcpyDeviceToHost));
        const double usc = bench_time_us([&](size_t i) {
            const int32_t *r = ids + (i % N_IDSETS) * k;
            for (int p = 0; p < n_set; p++)
                for (int j = 0; j < k; j++)
                    BCU(cudaMemcpyAsync(sets[p].slots + stride * j, src[p][r[j]], (size_t)bytes, cudaMemcpyHostToDevice));
        });
        printf("%-28s %10.2f us  %6.1f GB/s\n", "the same, cudaMemcpyAsync", usc, moved / usc / 1e3);
        for (int p = 0; p < n_set; p++) cudaFree((void *)sets[p].src), cudaFree(sets[p].slots);
        cudaFree(dslot), cudaFree(dhit);
        cudaFreeHost(host);
    }
    cudaFree(dids), cudaFree(dout);
    return 0;
}
