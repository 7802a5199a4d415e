/* Decode matrix-vector products with F32 activations (the CPU --precise
 * path): y = W x' (+ bias) (y += that with accumulate), for 1..8 tokens and up
 * to four weights sharing x, x' optionally RMSNormed on the fly.
 *
 * Quantized weights stream through shared memory (matvec_common.cuh); each
 * lane dequantizes its 32-element unit in registers, pair by pair (8 weights,
 * bit-identical to ts_dequant_row), and multiplies them with every token's x
 * (two float4 per pair per token), for MV_R rows at once so each x load
 * serves MV_R rows. F32/F16/BF16 weights need no staging: a lane reads 8
 * consecutive weights of each row (16-byte loads, coalesced) per 256-element
 * chunk.
 *
 * CPU reference: the CPU backend's matmul in exact_act mode (dequantized row
 * dotted in float), i.e. ts_dequant_row_ref + a double dot in the tests. */
#include "compute/cuda/matvec_common.cuh"

namespace {

TS_DEV float4 ldg4(const float *p) { return __ldg((const float4 *)p); }

TS_DEV float dot8(const float (&w)[8], const float4 a, const float4 b, float acc) {
    acc = fmaf(w[0], a.x, acc);
    acc = fmaf(w[1], a.y, acc);
    acc = fmaf(w[2], a.z, acc);
    acc = fmaf(w[3], a.w, acc);
    acc = fmaf(w[4], b.x, acc);
    acc = fmaf(w[5], b.y, acc);
    acc = fmaf(w[6], b.z, acc);
    acc = fmaf(w[7], b.w, acc);
    return acc;
}

/* x' = (x * inv) * norm_w, the CPU rmsnorm's two roundings. */
TS_DEV float4 rms_fold(float4 x, float inv, float4 n) {
    return make_float4(fmul_rn(fmul_rn(x.x, inv), n.x), fmul_rn(fmul_rn(x.y, inv), n.y),
                       fmul_rn(fmul_rn(x.z, inv), n.z), fmul_rn(fmul_rn(x.w, inv), n.w));
}

/* Self-normalizing launches (ts_cuda_norm_matvec): every block sums each
 * token's squares itself (the row, n_in floats, read from L2) instead of
 * waiting for a 1/rms launch before it, which on a decode token is a
 * one-block kernel of pure latency on the critical path; and block b stores
 * the b-th slice of the normalized rows to a.xn for the ops that read them
 * after. The sum is in double (the CPU's value, as ts_cuda_rms_inv) and the
 * element the CPU rmsnorm's, (x * inv) * w. Whole block, before any early
 * exit; sinv (shared, NT) receives each token's 1/rms. */
template <int NT> TS_DEV void mv_norm_prologue(const MvArgs &a, float *sinv) {
    if (!a.self_norm) return;
    __shared__ double sh[MV_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int t = 0; t < a.n_tok && t < NT; t++) {
        const double ss = warp_sum_d(row_sumsq_part(a.x + (int64_t)t * a.n_in, a.n_in, threadIdx.x, MV_WARPS * 32));
        if (lane == 0) sh[warp] = ss;
        __syncthreads();
        if (threadIdx.x == 0) {
            double tot = 0;
#pragma unroll
            for (int i = 0; i < MV_WARPS; i++) tot += sh[i];
            sinv[t] = rms_scale(tot, a.n_in, a.eps);
        }
        __syncthreads();
    }
    if (!a.xn) return;
    const int64_t per = (a.n_in + gridDim.x - 1) / gridDim.x, lo = (int64_t)blockIdx.x * per;
    const int64_t hi = lo + per < a.n_in ? lo + per : a.n_in;
    for (int t = 0; t < a.n_tok && t < NT; t++)
        for (int64_t i = lo + threadIdx.x; i < hi; i += MV_WARPS * 32)
            a.xn[(int64_t)t * a.n_in + i] = fmul_rn(fmul_rn(a.x[(int64_t)t * a.n_in + i], sinv[t]), a.norm_w[i]);
}

template <int NT> TS_DEV void load_inv(const MvArgs &a, const float *sinv, float (&inv)[NT]) {
#pragma unroll
    for (int t = 0; t < NT; t++) inv[t] = t >= a.n_tok ? 1.0f : a.self_norm ? sinv[t] : a.inv_rms ? a.inv_rms[t] : 1.0f;
}

/* Quantized weights, F32 activations. */
template <int T, int NT> __global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS) mv_q_f32(const MvArgs a) {
    ts_pdl_enter();
    __shared__ float sinv[NT];
    mv_norm_prologue<NT>(a, sinv);
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
        float inv[NT];
        load_inv<NT>(a, sinv, inv);
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
            typename D::U s[MV_R];
#pragma unroll
            for (int r = 0; r < MV_R; r++)
                if (r < g.nr) D::load(buf + r * G::SROW + dl[r] + (lane / D::NU) * D::BB, u, s[r]);
            const float *xb = a.x + bl * D::QK;
            const float *nwp = a.norm_w ? a.norm_w + bl * D::QK : nullptr;
#pragma unroll
            for (int p = 0; p < 4; p++) {
                float w[MV_R][8];
#pragma unroll
                for (int r = 0; r < MV_R; r++)
                    if (r < g.nr) D::pair(s[r], u, p, w[r]);
                const int pa = D::posA(u, p), pb = D::posB(u, p);
                float4 na = make_float4(1, 1, 1, 1), nc = na;
                if (nwp) na = ldg4(nwp + pa), nc = ldg4(nwp + pb);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    if (t >= a.n_tok) continue;
                    float4 xa = ldg4(xb + (int64_t)t * a.n_in + pa), xc = ldg4(xb + (int64_t)t * a.n_in + pb);
                    if (nwp) xa = rms_fold(xa, inv[t], na), xc = rms_fold(xc, inv[t], nc);
#pragma unroll
                    for (int r = 0; r < MV_R; r++)
                        if (r < g.nr) acc[r][t] = dot8(w[r], xa, xc, acc[r][t]);
                }
            }
        }
    }
    mv_finish<MV_R, NT>(a, acc, active, g, red);
}

/* 8 consecutive weights of a float-typed row as floats. */
template <int T> struct FRow;
template <> struct FRow<TS_TYPE_F32> {
    struct V {
        float4 a, b;
    };
    TS_DEV static V ld(const uint8_t *row, int64_t e) {
        const float *p = (const float *)row + e;
        return V{ldg4(p), ldg4(p + 4)};
    }
    TS_DEV static void cvt(const V &v, float (&w)[8]) {
        w[0] = v.a.x, w[1] = v.a.y, w[2] = v.a.z, w[3] = v.a.w, w[4] = v.b.x, w[5] = v.b.y, w[6] = v.b.z, w[7] = v.b.w;
    }
};
template <> struct FRow<TS_TYPE_F16> {
    typedef uint4 V;
    TS_DEV static V ld(const uint8_t *row, int64_t e) { return __ldg((const uint4 *)(row + 2 * e)); }
    TS_DEV static void cvt(const V &v, float (&w)[8]) {
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i] = h2f((uint16_t)(u[i] & 0xffff));
            w[2 * i + 1] = h2f((uint16_t)(u[i] >> 16));
        }
    }
};
template <> struct FRow<TS_TYPE_BF16> {
    typedef uint4 V;
    TS_DEV static V ld(const uint8_t *row, int64_t e) { return __ldg((const uint4 *)(row + 2 * e)); }
    TS_DEV static void cvt(const V &v, float (&w)[8]) {
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i] = bits_to_f32(u[i] << 16);
            w[2 * i + 1] = bits_to_f32(u[i] & 0xffff0000u);
        }
    }
};

#define MVF_CHUNK 256 /* elements per chunk of a float row: 32 lanes x 8 */

/* F32/F16/BF16 weights, F32 activations. */
template <int T, int NT> __global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS) mv_f_f32(const MvArgs a) {
    __shared__ float sinv[NT];
    typedef FRow<T> F;
    __shared__ float red[MV_WARPS][MV_R][NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    MvGroup g;
    const bool active = mv_group(a, (int64_t)blockIdx.x * (MV_WARPS / a.kw) + warp / a.kw, g);
    const int64_t nchunks = (a.n_in + MVF_CHUNK - 1) / MVF_CHUNK;
    /* the warp's first chunk of weights is loaded before the wait on the
     * previous kernel (nothing in a token writes weights): its round trip runs
     * under that kernel's tail and the norm prologue, not after them */
    typename F::V v[MV_R];
    int64_t c = warp % a.kw;
    if (active && c < nchunks && c * MVF_CHUNK + lane * 8 < a.n_in) {
        const MvMat &m = a.m[g.wi];
#pragma unroll
        for (int r = 0; r < MV_R; r++)
            if (r < g.nr) v[r] = F::ld(m.w + (uint64_t)(g.row0 + r) * m.row_bytes, c * MVF_CHUNK + lane * 8);
    }
    ts_pdl_enter();
    mv_norm_prologue<NT>(a, sinv);
    float acc[MV_R][NT];
#pragma unroll
    for (int r = 0; r < MV_R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    if (active) {
        const MvMat &m = a.m[g.wi];
        float inv[NT];
        load_inv<NT>(a, sinv, inv);
        int64_t e;
        for (; c < nchunks; c += a.kw) {
            e = c * MVF_CHUNK + lane * 8;
            float w[MV_R][8];
#pragma unroll
            for (int r = 0; r < MV_R; r++)
                if (r < g.nr && e < a.n_in) F::cvt(v[r], w[r]);
            const int64_t en = (c + a.kw) * MVF_CHUNK + lane * 8;
            if (c + a.kw < nchunks && en < a.n_in) {
#pragma unroll
                for (int r = 0; r < MV_R; r++)
                    if (r < g.nr) v[r] = F::ld(m.w + (uint64_t)(g.row0 + r) * m.row_bytes, en);
            }
            if (e >= a.n_in) continue;
            float4 na = make_float4(1, 1, 1, 1), nc = na;
            if (a.norm_w) na = ldg4(a.norm_w + e), nc = ldg4(a.norm_w + e + 4);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= a.n_tok) continue;
                float4 xa = ldg4(a.x + (int64_t)t * a.n_in + e), xc = ldg4(a.x + (int64_t)t * a.n_in + e + 4);
                if (a.norm_w) xa = rms_fold(xa, inv[t], na), xc = rms_fold(xc, inv[t], nc);
#pragma unroll
                for (int r = 0; r < MV_R; r++)
                    if (r < g.nr) acc[r][t] = dot8(w[r], xa, xc, acc[r][t]);
            }
        }
    }
    mv_finish<MV_R, NT>(a, acc, active, g, red);
}

template <int NT> ts_status launch_nt(cudaStream_t s, uint32_t type, const MvArgs &a, int64_t blocks) {
    switch (type) {
#define Q(T) \
    case T: ts_launch(&mv_q_f32<T, NT>, (unsigned)blocks, MV_WARPS * 32, 0, s)(a); break;
        TS_FOR_QTYPES(Q)
#undef Q
    case TS_TYPE_F32: ts_launch(&mv_f_f32<TS_TYPE_F32, NT>, (unsigned)blocks, MV_WARPS * 32, 0, s)(a); break;
    case TS_TYPE_F16: ts_launch(&mv_f_f32<TS_TYPE_F16, NT>, (unsigned)blocks, MV_WARPS * 32, 0, s)(a); break;
    case TS_TYPE_BF16: ts_launch(&mv_f_f32<TS_TYPE_BF16, NT>, (unsigned)blocks, MV_WARPS * 32, 0, s)(a); break;
    default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda matvec: type %s", ts_type_name(type));
    }
    TS_CUDA_LAUNCHED("matvec");
    return TS_OK;
}

/* Chunks per row: what the kw split divides. */
int64_t mv_chunks(uint32_t type, int64_t n_in) {
    if (type == TS_TYPE_F32 || type == TS_TYPE_F16 || type == TS_TYPE_BF16) return (n_in + MVF_CHUNK - 1) / MVF_CHUNK;
    return (n_in / 32 + 31) / 32; /* a chunk is 32 units of 32 elements */
}

} // namespace

bool ts_cuda_type_supported(uint32_t type) {
    switch (type) {
    case TS_TYPE_F32: case TS_TYPE_F16: case TS_TYPE_BF16:
#define Q(T) case T:
        TS_FOR_QTYPES(Q)
#undef Q
        return true;
    default: return false;
    }
}

/* ts_cuda_matvec and ts_cuda_norm_matvec (self_norm: norm_w without inv_rms) */
static ts_status matvec_launches(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, const float *x, int n_tok,
                                 const float *inv_rms, const float *norm_w, bool self_norm, float eps, float *xn,
                                 bool accumulate) {
    MvArgs all;
    ts_status st = mv_check(n_w, w, y, n_tok, all);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(x != NULL, "cuda matvec: NULL x");
    const int64_t nx = (int64_t)n_tok * all.n_in;
    TS_ARG_CHECK(xn == NULL || xn + nx <= x || x + nx <= xn, "cuda norm_matvec: xn overlaps x");
    /* one launch per distinct weight type, in order of first appearance */
    bool done[TS_CUDA_MAX_MATS] = {false, false, false, false};
    for (int i = 0; i < n_w; i++) {
        if (done[i]) continue;
        MvArgs a;
        memset(&a, 0, sizeof a);
        a.n_in = w[i].n_in;
        a.n_tok = n_tok;
        a.accumulate = accumulate;
        a.x = x;
        a.inv_rms = inv_rms;
        a.norm_w = norm_w;
        a.self_norm = self_norm;
        a.eps = eps;
        a.xn = i == 0 ? xn : NULL; /* the first launch writes the normalized rows */
        for (int j = i; j < n_w; j++) {
            if (done[j] || w[j].type != w[i].type) continue;
            done[j] = true;
            a.m[a.n_w++] = MvMat{(const uint8_t *)w[j].data, w[j].row_bytes, w[j].n_out, w[j].bias, y[j]};
        }
        const int64_t blocks = mv_plan(a, mv_chunks(w[i].type, a.n_in));
        TS_ARG_CHECK(blocks < (1ll << 31), "cuda matvec: %lld blocks", (long long)blocks);
        cudaStream_t s = ts_stream(stream);
        ts_status r = n_tok <= 1   ? launch_nt<1>(s, w[i].type, a, blocks)
                      : n_tok <= 2 ? launch_nt<2>(s, w[i].type, a, blocks)
                      : n_tok <= 4 ? launch_nt<4>(s, w[i].type, a, blocks)
                                   : launch_nt<8>(s, w[i].type, a, blocks);
        if (r != TS_OK) return r;
    }
    return TS_OK;
}

ts_status ts_cuda_matvec(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, const float *x, int n_tok,
                         const float *inv_rms, const float *norm_w, bool accumulate) {
    TS_ARG_CHECK((inv_rms == NULL) == (norm_w == NULL), "cuda matvec: inv_rms and norm_w go together");
    return matvec_launches(stream, n_w, w, y, x, n_tok, inv_rms, norm_w, false, 0.0f, NULL, accumulate);
}

ts_status ts_cuda_norm_matvec(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, const float *x, int n_tok,
                              const float *norm_w, float eps, float *xn) {
    TS_ARG_CHECK(norm_w != NULL, "cuda norm_matvec: NULL norm_w");
    return matvec_launches(stream, n_w, w, y, x, n_tok, NULL, norm_w, true, eps, xn, false);
}
