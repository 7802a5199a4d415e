/* Reader and analysis of FFN census captures (TURBOSPARK_FFN_HIST). */
#ifndef TS_ANALYZE_FFN_CAPTURE_H
#define TS_ANALYZE_FFN_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "diag/ffn_census.h"

typedef struct ffn_capture {
    int32_t num_layers, inter;
    uint64_t decode_passes, prefill_passes;
    bool *tapped;            /* (num_layers) */
    int32_t overlap_k[FFN_N_OVERLAP_K];
    uint64_t *overlap_pairs; /* (num_layers, FFN_N_OVERLAP_K) */
    uint64_t *overlap_hits;  /* (num_layers, FFN_N_OVERLAP_K) */
    uint64_t *hist_count;    /* (num_layers, FFN_BUCKETS) */
    double *hist_mass;       /* (num_layers, FFN_BUCKETS) */
    double *mass;            /* (num_layers, inter) */
} ffn_capture;

/* Loads and checks: sum(hist_count[l]) = decode_passes * inter for tapped
 * layers, mass rows agree with hist_mass, and the capture is not degenerate.
 * max_bytes caps the file (0 = TS_READ_DEFAULT_CAP). */
ts_status ffn_capture_load(const char *path, uint64_t max_bytes, ffn_capture *out);
/* Adds b into a (same shape required); the invariant still holds. */
ts_status ffn_capture_merge(ffn_capture *a, const ffn_capture *b, const char *bname);
void ffn_capture_free(ffn_capture *c);

typedef struct ffn_layer_stats {
    int32_t n50, n90, n95, n99; /* fewest neurons covering that share of the layer's |a| mass */
    double below[3];            /* share of mass in buckets under 2^-10, 2^-7, 2^-4 (~1e-3, 1e-2, 1e-1) */
    double overlap[FFN_N_OVERLAP_K]; /* mean |topK(t) & topK(t-1)| / K */
    double chance[FFN_N_OVERLAP_K];  /* K / inter */
} ffn_layer_stats;

ts_status ffn_layer_analyze(const ffn_capture *c, int32_t l, ffn_layer_stats *out);
/* Share of layer l's mass in buckets wholly below 2^e. */
double ffn_mass_below_pow2(const ffn_capture *c, int32_t l, int e);

#endif
