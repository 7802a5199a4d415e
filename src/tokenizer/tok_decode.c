/* Token ids -> bytes, the streaming detokenizer and the vocabulary getters.
 * Every token's bytes were computed at load (tok_load.c build_decoded), so
 * decoding is a lookup and a copy. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static bool in_range(const tok_vocab *v, int32_t id) { return v && id >= 0 && (uint32_t)id < v->n_vocab; }

int32_t tok_n_vocab(const tok_vocab *v) { return (int32_t)v->n_vocab; }
tok_kind tok_get_kind(const tok_vocab *v) { return v->kind; }
const char *tok_kind_name(const tok_vocab *v) { return v->model; }
const char *tok_pre_name(const tok_vocab *v) { return v->pre; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int32_t tok_eot(const tok_vocab *v) { return v->eot; }
int32_t tok_unk(const tok_vocab *v) { return v->unk; }
int32_t tok_pad(const tok_vocab *v) { return v->pad; }
bool tok_add_bos(const tok_vocab *v) { return v->add_bos; }
bool tok_add_eos(const tok_vocab *v) { return v->add_eos; }
bool tok_add_space_prefix(const tok_vocab *v) { return v->add_space_prefix; }
bool tok_is_eog(const tok_vocab *v, int32_t id) { return in_range(v, id) && (v->attr[id] & TOK_ATTR_EOG); }
bool tok_is_control(const tok_vocab *v, int32_t id) { return in_range(v, id) && (v->attr[id] & TOK_ATTR_CONTROL); }
uint32_t tok_attr(const tok_vocab *v, int32_t id) { return in_range(v, id) ? v->attr[id] : 0; }
float tok_score(const tok_vocab *v, int32_t id) { return in_range(v, id) ? v->score[id] : 0.0f; }
size_t tok_max_token_bytes(const tok_vocab *v) { return v->max_dec; }

int32_t tok_lookup(const tok_vocab *v, const char *piece, size_t len) {
    int64_t k = tok_st_find(&v->st, piece, len);
    return (k >= 0 && k < v->n_vocab) ? (int32_t)k : TOK_NULL;
}

const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len) {
    if (!in_range(v, id)) {
        *len = 0;
        return NULL;
    }
    return tok_st_str(&v->st, (uint32_t)id, len);
}

const char *tok_token_bytes(const tok_vocab *v, int32_t id, size_t *len) {
    if (!in_range(v, id)) {
        *len = 0;
        return NULL;
    }
    *len = v->dec_off[id + 1] - v->dec_off[id];
    return v->dec + v->dec_off[id];
}

size_t tok_decode_token(const tok_vocab *v, int32_t id, char *buf, size_t cap) {
    size_t n;
    const char *p = tok_token_bytes(v, id, &n);
    if (p && buf && cap) memcpy(buf, p, n < cap ? n : cap);
    return n;
}

/* The bytes of id under flags (special tokens render their piece). */
static const char *render(const tok_vocab *v, int32_t id, unsigned flags, size_t *n) {
    if ((flags & TOK_DECODE_SPECIAL) && in_range(v, id) && (v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)))
        return tok_piece(v, id, n);
    return tok_token_bytes(v, id, n);
}

ts_status tok_decode(const tok_vocab *v, const int32_t *ids, size_t n, unsigned flags, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        render(v, ids[i], flags, &l);
        total += l;
    }
    char *o = ts_malloc(total + 1);
    if (!o) return ts_fail(TS_ERR_NOMEM, "tok_decode: out of memory");
    size_t w = 0;
    bool strip = (flags & TOK_DECODE_STRIP_SPACE) && v->add_space_prefix;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *p = render(v, ids[i], flags, &l);
        if (!l) continue;
        if (strip) {
            strip = false;
            if (p[0] == ' ') {
                p++;
                l--;
            }
        }
        memcpy(o + w, p, l);
        w += l;
    }
    o[w] = 0;
    *out = o;
    *len = w;
    return TS_OK;
}

/* ---- streaming ---- */

ts_status tok_stream_init(tok_stream *s, const tok_vocab *v, unsigned flags) {
    memset(s, 0, sizeof *s);
    s->v = v;
    s->flags = flags;
    s->cap = v->max_dec + 8;
    s->buf = ts_malloc(s->cap);
    if (!s->buf) return ts_fail(TS_ERR_NOMEM, "tok_stream_init: out of memory");
    return TS_OK;
}

void tok_stream_free(tok_stream *s) {
    free(s->buf);
    s->buf = NULL;
}

/* How many trailing bytes of b[0..n) are the start of a UTF-8 character that
 * more bytes could still complete (0 if none). */
static size_t incomplete_tail(const unsigned char *b, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned c = b[n - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation: look further back */
        size_t need = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        if (need <= k) return 0; /* ASCII, invalid lead, or already complete */
        /* the bytes present must be a valid prefix */
        if (k >= 2) {
            unsigned c1 = b[n - k + 1];
            if (c == 0xE0 && c1 < 0xA0) return 0;
            if (c == 0xED && c1 >= 0xA0) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 >= 0x90) return 0;
        }
        return k;
    }
    return 0;
}

const char *tok_stream_push(tok_stream *s, int32_t id, size_t *len) {
    size_t l;
    const char *p = render(s->v, id, s->flags, &l);
    if (l && !s->started) {
        s->started = true;
        if ((s->flags & TOK_DECODE_STRIP_SPACE) && s->v->add_space_prefix && p[0] == ' ') {
            p++;
            l--;
        }
    }
    memcpy(s->buf, s->tail, s->held);
    if (l > s->cap - s->held) l = s->cap - s->held; /* cannot happen: cap covers the longest token */
    if (l) memcpy(s->buf + s->held, p, l);
    size_t total = s->held + l;
    size_t keep = incomplete_tail((const unsigned char *)s->buf, total);
    memcpy(s->tail, s->buf + total - keep, keep);
    s->held = keep;
    *len = total - keep;
    return s->buf;
}

const char *tok_stream_flush(tok_stream *s, size_t *len) {
    memcpy(s->buf, s->tail, s->held);
    *len = s->held;
    s->held = 0;
    return s->buf;
}
