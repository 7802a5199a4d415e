/* Shared plumbing of the four analyzers behind ts_analyze_* (report_*.c):
 * the text report built in memory, the checks every call makes first, and
 * what the pages have in common. */
#ifndef TS_ANALYZE_REPORT_H
#define TS_ANALYZE_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze/html_report.h"
#include "analyze/router_capture.h"
#include "base/base.h"

/* The text report, written with fprintf(t->f, ...) and handed out whole. */
typedef struct report_text {
    FILE *f;    /* memory stream over buf */
    char *buf;  /* (len) bytes + NUL once closed */
    size_t len;
} report_text;

ts_status report_text_open(report_text *t);
/* Closes the stream and hands out the text (ts_free); on a write failure
 * frees it and fails. */
ts_status report_text_close(report_text *t, char **text, size_t *len);
void report_text_discard(report_text *t);

/* Refuses an html path that is one of the inputs: the same string, or the
 * same file (device and inode) when both exist. NULL html passes. */
ts_status report_check_output(const char *html, const char *const *inputs, size_t n);

/* html_open, its message prefixed "html page: ". */
ts_status report_html_open(html_doc *h, const char *path, const char *title);
/* Ends a call: with st = TS_OK, closes the text and then the page (renamed
 * into place) and hands the text out; otherwise, or when either fails,
 * frees the text and removes the page. Returns the first failure. */
ts_status report_finish(report_text *t, html_doc *h, bool page, ts_status st, char **text, size_t *len);
/* One "label path" paragraph per file. */
void report_html_paths(html_doc *h, const char *label, const char *const *paths, size_t n);

extern const char *const report_random_router_note, *const report_random_weights_note;

/* Layers that represent the rest, as indexes 0..n-1 into pick (6 entries):
 * all when n <= 6, else the first, middle and last and the ones with the
 * lowest and highest score. Returns how many. */
int report_pick_layers(const double *score, int n, int32_t *pick);

/* A router capture that must carry a trace (cache replay, windows). */
ts_status report_load_trace(const char *path, uint64_t max_input, router_capture *c);

#endif
