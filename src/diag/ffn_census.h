/* FFN activation census (TURBOSPARK_FFN_HIST=/path.json).
 *
 * Taps the gated activation a = act(gate) * up that feeds the down
 * projection, per layer. The engine writes that activation into a buffer it
 * would write anyway; the census reads the buffer after the FFN (a redirect of
 * where the activation lands, not a second FFN pass), so a GPU backend can
 * hand over the same buffer after a device-to-host copy.
 *
 * Counted over decode passes (the last prompt token counts as decode); other
 * prefill passes are only counted, as prefill_passes.
 *
 * Invariant: for every tapped layer, sum(hist_count[l]) = decode_passes * inter.
 *
 * Buckets: 0 = exact zero, 63 = non-finite, b in 1..62 covers
 * [2^(b-33), 2^(b-32)), values outside clamped to 1 or 62. */
#ifndef TS_DIAG_FFN_CENSUS_H
#define TS_DIAG_FFN_CENSUS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

#define FFN_BUCKETS 64
#define FFN_BUCKET_EXP_OFFSET 33
#define FFN_N_OVERLAP_K 4

typedef struct ffn_census {
    int32_t num_layers;
    int32_t inter;                     /* activation width */
    bool *tapped;                      /* (num_layers) layer has a dense FFN / shared expert */
    uint64_t *decode_passes;           /* (num_layers) */
    uint64_t *prefill_passes;          /* (num_layers) */
    double *mass;                      /* (num_layers, inter) cumulative |a| */
    uint64_t *hist_count;              /* (num_layers, FFN_BUCKETS) */
    double *hist_mass;                 /* (num_layers, FFN_BUCKETS) */
    int32_t overlap_k[FFN_N_OVERLAP_K];/* {512,1024,2048,4096} clamped to inter */
    uint64_t *overlap_pairs;           /* (num_layers, FFN_N_OVERLAP_K) consecutive decode pairs seen */
    uint64_t *overlap_hits;            /* (num_layers, FFN_N_OVERLAP_K) sum of |topK(t) & topK(t-1)| */
    uint8_t *prev_rank;                /* (num_layers, inter) bit k set: index in previous pass's top-K[k] */
    bool *have_prev;                   /* (num_layers) */
    int32_t *order;                    /* (inter) scratch: indices sorted by |a| desc */
    float *absv;                       /* (inter) scratch */
} ffn_census;

int ffn_bucket(float a);
ts_status ffn_census_init(ffn_census *c, int32_t num_layers, int32_t inter);
void ffn_census_free(ffn_census *c);
/* One token's activation at layer l. decode=false: only counted. */
void ffn_census_observe(ffn_census *c, int32_t layer, const float *a, bool decode);
/* Writes the capture atomically. */
ts_status ffn_census_write(const ffn_census *c, const char *path, bool partial);

#endif
