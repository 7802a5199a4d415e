/* AVX-512 VNNI panel GEMM for the K-quants (layout: quant.h, "GEMM panels").
 * Entered only after runtime detection of AVX-512 F/BW/VL/DQ (the file's
 * flags) and AVX512_VNNI (these functions' target attribute).
 *
 * Lanes are weight rows: one zmm holds 4 consecutive quants of 16 rows, so a
 * single vpdpbusd (u8 weights x s8 activations, 4 products per i32 lane)
 * advances 16 rows by 4 elements for one token, with the token's 4
 * activation bytes broadcast straight from its Q8_K row. The micro-kernel
 * holds 32 rows x NT tokens of accumulators: per sub-block an i32 partial per
 * (row, token), multiplied by the sub-block's integer scale into a
 * super-block i32 sum (exact: |sum| < 2^31, see the bounds in docs/KERNELS.md);
 * per super-block the integer correction sum_g cr_g * bsum_g (vpdpwssd), the
 * conversion to float and one FMA into the output with the token's scale. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "tensor/gemm_pack.h"

#define VN __attribute__((target("avx512vnni")))
#define VINL static inline __attribute__((always_inline, target("avx512vnni")))

#define QK_BYTES ((int)sizeof(ts_block_q8_K)) /* 292: f32 d, 256 x i8 qs, 16 x i16 bsums */
#define QK_QS 4
#define QK_BSUMS 260

VINL __m512i bc32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
VINL float ldf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* A zeroed accumulator as the zeroing idiom, which the core resolves at
 * rename: from _mm512_setzero_si512 GCC copies one zero register into each,
 * a move an accumulator (12 a chunk at 6 tokens). */
VINL __m512i zero_idiom(void) {
    __m512i z;
    __asm__("vpxord %0, %0, %0" : "=v"(z));
    return z;
}

/* sum_g cr_g * bsum_g(x) of 16 rows: C at their lane group's corrections;
 * at nsub 8 the pairs of two sub-blocks' mins against the token's sums per
 * 32 at bp (gp_bs32_pairs), 4 vpdpwssd; at nsub 16 the pairs of 16-groups
 * against the Q8_K row's sums per 16 at xq's super-block, 8. Session 38
 * (bench_gemm, avx512 level, Emerald Rapids VM, alternating): a timing copy
 * with 4 of the 8 ran the Q4_K kernel ~14% faster; two chains of 4 instead
 * of one of 8 measured 0-7%, within the VM's noise, and was not kept. */
VINL __m512i sb_corr(const int NSUB, const uint8_t *C, const uint8_t *xq, const uint8_t *bp) {
    __m512i c = _mm512_setzero_si512();
    if (NSUB == 8) {
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) c = _mm512_dpwssd_epi32(c, _mm512_load_si512(C + p * 128), bc32(bp + 4 * p));
    } else {
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) c = _mm512_dpwssd_epi32(c, _mm512_load_si512(C + p * 128), bc32(xq + QK_BSUMS + 4 * p));
    }
    return c;
}

/* One super-block of one token into 16 output rows (quant.h's formula):
 * sb = sum_j sc_j * partial_j, c = the correction; init: store, else add. */
VINL void sb_out(float *o, __mmask16 m, __m512i sb, __m512i c, __m512 d, __m512 dm, __m512 dx, int init) {
    const __m512 f = _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sb), d), _mm512_mul_ps(_mm512_cvtepi32_ps(c), dm));
    if (init) _mm512_mask_storeu_ps(o, m, _mm512_mul_ps(f, dx));
    else _mm512_mask_storeu_ps(o, m, _mm512_fmadd_ps(f, dx, _mm512_maskz_loadu_ps(m, o)));
}

/* NT activation rows xr[] (Q8_K, at the segment's first super-block) against
 * one packed unit of ns super-blocks: out[t*os + r] += value, rows masked by
 * m0 (rows 0..15) and m1 (16..31); at nsub 8 the rows' sums per 32 at
 * bp[((t * bst + s) * 4 + p) * 4] (gp_bs32_pairs).
 *
 * The sub-block scale: DP = 0 multiplies the sub-block's i32 partial by it
 * (vpmulld, two uops on one port on Intel's cores, and vpaddd); DP = k > 0
 * sums the sub-block in k chunks and adds each chunk's partial times the
 * scale with one vpdpwssd, the partial as the low i16 of its dword and the
 * scale as the low i16 of its own (the high halves: the partial's sign and
 * 0, whose product is 0). Exact where every chunk's partial fits i16 and
 * the scale is in [0, 32767]: Q4_K in halves (16 x 15 x 128 = 30720, scales
 * 0..63), Q2_K whole (16 x 3 x 128, 0..15); the same integer as DP = 0, so
 * the same bits. Not Q5_K (31: chunks of 8 elements, more uops than the
 * multiply), Q3_K and Q6_K (signed scales). Session 38 (bench_gemm, 7B Q4_K
 * shapes, avx512 level, alternating): ~7-15% faster than the multiply. */
VINL void vk(const uint8_t *panel, int ns, const int NSUB, const int DP, const int NT, const uint8_t *const *xr, const uint8_t *bp,
             int bst, float *out, int64_t os, __mmask16 m0, __mmask16 m1, int first) {
    const size_t sbb = TS_GP_SB_BYTES(NSUB);
    const int GPS = 64 / NSUB; /* k-groups of 4 per sub-block */
    for (int s = 0; s < ns; s++) {
        const uint8_t *P = panel + (size_t)s * sbb;
        const uint8_t *xq[6];
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) xq[t] = xr[t] + (size_t)s * QK_BYTES;
        __m512i sb0[6], sb1[6];
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) sb0[t] = sb1[t] = _mm512_setzero_si512();
        for (int j = 0; j < NSUB; j++) {
            const __m512i s0 = _mm512_load_si512(P + TS_GP_Q + j * 128), s1 = _mm512_load_si512(P + TS_GP_Q + j * 128 + 64);
            const int CH = DP ? DP : 1, GPC = GPS / CH; /* chunks of the sub-block; k-groups a chunk */
#pragma GCC unroll 2
            for (int ch = 0; ch < CH; ch++) {
                __m512i a0[6], a1[6];
#pragma GCC unroll 6
                for (int t = 0; t < NT; t++) a0[t] = zero_idiom(), a1[t] = zero_idiom();
#pragma GCC unroll 8
                for (int g = 0; g < GPC; g++) {
                    const int gg = j * GPS + ch * GPC + g;
                    const __m512i w0 = _mm512_load_si512(P + gg * 128), w1 = _mm512_load_si512(P + gg * 128 + 64);
#pragma GCC unroll 6
                    for (int t = 0; t < NT; t++) {
                        const __m512i xb = bc32(xq[t] + QK_QS + 4 * gg);
                        a0[t] = _mm512_dpbusd_epi32(a0[t], w0, xb);
                        a1[t] = _mm512_dpbusd_epi32(a1[t], w1, xb);
                    }
                }
#pragma GCC unroll 6
                for (int t = 0; t < NT; t++) {
                    if (DP) {
                        sb0[t] = _mm512_dpwssd_epi32(sb0[t], a0[t], s0);
                        sb1[t] = _mm512_dpwssd_epi32(sb1[t], a1[t], s1);
                    } else {
                        sb0[t] = _mm512_add_epi32(sb0[t], _mm512_mullo_epi32(a0[t], s0));
                        sb1[t] = _mm512_add_epi32(sb1[t], _mm512_mullo_epi32(a1[t], s1));
                    }
                }
            }
        }
        const uint8_t *C = P + TS_GP_Q + NSUB * 128, *D = C + 8 * 128;
        const __m512 d0 = _mm512_load_ps(D), d1 = _mm512_load_ps(D + 64);
        const __m512 dm0 = _mm512_load_ps(D + 128), dm1 = _mm512_load_ps(D + 192);
        const int init = first && s == 0; /* the row's first super-block: no zeroing pass over the output */
#pragma GCC unroll 6
        for (int t = 0; t < NT; t++) {
            const __m512 dx = _mm512_set1_ps(ldf(xq[t]));
            float *o = out + t * os;
            const uint8_t *b = bp + (size_t)(t * bst + s) * 16;
            sb_out(o, m0, sb0[t], sb_corr(NSUB, C, xq[t], b), d0, dm0, dx, init);
            sb_out(o + 16, m1, sb1[t], sb_corr(NSUB, C + 64, xq[t], b), d1, dm1, dx, init);
        }
    }
}

#define VK_NT 6 /* tokens per micro-kernel call: 4*NT + 5 zmm live */
#define VK_FN(NAME, NSUB, DP, NT)                                                                                \
    static VN void vk_##NAME##_##NT(const uint8_t *panel, int ns, const uint8_t *const *xr, const uint8_t *bp, int bst, \
                                    float *out, int64_t os, __mmask16 m0, __mmask16 m1, int first) {             \
        vk(panel, ns, NSUB, DP, NT, xr, bp, bst, out, os, m0, m1, first);                                        \
    }
#define VK_ALL(NAME, NSUB, DP)                                                                                  \
    VK_FN(NAME, NSUB, DP, 1) VK_FN(NAME, NSUB, DP, 2) VK_FN(NAME, NSUB, DP, 3) VK_FN(NAME, NSUB, DP, 4)          \
    VK_FN(NAME, NSUB, DP, 5) VK_FN(NAME, NSUB, DP, 6)
#define VK_TAB(NAME) {NULL, vk_##NAME##_1, vk_##NAME##_2, vk_##NAME##_3, vk_##NAME##_4, vk_##NAME##_5, vk_##NAME##_6}
VK_ALL(q4, 8, 2)  /* Q4_K */
VK_ALL(q5, 8, 0)  /* Q5_K */
VK_ALL(q2, 16, 1) /* Q2_K */
VK_ALL(off, 16, 0) /* Q3_K, Q6_K */
typedef void (*vk_fn)(const uint8_t *, int, const uint8_t *const *, const uint8_t *, int, float *, int64_t, __mmask16, __mmask16,
                      int);
static const vk_fn vk_q4[VK_NT + 1] = VK_TAB(q4), vk_q5[VK_NT + 1] = VK_TAB(q5), vk_q2[VK_NT + 1] = VK_TAB(q2),
                   vk_off[VK_NT + 1] = VK_TAB(off);
static const vk_fn *vk_for(ts_type t) {
    return t == TS_TYPE_Q4_K ? vk_q4 : t == TS_TYPE_Q5_K ? vk_q5 : t == TS_TYPE_Q2_K ? vk_q2 : vk_off;
}

static __mmask16 rmask(int64_t nr) { return nr >= 16 ? (__mmask16)0xffff : nr <= 0 ? 0 : (__mmask16)((1u << nr) - 1); }

/* Tokens [c0, ncols) against the packed units of one row block and K
 * segment, NT tokens per micro-kernel call. At nsub 8 the tokens' sums per
 * 32: from bp_all (every token of the call, nsb super-blocks a row) when
 * the caller has them, else summed here for each token group. */
static VN void vk_cols(const vk_fn *kf, int nsub, const uint8_t *sp, size_t unit, int nu, int64_t nr, int ns, const uint8_t *px,
                       uint64_t xs, int64_t s0, int64_t c0, int64_t ncols, const uint8_t *bp_all, int64_t nsb, float *out, int64_t os) {
    _Alignas(64) uint8_t bpg[VK_NT * TS_GP_KSEG * 16];
    for (; c0 < ncols; c0 += VK_NT) {
        int nt = (int)(ncols - c0 < VK_NT ? ncols - c0 : VK_NT);
        const uint8_t *xr[VK_NT];
        for (int i = 0; i < nt; i++) xr[i] = px + (uint64_t)(c0 + i) * xs + (uint64_t)s0 * QK_BYTES;
        int bst;
        const uint8_t *bp = gp_bs32_group(bp_all, nsb, c0, s0, nsub, xr, nt, ns, bpg, &bst);
        for (int u = 0; u < nu; u++) {
            int64_t ru = nr - u * TS_GP_ROWS;
            kf[nt](sp + u * unit, ns, xr, bp, bst, out + c0 * os + u * TS_GP_ROWS, os, rmask(ru), rmask(ru - 16), s0 == 0);
        }
    }
}

/* 16 rows of 16 dwords, transposed in place: r[i] dword l <- r[l] dword i. */
VINL void tr16x16(__m512i r[16]) {
    __m512i t[16], u[16], v[16];
    for (int i = 0; i < 8; i++)
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]), t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            v[8 * i + k] = _mm512_shuffle_i32x4(u[8 * i + k], u[8 * i + 4 + k], 0x88);
            v[8 * i + 4 + k] = _mm512_shuffle_i32x4(u[8 * i + k], u[8 * i + 4 + k], 0xdd);
        }
    for (int k = 0; k < 8; k++) {
        r[k] = _mm512_shuffle_i32x4(v[k], v[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_i32x4(v[k], v[8 + k], 0xdd);
    }
}

/* ts_q_gemm_pack for Q4_K, Q5_K and Q6_K (sc_pair 0), byte for byte, 16 rows
 * at a time: a row's 64 quants of a k-step are one zmm (the element order:
 * Q4_K the low nibbles of 32 bytes then their high nibbles; Q5_K the same
 * with bits 2kk and 2kk + 1 of qh on top; Q6_K the same from ql with two
 * bits of qh on top), whose 16 dwords are the 16 k-groups; 16
 * rows' zmm transposed are the panel's 16 lane-group rows of those k-groups.
 * The scalar packer spends ~700 cycles a row and super-block decoding and
 * scattering 4 bytes at a time (a quarter of the VNNI kernel's time).
 * Scales, corrections, d, dm: Q4_K and Q5_K's gp_heads_q4, Q6_K's
 * gp_heads_q6 (gemm_pack.h). */
static VN void pack_vec(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, uint8_t *panel) {
    const int q6 = t == TS_TYPE_Q6_K, q5 = t == TS_TYPE_Q5_K, bb = (int)ts_type_get(t)->block_bytes;
    const size_t sbb = TS_GP_SB_BYTES(ts_q_gemm_nsub(t));
    for (int lg = 0; lg < 2; lg++) {
        const uint8_t *rb[16];
        gp_row_blocks(w, ws, nrows, sb0, bb, lg, rb);
        for (int s = 0; s < ns; s++) {
            uint8_t *P = panel + (size_t)s * sbb;
            if (q6) gp_heads_q6(rb, lg, s, ns, bb, 0, P);
            else gp_heads_q4(rb, lg, s, ns, bb, 0, P);
            if (!q6 && !q5) {
                /* Q4_K: the nibble split keeps byte positions, so the rows'
                 * raw bytes of two k-steps (64 contiguous: one load) are
                 * transposed once and then split, half the transposes of
                 * the path below (as gemm_avx2.c's pack_vec2). Dword i < 8
                 * of the transposed rows is k-step 2 h's k-groups i (low
                 * nibbles) and 8 + i (high); i >= 8 is k-step 2 h + 1's. */
                const __m512i m4 = _mm512_set1_epi8(0x0f);
                for (int h = 0; h < 2; h++) {
                    __m512i r[16];
                    for (int l = 0; l < 16; l++)
                        r[l] = rb[l] ? _mm512_loadu_si512(rb[l] + (size_t)s * bb + 16 + 64 * h) : _mm512_setzero_si512();
                    tr16x16(r);
                    for (int i = 0; i < 16; i++) {
                        const int kk = 2 * h + i / 8, g = i % 8;
                        _mm512_store_si512(P + ((kk * 16 + g) * 2 + lg) * 64, _mm512_and_si512(r[i], m4));
                        _mm512_store_si512(P + ((kk * 16 + 8 + g) * 2 + lg) * 64, _mm512_and_si512(_mm512_srli_epi16(r[i], 4), m4));
                    }
                }
                continue;
            }
            for (int kk = 0; kk < 4; kk++) {
                __m512i r[16];
                for (int l = 0; l < 16; l++) {
                    if (!rb[l]) {
                        r[l] = _mm512_setzero_si512();
                        continue;
                    }
                    __m256i lo, hi;
                    gp_quants(q6, q5, rb[l] + (size_t)s * bb, kk, &lo, &hi);
                    r[l] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                }
                tr16x16(r);
                for (int i = 0; i < 16; i++) _mm512_store_si512(P + ((kk * 16 + i) * 2 + lg) * 64, r[i]);
            }
        }
    }
}

void ts_q_gemm_pack_avx512(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, uint8_t *panel) {
    if (t == TS_TYPE_Q4_K || t == TS_TYPE_Q5_K || t == TS_TYPE_Q6_K) pack_vec(t, w, ws, nrows, sb0, ns, panel);
    else ts_q_gemm_pack(t, w, ws, nrows, sb0, ns, 0, panel);
}

/* Packs rows [r0, r0 + nr) (nr <= 64: nu units), super-blocks [s0, s0 + ns);
 * vec: Q4_K, Q5_K and Q6_K through pack_vec. In the 7B prefill on the 2-core
 * Xeon it made the VNNI path ~10% faster (5 pairs). The AMX path took the
 * scalar packer until session 37: with the A rows read in place, pack_vec
 * measured ~5% slower there (its A-tile loads waited longer); since their
 * gather (amx_gather) the vector packer is the faster one there too. */
static void pack_units(ts_type t, int vec, const uint8_t *pw, uint64_t ws, int64_t r0, int64_t nr, int nu, int64_t s0, int ns,
                       uint8_t *sp, size_t unit) {
    for (int u = 0; u < nu; u++) {
        int64_t ru = nr - u * TS_GP_ROWS;
        const int rows = (int)(ru < TS_GP_ROWS ? ru : TS_GP_ROWS);
        const uint8_t *w = pw + (uint64_t)(r0 + u * TS_GP_ROWS) * ws;
        if (vec) ts_q_gemm_pack_avx512(t, w, ws, rows, s0, ns, sp + u * unit);
        else ts_q_gemm_pack(t, w, ws, rows, s0, ns, 0, sp + u * unit);
    }
}

/* ---- AMX-INT8 ----
 * The tile unit multiplies 16 tokens x 64 elements (A: the Q8_K activation
 * rows' quants, gathered per K segment: amx_gather) by 64 elements x 16 weight rows (B: 16 k-groups of
 * the rows' 4 consecutive quants, the panel's lane layout) into 16 x 16 i32
 * in one instruction, 7.5x the vpdpbusd rate on the Xeons measured here
 * (bench/peak_ops.c: 6.3 against 0.84 int8 TOPS a core), but
 * over 64 elements where a K-quant changes its scale every 16 or 32. So the
 * sub-block scale goes into the weights first: w = (q_u - off) * sc_j
 * (|w| <= 63 * 128, an i16), split into an unsigned low byte and a signed
 * high byte, w = lo + 256 hi. Per super-block, C_lo (tdpbsud) + 256 C_hi
 * (tdpbssd) is then sum_j sc_j * sum_{i in j} q[i] x[i] exactly (|C_lo| <=
 * 256*255*128, |256 C_hi| <= 2^28). The types with a min take a third tile
 * of the min of each element's 16-group (<= 63, u8): C_m = sum_g cr_g *
 * bsum_g, the panel kernel's correction, as an integer, so for them the
 * result is vk's bit for bit (the same sb_out; test_quant compares the
 * bits); for the offset types the
 * offset is gone from w and the result is d * sb, which differs from vk's
 * d * sb_u - d * c by its rounding only. Everything after the tiles is per
 * super-block, 16 rows x 1 token per zmm (~13 instructions). The split costs
 * one pass over the panel per chunk. Until session 37 the A tiles were
 * loaded from the activation rows in place, 16 rows a row's length apart,
 * and the tile loads waited on them (perf: over half of amx_segment_min's
 * samples on the load after them; bench_gemm, 7B ffn_down Q4_K, 512 tokens,
 * ~95 ms against the VNNI kernel's ~54 on the Emerald Rapids VM); prefetching
 * them, two A tiles in turn and A reused by both lane groups had each gained
 * in bench_gemm and lost in the 7B prefill (2 threads). Gathered once a
 * segment into runs of 16 tokens (4 KiB), the same call took ~42 ms, and
 * ~23-29 with pack_vec (VNNI ~31-40 in the same runs; the VM's speed moves).
 * Then the time is the tile loads and products themselves, and ~25% the
 * epilogue after them; A double-buffered in the spare tile, and for the
 * offset types two token tiles against shared B tiles, measured no faster
 * (session 37, bench_gemm, alternating). */
#define AMX_FN static __attribute__((target("avx512vnni,amx-tile,amx-int8")))
#define AMX_INL static inline __attribute__((always_inline, target("avx512vnni,amx-tile,amx-int8")))
/* the tile instructions are asm the compiler cannot see into: memory they
 * read or write is ordered against the C code around them by hand */
#define AMX_FENCE() __asm__ volatile("" ::: "memory")

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16]; /* bytes per row of tiles 0..15 */
    uint8_t rows[16];
} amx_cfg;

/* The panel unit's ns super-blocks as tiles (quant.h, TS_GP_AMX_SB_BYTES):
 * lo and hi of w, and for the min types (off == 0) the min of each
 * element's 16-group. */
AMX_INL void amx_split(const uint8_t *panel, int ns, int nsub, int off, uint8_t *tiles) {
    static const uint16_t idx[2][32] __attribute__((aligned(64))) = {
        {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
        {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};
    const __m512i i0 = _mm512_load_si512(idx[0]), i1 = _mm512_load_si512(idx[1]);
    const __m512i voff = _mm512_set1_epi16((short)off), lo16 = _mm512_set1_epi32(0xffff), rep = _mm512_set1_epi32(0x01010101);
    const size_t sbb = TS_GP_SB_BYTES(nsub);
    const int gps = 64 / nsub;
    for (int s = 0; s < ns; s++) {
        const uint8_t *P = panel + (size_t)s * sbb;
        const int32_t *cr = (const int32_t *)(P + TS_GP_Q + nsub * 128);
        uint8_t *T = tiles + (size_t)s * TS_GP_AMX_SB_BYTES;
        for (int lg = 0; lg < 2; lg++)
            for (int j = 0; j < nsub; j++) {
                /* the 16 rows' scales, each repeated over its 4 quants */
                const __m512i s16 = _mm512_castsi256_si512(_mm512_cvtepi32_epi16(_mm512_load_si512(P + TS_GP_Q + (j * 2 + lg) * 64)));
                const __m512i e0 = _mm512_permutexvar_epi16(i0, s16), e1 = _mm512_permutexvar_epi16(i1, s16);
                for (int g = j * gps; g < (j + 1) * gps; g++) {
                    const uint8_t *q = P + g * 128 + lg * 64;
                    const __m512i q0 = _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)q)), voff);
                    const __m512i q1 = _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(q + 32))), voff);
                    const __m512i w0 = _mm512_mullo_epi16(q0, e0), w1 = _mm512_mullo_epi16(q1, e1);
                    uint8_t *o = T + lg * 12288 + (g / 16) * 3072 + (g % 16) * 64;
                    _mm256_store_si256((__m256i *)o, _mm512_cvtepi16_epi8(w0));
                    _mm256_store_si256((__m256i *)(o + 32), _mm512_cvtepi16_epi8(w1));
                    _mm256_store_si256((__m256i *)(o + 1024), _mm512_cvtepi16_epi8(_mm512_srai_epi16(w0, 8)));
                    _mm256_store_si256((__m256i *)(o + 1056), _mm512_cvtepi16_epi8(_mm512_srai_epi16(w1, 8)));
                    if (!off) { /* cr of the 16-group g/4: at nsub 8 the min of sub-block g/8, half
                                 * g/8 % 2 of the pair g/16; at nsub 16 half g/4 % 2 of the pair g/8 */
                        const int pr = nsub == 8 ? g / 16 : g / 8, hi = nsub == 8 ? (g / 8) % 2 : (g / 4) % 2;
                        __m512i m = _mm512_load_si512(cr + (pr * 2 + lg) * 16);
                        m = hi ? _mm512_srli_epi32(m, 16) : _mm512_and_si512(m, lo16);
                        _mm512_store_si512(o + 2048, _mm512_mullo_epi32(m, rep));
                    }
                }
            }
    }
}

/* One unit's 16-row lane group (B tiles at T) against 16 tokens (A rows at
 * xa, stride xs) for one super-block: C_lo, C_hi (and C_m) into cb. Tiles:
 * 0-2 C (lo, hi, m), 3 A, 4-6 B (lo, hi, m). */
AMX_INL void amx_sb(const uint8_t *T, const uint8_t *xa, uint64_t xs, int mins, int32_t cb[3][16][16]) {
    _tile_zero(0);
    _tile_zero(1);
    if (mins) _tile_zero(2);
    for (int kk = 0; kk < 4; kk++) {
        const uint8_t *B = T + kk * 3072;
        _tile_loadd(3, xa + kk * 64, xs);
        _tile_loadd(4, B, 64);
        _tile_loadd(5, B + 1024, 64);
        _tile_dpbsud(0, 3, 4);
        _tile_dpbssd(1, 3, 5);
        if (mins) {
            _tile_loadd(6, B + 2048, 64);
            _tile_dpbsud(2, 3, 6);
        }
    }
    _tile_stored(0, cb[0], 64);
    _tile_stored(1, cb[1], 64);
    if (mins) _tile_stored(2, cb[2], 64);
    AMX_FENCE();
}

/* One row block's K segment on the tile unit, packed units at sp: tokens
 * [0, c_amx) (whole 16s; their quants gathered at ab by amx_gather, their
 * rows at px for the scales); per super-block, then lane group, then tokens, so
 * the lane group's B tiles (12 KiB) stay in L1 while the tokens pass. The
 * caller has loaded the tile configuration (agemm_*). */
AMX_INL void amx_segment_body(ts_type t, const int mins, const uint8_t *sp, size_t unit, int64_t r0, int64_t nr, int nu,
                              int64_t s0, int ns, const uint8_t *ab, const uint8_t *px, uint64_t xs, int64_t c_amx, float *out,
                              int64_t os) {
    const int nsub = ts_q_gemm_nsub(t);
    const size_t sbb = TS_GP_SB_BYTES(nsub);
    uint8_t *tp = (uint8_t *)sp + 2 * unit; /* the scratch after the two units (ts_gemm_scratch_bytes) */
    int32_t cb[3][16][16] __attribute__((aligned(64)));
    for (int u = 0; u < nu; u++) amx_split(sp + u * unit, ns, nsub, ts_q_gemm_offset(t), tp + (size_t)u * TS_GP_KSEG * TS_GP_AMX_SB_BYTES);
    AMX_FENCE();
    for (int s = 0; s < ns; s++)
        for (int u = 0; u < nu; u++)
            for (int lg = 0; lg < 2; lg++) {
                const int64_t rl = nr - u * TS_GP_ROWS - lg * 16;
                if (rl <= 0) continue;
                const uint8_t *T = tp + ((size_t)u * TS_GP_KSEG + (size_t)s) * TS_GP_AMX_SB_BYTES + (size_t)lg * 12288;
                const uint8_t *P = sp + u * unit + (size_t)s * sbb, *D = P + TS_GP_Q + nsub * 128 + 8 * 128;
                const __m512 d = _mm512_load_ps(D + lg * 64), dm = _mm512_load_ps(D + 128 + lg * 64);
                const __mmask16 m = rmask(rl);
                const int init = s0 == 0 && s == 0;
                float *o = out + r0 + u * TS_GP_ROWS + lg * 16;
                for (int64_t c0 = 0; c0 < c_amx; c0 += 16) {
                    const uint8_t *xq = px + (uint64_t)c0 * xs + (uint64_t)(s0 + s) * QK_BYTES;
                    amx_sb(T, ab + ((size_t)s * (size_t)c_amx + (size_t)c0) * 256, 256, mins, cb);
                    for (int i = 0; i < 16; i++) {
                        const __m512i sb = _mm512_add_epi32(_mm512_load_si512(cb[0][i]), _mm512_slli_epi32(_mm512_load_si512(cb[1][i]), 8));
                        const __m512 dx = _mm512_set1_ps(ldf(xq + (uint64_t)i * xs));
                        float *oi = o + (c0 + i) * os;
                        if (mins) sb_out(oi, m, sb, _mm512_load_si512(cb[2][i]), d, dm, dx, init);
                        else if (init) _mm512_mask_storeu_ps(oi, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sb), d), dx));
                        else _mm512_mask_storeu_ps(oi, m, _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sb), d), dx, _mm512_maskz_loadu_ps(m, oi)));
                    }
                    AMX_FENCE();
                }
            }
}
/* the two instances: the types with a min (a third tile), the offset types */
#define AMX_SEG_ARGS                                                                                             \
    ts_type t, const uint8_t *sp, size_t unit, int64_t r0, int64_t nr, int nu, int64_t s0, int ns, const uint8_t *ab,  \
        const uint8_t *px, uint64_t xs, int64_t c_amx, float *out, int64_t os
AMX_FN __attribute__((noinline)) void amx_segment_min(AMX_SEG_ARGS) {
    amx_segment_body(t, 1, sp, unit, r0, nr, nu, s0, ns, ab, px, xs, c_amx, out, os);
}
AMX_FN __attribute__((noinline)) void amx_segment_off(AMX_SEG_ARGS) {
    amx_segment_body(t, 0, sp, unit, r0, nr, nu, s0, ns, ab, px, xs, c_amx, out, os);
}

/* The A operand of a K segment: the quants of super-blocks [s0, s0 + ns) of
 * nc activation rows, gathered as [ns][nc][256] bytes, so that a tile's 16
 * tokens are 4 KiB in one run (stride 256), not 16 rows a row's length apart
 * (xs: 21 KiB for a 7B ffn_down), which the tile loads waited on: on the
 * 2-core Emerald Rapids VM the tiles ran a 7B ffn_down Q4_K (bench_gemm 512)
 * in ~95 ms against the VNNI kernel's ~54 before. Once a segment and token
 * block, for all the call's row blocks. */
VINL void amx_gather(const uint8_t *px, uint64_t xs, int64_t s0, int ns, int64_t nc, uint8_t *ab) {
    for (int s = 0; s < ns; s++)
        for (int64_t c = 0; c < nc; c++) {
            const uint8_t *q = px + (uint64_t)c * xs + (uint64_t)(s0 + s) * QK_BYTES + QK_QS;
            uint8_t *o = ab + ((size_t)s * (size_t)nc + (size_t)c) * 256;
            for (int i = 0; i < 4; i++) _mm512_store_si512(o + 64 * i, _mm512_loadu_si512(q + 64 * i));
        }
}

/* rows of the block at r0 (two units, up to 64), super-blocks of the K
 * segment at s0 (up to TS_GP_KSEG): panel_gemm's two loop orders share them */
static inline int64_t row_block(int64_t nrows, int64_t r0) { return nrows - r0 < 2 * TS_GP_ROWS ? nrows - r0 : 2 * TS_GP_ROWS; }
static inline int segment(int64_t nsb, int64_t s0) { return (int)(nsb - s0 < TS_GP_KSEG ? nsb - s0 : TS_GP_KSEG); }

/* Rows in blocks of two units (64 rows); per block, K in segments of
 * TS_GP_KSEG super-blocks: pack both units, then every token passes over
 * them through vk. With amx (the AMX level's kernels, which hold the tile
 * configuration) the segments go outside the row blocks instead, so that a
 * segment's gathered A serves them all: the tile unit takes the whole 16s
 * of tokens (amx_segment_*), vk the rest. */
VINL void panel_gemm(ts_type t, const int amx, int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,
                     int64_t ncols, float *out, int64_t os, void *scratch) {
    const int nsub = ts_q_gemm_nsub(t);
    const vk_fn *kf = vk_for(t);
    const int64_t nsb = n / TS_QK_K, c_amx = amx ? ncols / 16 * 16 : 0;
    const size_t unit = (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(nsub);
    uint8_t *ab = (uint8_t *)scratch + 2 * unit + 2 * (size_t)TS_GP_KSEG * TS_GP_AMX_SB_BYTES;
    /* the sums per 32 of the tokens vk takes (those past the tiles' whole
     * 16s), at once where they fit (ts_gemm_scratch_bytes: after the AMX
     * area, or after the units without the tiles); indexed by column */
    uint8_t *bp_all = NULL;
    if (nsub == 8 && ncols > c_amx && (uint64_t)ncols * (uint64_t)nsb * 16 <= TS_GP_BP_BYTES) {
        bp_all = c_amx ? ab + TS_GP_AMX_A_BYTES : (uint8_t *)scratch + 2 * (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(16);
        gp_bs32_all(x, xs, c_amx, ncols, nsb, bp_all);
    }
    if (!c_amx) {
        for (int64_t r0 = 0; r0 < nrows; r0 += 2 * TS_GP_ROWS) {
            const int64_t nr = row_block(nrows, r0);
            const int nu = nr > TS_GP_ROWS ? 2 : 1;
            for (int64_t s0 = 0; s0 < nsb; s0 += TS_GP_KSEG) {
                const int ns = segment(nsb, s0);
                pack_units(t, 1, w, ws, r0, nr, nu, s0, ns, scratch, unit);
                vk_cols(kf, nsub, scratch, unit, nu, nr, ns, x, xs, s0, 0, ncols, bp_all, nsb, out + r0, os);
            }
        }
        return;
    }
    /* On the tiles: per block of up to TS_GP_AMX_TOK tokens and K segment,
     * the segment's A gathered once, then every row block packed and run
     * against it; the last block's pass also runs the tokens past the whole
     * 16s through vk. Each (row, token) still sums its super-blocks in
     * order, one segment after the other. */
    for (int64_t cb = 0; cb < c_amx; cb += TS_GP_AMX_TOK) {
        const int64_t nc = c_amx - cb < TS_GP_AMX_TOK ? c_amx - cb : TS_GP_AMX_TOK;
        const uint8_t *pxb = (const uint8_t *)x + (uint64_t)cb * xs;
        for (int64_t s0 = 0; s0 < nsb; s0 += TS_GP_KSEG) {
            const int ns = segment(nsb, s0);
            amx_gather(pxb, xs, s0, ns, nc, ab);
            for (int64_t r0 = 0; r0 < nrows; r0 += 2 * TS_GP_ROWS) {
                const int64_t nr = row_block(nrows, r0);
                const int nu = nr > TS_GP_ROWS ? 2 : 1;
                pack_units(t, 1, w, ws, r0, nr, nu, s0, ns, scratch, unit);
                if (ts_q_gemm_offset(t)) amx_segment_off(t, scratch, unit, r0, nr, nu, s0, ns, ab, pxb, xs, nc, out + cb * os, os);
                else amx_segment_min(t, scratch, unit, r0, nr, nu, s0, ns, ab, pxb, xs, nc, out + cb * os, os);
                if (cb + nc == c_amx) vk_cols(kf, nsub, scratch, unit, nu, nr, ns, x, xs, s0, c_amx, ncols, bp_all, nsb, out + r0, os);
            }
        }
    }
}

#define VG(T)                                                                                                    \
    static VN void vgemm_##T(int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,        \
                          int64_t ncols, float *out, int64_t os, void *scratch) {                              \
        panel_gemm(TS_TYPE_##T, 0, n, w, ws, nrows, x, xs, ncols, out, os, scratch);                              \
    }
VG(Q2_K)
VG(Q3_K)
VG(Q4_K)
VG(Q5_K)
VG(Q6_K)

/* The AMX level: the tile configuration (7 tiles of 16 x 64 bytes) held for
 * the call, released on return; under ts_q_gemm_amx_min_cols(t) tokens
 * the AVX-512 kernels. */
#define AG(T)                                                                                                    \
    AMX_FN void agemm_##T(int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,         \
                          int64_t ncols, float *out, int64_t os, void *scratch) {                              \
        if (ncols < ts_q_gemm_amx_min_cols(TS_TYPE_##T)) {                                                     \
            vgemm_##T(n, w, ws, nrows, x, xs, ncols, out, os, scratch);                                         \
            return;                                                                                              \
        }                                                                                                        \
        amx_cfg cfg;                                                                                             \
        memset(&cfg, 0, sizeof cfg);                                                                             \
        cfg.palette = 1;                                                                                         \
        for (int i = 0; i < 7; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;                                          \
        _tile_loadconfig(&cfg);                                                                                  \
        panel_gemm(TS_TYPE_##T, 1, n, w, ws, nrows, x, xs, ncols, out, os, scratch);                              \
        _tile_release();                                                                                         \
    }
AG(Q2_K)
AG(Q3_K)
AG(Q4_K)
AG(Q5_K)
AG(Q6_K)

void ts_q_fill_gemm_amx(ts_q_kernels *k) {
    k->gemm[TS_TYPE_Q2_K] = agemm_Q2_K;
    k->gemm[TS_TYPE_Q3_K] = agemm_Q3_K;
    k->gemm[TS_TYPE_Q4_K] = agemm_Q4_K;
    k->gemm[TS_TYPE_Q5_K] = agemm_Q5_K;
    k->gemm[TS_TYPE_Q6_K] = agemm_Q6_K;
}

void ts_q_fill_gemm_avx512(ts_q_kernels *k, int vnni) {
    if (!vnni) return; /* AVX-512 without VNNI keeps the AVX2 panel kernels */
    k->gemm[TS_TYPE_Q2_K] = vgemm_Q2_K;
    k->gemm[TS_TYPE_Q3_K] = vgemm_Q3_K;
    k->gemm[TS_TYPE_Q4_K] = vgemm_Q4_K;
    k->gemm[TS_TYPE_Q5_K] = vgemm_Q5_K;
    k->gemm[TS_TYPE_Q6_K] = vgemm_Q6_K;
}
#endif
