/* The CUDA backend against the CPU backend, through the engine: the same
 * model loaded on both, the same tokens evaluated, logits compared row by row
 * and greedy generation compared token by token.
 *
 * Per model and mode (default int8 activations / --precise):
 *   1. a prompt of random ids in chunks of n_batch 16 (decode-size matvecs for
 *      the last chunk's rows <= 8, the F32 matvec or the GEMM beyond), every
 *      row's logits: KL(cpu || cuda) and top-1;
 *   2. a 100-token prompt in one chunk (the GEMM path for every weight type);
 *   3. 16 greedy steps, one token at a time, each side fed its own choice:
 *      the ids must agree token for token.
 *
 * Bars (docs/KERNELS.md, CUDA section): tiny F32/F16 fixtures max KL < 1e-4
 * and top-1 100% wherever the CPU's top-1/top-2 margin is at least
 * TIE_MARGIN (below that, float rounding may legitimately swap two tokens),
 * GEMM_MARGIN for the GEMM rows (F16 inputs: not the CPU's F32 path);
 * every flip is printed with its margin;
 * the real model (SmolLM2 Q4_1) mean KL < 1e-3 and top-1 beyond a 0.5 margin.
 * Greedy ids must match until the first step whose CPU margin is under the
 * bar, after which the two texts may legitimately diverge (counted, printed).
 *
 * Also: a context too large for the device is refused with TS_ERR_NOMEM and
 * a message that says what is free. No GPU: fails unless TS_ALLOW_NO_GPU=1. */
#include "cuda_test_util.h"

extern "C" {
#include "compute/backend.h"
#include "eval/logits.h"
}

#ifndef TS_FIXTURES
#define TS_FIXTURES "tests/fixtures"
#endif

#define TIE_MARGIN 1e-3
#define GEMM_MARGIN 5e-2
#define REAL_MARGIN 0.5
#define GEN_STEPS 16

typedef struct bar {
    double max_kl;      /* every row */
    double mean_kl;     /* over the rows */
    double margin;      /* top-1 must agree where the CPU's top-1/top-2 gap is at least this */
    double gemm_margin; /* the same for the GEMM rows, whose F16 inputs move logits by ~1e-3 */
} bar;

typedef struct stats {
    int rows, decisive, agree;
    double kl_sum, kl_max;
} stats;

static double margin_of(const float *x, int32_t n) {
    int32_t a = ts_argmax(x, n);
    float second = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (i != a && x[i] > second) second = x[i];
    return (double)x[a] - (double)second;
}

static void compare_rows(stats *s, const float *cpu, const float *gpu, int rows, int32_t V, double margin) {
    for (int r = 0; r < rows; r++) {
        const float *p = cpu + (size_t)r * V, *q = gpu + (size_t)r * V;
        bool finite = true;
        for (int32_t i = 0; i < V && finite; i++) finite = isfinite(q[i]);
        double kl = finite ? ts_kl_rows(p, q, V) : INFINITY;
        s->rows++;
        s->kl_sum += kl;
        if (!(kl <= s->kl_max)) s->kl_max = kl;
        double mg = margin_of(p, V);
        bool same = ts_argmax(p, V) == ts_argmax(q, V);
        if (!same) printf("  top-1 differs at row %d: cpu %d, cuda %d, cpu margin %.3g\n", r, ts_argmax(p, V), ts_argmax(q, V), mg);
        if (mg >= margin) {
            s->decisive++;
            s->agree += same;
        }
    }
}

static bool load(const char *path, ts_backend *be, ts_model **m) {
    ts_model_opts mo = ts_model_opts_default();
    mo.backend = be;
    ts_status st = ts_model_load(path, &mo, m);
    CHECKF(st == TS_OK, "%s on %s: load: %s", path, be ? "cuda" : "cpu", ts_last_error());
    return st == TS_OK;
}

static ts_session *session(ts_model *m, bool precise, int n_batch) {
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = 256;
    so.n_batch = n_batch;
    so.all_logits = true;
    so.precise = precise;
    ts_session *s = NULL;
    ts_status st = ts_session_new(m, &so, &s);
    CHECKF(st == TS_OK, "session: %s", ts_last_error());
    return st == TS_OK ? s : NULL;
}

/* Evaluates ids on both sessions and compares every row; false on an error. */
static bool eval_both(ts_session *sc, ts_session *sg, const int32_t *ids, int n, int32_t V, stats *s, double margin,
                      const char *what) {
    float *lc, *lg;
    ts_status a = ts_session_eval(sc, ids, n, &lc);
    CHECKF(a == TS_OK, "%s: cpu eval: %s", what, ts_last_error());
    if (a != TS_OK) return false;
    /* the CPU's rows are the session's buffer: keep a copy across the GPU eval */
    float *keep = (float *)malloc(sizeof(float) * (size_t)n * V);
    memcpy(keep, lc, sizeof(float) * (size_t)n * V);
    ts_status b = ts_session_eval(sg, ids, n, &lg);
    CHECKF(b == TS_OK, "%s: cuda eval: %s", what, ts_last_error());
    if (b == TS_OK) compare_rows(s, keep, lg, n, V, margin);
    free(keep);
    return b == TS_OK;
}

static void run_model(const char *name, const char *path, const bar *B, bool precise) {
    double t0 = ts_now();
    ts_backend *be = NULL;
    /* made directly, not through ts_backend_new, so the CPU emulation
     * (tests/cuda/emu) can link this test against a CPU-only engine */
    ts_status st = ts_backend_cuda_new(0, &be);
    CHECKF(st == TS_OK, "cuda backend: %s", ts_last_error());
    if (st != TS_OK) return;
    ts_model *mc = NULL, *mg = NULL;
    ts_session *sc = NULL, *sg = NULL, *sc2 = NULL, *sg2 = NULL;
    int32_t *ids = NULL;
    stats pf = {}, big = {}, gen = {};
    int gen_same = 0, gen_cmp = 0, gen_diverged_at = -1;
    if (!load(path, NULL, &mc) || !load(path, be, &mg)) goto done;
    {
        ts_model_info info;
        ts_model_get_info(mc, &info);
        const int32_t V = info.n_vocab;
        sc = session(mc, precise, 16);
        sg = session(mg, precise, 16);
        sc2 = session(mc, precise, 128);
        sg2 = session(mg, precise, 128);
        if (!sc || !sg || !sc2 || !sg2) goto done;
        ids = (int32_t *)malloc(sizeof(int32_t) * 128);
        for (int i = 0; i < 128; i++) ids[i] = (int32_t)(tcu_u64() % (uint64_t)V);

        /* 1. a 37-token prompt in chunks of 16 (16, 16, 5) */
        if (!eval_both(sc, sg, ids, 37, V, &pf, B->margin, name)) goto done;
        /* 2. 100 tokens in one chunk: the GEMM */
        if (!eval_both(sc2, sg2, ids, 100, V, &big, B->gemm_margin, name)) goto done;

        /* 3. greedy, one token at a time, from the end of prompt 1 */
        float *lc, *lg;
        const float *last_c = NULL;
        float *keep = (float *)malloc(sizeof(float) * (size_t)V);
        /* the last row of prompt 1, re-evaluated once more for a fresh copy on both sides */
        ts_session_truncate(sc, 36);
        ts_session_truncate(sg, 36);
        if (ts_session_eval(sc, ids + 36, 1, &lc) != TS_OK) { CHECKF(0, "cpu eval: %s", ts_last_error()); free(keep); goto done; }
        memcpy(keep, lc, sizeof(float) * (size_t)V);
        if (ts_session_eval(sg, ids + 36, 1, &lg) != TS_OK) { CHECKF(0, "cuda eval: %s", ts_last_error()); free(keep); goto done; }
        last_c = keep;
        for (int step = 0; step < GEN_STEPS; step++) {
            int32_t ic = ts_argmax(last_c, V), ig = ts_argmax(lg, V);
            compare_rows(&gen, last_c, lg, 1, V, B->margin);
            if (gen_diverged_at < 0) {
                if (margin_of(last_c, V) < B->margin) {
                    gen_diverged_at = step; /* a near-tie: from here the texts may differ */
                } else {
                    gen_cmp++;
                    gen_same += ic == ig;
                    CHECKF(ic == ig, "%s%s: greedy step %d: cpu %d, cuda %d", name, precise ? " (precise)" : "", step, ic, ig);
                }
            }
            if (ts_session_eval(sc, &ic, 1, &lc) != TS_OK) { CHECKF(0, "cpu eval: %s", ts_last_error()); break; }
            memcpy(keep, lc, sizeof(float) * (size_t)V);
            if (ts_session_eval(sg, &ig, 1, &lg) != TS_OK) { CHECKF(0, "cuda eval: %s", ts_last_error()); break; }
        }
        free(keep);
    }
    {
        stats all = pf;
        all.rows += big.rows + gen.rows;
        all.decisive += big.decisive + gen.decisive;
        all.agree += big.agree + gen.agree;
        all.kl_sum += big.kl_sum + gen.kl_sum;
        all.kl_max = fmax(fmax(pf.kl_max, big.kl_max), gen.kl_max);
        double mean = all.rows ? all.kl_sum / all.rows : INFINITY;
        printf("%-22s %-8s rows %4d  top-1 %d/%d (margin >= %g, gemm %g)  KL mean %.2e max %.2e (chunked %.1e, gemm %.1e, decode %.1e)  "
               "greedy %d/%d%s  %.1fs\n",
               name, precise ? "precise" : "default", all.rows, all.agree, all.decisive, B->margin, B->gemm_margin, mean, all.kl_max, pf.kl_max,
               big.kl_max, gen.kl_max, gen_same, gen_cmp, gen_diverged_at >= 0 ? " (near-tie, stopped comparing)" : "",
               ts_now() - t0);
        CHECKF(all.rows > 0 && all.agree == all.decisive, "%s: top-1 %d of %d decisive rows (chunked %d/%d, gemm %d/%d, decode %d/%d)",
               name, all.agree, all.decisive, pf.agree, pf.decisive, big.agree, big.decisive, gen.agree, gen.decisive);
        CHECKF(all.kl_max < B->max_kl, "%s: max KL %.3e >= %.0e", name, all.kl_max, B->max_kl);
        CHECKF(mean < B->mean_kl, "%s: mean KL %.3e >= %.0e", name, mean, B->mean_kl);
        /* the tiny fixtures' first step is never a 1e-3 tie; a real (or
         * synthetic-weight) model's may be, which ends the comparison at once */
        if (B->margin < 0.1) CHECKF(gen_cmp > 0, "%s: no greedy step compared", name);
    }
done:
    free(ids);
    ts_session_free(sc);
    ts_session_free(sg);
    ts_session_free(sc2);
    ts_session_free(sg2);
    ts_model_free(mc);
    ts_model_free(mg);
    ts_backend_free(be);
}

/* A context that cannot fit: refused, saying what is free. */
static void check_oom(const char *path) {
    ts_backend *be = NULL;
    if (ts_backend_cuda_new(0, &be) != TS_OK) { CHECKF(0, "cuda backend: %s", ts_last_error()); return; }
    ts_model *m = NULL;
    if (load(path, be, &m)) {
        ts_session_opts so = ts_session_opts_default();
        so.n_ctx = 1 << 24;
        so.kv_f32 = true;
        ts_session *s = NULL;
        ts_status st = ts_session_new(m, &so, &s);
        const char *msg = ts_last_error();
        printf("oversized context: %s: %s\n", ts_status_name(st), msg);
        CHECKF(st == TS_ERR_NOMEM && strstr(msg, "free"), "oversized context: %s: %s", ts_status_name(st), msg);
        ts_session_free(s);
        ts_model_free(m);
    }
    ts_backend_free(be);
}

int main(int argc, char **argv) {
    (void)argc;
    setvbuf(stdout, NULL, _IOLBF, 0); /* a line per model as it finishes, in logs too */
    tcu_require_gpu(argv[0]);
    tcu_seed_init(argv[0]);
    static const char *tiny[] = {"llama", "llama31", "qwen2", "qwen3", "gemma3"};
    const bar tiny_bar = {1e-4, 1e-4, TIE_MARGIN, GEMM_MARGIN};
    /* TS_CUDA_TEST_MODELS="llama gemma3": only those fixtures (the CPU emulation is slow) */
    const char *only = getenv("TS_CUDA_TEST_MODELS");
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++)
        for (int f16 = 0; f16 < 2; f16++)
            for (int precise = 0; precise < 2; precise++) {
                char name[64], path[1024];
                snprintf(name, sizeof name, "tiny-%s-%s", tiny[i], f16 ? "f16" : "f32");
                snprintf(path, sizeof path, "%s/ref/%s.gguf", TS_FIXTURES, name);
                if (tcu_small() && (f16 || precise)) continue;
                if (only) {
                    char word[80];
                    snprintf(word, sizeof word, " %s ", tiny[i]);
                    char list[512];
                    snprintf(list, sizeof list, " %s ", only);
                    if (!strstr(list, word)) continue;
                }
                run_model(name, path, &tiny_bar, precise);
            }
    char real[2048];
    tu_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", real, sizeof real);
    if (access(real, R_OK) != 0) {
        tu_missing_model("smollm2", real);
    } else {
        const bar real_bar = {1e-2, 1e-3, REAL_MARGIN, REAL_MARGIN};
        run_model("smollm2", real, &real_bar, false);
        if (!tcu_small()) run_model("smollm2", real, &real_bar, true);
        check_oom(real);
    }
    return tu_finish();
}
