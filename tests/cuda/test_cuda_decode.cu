/* The CUDA block decoders (src/compute/cuda/cuda_quant.cuh) compiled for the
 * host and checked against the CPU references, so their indexing is verified
 * on any machine, GPU or not (this test needs no device):
 *
 * - float path: every element of every block decoded through load()/pair()
 *   at posA/posB must equal ts_dequant_row_ref bit for bit, and every element
 *   must be produced exactly once;
 * - int8 path: the sum over a row's units of idot() (x quantized by
 *   ts_quantize_row_ref into the partner format, converted to the device
 *   layout) must equal ts_vec_dot_ref within float rounding:
 *   |got - ref| <= 1e-5 * sum|w_i x_i| + 1e-30 - the per-unit float products
 *   and their accumulation are the only difference (the integer sums are
 *   exact), about 1e-7 relative per unit;
 * - the decoders' codebook lookups equal the CPU tables. */
#include "compute/cuda/cuda_quant.cuh"
#include "cuda_test_util.h"

template <int T> static void check_float(int64_t n_in, int rows) {
    typedef Dec<T> D;
    const uint64_t rb = ts_type_row_bytes(T, (uint64_t)n_in);
    uint8_t *w = (uint8_t *)malloc(rb * rows + 16);
    tcu_fill_weights(T, w, rows, n_in);
    float *ref = (float *)malloc(sizeof(float) * n_in), *got = (float *)malloc(sizeof(float) * n_in);
    int *seen = (int *)malloc(sizeof(int) * n_in);
    int64_t bad = 0, cover = 0;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = w + (uint64_t)r * rb;
        ts_dequant_row_ref((ts_type)T, row, ref, n_in);
        memset(seen, 0, sizeof(int) * n_in);
        for (int64_t b = 0; b < n_in / D::QK; b++) {
            const uint8_t *blk = row + b * D::BB;
            for (int u = 0; u < D::NU; u++) {
                typename D::U s;
                D::load(blk, u, s);
                for (int p = 0; p < 4; p++) {
                    float v[8];
                    D::pair(s, u, p, v);
                    for (int i = 0; i < 4; i++) {
                        const int64_t ea = b * D::QK + D::posA(u, p) + i, eb = b * D::QK + D::posB(u, p) + i;
                        got[ea] = v[i], got[eb] = v[4 + i];
                        seen[ea]++, seen[eb]++;
                    }
                }
            }
        }
        for (int64_t i = 0; i < n_in; i++) {
            cover += seen[i] != 1;
            bad += memcmp(&got[i], &ref[i], 4) != 0 && !(isnan(got[i]) && isnan(ref[i]));
        }
    }
    char what[96];
    snprintf(what, sizeof what, "decode float %-6s n_in=%lld rows=%d", ts_type_name(T), (long long)n_in, rows);
    printf("%-60s %lld differing, %lld not covered once %s\n", what, (long long)bad, (long long)cover,
           bad || cover ? "FAIL" : "ok");
    CHECKF(bad == 0 && cover == 0, "%s: %lld values differ from ts_dequant_row_ref, %lld elements not produced once",
           what, (long long)bad, (long long)cover);
    free(w), free(ref), free(got), free(seen);
}

template <int T> static void check_int8(int64_t n_in, int rows) {
    typedef Dec<T> D;
    const uint32_t partner = D::PARTNER;
    const uint64_t rb = ts_type_row_bytes(T, (uint64_t)n_in), xb = ts_type_row_bytes(partner, (uint64_t)n_in);
    uint8_t *w = (uint8_t *)malloc(rb * rows + 16);
    tcu_fill_weights(T, w, rows, n_in);
    float *x = (float *)malloc(sizeof(float) * n_in), *wf = (float *)malloc(sizeof(float) * n_in);
    uint8_t *xq = (uint8_t *)malloc(xb);
    const Q8Layout L = q8_layout(partner, n_in, 1);
    uint8_t *q8 = (uint8_t *)calloc(1, L.total + 16);
    int fails = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        tcu_fill_normal(x, (size_t)n_in, 1.0f);
        if (r % 3 == 2) x[tcu_u64() % n_in] *= 40.0f; /* an outlier sets the block scale */
        ts_quantize_row_ref((ts_type)partner, x, xq, n_in);
        tcu_q8_from_cpu(partner, xq, n_in, 1, q8);
        const uint8_t *row = w + (uint64_t)r * rb;
        const double ref = ts_vec_dot_ref((ts_type)T, n_in, row, xq);
        /* magnitude of the terms, for the tolerance */
        ts_dequant_row_ref((ts_type)T, row, wf, n_in);
        float *xd = (float *)malloc(sizeof(float) * n_in);
        ts_dequant_row_ref((ts_type)partner, xq, xd, n_in);
        double mag = 0;
        for (int64_t i = 0; i < n_in; i++) mag += fabs((double)wf[i] * xd[i]);
        free(xd);
        double got = 0;
        for (int64_t b = 0; b < n_in / D::QK; b++) {
            for (int u = 0; u < D::NU; u++) {
                typename D::UI s;
                D::iload(row + b * D::BB, u, s);
                uint32_t X[8];
                XScale xs;
                XSide<T>::xwords((const int8_t *)q8 + L.qs + b * D::QK, u, X);
                XSide<T>::xscale((const float *)(q8 + L.d), (const int32_t *)(q8 + L.s), b, u, xs);
                got += D::idot(s, u, X, xs);
            }
        }
        const double err = fabs(got - ref), tol = 1e-5 * mag + 1e-30;
        if (err / (mag + 1e-30) > worst) worst = err / (mag + 1e-30);
        if (!(err <= tol)) {
            if (fails++ < 3)
                printf("    %s row %d: got %.9g ref %.9g (|terms| %.3g)\n", ts_type_name(T), r, got, ref, mag);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "decode int8  %-6s n_in=%lld rows=%d", ts_type_name(T), (long long)n_in, rows);
    printf("%-60s worst |err|/sum|wx| %.2e, %d rows off %s\n", what, worst, fails, fails ? "FAIL" : "ok");
    CHECKF(fails == 0, "%s: %d rows differ from ts_vec_dot_ref", what, fails);
    free(w), free(x), free(wf), free(xq), free(q8);
}

int main(void) {
    tcu_seed_init("test_cuda_decode");
    for (uint32_t n = 0; n < 16; n++) {
        CHECK(kv_iq4nl(n) == ts_kvalues_iq4nl[n]);
        CHECK(kv_mxfp4(n) == ts_kvalues_mxfp4[n]);
    }
    for (int e = 0; e < 256; e++) {
        float a = e8m0_half((uint8_t)e), b = ts_e8m0_half_to_f32((uint8_t)e);
        CHECKF(memcmp(&a, &b, 4) == 0, "e8m0 %d", e);
    }
#define F(T)                    \
    check_float<T>(256, 9);     \
    check_float<T>(2816, 5);
    TS_FOR_QTYPES(F)
#undef F
#define I(T)                   \
    check_int8<T>(256, 12);    \
    check_int8<T>(4096, 12);
    TS_FOR_INT8_TYPES(I)
#undef I
    return tu_finish();
}
