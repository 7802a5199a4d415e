// membw: sustained memory read bandwidth, the ceiling for decode speed.
//
// Token generation streams every weight once per token, so tokens/s can never
// beat (read bandwidth / bytes of weights). This measures that bandwidth the
// way a matvec sees it: threads each sum their own contiguous slice of one
// large buffer, far larger than the last-level cache.
//
//   cc -O3 -march=native -pthread -o membw bench/membw.c
//   ./membw [-s MiB] [-t 1,2] [-r reps] [-H]
//
// -H asks for transparent huge pages (madvise); without it the buffer uses
// whatever the kernel gives, normally 4 KiB pages like an mmap'ed model file.
//
// Prints one line per thread count: best and median GB/s (1 GB = 1e9 bytes).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "membw_read.h"

#define MAX_THREADS 256

typedef struct {
    const uint64_t *buf; // (n_words), shared, read-only during the timed pass
    size_t lo, hi;       // this thread's slice of buf, in words
    int index;
    int reps;
    uint64_t sink;       // keeps the sums live so the loads cannot be elided
} worker;

static pthread_barrier_t g_start, g_done;
static double *g_times; // (reps), written by worker 0

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *run_worker(void *arg) {
    worker *w = arg;
    for (int r = 0; r < w->reps; r++) {
        pthread_barrier_wait(&g_start);
        double t0 = w->index == 0 ? now_s() : 0.0;
        w->sink += membw_sum_slice(w->buf + w->lo, w->hi - w->lo);
        pthread_barrier_wait(&g_done);
        if (w->index == 0) g_times[r] = now_s() - t0;
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int measure(uint64_t *buf, size_t n_words, int n_threads, int reps,
                   double *best, double *median) {
    worker w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    if (pthread_barrier_init(&g_start, NULL, (unsigned)n_threads) ||
        pthread_barrier_init(&g_done, NULL, (unsigned)n_threads)) {
        fprintf(stderr, "membw: error: pthread_barrier_init failed\n");
        return -1;
    }
    // One warm-up pass (page tables, TLB) that is not counted.
    int total = reps + 1;
    double *times = calloc((size_t)total, sizeof *times);
    if (!times) { fprintf(stderr, "membw: error: out of memory\n"); return -1; }
    g_times = times;
    size_t per = n_words / (size_t)n_threads;
    per -= per % 8; // keep slices 64-byte aligned
    for (int t = 0; t < n_threads; t++) {
        w[t] = (worker){.buf = buf, .lo = (size_t)t * per,
                        .hi = t == n_threads - 1 ? n_words : (size_t)(t + 1) * per,
                        .index = t, .reps = total, .sink = 0};
        if (t > 0 && pthread_create(&th[t], NULL, run_worker, &w[t])) {
            fprintf(stderr, "membw: error: pthread_create failed\n");
            exit(1); // earlier threads wait on the barrier forever otherwise
        }
    }
    run_worker(&w[0]);
    uint64_t sink = w[0].sink;
    for (int t = 1; t < n_threads; t++) {
        pthread_join(th[t], NULL);
        sink += w[t].sink;
    }
    pthread_barrier_destroy(&g_start);
    pthread_barrier_destroy(&g_done);
    double bytes = (double)n_words * 8.0;
    qsort(times + 1, (size_t)reps, sizeof *times, cmp_double);
    *best = bytes / times[1] / 1e9;
    *median = bytes / times[1 + reps / 2] / 1e9;
    free(times);
    // The checksum is printed so the sums are observable.
    fprintf(stderr, "  (checksum %016llx)\n", (unsigned long long)sink);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: membw [-s MiB (default 2048)] [-t threads list, default 1,2] "
                    "[-r reps (default 10)] [-H (huge pages)]\n");
}

int main(int argc, char **argv) {
    long mib = 2048;
    int reps = 10;
    const char *tlist = "1,2";
    int huge = 0;
    int c;
    while ((c = getopt(argc, argv, "s:t:r:Hh")) != -1) {
        char *end;
        switch (c) {
        case 's':
            errno = 0;
            mib = strtol(optarg, &end, 10);
            if (errno || *end || mib < 1 || mib > (1L << 20)) {
                fprintf(stderr, "membw: error: bad -s '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            errno = 0;
            reps = (int)strtol(optarg, &end, 10);
            if (errno || *end || reps < 1 || reps > 10000) {
                fprintf(stderr, "membw: error: bad -r '%s'\n", optarg);
                return 2;
            }
            break;
        case 't': tlist = optarg; break;
        case 'H': huge = 1; break;
        default: usage(); return c == 'h' ? 0 : 2;
        }
    }
    long counts[64];
    int n_counts = 0;
    char *list = strdup(tlist);
    if (!list) { fprintf(stderr, "membw: error: out of memory\n"); return 1; }
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long nt = strtol(tok, &end, 10);
        if (*end || nt < 1 || nt > MAX_THREADS || n_counts == 64) {
            fprintf(stderr, "membw: error: bad thread count '%s'\n", tok);
            return 2;
        }
        counts[n_counts++] = nt;
    }
    free(list);
    if (n_counts == 0) { fprintf(stderr, "membw: error: empty -t list\n"); return 2; }

    size_t bytes = (size_t)mib << 20;
    size_t n_words = bytes / 8;
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 2u << 20, bytes) != 0) {
        fprintf(stderr, "membw: error: cannot allocate %ld MiB\n", mib);
        return 1;
    }
#ifdef MADV_HUGEPAGE
    if (huge && madvise(buf, bytes, MADV_HUGEPAGE) != 0)
        fprintf(stderr, "membw: warning: madvise(MADV_HUGEPAGE) failed; using small pages\n");
#else
    if (huge) fprintf(stderr, "membw: warning: no MADV_HUGEPAGE here; using small pages\n");
#endif
    membw_fill(buf, n_words);
    printf("membw: buffer %ld MiB, %s pages, %d reps, %ld online CPUs\n", mib,
           huge ? "huge" : "default", reps, sysconf(_SC_NPROCESSORS_ONLN));

    for (int i = 0; i < n_counts; i++) {
        double best, median;
        if (measure(buf, n_words, (int)counts[i], reps, &best, &median)) return 1;
        printf("threads %2ld  read  best %6.2f GB/s  median %6.2f GB/s\n", counts[i], best,
               median);
        fflush(stdout);
    }
    free(buf);
    return 0;
}
