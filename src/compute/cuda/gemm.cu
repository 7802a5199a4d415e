/* Prefill GEMM, first version: weight rows dequantized tile by tile to F16 or
 * BF16 in a device scratch (the matvec's staging and decoders, so the values
 * are ts_dequant_row's, then rounded to nearest even), x converted once, and
 * each tile multiplied by cublasGemmEx with float accumulation on the tensor
 * cores. An int8 MMQ-style kernel is the later option; measurement on the
 * H200 decides (bench/cuda/bench_gemm.cu).
 *
 * Layout for cuBLAS (column-major): W rows (n_out, n_in) row-major are a
 * column-major (n_in x n_out) matrix, used transposed; x (n_tok, n_in) is
 * column-major (n_in x n_tok); y (n_tok, n_out) is column-major
 * (n_out x n_tok) with leading dimension n_out, so a tile of rows r0.. is the
 * sub-matrix starting at y + r0. accumulate is beta = 1. */
#include <cublas_v2.h>

#include "compute/cuda/matvec_common.cuh"

namespace {

template <int OUT> TS_DEV void store4(void *dst, int64_t e, float4 v) {
    if (OUT == TS_TYPE_F32) {
        *(float4 *)((float *)dst + e) = v;
    } else if (OUT == TS_TYPE_F16) {
        const uint32_t a = (uint32_t)f2h(v.x) | (uint32_t)f2h(v.y) << 16;
        const uint32_t b = (uint32_t)f2h(v.z) | (uint32_t)f2h(v.w) << 16;
        *(uint2 *)((uint16_t *)dst + e) = make_uint2(a, b);
    } else {
        const uint32_t a = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v.x)) |
                           (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v.y)) << 16;
        const uint32_t b = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v.z)) |
                           (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v.w)) << 16;
        *(uint2 *)((uint16_t *)dst + e) = make_uint2(a, b);
    }
}

TS_HD size_t out_size(int out) { return out == TS_TYPE_F32 ? 4 : 2; }

/* Quantized rows: grid (chunk groups of 4, rows), a warp per chunk. A lane
 * decodes one unit, whose runs of 4 values lie 64 bytes or more apart in the
 * output (a block or a sub-block per lane), so stores straight to global
 * memory would fill a quarter of each 32-byte sector per instruction; the
 * values go to the warp's shared buffer instead and leave as consecutive
 * 16-byte words. (On the H200 the direct stores ran Q4_K/Q4_0/Q8_0 -> F16
 * at ~1 TB/s of traffic against 3.2 for a plain F16 copy.) */
template <int T, int OUT>
__global__ void __launch_bounds__(128) dequant_q(const MvMat m, int64_t row0, int64_t n_in, void *dst) {
    ts_pdl_enter();
    constexpr int OB = OUT == TS_TYPE_F32 ? 4 : 2;
    constexpr int CE = Geo<T>::CB * Dec<T>::QK; /* elements per chunk: 1024 */
    __shared__ __align__(16) uint8_t sm[4][Geo<T>::SROW];
    __shared__ __align__(16) uint8_t so[4][CE * OB];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t nb = n_in / Dec<T>::QK, nchunks = (nb + Geo<T>::CB - 1) / Geo<T>::CB;
    const int64_t c = (int64_t)blockIdx.x * 4 + warp;
    if (c >= nchunks) return;
    const int64_t e0 = c * CE;
    uint8_t *const buf = so[warp];
    dequant_chunk<T>(m, row0 + blockIdx.y, c, nb, sm[warp], lane, [&](int64_t e, float4 v) { store4<OUT>(buf, e - e0, v); });
    __syncwarp();
    /* the chunk's bytes: a multiple of 64 (n_in is a multiple of 32), 16-aligned
     * in dst (rows of n_in values, chunks of CE) */
    const int nbytes = (int)((n_in - e0 < CE ? n_in - e0 : CE) * OB);
    uint8_t *o = (uint8_t *)dst + ((size_t)blockIdx.y * (size_t)n_in + (size_t)e0) * OB;
    for (int k = 16 * lane; k < nbytes; k += 512) *(uint4 *)(o + k) = *(const uint4 *)(buf + k);
}

template <int OUT>
__global__ void __launch_bounds__(128) dequant_f(const MvMat m, uint32_t type, int64_t row0, int64_t n_in, void *dst) {
    ts_pdl_enter();
    const int64_t e = ((int64_t)blockIdx.x * 128 + threadIdx.x) * 4;
    if (e >= n_in) return;
    const float4 v = float_row4(type, m.w + (uint64_t)(row0 + blockIdx.y) * m.row_bytes, e);
    store4<OUT>((uint8_t *)dst + (size_t)blockIdx.y * (size_t)n_in * out_size(OUT), e, v);
}

/* v rounded to OUT (F16 or BF16), as a float */
template <int OUT> TS_DEV float round16(float v) {
    return OUT == TS_TYPE_F16 ? h2f(f2h(v)) : __bfloat162float(__float2bfloat16_rn(v));
}

/* dst = x in OUT; LO: what rounding to OUT left out (x - round16(x)), in OUT */
template <int OUT, bool LO> __global__ void __launch_bounds__(256) convert_kernel(const float *x, int64_t n, void *dst) {
    ts_pdl_enter();
    for (int64_t i = ((int64_t)blockIdx.x * 256 + threadIdx.x) * 4; i < n; i += (int64_t)gridDim.x * 1024) {
        if (i + 4 <= n) {
            float4 v = *(const float4 *)(x + i);
            if (LO) v = make_float4(v.x - round16<OUT>(v.x), v.y - round16<OUT>(v.y), v.z - round16<OUT>(v.z), v.w - round16<OUT>(v.w));
            store4<OUT>(dst, i, v);
        } else {
            for (int64_t j = i; j < n; j++) {
                const float v = LO ? x[j] - round16<OUT>(x[j]) : x[j];
                if (OUT == TS_TYPE_F16) ((uint16_t *)dst)[j] = f2h(v);
                else ((uint16_t *)dst)[j] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
            }
        }
    }
}

__global__ void __launch_bounds__(256) bias_kernel(float *y, const float *bias, int64_t n_out, int64_t n) {
    ts_pdl_enter();
    for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256)
        y[i] = fadd_rn(y[i], bias[i % n_out]);
}

template <int OUT> ts_status dequant_launch(cudaStream_t s, const MvMat &m, uint32_t type, int64_t n_in, int64_t row0,
                                            int64_t n_rows, void *dst) {
    if (type == TS_TYPE_F32 || type == TS_TYPE_F16 || type == TS_TYPE_BF16) {
        ts_launch(&dequant_f<OUT>, dim3((unsigned)((n_in / 4 + 127) / 128), (unsigned)n_rows), 128, 0, s)(m, type, row0, n_in, dst);
    } else {
        const int64_t nchunks = (n_in / 32 + 31) / 32;
        const dim3 grid((unsigned)((nchunks + 3) / 4), (unsigned)n_rows);
        switch (type) {
#define Q(T) \
    case T: ts_launch(&dequant_q<T, OUT>, grid, 128, 0, s)(m, row0, n_in, dst); break;
            TS_FOR_QTYPES(Q)
#undef Q
        default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda dequant: type %s", ts_type_name(type));
        }
    }
    TS_CUDA_LAUNCHED("dequant");
    return TS_OK;
}

ts_status mat_check(const char *who, const ts_cuda_mat *w) {
    TS_ARG_CHECK(w && w->data, "%s: NULL matrix", who);
    TS_ARG_CHECK(ts_cuda_type_supported(w->type), "%s: type %s not supported", who, ts_type_name(w->type));
    TS_ARG_CHECK(w->n_in > 0 && w->n_in % 32 == 0 && w->n_in % ts_type_get(w->type)->block_elems == 0 && w->n_out > 0 &&
                     w->row_bytes == ts_type_row_bytes(w->type, (uint64_t)w->n_in),
                 "%s: %s matrix %lld x %lld with %llu-byte rows", who, ts_type_name(w->type), (long long)w->n_out,
                 (long long)w->n_in, (unsigned long long)w->row_bytes);
    TS_ARG_CHECK(((uintptr_t)w->data & 15) == 0, "%s: matrix not 16-byte aligned", who);
    return TS_OK;
}

const char *cublas_name(cublasStatus_t st) { return cublasGetStatusString(st); }

/* x in 16 bits; for F16/BF16 weights (multiplied in place) also its
 * rounding residual: x = hi + lo to ~22 (F16) or ~16 (BF16) bits, two GEMMs,
 * so the activations lose about what the CPU's F32 path loses (a 16-bit x
 * alone cost a tiny F16 fixture's prefill a KL of 1.0e-4 against the CPU) */
size_t x_bytes1(const ts_cuda_mat *w, int n_tok) { return ((size_t)n_tok * (size_t)w->n_in * 2 + 255) & ~(size_t)255; }
bool x_split(const ts_cuda_mat *w) { return w->type == TS_TYPE_F16 || w->type == TS_TYPE_BF16; }
size_t x_bytes(const ts_cuda_mat *w, int n_tok) { return x_bytes1(w, n_tok) * (x_split(w) ? 2 : 1); }

/* Rows per dequantized tile. Tiles start at multiples of 128 rows and are
 * near equal: a tile of 1,013 rows (what 32 MiB of scratch held of the 7B's
 * ffn_down, n_in 18944) put its output at y + 1013 floats, a 4-byte-aligned
 * C, and cuBLAS answered with an sm75 align1 kernel with split-K: 214 us a
 * tile where an aligned one takes ~40, half of a pp512 (ncu, H200, session
 * 14). 128 keeps every C 512-byte aligned and the tiles whole
 * multiples of the GEMMs' own tiles. */
int64_t gemm_tile_rows(const ts_cuda_mat *w, int n_tok, size_t scratch_bytes) {
    int64_t room = (int64_t)((scratch_bytes - x_bytes(w, n_tok)) / ((size_t)w->n_in * 2));
    if (room > 65535) room = 65535; /* grid y of the dequantizer */
    if (room >= w->n_out) return w->n_out;
    room &= ~(int64_t)127; /* >= 128: ts_cuda_gemm_scratch_min */
    const int64_t n_tiles = (w->n_out + room - 1) / room;
    const int64_t even = (w->n_out + n_tiles - 1) / n_tiles;
    return (even + 127) & ~(int64_t)127; /* <= room: room is a multiple of 128 and >= even */
}

} // namespace

ts_status ts_cuda_dequant(void *stream, const ts_cuda_mat *w, int64_t row0, int64_t n_rows, void *dst, uint32_t dst_type) {
    ts_status st = mat_check("cuda dequant", w);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(dst && ((uintptr_t)dst & 15) == 0, "cuda dequant: NULL or unaligned output");
    TS_ARG_CHECK(row0 >= 0 && n_rows >= 1 && row0 + n_rows <= w->n_out && n_rows <= 65535,
                 "cuda dequant: rows %lld..+%lld of %lld (at most 65535 per call)", (long long)row0, (long long)n_rows,
                 (long long)w->n_out);
    const MvMat m = {(const uint8_t *)w->data, w->row_bytes, w->n_out, NULL, NULL};
    cudaStream_t s = ts_stream(stream);
    switch (dst_type) {
    case TS_TYPE_F32: return dequant_launch<TS_TYPE_F32>(s, m, w->type, w->n_in, row0, n_rows, dst);
    case TS_TYPE_F16: return dequant_launch<TS_TYPE_F16>(s, m, w->type, w->n_in, row0, n_rows, dst);
    case TS_TYPE_BF16: return dequant_launch<TS_TYPE_BF16>(s, m, w->type, w->n_in, row0, n_rows, dst);
    default: return ts_fail(TS_ERR_ARG, "cuda dequant: output type %s (F32, F16, BF16)", ts_type_name(dst_type));
    }
}

ts_status ts_cuda_convert_f32(void *stream, const float *x, int64_t n, void *dst, uint32_t dst_type) {
    TS_ARG_CHECK(x && dst && n >= 1 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)dst & 7) == 0,
                 "cuda convert: NULL or unaligned pointer, or n %lld", (long long)n);
    int64_t blocks = (n + 1023) / 1024;
    if (blocks > 65536) blocks = 65536;
    if (dst_type == TS_TYPE_F16) ts_launch(&convert_kernel<TS_TYPE_F16, false>, (unsigned)blocks, 256, 0, ts_stream(stream))(x, n, dst);
    else if (dst_type == TS_TYPE_BF16) ts_launch(&convert_kernel<TS_TYPE_BF16, false>, (unsigned)blocks, 256, 0, ts_stream(stream))(x, n, dst);
    else return ts_fail(TS_ERR_ARG, "cuda convert: output type %s (F16, BF16)", ts_type_name(dst_type));
    TS_CUDA_LAUNCHED("convert");
    return TS_OK;
}

size_t ts_cuda_gemm_scratch_min(const ts_cuda_mat *w, int n_tok) {
    if (!w || w->n_in <= 0 || n_tok < 1) return 0;
    return x_bytes(w, n_tok) + (size_t)128 * (size_t)w->n_in * 2;
}

ts_status ts_cuda_gemm(void *stream, void *cublas, const ts_cuda_mat *w, float *y, const float *x, int n_tok,
                       uint32_t compute_type, bool accumulate, void *scratch, size_t scratch_bytes) {
    ts_status st = mat_check("cuda gemm", w);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(cublas && y && x && n_tok >= 1, "cuda gemm: NULL handle, y or x, or %d tokens", n_tok);
    TS_ARG_CHECK(compute_type == TS_TYPE_F16 || compute_type == TS_TYPE_BF16, "cuda gemm: compute type %s (F16, BF16)",
                 ts_type_name(compute_type));
    TS_ARG_CHECK(w->n_in < (1ll << 31) && w->n_out < (1ll << 31), "cuda gemm: matrix too large for cuBLAS int sizes");
    const size_t need = ts_cuda_gemm_scratch_min(w, n_tok);
    TS_ARG_CHECK(scratch && ((uintptr_t)scratch & 255) == 0 && scratch_bytes >= need,
                 "cuda gemm: scratch %zu bytes (256-aligned) given, at least %zu needed", scratch_bytes, need);
    cudaStream_t s = ts_stream(stream);
    cublasHandle_t h = (cublasHandle_t)cublas;
    cublasStatus_t cs = cublasSetStream(h, s);
    if (cs != CUBLAS_STATUS_SUCCESS) return ts_fail(TS_ERR_DEVICE, "cuda gemm: cublasSetStream: %s", cublas_name(cs));

    const float one = 1.0f, zero = 0.0f;
    if (w->type == TS_TYPE_F32) {
        /* F32 weights are multiplied as they are, in F32 (no TF32): rounding
         * them to 16 bits would lose what the file holds */
        cs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n_out, n_tok, (int)w->n_in, &one, w->data, CUDA_R_32F,
                          (int)w->n_in, x, CUDA_R_32F, (int)w->n_in, accumulate ? &one : &zero, y, CUDA_R_32F, (int)w->n_out,
                          CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) return ts_fail(TS_ERR_DEVICE, "cuda gemm: cublasGemmEx (f32): %s", cublas_name(cs));
    }
    uint8_t *xs = (uint8_t *)scratch, *ws = xs + x_bytes(w, n_tok);
    if (w->type != TS_TYPE_F32) st = ts_cuda_convert_f32(stream, x, (int64_t)n_tok * w->n_in, xs, compute_type);
    if (st != TS_OK) return st;
    int64_t tile = gemm_tile_rows(w, n_tok, scratch_bytes);
    const cudaDataType_t dt = compute_type == TS_TYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    if (w->type == compute_type) {
        /* the weights are already what the tensor cores take: no copy; x as
         * hi + lo (x_bytes): W x_hi, then W x_lo added */
        uint8_t *xlo = xs + x_bytes1(w, n_tok);
        const int64_t n = (int64_t)n_tok * w->n_in;
        int64_t blocks = (n + 1023) / 1024;
        if (blocks > 65536) blocks = 65536;
        if (compute_type == TS_TYPE_F16) ts_launch(&convert_kernel<TS_TYPE_F16, true>, (unsigned)blocks, 256, 0, s)(x, n, xlo);
        else ts_launch(&convert_kernel<TS_TYPE_BF16, true>, (unsigned)blocks, 256, 0, s)(x, n, xlo);
        TS_CUDA_LAUNCHED("convert (residual)");
        for (int part = 0; part < 2; part++) {
            cs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n_out, n_tok, (int)w->n_in, &one, w->data, dt, (int)w->n_in,
                              part ? xlo : xs, dt, (int)w->n_in, accumulate || part ? &one : &zero, y, CUDA_R_32F, (int)w->n_out,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (cs != CUBLAS_STATUS_SUCCESS) return ts_fail(TS_ERR_DEVICE, "cuda gemm: cublasGemmEx (in place): %s", cublas_name(cs));
        }
    }
    for (int64_t r0 = 0; r0 < w->n_out && w->type != TS_TYPE_F32 && w->type != compute_type; r0 += tile) {
        const int64_t mt = w->n_out - r0 < tile ? w->n_out - r0 : tile;
        st = ts_cuda_dequant(stream, w, r0, mt, ws, compute_type);
        if (st != TS_OK) return st;
        cs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)mt, n_tok, (int)w->n_in, &one, ws, dt, (int)w->n_in, xs, dt,
                          (int)w->n_in, accumulate ? &one : &zero, y + r0, CUDA_R_32F, (int)w->n_out, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) return ts_fail(TS_ERR_DEVICE, "cuda gemm: cublasGemmEx: %s", cublas_name(cs));
    }
    if (w->bias) {
        const int64_t n = (int64_t)n_tok * w->n_out;
        int64_t blocks = (n + 255) / 256;
        if (blocks > 65536) blocks = 65536;
        ts_launch(&bias_kernel, (unsigned)blocks, 256, 0, s)(y, w->bias, w->n_out, n);
        TS_CUDA_LAUNCHED("gemm bias");
    }
    return TS_OK;
}
