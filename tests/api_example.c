/* The public API in one page (docs/API.md shows it): load a model, tokenize,
 * generate greedily with streamed text. Built against include/ only. Usage:
 * api_example MODEL.gguf "prompt" [max_new] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turbospark.h"

static bool print_text(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    return true; /* false would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: %s MODEL.gguf PROMPT [MAX_NEW]\n", argv[0]), 2;
    ts_backend *be = NULL;
    ts_model *m = NULL;
    ts_session *s = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    ts_gen_result r = {0};
    ts_model_opts mo = ts_model_opts_default();
    ts_gen_params gp = ts_gen_params_default();
    gp.max_new = argc > 3 ? atoi(argv[3]) : 16;
    gp.sampler.temperature = 0; /* greedy */
    ts_status st;
    if ((st = ts_backend_new(NULL, &be)) == TS_OK && (mo.backend = be, st = ts_model_load(argv[1], &mo, &m)) == TS_OK &&
        (st = ts_session_new(m, NULL, &s)) == TS_OK &&
        (st = ts_tokenize(ts_model_vocab(m), argv[2], strlen(argv[2]), true, true, &ids, &n)) == TS_OK &&
        (st = ts_session_generate(s, ids, (int32_t)n, &gp, print_text, NULL, NULL, &r)) == TS_OK)
        printf("\n[%d prompt tokens, %d new, stop: %s]\n", r.n_prompt, r.n_new, ts_stop_reason_name(r.reason));
    else
        fprintf(stderr, "api_example: %s\n", ts_last_error());
    ts_free(r.ids);
    ts_free(ids);
    ts_session_free(s); /* sessions, then the model, then the backend */
    ts_model_free(m);
    ts_backend_free(be);
    return st == TS_OK ? 0 : 1;
}
