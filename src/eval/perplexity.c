/* Perplexity as llama.cpp's tool computes it, so numbers compare: the text
 * is cut into chunks of ctx tokens, each chunk is evaluated from an empty
 * context with its first token replaced by BOS (when the model adds one),
 * and only positions ctx/2 .. ctx-2 are scored (each has at least ctx/2
 * tokens of context). A text shorter than one chunk is one chunk of its
 * own length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/logits.h"
#include "forward/forward_internal.h"

ts_status ts_perplexity(ts_session *s, const int32_t *ids, size_t n, const ts_perplexity_opts *opts, ts_perplexity_fn on_progress,
                        void *user, ts_perplexity_result *out) {
    memset(out, 0, sizeof *out);
    const ts_vocab *v = s->model->vocab;
    int64_t ctx = opts->n_ctx > 0 ? opts->n_ctx : 512;
    if (ctx < 4) return ts_fail(TS_ERR_ARG, "perplexity: chunks of %lld tokens are too short (at least 4)", (long long)ctx);
    if (n < 4) return ts_fail(TS_ERR_ARG, "perplexity: only %zu tokens; perplexity needs at least 4", n);
    if (opts->save_logits && opts->kl_base && !strcmp(opts->save_logits, opts->kl_base))
        return ts_fail(TS_ERR_ARG, "perplexity: the saved logits would overwrite the base file %s", opts->kl_base);
    if ((size_t)ctx > n) ctx = (int64_t)n;
    if (!s->all_logits || s->n_ctx < ctx)
        return ts_fail(TS_ERR_ARG, "perplexity: the session needs all_logits and a context of %lld (it has %d)", (long long)ctx, s->n_ctx);
    int64_t n_chunks = (int64_t)n / ctx;
    if (opts->max_chunks && n_chunks > opts->max_chunks) n_chunks = opts->max_chunks;
    int32_t first = (int32_t)(ctx / 2);
    uint64_t n_scored = (uint64_t)n_chunks * (uint64_t)(ctx - 1 - first);
    const int32_t nv = s->model->desc.hp.n_vocab;

    ts_logits_file bf = {0};
    ts_logits_writer w = {0};
    bool writing = false, have_base = false;
    ts_kl_stats kl = {0};
    float *base_row = NULL;
    int32_t *chunk = ts_malloc(sizeof(int32_t) * (size_t)ctx);
    ts_status st = chunk ? TS_OK : TS_ERR_NOMEM;
    if (!st && opts->kl_base) {
        if ((st = ts_logits_file_open(opts->kl_base, &bf)) == TS_OK) {
            have_base = true;
            if (bf.n_vocab != (uint32_t)nv || bf.n_positions != n_scored)
                st = ts_fail(TS_ERR_ARG, "%s: holds %llu positions of %u logits, this run scores %llu of %d (same text, chunk length and chunks needed)",
                             opts->kl_base, (unsigned long long)bf.n_positions, bf.n_vocab, (unsigned long long)n_scored, nv);
            else if (!(base_row = ts_malloc(sizeof(float) * (size_t)nv))) st = TS_ERR_NOMEM;
        }
    }
    if (!st && opts->save_logits && (st = ts_logits_writer_open(&w, opts->save_logits, (uint32_t)nv)) == TS_OK) writing = true;

    ts_perplexity_progress pr = {.n_tokens = n, .n_chunks = n_chunks, .chunk_len = (int32_t)ctx, .first_scored = first};
    if (!st && on_progress) on_progress(user, &pr);
    double nll = 0;
    uint64_t pos_i = 0;
    int32_t bos = v ? tok_bos(v) : -1;
    bool add_bos = v && bos >= 0 && tok_add_bos(v);
    for (int64_t c = 0; c < n_chunks && !st; c++) {
        memcpy(chunk, ids + c * ctx, sizeof(int32_t) * (size_t)ctx);
        if (add_bos) chunk[0] = bos;
        ts_session_reset(s);
        float *logits;
        if ((st = ts_session_eval(s, chunk, (int32_t)ctx, &logits)) != TS_OK) break;
        for (int32_t p = first; p < ctx - 1 && !st; p++, pos_i++) {
            const float *row = logits + (size_t)p * nv;
            int32_t target = chunk[p + 1];
            nll += ts_nll(row, nv, target);
            if (writing) st = ts_logits_writer_add(&w, target, row);
            if (!st && have_base) {
                int32_t bt = ts_logits_file_row(&bf, pos_i, base_row);
                if (bt != target)
                    st = ts_fail(TS_ERR_ARG, "%s: position %llu scores token %d, this run token %d: not the same text", opts->kl_base,
                                 (unsigned long long)pos_i, bt, target);
                else st = ts_kl_stats_add(&kl, ts_kl_rows(base_row, row, nv), ts_argmax(base_row, nv) == ts_argmax(row, nv));
            }
        }
        pr.chunks_done = c + 1;
        pr.ppl = exp(nll / (double)pos_i);
        if (!st && on_progress) on_progress(user, &pr);
    }
    if (!st) {
        out->ppl = exp(nll / (double)pos_i);
        out->n_scored = pos_i;
        out->n_chunks = n_chunks;
        out->chunk_len = (int32_t)ctx;
        if (have_base) {
            out->have_kl = true;
            ts_kl_stats_summary(&kl, &out->kl_mean, &out->kl_median, &out->kl_p99, &out->same_top1_pct);
        }
        if (writing) {
            writing = false;
            st = ts_logits_writer_close(&w);
        }
    }
    if (writing) ts_logits_writer_abort(&w);
    free(base_row);
    free(chunk);
    ts_kl_stats_free(&kl);
    if (have_base) ts_logits_file_close(&bf);
    return st;
}
