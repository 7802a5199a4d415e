/* Decode matrix-vector products with int8 activations, the CPU's default
 * path: x is quantized once per call to the weights' partner format (Q8_0 for
 * the 32-element quants, Q8_K for the K-quants), exactly as ts_quantize_row
 * does (same amax, same float divisions, round half to even, quants in
 * [-127, 127]), with the RMSNorm optionally folded in; then every weight unit
 * is dotted in integers with dp4a and its scales applied in float
 * (cuda_quant.cuh idot). The pipeline and work split are described below.
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
                                                 const float *up, int act, float *xout,
                                                 int8_t *qs, float *d, int32_t *s, int64_t nd, int64_t ns) {
    ts_pdl_enter();
    __shared__ double shd[8];
    __shared__ float shf[8];
    const int64_t t = blockIdx.y;
    const float *row = x + t * n_in;
    const int64_t e = (int64_t)blockIdx.x * 256 + threadIdx.x;
    const bool valid = e < n_in; /* n_in % 32 == 0: whole warps are valid or not */
    /* this thread's element (and its norm weight or up value) first: in
     * flight during the row's sum instead of one more L2 round trip after it */
    float v = valid ? row[e] : 0.0f;
    const float nw = norm_w && valid ? norm_w[e] : 0.0f, uv = up && valid ? up[t * n_in + e] : 0.0f;
    float inv = 1.0f;
    if (norm_w) {
        /* every block needs the whole row's sum of squares */
        const double ss = block_sum_256(row_sumsq_part(row, n_in, threadIdx.x, 256), shd);
        inv = rms_scale(ss, n_in, eps);
    }
    if (norm_w && valid) v = fmul_rn(fmul_rn(v, inv), nw);
    if (up && valid) { /* act(x) * up, stored as act_mul would (the FFN tap reads it) */
        v = act == TS_CUDA_ACT_SILU ? silu_mul(v, uv) : gelu_mul(v, uv);
        xout[t * n_in + e] = v;
    }
    q8_quant_elem<K>(v, valid, t, e, n_in, qs, d, s, nd, ns, shf);
}

/* ---- the int8 matvec ----------------------------------------------------
 *
 * Why it is built this way: decode streams every weight byte once, so the
 * kernel must keep HBM busy, i.e. ~25-35 KB of loads in flight per SM
 * (Little's law: ~4.8 TB/s x ~700 ns / 132 SMs). A block that handles one
 * row group and exits (the first version) has its loads in flight only for
 * a fraction of its short life: the activation loads, the decode, the
 * reductions and the block turnover all run with nothing outstanding.
 *
 * So a team of kw warps (the same lane -> unit mapping as the F32 path; the
 * sums are added in the same order whatever the knobs below but MVQ_KW1,
 * which sets kw) walks
 * a run of `gpt` consecutive row groups, and each warp keeps its weight loads
 * MVQ_DEPTH items ahead of the item it decodes (an item = MVQ_R rows x one
 * chunk of 32 units, its loads held in registers), across group boundaries,
 * so loads stay in flight while it decodes, reduces and writes. The grid is
 * one wave of resident blocks (MVQ_WAVES waves) sized from the SM count, so
 * every SM streams until its share is done. Activation loads for an item are
 * issued before its weights are waited on. Weights are read with
 * L1::no_allocate: they are used once, and streaming them through L1 would
 * evict x, which every item reads again.
 *
 * With kw > 1 the warps of a team add their partials in shared memory once
 * every MVQ_BATCH groups (one __syncthreads, double-buffered partials); every
 * warp of a block passes the same number of barriers (the batch count comes
 * from gpt), while the item loop in between runs freely.
 *
 * Loaders: Q4_K and Q5_K super-blocks are 16-byte aligned within a row, so
 * each lane loads its unit's 16-byte words straight into registers (the
 * header, the quants, Q5_K's high bits) and decodes them there; the other
 * types are not aligned (18-, 34-, 210-byte blocks) and go through the
 * shared-memory staging of matvec_common.cuh (coalesced aligned 16-byte
 * loads, realigned in shared memory). */

/* Knobs (-D overrides; bench/cuda/sweep_matvec.sh measures settings). */
#ifndef MVQ_WARPS
#define MVQ_WARPS 4 /* warps per block: a multiple of 4 (a team has up to 4) */
#endif
#ifndef MVQ_SM_WARPS
/* resident warps per SM for 1 token, in whole blocks: the launch bounds'
 * minimum blocks (so it caps registers: 20 warps = 96 per thread) and the
 * grid's size */
#define MVQ_SM_WARPS 20
#endif
#ifndef MVQ_SM_WARPS_B
#define MVQ_SM_WARPS_B 16 /* the same for 2..8 tokens (more accumulators: 128 registers) */
#endif
#ifndef MVQ_R
#define MVQ_R 2 /* rows per group, 2..8 tokens: each activation load serves MVQ_R rows */
#endif
#ifndef MVQ_R1
#define MVQ_R1 MVQ_R /* the same for 1 token */
#endif
#ifndef MVQ_R1_BIG
/* 1 token, a launch with at least this many rows per team slot: more rows per
 * group (each activation load serves more rows, more bytes in flight per
 * warp). Measured on the H200 (bench/results/2026-12-01-h200-pdl/call7-*)
 * with 4 rows for every one-token launch: bench_matvec's 7B Q4_K geomean
 * 1,385 -> 1,496 GB/s, 7B tg128 ~280 -> 287 tok/s, but SmolLM2 1,175 -> 1,034
 * (its launches have fewer groups than team slots), hence the condition. The
 * condition itself has not been measured on a GPU. */
#define MVQ_R1_BIG 4
#endif
#ifndef MVQ_RING
#define MVQ_RING 4 /* 16-byte weight words per lane in flight (all ring slots), 1 token: sets the depth per type.
                      4 (depth 1 for most types) measured best on the H200 for Q4_0/Q6_K and equal for Q4_K/Q8_0
                      (bench/results/2026-12-01-h200-matvec/sweep-summary.txt) */
#endif
#ifndef MVQ_RING_B
#define MVQ_RING_B 8 /* the same for 2..8 tokens */
#endif
#ifndef MVQ_BATCH
#define MVQ_BATCH 8 /* groups between two cross-warp reductions (rounded up to a multiple of the depth) */
#endif
#ifndef MVQ_WAVES
#define MVQ_WAVES 1 /* block waves the grid is sized for (more: shorter runs per team) */
#endif
#ifndef MVQ_DIRECT
#define MVQ_DIRECT 1 /* Q4_K/Q5_K: 1 = 16-byte loads into registers, 0 = shared-memory staging */
#endif
#ifndef MVQ_DIRECT_Q40
#define MVQ_DIRECT_Q40 1 /* Q4_0: 1 = 4-byte loads into registers (QDirect<Q4_0>), 0 = shared-memory staging */
#endif
#ifndef MVQ_PREFETCH
#define MVQ_PREFETCH 4096 /* bytes of its run each warp prefetches to L2 before it waits on the previous kernel */
#endif
#ifndef MVQ_ASYNC
/* which launches stream weights global -> shared with cp.async into a ring of
 * MVQ_ASYNC_BYTES per warp (QAsync below: the loads in flight cost no
 * registers, so the ring can be deeper than the register one): 0 none, 1
 * all, 2 all but the direct-loaded Q4_K/Q5_K, 3 Q6_K only (each on launches
 * of at least MVQ_ASYNC_MIN_ITEMS items per warp). 3: measured on the H200
 * (session 20, bench/results/2026-12-03-h200-s20/call2-*): bench_matvec 7B
 * Q6_K down 28.0 -> 25.6 us, lm_head 157.4 -> 136.2, gate_up 47.5 -> 41.0;
 * tg128 7B Q4_K_M +2.6% (455 -> 468), SmolLM2 and the 1.5B level or +0.5%.
 * Q4_K loses with the ring (its direct loads skip shared memory): 16.0 ->
 * 18.9 us on the same down shape. */
#define MVQ_ASYNC 3
#endif
#ifndef MVQ_ASYNC_BYTES
#define MVQ_ASYNC_BYTES 8192 /* shared bytes per warp for the cp.async ring (its depth: 2..MVQ_ASYNC_DEP items) */
#endif
#ifndef MVQ_ASYNC_DEP
#define MVQ_ASYNC_DEP 4
#endif
#ifndef MVQ_ASYNC_MIN_ITEMS
/* items per warp below which a launch keeps the register loaders (mvq_async). 2 and 1 (the 7B's Q/K+V pair, whose V
 * warps have 2 items, then on the ring) measured 0.989x on the 7B's tg128 (bench/results/2026-12-05-h100-s31, call H) */
#define MVQ_ASYNC_MIN_ITEMS 4
#endif
#ifndef MVQ_KW1
/* 1: a launch with at least one row group for every resident warp gives
 * each group to one warp (kw = 1), which walks all the row's chunks and
 * reduces once per group, instead of a team of up to 4 warps that reduce
 * after every chunk and again across warps in shared memory (7B rows of
 * 3584: 4 chunks, so a butterfly and a block barrier every item). Launches
 * with fewer groups keep the teams: there the split is what keeps warps
 * busy. The sums are added in another order than with teams (each team
 * warp's partial first), so outputs are not bit-identical across the knob. */
#define MVQ_KW1 1
#endif
/* MVQ_LDG (weight loads): matvec_common.cuh */

static_assert(MVQ_WARPS % 4 == 0 && MVQ_WARPS >= 4 && MVQ_WARPS <= 32, "MVQ_WARPS: 4, 8, ... 32");
static_assert(MVQ_R >= 1 && MVQ_R * TS_CUDA_MAX_DECODE_TOK <= 32, "MVQ_R: 1..4 (a lane per row and token)");
static_assert(MVQ_R1 >= 1 && MVQ_R1 <= 32 && MVQ_R1_BIG >= 1 && MVQ_R1_BIG <= 32, "MVQ_R1, MVQ_R1_BIG: 1..32");
static_assert(MVQ_RING >= 1 && MVQ_RING_B >= 1 && MVQ_BATCH >= 1, "MVQ_RING(_B), MVQ_BATCH >= 1");
static_assert(MVQ_SM_WARPS >= MVQ_WARPS && MVQ_SM_WARPS_B >= MVQ_WARPS && MVQ_WAVES >= 1,
              "MVQ_SM_WARPS(_B) >= MVQ_WARPS, MVQ_WAVES >= 1");

static constexpr int mvq_min_blocks(int nt) { return (nt == 1 ? MVQ_SM_WARPS : MVQ_SM_WARPS_B) / MVQ_WARPS; }

/* The weight of a team's run, with 32-bit row counts (checked on the host). */
struct QMat {
    const uint8_t *w, *end; /* rows, and their end */
    uint32_t rb;            /* bytes per row */
    int n_out;              /* rows */
};

/* f(Flag<true>()) for a whole row group of 2 or fewer rows, else
 * f(Flag<false>()): f runs its rows without the test for rows past the
 * matrix end when given true. Each such test is a branch with its own
 * reconvergence point, ~3 instructions a row; for 4-row groups the second
 * copy of the loop cost more than the tests (the 7B 0.9% slower, SmolLM2's
 * 2-row launches 2.0% faster: docs/KERNELS.md, session 23). */
template <int R, typename F> TS_DEV void mvq_rows_whole(int nr, F &&f) {
    if (R <= 2 && nr == R) f(Flag<R <= 2>());
    else f(Flag<false>());
}

/* Staged loader (any type): an item's chunk of each row in registers
 * (Stage's words, ldw16), realigned through the warp's shared buffer when it
 * is decoded. */
template <int T, int R> struct QStaged {
    typedef Dec<T> D;
    typedef Geo<T> G;
    static constexpr int SMEM = R * G::SROW; /* shared bytes per warp */
    static constexpr int WORDS = R * G::WPL;  /* 16-byte registers per lane per item */
    static constexpr bool ASYNC = false;
    uint4 v[R][G::WPL];
    int dn[R]; /* per row: chunk start - its 16-aligned base (bits 0-3), words loaded (bits 4-) */

    TS_DEV void load(const QMat &m, const uint8_t *row, int nr, int c, int nb, int lane, uint8_t *) {
        q_item_words<T, R>(row, m.rb, m.end, nr, c, nb, lane, dn, [&](int r, int i, int, const uint8_t *p, auto inside) {
            v[r][i] = decltype(inside)::value ? ldw16(p) : ld_weight_word(p, m.end);
        });
    }
    /* Whole warp: the words into sm (the warp's SMEM bytes), ready to decode. */
    TS_DEV void stage(uint8_t *sm, int nr, int lane) const {
        __syncwarp(); /* every lane is done with the previous item's bytes */
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= nr) continue;
#pragma unroll
            for (int i = 0; i < G::WPL; i++) {
                const int k = lane + 32 * i;
                if (k < dn[r] >> 4) *(uint4 *)(sm + r * G::SROW + 16 * k) = v[r][i];
            }
        }
        __syncwarp();
    }
    TS_DEV void unit(const uint8_t *sm, int r, int lane, int u, typename D::UI &s) const {
        D::iload(sm + r * G::SROW + (dn[r] & 15) + (lane / D::NU) * D::BB, u, s);
    }
};

/* Direct loader (Q4_K, Q5_K): each lane's unit words straight from global
 * memory; no shared memory, no warp synchronization. */
template <int T, int R> struct QDirect;
template <int R> struct QDirect<TS_TYPE_Q4_K, R> {
    typedef Dec<TS_TYPE_Q4_K> D;
    static constexpr int SMEM = 0, WORDS = 2 * R;
    static constexpr bool ASYNC = false;
    uint4 hd[R], q[R];
    TS_DEV void load(const QMat &m, const uint8_t *row, int nr, int c, int nb, int lane, uint8_t *) {
        const int bl = c * Geo<TS_TYPE_Q4_K>::CB + lane / D::NU;
        if (bl >= nb) return;
        /* two pointers stepped by a row: 4 integer ops a row for its 2 loads */
        const uint8_t *b = row + (size_t)bl * D::BB, *bq = b + D::qoff(lane % D::NU);
        auto rows = [&](auto whole) { /* mvq_rows_whole */
#pragma unroll
            for (int r = 0; r < R; r++, b += m.rb, bq += m.rb) {
                if (!decltype(whole)::value && r >= nr) continue;
                hd[r] = ldw16(b);
                q[r] = ldw16(bq);
            }
        };
        mvq_rows_whole<R>(nr, rows);
    }
    TS_DEV void stage(uint8_t *, int, int) const {}
    K4Sel k = K4Sel(threadIdx.x & 7); /* u = lane % 8, formed once */
    TS_DEV QDirect() { k.keep(); }
    TS_DEV void unit(const uint8_t *, int r, int, int, D::UI &s) const { D::iload_w(hd[r], q[r], k, s); }
};
template <int R> struct QDirect<TS_TYPE_Q5_K, R> {
    typedef Dec<TS_TYPE_Q5_K> D;
    static constexpr int SMEM = 0, WORDS = 3 * R;
    static constexpr bool ASYNC = false;
    uint4 hd[R], h[R], q[R];
    TS_DEV void load(const QMat &m, const uint8_t *row, int nr, int c, int nb, int lane, uint8_t *) {
        const int bl = c * Geo<TS_TYPE_Q5_K>::CB + lane / D::NU;
        if (bl >= nb) return;
        const int u = lane % D::NU;
        const uint8_t *b = row + (size_t)bl * D::BB, *bh = b + D::hoff(u), *bq = b + D::qoff(u);
        auto rows = [&](auto whole) { /* mvq_rows_whole */
#pragma unroll
            for (int r = 0; r < R; r++, b += m.rb, bh += m.rb, bq += m.rb) {
                if (!decltype(whole)::value && r >= nr) continue;
                hd[r] = ldw16(b);
                h[r] = ldw16(bh);
                q[r] = ldw16(bq);
            }
        };
        mvq_rows_whole<R>(nr, rows);
    }
    TS_DEV void stage(uint8_t *, int, int) const {}
    K4Sel k = K4Sel(threadIdx.x & 7); /* u = lane % 8, formed once */
    TS_DEV QDirect() { k.keep(); }
    TS_DEV void unit(const uint8_t *, int r, int, int u, D::UI &s) const { D::iload_w(hd[r], h[r], q[r], u, k, s); }
};

/* 4-byte weight words from a 4-aligned address, read through L1 (Q4_0's
 * direct loader: its lanes' words overlap, so a warp's later loads of a row
 * hit the lines its first brought in). At the matrix end only the 2 bytes
 * that are in it are read. */
TS_DEV uint32_t ldw4_end(const uint8_t *a, const uint8_t *end) {
    return a + 4 <= end ? __ldg((const uint32_t *)a) : (uint32_t)__ldg((const uint16_t *)a);
}

/* Direct loader for Q4_0 (MVQ_DIRECT_Q40): a block is 18 bytes, so its
 * start is only 2-aligned and 16-byte loads would need the staged loader's
 * realignment through shared memory. Each lane instead reads its block's
 * five 4-byte words from the block start rounded down to 4 (the two bytes
 * before it, when the start is 2 mod 4, belong to the previous block) and
 * realigns them in registers with funnel shifts. The loads go through L1
 * (plain ld.global.nc): a warp's five loads of a row each span the same
 * ~576 bytes, so all but the first hit the lines the first brought in. The
 * words make D::U, decoded by D::iload_u as the staged loader's are. */
template <int R> struct QDirect<TS_TYPE_Q4_0, R> {
    typedef Dec<TS_TYPE_Q4_0> D;
    static constexpr int SMEM = 0, WORDS = 2 * R; /* 5 words a row: counted as 2 16-byte words for QDepth */
    static constexpr bool ASYNC = false;
    uint32_t w[R][5];
    uint32_t odd; /* bit r: row r's block starts at 2 mod 4 */
    TS_DEV void load(const QMat &m, const uint8_t *row, int nr, int c, int nb, int lane, uint8_t *) {
        const int bl = c * Geo<TS_TYPE_Q4_0>::CB + lane;
        odd = 0;
        if (bl >= nb) return;
        const uint8_t *b = row + (size_t)bl * D::BB;
        auto rows = [&](auto whole) { /* mvq_rows_whole */
#pragma unroll
            for (int r = 0; r < R; r++, b += m.rb) {
                if (!decltype(whole)::value && r >= nr) continue;
                const uintptr_t o = (uintptr_t)b & 3;
                const uint8_t *a = b - o;
                odd |= (uint32_t)(o >> 1) << r;
#pragma unroll
                for (int k = 0; k < 4; k++) w[r][k] = __ldg((const uint32_t *)(a + 4 * k));
                w[r][4] = ldw4_end(a + 16, m.end); /* it ends 2 bytes past a 4-aligned block */
            }
        };
        mvq_rows_whole<R>(nr, rows);
    }
    TS_DEV void stage(uint8_t *, int, int) const {}
    TS_DEV void unit(const uint8_t *, int r, int, int, D::UI &s) const {
        const bool od = (odd >> r) & 1;
        const unsigned sh = od ? 32u : 16u; /* the quants start 2 or 4 bytes into w[r][0] */
        D::U t;
        t.d = h2f((uint16_t)(od ? w[r][0] >> 16 : w[r][0]));
#pragma unroll
        for (int p = 0; p < 4; p++) t.q[p] = __funnelshift_rc(w[r][p], w[r][p + 1], sh);
        D::iload_u(t, s);
    }
};

/* Asynchronous loader (any type, MVQ_ASYNC): the staged loader's layout,
 * but each ring slot is its own shared buffer filled by cp.async, so an item
 * in flight holds no registers and the ring runs DEP - 1 items ahead (the
 * register ring measured best at depth 1: deeper ones cost occupancy).
 * Protocol (kernel side): one commit group per ring step, empty or not, so
 * item i is always group i; a slot is refilled only after the warp's lanes
 * are past decoding it (__syncwarp before the issue). */
template <int T, int R> struct QAsync {
    typedef Dec<T> D;
    typedef Geo<T> G;
    static constexpr int SMEM = R * G::SROW; /* shared bytes per warp and slot */
    static constexpr bool ASYNC = true;
    static constexpr int d0 = MVQ_ASYNC_BYTES / SMEM;
    static constexpr int DEP = d0 < 2 ? 2 : d0 > MVQ_ASYNC_DEP ? MVQ_ASYNC_DEP : d0;
    int dn[R]; /* per row: chunk start - its 16-aligned base (bits 0-3), words (bits 4-): q_item_words */

    TS_DEV void load(const QMat &m, const uint8_t *row, int nr, int c, int nb, int lane, uint8_t *sm) {
        q_item_words<T, R>(row, m.rb, m.end, nr, c, nb, lane, dn, [&](int r, int, int k, const uint8_t *p, auto inside) {
            uint8_t *d = sm + r * G::SROW + 16 * k;
            /* cp.async reads all 16 bytes (compute-sanitizer memcheck counts
             * them), so the matrix's partial last word is read byte by byte
             * and stored plainly (visible to the warp after stage's __syncwarp) */
            if (decltype(inside)::value || p + 16 <= m.end) ts_cp_async16(d, p);
            else *(uint4 *)d = ld_weight_word(p, m.end);
        });
    }
    /* Whole warp: this slot's item has landed and every lane sees it. */
    TS_DEV void stage(uint8_t *, int, int) const {
        ts_cp_async_wait<DEP - 1>();
        __syncwarp();
    }
    TS_DEV void unit(const uint8_t *sm, int r, int lane, int u, typename D::UI &s) const {
        D::iload(sm + r * G::SROW + (dn[r] & 15) + (lane / D::NU) * D::BB, u, s);
    }
};

/* Loader kinds: 0 staged through registers, 1 direct (Q4_K/Q5_K; Q4_0 with MVQ_DIRECT_Q40), 2
 * asynchronous. Which one a launch uses: mvq_async, else mvq_direct_type (launch_t, launch_pair_r). */
template <int T, int R, int KIND> struct QLoader;
template <int T, int R> struct QLoader<T, R, 0> {
    typedef QStaged<T, R> L;
};
template <int T, int R> struct QLoader<T, R, 1> {
    typedef QDirect<T, R> L;
};
template <int T, int R> struct QLoader<T, R, 2> {
    typedef QAsync<T, R> L;
};

/* Ring depth of a loader: as many items as MVQ_RING words allow, 1..3
 * (with 2 rows: Q4_K, Q4_0, Q6_K items hold 4 words: depth 2; Q8_0 6:
 * depth 1; Q2_K 2: depth 3), so the bytes in flight per warp are alike for
 * every type and the registers stay under the launch bounds (depth 4 spilled
 * for Q2_K/Q3_K). */
template <typename L, int NT, bool ASYNC = L::ASYNC> struct QDepthR {
    static constexpr int d = (NT == 1 ? MVQ_RING : MVQ_RING_B) / L::WORDS;
    static constexpr int DEP = d < 1 ? 1 : d > 3 ? 3 : d;
};
template <typename L, int NT> struct QDepthR<L, NT, true> {
    static constexpr int DEP = L::DEP;
};
template <typename L, int NT> struct QDepth {
    static constexpr int DEP = QDepthR<L, NT>::DEP;
    static constexpr int B = (MVQ_BATCH + DEP - 1) / DEP * DEP; /* groups per batch: a multiple of DEP */
};

/* y[t][row] = [y +] (v [+ bias]): the output of one row and token. */
TS_DEV void mvq_out(const MvMat &m, int accumulate, int t, int row, float v) {
    if (m.bias) v += m.bias[row];
    float *yp = m.y + (int64_t)t * m.n_out + row;
    *yp = accumulate ? *yp + v : v;
}

/* Quantized weights, int8 activations: the rows of each team's run (the
 * body of the kernels below). */
template <int T, int NT, int R, int KIND> TS_DEV void mvq_body(const MvArgs &a) {
    typedef Dec<T> D;
    typedef Geo<T> G;
    typedef typename QLoader<T, R, KIND>::L L;
    constexpr int DEP = QDepth<L, NT>::DEP, B = QDepth<L, NT>::B;
    constexpr int SLOT = L::ASYNC ? L::SMEM : 0; /* shared bytes between two ring slots */
    __shared__ __align__(16) uint8_t sm[MVQ_WARPS][L::SMEM > 0 ? L::SMEM * (L::ASYNC ? DEP : 1) : 16];
    __shared__ float red[2][B][MVQ_WARPS][R][NT]; /* kw > 1: per-warp partials of a batch's groups */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kw = a.kw, phase = warp % kw;
    const int64_t team = (int64_t)blockIdx.x * (MVQ_WARPS / kw) + warp / kw;

    /* A team's run lies inside one weight, so the weight's fields are read
     * once: indexing a.m per item would keep all four in registers. */
    int wi = 0;
#pragma unroll
    for (int i = 1; i < TS_CUDA_MAX_MATS; i++)
        if (i < a.n_w && team >= a.t0[i]) wi = i;
    const QMat m = {a.m[wi].w, a.m[wi].w + a.m[wi].n_out * a.m[wi].row_bytes, (uint32_t)a.m[wi].row_bytes,
                    (int)a.m[wi].n_out};
    const int gs = (int)((team - a.t0[wi]) * a.gpt); /* the run's first group in the weight */
    const int64_t gleft = a.g0[wi + 1] - a.g0[wi] - gs; /* < 1 for a team of the padding before a.b2's block */
    const int ng = team >= a.t0[a.n_w] || gleft < 1 ? 0 : (int)(gleft < a.gpt ? gleft : a.gpt);
    const int nb = (int)(a.n_in / D::QK), nchunks = (nb + G::CB - 1) / G::CB;
    const int cpw = (nchunks - phase + kw - 1) / kw; /* this warp's chunks of a row: phase, phase + kw, ... */
    const int nitems = ng * cpw;
#if MVQ_PREFETCH > 0
    /* the run's first bytes toward L2 while the predecessor drains (no
     * kernel writes weights, and a prefetch is only a hint) */
    if (ng > 0) {
        const int row0 = gs * R, rows = m.n_out - row0 < ng * R ? m.n_out - row0 : ng * R;
        const uint8_t *p0 = m.w + (size_t)row0 * m.rb;
        const size_t len = (size_t)rows * m.rb, cap = (size_t)MVQ_PREFETCH * kw, n = len < cap ? len : cap;
        for (size_t o = (size_t)(phase * 32 + lane) * 128; o < n; o += (size_t)kw * 32 * 128) ts_prefetch_l2(p0 + o);
    }
#endif
    ts_pdl_enter();
    const int u = lane % D::NU;
    uint8_t *buf = sm[warp];

    /* the load cursor runs DEP - 1 items ahead of the decode cursor */
    L ring[DEP];
    int lg = 0, lj = 0;
    auto issue = [&](int slot) {
        if (L::ASYNC) __syncwarp(); /* the slot's previous item is decoded by every lane */
        const int row0 = (gs + lg) * R;
        ring[slot].load(m, m.w + (size_t)row0 * m.rb, m.n_out - row0 < R ? m.n_out - row0 : R, phase + lj * kw, nb,
                        lane, buf + slot * SLOT);
        if (++lj == cpw) lj = 0, lg++;
    };
#pragma unroll
    for (int s = 0; s + 1 < DEP; s++) {
        if (s < nitems) issue(s);
        if (L::ASYNC) ts_cp_async_commit(); /* item s is group s, even when there is none */
    }

    float ob = 0.0f; /* one token, kw 1: this lane's row of the groups gathered for one store */
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    int cg = 0, cj = 0; /* decode cursor: group of the run, chunk index */
    const int nbatch = (int)((a.gpt + B - 1) / B); /* the same in every warp of the block */
    int k = 0;
#pragma unroll 1
    for (int bt = 0; bt < nbatch; bt++) {
        const int kend = nitems < (bt + 1) * B * cpw ? nitems : (bt + 1) * B * cpw;
        /* k starts every batch at a multiple of DEP (B % DEP == 0), so ring slot s is item k + s */
#pragma unroll 1
        for (; k < kend; k += DEP) {
#pragma unroll
            for (int s = 0; s < DEP; s++) {
                if (k + s >= kend) continue; /* the run's last items */
                if (k + s + DEP - 1 < nitems) issue((s + DEP - 1) % DEP);
                if (L::ASYNC) ts_cp_async_commit();
                const int row0 = (gs + cg) * R;
                const int nr = m.n_out - row0 < R ? m.n_out - row0 : R;
                const int bl = (phase + cj * kw) * G::CB + lane / D::NU;
                const bool on = bl < nb;
                /* token 0's activation words first: in flight while the weights arrive */
                uint32_t X0[8];
                XScale xs0;
                if (on) {
                    XSide<T>::xwords(a.xq + (int64_t)bl * D::QK, u, X0);
                    XSide<T>::xscale(a.xd, a.xs, bl, u, xs0);
                }
                uint8_t *sbuf = buf + s * SLOT; /* this item's bytes (the staging buffer: SLOT 0) */
                ring[s].stage(sbuf, nr, lane);
                if (on && NT == 1) {
                    /* one row's decoded unit live at a time (a whole group
                     * of up to 2 rows without a test per row: mvq_rows_whole) */
                    auto rows = [&](auto whole) {
#pragma unroll
                        for (int r = 0; r < R; r++) {
                            if (!decltype(whole)::value && r >= nr) continue;
                            typename D::UI w;
                            ring[s].unit(sbuf, r, lane, u, w);
                            acc[r][0] += D::idot(w, u, X0, xs0);
                        }
                    };
                    mvq_rows_whole<R>(nr, rows);
                } else if (on) {
                    /* every row's unit decoded once, each token's words loaded once */
                    typename D::UI w[R];
#pragma unroll
                    for (int r = 0; r < R; r++)
                        if (r < nr) ring[s].unit(sbuf, r, lane, u, w[r]);
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        if (t >= a.n_tok) continue;
                        uint32_t X[8];
                        XScale xs;
                        if (t == 0) {
#pragma unroll
                            for (int i = 0; i < 8; i++) X[i] = X0[i];
                            xs = xs0;
                        } else {
                            XSide<T>::xwords(a.xq + (int64_t)t * a.n_in + (int64_t)bl * D::QK, u, X);
                            XSide<T>::xscale(a.xd + t * a.nd, a.xs + t * a.ns, bl, u, xs);
                        }
#pragma unroll
                        for (int r = 0; r < R; r++)
                            if (r < nr) acc[r][t] += D::idot(w[r], u, X, xs);
                    }
                }
                if (++cj == cpw) { /* the warp's part of this group is done */
                    /* value j = r * NT + t, its sum (bit-identical to warp_sum's) in lane j << sh */
                    constexpr int sh = 5 - Log2<R * NT>::v;
                    float v[R * NT];
#pragma unroll
                    for (int r = 0; r < R; r++)
#pragma unroll
                        for (int t = 0; t < NT; t++) v[r * NT + t] = acc[r][t], acc[r][t] = 0.0f;
                    const float sum = warp_sum_n<R * NT>(v, lane);
                    const int j = lane >> sh, r = j / NT, t = j % NT;
                    if (NT == 1 && kw == 1) {
                        /* one token, one warp a group: the outputs of GPC
                         * consecutive groups (32 rows) gather in the lanes
                         * (lane L: row L of them) and go out in one store
                         * of 128 bytes, not 4 * R bytes a group: a y in
                         * mapped host memory (the logits, ts_logits_dest) takes
                         * 32 times fewer writes across the bus */
                        constexpr int GPC = 32 / R;
                        const int k = cg % GPC;
                        const float x = __shfl_sync(0xffffffffu, sum, (lane % R) << sh);
                        if (lane / R == k) ob = x;
                        if (k == GPC - 1 || cg + 1 == ng) {
                            const int row = (gs + cg - k) * R + lane;
                            if (lane < (k + 1) * R && row < m.n_out)
                                mvq_out(a.m[wi], a.accumulate, 0, row, 0.0f + ob); /* 0 + sum: as the kw > 1 sum */
                        }
                    } else if ((lane & ((1 << sh) - 1)) == 0) {
                        if (kw > 1) {
                            red[bt & 1][cg - bt * B][warp][r][t] = sum;
                        } else if (r < nr && t < a.n_tok) {
                            mvq_out(a.m[wi], a.accumulate, t, row0 + r, 0.0f + sum); /* 0 + sum: as the kw > 1 sum */
                        }
                    }
                    cj = 0;
                    cg++;
                }
            }
        }
        if (kw == 1) continue; /* kw is the same for the whole grid */
        __syncthreads();
        /* the team's threads take its outputs of the batch in (token, group,
         * row) order: consecutive threads write consecutive rows */
        for (int i = phase * 32 + lane; i < NT * B * R; i += kw * 32) {
            const int r = i % R, gi = (i / R) % B, t = i / (R * B);
            if (t >= a.n_tok) break;
            const int gb = bt * B + gi; /* group of the run */
            const int row = (gs + gb) * R + r;
            if (gb >= ng || row >= m.n_out) continue;
            float v = 0.0f;
            for (int j = 0; j < kw; j++) v += red[bt & 1][gi][warp - phase + j][r][t];
            mvq_out(a.m[wi], a.accumulate, t, row, v);
        }
    }
}

template <int T, int NT, int R, int KIND>
__global__ void __launch_bounds__(MVQ_WARPS * 32, mvq_min_blocks(NT)) mv_q_q8(const MvArgs a) {
    mvq_body<T, NT, R, KIND>(a);
}

/* Two weight types in one launch, one token: the blocks before a.b2 run the
 * T1 weights (a.m[0..), direct loads), the rest the T2 weights (loader K2),
 * so a Q4_K_M layer's Q/K (Q4_K) and V (Q6_K) stream in one launch, not two
 * (the launch boundary costs more than the bytes: docs/KERNELS.md). The
 * branch is per block, so every warp of a block passes the same barriers;
 * each type's body keeps its own shared buffers. */
template <int T1, int T2, int R, int K2>
__global__ void __launch_bounds__(MVQ_WARPS * 32, mvq_min_blocks(1)) mv_q_q8_pair(const MvArgs a) {
    if ((int64_t)blockIdx.x < a.b2) mvq_body<T1, 1, R, 1>(a);
    else mvq_body<T2, 1, R, K2>(a);
}

/* Whether a launch streams its weights with cp.async (QAsync) or through
 * registers (QDirect for Q4_K/Q5_K, QStaged for the rest). Measured on the
 * H200 (bench/results/2026-12-02-h200-s8/, docs/KERNELS.md): the ring is
 * faster for the staged types on long launches (bench_matvec 7B: Q8_0
 * +13-18%, Q6_K +2-9%; tg128 7B Q4_0 +1.5%) and slower for Q4_K's direct
 * loads, hence MVQ_ASYNC 2's rule (staged types, >= MVQ_ASYNC_MIN_ITEMS
 * items per warp); but with that rule SmolLM2's tg128 fell 1,176 -> 975 for
 * reasons not yet found, so the default was MVQ_ASYNC 0 (registers only)
 * until the Q6_K-only rule (MVQ_ASYNC 3) measured faster on every file. */
int mvq_force = -1;     /* ts_cuda_matvec_q8_force_loader */
int mvq_force_split = 0; /* ts_cuda_matvec_q8_force_split */
int mvq_force_kw1 = -1; /* ts_cuda_matvec_q8_force_kw1 */
int mvq_force_rows = -1; /* ts_cuda_matvec_q8_force_rows */

/* Whether a type's register launches use its direct loader (QDirect). */
static constexpr bool mvq_direct_type(uint32_t type) {
    return (MVQ_DIRECT && (type == TS_TYPE_Q4_K || type == TS_TYPE_Q5_K)) || (MVQ_DIRECT_Q40 && type == TS_TYPE_Q4_0);
}

static bool mvq_async(uint32_t type, int64_t items_per_warp) {
    if (mvq_force >= 0) return mvq_force == 1;
    const bool direct = mvq_direct_type(type);
    if (MVQ_ASYNC == 0 || (MVQ_ASYNC == 2 && direct) || (MVQ_ASYNC == 3 && type != TS_TYPE_Q6_K)) return false;
    return items_per_warp >= MVQ_ASYNC_MIN_ITEMS;
}

template <int T, int NT, int R> void launch_t(cudaStream_t s, bool async, const MvArgs &a, int64_t blocks) {
    constexpr int REG = mvq_direct_type(T) ? 1 : 0;
    if (async) ts_launch(&mv_q_q8<T, NT, R, 2>, (unsigned)blocks, MVQ_WARPS * 32, 0, s)(a);
    else ts_launch(&mv_q_q8<T, NT, R, REG>, (unsigned)blocks, MVQ_WARPS * 32, 0, s)(a);
}

template <int NT, int R>
ts_status launch_nt(cudaStream_t s, uint32_t type, const MvArgs &a, int64_t blocks, int64_t items_per_warp) {
    const bool async = mvq_async(type, items_per_warp);
    switch (type) {
#define Q(T) \
    case T: launch_t<T, NT, R>(s, async, a, blocks); break;
        TS_FOR_INT8_TYPES(Q)
#undef Q
    default: return ts_fail(TS_ERR_UNSUPPORTED, "cuda matvec_q8: type %s has no int8 path", ts_type_name(type));
    }
    TS_CUDA_LAUNCHED("matvec_q8");
    return TS_OK;
}

/* The pairs of weight types one launch runs together (mv_q_q8_pair), T1
 * first: the Q/K and V of Q4_K_M and Q5_K_M layers. */
static bool mvq_pair(uint32_t t1, uint32_t t2) {
    return t2 == TS_TYPE_Q6_K && (t1 == TS_TYPE_Q4_K || t1 == TS_TYPE_Q5_K) && MVQ_DIRECT;
}

/* The distinct weight types of a call; *t1 and *t2 the first two (in the
 * pair's order when they pair). */
static int mvq_types(int n_w, const ts_cuda_mat *w, uint32_t *t1, uint32_t *t2) {
    int types = 0;
    *t1 = *t2 = w[0].type;
    for (int i = 0; i < n_w; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= w[j].type == w[i].type;
        if (!seen && ++types == 2) *t2 = w[i].type;
    }
    if (types == 2 && !mvq_pair(*t1, *t2)) {
        const uint32_t t = *t1;
        *t1 = *t2, *t2 = t;
    }
    return types;
}

/* Whether a call's weights share one launch: one token, exactly two types
 * that pair, T1 on its direct loads (not the cp.async ring, forced or by
 * MVQ_ASYNC 1), the split not forced. */
static bool mvq_pairs(int types, uint32_t t1, uint32_t t2, int n_tok) {
    return n_tok == 1 && types == 2 && mvq_pair(t1, t2) && mvq_force_split != 1 && mvq_force != 1 && MVQ_ASYNC != 1;
}

template <int T1, int R> void launch_pair_r(cudaStream_t s, bool async2, const MvArgs &a, int64_t blocks) {
    if (async2) ts_launch(&mv_q_q8_pair<T1, TS_TYPE_Q6_K, R, 2>, (unsigned)blocks, MVQ_WARPS * 32, 0, s)(a);
    else ts_launch(&mv_q_q8_pair<T1, TS_TYPE_Q6_K, R, 0>, (unsigned)blocks, MVQ_WARPS * 32, 0, s)(a);
}

template <int R> void launch_pair(cudaStream_t s, uint32_t t1, bool async2, const MvArgs &a, int64_t blocks) {
    if (t1 == TS_TYPE_Q4_K) launch_pair_r<TS_TYPE_Q4_K, R>(s, async2, a, blocks);
    else launch_pair_r<TS_TYPE_Q5_K, R>(s, async2, a, blocks);
}

/* Team slots of one wave (a.kw set). */
int64_t mvq_slots(const MvArgs &a, int sms) {
    return (int64_t)sms * mvq_min_blocks(a.n_tok) * MVQ_WAVES * (MVQ_WARPS / a.kw);
}

/* Rows per group of a launch: MVQ_R1_BIG for one token when every team slot
 * gets a group of that many rows, else MVQ_R1 (one token) or MVQ_R. Not for
 * Q8_0, whose 4-row kernel spills (76 bytes at the 96-register bound).
 *
 * Tried and measured slower (session 20, bench/results/2026-12-03-h200-s20):
 * 2 rows where 4 leave team slots idle. A 7B down projection (3584 rows of
 * 18944) has 896 groups of 4 rows for 660 team slots, so runs of 2 groups
 * and 448 teams at work; 2 rows give 598 teams and a busiest warp of 30
 * items against 40. bench_matvec: Q4_K down 16.1 -> 17.6 us, Q6_K 28.0 ->
 * 28.7, o 7.4 -> 10.3; 7B tg128 within 1%. The launch's length is not its
 * busiest warp's item count: a 4-row item loads x once for twice the rows. */
int mvq_rows(MvArgs &a, int sms, uint32_t type) {
    if (a.n_tok > 1) return MVQ_R;
    if (type == TS_TYPE_Q8_0) return MVQ_R1;
    if (mvq_force_rows == MVQ_R1 || mvq_force_rows == MVQ_R1_BIG) return mvq_force_rows;
    mv_split(a, (a.n_in / 32 + 31) / 32, MVQ_R1_BIG); /* sets kw (a function of n_in only) and g0 */
    return a.g0[a.n_w] >= mvq_slots(a, sms) ? MVQ_R1_BIG : MVQ_R1;
}

/* Sets the split of a launch (g0, kw, gpt, t0, b2) and returns its block
 * count: one team per kw warps, each a run of up to gpt consecutive groups of
 * one weight, sized for MVQ_SM_WARPS resident warps per SM and MVQ_WAVES
 * waves. split > 0: the weights from a.m[split] on are another type, whose
 * teams start at a block boundary (a.b2; the teams of the gap have no rows). */
int64_t mvq_plan(MvArgs &a, int sms, int R, int split = 0) {
    const int64_t groups = mv_split(a, (a.n_in / 32 + 31) / 32, R);
    const int64_t warps = (int64_t)sms * mvq_min_blocks(a.n_tok) * MVQ_WAVES * MVQ_WARPS;
    if (mvq_force_kw1 == 1 || (mvq_force_kw1 < 0 && MVQ_KW1 && groups >= warps)) a.kw = 1; /* see MVQ_KW1 */
    const int64_t tpb = MVQ_WARPS / a.kw;
    const int64_t slots = mvq_slots(a, sms);
    a.gpt = (groups + slots - 1) / slots;
    int64_t teams = 0;
    a.b2 = 0;
    for (int i = 0; i < a.n_w; i++) {
        if (i == split && i > 0) {
            a.b2 = (teams + tpb - 1) / tpb;
            teams = a.b2 * tpb;
        }
        a.t0[i] = teams;
        teams += (a.g0[i + 1] - a.g0[i] + a.gpt - 1) / a.gpt;
    }
    for (int i = a.n_w; i <= TS_CUDA_MAX_MATS; i++) a.t0[i] = teams;
    return (teams + tpb - 1) / tpb;
}

} // namespace

void ts_cuda_matvec_q8_force_loader(int mode) { mvq_force = mode; }
void ts_cuda_matvec_q8_force_kw1(int mode) { mvq_force_kw1 = mode; }
void ts_cuda_matvec_q8_force_rows(int mode) { mvq_force_rows = mode; }
void ts_cuda_matvec_q8_force_split(int mode) { mvq_force_split = mode; }

int ts_cuda_matvec_q8_rows(int n_w, const ts_cuda_mat *w, int n_tok, int sms) {
    if (sms < 1 || n_w < 1 || n_w > TS_CUDA_MAX_MATS || n_tok < 1 || n_tok > TS_CUDA_MAX_DECODE_TOK || !w) return 0;
    MvArgs a;
    memset(&a, 0, sizeof a);
    a.n_in = w[0].n_in;
    a.n_tok = n_tok;
    for (int i = 0; i < n_w; i++) {
        if (w[i].type != w[0].type || w[i].n_in != a.n_in || w[i].n_out < 1 || a.n_in < 32) return 0;
        a.m[a.n_w++] = MvMat{(const uint8_t *)w[i].data, w[i].row_bytes, w[i].n_out, w[i].bias, NULL};
    }
    return mvq_rows(a, sms, w[0].type);
}

int ts_cuda_matvec_q8_launches(int n_w, const ts_cuda_mat *w, int n_tok) {
    if (n_w < 1 || n_w > TS_CUDA_MAX_MATS || n_tok < 1 || n_tok > TS_CUDA_MAX_DECODE_TOK || !w) return 0;
    uint32_t t1, t2;
    const int types = mvq_types(n_w, w, &t1, &t2);
    return types - (mvq_pairs(types, t1, t2, n_tok) ? 1 : 0);
}

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

static ts_status quantize_launch(void *stream, uint32_t partner, const float *x, int64_t n_in, int n_tok, const float *norm_w,
                                 float eps, const float *up, int act, float *xout, void *q8) {
    TS_ARG_CHECK(ts_cuda_q8_bytes(partner, n_in, n_tok) > 0,
                 "cuda quantize_q8: partner %s with n_in %lld, %d tokens", ts_type_name(partner), (long long)n_in,
                 n_tok);
    TS_ARG_CHECK(x && q8 && ((uintptr_t)q8 & 255) == 0, "cuda quantize_q8: NULL x, or q8 not 256-byte aligned");
    TS_ARG_CHECK(!norm_w || ((uintptr_t)x & 15) == 0, "cuda quantize_q8: x not 16-byte aligned (the norm reads it in 16-byte words)");
    TS_ARG_CHECK(n_tok <= 65535, "cuda quantize_q8: %d tokens (at most 65535 per call)", n_tok);
    const Q8Layout L = q8_layout(partner, n_in, n_tok);
    uint8_t *b = (uint8_t *)q8;
    const dim3 grid((unsigned)((n_in + 255) / 256), (unsigned)n_tok);
    if (partner == TS_TYPE_Q8_K)
        ts_launch(&q8_quant<true>, grid, 256, 0, ts_stream(stream))(x, n_in, norm_w, eps, up, act, xout, (int8_t *)(b + L.qs),
                                                            (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns);
    else
        ts_launch(&q8_quant<false>, grid, 256, 0, ts_stream(stream))(x, n_in, norm_w, eps, up, act, xout, (int8_t *)(b + L.qs),
                                                             (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns);
    TS_CUDA_LAUNCHED("quantize_q8");
    return TS_OK;
}

ts_status ts_cuda_quantize_q8(void *stream, uint32_t partner, const float *x, int64_t n_in, int n_tok,
                              const float *norm_w, float eps, void *q8) {
    return quantize_launch(stream, partner, x, n_in, n_tok, norm_w, eps, NULL, 0, NULL, q8);
}

ts_status ts_cuda_quantize_q8_act(void *stream, uint32_t partner, int act, const float *gate, const float *up, int64_t n_in,
                                  int n_tok, float *gate_out, void *q8) {
    TS_ARG_CHECK(up && gate_out, "cuda quantize_q8_act: NULL up or output");
    TS_ARG_CHECK(act == TS_CUDA_ACT_SILU || act == TS_CUDA_ACT_GELU_TANH, "cuda quantize_q8_act: activation %d", act);
    return quantize_launch(stream, partner, gate, n_in, n_tok, NULL, 0.0f, up, act, gate_out, q8);
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
        TS_ARG_CHECK(w[i].n_out <= INT32_MAX && w[i].row_bytes <= UINT32_MAX,
                     "cuda matvec_q8: weight %d: %lld rows of %llu bytes (at most 2^31 rows of 2^32 bytes)", i,
                     (long long)w[i].n_out, (unsigned long long)w[i].row_bytes);
    for (int i = 0; i < n_w; i++)
        TS_ARG_CHECK(ts_cuda_q8_partner(w[i].type) == partner, "cuda matvec_q8: %s weights need %s activations, not %s",
                     ts_type_name(w[i].type), ts_type_name(ts_cuda_q8_partner(w[i].type)), ts_type_name(partner));
    int sms = 0;
    st = ts_cuda_sm_count(&sms);
    if (st != TS_OK) return st;
    const Q8Layout L = q8_layout(partner, w[0].n_in, n_tok);
    const uint8_t *b = (const uint8_t *)q8;
    cudaStream_t s = ts_stream(stream);
    const int64_t nchunks = (w[0].n_in / 32 + 31) / 32;
    MvArgs a0;
    memset(&a0, 0, sizeof a0);
    a0.n_in = w[0].n_in;
    a0.n_tok = n_tok;
    a0.accumulate = accumulate;
    a0.xq = (const int8_t *)(b + L.qs);
    a0.xd = (const float *)(b + L.d);
    a0.xs = (const int32_t *)(b + L.s);
    a0.nd = L.nd;
    a0.ns = L.ns;
    bool done[TS_CUDA_MAX_MATS] = {false, false, false, false};
    uint32_t t1, t2;
    const int types = mvq_types(n_w, w, &t1, &t2);
    if (mvq_pairs(types, t1, t2, n_tok)) { /* one launch, the T1 weights first */
        MvArgs a = a0;
        int split = 0;
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < n_w; j++)
                if (w[j].type == (k ? t2 : t1))
                    a.m[a.n_w++] = MvMat{(const uint8_t *)w[j].data, w[j].row_bytes, w[j].n_out, w[j].bias, y[j]};
            if (!k) split = a.n_w;
        }
        const int rows = mvq_rows(a, sms, t1);
        const int64_t blocks = mvq_plan(a, sms, rows, split);
        TS_ARG_CHECK(blocks < (1ll << 31), "cuda matvec_q8: %lld blocks", (long long)blocks);
        const bool async2 = mvq_async(t2, a.gpt * ((nchunks + a.kw - 1) / a.kw));
        if (rows == MVQ_R1_BIG) launch_pair<MVQ_R1_BIG>(s, t1, async2, a, blocks);
        else launch_pair<MVQ_R1>(s, t1, async2, a, blocks);
        TS_CUDA_LAUNCHED("matvec_q8");
        return TS_OK;
    }
    for (int i = 0; i < n_w; i++) {
        if (done[i]) continue;
        MvArgs a = a0;
        for (int j = i; j < n_w; j++) {
            if (done[j] || w[j].type != w[i].type) continue;
            done[j] = true;
            a.m[a.n_w++] = MvMat{(const uint8_t *)w[j].data, w[j].row_bytes, w[j].n_out, w[j].bias, y[j]};
        }
        const int rows = mvq_rows(a, sms, w[i].type);
        const int64_t blocks = mvq_plan(a, sms, rows);
        TS_ARG_CHECK(blocks < (1ll << 31), "cuda matvec_q8: %lld blocks", (long long)blocks);
        const int64_t ipw = a.gpt * ((nchunks + a.kw - 1) / a.kw);
        ts_status r = n_tok > 4    ? launch_nt<8, MVQ_R>(s, w[i].type, a, blocks, ipw)
                      : n_tok > 2  ? launch_nt<4, MVQ_R>(s, w[i].type, a, blocks, ipw)
                      : n_tok > 1  ? launch_nt<2, MVQ_R>(s, w[i].type, a, blocks, ipw)
                      : rows == MVQ_R1_BIG ? launch_nt<1, MVQ_R1_BIG>(s, w[i].type, a, blocks, ipw)
                                           : launch_nt<1, MVQ_R1>(s, w[i].type, a, blocks, ipw);
        if (r != TS_OK) return r;
    }
    return TS_OK;
}
