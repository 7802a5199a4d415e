/* Routed-expert micro-benchmark (moe.cu) on the Qwen3-30B-A3B decode shapes:
 * 128 experts, k = 8; gate/up = two sets of (768, 2048) experts sharing x,
 * down = one set of (2048, 768) experts with x per expert.
 *
 *   bench_moe [type...]     (default Q4_K Q6_K; BENCH_QUICK=1: fewer reps)
 *
 * moe_route (1 token and a 512-token prefill batch), moe_matvec_q8 (the q8
 * activations quantized once beforehand: the matvec alone), and for
 * comparison the dense int8 matvec over a matrix of the same bytes (k x n_out
 * rows: what the selected experts would cost as one tuned dense launch, x
 * shared even for down), the
 * F32 path (moe_matvec), moe_combine. GB/s counts the selected experts' bytes
 * + x + y once. Each call reads another of 64 precomputed id vectors (8
 * distinct experts each), so with every projection's experts (> 100 MB) the
 * selected bytes come from HBM, not from the L2.
 *
 * moe_matvec_q8_items (prefill): a 512-token chunk x top-8 = 4096 rows over
 * the 128 experts, 32 rows each, in items of 8 rows (512 items); GB/s counts
 * each item's expert bytes (an expert is read once per item: 4x its size)
 * + x + y, TOPS the 2 n_in n_out multiply-adds per row and set. */
#include "bench_util.h"

#define N_EXPERT 128
#define TOP_K 8
#define N_IDSETS 64

/* One projection's experts in one buffer (each 256-byte aligned) and its table. */
struct Proj {
    uint8_t *base;
    void **dtable;
    ts_cuda_moe_mat m;
    size_t stride; /* bytes between experts */
};

static Proj proj_make(uint32_t type, int64_t n_in, int64_t n_out) {
    Proj p;
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    const size_t bytes = (size_t)rb * (size_t)n_out;
    p.stride = (bytes + 255) & ~(size_t)255;
    uint8_t *h = (uint8_t *)malloc(bytes);
    bench_weights(type, h, n_out, n_in);
    p.base = (uint8_t *)bench_dalloc(p.stride * N_EXPERT);
    void *tab[N_EXPERT];
    for (int e = 0; e < N_EXPERT; e++) {
        /* the same random rows in every expert: the kernel's speed does not depend on the values */
        BCU(cudaMemcpy(p.base + p.stride * e, h, bytes, cudaMemcpyHostToDevice));
        tab[e] = p.base + p.stride * e;
    }
    free(h);
    p.dtable = (void **)bench_dalloc(sizeof tab);
    BCU(cudaMemcpy(p.dtable, tab, sizeof tab, cudaMemcpyHostToDevice));
    p.m = ts_cuda_moe_mat{(const void *const *)p.dtable, N_EXPERT, type, n_in, n_out, rb};
    return p;
}

static void proj_free(Proj &p) {
    cudaFree(p.base);
    cudaFree(p.dtable);
}

/* N_IDSETS vectors of TOP_K distinct ids in device memory. */
static int32_t *make_idsets(void) {
    std::vector<int32_t> ids(N_IDSETS * TOP_K);
    for (int s = 0; s < N_IDSETS; s++)
        for (int i = 0; i < TOP_K; i++) {
            int32_t e;
            bool dup;
            do {
                e = (int32_t)(bench_uniform() * N_EXPERT);
                dup = false;
                for (int j = 0; j < i; j++) dup |= ids[s * TOP_K + j] == e;
            } while (dup);
            ids[s * TOP_K + i] = e;
        }
    int32_t *d = (int32_t *)bench_dalloc(4 * ids.size());
    BCU(cudaMemcpy(d, ids.data(), 4 * ids.size(), cudaMemcpyHostToDevice));
    return d;
}

static void bench_route(int n_tok) {
    const size_t n = (size_t)n_tok * N_EXPERT;
    float *h = (float *)malloc(4 * n);
    for (size_t i = 0; i < n; i++) h[i] = bench_normal();
    float *dr = (float *)bench_dalloc(4 * n), *dw = (float *)bench_dalloc(4 * n_tok * TOP_K);
    int32_t *did = (int32_t *)bench_dalloc(4 * n_tok * TOP_K);
    BCU(cudaMemcpy(dr, h, 4 * n, cudaMemcpyHostToDevice));
    free(h);
    const double us =
        bench_time_us([&](size_t) { BOK(ts_cuda_moe_route(NULL, dr, n_tok, N_EXPERT, TOP_K, true, did, dw)); });
    char shape[64];
    snprintf(shape, sizeof shape, "E=%d k=%d t=%d", N_EXPERT, TOP_K, n_tok);
    bench_result("moe", shape, "route renorm", 4.0 * n + 8.0 * n_tok * TOP_K, us, NULL);
    cudaFree(dr), cudaFree(dw), cudaFree(did);
}

/* One projection call (n_set sets of n_out x n_in), int8 and F32 paths, and the dense equivalent. */
static void bench_proj(const char *name, uint32_t type, int n_set, int64_t n_in, int64_t n_out, bool per_expert,
                       const int32_t *idsets) {
    Proj p[2];
    memset(p, 0, sizeof p);
    for (int s = 0; s < n_set; s++) p[s] = proj_make(type, n_in, n_out);
    const ts_cuda_moe_mat m[2] = {p[0].m, p[n_set - 1].m};
    float *dy[2];
    for (int s = 0; s < n_set; s++) dy[s] = (float *)bench_dalloc(4 * TOP_K * n_out);
    const int xr = per_expert ? TOP_K : 1;
    float *hx = (float *)malloc(4 * n_in * xr);
    for (int64_t i = 0; i < n_in * xr; i++) hx[i] = bench_normal();
    float *dx = (float *)bench_dalloc(4 * n_in * xr);
    BCU(cudaMemcpy(dx, hx, 4 * n_in * xr, cudaMemcpyHostToDevice));
    free(hx);
    const uint32_t partner = ts_cuda_q8_partner(type);
    void *q8 = bench_dalloc(ts_cuda_q8_bytes(partner, n_in, xr));
    BOK(ts_cuda_quantize_q8(NULL, partner, dx, n_in, xr, NULL, 1e-6f, q8));
    unsigned *derr = (unsigned *)bench_dalloc(sizeof(unsigned));
    BCU(cudaMemset(derr, 0, sizeof(unsigned)));

    const double wbytes = (double)n_set * TOP_K * (double)n_out * (double)p[0].m.row_bytes;
    const double bytes = wbytes + 4.0 * n_in * xr + 4.0 * n_set * TOP_K * n_out;
    char shape[64], var[48], extra[64];
    snprintf(shape, sizeof shape, "30b-a3b.%s", name);
    snprintf(extra, sizeof extra, "%.1f MB selected", wbytes / 1e6);

    double us = bench_time_us([&](size_t call) {
        BOK(ts_cuda_moe_matvec_q8(NULL, n_set, m, dy, idsets + (call % N_IDSETS) * TOP_K, TOP_K, partner, q8,
                                  per_expert, derr));
    });
    snprintf(var, sizeof var, "%s int8", ts_type_name(type));
    bench_result("moe", shape, var, bytes, us, extra);

    us = bench_time_us([&](size_t call) {
        BOK(ts_cuda_moe_matvec(NULL, n_set, m, dy, idsets + (call % N_IDSETS) * TOP_K, TOP_K, dx, per_expert, derr));
    });
    snprintf(var, sizeof var, "%s f32", ts_type_name(type));
    bench_result("moe", shape, var, bytes, us, extra);

    /* the dense int8 matvec over the same bytes: k x n_out rows of one expert
     * buffer per set (consecutive experts), one token (for down: x shared,
     * unlike the experts' own rows) */
    {
        us = bench_time_us([&](size_t call) {
            ts_cuda_mat d[2];
            const int e0 = (int)((call * TOP_K) % (N_EXPERT - TOP_K));
            for (int s = 0; s < n_set; s++)
                d[s] = ts_cuda_mat{p[s].base + p[s].stride * e0, type, n_in, TOP_K * n_out, p[s].m.row_bytes, NULL};
            BOK(ts_cuda_matvec_q8(NULL, n_set, d, dy, partner, q8, 1, false));
        });
        snprintf(var, sizeof var, "%s dense-equiv", ts_type_name(type));
        bench_result("moe", shape, var, bytes, us, extra);
    }
    unsigned err = 0;
    BCU(cudaMemcpy(&err, derr, sizeof err, cudaMemcpyDeviceToHost));
    if (err) fprintf(stderr, "bench_moe: error word %#x\n", err);
    for (int s = 0; s < n_set; s++) proj_free(p[s]), cudaFree(dy[s]);
    cudaFree(dx), cudaFree(q8), cudaFree(derr);
}

/* The grouped prefill call: n_rows = N_EXPERT * rows_per_expert rows, items of `per_item` rows. */
static void bench_items(const char *name, uint32_t type, int n_set, int64_t n_in, int64_t n_out, int rows_per_expert,
                        int per_item) {
    Proj p[2];
    memset(p, 0, sizeof p);
    for (int s = 0; s < n_set; s++) p[s] = proj_make(type, n_in, n_out);
    const ts_cuda_moe_mat m[2] = {p[0].m, p[n_set - 1].m};
    const int n_rows = N_EXPERT * rows_per_expert;
    float *dy[2];
    for (int s = 0; s < n_set; s++) dy[s] = (float *)bench_dalloc(4 * (size_t)n_rows * n_out);
    float *hx = (float *)malloc(4 * (size_t)n_in * n_rows);
    for (int64_t i = 0; i < n_in * n_rows; i++) hx[i] = bench_normal();
    float *dx = (float *)bench_dalloc(4 * (size_t)n_in * n_rows);
    BCU(cudaMemcpy(dx, hx, 4 * (size_t)n_in * n_rows, cudaMemcpyHostToDevice));
    free(hx);
    const uint32_t partner = ts_cuda_q8_partner(type);
    void *q8 = bench_dalloc(ts_cuda_q8_bytes(partner, n_in, n_rows));
    BOK(ts_cuda_quantize_q8(NULL, partner, dx, n_in, n_rows, NULL, 1e-6f, q8));
    std::vector<int32_t> it;
    for (int e = 0; e < N_EXPERT; e++)
        for (int r = 0; r < rows_per_expert; r += per_item) {
            it.push_back(e);
            it.push_back(e * rows_per_expert + r);
            it.push_back(rows_per_expert - r < per_item ? rows_per_expert - r : per_item);
        }
    const int n_item = (int)(it.size() / 3);
    int32_t *dit = (int32_t *)bench_dalloc(4 * it.size());
    BCU(cudaMemcpy(dit, it.data(), 4 * it.size(), cudaMemcpyHostToDevice));
    unsigned *derr = (unsigned *)bench_dalloc(sizeof(unsigned));
    BCU(cudaMemset(derr, 0, sizeof(unsigned)));

    const double wbytes = (double)n_set * n_item * (double)n_out * (double)p[0].m.row_bytes;
    const double bytes = wbytes + (double)ts_cuda_q8_bytes(partner, n_in, n_rows) + 4.0 * n_set * n_rows * n_out;
    const double ops = 2.0 * n_set * n_rows * (double)n_in * (double)n_out;
    const double us = bench_time_us([&](size_t) {
        BOK(ts_cuda_moe_matvec_q8_items(NULL, n_set, m, dy, dit, n_item, partner, q8, n_rows, derr));
    });
    char shape[64], var[48], extra[96];
    snprintf(shape, sizeof shape, "30b-a3b.pp.%s", name);
    snprintf(var, sizeof var, "%s int8 items%d", ts_type_name(type), per_item);
    snprintf(extra, sizeof extra, "%.1f MB read, %d rows, %d items, %.1f TOPS", wbytes / 1e6, n_rows, n_item,
             ops / (us * 1e6));
    bench_result("moe", shape, var, bytes, us, extra);
    unsigned err = 0;
    BCU(cudaMemcpy(&err, derr, sizeof err, cudaMemcpyDeviceToHost));
    if (err) fprintf(stderr, "bench_moe: error word %#x\n", err);
    for (int s = 0; s < n_set; s++) proj_free(p[s]), cudaFree(dy[s]);
    cudaFree(dx), cudaFree(q8), cudaFree(dit), cudaFree(derr);
}

static void bench_combine(int n_tok, int64_t n) {
    const size_t ny = (size_t)n_tok * TOP_K * n;
    float *h = (float *)malloc(4 * ny);
    for (size_t i = 0; i < ny; i++) h[i] = bench_normal();
    float *dy = (float *)bench_dalloc(4 * ny), *dw = (float *)bench_dalloc(4 * n_tok * TOP_K),
          *dout = (float *)bench_dalloc(4 * n_tok * n);
    BCU(cudaMemcpy(dy, h, 4 * ny, cudaMemcpyHostToDevice));
    BCU(cudaMemcpy(dw, h, 4 * n_tok * TOP_K, cudaMemcpyHostToDevice));
    free(h);
    const double us =
        bench_time_us([&](size_t) { BOK(ts_cuda_moe_combine(NULL, dout, dy, dw, NULL, n_tok, TOP_K, n)); });
    char shape[64];
    snprintf(shape, sizeof shape, "k=%d n=%lld t=%d", TOP_K, (long long)n, n_tok);
    bench_result("moe", shape, "combine", 4.0 * (ny + n_tok * TOP_K + (size_t)n_tok * n), us, NULL);
    cudaFree(dy), cudaFree(dw), cudaFree(dout);
}

int main(int argc, char **argv) {
    bench_require_gpu("bench_moe");
    bench_seed(0x5eed);
    bench_copy_gbs();
    std::vector<uint32_t> types = {TS_TYPE_Q4_K, TS_TYPE_Q6_K};
    if (argc > 1) {
        types.clear();
        for (int i = 1; i < argc; i++)
            for (uint32_t t = 0; t < TS_TYPE_COUNT; t++)
                if (ts_type_get(t) && strcmp(ts_type_name(t), argv[i]) == 0 && ts_cuda_q8_partner(t) != TS_TYPE_COUNT)
                    types.push_back(t);
    }
    bench_route(1);
    bench_route(512);
    int32_t *idsets = make_idsets();
    for (uint32_t t : types) {
        bench_proj("gate_up", t, 2, 2048, 768, false, idsets);
        bench_proj("down", t, 1, 768, 2048, true, idsets);
    }
    /* prefill: 512 tokens x top-8 = 4096 rows, 32 per expert, items of 8 */
    for (uint32_t t : types) {
        bench_items("gate_up", t, 2, 2048, 768, 32, 8);
        bench_items("down", t, 1, 768, 2048, 32, 8);
    }
    cudaFree(idsets);
    bench_combine(1, 2048);
    bench_combine(512, 2048);
    return 0;
}
