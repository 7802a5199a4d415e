/* Perplexity bookkeeping and the saved-logits file used to judge quantization
 * and backend changes (`turbospark perplexity --save-logits / --kl-base`).
 *
 * File format (little-endian), documented in docs/CLI.md:
 *   char magic[8] = "TSLOGIT1"
 *   u32 n_vocab
 *   u32 reserved (0)
 *   u64 n_positions
 *   n_positions x { i32 target token id; f32 logits[n_vocab] }
 * Written atomically (temporary file + rename). */
#ifndef TS_EVAL_LOGITS_H
#define TS_EVAL_LOGITS_H

#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

/* log-softmax denominator of a row, in double for stability. */
double ts_logsumexp(const float *logits, int32_t n);
/* -log p(target) under the row's softmax. */
double ts_nll(const float *logits, int32_t n, int32_t target);
/* KL(p || q) where p, q are the softmaxes of two logit rows. */
double ts_kl_rows(const float *p_logits, const float *q_logits, int32_t n);
/* argmax, ties to the lower id. */
int32_t ts_argmax(const float *logits, int32_t n);

typedef struct ts_logits_writer {
    ts_afile af;       /* the temporary file, renamed into place on close */
    uint32_t n_vocab;
    uint64_t n;        /* positions written */
} ts_logits_writer;

ts_status ts_logits_writer_open(ts_logits_writer *w, const char *path, uint32_t n_vocab);
ts_status ts_logits_writer_add(ts_logits_writer *w, int32_t target, const float *logits);
/* Finalises (patches the count, renames); on failure removes the temporary. */
ts_status ts_logits_writer_close(ts_logits_writer *w);
void ts_logits_writer_abort(ts_logits_writer *w);

typedef struct ts_logits_file {
    ts_mapped_file map;
    uint32_t n_vocab;
    uint64_t n_positions;
} ts_logits_file;

ts_status ts_logits_file_open(const char *path, ts_logits_file *out);
/* Position i: target id and logits row (unaligned-safe copy into dst). */
int32_t ts_logits_file_row(const ts_logits_file *f, uint64_t i, float *dst);
void ts_logits_file_close(ts_logits_file *f);

/* Accumulates KL statistics against a base file. */
typedef struct ts_kl_stats {
    double *kl;          /* (cap) per-position KL(base || ours) */
    uint64_t n, cap;
    uint64_t same_top1;  /* positions where argmax agrees */
} ts_kl_stats;

ts_status ts_kl_stats_add(ts_kl_stats *s, double kl, int same_top1);
/* mean, median, p99 over the added positions (sorts s->kl in place). */
void ts_kl_stats_summary(ts_kl_stats *s, double *mean, double *median, double *p99, double *same_top1_pct);
void ts_kl_stats_free(ts_kl_stats *s);

#endif
