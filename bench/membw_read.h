/* The read loop of the bandwidth probes (membw.c, roof.c): one helper, so
 * the roofline's two readings stream memory the same way.
 *
 * Eight independent accumulators so the loop vectorizes (the includers build
 * with -march=native) and is not bound by one add chain's latency. */
#ifndef TS_BENCH_MEMBW_READ_H
#define TS_BENCH_MEMBW_READ_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t membw_sum_slice(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += p[i + 0]; a1 += p[i + 1]; a2 += p[i + 2]; a3 += p[i + 3];
        a4 += p[i + 4]; a5 += p[i + 5]; a6 += p[i + 6]; a7 += p[i + 7];
    }
    for (; i < n; i++) a0 += p[i];
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

/* Every page written before timing, so page faults are not measured (first
 * touch also places the pages; one NUMA node on the machines used). */
static inline void membw_fill(uint64_t *buf, size_t n) {
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
}

#endif
