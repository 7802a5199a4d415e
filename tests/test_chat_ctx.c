/* A chat whose context fills keeps its session (issue 9): ts_chat drops the
 * oldest turns after the system message, says how many (ts_chat_turn.dropped)
 * and goes on within the context, the system message kept. Public API only. */
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#include "turbospark.h"

static bool no_text(void *u, const char *t, size_t n) {
    (void)u, (void)t, (void)n;
    return true;
}

int main(void) {
    ts_model *m = NULL;
    ts_model_opts mo = ts_model_opts_default();
    CHECK(ts_model_load(TS_FIXTURES "/ref/tiny-llama-f32.gguf", &mo, &m) == TS_OK);
    ts_chat_template *t = NULL;
    CHECK(ts_chat_template_from_name("chatml", &t) == TS_OK);
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = 256;
    ts_session *s = NULL;
    CHECK(m && ts_session_new(m, &so, &s) == TS_OK);
    ts_chat *c = NULL;
    CHECK(s && t && ts_chat_new(s, t, &c) == TS_OK);
    if (!c) return tu_finish();
    CHECK(ts_chat_add(c, TS_ROLE_SYSTEM, "Be brief.") == TS_OK);
    ts_gen_params gp = ts_gen_params_default();
    gp.max_new = 12;
    gp.sampler.temperature = 0;
    int dropped = 0, turns_ok = 0;
    for (int i = 0; i < 10; i++) {
        char msg[128];
        snprintf(msg, sizeof msg, "Question %d?", i);
        CHECK(ts_chat_add(c, TS_ROLE_USER, msg) == TS_OK);
        ts_chat_turn turn;
        ts_status st = ts_chat_reply(c, &gp, no_text, NULL, NULL, &turn);
        CHECKF(st == TS_OK, "turn %d: %s", i, ts_last_error());
        if (st != TS_OK) break;
        turns_ok++;
        dropped += turn.dropped;
        CHECK(ts_session_n_past(s) <= so.n_ctx);
        /* the system message always stays first */
        CHECK(ts_chat_n_messages(c) >= 3 && ts_chat_messages(c)[0].role == TS_ROLE_SYSTEM);
        ts_chat_turn_free(&turn);
    }
    CHECKF(turns_ok == 10, "%d of 10 turns", turns_ok);
    CHECKF(dropped > 0, "a 256-position context never filled over 10 turns (dropped %d)", dropped);
    printf("10 turns in a 256-position context: %d messages dropped, %zu kept\n", dropped, ts_chat_n_messages(c));
    ts_chat_free(c);
    ts_chat_template_free(t);
    ts_session_free(s);
    ts_model_free(m);
    return tu_finish();
}
