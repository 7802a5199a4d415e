#include "eval/logits.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOGITS_MAGIC "TSLOGIT1"
#define LOGITS_HEADER 24

double ts_logsumexp(const float *x, int32_t n) {
    double m = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    if (!isfinite(m)) return m;
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

double ts_nll(const float *logits, int32_t n, int32_t target) {
    return ts_logsumexp(logits, n) - (double)logits[target];
}

double ts_kl_rows(const float *p, const float *q, int32_t n) {
    double lp = ts_logsumexp(p, n), lq = ts_logsumexp(q, n), kl = 0;
    for (int32_t i = 0; i < n; i++) {
        double a = (double)p[i] - lp;
        if (a < -700) continue; /* p_i underflows to 0: contributes nothing */
        kl += exp(a) * (a - ((double)q[i] - lq));
    }
    return kl < 0 ? 0 : kl; /* rounding can dip a hair below zero */
}

int32_t ts_argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

ts_status ts_logits_writer_open(ts_logits_writer *w, const char *path, uint32_t n_vocab) {
    memset(w, 0, sizeof *w);
    w->n_vocab = n_vocab;
    ts_status st = ts_afile_open(&w->af, path);
    if (st) return st;
    uint32_t hdr32[2] = {n_vocab, 0};
    uint64_t zero = 0;
    if (fwrite(LOGITS_MAGIC, 1, 8, w->af.f) != 8 || fwrite(hdr32, 4, 2, w->af.f) != 2 || fwrite(&zero, 8, 1, w->af.f) != 1) {
        ts_logits_writer_abort(w);
        return ts_fail(TS_ERR_IO, "%s: write failed", path);
    }
    return TS_OK;
}

ts_status ts_logits_writer_add(ts_logits_writer *w, int32_t target, const float *logits) {
    if (fwrite(&target, 4, 1, w->af.f) != 1 || fwrite(logits, 4, w->n_vocab, w->af.f) != w->n_vocab)
        return ts_fail(TS_ERR_IO, "%s: write failed: %s", w->af.path, strerror(errno));
    w->n++;
    return TS_OK;
}

ts_status ts_logits_writer_close(ts_logits_writer *w) {
    /* the position count goes in the header only now that it is known */
    if (fseek(w->af.f, 16, SEEK_SET) != 0 || fwrite(&w->n, 8, 1, w->af.f) != 1) {
        ts_status st = ts_fail(TS_ERR_IO, "%s: write failed: %s", w->af.path, strerror(errno));
        ts_logits_writer_abort(w);
        return st;
    }
    ts_status st = ts_afile_commit(&w->af);
    memset(w, 0, sizeof *w);
    return st;
}

void ts_logits_writer_abort(ts_logits_writer *w) {
    ts_afile_abort(&w->af);
    memset(w, 0, sizeof *w);
}

ts_status ts_logits_file_open(const char *path, ts_logits_file *out) {
    memset(out, 0, sizeof *out);
    ts_status st = ts_map_file(path, &out->map);
    if (st) return st;
    const uint8_t *p = out->map.data;
    if (out->map.size < LOGITS_HEADER || memcmp(p, LOGITS_MAGIC, 8) != 0) {
        ts_logits_file_close(out);
        return ts_fail(TS_ERR_FORMAT, "%s: not a turbospark logits file (bad magic)", path);
    }
    memcpy(&out->n_vocab, p + 8, 4);
    memcpy(&out->n_positions, p + 16, 8);
    uint64_t row = 4 + 4ull * out->n_vocab, need;
    if (out->n_vocab == 0 || !ts_mul_u64(row, out->n_positions, &need) || need != out->map.size - LOGITS_HEADER) {
        ts_logits_file_close(out);
        return ts_fail(TS_ERR_FORMAT, "%s: size does not match its header (%llu positions x %u vocab); truncated?", path,
                       (unsigned long long)out->n_positions, out->n_vocab);
    }
    return TS_OK;
}

int32_t ts_logits_file_row(const ts_logits_file *f, uint64_t i, float *dst) {
    const uint8_t *p = f->map.data + LOGITS_HEADER + i * (4 + 4ull * f->n_vocab);
    int32_t t;
    memcpy(&t, p, 4);
    memcpy(dst, p + 4, 4ull * f->n_vocab);
    return t;
}

void ts_logits_file_close(ts_logits_file *f) { ts_unmap_file(&f->map); }

ts_status ts_kl_stats_add(ts_kl_stats *s, double kl, int same_top1) {
    if (s->n == s->cap) {
        uint64_t cap = s->cap ? s->cap * 2 : 1024;
        double *k = ts_realloc(s->kl, (size_t)cap * sizeof *k);
        if (!k) return TS_ERR_NOMEM;
        s->kl = k;
        s->cap = cap;
    }
    s->kl[s->n++] = kl;
    s->same_top1 += same_top1 != 0;
    return TS_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void ts_kl_stats_summary(ts_kl_stats *s, double *mean, double *median, double *p99, double *same_top1_pct) {
    *mean = *median = *p99 = *same_top1_pct = NAN;
    if (!s->n) return;
    double sum = 0;
    for (uint64_t i = 0; i < s->n; i++) sum += s->kl[i];
    qsort(s->kl, (size_t)s->n, sizeof *s->kl, cmp_double);
    *mean = sum / (double)s->n;
    *median = s->n % 2 ? s->kl[s->n / 2] : 0.5 * (s->kl[s->n / 2 - 1] + s->kl[s->n / 2]);
    uint64_t k = (uint64_t)ceil(0.99 * (double)s->n);
    *p99 = s->kl[k ? k - 1 : 0];
    *same_top1_pct = 100.0 * (double)s->same_top1 / (double)s->n;
}

void ts_kl_stats_free(ts_kl_stats *s) {
    free(s->kl);
    memset(s, 0, sizeof *s);
}
