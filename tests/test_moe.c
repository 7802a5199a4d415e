/* MoE: generated output is byte-identical across expert residency modes
 * (resident; streamed at the minimum slot count; streamed at a large slot
 * count; streamed with O_DIRECT; mapped), for greedy and seeded sampling, on
 * every tiny MoE fixture; the device path's backend slots (run in host
 * memory) with pilot prefetch on and off, where every prefetch copy must be
 * judged saved or wasted. Logits are compared bit for bit too. The
 * correctness of the MoE math itself is checked against transformers in
 * test_forward.
 *
 * Prefill grouped by expert (forward/moe.c): a long prompt in chunks of many
 * tokens gives every position's logits bit for bit the same in resident,
 * streamed at k, k+1 and all slots, and mapped mode; and within a tight
 * tolerance of the same prompt fed one token at a time (where every expert
 * runs a matvec instead of a GEMM over its tokens). The streamed cache's
 * request count must be one per (layer, expert) per chunk.
 *
 * A chunk's passes overlap (the next pass fetched while the current one
 * computes, planned around its slots): on a copy of tiny-qwen3moe widened to
 * 16 experts (the fixtures have 4, too few for a chunk to need more than two
 * passes), the engine's hits and misses equal analyze cache's replay of its
 * own trace at several slot counts and both policies, and its logits equal
 * resident mode's. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/router_capture.h"
#include "compute/backend.h"
#include "forward/engine.h"
#include "gguf/gguf.h"
#include "sample/sample.h"
#include "tensor/quant.h"
#include "test_util.h"

#define N_GEN 40

typedef struct mode {
    const char *name;
    expert_residency res;
    int32_t slots; /* 0: min = top-k; -1: large */
    bool nocache;
    ts_expert_source source; /* HOST/FILE: the device path's backend slots, in host memory */
    bool no_prefetch;        /* backend slots: pilot prefetch off */
    int32_t depth;           /* backend slots: the pilot's guesses copied (0: all top-k) */
    ts_expert_plan plan;     /* backend slots: who plans decode's passes */
    int same_as;             /* > 0: the index of a mode whose cache stats and final state this one must equal */
} mode;

/* What a run left in the cache: its counters, and a hash of every layer's
 * policy state (which expert in which slot, ticks, counts). */
typedef struct cache_end {
    expert_cache_stats st;
    uint64_t state_hash;
} cache_end;

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The file's top-k and expert count (0 when absent): slot counts are given
 * relative to them. */
static void expert_counts(const gguf_file *f, int32_t *k, int32_t *ne) {
    char key[128];
    gguf_str a;
    gguf_get_str(f, "general.architecture", &a);
    snprintf(key, sizeof key, "%.*s.expert_used_count", (int)a.len, a.ptr);
    uint32_t v;
    if (gguf_get_u32(f, key, &v) == GGUF_GET_OK) *k = (int32_t)v;
    snprintf(key, sizeof key, "%.*s.expert_count", (int)a.len, a.ptr);
    if (gguf_get_u32(f, key, &v) == GGUF_GET_OK) *ne = (int32_t)v;
}

/* Generates N_GEN tokens after a fixed prompt; writes ids and a checksum of
 * every logit bit pattern. */
static bool generate(const char *path, const mode *md, float temperature, int32_t *ids, uint64_t *logit_hash, char *start_line,
                     cache_end *end) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = (ts_expert_residency)md->res;
    mo.expert_direct_io = md->nocache;
    mo.expert_source = md->source;
    ts_model *m;
    gguf_file *f;
    if (gguf_open(path, &f) != TS_OK) return false;
    /* slots relative to this model's top-k and expert count */
    int32_t k = 0, ne = 0;
    expert_counts(f, &k, &ne);
    if (md->res == EXPERT_RESIDENCY_STREAMED) mo.expert_slots = md->slots == 0 ? k : ne;
    if (ts_model_load_gguf(f, &mo, &m) != TS_OK) {
        fprintf(stderr, "%s [%s]: %s\n", path, md->name, ts_last_error());
        return false;
    }
    expert_cache *ec = ts_model_expert_cache(m);
    if (ec) expert_cache_format_start(ec, start_line, 256);
    ts_session *s;
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = 128;
    so.kv_f32 = true;
    so.pilot_prefetch = !md->no_prefetch;
    so.pilot_prefetch_depth = md->depth;
    so.expert_plan = md->plan;
    if (ts_session_new(m, &so, &s) != TS_OK) {
        fprintf(stderr, "%s [%s]: %s\n", path, md->name, ts_last_error());
        ts_model_free(m);
        return false;
    }
    sampler_params sp;
    sampler_params_default(&sp);
    sp.temperature = temperature;
    sp.seed = 1234;
    sampler *smp;
    sampler_new(&sp, ts_session_n_vocab(s), &smp);
    int32_t prompt[9] = {1, 40, 41, 42, 43, 100, 7, 250, 33};
    float *lg;
    bool ok = ts_session_eval(s, prompt, 9, &lg) == TS_OK;
    uint64_t hsh = 1469598103934665603ull;
    int32_t nv = ts_session_n_vocab(s);
    for (int i = 0; ok && i < N_GEN; i++) {
        for (int32_t v = 0; v < nv; v++) {
            uint32_t b;
            memcpy(&b, &lg[v], 4);
            hsh = (hsh ^ b) * 1099511628211ull;
        }
        ids[i] = sampler_sample(smp, lg);
        sampler_accept(smp, ids[i]);
        ok = ts_session_eval(s, &ids[i], 1, &lg) == TS_OK;
    }
    *logit_hash = hsh;
    if (ok && ec) {
        /* pilot prefetch: on for backend slots unless turned off; each copy
         * is judged by its layer's next pass (every token ends with its last
         * layer, which prefetches nothing), and at the minimum slot count
         * the guesses must have found work */
        expert_cache_stats st;
        expert_cache_get_stats(ec, -1, &st);
        memset(end, 0, sizeof *end);
        end->st = st;
        end->state_hash = 1469598103934665603ull;
        const ts_model_desc *d0 = ts_model_desc_of(m);
        for (int32_t l = 0; l < d0->emap.n_moe; l++) {
            const cache_layer *cl = expert_cache_layer_state(ec, l);
            if (!cl) continue;
            end->state_hash = hash_bytes(end->state_hash, cl->slot_expert, sizeof(int32_t) * (size_t)cl->n_slots);
            end->state_hash = hash_bytes(end->state_hash, cl->slot_tick, sizeof(uint64_t) * (size_t)cl->n_slots);
            end->state_hash = hash_bytes(end->state_hash, cl->expert_slot, sizeof(int32_t) * (size_t)cl->n_experts);
            end->state_hash = hash_bytes(end->state_hash, cl->expert_count, sizeof(uint64_t) * (size_t)cl->n_experts);
            end->state_hash = hash_bytes(end->state_hash, &cl->tick, sizeof cl->tick);
        }
        const bool pf = md->source != TS_EXPERT_SOURCE_AUTO && md->res == EXPERT_RESIDENCY_STREAMED && !md->no_prefetch;
        CHECKF(st.prefetch_copies == st.prefetch_saved + st.prefetch_wasted, "%s [%s]: %llu prefetch copies, %llu saved + %llu wasted",
               path, md->name, (unsigned long long)st.prefetch_copies, (unsigned long long)st.prefetch_saved,
               (unsigned long long)st.prefetch_wasted);
        CHECKF(pf ? (md->slots != 0 || st.prefetch_copies > 0) : st.prefetch_copies == 0, "%s [%s]: %llu prefetch copies", path,
               md->name, (unsigned long long)st.prefetch_copies);
        if (md->source != TS_EXPERT_SOURCE_AUTO) expert_cache_format_end(ec, 0, start_line, 512);
        /* with backend slots the pilot is folded into each MoE layer's
         * routing (engine.c, fold_pilot_routers): every layer but the last
         * carries the next one's folded router, and the stats above (equal
         * to the unfolded pilot's when it was written) come from it */
        const ts_model_desc *dsc = ts_model_desc_of(m);
        int folded = 0;
        for (int l = 0; l + 1 < dsc->hp.n_layer; l++) folded += dsc->layers[l].pilot_router.data != NULL;
        const bool want = md->source != TS_EXPERT_SOURCE_AUTO && md->res == EXPERT_RESIDENCY_STREAMED;
        CHECKF(folded == (want ? dsc->hp.n_layer - 1 : 0), "%s [%s]: %d layers with a folded pilot", path, md->name, folded);
    }
    sampler_free(smp);
    ts_session_free(s);
    ts_model_free(m);
    return ok;
}

#define N_PRE 150 /* prompt tokens: chunks of PRE_BATCH, then the rest */
#define PRE_BATCH 64

typedef struct pre_mode {
    const char *name;
    expert_residency res;
    int32_t slots; /* added to top-k; -1: every expert */
    ts_expert_source source;
} pre_mode;

/* Evaluates N_PRE prompt tokens in chunks of `batch` (1: token by token) and
 * returns every position's logits (n_vocab each, malloc'd) and the cache's
 * request count (0 in mapped mode). The request sequence itself is checked
 * against analyze cache's replay in tests/cli_instruments.sh. */
static float *prefill(const char *path, const pre_mode *md, int batch, int32_t *n_vocab, uint64_t *requests) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = (ts_expert_residency)md->res;
    mo.expert_source = md->source;
    gguf_file *f;
    if (gguf_open(path, &f) != TS_OK) return NULL;
    int32_t k = 0, ne = 0;
    expert_counts(f, &k, &ne);
    if (md->res == EXPERT_RESIDENCY_STREAMED) mo.expert_slots = md->slots < 0 ? ne : k + md->slots;
    ts_model *m;
    if (ts_model_load_gguf(f, &mo, &m) != TS_OK) {
        fprintf(stderr, "%s [%s]: %s\n", path, md->name, ts_last_error());
        return NULL;
    }
    ts_session *s;
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = N_PRE + 8;
    so.n_batch = batch;
    so.kv_f32 = true;
    so.all_logits = true;
    float *out = NULL;
    if (ts_session_new(m, &so, &s) == TS_OK) {
        int32_t nv = ts_session_n_vocab(s), ids[N_PRE];
        uint32_t x = 12345;
        for (int i = 0; i < N_PRE; i++) x = x * 1664525u + 1013904223u, ids[i] = (int32_t)((x >> 8) % (uint32_t)nv);
        out = malloc(sizeof(float) * (size_t)N_PRE * (size_t)nv);
        expert_cache *ec = ts_model_expert_cache(m);
        if (ec) expert_cache_reset_stats(ec);
        bool ok = out != NULL;
        for (int done = 0; ok && done < N_PRE;) {
            int n = batch == 1 ? 1 : N_PRE;
            float *lg;
            ok = ts_session_eval(s, ids + done, n, &lg) == TS_OK;
            if (ok) memcpy(out + (size_t)done * nv, lg, sizeof(float) * (size_t)n * (size_t)nv);
            done += n;
        }
        if (!ok) {
            fprintf(stderr, "%s [%s]: %s\n", path, md->name, ts_last_error());
            free(out);
            out = NULL;
        }
        expert_cache_stats st = {0};
        if (ec) expert_cache_get_stats(ec, -1, &st);
        *requests = st.requests;
        *n_vocab = nv;
        ts_session_free(s);
    }
    ts_model_free(m);
    return out;
}

static void test_prefill(const char *name, const char *path) {
    const pre_mode modes[] = {
        {"resident", EXPERT_RESIDENCY_RESIDENT, 0, TS_EXPERT_SOURCE_AUTO},
        {"streamed-k", EXPERT_RESIDENCY_STREAMED, 0, TS_EXPERT_SOURCE_AUTO},
        {"streamed-k+1", EXPERT_RESIDENCY_STREAMED, 1, TS_EXPERT_SOURCE_AUTO},
        {"streamed-all", EXPERT_RESIDENCY_STREAMED, -1, TS_EXPERT_SOURCE_AUTO},
        {"mapped", EXPERT_RESIDENCY_MAPPED, 0, TS_EXPERT_SOURCE_AUTO},
        {"streamed-k backend/host", EXPERT_RESIDENCY_STREAMED, 0, TS_EXPERT_SOURCE_HOST},
        {"streamed-k+1 backend/file", EXPERT_RESIDENCY_STREAMED, 1, TS_EXPERT_SOURCE_FILE},
    };
    const int n_modes = (int)(sizeof modes / sizeof modes[0]);
    int32_t nv = 0;
    uint64_t req_ref = 0, req = 0, req_tok = 0;
    float *ref = prefill(path, &modes[0], PRE_BATCH, &nv, &req_ref);
    CHECKF(ref != NULL, "%s prefill resident", name);
    if (!ref) return;
    const size_t nl = (size_t)N_PRE * (size_t)nv;
    for (int mi = 1; mi < n_modes; mi++) {
        int32_t nv2 = 0;
        float *got = prefill(path, &modes[mi], PRE_BATCH, &nv2, &req);
        CHECKF(got != NULL, "%s prefill %s", name, modes[mi].name);
        if (!got) continue;
        CHECKF(memcmp(ref, got, sizeof(float) * nl) == 0, "%s prefill %s: logits of %d positions differ bitwise from resident", name,
               modes[mi].name, N_PRE);
        if (modes[mi].res == EXPERT_RESIDENCY_STREAMED) {
            /* streamed at k: the per-chunk requests; the token-by-token run below must ask for more */
            if (!req_tok) req_tok = req;
            CHECKF(req == req_tok, "%s prefill %s: %llu cache requests, %llu at k slots", name, modes[mi].name, (unsigned long long)req,
                   (unsigned long long)req_tok);
        }
        free(got);
    }
    /* token by token: every expert a matvec; the per-token decode path */
    uint64_t req1 = 0;
    pre_mode one = {"streamed-k token by token", EXPERT_RESIDENCY_STREAMED, 0, TS_EXPERT_SOURCE_AUTO};
    float *tok = prefill(path, &one, 1, &nv, &req1);
    CHECKF(tok != NULL, "%s prefill token by token", name);
    if (tok) {
        double maxd = 0, maxa = 0;
        for (size_t i = 0; i < nl; i++) {
            double d = fabs((double)tok[i] - (double)ref[i]);
            if (!(d <= maxd)) maxd = d; /* NaN sticks */
            if (fabs(ref[i]) > maxa) maxa = fabs(ref[i]);
        }
        /* F32 weights: GEMM vs matvec differ only in the order of F32 sums */
        CHECKF(maxd <= 1e-5 * (maxa > 1 ? maxa : 1), "%s prefill grouped vs token by token: max|dlogit| %.3g (max|logit| %.3g)", name,
               maxd, maxa);
        printf("%-24s prefill %d tokens in chunks of %d: identical across %d modes; vs token by token max|dlogit| %.2e (max|logit| "
               "%.2f); cache requests %llu grouped, %llu token by token\n",
               name, N_PRE, PRE_BATCH, n_modes, maxd, maxa, (unsigned long long)req_tok, (unsigned long long)req1);
        CHECKF(req_tok > 0 && req_tok < req1, "%s: grouped prefill made %llu requests, token by token %llu", name,
               (unsigned long long)req_tok, (unsigned long long)req1);
        free(tok);
    }
    free(ref);
}

/* tiny-qwen3moe with NE experts: the four experts and router rows, then
 * copies of them scaled (expert e from e % 4, router row e from row e % 4
 * plus a deterministic jitter) so routing spreads over all NE. */
static bool write_wide(const char *src, const char *dst, int NE) {
    gguf_file *f;
    if (gguf_open(src, &f) != TS_OK) return false;
    gguf_writer *w = gguf_writer_new(3, f->alignment);
    for (uint64_t k = 0; k < f->n_kv; k++) {
        const gguf_kv *kv = &f->kv[k];
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (!strcmp(key, "general.alignment")) continue;
        if (!strcmp(key, "qwen3moe.expert_count")) gguf_w_u32(w, key, (uint32_t)NE);
        else gguf_w_copy_kv(w, kv);
    }
    bool ok = true;
    for (uint64_t t = 0; t < f->n_tensors && ok; t++) {
        const gguf_tensor *gt = &f->tensors[t];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)gt->name.len, gt->name.ptr);
        const bool exps = strstr(name, "_exps.weight") != NULL, router = strstr(name, "ffn_gate_inp.weight") != NULL;
        if (!exps && !router) {
            gguf_w_tensor(w, name, gt->type, gt->n_dims, gt->ne, gt->data, gt->nbytes);
            continue;
        }
        /* one expert (exps) or router row (router) is the tensor's last-dim slice */
        const uint64_t E0 = gt->ne[gt->n_dims - 1], per = gt->nbytes / E0 / sizeof(float);
        ok = gt->type == TS_TYPE_F32 && E0 == 4;
        float *d = ok ? malloc(sizeof(float) * per * (size_t)NE) : NULL;
        ok = d != NULL;
        uint32_t x = 777;
        for (int e = 0; ok && e < NE; e++)
            for (uint64_t i = 0; i < per; i++) {
                float v;
                memcpy(&v, gt->data + ((uint64_t)(e % 4) * per + i) * sizeof(float), sizeof v);
                x = x * 1664525u + 1013904223u;
                const float jit = ((float)(x >> 9) / 8388608.0f - 0.5f) * (router ? 0.5f : 0.0f);
                d[(uint64_t)e * per + i] = e < 4 ? v : v * (1.0f + 0.05f * (float)(e / 4)) + jit;
            }
        uint64_t ne[4];
        memcpy(ne, gt->ne, sizeof ne);
        ne[gt->n_dims - 1] = (uint64_t)NE;
        if (ok) gguf_w_tensor(w, name, gt->type, gt->n_dims, ne, d, sizeof(float) * per * (uint64_t)NE);
        free(d);
    }
    ok = ok && gguf_writer_write(w, dst) == TS_OK;
    gguf_writer_free(w);
    gguf_close(f);
    return ok;
}

/* One run on path: N_PRE prompt tokens in chunks of PRE_BATCH, then 8 greedy
 * tokens; the router trace captured to cap (NULL: none). Returns the logits
 * hash and the cache's counters. */
static bool run_wide(const char *path, expert_residency res, int32_t slots, ts_cache_policy pol, ts_expert_source src, const char *cap,
                     uint64_t *hash, ts_expert_stats *st) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = (ts_expert_residency)res;
    mo.expert_source = src;
    mo.expert_slots = slots;
    mo.expert_policy = pol;
    ts_model *m;
    if (ts_model_load(path, &mo, &m) != TS_OK) {
        fprintf(stderr, "%s: %s\n", path, ts_last_error());
        return false;
    }
    ts_instruments ins = ts_instruments_default();
    ins.router_path = cap;
    ins.router_trace = cap != NULL;
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = N_PRE + 16;
    so.n_batch = PRE_BATCH;
    so.instruments = &ins;
    ts_session *s;
    bool ok = ts_session_new(m, &so, &s) == TS_OK;
    *hash = 14695981039346656037ull;
    if (ok) {
        int32_t nv = ts_session_n_vocab(s), ids[N_PRE];
        uint32_t x = 4242;
        for (int i = 0; i < N_PRE; i++) x = x * 1664525u + 1013904223u, ids[i] = (int32_t)((x >> 8) % (uint32_t)nv);
        float *lg;
        ok = ts_session_eval(s, ids, N_PRE, &lg) == TS_OK;
        for (int t = 0; ok && t < 8; t++) {
            *hash = hash_bytes(*hash, lg, sizeof(float) * (size_t)nv);
            int32_t best = 0;
            for (int32_t i = 1; i < nv; i++) best = lg[i] > lg[best] ? i : best;
            ok = ts_session_eval(s, &best, 1, &lg) == TS_OK;
        }
        if (ok && cap) {
            FILE *sink = fopen("/dev/null", "w"); /* its "wrote PATH" line */
            ok = sink && ts_session_instruments_finish(s, sink, false) == TS_OK;
            if (sink) fclose(sink);
        }
        if (!ok) fprintf(stderr, "%s: %s\n", path, ts_last_error());
        ts_session_free(s);
    }
    ts_model_expert_stats(m, st);
    ts_model_free(m);
    return ok;
}

/* Several sessions on one streamed model, each prefilling its own prompt
 * in chunks whose passes overlap: a session's fetch-ahead holds the cache
 * pending while it computes, and the others' fetches wait for it (and for
 * its pins) without deadlock. Each session's logits must equal its solo
 * run's. */
#define N_CONC 3
typedef struct conc_job {
    ts_model *m;
    uint32_t seed;
    uint64_t hash;
    bool ok;
} conc_job;

static void *conc_run(void *arg) {
    conc_job *j = arg;
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = N_PRE + 16;
    so.n_batch = PRE_BATCH;
    ts_session *s;
    j->ok = ts_session_new(j->m, &so, &s) == TS_OK;
    j->hash = 14695981039346656037ull;
    if (!j->ok) return NULL;
    int32_t nv = ts_session_n_vocab(s), ids[N_PRE];
    uint32_t x = j->seed;
    for (int i = 0; i < N_PRE; i++) x = x * 1664525u + 1013904223u, ids[i] = (int32_t)((x >> 8) % (uint32_t)nv);
    float *lg;
    j->ok = ts_session_eval(s, ids, N_PRE, &lg) == TS_OK;
    if (j->ok) j->hash = hash_bytes(j->hash, lg, sizeof(float) * (size_t)nv);
    ts_session_free(s);
    return NULL;
}

static void test_concurrent_overlap(const char *path) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = TS_EXPERTS_STREAMED;
    mo.expert_slots = 9;
    ts_model *m;
    if (ts_model_load(path, &mo, &m) != TS_OK) {
        CHECKF(false, "%s: %s", path, ts_last_error());
        return;
    }
    conc_job solo[N_CONC], conc[N_CONC];
    for (int i = 0; i < N_CONC; i++) {
        solo[i] = (conc_job){m, 100u + (uint32_t)i, 0, false};
        conc_run(&solo[i]);
        conc[i] = (conc_job){m, 100u + (uint32_t)i, 0, false};
    }
    pthread_t th[N_CONC];
    for (int i = 0; i < N_CONC; i++) pthread_create(&th[i], NULL, conc_run, &conc[i]);
    for (int i = 0; i < N_CONC; i++) pthread_join(th[i], NULL);
    int same = 0;
    for (int i = 0; i < N_CONC; i++) same += solo[i].ok && conc[i].ok && solo[i].hash == conc[i].hash;
    ts_expert_stats st;
    ts_model_expert_stats(m, &st);
    CHECKF(same == N_CONC, "%d of %d concurrent streamed prefills equal their solo runs", same, N_CONC);
    printf("tiny-qwen3moe x16 experts   %d sessions prefilling at once, 9 slots: %d of %d logits equal their solo runs (%llu requests, %llu misses)\n",
           N_CONC, same, N_CONC, (unsigned long long)st.requests, (unsigned long long)st.misses);
    ts_model_free(m);
}

static void test_overlapped_passes(void) {
    char src[1024], dst[1024], cap[1100];
    snprintf(src, sizeof src, "%s/ref/tiny-qwen3moe-f32.gguf", TS_FIXTURES);
    snprintf(dst, sizeof dst, "%s/ts_test_moe_wide_%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    snprintf(cap, sizeof cap, "%s.router.json", dst);
    const int NE = 16;
    const bool wrote = write_wide(src, dst, NE);
    CHECKF(wrote, "writing %s", dst);
    if (!wrote) return;
    uint64_t href = 0, h = 0;
    ts_expert_stats st;
    CHECK(run_wide(dst, EXPERT_RESIDENCY_RESIDENT, 0, TS_CACHE_LFU, TS_EXPERT_SOURCE_AUTO, NULL, &href, &st));
    const int32_t slot_counts[] = {2, 3, 4, 6, 9};
    /* host slots (reads in flight), then the device path's backend slots from
     * the host tier and the file (copies on copy_st), LFU */
    const ts_expert_source srcs[] = {TS_EXPERT_SOURCE_AUTO, TS_EXPERT_SOURCE_AUTO, TS_EXPERT_SOURCE_HOST, TS_EXPERT_SOURCE_FILE};
    const char *src_names[] = {"", "", " backend/host", " backend/file"};
    int bound = 0;
    for (int pi = 0; pi < 4; pi++)
        for (size_t si = 0; si < sizeof slot_counts / sizeof *slot_counts; si++) {
            const int32_t n = slot_counts[si];
            const ts_cache_policy pol = pi == 1 ? TS_CACHE_LRU : TS_CACHE_LFU;
            char pn[64];
            snprintf(pn, sizeof pn, "%s%s", pi == 1 ? "lru" : "lfu", src_names[pi]);
            const bool ran = run_wide(dst, EXPERT_RESIDENCY_STREAMED, n, pol, srcs[pi], cap, &h, &st);
            CHECKF(ran, "wide streamed %d %s", n, pn);
            if (!ran) continue;
            CHECKF(h == href, "wide streamed %d slots %s: logits differ from resident", n, pn);
            router_capture c;
            const bool loaded = router_capture_load(cap, 0, &c) == TS_OK;
            CHECKF(loaded, "%s", ts_last_error());
            if (!loaded) continue;
            uint64_t hits = 0, misses = 0, req = 0;
            for (int32_t l = 0; l < c.num_layers; l++) {
                if (!router_capture_layer_routes(&c, l)) continue;
                replay_result r;
                CHECKF(router_replay_layer(&c, l, n, pi == 1 ? REPLAY_LRU : REPLAY_LFU, 0, 0, &r) == TS_OK, "replay: %s", ts_last_error());
                hits += r.hits, misses += r.misses, req += r.requests;
            }
            router_capture_free(&c);
            CHECKF(req == st.requests && hits == st.hits && misses == st.misses,
                   "wide streamed %d slots %s: engine %llu requests %llu hits %llu misses, replay %llu %llu %llu", n, pn,
                   (unsigned long long)st.requests, (unsigned long long)st.hits, (unsigned long long)st.misses,
                   (unsigned long long)req, (unsigned long long)hits, (unsigned long long)misses);
            printf("tiny-qwen3moe x%d experts   streamed %d slots %s: engine %llu requests, %llu hits, %llu misses; replay %llu, %llu, %llu\n",
                   NE, n, pn, (unsigned long long)st.requests, (unsigned long long)st.hits, (unsigned long long)st.misses,
                   (unsigned long long)req, (unsigned long long)hits, (unsigned long long)misses);
            bound += st.misses > 0 && st.hits > 0;
        }
    test_concurrent_overlap(dst);
    CHECKF(bound >= 12, "only %d runs with both hits and misses: the comparison tests little", bound);
    unlink(cap);
    unlink(dst);
}

/* Load progress counts the experts: whatever the mode, the reports rise to
 * done == total == every tensor's bytes, and a mode that loads the experts
 * at open (resident prefault, the host tier) reports them on the way. */
typedef struct prog_rec {
    uint64_t last, total, first_total, max_step; /* max_step: the largest rise between two reports */
    int calls;
    bool rising;
} prog_rec;

static void on_progress(void *user, uint64_t done, uint64_t total) {
    prog_rec *r = user;
    if (r->calls++ == 0) r->first_total = total;
    r->rising = r->rising && done >= r->last && total == r->first_total && done <= total;
    if (done - r->last > r->max_step) r->max_step = done - r->last;
    r->last = done;
    r->total = total;
}

static void test_progress(const char *name, const char *path) {
    static const struct {
        const char *name;
        ts_expert_residency res;
        ts_expert_source src;
        bool loads_experts;
    } modes[] = {
        {"resident", TS_EXPERTS_RESIDENT, TS_EXPERT_SOURCE_AUTO, true},
        {"streamed backend/host", TS_EXPERTS_STREAMED, TS_EXPERT_SOURCE_HOST, true},
        {"streamed", TS_EXPERTS_STREAMED, TS_EXPERT_SOURCE_AUTO, false},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        gguf_file *f;
        if (gguf_open(path, &f) != TS_OK) {
            CHECKF(0, "%s: open", path);
            return;
        }
        uint64_t all = 0, exps = 0;
        for (uint64_t t = 0; t < f->n_tensors; t++) {
            all += f->tensors[t].nbytes;
            if (memmem(f->tensors[t].name.ptr, f->tensors[t].name.len, "_exps", 5)) exps += f->tensors[t].nbytes;
        }
        int32_t k = 0, ne = 0;
        expert_counts(f, &k, &ne);
        ts_model_opts mo = ts_model_opts_default();
        mo.expert_residency = modes[i].res;
        mo.expert_source = modes[i].src;
        if (modes[i].res == TS_EXPERTS_STREAMED) mo.expert_slots = k;
        mo.prefault = true;
        prog_rec r = {.rising = true};
        mo.progress = on_progress;
        mo.progress_user = &r;
        ts_model *m;
        bool ok = ts_model_load_gguf(f, &mo, &m) == TS_OK;
        CHECKF(ok, "%s %s: load: %s", name, modes[i].name, ts_last_error());
        if (!ok) continue;
        CHECKF(r.calls >= 2 && r.rising && r.last == r.total && r.total == all,
               "%s %s load progress: %d reports, rising %d, last %llu of %llu, the file's tensors %llu", name, modes[i].name, r.calls,
               r.rising, (unsigned long long)r.last, (unsigned long long)r.total, (unsigned long long)all);
        /* loaded at open: reported in steps (one layer's projection at most);
         * not loaded: the experts come as one jump at the end */
        if (modes[i].loads_experts)
            CHECKF(r.max_step < exps, "%s %s: a progress step of %llu bytes (experts: %llu): the experts were not reported as loaded", name,
                   modes[i].name, (unsigned long long)r.max_step, (unsigned long long)exps);
        printf("%-24s load progress %-22s %d reports up to %llu bytes (experts %llu), largest step %llu\n", name, modes[i].name, r.calls,
               (unsigned long long)r.total, (unsigned long long)exps, (unsigned long long)r.max_step);
        ts_model_free(m);
    }
}

/* ts_session_opts.pilot_prefetch resolved (ts_session_pilot_prefetch): the
 * default depth (capped at top-k) from either tier, all top-k at depth 0,
 * none when off. */
static void test_prefetch_modes(const char *name, const char *path) {
    for (int src = TS_EXPERT_SOURCE_HOST; src <= TS_EXPERT_SOURCE_FILE; src++) {
        gguf_file *f;
        if (gguf_open(path, &f) != TS_OK) {
            CHECKF(0, "%s: open", path);
            return;
        }
        int32_t k = 0, ne = 0;
        expert_counts(f, &k, &ne);
        ts_model_opts mo = ts_model_opts_default();
        mo.expert_residency = TS_EXPERTS_STREAMED;
        mo.expert_source = (ts_expert_source)src;
        mo.expert_slots = k;
        ts_model *m;
        bool ok = ts_model_load_gguf(f, &mo, &m) == TS_OK;
        CHECKF(ok, "%s prefetch modes: load: %s", name, ts_last_error());
        if (!ok) continue;
        for (int c = 0; c < 3; c++) {
            ts_session_opts so = ts_session_opts_default();
            so.n_ctx = 64;
            int32_t want = so.pilot_prefetch_depth < k ? so.pilot_prefetch_depth : k;
            if (c == 1) so.pilot_prefetch_depth = 0, want = k;
            if (c == 2) so.pilot_prefetch = false, want = 0;
            ts_session *s;
            if (ts_session_new(m, &so, &s) != TS_OK) {
                CHECKF(0, "%s prefetch case %d: session: %s", name, c, ts_last_error());
                continue;
            }
            const int32_t d = ts_session_pilot_prefetch(s);
            CHECKF(d == want && (c != 0 || d > 0), "%s %s tier, prefetch case %d: depth %d, want %d", name,
                   src == TS_EXPERT_SOURCE_HOST ? "host" : "file", c, d, want);
            ts_session_free(s);
        }
        ts_model_free(m);
    }
}

/* The CPU backend's grouped expert matmul (one pool run over all groups)
 * against its plain matmul on each group alone, bit for bit: quantized
 * weights of two partner formats (Q8_0's Q8_0, Q4_K's Q8_K), so the
 * activations of a run take two slots; groups of 1 (the matvec), 2-5 (the
 * tile path) and 6-12 tokens (the panel GEMM); 63 rows against a buffer of
 * ~58, so the groups go in two runs; 1, 2 and 3 threads; and reference
 * precision (F32 activations). The MoE fixtures are F32 and never quantize.
 * The rows are 12 tokens' rows gathered (each token in several groups, as
 * in a prefill), given to the grouped matmul without and with row_tok, so
 * that a token's rows are also converted once and copied. */
static void test_grouped_op(void) {
    enum { NE = 6, NI = 512, NO = 40, MAXT = 12, NG = 8 };
    static const int32_t gid[NG] = {3, 0, 5, 1, 4, 2, 0, 3}, gcnt[NG] = {12, 1, 9, 3, 12, 12, 8, 6};
    const ts_type wt[2] = {TS_TYPE_Q8_0, TS_TYPE_Q4_K};
    int32_t goff[NG], rows = 0;
    for (int g = 0; g < NG; g++) goff[g] = rows, rows += gcnt[g];
    uint32_t st = 99;
#define RND() (st = st * 1664525u + 1013904223u, (float)(st >> 8) / 8388608.0f - 1.0f)
    float *f = malloc(sizeof(float) * NI), *x = malloc(sizeof(float) * (size_t)rows * NI), *tx = malloc(sizeof(float) * MAXT * NI);
    for (int i = 0; i < MAXT * NI; i++) tx[i] = RND() * 2;
    int32_t rtok[64];
    for (int g = 0; g < NG; g++)
        for (int i = 0; i < gcnt[g]; i++) rtok[goff[g] + i] = (5 * g + i) % MAXT; /* distinct within a group */
    for (int r = 0; r < rows; r++) memcpy(x + (size_t)r * NI, tx + (size_t)rtok[r] * NI, sizeof(float) * NI);
    uint8_t *wd[2];
    const void *tab[2][NE];
    uint64_t rb[2];
    for (int s = 0; s < 2; s++) {
        rb[s] = ts_type_row_bytes(wt[s], NI);
        wd[s] = malloc(rb[s] * NO * NE);
        for (int r = 0; r < NO * NE; r++) {
            for (int i = 0; i < NI; i++) f[i] = RND();
            ts_quantize_row_ref(wt[s], f, wd[s] + (uint64_t)r * rb[s], NI);
        }
        for (int e = 0; e < NE; e++) tab[s][e] = wd[s] + (uint64_t)e * NO * rb[s];
    }
    int bad = 0, runs = 0;
    for (int exact = 0; exact < 2; exact++)
        for (int nth = 1; nth <= 3; nth++)
        for (int dd = 0; dd < 2; dd++) {
            ts_backend *be = NULL;
            ts_stream *sm = NULL;
            CHECK(ts_backend_cpu_new(nth, &be) == TS_OK && be->ops->stream_new(be, nth, &sm) == TS_OK);
            if (!sm) {
                if (be) ts_backend_free(be);
                continue;
            }
            ts_backend_reserve r = {.max_tokens = MAXT, .max_in = NI, .n_ctx = 16, .n_head = 1, .max_expert_rows = rows, .exact_act = exact};
            CHECK(be->ops->reserve(sm, &r) == TS_OK);
            ts_expert_mat em[2];
            for (int s = 0; s < 2; s++)
                em[s] = (ts_expert_mat){.table = tab[s], .host_table = tab[s], .n_expert = NE, .type = wt[s], .n_in = NI, .n_out = NO,
                                        .row_bytes = rb[s], .name = "w"};
            const ts_expert_mat *emp[2] = {&em[0], &em[1]};
            float *y[2] = {calloc((size_t)rows * NO, sizeof(float)), calloc((size_t)rows * NO, sizeof(float))};
            float *z[2] = {calloc((size_t)rows * NO, sizeof(float)), calloc((size_t)rows * NO, sizeof(float))};
            const ts_expert_groups grp = {.n_group = NG, .id = gid, .off = goff, .cnt = gcnt, .n_rows = rows, .row_tok = dd ? rtok : NULL};
            be->ops->moe_matmul_grouped(sm, 2, emp, y, &grp, x);
            for (int g = 0; g < NG; g++) {
                ts_mat m[2];
                const ts_mat *mp[2] = {&m[0], &m[1]};
                float *zp[2];
                for (int s = 0; s < 2; s++) {
                    m[s] = (ts_mat){.data = tab[s][gid[g]], .type = wt[s], .n_in = NI, .n_out = NO, .row_bytes = rb[s], .name = "w"};
                    zp[s] = z[s] + (size_t)goff[g] * NO;
                }
                be->ops->matmul(sm, 2, mp, zp, x + (size_t)goff[g] * NI, gcnt[g]);
            }
            CHECK(be->ops->sync(sm) == TS_OK);
            bool diff = false;
            for (int s = 0; s < 2; s++) diff |= memcmp(y[s], z[s], sizeof(float) * (size_t)rows * NO) != 0;
            double mag = 0;
            for (size_t i = 0; i < (size_t)rows * NO; i++) mag += fabs(y[1][i]);
            bad += diff || !(mag > 0);
            runs++;
            for (int s = 0; s < 2; s++) free(y[s]), free(z[s]);
            be->ops->stream_free(sm);
            ts_backend_free(be);
        }
#undef RND
    CHECKF(bad == 0 && runs == 12, "grouped expert matmul: %d of %d runs differ from the per-expert matmul (or are all zero)", bad, runs);
    printf("%-24s grouped expert matmul = per-expert matmul, bitwise: %d groups, %d rows of %d tokens, Q8_0 + Q4_K, 1-3 threads, exact and not, row_tok or not\n",
           "cpu backend", NG, rows, MAXT);
    for (int s = 0; s < 2; s++) free(wd[s]);
    free(f);
    free(x);
    free(tx);
}

int main(void) {
    test_grouped_op();
    const char *models[] = {"tiny-qwen3moe-f32.gguf", "tiny-qwen2moe-f32.gguf", "tiny-mixtral-f32.gguf", "tiny-olmoe-f32.gguf"};
    const mode modes[] = {
        {"resident", EXPERT_RESIDENCY_RESIDENT, 0, false, TS_EXPERT_SOURCE_AUTO, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        {"streamed-min", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_AUTO, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        {"streamed-large", EXPERT_RESIDENCY_STREAMED, -1, false, TS_EXPERT_SOURCE_AUTO, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        {"streamed-min-nocache", EXPERT_RESIDENCY_STREAMED, 0, true, TS_EXPERT_SOURCE_AUTO, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        {"mapped", EXPERT_RESIDENCY_MAPPED, 0, false, TS_EXPERT_SOURCE_AUTO, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        /* the device path's backend slots and copies, run in host memory;
         * decode planned by the host (a pass after each layer's readback) */
        {"streamed-min backend/host", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_HOST, false, 0, TS_EXPERT_PLAN_HOST, 0},
        {"streamed-min backend/file", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_FILE, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        {"streamed-large backend/file nocache", EXPERT_RESIDENCY_STREAMED, -1, true, TS_EXPERT_SOURCE_FILE, false, 0, TS_EXPERT_PLAN_AUTO, 0},
        {"streamed-min backend/host no prefetch", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_HOST, true, 0, TS_EXPERT_PLAN_HOST, 0},
        {"streamed-min backend/host prefetch 1", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_HOST, false, 1, TS_EXPERT_PLAN_HOST, 0},
        /* the same three planned by the backend (its expert_pass op, here the
         * reference): the same passes, so the same counters and final state
         * as the host-planned run they name */
        {"streamed-min backend/host device plan", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_HOST, false, 0, TS_EXPERT_PLAN_DEVICE, 5},
        {"streamed-min backend/host device plan no prefetch", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_HOST, true, 0,
         TS_EXPERT_PLAN_DEVICE, 8},
        {"streamed-min backend/host device plan prefetch 1", EXPERT_RESIDENCY_STREAMED, 0, false, TS_EXPERT_SOURCE_HOST, false, 1,
         TS_EXPERT_PLAN_DEVICE, 9},
        {"streamed-large backend/host device plan", EXPERT_RESIDENCY_STREAMED, -1, false, TS_EXPERT_SOURCE_HOST, false, 0, TS_EXPERT_PLAN_AUTO, 0},
    };
    const int n_modes = (int)(sizeof modes / sizeof modes[0]);
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/ref/%s", TS_FIXTURES, models[mi]);
        for (int sampled = 0; sampled < 2; sampled++) {
            int32_t ref[N_GEN], got[N_GEN];
            uint64_t href = 0, hgot = 0;
            char line[512] = "";
            cache_end ends[32];
            memset(ends, 0, sizeof ends);
            CHECK(generate(path, &modes[0], sampled ? 1.0f : 0.0f, ref, &href, line, &ends[0]));
            int distinct = 0;
            for (int i = 0; i < N_GEN; i++) {
                int seen = 0;
                for (int j = 0; j < i; j++) seen |= ref[j] == ref[i];
                distinct += !seen;
            }
            for (int k = 1; k < n_modes; k++) {
                line[0] = 0;
                bool ok = generate(path, &modes[k], sampled ? 1.0f : 0.0f, got, &hgot, line, &ends[k]);
                CHECKF(ok, "%s %s", models[mi], modes[k].name);
                CHECKF(ok && memcmp(ref, got, sizeof ref) == 0, "%s %s %s: generated ids differ from resident", models[mi],
                       modes[k].name, sampled ? "sampled" : "greedy");
                CHECKF(ok && href == hgot, "%s %s %s: logits differ bitwise from resident", models[mi], modes[k].name,
                       sampled ? "sampled" : "greedy");
                if (ok && modes[k].same_as > 0) {
                    const cache_end *a = &ends[modes[k].same_as], *b = &ends[k];
                    const bool same = a->state_hash == b->state_hash && a->st.passes == b->st.passes && a->st.requests == b->st.requests &&
                                      a->st.hits == b->st.hits && a->st.misses == b->st.misses && a->st.cold_misses == b->st.cold_misses &&
                                      a->st.evict_misses == b->st.evict_misses && a->st.bytes_requested == b->st.bytes_requested &&
                                      a->st.bytes_uploaded == b->st.bytes_uploaded && a->st.prefetch_copies == b->st.prefetch_copies &&
                                      a->st.prefetch_saved == b->st.prefetch_saved && a->st.prefetch_wasted == b->st.prefetch_wasted &&
                                      a->st.bytes_prefetched == b->st.bytes_prefetched;
                    CHECKF(same, "%s %s %s: cache counters or state differ from %s's (hits %llu/%llu, misses %llu/%llu, prefetch copies %llu/%llu)",
                           models[mi], modes[k].name, sampled ? "sampled" : "greedy", modes[modes[k].same_as].name,
                           (unsigned long long)b->st.hits, (unsigned long long)a->st.hits, (unsigned long long)b->st.misses,
                           (unsigned long long)a->st.misses, (unsigned long long)b->st.prefetch_copies,
                           (unsigned long long)a->st.prefetch_copies);
                    CHECKF(b->st.misses > 0 && b->st.hits > 0, "%s %s: %llu hits, %llu misses: the comparison tests nothing", models[mi],
                           modes[k].name, (unsigned long long)b->st.hits, (unsigned long long)b->st.misses);
                }
                if (!sampled) printf("%-24s %-22s %s\n", models[mi], modes[k].name, line);
            }
            printf("%-24s %s: %d tokens (%d distinct) identical across %d residency modes\n", models[mi], sampled ? "seeded sampling" : "greedy",
                   N_GEN, distinct, n_modes);
        }
    }
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/ref/%s", TS_FIXTURES, models[mi]);
        test_prefill(models[mi], path);
        test_progress(models[mi], path);
        test_prefetch_modes(models[mi], path);
    }
    test_overlapped_passes();
    return tu_finish();
}
