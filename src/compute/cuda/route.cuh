/* One token's MoE routing by one warp: ts_cuda_moe_route's kernel and the
 * routing folded into the activation quantization (ts_cuda_quantize_q8_route)
 * run this same code, so their ids and weights are the same bits.
 *
 * k rounds of a warp arg-max (value, then the lower id: ts_topk's order)
 * pick the ids; the weights are computed as ts_moe_route_row computes them:
 * exp(r - max) in double, the normalizer summed sequentially by one lane (all
 * n_expert in ascending id order, or the k in rank order with renorm), the
 * quotient rounded to float. */
#pragma once
#include <limits.h>

#include "compute/cuda/cuda_common.cuh"

#define ROUTE_MAX_EXPERT 1024 /* 32 per lane: one bit each in a lane's `taken` word */

/* Whole warp (lane = its lane): row (n_expert logits) -> ids (k), w (k).
 * ew (n_expert doubles), sel (k ints) and den: the warp's shared scratch. */
TS_DEV void route_warp(const float *row, int n_expert, int k, int renorm, int32_t *ids, float *w,
                             double *ew, int *sel, double *den, int lane) {
    /* lane owns experts lane + 32 j; bit j of `taken`: already chosen */
    uint32_t taken = 0;
    for (int round = 0; round < k; round++) {
        float bv = -INFINITY;
        int bi = INT_MAX;
        for (int j = 0, e = lane; e < n_expert; j++, e += 32) {
            float v = row[e];
            if (v != v) v = -INFINITY; /* NaN ranks last (ts_topk may rank it elsewhere: documented) */
            if (!((taken >> j) & 1u) && (v > bv || (v == bv && e < bi))) bv = v, bi = e;
        }
        /* (value desc, id asc) is a total order over distinct ids, so every
         * lane ends with the same winner; k <= n_expert leaves one untaken
         * expert at least, so the winner is a real id */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
        }
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (lane == 0) sel[round] = bi;
    }
    __syncwarp();
    /* ts_moe_route_row: mx = r[ids[0]], terms exp((double)r[e] - mx) */
    const double mx = (double)row[sel[0]];
    for (int e = lane; e < n_expert; e += 32) ew[e] = exp((double)row[e] - mx);
    __syncwarp();
    if (lane == 0) {
        /* the CPU's sums, in its order: one lane, sequentially */
        double z = 0, s = 0;
        if (renorm) {
            for (int i = 0; i < k; i++) s += ew[sel[i]];
        } else {
            for (int e = 0; e < n_expert; e++) z += ew[e];
        }
        *den = renorm ? s : z;
    }
    __syncwarp();
    if (lane < k) {
        const int id = sel[lane];
        ids[lane] = id;
        w[lane] = (float)(ew[id] / *den);
    }
}
