/* The CPU backend's ops as plain functions, for the CUDA tests: every CUDA
 * kernel family is compared against these (and the scalar references of
 * src/tensor/quant_ref.c). All calls go through this one file so that a change
 * of the backend interface touches only cpu_ref.c. Host pointers throughout. */
#ifndef TS_CUDA_CPU_REF_H
#define TS_CUDA_CPU_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out (rows, n) = x / rms(x) * w; out may equal x */
void cref_rmsnorm(const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out);
/* cs (n_tok, n_rot/2, 2) for positions pos */
void cref_rope_table(const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs);
/* x (n_tok, n_head, head_dim) rotated in place; mode 0 normal, 1 neox */
void cref_rope(float *x, int n_tok, int n_head, int head_dim, int n_rot, const float *cs, int mode);
/* F16 cache (n_head_kv, n_ctx, head_dim): k, v (n_tok, n_head_kv, head_dim) stored at pos0.. */
void cref_kv_store(uint16_t *kc, uint16_t *vc, int n_tok, int pos0, int n_head_kv, int head_dim, int n_ctx,
                   const float *k, const float *v);
/* out (n_tok, n_head, head_dim), tokens at pos0.., F16 cache */
void cref_attention(const uint16_t *kc, const uint16_t *vc, int n_tok, int pos0, int n_head, int n_head_kv,
                    int head_dim, int n_ctx, int window, float scale, const float *q, float *out);
/* act 0 SiLU, 1 GELU-tanh */
void cref_act_mul(int act, const float *gate, const float *up, int64_t n, float *out);
void cref_add(float *x, const float *y, int64_t n);
void cref_scale(float *x, const float *y, float a, int64_t n);
void cref_scale_add(float *x, const float *y, float a, int64_t n);
void cref_softcap(float *x, int64_t n, float cap);
/* out (n, n_in) = rows ids of a (n_out, row_bytes) matrix of `type`, times scale */
void cref_embed(const void *data, uint32_t type, int64_t n_in, int64_t n_out, uint64_t row_bytes, const int32_t *ids,
                int n, float scale, float *out);
/* Routed experts (the CPU's moe_* ops). ids, w (n_tok, k) = each token's
 * top-k of r (n_tok, n_expert) and router weights (ts_moe_route_row); renorm
 * 0 or 1 */
void cref_moe_route(const float *r, int n_tok, int n_expert, int k, int renorm, int32_t *ids, float *w);
/* out (n_tok, n) = sum over i of w[t][i] * y row (rows ? rows[t*k+i] : t*k+i), scale then scale_add */
void cref_moe_combine(float *out, const float *y, const float *w, const int32_t *rows, int n_tok, int k, int64_t n);
/* out row j (n) = x row idx[j] */
void cref_gather_rows(float *out, const float *x, const int32_t *idx, int n_rows, int64_t n);
/* x[t] (n) += sigmoid(g[t]) * y[t] */
void cref_gated_add(float *x, const float *y, const float *g, int n_tok, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
