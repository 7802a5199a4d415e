/* The forward pass, dense and MoE.
 *
 * 1. Against Hugging Face transformers: every fixture in tests/fixtures/ref,
 *    all positions of every prompt: top-1 agreement and mean KL(ref || ours)
 *    over the reference top-20 + a tail bucket (docs/REFERENCE.md), printed
 *    per fixture. Tiny random models are committed; the three small real
 *    quantized models come from the model cache (`make test` fetches them):
 *    a missing one FAILS unless TS_ALLOW_MISSING_MODELS=1 (test_util.h).
 *    Real models run twice: reference precision (F32 activations), which must
 *    agree everywhere the reference is not tied, and the default path (8-bit
 *    activations), judged where the reference top-1 leads by more than
 *    DECISIVE_MARGIN, a margin derived from the measured noise of that path
 *    (docs/REFERENCE.md), which is measured again here on every run.
 * 2. Internal consistency on generated models in every weight type: batched
 *    prefill == token-by-token decode, 1 thread == 2 == 3 threads bit for
 *    bit, context overflow and bad ids refused, bad files refused by name.
 * 3. Every kernel ISA this CPU has: started without TS_FORCE_ISA, the program
 *    runs 1 and 2 at the best ISA and re-runs itself once per lower ISA
 *    (TS_FORCE_ISA=avx512, avx2, scalar), up to one process a CPU at once,
 *    then adds the children's counts to its own, so every code path meets
 *    the same bars. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forward/engine.h"
#include "gguf/gguf.h"
#include "tensor/quant.h"
#include "test_util.h"

/* ------------------------------------------------------------------ */
/* 1. reference fixtures                                               */

/* Real models, default path: top-1 is judged where the reference's top-1
 * leads its top-2 by more than this many logits, and must agree at every
 * such position. Derived in docs/REFERENCE.md ("The decisive margin"): above
 * the largest gap noise |(o1 - o2) - (p1 - p2)| measured between the 8-bit
 * path (o) and the F32-activation path (p) on the reference's top-1/top-2
 * tokens, over the three models and every ISA (0.744), so no position
 * beyond it can flip while the noise stays as measured. */
#define DECISIVE_MARGIN 1.0
/* The premise of that margin, re-measured on every run: each model's gap
 * noise q99 stays below DECISIVE_MARGIN / NOISE_GUARD (0.667; measured at
 * most 0.589). A kernel change that makes the 8-bit path noisier fails here
 * even while top-1 still passes. */
#define NOISE_GUARD 1.5
/* Reference precision: every position whose reference top-1 leads by more
 * than this must agree (the fixture rounds logits to 1e-6). */
#define PRECISE_MARGIN 1e-4
/* The scalar kernels are the slow references (double accumulation): with
 * them, real models run their prompts of at most this many tokens (all with
 * TS_FORWARD_ALL_PROMPTS=1; docs/REFERENCE.md gives the time). */
#define SCALAR_MAX_PROMPT 64
/* Sanitizer trees give test_forward these two (CMakeLists.txt says why):
 * every prompt cut to its first TS_FORWARD_CUT tokens, and the scalar level
 * running whole prompts of at most TS_FORWARD_SCALAR_MAX tokens instead of
 * SCALAR_MAX_PROMPT. A position's logits depend on the tokens up to it only,
 * so a cut prompt is judged at its first positions against the same
 * reference rows, by the same bars. */
static int prompt_cut = INT_MAX;
static int scalar_max = SCALAR_MAX_PROMPT;

typedef struct {
    double kl_sum;
    int64_t n_pos;
    int64_t top1_same;
    int64_t top1_near_tie; /* counted as agreement: ref top-2 within 1e-5 */
    int64_t n_decisive;    /* positions whose reference top-1 leads top-2 by > the margin */
    int64_t top1_decisive; /* ... where our top-1 agrees */
    double margin;         /* the margin of n_decisive */
    double kl_max;
    double dlogit_max;
    /* real models: logits of this pass at the reference's top-K ids, and
     * against another pass's (the F32-activation one) the noise */
    float *at_ref;      /* (n_pos, K) this pass's logits at the reference ids, or NULL */
    const float *other; /* (n_pos, K) the F32-activation pass's, or NULL */
    double *gap_noise;  /* (n_pos) |(o1 - o2) - (p1 - p2)| on the reference top-1/top-2 ids */
    double *logit_noise; /* (n_pos * K) |o_i - p_i| */
    int64_t n_logit_noise;
} cmp_stats;

enum { REF_K = 20 };

/* KL over the K reference ids plus one bucket for the rest (a lower bound of
 * the full KL, as coarse-graining never increases it). */
static void compare_row(const cJSON *top, double lse, const float *ours, int32_t V, cmp_stats *st) {
    double m = ours[0];
    int32_t am = 0;
    for (int32_t i = 1; i < V; i++)
        if (ours[i] > m) {
            m = ours[i];
            am = i;
        }
    double s = 0;
    for (int32_t i = 0; i < V; i++) s += exp((double)ours[i] - m);
    double o_lse = m + log(s);
    int K = cJSON_GetArraySize(top);
    if (K > REF_K) K = REF_K;
    double kl = 0, p_top = 0, q_top = 0, dl = 0;
    int ids[REF_K];
    for (int i = 0; i < K; i++) {
        const cJSON *e = cJSON_GetArrayItem(top, i);
        int id = (int)cJSON_GetArrayItem(e, 0)->valuedouble;
        ids[i] = id;
        double rl = cJSON_GetArrayItem(e, 1)->valuedouble;
        double lp = rl - lse, lq = (double)ours[id] - o_lse;
        kl += exp(lp) * (lp - lq);
        p_top += exp(lp);
        q_top += exp(lq);
        double d = fabs((double)ours[id] - rl);
        if (d > dl) dl = d;
    }
    double p_tail = 1.0 - p_top, q_tail = 1.0 - q_top;
    if (p_tail > 0) kl += p_tail * (log(p_tail) - log(q_tail > 1e-300 ? q_tail : 1e-300));
    int ref0 = ids[0];
    double ref0l = cJSON_GetArrayItem(cJSON_GetArrayItem(top, 0), 1)->valuedouble;
    const cJSON *e1 = cJSON_GetArrayItem(top, 1);
    bool decisive = !e1 || ref0l - cJSON_GetArrayItem(e1, 1)->valuedouble > st->margin;
    st->n_decisive += decisive;
    st->top1_decisive += decisive && am == ref0;
    if (st->at_ref) {
        float *row = st->at_ref + st->n_pos * REF_K;
        for (int i = 0; i < K; i++) row[i] = ours[ids[i]];
    }
    if (st->other && K >= 2) {
        const float *p = st->other + st->n_pos * REF_K;
        st->gap_noise[st->n_pos] = fabs(((double)ours[ids[0]] - ours[ids[1]]) - ((double)p[0] - p[1]));
        for (int i = 0; i < K; i++) st->logit_noise[st->n_logit_noise++] = fabs((double)ours[ids[i]] - p[i]);
    }
    if (am == ref0) st->top1_same++;
    else {
        if (getenv("TS_VERBOSE")) {
            double gap = -1;
            for (int i = 1; i < K; i++)
                if (ids[i] == am) gap = ref0l - cJSON_GetArrayItem(cJSON_GetArrayItem(top, i), 1)->valuedouble;
            printf("    top-1 flip at position %lld: ref %d, ours %d, reference gap %.4f, our gap %.4f\n", (long long)st->n_pos, ref0, am,
                   gap, (double)ours[am] - ours[ref0]);
        }
        /* our argmax is the reference runner-up within rounding of a tie */
        if (e1 && (int)cJSON_GetArrayItem(e1, 0)->valuedouble == am && ref0l - cJSON_GetArrayItem(e1, 1)->valuedouble < 1e-5)
            st->top1_near_tie++;
    }
    st->kl_sum += kl;
    if (kl > st->kl_max) st->kl_max = kl;
    if (dl > st->dlogit_max) st->dlogit_max = dl;
    st->n_pos++;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank quantile of v[0..n) (sorts v) */
static double quantile(double *v, int64_t n, double q) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int64_t r = (int64_t)ceil(q * (double)n) - 1;
    return v[r < 0 ? 0 : r >= n ? n - 1 : r];
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* One pass over the fixture's prompts (those of at most max_prompt ids) with
 * session options o; fills cs. */
static bool eval_fixture(ts_model *m, const ts_session_opts *o, const cJSON *prompts, int max_prompt, const char *json_name,
                         cmp_stats *cs) {
    ts_session *s = NULL;
    ts_status st = ts_session_new(m, o, &s);
    CHECKF(st == TS_OK, "%s: session: %s", json_name, ts_last_error());
    if (st != TS_OK) return false;
    int32_t V = ts_model_n_vocab(m);
    const cJSON *p;
    bool ok = true;
    cJSON_ArrayForEach(p, prompts) {
        const cJSON *ids = cJSON_GetObjectItem(p, "ids");
        const cJSON *top = cJSON_GetObjectItem(p, "top");
        const cJSON *lse = cJSON_GetObjectItem(p, "logsumexp");
        int n = cJSON_GetArraySize(ids);
        if (n > max_prompt) continue;
        if (n > prompt_cut) n = prompt_cut;
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
        for (int i = 0; i < n; i++) tok[i] = (int32_t)cJSON_GetArrayItem(ids, i)->valuedouble;
        ts_session_reset(s);
        /* evaluate in slices so the all-positions buffer stays small */
        for (int i0 = 0; i0 < n && ok; i0 += 64) {
            int k = n - i0 < 64 ? n - i0 : 64;
            float *lg = NULL;
            st = ts_session_eval(s, tok + i0, k, &lg);
            CHECKF(st == TS_OK, "%s: eval: %s", json_name, ts_last_error());
            if (st != TS_OK) ok = false;
            for (int r = 0; r < k && ok; r++)
                compare_row(cJSON_GetArrayItem(top, i0 + r), cJSON_GetArrayItem(lse, i0 + r)->valuedouble, lg + (size_t)r * V, V, cs);
        }
        free(tok);
    }
    ts_session_free(s);
    return ok;
}

static void print_stats(const char *json_name, ts_model *m, const char *mode, const cmp_stats *cs, double dt) {
    double mean_kl = cs->n_pos ? cs->kl_sum / (double)cs->n_pos : INFINITY;
    double top1 = cs->n_pos ? (double)(cs->top1_same + cs->top1_near_tie) / (double)cs->n_pos : 0;
    double top1d = cs->n_decisive ? (double)cs->top1_decisive / (double)cs->n_decisive : 1;
    printf("%-26s %-6s %-6s %-12s pos %4lld  top-1 %6.2f%% (margin>%g: %6.2f%% of %lld)  mean KL %.2e  max KL %.2e  max|dlogit| %.1e  %.1fs\n",
           json_name, ts_model_arch(m), ts_kernels_isa(), mode, (long long)cs->n_pos, 100.0 * top1, cs->margin, 100.0 * top1d,
           (long long)cs->n_decisive, mean_kl, cs->kl_max, cs->dlogit_max, dt);
}

/* Real model: reference precision first (its logits at the reference ids are
 * kept), then the default 8-bit path, judged and measured against it. */
static void run_real(ts_model *m, const cJSON *prompts, const char *json_name, int max_len) {
    int max_prompt = max_len;
    if (!strcmp(ts_kernels_isa(), "scalar") && !getenv("TS_FORWARD_ALL_PROMPTS")) {
        max_prompt = scalar_max;
        printf("%-26s (scalar kernels: prompts of <= %d tokens; TS_FORWARD_ALL_PROMPTS=1 runs all)\n", json_name, scalar_max);
    }
    int64_t total = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        int n = cJSON_GetArraySize(cJSON_GetObjectItem(p, "ids"));
        if (n <= max_prompt) total += n < prompt_cut ? n : prompt_cut;
    }
    CHECKF(total > 0, "%s: no prompt to run", json_name);
    if (!total) return;
    ts_session_opts o = ts_session_opts_default();
    o.n_ctx = max_len;
    o.all_logits = true;
    o.n_batch = 64;

    cmp_stats pr = {.margin = PRECISE_MARGIN};
    pr.at_ref = malloc(sizeof(float) * (size_t)total * REF_K);
    o.precise = true;
    double t0 = ts_now();
    bool ok = eval_fixture(m, &o, prompts, max_prompt, json_name, &pr);
    print_stats(json_name, m, "act-f32", &pr, ts_now() - t0);
    if (ok) {
        /* only the weights' own quantization differs from the reference, and
         * the reference runs exactly those weights: agreement everywhere the
         * reference is not tied (measured: 100% top-1, mean KL <= 1.5e-6) */
        double mean_kl = pr.kl_sum / (double)pr.n_pos;
        CHECKF(pr.top1_decisive == pr.n_decisive, "%s (precise): top-1 differs at %lld of %lld positions with reference margin > %g",
               json_name, (long long)(pr.n_decisive - pr.top1_decisive), (long long)pr.n_decisive, PRECISE_MARGIN);
        CHECKF(mean_kl < 1e-5, "%s (precise): mean KL %.3e >= 1e-5", json_name, mean_kl);
    }

    cmp_stats fa = {.margin = DECISIVE_MARGIN};
    fa.other = ok ? pr.at_ref : NULL;
    fa.gap_noise = malloc(sizeof(double) * (size_t)total);
    fa.logit_noise = malloc(sizeof(double) * (size_t)total * REF_K);
    o.precise = false;
    t0 = ts_now();
    ok = eval_fixture(m, &o, prompts, max_prompt, json_name, &fa) && ok;
    print_stats(json_name, m, "act-8bit", &fa, ts_now() - t0);
    if (ok) {
        /* Quantized weights meet activations quantized to Q8_0/Q8_K (as in
         * llama.cpp) while the reference runs the same dequantized weights
         * in float64: that rounding moves logits and flips near-ties
         * (docs/REFERENCE.md). Top-1 is judged where the reference leads by
         * more than that noise can close. */
        double mean_kl = fa.kl_sum / (double)fa.n_pos;
        double top1d = fa.n_decisive ? (double)fa.top1_decisive / (double)fa.n_decisive : 1;
        CHECKF(mean_kl < 5e-3, "%s: mean KL %.3e >= 5e-3", json_name, mean_kl);
        CHECKF(fa.top1_decisive == fa.n_decisive, "%s: top-1 differs at %lld of %lld positions with reference margin > %g (%.4f)",
               json_name, (long long)(fa.n_decisive - fa.top1_decisive), (long long)fa.n_decisive, DECISIVE_MARGIN, top1d);
        int64_t n = fa.n_pos;
        double g50 = quantile(fa.gap_noise, n, 0.5), g90 = quantile(fa.gap_noise, n, 0.9), g99 = quantile(fa.gap_noise, n, 0.99),
               gmax = quantile(fa.gap_noise, n, 1.0);
        int64_t nl = fa.n_logit_noise;
        double l50 = quantile(fa.logit_noise, nl, 0.5), l99 = quantile(fa.logit_noise, nl, 0.99), lmax = quantile(fa.logit_noise, nl, 1.0);
        printf("%-26s %-6s %-6s noise vs act-f32: top-1/top-2 gap q50 %.3f q90 %.3f q99 %.3f max %.3f; logits q50 %.3f q99 %.3f max %.3f\n",
               json_name, ts_model_arch(m), ts_kernels_isa(), g50, g90, g99, gmax, l50, l99, lmax);
        CHECKF(g99 < DECISIVE_MARGIN / NOISE_GUARD, "%s: 8-bit path gap noise q99 %.3f >= %.3f (DECISIVE_MARGIN / NOISE_GUARD)", json_name,
               g99, DECISIVE_MARGIN / NOISE_GUARD);
    }
    free(pr.at_ref);
    free(fa.gap_noise);
    free(fa.logit_noise);
}

static void run_fixture(const char *dir, const char *json_name) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, json_name);
    char *text = read_text(path);
    CHECKF(text != NULL, "cannot read %s", path);
    if (!text) return;
    cJSON *j = cJSON_Parse(text);
    free(text);
    CHECKF(j != NULL, "%s: bad JSON", path);
    if (!j) return;
    const cJSON *g = cJSON_GetObjectItem(j, "gguf");
    const cJSON *prompts = cJSON_GetObjectItem(j, "prompts");
    CHECKF(cJSON_IsString(g) && cJSON_IsArray(prompts), "%s: no gguf/prompts", json_name);
    if (!cJSON_IsString(g) || !cJSON_IsArray(prompts)) {
        cJSON_Delete(j);
        return;
    }
    bool real = strncmp(json_name, "real-", 5) == 0;
    char gpath[2048];
    if (real) tu_model_path(g->valuestring, gpath, sizeof gpath);
    else snprintf(gpath, sizeof gpath, "%s/%s", dir, g->valuestring);
    if (!file_exists(gpath)) {
        const cJSON *name = cJSON_GetObjectItem(j, "model");
        if (real) tu_missing_model(cJSON_IsString(name) ? name->valuestring : g->valuestring, gpath);
        else CHECKF(0, "%s: committed fixture model %s is missing", json_name, gpath);
        cJSON_Delete(j);
        return;
    }
    ts_model *m = NULL;
    ts_status st = ts_model_load(gpath, NULL, &m);
    CHECKF(st == TS_OK, "%s: load: %s", json_name, ts_last_error());
    if (st != TS_OK) {
        cJSON_Delete(j);
        return;
    }
    int max_len = 1;
    cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        int n = cJSON_GetArraySize(cJSON_GetObjectItem(p, "ids"));
        if (n > max_len) max_len = n;
    }
    if (real) {
        run_real(m, prompts, json_name, max_len);
        ts_model_free(m);
        cJSON_Delete(j);
        return;
    }
    /* tiny fixtures run twice: the default F16 KV cache (the issue's
     * thresholds) and an F32 one, where every input is exact and only f32
     * rounding remains (docs/REFERENCE.md's strict thresholds) */
    for (int pass = 0; pass < 2; pass++) {
        bool kv32 = pass == 1;
        ts_session_opts o = ts_session_opts_default();
        o.n_ctx = max_len;
        o.all_logits = true;
        o.n_batch = 64;
        o.kv_f32 = kv32;
        cmp_stats cs = {.margin = 0.1};
        double t0 = ts_now();
        if (!eval_fixture(m, &o, prompts, max_len, json_name, &cs)) break;
        print_stats(json_name, m, kv32 ? "kv-f32" : "kv-f16", &cs, ts_now() - t0);
        double mean_kl = cs.n_pos ? cs.kl_sum / (double)cs.n_pos : INFINITY;
        double top1 = cs.n_pos ? (double)(cs.top1_same + cs.top1_near_tie) / (double)cs.n_pos : 0;
        if (!kv32 && cJSON_IsNumber(cJSON_GetObjectItem(j, "router_min_gap")) &&
            cJSON_GetObjectItem(j, "router_min_gap")->valuedouble < 1e-3) {
            /* The fixture's closest routing decision is decided by less than
             * F16 KV rounding moves a router logit (tiny-mixtral: 2e-4), so an
             * F16 cache may pick the other expert there; the F32-KV run below
             * is the exact check for this fixture. */
            printf("%-26s (f16 KV not judged: router_min_gap %.1e is below F16 rounding)\n", json_name,
                   cJSON_GetObjectItem(j, "router_min_gap")->valuedouble);
        } else if (!kv32) {
            CHECKF(mean_kl < 1e-4, "%s: mean KL %.3e >= 1e-4", json_name, mean_kl);
            CHECKF(top1 == 1.0, "%s: top-1 %.4f < 1", json_name, top1);
        } else {
            CHECKF(cs.kl_max < 1e-6, "%s (f32 KV): max KL %.3e >= 1e-6", json_name, cs.kl_max);
            CHECKF(cs.dlogit_max < 1e-3, "%s (f32 KV): max |dlogit| %.3e >= 1e-3", json_name, cs.dlogit_max);
            CHECKF(top1 == 1.0, "%s (f32 KV): top-1 %.4f < 1", json_name, top1);
        }
    }
    ts_model_free(m);
    cJSON_Delete(j);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_fixtures(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/ref", TS_FIXTURES);
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "no fixture directory %s", dir);
    if (!d) return;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        /* tiny-*.json and real-*.json compare logits; other fixtures here serve other tests */
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0 && (!strncmp(e->d_name, "tiny-", 5) || !strncmp(e->d_name, "real-", 5)))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    CHECKF(n > 0, "no fixtures in %s", dir);
    const char *only = getenv("TS_FIXTURE");
    for (int i = 0; i < n; i++) {
        if (!only || strstr(names[i], only)) run_fixture(dir, names[i]);
        free(names[i]);
    }
}

/* ------------------------------------------------------------------ */
/* 2. generated models                                                 */

typedef struct {
    const char *arch;
    ts_type wtype;
    int n_embd, n_ff, n_head, n_head_kv, head_dim, n_layer, n_vocab, n_ctx, swa;
    bool tied;
} gen_cfg;

static uint64_t rng_state = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void put_mat(gguf_writer *w, const char *name, ts_type type, int64_t n_in, int64_t n_out, float scale) {
    uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    uint8_t *data = malloc(rb * (uint64_t)n_out);
    float *row = malloc(sizeof(float) * (size_t)n_in);
    for (int64_t r = 0; r < n_out; r++) {
        for (int64_t i = 0; i < n_in; i++) row[i] = frand() * scale;
        ts_quantize_row_ref(type, row, data + (uint64_t)r * rb, n_in);
    }
    uint64_t ne[2] = {(uint64_t)n_in, (uint64_t)n_out};
    gguf_w_tensor(w, name, type, 2, ne, data, rb * (uint64_t)n_out);
    free(row);
    free(data);
}

static void put_vec(gguf_writer *w, const char *name, int64_t n, float base, float noise) {
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = base + noise * frand();
    uint64_t ne[1] = {(uint64_t)n};
    gguf_w_tensor(w, name, TS_TYPE_F32, 1, ne, v, sizeof(float) * (uint64_t)n);
    free(v);
}

/* Builds a small random model; skip_tensor drops one tensor by name and
 * bad_shape_tensor writes one with a wrong shape, to test refusals. */
static ts_status gen_model(const gen_cfg *c, const char *skip_tensor, const char *bad_shape_tensor, ts_model **out, uint8_t **file) {
    *file = NULL;
    gguf_writer *w = gguf_writer_new(3, 32);
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, c->arch), k)
    gguf_w_str(w, "general.architecture", c->arch);
    gguf_w_u32(w, KEY("context_length"), (uint32_t)c->n_ctx);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)c->n_embd);
    gguf_w_u32(w, KEY("block_count"), (uint32_t)c->n_layer);
    gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)c->n_ff);
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_head_kv);
    gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
    gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    gguf_w_f32(w, KEY("rope.freq_base"), 10000.0f);
    if (c->swa) gguf_w_u32(w, KEY("attention.sliding_window"), (uint32_t)c->swa);
#undef KEY
    int E = c->n_embd, QD = c->n_head * c->head_dim, KVD = c->n_head_kv * c->head_dim;
    bool qkv_bias = strcmp(c->arch, "qwen2") == 0;
    bool qk_norm = strcmp(c->arch, "qwen3") == 0 || strcmp(c->arch, "gemma3") == 0;
    bool post = strcmp(c->arch, "gemma3") == 0;
    char name[96];
#define PUT_MAT(nm, nin, nout)                                                                       \
    do {                                                                                             \
        if (!skip_tensor || strcmp(skip_tensor, nm)) {                                               \
            bool bad = bad_shape_tensor && !strcmp(bad_shape_tensor, nm);                            \
            put_mat(w, nm, c->wtype, nin, bad ? (nout) + 1 : (nout), 1.5f / sqrtf((float)(nin)));    \
        }                                                                                            \
    } while (0)
#define PUT_VEC(nm, n, base, noise) \
    do {                            \
        if (!skip_tensor || strcmp(skip_tensor, nm)) put_vec(w, nm, n, base, noise); \
    } while (0)
    /* embeddings large enough that logits spread over a few units */
    if (!skip_tensor || strcmp(skip_tensor, "token_embd.weight"))
        put_mat(w, "token_embd.weight", c->wtype, E, c->n_vocab, 1.0f);
    PUT_VEC("output_norm.weight", E, 1.0f, 0.2f);
    if (!c->tied) PUT_MAT("output.weight", E, c->n_vocab);
    for (int l = 0; l < c->n_layer; l++) {
#define N(s) (snprintf(name, sizeof name, "blk.%d." s, l), name)
        PUT_VEC(N("attn_norm.weight"), E, 1.0f, 0.2f);
        PUT_MAT(N("attn_q.weight"), E, QD);
        PUT_MAT(N("attn_k.weight"), E, KVD);
        PUT_MAT(N("attn_v.weight"), E, KVD);
        PUT_MAT(N("attn_output.weight"), QD, E);
        if (qkv_bias) {
            PUT_VEC(N("attn_q.bias"), QD, 0.0f, 0.3f);
            PUT_VEC(N("attn_k.bias"), KVD, 0.0f, 0.3f);
            PUT_VEC(N("attn_v.bias"), KVD, 0.0f, 0.3f);
        }
        if (qk_norm) {
            PUT_VEC(N("attn_q_norm.weight"), c->head_dim, 1.0f, 0.2f);
            PUT_VEC(N("attn_k_norm.weight"), c->head_dim, 1.0f, 0.2f);
        }
        if (post) {
            PUT_VEC(N("post_attention_norm.weight"), E, 1.0f, 0.2f);
            PUT_VEC(N("post_ffw_norm.weight"), E, 1.0f, 0.2f);
        }
        PUT_VEC(N("ffn_norm.weight"), E, 1.0f, 0.2f);
        PUT_MAT(N("ffn_gate.weight"), E, c->n_ff);
        PUT_MAT(N("ffn_up.weight"), E, c->n_ff);
        PUT_MAT(N("ffn_down.weight"), c->n_ff, E);
#undef N
    }
#undef PUT_MAT
#undef PUT_VEC
    uint8_t *buf = NULL;
    uint64_t size = 0;
    ts_status st = gguf_writer_to_buffer(w, &buf, &size);
    gguf_writer_free(w);
    if (st != TS_OK) return st;
    gguf_file *f = NULL;
    st = gguf_open_memory(buf, size, "generated.gguf", &f);
    if (st != TS_OK) {
        free(buf);
        return st;
    }
    /* the model points into buf: the caller frees buf after the model */
    st = ts_model_load_gguf(f, NULL, out);
    if (st != TS_OK) free(buf);
    else *file = buf;
    return st;
}

static float *eval_all(ts_model *m, int n_threads, int n_batch, const int32_t *ids, int n, bool one_by_one) {
    ts_session_opts o = ts_session_opts_default();
    o.n_threads = n_threads;
    o.n_batch = n_batch;
    o.all_logits = true;
    o.n_ctx = n;
    ts_session *s = NULL;
    if (ts_session_new(m, &o, &s) != TS_OK) return NULL;
    int32_t V = ts_model_n_vocab(m);
    float *res = malloc(sizeof(float) * (size_t)n * (size_t)V);
    float *lg;
    if (one_by_one) {
        for (int i = 0; i < n; i++) {
            if (ts_session_eval(s, ids + i, 1, &lg) != TS_OK) goto fail;
            memcpy(res + (size_t)i * V, lg, sizeof(float) * (size_t)V);
        }
    } else {
        if (ts_session_eval(s, ids, n, &lg) != TS_OK) goto fail;
        memcpy(res, lg, sizeof(float) * (size_t)n * (size_t)V);
    }
    ts_session_free(s);
    return res;
fail:
    fprintf(stderr, "eval failed: %s\n", ts_last_error());
    free(res);
    ts_session_free(s);
    return NULL;
}

static void test_generated(const char *arch, ts_type wtype, int swa) {
    gen_cfg c = {.arch = arch, .wtype = wtype, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
                 .n_layer = 2, .n_vocab = 96, .n_ctx = 64, .swa = swa, .tied = wtype == TS_TYPE_Q8_0};
    ts_model *m = NULL;
    uint8_t *file = NULL;
    ts_status st = gen_model(&c, NULL, NULL, &m, &file);
    CHECKF(st == TS_OK, "%s/%s: %s", arch, ts_type_name(wtype), ts_last_error());
    if (st != TS_OK) return;
    enum { N = 40 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 37 + 11) % c.n_vocab;
    int32_t V = c.n_vocab;

    float *pre1 = eval_all(m, 1, 16, ids, N, false);   /* prefill in chunks of 16 */
    float *pre2 = eval_all(m, 2, 16, ids, N, false);
    float *pre3 = eval_all(m, 3, 16, ids, N, false);
    float *dec1 = eval_all(m, 1, 16, ids, N, true);    /* one token at a time */
    float *dec2 = eval_all(m, 2, 16, ids, N, true);
    CHECK(pre1 && pre2 && pre3 && dec1 && dec2);
    if (pre1 && pre2 && pre3 && dec1 && dec2) {
        size_t bytes = sizeof(float) * (size_t)N * (size_t)V;
        CHECKF(memcmp(pre1, pre2, bytes) == 0, "%s/%s: prefill differs between 1 and 2 threads", arch, ts_type_name(wtype));
        CHECKF(memcmp(pre1, pre3, bytes) == 0, "%s/%s: prefill differs between 1 and 3 threads", arch, ts_type_name(wtype));
        CHECKF(memcmp(dec1, dec2, bytes) == 0, "%s/%s: decode differs between 1 and 2 threads", arch, ts_type_name(wtype));
        double maxd = 0, maxl = 0, sumd = 0;
        bool finite = true;
        for (size_t i = 0; i < (size_t)N * V; i++) {
            if (!isfinite(pre1[i]) || !isfinite(dec1[i])) finite = false;
            double d = fabs((double)pre1[i] - dec1[i]);
            sumd += d;
            if (d > maxd) maxd = d;
            if (fabs(dec1[i]) > maxl) maxl = fabs(dec1[i]);
        }
        double meand = sumd / ((double)N * V);
        CHECKF(finite, "%s/%s: non-finite logits", arch, ts_type_name(wtype));
        /* The tile kernel may sum in another order than the row kernel.
         * With float weights (F32 partner) that is all: rounding. With Q8
         * activation partners, a rounding-level change of an input can move
         * a Q8 quant by one step (the quantizer is discontinuous), and those
         * steps propagate: measured up to ~1.3% of the largest logit (max)
         * and ~0.2% (mean) on these 2-layer models; a wrong kernel or
         * layout gives differences of the order of the logits. */
        bool float_partner = ts_type_dot_partner(wtype) == TS_TYPE_F32;
        double tol_max = float_partner ? 1e-4 * maxl + 1e-5 : 5e-2 * maxl;
        double tol_mean = float_partner ? 1e-5 * maxl + 1e-6 : 5e-3 * maxl;
        CHECKF(maxd <= tol_max && meand <= tol_mean, "%s/%s: prefill vs decode max |d| %.3e, mean |d| %.3e (max |logit| %.2f)", arch,
               ts_type_name(wtype), maxd, meand, maxl);
        CHECKF(maxl > 0.5, "%s/%s: degenerate logits (max |logit| %.3f)", arch, ts_type_name(wtype), maxl);
        if (getenv("TS_VERBOSE"))
            printf("  %s/%-5s prefill vs decode max |d| %.2e mean %.2e of %.2f\n", arch, ts_type_name(wtype), maxd, meand, maxl);
    }
    free(pre1);
    free(pre2);
    free(pre3);
    free(dec1);
    free(dec2);
    ts_model_free(m);
    free(file);
}

static void test_limits(void) {
    gen_cfg c = {.arch = "llama", .wtype = TS_TYPE_F32, .n_embd = 64, .n_ff = 96, .n_head = 4, .n_head_kv = 4, .head_dim = 16,
                 .n_layer = 1, .n_vocab = 32, .n_ctx = 16};
    ts_model *m = NULL;
    uint8_t *file = NULL;
    CHECK(gen_model(&c, NULL, NULL, &m, &file) == TS_OK);
    if (!m) return;
    ts_session_opts o = ts_session_opts_default();
    ts_session *s = NULL;
    CHECK(ts_session_new(m, &o, &s) == TS_OK);
    CHECK(ts_session_n_ctx(s) == 16); /* from context_length */
    ts_session_free(s);
    o.n_ctx = 8;
    CHECK(ts_session_new(m, &o, &s) == TS_OK);
    int32_t ids[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    float *lg = NULL;
    CHECK(ts_session_eval(s, ids, 9, &lg) == TS_ERR_LIMIT && lg == NULL);
    CHECK(strstr(ts_last_error(), "context") != NULL);
    CHECK(ts_session_n_past(s) == 0);
    CHECK(ts_session_eval(s, ids, 8, &lg) == TS_OK && lg);
    CHECK(ts_session_n_past(s) == 8);
    CHECK(ts_session_eval(s, ids, 1, &lg) == TS_ERR_LIMIT);
    CHECK(ts_session_truncate(s, 7) == TS_OK && ts_session_n_past(s) == 7);
    CHECK(ts_session_truncate(s, 9) == TS_ERR_ARG);
    CHECK(ts_session_eval(s, ids, 1, &lg) == TS_OK);
    ts_session_reset(s);
    int32_t bad = 32;
    CHECK(ts_session_eval(s, &bad, 1, &lg) == TS_ERR_ARG);
    bad = -1;
    CHECK(ts_session_eval(s, &bad, 1, &lg) == TS_ERR_ARG);
    CHECK(ts_session_eval(s, ids, 0, &lg) == TS_ERR_ARG);
    ts_timings t = ts_session_timings(s);
    CHECK(t.prefill_tokens == 8 && t.decode_tokens == 1);
    ts_session_free(s);
    ts_model_free(m);
    free(file);
}

static void test_refusals(void) {
    gen_cfg c = {.arch = "llama", .wtype = TS_TYPE_F32, .n_embd = 64, .n_ff = 96, .n_head = 4, .n_head_kv = 4, .head_dim = 16,
                 .n_layer = 2, .n_vocab = 32, .n_ctx = 16};
    ts_model *m = NULL;
    uint8_t *file = NULL;
    c.arch = "mamba";
    CHECK(gen_model(&c, NULL, NULL, &m, &file) == TS_ERR_UNSUPPORTED && !m);
    CHECKF(strstr(ts_last_error(), "mamba") && strstr(ts_last_error(), "llama, qwen2, qwen3, gemma3"), "%s", ts_last_error());
    c.arch = "llama";
    CHECK(gen_model(&c, "blk.1.ffn_up.weight", NULL, &m, &file) == TS_ERR_FORMAT && !m);
    CHECKF(strstr(ts_last_error(), "missing tensor 'blk.1.ffn_up.weight'"), "%s", ts_last_error());
    CHECK(gen_model(&c, NULL, "blk.0.attn_k.weight", &m, &file) == TS_ERR_FORMAT && !m);
    CHECKF(strstr(ts_last_error(), "blk.0.attn_k.weight") && strstr(ts_last_error(), "expected [64, 64]"), "%s", ts_last_error());
    c.arch = "qwen2"; /* needs biases the llama generator writes only for qwen2: drop one */
    CHECK(gen_model(&c, "blk.0.attn_v.bias", NULL, &m, &file) == TS_ERR_FORMAT && !m);
    CHECKF(strstr(ts_last_error(), "attn_v.bias"), "%s", ts_last_error());
    c.arch = "gemma3";
    CHECK(gen_model(&c, "blk.1.post_ffw_norm.weight", NULL, &m, &file) == TS_ERR_FORMAT && !m);
    c.wtype = TS_TYPE_IQ2_XXS;
    c.n_embd = 256;
    c.n_ff = 256;
    c.head_dim = 64;
    c.arch = "llama";
    /* the writer needs a quantizer only for data; write raw zeros instead */
    {
        gguf_writer *w = gguf_writer_new(3, 32);
        gguf_w_str(w, "general.architecture", "llama");
        gguf_w_u32(w, "llama.context_length", 16);
        gguf_w_u32(w, "llama.embedding_length", 256);
        gguf_w_u32(w, "llama.block_count", 1);
        gguf_w_u32(w, "llama.feed_forward_length", 256);
        gguf_w_u32(w, "llama.attention.head_count", 4);
        uint64_t ne[2] = {256, 32};
        uint64_t nb = ts_type_row_bytes(TS_TYPE_IQ2_XXS, 256) * 32;
        uint8_t *z = calloc(1, nb);
        gguf_w_tensor(w, "token_embd.weight", TS_TYPE_IQ2_XXS, 2, ne, z, nb);
        free(z);
        uint8_t *buf;
        uint64_t size;
        CHECK(gguf_writer_to_buffer(w, &buf, &size) == TS_OK);
        gguf_writer_free(w);
        gguf_file *f = NULL;
        CHECK(gguf_open_memory(buf, size, "iq2.gguf", &f) == TS_OK);
        CHECK(ts_model_load_gguf(f, NULL, &m) == TS_ERR_UNSUPPORTED && !m);
        CHECKF(strstr(ts_last_error(), "IQ2_XXS") && strstr(ts_last_error(), "Q4_K"), "%s", ts_last_error());
        free(buf);
    }
}

/* ------------------------------------------------------------------ */
/* 3. the lower ISAs                                                   */

extern char **environ;

/* One lower ISA level: this program again with TS_FORCE_ISA=isa (which the
 * quant dispatcher and the CPU backend's float kernels both read at start),
 * its output in an unlinked temporary file until it is echoed. */
typedef struct {
    int isa;     /* ts_isa level the child runs */
    pid_t pid;   /* > 0 once started (fork succeeded) */
    FILE *out;   /* its stdout and stderr */
    bool reaped; /* waited for: status holds its wait status */
    int status;
} isa_child;

static void start_child_isa(isa_child *c, char **argv) {
    char force[64];
    snprintf(force, sizeof force, "TS_FORCE_ISA=%s", ts_isa_name(c->isa));
    size_t ne = 0;
    while (environ[ne]) ne++;
    char **env = malloc(sizeof *env * (ne + 2));
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "TS_FORCE_ISA=", 13)) env[k++] = environ[i];
    env[k++] = force;
    env[k] = NULL;
    c->pid = -1;
    c->out = tmpfile();
    CHECKF(c->out != NULL, "TS_FORCE_ISA=%s run: no temporary file", ts_isa_name(c->isa));
    if (!c->out) {
        free(env);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(c->out), 1);
        dup2(fileno(c->out), 2);
        execve("/proc/self/exe", argv, env);
        execve(argv[0], argv, env);
        _exit(127);
    }
    free(env);
    CHECKF(pid > 0, "TS_FORCE_ISA=%s run: fork failed", ts_isa_name(c->isa));
    c->pid = pid;
}

/* Waits until one of the started children ends; false when none runs. */
static bool reap_child_isa(isa_child *kids, int nk) {
    for (;;) {
        bool any = false;
        for (int i = 0; i < nk; i++) any |= kids[i].pid > 0 && !kids[i].reaped;
        if (!any) return false;
        int status = 0;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR) continue;
        CHECKF(pid > 0, "waiting for the TS_FORCE_ISA runs: %s", strerror(errno));
        if (pid < 0) return false;
        for (int i = 0; i < nk; i++)
            if (kids[i].pid == pid && !kids[i].reaped) {
                kids[i].reaped = true;
                kids[i].status = status;
                return true;
            }
    }
}

/* Echoes a reaped child's output with an [isa] prefix and adds its counts to
 * ours. */
static void finish_child_isa(isa_child *c) {
    if (!c->out) return;
    int status = c->status;
    bool exited = c->pid > 0 && c->reaped && WIFEXITED(status);
    rewind(c->out);
    char line[4096];
    int cp = -1, cf = -1;
    while (fgets(line, sizeof line, c->out)) {
        int a, b;
        char rest[8];
        /* the child's summary: "P passed, F failed" (+ ", S skipped (...)") */
        if (sscanf(line, "%d passed, %d failed%1[,\n]", &a, &b, rest) == 3) cp = a, cf = b;
        printf("[%s] %s", ts_isa_name(c->isa), line);
    }
    fclose(c->out);
    c->out = NULL;
    if (c->pid <= 0) return;
    CHECKF(exited && cp >= 0, "TS_FORCE_ISA=%s run: no summary line (exit status %d, signal %d)", ts_isa_name(c->isa),
           exited ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (!exited || cp < 0) return;
    CHECKF((WEXITSTATUS(status) != 0) == (cf > 0), "TS_FORCE_ISA=%s run: exit status %d with %d failures", ts_isa_name(c->isa),
           WEXITSTATUS(status), cf);
    tu_passed += cp;
    tu_failed += cf;
}

/* CPUs this process may run on: the lower levels run beside each other and
 * beside this level's own tests, up to one process a CPU (under ASan on a
 * 2-CPU AMX machine the four levels one after another took 2097 s of the
 * 2400 s timeout, session 35). */
static int cpus_allowed(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* A token count from the environment: def when unset, and a failed check
 * (then def) when it is not a whole number of at least 1. */
static int env_tokens(const char *name, int def) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    const bool ok = *end == 0 && n >= 1 && n <= INT_MAX;
    CHECKF(ok, "%s=%s: not a token count", name, v);
    return ok ? (int)n : def;
}

int main(int argc, char **argv) {
    (void)argc;
    const char *forced = getenv("TS_FORCE_ISA");
    if (forced && !*forced) forced = NULL; /* set but empty: unset, as the dispatcher reads it */
    printf("kernels: %s%s\n", ts_kernels_isa(), forced ? " (TS_FORCE_ISA)" : "");
    prompt_cut = env_tokens("TS_FORWARD_CUT", INT_MAX);
    scalar_max = env_tokens("TS_FORWARD_SCALAR_MAX", SCALAR_MAX_PROMPT);
    if (prompt_cut != INT_MAX) printf("prompts cut to their first %d tokens (TS_FORWARD_CUT)\n", prompt_cut);
    /* TS_FORCE_ISA given: that path only (and it is how the children run);
     * otherwise every lower level in a child, as many at once as CPUs, one
     * of them taken by this level's own tests until they end. The scalar
     * level starts first: it is the slowest (the reference kernels; under
     * ASan 1082 s of the four levels' 3929 in session 39's CI, where it
     * started last and ran alone at the end). */
    isa_child kids[8];
    int nk = 0, started = 0, running = 0, jobs = cpus_allowed();
    if (!forced && ts_kernels_isa_max() > TS_ISA_SCALAR) {
        kids[nk++] = (isa_child){.isa = TS_ISA_SCALAR, .pid = -1};
        for (int isa = ts_kernels_isa_max() - 1; isa > TS_ISA_SCALAR; isa--) kids[nk++] = (isa_child){.isa = isa, .pid = -1};
    }
    for (; started < nk && running < jobs - 1; started++) {
        start_child_isa(&kids[started], argv);
        running += kids[started].pid > 0;
    }
    test_fixtures();

    ts_type types[] = {TS_TYPE_F32, TS_TYPE_F16, TS_TYPE_BF16, TS_TYPE_Q8_0, TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_Q5_0,
                        TS_TYPE_Q5_1, TS_TYPE_Q2_K, TS_TYPE_Q3_K, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) test_generated("llama", types[i], 0);
    test_generated("qwen2", TS_TYPE_Q4_K, 0);
    test_generated("qwen3", TS_TYPE_Q8_0, 0);
    test_generated("gemma3", TS_TYPE_Q6_K, 5); /* window 5 < 40 tokens: the window slides */
    test_generated("gemma3", TS_TYPE_F32, 5);
    test_limits();
    test_refusals();
    /* this level's CPU is free: each child that ends gives its CPU to the
     * next; the outputs are echoed in level order once all have ended */
    for (;;) {
        for (; started < nk && running < jobs; started++) {
            start_child_isa(&kids[started], argv);
            running += kids[started].pid > 0;
        }
        if (!reap_child_isa(kids, nk)) {
            if (started == nk) break;
            continue; /* none runs (fork failed): start the next */
        }
        running--;
    }
    for (int isa = ts_kernels_isa_max() - 1; isa >= TS_ISA_SCALAR; isa--)
        for (int i = 0; i < nk; i++)
            if (kids[i].isa == isa) finish_child_isa(&kids[i]);
    return tu_finish();
}
