#include "gen/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *ts_stop_reason_name(ts_stop_reason r) {
    switch (r) {
    case TS_STOP_EOG: return "eos";
    case TS_STOP_STRING: return "stop";
    case TS_STOP_LENGTH: return "length";
    case TS_STOP_CTX: return "ctx";
    case TS_STOP_ABORT: return "abort";
    default: return "none";
    }
}

/* log-softmax of the model's row before sampling touches it: the logprob of
 * the chosen token and the top alternatives (OpenAI's logprobs). */
static void token_logprobs(const float *logits, int32_t n, int32_t id, int32_t n_top, ts_token_event *ev) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double z = 0;
    for (int32_t i = 0; i < n; i++) z += exp((double)logits[i] - mx);
    double lz = (double)mx + log(z);
    ev->logprob = (float)((double)logits[id] - lz);
    ev->n_top = 0;
    for (int32_t i = 0; i < n; i++) {
        /* insertion into a descending list, ties to the lower id */
        float v = logits[i];
        int32_t pos = ev->n_top;
        while (pos > 0 && v > logits[ev->top_id[pos - 1]]) pos--;
        if (pos >= n_top) continue;
        int32_t last = ev->n_top < n_top ? ev->n_top : n_top - 1;
        for (int32_t j = last; j > pos; j--) ev->top_id[j] = ev->top_id[j - 1];
        ev->top_id[pos] = i;
        if (ev->n_top < n_top) ev->n_top++;
    }
    for (int32_t j = 0; j < ev->n_top; j++) ev->top_logprob[j] = (float)((double)logits[ev->top_id[j]] - lz);
}

/* Text that is final but not yet emitted, because its tail might still grow
 * into a stop string. */
typedef struct pending {
    char *buf; /* (cap) */
    size_t n, cap;
} pending;

static bool pend_add(pending *p, const char *s, size_t n) {
    if (p->cap - p->n < n) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap - p->n < n) cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b) return false;
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->n, s, n);
    p->n += n;
    return true;
}

static void pend_drop(pending *p, size_t n) {
    memmove(p->buf, p->buf + n, p->n - n);
    p->n -= n;
}

/* Earliest full match of any stop string in p, or -1. */
static ptrdiff_t find_stop(const pending *p, const char *const *stops, size_t n_stops) {
    ptrdiff_t best = -1;
    for (size_t s = 0; s < n_stops; s++) {
        size_t L = strlen(stops[s]);
        if (!L || L > p->n) continue;
        for (size_t i = 0; i + L <= p->n && (best < 0 || (ptrdiff_t)i < best); i++)
            if (memcmp(p->buf + i, stops[s], L) == 0) { best = (ptrdiff_t)i; break; }
    }
    return best;
}

/* Bytes of p that can be emitted: everything before the earliest suffix that
 * is a proper prefix of some stop string. */
static size_t safe_prefix(const pending *p, const char *const *stops, size_t n_stops) {
    for (size_t j = 0; j < p->n; j++)
        for (size_t s = 0; s < n_stops; s++) {
            size_t L = strlen(stops[s]), tail = p->n - j;
            if (tail < L && memcmp(p->buf + j, stops[s], tail) == 0) return j;
        }
    return p->n;
}

ts_status gen_run(void *model, gen_eval_fn eval, int32_t n_vocab, const tok_vocab *vocab, sampler *smp, const int32_t *prompt,
                  int32_t n_prompt, const gen_params *p, gen_text_fn on_text, gen_token_fn on_token, void *user, gen_result *out) {
    memset(out, 0, sizeof *out);
    if (p->max_new < 0) return ts_fail(TS_ERR_ARG, "max_new must not be negative");
    if (p->top_logprobs < 0 || p->top_logprobs > TS_MAX_TOP_LOGPROBS)
        return ts_fail(TS_ERR_ARG, "top_logprobs %d is outside 0..%d", p->top_logprobs, TS_MAX_TOP_LOGPROBS);
    float *lp_row = NULL; /* the row before sampling modifies it */
    if (p->logprobs || p->top_logprobs) {
        lp_row = ts_malloc(sizeof(float) * (size_t)n_vocab);
        if (!lp_row) return TS_ERR_NOMEM;
    }
    if (n_prompt < 1) return ts_fail(TS_ERR_ARG, "the prompt is empty: nothing to condition on");
    if ((int64_t)p->n_past + n_prompt > p->n_ctx)
        return ts_fail(TS_ERR_LIMIT, "the prompt is %d tokens but only %d of the %d-token context are free", n_prompt, p->n_ctx - p->n_past,
                       p->n_ctx);
    out->ids = ts_malloc(sizeof(int32_t) * (size_t)(p->max_new ? p->max_new : 1));
    if (!out->ids) {
        free(lp_row);
        return TS_ERR_NOMEM;
    }
    tok_stream ts;
    ts_status st = tok_stream_init(&ts, vocab, 0);
    if (st) {
        free(lp_row);
        return st;
    }
    pending pend = {0};
    for (int32_t i = 0; i < n_prompt; i++) sampler_accept(smp, prompt[i]);

    float *logits = NULL;
    double t0 = ts_now();
    /* with a draw of the model's own, the logits leave the model only for logprobs */
    const bool host = !p->draw || lp_row;
    st = eval(model, prompt, n_prompt, host ? &logits : NULL);
    out->prefill_s = ts_now() - t0;
    out->n_prompt = n_prompt;
    int32_t n_past = p->n_past + n_prompt;
    double t1 = ts_now();
    while (!st) {
        if (out->n_new == p->max_new) { out->reason = GEN_STOP_LENGTH; break; }
        if (lp_row) memcpy(lp_row, logits, sizeof(float) * (size_t)n_vocab);
        double ts0 = ts_now();
        int32_t id = p->draw ? p->draw(model, host ? logits : NULL) : sampler_sample(smp, logits);
        out->sample_s += ts_now() - ts0;
        if (id < 0 || id >= n_vocab) {
            ts_error_prefix("no token sampled"); /* the sampler said why */
            st = TS_ERR_ARG;
            break;
        }
        sampler_accept(smp, id);
        out->ids[out->n_new++] = id;
        if (on_token) {
            ts_token_event ev = {.id = id};
            if (lp_row) token_logprobs(lp_row, n_vocab, id, p->top_logprobs, &ev);
            if (!on_token(user, &ev)) { out->reason = GEN_STOP_ABORT; break; }
        }
        if (tok_is_eog(vocab, id)) { out->reason = GEN_STOP_EOG; break; }
        size_t len;
        const char *txt = tok_stream_push(&ts, id, &len);
        if (len && !pend_add(&pend, txt, len)) { st = ts_fail(TS_ERR_NOMEM, "out of memory"); break; }
        ptrdiff_t at = find_stop(&pend, p->stops, p->n_stops);
        if (at >= 0) {
            if (on_text && at > 0 && !on_text(user, pend.buf, (size_t)at)) { out->reason = GEN_STOP_ABORT; pend.n = 0; break; }
            pend.n = 0;
            out->reason = GEN_STOP_STRING;
            break;
        }
        size_t safe = safe_prefix(&pend, p->stops, p->n_stops);
        if (safe) {
            if (on_text && !on_text(user, pend.buf, safe)) { out->reason = GEN_STOP_ABORT; pend.n = 0; break; }
            pend_drop(&pend, safe);
        }
        if (out->n_new == p->max_new) { out->reason = GEN_STOP_LENGTH; break; }
        if (n_past >= p->n_ctx) { out->reason = GEN_STOP_CTX; break; }
        st = eval(model, &id, 1, host ? &logits : NULL);
        n_past++;
    }
    out->decode_s = ts_now() - t1;
    /* What is still held back is final now: the run is over. */
    if (!st && out->reason != GEN_STOP_ABORT && out->reason != GEN_STOP_STRING) {
        size_t len;
        const char *txt = tok_stream_flush(&ts, &len);
        if (len) pend_add(&pend, txt, len);
        if (on_text && pend.n && !on_text(user, pend.buf, pend.n)) out->reason = GEN_STOP_ABORT;
    }
    free(pend.buf);
    free(lp_row);
    tok_stream_free(&ts);
    return st;
}
