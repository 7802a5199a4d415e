/* Routed-expert kernels (moe.cu) against the CPU backend's ops and the scalar
 * references, on random data.
 *
 * moe_route: ids equal the CPU's moe_route op (ts_moe_route_row) exactly and
 * the weights bit for bit: the kernel makes the same double operations in the
 * same order (the normalizer summed sequentially in the CPU's order). The one
 * possible difference is the libm: the device exp() and glibc's are within 1
 * ulp in double, which changes a float weight only when it straddles a float
 * rounding boundary (~2^-29 per weight); the emulation uses glibc's. Logits
 * normal, or on a coarse grid (many ties, -0 against +0 among them: the
 * lower id must win); n_expert 8, 60, 64, 128, 1024; k 1..8 and 16; renorm
 * on and off.
 *
 * moe_matvec (F32 activations) and moe_matvec_q8 (int8): each rank's row is
 * the dense matvec of its expert, so the references and threshold are
 * test_cuda_matvec's: ts_dequant_row_ref rows (or the float rows) dotted with
 * x in double, and ts_vec_dot_ref on x quantized by ts_quantize_row_ref to
 * the partner format (uploaded in the device layout, so the int8 kernel is
 * tested alone); ||y - ref|| / ||ref|| <= 1e-5 (only the float accumulation
 * order differs: ~1e-7). Each case makes three calls into the same outputs
 * (poisoned before each): ids with repeats, other ids, then one rank's id
 * outside the table (-1 or n_expert): that rank's rows must be exactly 0, the
 * others right, and TS_CUDA_ERR_EXPERT set (clear after the good calls). One
 * and two sets (same type: one launch; different types and row counts: two),
 * x shared and per expert. Experts are allocated one by one at their exact
 * size, so an over-read shows under the emulation's ASan and compute-sanitizer.
 *
 * moe_gemm_items (the tensor-core grouped prefill): see run_items.
 * moe_matvec_q8_items (grouped prefill rows): the same references and
 * threshold per row; 37 and 100 rows tiled by items of 1..8 rows of random
 * experts (repeated across items, uploaded shuffled), one and two sets (and
 * mixed types), then an item with an id outside the table (zero rows, error
 * bit) and a malformed item (skipped: its rows untouched, error bit).
 *
 * moe_combine and moe_combine_add (with and without rows), gather_rows: bit-identical to the CPU
 * ops (memcmp). gated_add: the CPU's operations in its order; bit-identical
 * in the emulation (the host expf); on a GPU the device expf (within 2 ulp)
 * can move the gate by that, so the threshold there is 1e-6. */
#include "cpu_ref.h"
#include "cuda_test_util.h"

#define MAX_EXPERT 16

/* ------------------------------------------------------------ routing */

static void check_route(int n_expert, int k, bool renorm, int n_tok, bool ties) {
    const size_t nr = (size_t)n_tok * n_expert, nk = (size_t)n_tok * k;
    float *r = (float *)malloc(4 * nr), *w_want = (float *)malloc(4 * nk), *w_got = (float *)malloc(4 * nk);
    int32_t *id_want = (int32_t *)malloc(4 * nk), *id_got = (int32_t *)malloc(4 * nk);
    for (size_t i = 0; i < nr; i++) {
        r[i] = ties ? 0.5f * (float)(int)(tcu_u64() % 5) - 1.0f : 2.0f * tcu_normal();
        if (r[i] == 0.0f && tcu_u64() % 2) r[i] = -0.0f; /* -0 ties +0 (ts_topk: equal, the lower id first) */
    }
    if (ties && n_tok > 1) /* a whole row of one value: the k lowest ids, equal weights */
        for (int e = 0; e < n_expert; e++) r[(size_t)n_expert + e] = -0.25f;
    cref_moe_route(r, n_tok, n_expert, k, renorm, id_want, w_want);
    float *dr = (float *)tcu_dalloc(4 * nr), *dw = (float *)tcu_dalloc(4 * nk);
    int32_t *did = (int32_t *)tcu_dalloc(4 * nk);
    tcu_up(dr, r, 4 * nr);
    tcu_poison(dw, 4 * nk);
    tcu_poison(did, 4 * nk);
    char what[128];
    snprintf(what, sizeof what, "moe_route E=%d k=%d t=%d%s%s", n_expert, k, n_tok, renorm ? " renorm" : "",
             ties ? " ties" : "");
    TCU_OK(ts_cuda_moe_route(NULL, dr, n_tok, n_expert, k, renorm, did, dw), what);
    tcu_sync(what);
    tcu_down(id_got, did, 4 * nk);
    tcu_down(w_got, dw, 4 * nk);
    size_t bad_id = 0, bad_w = 0;
    for (size_t i = 0; i < nk; i++) {
        bad_id += id_got[i] != id_want[i];
        bad_w += memcmp(&w_got[i], &w_want[i], 4) != 0;
    }
    const bool ok = bad_id == 0 && bad_w == 0;
    printf("%-60s %zu ids, %zu weights differ %s\n", what, bad_id, bad_w, ok ? "ok" : "FAIL");
    if (!ok)
        for (size_t i = 0; i < nk && i < 16; i++)
            printf("    [%zu] id %d want %d, w %.9g want %.9g\n", i, id_got[i], id_want[i], w_got[i], w_want[i]);
    CHECKF(ok, "%s: %zu ids, %zu weights differ", what, bad_id, bad_w);
    free(r), free(w_want), free(w_got), free(id_want), free(id_got);
    cudaFree(dr), cudaFree(dw), cudaFree(did);
}

/* ------------------------------------------------------------ expert matvecs */

/* 1 unless v is +0.0 (what a skipped rank's rows must hold). */
static size_t not_plus_zero(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u != 0;
}

struct MoeCase {
    bool int8;
    int n_set;
    uint32_t type[2];
    int64_t n_in;
    int64_t n_out[2];
    int n_expert, k;
    bool per_expert;
};

/* One set's experts: host copies and exact-size device copies, the device table. */
struct Experts {
    uint8_t *host[MAX_EXPERT];
    void *dev[MAX_EXPERT];
    void **dtable;
    ts_cuda_moe_mat m;
};

static void experts_make(Experts &E, uint32_t type, int n_expert, int64_t n_in, int64_t n_out) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    const size_t bytes = (size_t)(rb * (uint64_t)n_out);
    for (int e = 0; e < n_expert; e++) {
        E.host[e] = (uint8_t *)malloc(bytes);
        tcu_fill_weights(type, E.host[e], n_out, n_in);
        E.dev[e] = tcu_dalloc(bytes);
        tcu_up(E.dev[e], E.host[e], bytes);
    }
    E.dtable = (void **)tcu_dalloc(sizeof(void *) * n_expert);
    tcu_up(E.dtable, E.dev, sizeof(void *) * n_expert);
    E.m = ts_cuda_moe_mat{(const void *const *)E.dtable, n_expert, type, n_in, n_out, rb};
}

static void experts_free(Experts &E) {
    for (int e = 0; e < E.m.n_expert; e++) free(E.host[e]), cudaFree(E.dev[e]);
    cudaFree(E.dtable);
}

/* The reference row i of set s: expert id's rows dotted with x row xrow. */
static void ref_rank(const MoeCase &c, const Experts &E, int32_t id, const float *x, const uint8_t *xq, float *out) {
    const uint32_t type = E.m.type;
    const int64_t n_in = c.n_in;
    if (id < 0 || id >= E.m.n_expert) {
        for (int64_t r = 0; r < E.m.n_out; r++) out[r] = 0.0f;
        return;
    }
    const bool flt = type == TS_TYPE_F32 || type == TS_TYPE_F16 || type == TS_TYPE_BF16;
    float *wf = (float *)malloc(sizeof(float) * n_in);
    for (int64_t r = 0; r < E.m.n_out; r++) {
        const uint8_t *row = E.host[id] + (uint64_t)r * E.m.row_bytes;
        double v;
        if (c.int8) {
            v = ts_vec_dot_ref((ts_type)type, n_in, row, xq);
        } else if (flt) {
            v = ts_vec_dot_ref((ts_type)type, n_in, row, x);
        } else {
            ts_dequant_row_ref((ts_type)type, row, wf, n_in);
            v = ts_vec_dot_ref(TS_TYPE_F32, n_in, wf, x);
        }
        out[r] = (float)v;
    }
    free(wf);
}

static void run_moe(const MoeCase &c) {
    const int64_t n_in = c.n_in;
    const int k = c.k, xr = c.per_expert ? k : 1;
    Experts E[2];
    memset(E, 0, sizeof E);
    for (int s = 0; s < c.n_set; s++) experts_make(E[s], c.type[s], c.n_expert, n_in, c.n_out[s]);
    ts_cuda_moe_mat m[2] = {E[0].m, c.n_set > 1 ? E[1].m : E[0].m};
    float *dy[2] = {NULL, NULL};
    for (int s = 0; s < c.n_set; s++) dy[s] = (float *)tcu_dalloc(sizeof(float) * k * c.n_out[s]);
    int32_t *dids = (int32_t *)tcu_dalloc(4 * k);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));

    /* activations: F32 rows, and for int8 the CPU's partner rows in the device layout */
    float *x = (float *)malloc(sizeof(float) * n_in * xr);
    tcu_fill_normal(x, (size_t)(n_in * xr), 1.0f);
    float *dx = (float *)tcu_dalloc(sizeof(float) * n_in * xr);
    tcu_up(dx, x, sizeof(float) * n_in * xr);
    const uint32_t partner = c.int8 ? ts_cuda_q8_partner(c.type[0]) : (uint32_t)TS_TYPE_COUNT;
    uint8_t *xq = NULL;
    uint64_t xqb = 0;
    void *dq8 = NULL;
    if (c.int8) {
        xqb = ts_type_row_bytes(partner, (uint64_t)n_in);
        xq = (uint8_t *)malloc(xqb * xr);
        for (int t = 0; t < xr; t++) ts_quantize_row_ref((ts_type)partner, x + t * n_in, xq + t * xqb, n_in);
        const size_t qb = ts_cuda_q8_bytes(partner, n_in, xr);
        uint8_t *hq = (uint8_t *)calloc(1, qb);
        tcu_q8_from_cpu(partner, xq, n_in, xr, hq);
        dq8 = tcu_dalloc(qb);
        tcu_up(dq8, hq, qb);
        free(hq);
    }

    char base[160];
    int len = snprintf(base, sizeof base, "%s", c.int8 ? "moe_matvec_q8" : "moe_matvec");
    for (int s = 0; s < c.n_set; s++)
        len += snprintf(base + len, sizeof base - len, "%s%s", s ? "+" : " ", ts_type_name(c.type[s]));
    snprintf(base + len, sizeof base - len, " %lldx%lld E=%d k=%d%s", (long long)n_in, (long long)c.n_out[0],
             c.n_expert, k, c.per_expert ? " x/expert" : "");

    int32_t ids[TS_CUDA_MOE_MAX_K];
    for (int call = 0; call < 3; call++) {
        for (int i = 0; i < k; i++) ids[i] = (int32_t)(tcu_u64() % (uint64_t)c.n_expert);
        if (call == 0 && k > 1) ids[k - 1] = ids[0]; /* a repeat within the call */
        int bad_rank = -1;
        if (call == 2) {
            bad_rank = (int)(tcu_u64() % (uint64_t)k);
            ids[bad_rank] = (tcu_u64() & 1) ? -1 : c.n_expert;
        }
        tcu_up(dids, ids, 4 * k);
        TCU(cudaMemset(derr, 0, sizeof(unsigned)));
        for (int s = 0; s < c.n_set; s++) tcu_poison(dy[s], sizeof(float) * k * c.n_out[s]);
        char what[200];
        snprintf(what, sizeof what, "%s call %d%s", base, call, bad_rank >= 0 ? " bad id" : "");
        if (c.int8)
            TCU_OK(ts_cuda_moe_matvec_q8(NULL, c.n_set, m, dy, dids, k, partner, dq8, c.per_expert, derr), what);
        else
            TCU_OK(ts_cuda_moe_matvec(NULL, c.n_set, m, dy, dids, k, dx, c.per_expert, derr), what);
        tcu_sync(what);
        unsigned err = 0;
        tcu_down(&err, derr, sizeof err);
        const unsigned want_err = bad_rank >= 0 ? TS_CUDA_ERR_EXPERT : 0u;
        CHECKF(err == want_err, "%s: error word %#x, want %#x", what, err, want_err);
        for (int s = 0; s < c.n_set; s++) {
            const int64_t no = c.n_out[s];
            const size_t ny = (size_t)(k * no);
            float *got = (float *)malloc(sizeof(float) * ny), *ref = (float *)malloc(sizeof(float) * ny);
            tcu_down(got, dy[s], sizeof(float) * ny);
            for (int i = 0; i < k; i++) {
                const int t = c.per_expert ? i : 0;
                ref_rank(c, E[s], ids[i], x + t * n_in, xq ? xq + t * xqb : NULL, ref + (size_t)i * no);
            }
            size_t nonzero = 0;
            if (bad_rank >= 0)
                for (int64_t r = 0; r < no; r++) nonzero += not_plus_zero(got[(size_t)bad_rank * no + r]);
            char w2[240];
            snprintf(w2, sizeof w2, "%s%s", what, c.n_set > 1 ? (s ? " [1]" : " [0]") : "");
            tcu_report(w2, tcu_rel_err(got, ref, ny), 1e-5, tcu_unwritten(got, ny, 4));
            CHECKF(nonzero == 0, "%s: %zu elements of the bad rank's row are not +0", w2, nonzero);
            free(got), free(ref);
        }
    }
    for (int s = 0; s < c.n_set; s++) experts_free(E[s]), cudaFree(dy[s]);
    free(x), free(xq);
    cudaFree(dx), cudaFree(dq8), cudaFree(dids), cudaFree(derr);
}

static MoeCase one(bool int8, uint32_t type, int64_t n_in, int64_t n_out, int n_expert, int k, bool per_expert) {
    MoeCase c;
    memset(&c, 0, sizeof c);
    c.int8 = int8;
    c.n_set = 1;
    c.type[0] = c.type[1] = type;
    c.n_in = n_in;
    c.n_out[0] = c.n_out[1] = n_out;
    c.n_expert = n_expert;
    c.k = k;
    c.per_expert = per_expert;
    return c;
}
static MoeCase two(MoeCase c, uint32_t type1, int64_t n_out1) {
    c.n_set = 2;
    c.type[1] = type1;
    c.n_out[1] = n_out1;
    return c;
}

/* Grouped int8 expert matvec (prefill): n_rows activation rows tiled by
 * items of 1..8 rows. Experts come in runs of 1..20 rows split into items
 * (so an expert repeats in consecutive items, and again later), the items
 * uploaded in shuffled order. Four calls into poisoned outputs: good items;
 * one item's id outside the table (its rows exactly +0, TS_CUDA_ERR_EXPERT);
 * one item malformed (0 rows: skipped, its rows still poison, the error bit);
 * half the items only (a streamed pass runs the experts it fetched: the
 * other rows stay poison).
 * Every other row against ref_rank (ts_vec_dot_ref on the CPU's partner
 * rows), 1e-5.
 * gemm: the tensor-core path (ts_cuda_moe_gemm_items) instead, items of
 * 1..64 rows, x in F16; reference: ts_dequant_row_ref rounded to F16 times
 * the F16-rounded x, in double, 1e-4 (float accumulation in the mma's
 * order: ~1e-6 expected; a wrong tile, row or unit position is O(1)). A
 * fifth call splits the same expert runs into other items: every row must
 * come out bit for bit as in the first (streamed passes group rows
 * differently from resident ones). */
/* Expert e's weights as ts_dequant_row_ref gives them, rounded to F16 and
 * back (n_out, n_in): made once per test, not per x row. */
static float *ref_gemm_weights(const Experts &E, int32_t e, int64_t n_in) {
    float *wf = (float *)malloc(sizeof(float) * (size_t)(n_in * E.m.n_out));
    for (int64_t r = 0; r < E.m.n_out; r++) {
        float *w = wf + r * n_in;
        ts_dequant_row_ref((ts_type)E.m.type, E.host[e] + (uint64_t)r * E.m.row_bytes, w, n_in);
        for (int64_t i = 0; i < n_in; i++) w[i] = ts_f16_to_f32(ts_f32_to_f16(w[i]));
    }
    return wf;
}

static void ref_gemm_rows(const Experts &E, float *const *wf16, int32_t id, const float *x16r, int64_t n_in, float *out) {
    for (int64_t r = 0; r < E.m.n_out; r++) {
        if (id < 0 || id >= E.m.n_expert) {
            out[r] = 0.0f;
            continue;
        }
        const float *w = wf16[id] + r * n_in;
        double v = 0;
        for (int64_t i = 0; i < n_in; i++) v += (double)w[i] * (double)x16r[i];
        out[r] = (float)v;
    }
}

static void run_items(uint32_t type0, uint32_t type1, int n_set, int64_t n_in, int64_t n_out0, int64_t n_out1,
                      int n_expert, int n_rows, bool gemm = false) {
    const int max_nt = gemm ? TS_CUDA_MOE_GEMM_ROWS : TS_CUDA_MAX_DECODE_TOK;
    MoeCase c = two(one(true, type0, n_in, n_out0, n_expert, 1, true), type1, n_out1);
    c.n_set = n_set;
    Experts E[2];
    memset(E, 0, sizeof E);
    for (int s = 0; s < n_set; s++) experts_make(E[s], c.type[s], n_expert, n_in, c.n_out[s]);
    ts_cuda_moe_mat m[2] = {E[0].m, n_set > 1 ? E[1].m : E[0].m};
    float *dy[2] = {NULL, NULL};
    for (int s = 0; s < n_set; s++) dy[s] = (float *)tcu_dalloc(sizeof(float) * n_rows * c.n_out[s]);
    unsigned *derr = (unsigned *)tcu_dalloc(sizeof(unsigned));

    float *x = (float *)malloc(sizeof(float) * n_in * n_rows);
    tcu_fill_normal(x, (size_t)(n_in * n_rows), 1.0f);
    /* the gemm path takes types without an int8 path too (IQ4_NL, MXFP4): their q8 rows are made but unused */
    const uint32_t partner = ts_cuda_q8_partner(type0) != TS_TYPE_COUNT ? ts_cuda_q8_partner(type0) : (uint32_t)TS_TYPE_Q8_0;
    const uint64_t xqb = ts_type_row_bytes(partner, (uint64_t)n_in);
    uint8_t *xq = (uint8_t *)malloc(xqb * n_rows);
    for (int t = 0; t < n_rows; t++) ts_quantize_row_ref((ts_type)partner, x + t * n_in, xq + t * xqb, n_in);
    const size_t qb = ts_cuda_q8_bytes(partner, n_in, n_rows);
    uint8_t *hq = (uint8_t *)calloc(1, qb);
    tcu_q8_from_cpu(partner, xq, n_in, n_rows, hq);
    void *dq8 = tcu_dalloc(qb);
    tcu_up(dq8, hq, qb);
    free(hq);
    /* the F16 activations of the gemm path, and their values as floats */
    uint16_t *x16 = (uint16_t *)malloc(2 * (size_t)n_in * n_rows);
    float *x16r = (float *)malloc(sizeof(float) * (size_t)n_in * n_rows);
    for (int64_t i = 0; i < n_in * n_rows; i++) x16[i] = ts_f32_to_f16(x[i]), x16r[i] = ts_f16_to_f32(x16[i]);
    void *dx16 = tcu_dalloc(2 * (size_t)n_in * n_rows);
    tcu_up(dx16, x16, 2 * (size_t)n_in * n_rows);
    float *first[2] = {NULL, NULL}; /* gemm: call 0's outputs */
    float *wf16[2][MAX_EXPERT] = {};  /* gemm: the F16-rounded weights per set and expert */
    for (int s = 0; gemm && s < n_set; s++)
        for (int e = 0; e < n_expert; e++) wf16[s][e] = ref_gemm_weights(E[s], e, n_in);

    /* items: runs of one expert (1..20 rows, 1..150 for the gemm) split into 1..max_nt-row items */
    int32_t *it = (int32_t *)malloc(sizeof(int32_t) * 3 * n_rows), *it2 = (int32_t *)malloc(sizeof(int32_t) * 3 * n_rows);
    int32_t *runs = (int32_t *)malloc(sizeof(int32_t) * 3 * n_rows); /* {expert, first row, rows} per run */
    int n_item = 0, n_item2 = 0, n_run = 0;
    for (int r = 0; r < n_rows;) {
        const int32_t e = (int32_t)(tcu_u64() % (uint64_t)n_expert);
        int run = 1 + (int)(tcu_u64() % (gemm ? 150 : 20));
        if (run > n_rows - r) run = n_rows - r;
        runs[3 * n_run] = e, runs[3 * n_run + 1] = r, runs[3 * n_run + 2] = run, n_run++;
        r += run;
    }
    for (int pass = 0; pass < 2; pass++) /* two splits of the same runs */
        for (int q = 0; q < n_run; q++)
            for (int r = runs[3 * q + 1], left = runs[3 * q + 2]; left > 0;) {
                int nt = 1 + (int)(tcu_u64() % (uint64_t)max_nt);
                if (nt > left) nt = left;
                int32_t *d = pass ? it2 + 3 * n_item2++ : it + 3 * n_item++;
                d[0] = runs[3 * q], d[1] = r, d[2] = nt;
                r += nt, left -= nt;
            }
    for (int j = n_item - 1; j > 0; j--) { /* shuffled: the kernel must not assume row order */
        const int i = (int)(tcu_u64() % (uint64_t)(j + 1));
        for (int q = 0; q < 3; q++) {
            const int32_t tmp = it[3 * j + q];
            it[3 * j + q] = it[3 * i + q], it[3 * i + q] = tmp;
        }
    }
    int32_t *dit = (int32_t *)tcu_dalloc(sizeof(int32_t) * 3 * n_item);

    char base[160];
    int len = snprintf(base, sizeof base, gemm ? "moe_gemm_items" : "moe_matvec_q8_items");
    for (int s = 0; s < n_set; s++)
        len += snprintf(base + len, sizeof base - len, "%s%s", s ? "+" : " ", ts_type_name(c.type[s]));
    snprintf(base + len, sizeof base - len, " %lldx%lld E=%d rows=%d items=%d", (long long)n_in,
             (long long)c.n_out[0], n_expert, n_rows, n_item);

    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * n_rows); /* expert of each row, as uploaded */
    int32_t *dit2 = (int32_t *)tcu_dalloc(sizeof(int32_t) * 3 * n_item2);
    tcu_up(dit2, it2, sizeof(int32_t) * 3 * n_item2);
    for (int call = 0; call < (gemm ? 5 : 4); call++) {
        if (call == 4) { /* the same rows in other items: bit for bit call 0's */
            for (int s = 0; s < n_set; s++) tcu_poison(dy[s], sizeof(float) * n_rows * c.n_out[s]);
            TCU_OK(ts_cuda_moe_gemm_items(NULL, n_set, m, dy, dit2, n_item2, dx16, n_rows, derr), base);
            tcu_sync(base);
            for (int s = 0; s < n_set; s++) {
                const size_t ny = (size_t)n_rows * c.n_out[s];
                float *got = (float *)malloc(sizeof(float) * ny);
                tcu_down(got, dy[s], sizeof(float) * ny);
                const bool same = memcmp(got, first[s], sizeof(float) * ny) == 0;
                printf("%-60s %s\n", "  regrouped rows (other items)", same ? "bit-identical" : "DIFFER");
                CHECKF(same, "%s: regrouped into %d items, rows differ from %d items", base, n_item2, n_item);
                free(got);
            }
            continue;
        }
        const int n_use = call == 3 ? (n_item + 1) / 2 : n_item;
        int32_t *cit = (int32_t *)malloc(sizeof(int32_t) * 3 * n_item);
        memcpy(cit, it, sizeof(int32_t) * 3 * n_item);
        const int bad = call == 1 || call == 2 ? (int)(tcu_u64() % (uint64_t)n_item) : -1;
        if (call == 1) cit[3 * bad] = (tcu_u64() & 1) ? -1 : n_expert;
        if (call == 2) cit[3 * bad + 2] = 0; /* malformed: skipped */
        for (int j = 0; j < n_item; j++)
            for (int t = 0; t < it[3 * j + 2]; t++) ids[it[3 * j + 1] + t] = cit[3 * j];
        tcu_up(dit, cit, sizeof(int32_t) * 3 * n_item);
        TCU(cudaMemset(derr, 0, sizeof(unsigned)));
        for (int s = 0; s < n_set; s++) tcu_poison(dy[s], sizeof(float) * n_rows * c.n_out[s]);
        char what[200];
        snprintf(what, sizeof what, "%s call %d%s", base, call,
                 call == 1 ? " bad id" : call == 2 ? " bad item" : "");
        if (call == 3) snprintf(what, sizeof what, "%s call 3 (%d of the items)", base, n_use);
        if (gemm) TCU_OK(ts_cuda_moe_gemm_items(NULL, n_set, m, dy, dit, n_use, dx16, n_rows, derr), what);
        else TCU_OK(ts_cuda_moe_matvec_q8_items(NULL, n_set, m, dy, dit, n_use, partner, dq8, n_rows, derr), what);
        tcu_sync(what);
        unsigned err = 0;
        tcu_down(&err, derr, sizeof err);
        const unsigned want_err = call == 1 || call == 2 ? TS_CUDA_ERR_EXPERT : 0u;
        CHECKF(err == want_err, "%s: error word %#x, want %#x", what, err, want_err);
        const int br0 = bad >= 0 ? it[3 * bad + 1] : 0, brn = bad >= 0 ? it[3 * bad + 2] : 0;
        for (int s = 0; s < n_set; s++) {
            const int64_t no = c.n_out[s];
            const size_t ny = (size_t)n_rows * no;
            float *got = (float *)malloc(sizeof(float) * ny), *ref = (float *)malloc(sizeof(float) * ny);
            tcu_down(got, dy[s], sizeof(float) * ny);
            for (int r = 0; r < n_rows; r++) {
                if (gemm) ref_gemm_rows(E[s], wf16[s], ids[r], x16r + (size_t)r * n_in, n_in, ref + (size_t)r * no);
                else ref_rank(c, E[s], ids[r], NULL, xq + r * xqb, ref + (size_t)r * no);
            }
            if (gemm && call == 0) {
                first[s] = (float *)malloc(sizeof(float) * ny);
                memcpy(first[s], got, sizeof(float) * ny);
            }
            size_t nonzero = 0, poison = 0;
            if (call == 1)
                for (size_t i = (size_t)br0 * no; i < (size_t)(br0 + brn) * no; i++) nonzero += not_plus_zero(got[i]);
            if (call == 2) { /* the skipped rows: still poison; compare the rest */
                poison = tcu_unwritten(got + (size_t)br0 * no, (size_t)brn * no, 4);
                for (size_t i = (size_t)br0 * no; i < (size_t)(br0 + brn) * no; i++) got[i] = ref[i] = 0.0f;
            }
            if (call == 3) { /* the items not run: their rows still poison; compare the rest */
                size_t untouched = 0, rows_out = 0;
                for (int j = n_use; j < n_item; j++) {
                    const size_t o = (size_t)it[3 * j + 1] * no, n = (size_t)it[3 * j + 2] * no;
                    untouched += tcu_unwritten(got + o, n, 4);
                    rows_out += n;
                    for (size_t i = o; i < o + n; i++) got[i] = ref[i] = 0.0f;
                }
                CHECKF(untouched == rows_out, "%s: %zu of the %zu elements of the items not run were written", what,
                       rows_out - untouched, rows_out);
            }
            char w2[240];
            snprintf(w2, sizeof w2, "%s%s", what, n_set > 1 ? (s ? " [1]" : " [0]") : "");
            tcu_report(w2, tcu_rel_err(got, ref, ny), gemm ? 1e-4 : 1e-5, tcu_unwritten(got, ny, 4));
            CHECKF(nonzero == 0, "%s: %zu elements of the bad item's rows are not +0", w2, nonzero);
            if (call == 2)
                CHECKF(poison == (size_t)brn * no, "%s: %zu of the skipped item's %lld elements written", w2,
                       (size_t)brn * no - poison, (long long)(brn * no));
            free(got), free(ref);
        }
        free(cit);
    }
    for (int s = 0; s < n_set; s++) {
        for (int e = 0; e < n_expert; e++) free(wf16[s][e]);
        experts_free(E[s]), cudaFree(dy[s]), free(first[s]);
    }
    free(x), free(xq), free(it), free(it2), free(runs), free(ids), free(x16), free(x16r);
    cudaFree(dq8), cudaFree(dit), cudaFree(dit2), cudaFree(derr), cudaFree(dx16);
}

/* ------------------------------------------------------------ element-wise */

static void check_combine(int n_tok, int k, int64_t n, bool with_rows) {
    const int n_y = with_rows ? n_tok * k + 3 : n_tok * k;
    const size_t ny = (size_t)n_y * n, no = (size_t)n_tok * n;
    float *y = (float *)malloc(4 * ny), *w = (float *)malloc(4 * n_tok * k);
    float *want = (float *)malloc(4 * no), *got = (float *)malloc(4 * no);
    int32_t *rows = (int32_t *)malloc(4 * n_tok * k);
    tcu_fill_normal(y, ny, 2.0f);
    for (int i = 0; i < n_tok * k; i++) w[i] = tcu_uf(0.0f, 1.0f), rows[i] = (int32_t)(tcu_u64() % (uint64_t)n_y);
    cref_moe_combine(want, y, w, with_rows ? rows : NULL, n_tok, k, n);
    float *dy = (float *)tcu_dalloc(4 * ny), *dw = (float *)tcu_dalloc(4 * n_tok * k),
          *dout = (float *)tcu_dalloc(4 * no);
    int32_t *drows = (int32_t *)tcu_dalloc(4 * n_tok * k);
    tcu_up(dy, y, 4 * ny), tcu_up(dw, w, 4 * n_tok * k), tcu_up(drows, rows, 4 * n_tok * k);
    tcu_poison(dout, 4 * no);
    char what[128];
    snprintf(what, sizeof what, "moe_combine t=%d k=%d n=%lld%s", n_tok, k, (long long)n, with_rows ? " rows" : "");
    TCU_OK(ts_cuda_moe_combine(NULL, dout, dy, dw, with_rows ? drows : NULL, n_tok, k, n), what);
    tcu_sync(what);
    tcu_down(got, dout, 4 * no);
    tcu_report(what, memcmp(got, want, 4 * no) ? INFINITY : 0.0, 0.0, tcu_unwritten(got, no, 4));
    /* combine_add: x += the same sums (the CPU's combine, then add) */
    float *x = (float *)malloc(4 * no);
    tcu_fill_normal(x, no, 1.0f);
    for (size_t i = 0; i < no; i++) want[i] = x[i] + want[i];
    tcu_up(dout, x, 4 * no);
    snprintf(what, sizeof what, "moe_combine_add t=%d k=%d n=%lld%s", n_tok, k, (long long)n, with_rows ? " rows" : "");
    TCU_OK(ts_cuda_moe_combine_add(NULL, dout, dy, dw, with_rows ? drows : NULL, n_tok, k, n), what);
    tcu_sync(what);
    tcu_down(got, dout, 4 * no);
    tcu_report(what, memcmp(got, want, 4 * no) ? INFINITY : 0.0, 0.0, 0);
    free(x), free(y), free(w), free(want), free(got), free(rows);
    cudaFree(dy), cudaFree(dw), cudaFree(dout), cudaFree(drows);
}

static void check_gather(int n_x, int n_rows, int64_t n) {
    const size_t nx = (size_t)n_x * n, no = (size_t)n_rows * n;
    float *x = (float *)malloc(4 * nx), *want = (float *)malloc(4 * no), *got = (float *)malloc(4 * no);
    int32_t *idx = (int32_t *)malloc(4 * n_rows);
    tcu_fill_normal(x, nx, 1.0f);
    for (int j = 0; j < n_rows; j++) idx[j] = (int32_t)(tcu_u64() % (uint64_t)n_x);
    if (n_rows > 1) idx[n_rows - 1] = idx[0];
    cref_gather_rows(want, x, idx, n_rows, n);
    float *dx = (float *)tcu_dalloc(4 * nx), *dout = (float *)tcu_dalloc(4 * no);
    int32_t *didx = (int32_t *)tcu_dalloc(4 * n_rows);
    tcu_up(dx, x, 4 * nx), tcu_up(didx, idx, 4 * n_rows);
    tcu_poison(dout, 4 * no);
    char what[128];
    snprintf(what, sizeof what, "gather_rows %d of %d n=%lld", n_rows, n_x, (long long)n);
    TCU_OK(ts_cuda_gather_rows(NULL, dout, dx, didx, n_rows, n), what);
    tcu_sync(what);
    tcu_down(got, dout, 4 * no);
    tcu_report(what, memcmp(got, want, 4 * no) ? INFINITY : 0.0, 0.0, tcu_unwritten(got, no, 4));
    free(x), free(want), free(got), free(idx);
    cudaFree(dx), cudaFree(dout), cudaFree(didx);
}

static void check_gated_add(int n_tok, int64_t n) {
    const size_t nx = (size_t)n_tok * n;
    float *x = (float *)malloc(4 * nx), *y = (float *)malloc(4 * nx), *g = (float *)malloc(4 * n_tok);
    float *want = (float *)malloc(4 * nx), *got = (float *)malloc(4 * nx);
    tcu_fill_normal(x, nx, 2.0f);
    tcu_fill_normal(y, nx, 2.0f);
    tcu_fill_normal(g, (size_t)n_tok, 3.0f);
    memcpy(want, x, 4 * nx);
    cref_gated_add(want, y, g, n_tok, n);
    float *dx = (float *)tcu_dalloc(4 * nx), *dy = (float *)tcu_dalloc(4 * nx), *dg = (float *)tcu_dalloc(4 * n_tok);
    tcu_up(dx, x, 4 * nx), tcu_up(dy, y, 4 * nx), tcu_up(dg, g, 4 * n_tok);
    char what[128];
    snprintf(what, sizeof what, "gated_add t=%d n=%lld", n_tok, (long long)n);
    TCU_OK(ts_cuda_gated_add(NULL, dx, dy, dg, n_tok, n), what);
    tcu_sync(what);
    tcu_down(got, dx, 4 * nx);
#ifdef TS_CUDA_EMU
    tcu_report(what, memcmp(got, want, 4 * nx) ? INFINITY : 0.0, 0.0, 0);
#else
    tcu_report(what, tcu_rel_err(got, want, nx), 1e-6, 0);
#endif
    free(x), free(y), free(g), free(want), free(got);
    cudaFree(dx), cudaFree(dy), cudaFree(dg);
}

/* Calls that must be refused (TS_ERR_ARG), launching nothing. */
static void check_refusals(void) {
    const int64_t n_in = 512, n_out = 16;
    const uint64_t rb = ts_type_row_bytes(TS_TYPE_Q4_K, n_in);
    void *dw = tcu_dalloc(rb * n_out);
    void **dtable = (void **)tcu_dalloc(sizeof(void *) * 4);
    void *tab[4] = {dw, dw, dw, dw};
    tcu_up(dtable, tab, sizeof tab);
    float *dx = (float *)tcu_dalloc(4 * n_in * 16), *dy = (float *)tcu_dalloc(4 * n_out * 16);
    int32_t *dids = (int32_t *)tcu_dalloc(4 * 16);
    void *dq8 = tcu_dalloc(ts_cuda_q8_bytes(TS_TYPE_Q8_K, n_in, 16) + 256);
    float *ys[2] = {dy, dy};
    const ts_cuda_moe_mat m = {(const void *const *)dtable, 4, TS_TYPE_Q4_K, n_in, n_out, rb};
    ts_cuda_moe_mat two[2] = {m, m}, bad = m;
    /* route */
    CHECK(ts_cuda_moe_route(NULL, dx, 1, 0, 1, false, dids, dy) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_route(NULL, dx, 1, 1025, 8, false, dids, dy) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_route(NULL, dx, 1, 64, 0, false, dids, dy) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_route(NULL, dx, 1, 64, TS_CUDA_MOE_MAX_K + 1, false, dids, dy) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_route(NULL, dx, 1, 4, 5, false, dids, dy) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_route(NULL, dx, -1, 64, 8, false, dids, dy) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_route(NULL, NULL, 1, 64, 8, false, dids, dy) == TS_ERR_ARG);
    /* matvec: sets, k, type, row_bytes, n_in, x alignment */
    CHECK(ts_cuda_moe_matvec(NULL, 0, &m, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec(NULL, 3, two, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec(NULL, 1, &m, ys, dids, 0, dx, false, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec(NULL, 1, &m, ys, dids, TS_CUDA_MOE_MAX_K + 1, dx, false, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec(NULL, 1, &m, ys, NULL, 2, dx, false, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec(NULL, 1, &m, ys, dids, 2, dx + 1, false, NULL) == TS_ERR_ARG);
    bad = m, bad.type = TS_TYPE_IQ2_XXS;
    CHECK(ts_cuda_moe_matvec(NULL, 1, &bad, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    bad = m, bad.row_bytes += 1;
    CHECK(ts_cuda_moe_matvec(NULL, 1, &bad, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    bad = m, bad.n_in = 500;
    CHECK(ts_cuda_moe_matvec(NULL, 1, &bad, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    bad = m, bad.n_expert = 0;
    CHECK(ts_cuda_moe_matvec(NULL, 1, &bad, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    bad = m, bad.table = NULL;
    CHECK(ts_cuda_moe_matvec(NULL, 1, &bad, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    two[1].n_in = 256, two[1].row_bytes = ts_type_row_bytes(TS_TYPE_Q4_K, 256);
    CHECK(ts_cuda_moe_matvec(NULL, 2, two, ys, dids, 2, dx, false, NULL) == TS_ERR_ARG);
    /* int8: partner mismatch, no int8 path, q8 alignment, n_in not a partner multiple */
    CHECK(ts_cuda_moe_matvec_q8(NULL, 1, &m, ys, dids, 2, TS_TYPE_Q8_0, dq8, false, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8(NULL, 1, &m, ys, dids, 2, TS_TYPE_Q8_K, (uint8_t *)dq8 + 16, false, NULL) ==
          TS_ERR_ARG);
    bad = m, bad.type = TS_TYPE_IQ4_NL, bad.row_bytes = ts_type_row_bytes(TS_TYPE_IQ4_NL, n_in);
    CHECK(ts_cuda_moe_matvec_q8(NULL, 1, &bad, ys, dids, 2, TS_TYPE_Q8_0, dq8, false, NULL) == TS_ERR_ARG);
    bad = m, bad.type = TS_TYPE_F16, bad.row_bytes = ts_type_row_bytes(TS_TYPE_F16, n_in);
    CHECK(ts_cuda_moe_matvec_q8(NULL, 1, &bad, ys, dids, 2, TS_TYPE_Q8_0, dq8, false, NULL) == TS_ERR_ARG);
    /* grouped: sets, items, fewer rows than items, partner, q8 alignment, type */
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 0, &m, ys, dids, 2, TS_TYPE_Q8_K, dq8, 9, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &m, ys, NULL, 2, TS_TYPE_Q8_K, dq8, 9, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &m, ys, dids, -1, TS_TYPE_Q8_K, dq8, 9, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &m, ys, dids, 2, TS_TYPE_Q8_K, dq8, 1, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &m, ys, dids, 2, TS_TYPE_Q8_0, dq8, 9, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &m, ys, dids, 2, TS_TYPE_Q8_K, (uint8_t *)dq8 + 16, 9, NULL) ==
          TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &bad, ys, dids, 2, TS_TYPE_Q8_0, dq8, 9, NULL) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_matvec_q8_items(NULL, 1, &m, ys, dids, 0, TS_TYPE_Q8_K, dq8, 0, NULL) == TS_OK);
    /* element-wise */
    CHECK(ts_cuda_moe_combine(NULL, dy, dx, dx, NULL, 1, 0, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_combine(NULL, dy, dx, dx, NULL, 1, TS_CUDA_MOE_MAX_K + 1, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_combine(NULL, NULL, dx, dx, NULL, 1, 2, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_moe_combine_add(NULL, dy, dx, dx, NULL, 1, 0, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_gather_rows(NULL, dy, dx, NULL, 1, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_gather_rows(NULL, dy, dx, dids, -1, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_gated_add(NULL, dy, dx, NULL, 1, 16) == TS_ERR_ARG);
    CHECK(ts_cuda_gated_add(NULL, dy, dx, dx, 1, -1) == TS_ERR_ARG);
    /* nothing to do is no error */
    CHECK(ts_cuda_moe_route(NULL, dx, 0, 64, 8, false, dids, dy) == TS_OK);
    CHECK(ts_cuda_moe_combine(NULL, dy, dx, dx, NULL, 0, 2, 16) == TS_OK);
    CHECK(ts_cuda_gather_rows(NULL, dy, dx, dids, 0, 16) == TS_OK);
    CHECK(ts_cuda_gated_add(NULL, dy, dx, dx, 3, 0) == TS_OK);
    CHECK(cudaGetLastError() == cudaSuccess); /* refusals launch nothing */
    cudaFree(dw), cudaFree(dtable), cudaFree(dx), cudaFree(dy), cudaFree(dids), cudaFree(dq8);
    printf("%-60s %s\n", "argument refusals", "checked");
}

static const uint32_t f32_types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q4_0,
                                     TS_TYPE_Q8_0, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};
static const uint32_t int8_types[] = {TS_TYPE_Q4_0, TS_TYPE_Q4_1, TS_TYPE_Q5_0, TS_TYPE_Q5_1, TS_TYPE_Q8_0,
                                      TS_TYPE_Q2_K, TS_TYPE_Q3_K, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};

int main(void) {
    tcu_seed_init("test_cuda_moe");
    tcu_require_gpu("test_cuda_moe");
    const bool small = tcu_small();

    /* routing */
    const int experts[] = {8, 60, 64, 128};
    for (int ei = 0; ei < 4; ei++)
        for (int k = 1; k <= 8; k += small ? 3 : 1)
            for (int renorm = 0; renorm < 2; renorm++)
                for (int ties = 0; ties < 2; ties++) check_route(experts[ei], k, renorm, small ? 5 : 67, ties);
    check_route(1024, TS_CUDA_MOE_MAX_K, true, small ? 3 : 33, false);
    check_route(1024, TS_CUDA_MOE_MAX_K, false, small ? 3 : 33, true);
    check_route(16, 16, false, 2, true); /* k = n_expert: every expert */

    /* expert matvecs: one set with x shared, two sets with x per expert */
    const int64_t nq = small ? 512 : 2816; /* K: 2 / 11 super-blocks (two full chunks and a partial one) */
    for (uint32_t t : f32_types) {
        const bool kq = ts_type_get(t)->block_elems == 256;
        run_moe(one(false, t, nq, small ? 37 : 301, small ? 6 : 16, small ? 3 : 8, false));
        run_moe(two(one(false, t, kq || small ? 256 : 576, small ? 21 : 131, 5, small ? 2 : 8, true), t,
                    small ? 21 : 131));
    }
    for (uint32_t t : int8_types) {
        const bool kq = ts_type_get(t)->block_elems == 256;
        run_moe(one(true, t, nq, small ? 37 : 301, small ? 6 : 16, small ? 3 : 8, false));
        if (!small || t == TS_TYPE_Q4_0 || t == TS_TYPE_Q6_K)
            run_moe(two(one(true, t, kq ? 768 : 576, small ? 19 : 131, 5, small ? 2 : 8, true), t, small ? 19 : 131));
    }
    /* mixed types (two launches), different row counts, odd rows */
    run_moe(two(one(true, TS_TYPE_Q4_K, 512, 33, 4, 2, false), TS_TYPE_Q6_K, 17));
    run_moe(two(one(false, TS_TYPE_Q8_0, 1088, 9, 4, 3, true), TS_TYPE_F16, 15));
    /* several groups per warp (runs of gpt > 1 and loads in flight across groups): more row groups
     * than the grid's warps (132 SMs x 24 in the emulation) */
    run_moe(two(one(true, TS_TYPE_Q4_K, 256, 400, 9, 8, false), TS_TYPE_Q4_K, 400));
    if (!small) {
        /* the 30B-A3B shapes: gate/up and down, k = 8 of 128 */
        run_moe(two(one(true, TS_TYPE_Q4_K, 2048, 768, MAX_EXPERT, 8, false), TS_TYPE_Q4_K, 768));
        run_moe(one(true, TS_TYPE_Q6_K, 768, 2048, MAX_EXPERT, 8, true));
        run_moe(one(true, TS_TYPE_Q4_K, 768, 2048, MAX_EXPERT, 8, true));
        run_moe(two(one(false, TS_TYPE_Q4_K, 2048, 768, MAX_EXPERT, 8, false), TS_TYPE_Q4_K, 768));
        run_moe(one(false, TS_TYPE_Q6_K, 768, 2048, MAX_EXPERT, 8, true));
        for (size_t ti = 0; ti < TCU_N_TYPES; ti++) /* the F32 path takes every type */
            run_moe(one(false, tcu_all_types[ti], 1024, 67, 4, 3, ti & 1));
        run_moe(one(true, TS_TYPE_Q8_0, 2048, 1536, 8, TS_CUDA_MOE_MAX_K, true));
    }

    /* grouped (prefill) int8 matvec: 37 and 100 rows, one and two sets */
    {
        const uint32_t gt[] = {TS_TYPE_Q4_0, TS_TYPE_Q8_0, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};
        for (uint32_t t : gt) {
            const bool kq = ts_type_get(t)->block_elems == 256;
            run_items(t, t, 1, kq ? 512 : 576, small ? 19 : 131, 0, small ? 5 : 16, 37);
            run_items(t, t, 2, kq ? 256 : 320, small ? 13 : 67, small ? 13 : 67, small ? 6 : 16, small ? 37 : 100);
        }
        if (!small)
            for (uint32_t t : int8_types) run_items(t, t, 2, 768, 45, 45, 9, 100);
        /* mixed types (two launches) and row counts; several groups per warp (gpt > 1) */
        run_items(TS_TYPE_Q4_K, TS_TYPE_Q6_K, 2, 256, 33, 17, 4, small ? 37 : 100);
        run_items(TS_TYPE_Q4_K, TS_TYPE_Q4_K, 2, 256, small ? 90 : 400, small ? 90 : 400, 5, 100);
        if (!small) /* the 30B-A3B shapes, scaled down in rows */
            run_items(TS_TYPE_Q4_K, TS_TYPE_Q4_K, 2, 2048, 768, 768, MAX_EXPERT, 100);
    }
    /* grouped prefill on the tensor cores: items of up to 64 rows */
    {
        const uint32_t gt[] = {TS_TYPE_Q4_0, TS_TYPE_Q8_0, TS_TYPE_Q4_K, TS_TYPE_Q6_K};
        for (uint32_t t : gt)
            run_items(t, t, 2, 256, small ? 70 : 131, small ? 70 : 131, small ? 3 : 16, small ? 90 : 300, true);
        run_items(TS_TYPE_Q4_K, TS_TYPE_Q6_K, 2, 512, 33, 97, 4, small ? 70 : 200, true); /* two launches, partial tiles */
        run_items(TS_TYPE_MXFP4, TS_TYPE_MXFP4, 1, 128, 20, 0, 2, 30, true); /* no int8 path; 17-byte blocks */
        if (!small) {
            for (size_t ti = 0; ti < TCU_N_TYPES; ti++)
                if (ts_cuda_moe_gemm_type(tcu_all_types[ti])) run_items(tcu_all_types[ti], tcu_all_types[ti], 1, 768, 100, 0, 8, 150, true);
            run_items(TS_TYPE_Q4_K, TS_TYPE_Q4_K, 2, 2048, 768, 768, MAX_EXPERT, 600, true); /* the 30B-A3B shapes */
            run_items(TS_TYPE_Q6_K, TS_TYPE_Q6_K, 1, 768, 2048, 0, MAX_EXPERT, 600, true);
        }
    }

    /* element-wise */
    check_combine(1, 8, small ? 300 : 2048, false);
    check_combine(3, 8, small ? 257 : 2048, true);
    check_combine(small ? 5 : 67, 2, small ? 33 : 1000, true);
    check_combine(2, 1, 64, false);
    check_combine(2, TS_CUDA_MOE_MAX_K, 100, true); /* every rank slot of the kernel's unrolled loads */
    check_gather(9, 7, small ? 130 : 2048);
    check_gather(5, 1, 1);
    check_gated_add(1, small ? 300 : 2048);
    check_gated_add(small ? 4 : 37, small ? 129 : 2049);
    check_refusals();
    return tu_finish();
}
