/* A persistent pool of worker threads for data-parallel ops.
 *
 * One decode step runs a few hundred parallel ops of ~10-100 us each, so a
 * dispatch must cost far less than that: workers spin briefly on a generation
 * counter before they sleep on a futex, and the caller runs as thread 0 so a
 * 1-thread pool has no synchronisation at all.
 *
 * Usage: ts_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once on every
 * thread ith in [0, nth) and returns when all calls have returned. Inside fn,
 * ts_pool_barrier(pool) waits for the other nth-1 threads of the same run.
 * Runs do not nest and a pool serves one caller thread at a time. */
#ifndef TS_THREADPOOL_H
#define TS_THREADPOOL_H

#include "base/base.h"

typedef struct ts_pool ts_pool;
typedef void (*ts_pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0 picks ts_pool_default_threads(). The pool never has more
 * than TS_POOL_MAX_THREADS threads. */
#define TS_POOL_MAX_THREADS 256
ts_status ts_pool_new(int n_threads, ts_pool **out);
void ts_pool_free(ts_pool *p);
int ts_pool_size(const ts_pool *p);

/* Number of CPUs this process may run on (sched affinity), at least 1. */
int ts_pool_default_threads(void);

/* Runs fn on all threads of the pool. */
void ts_pool_run(ts_pool *p, ts_pool_fn fn, void *arg);
/* Runs fn on the first nth threads (1 <= nth <= size; clamped): small ops
 * use fewer threads than their dispatch would cost. */
void ts_pool_run_n(ts_pool *p, int nth, ts_pool_fn fn, void *arg);
/* Inside fn: waits until all nth threads of the current run arrive. */
void ts_pool_barrier(ts_pool *p);

/* The contiguous share [*lo, *hi) of n items for thread ith of nth, in units
 * of `grain` items (the last share takes the remainder), so splits fall on
 * block boundaries and every item is owned by exactly one thread. */
void ts_pool_split(int64_t n, int64_t grain, int ith, int nth, int64_t *lo, int64_t *hi);

#endif
