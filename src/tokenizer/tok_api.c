/* The public tokenizer calls (include/turbospark.h): thin names over the
 * tokenizer module, plus loading a vocabulary on its own. */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

ts_status ts_vocab_load(const char *path, ts_vocab **out) {
    *out = NULL;
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    if (st != TS_OK) return st;
    st = tok_load(f, out);
    /* tok_load's messages name the file already; prefix only those that do not */
    if (st != TS_OK && strncmp(ts_last_error(), path, strlen(path)) != 0) ts_error_prefix("%s", path);
    gguf_close(f); /* the vocabulary keeps copies of what it needs */
    return st;
}

void ts_vocab_free(ts_vocab *v) { tok_free(v); }
int32_t ts_vocab_n_tokens(const ts_vocab *v) { return tok_n_vocab(v); }
const char *ts_vocab_kind(const ts_vocab *v) { return tok_kind_name(v); }
const char *ts_vocab_pre(const ts_vocab *v) { return tok_pre_name(v); }
int32_t ts_token_bos(const ts_vocab *v) { return tok_bos(v); }
int32_t ts_token_eos(const ts_vocab *v) { return tok_eos(v); }
bool ts_token_is_eog(const ts_vocab *v, int32_t id) { return tok_is_eog(v, id); }
const char *ts_token_piece(const ts_vocab *v, int32_t id, size_t *len) { return tok_piece(v, id, len); }

ts_status ts_tokenize(const ts_vocab *v, const char *text, size_t len, bool add_special, bool parse_special, int32_t **ids, size_t *n) {
    return tok_encode(v, text, len, add_special, parse_special, ids, n);
}

ts_status ts_detokenize(const ts_vocab *v, const int32_t *ids, size_t n, unsigned flags, char **text, size_t *len) {
    return tok_decode(v, ids, n, flags, text, len);
}

struct ts_detok {
    tok_stream s;
};

ts_status ts_detok_new(const ts_vocab *v, unsigned flags, ts_detok **out) {
    *out = NULL;
    ts_detok *d = ts_calloc(1, sizeof *d);
    if (!d) return TS_ERR_NOMEM;
    ts_status st = tok_stream_init(&d->s, v, flags);
    if (st != TS_OK) {
        free(d);
        return st;
    }
    *out = d;
    return TS_OK;
}

const char *ts_detok_push(ts_detok *d, int32_t id, size_t *len) { return tok_stream_push(&d->s, id, len); }
const char *ts_detok_flush(ts_detok *d, size_t *len) { return tok_stream_flush(&d->s, len); }

void ts_detok_free(ts_detok *d) {
    if (!d) return;
    tok_stream_free(&d->s);
    free(d);
}
