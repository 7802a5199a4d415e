/* A small self-contained HTML report writer for the analyzers: escaped text,
 * tables, and line charts drawn as inline SVG. No scripts, no external
 * stylesheet, font or image: the page renders offline from the file alone.
 *
 * The page is written to a temporary file next to the target and renamed on
 * html_close, so a report is either complete or absent. Write errors and
 * allocation failures are sticky and reported once, at close. */
#ifndef TS_ANALYZE_HTML_REPORT_H
#define TS_ANALYZE_HTML_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

typedef struct html_doc {
    ts_afile af;  /* the temporary file, renamed into place by html_close */
    FILE *f;      /* af.f */
    const char *path; /* af.path, for messages */
    int n_charts; /* charts written so far (unique ids in the page) */
    bool in_table;
    bool oom;     /* an allocation failed: the page is incomplete and html_close refuses it */
} html_doc;

/* Opens PATH.tmp.XXXXXX and writes the head and an <h1> with the title. */
ts_status html_open(html_doc *h, const char *path, const char *title);
/* Finishes the page, syncs and renames it into place. On failure the
 * temporary file is removed and nothing is left at path. */
ts_status html_close(html_doc *h);
/* Abandons the page (an error elsewhere): removes the temporary file. */
void html_discard(html_doc *h);

/* Writes s with &, <, >, ", ' escaped; invalid UTF-8 and control bytes
 * become U+FFFD, so an odd capture path cannot break the page. */
void html_text(html_doc *h, const char *s);
void html_heading(html_doc *h, int level, const char *fmt, ...) TS_PRINTF(3, 4);
/* A paragraph of escaped text; cls is a CSS class ("note", "mono") or NULL. */
void html_para(html_doc *h, const char *cls, const char *fmt, ...) TS_PRINTF(3, 4);

/* A table: headers and cells are tab-separated, escaped. Cells that parse
 * as numbers are right-aligned. */
void html_table_begin(html_doc *h, const char *caption, const char *headers_tsv);
void html_table_row(html_doc *h, const char *fmt, ...) TS_PRINTF(2, 3);
void html_table_end(html_doc *h);

typedef enum html_line { HTML_SOLID = 0, HTML_DASHED = 1, HTML_DOTTED = 2 } html_line;

typedef struct html_series {
    const char *name;
    const double *x, *y; /* (n) points; non-finite y breaks the line */
    int n;
    html_line line;
    int color;           /* palette index; -1 = grey (reference lines) */
    double width;        /* stroke width in px; 0 = 2 */
    bool dots;           /* mark every point */
} html_series;

/* A guide: vertical at x when y is NaN, horizontal at y when x is NaN,
 * a labelled point when both are finite. */
typedef struct html_mark {
    double x, y;
    const char *label;
    int color; /* palette index; -1 = grey */
} html_mark;

typedef struct html_chart {
    const char *title, *xlabel, *ylabel;
    double xmin, xmax, ymin, ymax; /* NaN: taken from the data */
    bool xlog2;                    /* x on a log2 scale (x > 0) */
    bool ypercent;                 /* y values are fractions, labelled as % */
    const html_series *series;
    int n_series;
    const html_mark *marks;
    int n_marks;
} html_chart;

/* Draws the chart as inline SVG with axes, ticks, labels and a legend, and
 * puts its numbers in a collapsed table below it. */
void html_chart_svg(html_doc *h, const html_chart *c);

/* Data helpers for the charts (kept here, next to the only caller). */

/* Router coverage curve: cov[k] for k = 0..n = share of the routed mass held
 * by the k most-picked experts (counts descending). cov has n+1 entries.
 * Returns false on allocation failure. */
bool report_coverage_counts(const uint64_t *counts, int32_t n, double *cov);
/* Neuron-mass coverage on a grid: for g = 0..points-1, x[g] = share of
 * neurons (g / (points-1)), y[g] = share of |a| mass in the top x[g]*n
 * neurons. Returns false on allocation failure. */
bool report_coverage_mass(const double *mass, int32_t n, int points, double *x, double *y);
/* Share of an FFN census row's activations (hist_count, FFN_BUCKETS) in
 * buckets wholly below 2^e, exact zeros included; the count twin of
 * ffn_mass_below_pow2. */
double report_count_below_pow2(const uint64_t *hist_count, int e);

#endif
