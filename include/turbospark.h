/* turbospark: the public C API. docs/API.md walks through it.
 *
 * Ownership, in one picture:
 *
 *   ts_backend  made once by the caller (cpu, cuda). Owns device memory:
 *               weights, KV caches, scratch, expert slots, staging buffers.
 *   ts_model    loaded onto a backend. Immutable after load, shared by any
 *               number of sessions on any threads. Owns its vocabulary and,
 *               for MoE models, the expert cache (shared on purpose: its
 *               point is memory; guarded by one mutex, docs/DESIGN.md).
 *   ts_session  one conversation. Owns everything mutable: KV cache, scratch,
 *               sampler, timings, instrument state and captures. Used by one
 *               thread at a time; different sessions run concurrently.
 *
 * Free in reverse order: sessions, then the model, then the backend.
 *
 * Every call that can fail returns a ts_status and leaves a one-line message
 * for ts_last_error() (per thread). The library never exits, never prints to
 * stdout and never reads the environment: the command line maps its
 * TURBOSPARK_* variables onto the option structs below.
 *
 * Memory the library hands out (token arrays, text) is freed with ts_free().
 * Pointers returned as const belong to the object they came from. */
#ifndef TURBOSPARK_H
#define TURBOSPARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TS_VERSION "0.2.0"

/* ======================================================================
 * Status and errors
 * ====================================================================== */

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_IO,          /* open/read/map failed */
    TS_ERR_FORMAT,      /* the file or input is malformed */
    TS_ERR_UNSUPPORTED, /* well-formed, but not something we run */
    TS_ERR_ARG,         /* a caller-supplied value is out of range */
    TS_ERR_NOMEM,       /* allocation failed (host or device) */
    TS_ERR_LIMIT,       /* a size limit (context, budget, input cap) would be exceeded */
    TS_ERR_INTERNAL,
    TS_ERR_DEVICE,      /* the accelerator failed (driver, kernel launch, lost device) */
    TS_ERR_ABORTED,     /* a callback asked to stop */
} ts_status;

/* The message of the last failure on this thread ("" if none). */
const char *ts_last_error(void);
const char *ts_status_name(ts_status st);

/* Frees memory the library allocated for the caller (NULL is fine). */
void ts_free(void *p);

/* ======================================================================
 * Small helpers the command line and the server share with the library
 * ====================================================================== */

/* "1.5 GiB" (decimals 1), "12.00 MiB" (decimals 2), "512 B": binary units
 * (KiB .. TiB), whole bytes below 1 KiB. Returns buf. */
const char *ts_fmt_bytes(uint64_t bytes, int decimals, char *buf, size_t n);
/* Parses "8G", "1.5GiB", "512M", "4096" (binary units); TS_ERR_ARG on junk. */
ts_status ts_parse_bytes(const char *s, uint64_t *out);
/* True when s[0..n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool ts_utf8_valid(const char *s, size_t n);
/* A copy of s[0..n) with every invalid UTF-8 sequence (and NUL) replaced by
 * U+FFFD; NUL-terminated, ts_free() it. */
char *ts_utf8_sanitize(const char *s, size_t n);
/* Reads a whole regular file, or stdin for "-", into a NUL-terminated buffer
 * (ts_free). Refuses FIFOs, devices and directories without opening them for
 * reading, and anything over max_bytes (TS_ERR_LIMIT naming the cap;
 * 0 = TS_READ_DEFAULT_CAP). */
#define TS_READ_DEFAULT_CAP ((uint64_t)256 << 20)
ts_status ts_read_file(const char *path, uint64_t max_bytes, char **data, size_t *len);
/* Monotonic clock, seconds. */
double ts_now(void);

/* RNG: xoshiro256** seeded through splitmix64 (docs/SAMPLING.md): the
 * sampler's stream, exposed for seeded inputs (bench). */
typedef struct ts_rng {
    uint64_t s[4]; /* never all zero */
} ts_rng;
void ts_rng_seed(ts_rng *r, uint64_t seed);
uint64_t ts_rng_next(ts_rng *r);

/* ======================================================================
 * Vocabulary and tokenizer
 * ====================================================================== */

typedef struct ts_vocab ts_vocab;

/* A vocabulary on its own (a vocab-only GGUF, or any model file). */
ts_status ts_vocab_load(const char *path, ts_vocab **out);
void ts_vocab_free(ts_vocab *v);

int32_t ts_vocab_n_tokens(const ts_vocab *v);
const char *ts_vocab_kind(const ts_vocab *v);  /* "llama" (SentencePiece) or "gpt2" (byte-level BPE) */
const char *ts_vocab_pre(const ts_vocab *v);   /* pre-tokenizer name ("default" if absent) */
int32_t ts_token_bos(const ts_vocab *v);       /* -1 when the vocabulary has none */
int32_t ts_token_eos(const ts_vocab *v);
bool ts_token_is_eog(const ts_vocab *v, int32_t id);
/* The raw vocabulary string ("Ġworld", "▁the", "<0x0A>"); NULL out of range. */
const char *ts_token_piece(const ts_vocab *v, int32_t id, size_t *len);

/* Text -> ids (ts_free *ids). add_special: BOS (and EOS) as the vocabulary
 * says; parse_special: control tokens written in the text become their ids. */
ts_status ts_tokenize(const ts_vocab *v, const char *text, size_t len, bool add_special, bool parse_special, int32_t **ids,
                      size_t *n);

enum {
    TS_DETOK_SPECIAL = 1,     /* render control/unknown tokens as their text */
    TS_DETOK_STRIP_SPACE = 2, /* drop the one leading space SentencePiece put before the text */
};
/* Ids -> bytes (ts_free *text; NUL-terminated, *len excludes it). */
ts_status ts_detokenize(const ts_vocab *v, const int32_t *ids, size_t n, unsigned flags, char **text, size_t *len);

/* Streaming detokenizer: never returns half a UTF-8 character. */
typedef struct ts_detok ts_detok;
ts_status ts_detok_new(const ts_vocab *v, unsigned flags, ts_detok **out);
/* Bytes ready after one more token: valid until the next call. */
const char *ts_detok_push(ts_detok *d, int32_t id, size_t *len);
/* Whatever is still held back at the end. */
const char *ts_detok_flush(ts_detok *d, size_t *len);
void ts_detok_free(ts_detok *d);

/* ======================================================================
 * Inspect
 * ====================================================================== */

typedef struct ts_inspect_opts {
    bool tensors; /* add the tensor table: name, type, shape, absolute file offset, bytes */
    bool json;    /* JSON (every metadata key; arrays as their type and length) instead of text */
} ts_inspect_opts;

/* Describes the GGUF file at path: architecture, key hyperparameters,
 * tokenizer, tensor count, bytes per tensor type, parameters. The whole
 * description comes back as one NUL-terminated string (*len excludes the
 * NUL; ts_free *text), so a caller prints all of it or nothing. o may be
 * NULL (text, no tensor table).
 * What the file supplies is untrusted. Text: control characters (C0, DEL,
 * C1) and bytes that are not UTF-8 are shown escaped (\x1b, \u009b) and a
 * backslash as \\, so a hostile name cannot drive a terminal. JSON: always
 * valid UTF-8; invalid bytes (and NUL) become U+FFFD.
 * Refuses what the GGUF reader refuses: FIFOs, devices and directories
 * (before opening them), truncated or malformed files. */
ts_status ts_inspect(const char *path, const ts_inspect_opts *o, char **text, size_t *len);

/* ======================================================================
 * Analyze
 * ====================================================================== */

/* The analyzers turn instrument captures (docs/INSTRUMENTS.md) into
 * decisions. Each call checks everything before it builds anything: its
 * options, that html would not overwrite a capture, then every capture. The
 * text report comes back as one NUL-terminated string (*len excludes the
 * NUL; ts_free *text), so a caller prints all of it or nothing. With html
 * set, the same tables plus charts go to that file, written atomically
 * (temporary file renamed into place); on any failure no text is handed out
 * and nothing is left at html.
 * Every call refuses (one message naming the file and the problem):
 *   - a capture that is not a regular file (a FIFO is refused before it is
 *     opened) or is over max_input bytes (TS_ERR_LIMIT);
 *   - a capture that is malformed, inconsistent or degenerate (TS_ERR_FORMAT):
 *     it is never analysed;
 *   - an html path that is one of the captures, by path or by device and
 *     inode (TS_ERR_ARG), or a directory. */

#define TS_ANALYZE_MAX_LIST 16 /* values in a slots or window list */

typedef enum ts_analyze_policy {
    TS_ANALYZE_LFU = 0,
    TS_ANALYZE_LRU = 1,
    TS_ANALYZE_BELADY = 2, /* evicts the expert used again farthest ahead: the ceiling for any policy */
} ts_analyze_policy;

/* Router concentration per layer (fewest experts covering 95%/99% of the
 * routed picks). The captures of a group are summed and must agree in shape;
 * with a second group, each layer of A is compared with B. */
typedef struct ts_analyze_router_opts {
    const char *const *a; /* (n_a) capture paths, n_a >= 1 */
    size_t n_a;
    const char *const *b; /* (n_b) capture paths; n_b = 0: one group */
    size_t n_b;
    const char *html;     /* page to write; NULL: none */
    uint64_t max_input;   /* bytes per capture file; 0 = TS_READ_DEFAULT_CAP */
} ts_analyze_router_opts;
ts_status ts_analyze_router(const ts_analyze_router_opts *o, char **text, size_t *len);

/* Expert-cache replay of a trace capture through the engine's own policy
 * code, per policy and slot count, and, when the capture carries pilot
 * predictions, their recall and prefetch coverage. Also refuses a capture
 * without a trace, a slot count outside [top_k, 2^20], a policy out of range,
 * and a prediction that names an expert twice in one pass (it would count
 * one prefetch as two). */
typedef struct ts_analyze_cache_opts {
    const char *trace;                 /* capture path (with a trace) */
    const int32_t *slots;              /* (n_slots) slots per layer; n_slots = 0: 8, 16, 32 */
    size_t n_slots;                    /* <= TS_ANALYZE_MAX_LIST */
    const ts_analyze_policy *policies; /* (n_policies) in report order; n_policies = 0: lfu, lru, belady */
    size_t n_policies;                 /* <= 3 */
    uint64_t skip;                     /* first passes warm the cache but are not counted */
    const char *html;                  /* page to write; NULL: none */
    uint64_t max_input;                /* bytes per capture file; 0 = TS_READ_DEFAULT_CAP */
} ts_analyze_cache_opts;
ts_status ts_analyze_cache(const ts_analyze_cache_opts *o, char **text, size_t *len);

/* Distinct experts per layer over windows of M consecutive passes (the
 * expert reads to verify M speculative tokens). Also refuses a capture
 * without a trace and M outside [1, 2^20]. */
typedef struct ts_analyze_window_opts {
    const char *trace;   /* capture path (with a trace) */
    const int32_t *m;    /* (n_m) window lengths in passes; n_m = 0: 2, 4, 8, 16 */
    size_t n_m;          /* <= TS_ANALYZE_MAX_LIST */
    uint64_t skip;       /* first passes left out */
    const char *html;    /* page to write; NULL: none */
    uint64_t max_input;  /* bytes per capture file; 0 = TS_READ_DEFAULT_CAP */
} ts_analyze_window_opts;
ts_status ts_analyze_window(const ts_analyze_window_opts *o, char **text, size_t *len);

/* FFN activation census: neuron-mass concentration, threshold shares and
 * token-to-token overlap per tapped layer, and whether a neuron cache pays.
 * The captures are merged and must agree in shape. */
typedef struct ts_analyze_ffn_opts {
    const char *const *captures; /* (n_captures) capture paths, n_captures >= 1 */
    size_t n_captures;
    const char *html;            /* page to write; NULL: none */
    uint64_t max_input;          /* bytes per capture file; 0 = TS_READ_DEFAULT_CAP */
} ts_analyze_ffn_opts;
ts_status ts_analyze_ffn(const ts_analyze_ffn_opts *o, char **text, size_t *len);

/* ---- engine (model, session, generation, chat): being moved here ---- */

#ifdef __cplusplus
}
#endif
#endif
