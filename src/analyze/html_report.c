#include "analyze/html_report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag/ffn_census.h"

/* Tableau-like palette, the yellow darkened so thin lines stay visible on white. */
static const char *const palette[10] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1",
                                        "#76b7b2", "#c9a100", "#ff6f91", "#9c755f", "#17becf"};
static const char *color_of(int i) { return i < 0 ? "#8a8a8a" : palette[i % 10]; }

static void out(html_doc *h, const char *fmt, ...) TS_PRINTF(2, 3);
static void out(html_doc *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(h->f, fmt, ap);
    va_end(ap);
}

/* Formats into a heap string (NULL on allocation failure). */
static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

/* Length of the valid UTF-8 sequence at the NUL-terminated s (1..4), or 0. */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : c >= 0xC0 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF8 ? 4 : 0;
    return n && strnlen((const char *)s, n) == n && ts_utf8_valid((const char *)s, n) ? (int)n : 0;
}

void html_text(html_doc *h, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        switch (c) {
        case '&': fputs("&amp;", h->f); s++; continue;
        case '<': fputs("&lt;", h->f); s++; continue;
        case '>': fputs("&gt;", h->f); s++; continue;
        case '"': fputs("&quot;", h->f); s++; continue;
        case '\'': fputs("&#39;", h->f); s++; continue;
        default: break;
        }
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
            fputs("&#xFFFD;", h->f);
            s++;
            continue;
        }
        int n = utf8_len(s);
        if (!n) {
            fputs("&#xFFFD;", h->f);
            s++;
            continue;
        }
        fwrite(s, 1, (size_t)n, h->f);
        s += n;
    }
}

static const char *css =
    "body{font-family:'DejaVu Sans',Arial,sans-serif;color:#1b1b1b;background:#fff;margin:24px auto;max-width:1020px;padding:0 16px;"
    "line-height:1.4}\n"
    "h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}"
    "h3{font-size:15px;margin:18px 0 6px}\n"
    ".mono{font-family:'DejaVu Sans Mono',monospace;font-size:13px;word-break:break-all}\n"
    ".note{background:#fff6db;border-left:4px solid #e0a800;padding:6px 10px}\n"
    "table{border-collapse:collapse;margin:8px 0 14px;font-size:13px}caption{text-align:left;font-weight:bold;padding:4px 0}\n"
    "th,td{border:1px solid #d5d5d5;padding:3px 8px}th{background:#f1f3f6}td.num{text-align:right;"
    "font-family:'DejaVu Sans Mono',monospace}\n"
    "tr:nth-child(even) td{background:#fafafa}\n"
    "figure{margin:12px 0 20px}figcaption{font-weight:bold;font-size:14px;margin-bottom:4px}\n"
    "details{margin:4px 0 0;font-size:12px}summary{cursor:pointer;color:#555}\n"
    "svg text{font-family:'DejaVu Sans',Arial,sans-serif}\n";

ts_status html_open(html_doc *h, const char *path, const char *title) {
    memset(h, 0, sizeof *h);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return ts_fail(TS_ERR_IO, "cannot write %s: it is a directory", path);
    ts_status st = ts_afile_open(&h->af, path);
    if (st) return st;
    h->f = h->af.f;
    h->path = h->af.path;
    /* The policy forbids every external load: the page must stand alone. */
    out(h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
           "<meta name=\"generator\" content=\"turbospark analyze\">\n<title>");
    html_text(h, title);
    out(h, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", css);
    html_text(h, title);
    out(h, "</h1>\n");
    return TS_OK;
}

void html_discard(html_doc *h) {
    ts_afile_abort(&h->af);
    memset(h, 0, sizeof *h);
}

ts_status html_close(html_doc *h) {
    if (h->in_table) html_table_end(h);
    out(h, "</body>\n</html>\n");
    ts_status st;
    if (h->oom) {
        st = ts_fail(TS_ERR_NOMEM, "out of memory writing %s", h->path);
        ts_afile_abort(&h->af);
    } else {
        st = ts_afile_commit(&h->af);
    }
    memset(h, 0, sizeof *h);
    return st;
}

void html_heading(html_doc *h, int level, const char *fmt, ...) {
    if (level < 1 || level > 6) level = 2;
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    if (!s) h->oom = true;
    out(h, "<h%d>", level);
    html_text(h, s ? s : "");
    out(h, "</h%d>\n", level);
    free(s);
}

void html_para(html_doc *h, const char *cls, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    if (!s) h->oom = true;
    if (cls) out(h, "<p class=\"%s\">", cls);
    else out(h, "<p>");
    html_text(h, s ? s : "");
    out(h, "</p>\n");
    free(s);
}

/* Writes tab-separated cells as <th> or <td>; numbers right-aligned. */
static void cells(html_doc *h, const char *tsv, bool head) {
    const char *p = tsv;
    for (;;) {
        const char *e = strchr(p, '\t');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *cell = malloc(n + 1);
        if (cell) {
            memcpy(cell, p, n);
            cell[n] = 0;
            const char *t = cell;
            while (*t == ' ') t++;
            char *end;
            strtod(t, &end);
            bool num = !head && end != t && (!*end || !strcmp(end, "%") || !strcmp(end, "x"));
            out(h, head ? "<th>" : num ? "<td class=\"num\">" : "<td>");
            html_text(h, t);
            out(h, head ? "</th>" : "</td>");
            free(cell);
        } else {
            h->oom = true;
        }
        if (!e) break;
        p = e + 1;
    }
}

void html_table_begin(html_doc *h, const char *caption, const char *headers_tsv) {
    if (h->in_table) html_table_end(h);
    out(h, "<table>");
    if (caption) {
        out(h, "<caption>");
        html_text(h, caption);
        out(h, "</caption>");
    }
    out(h, "\n<thead><tr>");
    cells(h, headers_tsv, true);
    out(h, "</tr></thead>\n<tbody>\n");
    h->in_table = true;
}

void html_table_row(html_doc *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    if (!s) h->oom = true;
    out(h, "<tr>");
    cells(h, s ? s : "", false);
    out(h, "</tr>\n");
    free(s);
}

void html_table_end(html_doc *h) {
    if (!h->in_table) return;
    out(h, "</tbody></table>\n");
    h->in_table = false;
}

/* ---- charts ---- */

enum { CW = 800, CH = 420, PL = 72, PR = 560, PT = 34, PB = 362 }; /* plot box [PL,PR] x [PT,PB] */

typedef struct axis {
    double lo, hi;
    bool log2;
} axis;

static double ax_val(const axis *a, double v) { return a->log2 ? log2(v) : v; }
static double px_x(const axis *a, double v) { return PL + (ax_val(a, v) - a->lo) / (a->hi - a->lo) * (PR - PL); }
static double px_y(const axis *a, double v) { return PB - (ax_val(a, v) - a->lo) / (a->hi - a->lo) * (PB - PT); }

static bool usable(const axis *a, double v) { return isfinite(v) && (!a->log2 || v > 0); }

static double nice_step(double range, int target) {
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* Finds the axis span from explicit limits or the data. */
static void axis_range(axis *a, double lo, double hi, const html_chart *c, bool is_x) {
    double dlo = INFINITY, dhi = -INFINITY;
    for (int s = 0; s < c->n_series; s++)
        for (int i = 0; i < c->series[s].n; i++) {
            double x = c->series[s].x[i], y = c->series[s].y[i];
            double v = is_x ? x : y;
            if (!isfinite(x) || !isfinite(y) || (a->log2 && v <= 0)) continue;
            double t = ax_val(a, v);
            if (t < dlo) dlo = t;
            if (t > dhi) dhi = t;
        }
    a->lo = isfinite(lo) && (!a->log2 || lo > 0) ? ax_val(a, lo) : dlo;
    a->hi = isfinite(hi) && (!a->log2 || hi > 0) ? ax_val(a, hi) : dhi;
    if (!isfinite(a->lo) || !isfinite(a->hi)) a->lo = 0, a->hi = 1;
    if (a->hi <= a->lo) {
        double d = fabs(a->lo) > 0 ? fabs(a->lo) * 0.1 : 1;
        a->lo -= d, a->hi += d;
    }
}

static void fmt_num(char *buf, size_t n, double v, bool percent) {
    if (fabs(v) < 1e-12) v = 0; /* no "-0" at the origin */
    if (percent) snprintf(buf, n, "%g%%", round(v * 1e6) / 1e4 + 0.0);
    else snprintf(buf, n, "%g", v);
}

static const char *dash_of(html_line l) { return l == HTML_DASHED ? " stroke-dasharray=\"7 4\"" : l == HTML_DOTTED ? " stroke-dasharray=\"2 3\"" : ""; }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The chart's numbers: one row per distinct x, one column per series. */
static void data_table(html_doc *h, const html_chart *c) {
    size_t total = 0;
    for (int s = 0; s < c->n_series; s++) total += (size_t)c->series[s].n;
    if (!total) return;
    double *xs = malloc(total * sizeof *xs);
    if (!xs) {
        h->oom = true;
        return;
    }
    size_t u = 0;
    for (int s = 0; s < c->n_series; s++)
        for (int i = 0; i < c->series[s].n; i++)
            if (isfinite(c->series[s].x[i])) xs[u++] = c->series[s].x[i];
    qsort(xs, u, sizeof *xs, cmp_d);
    size_t m = 0;
    for (size_t i = 0; i < u; i++)
        if (!m || xs[i] != xs[m - 1]) xs[m++] = xs[i];
    out(h, "<details><summary>data</summary><table class=\"data\"><thead><tr><th>");
    html_text(h, c->xlabel ? c->xlabel : "x");
    out(h, "</th>");
    for (int s = 0; s < c->n_series; s++) {
        out(h, "<th>");
        html_text(h, c->series[s].name ? c->series[s].name : "");
        out(h, "</th>");
    }
    out(h, "</tr></thead><tbody>\n");
    int *pos = calloc((size_t)(c->n_series ? c->n_series : 1), sizeof *pos); /* series are usually sorted by x: resume the scan */
    for (size_t r = 0; r < m; r++) {
        out(h, "<tr><td class=\"num\">%.6g</td>", xs[r]);
        for (int s = 0; s < c->n_series; s++) {
            const html_series *se = &c->series[s];
            int found = -1;
            int start = pos ? pos[s] : 0;
            for (int k = 0; k < se->n && found < 0; k++) {
                int i = (start + k) % se->n;
                if (se->x[i] == xs[r]) found = i;
            }
            if (found >= 0 && pos) pos[s] = found;
            if (found >= 0 && isfinite(se->y[found])) {
                if (c->ypercent) out(h, "<td class=\"num\">%.2f%%</td>", 100 * se->y[found]);
                else out(h, "<td class=\"num\">%.6g</td>", se->y[found]);
            } else {
                out(h, "<td></td>");
            }
        }
        out(h, "</tr>\n");
    }
    free(pos);
    out(h, "</tbody></table></details>\n");
    free(xs);
}

void html_chart_svg(html_doc *h, const html_chart *c) {
    if (h->in_table) html_table_end(h);
    int id = ++h->n_charts;
    axis ax = {.log2 = c->xlog2}, ay = {0};
    axis_range(&ax, c->xmin, c->xmax, c, true);
    axis_range(&ay, c->ymin, c->ymax, c, false);
    out(h, "<figure>\n<figcaption>");
    html_text(h, c->title ? c->title : "");
    out(h, "</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", CW, CH,
        CW, CH);
    out(h, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", CW, CH);
    out(h, "<defs><clipPath id=\"clip%d\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/></clipPath></defs>\n", id, PL, PT - 2, PR - PL + 2,
        PB - PT + 4);
    out(h, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fbfbfd\" stroke=\"#444\" stroke-width=\"1\"/>\n", PL, PT, PR - PL, PB - PT);
    char lab[64];
    /* x ticks */
    if (ax.log2) {
        int e0 = (int)ceil(ax.lo - 1e-9), e1 = (int)floor(ax.hi + 1e-9);
        int step = 1;
        while ((e1 - e0) / step > 10) step *= 2;
        for (int e = e0; e <= e1; e++) {
            if (((e % step) + step) % step) continue;
            double x = PL + (e - ax.lo) / (ax.hi - ax.lo) * (PR - PL);
            out(h, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e3e3e3\"/>", x, PT, x, PB);
            out(h, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>", x, PB, x, PB + 5);
            out(h, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">2<tspan dy=\"-5\" font-size=\"9\">%d</tspan></text>\n", x,
                PB + 19, e);
        }
    } else {
        double st = nice_step(ax.hi - ax.lo, 8);
        bool ints = true; /* layer numbers, slot counts: no fractional ticks */
        for (int s = 0; s < c->n_series && ints; s++)
            for (int i = 0; i < c->series[s].n && ints; i++) ints = !isfinite(c->series[s].x[i]) || c->series[s].x[i] == floor(c->series[s].x[i]);
        if (ints && st < 1) st = 1;
        for (double v = ceil(ax.lo / st - 1e-9) * st; v <= ax.hi + st * 1e-9; v += st) {
            double x = px_x(&ax, v);
            fmt_num(lab, sizeof lab, v, false);
            out(h, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e3e3e3\"/>", x, PT, x, PB);
            out(h, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>", x, PB, x, PB + 5);
            out(h, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", x, PB + 18, lab);
        }
    }
    /* y ticks */
    {
        double st = nice_step(ay.hi - ay.lo, 6);
        for (double v = ceil(ay.lo / st - 1e-9) * st; v <= ay.hi + st * 1e-9; v += st) {
            double y = px_y(&ay, v);
            fmt_num(lab, sizeof lab, v, c->ypercent);
            out(h, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>", PL, y, PR, y);
            out(h, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>", PL - 5, y, PL, y);
            out(h, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", PL - 8, y + 4, lab);
        }
    }
    /* axis labels */
    out(h, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">", (PL + PR) / 2, CH - 16);
    html_text(h, c->xlabel ? c->xlabel : "");
    out(h, "</text>\n<text x=\"18\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">", (PT + PB) / 2,
        (PT + PB) / 2);
    html_text(h, c->ylabel ? c->ylabel : "");
    out(h, "</text>\n<g clip-path=\"url(#clip%d)\">\n", id);
    /* marks under the data */
    for (int m = 0; m < c->n_marks; m++) {
        const html_mark *mk = &c->marks[m];
        const char *col = color_of(mk->color);
        bool hx = usable(&ax, mk->x), hy = isfinite(mk->y);
        if (hx && !hy) {
            double x = px_x(&ax, mk->x);
            out(h, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\"/>", x, PT, x, PB,
                col);
            out(h, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"%s\" transform=\"rotate(-90 %.1f %d)\" text-anchor=\"end\">", x - 3,
                PT + 6, col, x - 3, PT + 6);
        } else if (hy && !hx && isnan(mk->x)) {
            double y = px_y(&ay, mk->y);
            out(h, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.2\" stroke-dasharray=\"4 3\"/>", PL, y, PR, y,
                col);
            out(h, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" fill=\"%s\" text-anchor=\"end\">", PR - 4, y - 3, col);
        } else if (hx && hy) {
            double x = px_x(&ax, mk->x), y = px_y(&ay, mk->y);
            out(h, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1\"/>", x, y, col);
            out(h, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\">", x + 6, y + 12, col);
        } else {
            continue;
        }
        html_text(h, mk->label ? mk->label : "");
        out(h, "</text>\n");
    }
    /* series */
    for (int s = 0; s < c->n_series; s++) {
        const html_series *se = &c->series[s];
        const char *col = color_of(se->color);
        bool pen = false;
        int drawn = 0;
        for (int i = 0; i < se->n; i++) {
            if (!usable(&ax, se->x[i]) || !isfinite(se->y[i])) {
                pen = false;
                continue;
            }
            if (!drawn++) out(h, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s stroke-linejoin=\"round\" d=\"", col,
                              se->width > 0 ? se->width : 2.0, dash_of(se->line));
            out(h, "%c%.1f %.1f ", pen ? 'L' : 'M', px_x(&ax, se->x[i]), px_y(&ay, se->y[i]));
            pen = true;
        }
        if (drawn) out(h, "\"/>\n");
        if (se->dots)
            for (int i = 0; i < se->n; i++)
                if (usable(&ax, se->x[i]) && isfinite(se->y[i]))
                    out(h, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.8\" fill=\"%s\"/>", px_x(&ax, se->x[i]), px_y(&ay, se->y[i]), col);
        if (se->dots) out(h, "\n");
    }
    out(h, "</g>\n");
    /* legend */
    for (int s = 0; s < c->n_series; s++) {
        const html_series *se = &c->series[s];
        int y = PT + 8 + s * 18;
        if (y > CH - 10) break;
        out(h, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>", PR + 14, y, PR + 40, y,
            color_of(se->color), se->width > 0 ? se->width : 2.0, dash_of(se->line));
        out(h, "<text x=\"%d\" y=\"%d\" font-size=\"11\">", PR + 46, y + 4);
        html_text(h, se->name ? se->name : "");
        out(h, "</text>\n");
    }
    out(h, "</svg>\n");
    data_table(h, c);
    out(h, "</figure>\n");
}

/* ---- data helpers ---- */

static int cmp_u64_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

bool report_coverage_counts(const uint64_t *counts, int32_t n, double *cov) {
    uint64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    cov[0] = 0;
    if (!v) return false;
    memcpy(v, counts, sizeof *v * (size_t)n);
    qsort(v, (size_t)n, sizeof *v, cmp_u64_desc);
    uint64_t tot = 0, acc = 0;
    for (int32_t i = 0; i < n; i++) tot += v[i];
    for (int32_t k = 1; k <= n; k++) {
        acc += v[k - 1];
        cov[k] = tot ? (double)acc / (double)tot : NAN;
    }
    free(v);
    return true;
}

static int cmp_d_desc(const void *a, const void *b) { return cmp_d(b, a); }

bool report_coverage_mass(const double *mass, int32_t n, int points, double *x, double *y) {
    if (points < 2 || n < 1) return false;
    double *v = malloc(sizeof *v * (size_t)n);
    if (!v) return false;
    memcpy(v, mass, sizeof *v * (size_t)n);
    qsort(v, (size_t)n, sizeof *v, cmp_d_desc);
    for (int32_t i = 1; i < n; i++) v[i] += v[i - 1]; /* prefix sums of the sorted masses */
    double tot = v[n - 1];
    for (int g = 0; g < points; g++) {
        double share = (double)g / (points - 1);
        int64_t k = llround(share * n);
        x[g] = share;
        y[g] = !(tot > 0) ? NAN : k ? v[k - 1] / tot : 0;
    }
    free(v);
    return true;
}

double report_count_below_pow2(const uint64_t *hist_count, int e) {
    /* bucket 0 holds exact zeros (below any threshold); b in 1..62 covers
     * [2^(b-33), 2^(b-32)) and is wholly below 2^e when b-32 <= e; 63 holds
     * non-finite values, left out like in the mass shares */
    uint64_t tot = 0, below = 0;
    for (int b = 0; b < FFN_BUCKETS - 1; b++) {
        tot += hist_count[b];
        if (b - (FFN_BUCKET_EXP_OFFSET - 1) <= e) below += hist_count[b];
    }
    return tot ? (double)below / (double)tot : NAN;
}
