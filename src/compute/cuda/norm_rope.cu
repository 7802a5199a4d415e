/* RMSNorm (rows, and per head), the 1/rms the matvec folds into its input
 * load, and RoPE fused with the KV-cache store.
 *
 * Numerics follow src/compute/cpu.c exactly where it can be followed: the
 * sum of squares in double, inv = (float)(1/sqrt(ss/n + eps)), out = (x *
 * inv) * w with two float roundings; RoPE angles th = (float)pos * freq[i] in
 * float32, cos(th) * mscale, and the rotation x0*c - x1*s, x0*s + x1*c without
 * FMA contraction. The device cosf/sinf are within 2 ulp of glibc's, the only
 * source of difference. */
#include "compute/cuda/cuda_common.cuh"

namespace {

/* One warp per row (n < 1024): 8 rows per 256-thread block. */
__global__ void __launch_bounds__(256) rms_rows_warp(const float *x, const float *w, int64_t n, int64_t rows, float eps,
                                                     float *out, float *inv_out) {
    ts_pdl_enter();
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float *xr = x + r * n;
    double ss = 0;
    for (int64_t i = lane; i < n; i += 32) ss += (double)xr[i] * xr[i];
    const float inv = rms_scale(warp_sum_d(ss), n, eps);
    if (inv_out) {
        if (lane == 0) inv_out[r] = inv;
        return;
    }
    float *o = out + r * n;
    for (int64_t i = lane; i < n; i += 32) o[i] = fmul_rn(fmul_rn(xr[i], inv), w[i]);
}

/* One 256-thread block per row (n >= 1024). */
__global__ void __launch_bounds__(256) rms_rows_block(const float *x, const float *w, int64_t n, float eps, float *out,
                                                      float *inv_out) {
    ts_pdl_enter();
    __shared__ double sh[8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t r = blockIdx.x;
    const float *xr = x + r * n;
    double ss = 0;
    for (int64_t i = threadIdx.x; i < n; i += 256) ss += (double)xr[i] * xr[i];
    ss = warp_sum_d(ss);
    if (lane == 0) sh[warp] = ss;
    __syncthreads();
    double t = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) t += sh[i];
    const float inv = rms_scale(t, n, eps);
    if (inv_out) {
        if (threadIdx.x == 0) inv_out[r] = inv;
        return;
    }
    float *o = out + r * n;
    for (int64_t i = threadIdx.x; i < n; i += 256) o[i] = fmul_rn(fmul_rn(xr[i], inv), w[i]);
}

ts_status launch_rms(void *stream, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out,
                     float *inv) {
    TS_ARG_CHECK(x && n > 0 && rows > 0, "cuda rmsnorm: NULL x or empty shape (%lld x %lld)", (long long)rows,
                 (long long)n);
    cudaStream_t s = ts_stream(stream);
    if (n < 1024) {
        TS_ARG_CHECK((rows + 7) / 8 < (1ll << 31), "cuda rmsnorm: %lld rows", (long long)rows);
        ts_launch(&rms_rows_warp, (unsigned)((rows + 7) / 8), 256, 0, s)(x, w, n, rows, eps, out, inv);
    } else {
        TS_ARG_CHECK(rows < (1ll << 31), "cuda rmsnorm: %lld rows", (long long)rows);
        ts_launch(&rms_rows_block, (unsigned)rows, 256, 0, s)(x, w, n, eps, out, inv);
    }
    TS_CUDA_LAUNCHED("rmsnorm");
    return TS_OK;
}

#define ROPE_MAX_HD 256
#define ROPE_WARPS 8

/* Blocks (token, group of ROPE_WARPS heads); each warp takes one head of q,
 * then k, then v. A decode token spreads its heads over several blocks: one
 * block for all 40 heads of a 30B-A3B layer took 12 us (ncu), latency-bound. */
__global__ void __launch_bounds__(ROPE_WARPS * 32) rope_kv_kernel(const ts_cuda_rope_kv a) {
    ts_pdl_enter();
    __shared__ float cs[ROPE_MAX_HD];            /* (n_rot/2, 2) cos, sin */
    __shared__ float hb[ROPE_WARPS][ROPE_MAX_HD]; /* one head per warp */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int t = blockIdx.x, hd = a.head_dim, half = a.n_rot / 2;
    const int pos = a.pos[t];
    const float fp = (float)pos;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const float2 c = rope_cs(fp, a.freq[i], a.mscale);
        cs[2 * i] = c.x, cs[2 * i + 1] = c.y;
    }
    const bool store = a.k_cache != nullptr;
    const bool pos_ok = pos >= 0 && pos < a.n_ctx;
    if (store && !pos_ok && threadIdx.x == 0 && blockIdx.y == 0 && a.err) atomicOr(a.err, TS_CUDA_ERR_POS);

    const int nq = a.q ? a.n_head : 0, nk = a.n_head_kv, nv = store ? a.n_head_kv : 0;
    float *sh = hb[warp];
    /* one head per warp (the launcher gives every head a warp): its kind (q,
     * k, v), index and row, loaded before the barrier, so the load is in
     * flight while the position and the cos/sin table are formed, not one
     * more round trip after them */
    const int j = blockIdx.y * ROPE_WARPS + warp;
    const bool mine = j < nq + nk + nv;
    const int kind = j < nq ? 0 : j < nq + nk ? 1 : 2;
    const int h = kind == 0 ? j : kind == 1 ? j - nq : j - nq - nk;
    const float *src = kind == 0   ? a.q + ((int64_t)t * a.n_head + h) * hd
                       : kind == 1 ? a.k + ((int64_t)t * a.n_head_kv + h) * hd
                                   : a.v + ((int64_t)t * a.n_head_kv + h) * hd;
    if (mine)
        for (int d = lane; d < hd; d += 32) sh[d] = src[d];
    __syncthreads();
    if (!mine) return;
    const float *nw = kind == 0 ? a.q_norm : kind == 1 ? a.k_norm : nullptr;
    if (nw) {
        double ss = 0;
        for (int d = lane; d < hd; d += 32) ss += (double)sh[d] * sh[d];
        const float inv = rms_scale(warp_sum_d(ss), hd, a.eps);
        __syncwarp();
        for (int d = lane; d < hd; d += 32) sh[d] = fmul_rn(fmul_rn(sh[d], inv), nw[d]);
    }
    __syncwarp();
    if (kind < 2) {
        for (int i = lane; i < half; i += 32) {
            const int i0 = a.mode == TS_CUDA_ROPE_NEOX ? i : 2 * i, i1 = a.mode == TS_CUDA_ROPE_NEOX ? i + half : 2 * i + 1;
            const float2 y = rope_rot(sh[i0], sh[i1], make_float2(cs[2 * i], cs[2 * i + 1]));
            sh[i0] = y.x, sh[i1] = y.y;
        }
    }
    __syncwarp();
    float *dst = kind == 2 ? nullptr : (float *)src; /* q and k are rotated in place */
    uint16_t *cache = kind == 1 ? a.k_cache : kind == 2 ? a.v_cache : nullptr;
    const int64_t co = ((int64_t)h * a.n_ctx + pos) * hd;
    for (int d = lane; d < hd; d += 32) {
        const float v = sh[d];
        if (dst) dst[d] = v;
        if (cache && pos_ok) cache[co + d] = f2h(v);
    }
}

} // namespace

ts_status ts_cuda_rms_inv(void *stream, const float *x, int64_t n, int64_t rows, float eps, float *inv) {
    TS_ARG_CHECK(inv != NULL, "cuda rms_inv: NULL output");
    return launch_rms(stream, x, NULL, n, rows, eps, NULL, inv);
}

ts_status ts_cuda_rmsnorm(void *stream, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out) {
    TS_ARG_CHECK(w && out, "cuda rmsnorm: NULL weight or output");
    return launch_rms(stream, x, w, n, rows, eps, out, NULL);
}

ts_status ts_cuda_rope_kv_store(void *stream, const ts_cuda_rope_kv *a) {
    TS_ARG_CHECK(a && a->k && a->pos && a->freq, "cuda rope: NULL k, pos or freq");
    TS_ARG_CHECK(a->n_tok >= 1 && a->n_tok < (1 << 30) && a->n_head >= 1 && a->n_head_kv >= 1,
                 "cuda rope: n_tok %d, n_head %d, n_head_kv %d", a->n_tok, a->n_head, a->n_head_kv);
    TS_ARG_CHECK(a->head_dim >= 2 && a->head_dim <= ROPE_MAX_HD, "cuda rope: head_dim %d (2..%d)", a->head_dim,
                 ROPE_MAX_HD);
    TS_ARG_CHECK(a->n_rot >= 0 && a->n_rot % 2 == 0 && a->n_rot <= a->head_dim, "cuda rope: n_rot %d (even, <= %d)",
                 a->n_rot, a->head_dim);
    TS_ARG_CHECK(a->mode == TS_CUDA_ROPE_NORMAL || a->mode == TS_CUDA_ROPE_NEOX, "cuda rope: mode %d", a->mode);
    TS_ARG_CHECK(!a->k_cache || (a->v_cache && a->v && a->n_ctx > 0), "cuda rope: a cache store needs v, v_cache, n_ctx");
    const int heads = (a->q ? a->n_head : 0) + a->n_head_kv * (a->k_cache ? 2 : 1);
    TS_ARG_CHECK(heads <= 65535 * ROPE_WARPS, "cuda rope: %d heads", heads);
    const dim3 grid((unsigned)a->n_tok, (unsigned)((heads + ROPE_WARPS - 1) / ROPE_WARPS));
    ts_launch(&rope_kv_kernel, grid, ROPE_WARPS * 32, 0, ts_stream(stream))(*a);
    TS_CUDA_LAUNCHED("rope_kv_store");
    return TS_OK;
}
