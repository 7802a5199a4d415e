/* The engine: a loaded model (weights bound in place from the GGUF mapping)
 * and sessions that run the transformer over it.
 *
 *   ts_model *m;   ts_model_load(path, NULL, &m);
 *   ts_session *s; ts_session_new(m, NULL, &s);
 *   float *logits; ts_session_eval(s, prompt, n_prompt, &logits);  // prefill
 *   ...            ts_session_eval(s, &next, 1, &logits);          // decode
 *   ts_session_free(s); ts_model_free(m);
 *
 * A model may serve several sessions; a session is used by one thread at a
 * time. Everything a session needs (KV cache, activations, scratch) is sized
 * and allocated by ts_session_new; eval allocates nothing (except, in
 * all-logits mode, when a call asks for more positions than ever before).
 * See docs/FORWARD.md. */
#ifndef TS_ENGINE_H
#define TS_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "experts/expert_cache.h"
#include "gguf/gguf.h"
#include "model/model.h"

typedef struct ts_model ts_model;
typedef struct ts_session ts_session;

/* Loading progress in [0, 1]; called from the loading thread. */
typedef void (*ts_progress_fn)(void *user, float fraction);

typedef struct ts_model_opts {
    ts_progress_fn progress; /* NULL: no reports */
    void *progress_user;
    bool prefault;           /* read every weight page at load, so the first
                                tokens do not page the file in (reported as
                                progress); routed experts are left to their
                                residency mode */
    const expert_cache_opts *experts; /* MoE models: residency, slots, policy,
                                budget; NULL = defaults (auto) */
} ts_model_opts;

/* Opens the GGUF at path, reads the hyperparameters and binds every weight.
 * Refuses unsupported architectures (naming the supported ones), missing
 * tensors, wrong shapes and unsupported types with one clear message. */
ts_status ts_model_load(const char *path, const ts_model_opts *opts, ts_model **out);
/* Same over an already opened file; the model takes ownership of f (closed by
 * ts_model_free, also on failure). */
ts_status ts_model_load_gguf(gguf_file *f, const ts_model_opts *opts, ts_model **out);
void ts_model_free(ts_model *m);

/* The open GGUF (for the tokenizer and metadata); owned by the model. */
const gguf_file *ts_model_gguf(const ts_model *m);
/* Hyperparameters, family and bound weights. */
const ts_model_desc *ts_model_desc_of(const ts_model *m);
const char *ts_model_arch(const ts_model *m); /* "llama", "qwen2", ... */
int32_t ts_model_n_vocab(const ts_model *m);
int32_t ts_model_n_ctx_train(const ts_model *m);
/* Bytes of weights one token reads (all matrices incl. the LM head; for MoE
 * models the top-k experts of each layer, not all of them). */
uint64_t ts_model_weight_bytes(const ts_model *m);
/* The routed-expert cache of a MoE model (NULL for a dense model): for the
 * start/end lines and statistics (experts/expert_cache.h). */
expert_cache *ts_model_expert_cache(const ts_model *m);

/* Instruments (TURBOSPARK_* variables, read once at load; docs/INSTRUMENTS.md).
 * At the end of a run the command calls ts_model_instruments_finish, which
 * writes the captures and prints "[tag] wrote PATH" (or "[tag] FAILED ...")
 * lines, and the phase footer when TURBOSPARK_PHASES is set, to log. Time
 * the caller spends sampling is added with ts_model_phase_add_sampling. */
ts_status ts_model_instruments_finish(ts_model *m, FILE *log);
void ts_model_phase_add_sampling(ts_model *m, double seconds);

typedef struct ts_session_opts {
    int32_t n_ctx;     /* positions; 0 = the model's context_length */
    int32_t n_threads; /* 0 = one per available core */
    int32_t n_batch;   /* most tokens per forward chunk (prefill); 0 = 256 */
    bool all_logits;   /* eval returns logits for every position it evaluated */
    bool kv_f32;       /* F32 KV cache instead of the default F16 */
    bool precise;      /* reference precision: F32 activations in every matmul
                          (quantized weight rows dequantized) instead of 8-bit
                          activations; several times slower, for judging quality */
} ts_session_opts;

/* The defaults above. */
ts_session_opts ts_session_opts_default(void);

ts_status ts_session_new(ts_model *m, const ts_session_opts *opts, ts_session **out);
void ts_session_free(ts_session *s);

/* Appends n tokens to the context and runs the transformer over them
 * (batched matrix-matrix products for n > 1). *logits receives n_vocab floats
 * for the last token, or (n, n_vocab) row-major for every token in
 * all-logits mode; valid until the next eval/reset/free.
 * Errors: TS_ERR_ARG (n < 1, an id outside the vocabulary),
 * TS_ERR_LIMIT (n_past + n > n_ctx: nothing is evaluated). */
ts_status ts_session_eval(ts_session *s, const int32_t *ids, int32_t n, float **logits);
/* Forgets the context (n_past = 0). */
void ts_session_reset(ts_session *s);
/* Rewinds the context to its first n_past tokens (n_past <= current). */
ts_status ts_session_truncate(ts_session *s, int32_t n_past);

int32_t ts_session_n_ctx(const ts_session *s);
int32_t ts_session_n_past(const ts_session *s);
int32_t ts_session_n_vocab(const ts_session *s);
int32_t ts_session_n_threads(const ts_session *s);

/* Wall-clock counters: evals of one token count as decode, longer ones as
 * prefill. */
typedef struct ts_timings {
    int64_t prefill_tokens;
    double prefill_s;
    int64_t decode_tokens;
    double decode_s;
} ts_timings;
ts_timings ts_session_timings(const ts_session *s);
void ts_session_timings_reset(ts_session *s);

/* Instruments' tap: named points of the forward pass hand their buffer to a
 * callback (host memory; never modified). Off (NULL) costs one pointer test
 * per point and layer; output is identical with taps on. */
typedef enum ts_tap_point {
    TS_TAP_FFN_ACT = 0, /* act(gate) * up, (n_tok, n_ff), input of ffn_down */
} ts_tap_point;
/* rows (n_tok, width); last_row_is_final: the chunk's last row is the last
 * token of this eval (the one whose logits are returned). */
typedef void (*ts_tap_fn)(void *user, ts_tap_point point, int32_t layer, const float *rows, int32_t n_tok, int32_t width,
                          bool last_row_is_final);
void ts_session_set_tap(ts_session *s, ts_tap_fn fn, void *user);

#endif
