/* Host-to-device bandwidth: the physical limit of streamed experts on a GPU
 * (docs/BENCHMARKS.md, "MoE streamed"). A miss is one cudaMemcpyAsync of
 * one expert's laid-out bytes (gate, up, down) from pinned host memory into
 * its device slot, so the sizes are an expert of the 30B-A3B shape (Q4_K,
 * ~2.6 MB), top-k = 8 of them back to back, and 256 MiB (the asymptote);
 * pageable memory for comparison (the host tier is pinned because pageable
 * copies are staged through a driver buffer). Sources rotate over 4 GiB of
 * host memory so no copy is served from a CPU cache.
 *
 *   bench_pcie                                  (BENCH_QUICK=1: fewer reps) */
#include "bench_util.h"

int main(void) {
    bench_require_gpu("bench_pcie");
    const size_t host_bytes = (size_t)4 << 30;
    const size_t sizes[] = {(size_t)2654208, (size_t)8 * 2654208, (size_t)256 << 20};
    const char *names[] = {"1 expert 2.6MB", "8 experts 21MB", "256MiB"};
    void *pinned = NULL;
    BCU(cudaHostAlloc(&pinned, host_bytes, cudaHostAllocDefault));
    void *pageable = malloc(host_bytes);
    if (!pageable) return fprintf(stderr, "bench_pcie: out of host memory\n"), 1;
    memset(pinned, 0x5a, host_bytes);
    memset(pageable, 0xa5, host_bytes);
    void *dev = bench_dalloc((size_t)256 << 20);
    for (int i = 0; i < 3; i++) {
        const size_t n = sizes[i], span = host_bytes / n;
        for (int pin = 1; pin >= 0; pin--) {
            const uint8_t *src = (const uint8_t *)(pin ? pinned : pageable);
            /* 8 experts: 8 copies of one expert each, as a decode pass issues them */
            const int parts = i == 1 ? 8 : 1;
            const size_t part = n / (size_t)parts;
            const double us = bench_time_us([&](size_t call) {
                const uint8_t *s = src + (call % span) * n;
                for (int p = 0; p < parts; p++)
                    BCU(cudaMemcpyAsync((uint8_t *)dev + p * part, s + p * part, part, cudaMemcpyHostToDevice));
            });
            bench_result("pcie", names[i], pin ? "h2d pinned" : "h2d pageable", (double)n, us, NULL);
        }
    }
    const double us = bench_time_us([&](size_t call) {
        BCU(cudaMemcpyAsync((uint8_t *)pinned + (call % 16) * ((size_t)256 << 20), dev, (size_t)256 << 20, cudaMemcpyDeviceToHost));
    });
    bench_result("pcie", "256MiB", "d2h pinned", (double)((size_t)256 << 20), us, NULL);
    cudaFree(dev);
    cudaFreeHost(pinned);
    free(pageable);
    return 0;
}
