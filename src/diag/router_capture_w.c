#include "diag/router_capture_w.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diag/json_out.h"

static ts_status ids_push(diag_ids *d, const int32_t *v, int32_t n) {
    if (d->cap - d->n < (uint64_t)n) {
        uint64_t cap = d->cap ? d->cap * 2 : 1024;
        while (cap - d->n < (uint64_t)n) cap *= 2;
        int32_t *p = ts_realloc(d->v, (size_t)cap * sizeof *p);
        if (!p) return TS_ERR_NOMEM;
        d->v = p;
        d->cap = cap;
    }
    memcpy(d->v + d->n, v, sizeof *v * (size_t)n);
    d->n += (uint64_t)n;
    return TS_OK;
}

ts_status diag_router_init(diag_router *r, int32_t num_layers, int32_t num_experts, int32_t top_k, bool trace, bool pilot,
                           int32_t logits_layer, int64_t logits_pass) {
    memset(r, 0, sizeof *r);
    if (num_layers < 1 || num_experts < 1 || top_k < 1 || top_k > num_experts)
        return ts_fail(TS_ERR_ARG, "router capture: %d layers, %d experts, top_k %d", num_layers, num_experts, top_k);
    r->num_layers = num_layers;
    r->num_experts = num_experts;
    r->top_k = top_k;
    r->trace = trace || pilot; /* pred lines up with the trace: no pred without one */
    r->pilot = pilot;
    r->logits_layer = logits_layer;
    r->logits_pass = logits_pass;
    r->counts = ts_calloc((size_t)num_layers * (size_t)num_experts, sizeof *r->counts);
    r->passes = ts_calloc((size_t)num_layers, sizeof *r->passes);
    r->tr = ts_calloc((size_t)num_layers, sizeof *r->tr);
    r->pred = ts_calloc((size_t)num_layers, sizeof *r->pred);
    r->chunks = ts_calloc((size_t)num_layers, sizeof *r->chunks);
    r->pf = ts_calloc((size_t)num_layers, sizeof *r->pf);
    r->logits = logits_layer >= 0 ? ts_calloc((size_t)num_experts, sizeof *r->logits) : NULL;
    if (!r->counts || !r->passes || !r->tr || !r->pred || !r->chunks || !r->pf || (logits_layer >= 0 && !r->logits)) {
        diag_router_free(r);
        return TS_ERR_NOMEM;
    }
    return TS_OK;
}

void diag_router_free(diag_router *r) {
    for (int32_t l = 0; r->tr && l < r->num_layers; l++) free(r->tr[l].v);
    for (int32_t l = 0; r->pred && l < r->num_layers; l++) free(r->pred[l].v);
    for (int32_t l = 0; r->chunks && l < r->num_layers; l++) free(r->chunks[l].v);
    for (int32_t l = 0; r->pf && l < r->num_layers; l++) free(r->pf[l].v);
    free(r->chunks);
    free(r->pf);
    free(r->tr);
    free(r->pred);
    free(r->counts);
    free(r->passes);
    free(r->logits);
    memset(r, 0, sizeof *r);
}

ts_status diag_router_record(diag_router *r, int32_t l, const int32_t *ids, const float *router_logits) {
    for (int32_t i = 0; i < r->top_k; i++) r->counts[(size_t)l * r->num_experts + ids[i]]++;
    if (l == r->logits_layer && (int64_t)r->passes[l] == r->logits_pass && router_logits) {
        memcpy(r->logits, router_logits, sizeof(float) * (size_t)r->num_experts);
        r->logits_done = true;
    }
    r->passes[l]++;
    if (r->trace) return ids_push(&r->tr[l], ids, r->top_k);
    return TS_OK;
}

ts_status diag_router_record_chunk(diag_router *r, int32_t l, int32_t n_tok) {
    if (!r->trace) return TS_OK;
    return ids_push(&r->chunks[l], &n_tok, 1);
}

ts_status diag_router_record_prefetch(diag_router *r, int32_t l, const int32_t *ids, int32_t k) {
    if (!r->trace) return TS_OK;
    if (l < 0 || l >= r->num_layers || k < 1 || k > r->top_k)
        return ts_fail(TS_ERR_INTERNAL, "router capture: prefetch of %d experts at layer %d", k, l);
    const int32_t head[2] = {(int32_t)r->passes[l], k};
    ts_status st = ids_push(&r->pf[l], head, 2);
    return st ? st : ids_push(&r->pf[l], ids, k);
}

ts_status diag_router_record_pred(diag_router *r, int32_t l, const int32_t *ids) {
    if (!r->pilot || l < 1) return TS_OK;
    return ids_push(&r->pred[l], ids, r->top_k);
}

static void write_rows(json_out *j, const char *key, const diag_ids *rows, int32_t n) {
    json_out_printf(j, ",\"%s\":[", key);
    for (int32_t l = 0; l < n; l++) {
        json_out_printf(j, l ? ",[" : "[");
        for (uint64_t i = 0; i < rows[l].n; i++) json_out_printf(j, i ? ",%d" : "%d", rows[l].v[i]);
        json_out_printf(j, "]");
    }
    json_out_printf(j, "]");
}

ts_status diag_router_write(const diag_router *r, const char *path, bool partial) {
    uint64_t total = 0;
    /* no chunk recorded at all: a writer that routes token by token (the
     * analyzer then takes every pass as its own chunk) */
    bool chunks = false;
    for (int32_t l = 0; r->trace && l < r->num_layers; l++) chunks |= r->chunks[l].n > 0;
    for (int32_t l = 0; l < r->num_layers; l++) {
        total += r->passes[l];
        uint64_t in_chunks = 0;
        for (uint64_t i = 0; chunks && i < r->chunks[l].n; i++) in_chunks += (uint64_t)r->chunks[l].v[i];
        if (chunks && in_chunks != r->passes[l])
            return ts_fail(TS_ERR_INTERNAL, "router capture: layer %d has %llu tokens in chunks but %llu passes", l,
                           (unsigned long long)in_chunks, (unsigned long long)r->passes[l]);
        /* prefetches: (pass, k, ids) records, passes increasing, inside the layer's */
        int64_t last = -1;
        for (uint64_t i = 0; r->trace && i < r->pf[l].n; i += 2 + (uint64_t)r->pf[l].v[i + 1]) {
            const int64_t pass = r->pf[l].v[i];
            if (pass <= last || (uint64_t)pass > r->passes[l] || ((uint64_t)pass == r->passes[l] && !partial))
                return ts_fail(TS_ERR_INTERNAL, "router capture: layer %d prefetch before pass %lld of %llu (previous %lld)", l,
                               (long long)pass, (unsigned long long)r->passes[l], (long long)last);
            last = pass;
        }
        if (r->pilot && l > 0 && r->pred[l].n && r->pred[l].n != r->tr[l].n)
            return ts_fail(TS_ERR_INTERNAL, "router capture: layer %d has %llu pilot ids but %llu trace ids", l,
                           (unsigned long long)r->pred[l].n, (unsigned long long)r->tr[l].n);
    }
    if (!total) return ts_fail(TS_ERR_LIMIT, "router capture: no routed pass ran, nothing to write");
    json_out j;
    ts_status st = json_out_open(&j, path);
    if (st) return st;
    json_out_printf(&j, "{%s\"num_layers\":%d,\"num_experts\":%d,\"top_k\":%d,", partial ? "\"partial\":true," : "", r->num_layers,
                    r->num_experts, r->top_k);
    json_out_u64_matrix(&j, "counts", r->counts, r->num_layers, r->num_experts);
    if (r->trace) write_rows(&j, "trace", r->tr, r->num_layers);
    if (chunks) write_rows(&j, "chunks", r->chunks, r->num_layers);
    if (r->pilot) write_rows(&j, "pred", r->pred, r->num_layers);
    bool pf = false;
    for (int32_t l = 0; r->trace && l < r->num_layers; l++) pf |= r->pf[l].n > 0;
    if (pf) write_rows(&j, "prefetch", r->pf, r->num_layers);
    if (r->logits_layer >= 0) {
        if (!r->logits_done) {
            json_out_printf(&j, ",\"router_logits\":null");
        } else {
            json_out_printf(&j, ",\"router_logits\":{\"layer\":%d,\"pass\":%lld,\"values\":[", r->logits_layer, (long long)r->logits_pass);
            for (int32_t e = 0; e < r->num_experts; e++) {
                if (e) json_out_printf(&j, ",");
                if (isfinite(r->logits[e])) json_out_printf(&j, "%.9g", r->logits[e]);
                else json_out_printf(&j, "null"); /* JSON has no nan/inf: "nan" made the whole capture unreadable */
            }
            json_out_printf(&j, "]}");
        }
    }
    json_out_printf(&j, "}\n");
    return json_out_close(&j);
}
