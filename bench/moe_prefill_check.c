/* moe_prefill_check: the grouped MoE prefill on a real-size quantized file
 * (make_synthetic_moe: Q4_K experts, the GEMM panel kernels), which the tiny
 * F32 fixtures of tests/test_moe.c cannot reach. Evaluates the same seeded
 * random prompt with all logits in chunks of B tokens under resident,
 * streamed (top-k, top-k + 1, all slots) and mapped experts, and token by
 * token; prints a hash of every logit bit per mode, whether it equals
 * resident's, and the largest logit difference of token by token against
 * the chunked run. Exit 1 when a mode differs bitwise.
 *
 * Build (repo root, library in build):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/moe_prefill_check.c build/libturbospark.a -lpthread -lm -o build/moe_prefill_check
 * Run:
 *   moe_prefill_check MODEL.gguf [N_TOKENS=300] [BATCH=128] [THREADS=2] [SAVE.f32]
 * SAVE.f32: the resident chunked logits, raw floats (n_tokens x n_vocab), to
 * compare two builds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turbospark.h"

static float *run(const char *path, ts_expert_residency res, int32_t slots, int n, int batch, int threads, int32_t *nv) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = res;
    mo.expert_slots = slots;
    ts_model *m;
    if (ts_model_load(path, &mo, &m) != TS_OK) {
        fprintf(stderr, "moe_prefill_check: %s\n", ts_last_error());
        return NULL;
    }
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = n + 1;
    so.n_batch = batch;
    so.n_threads = threads;
    so.all_logits = true;
    ts_session *s;
    float *out = NULL;
    if (ts_session_new(m, &so, &s) == TS_OK) {
        *nv = ts_session_n_vocab(s);
        int32_t *ids = malloc(sizeof *ids * (size_t)n);
        out = malloc(sizeof(float) * (size_t)n * (size_t)*nv);
        uint32_t x = 777;
        for (int i = 0; ids && i < n; i++) x = x * 1664525u + 1013904223u, ids[i] = (int32_t)((x >> 8) % (uint32_t)*nv);
        bool ok = ids && out;
        for (int done = 0; ok && done < n;) {
            int c = batch == 1 ? 1 : n;
            float *lg;
            ok = ts_session_eval(s, ids + done, c, &lg) == TS_OK;
            if (ok) memcpy(out + (size_t)done * (size_t)*nv, lg, sizeof(float) * (size_t)c * (size_t)*nv);
            done += c;
        }
        if (!ok) {
            fprintf(stderr, "moe_prefill_check: %s\n", ts_last_error());
            free(out);
            out = NULL;
        }
        free(ids);
        ts_session_free(s);
    } else {
        fprintf(stderr, "moe_prefill_check: %s\n", ts_last_error());
    }
    ts_model_free(m);
    return out;
}

static uint64_t hash(const float *v, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], 4);
        h = (h ^ b) * 1099511628211ull;
    }
    return h;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: moe_prefill_check MODEL.gguf [N_TOKENS=300] [BATCH=128] [THREADS=2] [SAVE.f32]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 300, batch = argc > 3 ? atoi(argv[3]) : 128, threads = argc > 4 ? atoi(argv[4]) : 2;
    if (n < 1 || batch < 2 || threads < 1) {
        fprintf(stderr, "moe_prefill_check: N_TOKENS >= 1, BATCH >= 2, THREADS >= 1\n");
        return 2;
    }
    ts_model_info mi;
    {
        ts_model *m;
        if (ts_model_load(argv[1], NULL, &m) != TS_OK) {
            fprintf(stderr, "moe_prefill_check: %s\n", ts_last_error());
            return 1;
        }
        ts_model_get_info(m, &mi);
        ts_model_free(m);
    }
    const int32_t k = mi.n_expert_used, ne = mi.n_expert;
    if (k < 1) {
        fprintf(stderr, "moe_prefill_check: %s has no routed experts\n", argv[1]);
        return 1;
    }
    struct {
        const char *name;
        ts_expert_residency res;
        int32_t slots;
    } modes[] = {{"resident", TS_EXPERTS_RESIDENT, 0},
                 {"streamed k", TS_EXPERTS_STREAMED, k},
                 {"streamed k+1", TS_EXPERTS_STREAMED, k + 1},
                 {"streamed all", TS_EXPERTS_STREAMED, ne},
                 {"mapped", TS_EXPERTS_MAPPED, 0}};
    int32_t nv = 0;
    float *ref = NULL;
    int bad = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        float *got = run(argv[1], modes[i].res, modes[i].slots, n, batch, threads, &nv);
        if (!got) return 1;
        size_t nl = (size_t)n * (size_t)nv;
        bool same = !ref || memcmp(ref, got, sizeof(float) * nl) == 0;
        bad += !same;
        printf("%-14s %d tokens in chunks of %d: logits hash %016llx %s\n", modes[i].name, n, batch, (unsigned long long)hash(got, nl),
               !ref ? "(reference)" : same ? "identical" : "DIFFERS");
        if (!ref) ref = got;
        else free(got);
        if (i == 0 && argc > 5) {
            FILE *f = fopen(argv[5], "wb");
            if (!f || fwrite(ref, sizeof(float), nl, f) != nl || fclose(f) != 0) {
                fprintf(stderr, "moe_prefill_check: cannot write %s\n", argv[5]);
                return 1;
            }
        }
    }
    float *tok = run(argv[1], TS_EXPERTS_RESIDENT, 0, n, 1, threads, &nv);
    if (!tok) return 1;
    double maxd = 0, maxa = 0, sumd = 0;
    size_t nl = (size_t)n * (size_t)nv, argmax_diff = 0;
    for (size_t i = 0; i < nl; i++) {
        double d = fabs((double)tok[i] - (double)ref[i]);
        if (!(d <= maxd)) maxd = d;
        sumd += d;
        if (fabs(ref[i]) > maxa) maxa = fabs(ref[i]);
    }
    for (int t = 0; t < n; t++) {
        const float *a = ref + (size_t)t * nv, *b = tok + (size_t)t * nv;
        int ia = 0, ib = 0;
        for (int v = 1; v < nv; v++) ia = a[v] > a[ia] ? v : ia, ib = b[v] > b[ib] ? v : ib;
        argmax_diff += ia != ib;
    }
    printf("token by token vs chunks of %d: max|dlogit| %.3g, mean %.3g, max|logit| %.3g, argmax differs at %zu of %d positions\n", batch,
           maxd, sumd / (double)nl, maxa, argmax_diff, n);
    free(tok);
    free(ref);
    return bad ? 1 : 0;
}
