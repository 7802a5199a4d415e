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

/* A model file can shrink under its mapping (truncated by another
 * program); touching a page past the new end raises SIGBUS, which the
 * library cannot turn into a status. The path of the live model-file
 * mapping that contains addr, or NULL. Async-signal-safe (atomic loads of a
 * fixed table, no lock, no allocation), so a SIGBUS handler can name the
 * file from si_addr. */
const char *ts_map_name_at(const void *addr);

/* ======================================================================
 * Backend
 * ====================================================================== */

typedef struct ts_backend ts_backend;

typedef enum ts_backend_kind {
    TS_BACKEND_AUTO = 0, /* cuda when built in and a GPU is present, else cpu */
    TS_BACKEND_CPU = 1,
    TS_BACKEND_CUDA = 2,
} ts_backend_kind;

typedef struct ts_backend_opts {
    ts_backend_kind kind;
    int32_t n_threads; /* cpu: threads per session unless the session says; 0 = one per core */
    int32_t device;    /* cuda: device ordinal */
    bool cuda_no_pdl;  /* cuda: launch each kernel only once its predecessor has finished, not while
                          it drains (programmatic dependent launch; same results either way); default
                          false, so a zeroed struct gets the faster launches */
} ts_backend_opts;

ts_backend_opts ts_backend_opts_default(void);
/* "cpu" / "cuda" / "auto" -> kind; TS_ERR_ARG otherwise. */
ts_status ts_backend_kind_parse(const char *s, ts_backend_kind *out);
/* TS_ERR_UNSUPPORTED when cuda is asked of a build without it, TS_ERR_DEVICE
 * when no usable GPU or driver is found (the message says which). */
ts_status ts_backend_new(const ts_backend_opts *opts, ts_backend **out);
void ts_backend_free(ts_backend *be);
ts_backend_kind ts_backend_kind_of(const ts_backend *be);
const char *ts_backend_name(const ts_backend *be); /* "cpu" / "cuda" */
/* One line for a start-up message: "cpu: AVX-512 VNNI, 2 threads" or
 * "cuda: NVIDIA H200 (sm_90), 139.2 GiB free of 139.8 GiB". */
const char *ts_backend_describe(const ts_backend *be, char *buf, size_t n);
/* Free and total device memory now, as the driver reports it (cuda:
 * cudaMemGetInfo, every process's allocations and the context included).
 * TS_ERR_UNSUPPORTED on a backend whose memory is the host's (cpu). */
ts_status ts_backend_device_memory(ts_backend *be, uint64_t *free_bytes, uint64_t *total_bytes);
/* True when this build carries the CUDA backend. */
bool ts_backend_cuda_built(void);

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
    uint64_t skip;                     /* first tokens (trace passes) warm the cache and are not counted; a chunk starting before them is not counted */
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

/* ======================================================================
 * Model
 * ====================================================================== */

typedef struct ts_model ts_model;

typedef enum ts_expert_residency {
    TS_EXPERTS_AUTO = 0,     /* chosen from the budget or available memory; the reason is reported */
    TS_EXPERTS_RESIDENT = 1, /* every expert in memory */
    TS_EXPERTS_STREAMED = 2, /* per-layer slot cache filled from the file */
    TS_EXPERTS_MAPPED = 3,   /* in place from the mapping; the OS page cache is the cache */
} ts_expert_residency;

/* Streamed experts on a device backend: where a slot miss is copied from. */
typedef enum ts_expert_source {
    TS_EXPERT_SOURCE_AUTO = 0, /* host when every expert fits host memory (--expert-budget or available), else file */
    TS_EXPERT_SOURCE_HOST = 1, /* every expert read at load into pinned host memory */
    TS_EXPERT_SOURCE_FILE = 2, /* each miss read from the file into pinned staging */
} ts_expert_source;

/* Streamed experts in device slots: who plans a decode token's cache passes. */
typedef enum ts_expert_plan {
    TS_EXPERT_PLAN_AUTO = 0,   /* the device where it can (host tier, a backend that plans), else the host */
    TS_EXPERT_PLAN_HOST = 1,   /* the host, after each MoE layer's routing is read back (a sync per layer) */
    TS_EXPERT_PLAN_DEVICE = 2, /* the device: no host round trip, a decode token is one recorded graph */
} ts_expert_plan;

typedef enum ts_cache_policy {
    TS_CACHE_LFU = 0,
    TS_CACHE_LRU = 1,
} ts_cache_policy;

/* Load progress in bytes (weights read, faulted in or uploaded). Called from
 * the loading thread, at most about 100 times per load, and once at the end
 * with done == total. */
typedef void (*ts_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct ts_model_opts {
    ts_backend *backend;     /* where the weights go; NULL: a CPU backend the model makes and owns */
    bool prefault;           /* read every non-expert weight page now, reported as progress */
    ts_progress_fn progress; /* NULL: no reports */
    void *progress_user;
    /* MoE models (ignored by dense ones, which ts_model_opts_check refuses
     * when any of these differs from the default) */
    ts_expert_residency expert_residency;
    int32_t expert_slots;        /* slots per MoE layer in streamed mode; 0 = from the budget */
    uint64_t expert_budget;      /* bytes the experts may take; 0 = from available memory */
    ts_cache_policy expert_policy;
    bool expert_mlock;           /* resident: try to mlock the expert pages */
    bool expert_direct_io;       /* streamed: O_DIRECT reads (the page cache is not polluted) */
    bool expert_disk_io;         /* account physical bytes read (/proc/self/io) beside requested */
    int32_t expert_io_threads;   /* -1 = default, 0 = the waiting thread reads */
    /* device backends: the experts' device memory (resident, or the slots
     * in streamed mode); 0 = what the device has free less a headroom */
    uint64_t gpu_expert_budget;
    /* streamed on a device: the tier misses are copied from. On the cpu
     * backend HOST or FILE runs the device path's slots and copies in host
     * memory (it tests that path without a GPU). */
    ts_expert_source expert_source;
} ts_model_opts;

ts_model_opts ts_model_opts_default(void);
/* "resident|streamed|mapped|auto", "lfu|lru", "N|auto" (auto -> 0). */
ts_status ts_expert_residency_parse(const char *s, ts_expert_residency *out);
ts_status ts_cache_policy_parse(const char *s, ts_cache_policy *out);
const char *ts_expert_residency_name(ts_expert_residency r);
ts_status ts_expert_source_parse(const char *s, ts_expert_source *out); /* "host|file|auto" */
ts_status ts_expert_plan_parse(const char *s, ts_expert_plan *out);     /* "auto|host|device" */
const char *ts_cache_policy_name(ts_cache_policy p);

/* Opens the GGUF at path, reads the hyperparameters, binds every weight on
 * the backend and loads the tokenizer. Refuses unsupported architectures,
 * missing tensors, wrong shapes, unsupported types and a tokenizer that does
 * not match the output layer, with one clear message naming the file. */
ts_status ts_model_load(const char *path, const ts_model_opts *opts, ts_model **out);
void ts_model_free(ts_model *m);

typedef struct ts_model_info {
    const char *arch;          /* "llama", "qwen2", "qwen3moe", ... */
    const char *name;          /* general.name, or "" */
    int32_t n_vocab;           /* rows of the output layer */
    int32_t n_ctx_train;       /* trained context length */
    int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    int32_t n_expert;          /* routed experts per MoE layer; 0 = dense */
    int32_t n_expert_used;     /* top-k */
    uint64_t n_params;         /* elements of every tensor in the file */
    uint64_t file_bytes;       /* bytes of every tensor in the file */
    uint64_t active_bytes;     /* weight bytes one token reads (top-k experts only) */
    uint64_t kv_bytes_per_pos; /* KV cache bytes per position (F16 cache) */
} ts_model_info;

void ts_model_get_info(const ts_model *m, ts_model_info *out);
const ts_vocab *ts_model_vocab(const ts_model *m);
ts_backend *ts_model_backend(const ts_model *m);
/* A string metadata value ("general.name", "tokenizer.chat_template"):
 * TS_ERR_ARG when absent or not a string. *val points into the model. */
ts_status ts_model_meta_str(const ts_model *m, const char *key, const char **val, size_t *len);

/* MoE expert cache (all false/empty for dense models). */
typedef struct ts_expert_stats {
    uint64_t passes;          /* routed passes */
    uint64_t requests;        /* experts requested */
    uint64_t hits, misses, cold_misses, evict_misses;
    uint64_t bytes_requested; /* gate+up+down bytes of the requested experts */
    uint64_t bytes_read;      /* bytes read from the file into slots */
    double io_wait_s;         /* time spent waiting for reads */
    uint64_t bytes_uploaded;  /* device slots: bytes copied into slots for the passes' misses */
    /* pilot prefetch (ts_session_opts.pilot_prefetch): copies made ahead of
     * a layer's pass; after a full pass copies = saved + wasted */
    uint64_t prefetch_copies, prefetch_saved, prefetch_wasted;
    uint64_t bytes_prefetched; /* bytes of those copies */
} ts_expert_stats;
bool ts_model_has_experts(const ts_model *m);
/* "expert residency: streamed (auto: ...)" and "expert cache: streamed, 16
 * slots/layer (lfu), ..."; "" for dense models. */
const char *ts_model_expert_choice(const ts_model *m);
const char *ts_model_expert_start_line(const ts_model *m, char *buf, size_t n);
/* "expert cache: 4800 requests, 3900 hits (81.3%), ..." over n_tokens. */
const char *ts_model_expert_end_line(const ts_model *m, uint64_t n_tokens, char *buf, size_t n);
void ts_model_expert_stats(const ts_model *m, ts_expert_stats *out);
/* Zeroes the counters (e.g. after warm-ups); the cache contents stay. */
void ts_model_expert_reset_stats(ts_model *m);

/* ======================================================================
 * Instruments (per session; docs/INSTRUMENTS.md)
 * ====================================================================== */

typedef enum ts_pilot_mode {
    TS_PILOT_OFF = 0,
    TS_PILOT_NEXT = 1, /* guess layer l+1's experts from layer l's residual */
    TS_PILOT_SELF = 2, /* aim at the layer's own router: recall must read 100% */
} ts_pilot_mode;

typedef struct ts_instruments {
    const char *router_path;     /* router histogram capture (JSON); NULL = off */
    bool router_trace;           /* add every pass's top-k ids */
    ts_pilot_mode pilot;         /* pilot probe, recorded as "pred" */
    int32_t router_logits_layer; /* one router-logit row: layer (-1 = off) */
    int64_t router_logits_pass;  /* ... and pass */
    const char *ffn_path;        /* FFN activation census (JSON); NULL = off */
    bool phases;                 /* phase timings, for the footer */
} ts_instruments;

/* Everything off. */
ts_instruments ts_instruments_default(void);
/* What ts_session_new checks of the instruments, without a model: output
 * paths writable (not a directory, not under /proc or /sys, the directory
 * exists), the two captures on different files, trace/pilot/logits only with
 * the router capture. A caller checks before a long model load. */
ts_status ts_instruments_check(const ts_instruments *ins);

/* ======================================================================
 * Sampling
 * ====================================================================== */

typedef struct ts_sampler_params {
    float temperature;     /* <= 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k;         /* <= 0 or >= n_vocab: off */
    float top_p;           /* >= 1: off; must be > 0 */
    float min_p;           /* <= 0: off; must be <= 1 */
    float repeat_penalty;  /* 1: off; must be > 0 */
    int32_t repeat_last_n; /* accepted ids the penalty looks back over */
    uint64_t seed;         /* the RNG stream is specified in docs/SAMPLING.md */
} ts_sampler_params;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalty, seed 0x5eed. */
ts_sampler_params ts_sampler_params_default(void);

/* ======================================================================
 * Session: one conversation's state, and the step API
 * ====================================================================== */

typedef struct ts_session ts_session;

/* Where a device backend's LM head writes the last position's logits. In
 * mapped host memory (pinned) the stores cross the bus while the LM head
 * runs, so an eval that returns logits needs no copy after the step; that
 * pays when the head streams enough weight bytes per logit to hide the
 * stores (tg128 on an H200: the 7B's Q6_K head, 2,940 bytes a logit, +0.75%,
 * the 1.5B's, 1,260 bytes, +1.9%; SmolLM2's Q8_0 head, 612 bytes, -1.2%),
 * and it costs a device draw (ts_session_sample with no host logits) a read
 * over the bus. */
typedef enum ts_logits_dest {
    TS_LOGITS_AUTO = 0, /* host memory for an eval that asks for logits (logits != NULL) when the LM head's
                           rows are at least TS_LOGITS_HOST_MIN_ROW_BYTES long; device memory otherwise (a
                           session whose evals switch between the two records its decode step again) */
    TS_LOGITS_DEVICE,   /* device memory: an eval that asks for logits copies them out after the step */
    TS_LOGITS_HOST,     /* host memory for every eval (a device draw reads them over the bus) */
} ts_logits_dest;

/* TS_LOGITS_AUTO's bar: LM head bytes streamed per logit written across the bus. */
#define TS_LOGITS_HOST_MIN_ROW_BYTES 1024
ts_status ts_logits_dest_parse(const char *s, ts_logits_dest *out); /* "auto|device|host" */

typedef struct ts_session_opts {
    int32_t n_ctx;     /* positions; 0 = the model's trained context */
    int32_t n_threads; /* cpu: 0 = the backend's default */
    int32_t n_batch;   /* most tokens per forward chunk; 0 = 256 */
    bool all_logits;   /* eval returns logits for every position it evaluated */
    bool kv_f32;       /* F32 KV cache instead of F16 */
    bool precise;      /* reference precision: F32 activations in every matmul */
    const ts_instruments *instruments; /* NULL = all off; copied */
    /* Streamed experts in device slots: at each MoE layer a pilot (the next
     * layer's router on this layer's residual, on the device) guesses the
     * next layer's experts, and their copies start while this layer
     * computes. Output is the same either way (a prefetch only fills slots);
     * the cache's hits, and so `analyze cache`'s replay, differ. Default on;
     * ignored without device slots. */
    bool pilot_prefetch;
    /* how many of the pilot's guesses, most confident first, are copied
     * (1..top-k); 0 = all top-k. Default 2 */
    int32_t pilot_prefetch_depth;
    /* Streamed experts in device slots: a decode token's cache passes
     * planned on the device (the same policy, so the same hits, copies and
     * counters) or on the host. Sessions with instruments plan on the host.
     * DEVICE where it cannot be (the file tier; a backend that does not
     * plan) is refused. */
    ts_expert_plan expert_plan;
    /* Where a device backend's LM head writes the logits an eval returns
     * (ts_logits_dest); ignored in all-logits mode, with instruments and on
     * host backends. Default TS_LOGITS_AUTO. */
    ts_logits_dest logits_dest;
} ts_session_opts;

ts_session_opts ts_session_opts_default(void);

/* Refuses (before allocating anything large) an instrument path that two
 * captures share, a capture whose directory does not exist or is not
 * writable, a capture this model cannot produce (a router capture on a dense
 * model), and a context that does not fit the backend's memory (saying how
 * much was needed and how much is free). */
ts_status ts_session_new(ts_model *m, const ts_session_opts *opts, ts_session **out);
void ts_session_free(ts_session *s);
ts_model *ts_session_model(const ts_session *s);

/* Appends n tokens to the context and runs the transformer over them.
 * *logits: n_vocab floats for the last token, or (n, n_vocab) in all-logits
 * mode; owned by the session, valid until its next call; the caller may
 * modify them. logits NULL: the caller only samples next (ts_session_sample),
 * so on a GPU the logits stay on the device and the draw happens there.
 * TS_ERR_LIMIT (nothing evaluated) when they do not fit. */
ts_status ts_session_eval(ts_session *s, const int32_t *ids, int32_t n, float **logits);
/* Rewinds the context to its first n_past tokens. */
ts_status ts_session_truncate(ts_session *s, int32_t n_past);
void ts_session_reset(ts_session *s);
/* Keeps the longest prefix of the context equal to ids[0..n), at most n-1
 * tokens (one must be evaluated for fresh logits), drops the rest, and
 * returns how many were kept. */
int32_t ts_session_reuse_prefix(ts_session *s, const int32_t *ids, int32_t n);
/* The ids in the context, in order (n_past of them). */
const int32_t *ts_session_tokens(const ts_session *s, int32_t *n_past);

int32_t ts_session_n_ctx(const ts_session *s);
/* Who plans this session's streamed decode passes (ts_session_opts.expert_plan
 * resolved): HOST or DEVICE where the model streams experts into device
 * slots, AUTO (not applicable) otherwise. */
ts_expert_plan ts_session_expert_plan(const ts_session *s);
/* How many of the pilot's guesses this session copies ahead
 * (ts_session_opts.pilot_prefetch and _depth resolved): 0 = no prefetch
 * (off, or no streamed device slots). */
int32_t ts_session_pilot_prefetch(const ts_session *s);
int32_t ts_session_n_past(const ts_session *s);
int32_t ts_session_n_vocab(const ts_session *s);
int32_t ts_session_n_threads(const ts_session *s);

/* The session's sampler: validates p (TS_ERR_ARG naming the field) and resets. */
ts_status ts_session_set_sampler(ts_session *s, const ts_sampler_params *p);
/* Forgets accepted ids and reseeds. */
void ts_session_sampler_reset(ts_session *s);
/* Records an id for the repetition penalty. */
void ts_session_sampler_accept(ts_session *s, int32_t id);
/* Samples the next token from the last logits of the last eval (modifying
 * them: the penalty is applied in place). Does not accept it. */
ts_status ts_session_sample(ts_session *s, int32_t *id);

/* Wall-clock counters: evals of one token count as decode, longer as prefill. */
typedef struct ts_timings {
    int64_t prefill_tokens;
    double prefill_s;
    int64_t decode_tokens;
    double decode_s;
    double sample_s; /* time in ts_session_sample */
} ts_timings;
ts_timings ts_session_timings(const ts_session *s);
void ts_session_timings_reset(ts_session *s);

/* Writes the session's captures and prints "[tag] wrote PATH" / "[tag]
 * FAILED writing PATH: reason" per requested capture, and the phase footer,
 * to log. partial marks the captures "partial": true (an interrupted run).
 * TS_OK when every requested capture was written. Later calls write again
 * (the captures keep accumulating). */
ts_status ts_session_instruments_finish(ts_session *s, FILE *log, bool partial);

/* ======================================================================
 * Generation
 * ====================================================================== */

typedef enum ts_stop_reason {
    TS_STOP_NONE = 0,
    TS_STOP_EOG,    /* the model produced an end-of-generation token */
    TS_STOP_STRING, /* a stop string appeared in the text */
    TS_STOP_LENGTH, /* max_new tokens generated */
    TS_STOP_CTX,    /* the context is full */
    TS_STOP_ABORT,  /* a callback returned false */
} ts_stop_reason;
const char *ts_stop_reason_name(ts_stop_reason r); /* "eos", "stop", "length", "ctx", "abort", "none" */

#define TS_MAX_TOP_LOGPROBS 20

/* One generated token, as the token callback sees it. */
typedef struct ts_token_event {
    int32_t id;
    float logprob;                                  /* log p(id) under the model (before sampling's filters); 0 unless asked */
    int32_t n_top;                                  /* entries in top_* (gen params' top_logprobs) */
    int32_t top_id[TS_MAX_TOP_LOGPROBS];            /* (n_top) most likely ids, descending */
    float top_logprob[TS_MAX_TOP_LOGPROBS];         /* (n_top) */
} ts_token_event;

/* Text as it becomes final: never half a UTF-8 character, never a piece that
 * may still turn into a stop string. Return false to stop. */
typedef bool (*ts_text_fn)(void *user, const char *text, size_t len);
typedef bool (*ts_token_fn)(void *user, const ts_token_event *ev);

typedef struct ts_gen_params {
    int32_t max_new;           /* tokens to generate at most (> 0) */
    const char *const *stops;  /* (n_stops) stop strings, matched on the generated text */
    size_t n_stops;
    ts_sampler_params sampler; /* applied at the start (the sampler is reset) */
    bool reuse_prefix;         /* the prompt is the whole context: keep the longest prefix already
                                  evaluated (ts_session_reuse_prefix); else it is appended */
    bool logprobs;             /* fill ts_token_event.logprob */
    int32_t top_logprobs;      /* 0..TS_MAX_TOP_LOGPROBS alternatives per token */
} ts_gen_params;

ts_gen_params ts_gen_params_default(void);

typedef struct ts_gen_result {
    ts_stop_reason reason;
    int32_t n_prompt;  /* prompt tokens given */
    int32_t n_cached;  /* of those, kept from the context (reuse_prefix) */
    int32_t n_new;     /* tokens sampled (an EOG that ended the run included) */
    double prefill_s, decode_s, sample_s;
    int32_t *ids;      /* (n_new) generated ids; ts_free() */
} ts_gen_result;

/* Prefill, then sample / stream / stop on EOG, a stop string, max_new or the
 * context. The tokens fed (and generated) are accepted by the sampler. On
 * error the partial result is still filled in (free its ids). */
ts_status ts_session_generate(ts_session *s, const int32_t *prompt, int32_t n_prompt, const ts_gen_params *p, ts_text_fn on_text,
                              ts_token_fn on_token, void *user, ts_gen_result *out);

/* ======================================================================
 * Chat templates and conversations
 * ====================================================================== */

typedef enum ts_chat_role {
    TS_ROLE_SYSTEM = 0,
    TS_ROLE_USER = 1,
    TS_ROLE_ASSISTANT = 2,
} ts_chat_role;

typedef struct ts_chat_message {
    ts_chat_role role;
    const char *content; /* NUL-terminated UTF-8 */
} ts_chat_message;

const char *ts_chat_role_name(ts_chat_role r);
bool ts_chat_role_parse(const char *s, ts_chat_role *out);

typedef struct ts_chat_template ts_chat_template;

/* The model's own template (tokenizer.chat_template), recognised by content;
 * TS_ERR_UNSUPPORTED naming what was seen when it is not one we render exactly. */
ts_status ts_chat_template_from_model(const ts_model *m, ts_chat_template **out);
/* "chatml", "llama3", "llama2", "mistral", "mistral-legacy", "gemma". */
ts_status ts_chat_template_from_name(const char *name, ts_chat_template **out);
void ts_chat_template_free(ts_chat_template *t);
const char *ts_chat_template_name(const ts_chat_template *t);
/* "chatml, llama3, ...": for messages. */
const char *ts_chat_template_names(void);

/* Renders msgs as the template does (text: ts_free). */
ts_status ts_chat_render(const ts_chat_template *t, const ts_vocab *v, const ts_chat_message *msgs, size_t n,
                         bool add_generation_prompt, char **text, size_t *len);
/* Renders and tokenizes with exactly one BOS (ids: ts_free). */
ts_status ts_chat_tokenize(const ts_chat_template *t, const ts_vocab *v, const ts_chat_message *msgs, size_t n,
                           bool add_generation_prompt, int32_t **ids, size_t *n_ids);

/* A JSON array of {"role", "content"} (every content its own heap string;
 * free with ts_chat_messages_free). Malformed JSON, unknown roles or keys,
 * an empty array, NUL characters and invalid UTF-8 are TS_ERR_FORMAT. */
ts_status ts_chat_messages_parse_json(const char *json, size_t len, ts_chat_message **msgs, size_t *n);
void ts_chat_messages_free(ts_chat_message *msgs, size_t n);

/* A conversation on a session: keeps the history, renders it with the
 * template, re-uses the KV prefix the previous turn left, and records the
 * reply as the user saw it (nothing from a stop string on, invalid UTF-8
 * replaced). When the next turn would not fit the context, the oldest turns
 * after any system message are dropped (counted in ts_chat_turn.dropped). */
typedef struct ts_chat ts_chat;
ts_status ts_chat_new(ts_session *s, const ts_chat_template *t, ts_chat **out);
void ts_chat_free(ts_chat *c);
/* Adds a message (copied). */
ts_status ts_chat_add(ts_chat *c, ts_chat_role role, const char *content);
typedef struct ts_chat_turn {
    ts_gen_result gen;  /* of the reply; gen.ids is ts_free'd by ts_chat_turn_free */
    int32_t dropped;    /* messages dropped to make room */
} ts_chat_turn;
/* Generates the assistant's reply to the history and appends it. */
ts_status ts_chat_reply(ts_chat *c, const ts_gen_params *p, ts_text_fn on_text, ts_token_fn on_token, void *user,
                        ts_chat_turn *out);
void ts_chat_turn_free(ts_chat_turn *t);
size_t ts_chat_n_messages(const ts_chat *c);
const ts_chat_message *ts_chat_messages(const ts_chat *c);

/* ======================================================================
 * Perplexity and saved logits
 * ====================================================================== */

typedef struct ts_perplexity_opts {
    int32_t n_ctx;             /* tokens per chunk (0 = 512); each chunk starts from an empty context with
                                  BOS as its first token, and its second half is scored (llama.cpp's method) */
    int64_t max_chunks;        /* 0 = all */
    const char *save_logits;   /* write every scored row here (docs/CLI.md format, atomically); NULL = no */
    const char *kl_base;       /* compare with a saved file: KL(base || ours) and top-1 agreement; NULL = no */
} ts_perplexity_opts;

typedef struct ts_perplexity_progress {
    size_t n_tokens;           /* of the text */
    int64_t n_chunks;          /* that will be scored */
    int32_t chunk_len;         /* tokens per chunk (the text's length when shorter than n_ctx) */
    int32_t first_scored;      /* first scored position of a chunk */
    int64_t chunks_done;       /* 0 before the first chunk */
    double ppl;                /* so far (when chunks_done > 0) */
} ts_perplexity_progress;
typedef void (*ts_perplexity_fn)(void *user, const ts_perplexity_progress *p);

typedef struct ts_perplexity_result {
    double ppl;                /* exp(mean NLL) over the scored positions */
    uint64_t n_scored;         /* positions scored */
    int64_t n_chunks;
    int32_t chunk_len;
    bool have_kl;              /* with kl_base: */
    double kl_mean, kl_median, kl_p99, same_top1_pct;
} ts_perplexity_result;

/* Scores ids (the tokenized text) chunk by chunk. The session must have
 * all_logits and n_ctx >= the chunk length (min(opts->n_ctx, n)); it is reset.
 * Refuses a text under 4 tokens, a save path equal to the base path, and a
 * base file of another vocabulary or length or text. */
ts_status ts_perplexity(ts_session *s, const int32_t *ids, size_t n, const ts_perplexity_opts *opts, ts_perplexity_fn on_progress,
                        void *user, ts_perplexity_result *out);

/* ======================================================================
 * HTTP server (docs/SERVER.md): OpenAI and Anthropic APIs over sessions
 * ====================================================================== */

typedef struct ts_server ts_server;

typedef struct ts_server_opts {
    const char *model_path;    /* GGUF loaded by ts_server_run; /health answers 503 until it is ready */
    ts_model_opts model_opts;  /* .backend: where it goes (NULL: a CPU backend the model owns) */
    const char *model_id;      /* the id /v1/models lists and requests name; NULL: the file name without .gguf */
    const char *chat_template; /* template name; NULL: the model's own (chat endpoints answer 400 without one) */
    const char *host;          /* address to bind; NULL: "127.0.0.1" */
    int32_t port;              /* 0: any free port (ts_server_port tells which) */
    int32_t n_parallel;        /* sessions, each with its own KV cache (>= 1) */
    int32_t n_ctx;             /* positions per session; 0: the trained context, at most 4096 */
    int32_t n_threads;         /* cpu threads per session; 0: the backend's default */
    int32_t n_queue;           /* requests that may wait for a session; more get 503 + Retry-After */
    const char *api_key;       /* NULL or "": no key; else Bearer or x-api-key must match */
    uint64_t max_body;         /* request body bytes (413 beyond) */
    int32_t max_depth;         /* JSON nesting levels */
    int32_t max_messages;      /* messages per request */
    int32_t header_bytes;      /* per-connection memory for the request line and headers (431 beyond) */
    int32_t timeout_s;         /* a connection idle this long is closed (slow clients) */
    int32_t request_timeout_s; /* a request (line, headers, body) not received this long after the connection was ready
                                  for it is answered 408 and the connection closed (clients that trickle bytes) */
    int32_t max_connections;   /* open connections at once */
    int32_t ping_ms;           /* a stream silent this long (queued, long prefill) gets an SSE comment */
    FILE *log;                 /* one line per request and the start-up lines; NULL: silent */
} ts_server_opts;

/* port 8080 on 127.0.0.1, 1 session, queue 16, 1 MiB bodies, depth 32,
 * 256 messages, 16 KiB of headers, 30 s idle timeout, 30 s to receive a
 * request, 64 connections, SSE pings after 2 s of silence. */
ts_server_opts ts_server_opts_default(void);
/* Checks the options, binds and starts answering (health: 503, loading).
 * TS_ERR_IO naming the address when it cannot bind. Copies what it needs of o. */
ts_status ts_server_new(const ts_server_opts *o, ts_server **out);
int32_t ts_server_port(const ts_server *srv);
/* Loads the model, makes the sessions, serves until ts_server_stop. Returns
 * the load's failure (the server keeps answering 503 until freed) or TS_OK
 * after a stop. */
ts_status ts_server_run(ts_server *srv);
/* Async-signal-safe: makes ts_server_run return; generations in flight stop
 * at their next token. */
void ts_server_stop(ts_server *srv);
/* Stops listening, waits for the connections and frees everything. */
void ts_server_free(ts_server *srv);

#ifdef __cplusplus
}
#endif
#endif
