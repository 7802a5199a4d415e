#include "diag/diag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A capture path must be writable before the run starts, not found out at
 * its end: its directory must exist and take new files (the writers put a
 * temporary beside the target and rename it), and the path itself must not
 * be a directory or something other than a regular file. */
static ts_status check_out_path(const char *what, const char *path) {
    if (!*path) return ts_fail(TS_ERR_ARG, "%s: empty path", what);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return ts_fail(TS_ERR_ARG, "%s=%s: %s", what, path, S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0) return ts_fail(TS_ERR_ARG, "%s=%s: directory %s: %s", what, path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ts_fail(TS_ERR_ARG, "%s=%s: %s is not a directory", what, path, dir);
    if (access(dir, W_OK | X_OK) != 0) return ts_fail(TS_ERR_ARG, "%s=%s: cannot create files in %s: %s", what, path, dir, strerror(errno));
    /* /proc, /sys: directories that exist but take no new files */
    struct statfs fs;
    if (statfs(dir, &fs) == 0 && (fs.f_type == 0x9fa0 /* PROC_SUPER_MAGIC */ || fs.f_type == 0x62656572 /* SYSFS_MAGIC */))
        return ts_fail(TS_ERR_ARG, "%s=%s: %s is not a place for files", what, path, dir);
    return TS_OK;
}

/* Two captures on one path would overwrite each other, each reporting
 * "wrote": the same name, or two names for one existing file. */
static bool same_path(const char *a, const char *b) {
    if (!strcmp(a, b)) return true;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

ts_instruments ts_instruments_default(void) {
    ts_instruments i = {.router_path = NULL, .router_trace = false, .pilot = TS_PILOT_OFF, .router_logits_layer = -1,
                        .router_logits_pass = 0, .ffn_path = NULL, .phases = false};
    return i;
}

ts_status ts_instruments_check(const ts_instruments *ins) {
    if (!ins) return TS_OK;
    const bool router = ins->router_path != NULL, ffn = ins->ffn_path != NULL;
    if ((ins->router_trace || ins->pilot != TS_PILOT_OFF || ins->router_logits_layer >= 0) && !router)
        return ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_TRACE, _PILOT_PROBE and _ROUTER_LOGITS_* add to the router capture: set "
                                   "TURBOSPARK_ROUTER_HIST=/path.json too");
    if (ins->pilot < TS_PILOT_OFF || ins->pilot > TS_PILOT_SELF) return ts_fail(TS_ERR_ARG, "instruments: unknown pilot mode %d", (int)ins->pilot);
    if (ins->router_logits_pass < 0) return ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_LOGITS_PASS=%lld: negative", (long long)ins->router_logits_pass);
    ts_status st;
    if (router && (st = check_out_path("TURBOSPARK_ROUTER_HIST", ins->router_path)) != TS_OK) return st;
    if (ffn && (st = check_out_path("TURBOSPARK_FFN_HIST", ins->ffn_path)) != TS_OK) return st;
    if (router && ffn && same_path(ins->router_path, ins->ffn_path))
        return ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_HIST and TURBOSPARK_FFN_HIST both name %s: one capture would overwrite the other",
                       ins->router_path);
    return TS_OK;
}

ts_status ts_diag_new(const ts_instruments *ins, ts_diag **out) {
    *out = NULL;
    if (!ins) return TS_OK;
    const bool router = ins->router_path != NULL, ffn = ins->ffn_path != NULL;
    ts_status st = ts_instruments_check(ins); /* again: the paths may have changed since the caller checked */
    if (st != TS_OK) return st;
    if (!router && !ffn && !ins->phases) return TS_OK;
    ts_diag *d = ts_calloc(1, sizeof *d);
    if (!d) return TS_ERR_NOMEM;
    d->router_trace = ins->router_trace;
    d->pilot = ins->pilot;
    d->logits_layer = ins->router_logits_layer;
    d->logits_pass = ins->router_logits_pass;
    d->phases = ins->phases;
    if ((router && !(d->router_path = strdup(ins->router_path))) || (ffn && !(d->ffn_path = strdup(ins->ffn_path)))) {
        ts_diag_free(d, NULL);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
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
            return ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_LOGITS_LAYER=%d: the model has %d layers (0..%d)", d->logits_layer, n_layer,
                           n_layer - 1);
        ts_status st = diag_router_init(&d->router, n_layer, n_expert, top_k, d->router_trace, d->pilot != TS_PILOT_OFF,
                                        d->logits_layer, d->logits_pass);
        if (st) return st;
        d->router_on = true;
    }
    return TS_OK;
}

void ts_diag_free(ts_diag *d, ts_backend *be) {
    if (!d) return;
    for (int i = 0; i < DIAG_MAX_EVENTS && be; i++)
        if (d->ev[i]) be->ops->event_free(be, d->ev[i]);
    free(d->ffn_host);
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

ts_status ts_diag_finish(ts_diag *d, FILE *log, bool partial) {
    ts_status ret = TS_OK;
    if (d->router_path) {
        ts_status st;
        if (!d->router_on) st = ts_fail(TS_ERR_UNSUPPORTED, "%s", d->why_unwired ? d->why_unwired : "router capture not wired");
        else if (d->logits_layer >= 0 && !d->router.logits_done && !partial)
            st = ts_fail(TS_ERR_ARG, "TURBOSPARK_ROUTER_LOGITS_PASS=%lld: the run routed only %llu passes at layer %d",
                         (long long)d->logits_pass, (unsigned long long)d->router.passes[d->logits_layer], d->logits_layer);
        else st = diag_router_write(&d->router, d->router_path, partial);
        if (st) fprintf(log, "[router-hist] FAILED writing %s: %s\n", d->router_path, ts_last_error()), ret = st;
        else fprintf(log, "[router-hist] wrote %s\n", d->router_path);
    }
    if (d->ffn_path) {
        ts_status st;
        if (d->ffn_width_mismatch) st = ts_fail(TS_ERR_UNSUPPORTED, "FFN layers of different widths in one model are not censused");
        else if (!d->ffn_on)
            st = ts_fail(TS_ERR_UNSUPPORTED, "no dense FFN or shared expert ran on a wired path (routed experts are not censused)");
        else st = ffn_census_write(&d->ffn, d->ffn_path, partial);
        if (st) fprintf(log, "[ffn-hist] FAILED writing %s: %s\n", d->ffn_path, ts_last_error()), ret = st;
        else fprintf(log, "[ffn-hist] wrote %s\n", d->ffn_path);
    }
    return ret;
}
