/* Pieces shared by the matrix-vector kernels (matvec.cu: F32 activations,
 * matvec_q8.cu: int8 activations) and the dequantizer (gemm.cu).
 *
 * Staging. Quantized rows are streamed through shared memory in chunks of 32
 * units (one per lane: 32 blocks of the 32-element quants, 4 K-quant
 * super-blocks): the warp reads the chunk's bytes with 16-byte loads from the
 * 16-aligned address at or below its start, consecutive lanes on consecutive
 * words (fully coalesced whatever the block size: 18-, 34-, 210-byte blocks
 * are not 16-byte aligned), stores them to its own shared buffer, and each
 * lane then decodes its unit from there, where byte offsets cost nothing.
 * The next chunk's loads are issued into registers before the current chunk
 * is decoded, so a warp keeps one chunk in flight while it computes. The
 * last word of a matrix may pass its end: it is read byte by byte, so nothing
 * outside [data, data + n_out * row_bytes) is touched.
 *
 * Work split. A launch covers up to four weights sharing the input; their
 * rows form one list of row groups (MV_R rows each). A block of MV_WARPS
 * warps takes MV_WARPS / kw groups; the kw warps of a group split its chunks
 * (phase = warp % kw) and add their partial sums in shared memory, so short
 * rows still give every warp work. */
#ifndef TS_MATVEC_COMMON_CUH
#define TS_MATVEC_COMMON_CUH

#include "compute/cuda/cuda_quant.cuh"

/* Knobs of the F32-activation path and the dequantizer (the int8 path has
 * its own, MVQ_* in matvec_q8.cu); -D overrides them. */
#ifndef MV_WARPS
#define MV_WARPS 4 /* warps per block */
#endif
#ifndef MV_R
#define MV_R 2 /* rows per group: each x value loaded is used for MV_R rows */
#endif
/* 4 blocks (16 warps) per SM: caps registers at 128; without it ptxas picked
 * 96 for some instantiations and spilled (measured with -Xptxas -v) */
#ifndef MV_MIN_BLOCKS
#define MV_MIN_BLOCKS 4
#endif

template <int T> struct Geo {
    typedef Dec<T> D;
    static constexpr int CB = 32 / D::NU;                /* blocks per chunk */
    static constexpr int CHB = CB * D::BB;               /* bytes per chunk of a row */
    static constexpr int WORDS = (CHB + 15 + 15) / 16;   /* 16-byte words covering a chunk at any alignment */
    static constexpr int WPL = (WORDS + 31) / 32;        /* words per lane */
    static constexpr int SROW = WORDS * 16 + 16;         /* staged bytes per row (+16: rd32 reads one word past) */
};

/* One weight's part of a launch. */
struct MvMat {
    const uint8_t *w;   /* (n_out, row_bytes) */
    uint64_t row_bytes; /* bytes per row */
    int64_t n_out;      /* rows */
    const float *bias;  /* (n_out) or NULL */
    float *y;           /* (n_tok, n_out) */
};

struct MvArgs {
    MvMat m[TS_CUDA_MAX_MATS];
    int64_t g0[TS_CUDA_MAX_MATS + 1]; /* first row group of each weight; g0[n_w] = all groups */
    int n_w;
    int kw;                           /* warps per row group: 1, 2 or 4 */
    int64_t gpt;                      /* int8 path: row groups per team of kw warps */
    int64_t t0[TS_CUDA_MAX_MATS + 1]; /* int8 path: first team of each weight; t0[n_w] = all teams */
    int64_t b2;                       /* int8 path, two types in one launch: first block of the second (mv_q_q8_pair) */
    int64_t n_in;                     /* elements per row (shared) */
    int n_tok;                        /* 1..TS_CUDA_MAX_DECODE_TOK */
    int accumulate;                   /* y += product instead of y = product */
    /* F32 activations */
    const float *x;                   /* (n_tok, n_in) */
    const float *inv_rms;             /* (n_tok) or NULL */
    const float *norm_w;              /* (n_in) or NULL */
    int self_norm;                    /* norm_w without inv_rms: every block computes 1/rms itself (mv_norm_prologue) */
    float eps;                        /* self_norm: the RMSNorm's epsilon */
    float *xn;                        /* self_norm: (n_tok, n_in), the normalized rows (each block writes a slice), or NULL */
    /* int8 activations (ts_cuda_q8_bytes layout) */
    const int8_t *xq;                 /* (n_tok, n_in) */
    const float *xd;                  /* (n_tok, nd) */
    const int32_t *xs;                /* (n_tok, ns) */
    int64_t nd, ns;                   /* scales and sums per token */
};

/* The group a warp works on: weight index, first row, rows in it; false when
 * the warp has no group (past the end). */
struct MvGroup {
    int wi;
    int64_t row0;
    int nr;
};

template <int R = MV_R> TS_DEV bool mv_group(const MvArgs &a, int64_t gi, MvGroup &g) {
    if (gi >= a.g0[a.n_w]) return false;
    int wi = 0;
#pragma unroll
    for (int i = 1; i < TS_CUDA_MAX_MATS; i++)
        if (i < a.n_w && gi >= a.g0[i]) wi = i;
    g.wi = wi;
    g.row0 = (gi - a.g0[wi]) * R;
    const int64_t left = a.m[wi].n_out - g.row0;
    g.nr = left < R ? (int)left : R;
    return true;
}

/* 16 bytes of a weight matrix that ends at `end`: one load when the word
 * lies inside it, else byte by byte (the matrix's last, partial word). */
TS_DEV uint4 ld_weight_word(const uint8_t *p, const uint8_t *end) {
    if (p + 16 <= end) return __ldg((const uint4 *)p);
    uint64_t lo = 0, hi = 0; /* scalars: a runtime-indexed array would live in local memory */
    for (int j = 0; j < 16 && p + j < end; j++) {
        if (j < 8) lo |= (uint64_t)p[j] << (8 * j);
        else hi |= (uint64_t)p[j] << (8 * (j - 8));
    }
    return make_uint4((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32));
}

#ifndef MVQ_LDG
#define MVQ_LDG 1 /* weight loads of the int8 kernels: 0 = ld.global.nc, 1 = + L1::no_allocate, 2 = + L2::256B prefetch */
#endif

/* 16 weight bytes from a 16-aligned address, read once: no L1 allocation, so
 * the weights streaming through do not evict x, which every item reads again
 * (the emulation and host compiles read plainly). */
TS_DEV uint4 ldw16(const uint8_t *p) {
#if defined(__CUDA_ARCH__) && MVQ_LDG == 1
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
#elif defined(__CUDA_ARCH__) && MVQ_LDG == 2
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
#else
    return __ldg((const uint4 *)p);
#endif
}

/* A compile-time bool passed to a generic lambda. */
template <bool B> struct Flag {
    static constexpr bool value = B;
};

template <int T, int R, bool INSIDE, typename F>
TS_DEV void q_item_rows(const uint8_t *start, uint32_t rb, int nr, int nbytes, int lane, int (&dn)[R], F &word) {
#pragma unroll
    for (int r = 0; r < R; r++, start += rb) {
        dn[r] = 0;
        if (r >= nr) continue;
        const int delta = (int)((uintptr_t)start & 15), nw = (delta + nbytes + 15) >> 4;
        const uint8_t *a0 = start - delta + 16 * lane;
        dn[r] = delta | nw << 4;
#pragma unroll
        for (int i = 0; i < Geo<T>::WPL; i++)
            if (lane + 32 * i < nw) word(r, i, lane + 32 * i, a0 + 512 * i, Flag<INSIDE>());
    }
}

/* The 16-byte words of one item of the int8 kernels (matvec_q8.cu, moe.cu):
 * chunk c (of a row's nb blocks) of nr >= 1 rows starting at row, rb bytes
 * apart, of a matrix ending at end. Sets dn[r] = the chunk start's offset
 * from the 16-aligned word at or below it (bits 0-3) | its word count (bits
 * 4-), and calls word(r, i, k, p, inside) for each word k = lane + 32 i of
 * row r that this lane reads, at p. inside (a Flag) is whether the whole item
 * lies inside the matrix, tested once per item: when it is not, the matrix's
 * last word may pass end and the caller must read only its bytes
 * (ld_weight_word). */
template <int T, int R, typename F>
TS_DEV void q_item_words(const uint8_t *row, uint32_t rb, const uint8_t *end, int nr, int c, int nb, int lane, int (&dn)[R],
                         F word) {
    typedef Dec<T> D;
    typedef Geo<T> G;
    const int b0 = c * G::CB;
    const int nbytes = (nb - b0 < G::CB ? nb - b0 : G::CB) * D::BB;
    const uint8_t *start = row + (size_t)b0 * D::BB;
    const uint8_t *last = start + (size_t)(nr - 1) * rb + nbytes; /* one past the item's last byte */
    if (last + ((0u - (uint32_t)(uintptr_t)last) & 15u) <= end) q_item_rows<T, R, true>(start, rb, nr, nbytes, lane, dn, word);
    else q_item_rows<T, R, false>(start, rb, nr, nbytes, lane, dn, word);
}

/* Register-side of the staging: a chunk of R rows in flight. */
template <int T, int R> struct Stage {
    typedef Geo<T> G;
    uint4 v[R][G::WPL];
    int delta[R]; /* chunk start - its 16-aligned base, per row */
    int nw[R];    /* words loaded, per row */

    /* Issue the loads of chunk c of rows row0.. (nr valid) of matrix m. */
    TS_DEV void load(const MvMat &m, int64_t row0, int nr, int64_t c, int64_t nb, int lane) {
        typedef Dec<T> D;
        const uint8_t *end = m.w + (uint64_t)m.n_out * m.row_bytes;
        const int64_t b0 = c * G::CB;
        const int nbytes = (int)((nb - b0 < G::CB ? nb - b0 : G::CB) * D::BB);
#pragma unroll
        for (int r = 0; r < R; r++) {
            delta[r] = 0;
            nw[r] = 0;
            if (r >= nr) continue;
            const uint8_t *start = m.w + (uint64_t)(row0 + r) * m.row_bytes + (uint64_t)b0 * D::BB;
            const uint8_t *a0 = (const uint8_t *)((uintptr_t)start & ~(uintptr_t)15);
            delta[r] = (int)(start - a0);
            nw[r] = (delta[r] + nbytes + 15) >> 4;
#pragma unroll
            for (int i = 0; i < G::WPL; i++) {
                const int k = lane + 32 * i;
                if (k < nw[r]) v[r][i] = ld_weight_word(a0 + 16 * k, end);
            }
        }
    }
    /* Copy the chunk in flight into the warp's shared buffer sm (R * SROW). */
    TS_DEV void store(uint8_t *sm, int nr, int lane) const {
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= nr) continue;
#pragma unroll
            for (int i = 0; i < G::WPL; i++) {
                const int k = lane + 32 * i;
                if (k < nw[r]) *(uint4 *)(sm + r * G::SROW + 16 * k) = v[r][i];
            }
        }
    }
};

/* Sums the kw partials of each group (red: MV_WARPS x R x NT) and writes
 * y = [y +] (sum [+ bias]). Called by every thread of the block. */
template <int R, int NT>
TS_DEV void mv_finish(const MvArgs &a, float (&acc)[R][NT], bool active, const MvGroup &g, float (*red)[R][NT]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = warp_sum(acc[r][t]);
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < NT; t++) red[warp][r][t] = acc[r][t];
    }
    __syncthreads();
    if (!active || warp % a.kw != 0) return;
    const MvMat &m = a.m[g.wi];
    for (int k = lane; k < R * NT; k += 32) {
        const int r = k / NT, t = k % NT;
        if (r >= g.nr || t >= a.n_tok) continue;
        float v = 0;
        for (int j = 0; j < a.kw; j++) v += red[warp + j][r][t];
        const int64_t row = g.row0 + r;
        if (m.bias) v += m.bias[row];
        float *yp = m.y + (int64_t)t * m.n_out + row;
        *yp = a.accumulate ? *yp + v : v;
    }
}

/* Dequantizes chunk c of one row (Stage + decoders), calling
 * out(element, float4 of 4 consecutive values) for every group of 4. buf is
 * the warp's shared staging buffer (Geo<T>::SROW bytes). Whole warp. */
template <int T, typename Out>
TS_DEV void dequant_chunk(const MvMat &m, int64_t row, int64_t c, int64_t nb, uint8_t *buf, int lane, Out out) {
    typedef Dec<T> D;
    typedef Geo<T> G;
    Stage<T, 1> st;
    st.load(m, row, 1, c, nb, lane);
    __syncwarp();
    st.store(buf, 1, lane);
    __syncwarp();
    const int64_t bl = c * G::CB + lane / D::NU;
    const int u = lane % D::NU;
    if (bl < nb) {
        typename D::U s;
        D::load(buf + st.delta[0] + (lane / D::NU) * D::BB, u, s);
#pragma unroll
        for (int p = 0; p < 4; p++) {
            float w[8];
            D::pair(s, u, p, w);
            out(bl * D::QK + D::posA(u, p), make_float4(w[0], w[1], w[2], w[3]));
            out(bl * D::QK + D::posB(u, p), make_float4(w[4], w[5], w[6], w[7]));
        }
    }
    __syncwarp();
}

/* 4 consecutive values of a float-typed row (F32, F16, BF16) from element e
 * (a multiple of 4; rows 16-byte aligned). */
TS_DEV float4 float_row4(uint32_t type, const uint8_t *row, int64_t e) {
    if (type == TS_TYPE_F32) return __ldg((const float4 *)(row + 4 * e));
    const uint2 v = __ldg((const uint2 *)(row + 2 * e));
    if (type == TS_TYPE_F16)
        return make_float4(h2f((uint16_t)(v.x & 0xffff)), h2f((uint16_t)(v.x >> 16)), h2f((uint16_t)(v.y & 0xffff)),
                           h2f((uint16_t)(v.y >> 16)));
    return make_float4(bits_to_f32(v.x << 16), bits_to_f32(v.x & 0xffff0000u), bits_to_f32(v.y << 16),
                       bits_to_f32(v.y & 0xffff0000u));
}

/* ---- host side ---- */

/* Sets g0 (row groups of R rows) and kw, the warps that split one group's
 * chunks; returns the number of groups. kw depends on the row length only,
 * never on a knob: it fixes which lane adds which units in which order, so
 * every setting of the knobs sums a row the same way. */
static inline int64_t mv_split(MvArgs &a, int64_t nchunks, int R) {
    int64_t g = 0;
    for (int i = 0; i < a.n_w; i++) {
        a.g0[i] = g;
        g += (a.m[i].n_out + R - 1) / R;
    }
    for (int i = a.n_w; i <= TS_CUDA_MAX_MATS; i++) a.g0[i] = g;
    a.kw = nchunks >= 4 ? 4 : nchunks >= 2 ? 2 : 1;
    return g;
}

/* Sets g0, kw and returns the block count for a launch over args.m[0..n_w). */
static inline int64_t mv_plan(MvArgs &a, int64_t nchunks) {
    const int64_t g = mv_split(a, nchunks, MV_R);
    const int64_t gpb = MV_WARPS / a.kw;
    return (g + gpb - 1) / gpb;
}

/* Common argument checks of a matvec call; fills args.m. */
static inline ts_status mv_check(int n_w, const ts_cuda_mat *w, float *const *y, int n_tok, MvArgs &a) {
    TS_ARG_CHECK(n_w >= 1 && n_w <= TS_CUDA_MAX_MATS, "cuda matvec: %d weights (1..%d)", n_w, TS_CUDA_MAX_MATS);
    TS_ARG_CHECK(n_tok >= 1 && n_tok <= TS_CUDA_MAX_DECODE_TOK, "cuda matvec: %d tokens (1..%d)", n_tok,
                 TS_CUDA_MAX_DECODE_TOK);
    TS_ARG_CHECK(w && y, "cuda matvec: NULL weight or output array");
    memset(&a, 0, sizeof a);
    a.n_w = n_w;
    a.n_in = w[0].n_in;
    a.n_tok = n_tok;
    for (int i = 0; i < n_w; i++) {
        const ts_type_traits *tt = ts_type_get(w[i].type);
        TS_ARG_CHECK(ts_cuda_type_supported(w[i].type), "cuda matvec: weight type %s not supported",
                     ts_type_name(w[i].type));
        TS_ARG_CHECK(w[i].data && y[i], "cuda matvec: weight %d: NULL data or output", i);
        TS_ARG_CHECK(((uintptr_t)w[i].data & 15) == 0, "cuda matvec: weight %d not 16-byte aligned", i);
        TS_ARG_CHECK(w[i].n_in == a.n_in, "cuda matvec: weights disagree on n_in (%lld vs %lld)",
                     (long long)w[i].n_in, (long long)a.n_in);
        TS_ARG_CHECK(w[i].n_in > 0 && w[i].n_in % 32 == 0 && w[i].n_in % tt->block_elems == 0,
                     "cuda matvec: n_in %lld must be a positive multiple of 32 and of the %s block",
                     (long long)w[i].n_in, tt->name);
        TS_ARG_CHECK(w[i].row_bytes == ts_type_row_bytes(w[i].type, (uint64_t)w[i].n_in),
                     "cuda matvec: weight %d: row_bytes %llu, %s rows of %lld are %llu bytes", i,
                     (unsigned long long)w[i].row_bytes, tt->name, (long long)w[i].n_in,
                     (unsigned long long)ts_type_row_bytes(w[i].type, (uint64_t)w[i].n_in));
        TS_ARG_CHECK(w[i].n_out > 0, "cuda matvec: weight %d has no rows", i);
    }
    return TS_OK;
}

#endif
