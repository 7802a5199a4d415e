#include "base/threadpool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TS_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TS_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define TS_CPU_RELAX() ((void)0)
#endif

/* Spin iterations before a waiter sleeps. A pause is ~10-140 cycles
 * depending on the core, so this is tens of microseconds: long enough to
 * cover the gap between two ops of a decode step, short enough not to burn a
 * core while the caller samples or waits for input. */
#define TS_POOL_SPIN 20000

#define TS_CACHE_LINE 64

static void futex_wait(atomic_uint *addr, unsigned val) {
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)addr;
    (void)val;
    sched_yield();
#endif
}

static void futex_wake_all(atomic_uint *addr) {
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Waits until *addr != val: spin, then sleep. *sleepers counts threads that
 * may be inside futex_wait, so wakers skip the syscall when nobody sleeps. */
static void wait_change(atomic_uint *addr, unsigned val, atomic_uint *sleepers) {
    for (int i = 0; i < TS_POOL_SPIN; i++) {
        if (atomic_load_explicit(addr, memory_order_acquire) != val) return;
        TS_CPU_RELAX();
        /* on an oversubscribed machine the thread we wait for may need our
         * core: yield now and then instead of burning the slice */
        if ((i & 1023) == 1023) sched_yield();
    }
    while (atomic_load_explicit(addr, memory_order_acquire) == val) {
        atomic_fetch_add(sleepers, 1);
        /* seq_cst pairs with the waker's store-then-load of sleepers: either
         * it sees us counted, or we see its new value here. */
        if (atomic_load(addr) == val) futex_wait(addr, val);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void bump_and_wake(atomic_uint *addr, atomic_uint *sleepers) {
    atomic_fetch_add(addr, 1);
    if (atomic_load(sleepers)) futex_wake_all(addr);
}

typedef struct {
    _Alignas(TS_CACHE_LINE) atomic_uint v;
    char pad[TS_CACHE_LINE - sizeof(atomic_uint)];
} padded_uint;

struct ts_pool {
    int n;                   /* threads including the caller */
    pthread_t *threads;      /* (n - 1) workers */
    struct worker_arg *args; /* (n - 1) */

    /* the current run; written by the caller before gen is bumped */
    ts_pool_fn fn;
    void *arg;
    int nth;
    bool stop;

    padded_uint gen;         /* bumped once per run */
    padded_uint gen_sleepers;
    padded_uint done;        /* workers finished with the current run */
    padded_uint done_gen;    /* bumped when the last worker finishes */
    padded_uint done_sleepers;
    padded_uint bar_count;   /* threads arrived at the current barrier */
    padded_uint bar_phase;   /* bumped when a barrier opens */
    padded_uint bar_sleepers;
};

struct worker_arg {
    ts_pool *p;
    int ith;
};

static void *worker_main(void *varg) {
    struct worker_arg *wa = varg;
    ts_pool *p = wa->p;
    int ith = wa->ith;
    unsigned seen = 0; /* gen at creation: a run may start before this thread does */
    for (;;) {
        wait_change(&p->gen.v, seen, &p->gen_sleepers.v);
        seen++; /* the caller waits for every worker, so runs never skip one */
        if (p->stop) break;
        if (ith < p->nth) p->fn(p->arg, ith, p->nth);
        if (atomic_fetch_add(&p->done.v, 1) + 1 == (unsigned)(p->n - 1)) bump_and_wake(&p->done_gen.v, &p->done_sleepers.v);
    }
    return NULL;
}

int ts_pool_default_threads(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c > TS_POOL_MAX_THREADS ? TS_POOL_MAX_THREADS : c;
    }
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1) c = 1;
    return c > TS_POOL_MAX_THREADS ? TS_POOL_MAX_THREADS : (int)c;
}

ts_status ts_pool_new(int n_threads, ts_pool **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = ts_pool_default_threads();
    if (n_threads > TS_POOL_MAX_THREADS) return ts_fail(TS_ERR_ARG, "thread pool: %d threads requested, at most %d", n_threads, TS_POOL_MAX_THREADS);
    ts_pool *p = aligned_alloc(TS_CACHE_LINE, (sizeof(ts_pool) + TS_CACHE_LINE - 1) / TS_CACHE_LINE * TS_CACHE_LINE);
    if (!p) return ts_fail(TS_ERR_NOMEM, "thread pool: out of memory");
    memset(p, 0, sizeof *p);
    p->n = n_threads;
    if (n_threads > 1) {
        p->threads = ts_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        p->args = ts_calloc((size_t)n_threads - 1, sizeof(struct worker_arg));
        if (!p->threads || !p->args) {
            free(p->threads);
            free(p->args);
            free(p);
            return TS_ERR_NOMEM;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        p->args[i - 1] = (struct worker_arg){p, i};
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, &p->args[i - 1]) != 0) {
            /* stop the ones already started */
            int started = i - 1;
            p->n = started + 1;
            p->stop = true;
            bump_and_wake(&p->gen.v, &p->gen_sleepers.v);
            for (int j = 0; j < started; j++) pthread_join(p->threads[j], NULL);
            free(p->threads);
            free(p->args);
            free(p);
            return ts_fail(TS_ERR_INTERNAL, "thread pool: cannot start thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return TS_OK;
}

void ts_pool_free(ts_pool *p) {
    if (!p) return;
    if (p->n > 1) {
        p->stop = true;
        bump_and_wake(&p->gen.v, &p->gen_sleepers.v);
        for (int i = 0; i < p->n - 1; i++) pthread_join(p->threads[i], NULL);
        free(p->threads);
        free(p->args);
    }
    free(p);
}

int ts_pool_size(const ts_pool *p) { return p->n; }

void ts_pool_run_n(ts_pool *p, int nth, ts_pool_fn fn, void *arg) {
    if (nth < 1) nth = 1;
    if (nth > p->n) nth = p->n;
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    atomic_store_explicit(&p->done.v, 0, memory_order_relaxed);
    unsigned dg = atomic_load(&p->done_gen.v);
    bump_and_wake(&p->gen.v, &p->gen_sleepers.v); /* seq_cst: publishes fn/arg/nth */
    fn(arg, 0, nth);
    wait_change(&p->done_gen.v, dg, &p->done_sleepers.v);
}

void ts_pool_run(ts_pool *p, ts_pool_fn fn, void *arg) { ts_pool_run_n(p, p->n, fn, arg); }

void ts_pool_barrier(ts_pool *p) {
    int nth = p->n == 1 ? 1 : p->nth;
    if (nth <= 1) return;
    unsigned phase = atomic_load(&p->bar_phase.v);
    if (atomic_fetch_add(&p->bar_count.v, 1) + 1 == (unsigned)nth) {
        atomic_store(&p->bar_count.v, 0);
        bump_and_wake(&p->bar_phase.v, &p->bar_sleepers.v);
    } else {
        wait_change(&p->bar_phase.v, phase, &p->bar_sleepers.v);
    }
}

void ts_pool_split(int64_t n, int64_t grain, int ith, int nth, int64_t *lo, int64_t *hi) {
    if (grain < 1) grain = 1;
    int64_t units = (n + grain - 1) / grain;
    int64_t per = units / nth, rem = units % nth;
    /* the first `rem` threads take one extra unit */
    int64_t u0 = ith * per + (ith < rem ? ith : rem);
    int64_t u1 = u0 + per + (ith < rem ? 1 : 0);
    int64_t a = u0 * grain, b = u1 * grain;
    if (a > n) a = n;
    if (b > n) b = n;
    *lo = a;
    *hi = b;
}
