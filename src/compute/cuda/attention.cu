/* Attention over the F16 KV cache: split-K flash-decoding for a few query
 * tokens, tiled flash attention for prefill, both with an online softmax in
 * float (expf, not __expf) and the CPU's masking: token t sees positions
 * [max(0, pos[t] - window + 1), pos[t]] (window 0: from 0).
 *
 * The common step (attn_tile): a warp takes a tile of 32 keys for up to RW
 * query rows. Scores: lane j owns key j and dots it with every row (the K
 * tile is staged in shared memory, rows padded by 16 bytes so the lanes'
 * 16-byte reads spread over the banks; q rows are broadcast from shared).
 * Softmax: per row, the tile max and sum by warp shuffles, the running max,
 * sum and output rescaled. Values: lane owns HD/32 consecutive dims and runs
 * over the tile's keys, reading V rows whole (coalesced).
 *
 * Decode (n_tok <= 8): grid (n_split, kv heads x head chunks of 8, tokens).
 * A block takes the GQA group of one kv head (up to 8 query heads share each
 * K/V load) over one split of [0, n_ctx); its warps take interleaved tiles,
 * merge their states in shared memory, and write the split's (max, sum,
 * unnormalized output); attn_combine merges the splits. The split count
 * depends on n_ctx, the heads and the SM count only, never on pos: blocks
 * whose split lies past a token's position exit after writing an empty state,
 * so one graph serves every decode step. A short cache (two tiles per warp at
 * most) is one split: no merge, and a Q8_0 partner's quantization is done by
 * the decode kernel itself (Q8Out).
 *
 * Fused with RoPE (ts_cuda_rope_attention, one decode token): the block also
 * normalizes (per-head norms) and rotates its query rows in shared memory,
 * and the block whose split holds the position does the same to the token's
 * k and stores k and v into the cache before its barrier, so its own tile
 * loads read them (no other block reads that row: the splits below the
 * position end before it). The rope_kv_store kernel's operations in its
 * order: the same bits, one launch fewer.
 *
 * Prefill: grid (query tiles of BQ tokens, heads); the block stages each K/V
 * tile once for its BQ queries (each warp owns BQ/4 of them) and walks the
 * keys from the tile's lowest visible position to its highest.
 *
 * CPU reference: the CPU backend's attention op (scores in float, softmax
 * sums in double, normalized weights times V). */
#include "compute/cuda/cuda_quant.cuh"

namespace {

#define ATT_RW 8 /* query rows per warp (decode: the heads of a GQA group) */
#ifndef ATT_SHORT_RW
/* Query rows per block when the cache is one split (ATT_SHORT_TILES): a
 * GQA group's heads then go to blocks of this many, not all to one. With
 * one block per group, the 7B (4 kv heads) decoded on 4 SMs and its
 * attention took 9 us a layer, the block's warps walking eight rows of
 * scores each (ncu, H200, session 14). */
#define ATT_SHORT_RW 1
#endif

template <int HD, int RW> struct AttnState {
    float m[RW], l[RW], acc[RW][HD / 32];
};

/* 8 halves -> floats */
TS_DEV void h8(const uint4 v, float (&f)[8]) {
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 p = __half22float2(*(const __half2 *)&u[i]);
        f[2 * i] = p.x, f[2 * i + 1] = p.y;
    }
}

/* A lane's HD/32 consecutive halves of a V row, as loaded (raw), and as floats. */
template <int HD> struct VRow;
template <> struct VRow<64> { typedef uint32_t T; };
template <> struct VRow<128> { typedef uint2 T; };
template <> struct VRow<256> { typedef uint4 T; };
template <int HD> TS_DEV void vrow_f(const typename VRow<HD>::T &w, float (&f)[HD / 32]) {
    const uint32_t *u = (const uint32_t *)&w;
#pragma unroll
    for (int i = 0; i < HD / 64; i++) {
        const float2 p = __half22float2(*(const __half2 *)&u[i]);
        f[2 * i] = p.x, f[2 * i + 1] = p.y;
    }
}

/* V rows a warp loads before it uses any (decode reads V from global memory:
 * a tile of 32 keys is 32 / VB dependent round trips). With one query row
 * per warp (a short cache) the whole tile's rows fit in registers and are
 * loaded with the K tile, so their latency hides under the scores. */
template <int HD, int RW> struct VBatch {
    static constexpr int N = RW == 1 ? (HD >= 256 ? 16 : 32) : (HD >= 256 ? 4 : 8);
};

/* The tile's keys that some row sees, [jlo, jhi] in 0..31 (jhi < jlo: none). */
template <int RW> TS_DEV void tile_keys(int key0, const int (&lo)[RW], const int (&hi)[RW], int &jlo, int &jhi) {
    jlo = 32, jhi = -1;
#pragma unroll
    for (int r = 0; r < RW; r++) {
        const int a = lo[r] - key0, b = hi[r] - key0;
        if (a <= b && b >= 0 && a <= 31) {
            jlo = min(jlo, max(a, 0));
            jhi = max(jhi, min(b, 31));
        }
    }
}

/* A warp's K tile [key0, key0 + 32) (rows <= kb; zeros past it) in 16-byte
 * words: lane's words k0 .. k0 + KB - 1 of its WPR (= HD / 8: 32 rows x WPR
 * words over 32 lanes), all loaded before any is stored (a load then its
 * store per word made every word a round trip). */
template <int HD, int KB>
TS_DEV void k_tile_load(uint4 (&w)[KB], const uint16_t *Kh, int key0, int kb, int k0, int lane) {
    constexpr int WPR = HD / 8;
#pragma unroll
    for (int b = 0; b < KB; b++) {
        const int k = lane + 32 * (k0 + b), row = k / WPR, col = k % WPR;
        w[b] = key0 + row <= kb ? *(const uint4 *)(Kh + (int64_t)(key0 + row) * HD + col * 8) : make_uint4(0, 0, 0, 0);
    }
}
template <int HD, int KB, int KS> TS_DEV void k_tile_store(const uint4 (&w)[KB], uint16_t *Ks, int k0, int lane) {
    constexpr int WPR = HD / 8;
#pragma unroll
    for (int b = 0; b < KB; b++) {
        const int k = lane + 32 * (k0 + b), row = k / WPR, col = k % WPR;
        *(uint4 *)(Ks + row * KS + col * 8) = w[b];
    }
}

/* Rows j0 .. j0 + VB - 1 of vp (stride vstride halves) that are <= jhi; zeros past it. */
template <int HD, int VB>
TS_DEV void vrows_load(typename VRow<HD>::T (&v)[VB], const uint16_t *vp, int64_t vstride, int j0, int jhi) {
#pragma unroll
    for (int b = 0; b < VB; b++) {
        if (j0 + b <= jhi) v[b] = *(const typename VRow<HD>::T *)(vp + (int64_t)(j0 + b) * vstride);
        else memset(&v[b], 0, sizeof v[b]);
    }
}

/* One warp, one tile of 32 keys [key0, key0 + 32), RW query rows.
 * Q: rows (RW, HD) floats in shared; Ks: the tile's K rows, stride KS halves,
 * in shared; vp: this lane's dims of the V row of key0, stride vstride halves
 * (global in decode, shared in prefill); lo/hi: each row's visible keys (hi < lo: none), [jlo, jhi] their
 * union in the tile (tile_keys); v: rows jlo .. jlo + VB - 1, already loaded
 * (vrows_load) where VPRE, else loaded here after the scores (prefill: V in
 * shared memory, where loading early only holds registers). P: (RW, 32)
 * shared scratch. */
template <int HD, int RW, int KS, int VB, bool VPRE>
TS_DEV void attn_tile(AttnState<HD, RW> &S, const float *Q, const uint16_t *Ks, const uint16_t *vp, int64_t vstride, int key0,
                      const int (&lo)[RW], const int (&hi)[RW], int jlo, int jhi, typename VRow<HD>::T (&v)[VB],
                      float scale, float *P, int lane) {
    const int key = key0 + lane;
    float s[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) s[r] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < HD; d += 8) {
        float kf[8];
        h8(*(const uint4 *)(Ks + lane * KS + d), kf);
#pragma unroll
        for (int r = 0; r < RW; r++) {
            const float4 qa = *(const float4 *)(Q + r * HD + d), qb = *(const float4 *)(Q + r * HD + d + 4);
            float v = s[r];
            v = fmaf(qa.x, kf[0], v), v = fmaf(qa.y, kf[1], v), v = fmaf(qa.z, kf[2], v), v = fmaf(qa.w, kf[3], v);
            v = fmaf(qb.x, kf[4], v), v = fmaf(qb.y, kf[5], v), v = fmaf(qb.z, kf[6], v), v = fmaf(qb.w, kf[7], v);
            s[r] = v;
        }
    }
#pragma unroll
    for (int r = 0; r < RW; r++) {
        const bool valid = key >= lo[r] && key <= hi[r];
        const float sc = valid ? s[r] * scale : -INFINITY;
        const float mnew = fmaxf(S.m[r], warp_max(sc));
        float p = 0.0f, alpha = 1.0f;
        if (mnew != -INFINITY) {
            alpha = expf(S.m[r] - mnew); /* 0 while the row had nothing */
            p = valid ? expf(sc - mnew) : 0.0f;
        }
        S.l[r] = S.l[r] * alpha + warp_sum(p);
#pragma unroll
        for (int e = 0; e < HD / 32; e++) S.acc[r][e] *= alpha;
        S.m[r] = mnew;
        P[r * 32 + lane] = p;
    }
    __syncwarp();
    /* the products in key order, a batch of VB rows at a time */
    for (int j0 = jlo; j0 <= jhi; j0 += VB) {
        if (!VPRE || j0 != jlo) vrows_load<HD, VB>(v, vp, vstride, j0, jhi);
#pragma unroll
        for (int b = 0; b < VB; b++) {
            if (j0 + b > jhi) break;
            float vf[HD / 32];
            vrow_f<HD>(v[b], vf);
#pragma unroll
            for (int r = 0; r < RW; r++) {
                const float p = P[r * 32 + j0 + b];
#pragma unroll
                for (int e = 0; e < HD / 32; e++) S.acc[r][e] = fmaf(p, vf[e], S.acc[r][e]);
            }
        }
    }
    __syncwarp();
}

template <int HD, int RW> TS_DEV void state_init(AttnState<HD, RW> &S) {
#pragma unroll
    for (int r = 0; r < RW; r++) {
        S.m[r] = -INFINITY;
        S.l[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < HD / 32; e++) S.acc[r][e] = 0.0f;
    }
}

template <int HD> struct DecCfg {
    static constexpr int WARPS = HD == 256 ? 2 : 4; /* static shared stays under 48 KB */
    static constexpr int KS = HD + 8;               /* padded K row, halves */
};

/* Visible window of token t: [lo, hi], or false when its position is bad. */
TS_DEV bool token_range(const ts_cuda_attn &a, int t, int &lo, int &hi) {
    const int pos = a.pos[t];
    if (pos < 0 || pos >= a.n_ctx) {
        if (a.err) atomicOr(a.err, TS_CUDA_ERR_POS);
        lo = 0, hi = -1;
        return false;
    }
    hi = pos;
    lo = a.window > 0 && pos - a.window + 1 > 0 ? pos - a.window + 1 : 0;
    return true;
}

/* The decode token's RoPE and K/V store (ROPE), as rope_kv_kernel does them. */
struct RopeNew {
    const float *k, *v; /* (n_head_kv, HD) the token's k (not yet rotated) and v */
    const float *freq;  /* (n_rot / 2) rotation frequencies */
    const float *q_norm, *k_norm; /* (HD) per-head RMSNorm weights before the rotation, or both NULL */
    float eps;          /* of those norms */
    uint16_t *kc, *vc;  /* the F16 caches the attention reads (a.k, a.v) */
    int n_rot;          /* even, <= HD */
    int neox;           /* pairs (i, i + n_rot/2), else (2i, 2i + 1) */
    float mscale;       /* multiplies cos and sin */
};

/* Where a single-split decode kernel also quantizes its output to Q8_0 (the
 * int8 Wo's partner): the q8 layout's parts (cuda_quant.cuh q8_layout), or
 * qs NULL for none. A Q8_0 block is 32 elements of one head, so the block
 * that writes a head's output can quantize it; a Q8_K block spans heads of
 * several kv groups, so that partner keeps its own launch. */
struct Q8Out {
    int8_t *qs;     /* (n_tok, n_head * HD) quants */
    float *d;       /* (n_tok, nd) scales */
    int32_t *s;     /* (n_tok, ns) sums */
    int64_t nd, ns; /* per token row */
};

template <int HD, bool ROPE, int RW>
__global__ void __launch_bounds__(DecCfg<HD>::WARPS * 32)
    attn_decode(const ts_cuda_attn a, const RopeNew rn, int n_split, int split_len, int n_hchunk, float *part_ml,
                float *part_acc, const Q8Out qo) {
    ts_pdl_enter();
    typedef DecCfg<HD> C;
    __shared__ __align__(16) uint16_t Ks[C::WARPS][32 * C::KS];
    __shared__ __align__(16) float Qs[ATT_RW][HD];
    __shared__ float P[C::WARPS][ATT_RW * 32];
    __shared__ __align__(16) uint16_t KVn[2][HD]; /* the position's k (rotated) and v as stored, f16 (ROPE) */
    static_assert(C::WARPS * ATT_RW * 32 >= 2 * HD, "P holds the cos/sin table and the new k row before the tiles");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int split = blockIdx.x, t = blockIdx.z;
    const int kvh = blockIdx.y / n_hchunk, hc = blockIdx.y % n_hchunk;
    const int G = a.n_head / a.n_head_kv, g0 = hc * RW, ng = min(RW, G - g0);
    const int h0 = kvh * G + g0; /* first query head of the block */

    int lo, hi;
    const bool ok = token_range(a, t, lo, hi); /* (err: every block of the token reports it; OR is idempotent) */
    const int s_lo = split * split_len, s_hi = min(a.n_ctx, s_lo + split_len) - 1;
    const int ka = max(lo, s_lo), kb = min(hi, s_hi);
    const bool empty = !ok || ka > kb;
    if (empty && n_split > 1) {
        /* a split past the position (most of them early in a long context):
         * only its max, which the combines read first, and which tells them
         * to skip its sum and output. No query load, no barrier, no
         * (HD x heads) write. */
        for (int r = threadIdx.x; r < ng; r += blockDim.x) {
            const int64_t row = (int64_t)t * a.n_head + h0 + r;
            part_ml[(row * n_split + split) * 2] = -INFINITY;
            part_ml[(row * n_split + split) * 2 + 1] = 0.0f;
        }
        return;
    }

    /* This warp's first tile. With one query row per warp (EARLY) its K words
     * and V rows are loaded now, with the query's, so their round trip is
     * the same one: every row but the position's was stored by an earlier
     * token, and the position's (which other blocks of the group may be
     * storing now) is replaced below by the bits this block stores. Else
     * they are loaded at the tile, as every later tile's are. */
    constexpr bool EARLY = RW == 1 && HD <= 128;
    constexpr int VB = VBatch<HD, RW>::N;
    constexpr int WPR = HD / 8;                            /* 16-byte words per K row */
    constexpr int KB = EARLY ? WPR : RW == 1 ? 16 : 8;     /* K words per lane and batch */
    int lor[RW], hir[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) lor[r] = ka, hir[r] = r < ng ? kb : -1;
    const uint16_t *Kh = a.k + (int64_t)kvh * a.n_ctx * HD, *Vh = a.v + (int64_t)kvh * a.n_ctx * HD;
    int key0 = (ka & ~31) + 32 * warp, jlo = 32, jhi = -1;
    const uint16_t *vp = Vh + (int64_t)key0 * HD + lane * (HD / 32);
    typename VRow<HD>::T v[VB];
    uint4 kw[KB];
    if (EARLY && !empty && key0 <= kb) {
        tile_keys<RW>(key0, lor, hir, jlo, jhi);
        vrows_load<HD, VB>(v, vp, HD, jlo, jhi);
        k_tile_load<HD, KB>(kw, Kh, key0, kb, 0, lane);
    }

    /* the group's query rows in 16-byte words, all of a thread's in flight at
     * once (one L2 round trip; one 4-byte load after another took eight) */
    constexpr int NT = C::WARPS * 32;
    constexpr int QW = ATT_RW * HD / 4 / NT; /* float4 per thread: 1, 2 or 8 */
    float4 qv[QW];
#pragma unroll
    for (int k = 0; k < QW; k++) {
        const int i = threadIdx.x + k * NT, r = i / (HD / 4), d = 4 * (i % (HD / 4));
        qv[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < ng) qv[k] = *(const float4 *)(a.q + ((int64_t)t * a.n_head + h0 + r) * HD + d);
    }
    /* ROPE: the position's cos/sin (P[0][0..n_rot)) and, in the split that
     * holds the position, the new k row (P[0][HD..2 HD)); v goes to the
     * cache now, k after its norm and rotation (a bad position: empty,
     * nothing stored, as rope_kv_kernel). Their loads (frequencies, k, v,
     * the norm weights) are issued with the query's, before any of them is
     * used: one round trip for all, not one after another. */
    /* With a group's heads over several blocks (n_hchunk > 1), each of them
     * computes the new k and v and stores them: the same inputs and code, so
     * the same bits, and every block has stored its own before its barrier
     * and its tiles, so whatever order the stores land in, no block reads a
     * value other than the one it wrote. */
    const int half = rn.n_rot / 2;
    const int pos = hi; /* the position, whenever the token's is valid (token_range) */
    const bool has_new = ROPE && !empty && pos >= s_lo && pos <= s_hi;
    float *cs = &P[0][0], *kn = &P[0][0] + HD;
    const int64_t co = ((int64_t)kvh * a.n_ctx + pos) * HD;
    constexpr int FW = ROPE ? (HD / 2 + NT - 1) / NT : 1; /* frequencies per thread */
    constexpr int KW = ROPE ? (HD + NT - 1) / NT : 1;     /* k and v elements per thread */
    constexpr int NW = ROPE ? HD / 32 : 1;                /* norm weights per lane */
    float fr[FW], kr[KW], vr[KW], qnw[NW], knw[NW];
    if (ROPE) {
#pragma unroll
        for (int c = 0; c < FW; c++) {
            const int i = threadIdx.x + c * NT;
            fr[c] = i < half ? rn.freq[i] : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < KW; c++) {
            const int d = threadIdx.x + c * NT;
            kr[c] = vr[c] = 0.0f;
            if (has_new && d < HD) kr[c] = rn.k[(int64_t)kvh * HD + d], vr[c] = rn.v[(int64_t)kvh * HD + d];
        }
#pragma unroll
        for (int c = 0; c < NW; c++) {
            qnw[c] = rn.q_norm ? rn.q_norm[lane + 32 * c] : 0.0f;
            knw[c] = rn.q_norm && has_new ? rn.k_norm[lane + 32 * c] : 0.0f;
        }
    }
#pragma unroll
    for (int k = 0; k < QW; k++) {
        const int i = threadIdx.x + k * NT, r = i / (HD / 4), d = 4 * (i % (HD / 4));
        *(float4 *)&Qs[r][d] = qv[k];
    }
    if (ROPE) {
        const float fp = (float)pos;
#pragma unroll
        for (int c = 0; c < FW; c++) {
            const int i = threadIdx.x + c * NT;
            if (i < half) {
                const float2 v = rope_cs(fp, fr[c], rn.mscale);
                cs[2 * i] = v.x, cs[2 * i + 1] = v.y;
            }
        }
#pragma unroll
        for (int c = 0; c < KW; c++) {
            const int d = threadIdx.x + c * NT;
            if (has_new && d < HD) {
                kn[d] = kr[c];
                rn.vc[co + d] = KVn[1][d] = f2h(vr[c]);
            }
        }
    }
    __syncthreads();
    if (ROPE) {
        const int rows = ng + (has_new ? 1 : 0); /* the query rows, then the new k */
        if (rn.q_norm) {
            /* the per-head RMSNorm, one warp a row: rope_kv_kernel's loop and
             * reduction, so the same bits */
            for (int r = warp; r < rows; r += C::WARPS) {
                float *row = r < ng ? Qs[r] : kn;
                double ss = 0;
#pragma unroll
                for (int c = 0; c < NW; c++) ss += (double)row[lane + 32 * c] * row[lane + 32 * c];
                const float inv = rms_scale(warp_sum_d(ss), HD, rn.eps);
                __syncwarp();
#pragma unroll
                for (int c = 0; c < NW; c++)
                    row[lane + 32 * c] = fmul_rn(fmul_rn(row[lane + 32 * c], inv), r < ng ? qnw[c] : knw[c]);
            }
            __syncthreads();
        }
        /* rotate the query rows in place and the new k row into the cache
         * (its dims past n_rot as they are); the barrier after makes both
         * visible to the block (its own global stores included) before any
         * tile reads them */
        for (int i = threadIdx.x; i < rows * half; i += blockDim.x) {
            const int r = i / half, j = i % half;
            const int i0 = rn.neox ? j : 2 * j, i1 = rn.neox ? j + half : 2 * j + 1;
            float *row = r < ng ? Qs[r] : kn;
            const float2 y = rope_rot(row[i0], row[i1], make_float2(cs[2 * j], cs[2 * j + 1]));
            if (r < ng) {
                row[i0] = y.x, row[i1] = y.y;
            } else {
                rn.kc[co + i0] = KVn[0][i0] = f2h(y.x);
                rn.kc[co + i1] = KVn[0][i1] = f2h(y.y);
            }
        }
        if (has_new)
            for (int d = rn.n_rot + threadIdx.x; d < HD; d += blockDim.x) rn.kc[co + d] = KVn[0][d] = f2h(kn[d]);
        __syncthreads();
    }

    AttnState<HD, RW> S;
    state_init<HD, RW>(S);
    if (!empty) {
        for (int it = 0; key0 <= kb; key0 += 32 * C::WARPS, it++) {
            if (!(EARLY && it == 0)) {
                tile_keys<RW>(key0, lor, hir, jlo, jhi);
                vp = Vh + (int64_t)key0 * HD + lane * (HD / 32);
                vrows_load<HD, VB>(v, vp, HD, jlo, jhi);
            }
            if (EARLY) {
                if (it > 0) k_tile_load<HD, KB>(kw, Kh, key0, kb, 0, lane);
                k_tile_store<HD, KB, C::KS>(kw, Ks[warp], 0, lane);
                if (ROPE && it == 0 && has_new && pos >= key0 && pos <= key0 + 31) { /* uniform in the warp */
                    /* the row loaded before this block stored it: its bits from the block's copy, stored after
                     * every lane's tile store of the same row (lanes are not ordered without the barrier) */
                    __syncwarp();
                    const int r = pos - key0;
                    if (lane < HD / 8) *(uint4 *)(Ks[warp] + r * C::KS + lane * 8) = *(const uint4 *)&KVn[0][lane * 8];
                    if (r >= jlo && r - jlo < VB)
#pragma unroll
                        for (int b = 0; b < VB; b++)
                            if (b == r - jlo) v[b] = *(const typename VRow<HD>::T *)&KVn[1][lane * (HD / 32)];
                }
            } else {
#pragma unroll
                for (int k0 = 0; k0 < WPR; k0 += KB) { /* a lane's words: WPR (32 rows x WPR / 32 lanes) */
                    k_tile_load<HD, KB>(kw, Kh, key0, kb, k0, lane);
                    k_tile_store<HD, KB, C::KS>(kw, Ks[warp], k0, lane);
                }
            }
            __syncwarp();
            attn_tile<HD, RW, C::KS, VB, true>(S, &Qs[0][0], Ks[warp], vp, HD, key0, lor, hir, jlo, jhi, v, a.scale, P[warp],
                                               lane);
        }
    }

    /* merge the warps' states through the (now free) K buffers */
    __syncthreads();
    float *mine = (float *)Ks[warp]; /* (RW, HD) acc, then m[RW], l[RW] */
#pragma unroll
    for (int r = 0; r < RW; r++) {
#pragma unroll
        for (int e = 0; e < HD / 32; e++) mine[r * HD + lane * (HD / 32) + e] = S.acc[r][e];
        if (lane == 0) mine[RW * HD + r] = S.m[r], mine[RW * HD + RW + r] = S.l[r];
    }
    __syncthreads();
    /* ng * HD and the block are whole warps, so a warp's 32 elements are 32
     * consecutive ones of one head: one Q8_0 block, quantized where made */
    for (int i = threadIdx.x; i < ng * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        float M = -INFINITY;
        for (int w = 0; w < C::WARPS; w++) M = fmaxf(M, ((const float *)Ks[w])[RW * HD + r]);
        float L = 0.0f, A = 0.0f;
        if (M != -INFINITY) {
            for (int w = 0; w < C::WARPS; w++) {
                const float *o = (const float *)Ks[w];
                const float mw = o[RW * HD + r];
                if (mw == -INFINITY) continue;
                const float f = expf(mw - M);
                L += f * o[RW * HD + RW + r];
                A += f * o[r * HD + d];
            }
        }
        const int64_t row = (int64_t)t * a.n_head + h0 + r;
        if (n_split == 1) {
            const float o = L > 0.0f ? A / L : 0.0f;
            a.out[row * HD + d] = o;
            if (qo.qs)
                q8_quant_elem<false>(o, true, t, (int64_t)(h0 + r) * HD + d, (int64_t)a.n_head * HD, qo.qs, qo.d, qo.s,
                                     qo.nd, qo.ns, NULL);
        } else {
            part_acc[(row * n_split + split) * HD + d] = A;
            if (d == 0) part_ml[(row * n_split + split) * 2] = M, part_ml[(row * n_split + split) * 2 + 1] = L;
        }
    }
}

#define ATT_MAX_SPLIT 1024
#define ATT_PRE 4 /* splits whose outputs the fused merge loads before its weights */

/* The splits the combines read for token t: those up to its position's. The
 * rest hold no visible key and wrote an empty state (max -inf, sum 0), whose
 * terms are exact zeros: skipping them changes no bit of the result, and
 * makes the merge cost scale with the position, not with n_ctx. A bad
 * position (the decode kernel reported it): all of them. */
TS_DEV int live_splits(const int32_t *pos, int t, int n_ctx, int n_split, int split_len) {
    const int p = pos[t];
    return p >= 0 && p < n_ctx ? min(n_split, p / split_len + 1) : n_split;
}

/* One block per (token, head) row: merges the splits' states. */
__global__ void __launch_bounds__(128)
    attn_combine(const float *ml, const float *acc, int n_split, int hd, float *out, const int32_t *pos, int n_ctx,
                 int split_len, int n_head) {
    ts_pdl_enter();
    __shared__ float w[ATT_MAX_SPLIT];
    __shared__ float red[4];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = blockIdx.x;
    const int ns = live_splits(pos, (int)(row / n_head), n_ctx, n_split, split_len);
    const float *m = ml + row * n_split * 2;
    float M = -INFINITY;
    for (int s = threadIdx.x; s < ns; s += 128) M = fmaxf(M, m[2 * s]);
    M = warp_max(M);
    if (lane == 0) red[warp] = M;
    __syncthreads();
    M = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    __syncthreads();
    float L = 0.0f;
    for (int s = threadIdx.x; s < ns; s += 128) {
        const float f = (M != -INFINITY && m[2 * s] != -INFINITY) ? expf(m[2 * s] - M) : 0.0f;
        w[s] = f;
        L += f * m[2 * s + 1];
    }
    L = warp_sum(L);
    if (lane == 0) red[warp] = L;
    __syncthreads();
    L = red[0] + red[1] + red[2] + red[3];
    for (int d = threadIdx.x; d < hd; d += 128) {
        float A = 0.0f;
        for (int s = 0; s < ns; s++)
            if (w[s] != 0.0f) A += w[s] * acc[(row * n_split + s) * hd + d];
        out[row * hd + d] = L > 0.0f ? A / L : 0.0f;
    }
}

/* The combine above fused with the quantization of its output for the next
 * int8 matvec: grid (n_in / 256 rounded up, n_tok), 256 threads, thread =
 * element of the (n_head * hd) row, so the block holds 256 / hd heads (one
 * for hd = 256) and is one Q8_K block / 8 Q8_0 blocks. The heads' split
 * weights and sums are formed side by side, 64 or 128 threads a head, each
 * thread standing for attn_combine's threads i and i + 64 when there are 64:
 * the same terms in the same order, so the merged values are attn_combine's
 * bit for bit. (Heads one after the other, with 128 threads each, made the
 * SmolLM2 token 8% slower than the two kernels: two L2 round trips a head.)
 * Then every thread merges its element and q8_quant_elem quantizes it. */
template <bool K>
__global__ void __launch_bounds__(256)
    attn_combine_q8(const float *ml, const float *acc, int n_split, int hd, int n_head, float *out, int8_t *qs, float *qd,
                    int32_t *qsum, int64_t nd, int64_t ns, const int32_t *pos, int n_ctx, int split_len) {
    ts_pdl_enter();
    __shared__ float w[4][ATT_MAX_SPLIT];
    __shared__ float red[4][4], Ls[4], shf[8];
    const int lane = threadIdx.x & 31;
    const int64_t t = blockIdx.y, n_in = (int64_t)n_head * hd, e0 = (int64_t)blockIdx.x * 256;
    const int hb0 = (int)(e0 / hd), nh = hd >= 256 ? 1 : 256 / hd;
    const int tph = nh >= 4 ? 64 : 128;          /* threads per head */
    const int vk = 128 / tph;                    /* attn_combine threads per thread: 1 or 2 */
    const int j = threadIdx.x / tph, i = threadIdx.x % tph;
    const bool mine = j < nh && hb0 + j < n_head; /* whole warps */
    const float *m = ml + (t * n_head + hb0 + (mine ? j : 0)) * n_split * 2;
    const int nl = live_splits(pos, (int)t, n_ctx, n_split, split_len);
    /* this thread's outputs of the first ATT_PRE splits, loaded now: in flight
     * while the weights are formed, instead of one more L2 round trip after
     * them (an empty split's is loaded and never used) */
    const int64_t e = e0 + threadIdx.x;
    const bool valid = e < n_in; /* whole warps: n_in % 32 == 0 */
    const int h = valid ? (int)(e / hd) : hb0, d = (int)(e % hd), jj = h - hb0;
    const float *ap = acc + ((t * n_head + h) * n_split) * hd + d; /* split s at ap[s * hd] */
    float pre[ATT_PRE];
#pragma unroll
    for (int s = 0; s < ATT_PRE; s++) pre[s] = valid && s < n_split ? ap[(int64_t)s * hd] : 0.0f;
    float M = -INFINITY;
    for (int k = 0; k < 2; k++) {
        float v = -INFINITY;
        if (mine && k < vk)
            for (int s = i + k * tph; s < nl; s += 128) v = fmaxf(v, m[2 * s]);
        v = warp_max(v);
        if (mine && k < vk && lane == 0) red[j][(i >> 5) + k * (tph >> 5)] = v;
    }
    __syncthreads();
    if (mine) M = fmaxf(fmaxf(red[j][0], red[j][1]), fmaxf(red[j][2], red[j][3]));
    __syncthreads();
    for (int k = 0; k < 2; k++) {
        float L = 0.0f;
        if (mine && k < vk)
            for (int s = i + k * tph; s < nl; s += 128) {
                const float f = (M != -INFINITY && m[2 * s] != -INFINITY) ? expf(m[2 * s] - M) : 0.0f;
                w[j][s] = f;
                L += f * m[2 * s + 1];
            }
        L = warp_sum(L);
        if (mine && k < vk && lane == 0) red[j][(i >> 5) + k * (tph >> 5)] = L;
    }
    __syncthreads();
    if (mine && i == 0) Ls[j] = red[j][0] + red[j][1] + red[j][2] + red[j][3];
    __syncthreads();
    float v = 0.0f;
    if (valid) {
        float A = 0.0f; /* attn_combine's terms in its order */
#pragma unroll
        for (int s = 0; s < ATT_PRE; s++)
            if (s < nl && w[jj][s] != 0.0f) A += w[jj][s] * pre[s];
        for (int s = ATT_PRE; s < nl; s++)
            if (w[jj][s] != 0.0f) A += w[jj][s] * ap[(int64_t)s * hd];
        v = Ls[jj] > 0.0f ? A / Ls[jj] : 0.0f;
        out[t * n_in + e] = v;
    }
    q8_quant_elem<K>(v, valid, t, e, n_in, qs, qd, qsum, nd, ns, shf);
}

template <int HD> struct PreCfg {
    static constexpr int BQ = HD == 256 ? 8 : 32; /* queries per block */
    static constexpr int RW = BQ / 4;             /* per warp */
    static constexpr int KS = HD + 8;
};

template <int HD> __global__ void __launch_bounds__(128) attn_prefill(const ts_cuda_attn a) {
    ts_pdl_enter();
    typedef PreCfg<HD> C;
    __shared__ __align__(16) float Qs[C::BQ][HD];
    __shared__ __align__(16) uint16_t Ks[32 * C::KS];
    __shared__ __align__(16) uint16_t Vs[32 * HD];
    __shared__ float P[4][C::RW * 32];
    __shared__ int los[C::BQ], his[C::BQ], krange[2];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int t0 = blockIdx.x * C::BQ, h = blockIdx.y, kvh = h / (a.n_head / a.n_head_kv);

    if (threadIdx.x < C::BQ) {
        const int t = t0 + threadIdx.x;
        int lo = 0, hi = -1;
        if (t < a.n_tok) token_range(a, t, lo, hi);
        los[threadIdx.x] = lo, his[threadIdx.x] = hi;
    }
    for (int i = threadIdx.x; i < C::BQ * HD; i += 128) {
        const int r = i / HD, d = i % HD, t = t0 + r;
        Qs[r][d] = t < a.n_tok ? a.q[((int64_t)t * a.n_head + h) * HD + d] : 0.0f;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int kmin = a.n_ctx, kmax = -1;
        for (int r = 0; r < C::BQ; r++)
            if (his[r] >= los[r]) kmin = min(kmin, los[r]), kmax = max(kmax, his[r]);
        krange[0] = kmin, krange[1] = kmax;
    }
    __syncthreads();
    const int kmin = krange[0], kmax = krange[1];

    AttnState<HD, C::RW> S;
    state_init<HD, C::RW>(S);
    int lor[C::RW], hir[C::RW], wlo = a.n_ctx, whi = -1;
#pragma unroll
    for (int r = 0; r < C::RW; r++) {
        lor[r] = los[warp * C::RW + r], hir[r] = his[warp * C::RW + r];
        if (hir[r] >= lor[r]) wlo = min(wlo, lor[r]), whi = max(whi, hir[r]);
    }
    const uint16_t *Kh = a.k + (int64_t)kvh * a.n_ctx * HD, *Vh = a.v + (int64_t)kvh * a.n_ctx * HD;
    constexpr int WPR = HD / 8;
    for (int key0 = kmax >= kmin ? (kmin & ~31) : 0; key0 <= kmax; key0 += 32) {
        __syncthreads(); /* the previous tile is consumed */
        for (int k = threadIdx.x; k < 32 * WPR; k += 128) {
            const int row = k / WPR, col = k % WPR;
            if (key0 + row <= kmax) {
                const int64_t src = (int64_t)(key0 + row) * HD + col * 8;
                *(uint4 *)(Ks + row * C::KS + col * 8) = *(const uint4 *)(Kh + src);
                *(uint4 *)(Vs + row * HD + col * 8) = *(const uint4 *)(Vh + src);
            }
        }
        __syncthreads();
        if (whi < key0 || wlo > key0 + 31) continue; /* nothing of this tile is visible to the warp's rows */
        constexpr int VB = VBatch<HD, C::RW>::N;
        int jlo, jhi;
        tile_keys<C::RW>(key0, lor, hir, jlo, jhi);
        typename VRow<HD>::T v[VB];
        attn_tile<HD, C::RW, C::KS, VB, false>(S, &Qs[warp * C::RW][0], Ks, Vs + lane * (HD / 32), HD, key0, lor, hir, jlo,
                                               jhi, v, a.scale, P[warp], lane);
    }
#pragma unroll
    for (int r = 0; r < C::RW; r++) {
        const int t = t0 + warp * C::RW + r;
        if (t >= a.n_tok) continue;
        const float inv = S.l[r] > 0.0f ? 1.0f / S.l[r] : 0.0f;
        float *o = a.out + ((int64_t)t * a.n_head + h) * HD + lane * (HD / 32);
#pragma unroll
        for (int e = 0; e < HD / 32; e++) o[e] = S.l[r] > 0.0f ? S.acc[r][e] * inv : 0.0f;
    }
}

/* Split plan of the decode kernel: a function of the shapes and the SM
 * count only (never of positions), so scratch size and grid are fixed for a
 * graph. A cache of at most two tiles per warp (ATT_SHORT_TILES) is one
 * split: the splits would save at most one tile of latency and cost a merge
 * launch (or, with a Q8_0 partner, the quantization's launch too). */
#define ATT_SHORT_TILES 2
struct AttnPlan {
    int n_split, split_len, n_hchunk;
    int rw; /* query rows per block: ATT_RW, or ATT_SHORT_RW for a one-split cache */
};

template <int HD> ts_status attn_plan(const ts_cuda_attn *a, AttnPlan &p) {
    int sms = 0;
    ts_status st = ts_cuda_sm_count(&sms);
    if (st != TS_OK) return st;
    const int G = a->n_head / a->n_head_kv;
    const bool short_cache = a->n_ctx <= ATT_SHORT_TILES * 32 * DecCfg<HD>::WARPS;
    p.rw = short_cache ? ATT_SHORT_RW : ATT_RW;
    p.n_hchunk = (G + p.rw - 1) / p.rw;
    const int64_t items = (int64_t)a->n_head_kv * p.n_hchunk * a->n_tok;
    const int64_t target = 4 * (int64_t)sms; /* blocks */
    int64_t max_split = (a->n_ctx + 32 * DecCfg<HD>::WARPS - 1) / (32 * DecCfg<HD>::WARPS);
    if (short_cache) max_split = 1;
    if (max_split > ATT_MAX_SPLIT) max_split = ATT_MAX_SPLIT;
    int64_t ns = (target + items - 1) / items;
    ns = ns < 1 ? 1 : ns > max_split ? max_split : ns;
    const int64_t per = (a->n_ctx + ns - 1) / ns;
    p.split_len = (int)((per + 31) / 32 * 32);
    p.n_split = (int)((a->n_ctx + p.split_len - 1) / p.split_len);
    return TS_OK;
}

ts_status attn_check(const ts_cuda_attn *a) {
    TS_ARG_CHECK(a && a->q && a->k && a->v && a->pos && a->out, "cuda attention: NULL q, k, v, pos or out");
    TS_ARG_CHECK(((uintptr_t)a->q & 15) == 0, "cuda attention: q not 16-byte aligned (decode reads it in 16-byte words)");
    TS_ARG_CHECK(a->head_dim == 64 || a->head_dim == 128 || a->head_dim == 256,
                 "cuda attention: head_dim %d (64, 128 or 256)", a->head_dim);
    TS_ARG_CHECK(a->n_tok >= 1 && a->n_head >= 1 && a->n_head_kv >= 1 && a->n_head % a->n_head_kv == 0,
                 "cuda attention: n_tok %d, n_head %d, n_head_kv %d", a->n_tok, a->n_head, a->n_head_kv);
    TS_ARG_CHECK(a->n_head_kv * ((a->n_head / a->n_head_kv + ATT_RW - 1) / ATT_RW) <= 65535 && a->n_head <= 65535,
                 "cuda attention: %d heads", a->n_head);
    TS_ARG_CHECK(a->n_ctx >= 1 && a->window >= 0, "cuda attention: n_ctx %d, window %d", a->n_ctx, a->window);
    TS_ARG_CHECK((((uintptr_t)a->k | (uintptr_t)a->v) & 15) == 0, "cuda attention: K/V cache not 16-byte aligned");
    return TS_OK;
}

template <int HD> size_t attn_scratch(const ts_cuda_attn *a) {
    if (a->n_tok > TS_CUDA_MAX_DECODE_TOK) return 0;
    AttnPlan p;
    if (attn_plan<HD>(a, p) != TS_OK || p.n_split == 1) return 0;
    const size_t rows = (size_t)a->n_tok * (size_t)a->n_head;
    const size_t ml = (rows * p.n_split * 2 * sizeof(float) + 255) & ~(size_t)255;
    return ml + rows * p.n_split * HD * sizeof(float);
}

/* q8 != NULL: the output is also quantized to `partner` there (the caller
 * checked the layout); with split-K the combine does it, with one split and
 * Q8_0 the decode kernel, else a quantization launch. */
template <int HD>
ts_status attn_launch(cudaStream_t s, const ts_cuda_attn *a, void *scratch, size_t scratch_bytes, uint32_t partner = 0,
                      void *q8 = NULL, const RopeNew *rn = NULL) {
    if (a->n_tok > TS_CUDA_MAX_DECODE_TOK) {
        const int bq = PreCfg<HD>::BQ;
        ts_launch(&attn_prefill<HD>, dim3((unsigned)((a->n_tok + bq - 1) / bq), (unsigned)a->n_head), 128, 0, s)(*a);
        TS_CUDA_LAUNCHED("attention prefill");
        return TS_OK;
    }
    AttnPlan p;
    ts_status st = attn_plan<HD>(a, p);
    if (st != TS_OK) return st;
    float *ml = NULL, *acc = NULL;
    if (p.n_split > 1) {
        const size_t need = attn_scratch<HD>(a);
        TS_ARG_CHECK(scratch && scratch_bytes >= need && ((uintptr_t)scratch & 255) == 0,
                     "cuda attention: scratch %zu bytes (256-aligned) given, %zu needed", scratch_bytes, need);
        const size_t rows = (size_t)a->n_tok * (size_t)a->n_head;
        ml = (float *)scratch;
        acc = (float *)((uint8_t *)scratch + ((rows * p.n_split * 2 * sizeof(float) + 255) & ~(size_t)255));
    }
    Q8Out qo = {NULL, NULL, NULL, 0, 0};
    const bool fused_q8 = q8 && p.n_split == 1 && partner == TS_TYPE_Q8_0;
    if (fused_q8) {
        const Q8Layout L = q8_layout(partner, (int64_t)a->n_head * HD, a->n_tok);
        uint8_t *b = (uint8_t *)q8;
        qo = Q8Out{(int8_t *)(b + L.qs), (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns};
    }
    const dim3 grid((unsigned)p.n_split, (unsigned)(a->n_head_kv * p.n_hchunk), (unsigned)a->n_tok);
    const bool group = p.rw == ATT_RW;
    auto kernel = rn ? (group ? &attn_decode<HD, true, ATT_RW> : &attn_decode<HD, true, ATT_SHORT_RW>)
                     : (group ? &attn_decode<HD, false, ATT_RW> : &attn_decode<HD, false, ATT_SHORT_RW>);
    ts_launch(kernel, grid, DecCfg<HD>::WARPS * 32, 0, s)(*a, rn ? *rn : RopeNew{}, p.n_split, p.split_len, p.n_hchunk, ml, acc, qo);
    TS_CUDA_LAUNCHED("(rope +) attention decode");
    if (fused_q8) return TS_OK;
    if (q8 && p.n_split > 1) {
        const int64_t n_in = (int64_t)a->n_head * HD;
        const Q8Layout L = q8_layout(partner, n_in, a->n_tok);
        uint8_t *b = (uint8_t *)q8;
        const dim3 g((unsigned)((n_in + 255) / 256), (unsigned)a->n_tok);
        if (partner == TS_TYPE_Q8_K)
            ts_launch(&attn_combine_q8<true>, g, 256, 0, s)(ml, acc, p.n_split, HD, a->n_head, a->out, (int8_t *)(b + L.qs),
                                                           (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns, a->pos,
                                                           a->n_ctx, p.split_len);
        else
            ts_launch(&attn_combine_q8<false>, g, 256, 0, s)(ml, acc, p.n_split, HD, a->n_head, a->out, (int8_t *)(b + L.qs),
                                                            (float *)(b + L.d), (int32_t *)(b + L.s), L.nd, L.ns, a->pos,
                                                            a->n_ctx, p.split_len);
        TS_CUDA_LAUNCHED("attention combine + quantize");
        return TS_OK;
    }
    if (p.n_split > 1) {
        ts_launch(&attn_combine, (unsigned)(a->n_tok * a->n_head), 128, 0, s)(ml, acc, p.n_split, HD, a->out, a->pos, a->n_ctx,
                                                                                     p.split_len, a->n_head);
        TS_CUDA_LAUNCHED("attention combine");
    }
    if (q8) return ts_cuda_quantize_q8(s, partner, a->out, (int64_t)a->n_head * HD, a->n_tok, NULL, 0.0f, q8);
    return TS_OK;
}

} // namespace

size_t ts_cuda_attn_scratch_bytes(const ts_cuda_attn *a) {
    if (attn_check(a) != TS_OK) return 0;
    switch (a->head_dim) {
    case 64: return attn_scratch<64>(a);
    case 128: return attn_scratch<128>(a);
    default: return attn_scratch<256>(a);
    }
}

static ts_status q8_check(const ts_cuda_attn *a, uint32_t partner, const void *q8) {
    TS_ARG_CHECK(a->n_tok <= TS_CUDA_MAX_DECODE_TOK, "cuda attention_q8: %d tokens (decode: at most %d)", a->n_tok,
                 TS_CUDA_MAX_DECODE_TOK);
    TS_ARG_CHECK(ts_cuda_q8_bytes(partner, (int64_t)a->n_head * a->head_dim, a->n_tok) > 0,
                 "cuda attention_q8: partner %s with rows of %d x %d", ts_type_name(partner), a->n_head, a->head_dim);
    TS_ARG_CHECK(q8 && ((uintptr_t)q8 & 255) == 0, "cuda attention_q8: NULL q8 or not 256-byte aligned");
    return TS_OK;
}

static ts_status launch_hd(const ts_cuda_attn *a, void *stream, void *scratch, size_t scratch_bytes, uint32_t partner,
                           void *q8, const RopeNew *rn) {
    cudaStream_t s = ts_stream(stream);
    switch (a->head_dim) {
    case 64: return attn_launch<64>(s, a, scratch, scratch_bytes, partner, q8, rn);
    case 128: return attn_launch<128>(s, a, scratch, scratch_bytes, partner, q8, rn);
    default: return attn_launch<256>(s, a, scratch, scratch_bytes, partner, q8, rn);
    }
}

ts_status ts_cuda_attention(void *stream, const ts_cuda_attn *a, void *scratch, size_t scratch_bytes) {
    ts_status st = attn_check(a);
    if (st != TS_OK) return st;
    return launch_hd(a, stream, scratch, scratch_bytes, 0, NULL, NULL);
}

ts_status ts_cuda_attention_q8(void *stream, const ts_cuda_attn *a, void *scratch, size_t scratch_bytes, uint32_t partner,
                               void *q8) {
    ts_status st = attn_check(a);
    if (st == TS_OK) st = q8_check(a, partner, q8);
    if (st != TS_OK) return st;
    return launch_hd(a, stream, scratch, scratch_bytes, partner, q8, NULL);
}

bool ts_cuda_rope_attention_fits(const ts_cuda_rope_kv *r, const ts_cuda_attn *a) {
    return r && a && r->n_tok == 1 && a->n_tok == 1 && r->k && r->v && r->pos == a->pos && r->freq &&
           (r->q_norm == NULL) == (r->k_norm == NULL) && r->k_cache == a->k && r->v_cache == a->v && r->k_cache && r->v_cache && r->q == a->q &&
           r->n_head == a->n_head && r->n_head_kv == a->n_head_kv && r->head_dim == a->head_dim && r->n_ctx == a->n_ctx &&
           r->n_rot >= 0 && r->n_rot % 2 == 0 && r->n_rot <= r->head_dim &&
           (r->mode == TS_CUDA_ROPE_NORMAL || r->mode == TS_CUDA_ROPE_NEOX) && a->n_head_kv >= 1 &&
           a->n_head % a->n_head_kv == 0 && a->n_head / a->n_head_kv <= ATT_RW;
}

ts_status ts_cuda_rope_attention(void *stream, const ts_cuda_rope_kv *r, const ts_cuda_attn *a, void *scratch,
                                 size_t scratch_bytes, uint32_t partner, void *q8) {
    ts_status st = attn_check(a);
    if (st == TS_OK && q8) st = q8_check(a, partner, q8);
    if (st != TS_OK) return st;
    TS_ARG_CHECK(ts_cuda_rope_attention_fits(r, a),
                 "cuda rope + attention: not one decode token with the attention's q, pos and cache, both per-head norms "
                 "or none, and at most %d query heads per kv head",
                 ATT_RW);
    const RopeNew rn = {r->k,       r->v,       r->freq, r->q_norm, r->k_norm, r->eps, r->k_cache, r->v_cache, r->n_rot,
                        r->mode == TS_CUDA_ROPE_NEOX, r->mscale};
    return launch_hd(a, stream, scratch, scratch_bytes, q8 ? partner : 0, q8, &rn);
}
