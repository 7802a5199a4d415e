/* Attention micro-benchmark: decode (1 and 4 tokens) at 512, 4096 and 32768
 * positions of context, and a 512-token prefill, for the three model shapes'
 * heads. GB/s counts the K/V bytes the visible positions occupy (read once)
 * plus q and out; a full cache per kv head and layer is one "layer" here. The
 * cache is sized to the context, so the decode grid covers all of it (as a
 * captured graph would) while only pos + 1 positions are visible.
 *
 *   bench_attention [model-substring]           (BENCH_QUICK=1: fewer reps) */
#include "bench_util.h"

static void bench_case(const Model &M, int n_ctx, int n_tok, int pos0) {
    const int hd = M.head_dim;
    const size_t nq = (size_t)n_tok * M.n_head * hd, ncache = (size_t)M.n_head_kv * n_ctx * hd;
    uint16_t *h = (uint16_t *)malloc(2 * ncache);
    for (size_t i = 0; i < ncache; i++) h[i] = ts_f32_to_f16(bench_normal());
    float *hq = (float *)malloc(4 * nq);
    for (size_t i = 0; i < nq; i++) hq[i] = bench_normal();
    Rotation kr(h, 2 * ncache), vr(h, 2 * ncache);
    free(h);
    float *dq = (float *)bench_dalloc(4 * nq), *dout = (float *)bench_dalloc(4 * nq);
    BCU(cudaMemcpy(dq, hq, 4 * nq, cudaMemcpyHostToDevice));
    free(hq);
    int32_t *pos = (int32_t *)malloc(4 * n_tok), *dpos = (int32_t *)bench_dalloc(4 * n_tok);
    for (int t = 0; t < n_tok; t++) pos[t] = pos0 + t;
    BCU(cudaMemcpy(dpos, pos, 4 * n_tok, cudaMemcpyHostToDevice));
    free(pos);
    ts_cuda_attn a = {dq, NULL, NULL, dpos, dout, NULL, n_tok, M.n_head, M.n_head_kv, hd, n_ctx, 0, 1.0f / sqrtf((float)hd)};
    a.k = (const uint16_t *)kr.get(0), a.v = (const uint16_t *)vr.get(0);
    const size_t sb = ts_cuda_attn_scratch_bytes(&a);
    void *scratch = sb ? bench_dalloc(sb) : NULL;
    const double us = bench_time_us([&](size_t call) {
        a.k = (const uint16_t *)kr.get(call), a.v = (const uint16_t *)vr.get(call);
        BOK(ts_cuda_attention(NULL, &a, scratch, sb));
    });
    const double visible = (double)(pos0 + n_tok);
    const double bytes = 2.0 * 2.0 * M.n_head_kv * visible * hd + 8.0 * nq;
    char shape[64], var[48], extra[64];
    snprintf(shape, sizeof shape, "%s.ctx%d", M.name, n_ctx);
    snprintf(var, sizeof var, "%s t=%d pos=%d", n_tok > TS_CUDA_MAX_DECODE_TOK ? "prefill" : "decode", n_tok, pos0);
    const double flop = 4.0 * M.n_head * hd * (n_tok > TS_CUDA_MAX_DECODE_TOK ? (double)n_tok * (pos0 + n_tok / 2.0) : (double)n_tok * visible);
    snprintf(extra, sizeof extra, "%.2f TFLOP/s", flop / (us * 1e6));
    bench_result("attention", shape, var, bytes, us, extra);
    cudaFree(dq), cudaFree(dout), cudaFree(dpos), cudaFree(scratch);
}

int main(int argc, char **argv) {
    bench_require_gpu("bench_attention");
    bench_seed(0xa77e);
    const char *only = argc > 1 ? argv[1] : NULL;
    for (const Model &M : bench_models) {
        if (only && !strstr(M.name, only)) continue;
        for (int ctx : {512, 4096, 32768}) {
            bench_case(M, ctx, 1, ctx - 1);
            bench_case(M, ctx, 1, ctx / 8);
            bench_case(M, ctx, 4, ctx - 4);
        }
        bench_case(M, 4096, 512, 0);
        bench_case(M, 4096, 512, 2048);
    }
    return 0;
}
