/* Micro-benchmark of the small kernels of a decode step and a prefill chunk:
 * RMSNorm, 1/rms, RoPE + KV store, act_mul, add, embedding, argmax and the
 * sampling chain (llama.cpp's defaults; top-p alone) over the vocabulary.
 * Most are latency-bound at decode sizes: the us column matters more than
 * GB/s there.
 *
 *   bench_misc [model-substring]                (BENCH_QUICK=1: fewer reps) */
#include "bench_util.h"

int main(int argc, char **argv) {
    bench_require_gpu("bench_misc");
    bench_seed(0x3157);
    const char *only = argc > 1 ? argv[1] : NULL;
    for (const Model &M : bench_models) {
        if (only && !strstr(M.name, only)) continue;
        const int E = M.n_embd, F = M.n_ff, hd = M.head_dim;
        char shape[64];
        for (int n_tok : {1, 512}) {
            const size_t nx = (size_t)n_tok * F;
            float *h = (float *)malloc(4 * nx);
            for (size_t i = 0; i < nx; i++) h[i] = bench_normal();
            float *a = (float *)bench_dalloc(4 * nx), *b = (float *)bench_dalloc(4 * nx), *w = (float *)bench_dalloc(4 * F);
            float *inv = (float *)bench_dalloc(4 * n_tok), *vv = (float *)bench_dalloc(4 * nx);
            BCU(cudaMemcpy(vv, h, 4 * nx, cudaMemcpyHostToDevice));
            BCU(cudaMemcpy(a, h, 4 * nx, cudaMemcpyHostToDevice));
            BCU(cudaMemcpy(b, h, 4 * nx, cudaMemcpyHostToDevice));
            BCU(cudaMemcpy(w, h, 4 * F, cudaMemcpyHostToDevice));
            snprintf(shape, sizeof shape, "%s.t%d", M.name, n_tok);
            const size_t ne = (size_t)n_tok * E;
            double us = bench_time_us([&](size_t) { BOK(ts_cuda_rmsnorm(NULL, a, w, E, n_tok, 1e-6f, b)); });
            bench_result("rmsnorm", shape, "rows n_embd", 8.0 * ne, us, NULL);
            us = bench_time_us([&](size_t) { BOK(ts_cuda_rms_inv(NULL, a, E, n_tok, 1e-6f, inv)); });
            bench_result("rmsnorm", shape, "rms_inv", 4.0 * ne, us, NULL);
            us = bench_time_us([&](size_t) { BOK(ts_cuda_rmsnorm(NULL, a, w, hd, (int64_t)n_tok * M.n_head, 1e-6f, b)); });
            bench_result("rmsnorm", shape, "per-head", 8.0 * n_tok * M.n_head * hd, us, NULL);
            us = bench_time_us([&](size_t) { BOK(ts_cuda_act_mul(NULL, TS_CUDA_ACT_SILU, a, b, (int64_t)nx, b)); });
            bench_result("ew", shape, "act_mul silu n_ff", 12.0 * nx, us, NULL);
            us = bench_time_us([&](size_t) { BOK(ts_cuda_add(NULL, b, a, (int64_t)ne)); });
            bench_result("ew", shape, "add n_embd", 12.0 * ne, us, NULL);

            /* rope + kv store into a 4096-position cache */
            const int n_ctx = 4096;
            const size_t ncache = (size_t)M.n_head_kv * n_ctx * hd;
            uint16_t *kc = (uint16_t *)bench_dalloc(2 * ncache), *vc = (uint16_t *)bench_dalloc(2 * ncache);
            int32_t *pos = (int32_t *)malloc(4 * n_tok), *dpos = (int32_t *)bench_dalloc(4 * n_tok);
            for (int t = 0; t < n_tok; t++) pos[t] = 100 + t;
            BCU(cudaMemcpy(dpos, pos, 4 * n_tok, cudaMemcpyHostToDevice));
            float *freq = (float *)bench_dalloc(4 * hd / 2);
            BCU(cudaMemcpy(freq, h, 4 * hd / 2, cudaMemcpyHostToDevice));
            ts_cuda_rope_kv r;
            memset(&r, 0, sizeof r);
            r.q = a, r.k = b, r.v = vv, r.pos = dpos, r.freq = freq, r.k_cache = kc, r.v_cache = vc;
            r.n_tok = n_tok, r.n_head = M.n_head, r.n_head_kv = M.n_head_kv, r.head_dim = hd, r.n_rot = hd;
            r.n_ctx = n_ctx, r.mode = TS_CUDA_ROPE_NEOX, r.mscale = 1.0f, r.eps = 1e-6f;
            us = bench_time_us([&](size_t) { BOK(ts_cuda_rope_kv_store(NULL, &r)); });
            bench_result("rope", shape, "rope+kv neox", 8.0 * n_tok * (M.n_head + M.n_head_kv) * hd + 4.0 * n_tok * M.n_head_kv * hd + 4.0 * n_tok * M.n_head_kv * hd, us, NULL);
            free(pos), free(h);
            cudaFree(a), cudaFree(b), cudaFree(w), cudaFree(inv), cudaFree(vv), cudaFree(kc), cudaFree(vc), cudaFree(dpos), cudaFree(freq);
        }
        /* embedding (Q4_K and Q8_0 rows), 1 token */
        for (uint32_t t : {TS_TYPE_Q4_K, TS_TYPE_Q8_0}) {
            const uint64_t rb = ts_type_row_bytes(t, (uint64_t)E);
            if (!rb) continue;
            const int64_t rows = 4096;
            uint8_t *hw = (uint8_t *)malloc(rb * rows);
            bench_weights(t, hw, rows, E);
            void *dw = bench_dalloc(rb * rows);
            BCU(cudaMemcpy(dw, hw, rb * rows, cudaMemcpyHostToDevice));
            free(hw);
            int32_t *ids = (int32_t *)bench_dalloc(4);
            BCU(cudaMemset(ids, 0, 4));
            float *out = (float *)bench_dalloc(4 * E);
            ts_cuda_mat m = {dw, t, E, rows, rb, NULL};
            const double us = bench_time_us([&](size_t) { BOK(ts_cuda_embed(NULL, &m, ids, 1, 1.0f, out, NULL)); });
            snprintf(shape, sizeof shape, "%s.t1", M.name);
            char var[32];
            snprintf(var, sizeof var, "embed %s", ts_type_name(t));
            bench_result("ew", shape, var, (double)rb + 4.0 * E, us, NULL);
            cudaFree(dw), cudaFree(ids), cudaFree(out);
        }
        /* sampling over the vocabulary */
        const int n = M.n_vocab;
        float *hl = (float *)malloc(4 * n);
        for (int i = 0; i < n; i++) hl[i] = 3.0f * bench_normal();
        float *dl = (float *)bench_dalloc(4 * n), *dl0 = (float *)bench_dalloc(4 * n);
        BCU(cudaMemcpy(dl0, hl, 4 * n, cudaMemcpyHostToDevice));
        free(hl);
        int32_t *out = (int32_t *)bench_dalloc(4);
        const size_t asb = ts_cuda_argmax_scratch_bytes(n);
        void *as = bench_dalloc(asb);
        BCU(cudaMemset(as, 0, asb));
        snprintf(shape, sizeof shape, "%s.vocab", M.name);
        double us = bench_time_us([&](size_t) { BOK(ts_cuda_argmax(NULL, dl0, n, out, as, NULL)); });
        bench_result("sample", shape, "argmax", 4.0 * n, us, NULL);
        uint64_t *rng = (uint64_t *)bench_dalloc(32);
        ts_rng st;
        ts_rng_seed(&st, 1);
        BCU(cudaMemcpy(rng, st.s, 32, cudaMemcpyHostToDevice));
        const size_t ssb = ts_cuda_sample_scratch_bytes(n);
        void *ss = bench_dalloc(ssb);
        ts_cuda_sampler_state sst = {rng, NULL, NULL, 0};
        const ts_cuda_sampler_params configs[] = {{0.8f, 40, 0.95f, 0.05f, 1.0f}, {0.8f, 0, 0.95f, 0.0f, 1.0f}};
        const char *names[] = {"chain defaults", "chain top-p only"};
        for (int k = 0; k < 2; k++) {
            us = bench_time_us([&](size_t) {
                BCU(cudaMemcpyAsync(dl, dl0, 4 * (size_t)n, cudaMemcpyDeviceToDevice));
                BOK(ts_cuda_sample(NULL, dl, n, &configs[k], &sst, out, NULL, ss, ssb));
            });
            bench_result("sample", shape, names[k], 4.0 * n, us, "(incl. a logits copy)");
        }
        cudaFree(dl), cudaFree(dl0), cudaFree(out), cudaFree(as), cudaFree(rng), cudaFree(ss);
    }
    return 0;
}
