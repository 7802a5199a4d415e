/* turbospark analyze router|cache|window|ffn ... : reads instrument captures
 * and prints the decisions they support. All arithmetic is in src/analyze/;
 * this file parses flags and prints tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ffn_capture.h"
#include "analyze/html_report.h"
#include "analyze/router_capture.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark analyze router A.json[,A2.json...] [B.json[,...]] [--html FILE]\n"
            "       turbospark analyze cache TRACE.json [--slots 8,16,32] [--skip N] [--policy lfu,lru,belady] [--html FILE]\n"
            "       turbospark analyze window TRACE.json [--skip N] [--m 2,4,8,16] [--html FILE]\n"
            "       turbospark analyze ffn CAP.json[,CAP2.json...] [--html FILE]\n");
}

/* ---- the --html page: the same tables as the text, plus charts ---- */

static const char *random_router_note =
    "Note: this page cannot tell whether the capture came from a trained model or from a synthetic model with random routers. "
    "Hit rates from random routers are a floor: trained routers concentrate and repeat, random ones do not.";

static const char *random_weights_note =
    "Note: this page cannot tell whether the capture came from a trained model or from a synthetic model with random weights. "
    "Activations of random weights say nothing about a trained model's sparsity.";

/* Removes "--html FILE" from argv (for the analyzers with positional
 * arguments). Returns -1 after printing an error. */
static int take_html(int *argc, char **argv, const char **html) {
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--html")) continue;
        if (i + 1 >= *argc || !argv[i + 1][0]) return cli_error("analyze", "--html needs a file name"), -1;
        if (*html) return cli_error("analyze", "--html given twice"), -1;
        *html = argv[i + 1];
        for (int j = i + 2; j < *argc; j++) argv[j - 2] = argv[j];
        *argc -= 2;
        i--;
    }
    return 0;
}

static int html_start(html_doc *h, const char *path, const char *title) {
    if (html_open(h, path, title) != TS_OK) return cli_error("analyze", "--html: %s", ts_last_error());
    return 0;
}

static int html_finish(html_doc *h) {
    if (html_close(h) != TS_OK) return cli_error("analyze", "--html: %s", ts_last_error());
    return 0;
}

/* Lists the files of a comma-separated group, one per line. */
static void html_paths(html_doc *h, const char *label, const char *list) {
    char buf[4096]; /* load_group already refused longer lists */
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) html_para(h, "mono", "%s%s", label, t);
}

/* Up to 5 layers that represent the rest: all when few, else the first,
 * middle and last, and the ones with the lowest and highest score. */
static int pick_layers(const int32_t *layers, const double *score, int n, int32_t *pick) {
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
    (void)layers;
    return m;
}

/* Coverage curves and n95/n99 per layer for one or two groups. */
static void router_charts(html_doc *h, const router_capture *a, const router_capture *b) {
    const int32_t E = a->num_experts, L = a->num_layers;
    const router_capture *g[2] = {a, b};
    int ng = b ? 2 : 1;
    int32_t *layers = malloc(sizeof *layers * (size_t)L);
    double *score = malloc(sizeof *score * (size_t)L), *x = malloc(sizeof *x * (size_t)(E + 1));
    double *cov = malloc(sizeof *cov * (size_t)(E + 1) * (size_t)L * 2), *mean = calloc((size_t)(E + 1) * 2, sizeof *mean);
    double *n95 = malloc(sizeof *n95 * (size_t)L * 2), *n99 = malloc(sizeof *n99 * (size_t)L * 2), *lx = malloc(sizeof *lx * (size_t)L);
    html_series *se = malloc(sizeof *se * 32);
    html_mark *mk = malloc(sizeof *mk * 40);
    char (*names)[48] = malloc(48 * 32);
    if (!layers || !score || !x || !cov || !mean || !n95 || !n99 || !lx || !se || !mk || !names) goto out;
    int n = 0; /* layers routed in group A (the table's rows) */
    for (int32_t l = 0; l < L; l++) {
        if (!router_capture_layer_routes(a, l)) continue;
        router_layer_stats st;
        router_layer_concentration(a->counts + (size_t)l * E, E, &st);
        layers[n] = l;
        score[n] = st.n95;
        n++;
    }
    for (int32_t k = 0; k <= E; k++) x[k] = k;
    for (int gi = 0; gi < ng; gi++) {
        int used = 0; /* B may not route at a layer A routes at: its curve is empty there */
        for (int i = 0; i < n; i++) {
            const uint64_t *cnt = g[gi]->counts + (size_t)layers[i] * E;
            double *cv = cov + ((size_t)gi * L + i) * (E + 1);
            router_layer_stats st;
            router_layer_concentration(cnt, E, &st);
            n95[gi * L + i] = st.n95;
            n99[gi * L + i] = st.n99;
            report_coverage_counts(cnt, E, cv);
            if (E < 1 || isnan(cv[E])) continue;
            for (int32_t k = 0; k <= E; k++) mean[gi * (E + 1) + k] += cv[k];
            used++;
        }
        for (int32_t k = 0; k <= E; k++) mean[gi * (E + 1) + k] = used ? mean[gi * (E + 1) + k] / used : NAN;
    }
    int32_t pick[6];
    int np = pick_layers(layers, score, n, pick);
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
}

/* Splits "a,b,c" into at most max integers in [lo, hi]. */
static int parse_int_list(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out, int max) {
    char buf[1024];
    if (strlen(s) >= sizeof buf) { cli_error("analyze", "%s: list too long", flag); return -1; }
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) { cli_error("analyze", "%s: more than %d values", flag, max); return -1; }
        if (!cli_parse_i64("analyze", flag, t, lo, hi, &out[n])) return -1;
        n++;
    }
    if (!n) { cli_error("analyze", "%s: empty list", flag); return -1; }
    return n;
}

/* Loads a comma-separated group and sums its counts; all must agree in shape. */
static int load_group(const char *list, router_capture *sum) {
    char buf[4096];
    if (strlen(list) >= sizeof buf) return cli_error("analyze", "capture list too long (%zu characters)", strlen(list));
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        router_capture c;
        if (router_capture_load(t, &c) != TS_OK) {
            if (n) router_capture_free(sum);
            return cli_error("analyze", "%s", ts_last_error());
        }
        if (!n) {
            *sum = c;
        } else {
            if (c.num_layers != sum->num_layers || c.num_experts != sum->num_experts || c.top_k != sum->top_k) {
                router_capture_free(&c);
                router_capture_free(sum);
                return cli_error("analyze", "%s: shape (%d layers, %d experts, top_k %d) differs from the first capture of its group", t,
                                 c.num_layers, c.num_experts, c.top_k);
            }
            for (size_t i = 0; i < (size_t)c.num_layers * (size_t)c.num_experts; i++) sum->counts[i] += c.counts[i];
            router_capture_free(&c);
        }
        n++;
    }
    if (!n) return cli_error("analyze", "empty capture list");
    return 0;
}

static int analyze_router(int argc, char **argv) {
    const char *html = NULL;
    if (take_html(&argc, argv, &html)) return 1;
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-') return cli_error("analyze", "unknown option '%s'", argv[i]);
    if (argc < 2 || argc > 3) { return cli_error("analyze", "router takes one or two capture groups"); }
    router_capture a, b;
    if (load_group(argv[1], &a)) return 1;
    bool two = argc == 3;
    if (two && load_group(argv[2], &b)) { router_capture_free(&a); return 1; }
    if (two && (a.num_layers != b.num_layers || a.num_experts != b.num_experts)) {
        router_capture_free(&a);
        router_capture_free(&b);
        return cli_error("analyze", "the two groups have different shapes");
    }
    html_doc hd, *H = NULL;
    if (html) {
        if (html_start(&hd, html, "turbospark analyze router: routing concentration")) {
            router_capture_free(&a);
            if (two) router_capture_free(&b);
            return 1;
        }
        H = &hd;
        html_paths(H, two ? "A: " : "capture: ", argv[1]);
        if (two) html_paths(H, "B: ", argv[2]);
        html_para(H, "note", "%s", random_router_note);
        html_para(H, NULL, "router concentration: %d layers, %d experts, top_k %d", a.num_layers, a.num_experts, a.top_k);
        html_table_begin(H, "Concentration per layer (layers that never route are left out)",
                         two ? "layer\tpasses\tn95\tn99\tnever\tB n95\tB n99\tB never\tjaccard" : "layer\tpasses\tn95\tn99\tnever");
    }
    printf("router concentration: %d layers, %d experts, top_k %d\n", a.num_layers, a.num_experts, a.top_k);
    printf("%-6s %8s %6s %6s %6s", "layer", "passes", "n95", "n99", "never");
    if (two) printf(" | %6s %6s %6s %8s", "B n95", "B n99", "never", "jaccard");
    printf("\n");
    bool *sa = calloc((size_t)a.num_experts, 1), *sb = calloc((size_t)a.num_experts, 1);
    double m95 = 0, m99 = 0, mnv = 0, mb95 = 0, mb99 = 0, mbnv = 0, mj = 0;
    int nl = 0;
    for (int32_t l = 0; l < a.num_layers; l++) {
        if (!router_capture_layer_routes(&a, l)) continue;
        router_layer_stats s;
        const uint64_t *ca = a.counts + (size_t)l * a.num_experts;
        router_layer_concentration(ca, a.num_experts, &s);
        printf("%-6d %8llu %6d %6d %6d", l, (unsigned long long)router_capture_passes(&a, l), s.n95, s.n99, s.never);
        char row[256];
        int rl = snprintf(row, sizeof row, "%d\t%llu\t%d\t%d\t%d", l, (unsigned long long)router_capture_passes(&a, l), s.n95, s.n99, s.never);
        m95 += s.n95, m99 += s.n99, mnv += s.never;
        if (two) {
            router_layer_stats t;
            const uint64_t *cb = b.counts + (size_t)l * b.num_experts;
            router_layer_concentration(cb, b.num_experts, &t);
            router_layer_top_set(ca, a.num_experts, 0.95, sa);
            router_layer_top_set(cb, b.num_experts, 0.95, sb);
            int inter = 0, uni = 0;
            for (int32_t e = 0; e < a.num_experts; e++) inter += sa[e] && sb[e], uni += sa[e] || sb[e];
            double j = uni ? (double)inter / uni : NAN;
            printf(" | %6d %6d %6d %8.3f", t.n95, t.n99, t.never, j);
            snprintf(row + rl, sizeof row - (size_t)rl, "\t%d\t%d\t%d\t%.3f", t.n95, t.n99, t.never, j);
            mb95 += t.n95, mb99 += t.n99, mbnv += t.never, mj += j;
        }
        printf("\n");
        if (H) html_table_row(H, "%s", row);
        nl++;
    }
    if (nl) {
        printf("%-6s %8s %6.1f %6.1f %6.1f", "mean", "", m95 / nl, m99 / nl, mnv / nl);
        if (two) printf(" | %6.1f %6.1f %6.1f %8.3f", mb95 / nl, mb99 / nl, mbnv / nl, mj / nl);
        printf("\n");
        if (H && two) html_table_row(H, "mean\t\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f", m95 / nl, m99 / nl, mnv / nl, mb95 / nl, mb99 / nl, mbnv / nl, mj / nl);
        else if (H) html_table_row(H, "mean\t\t%.1f\t%.1f\t%.1f", m95 / nl, m99 / nl, mnv / nl);
    }
    printf("(n95/n99: fewest experts covering 95%%/99%% of the layer's routed picks; uniform routing gives n95 = %.0f)\n",
           ceil(0.95 * a.num_experts));
    int rc = 0;
    if (H) {
        html_table_end(H);
        html_para(H, NULL,
                  "n95/n99: fewest experts covering 95%%/99%% of the layer's routed picks; uniform routing gives n95 = %.0f. never: experts "
                  "never picked. jaccard: overlap of the two groups' n95 sets (1 = same experts).",
                  ceil(0.95 * a.num_experts));
        router_charts(H, &a, two ? &b : NULL);
        rc = html_finish(H);
    }
    free(sa);
    free(sb);
    router_capture_free(&a);
    if (two) router_capture_free(&b);
    return rc;
}

/* Hit rate against slots for each policy, top_k .. num_experts. */
static int cache_chart(html_doc *h, const router_capture *c, const int64_t *given, int n_given, const replay_policy *pols, int n_pols,
                       int64_t skip) {
    static const char *pname[3] = {"lfu", "lru", "belady"};
    const int32_t k = c->top_k, E = c->num_experts;
    int64_t sl[16 + 17];
    int n = 0;
    int steps = E - k < 16 ? E - k : 16;
    for (int i = 0; i <= steps; i++) sl[n++] = k + (steps ? (int64_t)llround((double)i * (E - k) / steps) : 0);
    for (int i = 0; i < n_given; i++) sl[n++] = given[i];
    for (int i = 1; i < n; i++) /* sort, drop duplicates */
        for (int j = i; j > 0 && sl[j] < sl[j - 1]; j--) {
            int64_t t = sl[j];
            sl[j] = sl[j - 1];
            sl[j - 1] = t;
        }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!m || sl[i] != sl[m - 1]) sl[m++] = sl[i];
    double xs[33], ys[3][33];
    for (int i = 0; i < m; i++) xs[i] = (double)sl[i];
    for (int pi = 0; pi < n_pols; pi++)
        for (int i = 0; i < m; i++) {
            uint64_t hits = 0, req = 0;
            for (int32_t l = 0; l < c->num_layers; l++) {
                if (!router_capture_layer_routes(c, l)) continue;
                replay_result r;
                if (router_replay_layer(c, l, (int32_t)sl[i], pols[pi], (uint64_t)skip, 0, &r) != TS_OK)
                    return cli_error("analyze", "%s", ts_last_error());
                hits += r.hits, req += r.requests;
            }
            ys[pi][i] = req ? (double)hits / (double)req : NAN;
        }
    html_series se[3];
    for (int pi = 0; pi < n_pols; pi++)
        se[pi] = (html_series){pname[pols[pi]], xs, ys[pi], m, pols[pi] == REPLAY_BELADY ? HTML_DASHED : HTML_SOLID, pols[pi], 2.2, true};
    html_mark mk[16];
    char lab[16][32];
    for (int i = 0; i < n_given; i++) {
        snprintf(lab[i], sizeof lab[i], "--slots %lld", (long long)given[i]);
        mk[i] = (html_mark){(double)given[i], NAN, lab[i], -1};
    }
    html_heading(h, 2, "Hit rate against slots");
    html_para(h, NULL,
              "Each line replays the trace through one policy with the same number of slots in every MoE layer (skip %lld passes). "
              "Belady (dashed) knows the future and is the ceiling for any policy; the gap between it and lfu/lru is what a smarter "
              "policy could still win. Where a line flattens, more slots buy little. Dashed grey verticals mark the --slots asked for.",
              (long long)skip);
    html_chart_svg(h, &(html_chart){.title = "Expert-cache hit rate vs slots per layer", .xlabel = "slots per layer", .ylabel = "hit rate",
                                     .xmin = NAN, .xmax = NAN, .ymin = 0, .ymax = 1, .ypercent = true, .series = se, .n_series = n_pols,
                                     .marks = mk, .n_marks = n_given});
    return 0;
}

/* A router capture that must carry a trace (cache replay, windows). */
static int load_trace(const char *path, router_capture *c) {
    if (router_capture_load(path, c) != TS_OK) return cli_error("analyze", "%s", ts_last_error());
    if (!c->has_trace) {
        router_capture_free(c);
        return cli_error("analyze", "%s: no trace in this capture (capture with TURBOSPARK_ROUTER_TRACE=1)", path);
    }
    return 0;
}

static int analyze_cache(int argc, char **argv) {
    const char *path = NULL, *html = NULL;
    int64_t slots[16] = {8, 16, 32}, skip = 0;
    int n_slots = 3;
    replay_policy pols[3] = {REPLAY_LFU, REPLAY_LRU, REPLAY_BELADY};
    int n_pols = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--slots")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v || (n_slots = parse_int_list("--slots", v, 1, 1 << 20, slots, 16)) < 0) return 1;
        } else if (!strcmp(argv[i], "--skip")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v || !cli_parse_i64("analyze", "--skip", v, 0, INT64_MAX, &skip)) return 1;
        } else if (!strcmp(argv[i], "--policy")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v) return 1;
            char buf[256];
            if (strlen(v) >= sizeof buf) return cli_error("analyze", "--policy: list too long");
            snprintf(buf, sizeof buf, "%s", v);
            n_pols = 0;
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (n_pols == 3) return cli_error("analyze", "--policy: at most three policies (lfu, lru, belady)");
                if (!strcmp(t, "lfu")) pols[n_pols++] = REPLAY_LFU;
                else if (!strcmp(t, "lru")) pols[n_pols++] = REPLAY_LRU;
                else if (!strcmp(t, "belady")) pols[n_pols++] = REPLAY_BELADY;
                else return cli_error("analyze", "--policy: unknown policy '%s' (lfu, lru, belady)", t);
            }
            if (!n_pols) return cli_error("analyze", "--policy: empty list");
        } else if (!strcmp(argv[i], "--html")) {
            if (!(html = cli_flag_value("analyze", argc, argv, &i))) return 1;
        } else if (argv[i][0] == '-') {
            return cli_error("analyze", "unknown option '%s'", argv[i]);
        } else if (!path) path = argv[i];
        else return cli_error("analyze", "unexpected argument '%s'", argv[i]);
    }
    if (!path) { return cli_error("analyze", "cache needs a trace capture"); }
    router_capture c;
    if (load_trace(path, &c)) return 1;
    static const char *pname[3] = {"lfu", "lru", "belady"};
    html_doc hd, *H = NULL;
    if (html) {
        if (html_start(&hd, html, "turbospark analyze cache: expert-cache replay")) { router_capture_free(&c); return 1; }
        H = &hd;
        html_paths(H, "capture: ", path);
        html_para(H, "note", "%s", random_router_note);
        html_para(H, NULL, "cache replay: %d layers, %d experts, top_k %d, skip %lld passes", c.num_layers, c.num_experts, c.top_k,
                  (long long)skip);
        html_table_begin(H, "Replay through the engine's policy code (all MoE layers together)",
                         "policy\tslots\thit %\trequests\thits\tmisses\tmiss/layer/pass\tcold\tevicted\tprev-named");
    }
    printf("cache replay of %s: %d layers, %d experts, top_k %d, skip %lld passes\n", path, c.num_layers, c.num_experts, c.top_k,
           (long long)skip);
    printf("%-7s %6s %9s %10s %10s %10s %12s %8s %8s %10s\n", "policy", "slots", "hit %", "requests", "hits", "misses",
           "miss/layer/pass", "cold", "evicted", "prev-named");
    int rc = 0;
    for (int pi = 0; pi < n_pols && !rc; pi++)
        for (int si = 0; si < n_slots && !rc; si++) {
            if (slots[si] < c.top_k) { rc = cli_error("analyze", "--slots %lld is below top_k %d", (long long)slots[si], c.top_k); break; }
            replay_result tot = {0};
            int layers = 0;
            for (int32_t l = 0; l < c.num_layers; l++) {
                if (!router_capture_layer_routes(&c, l)) continue;
                replay_result r;
                if (router_replay_layer(&c, l, (int32_t)slots[si], pols[pi], (uint64_t)skip, 0, &r) != TS_OK) {
                    rc = cli_error("analyze", "%s", ts_last_error());
                    break;
                }
                tot.passes += r.passes, tot.requests += r.requests, tot.hits += r.hits, tot.misses += r.misses;
                tot.cold_misses += r.cold_misses, tot.evict_misses += r.evict_misses, tot.prev_named += r.prev_named;
                layers++;
            }
            if (rc) break;
            double passes = layers ? (double)tot.passes / layers : 0;
            if (H)
                html_table_row(H, "%s\t%lld\t%.2f%%\t%llu\t%llu\t%llu\t%.3f\t%llu\t%llu\t%.1f%%", pname[pols[pi]], (long long)slots[si],
                               tot.requests ? 100.0 * tot.hits / tot.requests : NAN, (unsigned long long)tot.requests,
                               (unsigned long long)tot.hits, (unsigned long long)tot.misses,
                               layers && passes ? tot.misses / (double)layers / passes : NAN, (unsigned long long)tot.cold_misses,
                               (unsigned long long)tot.evict_misses, tot.misses ? 100.0 * tot.prev_named / tot.misses : NAN);
            printf("%-7s %6lld %8.2f%% %10llu %10llu %10llu %12.3f %8llu %8llu %9.1f%%\n", pname[pols[pi]], (long long)slots[si],
                   tot.requests ? 100.0 * tot.hits / tot.requests : NAN, (unsigned long long)tot.requests,
                   (unsigned long long)tot.hits, (unsigned long long)tot.misses,
                   layers && passes ? tot.misses / (double)layers / passes : NAN, (unsigned long long)tot.cold_misses,
                   (unsigned long long)tot.evict_misses, tot.misses ? 100.0 * tot.prev_named / tot.misses : NAN);
        }
    if (!rc && c.has_pred) {
        printf("\npilot probe (prediction of layer L's top-k made while layer L-1 ran):\n");
        replay_result r0 = {0};
        for (int32_t l = 1; l < c.num_layers; l++) {
            if (!router_capture_layer_routes(&c, l) || !c.pred_len[l]) continue;
            replay_result r;
            if (router_replay_layer(&c, l, (int32_t)slots[0], REPLAY_LFU, (uint64_t)skip, c.pred_k, &r) != TS_OK) break;
            r0.pred_total += r.pred_total, r0.pred_hits += r.pred_hits;
        }
        printf("PILOT recall: %.2f%% of routed experts were named by the probe\n", r0.pred_total ? 100.0 * r0.pred_hits / r0.pred_total : NAN);
        if (H) {
            html_table_end(H);
            html_heading(H, 2, "Pilot probe");
            html_para(H, NULL, "Prediction of layer L's top-k made while layer L-1 ran. PILOT recall: %.2f%% of routed experts were named by the probe.",
                      r0.pred_total ? 100.0 * r0.pred_hits / r0.pred_total : NAN);
            html_table_begin(H, "Prefetching the first PILOT_K predicted experts (LFU)", "PILOT_K\tslots\tcoverage\treads/hit-saved\tbytes vs base\tmisses");
        }
        printf("%-8s %6s %10s %14s %14s %12s\n", "PILOT_K", "slots", "coverage", "reads/hit-saved", "bytes vs base", "misses");
        for (int si = 0; si < n_slots; si++)
            for (int32_t pk = 1; pk <= c.pred_k; pk++) {
                replay_result t = {0};
                for (int32_t l = 1; l < c.num_layers; l++) {
                    if (!router_capture_layer_routes(&c, l) || !c.pred_len[l]) continue;
                    replay_result r;
                    if (router_replay_layer(&c, l, (int32_t)slots[si], REPLAY_LFU, (uint64_t)skip, pk, &r) != TS_OK) continue;
                    t.misses += r.misses, t.prefetch_reads += r.prefetch_reads, t.prefetch_useful += r.prefetch_useful;
                    t.residual_misses += r.residual_misses;
                }
                if (H)
                    html_table_row(H, "%d\t%lld\t%.2f%%\t%.2f\t%.2fx\t%llu", pk, (long long)slots[si],
                                   t.misses ? 100.0 * t.prefetch_useful / t.misses : NAN,
                                   t.prefetch_useful ? (double)t.prefetch_reads / t.prefetch_useful : NAN,
                                   t.misses ? (double)(t.prefetch_reads + t.residual_misses) / t.misses : NAN, (unsigned long long)t.misses);
                printf("%-8d %6lld %9.2f%% %14.2f %13.2fx %12llu\n", pk, (long long)slots[si],
                       t.misses ? 100.0 * t.prefetch_useful / t.misses : NAN,
                       t.prefetch_useful ? (double)t.prefetch_reads / t.prefetch_useful : NAN,
                       t.misses ? (double)(t.prefetch_reads + t.residual_misses) / t.misses : NAN, (unsigned long long)t.misses);
            }
    }
    if (H) {
        html_table_end(H);
        if (!rc) {
            html_para(H, NULL,
                      "hit %%: requests served from a resident slot (hits, misses: the counts). miss/layer/pass: expert reads per MoE layer per token. cold: misses into an "
                      "empty slot (warm-up); evicted: misses that threw a resident expert out. prev-named: misses whose expert the previous "
                      "pass had also picked.");
            rc = cache_chart(H, &c, slots, n_slots, pols, n_pols, skip);
        }
        if (rc) html_discard(H);
        else rc = html_finish(H);
    }
    router_capture_free(&c);
    return rc;
}

/* Distinct experts per layer against the window length M. */
static int window_chart(html_doc *h, const router_capture *c, const int64_t *given, int n_given, int64_t skip) {
    const int32_t k = c->top_k, E = c->num_experts;
    int64_t mmax = 16;
    for (int i = 0; i < n_given; i++)
        if (given[i] > mmax) mmax = given[i];
    /* M = 1..64 one by one, then up to the largest --m in 64 steps */
    int n = 0;
    int64_t ms[130];
    for (int64_t m = 1; m <= mmax && m <= 64; m++) ms[n++] = m;
    for (int i = 1; mmax > 64 && i <= 64; i++) ms[n++] = 64 + (int64_t)llround((double)i * (mmax - 64) / 64);
    int32_t L = c->num_layers;
    double *xs = malloc(sizeof *xs * (size_t)n), *mean = malloc(sizeof *mean * (size_t)n), *ref = malloc(sizeof *ref * (size_t)n);
    double *per = malloc(sizeof *per * (size_t)n * (size_t)L);
    int32_t *layers = malloc(sizeof *layers * (size_t)L);
    double *score = malloc(sizeof *score * (size_t)L);
    html_series se[10];
    char names[10][32];
    int rc = 0, nl = 0;
    if (!xs || !mean || !ref || !per || !layers || !score) { rc = cli_error("analyze", "out of memory"); goto out; }
    for (int32_t l = 0; l < L; l++)
        if (router_capture_layer_routes(c, l)) layers[nl++] = l;
    for (int i = 0; i < n; i++) {
        xs[i] = (double)ms[i];
        ref[i] = (double)(ms[i] * k < E ? ms[i] * k : E);
        double sum = 0;
        int cnt = 0;
        for (int j = 0; j < nl; j++) {
            double d;
            if (router_window_layer(c, layers[j], (int32_t)ms[i], (uint64_t)skip, &d) != TS_OK) { rc = cli_error("analyze", "%s", ts_last_error()); goto out; }
            per[(size_t)j * n + i] = d;
            if (!isnan(d)) sum += d, cnt++;
        }
        mean[i] = cnt ? sum / cnt : NAN;
    }
    for (int j = 0; j < nl; j++) score[j] = per[(size_t)j * n + (n > 8 ? 7 : n - 1)];
    int32_t pick[6];
    int np = pick_layers(layers, score, nl, pick), ns = 0;
    snprintf(names[ns], 32, "mean of %d layers", nl);
    se[ns] = (html_series){names[ns], xs, mean, n, HTML_SOLID, 0, 3.2, false};
    ns++;
    for (int p = 0; p < np; p++) {
        snprintf(names[ns], 32, "layer %d", layers[pick[p]]);
        se[ns] = (html_series){names[ns], xs, per + (size_t)pick[p] * n, n, HTML_SOLID, 1 + p, 1.4, false};
        ns++;
    }
    se[ns++] = (html_series){"no reuse (M x top_k)", xs, ref, n, HTML_DOTTED, -1, 1.5, false};
    html_mark mk[17];
    char lab[16][24];
    int nm = 0;
    for (int i = 0; i < n_given; i++) {
        snprintf(lab[i], sizeof lab[i], "M = %lld", (long long)given[i]);
        mk[nm++] = (html_mark){(double)given[i], NAN, lab[i], -1};
    }
    char el[48];
    snprintf(el, sizeof el, "all %d experts", E);
    mk[nm++] = (html_mark){NAN, (double)E, el, -1};
    html_heading(h, 2, "Distinct experts against the window");
    html_para(h, NULL,
              "Mean number of distinct experts a layer needs over M consecutive passes (skip %lld): the expert reads to verify M "
              "speculative tokens at once. The dotted line is no reuse at all (M x top_k, capped at the expert count); the further the "
              "curves stay below it, the more a batch of M tokens shares experts.",
              (long long)skip);
    html_chart_svg(h, &(html_chart){.title = "Distinct experts per layer vs window M", .xlabel = "M (consecutive passes)",
                                     .ylabel = "distinct experts per layer", .xmin = NAN, .xmax = NAN, .ymin = 0, .ymax = E,
                                     .series = se, .n_series = ns, .marks = mk, .n_marks = nm});
out:
    free(xs), free(mean), free(ref), free(per), free(layers), free(score);
    return rc;
}

static int analyze_window(int argc, char **argv) {
    const char *path = NULL, *html = NULL;
    int64_t ms[16] = {2, 4, 8, 16}, skip = 0;
    int n_m = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--m")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v || (n_m = parse_int_list("--m", v, 1, 1 << 20, ms, 16)) < 0) return 1;
        } else if (!strcmp(argv[i], "--skip")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v || !cli_parse_i64("analyze", "--skip", v, 0, INT64_MAX, &skip)) return 1;
        } else if (!strcmp(argv[i], "--html")) {
            if (!(html = cli_flag_value("analyze", argc, argv, &i))) return 1;
        } else if (argv[i][0] == '-') {
            return cli_error("analyze", "unknown option '%s'", argv[i]);
        } else if (!path) path = argv[i];
        else return cli_error("analyze", "unexpected argument '%s'", argv[i]);
    }
    if (!path) { return cli_error("analyze", "window needs a trace capture"); }
    router_capture c;
    if (load_trace(path, &c)) return 1;
    html_doc hd, *H = NULL;
    if (html) {
        if (html_start(&hd, html, "turbospark analyze window: experts per speculative window")) { router_capture_free(&c); return 1; }
        H = &hd;
        html_paths(H, "capture: ", path);
        html_para(H, "note", "%s", random_router_note);
        html_para(H, NULL, "speculative window: distinct experts per layer over M consecutive passes (top_k %d, %d experts, skip %lld)", c.top_k,
                  c.num_experts, (long long)skip);
        html_table_begin(H, "Mean over MoE layers", "M\tdistinct/layer\tstep multiplier\tredundancy");
    }
    printf("speculative window of %s: distinct experts per layer over M consecutive passes (top_k %d)\n", path, c.top_k);
    printf("%6s %16s %16s %12s\n", "M", "distinct/layer", "step multiplier", "redundancy");
    for (int mi = 0; mi < n_m; mi++) {
        double sum = 0;
        int layers = 0;
        for (int32_t l = 0; l < c.num_layers; l++) {
            if (!router_capture_layer_routes(&c, l)) continue;
            double d;
            if (router_window_layer(&c, l, (int32_t)ms[mi], (uint64_t)skip, &d) != TS_OK) {
                if (H) html_discard(H);
                router_capture_free(&c);
                return cli_error("analyze", "%s", ts_last_error());
            }
            if (isnan(d)) continue;
            sum += d;
            layers++;
        }
        if (!layers) {
            printf("%6lld %16s %16s %12s\n", (long long)ms[mi], "n/a", "n/a", "n/a");
            if (H) html_table_row(H, "%lld\tn/a\tn/a\tn/a", (long long)ms[mi]);
            continue;
        }
        double d = sum / layers;
        /* step multiplier: expert reads to verify M tokens vs one token's top_k;
         * redundancy: requests served per distinct read. */
        printf("%6lld %16.2f %15.2fx %11.2fx\n", (long long)ms[mi], d, d / c.top_k, (double)ms[mi] * c.top_k / d);
        if (H) html_table_row(H, "%lld\t%.2f\t%.2fx\t%.2fx", (long long)ms[mi], d, d / c.top_k, (double)ms[mi] * c.top_k / d);
    }
    int rc = 0;
    if (H) {
        html_table_end(H);
        html_para(H, NULL,
                  "distinct/layer: experts one layer must read to serve M consecutive tokens. step multiplier: that against one token's "
                  "top_k (the cost of verifying M tokens relative to decoding one). redundancy: requests served per distinct read (M x "
                  "top_k / distinct); 1.00x means no sharing.");
        rc = window_chart(H, &c, ms, n_m, skip);
        if (rc) html_discard(H);
        else rc = html_finish(H);
    }
    router_capture_free(&c);
    return rc;
}

/* Neuron-mass coverage per layer and the threshold sweep. */
static int ffn_charts(html_doc *h, const ffn_capture *c) {
    enum { G = 201, NE = 63 }; /* grid points; thresholds 2^-32 .. 2^30 */
    const int32_t L = c->num_layers;
    int32_t *layers = malloc(sizeof *layers * (size_t)L);
    double *score = malloc(sizeof *score * (size_t)L), *cx = malloc(sizeof *cx * G), *cy = malloc(sizeof *cy * G * (size_t)L);
    double *cmean = calloc(G, sizeof *cmean), tx[NE], mb[NE] = {0}, cb[NE] = {0}, diag[2] = {0, 1};
    double *lm = malloc(sizeof *lm * NE * (size_t)L), *lc = malloc(sizeof *lc * NE * (size_t)L);
    int rc = 0, nl = 0;
    if (!layers || !score || !cx || !cy || !cmean || !lm || !lc) { rc = cli_error("analyze", "out of memory"); goto out; }
    for (int32_t l = 0; l < L; l++) {
        if (!c->tapped[l]) continue;
        ffn_layer_stats st;
        ffn_layer_analyze(c, l, &st);
        layers[nl] = l;
        score[nl] = st.n90;
        if (!report_coverage_mass(c->mass + (size_t)l * c->inter, c->inter, G, cx, cy + (size_t)nl * G)) { rc = cli_error("analyze", "out of memory"); goto out; }
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
    int np = pick_layers(layers, score, nl, pick), ns = 0;
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
    return rc;
}

static int analyze_ffn(int argc, char **argv) {
    const char *html = NULL;
    if (take_html(&argc, argv, &html)) return 1;
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-') return cli_error("analyze", "unknown option '%s'", argv[i]);
    if (argc != 2) { return cli_error("analyze", "ffn takes one comma-separated list of captures"); }
    char buf[4096];
    if (strlen(argv[1]) >= sizeof buf) return cli_error("analyze", "capture list too long (%zu characters)", strlen(argv[1]));
    snprintf(buf, sizeof buf, "%s", argv[1]);
    ffn_capture c;
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        ffn_capture x;
        if (ffn_capture_load(t, n ? &x : &c) != TS_OK) {
            if (n) ffn_capture_free(&c);
            return cli_error("analyze", "%s", ts_last_error());
        }
        if (n) {
            ts_status st = ffn_capture_merge(&c, &x, t);
            ffn_capture_free(&x);
            if (st) { ffn_capture_free(&c); return cli_error("analyze", "%s", ts_last_error()); }
        }
        n++;
    }
    if (!n) return cli_error("analyze", "empty capture list");
    html_doc hd, *H = NULL;
    if (html) {
        if (html_start(&hd, html, "turbospark analyze ffn: FFN activation census")) { ffn_capture_free(&c); return 1; }
        H = &hd;
        html_paths(H, "capture: ", argv[1]);
        html_para(H, "note", "%s", random_weights_note);
        html_para(H, NULL, "FFN activation census: %d layers, inter %d, %llu decode passes (%llu prefill passes not censused)", c.num_layers,
                  c.inter, (unsigned long long)c.decode_passes, (unsigned long long)c.prefill_passes);
        char hdr[256];
        snprintf(hdr, sizeof hdr, "layer\tn50\tn90\tn95\tn99\t<2^-10\t<2^-7\t<2^-4\tovl@%d\tovl@%d\tovl@%d\tovl@%d", c.overlap_k[0],
                 c.overlap_k[1], c.overlap_k[2], c.overlap_k[3]);
        html_table_begin(H, "Per tapped layer", hdr);
    }
    printf("FFN activation census: %d layers, inter %d, %llu decode passes (%llu prefill passes not censused)\n", c.num_layers, c.inter,
           (unsigned long long)c.decode_passes, (unsigned long long)c.prefill_passes);
    printf("%-6s %6s %6s %6s %6s | %8s %8s %8s |", "layer", "n50", "n90", "n95", "n99", "<2^-10", "<2^-7", "<2^-4");
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) printf(" ovl@%-5d", c.overlap_k[k]);
    printf("\n");
    ffn_layer_stats mean = {0};
    int nl = 0;
    for (int32_t l = 0; l < c.num_layers; l++) {
        if (!c.tapped[l]) continue;
        ffn_layer_stats s;
        ffn_layer_analyze(&c, l, &s);
        printf("%-6d %6d %6d %6d %6d | %7.2f%% %7.2f%% %7.2f%% |", l, s.n50, s.n90, s.n95, s.n99, 100 * s.below[0], 100 * s.below[1],
               100 * s.below[2]);
        for (int k = 0; k < FFN_N_OVERLAP_K; k++) printf(" %8.3f", s.overlap[k]);
        printf("\n");
        if (H)
            html_table_row(H, "%d\t%d\t%d\t%d\t%d\t%.2f%%\t%.2f%%\t%.2f%%\t%.3f\t%.3f\t%.3f\t%.3f", l, s.n50, s.n90, s.n95, s.n99,
                           100 * s.below[0], 100 * s.below[1], 100 * s.below[2], s.overlap[0], s.overlap[1], s.overlap[2], s.overlap[3]);
        mean.n50 += s.n50, mean.n90 += s.n90, mean.n95 += s.n95, mean.n99 += s.n99;
        for (int i = 0; i < 3; i++) mean.below[i] += s.below[i];
        for (int k = 0; k < FFN_N_OVERLAP_K; k++) mean.overlap[k] += s.overlap[k], mean.chance[k] = s.chance[k];
        nl++;
    }
    printf("%-6s %6.0f %6.0f %6.0f %6.0f | %7.2f%% %7.2f%% %7.2f%% |", "mean", (double)mean.n50 / nl, (double)mean.n90 / nl,
           (double)mean.n95 / nl, (double)mean.n99 / nl, 100 * mean.below[0] / nl, 100 * mean.below[1] / nl, 100 * mean.below[2] / nl);
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) printf(" %8.3f", mean.overlap[k] / nl);
    printf("\n%-6s %6s %6s %6s %6s | %8s %8s %8s |", "chance", "", "", "", "", "", "", "");
    for (int k = 0; k < FFN_N_OVERLAP_K; k++) printf(" %8.3f", mean.chance[k]);
    printf("\n");
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
    double hot = (double)mean.n90 / nl / c.inter;
    int kq = 0; /* the K nearest a quarter of the width */
    for (int k = 1; k < FFN_N_OVERLAP_K; k++)
        if (fabs(c.overlap_k[k] - c.inter / 4.0) < fabs(c.overlap_k[kq] - c.inter / 4.0)) kq = k;
    double lift = (mean.overlap[kq] / nl) / mean.chance[kq];
    bool pays = hot <= 0.5 && lift >= 2.0;
    printf("verdict: %s a neuron cache: 90%% of |a| mass sits in %.1f%% of neurons; consecutive-token top-%d overlap is %.2fx chance "
           "(pays when <= 50%% and >= 2x).\n",
           pays ? "sparse enough for" : "not sparse enough for", 100 * hot, c.overlap_k[kq], lift);
    int rc = 0;
    if (H) {
        html_para(H, NULL,
                  "verdict: %s a neuron cache: 90%% of |a| mass sits in %.1f%% of neurons; consecutive-token top-%d overlap is %.2fx chance "
                  "(pays when <= 50%% and >= 2x).",
                  pays ? "sparse enough for" : "not sparse enough for", 100 * hot, c.overlap_k[kq], lift);
        html_para(H, NULL,
                  "nXX: fewest neurons holding XX%% of the layer's cumulative |a| mass. <2^-e: share of the mass in activations wholly "
                  "below 2^-e (about 1e-3, 1e-2, 1e-1). ovl@K: mean share of a token's top-K neurons that were also in the previous "
                  "token's top-K; chance is K / inter.");
        rc = ffn_charts(H, &c);
        if (rc) html_discard(H);
        else rc = html_finish(H);
    }
    ffn_capture_free(&c);
    return rc;
}

int cmd_analyze(int argc, char **argv) {
    if (argc < 2) { return cli_error("analyze", "which analysis? (router, cache, window, ffn)"); }
    const char *what = argv[1];
    int rc;
    if (!strcmp(what, "router")) rc = analyze_router(argc - 1, argv + 1);
    else if (!strcmp(what, "cache")) rc = analyze_cache(argc - 1, argv + 1);
    else if (!strcmp(what, "window")) rc = analyze_window(argc - 1, argv + 1);
    else if (!strcmp(what, "ffn")) rc = analyze_ffn(argc - 1, argv + 1);
    else if (!strcmp(what, "-h") || !strcmp(what, "--help")) { usage(stdout); return 0; }
    else { return cli_error("analyze", "unknown analysis '%s'", what); }
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) return cli_error("analyze", "writing output failed");
    return rc;
}
