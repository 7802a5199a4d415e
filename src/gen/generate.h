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
 * of the last one (n_vocab floats, valid until the next call). */
typedef ts_status (*gen_eval_fn)(void *model, const int32_t *ids, int32_t n, float **logits);

typedef enum gen_stop_reason {
    GEN_STOP_NONE = 0,
    GEN_STOP_EOG,    /* the model produced an end-of-generation token */
    GEN_STOP_STRING, /* a --stop string appeared in the text */
    GEN_STOP_LENGTH, /* --max-new tokens generated */
    GEN_STOP_CTX,    /* the context is full */
    GEN_STOP_ABORT,  /* the text callback asked to stop (e.g. closed pipe) */
} gen_stop_reason;

const char *gen_stop_reason_name(gen_stop_reason r); /* "eos", "stop", "length", "ctx", "abort" */

/* Receives text as it becomes final (never half a UTF-8 character, never a
 * piece that may still turn out to be part of a stop string). Return false to
 * abort. */
typedef bool (*gen_text_fn)(void *user, const char *text, size_t len);
/* Receives each generated token id (including an EOG token that ends the run). */
typedef bool (*gen_token_fn)(void *user, int32_t id);

typedef struct gen_params {
    int32_t max_new;          /* tokens to generate at most (> 0) */
    const char *const *stops; /* (n_stops) stop strings, matched on the generated text */
    size_t n_stops;
    int32_t n_ctx;            /* context size: prompt + generated must fit */
    int32_t n_past;           /* tokens already in the context before this call (chat) */
} gen_params;

typedef struct gen_result {
    gen_stop_reason reason;
    int32_t n_prompt;       /* tokens prefilled */
    int32_t n_new;          /* tokens sampled (EOG included) */
    double prefill_s, decode_s;
    double sample_s;        /* of decode_s, time in the sampler */
    int32_t *ids;           /* (n_new) generated ids; owned, free() */
} gen_result;

/* Runs prefill + decode. sampler_accept is called for every prompt and
 * generated token (repetition penalty sees both). text/token callbacks may be
 * NULL. On error the partial result is still filled in. */
ts_status gen_run(void *model, gen_eval_fn eval, int32_t n_vocab, const tok_vocab *vocab, sampler *smp, const int32_t *prompt,
                  int32_t n_prompt, const gen_params *p, gen_text_fn on_text, gen_token_fn on_token, void *user, gen_result *out);

#endif
