/* ts_analyze_router: routing concentration per layer, one group of captures
 * or two compared, as text and (optionally) an HTML page with charts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/report.h"

/* Loads the captures of a group and sums their counts; all must agree in shape. */
static ts_status load_group(const char *const *paths, size_t n, uint64_t max_input, router_capture *sum) {
    if (!n || !paths) return ts_fail(TS_ERR_ARG, "empty capture list");
    for (size_t i = 0; i < n; i++) {
        router_capture c;
        ts_status st = router_capture_load(paths[i], max_input, i ? &c : sum);
        if (st) {
            if (i) router_capture_free(sum);
            return st;
        }
        if (!i) continue;
        if (c.num_layers != sum->num_layers || c.num_experts != sum->num_experts || c.top_k != sum->top_k) {
            st = ts_fail(TS_ERR_FORMAT, "%s: shape (%d layers, %d experts, top_k %d) differs from the first capture of its group", paths[i],
                         c.num_layers, c.num_experts, c.top_k);
            router_capture_free(&c);
            router_capture_free(sum);
            return st;
        }
        for (size_t k = 0; k < (size_t)c.num_layers * (size_t)c.num_experts; k++) sum->counts[k] += c.counts[k];
        router_capture_free(&c);
    }
    return TS_OK;
}

/* Coverage curves and n95/n99 per layer for one or two groups. */
static ts_status router_charts(html_doc *h, const router_capture *a, const router_capture *b) {
    const int32_t E = a->num_experts, L = a->num_layers;
    const router_capture *g[2] = {a, b};
    int ng = b ? 2 : 1;
    ts_status st = TS_OK;
    int32_t *layers = malloc(sizeof *layers * (size_t)L);
    double *score = malloc(sizeof *score * (size_t)L), *x = malloc(sizeof *x * (size_t)(E + 1));
    double *cov = malloc(sizeof *cov * (size_t)(E + 1) * (size_t)L * 2), *mean = calloc((size_t)(E + 1) * 2, sizeof *mean);
    double *n95 = malloc(sizeof *n95 * (size_t)L * 2), *n99 = malloc(sizeof *n99 * (size_t)L * 2), *lx = malloc(sizeof *lx * (size_t)L);
    html_series *se = malloc(sizeof *se * 32);
    html_mark *mk = malloc(sizeof *mk * 40);
    char (*names)[48] = malloc(48 * 32);
    if (!layers || !score || !x || !cov || !mean || !n95 || !n99 || !lx || !se || !mk || !names) {
        st = ts_fail(TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    int n = 0; /* layers routed in group A (the table's rows) */
    for (int32_t l = 0; l < L; l++) {
        if (!router_capture_layer_routes(a, l)) continue;
        router_capture_layer_stats rs;
        if ((st = router_capture_concentration(a->counts + (size_t)l * E, E, &rs))) goto out;
        layers[n] = l;
        score[n] = rs.n95;
        n++;
    }
    for (int32_t k = 0; k <= E; k++) x[k] = k;
    for (int gi = 0; gi < ng; gi++) {
        int used = 0; /* B may not route at a layer A routes at: its curve is empty there */
        for (int i = 0; i < n; i++) {
            const uint64_t *cnt = g[gi]->counts + (size_t)layers[i] * E;
            double *cv = cov + ((size_t)gi * L + i) * (E + 1);
            router_capture_layer_stats rs;
            if ((st = router_capture_concentration(cnt, E, &rs))) goto out;
            n95[gi * L + i] = rs.n95;
            n99[gi * L + i] = rs.n99;
            if (!report_coverage_counts(cnt, E, cv)) {
                st = ts_fail(TS_ERR_NOMEM, "out of memory");
                goto out;
            }
            if (E < 1 || isnan(cv[E])) continue;
            for (int32_t k = 0; k <= E; k++) mean[gi * (E + 1) + k] += cv[k];
            used++;
        }
        for (int32_t k = 0; k <= E; k++) mean[gi * (E + 1) + k] = used ? mean[gi * (E + 1) + k] / used : NAN;
    }
    int32_t pick[6];
    int np = report_pick_layers(score, n, pick);
    int ns = 0, nm = 0;
    static const double diag_x[2] = {0, 1}, diag_y[2] = {0, 1};
    double dx[2] = {diag_x[0], diag_x[1] * E};
    for (int gi = 0; gi < ng; gi++) {
        const char *gn = gi ? "B " : (b ? "A " : "");
        snprintf(names[ns], 48, "%smean of %d layers", gn, n);
        se[ns] = (html_series){names[ns], x, mean + (size_t)gi * (E + 1), E + 1, gi ? HTML_DASHED : HTML_SOLID, 0, 3.2, false};
        ns++;
        for (int p = 0; p < np; p++) {
            int i = pick[p];
            const double *cv = cov + ((size_t)gi * L + i) * (E + 1);
            snprintf(names[ns], 48, "%slayer %d", gn, layers[i]);
            se[ns] = (html_series){names[ns], x, cv, E + 1, gi ? HTML_DASHED : HTML_SOLID, 1 + p, 1.6, false};
            ns++;
            mk[nm++] = (html_mark){n95[gi * L + i], cv[(int)n95[gi * L + i]], "", 1 + p};
            mk[nm++] = (html_mark){n99[gi * L + i], cv[(int)n99[gi * L + i]], "", 1 + p};
        }
    }
    se[ns++] = (html_series){"uniform routing", dx, diag_y, 2, HTML_DOTTED, -1, 1.5, false};
    mk[nm++] = (html_mark){NAN, 0.95, "95% of routed mass", -1};
    mk[nm++] = (html_mark){NAN, 0.99, "99%", -1};
    html_heading(h, 2, "Coverage curves");
    html_para(h, NULL,
              "Share of the layer's routed picks held by its k most-picked experts. A curve that rises steeply and flattens early "
              "means a few experts carry the layer; the dotted diagonal is uniform routing. Dots mark each plotted layer's n95 and n99.");
    html_chart_svg(h, &(html_chart){.title = "Routed mass covered vs experts (sorted by count)", .xlabel = "experts (most picked first)",
                                     .ylabel = "share of routed picks", .xmin = 0, .xmax = E, .ymin = 0, .ymax = 1, .ypercent = true,
                                     .series = se, .n_series = ns, .marks = mk, .n_marks = nm});
    /* n95 / n99 by layer */
    ns = 0;
    for (int i = 0; i < n; i++) lx[i] = layers[i];
    for (int gi = 0; gi < ng; gi++) {
        const char *gn = gi ? "B " : (b ? "A " : "");
        snprintf(names[ns], 48, "%sn95", gn);
        se[ns] = (html_series){names[ns], lx, n95 + gi * L, n, gi ? HTML_DASHED : HTML_SOLID, 0, 2, true};
        ns++;
        snprintf(names[ns], 48, "%sn99", gn);
        se[ns] = (html_series){names[ns], lx, n99 + gi * L, n, gi ? HTML_DASHED : HTML_SOLID, 1, 2, true};
        ns++;
    }
    char ul[64];
    snprintf(ul, sizeof ul, "uniform n95 = %.0f", ceil(0.95 * E));
    html_mark um[1] = {{NAN, ceil(0.95 * E), ul, -1}};
    html_chart_svg(h, &(html_chart){.title = "Experts needed per layer", .xlabel = "layer", .ylabel = "experts", .xmin = NAN, .xmax = NAN,
                                     .ymin = 0, .ymax = E, .series = se, .n_series = ns, .marks = um, .n_marks = 1});
out:
    free(layers), free(score), free(x), free(cov), free(mean), free(n95), free(n99), free(lx), free(se), free(mk), free(names);
    return st;
}

/* The table, as text (and as page rows when H). */
static ts_status router_report(FILE *T, html_doc *H, const router_capture *a, const router_capture *b) {
    const bool two = b != NULL;
    if (H) {
        html_para(H, NULL, "router concentration: %d layers, %d experts, top_k %d", a->num_layers, a->num_experts, a->top_k);
        html_table_begin(H, "Concentration per layer (layers that never route are left out)",
                         two ? "layer\tpasses\tn95\tn99\tnever\tB n95\tB n99\tB never\tjaccard" : "layer\tpasses\tn95\tn99\tnever");
    }
    fprintf(T, "router concentration: %d layers, %d experts, top_k %d\n", a->num_layers, a->num_experts, a->top_k);
    fprintf(T, "%-6s %8s %6s %6s %6s", "layer", "passes", "n95", "n99", "never");
    if (two) fprintf(T, " | %6s %6s %6s %8s", "B n95", "B n99", "never", "jaccard");
    fprintf(T, "\n");
    bool *sa = calloc((size_t)a->num_experts, 1), *sb = calloc((size_t)a->num_experts, 1);
    if (!sa || !sb) {
        free(sa);
        free(sb);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    double m95 = 0, m99 = 0, mnv = 0, mb95 = 0, mb99 = 0, mbnv = 0, mj = 0;
    int nl = 0;
    ts_status st = TS_OK;
    for (int32_t l = 0; l < a->num_layers && !st; l++) {
        if (!router_capture_layer_routes(a, l)) continue;
        router_capture_layer_stats s;
        const uint64_t *ca = a->counts + (size_t)l * a->num_experts;
        if ((st = router_capture_concentration(ca, a->num_experts, &s))) break;
        fprintf(T, "%-6d %8llu %6d %6d %6d", l, (unsigned long long)router_capture_passes(a, l), s.n95, s.n99, s.never);
        char row[256];
        int rl = snprintf(row, sizeof row, "%d\t%llu\t%d\t%d\t%d", l, (unsigned long long)router_capture_passes(a, l), s.n95, s.n99, s.never);
        m95 += s.n95, m99 += s.n99, mnv += s.never;
        if (two) {
            router_capture_layer_stats t;
            const uint64_t *cb = b->counts + (size_t)l * b->num_experts;
            if ((st = router_capture_concentration(cb, b->num_experts, &t)) || (st = router_layer_top_set(ca, a->num_experts, 0.95, sa)) ||
                (st = router_layer_top_set(cb, b->num_experts, 0.95, sb)))
                break;
            int inter = 0, uni = 0;
            for (int32_t e = 0; e < a->num_experts; e++) inter += sa[e] && sb[e], uni += sa[e] || sb[e];
            double j = uni ? (double)inter / uni : NAN;
            fprintf(T, " | %6d %6d %6d %8.3f", t.n95, t.n99, t.never, j);
            snprintf(row + rl, sizeof row - (size_t)rl, "\t%d\t%d\t%d\t%.3f", t.n95, t.n99, t.never, j);
            mb95 += t.n95, mb99 += t.n99, mbnv += t.never, mj += j;
        }
        fprintf(T, "\n");
        if (H) html_table_row(H, "%s", row);
        nl++;
    }
    free(sa);
    free(sb);
    if (st) return st;
    if (nl) {
        fprintf(T, "%-6s %8s %6.1f %6.1f %6.1f", "mean", "", m95 / nl, m99 / nl, mnv / nl);
        if (two) fprintf(T, " | %6.1f %6.1f %6.1f %8.3f", mb95 / nl, mb99 / nl, mbnv / nl, mj / nl);
        fprintf(T, "\n");
        if (H && two) html_table_row(H, "mean\t\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f", m95 / nl, m99 / nl, mnv / nl, mb95 / nl, mb99 / nl, mbnv / nl, mj / nl);
        else if (H) html_table_row(H, "mean\t\t%.1f\t%.1f\t%.1f", m95 / nl, m99 / nl, mnv / nl);
    }
    fprintf(T, "(n95/n99: fewest experts covering 95%%/99%% of the layer's routed picks; uniform routing gives n95 = %.0f)\n",
            ceil(0.95 * a->num_experts));
    if (!H) return TS_OK;
    html_table_end(H);
    html_para(H, NULL,
              "n95/n99: fewest experts covering 95%%/99%% of the layer's routed picks; uniform routing gives n95 = %.0f. never: experts "
              "never picked. jaccard: overlap of the two groups' n95 sets (1 = same experts).",
              ceil(0.95 * a->num_experts));
    return router_charts(H, a, b);
}

ts_status ts_analyze_router(const ts_analyze_router_opts *o, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (!o->n_a || !o->a) return ts_fail(TS_ERR_ARG, "router needs a capture");
    if (o->n_b && !o->b) return ts_fail(TS_ERR_ARG, "group B has no paths");
    ts_status st;
    if ((st = report_check_output(o->html, o->a, o->n_a)) || (st = report_check_output(o->html, o->b, o->n_b))) return st;
    router_capture a, b;
    const bool two = o->n_b > 0;
    if ((st = load_group(o->a, o->n_a, o->max_input, &a))) return st;
    if (two && (st = load_group(o->b, o->n_b, o->max_input, &b))) {
        router_capture_free(&a);
        return st;
    }
    if (two && (a.num_layers != b.num_layers || a.num_experts != b.num_experts)) {
        router_capture_free(&a);
        router_capture_free(&b);
        return ts_fail(TS_ERR_FORMAT, "the two groups have different shapes");
    }
    report_text t;
    html_doc hd;
    bool page = false;
    if (!(st = report_text_open(&t)) && o->html && !(st = report_html_open(&hd, o->html, "turbospark analyze router: routing concentration"))) {
        page = true;
        report_html_paths(&hd, two ? "A: " : "capture: ", o->a, o->n_a);
        if (two) report_html_paths(&hd, "B: ", o->b, o->n_b);
        html_para(&hd, "note", "%s", report_random_router_note);
    }
    if (!st) st = router_report(t.f, page ? &hd : NULL, &a, two ? &b : NULL);
    st = report_finish(&t, &hd, page, st, text, len);
    router_capture_free(&a);
    if (two) router_capture_free(&b);
    return st;
}
