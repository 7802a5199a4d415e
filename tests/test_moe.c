/* MoE: generated output is byte-identical across expert residency modes
 * (resident; streamed at the minimum slot count; streamed at a large slot
 * count; streamed with O_DIRECT; mapped), for greedy and seeded sampling, on
 * every tiny MoE fixture. Logits are compared bit for bit too. The
 * correctness of the MoE math itself is checked against transformers in
 * test_forward. */
#include <stdlib.h>
#include <string.h>

#include "forward/engine.h"
#include "sample/sample.h"
#include "test_util.h"

#define N_GEN 40

typedef struct mode {
    const char *name;
    expert_residency res;
    int32_t slots; /* 0: min = top-k; -1: large */
    bool nocache;
} mode;

/* Generates N_GEN tokens after a fixed prompt; writes ids and a checksum of
 * every logit bit pattern. */
static bool generate(const char *path, const mode *md, float temperature, int32_t *ids, uint64_t *logit_hash, char *start_line) {
    ts_model_opts mo = ts_model_opts_default();
    mo.expert_residency = (ts_expert_residency)md->res;
    mo.expert_direct_io = md->nocache;
    ts_model *m;
    gguf_file *f;
    if (gguf_open(path, &f) != TS_OK) return false;
    /* slots relative to this model's top-k and expert count */
    int32_t k = 0, ne = 0;
    {
        char key[128];
        gguf_str a;
        gguf_get_str(f, "general.architecture", &a);
        snprintf(key, sizeof key, "%.*s.expert_used_count", (int)a.len, a.ptr);
        uint32_t v;
        if (gguf_get_u32(f, key, &v) == GGUF_GET_OK) k = (int32_t)v;
        snprintf(key, sizeof key, "%.*s.expert_count", (int)a.len, a.ptr);
        if (gguf_get_u32(f, key, &v) == GGUF_GET_OK) ne = (int32_t)v;
    }
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
    if (ts_session_new(m, &so, &s) != TS_OK) { ts_model_free(m); return false; }
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
    sampler_free(smp);
    ts_session_free(s);
    ts_model_free(m);
    return ok;
}

int main(void) {
    const char *models[] = {"tiny-qwen3moe-f32.gguf", "tiny-qwen2moe-f32.gguf", "tiny-mixtral-f32.gguf", "tiny-olmoe-f32.gguf"};
    const mode modes[] = {
        {"resident", EXPERT_RESIDENCY_RESIDENT, 0, false},
        {"streamed-min", EXPERT_RESIDENCY_STREAMED, 0, false},
        {"streamed-large", EXPERT_RESIDENCY_STREAMED, -1, false},
        {"streamed-min-nocache", EXPERT_RESIDENCY_STREAMED, 0, true},
        {"mapped", EXPERT_RESIDENCY_MAPPED, 0, false},
    };
    const int n_modes = (int)(sizeof modes / sizeof modes[0]);
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/ref/%s", TS_FIXTURES, models[mi]);
        for (int sampled = 0; sampled < 2; sampled++) {
            int32_t ref[N_GEN], got[N_GEN];
            uint64_t href = 0, hgot = 0;
            char line[256] = "";
            CHECK(generate(path, &modes[0], sampled ? 1.0f : 0.0f, ref, &href, line));
            int distinct = 0;
            for (int i = 0; i < N_GEN; i++) {
                int seen = 0;
                for (int j = 0; j < i; j++) seen |= ref[j] == ref[i];
                distinct += !seen;
            }
            for (int k = 1; k < n_modes; k++) {
                line[0] = 0;
                bool ok = generate(path, &modes[k], sampled ? 1.0f : 0.0f, got, &hgot, line);
                CHECKF(ok, "%s %s", models[mi], modes[k].name);
                CHECKF(ok && memcmp(ref, got, sizeof ref) == 0, "%s %s %s: generated ids differ from resident", models[mi],
                       modes[k].name, sampled ? "sampled" : "greedy");
                CHECKF(ok && href == hgot, "%s %s %s: logits differ bitwise from resident", models[mi], modes[k].name,
                       sampled ? "sampled" : "greedy");
                if (!sampled) printf("%-24s %-22s %s\n", models[mi], modes[k].name, line);
            }
            printf("%-24s %s: %d tokens (%d distinct) identical across %d residency modes\n", models[mi], sampled ? "seeded sampling" : "greedy",
                   N_GEN, distinct, n_modes);
        }
    }
    return tu_finish();
}
