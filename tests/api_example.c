/* The public API in one page (docs/API.md): load a model, chat two turns
 * (the second re-uses the first's KV prefix), stream the replies' text.
 * Built against include/ only. Usage: api_example MODEL.gguf [TEMPLATE] */
#include <stdio.h>

#include "turbospark.h"

static bool print_text(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true; /* false stops the reply within one token */
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: %s MODEL.gguf [TEMPLATE]\n", argv[0]), 2;
    const char *turns[2] = {"Name a colour.", "And another one?"};
    ts_backend *be = NULL;
    ts_model *m = NULL;
    ts_session *s = NULL;
    ts_chat_template *t = NULL;
    ts_chat *c = NULL;
    ts_model_opts mo = ts_model_opts_default();
    ts_gen_params gp = ts_gen_params_default();
    gp.max_new = 16;
    gp.sampler.temperature = 0; /* greedy */
    ts_status st = ts_backend_new(NULL, &be);
    if (st == TS_OK) mo.backend = be, st = ts_model_load(argv[1], &mo, &m);
    if (st == TS_OK) st = ts_session_new(m, NULL, &s);
    if (st == TS_OK) st = argc > 2 ? ts_chat_template_from_name(argv[2], &t) : ts_chat_template_from_model(m, &t);
    if (st == TS_OK) st = ts_chat_new(s, t, &c);
    for (int i = 0; i < 2 && st == TS_OK; i++) {
        ts_chat_turn turn;
        printf("> %s\n", turns[i]);
        if ((st = ts_chat_add(c, TS_ROLE_USER, turns[i])) != TS_OK) break;
        if ((st = ts_chat_reply(c, &gp, print_text, NULL, NULL, &turn)) != TS_OK) break;
        printf("\n[prompt %d tokens, %d cached, %d new]\n", turn.gen.n_prompt, turn.gen.n_cached, turn.gen.n_new);
        ts_chat_turn_free(&turn);
    }
    if (st != TS_OK) fprintf(stderr, "api_example: %s\n", ts_last_error());
    ts_chat_free(c); /* the chat, the session, the model, then the backend */
    ts_chat_template_free(t);
    ts_session_free(s);
    ts_model_free(m);
    ts_backend_free(be);
    return st == TS_OK ? 0 : 1;
}
