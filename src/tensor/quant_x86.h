/* x86 helpers shared by the AVX2 and AVX-512 kernel files, and the K-quant
 * dots (Q2_K..Q6_K against Q8_K) written once for two integer steps:
 *   - KQ_VNNI 0 (quant_avx2.c): maddubs (u8 x s8 -> i16 pairs), then madd
 *     by the chunk's i16 scales (-> i32), then add;
 *   - KQ_VNNI 1 (quant_avx512.c, AVX-512 VNNI + VL on ymm): vpdpbusd of
 *     the chunk into a zeroed register (i32 lanes, each the sum of 4
 *     products), then one vpdpwssd by the scales as (scale, 0) i16 pairs.
 * The second is exact because a lane's 4 products fit i16: |q_u| <= 63
 * (Q6_K; Q5_K 31, Q4_K 15, Q3_K 7, Q2_K 3) and |x| <= 127 (the partner
 * contract) give at most 4 * 63 * 127 = 32004, so the lane's high i16 is
 * its sign and meets the scale pair's 0. Each i32 lane then holds the same
 * integer as madd's (the 4 products of the same 4 elements, times the same
 * scale), so the tiles of 2-4 columns give the AVX2 ones' bits, which
 * test_quant checks. The VNNI step is one instruction fewer per chunk
 * (dpbusd + dpwssd against maddubs + madd + add; the zeroing idiom takes no
 * port). The one-column VNNI dot goes further and takes its chunks in pairs
 * (KC_PAIR below), which spreads each super-block's integer over other
 * lanes: its float sum may differ from the AVX2 dot's in the last bits.
 *
 * The includer defines INLINE and KQ_VNNI, includes <immintrin.h>,
 * <stddef.h>, <string.h> and tensor/quant.h (TS_QUANT_INTERNAL), and KQ_FN:
 * the storage class and target of the kernels ("static", or static with
 * target("avx512vnni"): only those functions may use VNNI, the file's other
 * AVX-512 code also runs where it is absent). */
#ifndef TS_QUANT_X86_H
#define TS_QUANT_X86_H

INLINE float h2f(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* weight scales of a block: lane 0 = d, lane 1 = m (Q4_1/Q5_1; the K-quants'
 * d, dmin), lanes 2, 3 zero */
INLINE __m128 wsc_f16(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)u));
}
/* one f16 scale (Q3_K/Q6_K d, the last bytes of a block) in lanes 0 and 1 */
INLINE __m128 wsc_f16x1(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm_moveldup_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* K-quant super-blocks go through the int8 core as 8 chunks of 32 unsigned
 * quants (chunk j covers elements 32j..32j+31, i.e. 16-groups 2j and 2j+1)
 * with a scale vector per chunk (low lane: group 2j, high lane: 2j+1; i16
 * pairs for madd, or (scale, 0) pairs for vpdpwssd under KQ_VNNI), plus a
 * correction sum_g corr_g * bsum_g with its own factor:
 *   block = d*dx * sum_j step(q_j, x_j, sc_j) - dcorr*dx * sum_g corr_g*bsum_g
 * Each type provides HEAD (scales, corr, d, dcorr, shared loads) and
 * CHUNK(j) (the quants of chunk j); chunks are decoded on the fly so that
 * nothing spills, and each is used for every column before the next. */

/* scale vector for chunk j from 16 i16 scales (one per 16-group): each
 * i16 lane pair of the step's second operand (madd) holds the group's
 * scale twice, or (scale, 0) under KQ_VNNI */
INLINE __m256i chunk_scales16(__m256i s16, int j) {
    __m256i src = j < 4 ? _mm256_permute2x128_si256(s16, s16, 0x00) : _mm256_permute2x128_si256(s16, s16, 0x11);
    const int g0 = (2 * j) & 7, g1 = (2 * j + 1) & 7;
    const int a0 = 2 * g0 | (2 * g0 + 1) << 8, a1 = 2 * g1 | (2 * g1 + 1) << 8;
    const int hi0 = KQ_VNNI ? 0xffff : a0, hi1 = KQ_VNNI ? 0xffff : a1; /* 0xff: pshufb writes 0 */
    const int c0 = (int)((unsigned)a0 | (unsigned)hi0 << 16), c1 = (int)((unsigned)a1 | (unsigned)hi1 << 16);
    const __m256i ctl = _mm256_setr_epi32(c0, c0, c0, c0, c1, c1, c1, c1);
    return _mm256_shuffle_epi8(src, ctl);
}
/* scale vector for chunk j from the 8 u8 scales in bytes 0..7 of both lanes
 * (k4_scales_vec): the i16 scale, zero-extended by the shuffle itself, in
 * every i16 lane (madd) or every other (KQ_VNNI) */
INLINE __m256i chunk_scales8(__m256i u8x2, int j) {
    return _mm256_shuffle_epi8(u8x2, KQ_VNNI ? _mm256_set1_epi32((int)(0x80808000u + (unsigned)j))
                                             : _mm256_set1_epi16((short)(0x8000 + j)));
}

#if KQ_VNNI
/* The one-column VNNI step takes its chunks in pairs (KC_PAIR): the two
 * vpdpbusd results, whose lanes fit i16, packed into one register (packssdw:
 * per 128-bit half, the first chunk's 4 lanes then the second's), then one
 * vpdpwssd by a pair scale vector: i16 lanes 0-3 of each half hold the first
 * chunk's group scale, 4-7 the second's. Chunks j (even) and j + 1. */
INLINE __m256i pair_scales16(__m256i s16, int j) {
    __m256i src = j < 4 ? _mm256_permute2x128_si256(s16, s16, 0x00) : _mm256_permute2x128_si256(s16, s16, 0x11);
    /* low half: groups 2j and 2j + 2 (elements 0-15 of each chunk), high half: 2j + 1, 2j + 3 */
    const int ga = (2 * j) & 7, gb = (2 * j + 2) & 7;
    const short la = (short)(2 * ga | (2 * ga + 1) << 8), lb = (short)(2 * gb | (2 * gb + 1) << 8);
    const short ha = (short)(2 * (ga + 1) | (2 * (ga + 1) + 1) << 8), hb = (short)(2 * (gb + 1) | (2 * (gb + 1) + 1) << 8);
    return _mm256_shuffle_epi8(src, _mm256_setr_epi16(la, la, la, la, lb, lb, lb, lb, ha, ha, ha, ha, hb, hb, hb, hb));
}
INLINE __m256i pair_scales8(__m256i u8x2, int j) {
    const short a = (short)(0x8000 + j), b = (short)(0x8000 + j + 1);
    return _mm256_shuffle_epi8(u8x2, _mm256_setr_epi16(a, a, a, a, b, b, b, b, a, a, a, a, b, b, b, b));
}
#endif

/* Q4_K / Q5_K: the 12 bytes of 6-bit scales and mins, one row, in vector
 * registers. Bytes s0..s11 give sc_j = s_j & 63 and mn_j = s_j+4 & 63 for
 * j < 4; for j >= 4 the low four bits come from s_j+4 (sc: low nibble, mn:
 * high nibble) and the top two from the top two bits of s_j-4 (sc) or s_j
 * (mn). The 16 bytes sc0..7 mn0..7 are built by two shuffles, shifts and
 * masks (epi16 shifts: the bits that cross into a neighbouring byte are
 * masked off). The scalar decode it replaces was a third of the one-column
 * dot's instructions, which bound decode on cores whose memory outruns one
 * column's kernel (session 39). Out: u8x2 = the 16 bytes in both lanes;
 * corr16 = mn_(g/2) as i16 for the 16-groups g = 0..15. */
INLINE void k4_scales_vec(const uint8_t *q, __m256i *u8x2, __m256i *corr16) {
    const __m128i s = _mm_loadu_si128((const __m128i *)q); /* s0..s11, then 4 bytes of quants (unused) */
    const __m128i p = _mm_shuffle_epi8(s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i h = _mm_shuffle_epi8(s, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i lo = _mm_or_si128(_mm_and_si128(p, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
                                    _mm_and_si128(_mm_srli_epi16(p, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m128i v = _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(h, 2), _mm_set1_epi8(0x30)));
    *u8x2 = _mm256_broadcastsi128_si256(v);
    /* min of 32-group j applies to 16-groups 2j and 2j+1 */
    *corr16 = _mm256_shuffle_epi8(*u8x2, _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,
                                                          12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1));
}

/* Q3_K: 16 six-bit scales (stored +32) -> i8. Of the 12 bytes as dwords a0
 * a1 a2: scales 0-3, 4-7, 8-11, 12-15 take their low nibbles from a0, a1,
 * a0 >> 4, a1 >> 4 and their top two bits from a2 >> 0, 2, 4, 6. In vector
 * registers (a scalar version's two 8-byte stores and 16-byte reload missed
 * store forwarding; session 39); the shifts' bits that cross bytes fall
 * outside the masks. Loads stop at the 12th byte (d follows, then the
 * block's end). */
INLINE __m128i q3k_scales(const uint8_t *p) {
    uint32_t a2;
    memcpy(&a2, p + 8, 4);
    const __m128i a01 = _mm_loadl_epi64((const __m128i *)p);
    const __m128i lo = _mm_and_si128(_mm_srlv_epi64(_mm_unpacklo_epi64(a01, a01), _mm_set_epi64x(4, 0)), _mm_set1_epi8(0x0f));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)a2), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)), _mm_set1_epi8(32));
}

/* a zeroed register as the zeroing idiom, which the core resolves at
 * rename: from _mm256_setzero_si256 GCC may copy one zero register into
 * each VNNI step's accumulator instead (as gemm_avx512.c's zero_idiom for
 * zmm) */
INLINE __m256i zero_idiom256(void) {
    __m256i z;
    __asm__("vpxor %x0, %x0, %x0" : "=x"(z));
    return z;
}

/* the bits of every byte of v under mask m moved up or down from bit
 * `from` to bit `to` (to <= 4) by one epi16 shift and the mask: the bits a
 * shift carries across from the neighbouring byte land below bit `to`
 * (left) or above the top of m (right, by from - to, from <= 7) */
#define KQ_MOVE(v, from, to, m)                                                                       \
    _mm256_and_si256((from) < (to) ? _mm256_slli_epi16(v, (to) - (from))                              \
                     : (from) > (to) ? _mm256_srli_epi16(v, (from) - (to)) : (v), _mm256_set1_epi8(m))
/* 16 bytes of nibbles at qs, both halves a load: chunk j even takes the low
 * nibbles of bytes 16j..16j+31, odd the high nibbles of the bytes before */
#define KQ_NIBBLES(qs, j)                                                                             \
    ((j) % 2 == 0 ? (qv = loadu((qs) + 16 * (j)), _mm256_and_si256(qv, _mm256_set1_epi8(0x0f)))       \
                  : _mm256_and_si256(_mm256_srli_epi16(qv, 4), _mm256_set1_epi8(0x0f)))

#define Q2K_HEAD                                                                                      \
    const uint8_t *b = blk; /* ts_block_q2_K */                                             \
    __m128i s_ = _mm_loadu_si128((const __m128i *)(b + offsetof(ts_block_q2_K, scales)));                                         \
    __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s_, _mm_set1_epi8(0x0f)));                      \
    __m256i corr = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s_, 4), _mm_set1_epi8(0x0f)));   \
    const __m128 dd_ = wsc_f16(b + offsetof(ts_block_q2_K, d)); /* d, dmin */                                                                               \
    __m256i qa = loadu((b + offsetof(ts_block_q2_K, qs))), qb = loadu((b + offsetof(ts_block_q2_K, qs)) + 32);
#define Q2K_CHUNK(j) _mm256_and_si256(_mm256_srli_epi16((j) < 4 ? qa : qb, 2 * ((j) & 3)), _mm256_set1_epi8(3))
#define Q2K_SCALE(j) chunk_scales16(sc16, j)
#define Q2K_SCALE2(j) pair_scales16(sc16, j)

#define Q3K_HEAD                                                                                      \
    const uint8_t *b = blk; /* ts_block_q3_K */                                             \
    __m256i sc16 = _mm256_cvtepi8_epi16(q3k_scales((b + offsetof(ts_block_q3_K, scales))));                                       \
    __m256i corr = _mm256_slli_epi16(sc16, 2); /* q = q_u - 4 */                                      \
    const __m128 dd_ = wsc_f16x1(b + offsetof(ts_block_q3_K, d));                                                                \
    __m256i qa = loadu((b + offsetof(ts_block_q3_K, qs))), qb = loadu((b + offsetof(ts_block_q3_K, qs)) + 32), hm = loadu((b + offsetof(ts_block_q3_K, hmask)));
#define Q3K_CHUNK(j)                                                                                  \
    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16((j) < 4 ? qa : qb, 2 * ((j) & 3)), _mm256_set1_epi8(3)), \
                    KQ_MOVE(hm, j, 2, 4))
#define Q3K_SCALE(j) chunk_scales16(sc16, j)
#define Q3K_SCALE2(j) pair_scales16(sc16, j)

#define Q4K_HEAD                                                                                      \
    const uint8_t *b = blk; /* ts_block_q4_K */                                             \
    __m256i sc8, corr;                                                                                \
    k4_scales_vec((b + offsetof(ts_block_q4_K, scales)), &sc8, &corr);                                                            \
    const __m128 dd_ = wsc_f16(b + offsetof(ts_block_q4_K, d)); /* d, dmin */                                                                               \
    __m256i qv = _mm256_setzero_si256();
#define Q4K_CHUNK(j) KQ_NIBBLES(b + offsetof(ts_block_q4_K, qs), j)
#define Q4K_SCALE(j) chunk_scales8(sc8, j)
#define Q4K_SCALE2(j) pair_scales8(sc8, j)

#define Q5K_HEAD /* ts_block_q5_K: Q4_K's head, then qh */                                          \
    Q4K_HEAD                                                                                          \
    __m256i qh = loadu(b + offsetof(ts_block_q5_K, qh));
#define Q5K_CHUNK(j) _mm256_or_si256(KQ_NIBBLES(b + offsetof(ts_block_q5_K, qs), j), KQ_MOVE(qh, j, 4, 0x10))
#define Q5K_SCALE(j) chunk_scales8(sc8, j)
#define Q5K_SCALE2(j) pair_scales8(sc8, j)

#define Q6K_HEAD                                                                                      \
    const uint8_t *b = blk; /* ts_block_q6_K */                                             \
    __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + offsetof(ts_block_q6_K, scales))));                 \
    __m256i corr = _mm256_slli_epi16(sc16, 5); /* q = q_u - 32 */                                     \
    const __m128 dd_ = wsc_f16x1(b + offsetof(ts_block_q6_K, d));                                                                \
    __m256i l0 = _mm256_setzero_si256(), l1 = l0, hv = l0;
/* chunk j of a half: low nibbles of l0 / l1 (j % 4 = 0, 1) or their high
 * nibbles (2, 3), with qh's bit pair j % 4 moved to bits 4-5 */
#define Q6K_CHUNK(j)                                                                                  \
    ((j) % 4 == 0 ? (l0 = loadu((b + offsetof(ts_block_q6_K, ql)) + 16 * (j)), l1 = loadu((b + offsetof(ts_block_q6_K, ql)) + 16 * (j) + 32), hv = loadu((b + offsetof(ts_block_q6_K, qh)) + 8 * (j))) : hv, \
     _mm256_or_si256(_mm256_and_si256((j) % 4 < 2 ? ((j) % 2 ? l1 : l0)                               \
                                                  : _mm256_srli_epi16((j) % 2 ? l1 : l0, 4),          \
                                      _mm256_set1_epi8(0x0f)),                                        \
                     KQ_MOVE(hv, 2 * ((j) % 4), 4, 0x30)))
#define Q6K_SCALE(j) chunk_scales16(sc16, j)
#define Q6K_SCALE2(j) pair_scales16(sc16, j)

/* The column loop is spelled out on named variables (not arrays indexed in a
 * loop) so that, for each constant column count NC, every accumulator stays
 * in a register: 4 columns need 4 integer + 4 float accumulators. */
#if KQ_VNNI
#ifndef TS_KQ_PAIR
#define TS_KQ_PAIR 1
#endif
/* One column: the chunks in pairs (pair_scales16), the pairs alternating
 * between si0 and si1 (which only a second column would use), so a
 * super-block's chain of dependent vpdpwssd is 2 long. Against one vpdpwssd
 * and one scale shuffle a chunk, a pair saves a vpdpwssd and a shuffle for
 * a packssdw. The integers in si0's lanes are no longer the AVX2 step's
 * (each lane sums other products), so the float sum of a row may differ
 * from the AVX2 dot's in its last bits (test_quant: within a rounding of
 * the terms; docs/KERNELS.md). With TS_KQ_PAIR 0: one chunk at a time, odd
 * chunks into si1, the AVX2 dot's bits. */
#define KC_ACC(c, j, si)                                                                                      \
    si = _mm256_dpwssd_epi32(si, _mm256_dpbusd_epi32(zero_idiom256(), q_, loadu(xb##c + 4 + 32 * (j))), s_);
#define KC_PAIR(j, SCALE2)                                                                                    \
    if ((j) % 2 == 0) pv_ = _mm256_dpbusd_epi32(zero_idiom256(), q_, loadu(xb0 + 4 + 32 * (j)));              \
    else {                                                                                                    \
        const __m256i pp_ = _mm256_packs_epi32(pv_, _mm256_dpbusd_epi32(zero_idiom256(), q_, loadu(xb0 + 4 + 32 * (j)))); \
        if ((j) / 2 % 2 == 0) si0 = _mm256_dpwssd_epi32(si0, pp_, SCALE2((j) - 1));                          \
        else si1 = _mm256_dpwssd_epi32(si1, pp_, SCALE2((j) - 1));                                            \
    }
#define KC_STEP(c, j, SCALE2)                                                                                 \
    if (NC_ == 1 && (c) == 0 && TS_KQ_PAIR) { KC_PAIR(j, SCALE2) }                                            \
    else if (NC_ == 1 && (c) == 0 && (j) % 2 == 1) { KC_ACC(0, j, si1) }                                      \
    else if (NC_ > (c)) { KC_ACC(c, j, si##c) }
#define KC_JOIN                                                                                               \
    if (NC_ == 1) si0 = _mm256_add_epi32(si0, si1);
#else
#define KC_JOIN
#define KC_STEP(c, j, SCALE2)                                                                                 \
    if (NC_ > (c))                                                                                            \
        si##c = _mm256_add_epi32(si##c, _mm256_madd_epi16(_mm256_maddubs_epi16(q_, loadu(xb##c + 4 + 32 * (j))), s_));
#endif
#define K_STEP(j, CHUNK, SCALE, SCALE2)                                                                       \
    do {                                                                                                      \
        __m256i q_ = CHUNK(j), s_ = SCALE(j);                                                                 \
        (void)s_;                                                                                             \
        KC_STEP(0, j, SCALE2) KC_STEP(1, j, SCALE2) KC_STEP(2, j, SCALE2) KC_STEP(3, j, SCALE2)               \
    } while (0)
/* block end for column c: acc += d*dx * si - dcorr*dx * sum_g corr_g*bsum_g,
 * the two products in one multiply (dd_: d, dcorr in lanes 0, 1) */
#define KC_FIN(c)                                                                                             \
    if (NC_ > (c)) {                                                                                          \
        float dx_;                                                                                            \
        memcpy(&dx_, xb##c, 4);                                                                               \
        const __m128 p_ = _mm_mul_ps(dd_, _mm_set1_ps(dx_));                                                  \
        __m256i cv_ = _mm256_madd_epi16(corr, loadu(xb##c + offsetof(ts_block_q8_K, bsums)));                 \
        acc##c = _mm256_fmadd_ps(_mm256_broadcastss_ps(p_), _mm256_cvtepi32_ps(si##c), acc##c);               \
        if (NC_ == 1) /* one column: a second chain instead of two FMAs in a row */                          \
            cc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p_)), _mm256_cvtepi32_ps(cv_), cc0);  \
        else                                                                                                  \
            acc##c = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p_)), _mm256_cvtepi32_ps(cv_), acc##c); \
    }
#define KC_OUT(c) if (NC_ > (c)) out[(c) * os] = hsum8(_mm256_sub_ps(acc##c, cc0));

/* Decode prefetch (ts_q_prefetch_ahead, quant.h), near: the hardware prefetchers alone
 * left a Zen 3 core at 6.3-8.8 GB/s (median 7.8) on the Q4_K dot against
 * 7-10 GB/s of plain reads. Prefetching every super-block's bytes 2 KB ahead
 * took it to 8.1-10.7 (median 9.7; bench_kernels, 256 MB, 1 thread, 12
 * alternating runs) and the 7B Q4_K_M tg64 with 2 threads from 2.52 to 3.01
 * tok/s (5 groups, bench/results/2026-12-02-zen3-s8/). 1 KB gained less;
 * 3-4 KB the same. Multi-column calls (prefill tiles) reuse each block for
 * every column and are not memory-bound: no prefetch. */
#define K_KERNEL_NC(NAME, P, BYTES, NC)                                                      \
    KQ_FN void NAME##_k##NC(int64_t n, const void *w, const void *x, uint64_t xs, float *out, int64_t os) {  \
        enum { NC_ = NC };                                                                                    \
        const uint8_t *pw = w, *px = x;                                                                       \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, cc0 = acc0;                 \
        const ts_q_prefetch_mode pf_ = ts_q_prefetch;                                                         \
        for (int64_t i = 0; i < n / 256; i++) {                                                               \
            const uint8_t *blk = pw + i * BYTES;                                                              \
            if (NC_ == 1) ts_q_prefetch_ahead(blk, BYTES, pf_);                                                   \
            P##_HEAD                                                                                          \
            const uint8_t *xb0 = px + i * sizeof(ts_block_q8_K), *xb1 = xb0 + xs, *xb2 = xb1 + xs,            \
                          *xb3 = xb2 + xs;                                                                    \
            __m256i si0 = _mm256_setzero_si256(), si1 = si0, si2 = si0, si3 = si0;                            \
            __m256i pv_ = si0;                                                                                \
            (void)pv_;                                                                                        \
            K_STEP(0, P##_CHUNK, P##_SCALE, P##_SCALE2); K_STEP(1, P##_CHUNK, P##_SCALE, P##_SCALE2);         \
            K_STEP(2, P##_CHUNK, P##_SCALE, P##_SCALE2); K_STEP(3, P##_CHUNK, P##_SCALE, P##_SCALE2);         \
            K_STEP(4, P##_CHUNK, P##_SCALE, P##_SCALE2); K_STEP(5, P##_CHUNK, P##_SCALE, P##_SCALE2);         \
            K_STEP(6, P##_CHUNK, P##_SCALE, P##_SCALE2); K_STEP(7, P##_CHUNK, P##_SCALE, P##_SCALE2);         \
            KC_JOIN                                                                                           \
            KC_FIN(0) KC_FIN(1) KC_FIN(2) KC_FIN(3)                                                           \
        }                                                                                                     \
        KC_OUT(0) KC_OUT(1) KC_OUT(2) KC_OUT(3)                                                               \
    }

#define K_KERNEL(NAME, P, BYTES)                                                             \
    K_KERNEL_NC(NAME, P, BYTES, 1)                                                              \
    K_KERNEL_NC(NAME, P, BYTES, 2)                                                              \
    K_KERNEL_NC(NAME, P, BYTES, 3)                                                              \
    K_KERNEL_NC(NAME, P, BYTES, 4)                                                              \
    KQ_FN float NAME##_dot(int64_t n, const void *w, const void *x) {                                        \
        float r;                                                                                              \
        NAME##_k1(n, w, x, 0, &r, 0);                                                                         \
        return r;                                                                                             \
    }                                                                                                         \
    KQ_FN void NAME##_dotc(int64_t n, const void *w, const void *x, uint64_t xs, int nc, float *out, int64_t os) { \
        switch (nc) {                                                                                         \
        case 1: NAME##_k1(n, w, x, xs, out, os); break;                                                       \
        case 2: NAME##_k2(n, w, x, xs, out, os); break;                                                       \
        case 3: NAME##_k3(n, w, x, xs, out, os); break;                                                       \
        default: NAME##_k4(n, w, x, xs, out, os); break;                                                      \
        }                                                                                                     \
    }

#endif
