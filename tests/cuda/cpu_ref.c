/* See cpu_ref.h. One single-threaded CPU backend, created on first use. */
#include "cpu_ref.h"

#include <stdio.h>
#include <stdlib.h>

#include "compute/backend.h"
#include "tensor/types.h"

static ts_backend *g_be;
static ts_stream *g_st;

static ts_backend *be(void) {
    if (!g_be && (ts_backend_cpu_new(1, &g_be) != TS_OK || g_be->ops->stream_new(g_be, 1, &g_st) != TS_OK)) {
        fprintf(stderr, "cpu_ref: cannot create the CPU backend: %s\n", ts_last_error());
        exit(1);
    }
    return g_be;
}
/* ops run on the one stream */
static ts_stream *st(void) {
    be();
    return g_st;
}

void cref_rmsnorm(const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out) {
    be()->ops->rmsnorm(st(), x, w, n, rows, eps, out);
}

void cref_rope_table(const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs) {
    be()->ops->rope_table(st(), freq, n_rot, pos, n_tok, mscale, cs);
}

void cref_rope(float *x, int n_tok, int n_head, int head_dim, int n_rot, const float *cs, int mode) {
    be()->ops->rope(st(), x, n_tok, n_head, head_dim, n_rot, cs, mode ? TS_ROPE_NEOX : TS_ROPE_NORMAL);
}

static ts_attn_desc desc(int n_tok, int pos0, int n_head, int n_head_kv, int head_dim, int n_ctx, int window,
                         float scale) {
    ts_attn_desc d = {.n_tok = n_tok, .pos0 = pos0, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim,
                      .n_ctx = n_ctx, .window = window, .scale = scale, .kv_type = TS_TYPE_F16};
    return d;
}

void cref_kv_store(uint16_t *kc, uint16_t *vc, int n_tok, int pos0, int n_head_kv, int head_dim, int n_ctx,
                   const float *k, const float *v) {
    ts_kv_layer kv = {kc, vc};
    ts_attn_desc d = desc(n_tok, pos0, n_head_kv, n_head_kv, head_dim, n_ctx, 0, 1.0f);
    be()->ops->kv_store(st(), &kv, &d, k, v);
}

void cref_attention(const uint16_t *kc, const uint16_t *vc, int n_tok, int pos0, int n_head, int n_head_kv,
                    int head_dim, int n_ctx, int window, float scale, const float *q, float *out) {
    ts_kv_layer kv = {(void *)kc, (void *)vc};
    ts_attn_desc d = desc(n_tok, pos0, n_head, n_head_kv, head_dim, n_ctx, window, scale);
    ts_backend_reserve r = {.max_tokens = n_tok, .max_in = head_dim, .n_ctx = n_ctx, .n_head = n_head};
    if (be()->ops->reserve(st(), &r) != TS_OK) {
        fprintf(stderr, "cpu_ref: reserve: %s\n", ts_last_error());
        exit(1);
    }
    be()->ops->attention(st(), &kv, &d, q, out);
}

void cref_act_mul(int act, const float *gate, const float *up, int64_t n, float *out) {
    be()->ops->act_mul(st(), act ? TS_ACT_GELU_TANH : TS_ACT_SILU, gate, up, n, out);
}
void cref_add(float *x, const float *y, int64_t n) { be()->ops->add(st(), x, y, n); }
void cref_scale(float *x, const float *y, float a, int64_t n) { be()->ops->scale(st(), x, y, a, n); }
void cref_scale_add(float *x, const float *y, float a, int64_t n) { be()->ops->scale_add(st(), x, y, a, n); }
void cref_softcap(float *x, int64_t n, float cap) { be()->ops->softcap(st(), x, n, cap); }

void cref_moe_route(const float *r, int n_tok, int n_expert, int k, int renorm, int32_t *ids, float *w) {
    be()->ops->moe_route(st(), r, n_tok, n_expert, k, renorm != 0, ids, w);
}
void cref_moe_combine(float *out, const float *y, const float *w, const int32_t *rows, int n_tok, int k, int64_t n) {
    be()->ops->moe_combine(st(), out, y, w, rows, n_tok, k, n);
}
void cref_gather_rows(float *out, const float *x, const int32_t *idx, int n_rows, int64_t n) {
    be()->ops->gather_rows(st(), out, x, idx, n_rows, n);
}
void cref_gated_add(float *x, const float *y, const float *g, int n_tok, int64_t n) {
    be()->ops->gated_add(st(), x, y, g, n_tok, n);
}

void cref_embed(const void *data, uint32_t type, int64_t n_in, int64_t n_out, uint64_t row_bytes, const int32_t *ids,
                int n, float scale, float *out) {
    ts_mat m = {.data = data, .type = type, .n_in = n_in, .n_out = n_out, .row_bytes = row_bytes, .name = "embd"};
    be()->ops->embed(st(), &m, ids, n, scale, out);
}
