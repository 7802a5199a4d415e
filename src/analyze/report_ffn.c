/* ts_analyze_ffn: FFN activation census captures merged and turned into
 * per-layer concentration, threshold shares, token-to-token overlap and a
 * verdict on a neuron cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ffn_capture.h"
#include "analyze/report.h"

/* Neuron-mass coverage per layer and the threshold sweep. */
static ts_status ffn_charts(html_doc *h, const ffn_capture *c) {
    enum { G = 201, NE = 63 }; /* grid points; thresholds 2^-32 .. 2^30 */
    const int32_t L = c->num_layers;
    int32_t *layers = malloc(sizeof *layers * (size_t)L);
    double *score = malloc(sizeof *score * (size_t)L), *cx = malloc(sizeof *cx * G), *cy = malloc(sizeof *cy * G * (size_t)L);
    double *cmean = calloc(G, sizeof *cmean), tx[NE], mb[NE] = {0}, cb[NE] = {0}, diag[2] = {0, 1};
    double *lm = malloc(sizeof *lm * NE * (size_t)L), *lc = malloc(sizeof *lc * NE * (size_t)L);
    ts_status st = TS_OK;
    int nl = 0;
    if (!layers || !score || !cx || !cy || !cmean || !lm || !lc) {
        st = ts_fail(TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int32_t l = 0; l < L; l++) {
        if (!c->tapped[l]) continue;
        ffn_layer_stats fs;
        if ((st = ffn_layer_analyze(c, l, &fs))) goto out;
        layers[nl] = l;
        score[nl] = fs.n90;
        if (!report_coverage_mass(c->mass + (size_t)l * c->inter, c->inter, G, cx, cy + (size_t)nl * G)) {
            st = ts_fail(TS_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int e = 0; e < NE; e++) {
            lm[(size_t)nl * NE + e] = ffn_mass_below_pow2(c, l, e - 32);
            lc[(size_t)nl * NE + e] = report_count_below_pow2(c->hist_count + (size_t)l * FFN_BUCKETS, e - 32);
        }
        nl++;
    }
    for (int j = 0; j < nl; j++) {
        for (int g = 0; g < G; g++) cmean[g] += cy[(size_t)j * G + g] / nl;
        for (int e = 0; e < NE; e++) mb[e] += lm[(size_t)j * NE + e] / nl, cb[e] += lc[(size_t)j * NE + e] / nl;
    }
    for (int e = 0; e < NE; e++) tx[e] = ldexp(1.0, e - 32);
    int32_t pick[6];
    int np = report_pick_layers(score, nl, pick), ns = 0;
    html_series se[16];
    char names[16][40];
    snprintf(names[ns], 40, "mean of %d layers", nl);
    se[ns] = (html_series){names[ns], cx, cmean, G, HTML_SOLID, 0, 3.2, false};
    ns++;
    for (int p = 0; p < np; p++) {
        snprintf(names[ns], 40, "layer %d", layers[pick[p]]);
        se[ns] = (html_series){names[ns], cx, cy + (size_t)pick[p] * G, G, HTML_SOLID, 1 + p, 1.5, false};
        ns++;
    }
    se[ns++] = (html_series){"uniform |a|", diag, diag, 2, HTML_DOTTED, -1, 1.5, false};
    html_mark mk[4] = {{NAN, 0.5, "50%", -1}, {NAN, 0.9, "90%", -1}, {NAN, 0.95, "95%", -1}, {NAN, 0.99, "99%", -1}};
    html_heading(h, 2, "Neuron-mass coverage");
    html_para(h, NULL,
              "Share of the layer's cumulative |a| mass held by its most active neurons (sorted by mass). A curve hugging the top-left "
              "corner means a small hot set does most of the work (a neuron cache could keep it resident); the dotted diagonal is "
              "every neuron equally active. n50/n90/n95/n99 in the table are where a curve crosses the guides.");
    html_chart_svg(h, &(html_chart){.title = "|a| mass covered vs share of neurons", .xlabel = "share of neurons (most active first)",
                                     .ylabel = "share of |a| mass", .xmin = 0, .xmax = 1, .ymin = 0, .ymax = 1, .ypercent = true,
                                     .series = se, .n_series = ns, .marks = mk, .n_marks = 4});
    ns = 0;
    se[ns++] = (html_series){"mass below, mean", tx, mb, NE, HTML_SOLID, 0, 3, false};
    se[ns++] = (html_series){"activations below, mean", tx, cb, NE, HTML_DASHED, 0, 3, false};
    int nps = np < 3 ? np : 3;
    for (int p = 0; p < nps; p++) {
        snprintf(names[ns], 40, "mass below, layer %d", layers[pick[p]]);
        se[ns] = (html_series){names[ns], tx, lm + (size_t)pick[p] * NE, NE, HTML_SOLID, 1 + p, 1.4, false};
        ns++;
        snprintf(names[ns], 40, "activations below, layer %d", layers[pick[p]]);
        se[ns] = (html_series){names[ns], tx, lc + (size_t)pick[p] * NE, NE, HTML_DASHED, 1 + p, 1.4, false};
        ns++;
    }
    html_mark tm[3] = {{ldexp(1, -10), NAN, "2^-10", -1}, {ldexp(1, -7), NAN, "2^-7", -1}, {ldexp(1, -4), NAN, "2^-4", -1}};
    html_heading(h, 2, "Threshold sweep");
    html_para(h, NULL,
              "For a cut-off t, the share of |a| mass (solid) and of activations (dashed) whose magnitude is wholly below t, swept over "
              "the census bucket edges 2^-32 .. 2^30 (exact zeros count as below every t). Skipping activations under t saves the "
              "dashed share of the down-projection work and loses the solid share of the mass: a good threshold sits where the dashed "
              "line is high and the solid line still near zero.");
    html_chart_svg(h, &(html_chart){.title = "Share below a threshold", .xlabel = "threshold t on |a|", .ylabel = "share below t",
                                     .xmin = NAN, .xmax = NAN, .ymin = 0, .ymax = 1, .xlog2 = true, .ypercent = true, .series = se,
                                     .n_series = ns, .marks = tm, .n_marks = 3});
out:
    free(layers), free(score), free(cx), free(cy), free(cmean), free(lm), free(lc);
    return st;
}

static ts_status ffn_report(FILE *T, html_doc *H, const ffn_capture *c) {
    if (H) {
        html_para(H, NULL, "FFN activation census: %d layers, inter %d, %llu decode passes (%llu prefill passes not censused)", c->num_layers,
                  c->inter, (unsigned long long)c->decode_passes, (unsigned long long)c->prefill_passes);
        char hdr[256];
        snprintf(hdr, sizeof hdr, "layer\tn50\tn90\tn95\tn99\t<2^-10\t<2^-7\t<2^-4\tovl@%d\tovl@%d\tovl@%d\tovl@%d", c->overlap_k[0],
                 c->overlap_k[1], c->overlap_k[2], c->overlap_k[3]);
        html_table_begin(H, "Per tapped layer", hdr);
    }
    fprintf(T, "FFN activation census: %d layers, inter %d, %llu decode passes (%llu prefill passes not censused)\n", c->num_layers, c->inter,
            (unsigned long long)c->decode_passes, (unsigned long long)c->prefill_passes);
    fprintf(T, "%-6s %6s %6s %6s %6s | %8s %8s %8s |", "layer", "n50", "n90", "n95", "n99", "<2^-10", "<2^-7", "<2^-4");
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) fprintf(T, " ovl@%-5d", c->overlap_k[k]);
    fprintf(T, "\n");
    ffn_layer_stats mean = {0};
    int nl = 0;
    ts_status st;
    for (int32_t l = 0; l < c->num_layers; l++) {
        if (!c->tapped[l]) continue;
        ffn_layer_stats s;
        if ((st = ffn_layer_analyze(c, l, &s))) return st;
        fprintf(T, "%-6d %6d %6d %6d %6d | %7.2f%% %7.2f%% %7.2f%% |", l, s.n50, s.n90, s.n95, s.n99, 100 * s.below[0], 100 * s.below[1],
                100 * s.below[2]);
        for (int k = 0; k < FFN_N_OVERLAP_K; k++) fprintf(T, " %8.3f", s.overlap[k]);
        fprintf(T, "\n");
        if (H)
            html_table_row(H, "%d\t%d\t%d\t%d\t%d\t%.2f%%\t%.2f%%\t%.2f%%\t%.3f\t%.3f\t%.3f\t%.3f", l, s.n50, s.n90, s.n95, s.n99,
                           100 * s.below[0], 100 * s.below[1], 100 * s.below[2], s.overlap[0], s.overlap[1], s.overlap[2], s.overlap[3]);
        mean.n50 += s.n50, mean.n90 += s.n90, mean.n95 += s.n95, mean.n99 += s.n99;
        for (int i = 0; i < 3; i++) mean.below[i] += s.below[i];
        for (int k = 0; k < FFN_N_OVERLAP_K; k++) mean.overlap[k] += s.overlap[k], mean.chance[k] = s.chance[k];
        nl++;
    }
    fprintf(T, "%-6s %6.0f %6.0f %6.0f %6.0f | %7.2f%% %7.2f%% %7.2f%% |", "mean", (double)mean.n50 / nl, (double)mean.n90 / nl,
            (double)mean.n95 / nl, (double)mean.n99 / nl, 100 * mean.below[0] / nl, 100 * mean.below[1] / nl, 100 * mean.below[2] / nl);
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) fprintf(T, " %8.3f", mean.overlap[k] / nl);
    fprintf(T, "\n%-6s %6s %6s %6s %6s | %8s %8s %8s |", "chance", "", "", "", "", "", "", "");
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) fprintf(T, " %8.3f", mean.chance[k]);
    fprintf(T, "\n");
    if (H) {
        html_table_row(H, "mean\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f%%\t%.2f%%\t%.2f%%\t%.3f\t%.3f\t%.3f\t%.3f", (double)mean.n50 / nl,
                       (double)mean.n90 / nl, (double)mean.n95 / nl, (double)mean.n99 / nl, 100 * mean.below[0] / nl, 100 * mean.below[1] / nl,
                       100 * mean.below[2] / nl, mean.overlap[0] / nl, mean.overlap[1] / nl, mean.overlap[2] / nl, mean.overlap[3] / nl);
        html_table_row(H, "chance\t\t\t\t\t\t\t\t%.3f\t%.3f\t%.3f\t%.3f", mean.chance[0], mean.chance[1], mean.chance[2], mean.chance[3]);
        html_table_end(H);
    }
    /* Verdict: a neuron cache keeps a hot set resident and streams the rest.
     * It pays when (a) a small set carries most of the mass and (b) the hot
     * set persists from token to token (overlap well above chance). */
    double hot = (double)mean.n90 / nl / c->inter;
    int kq = 0; /* the K nearest a quarter of the width */
    for (int k = 1; k < FFN_N_OVERLAP_K; k++)
        if (fabs(c->overlap_k[k] - c->inter / 4.0) < fabs(c->overlap_k[kq] - c->inter / 4.0)) kq = k;
    double lift = (mean.overlap[kq] / nl) / mean.chance[kq];
    bool pays = hot <= 0.5 && lift >= 2.0;
    fprintf(T, "verdict: %s a neuron cache: 90%% of |a| mass sits in %.1f%% of neurons; consecutive-token top-%d overlap is %.2fx chance "
               "(pays when <= 50%% and >= 2x).\n",
            pays ? "sparse enough for" : "not sparse enough for", 100 * hot, c->overlap_k[kq], lift);
    if (!H) return TS_OK;
    html_para(H, NULL,
              "verdict: %s a neuron cache: 90%% of |a| mass sits in %.1f%% of neurons; consecutive-token top-%d overlap is %.2fx chance "
              "(pays when <= 50%% and >= 2x).",
              pays ? "sparse enough for" : "not sparse enough for", 100 * hot, c->overlap_k[kq], lift);
    html_para(H, NULL,
              "nXX: fewest neurons holding XX%% of the layer's cumulative |a| mass. <2^-e: share of the mass in activations wholly "
              "below 2^-e (about 1e-3, 1e-2, 1e-1). ovl@K: mean share of a token's top-K neurons that were also in the previous "
              "token's top-K; chance is K / inter.");
    return ffn_charts(H, c);
}

ts_status ts_analyze_ffn(const ts_analyze_ffn_opts *o, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (!o->n_captures || !o->captures) return ts_fail(TS_ERR_ARG, "ffn needs a capture");
    ts_status st = report_check_output(o->html, o->captures, o->n_captures);
    if (st) return st;
    ffn_capture c;
    for (size_t i = 0; i < o->n_captures; i++) {
        ffn_capture x;
        if ((st = ffn_capture_load(o->captures[i], o->max_input, i ? &x : &c))) {
            if (i) ffn_capture_free(&c);
            return st;
        }
        if (i) {
            st = ffn_capture_merge(&c, &x, o->captures[i]);
            ffn_capture_free(&x);
            if (st) {
                ffn_capture_free(&c);
                return st;
            }
        }
    }
    report_text t;
    html_doc hd;
    bool page = false;
    if (!(st = report_text_open(&t)) && o->html && !(st = report_html_open(&hd, o->html, "turbospark analyze ffn: FFN activation census"))) {
        page = true;
        report_html_paths(&hd, "capture: ", o->captures, o->n_captures);
        html_para(&hd, "note", "%s", report_random_weights_note);
    }
    if (!st) st = ffn_report(t.f, page ? &hd : NULL, &c);
    st = report_finish(&t, &hd, page, st, text, len);
    ffn_capture_free(&c);
    return st;
}
