// roof: the decode roofline read with the bandwidth probe interleaved token
// by token, for machines whose memory bandwidth moves while they run.
//
// The roofline share is (bytes a token reads x tokens/s) over the memory
// read bandwidth. On a shared VM the bandwidth changes within seconds (the
// Zen 4 VM of sessions 42-44: a scratch read loop, 2 threads over 1 GiB, went
// 18.9, 59.9, 18.4, 62.9, 47.9 GB/s in five consecutive reps), so a membw
// reading before and after a tg128 does not read what the decode had: rounds
// came out at 101-139%.
// Here every decode token is followed by one probe read of the same threads
// count, and the two are summed over the whole run: both sample the same
// stretch of time, token by token, so the share compares like with like.
//
//   roof -m MODEL [-t threads=2] [-n tokens=128] [-w probe MiB a token=1024]
//        [-b buffer MiB=2048] [-o rows.tsv] [-S]
//
// Decode: one session, one token per ts_session_eval, random ids (as
// `turbospark bench`), after 4 untimed tokens. Bytes a token:
// ts_model_info.active_bytes (as bench --json's active_bytes_per_token).
// Probe: membw's read loop (membw_read.h) on `threads` threads over a window
// of the buffer that moves on each token. A 5 ms sleep separates the phases,
// so that neither's idle threads still spin while the other runs (the pool's
// workers spin TS_POOL_SPIN pauses before they sleep; the probe's wait on
// a pthread barrier).
//
// -S (self-test): the decode phase is replaced by a probe read of the bytes a
// token reads, from the buffer's second half (round it as often as needed;
// the probe windows then stay in the first half). The two phases then read the
// same way, so the share must come out near 100%; how far it strays is the
// method's noise on this machine.
//
// Prints two summary lines: the whole run, then its quarter with the most
// bandwidth (below); -o writes one row a token. Exit 1 on any error.
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
#include <unistd.h>

#include "turbospark.h"
#include "membw_read.h"

#define MAX_THREADS 64

typedef struct {
    const uint64_t *buf; // (n_words) the probe buffer, read-only after the fill
    size_t lo, n;        // this read's window, in words, set by the main thread before each start
    int nth;
    uint64_t sink[MAX_THREADS]; // (nth) each thread's sums, so the loads cannot be elided
    int quit;
    pthread_barrier_t start, done;
} probe;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

// thread ith's share of the window, 64-byte aligned
static void slice(const probe *p, int ith, size_t *lo, size_t *n) {
    size_t per = p->n / (size_t)p->nth;
    per -= per % 8;
    *lo = p->lo + (size_t)ith * per;
    *n = ith == p->nth - 1 ? p->n - (size_t)ith * per : per;
}

typedef struct {
    probe *p;
    int ith;
} probe_arg;

static void *probe_worker(void *arg) {
    probe_arg *a = arg;
    probe *p = a->p;
    for (;;) {
        pthread_barrier_wait(&p->start);
        if (p->quit) return NULL;
        size_t lo, n;
        slice(p, a->ith, &lo, &n);
        p->sink[a->ith] += membw_sum_slice(p->buf + lo, n);
        pthread_barrier_wait(&p->done);
    }
}

// one read of n_words from word lo on all threads; returns its seconds
static double probe_read(probe *p, size_t lo, size_t n_words) {
    p->lo = lo;
    p->n = n_words;
    double t0 = now_s();
    pthread_barrier_wait(&p->start);
    size_t l, n;
    slice(p, 0, &l, &n);
    p->sink[0] += membw_sum_slice(p->buf + l, n);
    pthread_barrier_wait(&p->done);
    return now_s() - t0;
}

// decode GB/s and probe GB/s over the tokens i with pick[i] (all when pick is
// NULL), each side its bytes over its summed seconds; returns the share in %
static double share_over(const double *t_dec, const double *t_probe, const int *pick, long n, double tok_bytes,
                         double win_bytes, double *dec_gbs, double *probe_gbs, long *count) {
    double sd = 0, sp = 0;
    long k = 0;
    for (long i = 0; i < n; i++)
        if (!pick || pick[i]) sd += t_dec[i], sp += t_probe[i], k++;
    *dec_gbs = tok_bytes * (double)k / sd / 1e9;
    *probe_gbs = win_bytes * (double)k / sp / 1e9;
    *count = k;
    return 100 * *dec_gbs / *probe_gbs;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "roof: error: %s wants an integer in %ld..%ld, not '%s'\n", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: roof -m MODEL [-t threads=2] [-n tokens=128] [-w probe MiB a token=1024] [-b buffer MiB=2048]\n"
               "            [-o rows.tsv] [-S (self-test: a probe read in place of each decode token)]\n");
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *rows_path = NULL;
    long nth = 2, n_tok = 128, win_mib = 1024, buf_mib = 2048;
    int self_test = 0, c;
    while ((c = getopt(argc, argv, "m:t:n:w:b:o:Sh")) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'o': rows_path = optarg; break;
        case 'S': self_test = 1; break;
        case 't': if (!parse_long("-t", optarg, 1, MAX_THREADS, &nth)) return 1; break;
        case 'n': if (!parse_long("-n", optarg, 8, 100000, &n_tok)) return 1; break;
        // under 64 MiB a window can sit in a last-level cache, and the probe would not read memory
        case 'w': if (!parse_long("-w", optarg, 64, 1L << 20, &win_mib)) return 1; break;
        case 'b': if (!parse_long("-b", optarg, 128, 1L << 20, &buf_mib)) return 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
    }
    if (optind != argc) { fprintf(stderr, "roof: error: unexpected argument '%s'\n", argv[optind]); return 1; }
    if (!model_path) { fprintf(stderr, "roof: error: no model given (-m MODEL)\n"); return 1; }
    // consecutive windows never overlap, and -S keeps a window in the first half
    if (buf_mib < 2 * win_mib) { fprintf(stderr, "roof: error: -b %ld MiB is under two windows of -w %ld MiB\n", buf_mib, win_mib); return 1; }

    ts_model_opts mo = ts_model_opts_default();
    mo.prefault = true; // every weight page read before timing, as a warm bench run has them
    ts_model *m = NULL;
    if (ts_model_load(model_path, &mo, &m) != TS_OK) { fprintf(stderr, "roof: error: %s\n", ts_last_error()); return 1; }
    ts_model_info mi;
    ts_model_get_info(m, &mi);
    if (mi.n_expert) {
        // a MoE token reads its top-k experts, which change from token to token: its bytes are not one number
        fprintf(stderr, "roof: error: %s is a MoE model; the roofline here is for dense decode\n", model_path);
        ts_model_free(m);
        return 1;
    }
    const int warm = 4;
    ts_session_opts so = ts_session_opts_default();
    so.n_threads = (int32_t)nth;
    so.n_batch = 1;
    so.n_ctx = (int32_t)(n_tok + warm + 1);
    ts_session *s = NULL;
    if (ts_session_new(m, &so, &s) != TS_OK) { fprintf(stderr, "roof: error: %s\n", ts_last_error()); ts_model_free(m); return 1; }

    size_t buf_words = ((size_t)buf_mib << 20) / 8, win_words = ((size_t)win_mib << 20) / 8;
    size_t tok_words = (size_t)(mi.active_bytes / 8) & ~(size_t)7; // -S: a token's bytes, whole cache lines
    const size_t half_words = (buf_words / 2) & ~(size_t)7;        // -S: the probe's half and the token's
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 2u << 20, buf_words * 8)) { fprintf(stderr, "roof: error: cannot allocate %ld MiB\n", buf_mib); return 1; }
    membw_fill(buf, buf_words);

    probe p = {.buf = buf, .nth = (int)nth};
    if (pthread_barrier_init(&p.start, NULL, (unsigned)nth) || pthread_barrier_init(&p.done, NULL, (unsigned)nth)) {
        fprintf(stderr, "roof: error: pthread_barrier_init failed\n");
        return 1;
    }
    pthread_t th[MAX_THREADS];
    probe_arg pa[MAX_THREADS];
    for (int t = 1; t < nth; t++) {
        pa[t] = (probe_arg){&p, t};
        if (pthread_create(&th[t], NULL, probe_worker, &pa[t])) {
            fprintf(stderr, "roof: error: pthread_create failed\n");
            return 1; // the started threads wait on the barrier; the process ends with them
        }
    }

    FILE *rows = NULL;
    if (rows_path && !(rows = fopen(rows_path, "w"))) { fprintf(stderr, "roof: error: cannot write %s: %s\n", rows_path, strerror(errno)); return 1; }
    if (rows) fprintf(rows, "token\tdecode_s\tdecode_bytes\tprobe_s\tprobe_bytes\tdecode_gbs\tprobe_gbs\tshare_pct\n");

    int32_t n_vocab = ts_session_n_vocab(s);
    ts_rng rng;
    ts_rng_seed(&rng, 42);
    double *share = calloc((size_t)n_tok, sizeof *share);
    double *t_dec = calloc((size_t)n_tok, sizeof *t_dec), *t_probe = calloc((size_t)n_tok, sizeof *t_probe);
    double *around = calloc((size_t)n_tok, sizeof *around), *cut = calloc((size_t)n_tok, sizeof *cut);
    int *top = calloc((size_t)n_tok, sizeof *top);
    if (!share || !t_dec || !t_probe || !around || !cut || !top) { fprintf(stderr, "roof: error: out of memory\n"); return 1; }
    const double win_bytes = (double)win_words * 8;
    const double tok_bytes = self_test ? (double)tok_words * 8 : (double)mi.active_bytes;
    size_t win_at = 0;   // the probe window's start in the buffer's first half, in words
    size_t tok_at = 0;   // -S: where the next token read starts in the second half, in words
    int rc = 0;
    for (long i = -warm; i < n_tok && !rc; i++) {
        double td;
        if (self_test) { // a token's bytes from the buffer's second half, around it as often as they need
            td = 0;
            for (size_t left = tok_words; left;) {
                size_t n = left < half_words - tok_at ? left : half_words - tok_at;
                td += probe_read(&p, half_words + tok_at, n);
                left -= n;
                tok_at = (tok_at + n) % half_words;
            }
        } else {
            int32_t id = (int32_t)(ts_rng_next(&rng) % (uint64_t)n_vocab);
            float *logits;
            double t0 = now_s();
            if (ts_session_eval(s, &id, 1, &logits) != TS_OK) { fprintf(stderr, "roof: error: %s\n", ts_last_error()); rc = 1; break; }
            td = now_s() - t0;
        }
        nap_ms(5);
        if (win_at + win_words > (self_test ? half_words : buf_words)) win_at = 0;
        double tp = probe_read(&p, win_at, win_words);
        win_at += win_words;
        nap_ms(5);
        if (i < 0) continue;
        double dg = tok_bytes / td / 1e9, pg = win_bytes / tp / 1e9;
        share[i] = 100 * dg / pg;
        t_dec[i] = td;
        t_probe[i] = tp;
        if (rows) fprintf(rows, "%ld\t%.6f\t%.0f\t%.6f\t%.0f\t%.2f\t%.2f\t%.1f\n", i, td, tok_bytes, tp, win_bytes, dg, pg, share[i]);
    }
    p.quit = 1;
    pthread_barrier_wait(&p.start);
    for (int t = 1; t < nth; t++) pthread_join(th[t], NULL);
    uint64_t sink = 0;
    for (int t = 0; t < nth; t++) sink += p.sink[t];
    if (rows && fclose(rows)) { fprintf(stderr, "roof: error: writing %s failed\n", rows_path); rc = 1; }
    if (!rc) {
        double dec_gbs, pr_gbs, q_dg, q_pg;
        long all_n, q_n;
        const double all_share = share_over(t_dec, t_probe, NULL, n_tok, tok_bytes, win_bytes, &dec_gbs, &pr_gbs, &all_n);
        // The state with the most bandwidth, where the decode's own speed is tested hardest: the quarter of
        // tokens whose neighbours' probes (i - 1 and i + 1, not the token's own, whose noise would bias the
        // pick) read the most. A run that stays in one state gives about its whole-run share here.
        for (long i = 0; i < n_tok; i++) {
            double a = i > 0 ? win_bytes / 1e9 / t_probe[i - 1] : 0, b = i + 1 < n_tok ? win_bytes / 1e9 / t_probe[i + 1] : 0;
            around[i] = cut[i] = i > 0 && i + 1 < n_tok ? (a + b) / 2 : a + b;
        }
        qsort(cut, (size_t)n_tok, sizeof *cut, cmp_double);
        const double at_least = cut[n_tok - n_tok / 4];
        for (long i = 0; i < n_tok; i++) top[i] = around[i] >= at_least;
        const double q_share = share_over(t_dec, t_probe, top, n_tok, tok_bytes, win_bytes, &q_dg, &q_pg, &q_n);
        int over = 0;
        for (long i = 0; i < n_tok; i++) over += share[i] > 100;
        qsort(share, (size_t)n_tok, sizeof *share, cmp_double);
        printf("roof: %s%s, %ld threads, %ld tokens, %.0f bytes a token, each token followed by a %ld MiB read\n",
               self_test ? "self-test (probe reads in place of decode) on " : "", mi.name[0] ? mi.name : mi.arch, nth, n_tok, tok_bytes, win_mib);
        printf("roof: decode %.2f GB/s (%.3f tok/s), probe %.2f GB/s, share %.1f%%; per token median %.1f%% "
               "(p10 %.1f, p90 %.1f), %d of %ld tokens above 100%%\n",
               dec_gbs, dec_gbs * 1e9 / tok_bytes, pr_gbs, all_share, share[n_tok / 2], share[n_tok / 10],
               share[n_tok * 9 / 10], over, n_tok);
        printf("roof: top quarter by the neighbours' probes (%ld tokens, >= %.2f GB/s around them): decode %.2f GB/s, "
               "probe %.2f GB/s, share %.1f%%\n", q_n, at_least, q_dg, q_pg, q_share);
        fprintf(stderr, "  (checksum %016llx)\n", (unsigned long long)sink);
    }
    free(share);
    free(t_dec);
    free(t_probe);
    free(around);
    free(cut);
    free(top);
    free(buf);
    ts_session_free(s);
    ts_model_free(m);
    return rc;
}
