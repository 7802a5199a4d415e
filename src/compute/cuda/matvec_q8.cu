/* Decode matrix-vector products with int8 activations, the CPU's default
 * path: x is quantized once per call to the weights' partner format (Q8_0 for
 * the 32-element quants, Q8_K for the K-quants), exactly as ts_quantize_row
 * does (same amax, same float divisions, round half to even, quants in
 * [-127, 127]), with the RMSNorm optionally folded in; then every weight unit
 * is dotted in integers with dp4a and its scales applied in float
 * (cuda_quant.cuh idot). The staging and work split are matvec.cu's.
 *
 * CPU reference: ts_quantize_row_ref into the partner format and
 * ts_vec_dot_ref per row (the integer structure of the CPU's int8 kernels). */
#include "compute/cuda/matvec_common.cuh"

namespace {

/* Sum over the block's 256 threads, in double (every thread gets it). */
TS_DEV double block_sum_256(double v, double *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum_d(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double t = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) t += sh[i];
    __syncthreads();
    return t;
}

/* Grid (n_in/256 rounded up, n_tok), 256 threads: thread = element. */
template <bool K>
__global__ void __launch_bounds__(256) q8_quant(const float *x, int64_t n_in, const float *norm_w, float eps,
                                                 int8_t *qs, float *d, int32_t *s, int64_t nd, int64_t ns) {
    __shared__ double shd[8];
    __shared__ float shf[8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = blockIdx.y;
    const float *row = x + t * n_in;
    float inv = 1.0f;
    if (norm_w) {
        double ss = 0;
        for (int64_t i = threadIdx.x; i < n_in; i += 256) ss += (double)row[i] * row[i];
        ss = block_sum_256(ss, shd);
        inv = (float)(1.0 / sqrt(ss / (double)n_in + (double)eps));
    }
    const int64_t e = (int64_t)blockIdx.x * 256 + threadIdx.x;
    const bool valid = e < n_in; /* n_in % 32 == 0: whole warps are valid or not */
    float v = valid ? row[e] : 0.0f;
    if (norm_w && valid) v = fmul_rn(fmul_rn(v, inv), norm_w[e]);
    if (!K) {
        const float amax = warp_max(fabsf(v));
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        int q = rne_int(fmul_rn(v, id));
        q = q < -127 ? -127 : q > 127 ? 127 : q;
        const int sum = warp_sum_i(q);
        if (valid) {
            qs[t * n_in + e] = (int8_t)q;
            if (lane == 0) {
                d[t * nd + e / 32] = __half2float(__float2half_rn(dd));
                s[t * ns + e / 32] = sum;
            }
        }
    } else {
        float amax = warp_max(fabsf(v));
        if (lane == 0) shf[warp] = amax;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 8; i++) amax = fmaxf(amax, shf[i]);
        int q = 0;
        float dd = 0.0f;
        if (amax != 0.0f) {
            const float iscale = 127.0f / amax;
            q = rne_int(fmul_rn(iscale, v));
            q = q < -127 ? -127 : q > 127 ? 127 : q;
            dd = 1.0f / iscale;
        }
        /* bsums: lanes 0-15 and 16-31 are two sub-blocks of 16 */
        int b = q;
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) b += __shfl_xor_sync(0xffffffffu, b, o);
        if (valid) {
            qs[t * n_in + e] = (int8_t)q;
            if ((lane & 15) == 0) s[t * ns + e / 16] = b;
            if (threadIdx.x == 0) d[t * nd + e / 256] = dd;
        }
    }
}

/* Quantized weights, int8 activations. */
template <int T, int NT> __global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS) mv_q_q8(const MvArgs a) {
    typedef Dec<T> D;
    typedef Geo<T> G;
    __shared__ __align__(16) uint8_t sm[MV_WARPS][MV_R * G::SROW];
    __shared__ float red[MV_WARPS][MV_R][NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    MvGroup g;
    const bool active = mv_group(a, (int64_t)blockIdx.x * (MV_WARPS / a.kw) + warp / a.kw, g);
    float acc[MV_R][NT];
#pragma unroll
    for (int r = 0; r < MV_R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    if (active) {
        const MvMat &m = a.m[g.wi];
        const int64_t nb = a.n_in / D::QK, nchunks = (nb + G::CB - 1) / G::CB;
        uint8_t *buf = sm[warp];
        Stage<T, MV_R> st;
        int64_t c = warp % a.kw;
        if (c < nchunks) st.load(m, g.row0, g.nr, c, nb, lane);
        for (; c < nchunks; c += a.kw) {
            __syncwarp();
            st.store(buf, g.nr, lane);
            int dl[MV_R];
#pragma unroll
            for (int r = 0; r < MV_R; r++) dl[r] = st.delta[r];
            __syncwarp();
            if (c + a.kw < nchunks) st.load(m, g.row0, g.nr, c + a.kw, nb, lane);

            const int64_t bl = c * G::CB + lane / D::NU;
            const int u = lane % D::NU;
            if (bl >= nb) continue;
            typename D::UI s[MV_R];
#pragma unroll
            for (int r = 0; r < MV_R; r++)
                if (r < g.nr) D::iload(buf + r * G::SROW + dl[r] + (lane / D::NU) * D::BB, u, s[r]);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= a.n_tok) continue;
                uint32_t X[8];
                XScale xs;
                XSide<T>::xwords(a.xq + (int64_t)t * a.n_in + bl * D::QK, u, X);
                XSide<T>::xscale(a.xd + t * a.nd, a.xs + t * a.ns, bl, u, xs);
#pragma unroll
                for (int r = 0; r < MV_R; r++)
                    if (r < g.nr) acc[r][t] += D::idot(s[r], u, X, xs);
            }
        }
    }
    mv_finish<MV_R, NT>(a, acc, active, g, red);
}

template <int NT> ts_status launch_nt(cudaStream_t s, uint32_t type, const MvArgs &a, int64_t blocks) {
    switch (type) {
#define Q(T) \
    case T: mv_q_q8<T, NT><<<(unsigned)blocks, MV_WARPS * 32, 0, s>>>(a); break;
        TS_FOR_INT8_TYPES(Q)
#undef Q
    default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda matvec_q8: type %s has no int8 path", ts_type_name(type));
    }
    TS_CUDA_LAUNCHED("matvec_q8");
    return TS_OK;
}

} // namespace

uint32_t ts_cuda_q8_partner(uint32_t wtype) {
    switch (wtype) {
    case TS_TYPE_Q4_0: case TS_TYPE_Q4_1: case TS_TYPE_Q5_0: case TS_TYPE_Q5_1: case TS_TYPE_Q8_0: return TS_TYPE_Q8_0;
    case TS_TYPE_Q2_K: case TS_TYPE_Q3_K: case TS_TYPE_Q4_K: case TS_TYPE_Q5_K: case TS_TYPE_Q6_K: return TS_TYPE_Q8_K;
    default: return TS_TYPE_COUNT;
    }
}

size_t ts_cuda_q8_bytes(uint32_t partner, int64_t n_in, int n_tok) {
    if ((partner != TS_TYPE_Q8_0 && partner != TS_TYPE_Q8_K) || n_in <= 0 || n_tok <= 0) return 0;
    if (n_in % (partner == TS_TYPE_Q8_K ? 256 : 32)) return 0;
    return q8_layout(partner, n_in, n_tok).total;
}

ts_status ts_cuda_quantize_q8(void *stream, uint32_t partner, const float *x, int64_t n_in, int n_tok,
                              const float *norm_w, float eps, void *q8) {
    TS_ARG_CHECK(ts_cuda_q8_bytes(partner, n_in, n_tok) > 0,
                 "cuda quantize_q8: partner %s with n_in %lld, %d tokens", ts_type_name(partner), (long long)n_in,
                 n_tok);
    TS_ARG_CHECK(x && q8 && ((uintptr_t)q8 & 255) == 0, "cuda quantize_q8: NULL x, or q8 not 256-byte aligned");
    TS_ARG_CHECK(n_tok <= 65535, "cuda quantize_q8: %d tokens (at most 65535 per call)", n_tok);
    const Q8Layout L = q8_layout(partner, n_in, n_tok);
    uint8_t *b = (uint8_t *)q8;
    const dim3 grid((unsigned)((n_in + 255) / 256), (unsigned)n_tok);
    if (partner == TS_TYPE_Q8_K)
        q8_quant<true><<<grid, 256, 0, ts_stream(stream)>>>(x, n_in, norm_w, eps, (int8_t *)(b + L.qs),
                                                            (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns);
    else
        q8_quant<false><<<grid, 256, 0, ts_stream(stream)>>>(x, n_in, norm_w, eps, (int8_t *)(b + L.qs),
                                                             (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns);
    TS_CUDA_LAUNCHED("quantize_q8");
    return TS_OK;
}

ts_status ts_cuda_matvec_q8(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, uint32_t partner,
                            const void *q8, int n_tok, bool accumulate) {
    MvArgs all;
    ts_status st = mv_check(n_w, w, y, n_tok, all);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(ts_cuda_q8_bytes(partner, w[0].n_in, n_tok) > 0, "cuda matvec_q8: partner %s with n_in %lld",
                 ts_type_name(partner), (long long)w[0].n_in);
    TS_ARG_CHECK(q8 && ((uintptr_t)q8 & 255) == 0, "cuda matvec_q8: NULL q8 or not 256-byte aligned");
    for (int i = 0; i < n_w; i++)
        TS_ARG_CHECK(ts_cuda_q8_partner(w[i].type) == partner, "cuda matvec_q8: %s weights need %s activations, not %s",
                     ts_type_name(w[i].type), ts_type_name(ts_cuda_q8_partner(w[i].type)), ts_type_name(partner));
    const Q8Layout L = q8_layout(partner, w[0].n_in, n_tok);
    const uint8_t *b = (const uint8_t *)q8;
    bool done[TS_CUDA_MAX_MATS] = {false, false, false, false};
    for (int i = 0; i < n_w; i++) {
        if (done[i]) continue;
        MvArgs a;
        memset(&a, 0, sizeof a);
        a.n_in = w[i].n_in;
        a.n_tok = n_tok;
        a.accumulate = accumulate;
        a.xq = (const int8_t *)(b + L.qs);
        a.xd = (const float *)(b + L.d);
        a.xs = (const int32_t *)(b + L.s);
        a.nd = L.nd;
        a.ns = L.ns;
        for (int j = i; j < n_w; j++) {
            if (done[j] || w[j].type != w[i].type) continue;
            done[j] = true;
            a.m[a.n_w++] = MvMat{(const uint8_t *)w[j].data, w[j].row_bytes, w[j].n_out, w[j].bias, y[j]};
        }
        const int64_t blocks = mv_plan(a, (a.n_in / 32 + 31) / 32);
        TS_ARG_CHECK(blocks < (1ll << 31), "cuda matvec_q8: %lld blocks", (long long)blocks);
        cudaStream_t s = ts_stream(stream);
        ts_status r = n_tok <= 1   ? launch_nt<1>(s, w[i].type, a, blocks)
                      : n_tok <= 2 ? launch_nt<2>(s, w[i].type, a, blocks)
                      : n_tok <= 4 ? launch_nt<4>(s, w[i].type, a, blocks)
                                   : launch_nt<8>(s, w[i].type, a, blocks);
        if (r != TS_OK) return r;
    }
    return TS_OK;
}
