/* Thread pool: every thread runs every job exactly once, barriers hold, splits
 * cover each item once, and dispatch is cheap enough for decode ops. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "test_util.h"

typedef struct {
    atomic_int calls;
    atomic_int mask_err;
    int nth_seen[TS_POOL_MAX_THREADS];
    int64_t *owner; /* (n) thread that owns item i, -1 = none */
    int64_t n;
} job_state;

static void job_count(void *arg, int ith, int nth) {
    job_state *s = arg;
    atomic_fetch_add(&s->calls, 1);
    s->nth_seen[ith] = nth;
}

static void job_split(void *arg, int ith, int nth) {
    job_state *s = arg;
    int64_t lo, hi;
    ts_pool_split(s->n, 7, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        if (s->owner[i] != -1) atomic_fetch_add(&s->mask_err, 1);
        s->owner[i] = ith;
    }
}

/* Phase k writes slot ith; after the barrier every thread checks all slots. */
typedef struct {
    ts_pool *p;
    int slots[TS_POOL_MAX_THREADS];
    atomic_int errors;
} bar_state;

static void job_barrier(void *arg, int ith, int nth) {
    bar_state *s = arg;
    for (int phase = 1; phase <= 50; phase++) {
        s->slots[ith] = phase;
        ts_pool_barrier(s->p);
        for (int t = 0; t < nth; t++)
            if (s->slots[t] != phase) atomic_fetch_add(&s->errors, 1);
        ts_pool_barrier(s->p);
    }
}

static void job_noop(void *arg, int ith, int nth) {
    (void)arg;
    (void)ith;
    (void)nth;
}

int main(void) {
    int nthreads[] = {1, 2, 3, 4};
    for (size_t k = 0; k < sizeof nthreads / sizeof nthreads[0]; k++) {
        int n = nthreads[k];
        ts_pool *p = NULL;
        CHECK(ts_pool_new(n, &p) == TS_OK && p);
        if (!p) continue;
        CHECK(ts_pool_size(p) == n);

        job_state s;
        memset(&s, 0, sizeof s);
        for (int rep = 0; rep < 200; rep++) ts_pool_run(p, job_count, &s);
        CHECKF(atomic_load(&s.calls) == 200 * n, "threads=%d calls=%d", n, atomic_load(&s.calls));
        for (int t = 0; t < n; t++) CHECK(s.nth_seen[t] == n);

        /* fewer threads than the pool holds */
        memset(&s, 0, sizeof s);
        ts_pool_run_n(p, 1, job_count, &s);
        CHECK(atomic_load(&s.calls) == 1);

        /* splits: each item exactly once, for awkward sizes */
        int64_t sizes[] = {0, 1, 6, 7, 8, 100, 1001};
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            memset(&s, 0, sizeof s);
            s.n = sizes[z];
            s.owner = malloc(sizeof(int64_t) * (size_t)(s.n + 1));
            for (int64_t i = 0; i < s.n; i++) s.owner[i] = -1;
            ts_pool_run(p, job_split, &s);
            int missing = 0;
            for (int64_t i = 0; i < s.n; i++) missing += s.owner[i] == -1;
            CHECKF(missing == 0 && atomic_load(&s.mask_err) == 0, "threads=%d n=%lld missing=%d dup=%d", n,
                   (long long)s.n, missing, atomic_load(&s.mask_err));
            free(s.owner);
        }

        bar_state b;
        memset(&b, 0, sizeof b);
        b.p = p;
        ts_pool_run(p, job_barrier, &b);
        CHECKF(atomic_load(&b.errors) == 0, "threads=%d barrier errors=%d", n, atomic_load(&b.errors));

        /* dispatch latency: informational (the machine may be shared) */
        int reps = 0;
        double t0 = ts_now(), t1 = t0;
        while (reps < 20000 && t1 - t0 < 0.2) {
            for (int i = 0; i < 100; i++) ts_pool_run(p, job_noop, NULL);
            reps += 100;
            t1 = ts_now();
        }
        double us = (t1 - t0) / reps * 1e6;
        printf("threads=%d: %.2f us per dispatch\n", n, us);
        ts_pool_free(p);
    }

    /* split arithmetic on its own */
    int64_t lo, hi;
    ts_pool_split(10, 4, 0, 2, &lo, &hi);
    CHECK(lo == 0 && hi == 8);
    ts_pool_split(10, 4, 1, 2, &lo, &hi);
    CHECK(lo == 8 && hi == 10);
    ts_pool_split(3, 4, 1, 2, &lo, &hi);
    CHECK(lo == hi);

    ts_pool *bad = NULL;
    CHECK(ts_pool_new(TS_POOL_MAX_THREADS + 1, &bad) == TS_ERR_ARG && !bad);
    return tu_finish();
}
