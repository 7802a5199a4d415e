/* Prefill GEMM micro-benchmark: y (512 tokens) = x W^T for the layer
 * matrices of the three model shapes, through ts_cuda_gemm (dequantize to
 * F16 or BF16 + cublasGemmEx), with its two parts timed alone: the
 * dequantizer (GB/s: weight bytes read + F16 bytes written) and cuBLAS on an
 * already dequantized matrix (TFLOP/s). This is what decides between this
 * version and an int8 MMQ kernel.
 *
 *   bench_gemm [model-substring] [n_tok]       (BENCH_QUICK=1: fewer reps) */
#include <cublas_v2.h>

#include "bench_util.h"

static cublasHandle_t g_h;

static void bench_one(const Model &M, const char *name, int64_t n_in, int64_t n_out, uint32_t type, int n_tok,
                      uint32_t ct) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    if (!rb || n_in % 32) return;
    const size_t wbytes = (size_t)rb * (size_t)n_out;
    uint8_t *hw = (uint8_t *)malloc(wbytes);
    bench_weights(type, hw, n_out, n_in);
    void *dw = bench_dalloc(wbytes);
    BCU(cudaMemcpy(dw, hw, wbytes, cudaMemcpyHostToDevice));
    free(hw);
    const size_t nx = (size_t)n_tok * n_in;
    float *hx = (float *)malloc(4 * nx);
    for (size_t i = 0; i < nx; i++) hx[i] = bench_normal();
    float *dx = (float *)bench_dalloc(4 * nx), *dy = (float *)bench_dalloc(4 * (size_t)n_tok * n_out);
    BCU(cudaMemcpy(dx, hx, 4 * nx, cudaMemcpyHostToDevice));
    free(hx);
    ts_cuda_mat m = {dw, type, n_in, n_out, rb, NULL};
    const size_t sb = ts_cuda_gemm_scratch_min(&m, n_tok) + (size_t)n_out * n_in * 2;
    void *scratch = bench_dalloc(sb);
    const double flop = 2.0 * n_in * n_out * n_tok;
    char shape[64], var[48], extra[64];
    snprintf(shape, sizeof shape, "%s.%s", M.name, name);

    const double us = bench_time_us([&](size_t) { BOK(ts_cuda_gemm(NULL, g_h, &m, dy, dx, n_tok, ct, false, scratch, sb)); });
    snprintf(var, sizeof var, "%s/%s t=%d", ts_type_name(type), ts_type_name(ct), n_tok);
    snprintf(extra, sizeof extra, "%.1f TFLOP/s", flop / (us * 1e6));
    bench_result("gemm", shape, var, (double)wbytes + 4.0 * nx + 4.0 * n_tok * n_out, us, extra);

    /* the same call with a session's scratch: the rows it holds make the
     * tiles, as in a prefill (the line above is one tile, the ideal) */
    const size_t se = ts_cuda_gemm_scratch_min(&m, n_tok) + TS_CUDA_GEMM_TILE_BYTES;
    if (se < sb) {
        const double use = bench_time_us([&](size_t) { BOK(ts_cuda_gemm(NULL, g_h, &m, dy, dx, n_tok, ct, false, scratch, se)); });
        snprintf(var, sizeof var, "%s/%s t=%d engine scratch", ts_type_name(type), ts_type_name(ct), n_tok);
        snprintf(extra, sizeof extra, "%.1f TFLOP/s", flop / (use * 1e6));
        bench_result("gemm", shape, var, (double)wbytes + 4.0 * nx + 4.0 * n_tok * n_out, use, extra);
    }

    void *w16 = (uint8_t *)scratch + ts_cuda_gemm_scratch_min(&m, n_tok);
    const double usd = bench_time_us([&](size_t) { BOK(ts_cuda_dequant(NULL, &m, 0, n_out, w16, ct)); });
    snprintf(var, sizeof var, "%s->%s dequant", ts_type_name(type), ts_type_name(ct));
    bench_result("gemm", shape, var, (double)wbytes + 2.0 * n_out * n_in, usd, NULL);

    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t dt = ct == TS_TYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    BOK(ts_cuda_convert_f32(NULL, dx, (int64_t)nx, scratch, ct));
    const double usg = bench_time_us([&](size_t) {
        if (cublasGemmEx(g_h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_out, n_tok, (int)n_in, &one, w16, dt, (int)n_in, scratch, dt,
                         (int)n_in, &zero, dy, CUDA_R_32F, (int)n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) !=
            CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cublasGemmEx failed\n");
            exit(1);
        }
    });
    snprintf(var, sizeof var, "%s cublas-only t=%d", ts_type_name(ct), n_tok);
    snprintf(extra, sizeof extra, "%.1f TFLOP/s", flop / (usg * 1e6));
    bench_result("gemm", shape, var, 2.0 * n_out * n_in + 2.0 * nx + 4.0 * n_tok * n_out, usg, extra);
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(scratch);
}

int main(int argc, char **argv) {
    bench_require_gpu("bench_gemm");
    bench_seed(0x6e33);
    if (cublasCreate(&g_h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    const char *only = argc > 1 ? argv[1] : NULL;
    const int n_tok = argc > 2 ? atoi(argv[2]) : 512;
    const uint32_t types[] = {TS_TYPE_Q4_K, TS_TYPE_Q6_K, TS_TYPE_Q4_0, TS_TYPE_Q8_0, TS_TYPE_F16};
    for (const Model &M : bench_models) {
        if (only && !strstr(M.name, only)) continue;
        const int64_t E = M.n_embd, F = M.n_ff, Q = (int64_t)M.n_head * M.head_dim;
        for (uint32_t t : types) {
            bench_one(M, "q", E, Q, t, n_tok, TS_TYPE_F16);
            bench_one(M, "gate", E, F, t, n_tok, TS_TYPE_F16);
            bench_one(M, "down", F, E, t, n_tok, TS_TYPE_F16);
        }
        bench_one(M, "gate", E, F, TS_TYPE_Q4_K, n_tok, TS_TYPE_BF16);
    }
    cublasDestroy(g_h);
    return 0;
}
