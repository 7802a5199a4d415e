/* The public chat calls: templates by model or name, rendering with exactly
 * one BOS, and a conversation (ts_chat) that keeps its history, re-uses the
 * KV prefix of the previous turn and makes room when the context fills. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "forward/forward_internal.h"

struct ts_chat_template {
    chat_template t;
};

const char *ts_chat_role_name(ts_chat_role r) { return chat_role_name((chat_role)r); }

bool ts_chat_role_parse(const char *s, ts_chat_role *out) {
    chat_role r;
    if (!chat_role_parse(s, &r)) return false;
    *out = (ts_chat_role)r;
    return true;
}

const char *ts_chat_template_names(void) { return "chatml, llama3, llama2, mistral, mistral-legacy, gemma"; }

static ts_status wrap(chat_template *t, ts_chat_template **out) {
    ts_chat_template *w = ts_calloc(1, sizeof *w);
    if (!w) {
        chat_template_free(t);
        return TS_ERR_NOMEM;
    }
    w->t = *t;
    *out = w;
    return TS_OK;
}

ts_status ts_chat_template_from_model(const ts_model *m, ts_chat_template **out) {
    *out = NULL;
    const char *j;
    size_t len;
    if (ts_model_meta_str(m, "tokenizer.chat_template", &j, &len) != TS_OK)
        return ts_fail(TS_ERR_UNSUPPORTED, "the model has no chat template (tokenizer.chat_template); choose one by name (%s)",
                       ts_chat_template_names());
    const char *nul = memchr(j, 0, len);
    if (nul)
        return ts_fail(TS_ERR_FORMAT, "the model's chat template has a NUL byte at offset %zu of %zu; choose one by name (%s)",
                       (size_t)(nul - j), len, ts_chat_template_names());
    char *z = ts_malloc(len + 1);
    if (!z) return TS_ERR_NOMEM;
    memcpy(z, j, len);
    z[len] = 0;
    chat_template t;
    ts_status st = chat_template_detect(z, &t);
    free(z);
    if (st != TS_OK) return st;
    return wrap(&t, out);
}

ts_status ts_chat_template_from_name(const char *name, ts_chat_template **out) {
    *out = NULL;
    chat_template t;
    ts_status st = chat_template_from_name(name, &t);
    if (st != TS_OK) return st;
    return wrap(&t, out);
}

void ts_chat_template_free(ts_chat_template *t) {
    if (!t) return;
    chat_template_free(&t->t);
    free(t);
}

const char *ts_chat_template_name(const ts_chat_template *t) { return chat_template_kind_name(t->t.kind); }

static const char *piece_text(const tok_vocab *v, int32_t id) {
    size_t len;
    return id >= 0 ? tok_piece(v, id, &len) : NULL;
}

/* chat_message and ts_chat_message are the same shape: role then content */
_Static_assert(sizeof(chat_message) == sizeof(ts_chat_message), "message layouts differ");

ts_status ts_chat_render(const ts_chat_template *t, const ts_vocab *v, const ts_chat_message *msgs, size_t n, bool add_generation_prompt,
                         char **text, size_t *len) {
    return chat_render(&t->t, (const chat_message *)msgs, n, add_generation_prompt, piece_text(v, tok_bos(v)), piece_text(v, tok_eos(v)),
                       text, len);
}

ts_status ts_chat_tokenize(const ts_chat_template *t, const ts_vocab *v, const ts_chat_message *msgs, size_t n, bool add_generation_prompt,
                           int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    char *text;
    size_t len;
    ts_status st = ts_chat_render(t, v, msgs, n, add_generation_prompt, &text, &len);
    if (st != TS_OK) return st;
    /* the template writes BOS itself, or the vocabulary's rule adds it: one in total */
    st = tok_encode(v, text, len, !chat_template_emits_bos(&t->t), true, ids, n_ids);
    free(text);
    return st;
}

ts_status ts_chat_messages_parse_json(const char *json, size_t len, ts_chat_message **msgs, size_t *n) {
    *msgs = NULL;
    *n = 0;
    chat_messages m;
    ts_status st = chat_messages_parse_json(json, len, &m);
    if (st != TS_OK) return st;
    *msgs = (ts_chat_message *)m.msgs;
    *n = m.n;
    return TS_OK;
}

void ts_chat_messages_free(ts_chat_message *msgs, size_t n) {
    chat_messages m = {(chat_message *)msgs, n};
    chat_messages_free(&m);
}

/* ---- a conversation ---- */

struct ts_chat {
    ts_session *s;
    const ts_chat_template *t;
    ts_chat_message *msgs; /* (n, cap) history; each content an owned heap string */
    size_t n, cap;
};

ts_status ts_chat_new(ts_session *s, const ts_chat_template *t, ts_chat **out) {
    *out = NULL;
    if (!s->model->vocab) return ts_fail(TS_ERR_UNSUPPORTED, "chat: the model file has no tokenizer");
    if (!t) return ts_fail(TS_ERR_ARG, "chat: no template");
    ts_chat *c = ts_calloc(1, sizeof *c);
    if (!c) return TS_ERR_NOMEM;
    c->s = s;
    c->t = t;
    *out = c;
    return TS_OK;
}

void ts_chat_free(ts_chat *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free((char *)c->msgs[i].content);
    free(c->msgs);
    free(c);
}

/* Takes ownership of content (heap). */
static ts_status push(ts_chat *c, ts_chat_role role, char *content) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        ts_chat_message *m = ts_realloc(c->msgs, cap * sizeof *m);
        if (!m) {
            free(content);
            return TS_ERR_NOMEM;
        }
        c->msgs = m;
        c->cap = cap;
    }
    c->msgs[c->n].role = role;
    c->msgs[c->n].content = content;
    c->n++;
    return TS_OK;
}

ts_status ts_chat_add(ts_chat *c, ts_chat_role role, const char *content) {
    if (role < TS_ROLE_SYSTEM || role > TS_ROLE_ASSISTANT) return ts_fail(TS_ERR_ARG, "chat: unknown role %d", (int)role);
    size_t len = strlen(content);
    if (!ts_utf8_valid(content, len)) return ts_fail(TS_ERR_ARG, "chat: the message is not valid UTF-8");
    char *copy = ts_malloc(len + 1);
    if (!copy) return TS_ERR_NOMEM;
    memcpy(copy, content, len + 1);
    return push(c, role, copy);
}

/* Drops the oldest message after a leading system message. */
static void drop_oldest(ts_chat *c) {
    size_t first = c->n && c->msgs[0].role == TS_ROLE_SYSTEM ? 1 : 0;
    free((char *)c->msgs[first].content);
    memmove(c->msgs + first, c->msgs + first + 1, (c->n - first - 1) * sizeof *c->msgs);
    c->n--;
}

typedef struct reply_cap {
    char *buf;
    size_t n, cap;
    ts_text_fn user_fn;
    void *user;
} reply_cap;

/* Keeps what the user saw, and passes it on. */
static bool capture_text(void *u, const char *t, size_t len) {
    reply_cap *r = u;
    if (r->n + len + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->n + len + 1) cap *= 2;
        char *b = realloc(r->buf, cap);
        if (!b) return false;
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->n, t, len);
    r->n += len;
    return r->user_fn ? r->user_fn(r->user, t, len) : true;
}

ts_status ts_chat_reply(ts_chat *c, const ts_gen_params *p, ts_text_fn on_text, ts_token_fn on_token, void *user, ts_chat_turn *out) {
    memset(out, 0, sizeof *out);
    ts_session *s = c->s;
    const ts_vocab *v = s->model->vocab;
    if (!c->n) return ts_fail(TS_ERR_ARG, "chat: nothing to reply to");
    /* room for the reply: the tokens asked for, but at most a quarter of the
     * context, so a long max_new does not push out every earlier turn */
    int64_t room = p->max_new < s->n_ctx / 4 ? p->max_new : s->n_ctx / 4;
    if (room < 1) room = 1;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    for (;;) {
        ts_status st = ts_chat_tokenize(c->t, v, c->msgs, c->n, true, &ids, &n_ids);
        if (st != TS_OK) return st;
        if ((int64_t)n_ids + room <= s->n_ctx) break;
        size_t keep = c->n && c->msgs[0].role == TS_ROLE_SYSTEM ? 2 : 1; /* the system message and the newest one */
        if (c->n <= keep) {
            free(ids);
            return ts_fail(TS_ERR_LIMIT, "chat: the conversation's last message alone takes %zu of the %d-token context", n_ids, s->n_ctx);
        }
        free(ids);
        drop_oldest(c);
        /* a template may insist on alternating roles: drop an assistant turn left first */
        while (c->n > keep && c->msgs[keep - 1].role == TS_ROLE_ASSISTANT) drop_oldest(c), out->dropped++;
        out->dropped++;
    }
    reply_cap rc = {.user_fn = on_text, .user = user};
    ts_gen_params gp = *p;
    gp.reuse_prefix = true;
    ts_status st = ts_session_generate(s, ids, (int32_t)n_ids, &gp, capture_text, on_token, &rc, &out->gen);
    free(ids);
    if (st != TS_OK) {
        free(rc.buf);
        return st;
    }
    /* the history holds what the user saw: nothing from a stop string on,
     * and valid UTF-8 whatever the model produced */
    char *clean = ts_utf8_sanitize(rc.buf ? rc.buf : "", rc.n);
    free(rc.buf);
    if (!clean) return TS_ERR_NOMEM;
    return push(c, TS_ROLE_ASSISTANT, clean);
}

void ts_chat_turn_free(ts_chat_turn *t) {
    if (!t) return;
    free(t->gen.ids);
    t->gen.ids = NULL;
}

size_t ts_chat_n_messages(const ts_chat *c) { return c->n; }
const ts_chat_message *ts_chat_messages(const ts_chat *c) { return c->msgs; }
