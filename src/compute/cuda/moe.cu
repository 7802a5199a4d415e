/* Routed experts (MoE): routing, the experts' matrix-vector products and the
 * weighted combination, with the selected ids kept in device memory so a
 * decode token of a MoE model stays one CUDA graph (cuda_kernels.h, section 7).
 *
 * Routing (ts_cuda_moe_route): a warp per token, its logits read once into
 * registers as order-preserving keys; k rounds of a warp arg-max (value, then
 * the lower id: ts_topk's order; two redux instructions a round) pick the ids,
 * then the weights are computed as ts_moe_route_row computes them: exp(r -
 * max) in double, the normalizer summed sequentially (all n_expert in
 * ascending id order, or the k in rank order with renorm, the terms passed
 * lane to lane by shuffles), the quotient rounded to float.
 * The same operations in the same order, so the weights equal the CPU's
 * wherever the device exp() and glibc's round alike (both within 1 ulp in
 * double; a float weight can differ only when that ulp straddles a float
 * rounding boundary).
 *
 * Expert matvecs (ts_cuda_moe_matvec, ts_cuda_moe_matvec_q8): grid.y is the
 * n_set * k matrices of the call (set s, rank i), each block reads ids[i] and
 * its expert's matrix pointer from the table on the device. Within a matrix
 * the work is the dense matvec's: row groups of MOE_R rows, a chunk = 32
 * units of 32 elements (one per lane), decoded by the cuda_quant.cuh
 * decoders: the F32 path with Dec<T>::load/pair (weights bit-identical to
 * ts_dequant_row), the int8 path with Dec<T>::iload/idot and XSide<T> as
 * mv_q_q8 does (the CPU's integer structure; a row equals the dense int8
 * matvec's up to the order of the float additions). Weights are read with
 * 16-byte loads that bypass L1: Q4_K and Q5_K (int8 path) straight into the
 * lane's registers (their super-blocks are 16-byte aligned), every other
 * type coalesced through the warp's shared staging buffer (the 18-, 34-,
 * 210-byte blocks are not); F32/F16/BF16 rows directly, 8 elements per lane.
 *
 * One warp takes a run of `gpt` consecutive row groups of one matrix and
 * keeps the next item's loads (an item = MOE_R rows x one chunk) in flight
 * while it decodes the current one, across group boundaries; the grid is
 * sized from the SM count so that the runs of all matrices fill about
 * MOE_SM_WARPS warps per SM once. No shared reductions: a warp owns whole
 * rows (the decode shapes have thousands of rows per call, so splitting a
 * row between warps buys nothing), adds its lanes with a butterfly and
 * writes them. An id outside [0, n_expert) zeroes the rows of its matrix and
 * sets TS_CUDA_ERR_EXPERT.
 *
 * x_per_expert: rank i reads activation row i; with int8 activations the q8
 * buffer must hold exactly k rows (ts_cuda_quantize_q8 with n_tok = k): its
 * parts' offsets depend on the row count.
 *
 * Grouped (ts_cuda_moe_matvec_q8_items, prefill): the matrices are the
 * n_set * n_item (set, item) pairs, grid (matrices, runs) so the item count
 * is not bound by grid.y; an item is 1..MOE_NT activation rows of one
 * expert, and the same walk decodes each weight unit once and dots it with
 * every row of the item (moe_q8<T, MOE_NT>, rows counted at run time), so an
 * expert's bytes are read once per item. The group's MOE_R x MOE_NT sums
 * are reduced with one halving butterfly (warp_sum_n).
 *
 * Combination, gather, gated add: element-wise with the CPU's operations in
 * its order and no FMA contraction (the CPU's scale then scale_add), so the
 * results are bit-identical to the CPU ops' (the gated add up to the device
 * expf in its sigmoid). */
#include <limits.h>

#include "compute/cuda/matvec_common.cuh"
#include "compute/cuda/qgemm.cuh"

namespace {

/* ------------------------------------------------------------ routing */

#define ROUTE_WARPS 4          /* tokens per block (a warp each) */
#define ROUTE_MAX_EXPERT 1024  /* 32 per lane */

/* A logit as an unsigned key with the floats' order, so one redux finds a
 * warp's maximum: -0 is read as +0 (ts_topk compares them equal: the lower id
 * first), NaN as -inf (it ranks last; ts_topk may rank it elsewhere:
 * cuda_kernels.h); -inf's key is 0x007fffff, and key 0 is below every logit
 * (taken, or no expert). */
TS_DEV unsigned route_key(float v) {
    if (v != v) v = -INFINITY;
    if (v == 0.0f) v = 0.0f;
    const unsigned u = __float_as_uint(v);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}
TS_DEV float route_val(unsigned key) { return __uint_as_float(key & 0x80000000u ? key & 0x7fffffffu : ~key); }

/* Grid (tokens / ROUTE_WARPS), ROUTE_WARPS warps: warp = token; PL logits a
 * lane (n_expert <= 32 PL), expert lane + 32 j in key[j], read once. */
template <int PL>
__global__ void __launch_bounds__(ROUTE_WARPS * 32) moe_route_kernel(const float *r, int n_tok, int n_expert, int k,
                                                                      int renorm, int32_t *ids, float *w) {
    ts_pdl_enter();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = (int64_t)blockIdx.x * ROUTE_WARPS + warp;
    if (t >= n_tok) return; /* warp-uniform; no block barrier below */
    const float *row = r + t * n_expert;
    unsigned key[PL];
#pragma unroll
    for (int j = 0; j < PL; j++) key[j] = lane + 32 * j < n_expert ? route_key(row[lane + 32 * j]) : 0u;
    /* k rounds of the warp's (value desc, id asc) maximum: a total order over
     * distinct ids, so every lane gets the same winner; k <= n_expert leaves an
     * untaken expert (key > 0) in every round. Lane i keeps rank i. */
    int my_id = 0;
    unsigned my_key = 0, top = 0;
    for (int round = 0; round < k; round++) {
        unsigned bk = 0;
        int bj = 0;
#pragma unroll
        for (int j = 0; j < PL; j++)
            if (key[j] > bk) bk = key[j], bj = j; /* strict: the lane's lowest id of its best value */
        const unsigned mk = __reduce_max_sync(0xffffffffu, bk);
        const int bi = (int)__reduce_min_sync(0xffffffffu, bk == mk ? (unsigned)(lane + 32 * bj) : UINT_MAX);
        if ((bi & 31) == lane)
#pragma unroll
            for (int j = 0; j < PL; j++)
                if (j == bi >> 5) key[j] = 0;
        if (round == 0) top = mk;
        if (round == lane) my_id = bi, my_key = mk;
    }
    /* ts_moe_route_row: mx = r[ids[0]], terms exp((double)r[e] - mx), the
     * normalizer summed in its order (every lane the same sum) */
    const double mx = (double)route_val(top);
    const double ew = lane < k ? exp((double)route_val(my_key) - mx) : 0.0;
    double den = 0;
    if (renorm) {
        for (int i = 0; i < k; i++) den += __shfl_sync(0xffffffffu, ew, i);
    } else {
#pragma unroll
        for (int j = 0; j < PL; j++) {
            if (32 * j >= n_expert) break; /* warp-uniform */
            const int e = lane + 32 * j;
            const double ej = e < n_expert ? exp((double)row[e] - mx) : 0.0;
            for (int l = 0; l < 32 && 32 * j + l < n_expert; l++) den += __shfl_sync(0xffffffffu, ej, l);
        }
    }
    if (lane < k) {
        ids[t * k + lane] = my_id;
        w[t * k + lane] = (float)(ew / den);
    }
}

/* ------------------------------------------------------------ expert matvecs */

/* Knobs (-D overrides). */
#ifndef MOE_WARPS
#define MOE_WARPS 4 /* warps per block */
#endif
#ifndef MOE_R
#define MOE_R 2 /* rows per group: each activation load serves MOE_R rows */
#endif
#ifndef MOE_SM_WARPS
/* int8 path: resident warps per SM the grid is sized for, in whole blocks;
 * also the launch bounds' minimum blocks (24 warps of 4-warp blocks: 80
 * registers; no spills with sm_90a / nvcc 13 but Q5_K's, below) */
#define MOE_SM_WARPS 24
#endif
#ifndef MOE_SM_WARPS_F
/* the same for the F32 path (16: 128 registers; its decoded pairs are
 * wider, and at 80 registers Q4_K..Q6_K and Q8_0 spilled) */
#define MOE_SM_WARPS_F 16
#endif
#ifndef MOE_SM_WARPS_I
/* the same for the grouped int8 path (items of up to MOE_NT rows: 2 x 8
 * accumulators and every row's decoded unit live; 16: 128 registers; with
 * sm_90a / nvcc 13 100-122 used, no spills; Q5_K 128 and 28 bytes spilled) */
#define MOE_SM_WARPS_I 16
#endif
#define MOE_NT TS_CUDA_MAX_DECODE_TOK /* grouped path: activation rows per item at most (registers) */
#ifndef MOE_DIRECT_Q5K
/* int8 path, Q5_K: 1 = direct 16-byte loads into registers (as Q4_K always),
 * 0 = staged. Direct spills 12 bytes at 80 registers (sm_90a, nvcc 13) yet
 * measured faster on the H200: 30B-A3B gate_up 11.3 us against 14.1, down
 * 9.2 against 10.5 */
#define MOE_DIRECT_Q5K 1
#endif

static_assert(MOE_WARPS >= 1 && MOE_WARPS <= 32, "MOE_WARPS: 1..32");
static_assert(MOE_R >= 1 && MOE_R <= 32, "MOE_R: 1..32 (a lane writes each row)");
static_assert(MOE_SM_WARPS >= MOE_WARPS && MOE_SM_WARPS_F >= MOE_WARPS && MOE_SM_WARPS_I >= MOE_WARPS,
              "MOE_SM_WARPS(_F, _I) >= MOE_WARPS");
static_assert(MOE_R * MOE_NT <= 32 && (MOE_R * MOE_NT & (MOE_R * MOE_NT - 1)) == 0,
              "MOE_R * MOE_NT: a power of 2 <= 32 (warp_sum_n)");

/* One set (projection) of a launch. */
struct MoeSet {
    const void *const *table; /* (n_expert) device pointers: expert e's (n_out, rb) matrix */
    int n_expert;             /* table entries */
    int n_out;                /* rows per expert (< 2^31, checked on the host) */
    uint32_t rb;              /* bytes per row (< 2^32, checked on the host) */
    float *y;                 /* (k or n_rows, n_out): row i = rank i's product (grouped: row r's) */
};

/* A launch: the sets of one weight type, matrix blockIdx.y = s * k + i
 * (grouped: blockIdx.x = s * k + j, item j). */
struct MoeArgs {
    MoeSet set[2];        /* sets of this launch (set[1] unused with one) */
    const int32_t *ids;   /* (k) expert id of each rank, device memory */
    const int32_t *items; /* grouped: (k, 3) {expert id, first row, rows}, device memory (ids unused) */
    int n_rows;           /* grouped: activation and output rows */
    int k;                /* ranks (grouped: items) per set */
    int gpt;            /* row groups per warp (a run) */
    int64_t n_in;       /* elements per row, shared by the sets */
    int x_per_expert;   /* activation row of rank i: i (1) or 0 (0) */
    /* F32 activations */
    const float *x;     /* (1 or k, n_in) */
    /* int8 activations (q8_layout of 1 or k rows) */
    const int8_t *xq;   /* (1 or k, n_in) quants */
    const float *xd;    /* (1 or k, nd) scales */
    const int32_t *xs;  /* (1 or k, ns) sums */
    int64_t nd, ns;     /* scales and sums per activation row */
    unsigned *err;      /* TS_CUDA_ERR_EXPERT, or NULL */
};

/* A warp's part of a launch: its expert's matrix and its run of groups. */
struct MoeRun {
    const uint8_t *w; /* the expert's (n_out, rb) matrix */
    int n_out;        /* rows */
    uint32_t rb;      /* bytes per row */
    float *y;         /* (nt, n_out) this rank's (item's) output rows */
    int64_t xrow;     /* the rank's (item's first) activation row */
    int nt;           /* activation and output rows: 1, grouped 1..MOE_NT */
    int g0, ng;       /* first row group, groups (>= 1) */
};

/* Fills the warp's run of block bx of a matrix of set S (its nt output rows
 * from yrow, activation rows from xrow, expert *idp); false when it has
 * nothing to compute: no groups left, or an id outside the table (its rows
 * written as 0, the error bit set once per matrix). Warp-uniform (the block
 * shares the matrix). */
TS_DEV bool moe_run_at(const MoeArgs &a, const MoeSet &S, int64_t bx, const int32_t *idp, int64_t yrow, int64_t xrow,
                       int nt, int warp, int lane, MoeRun &run) {
    const int64_t groups = (S.n_out + MOE_R - 1) / MOE_R;
    const int64_t g0 = (bx * MOE_WARPS + warp) * a.gpt;
    if (g0 >= groups) return false;
    run.g0 = (int)g0;
    run.ng = (int)(groups - g0 < a.gpt ? groups - g0 : a.gpt);
    run.n_out = S.n_out;
    run.rb = S.rb;
    run.y = S.y + yrow * S.n_out;
    run.xrow = xrow;
    run.nt = nt;
    const int32_t id = *idp;
    if (id < 0 || id >= S.n_expert) {
        const int r1 = (run.g0 + run.ng) * MOE_R < S.n_out ? (run.g0 + run.ng) * MOE_R : S.n_out;
        for (int t = 0; t < nt; t++)
            for (int r = run.g0 * MOE_R + lane; r < r1; r += 32) run.y[(int64_t)t * S.n_out + r] = 0.0f;
        if (a.err && g0 == 0 && lane == 0) atomicOr(a.err, TS_CUDA_ERR_EXPERT);
        return false;
    }
    run.w = (const uint8_t *)S.table[id];
    return true;
}

/* Rank i = blockIdx.y - s * k of set s, its activation row i (x_per_expert) or 0. */
TS_DEV bool moe_run(const MoeArgs &a, int warp, int lane, MoeRun &run) {
    const int mi = blockIdx.y, s = mi / a.k, i = mi - s * a.k;
    /* the set's fields once (a runtime index into the parameters would keep both sets live) */
    const MoeSet S = s ? a.set[1] : a.set[0];
    return moe_run_at(a, S, blockIdx.x, a.ids + i, i, a.x_per_expert ? i : 0, 1, warp, lane, run);
}

/* Grouped: item j = blockIdx.x - s * k of set s, its rows' activations and
 * outputs. An item whose rows are not 1..MOE_NT inside [0, n_rows) is
 * skipped (nothing written) with TS_CUDA_ERR_EXPERT. */
TS_DEV bool moe_run_items(const MoeArgs &a, int warp, int lane, MoeRun &run) {
    const int64_t mi = blockIdx.x;
    const int s = mi >= a.k;
    const int64_t j = mi - (int64_t)s * a.k;
    const MoeSet S = s ? a.set[1] : a.set[0];
    const int32_t *it = a.items + 3 * j;
    const int32_t r0 = it[1], nt = it[2];
    if (nt < 1 || nt > MOE_NT || r0 < 0 || r0 > a.n_rows - nt) {
        if (a.err && blockIdx.y == 0 && warp == 0 && lane == 0) atomicOr(a.err, TS_CUDA_ERR_EXPERT);
        return false;
    }
    return moe_run_at(a, S, blockIdx.y, it, r0, r0, nt, warp, lane, run);
}

/* Loaders of a walk item (MOE_R rows x one chunk of 32 units): load() issues
 * the item's 16-byte loads into registers, stage() makes them readable for
 * the decode (whole warp), iload()/load() give a lane's unit of row r. RING:
 * loaders the walk cycles through, 1 when stage() frees the registers (the
 * next item's loads then go into the same loader), 2 when the decode reads
 * them (the next item's loads go into the other).
 *
 * Staged (any type): the chunk's bytes from the 16-aligned address at or
 * below its start, consecutive lanes on consecutive words (coalesced for the
 * 18-, 34-, 210-byte blocks too), realigned through the warp's shared buffer
 * (MOE_R * Geo<T>::SROW bytes); a word that passes the matrix end is read
 * byte by byte (nothing outside the matrix is touched). */
template <int T> struct MStaged {
    typedef Dec<T> D;
    typedef Geo<T> G;
    static constexpr int SMEM = MOE_R * G::SROW, RING = 1; /* SMEM: shared bytes per warp */
    uint4 v[MOE_R][G::WPL];
    int dn[MOE_R]; /* per row: chunk start - its 16-aligned base (bits 0-3), words loaded (bits 4-) */
    int dl[MOE_R]; /* the staged item's chunk start - base, per row (dn is the next item's by then) */

    TS_DEV void load(const MoeRun &run, int row0, int nr, int c, int nb, int lane) {
        const uint8_t *end = run.w + (size_t)run.n_out * run.rb;
        q_item_words<T, MOE_R>(run.w + (size_t)row0 * run.rb, (uint32_t)run.rb, end, nr, c, nb, lane, dn,
                               [&](int r, int i, int, const uint8_t *p, auto inside) {
                                   v[r][i] = decltype(inside)::value ? ldw16(p) : ld_weight_word(p, end);
                               });
    }
    TS_DEV void stage(uint8_t *sm, int nr, int lane) {
        __syncwarp(); /* every lane is done with the previous item's bytes */
#pragma unroll
        for (int r = 0; r < MOE_R; r++) {
            dl[r] = dn[r] & 15;
            if (r >= nr) continue;
#pragma unroll
            for (int i = 0; i < G::WPL; i++) {
                const int k = lane + 32 * i;
                if (k < dn[r] >> 4) *(uint4 *)(sm + r * G::SROW + 16 * k) = v[r][i];
            }
        }
        __syncwarp();
    }
    TS_DEV const uint8_t *at(const uint8_t *sm, int r, int lane) const {
        return sm + r * G::SROW + dl[r] + (lane / D::NU) * D::BB;
    }
    /* a template: the types without an int8 path have no D::UI */
    template <typename UI> TS_DEV void iload(const uint8_t *sm, int r, int lane, int u, UI &s) const {
        D::iload(at(sm, r, lane), u, s);
    }
    TS_DEV void load(const uint8_t *sm, int r, int lane, int u, typename D::U &s) const {
        D::load(at(sm, r, lane), u, s);
    }
};

/* Direct (Q4_K, Q5_K, int8 path): their super-blocks are 16-byte aligned in a
 * row, so each lane loads its unit's words (header, quants, Q5_K's high
 * bits) straight into registers and decodes them there (iload_w: the same
 * integers as iload); no shared memory, no warp synchronization. */
template <int T> struct MDirect;
template <> struct MDirect<TS_TYPE_Q4_K> {
    typedef Dec<TS_TYPE_Q4_K> D;
    static constexpr int SMEM = 16, RING = 2;
    uint4 hd[MOE_R], q[MOE_R];
    TS_DEV void load(const MoeRun &run, int row0, int nr, int c, int nb, int lane) {
        const int bl = c * Geo<TS_TYPE_Q4_K>::CB + lane / D::NU, u = lane % D::NU;
        if (bl >= nb) return;
#pragma unroll
        for (int r = 0; r < MOE_R; r++) {
            if (r >= nr) continue;
            const uint8_t *b = run.w + (size_t)(row0 + r) * run.rb + (size_t)bl * D::BB;
            hd[r] = ldw16(b);
            q[r] = ldw16(b + D::qoff(u));
        }
    }
    TS_DEV void stage(uint8_t *, int, int) {}
    TS_DEV void iload(const uint8_t *, int r, int, int u, D::UI &s) const { D::iload_w(hd[r], q[r], K4Sel(u), s); }
};
#if MOE_DIRECT_Q5K /* unused otherwise, and -Werror refuses unused members */
template <> struct MDirect<TS_TYPE_Q5_K> {
    typedef Dec<TS_TYPE_Q5_K> D;
    static constexpr int SMEM = 16, RING = 2;
    uint4 hd[MOE_R], h[MOE_R], q[MOE_R];
    TS_DEV void load(const MoeRun &run, int row0, int nr, int c, int nb, int lane) {
        const int bl = c * Geo<TS_TYPE_Q5_K>::CB + lane / D::NU, u = lane % D::NU;
        if (bl >= nb) return;
#pragma unroll
        for (int r = 0; r < MOE_R; r++) {
            if (r >= nr) continue;
            const uint8_t *b = run.w + (size_t)(row0 + r) * run.rb + (size_t)bl * D::BB;
            hd[r] = ldw16(b);
            h[r] = ldw16(b + D::hoff(u));
            q[r] = ldw16(b + D::qoff(u));
        }
    }
    TS_DEV void stage(uint8_t *, int, int) {}
    TS_DEV void iload(const uint8_t *, int r, int, int u, D::UI &s) const { D::iload_w(hd[r], h[r], q[r], u, K4Sel(u), s); }
};
#endif

/* The int8 path's loader of a type. */
template <int T, bool DIRECT = (T == TS_TYPE_Q4_K || (MOE_DIRECT_Q5K && T == TS_TYPE_Q5_K))> struct MQ8Loader {
    typedef MStaged<T> L;
};
template <int T> struct MQ8Loader<T, true> {
    typedef MDirect<T> L;
};

/* Walks a quantized run item by item (group x chunk) with a ring of L::RING
 * loaders: the item's bytes are staged, the next item's loads issued, then
 * unit(cur, buf, nr, bl, u, acc) runs for the lanes with a block (bl: block
 * index in the row, u: unit in the block), so one item's loads are in flight
 * while the warp decodes, across group boundaries; each row's butterfly sum
 * is written when its last chunk is done. NT > 1 (grouped): acc[r][t] of the
 * run's nt activation rows t, output row t at run.y + t * n_out. Whole warp. */
template <int T, typename L, int NT = 1, typename Unit>
TS_DEV void moe_walk_q(const MoeRun &run, int64_t n_in, uint8_t *buf, int lane, Unit unit) {
    typedef Dec<T> D;
    typedef Geo<T> G;
    constexpr int R = MOE_R;
    const int nb = (int)(n_in / D::QK), nch = (nb + G::CB - 1) / G::CB, nitems = run.ng * nch;
    L ring[L::RING];
    int lg = 0, lc = 0; /* load cursor: group of the run, chunk */
    auto issue = [&](L &st) {
        const int row0 = (run.g0 + lg) * R;
        st.load(run, row0, run.n_out - row0 < R ? run.n_out - row0 : R, lc, nb, lane);
        if (++lc == nch) lc = 0, lg++;
    };
    issue(ring[0]);
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    int cg = 0, cc = 0; /* decode cursor */
#pragma unroll 1
    for (int it = 0; it < nitems; it += 2) {
#pragma unroll
        for (int s = 0; s < 2; s++) {
            if (it + s >= nitems) break; /* warp-uniform */
            const int row0 = (run.g0 + cg) * R, nr = run.n_out - row0 < R ? run.n_out - row0 : R;
            L &cur = ring[L::RING == 1 ? 0 : s];
            cur.stage(buf, nr, lane);
            if (it + s + 1 < nitems) issue(ring[L::RING == 1 ? 0 : s ^ 1]);
            const int bl = cc * G::CB + lane / D::NU;
            if (bl < nb) unit(cur, (const uint8_t *)buf, nr, bl, lane % D::NU, acc);
            if (++cc == nch) {
                {
                    /* value j = r * NT + t, its sum (bit-identical to warp_sum's) in lane j << sh */
                    constexpr int sh = 5 - Log2<R * NT>::v;
                    float v[R * NT];
#pragma unroll
                    for (int r = 0; r < R; r++)
#pragma unroll
                        for (int t = 0; t < NT; t++) v[r * NT + t] = acc[r][t], acc[r][t] = 0.0f;
                    const float sum = warp_sum_n<R * NT>(v, lane);
                    const int j = lane >> sh, r = j / NT, t = j % NT;
                    if ((lane & ((1 << sh) - 1)) == 0 && r < nr && t < run.nt)
                        run.y[(int64_t)t * run.n_out + row0 + r] = sum;
                }
                cc = 0;
                cg++;
            }
        }
    }
}

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

/* Quantized experts, int8 activations. NT 1: a rank per matrix
 * (moe_matvec_q8, grid (runs, matrices)); NT > 1: grouped, an item of 1..NT
 * activation rows per matrix (moe_matvec_q8_items, grid (matrices, runs)),
 * each row's unit decoded once and dotted with every activation row of the
 * item (mv_q_q8's batch loop). */
template <int T, int NT>
__global__ void __launch_bounds__(MOE_WARPS * 32, (NT == 1 ? MOE_SM_WARPS : MOE_SM_WARPS_I) / MOE_WARPS)
    moe_q8(const MoeArgs a) {
    ts_pdl_enter();
    typedef Dec<T> D;
    typedef typename MQ8Loader<T>::L L;
    __shared__ __align__(16) uint8_t sm[MOE_WARPS][L::SMEM];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    MoeRun run;
    if (!(NT == 1 ? moe_run(a, warp, lane, run) : moe_run_items(a, warp, lane, run))) return;
    const int8_t *xq = a.xq + run.xrow * a.n_in;
    const float *xd = a.xd + run.xrow * a.nd;
    const int32_t *xs = a.xs + run.xrow * a.ns;
    const int nt = run.nt;
    moe_walk_q<T, L, NT>(run, a.n_in, sm[warp], lane,
                         [&](const L &cur, const uint8_t *buf, int nr, int bl, int u, float (&acc)[MOE_R][NT]) {
                             if (NT == 1) {
                                 /* one row's decoded unit live at a time */
                                 uint32_t X[8];
                                 XScale xsc;
                                 XSide<T>::xwords(xq + (int64_t)bl * D::QK, u, X);
                                 XSide<T>::xscale(xd, xs, bl, u, xsc);
#pragma unroll
                                 for (int r = 0; r < MOE_R; r++) {
                                     if (r >= nr) continue;
                                     typename D::UI wu;
                                     cur.iload(buf, r, lane, u, wu);
                                     acc[r][0] += D::idot(wu, u, X, xsc);
                                 }
                             } else {
                                 /* every row's unit decoded once, each activation row's words loaded once */
                                 typename D::UI wu[MOE_R];
#pragma unroll
                                 for (int r = 0; r < MOE_R; r++)
                                     if (r < nr) cur.iload(buf, r, lane, u, wu[r]);
#pragma unroll
                                 for (int t = 0; t < NT; t++) {
                                     if (t >= nt) break;
                                     uint32_t X[8];
                                     XScale xsc;
                                     XSide<T>::xwords(xq + (int64_t)t * a.n_in + (int64_t)bl * D::QK, u, X);
                                     XSide<T>::xscale(xd + (int64_t)t * a.nd, xs + (int64_t)t * a.ns, bl, u, xsc);
#pragma unroll
                                     for (int r = 0; r < MOE_R; r++)
                                         if (r < nr) acc[r][t] += D::idot(wu[r], u, X, xsc);
                                 }
                             }
                         });
}

/* Quantized experts, F32 activations (staged, every type). */
template <int T> __global__ void __launch_bounds__(MOE_WARPS * 32, MOE_SM_WARPS_F / MOE_WARPS) moe_qf(const MoeArgs a) {
    ts_pdl_enter();
    typedef Dec<T> D;
    typedef MStaged<T> L;
    __shared__ __align__(16) uint8_t sm[MOE_WARPS][L::SMEM];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    MoeRun run;
    if (!moe_run(a, warp, lane, run)) return;
    const float *x = a.x + run.xrow * a.n_in;
    moe_walk_q<T, L>(run, a.n_in, sm[warp], lane,
                     [&](const L &cur, const uint8_t *buf, int nr, int bl, int u, float (&acc)[MOE_R][1]) {
                         typename D::U s[MOE_R];
#pragma unroll
                         for (int r = 0; r < MOE_R; r++)
                             if (r < nr) cur.load(buf, r, lane, u, s[r]);
                         const float *xb = x + (int64_t)bl * D::QK;
#pragma unroll
                         for (int p = 0; p < 4; p++) {
                             float wv[MOE_R][8];
#pragma unroll
                             for (int r = 0; r < MOE_R; r++)
                                 if (r < nr) D::pair(s[r], u, p, wv[r]);
                             const float4 xa = ldg4(xb + D::posA(u, p)), xc = ldg4(xb + D::posB(u, p));
#pragma unroll
                             for (int r = 0; r < MOE_R; r++)
                                 if (r < nr) acc[r][0] = dot8(wv[r], xa, xc, acc[r][0]);
                         }
                     });
}

/* 8 consecutive weights of a float-typed row from the lane's N 16-byte words. */
template <int T> struct FW;
template <> struct FW<TS_TYPE_F32> {
    static constexpr int N = 2, ES = 4; /* words, bytes per element */
    TS_DEV static void cvt(const uint4 (&v)[N], float (&w)[8]) {
        w[0] = bits_to_f32(v[0].x), w[1] = bits_to_f32(v[0].y), w[2] = bits_to_f32(v[0].z), w[3] = bits_to_f32(v[0].w);
        w[4] = bits_to_f32(v[1].x), w[5] = bits_to_f32(v[1].y), w[6] = bits_to_f32(v[1].z), w[7] = bits_to_f32(v[1].w);
    }
};
template <> struct FW<TS_TYPE_F16> {
    static constexpr int N = 1, ES = 2;
    TS_DEV static void cvt(const uint4 (&v)[N], float (&w)[8]) {
        const uint32_t u[4] = {v[0].x, v[0].y, v[0].z, v[0].w};
#pragma unroll
        for (int i = 0; i < 4; i++)
            w[2 * i] = h2f((uint16_t)(u[i] & 0xffff)), w[2 * i + 1] = h2f((uint16_t)(u[i] >> 16));
    }
};
template <> struct FW<TS_TYPE_BF16> {
    static constexpr int N = 1, ES = 2;
    TS_DEV static void cvt(const uint4 (&v)[N], float (&w)[8]) {
        const uint32_t u[4] = {v[0].x, v[0].y, v[0].z, v[0].w};
#pragma unroll
        for (int i = 0; i < 4; i++) w[2 * i] = bits_to_f32(u[i] << 16), w[2 * i + 1] = bits_to_f32(u[i] & 0xffff0000u);
    }
};

#define MOE_FCHUNK 256 /* elements per chunk of a float row: 32 lanes x 8 */

/* F32/F16/BF16 experts, F32 activations: the walk of moe_walk_q without
 * staging (rows are 16-byte aligned: n_in % 32 == 0). */
template <int T> __global__ void __launch_bounds__(MOE_WARPS * 32, MOE_SM_WARPS_F / MOE_WARPS) moe_ff(const MoeArgs a) {
    ts_pdl_enter();
    typedef FW<T> F;
    constexpr int R = MOE_R;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    MoeRun run;
    if (!moe_run(a, warp, lane, run)) return;
    const float *x = a.x + run.xrow * a.n_in;
    const int nch = (int)((a.n_in + MOE_FCHUNK - 1) / MOE_FCHUNK), nitems = run.ng * nch;
    uint4 v[R][F::N];
    int lg = 0, lc = 0;
    auto issue = [&]() {
        const int row0 = (run.g0 + lg) * R;
        const int64_t e = (int64_t)lc * MOE_FCHUNK + lane * 8;
        if (e < a.n_in) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (row0 + r >= run.n_out) continue;
                const uint4 *p = (const uint4 *)(run.w + (uint64_t)(row0 + r) * run.rb + e * F::ES);
#pragma unroll
                for (int j = 0; j < F::N; j++) v[r][j] = __ldg(p + j);
            }
        }
        if (++lc == nch) lc = 0, lg++;
    };
    issue();
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    int cg = 0, cc = 0;
#pragma unroll 1
    for (int it = 0; it < nitems; it++) {
        const int row0 = (run.g0 + cg) * R, nr = run.n_out - row0 < R ? run.n_out - row0 : R;
        const int64_t e = (int64_t)cc * MOE_FCHUNK + lane * 8;
        float wv[R][8];
        if (e < a.n_in) {
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < nr) F::cvt(v[r], wv[r]);
        }
        if (it + 1 < nitems) issue();
        if (e < a.n_in) {
            const float4 xa = ldg4(x + e), xc = ldg4(x + e + 4);
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < nr) acc[r] = dot8(wv[r], xa, xc, acc[r]);
        }
        if (++cc == nch) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float s = warp_sum(acc[r]);
                acc[r] = 0.0f;
                if (lane == r && r < nr) run.y[row0 + r] = s;
            }
            cc = 0;
            cg++;
        }
    }
}

/* ------------------------------------------------------------ element-wise */

#define MOE_EW_THREADS 256

/* out[t] = w[t][0] * y[r0], then out[t] += w[t][i] * y[ri]: the CPU's scale
 * and scale_add, each product and sum rounded; ADD: out[t] += that sum
 * instead (moe_combine then add: one pass over out fewer, one launch fewer).
 * Grid (chunks of n, tokens), tokens strided past 65535. */
template <bool ADD>
__global__ void __launch_bounds__(MOE_EW_THREADS) moe_combine_kernel(float *out, const float *y, const float *w,
                                                                     const int32_t *rows, int n_tok, int k, int64_t n) {
    ts_pdl_enter();
    for (int64_t t = blockIdx.y; t < n_tok; t += gridDim.y) {
        const float *wt = w + t * k;
        const int32_t *rt = rows ? rows + t * k : nullptr;
        for (int64_t j = (int64_t)blockIdx.x * MOE_EW_THREADS + threadIdx.x; j < n;
             j += (int64_t)gridDim.x * MOE_EW_THREADS) {
            /* every rank's value and weight loaded first (one round trip, not k), then summed in rank order */
            float yv[TS_CUDA_MOE_MAX_K], wv[TS_CUDA_MOE_MAX_K];
#pragma unroll
            for (int i = 0; i < TS_CUDA_MOE_MAX_K; i++)
                if (i < k) yv[i] = y[(rt ? (int64_t)rt[i] : t * k + i) * n + j], wv[i] = wt[i];
            const float o = ADD ? out[t * n + j] : 0.0f;
            float acc = fmul_rn(wv[0], yv[0]);
#pragma unroll
            for (int i = 1; i < TS_CUDA_MOE_MAX_K; i++)
                if (i < k) acc = fadd_rn(acc, fmul_rn(wv[i], yv[i]));
            out[t * n + j] = ADD ? fadd_rn(o, acc) : acc;
        }
    }
}

__global__ void __launch_bounds__(MOE_EW_THREADS) gather_rows_kernel(float *out, const float *x, const int32_t *idx,
                                                                     int n_rows, int64_t n) {
    ts_pdl_enter();
    for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
        const float *src = x + (int64_t)idx[r] * n;
        for (int64_t j = (int64_t)blockIdx.x * MOE_EW_THREADS + threadIdx.x; j < n;
             j += (int64_t)gridDim.x * MOE_EW_THREADS)
            out[r * n + j] = src[j];
    }
}

/* 1 / (1 + expf(-g)), the CPU's operations (the device expf is within 2
 * ulp of glibc's, so the gate can differ from the CPU's by that). */
TS_DEV float gate_sigmoid(float g) { return __fdiv_rn(1.0f, fadd_rn(1.0f, expf(-g))); }

__global__ void __launch_bounds__(MOE_EW_THREADS) gated_add_kernel(float *x, const float *y, const float *g, int n_tok,
                                                                   int64_t n) {
    ts_pdl_enter();
    for (int64_t t = blockIdx.y; t < n_tok; t += gridDim.y) {
        const float gs = gate_sigmoid(g[t]);
        for (int64_t j = (int64_t)blockIdx.x * MOE_EW_THREADS + threadIdx.x; j < n;
             j += (int64_t)gridDim.x * MOE_EW_THREADS)
            x[t * n + j] = fadd_rn(x[t * n + j], fmul_rn(gs, y[t * n + j]));
    }
}

/* Grid of the row-wise element-wise kernels: chunks of n (capped, the
 * kernels stride), rows up to 65535 (the kernels stride past it). */
inline dim3 moe_ew_grid(int64_t n, int64_t rows) {
    int64_t bx = (n + MOE_EW_THREADS - 1) / MOE_EW_THREADS;
    if (bx > 4096) bx = 4096;
    if (bx < 1) bx = 1;
    return dim3((unsigned)bx, (unsigned)(rows < 65535 ? rows : 65535));
}

/* ------------------------------------------------------------ host side */

/* Checks of the sets of a matvec call, common to every path. */
ts_status moe_check_sets(const char *fn, int n_set, const ts_cuda_moe_mat *w, float *const *y) {
    TS_ARG_CHECK(n_set == 1 || n_set == 2, "cuda %s: %d sets (1 or 2)", fn, n_set);
    TS_ARG_CHECK(w && y, "cuda %s: NULL weights or outputs", fn);
    for (int s = 0; s < n_set; s++) {
        const ts_cuda_moe_mat &m = w[s];
        TS_ARG_CHECK(ts_cuda_type_supported(m.type), "cuda %s: set %d: type %s not supported", fn, s,
                     ts_type_name(m.type));
        const ts_type_traits *tt = ts_type_get(m.type);
        TS_ARG_CHECK(m.table && y[s], "cuda %s: set %d: NULL table or output", fn, s);
        TS_ARG_CHECK(m.n_expert >= 1, "cuda %s: set %d: %d experts", fn, s, (int)m.n_expert);
        TS_ARG_CHECK(m.n_in == w[0].n_in, "cuda %s: sets disagree on n_in (%lld vs %lld)", fn, (long long)m.n_in,
                     (long long)w[0].n_in);
        TS_ARG_CHECK(m.n_in > 0 && m.n_in % 32 == 0 && m.n_in % tt->block_elems == 0,
                     "cuda %s: n_in %lld must be a positive multiple of 32 and of the %s block", fn, (long long)m.n_in,
                     tt->name);
        TS_ARG_CHECK(m.row_bytes == ts_type_row_bytes(m.type, (uint64_t)m.n_in),
                     "cuda %s: set %d: row_bytes %llu, %s rows of %lld are %llu bytes", fn, s,
                     (unsigned long long)m.row_bytes, tt->name, (long long)m.n_in,
                     (unsigned long long)ts_type_row_bytes(m.type, (uint64_t)m.n_in));
        TS_ARG_CHECK(m.n_out >= 1 && m.n_out <= INT32_MAX - MOE_R && m.row_bytes <= UINT32_MAX,
                     "cuda %s: set %d: %lld rows of %llu bytes (1..2^31 rows of < 2^32 bytes)", fn, s,
                     (long long)m.n_out, (unsigned long long)m.row_bytes);
    }
    return TS_OK;
}

/* Checks of a matvec call by rank (ids, k). */
ts_status moe_check(const char *fn, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *ids, int k) {
    ts_status st = moe_check_sets(fn, n_set, w, y);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(ids, "cuda %s: NULL ids", fn);
    TS_ARG_CHECK(k >= 1 && k <= TS_CUDA_MOE_MAX_K, "cuda %s: k %d (1..%d)", fn, k, TS_CUDA_MOE_MAX_K);
    return TS_OK;
}

/* Checks of the int8 activations (partner of every set, a q8 buffer of
 * `rows` rows) and their device pointers into base. */
ts_status moe_q8_args(const char *fn, int n_set, const ts_cuda_moe_mat *w, uint32_t partner, const void *q8, int rows,
                      MoeArgs &base) {
    for (int i = 0; i < n_set; i++)
        TS_ARG_CHECK(ts_cuda_q8_partner(w[i].type) == partner && partner != TS_TYPE_COUNT,
                     "cuda %s: %s weights need %s activations, not %s", fn, ts_type_name(w[i].type),
                     ts_type_name(ts_cuda_q8_partner(w[i].type)), ts_type_name(partner));
    TS_ARG_CHECK(ts_cuda_q8_bytes(partner, w[0].n_in, rows) > 0, "cuda %s: partner %s with n_in %lld", fn,
                 ts_type_name(partner), (long long)w[0].n_in);
    TS_ARG_CHECK(q8 && ((uintptr_t)q8 & 255) == 0, "cuda %s: NULL q8 or not 256-byte aligned", fn);
    const Q8Layout L = q8_layout(partner, w[0].n_in, rows);
    const uint8_t *b = (const uint8_t *)q8;
    base.n_in = w[0].n_in;
    base.xq = (const int8_t *)(b + L.qs);
    base.xd = (const float *)(b + L.d);
    base.xs = (const int32_t *)(b + L.s);
    base.nd = L.nd;
    base.ns = L.ns;
    return TS_OK;
}

/* Sets gpt (groups per warp) for the launch's matrices and returns its
 * blocks per matrix: runs of gpt groups so that all matrices together give
 * about sm_warps warps per SM, one wave. */
ts_status moe_plan(MoeArgs &a, int n_set, int sm_warps, unsigned &blocks) {
    int sms = 0;
    ts_status st = ts_cuda_sm_count(&sms);
    if (st != TS_OK) return st;
    int64_t groups = 0;
    for (int s = 0; s < n_set; s++) {
        const int64_t g = (a.set[s].n_out + MOE_R - 1) / MOE_R;
        if (g > groups) groups = g;
    }
    const int64_t slots = (int64_t)(sms > 0 ? sms : 1) * sm_warps;
    const int64_t gpt = (groups * n_set * a.k + slots - 1) / slots;
    a.gpt = (int)(gpt < 1 ? 1 : gpt);
    /* at most 65535 blocks per matrix (grid.y of the grouped path) */
    const int64_t gmin = (groups + 65535ll * MOE_WARPS - 1) / (65535ll * MOE_WARPS);
    if (a.gpt < gmin) a.gpt = (int)gmin;
    const int64_t warps = (groups + a.gpt - 1) / a.gpt;
    blocks = (unsigned)((warps + MOE_WARPS - 1) / MOE_WARPS);
    return TS_OK;
}

/* Launches of one call: sets of the same type in one launch, in set order. */
template <typename Launch>
ts_status moe_launches(int n_set, const ts_cuda_moe_mat *w, float *const *y, MoeArgs base, int sm_warps,
                       Launch launch) {
    bool done[2] = {false, false};
    for (int s = 0; s < n_set; s++) {
        if (done[s]) continue;
        MoeArgs a = base;
        int ns = 0;
        for (int j = s; j < n_set; j++) {
            if (done[j] || w[j].type != w[s].type) continue;
            done[j] = true;
            a.set[ns++] = MoeSet{w[j].table, (int)w[j].n_expert, (int)w[j].n_out, (uint32_t)w[j].row_bytes, y[j]};
        }
        if (ns == 1) a.set[1] = a.set[0];
        unsigned blocks = 0;
        ts_status st = moe_plan(a, ns, sm_warps, blocks);
        if (st != TS_OK) return st;
        st = launch(w[s].type, a, blocks, (unsigned)(ns * a.k));
        if (st != TS_OK) return st;
    }
    return TS_OK;
}

/* Grouped prefill on the tensor cores (qgemm.cuh): grid (row tiles of the
 * widest set, items, sets); block (tile, item j, set s) multiplies rows
 * tile * QG_BM.. of expert items[3j] of set s with the item's x rows. An
 * item whose rows are not 1..QG_BN inside [0, n_rows) is skipped with
 * TS_CUDA_ERR_EXPERT; an expert id outside the table writes zero rows with
 * the same bit. */
template <int T>
__global__ void __launch_bounds__(QG_THREADS)
    moe_gemm(const ts_cuda_moe_mat w0, const ts_cuda_moe_mat w1, float *y0, float *y1, const int32_t *items, const uint16_t *x,
             int n_rows, unsigned *err) {
    ts_pdl_enter();
    __shared__ __align__(16) QgSmem s;
    const ts_cuda_moe_mat &m = blockIdx.z ? w1 : w0;
    const int32_t *it = items + 3 * (int64_t)blockIdx.y;
    const int32_t id = it[0], r0 = it[1], nr = it[2];
    const bool report = err && blockIdx.x == 0 && threadIdx.x == 0;
    if (nr < 1 || nr > QG_BN || r0 < 0 || r0 > n_rows - nr) {
        if (report) atomicOr(err, TS_CUDA_ERR_EXPERT);
        return;
    }
    const int64_t row0 = (int64_t)blockIdx.x * QG_BM;
    if (row0 >= m.n_out) return; /* the grid covers the widest set */
    const bool bad = id < 0 || id >= m.n_expert;
    if (bad && report) atomicOr(err, TS_CUDA_ERR_EXPERT);
    const uint8_t *wm = bad ? NULL : (const uint8_t *)m.table[id];
    qg_tile<T>(s, wm, m.row_bytes, m.n_out, row0, x, m.n_in, r0, nr, blockIdx.z ? y1 : y0, m.n_out, bad);
}

} // namespace

ts_status ts_cuda_moe_route(void *stream, const float *r, int n_tok, int n_expert, int k, bool renorm, int32_t *ids,
                            float *w) {
    TS_ARG_CHECK(r && ids && w, "cuda moe_route: NULL pointer");
    TS_ARG_CHECK(n_tok >= 0, "cuda moe_route: %d tokens", n_tok);
    TS_ARG_CHECK(n_expert >= 1 && n_expert <= ROUTE_MAX_EXPERT, "cuda moe_route: %d experts (1..%d)", n_expert,
                 ROUTE_MAX_EXPERT);
    TS_ARG_CHECK(k >= 1 && k <= TS_CUDA_MOE_MAX_K && k <= n_expert, "cuda moe_route: k %d (1..%d, <= %d experts)", k,
                 TS_CUDA_MOE_MAX_K, n_expert);
    if (n_tok == 0) return TS_OK;
    const unsigned blocks = (unsigned)((n_tok + ROUTE_WARPS - 1) / ROUTE_WARPS);
    void (*kern)(const float *, int, int, int, int, int32_t *, float *) =
        n_expert <= 128 ? moe_route_kernel<4> : n_expert <= 256 ? moe_route_kernel<8> : moe_route_kernel<32>;
    ts_launch(kern, blocks, ROUTE_WARPS * 32, 0, ts_stream(stream))(r, n_tok, n_expert, k, renorm ? 1 : 0, ids, w);
    TS_CUDA_LAUNCHED("moe_route");
    return TS_OK;
}

ts_status ts_cuda_moe_matvec(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *ids,
                             int k, const float *x, bool x_per_expert, unsigned *err) {
    ts_status st = moe_check("moe_matvec", n_set, w, y, ids, k);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(x && ((uintptr_t)x & 15) == 0, "cuda moe_matvec: x NULL or not 16-byte aligned");
    MoeArgs base;
    memset(&base, 0, sizeof base);
    base.ids = ids;
    base.k = k;
    base.n_in = w[0].n_in;
    base.x_per_expert = x_per_expert ? 1 : 0;
    base.x = x;
    base.err = err;
    cudaStream_t s = ts_stream(stream);
    auto launch = [&](uint32_t type, const MoeArgs &a, unsigned blocks, unsigned mats) -> ts_status {
        const dim3 grid(blocks, mats);
        switch (type) {
#define Q(T) \
    case T: ts_launch(&moe_qf<T>, grid, MOE_WARPS * 32, 0, s)(a); break;
            TS_FOR_QTYPES(Q)
#undef Q
        case TS_TYPE_F32: ts_launch(&moe_ff<TS_TYPE_F32>, grid, MOE_WARPS * 32, 0, s)(a); break;
        case TS_TYPE_F16: ts_launch(&moe_ff<TS_TYPE_F16>, grid, MOE_WARPS * 32, 0, s)(a); break;
        case TS_TYPE_BF16: ts_launch(&moe_ff<TS_TYPE_BF16>, grid, MOE_WARPS * 32, 0, s)(a); break;
        default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda moe_matvec: type %s", ts_type_name(type));
        }
        TS_CUDA_LAUNCHED("moe_matvec");
        return TS_OK;
    };
    return moe_launches(n_set, w, y, base, MOE_SM_WARPS_F, launch);
}

ts_status ts_cuda_moe_matvec_q8(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *ids,
                                int k, uint32_t partner, const void *q8, bool x_per_expert, unsigned *err) {
    ts_status st = moe_check("moe_matvec_q8", n_set, w, y, ids, k);
    if (st != TS_OK) return st;
    MoeArgs base;
    memset(&base, 0, sizeof base);
    st = moe_q8_args("moe_matvec_q8", n_set, w, partner, q8, x_per_expert ? k : 1, base);
    if (st != TS_OK) return st;
    base.ids = ids;
    base.k = k;
    base.x_per_expert = x_per_expert ? 1 : 0;
    base.err = err;
    cudaStream_t s = ts_stream(stream);
    auto launch = [&](uint32_t type, const MoeArgs &a, unsigned blocks, unsigned mats) -> ts_status {
        const dim3 grid(blocks, mats);
        switch (type) {
#define Q(T) \
    case T: ts_launch(&moe_q8<T, 1>, grid, MOE_WARPS * 32, 0, s)(a); break;
            TS_FOR_INT8_TYPES(Q)
#undef Q
        default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda moe_matvec_q8: type %s has no int8 path", ts_type_name(type));
        }
        TS_CUDA_LAUNCHED("moe_matvec_q8");
        return TS_OK;
    };
    return moe_launches(n_set, w, y, base, MOE_SM_WARPS, launch);
}

ts_status ts_cuda_moe_matvec_q8_items(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y,
                                      const int32_t *items, int n_item, uint32_t partner, const void *q8, int n_rows,
                                      unsigned *err) {
    ts_status st = moe_check_sets("moe_matvec_q8_items", n_set, w, y);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(items, "cuda moe_matvec_q8_items: NULL items");
    TS_ARG_CHECK(n_item >= 0 && n_rows >= n_item && n_item <= INT32_MAX / 2,
                 "cuda moe_matvec_q8_items: %d items of 1..%d rows do not fit %d rows", n_item, MOE_NT, n_rows);
    if (n_item == 0) return TS_OK; /* no rows */
    MoeArgs base;
    memset(&base, 0, sizeof base);
    st = moe_q8_args("moe_matvec_q8_items", n_set, w, partner, q8, n_rows, base);
    if (st != TS_OK) return st;
    base.items = items;
    base.k = n_item;
    base.n_rows = n_rows;
    base.err = err;
    cudaStream_t s = ts_stream(stream);
    auto launch = [&](uint32_t type, const MoeArgs &a, unsigned blocks, unsigned mats) -> ts_status {
        const dim3 grid(mats, blocks);
        switch (type) {
#define Q(T) \
    case T: ts_launch(&moe_q8<T, MOE_NT>, grid, MOE_WARPS * 32, 0, s)(a); break;
            TS_FOR_INT8_TYPES(Q)
#undef Q
        default:
            return ts_fail(TS_ERR_UNSUPPORTED, "cuda moe_matvec_q8_items: type %s has no int8 path",
                           ts_type_name(type));
        }
        TS_CUDA_LAUNCHED("moe_matvec_q8_items");
        return TS_OK;
    };
    return moe_launches(n_set, w, y, base, MOE_SM_WARPS_I, launch);
}

static ts_status combine_launch(void *stream, bool add, float *out, const float *y, const float *w, const int32_t *rows,
                                int n_tok, int k, int64_t n) {
    TS_ARG_CHECK(out && y && w, "cuda moe_combine: NULL pointer");
    TS_ARG_CHECK(n_tok >= 0 && n >= 0, "cuda moe_combine: %d tokens of %lld", n_tok, (long long)n);
    TS_ARG_CHECK(k >= 1 && k <= TS_CUDA_MOE_MAX_K, "cuda moe_combine: k %d (1..%d)", k, TS_CUDA_MOE_MAX_K);
    if (n_tok == 0 || n == 0) return TS_OK;
    if (add) {
        ts_launch(&moe_combine_kernel<true>, moe_ew_grid(n, n_tok), MOE_EW_THREADS, 0, ts_stream(stream))(out, y, w, rows,
                                                                                                       n_tok, k, n);
        TS_CUDA_LAUNCHED("moe_combine_add");
    } else {
        ts_launch(&moe_combine_kernel<false>, moe_ew_grid(n, n_tok), MOE_EW_THREADS, 0, ts_stream(stream))(out, y, w, rows,
                                                                                                        n_tok, k, n);
        TS_CUDA_LAUNCHED("moe_combine");
    }
    return TS_OK;
}

ts_status ts_cuda_moe_combine(void *stream, float *out, const float *y, const float *w, const int32_t *rows, int n_tok,
                              int k, int64_t n) {
    return combine_launch(stream, false, out, y, w, rows, n_tok, k, n);
}

ts_status ts_cuda_moe_combine_add(void *stream, float *x, const float *y, const float *w, const int32_t *rows, int n_tok,
                                  int k, int64_t n) {
    return combine_launch(stream, true, x, y, w, rows, n_tok, k, n);
}

ts_status ts_cuda_gather_rows(void *stream, float *out, const float *x, const int32_t *idx, int n_rows, int64_t n) {
    TS_ARG_CHECK(out && x && idx, "cuda gather_rows: NULL pointer");
    TS_ARG_CHECK(n_rows >= 0 && n >= 0, "cuda gather_rows: %d rows of %lld", n_rows, (long long)n);
    if (n_rows == 0 || n == 0) return TS_OK;
    ts_launch(&gather_rows_kernel, moe_ew_grid(n, n_rows), MOE_EW_THREADS, 0, ts_stream(stream))(out, x, idx, n_rows, n);
    TS_CUDA_LAUNCHED("gather_rows");
    return TS_OK;
}

ts_status ts_cuda_gated_add(void *stream, float *x, const float *y, const float *g, int n_tok, int64_t n) {
    TS_ARG_CHECK(x && y && g, "cuda gated_add: NULL pointer");
    TS_ARG_CHECK(n_tok >= 0 && n >= 0, "cuda gated_add: %d tokens of %lld", n_tok, (long long)n);
    if (n_tok == 0 || n == 0) return TS_OK;
    ts_launch(&gated_add_kernel, moe_ew_grid(n, n_tok), MOE_EW_THREADS, 0, ts_stream(stream))(x, y, g, n_tok, n);
    TS_CUDA_LAUNCHED("gated_add");
    return TS_OK;
}

ts_status ts_cuda_moe_gemm_items(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *items,
                                 int n_item, const void *x16, int n_rows, unsigned *err) {
    ts_status st = moe_check_sets("moe_gemm_items", n_set, w, y);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(items && x16 && ((uintptr_t)x16 & 15) == 0, "cuda moe_gemm_items: NULL items, or x NULL or not 16-byte aligned");
    TS_ARG_CHECK(n_item >= 0 && n_item <= 65535 && n_rows >= n_item, "cuda moe_gemm_items: %d items of 1..%d rows, %d rows",
                 n_item, QG_BN, n_rows);
    for (int s = 0; s < n_set; s++)
        TS_ARG_CHECK(ts_cuda_moe_gemm_type(w[s].type) && w[s].n_in % QG_BK == 0,
                     "cuda moe_gemm_items: set %d: %s rows of %lld (quantized types, n_in a multiple of %d)", s,
                     ts_type_name(w[s].type), (long long)w[s].n_in, QG_BK);
    if (n_item == 0) return TS_OK;
    cudaStream_t cs = ts_stream(stream);
    const uint16_t *x = (const uint16_t *)x16;
    auto launch = [&](int s0, int ns) -> ts_status {
        const int64_t n_out = ns == 2 && w[1].n_out > w[0].n_out ? w[1].n_out : w[s0].n_out;
        const dim3 grid((unsigned)((n_out + QG_BM - 1) / QG_BM), (unsigned)n_item, (unsigned)ns);
        const ts_cuda_moe_mat &a = w[s0], &b = ns == 2 ? w[1] : w[s0];
        float *ya = y[s0], *yb = ns == 2 ? y[1] : y[s0];
        switch (w[s0].type) {
#define Q(T) \
    case T: ts_launch(&moe_gemm<T>, grid, QG_THREADS, 0, cs)(a, b, ya, yb, items, x, n_rows, err); break;
            TS_FOR_QTYPES(Q)
#undef Q
        default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda moe_gemm_items: type %s", ts_type_name(w[s0].type));
        }
        TS_CUDA_LAUNCHED("moe_gemm_items");
        return TS_OK;
    };
    if (n_set == 2 && w[1].type == w[0].type) return launch(0, 2);
    for (int s = 0; s < n_set; s++) {
        st = launch(s, 1);
        if (st != TS_OK) return st;
    }
    return TS_OK;
}

bool ts_cuda_moe_gemm_type(uint32_t type) {
    switch (type) {
#define Q(T) \
    case T: return true;
        TS_FOR_QTYPES(Q)
#undef Q
    default: return false;
    }
}
