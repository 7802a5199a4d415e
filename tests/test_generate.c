/* The generation loop, driven by a scripted model over a real SPM vocabulary
 * whose byte tokens <0xNN> make any text expressible: stop strings across
 * token boundaries, UTF-8 split across tokens, EOG, budget, context. */
#include <stdlib.h>
#include <string.h>

#include "gen/generate.h"
#include "test_util.h"

typedef struct script {
    const int32_t *ids; /* tokens the model will "predict", in order */
    int32_t n, next;
    int32_t n_vocab;
    float *logits;
    int32_t evals, fed;
} script;

static ts_status scripted_eval(void *m, const int32_t *ids, int32_t n, float **logits) {
    script *s = m;
    (void)ids;
    s->evals++;
    s->fed += n;
    for (int32_t i = 0; i < s->n_vocab; i++) s->logits[i] = 0;
    int32_t want = s->next < s->n ? s->ids[s->next] : 0;
    s->next++;
    s->logits[want] = 100;
    *logits = s->logits;
    return TS_OK;
}

typedef struct sink {
    char buf[4096];
    size_t n;
    int calls;
    bool split_utf8; /* any callback ended inside a UTF-8 character */
} sink;

static bool on_text(void *u, const char *t, size_t len) {
    sink *k = u;
    memcpy(k->buf + k->n, t, len);
    k->n += len;
    k->buf[k->n] = 0;
    k->calls++;
    /* a chunk must not end with an incomplete UTF-8 sequence */
    size_t i = len;
    int cont = 0;
    while (i > 0 && ((unsigned char)t[i - 1] & 0xC0) == 0x80) i--, cont++;
    if (i > 0) {
        unsigned char lead = (unsigned char)t[i - 1];
        int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
        if (need != cont) k->split_utf8 = true;
    }
    return true;
}

static int32_t byte_id(unsigned char b) { return 3 + b; } /* <0x00> is id 3 in the tiny vocab */

static void run(tok_vocab *v, const char *text, int32_t eog_at_end, const char *const *stops, size_t n_stops, int32_t max_new,
                int32_t n_ctx, sink *k, gen_result *r, script *s) {
    static int32_t ids[512];
    int32_t n = 0;
    for (const char *c = text; *c; c++) ids[n++] = byte_id((unsigned char)*c);
    if (eog_at_end) ids[n++] = tok_eos(v);
    memset(s, 0, sizeof *s);
    s->ids = ids;
    s->n = n;
    s->n_vocab = tok_n_vocab(v);
    s->logits = calloc((size_t)s->n_vocab, sizeof(float));
    sampler_params sp;
    sampler_params_default(&sp);
    sp.temperature = 0;
    sampler *smp;
    CHECK(sampler_new(&sp, s->n_vocab, &smp) == TS_OK);
    memset(k, 0, sizeof *k);
    int32_t prompt[3] = {1, 10, 11};
    gen_params p = {.max_new = max_new, .stops = stops, .n_stops = n_stops, .n_ctx = n_ctx, .n_past = 0};
    CHECKF(gen_run(s, scripted_eval, s->n_vocab, v, smp, prompt, 3, &p, on_text, NULL, k, r) == TS_OK, "%s", ts_last_error());
    sampler_free(smp);
    free(s->logits);
}

int main(void) {
    gguf_file *f;
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/tiny-llama-f32.gguf", TS_FIXTURES);
    if (gguf_open(path, &f) != TS_OK) {
        fprintf(stderr, "%s\n", ts_last_error());
        CHECK(0);
        return tu_finish();
    }
    tok_vocab *v;
    CHECKF(tok_load(f, &v) == TS_OK, "%s", ts_last_error());
    gguf_close(f);
    sink k;
    gen_result r;
    script s;

    /* plain text, then EOG: all of it arrives, EOG not rendered */
    run(v, "Hello, world", 1, NULL, 0, 100, 512, &k, &r, &s);
    CHECK(r.reason == GEN_STOP_EOG && !strcmp(k.buf, "Hello, world") && r.n_new == 13 && r.n_prompt == 3);
    CHECK(s.fed == 3 + 12); /* the EOG token is not fed back */
    free(r.ids);

    /* a stop string spread over several tokens: nothing from it is emitted */
    const char *stops[2] = {"<END>", "xyz"};
    run(v, "abc<EN<END>tail", 0, stops, 2, 100, 512, &k, &r, &s);
    CHECKF(r.reason == GEN_STOP_STRING && !strcmp(k.buf, "abc<EN"), "got '%s' reason %s", k.buf, gen_stop_reason_name(r.reason));
    free(r.ids);

    /* a held-back prefix that never completes is released at the end */
    run(v, "ab<EN", 1, stops, 2, 100, 512, &k, &r, &s);
    CHECK(r.reason == GEN_STOP_EOG && !strcmp(k.buf, "ab<EN"));
    free(r.ids);

    /* UTF-8 characters split over byte tokens are never emitted half */
    run(v, "h\xc3\xa9llo \xf0\x9f\x91\x8b!", 1, NULL, 0, 100, 512, &k, &r, &s);
    CHECK(!k.split_utf8 && !strcmp(k.buf, "h\xc3\xa9llo \xf0\x9f\x91\x8b!"));
    free(r.ids);

    /* token budget */
    run(v, "abcdefgh", 0, NULL, 0, 5, 512, &k, &r, &s);
    CHECK(r.reason == GEN_STOP_LENGTH && r.n_new == 5 && !strcmp(k.buf, "abcde"));
    free(r.ids);

    /* context: 3 prompt tokens in a context of 6 leaves room for 3 fed + 1 sampled */
    run(v, "abcdefgh", 0, NULL, 0, 100, 6, &k, &r, &s);
    CHECKF(r.reason == GEN_STOP_CTX && r.n_new == 4 && s.fed == 6, "reason %s n_new %d fed %d", gen_stop_reason_name(r.reason), r.n_new,
           s.fed);
    free(r.ids);

    /* a prompt longer than the context is refused before any work */
    sampler_params sp;
    sampler_params_default(&sp);
    sampler *smp;
    sampler_new(&sp, tok_n_vocab(v), &smp);
    int32_t prompt[4] = {1, 2, 3, 4};
    gen_params p = {.max_new = 5, .n_ctx = 3};
    memset(&s, 0, sizeof s);
    CHECK(gen_run(&s, scripted_eval, tok_n_vocab(v), v, smp, prompt, 4, &p, NULL, NULL, NULL, &r) == TS_ERR_LIMIT && s.evals == 0);
    free(r.ids);
    sampler_free(smp);
    tok_free(v);
    return tu_finish();
}
