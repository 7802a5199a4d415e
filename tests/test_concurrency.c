/* Concurrent sessions on one model (issue 8's acceptance), through the public
 * API only: one CPU backend, one ts_model per file shared by every thread.
 *
 * For each model, each of 4 prompts is first run alone on a fresh session,
 * greedy and seeded (ids and every logit row saved). Then 4 threads, each
 * owning its own session, start together at a barrier and run the same jobs
 * for several rounds (thread t runs prompt (t + round) % 4, so a session
 * meets every prompt and is reset between jobs): every id and every logit
 * row must equal the solo run's bit for bit (memcmp).
 *
 * Models: a dense fixture, SmolLM2 (real; a missing file fails unless
 * TS_ALLOW_MISSING_MODELS=1), and two MoE fixtures with their experts
 * streamed through a shared slot cache smaller than the working set (slots =
 * top-k, so any two passes on a layer contend for the same slots, and top-k+1),
 * one of them (mixtral) in backend slots fed from the host tier, where plain
 * sessions plan their decode passes on the backend (expert_cache_device_*:
 * the cache is theirs for a step) and instrumented ones on the host. The
 * cache must show evictions, or the contention never happened.
 *
 * Instruments are per session: each thread's session writes its own router
 * capture (histogram, trace, pilot, one router-logit row) and/or FFN census
 * and phase footer to its own temporary files, and each capture must be
 * byte-identical to the capture of the same session run alone, and satisfy
 * its invariants (router counts = histogram of the trace, passes * top-k
 * entries per layer; the footer counts this session's passes only).
 *
 * Run under `make tsan` this is the race test of the engine: shared model,
 * shared backend, shared expert cache, per-session pools. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "turbospark.h"
#include "test_util.h"

#define N_THREADS 4
#define N_PROMPTS 4
#define N_GEN 32
#define MAX_PROMPT 64

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TS_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TS_UNDER_SANITIZER 1
#endif
#endif
#ifdef TS_UNDER_SANITIZER
/* each round is 8 jobs x 4 threads, and a sanitizer makes them 10-50x
 * slower: the real model then runs one round of fewer tokens (the code paths
 * and the sharing are those of the fixtures, which keep the full run) */
#define N_ROUNDS 2
#define N_ROUNDS_REAL 1
#define N_GEN_REAL 12
#else
#define N_ROUNDS 3
#define N_ROUNDS_REAL N_ROUNDS
#define N_GEN_REAL N_GEN
#endif

typedef struct prompt {
    int32_t ids[MAX_PROMPT]; /* (n) */
    int32_t n;
} prompt;

/* What one job (prompt, greedy or seeded) produced. */
typedef struct job_out {
    int32_t ids[N_GEN]; /* (n_gen) sampled ids */
    float *logits;      /* (n_gen, n_vocab) the logits each id was sampled from, before sampling touched them */
} job_out;

typedef struct model_case {
    const char *label;
    char path[1024];
    bool moe;
    int32_t extra_slots; /* streamed slots = top-k + extra_slots */
    ts_expert_source source; /* HOST: backend slots from the host tier (plain sessions plan their decode passes on
                                the backend, instrumented ones on the host, all through the one cache) */
    bool router;         /* instruments: router capture (MoE) */
    bool ffn;            /* instruments: FFN census (dense FFN or shared expert) */
} model_case;

/* Shared, read-only while the threads run. */
typedef struct shared {
    ts_model *m;
    int32_t n_vocab;
    int32_t top_k;
    int n_gen;            /* tokens per job, <= N_GEN */
    int n_rounds;         /* concurrent rounds */
    prompt prompts[N_PROMPTS];
    job_out solo[N_PROMPTS][2]; /* [prompt][seeded] */
    pthread_barrier_t bar;
    const model_case *mc;
    char tmpdir[256];
} shared;

static ts_sampler_params sampler_for(bool seeded, int prompt_i) {
    ts_sampler_params p = ts_sampler_params_default();
    if (!seeded) {
        p.temperature = 0;
    } else {
        p.temperature = 1.0f; /* wide enough that the draw, not the argmax, picks */
        p.top_k = 0;
        p.top_p = 0.95f;
        p.min_p = 0;
        p.repeat_penalty = 1.1f; /* sampler state (accepted ids) is per session too */
        p.repeat_last_n = 16;
        p.seed = 0x5eed + (uint64_t)prompt_i;
    }
    return p;
}

static ts_session_opts session_opts(const ts_instruments *ins) {
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = 128;
    so.n_threads = 2; /* each session has its own pool: run it */
    so.instruments = ins;
    return so;
}

/* Resets s and runs one job of n_gen tokens; out->logits must hold
 * n_gen * n_vocab floats. */
static ts_status run_job(ts_session *s, const prompt *p, bool seeded, int prompt_i, int32_t n_vocab, int n_gen, job_out *out) {
    ts_session_reset(s);
    ts_sampler_params sp = sampler_for(seeded, prompt_i);
    ts_status st = ts_session_set_sampler(s, &sp);
    if (st) return st;
    float *lg;
    st = ts_session_eval(s, p->ids, p->n, &lg);
    for (int i = 0; st == TS_OK && i < n_gen; i++) {
        memcpy(out->logits + (size_t)i * (size_t)n_vocab, lg, sizeof(float) * (size_t)n_vocab);
        st = ts_session_sample(s, &out->ids[i]);
        if (st) break;
        ts_session_sampler_accept(s, out->ids[i]);
        if (i + 1 < n_gen) st = ts_session_eval(s, &out->ids[i], 1, &lg);
    }
    return st;
}

/* Forward passes a job runs (each routes once per MoE layer). */
static int64_t job_passes(const prompt *p, int n_gen) { return p->n + n_gen - 1; }

static bool job_equal(const job_out *a, const job_out *b, int32_t n_vocab, int n_gen) {
    return memcmp(a->ids, b->ids, sizeof *a->ids * (size_t)n_gen) == 0 &&
           memcmp(a->logits, b->logits, sizeof(float) * (size_t)n_gen * (size_t)n_vocab) == 0;
}

/* ---------------------------------------------------------------------- */
/* Plain sessions: n_rounds rounds of every job, compared with the solo runs */

typedef struct thread_ctx {
    shared *sh;
    int t;
    /* results, read by the main thread after join */
    ts_status st;
    char err[256];
    int jobs_run;
    int id_mismatch, logit_mismatch;
    char first_diff[256];
} thread_ctx;

static void *plain_thread(void *arg) {
    thread_ctx *c = arg;
    shared *sh = c->sh;
    ts_session *s = NULL;
    job_out got;
    got.logits = malloc(sizeof(float) * (size_t)N_GEN * (size_t)sh->n_vocab);
    ts_session_opts so = session_opts(NULL);
    c->st = got.logits ? ts_session_new(sh->m, &so, &s) : TS_ERR_NOMEM;
    if (c->st) snprintf(c->err, sizeof c->err, "session: %s", ts_last_error());
    for (int r = 0; r < sh->n_rounds; r++) {
        pthread_barrier_wait(&sh->bar); /* every thread waits, failed or not: the others must not hang */
        if (c->st) continue;
        int pi = (c->t + r) % N_PROMPTS;
        for (int seeded = 0; seeded < 2 && !c->st; seeded++) {
            c->st = run_job(s, &sh->prompts[pi], seeded, pi, sh->n_vocab, sh->n_gen, &got);
            if (c->st) {
                snprintf(c->err, sizeof c->err, "round %d prompt %d: %s", r, pi, ts_last_error());
                break;
            }
            c->jobs_run++;
            const job_out *ref = &sh->solo[pi][seeded];
            bool ids_ok = memcmp(ref->ids, got.ids, sizeof *got.ids * (size_t)sh->n_gen) == 0;
            bool lg_ok = memcmp(ref->logits, got.logits, sizeof(float) * (size_t)sh->n_gen * (size_t)sh->n_vocab) == 0;
            c->id_mismatch += !ids_ok;
            c->logit_mismatch += !lg_ok;
            if ((!ids_ok || !lg_ok) && !c->first_diff[0]) {
                int at = 0;
                while (at < sh->n_gen && ref->ids[at] == got.ids[at]) at++;
                snprintf(c->first_diff, sizeof c->first_diff, "round %d prompt %d %s: ids %s (first different id at step %d of %d), logits %s", r,
                         pi, seeded ? "seeded" : "greedy", ids_ok ? "equal" : "differ", at, sh->n_gen, lg_ok ? "equal" : "differ");
            }
        }
    }
    ts_session_free(s);
    free(got.logits);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Instrumented sessions: one per thread, its captures in its own files */

typedef struct instr_paths {
    char router[512], ffn[512], log[512];
} instr_paths;

static void make_paths(const shared *sh, const char *tag, int i, instr_paths *p) {
    snprintf(p->router, sizeof p->router, "%s/%s-router-%d.json", sh->tmpdir, tag, i);
    snprintf(p->ffn, sizeof p->ffn, "%s/%s-ffn-%d.json", sh->tmpdir, tag, i);
    snprintf(p->log, sizeof p->log, "%s/%s-log-%d.txt", sh->tmpdir, tag, i);
}

/* Runs prompt pi greedy then seeded on a session with every instrument the
 * model supports, writes the captures and the log. Returns the jobs' output
 * through outs[2] (logits allocated by the caller). */
static ts_status run_instrumented(shared *sh, int pi, const instr_paths *paths, job_out outs[2], bool wait_barrier, char *err,
                                  size_t errn) {
    ts_instruments ins = ts_instruments_default();
    if (sh->mc->router) {
        ins.router_path = paths->router;
        ins.router_trace = true;
        ins.pilot = TS_PILOT_NEXT;
        ins.router_logits_layer = 0;
        ins.router_logits_pass = 3 + pi; /* differs per session */
    }
    if (sh->mc->ffn) ins.ffn_path = paths->ffn;
    ins.phases = true;
    ts_session_opts so = session_opts(&ins);
    ts_session *s = NULL;
    ts_status st = ts_session_new(sh->m, &so, &s);
    if (st) snprintf(err, errn, "session: %s", ts_last_error());
    if (wait_barrier) pthread_barrier_wait(&sh->bar);
    if (st) return st;
    /* the context is not reset between the jobs' captures: they accumulate
     * over both jobs, and so must the files */
    for (int seeded = 0; seeded < 2 && !st; seeded++) {
        st = run_job(s, &sh->prompts[pi], seeded, pi, sh->n_vocab, sh->n_gen, &outs[seeded]);
        if (st) snprintf(err, errn, "prompt %d: %s", pi, ts_last_error());
    }
    if (!st) {
        FILE *log = fopen(paths->log, "w");
        if (!log) {
            snprintf(err, errn, "cannot open %.200s", paths->log);
            st = TS_ERR_IO;
        } else {
            st = ts_session_instruments_finish(s, log, false);
            if (st) snprintf(err, errn, "instruments_finish: %s", ts_last_error());
            fclose(log);
        }
    }
    ts_session_free(s);
    return st;
}

typedef struct instr_ctx {
    shared *sh;
    int t;
    instr_paths paths;
    job_out outs[2];
    ts_status st;
    char err[256];
} instr_ctx;

static void *instr_thread(void *arg) {
    instr_ctx *c = arg;
    c->st = run_instrumented(c->sh, c->t, &c->paths, c->outs, true, c->err, sizeof c->err);
    return NULL;
}

static char *slurp(const char *path, size_t *len) {
    char *data = NULL;
    if (ts_read_file(path, 0, &data, len) != TS_OK) return NULL;
    return data;
}

static bool files_equal(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *da = slurp(a, &na), *db = slurp(b, &nb);
    bool eq = da && db && na == nb && memcmp(da, db, na) == 0;
    ts_free(da);
    ts_free(db);
    return eq;
}

/* The router capture of one session: per layer, counts are the histogram of
 * the trace, and the trace holds passes * top-k ids (this session's passes
 * only: another session's would add to both). */
static void check_router_capture(const char *path, int64_t passes, int32_t top_k, const char *what) {
    size_t n = 0;
    char *text = slurp(path, &n);
    CHECKF(text != NULL, "%s: cannot read %s", what, path);
    if (!text) return;
    cJSON *j = cJSON_ParseWithLength(text, n);
    CHECKF(j != NULL, "%s: %s is not JSON", what, path);
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(j, "counts");
    const cJSON *trace = cJSON_GetObjectItemCaseSensitive(j, "trace");
    const cJSON *pred = cJSON_GetObjectItemCaseSensitive(j, "pred");
    const cJSON *ne = cJSON_GetObjectItemCaseSensitive(j, "num_experts");
    const cJSON *rl = cJSON_GetObjectItemCaseSensitive(j, "router_logits");
    bool shape = cJSON_IsArray(counts) && cJSON_IsArray(trace) && cJSON_IsArray(pred) && cJSON_IsNumber(ne) &&
                 cJSON_GetArraySize(counts) == cJSON_GetArraySize(trace) && cJSON_GetArraySize(counts) > 0;
    CHECKF(shape, "%s: %s lacks counts/trace/pred of one shape", what, path);
    CHECKF(cJSON_IsObject(rl), "%s: %s has no router_logits row", what, path);
    if (shape) {
        int n_exp = ne->valueint;
        int bad_len = 0, bad_hist = 0, bad_pred = 0;
        for (int l = 0; l < cJSON_GetArraySize(counts); l++) {
            const cJSON *cl = cJSON_GetArrayItem(counts, l), *tl = cJSON_GetArrayItem(trace, l);
            if (cJSON_GetArraySize(tl) != passes * top_k) bad_len++;
            int64_t hist[256] = {0};
            const cJSON *v;
            cJSON_ArrayForEach(v, tl) {
                if (v->valueint >= 0 && v->valueint < n_exp && v->valueint < 256) hist[v->valueint]++;
                else bad_hist++;
            }
            for (int e = 0; e < n_exp && e < 256; e++) {
                const cJSON *ce = cJSON_GetArrayItem(cl, e);
                if (!ce || (int64_t)ce->valuedouble != hist[e]) bad_hist++;
            }
            const cJSON *pl = cJSON_GetArrayItem(pred, l);
            if (l > 0 && cJSON_GetArraySize(pl) != passes * top_k) bad_pred++;
        }
        CHECKF(bad_len == 0, "%s: %d layers' trace is not %lld passes x top-%d", what, bad_len, (long long)passes, top_k);
        CHECKF(bad_hist == 0, "%s: counts disagree with the trace in %d places", what, bad_hist);
        CHECKF(bad_pred == 0, "%s: %d layers' pilot predictions are not one per traced pass", what, bad_pred);
    }
    cJSON_Delete(j);
    ts_free(text);
}

/* The session's log: each requested capture reported written, and the phase
 * footer counting this session's passes. */
static void check_log(const shared *sh, const instr_paths *p, int64_t passes, const char *what) {
    size_t n = 0;
    char *text = slurp(p->log, &n);
    CHECKF(text != NULL, "%s: no log %s", what, p->log);
    if (!text) return;
    char want[600];
    if (sh->mc->router) {
        snprintf(want, sizeof want, "[router-hist] wrote %s\n", p->router);
        CHECKF(strstr(text, want) != NULL, "%s: log lacks \"%s\": %s", what, want, text);
    }
    if (sh->mc->ffn) {
        snprintf(want, sizeof want, "[ffn-hist] wrote %s\n", p->ffn);
        CHECKF(strstr(text, want) != NULL, "%s: log lacks \"%s\": %s", what, want, text);
    }
    snprintf(want, sizeof want, "[phases over %lld forward passes", (long long)passes);
    CHECKF(strstr(text, want) != NULL, "%s: log lacks \"%s\": %s", what, want, text);
    ts_free(text);
}

static void test_instruments(shared *sh) {
    const char *label = sh->mc->label;
    instr_paths solo_p[N_PROMPTS];
    job_out solo_out[N_PROMPTS][2];
    instr_ctx ctx[N_THREADS];
    size_t row = sizeof(float) * (size_t)N_GEN * (size_t)sh->n_vocab;
    bool mem_ok = true;
    for (int i = 0; i < N_PROMPTS; i++)
        for (int k = 0; k < 2; k++) mem_ok &= (solo_out[i][k].logits = malloc(row)) != NULL;
    for (int t = 0; t < N_THREADS; t++)
        for (int k = 0; k < 2; k++) mem_ok &= (ctx[t].outs[k].logits = malloc(row)) != NULL;
    CHECK(mem_ok);
    if (mem_ok) {
        /* alone */
        for (int i = 0; i < N_PROMPTS; i++) {
            char err[256] = "";
            make_paths(sh, "solo", i, &solo_p[i]);
            ts_status st = run_instrumented(sh, i, &solo_p[i], solo_out[i], false, err, sizeof err);
            CHECKF(st == TS_OK, "%s instruments solo %d: %s", label, i, err);
        }
        /* together */
        pthread_t th[N_THREADS];
        bool started[N_THREADS] = {0};
        for (int t = 0; t < N_THREADS; t++) {
            ctx[t].sh = sh;
            ctx[t].t = t;
            ctx[t].st = TS_OK;
            ctx[t].err[0] = 0;
            make_paths(sh, "conc", t, &ctx[t].paths);
        }
        int n_started = 0;
        for (int t = 0; t < N_THREADS; t++) n_started += started[t] = pthread_create(&th[t], NULL, instr_thread, &ctx[t]) == 0;
        CHECKF(n_started == N_THREADS, "%s: started %d of %d threads", label, n_started, N_THREADS);
        if (n_started != N_THREADS) abort(); /* the others wait at the barrier forever */
        for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);

        int same = 0;
        for (int t = 0; t < N_THREADS; t++) {
            char what[128];
            snprintf(what, sizeof what, "%s instrumented thread %d", label, t);
            CHECKF(ctx[t].st == TS_OK, "%s: %s", what, ctx[t].err);
            if (ctx[t].st) continue;
            for (int k = 0; k < 2; k++)
                CHECKF(job_equal(&ctx[t].outs[k], &solo_out[t][k], sh->n_vocab, sh->n_gen), "%s %s: ids/logits differ from the solo run", what,
                       k ? "seeded" : "greedy");
            int64_t passes = 2 * job_passes(&sh->prompts[t], sh->n_gen);
            if (sh->mc->router) {
                bool eq = files_equal(ctx[t].paths.router, solo_p[t].router);
                CHECKF(eq, "%s: router capture %s differs from the solo run's %s", what, ctx[t].paths.router, solo_p[t].router);
                check_router_capture(ctx[t].paths.router, passes, sh->top_k, what);
                same += eq;
            }
            if (sh->mc->ffn) {
                bool eq = files_equal(ctx[t].paths.ffn, solo_p[t].ffn);
                CHECKF(eq, "%s: FFN census %s differs from the solo run's %s", what, ctx[t].paths.ffn, solo_p[t].ffn);
                same += eq;
            }
            check_log(sh, &ctx[t].paths, passes, what);
            check_log(sh, &solo_p[t], passes, what);
        }
        int want = N_THREADS * (sh->mc->router + sh->mc->ffn);
        printf("%-22s instruments: %d of %d captures from 4 concurrent sessions byte-identical to their solo runs%s%s\n", label, same, want,
               sh->mc->router ? " (router hist+trace+pilot+logits row)" : "", sh->mc->ffn ? " (FFN census)" : "");
        for (int i = 0; i < N_PROMPTS; i++) {
            unlink(solo_p[i].router), unlink(solo_p[i].ffn), unlink(solo_p[i].log);
            unlink(ctx[i].paths.router), unlink(ctx[i].paths.ffn), unlink(ctx[i].paths.log);
        }
    }
    for (int i = 0; i < N_PROMPTS; i++)
        for (int k = 0; k < 2; k++) free(solo_out[i][k].logits);
    for (int t = 0; t < N_THREADS; t++)
        for (int k = 0; k < 2; k++) free(ctx[t].outs[k].logits);
}

/* ---------------------------------------------------------------------- */

/* Four different prompts: tokenized text when the model has a real
 * vocabulary, else fixed ids spread over the fixture's small vocabulary. */
static bool make_prompts(shared *sh, bool real) {
    static const char *texts[N_PROMPTS] = {
        "The capital of France is",
        "def fibonacci(n):\n    ",
        "Once upon a time, in a small village by the sea, there lived",
        "List three prime numbers:",
    };
    const ts_vocab *v = ts_model_vocab(sh->m);
    for (int i = 0; i < N_PROMPTS; i++) {
        prompt *p = &sh->prompts[i];
        if (real) {
            int32_t *ids = NULL;
            size_t n = 0;
            if (ts_tokenize(v, texts[i], strlen(texts[i]), true, false, &ids, &n) != TS_OK || n == 0 || n > MAX_PROMPT) {
                fprintf(stderr, "%s: tokenize prompt %d: %s\n", sh->mc->label, i, ts_last_error());
                ts_free(ids);
                return false;
            }
            memcpy(p->ids, ids, n * sizeof *ids);
            p->n = (int32_t)n;
            ts_free(ids);
        } else {
            static const int32_t lens[N_PROMPTS] = {5, 9, 13, 7};
            int32_t bos = ts_token_bos(v);
            p->n = lens[i];
            for (int j = 0; j < p->n; j++) p->ids[j] = 3 + (int32_t)((i * 97 + j * 37 + j * j * 11) % (sh->n_vocab - 3));
            if (bos >= 0) p->ids[0] = bos;
        }
    }
    return true;
}

static void test_model(const model_case *mc, ts_backend *be, bool real) {
    if (access(mc->path, R_OK) != 0) {
        if (real) tu_missing_model(mc->label, mc->path);
        else CHECKF(0, "fixture %s missing", mc->path);
        return;
    }
    shared *sh = calloc(1, sizeof *sh);
    if (!sh) { CHECK(0); return; }
    sh->mc = mc;
    sh->n_gen = real ? N_GEN_REAL : N_GEN;
    sh->n_rounds = real ? N_ROUNDS_REAL : N_ROUNDS;
    snprintf(sh->tmpdir, sizeof sh->tmpdir, "%s/ts-conc-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECKF(mkdtemp(sh->tmpdir) != NULL, "mkdtemp %s", sh->tmpdir);

    ts_model_opts mo = ts_model_opts_default();
    mo.backend = be;
    int32_t slots = 0;
    if (mc->moe) {
        /* top-k from the file, then reopen with the slot count derived from it */
        ts_model_opts probe = mo;
        probe.expert_residency = TS_EXPERTS_MAPPED;
        ts_model *pm;
        ts_status st = ts_model_load(mc->path, &probe, &pm);
        CHECKF(st == TS_OK, "%s: %s", mc->label, ts_last_error());
        if (st) { free(sh); return; }
        ts_model_info info;
        ts_model_get_info(pm, &info);
        ts_model_free(pm);
        slots = info.n_expert_used + mc->extra_slots;
        CHECKF(slots < info.n_expert, "%s: %d slots must be fewer than the %d experts", mc->label, slots, info.n_expert);
        mo.expert_residency = TS_EXPERTS_STREAMED;
        mo.expert_slots = slots;
        mo.expert_source = mc->source;
    }
    ts_status st = ts_model_load(mc->path, &mo, &sh->m);
    CHECKF(st == TS_OK, "%s: %s", mc->label, ts_last_error());
    if (st) { free(sh); return; }
    ts_model_info info;
    ts_model_get_info(sh->m, &info);
    sh->n_vocab = info.n_vocab;
    sh->top_k = info.n_expert_used;
    CHECK(ts_model_has_experts(sh->m) == mc->moe);
    if (!make_prompts(sh, real)) {
        CHECK(0);
        ts_model_free(sh->m);
        free(sh);
        return;
    }

    /* alone: one fresh session per prompt */
    size_t row = sizeof(float) * (size_t)N_GEN * (size_t)sh->n_vocab;
    bool solo_ok = true;
    for (int i = 0; i < N_PROMPTS && solo_ok; i++) {
        ts_session *s;
        ts_session_opts so = session_opts(NULL);
        st = ts_session_new(sh->m, &so, &s);
        CHECKF(st == TS_OK, "%s: %s", mc->label, ts_last_error());
        if (st) { solo_ok = false; break; }
        for (int k = 0; k < 2 && solo_ok; k++) {
            sh->solo[i][k].logits = malloc(row);
            st = sh->solo[i][k].logits ? run_job(s, &sh->prompts[i], k, i, sh->n_vocab, sh->n_gen, &sh->solo[i][k]) : TS_ERR_NOMEM;
            CHECKF(st == TS_OK, "%s solo prompt %d: %s", mc->label, i, ts_last_error());
            solo_ok = st == TS_OK;
        }
        ts_session_free(s);
    }
    if (solo_ok) {
        /* the seeded jobs must differ from the greedy ones, and the prompts
         * from each other, or "identical" proves less than it says */
        int distinct_jobs = 0;
        for (int i = 0; i < N_PROMPTS; i++)
            for (int k = 0; k < 2; k++) {
                bool dup = false;
                for (int j = 0; j <= i; j++)
                    for (int q = 0; q < 2; q++)
                        if ((j < i || q < k) && memcmp(sh->solo[j][q].ids, sh->solo[i][k].ids, sizeof(int32_t) * (size_t)sh->n_gen) == 0)
                            dup = true;
                distinct_jobs += !dup;
            }
        CHECKF(distinct_jobs == 2 * N_PROMPTS, "%s: only %d of %d solo jobs generated distinct id sequences", mc->label, distinct_jobs,
               2 * N_PROMPTS);

        if (mc->moe) ts_model_expert_reset_stats(sh->m);
        pthread_barrier_init(&sh->bar, NULL, N_THREADS);
        thread_ctx ctx[N_THREADS];
        pthread_t th[N_THREADS];
        memset(ctx, 0, sizeof ctx);
        int n_started = 0;
        double t0 = ts_now();
        for (int t = 0; t < N_THREADS; t++) {
            ctx[t].sh = sh;
            ctx[t].t = t;
            n_started += pthread_create(&th[t], NULL, plain_thread, &ctx[t]) == 0;
        }
        CHECKF(n_started == N_THREADS, "%s: started %d of %d threads", mc->label, n_started, N_THREADS);
        if (n_started != N_THREADS) abort(); /* the others wait at the barrier forever */
        for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
        double dt = ts_now() - t0;
        int jobs = 0, bad_ids = 0, bad_logits = 0;
        for (int t = 0; t < N_THREADS; t++) {
            CHECKF(ctx[t].st == TS_OK, "%s thread %d: %s", mc->label, t, ctx[t].err);
            CHECKF(ctx[t].id_mismatch == 0 && ctx[t].logit_mismatch == 0, "%s thread %d: %s", mc->label, t, ctx[t].first_diff);
            jobs += ctx[t].jobs_run;
            bad_ids += ctx[t].id_mismatch;
            bad_logits += ctx[t].logit_mismatch;
        }
        CHECKF(jobs == N_THREADS * sh->n_rounds * 2, "%s: %d of %d jobs ran", mc->label, jobs, N_THREADS * sh->n_rounds * 2);
        char line[256] = "";
        if (mc->moe) {
            ts_expert_stats es;
            ts_model_expert_stats(sh->m, &es);
            /* contention happened: the slots were too few to keep every
             * session's experts, so passes evicted each other's */
            CHECKF(es.evict_misses > 0, "%s: no evictions with %d slots: the shared cache was never contended", mc->label, slots);
            snprintf(line, sizeof line, ", expert cache %d slots/layer: %llu requests, %llu misses (%llu evictions)", slots,
                     (unsigned long long)es.requests, (unsigned long long)es.misses, (unsigned long long)es.evict_misses);
        }
        printf("%-22s %d threads x %d rounds x {greedy, seeded} x %d tokens: %d jobs, %d ids / %d logits differ from solo (%.1f s)%s\n",
               mc->label, N_THREADS, sh->n_rounds, sh->n_gen, jobs, bad_ids, bad_logits, dt, line);

        if (mc->router || mc->ffn) test_instruments(sh);
        pthread_barrier_destroy(&sh->bar);
    }
    for (int i = 0; i < N_PROMPTS; i++)
        for (int k = 0; k < 2; k++) free(sh->solo[i][k].logits);
    ts_model_free(sh->m);
    rmdir(sh->tmpdir);
    free(sh);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines show as each model finishes (slow under TSan) */
    ts_backend_opts bo = ts_backend_opts_default();
    bo.kind = TS_BACKEND_CPU;
    ts_backend *be;
    ts_status st = ts_backend_new(&bo, &be);
    CHECKF(st == TS_OK, "cpu backend: %s", ts_last_error());
    if (st) return tu_finish();

    model_case fixtures[] = {
        {.label = "tiny-llama-f32", .moe = false, .ffn = true},
        {.label = "tiny-qwen3moe-f32", .moe = true, .extra_slots = 0, .router = true},
        {.label = "tiny-qwen2moe-f32", .moe = true, .extra_slots = 1, .router = true, .ffn = true},
        /* no instruments here: with backend slots the pilot prefetches, and a
         * trace records a prefetch only where one was placed, which another
         * session's pinned slots can prevent (its solo run has none) */
        {.label = "tiny-mixtral-f32", .moe = true, .extra_slots = 0, .source = TS_EXPERT_SOURCE_HOST},
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        snprintf(fixtures[i].path, sizeof fixtures[i].path, "%s/ref/%s.gguf", TS_FIXTURES, fixtures[i].label);
        test_model(&fixtures[i], be, false);
    }
    model_case smol = {.label = "smollm2", .moe = false};
    tu_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", smol.path, sizeof smol.path);
    test_model(&smol, be, true);

    ts_backend_free(be);
    return tu_finish();
}
