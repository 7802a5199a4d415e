#include "analyze/ffn_capture.h"
#include "analyze/json_in.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ts_status bad(const char *path, const char *what) {
    return ts_fail(TS_ERR_FORMAT, "%s: inconsistent FFN capture: %s", path, what);
}

void ffn_capture_free(ffn_capture *c) {
    free(c->tapped);
    free(c->overlap_pairs);
    free(c->overlap_hits);
    free(c->hist_count);
    free(c->hist_mass);
    free(c->mass);
    memset(c, 0, sizeof *c);
}

/* Counts above 2^53 are not exact in JSON doubles, and converting a double
 * past 2^64 to uint64_t is undefined: both are refused. */
#define MAX_COUNT 9007199254740992.0

static bool num_u64(const cJSON *o, const char *k, uint64_t *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble != floor(j->valuedouble) || j->valuedouble > MAX_COUNT) return false;
    *out = (uint64_t)j->valuedouble;
    return true;
}

/* rows x cols matrix of non-negative numbers; counts (integer) must be whole and at most MAX_COUNT. */
static ts_status read_matrix(const char *path, const cJSON *root, const char *key, int64_t rows, int64_t cols, bool integer, double *dst) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, key);
    char msg[160];
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != rows) {
        snprintf(msg, sizeof msg, "%s must have %lld rows", key, (long long)rows);
        return bad(path, msg);
    }
    int64_t r = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, m) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols) {
            snprintf(msg, sizeof msg, "%s row %lld must have %lld values", key, (long long)r, (long long)cols);
            return bad(path, msg);
        }
        int64_t c = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, row) {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
                (integer && (v->valuedouble != floor(v->valuedouble) || v->valuedouble > MAX_COUNT))) {
                snprintf(msg, sizeof msg, "%s[%lld][%lld] is not a non-negative %s", key, (long long)r, (long long)c,
                         integer ? "integer count (at most 2^53)" : "number");
                return bad(path, msg);
            }
            dst[r * cols + c++] = v->valuedouble;
        }
        r++;
    }
    return TS_OK;
}

ts_status ffn_capture_load(const char *path, uint64_t max_bytes, ffn_capture *out) {
    memset(out, 0, sizeof *out);
    cJSON *root;
    ts_status st = json_in_load(path, max_bytes, &root);
    if (st) return st;
    uint64_t nl, inter, off;
    double *tmp = NULL;
    if (!num_u64(root, "num_layers", &nl) || !num_u64(root, "inter", &inter) || nl < 1 || inter < 1 || nl > 100000 || inter > 10000000 ||
        !num_u64(root, "decode_passes", &out->decode_passes) || !num_u64(root, "prefill_passes", &out->prefill_passes) ||
        !num_u64(root, "bucket_exp_offset", &off)) {
        st = bad(path, "num_layers, inter, decode_passes, prefill_passes and bucket_exp_offset must be non-negative integers (at most 2^53)");
        goto done;
    }
    if (off != FFN_BUCKET_EXP_OFFSET) { st = bad(path, "bucket_exp_offset is not 33: a capture from another layout"); goto done; }
    out->num_layers = (int32_t)nl;
    out->inter = (int32_t)inter;
    size_t L = nl, I = inter;
    out->tapped = calloc(L, sizeof *out->tapped);
    out->overlap_pairs = calloc(L * FFN_N_OVERLAP_K, sizeof(uint64_t));
    out->overlap_hits = calloc(L * FFN_N_OVERLAP_K, sizeof(uint64_t));
    out->hist_count = calloc(L * FFN_BUCKETS, sizeof(uint64_t));
    out->hist_mass = calloc(L * FFN_BUCKETS, sizeof(double));
    out->mass = calloc(L * I, sizeof(double));
    tmp = calloc(L * (FFN_BUCKETS > FFN_N_OVERLAP_K ? FFN_BUCKETS : FFN_N_OVERLAP_K), sizeof(double));
    if (!out->tapped || !out->overlap_pairs || !out->overlap_hits || !out->hist_count || !out->hist_mass || !out->mass || !tmp) {
        st = ts_fail(TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(root, "tapped");
    if (!cJSON_IsArray(tp) || cJSON_GetArraySize(tp) != (int)nl) { st = bad(path, "tapped must have num_layers booleans"); goto done; }
    int32_t l = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, tp) out->tapped[l++] = cJSON_IsTrue(v);
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(root, "overlap_ks");
    if (!cJSON_IsArray(ks) || cJSON_GetArraySize(ks) != FFN_N_OVERLAP_K) { st = bad(path, "overlap_ks must have 4 entries"); goto done; }
    int k = 0;
    cJSON_ArrayForEach(v, ks) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > inter) { st = bad(path, "overlap_ks values must be in [1, inter]"); goto done; }
        out->overlap_k[k++] = (int32_t)v->valuedouble;
    }
    if ((st = read_matrix(path, root, "overlap_pairs", L, FFN_N_OVERLAP_K, true, tmp))) goto done;
    for (size_t i = 0; i < L * FFN_N_OVERLAP_K; i++) out->overlap_pairs[i] = (uint64_t)tmp[i];
    if ((st = read_matrix(path, root, "overlap_hits", L, FFN_N_OVERLAP_K, true, tmp))) goto done;
    for (size_t i = 0; i < L * FFN_N_OVERLAP_K; i++) out->overlap_hits[i] = (uint64_t)tmp[i];
    if ((st = read_matrix(path, root, "hist_count", L, FFN_BUCKETS, true, tmp))) goto done;
    for (size_t i = 0; i < L * FFN_BUCKETS; i++) out->hist_count[i] = (uint64_t)tmp[i];
    if ((st = read_matrix(path, root, "hist_mass", L, FFN_BUCKETS, false, out->hist_mass))) goto done;
    if ((st = read_matrix(path, root, "mass", L, I, false, out->mass))) goto done;
    /* invariants */
    int n_tapped = 0;
    double total_mass = 0;
    char msg[200];
    for (l = 0; l < (int32_t)nl; l++) {
        uint64_t hs = 0;
        double ms = 0, hm = 0;
        for (int b = 0; b < FFN_BUCKETS; b++) hs += out->hist_count[(size_t)l * FFN_BUCKETS + b], hm += out->hist_mass[(size_t)l * FFN_BUCKETS + b];
        for (size_t i = 0; i < I; i++) ms += out->mass[(size_t)l * I + i];
        if (!out->tapped[l]) {
            if (hs || ms > 0) { snprintf(msg, sizeof msg, "layer %d is not tapped but has data", l); st = bad(path, msg); goto done; }
            continue;
        }
        n_tapped++;
        uint64_t want; /* decode_passes x inter must not wrap into agreement */
        if (!ts_mul_u64(out->decode_passes, inter, &want) || hs != want) {
            snprintf(msg, sizeof msg, "layer %d: sum(hist_count) = %llu, but decode_passes x inter = %llu", l, (unsigned long long)hs,
                     (unsigned long long)(out->decode_passes * inter));
            st = bad(path, msg);
            goto done;
        }
        if (fabs(ms - hm) > 1e-6 * (ms > hm ? ms : hm) + 1e-12) {
            snprintf(msg, sizeof msg, "layer %d: mass sums to %g but hist_mass to %g", l, ms, hm);
            st = bad(path, msg);
            goto done;
        }
        for (k = 0; k < FFN_N_OVERLAP_K; k++)
            if (out->overlap_hits[(size_t)l * FFN_N_OVERLAP_K + k] > out->overlap_pairs[(size_t)l * FFN_N_OVERLAP_K + k] * (uint64_t)out->overlap_k[k]) {
                snprintf(msg, sizeof msg, "layer %d: overlap hits exceed pairs x K", l);
                st = bad(path, msg);
                goto done;
            }
        total_mass += ms;
    }
    if (!n_tapped) { st = bad(path, "no layer is tapped"); goto done; }
    if (!out->decode_passes) { st = bad(path, "no decode pass was captured"); goto done; }
    if (!(total_mass > 0)) { st = bad(path, "every activation is exactly zero: a degenerate capture, not a finding"); goto done; }
done:
    free(tmp);
    cJSON_Delete(root);
    if (st) ffn_capture_free(out);
    return st;
}

ts_status ffn_capture_merge(ffn_capture *a, const ffn_capture *b, const char *bname) {
    if (a->num_layers != b->num_layers || a->inter != b->inter || memcmp(a->overlap_k, b->overlap_k, sizeof a->overlap_k) ||
        memcmp(a->tapped, b->tapped, (size_t)a->num_layers))
        return ts_fail(TS_ERR_FORMAT, "%s: shape differs from the first capture", bname);
    size_t L = (size_t)a->num_layers;
    a->decode_passes += b->decode_passes;
    a->prefill_passes += b->prefill_passes;
    for (size_t i = 0; i < L * FFN_N_OVERLAP_K; i++) a->overlap_pairs[i] += b->overlap_pairs[i], a->overlap_hits[i] += b->overlap_hits[i];
    for (size_t i = 0; i < L * FFN_BUCKETS; i++) a->hist_count[i] += b->hist_count[i], a->hist_mass[i] += b->hist_mass[i];
    for (size_t i = 0; i < L * (size_t)a->inter; i++) a->mass[i] += b->mass[i];
    return TS_OK;
}

double ffn_mass_below_pow2(const ffn_capture *c, int32_t l, int e) {
    const double *hm = c->hist_mass + (size_t)l * FFN_BUCKETS;
    double tot = 0, below = 0;
    /* bucket b covers [2^(b-33), 2^(b-32)): wholly below 2^e when b-32 <= e */
    for (int b = 0; b < FFN_BUCKETS - 1; b++) {
        tot += hm[b];
        if (b - (FFN_BUCKET_EXP_OFFSET - 1) <= e) below += hm[b];
    }
    return tot > 0 ? below / tot : NAN;
}

static int cmp_desc_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

ts_status ffn_layer_analyze(const ffn_capture *c, int32_t l, ffn_layer_stats *out) {
    memset(out, 0, sizeof *out);
    size_t I = (size_t)c->inter;
    double *m = malloc(I * sizeof *m);
    if (!m) return ts_fail(TS_ERR_NOMEM, "out of memory");
    memcpy(m, c->mass + (size_t)l * I, I * sizeof *m);
    qsort(m, I, sizeof *m, cmp_desc_d);
    double tot = 0;
    for (size_t i = 0; i < I; i++) tot += m[i];
    const double shares[4] = {0.5, 0.9, 0.95, 0.99};
    int32_t *outs[4] = {&out->n50, &out->n90, &out->n95, &out->n99};
    for (int s = 0; s < 4; s++) {
        double acc = 0;
        size_t n = 0;
        while (n < I && acc < shares[s] * tot) acc += m[n++];
        *outs[s] = (int32_t)n;
    }
    free(m);
    out->below[0] = ffn_mass_below_pow2(c, l, -10);
    out->below[1] = ffn_mass_below_pow2(c, l, -7);
    out->below[2] = ffn_mass_below_pow2(c, l, -4);
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) {
        uint64_t pairs = c->overlap_pairs[(size_t)l * FFN_N_OVERLAP_K + k], hits = c->overlap_hits[(size_t)l * FFN_N_OVERLAP_K + k];
        out->overlap[k] = pairs ? (double)hits / ((double)pairs * c->overlap_k[k]) : NAN;
        out->chance[k] = (double)c->overlap_k[k] / c->inter;
    }
    return TS_OK;
}
