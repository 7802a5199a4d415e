/* Tokenizers built from a GGUF file's `tokenizer.ggml.*` metadata.
 *
 * Two families, chosen by `tokenizer.ggml.model`:
 *   "llama"  SentencePiece-style (SPM): spaces become U+2581, a space is put in
 *            front of the text (add_space_prefix), adjacent symbols are merged
 *            best-score-first, and characters with no piece fall back to the
 *            <0xNN> byte tokens.
 *   "gpt2"   byte-level BPE: the text is split by the pre-tokenizer named in
 *            `tokenizer.ggml.pre` (PCRE2 regexes), each byte is mapped to its
 *            GPT-2 "byte unicode" character and the pieces are merged by the
 *            ranks in `tokenizer.ggml.merges`.
 * Behaviour follows llama.cpp's llama-vocab.cpp (the reference the fixture
 * tests were generated against); docs/TOKENIZER.md lists the details and the
 * few deliberate differences (invalid UTF-8).
 *
 * A tok_vocab is immutable after tok_load and owns copies of everything it
 * needs (the gguf_file may be closed). All functions taking a const tok_vocab
 * are safe to call from several threads at once. */
#ifndef TS_TOKENIZER_H
#define TS_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "gguf/gguf.h"

typedef struct ts_vocab tok_vocab; /* the public ts_vocab */

typedef enum tok_kind {
    TOK_KIND_SPM = 0, /* tokenizer.ggml.model = "llama" */
    TOK_KIND_BPE = 1, /* tokenizer.ggml.model = "gpt2" */
} tok_kind;

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* Token attribute bits (tok_attr). A token has one of the type bits, plus the
 * strip bits some vocabularies set, plus TOK_ATTR_EOG for end-of-generation. */
enum {
    TOK_ATTR_UNKNOWN = 1u << 0,
    TOK_ATTR_UNUSED = 1u << 1,
    TOK_ATTR_NORMAL = 1u << 2,
    TOK_ATTR_CONTROL = 1u << 3,
    TOK_ATTR_USER_DEFINED = 1u << 4,
    TOK_ATTR_BYTE = 1u << 5,
    TOK_ATTR_LSTRIP = 1u << 7, /* matched special token eats whitespace on its left */
    TOK_ATTR_RSTRIP = 1u << 8, /* ... and on its right */
    TOK_ATTR_EOG = 1u << 16,   /* ends generation (tok_is_eog) */
};

#define TOK_NULL (-1) /* "no such token" for the id getters */

/* Builds the tokenizer from f's metadata. Errors (TS_ERR_FORMAT for broken or
 * inconsistent metadata, TS_ERR_UNSUPPORTED for a tokenizer model or
 * pre-tokenizer we do not implement, naming it) leave *out NULL. */
ts_status tok_load(const gguf_file *f, tok_vocab **out);
void tok_free(tok_vocab *v);

/* Text -> token ids. text is any bytes (NUL included; invalid UTF-8 gives a
 * defined result, see docs/TOKENIZER.md). add_special: put BOS in front (and
 * EOS at the end) as the vocabulary's add_bos_token / add_eos_token say.
 * parse_special: control tokens written in the text (e.g. "<|im_start|>")
 * become their ids; user-defined tokens are always matched whole, as in
 * llama.cpp. *ids is malloc'd (free() it; NULL when *n is 0). */
ts_status tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t **ids, size_t *n);

/* ---- vocabulary facts ---- */
int32_t tok_n_vocab(const tok_vocab *v);
tok_kind tok_get_kind(const tok_vocab *v);
const char *tok_kind_name(const tok_vocab *v); /* "llama" or "gpt2" (the GGUF model name) */
const char *tok_pre_name(const tok_vocab *v);  /* pre-tokenizer name in use ("default" if absent) */
int32_t tok_bos(const tok_vocab *v);           /* TOK_NULL when the vocabulary has none */
int32_t tok_eos(const tok_vocab *v);
int32_t tok_eot(const tok_vocab *v);
int32_t tok_unk(const tok_vocab *v);
int32_t tok_pad(const tok_vocab *v);
bool tok_add_bos(const tok_vocab *v); /* what add_special does */
bool tok_add_eos(const tok_vocab *v);
bool tok_add_space_prefix(const tok_vocab *v);
/* End of generation: eos, eot, eom and the tokens llama.cpp recognises by
 * text (<|im_end|>, <|eot_id|>, <end_of_turn>, <|endoftext|>, ...). False for
 * ids out of range. */
bool tok_is_eog(const tok_vocab *v, int32_t id);
bool tok_is_control(const tok_vocab *v, int32_t id);
uint32_t tok_attr(const tok_vocab *v, int32_t id); /* TOK_ATTR_* bits; 0 out of range */
float tok_score(const tok_vocab *v, int32_t id);
/* Exact piece -> id, TOK_NULL if no token has exactly these bytes. */
int32_t tok_lookup(const tok_vocab *v, const char *piece, size_t len);
/* The raw vocabulary string (e.g. "Ġworld", "▁the", "<0x0A>"), NUL-terminated
 * (a hostile file may put NULs inside: use *len); NULL out of range. */
const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len);
/* Longest decoded token, in bytes (sizes buffers for tok_decode_token). */
size_t tok_max_token_bytes(const tok_vocab *v);

/* ---- decoding ---- */
/* The bytes one token stands for in generated text: byte-level BPE pieces are
 * un-mapped to bytes, SPM "▁" becomes a space, <0xNN> becomes the byte,
 * control/unknown/unused tokens give nothing. Copies min(len, cap) bytes to
 * buf and returns the full length (so cap 0 asks for the size). */
size_t tok_decode_token(const tok_vocab *v, int32_t id, char *buf, size_t cap);
/* Same bytes without copying: a pointer into the vocabulary (valid for its
 * life); NULL with *len 0 for ids out of range. */
const char *tok_token_bytes(const tok_vocab *v, int32_t id, size_t *len);

enum {
    TOK_DECODE_SPECIAL = 1,     /* render control/unknown tokens as their text */
    TOK_DECODE_STRIP_SPACE = 2, /* drop the one leading space add_space_prefix put before the text */
};
/* A whole sequence -> bytes (malloc'd, NUL-terminated, *len excludes the
 * NUL). Exact concatenation of the token bytes: no space clean-up. */
ts_status tok_decode(const tok_vocab *v, const int32_t *ids, size_t n, unsigned flags, char **out, size_t *len);

/* Streaming detokenizer for generation: tok_stream_push returns the bytes that
 * are ready after one more token. A UTF-8 character split across tokens is
 * held back until it is complete, so the caller never sees half a character;
 * bytes that can never become valid UTF-8 are passed through unchanged.
 * Concatenating every push and the final flush gives exactly the
 * concatenation of the tokens' bytes. No allocation after init. */
typedef struct tok_stream {
    const tok_vocab *v;
    unsigned flags; /* TOK_DECODE_* */
    char *buf;      /* (cap) bytes: output of the last call */
    size_t cap;     /* longest token + 8 */
    char tail[4];   /* (held) bytes of an incomplete character kept from the last push */
    size_t held;    /* 0..3 */
    bool started;   /* any non-empty token seen (for TOK_DECODE_STRIP_SPACE) */
} tok_stream;

ts_status tok_stream_init(tok_stream *s, const tok_vocab *v, unsigned flags);
/* Returns a pointer to *len ready bytes, valid until the next call. Ids out of
 * range give nothing. */
const char *tok_stream_push(tok_stream *s, int32_t id, size_t *len);
/* Emits whatever is still held (an incomplete character at the very end). */
const char *tok_stream_flush(tok_stream *s, size_t *len);
void tok_stream_free(tok_stream *s);

/* ---- internals exposed for tests ---- */
/* Splits text with the named pre-tokenizer; *offs gets the (n+1) byte offsets
 * of the n pieces (malloc'd). Unknown names fail with TS_ERR_UNSUPPORTED. */
ts_status tok_pretokenize(const char *pre_name, const char *text, size_t len, size_t **offs, size_t *n);

#endif
