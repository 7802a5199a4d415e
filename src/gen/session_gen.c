/* The public generation call: a session, its sampler and the shared
 * generation loop (gen_run). */
#include <string.h>

#include "forward/forward_internal.h"
#include "gen/generate.h"

ts_gen_params ts_gen_params_default(void) {
    ts_gen_params p;
    memset(&p, 0, sizeof p);
    p.max_new = 256;
    p.sampler = ts_sampler_params_default();
    return p;
}

static ts_status eval_glue(void *sess, const int32_t *ids, int32_t n, float **logits) { return ts_session_eval(sess, ids, n, logits); }
static int32_t draw_glue(void *sess, float *host_logits) { return ts_session_draw(sess, host_logits); }

ts_status ts_session_generate(ts_session *s, const int32_t *prompt, int32_t n_prompt, const ts_gen_params *p, ts_text_fn on_text,
                              ts_token_fn on_token, void *user, ts_gen_result *out) {
    memset(out, 0, sizeof *out);
    if (!s->model->vocab) return ts_fail(TS_ERR_UNSUPPORTED, "generate: the model file has no tokenizer");
    if (!prompt || n_prompt < 1) return ts_fail(TS_ERR_ARG, "the prompt is empty: nothing to condition on");
    ts_status st = ts_session_set_sampler(s, &p->sampler);
    if (st != TS_OK) return st;
    int32_t cached = p->reuse_prefix ? ts_session_reuse_prefix(s, prompt, n_prompt) : 0;
    gen_params gp = {.max_new = p->max_new,
                     .stops = p->stops,
                     .n_stops = p->n_stops,
                     .n_ctx = s->n_ctx,
                     .n_past = s->n_past,
                     .logprobs = p->logprobs,
                     .top_logprobs = p->top_logprobs,
                     .draw = draw_glue};
    st = gen_run(s, eval_glue, s->model->desc.hp.n_vocab, s->model->vocab, s->smp, prompt + cached, n_prompt - cached, &gp, on_text,
                 on_token, user, out);
    out->n_prompt = n_prompt;
    out->n_cached = cached;
    s->timings.sample_s += out->sample_s;
    if (s->diag && s->diag->phases) {
        s->diag->phase_s[TS_PHASE_LM_HEAD] += out->sample_s;
        s->diag->total_s += out->sample_s;
    }
    return st;
}
