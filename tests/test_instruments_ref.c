/* Instruments against transformers: what the FFN census and the router
 * capture record must equal what transformers' forward hooks saw on the same
 * tiny models and prompts (tests/fixtures/instr/, scripts/ref/
 * export_instruments.py, docs/REFERENCE.md). Invariant checks pass on any
 * buffer; these pass only on the right one:
 *
 *   census: per-neuron sum |a| and the |a| bucket histogram, over decode
 *     passes, equal the hooked down_proj inputs (dense FFN, shared expert);
 *     a prefill chunk taps exactly its last row. Negative control: the same
 *     comparison against sum |ffn_up| (what a census tapping ffn_up would
 *     record) must fail.
 *   router: the trace equals transformers' selected experts per layer and
 *     pass, prefill and decode; one router-logit row per (layer, pass) equals
 *     the hooked router output.
 *   pilot: the probe's guesses equal layer l+1's router on layer l's
 *     post-attention residual, and its recall equals the fixture's, which
 *     lies strictly between chance (k/n_experts) and 1. Aimed at its own
 *     layer (self mode) the probe reads 1, so a probe mis-aimed that way
 *     fails the equality.
 *
 * Sessions use an F32 KV cache: every input is then exact and only f32
 * rounding separates the engine from the float64 reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/ffn_capture.h"
#include "analyze/json_in.h"
#include "analyze/router_capture.h"
#include "turbospark.h"
#include "test_util.h"

/* Tolerances, about 10x above the largest error measured (printed per model;
 * docs/REFERENCE.md, "Instrument fixtures"). */
#define MASS_RTOL 1e-5   /* per-neuron sum |a|: relative to the layer's largest neuron mass */
#define LOGIT_ATOL 5e-5  /* router logits, absolute */
/* a selection is judged where the reference's k-th / (k+1)-th gap exceeds
 * this: logits within LOGIT_ATOL cannot swap there. Every pass of every
 * fixture clears it (mixtral's smallest gap is 2.1e-4) */
#define SEL_MARGIN (2 * LOGIT_ATOL)
#define NEG_FACTOR 100.0 /* the negative control must miss by this multiple of MASS_RTOL */

#define MAX_IDS 256 /* longest prompt a fixture may hold */

static char tmpdir[] = "/tmp/ts_instrXXXXXX";

static const cJSON *at(const cJSON *a, int i) { return cJSON_GetArrayItem(a, i); }
/* A missing or non-numeric entry reads as NaN (ids as -1), which every
 * comparison below counts as a failure: a damaged fixture cannot pass. */
static double num(const cJSON *a, int i) {
    const cJSON *x = cJSON_GetArrayItem(a, i);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}
static int32_t id(const cJSON *a, int i) {
    double v = num(a, i);
    return v >= 0 && v < 1e6 ? (int32_t)v : -1;
}
/* fmax drops a NaN; an error must not */
static double worse(double err, double e) { return isnan(e) || isnan(err) ? INFINITY : fmax(err, e); }
static int ival(const cJSON *o, const char *k) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(j) ? j->valueint : -1;
}

typedef struct fixture {
    const char *name;
    cJSON *root;
    const cJSON *prompts;
    int n_prompts, n_layer, max_len;
    int ffn_width, n_ffn_layers, ffn_layers[16];
    int n_expert, top_k;
    ts_model *m;
} fixture;

static ts_session *new_session(fixture *fx, const ts_instruments *ins, int32_t n_batch) {
    ts_session_opts o = ts_session_opts_default();
    o.n_ctx = fx->max_len;
    o.n_batch = n_batch;
    o.kv_f32 = true;
    o.instruments = ins;
    ts_session *s = NULL;
    ts_status st = ts_session_new(fx->m, &o, &s);
    CHECKF(st == TS_OK, "%s: session: %s", fx->name, ts_last_error());
    return st == TS_OK ? s : NULL;
}

/* Evaluates ids one token per eval (every pass a decode pass) or as one
 * prefill of n_batch-token chunks, then writes the captures. */
static bool run(fixture *fx, ts_session *s, const cJSON *ids, bool decode) {
    int n = cJSON_GetArraySize(ids);
    int32_t tok[MAX_IDS];
    for (int t = 0; t < n && t < MAX_IDS; t++) tok[t] = id(ids, t);
    float *lg;
    ts_status st = TS_OK;
    if (decode)
        for (int t = 0; t < n && st == TS_OK; t++) st = ts_session_eval(s, tok + t, 1, &lg);
    else st = ts_session_eval(s, tok, n, &lg);
    CHECKF(st == TS_OK, "%s: eval: %s", fx->name, ts_last_error());
    FILE *log = tmpfile();
    ts_status fs = ts_session_instruments_finish(s, log ? log : stderr, false);
    if (log) fclose(log);
    CHECKF(fs == TS_OK, "%s: instruments_finish: %s", fx->name, ts_last_error());
    return st == TS_OK && fs == TS_OK;
}

/* ------------------------------------------------------------ FFN census */

/* Largest |mass - want| over the layer's neurons, relative to the layer's
 * largest reference mass. */
static double mass_err(const double *mass, const double *want, int width) {
    double mx = 0, err = 0;
    for (int i = 0; i < width; i++) mx = worse(mx, want[i]);
    for (int i = 0; i < width; i++) err = worse(err, fabs(mass[i] - want[i]));
    return mx > 0 ? err / mx : INFINITY;
}

/* A value within 1e-6 + 1e-5 |v| of a power of two (about 20 times the
 * engine's f32 error on one activation) may land in either neighbouring
 * bucket: it may move one count. */
static bool near_edge(double v) {
    if (v == 0) return false;
    int e = 0;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    double tol = 1e-6 + 1e-5 * fabs(v);
    return fabs(fabs(v) - ldexp(1, e - 1)) <= tol || fabs(ldexp(1, e) - fabs(v)) <= tol;
}

typedef struct census_stats {
    double mass_err, neg_err;      /* worst over layers and prompts */
    long hist_moved, hist_allowed; /* bucket counts that differ; values near an edge */
    long hist_total;               /* activations compared */
} census_stats;

/* Runs ids through a session with the FFN census on (batch and one_by_one
 * as new_session and run take them) and reads the capture back. */
static bool census_capture(fixture *fx, const cJSON *ids, const char *file, int batch, bool one_by_one, ffn_capture *c) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    ts_instruments ins = ts_instruments_default();
    ins.ffn_path = path;
    ts_session *s = new_session(fx, &ins, batch);
    if (!s) return false;
    bool ok = run(fx, s, ids, one_by_one);
    ts_session_free(s);
    if (!ok) return false;
    ts_status st = ffn_capture_load(path, 0, c);
    CHECKF(st == TS_OK, "%s: census capture: %s", fx->name, ts_last_error());
    return st == TS_OK;
}

static void census_decode(fixture *fx, int pi, census_stats *cs) {
    const cJSON *p = at(fx->prompts, pi), *ids = cJSON_GetObjectItem(p, "ids");
    const cJSON *act = cJSON_GetObjectItem(p, "ffn_act"), *up = cJSON_GetObjectItem(p, "ffn_up_abs_sum");
    int n = cJSON_GetArraySize(ids), W = fx->ffn_width;
    ffn_capture c;
    if (!census_capture(fx, ids, "ffn.json", 0, true, &c)) return;
    CHECKF(c.inter == W && c.num_layers == fx->n_layer, "%s: census shape %d x %d, want %d x %d", fx->name, c.num_layers, c.inter,
           fx->n_layer, W);
    CHECKF(c.decode_passes == (uint64_t)n && c.prefill_passes == 0, "%s prompt %d: %llu decode / %llu prefill passes, want %d / 0",
           fx->name, pi, (unsigned long long)c.decode_passes, (unsigned long long)c.prefill_passes, n);
    if (c.inter != W || c.num_layers != fx->n_layer) { ffn_capture_free(&c); return; }
    for (int l = 0, fl = 0; l < fx->n_layer; l++) {
        bool want_tap = fl < fx->n_ffn_layers && fx->ffn_layers[fl] == l;
        CHECKF(c.tapped[l] == want_tap, "%s: layer %d tapped %d, want %d", fx->name, l, c.tapped[l], want_tap);
        if (!want_tap) continue;
        double want[4096];
        uint64_t hist[FFN_BUCKETS] = {0};
        long edge = 0;
        memset(want, 0, sizeof want);
        for (int t = 0; t < n; t++) {
            const cJSON *row = at(at(act, t), fl);
            for (int i = 0; i < W; i++) {
                double v = num(row, i);
                want[i] += fabs(v);
                hist[ffn_bucket((float)v)]++;
                edge += near_edge(v);
            }
        }
        const double *mass = c.mass + (size_t)l * W;
        double e = mass_err(mass, want, W);
        CHECKF(e < MASS_RTOL, "%s prompt %d layer %d: census sum|a| off by %.3g (relative), tolerance %g", fx->name, pi, l, e, MASS_RTOL);
        cs->mass_err = fmax(cs->mass_err, e);
        long moved = 0;
        for (int b = 0; b < FFN_BUCKETS; b++) moved += labs((long)c.hist_count[(size_t)l * FFN_BUCKETS + b] - (long)hist[b]);
        moved /= 2; /* a value in the wrong bucket shows twice */
        CHECKF(moved <= edge, "%s prompt %d layer %d: %ld activations in another |a| bucket than transformers' (%ld near an edge)",
               fx->name, pi, l, moved, edge);
        cs->hist_moved += moved;
        cs->hist_allowed += edge;
        cs->hist_total += (long)n * W;
        /* negative control: a census of ffn_up would hold sum |up| */
        double neg[4096];
        for (int i = 0; i < W; i++) neg[i] = num(at(up, fl), i);
        double ne = mass_err(neg, want, W);
        CHECKF(ne > NEG_FACTOR * MASS_RTOL, "%s prompt %d layer %d: sum|ffn_up| passes for sum|a| (%.3g): the comparison cannot fail",
               fx->name, pi, l, ne);
        cs->neg_err = fmin(cs->neg_err, ne);
        fl++;
    }
    ffn_capture_free(&c);
}

/* A prefill of the longest prompt in chunks of 16: only the last row of the
 * final chunk is a decode pass, so the mass must equal |a| there. */
static void census_prefill(fixture *fx, int pi, census_stats *cs) {
    const cJSON *p = at(fx->prompts, pi), *ids = cJSON_GetObjectItem(p, "ids");
    const cJSON *act = cJSON_GetObjectItem(p, "ffn_act");
    int n = cJSON_GetArraySize(ids), W = fx->ffn_width;
    ffn_capture c;
    if (!census_capture(fx, ids, "ffn-prefill.json", 16, false, &c)) return;
    CHECKF(c.decode_passes == 1 && c.prefill_passes == (uint64_t)n - 1, "%s prefill: %llu decode / %llu prefill passes, want 1 / %d",
           fx->name, (unsigned long long)c.decode_passes, (unsigned long long)c.prefill_passes, n - 1);
    for (int fl = 0; fl < fx->n_ffn_layers && c.inter == W; fl++) {
        int l = fx->ffn_layers[fl];
        double want[4096];
        for (int i = 0; i < W; i++) want[i] = fabs(num(at(at(act, n - 1), fl), i));
        double e = mass_err(c.mass + (size_t)l * W, want, W);
        CHECKF(e < MASS_RTOL, "%s prefill layer %d: census |a| of the last row off by %.3g, tolerance %g", fx->name, l, e, MASS_RTOL);
        cs->mass_err = fmax(cs->mass_err, e);
        /* and not the first row's: a tap of the wrong row must fail */
        for (int i = 0; i < W; i++) want[i] = fabs(num(at(at(act, 0), fl), i));
        e = mass_err(c.mass + (size_t)l * W, want, W);
        CHECKF(e > NEG_FACTOR * MASS_RTOL, "%s prefill layer %d: the first row's |a| passes for the last's (%.3g)", fx->name, l, e);
    }
    ffn_capture_free(&c);
}

/* ------------------------------------------------------------ router */

/* Gap between the (k)-th and (k+1)-th largest of v[0..n). */
static double kth_gap(const double *v, int n, int k) {
    double s[64];
    memcpy(s, v, sizeof *v * (size_t)n);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (s[j] > s[i]) { double x = s[i]; s[i] = s[j]; s[j] = x; }
    return s[k - 1] - s[k];
}

static bool same_set(const int32_t *a, const cJSON *b, int k) {
    for (int i = 0; i < k; i++) {
        bool found = false;
        for (int j = 0; j < k; j++) found |= a[i] == id(b, j);
        if (!found) return false;
    }
    return true;
}

typedef struct router_stats {
    long sel_checked, sel_same, sel_undecided, pred_checked, pred_same, pred_undecided;
    long pilot_hits, pilot_total, self_hits, self_total;
    double logit_err;
    long logit_rows;
} router_stats;

static void router_trace(fixture *fx, int pi, bool decode, ts_pilot_mode pilot, router_stats *rs) {
    const cJSON *p = at(fx->prompts, pi), *ids = cJSON_GetObjectItem(p, "ids");
    const cJSON *rl = cJSON_GetObjectItem(p, "router_logits"), *sel = cJSON_GetObjectItem(p, "router_selected");
    const cJSON *pl = cJSON_GetObjectItem(p, "pilot_logits"), *psel = cJSON_GetObjectItem(p, "pilot_selected");
    int n = cJSON_GetArraySize(ids), K = fx->top_k, NE = fx->n_expert;
    char path[256];
    snprintf(path, sizeof path, "%s/router.json", tmpdir);
    ts_instruments ins = ts_instruments_default();
    ins.router_path = path;
    ins.router_trace = true;
    ins.pilot = pilot;
    ts_session *s = new_session(fx, &ins, 16);
    if (!s) return;
    bool ok = run(fx, s, ids, decode);
    ts_session_free(s);
    if (!ok) return;
    router_capture c;
    ts_status st = router_capture_load(path, 0, &c);
    CHECKF(st == TS_OK, "%s: router capture: %s", fx->name, ts_last_error());
    if (st) return;
    CHECKF(c.num_layers == fx->n_layer && c.num_experts == NE && c.top_k == K && c.has_trace && c.has_pred,
           "%s: router capture shape %d layers, %d experts, top %d", fx->name, c.num_layers, c.num_experts, c.top_k);
    for (int l = 0; l < fx->n_layer && c.num_layers == fx->n_layer && c.top_k == K && c.has_pred; l++) {
        CHECKF(c.trace_len[l] == (uint64_t)n * (uint64_t)K, "%s prompt %d layer %d: %llu trace ids for %d passes", fx->name, pi, l,
               (unsigned long long)c.trace_len[l], n);
        if (c.trace_len[l] != (uint64_t)n * (uint64_t)K) continue;
        for (int t = 0; t < n && pilot == TS_PILOT_NEXT; t++) {
            double lg[64];
            for (int e = 0; e < NE; e++) lg[e] = num(at(at(rl, t), l), e);
            const int32_t *got = c.trace[l] + (size_t)t * K;
            if (kth_gap(lg, NE, K) <= SEL_MARGIN) { rs->sel_undecided++; continue; }
            rs->sel_checked++;
            bool same = same_set(got, at(at(sel, t), l), K);
            rs->sel_same += same;
            CHECKF(same, "%s prompt %d %s layer %d pass %d: experts {%d,%d,...} differ from transformers'",
                   fx->name, pi, decode ? "decode" : "prefill", l, t, got[0], got[1]);
        }
        if (l == 0) continue;
        CHECKF(c.pred_len[l] == c.trace_len[l], "%s layer %d: %llu pilot ids, %llu trace ids", fx->name, l,
               (unsigned long long)c.pred_len[l], (unsigned long long)c.trace_len[l]);
        if (c.pred_len[l] != c.trace_len[l]) continue;
        for (int t = 0; t < n; t++) {
            const int32_t *pr = c.pred[l] + (size_t)t * K, *tr = c.trace[l] + (size_t)t * K;
            int hits = 0;
            for (int i = 0; i < K; i++)
                for (int j = 0; j < K; j++) hits += pr[i] == tr[j];
            if (pilot == TS_PILOT_SELF) {
                rs->self_hits += hits;
                rs->self_total += K;
                continue;
            }
            rs->pilot_hits += hits;
            rs->pilot_total += K;
            double lg[64];
            for (int e = 0; e < NE; e++) lg[e] = num(at(at(pl, t), l), e);
            if (kth_gap(lg, NE, K) <= SEL_MARGIN) { rs->pred_undecided++; continue; }
            rs->pred_checked++;
            bool same = same_set(pr, at(at(psel, t), l), K);
            rs->pred_same += same;
            CHECKF(same, "%s prompt %d %s layer %d pass %d: pilot {%d,%d,...} differs from transformers'",
                   fx->name, pi, decode ? "decode" : "prefill", l, t, pr[0], pr[1]);
        }
    }
    router_capture_free(&c);
}

/* One router-logit row per session: every (layer, pass) of the prompt. */
static void router_logits(fixture *fx, int pi, router_stats *rs) {
    const cJSON *p = at(fx->prompts, pi), *ids = cJSON_GetObjectItem(p, "ids");
    const cJSON *rl = cJSON_GetObjectItem(p, "router_logits");
    int n = cJSON_GetArraySize(ids), NE = fx->n_expert;
    char path[256];
    snprintf(path, sizeof path, "%s/router-logits.json", tmpdir);
    for (int l = 0; l < fx->n_layer; l++)
        for (int t = 0; t < n; t++) {
            ts_instruments ins = ts_instruments_default();
            ins.router_path = path;
            ins.router_logits_layer = l;
            ins.router_logits_pass = t;
            ts_session *s = new_session(fx, &ins, 16);
            if (!s) return;
            bool ok = run(fx, s, ids, false);
            ts_session_free(s);
            if (!ok) return;
            cJSON *j = NULL;
            ts_status st = json_in_load(path, 0, &j);
            CHECKF(st == TS_OK, "%s: %s", fx->name, ts_last_error());
            if (st) return;
            const cJSON *r = cJSON_GetObjectItem(j, "router_logits");
            const cJSON *v = cJSON_GetObjectItem(r, "values");
            bool shaped = ival(r, "layer") == l && ival(r, "pass") == t && cJSON_GetArraySize(v) == NE;
            CHECKF(shaped, "%s: router_logits row for layer %d pass %d missing or misshapen", fx->name, l, t);
            double err = 0;
            for (int e = 0; shaped && e < NE; e++) {
                const cJSON *x = at(v, e);
                err = worse(err, cJSON_IsNumber(x) ? fabs(x->valuedouble - num(at(at(rl, t), l), e)) : INFINITY);
            }
            CHECKF(err < LOGIT_ATOL, "%s prompt %d layer %d pass %d: router logits off by %.3g, tolerance %g", fx->name, pi, l, t, err,
                   LOGIT_ATOL);
            rs->logit_err = fmax(rs->logit_err, err);
            rs->logit_rows++;
            cJSON_Delete(j);
        }
}

/* ------------------------------------------------------------ driver */

static void run_fixture(const char *json_name) {
    char path[2048];
    snprintf(path, sizeof path, "%s/instr/%s", TS_FIXTURES, json_name);
    fixture fx = {.name = json_name};
    ts_status st = json_in_load(path, 0, &fx.root);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (st) return;
    const cJSON *g = cJSON_GetObjectItem(fx.root, "gguf"), *sha = cJSON_GetObjectItem(fx.root, "gguf_sha256");
    const cJSON *fl = cJSON_GetObjectItem(fx.root, "ffn_layers");
    fx.prompts = cJSON_GetObjectItem(fx.root, "prompts");
    fx.n_prompts = cJSON_GetArraySize(fx.prompts);
    fx.n_layer = ival(fx.root, "n_layer");
    fx.ffn_width = ival(fx.root, "ffn_width");
    fx.n_ffn_layers = cJSON_GetArraySize(fl);
    fx.n_expert = cJSON_GetObjectItem(fx.root, "n_expert") ? ival(fx.root, "n_expert") : 0;
    fx.top_k = fx.n_expert ? ival(fx.root, "top_k") : 0;
    bool shaped = cJSON_IsString(g) && cJSON_IsString(sha) && fx.n_prompts > 0 && fx.n_layer > 0 && fx.n_ffn_layers <= 16 &&
                  fx.ffn_width <= 4096 && fx.n_expert <= 64 && (fx.n_ffn_layers > 0 || fx.n_expert > 0);
    CHECKF(shaped, "%s: malformed instrument fixture", json_name);
    if (!shaped) { cJSON_Delete(fx.root); return; }
    for (int i = 0; i < fx.n_ffn_layers; i++) fx.ffn_layers[i] = id(fl, i);
    for (int i = 0; i < fx.n_prompts; i++) {
        int n = cJSON_GetArraySize(cJSON_GetObjectItem(at(fx.prompts, i), "ids"));
        if (n > fx.max_len) fx.max_len = n;
    }
    CHECKF(fx.max_len <= MAX_IDS, "%s: a prompt of %d ids (at most %d)", json_name, fx.max_len, MAX_IDS);
    if (fx.max_len > MAX_IDS) { cJSON_Delete(fx.root); return; }
    /* the fixture belongs to the GGUF the logit fixture describes */
    char refjson[2048];
    snprintf(refjson, sizeof refjson, "%s/ref/%.*s.json", TS_FIXTURES, (int)strlen(g->valuestring) - 5, g->valuestring);
    cJSON *ref = NULL;
    if (json_in_load(refjson, 0, &ref) == TS_OK) {
        const cJSON *rsha = cJSON_GetObjectItem(ref, "gguf_sha256");
        CHECKF(cJSON_IsString(rsha) && !strcmp(rsha->valuestring, sha->valuestring), "%s: made from another GGUF than %s describes",
               json_name, refjson);
        cJSON_Delete(ref);
    } else CHECKF(0, "%s: %s", json_name, ts_last_error());
    char gpath[2048];
    snprintf(gpath, sizeof gpath, "%s/ref/%s", TS_FIXTURES, g->valuestring);
    st = ts_model_load(gpath, NULL, &fx.m);
    CHECKF(st == TS_OK, "%s: load: %s", json_name, ts_last_error());
    if (st) { cJSON_Delete(fx.root); return; }

    if (fx.n_ffn_layers > 0) {
        census_stats cs = {.neg_err = INFINITY};
        for (int pi = 0; pi < fx.n_prompts; pi++) census_decode(&fx, pi, &cs);
        census_prefill(&fx, fx.n_prompts - 1, &cs);
        printf("%-24s census: %d layers x %d, sum|a| max rel err %.2g (tol %g); %ld of %ld bucket counts moved (%ld near an edge); "
               "sum|ffn_up| misses by >= %.2g\n",
               json_name, fx.n_ffn_layers, fx.ffn_width, cs.mass_err, MASS_RTOL, cs.hist_moved,
               cs.hist_total, cs.hist_allowed, cs.neg_err);
    }
    if (fx.n_expert > 0) {
        router_stats rs = {0};
        for (int pi = 0; pi < fx.n_prompts; pi++) {
            router_trace(&fx, pi, false, TS_PILOT_NEXT, &rs);
            router_trace(&fx, pi, true, TS_PILOT_NEXT, &rs);
            router_trace(&fx, pi, false, TS_PILOT_SELF, &rs);
            router_logits(&fx, pi, &rs);
        }
        /* both prefill and decode runs counted the pilot: halve for one run */
        long hits = rs.pilot_hits / 2, total = rs.pilot_total / 2;
        long want_hits = ival(fx.root, "pilot_hits"), want_total = ival(fx.root, "pilot_total");
        double chance = (double)fx.top_k / fx.n_expert, recall = total ? (double)hits / total : 0,
               want = want_total > 0 ? (double)want_hits / want_total : 0;
        CHECKF(rs.pilot_hits == 2 * hits && rs.pilot_total == 2 * total, "%s: prefill and decode pilots disagree", json_name);
        CHECKF(hits == want_hits && total == want_total, "%s: pilot recall %ld/%ld, transformers %ld/%ld", json_name, hits, total,
               want_hits, want_total);
        CHECKF(want > chance && want < 1.0, "%s: the fixture's recall %.4f is not strictly between chance %.2f and 1: it proves nothing",
               json_name, want, chance);
        CHECKF(recall > chance && recall < 1.0, "%s: pilot recall %.4f not strictly between chance %.2f and 1", json_name, recall, chance);
        CHECKF(rs.self_total == total && rs.self_hits == rs.self_total, "%s: self-aimed probe recall %ld/%ld, must be 100%%", json_name,
               rs.self_hits, rs.self_total);
        CHECKF(rs.sel_undecided == 0 && rs.pred_undecided == 0, "%s: %ld selections, %ld pilot guesses within %g of a tie", json_name,
               rs.sel_undecided, rs.pred_undecided, SEL_MARGIN);
        printf("%-24s router: %ld/%ld selections = transformers' (prefill + decode), %ld router-logit rows max err %.2g (tol %g); "
               "pilot %ld/%ld guesses = transformers', recall %ld/%ld = %.4f (transformers %.4f, chance %.2f); self-aimed %ld/%ld\n",
               json_name, rs.sel_same, rs.sel_checked, rs.logit_rows, rs.logit_err, LOGIT_ATOL, rs.pred_same, rs.pred_checked, hits, total, recall, want, chance,
               rs.self_hits, rs.self_total);
    }
    ts_model_free(fx.m);
    cJSON_Delete(fx.root);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *fixtures[] = {"tiny-llama-f32.json",   "tiny-llama31-f32.json", "tiny-qwen2-f32.json",
                              "tiny-qwen3-f32.json",   "tiny-gemma3-f32.json",  "tiny-qwen2moe-f32.json",
                              "tiny-qwen3moe-f32.json", "tiny-mixtral-f32.json", "tiny-olmoe-f32.json"};
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) run_fixture(fixtures[i]);
    const char *files[] = {"ffn.json", "ffn-prefill.json", "router.json", "router-logits.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return tu_finish();
}
