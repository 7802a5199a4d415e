/* turbospark analyze router|cache|window|ffn ... : reads instrument captures
 * and prints the decisions they support. All arithmetic is in src/analyze/;
 * this file parses flags and prints tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ffn_capture.h"
#include "analyze/router_capture.h"
#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark analyze router A.json[,A2.json...] [B.json[,...]]\n"
            "       turbospark analyze cache TRACE.json [--slots 8,16,32] [--skip N] [--policy lfu,lru,belady]\n"
            "       turbospark analyze window TRACE.json [--skip N] [--m 2,4,8,16]\n"
            "       turbospark analyze ffn CAP.json[,CAP2.json...]\n");
}

/* Splits "a,b,c" into at most max integers in [lo, hi]. */
static int parse_int_list(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out, int max) {
    char buf[1024];
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
            mb95 += t.n95, mb99 += t.n99, mbnv += t.never, mj += j;
        }
        printf("\n");
        nl++;
    }
    if (nl) {
        printf("%-6s %8s %6.1f %6.1f %6.1f", "mean", "", m95 / nl, m99 / nl, mnv / nl);
        if (two) printf(" | %6.1f %6.1f %6.1f %8.3f", mb95 / nl, mb99 / nl, mbnv / nl, mj / nl);
        printf("\n");
    }
    printf("(n95/n99: fewest experts covering 95%%/99%% of the layer's routed picks; uniform routing gives n95 = %.0f)\n",
           ceil(0.95 * a.num_experts));
    free(sa);
    free(sb);
    router_capture_free(&a);
    if (two) router_capture_free(&b);
    return 0;
}

static int analyze_cache(int argc, char **argv) {
    const char *path = NULL;
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
            snprintf(buf, sizeof buf, "%s", v);
            n_pols = 0;
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n_pols < 3; t = strtok_r(NULL, ",", &save)) {
                if (!strcmp(t, "lfu")) pols[n_pols++] = REPLAY_LFU;
                else if (!strcmp(t, "lru")) pols[n_pols++] = REPLAY_LRU;
                else if (!strcmp(t, "belady")) pols[n_pols++] = REPLAY_BELADY;
                else return cli_error("analyze", "--policy: unknown policy '%s' (lfu, lru, belady)", t);
            }
            if (!n_pols) return cli_error("analyze", "--policy: empty list");
        } else if (argv[i][0] == '-') {
            return cli_error("analyze", "unknown option '%s'", argv[i]);
        } else if (!path) path = argv[i];
        else return cli_error("analyze", "unexpected argument '%s'", argv[i]);
    }
    if (!path) { return cli_error("analyze", "cache needs a trace capture"); }
    router_capture c;
    if (router_capture_load(path, &c) != TS_OK) return cli_error("analyze", "%s", ts_last_error());
    if (!c.has_trace) { router_capture_free(&c); return cli_error("analyze", "%s: no trace in this capture (capture with TURBOSPARK_ROUTER_TRACE=1)", path); }
    static const char *pname[3] = {"lfu", "lru", "belady"};
    printf("cache replay of %s: %d layers, %d experts, top_k %d, skip %lld passes\n", path, c.num_layers, c.num_experts, c.top_k,
           (long long)skip);
    printf("%-7s %6s %9s %10s %12s %8s %8s %10s\n", "policy", "slots", "hit %", "requests", "miss/layer/pass", "cold", "evicted",
           "prev-named");
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
            printf("%-7s %6lld %8.2f%% %10llu %12.3f %8llu %8llu %9.1f%%\n", pname[pols[pi]], (long long)slots[si],
                   tot.requests ? 100.0 * tot.hits / tot.requests : NAN, (unsigned long long)tot.requests,
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
                printf("%-8d %6lld %9.2f%% %14.2f %13.2fx %12llu\n", pk, (long long)slots[si],
                       t.misses ? 100.0 * t.prefetch_useful / t.misses : NAN,
                       t.prefetch_useful ? (double)t.prefetch_reads / t.prefetch_useful : NAN,
                       t.misses ? (double)(t.prefetch_reads + t.residual_misses) / t.misses : NAN, (unsigned long long)t.misses);
            }
    }
    router_capture_free(&c);
    return rc;
}

static int analyze_window(int argc, char **argv) {
    const char *path = NULL;
    int64_t ms[16] = {2, 4, 8, 16}, skip = 0;
    int n_m = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--m")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v || (n_m = parse_int_list("--m", v, 1, 1 << 20, ms, 16)) < 0) return 1;
        } else if (!strcmp(argv[i], "--skip")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            if (!v || !cli_parse_i64("analyze", "--skip", v, 0, INT64_MAX, &skip)) return 1;
        } else if (argv[i][0] == '-') {
            return cli_error("analyze", "unknown option '%s'", argv[i]);
        } else if (!path) path = argv[i];
        else return cli_error("analyze", "unexpected argument '%s'", argv[i]);
    }
    if (!path) { return cli_error("analyze", "window needs a trace capture"); }
    router_capture c;
    if (router_capture_load(path, &c) != TS_OK) return cli_error("analyze", "%s", ts_last_error());
    if (!c.has_trace) { router_capture_free(&c); return cli_error("analyze", "%s: no trace in this capture (capture with TURBOSPARK_ROUTER_TRACE=1)", path); }
    printf("speculative window of %s: distinct experts per layer over M consecutive passes (top_k %d)\n", path, c.top_k);
    printf("%6s %16s %16s %12s\n", "M", "distinct/layer", "step multiplier", "redundancy");
    for (int mi = 0; mi < n_m; mi++) {
        double sum = 0;
        int layers = 0;
        for (int32_t l = 0; l < c.num_layers; l++) {
            if (!router_capture_layer_routes(&c, l)) continue;
            double d;
            if (router_window_layer(&c, l, (int32_t)ms[mi], (uint64_t)skip, &d) != TS_OK) { router_capture_free(&c); return cli_error("analyze", "%s", ts_last_error()); }
            if (isnan(d)) continue;
            sum += d;
            layers++;
        }
        if (!layers) { printf("%6lld %16s %16s %12s\n", (long long)ms[mi], "n/a", "n/a", "n/a"); continue; }
        double d = sum / layers;
        /* step multiplier: expert reads to verify M tokens vs one token's top_k;
         * redundancy: requests served per distinct read. */
        printf("%6lld %16.2f %15.2fx %11.2fx\n", (long long)ms[mi], d, d / c.top_k, (double)ms[mi] * c.top_k / d);
    }
    router_capture_free(&c);
    return 0;
}

static int analyze_ffn(int argc, char **argv) {
    if (argc != 2) { return cli_error("analyze", "ffn takes one comma-separated list of captures"); }
    char buf[4096];
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
    ffn_capture_free(&c);
    return 0;
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
