#include "diag/ffn_census.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag/json_out.h"

int ffn_bucket(float a) {
    if (a == 0.0f) return 0;
    if (!isfinite(a)) return FFN_BUCKETS - 1;
    int e;
    frexpf(fabsf(a), &e); /* |a| = m * 2^e, m in [0.5, 1): floor(log2|a|) = e - 1 */
    int b = e - 1 + FFN_BUCKET_EXP_OFFSET;
    return b < 1 ? 1 : b > FFN_BUCKETS - 2 ? FFN_BUCKETS - 2 : b;
}

ts_status ffn_census_init(ffn_census *c, int32_t num_layers, int32_t inter) {
    memset(c, 0, sizeof *c);
    if (num_layers < 1 || inter < 1) return ts_fail(TS_ERR_ARG, "ffn census: %d layers of width %d", num_layers, inter);
    c->num_layers = num_layers;
    c->inter = inter;
    size_t L = (size_t)num_layers, I = (size_t)inter;
    static const int32_t ks[FFN_N_OVERLAP_K] = {512, 1024, 2048, 4096};
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) c->overlap_k[k] = ks[k] < inter ? ks[k] : inter;
    c->tapped = ts_calloc(L, sizeof *c->tapped);
    c->decode_passes = ts_calloc(L, sizeof *c->decode_passes);
    c->prefill_passes = ts_calloc(L, sizeof *c->prefill_passes);
    c->mass = ts_calloc(L * I, sizeof *c->mass);
    c->hist_count = ts_calloc(L * FFN_BUCKETS, sizeof *c->hist_count);
    c->hist_mass = ts_calloc(L * FFN_BUCKETS, sizeof *c->hist_mass);
    c->overlap_pairs = ts_calloc(L * FFN_N_OVERLAP_K, sizeof *c->overlap_pairs);
    c->overlap_hits = ts_calloc(L * FFN_N_OVERLAP_K, sizeof *c->overlap_hits);
    c->prev_rank = ts_calloc(L * I, sizeof *c->prev_rank);
    c->have_prev = ts_calloc(L, sizeof *c->have_prev);
    c->order = ts_calloc(I, sizeof *c->order);
    c->absv = ts_calloc(I, sizeof *c->absv);
    if (!c->tapped || !c->decode_passes || !c->prefill_passes || !c->mass || !c->hist_count || !c->hist_mass || !c->overlap_pairs ||
        !c->overlap_hits || !c->prev_rank || !c->have_prev || !c->order || !c->absv) {
        ffn_census_free(c);
        return TS_ERR_NOMEM;
    }
    return TS_OK;
}

void ffn_census_free(ffn_census *c) {
    free(c->tapped);
    free(c->decode_passes);
    free(c->prefill_passes);
    free(c->mass);
    free(c->hist_count);
    free(c->hist_mass);
    free(c->overlap_pairs);
    free(c->overlap_hits);
    free(c->prev_rank);
    free(c->have_prev);
    free(c->order);
    free(c->absv);
    memset(c, 0, sizeof *c);
}

/* qsort_r (glibc): the magnitudes come as context, so censuses of several
 * sessions can rank at once. */
static int cmp_rank(const void *pa, const void *pb, void *ctx) {
    const float *absv = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    float x = absv[a], y = absv[b];
    if (x != y) return x > y ? -1 : 1;
    return a < b ? -1 : a > b;
}

void ffn_census_observe(ffn_census *c, int32_t l, const float *a, bool decode) {
    c->tapped[l] = true;
    if (!decode) {
        c->prefill_passes[l]++;
        return;
    }
    c->decode_passes[l]++;
    const int32_t I = c->inter;
    double *mass = c->mass + (size_t)l * I;
    uint64_t *hc = c->hist_count + (size_t)l * FFN_BUCKETS;
    double *hm = c->hist_mass + (size_t)l * FFN_BUCKETS;
    int32_t n_rank = 0;
    for (int32_t i = 0; i < I; i++) {
        float v = a[i], av = fabsf(v);
        int b = ffn_bucket(v);
        hc[b]++;
        if (isfinite(av)) {
            hm[b] += av;
            mass[i] += av;
            c->absv[i] = av;
            c->order[n_rank++] = i; /* NaN and inf never rank */
        }
    }
    qsort_r(c->order, (size_t)n_rank, sizeof *c->order, cmp_rank, c->absv);
    uint8_t *prev = c->prev_rank + (size_t)l * I;
    uint64_t *pairs = c->overlap_pairs + (size_t)l * FFN_N_OVERLAP_K, *hits = c->overlap_hits + (size_t)l * FFN_N_OVERLAP_K;
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) {
        int32_t K = c->overlap_k[k] < n_rank ? c->overlap_k[k] : n_rank;
        if (c->have_prev[l]) {
            uint64_t h = 0;
            for (int32_t r = 0; r < K; r++) h += (prev[c->order[r]] >> k) & 1;
            pairs[k]++;
            hits[k] += h;
        }
    }
    memset(prev, 0, (size_t)I);
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) {
        int32_t K = c->overlap_k[k] < n_rank ? c->overlap_k[k] : n_rank;
        for (int32_t r = 0; r < K; r++) prev[c->order[r]] |= (uint8_t)(1u << k);
    }
    c->have_prev[l] = true;
}

ts_status ffn_census_write(const ffn_census *c, const char *path, bool partial) {
    /* the tapped layers must agree on the pass count, or the capture's single
     * decode_passes would misstate some layer */
    uint64_t dp = 0, pp = 0;
    int32_t n_tapped = 0;
    for (int32_t l = 0; l < c->num_layers; l++) {
        if (!c->tapped[l]) continue;
        if (n_tapped && (c->decode_passes[l] != dp || c->prefill_passes[l] != pp))
            return ts_fail(TS_ERR_INTERNAL, "ffn census: layer %d saw %llu decode passes, others %llu", l,
                           (unsigned long long)c->decode_passes[l], (unsigned long long)dp);
        dp = c->decode_passes[l];
        pp = c->prefill_passes[l];
        n_tapped++;
    }
    if (!n_tapped) return ts_fail(TS_ERR_UNSUPPORTED, "ffn census: no layer was tapped (no dense FFN ran on a wired path)");
    if (!dp) return ts_fail(TS_ERR_LIMIT, "ffn census: no decode pass ran, nothing to write");
    json_out j;
    ts_status st = json_out_open(&j, path);
    if (st) return st;
    json_out_printf(&j, "{%s\"num_layers\":%d,\"inter\":%d,\"decode_passes\":%llu,\"prefill_passes\":%llu,\"bucket_exp_offset\":%d,",
                    partial ? "\"partial\":true," : "", c->num_layers, c->inter, (unsigned long long)dp, (unsigned long long)pp, FFN_BUCKET_EXP_OFFSET);
    json_out_printf(&j, "\"tapped\":[");
    for (int32_t l = 0; l < c->num_layers; l++) json_out_printf(&j, "%s%s", l ? "," : "", c->tapped[l] ? "true" : "false");
    json_out_printf(&j, "],\"overlap_ks\":[");
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) json_out_printf(&j, "%s%d", k ? "," : "", c->overlap_k[k]);
    json_out_printf(&j, "],");
    json_out_u64_matrix(&j, "overlap_pairs", c->overlap_pairs, c->num_layers, FFN_N_OVERLAP_K);
    json_out_printf(&j, ",");
    json_out_u64_matrix(&j, "overlap_hits", c->overlap_hits, c->num_layers, FFN_N_OVERLAP_K);
    json_out_printf(&j, ",");
    json_out_u64_matrix(&j, "hist_count", c->hist_count, c->num_layers, FFN_BUCKETS);
    json_out_printf(&j, ",");
    json_out_f64_matrix(&j, "hist_mass", c->hist_mass, c->num_layers, FFN_BUCKETS);
    json_out_printf(&j, ",");
    json_out_f64_matrix(&j, "mass", c->mass, c->num_layers, c->inter);
    json_out_printf(&j, "}\n");
    return json_out_close(&j);
}
