/* AVX2 panel GEMM for the K-quants (layout: quant.h, "GEMM panels"; packed
 * with the scales as (s, s) i16 pairs). Entered only after runtime detection.
 *
 * Lanes are weight rows: a ymm holds 4 consecutive quants of 8 rows (half a
 * lane group). Per 4 elements and token: maddubs (u8 weights <= 63 x s8
 * activations in [-127, 127]: pairs <= 16002, no saturation), summed in i16
 * over as many groups as cannot wrap, then madd with the sub-block's scale
 * pair, which both sums the pairs and applies the scale, into a super-block
 * i32 sum per (row, token). The micro-kernel holds 16 rows x NT tokens; per super-block the correction (madd of cr with the
 * token's bsums), conversion and one FMA into the output. The types with a
 * min per 32 elements (Q4_K, Q5_K) take their correction a pair of
 * sub-blocks a madd, against sums per 32 (gp_bs32_pairs), not per 16: half the
 * madds and loads of the correction, the same integer. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "tensor/gemm_pack.h"

#define INLINE static inline __attribute__((always_inline))
#define QK_BYTES ((int)sizeof(ts_block_q8_K))
#define QK_QS 4
#define QK_BSUMS 260

INLINE __m256i bc32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
INLINE float ldf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}
INLINE __m256i ld(const uint8_t *p) { return _mm256_load_si256((const __m256i *)p); }

/* NT activation rows against lane group lg (16 rows) of one packed unit:
 * out[t*os + r] += value for the rows whose mask lane is set. DEPTH groups of
 * 4 elements are summed in i16 (maddubs outputs, paddw) before one madd with
 * the scale pair: |pair| <= 2*qmax*127, so DEPTH = 32767 / (2*qmax*127)
 * cannot wrap (Q4_K 8, Q5_K 4, Q6_K 2, Q2_K/Q3_K >= 4 = a whole sub-block). */
INLINE void ak(const uint8_t *panel, int ns, int lg, const int NSUB, const int NT, const int DEPTH, const uint8_t *const *xr,
               const uint8_t *bp, int bst, float *out, int64_t os, __m256i m0, __m256i m1, int full, int first) {
    const size_t sbb = TS_GP_SB_BYTES(NSUB);
    const int GPS = 64 / NSUB;
    for (int s = 0; s < ns; s++) {
        const uint8_t *P = panel + (size_t)s * sbb;
        const uint8_t *xq[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) xq[t] = xr[t] + (size_t)s * QK_BYTES;
        __m256i sb0[4], sb1[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) sb0[t] = sb1[t] = _mm256_setzero_si256();
        for (int j = 0; j < NSUB; j++) {
#pragma GCC unroll 8
            for (int c = 0; c < GPS / DEPTH; c++) { /* DEPTH divides GPS for every type */
                __m256i h0[4], h1[4];
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) h0[t] = h1[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int i = 0; i < DEPTH; i++) {
                    const int gg = j * GPS + c * DEPTH + i;
                    const __m256i w0 = ld(P + (gg * 2 + lg) * 64), w1 = ld(P + (gg * 2 + lg) * 64 + 32);
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) {
                        const __m256i xb = bc32(xq[t] + QK_QS + 4 * gg);
                        h0[t] = _mm256_add_epi16(h0[t], _mm256_maddubs_epi16(w0, xb));
                        h1[t] = _mm256_add_epi16(h1[t], _mm256_maddubs_epi16(w1, xb));
                        /* keep the chains as written: gcc otherwise re-associates
                         * the i16 sums into a tree that needs ~30 registers */
                        __asm__("" : "+x"(h0[t]), "+x"(h1[t]));
                    }
                }
                const __m256i s0 = ld(P + TS_GP_Q + (j * 2 + lg) * 64), s1 = ld(P + TS_GP_Q + (j * 2 + lg) * 64 + 32);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    sb0[t] = _mm256_add_epi32(sb0[t], _mm256_madd_epi16(h0[t], s0));
                    sb1[t] = _mm256_add_epi32(sb1[t], _mm256_madd_epi16(h1[t], s1));
                }
            }
        }
        const uint8_t *C = P + TS_GP_Q + NSUB * 128, *D = C + 8 * 128;
        const __m256 d0 = _mm256_load_ps((const float *)(D + lg * 64)), d1 = _mm256_load_ps((const float *)(D + lg * 64 + 32));
        const __m256 dm0 = _mm256_load_ps((const float *)(D + 128 + lg * 64));
        const __m256 dm1 = _mm256_load_ps((const float *)(D + 128 + lg * 64 + 32));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            __m256i c0 = _mm256_setzero_si256(), c1 = c0;
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                if (NSUB == 8 && p == 4) break; /* the pairs of sub-blocks */
                const __m256i bs = NSUB == 8 ? bc32(bp + ((size_t)(t * bst + s) * 4 + p) * 4) : bc32(xq[t] + QK_BSUMS + 4 * p);
                c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(ld(C + (p * 2 + lg) * 64), bs));
                c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(ld(C + (p * 2 + lg) * 64 + 32), bs));
            }
            const __m256 dx = _mm256_set1_ps(ldf(xq[t]));
            __m256 f0 = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sb0[t]), d0), _mm256_mul_ps(_mm256_cvtepi32_ps(c0), dm0));
            __m256 f1 = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sb1[t]), d1), _mm256_mul_ps(_mm256_cvtepi32_ps(c1), dm1));
            float *o = out + t * os;
            if (full) { /* all 16 rows: plain loads and stores (Zen's masked ymm stores are microcoded) */
                if (first && s == 0) { /* the row's first super-block: no zeroing pass over the output */
                    _mm256_storeu_ps(o, _mm256_mul_ps(f0, dx));
                    _mm256_storeu_ps(o + 8, _mm256_mul_ps(f1, dx));
                } else {
                    _mm256_storeu_ps(o, _mm256_fmadd_ps(f0, dx, _mm256_loadu_ps(o)));
                    _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(f1, dx, _mm256_loadu_ps(o + 8)));
                }
            } else if (first && s == 0) {
                _mm256_maskstore_ps(o, m0, _mm256_mul_ps(f0, dx));
                _mm256_maskstore_ps(o + 8, m1, _mm256_mul_ps(f1, dx));
            } else {
                _mm256_maskstore_ps(o, m0, _mm256_fmadd_ps(f0, dx, _mm256_maskload_ps(o, m0)));
                _mm256_maskstore_ps(o + 8, m1, _mm256_fmadd_ps(f1, dx, _mm256_maskload_ps(o + 8, m1)));
            }
        }
    }
}

/* lanes 0..7 set where row base+lane < nr */
static inline __m256i rmask8(int64_t nr, int base) {
    int64_t k = nr - base;
    int v = k < 0 ? 0 : k > 8 ? 8 : (int)k;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The micro-kernels take the lane group's row count, not its masks: a
 * function with a 256-bit argument is one GCC leaves without vzeroupper, and
 * the dirty upper state it returned made every legacy-SSE instruction after
 * a GEMM slow (measured on a Zen 3 VM: SiLU's loop 7 -> 65 ns an element, the
 * packer too; half of a 1.5B prefill's time). */
/* Tokens per micro-kernel call (2 or 3): per 4 elements 2 weight loads and NT
 * broadcasts feed 2*NT maddubs, so 3 tokens load less per multiply than 2.
 * The 4*NT accumulators, 2 weights and a broadcast leave the scale pairs to
 * memory operands or spills at 3 (once per sub-block). Each token's sums are
 * the same either way (bit for bit). On Zen 3 (session 18, -DAK_NT=2 against
 * 3, alternating): bench_gemm's geomean 11 of 12 pairs faster (medians ~1.25x
 * at 48 and 512 tokens), 1.5B pp512 per-pair 0.97..1.28 (median 1.25), the
 * 30B-A3B's pp512 0.96..1.24 (median 1.06). */
#ifndef AK_NT
#define AK_NT 3
#endif
#define AK_FN(T, NSUB, DEPTH, NT)                                                                                \
    static void ak_##T##_##NT(const uint8_t *panel, int ns, int lg, const uint8_t *const *xr, const uint8_t *bp,   \
                              int bst, float *out, int64_t os, int64_t nr, int first) {                         \
        ak(panel, ns, lg, NSUB, NT, DEPTH, xr, bp, bst, out, os, rmask8(nr, 0), rmask8(nr, 8), nr >= 16, first); \
    }
#if AK_NT >= 3
#define AK_FN3(T, NSUB, DEPTH) AK_FN(T, NSUB, DEPTH, 3)
#define AK_TAB(T) {NULL, ak_##T##_1, ak_##T##_2, ak_##T##_3}
#else
#define AK_FN3(T, NSUB, DEPTH)
#define AK_TAB(T) {NULL, ak_##T##_1, ak_##T##_2}
#endif
#define AK_T(T, NSUB, DEPTH) AK_FN(T, NSUB, DEPTH, 1) AK_FN(T, NSUB, DEPTH, 2) AK_FN3(T, NSUB, DEPTH)
AK_T(Q2_K, 16, 4)
AK_T(Q3_K, 16, 4)
AK_T(Q4_K, 8, 8)
AK_T(Q5_K, 8, 4)
AK_T(Q6_K, 16, 2)
typedef void (*ak_fn)(const uint8_t *, int, int, const uint8_t *const *, const uint8_t *, int, float *, int64_t, int64_t, int);

static const ak_fn ak_q2[AK_NT + 1] = AK_TAB(Q2_K), ak_q3[AK_NT + 1] = AK_TAB(Q3_K), ak_q4[AK_NT + 1] = AK_TAB(Q4_K),
                   ak_q5[AK_NT + 1] = AK_TAB(Q5_K), ak_q6[AK_NT + 1] = AK_TAB(Q6_K);

/* 8 rows' ymm (8 dwords each: 8 k-groups of 4 quants) -> 8 k-groups' ymm
 * (8 rows each), in place. */
INLINE void tr8x8(__m256i *r) {
    __m256i a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
    }
}

/* tr8x8 of 8 rows' 32 bytes read from memory: rows i and i + 4 share a ymm
 * from two 16-byte loads, so one 4x4 dword transpose in each 128-bit lane
 * gives the k-groups, 16 shuffles where tr8x8 takes 24 (one port on Intel,
 * where they bound the packer). The same bytes as loading and tr8x8. */
static const _Alignas(32) uint8_t zero32[32] = {0};
INLINE void tr8x8_rows(const uint8_t *const *q, __m256i *r) {
    for (int h = 0; h < 2; h++) { /* k-groups 4h .. 4h + 3 */
        __m256i A[4], a[4];
        for (int i = 0; i < 4; i++)
            A[i] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(q[i + 4] + 16 * h)), _mm_loadu_si128((const __m128i *)(q[i] + 16 * h)));
        a[0] = _mm256_unpacklo_epi32(A[0], A[1]);
        a[1] = _mm256_unpackhi_epi32(A[0], A[1]);
        a[2] = _mm256_unpacklo_epi32(A[2], A[3]);
        a[3] = _mm256_unpackhi_epi32(A[2], A[3]);
        r[4 * h + 0] = _mm256_unpacklo_epi64(a[0], a[2]);
        r[4 * h + 1] = _mm256_unpackhi_epi64(a[0], a[2]);
        r[4 * h + 2] = _mm256_unpacklo_epi64(a[1], a[3]);
        r[4 * h + 3] = _mm256_unpackhi_epi64(a[1], a[3]);
    }
}

/* ts_q_gemm_pack for Q4_K, Q5_K and Q6_K with sc_pair 1, byte for byte (the
 * AVX-512 pack_vec's scheme on 256 bits): a row's 64 quants of a k-step are
 * two ymm (the low and the high 32 elements: Q4_K a 32-byte run's low then
 * high nibbles; Q5_K the same with two bits of qh on top; Q6_K ql's nibbles
 * with two bits of qh), whose 8 dwords are 8 k-groups, and 8 rows' ymm
 * transposed are 8 k-groups' 8 panel lanes. The scalar packer scatters 4
 * bytes at a time; with the ~16 tokens an expert gets in a MoE prefill chunk
 * it was most of the GEMM's time. Scales, corrections, d, dm: Q4_K and
 * Q5_K's gp_heads_q4, Q6_K's gp_heads_q6 (gemm_pack.h). */
static void pack_vec2(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, uint8_t *panel) {
    const int q6 = t == TS_TYPE_Q6_K, q5 = t == TS_TYPE_Q5_K, bb = (int)ts_type_get(t)->block_bytes;
    const size_t sbb = TS_GP_SB_BYTES(ts_q_gemm_nsub(t));
    for (int lg = 0; lg < 2; lg++) {
        const uint8_t *rb[16];
        gp_row_blocks(w, ws, nrows, sb0, bb, lg, rb);
        for (int s = 0; s < ns; s++) {
            uint8_t *P = panel + (size_t)s * sbb;
            if (q6) gp_heads_q6(rb, lg, s, ns, bb, 1, P);
            else gp_heads_q4(rb, lg, s, ns, bb, 1, P);
            for (int kk = 0; kk < 4; kk++)
                for (int h8 = 0; h8 < 2; h8++) { /* rows 8 h8 .. 8 h8 + 7 of the lane group */
                    __m256i lo[8], hi[8];
                    if (!q6 && !q5) {
                        /* Q4_K: the nibble split keeps byte positions, so the
                         * rows' raw 32-byte runs are transposed once and then
                         * split (one tr8x8, not two): the same panel, a 30B-A3B
                         * expert slice packed in ~98 us instead of ~115
                         * (docs/BENCHMARKS.md, session 27) */
                        const __m256i m4 = _mm256_set1_epi8(0x0f);
                        const uint8_t *q[8];
                        for (int i = 0; i < 8; i++) q[i] = rb[8 * h8 + i] ? rb[8 * h8 + i] + (size_t)s * bb + 16 + 32 * kk : zero32;
                        tr8x8_rows(q, lo);
                        for (int i = 0; i < 8; i++) {
                            hi[i] = _mm256_and_si256(_mm256_srli_epi16(lo[i], 4), m4);
                            lo[i] = _mm256_and_si256(lo[i], m4);
                        }
                    } else {
                        for (int i = 0; i < 8; i++) {
                            if (rb[8 * h8 + i]) gp_quants(q6, q5, rb[8 * h8 + i] + (size_t)s * bb, kk, &lo[i], &hi[i]);
                            else lo[i] = hi[i] = _mm256_setzero_si256();
                        }
                        tr8x8(lo);
                        tr8x8(hi);
                    }
                    /* k-group kk*16 + i (lo) and kk*16 + 8 + i (hi), lane group lg, rows 8 h8 .. */
                    for (int i = 0; i < 8; i++) {
                        _mm256_store_si256((__m256i *)(P + ((kk * 16 + i) * 2 + lg) * 64 + 32 * h8), lo[i]);
                        _mm256_store_si256((__m256i *)(P + ((kk * 16 + 8 + i) * 2 + lg) * 64 + 32 * h8), hi[i]);
                    }
                }
        }
    }
}

void ts_q_gemm_pack_avx2(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, uint8_t *panel) {
    if (t == TS_TYPE_Q4_K || t == TS_TYPE_Q5_K || t == TS_TYPE_Q6_K) pack_vec2(t, w, ws, nrows, sb0, ns, panel);
    else ts_q_gemm_pack(t, w, ws, nrows, sb0, ns, 1, panel);
}

static void agemm(ts_type t, int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,
                  int64_t ncols, float *out, int64_t os, void *scratch) {
    const int nsub = ts_q_gemm_nsub(t);
    _Alignas(32) uint8_t bp[AK_NT * TS_GP_KSEG * 16];
    const ak_fn *kf = t == TS_TYPE_Q2_K ? ak_q2 : t == TS_TYPE_Q3_K ? ak_q3 : t == TS_TYPE_Q4_K ? ak_q4 : t == TS_TYPE_Q5_K ? ak_q5 : ak_q6;
    const int64_t nsb = n / TS_QK_K;
    const size_t unit = (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(nsub);
    const uint8_t *pw = w, *px = x;
    uint8_t *sp = scratch;
    /* every token's sums at once, after the two units, where they fit */
    uint8_t *ball = nsub == 8 && (uint64_t)ncols * (uint64_t)nsb * 16 <= TS_GP_BP_BYTES ? sp + 2 * unit : NULL;
    if (ball) gp_bs32_all(px, xs, 0, ncols, nsb, ball);
    for (int64_t r0 = 0; r0 < nrows; r0 += 2 * TS_GP_ROWS) {
        int64_t nr = nrows - r0 < 2 * TS_GP_ROWS ? nrows - r0 : 2 * TS_GP_ROWS;
        int nu = nr > TS_GP_ROWS ? 2 : 1;
        for (int64_t s0 = 0; s0 < nsb; s0 += TS_GP_KSEG) {
            int ns = (int)(nsb - s0 < TS_GP_KSEG ? nsb - s0 : TS_GP_KSEG);
            for (int u = 0; u < nu; u++) {
                int64_t ru = nr - u * TS_GP_ROWS;
                ts_q_gemm_pack_avx2(t, pw + (uint64_t)(r0 + u * TS_GP_ROWS) * ws, ws, (int)(ru < TS_GP_ROWS ? ru : TS_GP_ROWS), s0,
                                    ns, sp + u * unit);
            }
            for (int64_t c0 = 0; c0 < ncols; c0 += AK_NT) {
                int nt = (int)(ncols - c0 < AK_NT ? ncols - c0 : AK_NT);
                const uint8_t *xr[AK_NT];
                for (int i = 0; i < nt; i++) xr[i] = px + (uint64_t)(c0 + i) * xs + (uint64_t)s0 * QK_BYTES;
                int bst;
                const uint8_t *b = gp_bs32_group(ball, nsb, c0, s0, nsub, xr, nt, ns, bp, &bst);
                for (int u = 0; u < nu; u++)
                    for (int lg = 0; lg < 2; lg++) {
                        int64_t ru = nr - u * TS_GP_ROWS - 16 * lg;
                        if (ru <= 0) break;
                        kf[nt](sp + u * unit, ns, lg, xr, b, bst, out + c0 * os + r0 + u * TS_GP_ROWS + 16 * lg, os, ru, s0 == 0);
                    }
            }
        }
    }
}

#define AG(T)                                                                                                    \
    static void agemm_##T(int64_t n, const void *w, uint64_t ws, int64_t nrows, const void *x, uint64_t xs,        \
                          int64_t ncols, float *out, int64_t os, void *scratch) {                              \
        agemm(TS_TYPE_##T, n, w, ws, nrows, x, xs, ncols, out, os, scratch);                                    \
    }
AG(Q2_K)
AG(Q3_K)
AG(Q4_K)
AG(Q5_K)
AG(Q6_K)

void ts_q_fill_gemm_avx2(ts_q_kernels *k) {
    k->gemm[TS_TYPE_Q2_K] = agemm_Q2_K;
    k->gemm[TS_TYPE_Q3_K] = agemm_Q3_K;
    k->gemm[TS_TYPE_Q4_K] = agemm_Q4_K;
    k->gemm[TS_TYPE_Q5_K] = agemm_Q5_K;
    k->gemm[TS_TYPE_Q6_K] = agemm_Q6_K;
}
#endif
