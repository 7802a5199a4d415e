/* Instruments, switched on once: the TURBOSPARK_* variables are read when a
 * model is opened into one ts_diag; the forward pass tests one pointer
 * (NULL when every instrument is off) at its named points. Instruments only
 * read the forward pass's buffers (or compute into their own scratch), so
 * output is byte-identical with them on.
 *
 *   TURBOSPARK_ROUTER_HIST=/p.json    per-layer top-k histogram (+ trace, pred, logits)
 *   TURBOSPARK_ROUTER_TRACE=any       add every pass's top-k ids
 *   TURBOSPARK_PILOT_PROBE=1|self     next-layer (or own-layer) router guess as "pred"
 *   TURBOSPARK_ROUTER_LOGITS_LAYER=L, TURBOSPARK_ROUTER_LOGITS_PASS=P   one router-logit row
 *   TURBOSPARK_FFN_HIST=/p.json       FFN activation census
 *   TURBOSPARK_PHASES=1               phase footer on stderr
 *   TURBOSPARK_EXPERT_DISK_IO=1       physical bytes next to requested (expert_io)
 * docs/INSTRUMENTS.md says what each measures and its invariant. */
#ifndef TS_DIAG_H
#define TS_DIAG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "diag/ffn_census.h"
#include "diag/router_capture_w.h"

typedef enum ts_phase {
    TS_PHASE_ATTENTION = 0, /* norms, QKV, rope, attention, output projection */
    TS_PHASE_DENSE_FFN,     /* dense FFN and shared experts */
    TS_PHASE_ROUTER,        /* router matmul, softmax, top-k */
    TS_PHASE_EXPERT_IO,     /* waiting for expert reads */
    TS_PHASE_EXPERT,        /* expert compute (and cache bookkeeping) */
    TS_PHASE_LM_HEAD,       /* final norm, LM head and sampling */
    TS_PHASE_COUNT
} ts_phase;

typedef enum ts_pilot_mode { TS_PILOT_OFF = 0, TS_PILOT_NEXT = 1, TS_PILOT_SELF = 2 } ts_pilot_mode;

typedef struct ts_diag {
    char *router_path;        /* TURBOSPARK_ROUTER_HIST, or NULL */
    bool router_trace;
    ts_pilot_mode pilot;
    int32_t logits_layer;     /* -1 = off */
    int64_t logits_pass;
    char *ffn_path;           /* TURBOSPARK_FFN_HIST, or NULL */
    bool phases;
    char *why_unwired;        /* set when a requested capture cannot run on this model (message) */

    bool router_on;           /* router capture initialised (MoE model) */
    diag_router router;
    bool ffn_on;              /* census initialised (first tap) */
    ffn_census ffn;
    int32_t ffn_layers;       /* layers of the model, for the census */
    bool ffn_width_mismatch;  /* taps of different widths: refused at write */

    double phase_s[TS_PHASE_COUNT]; /* accumulated seconds */
    double total_s;           /* wall time of every eval, plus sampling */
    uint64_t passes;          /* forward passes (tokens evaluated), prefill included */
} ts_diag;

/* Reads the environment. *out is NULL when every instrument is off; a bad
 * value (e.g. TURBOSPARK_PILOT_PROBE=maybe) is an error naming the variable. */
ts_status ts_diag_from_env(ts_diag **out);
/* Sets up the parts that need the model's shape: n_layer, and for MoE models
 * n_expert/top_k (n_expert 0: a dense model, whose router capture is refused
 * at the end with a notice rather than written as zeros). */
ts_status ts_diag_bind(ts_diag *d, int32_t n_layer, int32_t n_expert, int32_t top_k, const char *arch);
void ts_diag_free(ts_diag *d);

/* The FFN tap: rows (n_tok, width) of act(gate)*up at layer l; the last row
 * of the final chunk of an eval is the decode pass, other rows prefill. */
void ts_diag_ffn_observe(ts_diag *d, int32_t layer, const float *rows, int32_t n_tok, int32_t width, bool last_row_is_final);

/* Writes the captures and prints "[tag] wrote PATH" or "[tag] FAILED writing
 * PATH: reason" per requested capture to log. Returns TS_OK when every
 * requested capture was written. */
ts_status ts_diag_finish(ts_diag *d, FILE *log);

#endif
