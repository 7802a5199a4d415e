/* Decode matvec micro-benchmark: every matrix of a layer (fused Q/K/V, O,
 * fused gate/up, down) and the LM head of SmolLM2-135M, Qwen2.5-1.5B and a 7B
 * Qwen2, in Q4_K / Q6_K / Q4_0 / Q8_0 / F16, through the F32-activation path
 * (matvec) and the int8 path (quantize_q8 + matvec_q8, timed together), for
 * 1 token and small batches. GB/s counts weight bytes + x + y once.
 *
 *   bench_matvec [model-substring[,substring...]] [type...]     (BENCH_QUICK=1: fewer reps)
 *
 * BENCH_MATVEC_PATHS=int8 (or f32) times one path only; BENCH_MATVEC_BATCH=0
 * skips the 4- and 8-token runs (bench/cuda/sweep_matvec.sh uses both).
 * BENCH_MATVEC_KW1=0|1 forces the int8 path's split of a row group's chunks
 * (ts_cuda_matvec_q8_force_kw1; the rows then say "kw1=0|1").
 * BENCH_MATVEC_ROWS=2|4 forces the one-token launches' rows per group
 * (ts_cuda_matvec_q8_force_rows); an int8 row says the rows its launch
 * gets ("r2", "r4"). BENCH_MATVEC_LOADER=0|1
 * forces the weight loader (ts_cuda_matvec_q8_force_loader: 0 registers, 1
 * the cp.async ring; the rows then say "ld=0|1"). BENCH_MATVEC_MATS=down,qkv
 * (comma-separated substrings) times those matrices only. */
#include "bench_util.h"

/* set once in main: the forced hooks' values as given (NULL: not forced) and the SM count */
static const char *g_kw1, *g_loader;
static int g_sms;

struct Mat {
    const char *name;
    int64_t n_in;
    int n_w;
    int64_t n_out[3];
};

/* BENCH_MATVEC_PATHS unset, or naming this path */
static bool path_on(const char *path) {
    const char *p = getenv("BENCH_MATVEC_PATHS");
    return !p || !*p || strstr(p, path) != NULL;
}

/* name contains one of the comma-separated substrings of list ("" matches all) */
static bool name_listed(const char *name, const char *list) {
    if (!*list) return true;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        for (const char *q = name; n && strlen(q) >= n; q++)
            if (strncmp(q, p, n) == 0) return true;
        p += n + (e ? 1 : 0);
    }
    return false;
}

static void bench_shape(const Model &M, const Mat &mat, uint32_t type, int n_tok) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)mat.n_in);
    if (!rb || mat.n_in % 32) return;
    int64_t rows = 0;
    size_t off[3], wbytes = 0, total = 0; /* each weight 256-byte aligned in one buffer */
    for (int i = 0; i < mat.n_w; i++) {
        rows += mat.n_out[i];
        off[i] = total;
        wbytes += (size_t)rb * (size_t)mat.n_out[i];
        total += ((size_t)rb * (size_t)mat.n_out[i] + 255) & ~(size_t)255;
    }
    uint8_t *hw = (uint8_t *)calloc(1, total);
    for (int i = 0; i < mat.n_w; i++) bench_weights(type, hw + off[i], mat.n_out[i], mat.n_in);
    Rotation rot(hw, total);
    free(hw);
    const size_t nx = (size_t)n_tok * mat.n_in;
    float *hx = (float *)malloc(4 * nx);
    for (size_t i = 0; i < nx; i++) hx[i] = bench_normal();
    float *dx = (float *)bench_dalloc(4 * nx);
    BCU(cudaMemcpy(dx, hx, 4 * nx, cudaMemcpyHostToDevice));
    free(hx);
    float *dy[3];
    for (int i = 0; i < mat.n_w; i++) dy[i] = (float *)bench_dalloc(4 * (size_t)n_tok * mat.n_out[i]);
    auto mats = [&](size_t call, ts_cuda_mat *m) {
        const uint8_t *base = (const uint8_t *)rot.get(call);
        for (int i = 0; i < mat.n_w; i++) m[i] = ts_cuda_mat{base + off[i], type, mat.n_in, mat.n_out[i], rb, NULL};
    };
    const double bytes = (double)wbytes + 4.0 * nx + 4.0 * n_tok * rows;
    char shape[64], var[48], extra[64];
    snprintf(shape, sizeof shape, "%s.%s", M.name, mat.name);
    snprintf(extra, sizeof extra, "%.1f MB", wbytes / 1e6);
    if (path_on("f32")) {
        const double us = bench_time_us([&](size_t call) {
            ts_cuda_mat m[3];
            mats(call, m);
            BOK(ts_cuda_matvec(NULL, mat.n_w, m, dy, dx, n_tok, NULL, NULL, false));
        });
        snprintf(var, sizeof var, "%s f32 t=%d", ts_type_name(type), n_tok);
        bench_result("matvec", shape, var, bytes, us, extra);
    }

    const uint32_t partner = ts_cuda_q8_partner(type);
    if (partner != TS_TYPE_COUNT && path_on("int8")) {
        const size_t qb = ts_cuda_q8_bytes(partner, mat.n_in, n_tok);
        void *q8 = bench_dalloc(qb);
        const double us8 = bench_time_us([&](size_t call) {
            ts_cuda_mat m[3];
            mats(call, m);
            BOK(ts_cuda_quantize_q8(NULL, partner, dx, mat.n_in, n_tok, NULL, 1e-6f, q8));
            BOK(ts_cuda_matvec_q8(NULL, mat.n_w, m, dy, partner, q8, n_tok, false));
        });
        ts_cuda_mat m[3];
        mats(0, m);
        snprintf(var, sizeof var, "%s int8 t=%d r%d%s%s%s%s", ts_type_name(type), n_tok,
                 ts_cuda_matvec_q8_rows(mat.n_w, m, n_tok, g_sms), g_kw1 ? " kw1=" : "", g_kw1 ? g_kw1 : "",
                 g_loader ? " ld=" : "", g_loader ? g_loader : "");
        bench_result("matvec", shape, var, bytes, us8, extra);
        cudaFree(q8);
    }
    cudaFree(dx);
    for (int i = 0; i < mat.n_w; i++) cudaFree(dy[i]);
}

int main(int argc, char **argv) {
    bench_require_gpu("bench_matvec");
    bench_seed(0x5eed);
    bench_copy_gbs();
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *batch = getenv("BENCH_MATVEC_BATCH");
    const char *kw1 = getenv("BENCH_MATVEC_KW1"), *rows = getenv("BENCH_MATVEC_ROWS"), *loader = getenv("BENCH_MATVEC_LOADER");
    g_kw1 = kw1 && *kw1 ? kw1 : NULL;
    g_loader = loader && *loader ? loader : NULL;
    if (g_kw1) ts_cuda_matvec_q8_force_kw1(atoi(g_kw1) ? 1 : 0);
    if (rows && *rows) ts_cuda_matvec_q8_force_rows(atoi(rows));
    if (g_loader) ts_cuda_matvec_q8_force_loader(atoi(g_loader) ? 1 : 0);
    int dev = 0;
    BCU(cudaGetDevice(&dev));
    BCU(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    std::vector<uint32_t> types = {TS_TYPE_Q4_K, TS_TYPE_Q6_K, TS_TYPE_Q4_0, TS_TYPE_Q8_0, TS_TYPE_F16};
    if (argc > 2) {
        types.clear();
        for (int i = 2; i < argc; i++)
            for (uint32_t t = 0; t < TS_TYPE_COUNT; t++)
                if (ts_type_get(t) && strcmp(ts_type_name(t), argv[i]) == 0) types.push_back(t);
    }
    for (const Model &M : bench_models) {
        if (only && !name_listed(M.name, only)) continue;
        const int64_t E = M.n_embd, F = M.n_ff, Q = (int64_t)M.n_head * M.head_dim, KV = (int64_t)M.n_head_kv * M.head_dim;
        const Mat mats[] = {
            {"qkv", E, 3, {Q, KV, KV}},
            {"o", Q, 1, {E, 0, 0}},
            {"gate_up", E, 2, {F, F, 0}},
            {"down", F, 1, {E, 0, 0}},
            {"lm_head", E, 1, {M.n_vocab, 0, 0}},
        };
        const char *only_mats = getenv("BENCH_MATVEC_MATS");
        for (uint32_t t : types)
            for (const Mat &m : mats) {
                if (only_mats && !name_listed(m.name, only_mats)) continue;
                bench_shape(M, m, t, 1);
                if (!strcmp(m.name, "gate_up") && !(batch && !strcmp(batch, "0"))) {
                    bench_shape(M, m, t, 4);
                    bench_shape(M, m, t, 8);
                }
            }
    }
    return 0;
}
