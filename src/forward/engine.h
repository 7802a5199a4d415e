/* Engine internals beyond the public API (include/turbospark.h declares
 * ts_model_load, ts_session_new, ts_session_eval...): what tests, the
 * instruments and other library modules reach into.
 *
 *   ts_model *m;   ts_model_load(path, NULL, &m);
 *   ts_session *s; ts_session_new(m, NULL, &s);
 *   float *logits; ts_session_eval(s, prompt, n_prompt, &logits);  // prefill
 *   ...            ts_session_eval(s, &next, 1, &logits);          // decode
 *   ts_session_free(s); ts_model_free(m);
 *
 * Everything a session needs (KV cache, activations, scratch) is sized and
 * allocated by ts_session_new; eval allocates nothing (except, in all-logits
 * mode, when a call asks for more positions than ever before). See
 * docs/FORWARD.md and docs/API.md. */
#ifndef TS_ENGINE_H
#define TS_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "experts/expert_cache.h"
#include "gguf/gguf.h"
#include "model/model.h"

/* Same as ts_model_load over an already opened file; the model takes
 * ownership of f (closed by ts_model_free, also on failure). */
ts_status ts_model_load_gguf(gguf_file *f, const ts_model_opts *opts, ts_model **out);

/* The open GGUF (metadata); owned by the model. */
const gguf_file *ts_model_gguf(const ts_model *m);
/* Hyperparameters, family and bound weights (backend addresses). */
const ts_model_desc *ts_model_desc_of(const ts_model *m);
/* Shorthands of ts_model_get_info for tests. */
const char *ts_model_arch(const ts_model *m); /* "llama", "qwen2", ... */
int32_t ts_model_n_vocab(const ts_model *m);
/* The routed-expert cache of a MoE model (NULL for a dense model). */
expert_cache *ts_model_expert_cache(const ts_model *m);

#endif
