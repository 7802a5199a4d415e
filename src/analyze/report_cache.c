/* ts_analyze_cache and ts_analyze_window: a trace capture replayed through
 * the engine's cache policy, and the experts a speculative window needs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/report.h"

static const char *const pname[3] = {"lfu", "lru", "belady"};

/* Hit rate against slots for each policy, top_k .. num_experts. */
static ts_status cache_chart(html_doc *h, const router_capture *c, const int32_t *given, int n_given, const replay_policy *pols, int n_pols,
                             uint64_t skip) {
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
                ts_status st = router_replay_layer(c, l, (int32_t)sl[i], pols[pi], skip, 0, &r);
                if (st) return st;
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
              "Each line replays the trace through one policy with the same number of slots in every MoE layer (skip %llu tokens). "
              "Belady (dashed) knows the future and is the ceiling for any policy; the gap between it and lfu/lru is what a smarter "
              "policy could still win. Where a line flattens, more slots buy little. Dashed grey verticals mark the --slots asked for.",
              (unsigned long long)skip);
    html_chart_svg(h, &(html_chart){.title = "Expert-cache hit rate vs slots per layer", .xlabel = "slots per layer", .ylabel = "hit rate",
                                     .xmin = NAN, .xmax = NAN, .ymin = 0, .ymax = 1, .ypercent = true, .series = se, .n_series = n_pols,
                                     .marks = mk, .n_marks = n_given});
    return TS_OK;
}

/* Pilot probe: recall, then prefetch coverage per PILOT_K and slot count. */
static ts_status pilot_report(FILE *T, html_doc *H, const router_capture *c, const int32_t *slots, int n_slots, uint64_t skip) {
    ts_status st;
    fprintf(T, "\npilot probe (prediction of layer L's top-k made while layer L-1 ran):\n");
    replay_result r0 = {0};
    for (int32_t l = 1; l < c->num_layers; l++) {
        if (!router_capture_layer_routes(c, l) || !c->pred_len[l]) continue;
        replay_result r;
        if ((st = router_replay_layer(c, l, slots[0], REPLAY_LFU, skip, c->pred_k, &r))) {
            ts_error_prefix("%s: pilot replay of layer %d", c->path, l);
            return st;
        }
        r0.pred_total += r.pred_total, r0.pred_hits += r.pred_hits;
    }
    fprintf(T, "PILOT recall: %.2f%% of routed experts were named by the probe\n", r0.pred_total ? 100.0 * r0.pred_hits / r0.pred_total : NAN);
    if (H) {
        html_table_end(H);
        html_heading(H, 2, "Pilot probe");
        html_para(H, NULL, "Prediction of layer L's top-k made while layer L-1 ran. PILOT recall: %.2f%% of routed experts were named by the probe.",
                  r0.pred_total ? 100.0 * r0.pred_hits / r0.pred_total : NAN);
        html_table_begin(H, "Prefetching the first PILOT_K predicted experts (LFU)", "PILOT_K\tslots\tcoverage\treads/hit-saved\tbytes vs base\tmisses");
    }
    fprintf(T, "%-8s %6s %10s %14s %14s %12s\n", "PILOT_K", "slots", "coverage", "reads/hit-saved", "bytes vs base", "misses");
    for (int si = 0; si < n_slots; si++)
        for (int32_t pk = 1; pk <= c->pred_k; pk++) {
            replay_result t = {0};
            for (int32_t l = 1; l < c->num_layers; l++) {
                if (!router_capture_layer_routes(c, l) || !c->pred_len[l]) continue;
                replay_result r;
                if ((st = router_replay_layer(c, l, slots[si], REPLAY_LFU, skip, pk, &r))) {
                    ts_error_prefix("%s: pilot replay of layer %d", c->path, l);
                    return st;
                }
                t.misses += r.misses, t.prefetch_reads += r.prefetch_reads, t.prefetch_useful += r.prefetch_useful;
                t.residual_misses += r.residual_misses;
            }
            if (H)
                html_table_row(H, "%d\t%lld\t%.2f%%\t%.2f\t%.2fx\t%llu", pk, (long long)slots[si], t.misses ? 100.0 * t.prefetch_useful / t.misses : NAN,
                               t.prefetch_useful ? (double)t.prefetch_reads / t.prefetch_useful : NAN,
                               t.misses ? (double)(t.prefetch_reads + t.residual_misses) / t.misses : NAN, (unsigned long long)t.misses);
            fprintf(T, "%-8d %6lld %9.2f%% %14.2f %13.2fx %12llu\n", pk, (long long)slots[si], t.misses ? 100.0 * t.prefetch_useful / t.misses : NAN,
                    t.prefetch_useful ? (double)t.prefetch_reads / t.prefetch_useful : NAN,
                    t.misses ? (double)(t.prefetch_reads + t.residual_misses) / t.misses : NAN, (unsigned long long)t.misses);
        }
    return TS_OK;
}

static ts_status cache_report(FILE *T, html_doc *H, const router_capture *c, const int32_t *slots, int n_slots, const replay_policy *pols,
                              int n_pols, uint64_t skip) {
    if (H) {
        html_para(H, NULL, "cache replay: %d layers, %d experts, top_k %d, skip %llu tokens", c->num_layers, c->num_experts, c->top_k,
                  (unsigned long long)skip);
        html_table_begin(H, "Replay through the engine's policy code (all MoE layers together)",
                         "policy\tslots\thit %\trequests\thits\tmisses\tmiss/layer/token\tcold\tevicted\tprev-named");
    }
    fprintf(T, "cache replay of %s: %d layers, %d experts, top_k %d, skip %llu tokens\n", c->path, c->num_layers, c->num_experts, c->top_k,
            (unsigned long long)skip);
    if (c->has_prefetch)
        fprintf(T, "the capture holds the run's pilot prefetches: lfu and lru place them before their passes as the engine did "
                   "(belady does not)\n");
    fprintf(T, "%-7s %6s %9s %10s %10s %10s %12s %8s %8s %10s\n", "policy", "slots", "hit %", "requests", "hits", "misses", "miss/layer/token",
            "cold", "evicted", "prev-named");
    ts_status st;
    for (int pi = 0; pi < n_pols; pi++)
        for (int si = 0; si < n_slots; si++) {
            replay_result tot = {0};
            int layers = 0;
            for (int32_t l = 0; l < c->num_layers; l++) {
                if (!router_capture_layer_routes(c, l)) continue;
                replay_result r;
                if ((st = router_replay_layer(c, l, slots[si], pols[pi], skip, 0, &r))) return st;
                tot.tokens += r.tokens, tot.passes += r.passes, tot.requests += r.requests, tot.hits += r.hits, tot.misses += r.misses;
                tot.cold_misses += r.cold_misses, tot.evict_misses += r.evict_misses, tot.prev_named += r.prev_named;
                tot.run_pf_copies += r.run_pf_copies, tot.run_pf_saved += r.run_pf_saved, tot.run_pf_wasted += r.run_pf_wasted;
                layers++;
            }
            double tokens = layers ? (double)tot.tokens / layers : 0;
            if (H)
                html_table_row(H, "%s\t%lld\t%.2f%%\t%llu\t%llu\t%llu\t%.3f\t%llu\t%llu\t%.1f%%", pname[pols[pi]], (long long)slots[si],
                               tot.requests ? 100.0 * tot.hits / tot.requests : NAN, (unsigned long long)tot.requests,
                               (unsigned long long)tot.hits, (unsigned long long)tot.misses,
                               layers && tokens ? tot.misses / (double)layers / tokens : NAN, (unsigned long long)tot.cold_misses,
                               (unsigned long long)tot.evict_misses, tot.misses ? 100.0 * tot.prev_named / tot.misses : NAN);
            fprintf(T, "%-7s %6lld %8.2f%% %10llu %10llu %10llu %12.3f %8llu %8llu %9.1f%%\n", pname[pols[pi]], (long long)slots[si],
                    tot.requests ? 100.0 * tot.hits / tot.requests : NAN, (unsigned long long)tot.requests, (unsigned long long)tot.hits,
                    (unsigned long long)tot.misses, layers && tokens ? tot.misses / (double)layers / tokens : NAN,
                    (unsigned long long)tot.cold_misses, (unsigned long long)tot.evict_misses,
                    tot.misses ? 100.0 * tot.prev_named / tot.misses : NAN);
            if (c->has_prefetch && pols[pi] != REPLAY_BELADY)
                fprintf(T, "  pilot prefetch replayed (%s, %lld slots): %llu copies, %llu saved, %llu wasted\n", pname[pols[pi]],
                        (long long)slots[si], (unsigned long long)tot.run_pf_copies, (unsigned long long)tot.run_pf_saved,
                        (unsigned long long)tot.run_pf_wasted);
        }
    if (c->has_pred && (st = pilot_report(T, H, c, slots, n_slots, skip))) return st;
    if (!H) return TS_OK;
    html_table_end(H);
    html_para(H, NULL,
              "hit %%: requests served from a resident slot (hits, misses: the counts). miss/layer/token: expert reads per MoE layer per token. cold: misses into an "
              "empty slot (warm-up); evicted: misses that threw a resident expert out. prev-named: misses whose expert the previous "
              "cache pass had also asked for. A prefill chunk asks for each of its distinct experts once (top_k per pass), so "
              "requests count (layer, expert) per chunk, not per token.");
    return cache_chart(H, c, slots, n_slots, pols, n_pols, skip);
}

ts_status ts_analyze_cache(const ts_analyze_cache_opts *o, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    static const int32_t def_slots[3] = {8, 16, 32};
    const int32_t *slots = o->n_slots ? o->slots : def_slots;
    int n_slots = o->n_slots ? (int)o->n_slots : 3;
    replay_policy pols[3] = {REPLAY_LFU, REPLAY_LRU, REPLAY_BELADY};
    int n_pols = 3;
    /* every option first, then the capture, then the options it bounds */
    if (!o->trace) return ts_fail(TS_ERR_ARG, "cache needs a trace capture");
    if (o->n_slots > TS_ANALYZE_MAX_LIST || !slots) return ts_fail(TS_ERR_ARG, "slots: 1 to %d values", TS_ANALYZE_MAX_LIST);
    for (int i = 0; i < n_slots; i++)
        if (slots[i] < 1 || slots[i] > (1 << 20)) return ts_fail(TS_ERR_ARG, "slots %d is out of range [1, %d]", slots[i], 1 << 20);
    if (o->n_policies) {
        if (o->n_policies > 3 || !o->policies) return ts_fail(TS_ERR_ARG, "at most three policies (lfu, lru, belady)");
        n_pols = (int)o->n_policies;
        for (int i = 0; i < n_pols; i++) {
            if (o->policies[i] != TS_ANALYZE_LFU && o->policies[i] != TS_ANALYZE_LRU && o->policies[i] != TS_ANALYZE_BELADY)
                return ts_fail(TS_ERR_ARG, "policy %d is not one of lfu, lru, belady", (int)o->policies[i]);
            pols[i] = o->policies[i] == TS_ANALYZE_LFU ? REPLAY_LFU : o->policies[i] == TS_ANALYZE_LRU ? REPLAY_LRU : REPLAY_BELADY;
        }
    }
    ts_status st = report_check_output(o->html, &o->trace, 1);
    if (st) return st;
    router_capture c;
    if ((st = report_load_trace(o->trace, o->max_input, &c))) return st;
    for (int i = 0; i < n_slots; i++)
        if (slots[i] < c.top_k) {
            st = ts_fail(TS_ERR_ARG, "%d slots is below top_k %d (a pass needs top_k experts resident)", slots[i], c.top_k);
            router_capture_free(&c);
            return st;
        }
    report_text t;
    html_doc hd;
    bool page = false;
    if (!(st = report_text_open(&t)) && o->html && !(st = report_html_open(&hd, o->html, "turbospark analyze cache: expert-cache replay"))) {
        page = true;
        report_html_paths(&hd, "capture: ", &o->trace, 1);
        html_para(&hd, "note", "%s", report_random_router_note);
    }
    if (!st) st = cache_report(t.f, page ? &hd : NULL, &c, slots, n_slots, pols, n_pols, o->skip);
    st = report_finish(&t, &hd, page, st, text, len);
    router_capture_free(&c);
    return st;
}

/* ---- windows ---- */

/* Distinct experts per layer against the window length M. */
static ts_status window_chart(html_doc *h, const router_capture *c, const int32_t *given, int n_given, uint64_t skip) {
    const int32_t k = c->top_k, E = c->num_experts;
    int64_t mmax = 16;
    for (int i = 0; i < n_given; i++)
        if (given[i] > mmax) mmax = given[i];
    /* M = 1..64 one by one, then up to the largest M asked for in 64 steps */
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
    ts_status st = TS_OK;
    int nl = 0;
    if (!xs || !mean || !ref || !per || !layers || !score) {
        st = ts_fail(TS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int32_t l = 0; l < L; l++)
        if (router_capture_layer_routes(c, l)) layers[nl++] = l;
    for (int i = 0; i < n; i++) {
        xs[i] = (double)ms[i];
        ref[i] = (double)(ms[i] * k < E ? ms[i] * k : E);
        double sum = 0;
        int cnt = 0;
        for (int j = 0; j < nl; j++) {
            double d;
            if ((st = router_window_layer(c, layers[j], (int32_t)ms[i], skip, &d))) goto out;
            per[(size_t)j * n + i] = d;
            if (!isnan(d)) sum += d, cnt++;
        }
        mean[i] = cnt ? sum / cnt : NAN;
    }
    for (int j = 0; j < nl; j++) score[j] = per[(size_t)j * n + (n > 8 ? 7 : n - 1)];
    int32_t pick[6];
    int np = report_pick_layers(score, nl, pick), ns = 0;
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
              "Mean number of distinct experts a layer needs over M consecutive passes (skip %llu): the expert reads to verify M "
              "speculative tokens at once. The dotted line is no reuse at all (M x top_k, capped at the expert count); the further the "
              "curves stay below it, the more a batch of M tokens shares experts.",
              (unsigned long long)skip);
    html_chart_svg(h, &(html_chart){.title = "Distinct experts per layer vs window M", .xlabel = "M (consecutive passes)",
                                     .ylabel = "distinct experts per layer", .xmin = NAN, .xmax = NAN, .ymin = 0, .ymax = E,
                                     .series = se, .n_series = ns, .marks = mk, .n_marks = nm});
out:
    free(xs), free(mean), free(ref), free(per), free(layers), free(score);
    return st;
}

static ts_status window_report(FILE *T, html_doc *H, const router_capture *c, const int32_t *ms, int n_m, uint64_t skip) {
    if (H) {
        html_para(H, NULL, "speculative window: distinct experts per layer over M consecutive passes (top_k %d, %d experts, skip %llu)", c->top_k,
                  c->num_experts, (unsigned long long)skip);
        html_table_begin(H, "Mean over MoE layers", "M\tdistinct/layer\tstep multiplier\tredundancy");
    }
    fprintf(T, "speculative window of %s: distinct experts per layer over M consecutive passes (top_k %d)\n", c->path, c->top_k);
    fprintf(T, "%6s %16s %16s %12s\n", "M", "distinct/layer", "step multiplier", "redundancy");
    ts_status st;
    for (int mi = 0; mi < n_m; mi++) {
        double sum = 0;
        int layers = 0;
        for (int32_t l = 0; l < c->num_layers; l++) {
            if (!router_capture_layer_routes(c, l)) continue;
            double d;
            if ((st = router_window_layer(c, l, ms[mi], skip, &d))) return st;
            if (isnan(d)) continue;
            sum += d;
            layers++;
        }
        if (!layers) {
            fprintf(T, "%6lld %16s %16s %12s\n", (long long)ms[mi], "n/a", "n/a", "n/a");
            if (H) html_table_row(H, "%lld\tn/a\tn/a\tn/a", (long long)ms[mi]);
            continue;
        }
        double d = sum / layers;
        /* step multiplier: expert reads to verify M tokens vs one token's top_k;
         * redundancy: requests served per distinct read. */
        fprintf(T, "%6lld %16.2f %15.2fx %11.2fx\n", (long long)ms[mi], d, d / c->top_k, (double)ms[mi] * c->top_k / d);
        if (H) html_table_row(H, "%lld\t%.2f\t%.2fx\t%.2fx", (long long)ms[mi], d, d / c->top_k, (double)ms[mi] * c->top_k / d);
    }
    if (!H) return TS_OK;
    html_table_end(H);
    html_para(H, NULL,
              "distinct/layer: experts one layer must read to serve M consecutive tokens. step multiplier: that against one token's "
              "top_k (the cost of verifying M tokens relative to decoding one). redundancy: requests served per distinct read (M x "
              "top_k / distinct); 1.00x means no sharing.");
    return window_chart(H, c, ms, n_m, skip);
}

ts_status ts_analyze_window(const ts_analyze_window_opts *o, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    static const int32_t def_m[4] = {2, 4, 8, 16};
    const int32_t *ms = o->n_m ? o->m : def_m;
    int n_m = o->n_m ? (int)o->n_m : 4;
    if (!o->trace) return ts_fail(TS_ERR_ARG, "window needs a trace capture");
    if (o->n_m > TS_ANALYZE_MAX_LIST || !ms) return ts_fail(TS_ERR_ARG, "window lengths: 1 to %d values", TS_ANALYZE_MAX_LIST);
    for (int i = 0; i < n_m; i++)
        if (ms[i] < 1 || ms[i] > (1 << 20)) return ts_fail(TS_ERR_ARG, "window length %d is out of range [1, %d]", ms[i], 1 << 20);
    ts_status st = report_check_output(o->html, &o->trace, 1);
    if (st) return st;
    router_capture c;
    if ((st = report_load_trace(o->trace, o->max_input, &c))) return st;
    report_text t;
    html_doc hd;
    bool page = false;
    if (!(st = report_text_open(&t)) && o->html && !(st = report_html_open(&hd, o->html, "turbospark analyze window: experts per speculative window"))) {
        page = true;
        report_html_paths(&hd, "capture: ", &o->trace, 1);
        html_para(&hd, "note", "%s", report_random_router_note);
    }
    if (!st) st = window_report(t.f, page ? &hd : NULL, &c, ms, n_m, o->skip);
    st = report_finish(&t, &hd, page, st, text, len);
    router_capture_free(&c);
    return st;
}
