/* Prefill GEMM (gemm.cu): the dequantizer, the F32 -> F16/BF16 conversion
 * and the cuBLAS product, every weight type, on random data.
 *
 * F32 weights: multiplied in F32, against the unrounded reference.
 * dequant: F32 output bit-identical to ts_dequant_row_ref, F16/BF16 output
 * equal to ts_f32_to_f16 / ts_f32_to_bf16 of it (threshold 0).
 * gemm: two references. (a) the double dot of the F16/BF16-rounded weights
 * and x (what the tensor cores multiply): only float accumulation differs,
 * threshold 1e-4 (tensor-core accumulation rounding is not specified as
 * round-to-nearest; ~1e-6 expected). A transposed or misplaced tile is O(1).
 * (b) the exact double dot: the rounding of the inputs dominates, ~2^-11
 * relative per element for F16 and 2^-8 for BF16, averaging down over the
 * dot: thresholds 2e-3 (F16) and 1.5e-2 (BF16), the ranges METHOD.md gives.
 * Small scratch forces several row tiles; bias and accumulate are checked.
 * Weights already in the compute type (F16 with F16, BF16 with BF16) are
 * multiplied in place, with no dequantized copy, by x's 16-bit value and then
 * its rounding residual: reference (a) rounds x the same way (hi + lo), and
 * the exact one then differs by the accumulation alone. */
#include <cublas_v2.h>

#include "cuda_test_util.h"

static cublasHandle_t g_cublas;

static void test_dequant(uint32_t type, int64_t n_in, int64_t rows) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    uint8_t *w = (uint8_t *)malloc(rb * rows);
    tcu_fill_weights(type, w, rows, n_in);
    void *dw = tcu_dalloc(rb * rows);
    tcu_up(dw, w, rb * rows);
    ts_cuda_mat m = {dw, type, n_in, rows, rb, NULL};
    const int64_t r0 = rows > 3 ? 2 : 0, nr = rows - r0;
    const size_t n = (size_t)(nr * n_in);
    float *ref = (float *)malloc(4 * n);
    for (int64_t r = 0; r < nr; r++) ts_dequant_row_ref((ts_type)type, w + (r0 + r) * rb, ref + r * n_in, n_in);
    void *dout = tcu_dalloc(4 * n);
    uint8_t *got = (uint8_t *)malloc(4 * n);
    static const uint32_t outs[3] = {TS_TYPE_F32, TS_TYPE_F16, TS_TYPE_BF16};
    for (int k = 0; k < 3; k++) {
        const size_t es = outs[k] == TS_TYPE_F32 ? 4 : 2;
        tcu_poison(dout, 4 * n);
        char what[96];
        snprintf(what, sizeof what, "dequant %s -> %s n_in=%lld rows=%lld+%lld", ts_type_name(type), ts_type_name(outs[k]),
                 (long long)n_in, (long long)r0, (long long)nr);
        TCU_OK(ts_cuda_dequant(NULL, &m, r0, nr, dout, outs[k]), what);
        tcu_sync(what);
        tcu_down(got, dout, es * n);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            if (es == 4) {
                bad += memcmp(got + 4 * i, &ref[i], 4) != 0;
            } else {
                uint16_t h, want = outs[k] == TS_TYPE_F16 ? ts_f32_to_f16(ref[i]) : ts_f32_to_bf16(ref[i]);
                memcpy(&h, got + 2 * i, 2);
                bad += h != want;
            }
        }
        printf("%-60s %zu values differ %s\n", what, bad, bad ? "FAIL" : "ok");
        CHECKF(bad == 0, "%s: %zu values differ", what, bad);
    }
    free(w), free(ref), free(got);
    cudaFree(dw), cudaFree(dout);
}

static void test_gemm(uint32_t type, int64_t n_in, int64_t n_out, int n_tok, uint32_t ct, bool bias, bool acc,
                      size_t scratch_rows) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    uint8_t *w = (uint8_t *)malloc(rb * n_out);
    tcu_fill_weights(type, w, n_out, n_in);
    const size_t nx = (size_t)n_tok * n_in, ny = (size_t)n_tok * n_out;
    float *x = (float *)malloc(4 * nx), *b = (float *)malloc(4 * n_out), *y0 = (float *)malloc(4 * ny);
    tcu_fill_normal(x, nx, 1.0f), tcu_fill_normal(b, n_out, 1.0f), tcu_fill_normal(y0, ny, 1.0f);
    void *dw = tcu_dalloc(rb * n_out);
    float *dx = (float *)tcu_dalloc(4 * nx), *db = (float *)tcu_dalloc(4 * n_out), *dy = (float *)tcu_dalloc(4 * ny);
    tcu_up(dw, w, rb * n_out), tcu_up(dx, x, 4 * nx), tcu_up(db, b, 4 * n_out);
    if (acc) tcu_up(dy, y0, 4 * ny);
    else tcu_poison(dy, 4 * ny);
    ts_cuda_mat m = {dw, type, n_in, n_out, rb, bias ? db : NULL};
    const size_t sb = ts_cuda_gemm_scratch_min(&m, n_tok) + (scratch_rows > 128 ? (scratch_rows - 128) * n_in * 2 : 0);
    void *scratch = tcu_dalloc(sb);
    char what[128];
    snprintf(what, sizeof what, "gemm %s/%s %lldx%lld t=%d%s%s tile=%zu", ts_type_name(type), ts_type_name(ct),
             (long long)n_in, (long long)n_out, n_tok, bias ? " bias" : "", acc ? " acc" : "", scratch_rows);
    TCU_OK(ts_cuda_gemm(NULL, g_cublas, &m, dy, dx, n_tok, ct, acc, scratch, sb), what);
    tcu_sync(what);
    float *got = (float *)malloc(4 * ny), *ref_r = (float *)malloc(4 * ny), *ref_e = (float *)malloc(4 * ny);
    tcu_down(got, dy, 4 * ny);
    float *wf = (float *)malloc(4 * n_in), *wr = (float *)malloc(4 * n_in), *xr = (float *)malloc(4 * nx);
    float (*rnd)(uint16_t) = ct == TS_TYPE_F16 ? ts_f16_to_f32 : ts_bf16_to_f32;
    uint16_t (*cvt)(float) = ct == TS_TYPE_F16 ? ts_f32_to_f16 : ts_f32_to_bf16;
    /* F32 weights are multiplied in F32: nothing rounded to 16 bits; weights
     * in the compute type multiply x as hi + lo, each rounded to 16 bits */
    const bool f32 = type == TS_TYPE_F32, split = type == ct;
    for (size_t i = 0; i < nx; i++) {
        const float hi = rnd(cvt(x[i]));
        xr[i] = f32 ? x[i] : split ? hi + rnd(cvt(x[i] - hi)) : hi;
    }
    for (int64_t r = 0; r < n_out; r++) {
        ts_dequant_row_ref((ts_type)type, w + r * rb, wf, n_in);
        for (int64_t i = 0; i < n_in; i++) wr[i] = f32 ? wf[i] : rnd(cvt(wf[i]));
        for (int t = 0; t < n_tok; t++) {
            float vr = ts_vec_dot_ref(TS_TYPE_F32, n_in, wr, xr + (size_t)t * n_in);
            float ve = ts_vec_dot_ref(TS_TYPE_F32, n_in, wf, x + (size_t)t * n_in);
            if (acc) vr += y0[(size_t)t * n_out + r], ve += y0[(size_t)t * n_out + r];
            if (bias) vr += b[r], ve += b[r];
            ref_r[(size_t)t * n_out + r] = vr, ref_e[(size_t)t * n_out + r] = ve;
        }
    }
    char w2[160];
    snprintf(w2, sizeof w2, "%s vs rounded inputs", what);
    tcu_report(w2, tcu_rel_err(got, ref_r, ny), 1e-4, acc ? 0 : tcu_unwritten(got, ny, 4));
    snprintf(w2, sizeof w2, "%s vs exact", what);
    tcu_report(w2, tcu_rel_err(got, ref_e, ny), f32 || split ? 1e-4 : ct == TS_TYPE_F16 ? 2e-3 : 1.5e-2, 0);
    free(w), free(x), free(b), free(y0), free(got), free(ref_r), free(ref_e), free(wf), free(wr), free(xr);
    cudaFree(dw), cudaFree(dx), cudaFree(db), cudaFree(dy), cudaFree(scratch);
}

int main(void) {
    tcu_seed_init("test_cuda_gemm");
    tcu_require_gpu("test_cuda_gemm");
    if (cublasCreate(&g_cublas) != CUBLAS_STATUS_SUCCESS) {
        CHECKF(0, "cublasCreate failed");
        return tu_finish();
    }
    if (tcu_small()) {
        test_dequant(TS_TYPE_Q8_0, 320, 5);
        test_dequant(TS_TYPE_Q5_K, 512, 4);
        test_gemm(TS_TYPE_Q4_K, 256, 130, 9, TS_TYPE_F16, true, false, 128);
        test_gemm(TS_TYPE_F32, 96, 70, 9, TS_TYPE_F16, true, true, 128);
        test_gemm(TS_TYPE_F16, 96, 70, 9, TS_TYPE_F16, true, true, 128); /* in place: no dequantized copy */
        test_gemm(TS_TYPE_Q4_K, 512, 700, 9, TS_TYPE_F16, false, true, 300); /* room 300 -> 256: tiles 256, 256, 188 */
        cublasDestroy(g_cublas);
        return tu_finish();
    }
    for (size_t i = 0; i < TCU_N_TYPES; i++) {
        const uint32_t t = tcu_all_types[i];
        const bool k = ts_type_get(t)->block_elems == 256;
        test_dequant(t, k ? 2816 : 576, 37);
        test_dequant(t, 4096, 3);
        test_gemm(t, k ? 2816 : 864, 301, 9, TS_TYPE_F16, false, false, 1 << 20);
        test_gemm(t, 1536, 300, 64, TS_TYPE_BF16, true, false, 128); /* 3 row tiles */
        test_gemm(t, 1536, 129, 17, TS_TYPE_F16, true, true, 128);   /* tiles of 128 + 1 */
        test_gemm(t, 512, 700, 9, TS_TYPE_F16, false, true, 300);    /* room 300 -> 256: tiles 256, 256, 188 */
    }
    test_gemm(TS_TYPE_Q4_K, 3584, 1024, 96, TS_TYPE_F16, false, false, 1 << 20);
    /* x conversion alone, odd length (scalar tail) */
    const int64_t n = 1000003;
    float *x = (float *)malloc(4 * n);
    tcu_fill_normal(x, n, 10.0f);
    float *dx = (float *)tcu_dalloc(4 * n);
    uint16_t *dh = (uint16_t *)tcu_dalloc(2 * n), *h = (uint16_t *)malloc(2 * n);
    tcu_up(dx, x, 4 * n);
    for (int k = 0; k < 2; k++) {
        const uint32_t ct = k ? TS_TYPE_BF16 : TS_TYPE_F16;
        tcu_poison(dh, 2 * n);
        TCU_OK(ts_cuda_convert_f32(NULL, dx, n, dh, ct), "convert");
        tcu_sync("convert");
        tcu_down(h, dh, 2 * n);
        size_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += h[i] != (k ? ts_f32_to_bf16(x[i]) : ts_f32_to_f16(x[i]));
        printf("%-60s %zu values differ %s\n", k ? "convert F32->BF16 n=1000003" : "convert F32->F16 n=1000003", bad,
               bad ? "FAIL" : "ok");
        CHECKF(bad == 0, "convert %s: %zu differ", ts_type_name(ct), bad);
    }
    free(x), free(h);
    cudaFree(dx), cudaFree(dh);
    cublasDestroy(g_cublas);
    return tu_finish();
}
