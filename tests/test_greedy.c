/* Greedy generation on a real model against Hugging Face transformers
 * (tests/fixtures/ref/greedy-*.json, scripts/ref/greedy_refs.py).
 *
 * Two checks per prompt:
 *  1. free-running greedy generation equals the reference's greedy ids up to
 *     the first step where the reference's top-1/top-2 margin is below
 *     MARGIN_FREE (an engine with 8-bit activations may flip a near-tie, after
 *     which the two texts legitimately diverge);
 *  2. teacher-forced along the reference path (prompt + reference greedy ids
 *     in one eval with every position's logits): our argmax equals the
 *     reference token at every step whose margin is at least MARGIN_FORCED.
 * The model comes from scripts/fetch_models.sh (`make test` fetches it); a
 * missing file fails unless TS_ALLOW_MISSING_MODELS=1 (test_util.h). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forward/engine.h"
#include "test_util.h"

#define MARGIN_FREE 0.5
#define MARGIN_FORCED 0.5

static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static int32_t *int_array(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int32_t *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) v[i++] = (int32_t)e->valuedouble;
    return v;
}

static void check_fixture(const char *json_path) {
    char *text;
    size_t len;
    if (ts_read_file(json_path, 0, &text, &len) != TS_OK) { CHECK(0); return; }
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK(root != NULL);
    if (!root) return;
    const char *gguf = cJSON_GetObjectItem(root, "gguf")->valuestring;
    const cJSON *name = cJSON_GetObjectItem(root, "model");
    char path[2048];
    tu_model_path(gguf, path, sizeof path);
    if (access(path, R_OK) != 0) {
        tu_missing_model(cJSON_IsString(name) ? name->valuestring : gguf, path);
        cJSON_Delete(root);
        return;
    }
    ts_model *m;
    if (ts_model_load(path, NULL, &m) != TS_OK) { CHECKF(0, "%s", ts_last_error()); cJSON_Delete(root); return; }
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = 512;
    ts_session *s, *sa;
    CHECK(ts_session_new(m, &so, &s) == TS_OK);
    so.all_logits = true;
    CHECK(ts_session_new(m, &so, &sa) == TS_OK);
    int32_t nv = ts_session_n_vocab(s);
    const cJSON *pr;
    int pi = 0;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItem(root, "prompts")) {
        int np, ng, nm;
        int32_t *ids = int_array(cJSON_GetObjectItem(pr, "ids"), &np);
        int32_t *ref = int_array(cJSON_GetObjectItem(pr, "greedy"), &ng);
        const cJSON *ma = cJSON_GetObjectItem(pr, "margin");
        nm = cJSON_GetArraySize(ma);
        double *margin = malloc(sizeof *margin * (size_t)nm);
        int k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, ma) margin[k++] = e->valuedouble;
        /* 1. free-running */
        ts_session_reset(s);
        float *lg;
        int compared = 0, agree = 0;
        CHECK(ts_session_eval(s, ids, np, &lg) == TS_OK);
        for (int i = 0; i < ng; i++) {
            if (margin[i] < MARGIN_FREE) break;
            int32_t t = argmax(lg, nv);
            compared++;
            if (t != ref[i]) break;
            agree++;
            if (i + 1 < ng) CHECK(ts_session_eval(s, &t, 1, &lg) == TS_OK);
        }
        CHECKF(agree == compared, "prompt %d: greedy diverged at step %d (before any near-tie)", pi, agree);
        /* 2. teacher-forced */
        int32_t *all = malloc(sizeof *all * (size_t)(np + ng));
        memcpy(all, ids, sizeof *ids * (size_t)np);
        memcpy(all + np, ref, sizeof *ref * (size_t)ng);
        ts_session_reset(sa);
        CHECK(ts_session_eval(sa, all, np + ng - 1, &lg) == TS_OK);
        int fc = 0, fa = 0;
        for (int i = 0; i < ng; i++) {
            if (margin[i] < MARGIN_FORCED) continue;
            fc++;
            fa += argmax(lg + (size_t)(np - 1 + i) * nv, nv) == ref[i];
        }
        CHECKF(fa == fc, "prompt %d: teacher-forced argmax disagrees at %d of %d confident steps", pi, fc - fa, fc);
        printf("%s prompt %d: free-running greedy agrees for %d/%d steps (stopped at the first margin < %.1f); "
               "teacher-forced top-1 %d/%d where margin >= %.1f\n",
               gguf, pi, agree, ng, MARGIN_FREE, fa, fc, MARGIN_FORCED);
        free(all);
        free(ids);
        free(ref);
        free(margin);
        pi++;
    }
    ts_session_free(s);
    ts_session_free(sa);
    ts_model_free(m);
    cJSON_Delete(root);
}

int main(void) {
    char p[1024];
    snprintf(p, sizeof p, "%s/ref/greedy-smollm2.json", TS_FIXTURES);
    check_fixture(p);
    return tu_finish();
}
