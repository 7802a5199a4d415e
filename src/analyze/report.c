#include "analyze/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

ts_status report_text_open(report_text *t) {
    memset(t, 0, sizeof *t);
    t->f = open_memstream(&t->buf, &t->len);
    if (!t->f) return ts_fail(TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

ts_status report_text_close(report_text *t, char **text, size_t *len) {
    bool bad = ferror(t->f) != 0;
    /* a failed final realloc in fclose leaves buf NULL and returns 0 */
    if (fclose(t->f) != 0 || bad || !t->buf) {
        free(t->buf);
        memset(t, 0, sizeof *t);
        return ts_fail(TS_ERR_NOMEM, "out of memory building the report");
    }
    *text = t->buf;
    *len = t->len;
    memset(t, 0, sizeof *t);
    return TS_OK;
}

void report_text_discard(report_text *t) {
    if (t->f) fclose(t->f);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

ts_status report_check_output(const char *html, const char *const *inputs, size_t n) {
    if (!html) return TS_OK;
    if (!html[0]) return ts_fail(TS_ERR_ARG, "the html page needs a file name");
    struct stat so, si;
    bool exists = stat(html, &so) == 0;
    for (size_t i = 0; i < n; i++) {
        bool same = !strcmp(html, inputs[i]) ||
                    (exists && stat(inputs[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino);
        if (same) return ts_fail(TS_ERR_ARG, "html page %s is the capture %s: refusing to write over an input", html, inputs[i]);
    }
    return TS_OK;
}

ts_status report_html_open(html_doc *h, const char *path, const char *title) {
    ts_status st = html_open(h, path, title);
    if (st) ts_error_prefix("html page");
    return st;
}

ts_status report_finish(report_text *t, html_doc *h, bool page, ts_status st, char **text, size_t *len) {
    char *tx = NULL;
    size_t tl = 0;
    if (!st) st = report_text_close(t, &tx, &tl);
    else report_text_discard(t);
    if (page && st) {
        html_discard(h);
    } else if (page && (st = html_close(h)) != TS_OK) {
        ts_error_prefix("html page");
    }
    if (st) {
        free(tx);
        return st;
    }
    *text = tx;
    *len = tl;
    return TS_OK;
}

void report_html_paths(html_doc *h, const char *label, const char *const *paths, size_t n) {
    for (size_t i = 0; i < n; i++) html_para(h, "mono", "%s%s", label, paths[i]);
}

const char *const report_random_router_note =
    "Note: this page cannot tell whether the capture came from a trained model or from a synthetic model with random routers. "
    "Hit rates from random routers are a floor: trained routers concentrate and repeat, random ones do not.";

const char *const report_random_weights_note =
    "Note: this page cannot tell whether the capture came from a trained model or from a synthetic model with random weights. "
    "Activations of random weights say nothing about a trained model's sparsity.";

int report_pick_layers(const double *score, int n, int32_t *pick) {
    if (n <= 6) {
        for (int i = 0; i < n; i++) pick[i] = i;
        return n;
    }
    int lo = 0, hi = 0, m = 0;
    for (int i = 1; i < n; i++) {
        if (score[i] < score[lo]) lo = i;
        if (score[i] > score[hi]) hi = i;
    }
    int cand[5] = {0, n / 2, n - 1, lo, hi};
    for (int c = 0; c < 5; c++) {
        bool dup = false;
        for (int j = 0; j < m; j++) dup |= pick[j] == cand[c];
        if (!dup) pick[m++] = cand[c];
    }
    return m;
}

ts_status report_load_trace(const char *path, uint64_t max_input, router_capture *c) {
    ts_status st = router_capture_load(path, max_input, c);
    if (st) return st;
    if (!c->has_trace) {
        router_capture_free(c);
        return ts_fail(TS_ERR_FORMAT, "%s: no trace in this capture (capture with TURBOSPARK_ROUTER_TRACE=1)", path);
    }
    return TS_OK;
}
