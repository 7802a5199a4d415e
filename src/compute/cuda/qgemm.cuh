/* Grouped GEMM on the tensor cores for prefill: quantized weight tiles are
 * dequantized into shared memory as F16 and multiplied with F16 activations
 * by warp-level mma (wmma 16x16x16, float accumulation). The values are the
 * ones ts_cuda_gemm multiplies (ts_dequant_row's, rounded to nearest even),
 * without the F16 copy of the weights in device memory: the weights are read
 * once per (row tile, item) and the dequantized tile lives only in shared
 * memory.
 *
 * Why: a prompt of a MoE model gives each expert a few dozen rows (512
 * tokens x top-8 over 128 experts: 32 on average), too few for cuBLAS per
 * expert (one call per expert and projection: thousands of launches a chunk)
 * and too many for the int8 dp4a items kernel to keep up (bound by dp4a
 * arithmetic, ~14 TOPS on the H200). Tensor cores make the arithmetic cheap;
 * what is left is reading each expert's weights once.
 *
 * Block tile: QG_BM weight rows x QG_BN rows of x (one item, padded with
 * zeros), K in steps of QG_BK = 128 elements: 4 decoder units per weight row
 * (a unit covers 32 elements; the units of one 128-element step always cover
 * exactly that step in every ggml layout: a block of the 32-element types, a
 * half super-block of Q2_K/Q3_K/Q6_K, two 64-element groups of Q4_K/Q5_K).
 * 4 warps, each 32 x 32 of the output (2 x 2 fragments). Each output element
 * depends only on its weight row and its x row, summed over K in the same
 * order whatever the item or tile it falls in: a row's result does not
 * depend on how the rows are grouped (streamed passes group differently).
 *
 * CPU reference (tests/cuda/test_cuda_moe.cu): ts_dequant_row_ref, rounded to
 * F16, times the F16-rounded x, summed in double. */
#ifndef TS_CUDA_QGEMM_CUH
#define TS_CUDA_QGEMM_CUH

#ifndef TS_CUDA_EMU
#include <mma.h>
#endif

#include "compute/cuda/cuda_quant.cuh"

#define QG_BM 64  /* weight rows per block */
#define QG_BN TS_CUDA_MOE_GEMM_ROWS /* x rows per block (an item's rows, at most) */
#define QG_BK 128 /* K per step */
#define QG_LDS (QG_BK + 8) /* shared row stride in halves: rows 16 bytes apart mod 128, so the fragment loads spread over the banks */
#define QG_LDC (QG_BM + 4) /* output staging stride in floats */
#define QG_THREADS 128

/* Shared memory of one block: the two tiles during the K loop, the output
 * tile after it. */
struct QgSmem {
    union {
        struct {
            uint16_t w[QG_BM * QG_LDS]; /* (QG_BM, QG_BK) F16 bits, row stride QG_LDS */
            uint16_t x[QG_BN * QG_LDS]; /* (QG_BN, QG_BK) */
        } t;
        float c[QG_BN * QG_LDC]; /* (QG_BN, QG_BM): c[n * QG_LDC + m] */
    };
};

/* Dequantizes K step k0 (a multiple of QG_BK) of weight rows row0 ..
 * row0 + QG_BM - 1 (those >= n_out as zeros) into s.t.w. Whole block. */
template <int T>
TS_DEV void qg_load_w(QgSmem &s, const uint8_t *wmat, uint64_t row_bytes, int64_t n_out, int64_t row0, int64_t k0) {
    typedef Dec<T> D;
    for (int q = threadIdx.x; q < QG_BM * 4; q += QG_THREADS) {
        const int r = q >> 2, j = q & 3; /* consecutive threads: consecutive units of one row */
        const int64_t row = row0 + r;
        uint16_t *dst = s.t.w + r * QG_LDS;
        if (row >= n_out) {
#pragma unroll
            for (int e = 0; e < 32; e += 4) *(uint2 *)(dst + 32 * j + e) = make_uint2(0, 0);
            continue;
        }
        /* the unit: block and unit index inside it, and where the block starts relative to k0 */
        int64_t blk;
        int u, base;
        if (D::QK == 32) {
            blk = k0 / 32 + j, u = 0, base = 32 * j;
        } else {
            blk = k0 / D::QK;
            u = (int)(k0 % D::QK) / 32 + j;
            base = -(int)(k0 % D::QK);
        }
        typename D::U us;
        const uint8_t *bp = wmat + (uint64_t)row * row_bytes + (uint64_t)blk * D::BB;
        if (row == n_out - 1 && (uint64_t)(blk + 1) * D::BB == row_bytes) {
            /* the matrix's last block: the decoders' unaligned reads take the
             * aligned word after the one they need, past the matrix; decode
             * a copy with slack, at the same offset mod 16 */
            uint4 tail[(D::BB + 16 + 4 + 15) / 16];
            uint8_t *tb = (uint8_t *)tail + ((uintptr_t)bp & 15);
            for (int i = 0; i < D::BB; i++) tb[i] = bp[i];
            D::load(tb, u, us);
        } else {
            D::load(bp, u, us);
        }
#pragma unroll
        for (int p = 0; p < 4; p++) {
            float w[8];
            D::pair(us, u, p, w);
            const int a = base + D::posA(u, p), b = base + D::posB(u, p);
            *(uint2 *)(dst + a) = make_uint2((uint32_t)f2h(w[0]) | (uint32_t)f2h(w[1]) << 16, (uint32_t)f2h(w[2]) | (uint32_t)f2h(w[3]) << 16);
            *(uint2 *)(dst + b) = make_uint2((uint32_t)f2h(w[4]) | (uint32_t)f2h(w[5]) << 16, (uint32_t)f2h(w[6]) | (uint32_t)f2h(w[7]) << 16);
        }
    }
}

/* Copies K step k0 of x rows xrow0 .. xrow0 + nr - 1 (F16, row stride n_in)
 * into s.t.x, rows nr .. QG_BN - 1 as zeros. Whole block. */
TS_DEV void qg_load_x(QgSmem &s, const uint16_t *x, int64_t n_in, int64_t xrow0, int nr, int64_t k0) {
    constexpr int WPR = QG_BK / 8; /* 16-byte words per row */
    for (int q = threadIdx.x; q < QG_BN * WPR; q += QG_THREADS) {
        const int r = q / WPR, c = q % WPR;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < nr) v = *(const uint4 *)(x + (xrow0 + r) * n_in + k0 + 8 * c);
        *(uint4 *)(s.t.x + r * QG_LDS + 8 * c) = v;
    }
}

/* The block's product over all of K: acc (2 x 2 fragments of warp w) =
 * W rows (w / 2) * 32.. x x rows (w % 2) * 32.. */
template <int T>
TS_DEV void qg_tile(QgSmem &s, const uint8_t *wmat, uint64_t row_bytes, int64_t n_out, int64_t row0, const uint16_t *x,
                    int64_t n_in, int64_t xrow0, int nr, float *out, int64_t ld_out, bool zero) {
    using namespace nvcuda;
    const int warp = threadIdx.x >> 5, wr = warp >> 1, wc = warp & 1;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int64_t k0 = 0; k0 < n_in && !zero; k0 += QG_BK) {
        qg_load_w<T>(s, wmat, row_bytes, n_out, row0, k0);
        qg_load_x(s, x, n_in, xrow0, nr, k0);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < QG_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(a[i], (const __half *)(s.t.w + (wr * 32 + 16 * i) * QG_LDS + kk), QG_LDS);
#pragma unroll
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(b[j], (const __half *)(s.t.x + (wc * 32 + 16 * j) * QG_LDS + kk), QG_LDS);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    /* through shared memory, so the stores to y are whole rows of it */
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(s.c + (wc * 32 + 16 * j) * QG_LDC + wr * 32 + 16 * i, acc[i][j], QG_LDC, wmma::mem_col_major);
    __syncthreads();
    for (int q = threadIdx.x; q < nr * QG_BM; q += QG_THREADS) {
        const int n = q / QG_BM, m = q % QG_BM;
        if (row0 + m < n_out) out[(xrow0 + n) * ld_out + row0 + m] = s.c[n * QG_LDC + m];
    }
}

#endif
