#include "diag/diag.h"

#include <stdlib.h>
#include <string.h>

static char *env_dup(const char *name) {
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

static ts_status env_int(const char *name, int64_t lo, int64_t hi, int64_t *out, bool *set) {
    const char *v = getenv(name);
    *set = false;
    if (!v || !*v) return TS_OK;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo || x > hi) return ts_fail(TS_ERR_ARG, "%s=%s: expected an integer in [%lld, %lld]", name, v, (long long)lo, (long long)hi);
    *out = x;
    *set = true;
    return TS_OK;
}

ts_status ts_diag_from_env(ts_diag **out) {
    *out = NULL;
    ts_diag *d = ts_calloc(1, sizeof *d);
    if (!d) return TS_ERR_NOMEM;
    d->router_path = env_dup("TURBOSPARK_ROUTER_HIST");
    d->router_trace = getenv("TURBOSPARK_ROUTER_TRACE") != NULL;
    d->ffn_path = env_dup("TURBOSPARK_FFN_HIST");
    const char *ph = getenv("TURBOSPARK_PHASES");
    d->phases = ph && *ph && strcmp(ph, "0") != 0;
    d->logits_layer = -1;
    ts_status st = TS_OK;
    const char *pp = getenv("TURBOSPARK_PILOT_PROBE");
    if (pp && *pp && strcmp(pp, "0") != 0) {
        if (!strcmp(pp, "1")) d->pilot = TS_PILOT_NEXT;
        else if (!strcmp(pp, "self")) d->pilot = TS_PILOT_SELF;
        else st = ts_fail(TS_ERR_ARG, "TURBOSPARK_PILOT_PROBE=%s: expected 1 (next layer) or self", pp);
    }
    int64_t v;
    bool set_l = false, set_p = false;
    if (!st) st = env_int("TURBOSPARK_ROUTER_LOGITS_LAYER", 0, 1 << 20, &v, &set_l);
    if (!st && set_l) d->logits_layer = (int32_t)v;
    if (!st) st = env_int("TURBOSPARK_ROUTER_LOGITS_PASS", 0, INT64_MAX, &d->logits_pass, &set_p);
    if (!st && set_p && !set_l) st = ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_LOGITS_PASS needs TURBOSPARK_ROUTER_LOGITS_LAYER");
    if (!st && (d->router_trace || d->pilot || set_l) && !d->router_path)
        st = ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_TRACE, _PILOT_PROBE and _ROUTER_LOGITS_* add to the router capture: set "
                                 "TURBOSPARK_ROUTER_HIST=/path.json too");
    if (st) {
        ts_diag_free(d);
        return st;
    }
    if (!d->router_path && !d->ffn_path && !d->phases) {
        ts_diag_free(d);
        return TS_OK;
    }
    *out = d;
    return TS_OK;
}

ts_status ts_diag_bind(ts_diag *d, int32_t n_layer, int32_t n_expert, int32_t top_k, const char *arch) {
    d->ffn_layers = n_layer;
    if (d->router_path) {
        if (n_expert <= 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "this model (%s) has no routed layers: nothing to capture", arch);
            d->why_unwired = strdup(msg);
            return TS_OK;
        }
        if (d->logits_layer >= n_layer)
            return ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_LOGITS_LAYER=%d: the model has %d layers", d->logits_layer, n_layer);
        ts_status st = diag_router_init(&d->router, n_layer, n_expert, top_k, d->router_trace, d->pilot != TS_PILOT_OFF,
                                        d->logits_layer, d->logits_pass);
        if (st) return st;
        d->router_on = true;
    }
    return TS_OK;
}

void ts_diag_free(ts_diag *d) {
    if (!d) return;
    if (d->router_on) diag_router_free(&d->router);
    if (d->ffn_on) ffn_census_free(&d->ffn);
    free(d->router_path);
    free(d->ffn_path);
    free(d->why_unwired);
    free(d);
}

void ts_diag_ffn_observe(ts_diag *d, int32_t layer, const float *rows, int32_t n_tok, int32_t width, bool last_row_is_final) {
    if (!d->ffn_path || d->ffn_width_mismatch) return;
    if (!d->ffn_on) {
        if (ffn_census_init(&d->ffn, d->ffn_layers, width) != TS_OK) return;
        d->ffn_on = true;
    }
    if (width != d->ffn.inter) {
        d->ffn_width_mismatch = true;
        return;
    }
    for (int32_t t = 0; t < n_tok; t++)
        ffn_census_observe(&d->ffn, layer, rows + (size_t)t * (size_t)width, last_row_is_final && t == n_tok - 1);
}

ts_status ts_diag_finish(ts_diag *d, FILE *log) {
    ts_status ret = TS_OK;
    if (d->router_path) {
        ts_status st;
        if (!d->router_on) st = ts_fail(TS_ERR_UNSUPPORTED, "%s", d->why_unwired ? d->why_unwired : "router capture not wired");
        else st = diag_router_write(&d->router, d->router_path);
        if (st) fprintf(log, "[router-hist] FAILED writing %s: %s\n", d->router_path, ts_last_error()), ret = st;
        else fprintf(log, "[router-hist] wrote %s\n", d->router_path);
    }
    if (d->ffn_path) {
        ts_status st;
        if (d->ffn_width_mismatch) st = ts_fail(TS_ERR_UNSUPPORTED, "FFN layers of different widths in one model are not censused");
        else if (!d->ffn_on)
            st = ts_fail(TS_ERR_UNSUPPORTED, "no dense FFN or shared expert ran on a wired path (routed experts are not censused)");
        else st = ffn_census_write(&d->ffn, d->ffn_path);
        if (st) fprintf(log, "[ffn-hist] FAILED writing %s: %s\n", d->ffn_path, ts_last_error()), ret = st;
        else fprintf(log, "[ffn-hist] wrote %s\n", d->ffn_path);
    }
    return ret;
}
