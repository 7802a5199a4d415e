/* Element-wise ops and the embedding lookup, with the CPU backend's formulas
 * evaluated in its order and without FMA contraction, so add / scale /
 * scale_add are bit-identical to src/compute/cpu.c and act_mul / softcap
 * differ only by the device expf / tanhf (within 2 ulp of glibc's).
 *
 * Embedding: the row of each id (read from device memory, so a graph can
 * replay the step of a sampled token) is dequantized with the matvec's
 * staging and decoders (bit-identical to ts_dequant_row), times the scale. */
#include "compute/cuda/matvec_common.cuh"

namespace {

#define EW_THREADS 256

inline unsigned ew_blocks(int64_t n) {
    int64_t b = (n + EW_THREADS * 4 - 1) / (EW_THREADS * 4);
    if (b < 1) b = 1;
    if (b > 65536) b = 65536; /* grid-stride loops cover the rest */
    return (unsigned)b;
}

__global__ void __launch_bounds__(EW_THREADS) act_mul_kernel(int act, const float *gate, const float *up, int64_t n,
                                                             float *out) {
    ts_pdl_enter();
    for (int64_t i = (int64_t)blockIdx.x * EW_THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * EW_THREADS) {
        const float g = gate[i], u = up[i];
        out[i] = act == TS_CUDA_ACT_SILU ? silu_mul(g, u) : gelu_mul(g, u);
    }
}

/* op: 0 add (x += y), 1 scale (x = a*y), 2 scale_add (x += a*y), 3 softcap (x = a*tanh(x/a)) */
__global__ void __launch_bounds__(EW_THREADS) ew_kernel(int op, float *x, const float *y, float a, int64_t n) {
    ts_pdl_enter();
    for (int64_t i = (int64_t)blockIdx.x * EW_THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * EW_THREADS) {
        switch (op) {
        case 0: x[i] = fadd_rn(x[i], y[i]); break;
        case 1: x[i] = fmul_rn(a, y[i]); break;
        case 2: x[i] = fadd_rn(x[i], fmul_rn(a, y[i])); break;
        default: x[i] = fmul_rn(a, tanhf(__fdiv_rn(x[i], a))); break;
        }
    }
}

ts_status ew_launch(void *stream, int op, float *x, const float *y, float a, int64_t n) {
    TS_ARG_CHECK(x && (y || op == 3) && n >= 0, "cuda element-wise: NULL pointer or n %lld", (long long)n);
    if (n == 0) return TS_OK;
    ts_launch(&ew_kernel, ew_blocks(n), EW_THREADS, 0, ts_stream(stream))(op, x, y, a, n);
    TS_CUDA_LAUNCHED("element-wise");
    return TS_OK;
}

/* Quantized embedding: grid (chunk groups of 4, tokens), a warp per chunk. */
template <int T>
__global__ void __launch_bounds__(128) embed_q(const MvMat m, int64_t n_in, const int32_t *ids, float scale, float *out,
                                               unsigned *err) {
    ts_pdl_enter();
    __shared__ __align__(16) uint8_t sm[4][Geo<T>::SROW];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = blockIdx.y, nb = n_in / Dec<T>::QK, nchunks = (nb + Geo<T>::CB - 1) / Geo<T>::CB;
    const int64_t c = (int64_t)blockIdx.x * 4 + warp;
    const int32_t id = ids[t];
    float *o = out + t * n_in;
    if (id < 0 || id >= m.n_out) {
        if (err && blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, TS_CUDA_ERR_TOKEN);
        if (c < nchunks) {
            const int64_t e0 = c * Geo<T>::CB * Dec<T>::QK, e1 = min(n_in, e0 + (int64_t)Geo<T>::CB * Dec<T>::QK);
            for (int64_t e = e0 + lane; e < e1; e += 32) o[e] = 0.0f;
        }
        return;
    }
    if (c >= nchunks) return;
    dequant_chunk<T>(m, id, c, nb, sm[warp], lane, [&](int64_t e, float4 v) {
        *(float4 *)(o + e) = make_float4(fmul_rn(v.x, scale), fmul_rn(v.y, scale), fmul_rn(v.z, scale), fmul_rn(v.w, scale));
    });
}

/* Float-typed embedding: a thread per 4 elements. */
__global__ void __launch_bounds__(128) embed_f(const MvMat m, uint32_t type, int64_t n_in, const int32_t *ids, float scale,
                                               float *out, unsigned *err) {
    ts_pdl_enter();
    const int64_t t = blockIdx.y, e = ((int64_t)blockIdx.x * 128 + threadIdx.x) * 4;
    const int32_t id = ids[t];
    float *o = out + t * n_in;
    if (id < 0 || id >= m.n_out) {
        if (err && blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, TS_CUDA_ERR_TOKEN);
        if (e < n_in) *(float4 *)(o + e) = make_float4(0, 0, 0, 0);
        return;
    }
    if (e >= n_in) return;
    const float4 v = float_row4(type, m.w + (uint64_t)id * m.row_bytes, e);
    *(float4 *)(o + e) = make_float4(fmul_rn(v.x, scale), fmul_rn(v.y, scale), fmul_rn(v.z, scale), fmul_rn(v.w, scale));
}

} // namespace

ts_status ts_cuda_act_mul(void *stream, int act, const float *gate, const float *up, int64_t n, float *out) {
    TS_ARG_CHECK(gate && up && out && n >= 0, "cuda act_mul: NULL pointer or n %lld", (long long)n);
    TS_ARG_CHECK(act == TS_CUDA_ACT_SILU || act == TS_CUDA_ACT_GELU_TANH, "cuda act_mul: activation %d", act);
    if (n == 0) return TS_OK;
    ts_launch(&act_mul_kernel, ew_blocks(n), EW_THREADS, 0, ts_stream(stream))(act, gate, up, n, out);
    TS_CUDA_LAUNCHED("act_mul");
    return TS_OK;
}

ts_status ts_cuda_add(void *stream, float *x, const float *y, int64_t n) { return ew_launch(stream, 0, x, y, 0.0f, n); }
ts_status ts_cuda_scale(void *stream, float *x, const float *y, float a, int64_t n) {
    return ew_launch(stream, 1, x, y, a, n);
}
ts_status ts_cuda_scale_add(void *stream, float *x, const float *y, float a, int64_t n) {
    return ew_launch(stream, 2, x, y, a, n);
}
ts_status ts_cuda_softcap(void *stream, float *x, int64_t n, float cap) {
    TS_ARG_CHECK(cap > 0.0f, "cuda softcap: cap %g must be > 0", (double)cap);
    return ew_launch(stream, 3, x, NULL, cap, n);
}

ts_status ts_cuda_embed(void *stream, const ts_cuda_mat *emb, const int32_t *ids, int n, float scale, float *out,
                        unsigned *err) {
    TS_ARG_CHECK(emb && emb->data && ids && out && n >= 1 && n <= 65535, "cuda embed: NULL pointer or %d ids", n);
    TS_ARG_CHECK(ts_cuda_type_supported(emb->type), "cuda embed: type %s not supported", ts_type_name(emb->type));
    TS_ARG_CHECK(emb->n_in > 0 && emb->n_in % 32 == 0 && emb->n_in % ts_type_get(emb->type)->block_elems == 0 &&
                     emb->row_bytes == ts_type_row_bytes(emb->type, (uint64_t)emb->n_in),
                 "cuda embed: %s rows of %lld elements, %llu bytes", ts_type_name(emb->type), (long long)emb->n_in,
                 (unsigned long long)emb->row_bytes);
    TS_ARG_CHECK(((uintptr_t)emb->data & 15) == 0 && ((uintptr_t)out & 15) == 0,
                 "cuda embed: matrix and output must be 16-byte aligned");
    const MvMat m = {(const uint8_t *)emb->data, emb->row_bytes, emb->n_out, NULL, NULL};
    cudaStream_t s = ts_stream(stream);
    const uint32_t t = emb->type;
    if (t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16) {
        const dim3 grid((unsigned)((emb->n_in / 4 + 127) / 128), (unsigned)n);
        ts_launch(&embed_f, grid, 128, 0, s)(m, t, emb->n_in, ids, scale, out, err);
    } else {
        const int64_t nchunks = (emb->n_in / 32 + 31) / 32;
        const dim3 grid((unsigned)((nchunks + 3) / 4), (unsigned)n);
        switch (t) {
#define Q(T) \
    case T: ts_launch(&embed_q<T>, grid, 128, 0, s)(m, emb->n_in, ids, scale, out, err); break;
            TS_FOR_QTYPES(Q)
#undef Q
        default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda embed: type %s", ts_type_name(t));
        }
    }
    TS_CUDA_LAUNCHED("embed");
    return TS_OK;
}
