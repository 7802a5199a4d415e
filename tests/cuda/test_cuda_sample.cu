/* Sampling on the device (sample.cu) against the CPU sampler
 * (src/sample/sample.c), which docs/SAMPLING.md specifies exactly.
 *
 * Pass/fail is exact: for each configuration, a run of steps with fresh
 * random logits each step; the device and the CPU sampler start from the same
 * seed and must pick the same id at every step (the RNG streams stay in step
 * only if every draw matches), and the logits the device leaves behind (NaN ->
 * -inf, penalty applied) must equal the CPU's bit for bit. The only tolerated
 * source of difference, exp() differing by an ulp exactly at a bucket edge,
 * has probability ~1e-15 per draw.
 *
 * Configurations: greedy; llama.cpp's defaults; top-k alone; top-k > 1024
 * (several sorting rounds); top-p with top-k off on a flat distribution
 * (Z over every candidate, thousands of candidates sorted in rounds); min-p
 * alone; every filter off (a full sort); the repetition penalty; logits with
 * ties, -inf, NaN and +inf. argmax: ties to the lowest id, NaN as -inf, all
 * -inf -> -1 with TS_CUDA_ERR_EMPTY, repeated calls (the ticket is reset). */
#include <cuda_runtime.h>

extern "C" {
#include "sample/sample.h"
}
#include "cuda_test_util.h"

enum { L_NORMAL = 0, L_TIES, L_FLAT, L_SPECIAL, L_PINF };

static void gen_logits(float *l, int n, int kind, float scale) {
    for (int i = 0; i < n; i++) l[i] = scale * tcu_normal();
    if (kind == L_TIES)
        for (int i = 0; i < n; i++) l[i] = roundf(l[i] * 2.0f) * 0.5f; /* many exact ties */
    if (kind == L_FLAT)
        for (int i = 0; i < n; i++) l[i] = 0.01f * roundf(l[i]);
    if (kind == L_SPECIAL)
        for (int k = 0; k < n / 50 + 1; k++) {
            l[tcu_u64() % n] = -INFINITY;
            l[tcu_u64() % n] = NAN;
        }
    if (kind == L_PINF) {
        l[tcu_u64() % n] = INFINITY;
        l[tcu_u64() % n] = INFINITY;
        l[tcu_u64() % n] = NAN;
    }
}

struct SCase {
    const char *name;
    int n_vocab, steps, kind;
    float scale;
    sampler_params p;
};

static void run(const SCase &c) {
    const int n = c.n_vocab;
    sampler *cpu = NULL;
    ts_status st = sampler_new(&c.p, n, &cpu);
    CHECKF(st == TS_OK, "%s: sampler_new: %s", c.name, ts_last_error());
    if (st != TS_OK) return;
    ts_rng rng;
    ts_rng_seed(&rng, c.p.seed);
    float *l = (float *)malloc(4 * n), *lc = (float *)malloc(4 * n), *lg = (float *)malloc(4 * n);
    float *dl = (float *)tcu_dalloc(4 * n);
    uint64_t *drng = (uint64_t *)tcu_dalloc(32);
    const int cap = c.p.repeat_last_n > 0 ? c.p.repeat_last_n : 1;
    int32_t *dring = (int32_t *)tcu_dalloc(4 * cap), *dpos = (int32_t *)tcu_dalloc(4), *dout = (int32_t *)tcu_dalloc(4);
    unsigned *derr = (unsigned *)tcu_dalloc(4);
    TCU(cudaMemset(dring, 0xff, 4 * cap)); /* -1: empty slots */
    TCU(cudaMemset(dpos, 0, 4));
    tcu_up(drng, rng.s, 32);
    const size_t sb = ts_cuda_sample_scratch_bytes(n);
    void *scratch = tcu_dalloc(sb);
    ts_cuda_sampler_params dp = {c.p.temperature, c.p.top_k, c.p.top_p, c.p.min_p, c.p.repeat_penalty};
    ts_cuda_sampler_state ds = {drng, c.p.repeat_last_n > 0 ? dring : NULL, dpos, c.p.repeat_last_n};
    int mism = 0, lbad = 0, first = -1;
    float ms = 0;
    cudaEvent_t e0, e1;
    TCU(cudaEventCreate(&e0));
    TCU(cudaEventCreate(&e1));
    for (int s = 0; s < c.steps; s++) {
        gen_logits(l, n, c.kind, c.scale);
        memcpy(lc, l, 4 * n);
        tcu_up(dl, l, 4 * n);
        TCU(cudaMemset(derr, 0, 4));
        tcu_poison(dout, 4);
        TCU(cudaEventRecord(e0));
        TCU_OK(ts_cuda_sample(NULL, dl, n, &dp, &ds, dout, derr, scratch, sb), c.name);
        TCU(cudaEventRecord(e1));
        tcu_sync(c.name);
        float t = 0;
        TCU(cudaEventElapsedTime(&t, e0, e1));
        ms += t;
        int32_t want = sampler_sample(cpu, lc), got = -7;
        if (want >= 0) sampler_accept(cpu, want);
        tcu_down(&got, dout, 4);
        tcu_down(lg, dl, 4 * n);
        unsigned err = 0;
        tcu_down(&err, derr, 4);
        if (got != want || (want < 0) != (err == TS_CUDA_ERR_EMPTY)) {
            if (first < 0) first = s;
            if (mism++ < 3) printf("    %s step %d: device %d (err %u), cpu %d\n", c.name, s, got, err, want);
        }
        lbad += memcmp(lg, lc, 4 * n) != 0;
    }
    char what[128];
    snprintf(what, sizeof what, "sample %s vocab=%d steps=%d", c.name, n, c.steps);
    printf("%-60s %d ids differ, %d logit arrays differ, %.3f ms/call %s\n", what, mism, lbad, ms / c.steps,
           mism || lbad ? "FAIL" : "ok");
    CHECKF(mism == 0 && lbad == 0, "%s: %d ids differ (first at step %d), %d logit arrays differ", what, mism, first, lbad);
    sampler_free(cpu);
    free(l), free(lc), free(lg);
    cudaFree(dl), cudaFree(drng), cudaFree(dring), cudaFree(dpos), cudaFree(dout), cudaFree(derr), cudaFree(scratch);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
}

static void test_argmax(int n, int kind) {
    float *l = (float *)malloc(4 * n);
    gen_logits(l, n, kind, 3.0f);
    if (kind == L_TIES) { /* the maximum several times */
        float mx = -INFINITY;
        for (int i = 0; i < n; i++) mx = fmaxf(mx, l[i]);
        for (int k = 0; k < 4; k++) l[tcu_u64() % n] = mx;
    }
    const bool all_inf = kind == L_PINF + 1;
    if (all_inf)
        for (int i = 0; i < n; i++) l[i] = (i % 3) ? -INFINITY : NAN;
    int want = 0;
    for (int i = 1; i < n; i++) {
        const float a = isnan(l[i]) ? -INFINITY : l[i], b = isnan(l[want]) ? -INFINITY : l[want];
        if (a > b) want = i;
    }
    if ((isnan(l[want]) ? -INFINITY : l[want]) == -INFINITY) want = -1;
    float *dl = (float *)tcu_dalloc(4 * n);
    int32_t *dout = (int32_t *)tcu_dalloc(4);
    unsigned *derr = (unsigned *)tcu_dalloc(4);
    const size_t sb = ts_cuda_argmax_scratch_bytes(n);
    void *scratch = tcu_dalloc(sb);
    TCU(cudaMemset(scratch, 0, sb));
    TCU(cudaMemset(derr, 0, 4));
    tcu_up(dl, l, 4 * n);
    int bad = 0;
    for (int rep = 0; rep < 3; rep++) { /* repeated calls: the ticket must be reset */
        tcu_poison(dout, 4);
        TCU_OK(ts_cuda_argmax(NULL, dl, n, dout, scratch, derr), "argmax");
        tcu_sync("argmax");
        int32_t got;
        tcu_down(&got, dout, 4);
        bad += got != want;
    }
    unsigned err;
    tcu_down(&err, derr, 4);
    /* the logits after: NaN -> -inf in place, everything else untouched */
    float *after = (float *)malloc(4 * n);
    tcu_down(after, dl, 4 * n);
    int changed = 0;
    for (int i = 0; i < n; i++) {
        const float e = isnan(l[i]) ? -INFINITY : l[i];
        changed += memcmp(&after[i], &e, 4) != 0;
    }
    free(after);
    char what[96];
    snprintf(what, sizeof what, "argmax n=%d kind=%d", n, kind);
    const bool ok = bad == 0 && (want < 0) == (err == TS_CUDA_ERR_EMPTY) && changed == 0;
    printf("%-60s want %d, %d of 3 calls differ, err %u, %d logits not as the CPU leaves them %s\n", what, want, bad, err,
           changed, ok ? "ok" : "FAIL");
    CHECKF(ok, "%s", what);
    free(l);
    cudaFree(dl), cudaFree(dout), cudaFree(derr), cudaFree(scratch);
}

static sampler_params P(float t, int k, float p, float mp, float pen, int last, uint64_t seed) {
    sampler_params s;
    sampler_params_default(&s);
    s.temperature = t, s.top_k = k, s.top_p = p, s.min_p = mp, s.repeat_penalty = pen, s.repeat_last_n = last;
    s.seed = seed;
    return s;
}

int main(void) {
    const uint64_t seed = tcu_seed_init("test_cuda_sample");
    tcu_require_gpu("test_cuda_sample");
    if (tcu_small()) {
        test_argmax(1000, L_TIES);
        test_argmax(5000, L_PINF + 1);
        const SCase small[] = {
            {"defaults", 2000, 3, L_NORMAL, 3.0f, P(0.8f, 40, 0.95f, 0.05f, 1.0f, 64, seed)},
            {"top-p-only-flat", 1500, 2, L_FLAT, 1.0f, P(1.0f, 0, 0.9f, 0.0f, 1.0f, 64, seed + 1)},
            {"penalty-greedy", 300, 3, L_TIES, 1.0f, P(0.0f, 0, 1.0f, 0.0f, 1.5f, 16, seed + 2)},
        };
        for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) run(small[i]);
        return tu_finish();
    }
    for (int kind = 0; kind <= L_PINF + 1; kind++) {
        test_argmax(1, kind == L_PINF + 1 ? kind : L_NORMAL);
        test_argmax(1000, kind);
        test_argmax(151936, kind);
    }
    sampler_params def;
    sampler_params_default(&def);
    def.seed = seed;
    const SCase cases[] = {
        {"greedy", 49152, 20, L_TIES, 3.0f, P(0.0f, 40, 0.95f, 0.05f, 1.0f, 64, seed)},
        {"defaults", 151936, 40, L_NORMAL, 3.0f, def},
        {"defaults-special", 32000, 40, L_SPECIAL, 3.0f, def},
        {"top-k", 32, 60, L_TIES, 1.0f, P(0.9f, 20, 1.0f, 0.0f, 1.0f, 64, seed + 1)},
        {"top-k-2000+top-p", 49152, 20, L_NORMAL, 0.5f, P(1.0f, 2000, 0.99f, 0.0f, 1.0f, 64, seed + 2)},
        {"top-p-only-flat", 5000, 10, L_FLAT, 1.0f, P(1.0f, 0, 0.9f, 0.0f, 1.0f, 64, seed + 3)},
        {"top-p-only", 151936, 10, L_NORMAL, 2.0f, P(0.7f, 0, 0.95f, 0.0f, 1.0f, 64, seed + 4)},
        {"min-p-only", 49152, 20, L_NORMAL, 2.0f, P(1.2f, 0, 1.0f, 0.02f, 1.0f, 64, seed + 5)},
        {"no-filters", 3000, 10, L_TIES, 1.0f, P(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, seed + 6)},
        {"penalty", 32, 60, L_NORMAL, 1.0f, P(0.9f, 20, 0.9f, 0.02f, 1.3f, 8, seed + 7)},
        {"penalty-greedy", 1000, 30, L_TIES, 1.0f, P(0.0f, 0, 1.0f, 0.0f, 1.5f, 16, seed + 8)},
        {"pinf", 1000, 20, L_PINF, 1.0f, P(0.8f, 40, 0.95f, 0.05f, 1.0f, 64, seed + 9)},
        {"doc-params", 32, 24, L_NORMAL, 1.0f, P(0.9f, 20, 0.9f, 0.02f, 1.3f, 8, 20240601)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(cases[i]);
    return tu_finish();
}
