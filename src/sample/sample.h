/* Token sampling: repetition penalty, top-k, top-p, min-p, temperature, and a
 * seeded RNG whose stream is specified exactly (docs/SAMPLING.md), so the same
 * seed and the same logits give the same token on any machine or backend.
 *
 * A sampler is created once per generation with scratch sized to the vocab;
 * sampler_sample() allocates nothing. */
#ifndef TS_SAMPLE_H
#define TS_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* --- RNG: xoshiro256** seeded through splitmix64 (Blackman & Vigna). --- */

uint64_t sample_splitmix64(uint64_t *state);
/* ts_rng_seed (public header): s[0..3] = four successive splitmix64 outputs
 * from state = seed; ts_rng_next: one xoshiro256** step. */
/* (next >> 11) * 2^-53: a double in [0, 1) built exactly from the top 53 bits. */
double sample_rng_uniform(ts_rng *r);

/* --- Sampler --- */

typedef struct sampler_params {
    float temperature;     /* <= 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k;         /* <= 0 or >= n_vocab: off */
    float top_p;           /* >= 1: off; must be > 0 */
    float min_p;           /* <= 0: off; must be <= 1 */
    float repeat_penalty;  /* 1: off; must be > 0 */
    int32_t repeat_last_n; /* how many accepted ids the penalty looks back over; 0: off */
    uint64_t seed;
} sampler_params;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0,
 * repeat_last_n 64, seed 0x5eed (llama.cpp's defaults, seed fixed). */
void sampler_params_default(sampler_params *p);

typedef struct sampler sampler;

/* Validates p (TS_ERR_ARG with the bad field named) and allocates the scratch. */
ts_status sampler_new(const sampler_params *p, int32_t n_vocab, sampler **out);
void sampler_free(sampler *s);

/* Picks the next token from logits[n_vocab]. Modifies logits in place (NaN
 * becomes -inf, the repetition penalty is applied). Returns the id, or -1 with
 * ts_fail(TS_ERR_ARG) when no logit is finite or +inf (nothing can be chosen).
 * Does not record the token: call sampler_accept() with what is kept. */
int32_t sampler_sample(sampler *s, float *logits);

/* Records an id for the repetition penalty (prompt tokens too, if wanted). */
void sampler_accept(sampler *s, int32_t id);

/* Forgets accepted ids and reseeds the RNG with the original seed. */
void sampler_reset(sampler *s);

/* For a draw made elsewhere from this sampler's state (a device sampler that
 * runs the same chain): its parameters, its RNG (the caller stores the
 * advanced state back), and its ring of accepted ids, (*cap =
 * repeat_last_n) entries with -1 in the slots not filled yet, or NULL. */
const sampler_params *sampler_get_params(const sampler *s);
ts_rng *sampler_rng(sampler *s);
const int32_t *sampler_recent(const sampler *s, int32_t *cap);

#endif
