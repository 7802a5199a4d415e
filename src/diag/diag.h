/* Instruments: one ts_diag per session, made from the session's
 * ts_instruments (include/turbospark.h; the command line maps the
 * TURBOSPARK_* variables onto it, tools/cli_env.c). The forward pass reaches
 * it only through the hooks struct (forward/hooks.h): NULL when every
 * instrument is off, one pointer test per named point. Instruments only read
 * the forward pass's buffers (or compute into their own scratch), so output
 * is byte-identical with them on. docs/INSTRUMENTS.md says what each
 * measures and its invariant. */
#ifndef TS_DIAG_H
#define TS_DIAG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "compute/backend.h"
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

#define DIAG_MAX_EVENTS 1024 /* phase marks held before they are resolved (then the stream syncs) */

typedef struct ts_diag {
    char *router_path;        /* router capture, or NULL */
    bool router_trace;
    ts_pilot_mode pilot;
    int32_t logits_layer;     /* -1 = off */
    int64_t logits_pass;
    char *ffn_path;           /* FFN census capture, or NULL */
    bool phases;
    char *why_unwired;        /* set when a requested capture cannot run on this model (message) */

    bool router_on;           /* router capture initialised (MoE model) */
    diag_router router;
    bool ffn_on;              /* census initialised (first tap) */
    ffn_census ffn;
    int32_t ffn_layers;       /* layers of the model, for the census */
    bool ffn_width_mismatch;  /* taps of different widths: refused at write */
    float *ffn_host;          /* (ffn_host_n) host copy of a tap on a device backend */
    size_t ffn_host_n;

    /* phases: marks are events on the session's stream, resolved in order */
    double phase_s[TS_PHASE_COUNT]; /* accumulated seconds */
    double total_s;           /* wall time of every eval, plus sampling */
    uint64_t passes;          /* forward passes (tokens evaluated), prefill included */
    ts_event *ev[DIAG_MAX_EVENTS];  /* (n_ev) recorded marks of this chunk */
    int8_t ev_phase[DIAG_MAX_EVENTS]; /* (n_ev) phase the span ending at mark i belongs to, -1 none */
    int n_ev;
    double pending_io;        /* I/O wait reported inside the current span */
} ts_diag;

/* Copies the configuration and checks it: bad combinations (trace without a
 * router path...), two captures on one path, and paths that cannot be written
 * (missing directory, a directory, /proc) are refused now, before any work.
 * *out is NULL when every instrument is off. */
ts_status ts_diag_new(const ts_instruments *ins, ts_diag **out);
/* Sets up the parts that need the model's shape: n_layer, and for MoE models
 * n_expert/top_k (n_expert 0: a dense model, whose router capture is refused
 * at the end with a notice rather than written as zeros). */
ts_status ts_diag_bind(ts_diag *d, int32_t n_layer, int32_t n_expert, int32_t top_k, const char *arch);
void ts_diag_free(ts_diag *d, ts_backend *be);

/* The FFN tap on host rows (n_tok, width) of act(gate)*up at layer l; the
 * last row of the final chunk of an eval is the decode pass, other rows
 * prefill. */
void ts_diag_ffn_observe(ts_diag *d, int32_t layer, const float *rows, int32_t n_tok, int32_t width, bool last_row_is_final);

/* Writes the captures and prints "[tag] wrote PATH" or "[tag] FAILED writing
 * PATH: reason" per requested capture to log (partial: marked as from an
 * interrupted run). TS_OK when every requested capture was written. */
ts_status ts_diag_finish(ts_diag *d, FILE *log, bool partial);

#endif
