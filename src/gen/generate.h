/* The generation loop shared by `run`, `chat` and (later) `serve`: prefill the
 * prompt, then sample, stream text and stop on EOG, a stop string, the token
 * budget or the context limit. The model is reached through a small eval
 * callback so the loop knows nothing about backends (and tests can drive it
 * with a scripted model). */
#ifndef TS_GEN_GENERATE_H
#define TS_GEN_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"

/* Evaluates n tokens appended to the model's context and returns the logits
 * of the last one (n_vocab floats, valid until the next call); logits NULL:
 * the loop will not read them (gen_params.draw draws where they are). */
typedef ts_status (*gen_eval_fn)(void *model, const int32_t *ids, int32_t n, float **logits);
/* Draws the next id from the last eval's logits: host_logits, or NULL when
 * eval was asked for none; -1 with the reason left when nothing can be drawn. */
typedef int32_t (*gen_draw_fn)(void *model, float *host_logits);

typedef ts_stop_reason gen_stop_reason; /* the public enum */
#define GEN_STOP_NONE TS_STOP_NONE
#define GEN_STOP_EOG TS_STOP_EOG
#define GEN_STOP_STRING TS_STOP_STRING
#define GEN_STOP_LENGTH TS_STOP_LENGTH
#define GEN_STOP_CTX TS_STOP_CTX
#define GEN_STOP_ABORT TS_STOP_ABORT
#define gen_stop_reason_name ts_stop_reason_name

typedef ts_text_fn gen_text_fn;
typedef ts_token_fn gen_token_fn;

typedef struct gen_params {
    int32_t max_new;          /* tokens to generate at most (> 0) */
    const char *const *stops; /* (n_stops) stop strings, matched on the generated text */
    size_t n_stops;
    int32_t n_ctx;            /* context size: prompt + generated must fit */
    int32_t n_past;           /* tokens already in the context before this call (chat) */
    bool logprobs;            /* fill the token events' logprob */
    int32_t top_logprobs;     /* 0..TS_MAX_TOP_LOGPROBS alternatives per token */
    gen_draw_fn draw;         /* the model's own draw (a session sampling on its device), or NULL:
                                 sampler_sample on the host logits */
} gen_params;

typedef ts_gen_result gen_result;

/* Runs prefill + decode. sampler_accept is called for every prompt and
 * generated token (repetition penalty sees both). text/token callbacks may be
 * NULL. On error the partial result is still filled in. */
ts_status gen_run(void *model, gen_eval_fn eval, int32_t n_vocab, const tok_vocab *vocab, sampler *smp, const int32_t *prompt,
                  int32_t n_prompt, const gen_params *p, gen_text_fn on_text, gen_token_fn on_token, void *user, gen_result *out);

#endif
