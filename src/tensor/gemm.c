/* GEMM panels: the packer shared by the AVX2 and AVX-512 panel kernels
 * (layout in quant.h, "GEMM panels"). Plain C: a panel is packed once and
 * then used by every token of the chunk, so its cost is spread over all of
 * them; the decode itself is the references' (ts_q_unpack_k), so the panel
 * can only disagree with the references through the kernels' arithmetic. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#include <string.h>

int ts_q_gemm_nsub(ts_type t) {
    switch (t) {
    case TS_TYPE_Q4_K: case TS_TYPE_Q5_K: return 8;
    case TS_TYPE_Q2_K: case TS_TYPE_Q3_K: case TS_TYPE_Q6_K: return 16;
    default: return 0;
    }
}

int ts_q_gemm_offset(ts_type t) { return t == TS_TYPE_Q6_K ? 32 : t == TS_TYPE_Q3_K ? 4 : 0; }

int ts_q_gemm_amx_min_cols(ts_type t) {
    return ts_q_gemm_offset(t) ? TS_GP_AMX_MIN_COLS_OFF : t == TS_TYPE_Q4_K ? TS_GP_AMX_MIN_COLS_Q4K : TS_GP_AMX_MIN_COLS;
}

/* Direct decoders for the two types of Q4_K_M files (the generic path goes
 * through the references' ts_q_kblock): q_u[256] in element order, the
 * sub-block scales (per 32 for Q4_K, per 16 for Q6_K), the 16 corrections,
 * d and dm. Same values as the generic path (the tests compare both against
 * the references). */
void ts_q_gemm_q4_K_head(const uint8_t *b, int *sc, int *cr, float *d, float *dm) {
    uint16_t h[2];
    memcpy(h, b, 4);
    *d = ts_f16_to_f32(h[0]);
    *dm = ts_f16_to_f32(h[1]);
    const uint8_t *s = b + 4;
    for (int j = 0; j < 8; j++) {
        int m;
        if (j < 4) sc[j] = s[j] & 63, m = s[j + 4] & 63;
        else sc[j] = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4), m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        cr[2 * j] = cr[2 * j + 1] = m;
    }
}
static void gp_q4_K(const uint8_t *b, uint8_t *q, int *sc, int *cr, float *d, float *dm) {
    ts_q_gemm_q4_K_head(b, sc, cr, d, dm);
    const uint8_t *qs = b + 16;
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) q[64 * g + l] = qs[32 * g + l] & 0xf, q[64 * g + 32 + l] = qs[32 * g + l] >> 4;
}
void ts_q_gemm_q6_K_head(const uint8_t *b, int *sc, int *cr, float *d, float *dm) {
    const int8_t *scales = (const int8_t *)(b + 192);
    uint16_t h;
    memcpy(&h, b + 208, 2);
    *d = *dm = ts_f16_to_f32(h);
    for (int j = 0; j < 16; j++) sc[j] = scales[j], cr[j] = 32 * scales[j];
}
static void gp_q6_K(const uint8_t *b, uint8_t *q, int *sc, int *cr, float *d, float *dm) {
    const uint8_t *ql = b, *qh = b + 128;
    ts_q_gemm_q6_K_head(b, sc, cr, d, dm);
    for (int hf = 0; hf < 2; hf++)
        for (int l = 0; l < 32; l++) {
            uint8_t a = ql[64 * hf + l], c = ql[64 * hf + 32 + l], hb = qh[32 * hf + l];
            uint8_t *o = q + 128 * hf + l;
            o[0] = (uint8_t)((a & 0xf) | ((hb & 3) << 4));
            o[32] = (uint8_t)((c & 0xf) | (((hb >> 2) & 3) << 4));
            o[64] = (uint8_t)((a >> 4) | (((hb >> 4) & 3) << 4));
            o[96] = (uint8_t)((c >> 4) | (((hb >> 6) & 3) << 4));
        }
}

/* any K-quant through the references' decode */
static void gp_generic(ts_type t, const uint8_t *b, uint8_t *q, int *sc, int *cr, float *d, float *dm) {
    const int nsub = ts_q_gemm_nsub(t), off = ts_q_gemm_offset(t), per = 256 / nsub; /* elements per sub-block */
    ts_q_kblock k;
    ts_q_unpack_k(t, b, &k);
    for (int i = 0; i < 256; i++) q[i] = (uint8_t)(k.q[i] + off);
    for (int j = 0; j < nsub; j++) sc[j] = k.scale[j * per / 16];
    for (int g = 0; g < 16; g++) cr[g] = off ? off * k.scale[g] : k.min[g];
    *d = k.d;
    *dm = off ? k.d : k.dmin;
}

/* Correction pair p of a row (quant.h, "GEMM panels"): the 16-groups 2p and
 * 2p+1, or, at nsub 8 (a min per 32-element sub-block: cr[2j] = cr[2j+1] =
 * min_j), the sub-blocks 2p and 2p+1 for p < 4 and 0 after: one madd or
 * vpdpwssd then covers 64 elements, not 32. Until session 38 the VNNI
 * kernels took the 16-group pairs (min_p, min_p) here, 8 vpdpwssd a
 * super-block where 4 now do. sc_pair no longer changes it. */
static int32_t gp_cr_pair(const int *cr, int p, int nsub) {
    int a = cr[2 * p], b = cr[2 * p + 1];
    if (nsub == 8) a = p < 4 ? cr[4 * p] : 0, b = p < 4 ? cr[4 * p + 2] : 0;
    return (int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16);
}

void ts_q_gemm_pack(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, int sc_pair,
                    uint8_t *panel) {
    const int nsub = ts_q_gemm_nsub(t);
    const uint32_t bb = ts_type_get(t)->block_bytes;
    const size_t sbb = TS_GP_SB_BYTES(nsub);
    uint8_t q[256];
    int sc[16], cr[16];
    float dd, ddm;
    /* row by row, each row's super-blocks in order: one sequential read per
     * row of the mapped weights, the next row prefetched meanwhile */
    for (int r = 0; r < TS_GP_ROWS; r++) {
        int lg = r / 16, l = r % 16;
        const uint8_t *row = w + (uint64_t)r * ws + (uint64_t)sb0 * bb;
        if (r + 1 < nrows)
            for (uint64_t o = 0; o < (uint64_t)ns * bb; o += 64) __builtin_prefetch(row + ws + o);
        for (int s = 0; s < ns; s++) {
            uint8_t *P = panel + (size_t)s * sbb;
            uint32_t *q32 = (uint32_t *)P; /* [64][2][16] */
            int32_t *psc = (int32_t *)(P + TS_GP_Q), *pcr = psc + nsub * 32;
            float *d = (float *)(pcr + 8 * 32), *dm = d + 32;
            if (r >= nrows) {
                for (int g = 0; g < 64; g++) q32[(g * 2 + lg) * 16 + l] = 0;
                for (int j = 0; j < nsub; j++) psc[(j * 2 + lg) * 16 + l] = 0;
                for (int p = 0; p < 8; p++) pcr[(p * 2 + lg) * 16 + l] = 0;
                d[r] = dm[r] = 0;
                continue;
            }
            const uint8_t *b = row + (uint64_t)s * bb;
            if (t == TS_TYPE_Q4_K) gp_q4_K(b, q, sc, cr, &dd, &ddm);
            else if (t == TS_TYPE_Q6_K) gp_q6_K(b, q, sc, cr, &dd, &ddm);
            else gp_generic(t, b, q, sc, cr, &dd, &ddm);
            for (int g = 0; g < 64; g++) memcpy(&q32[(g * 2 + lg) * 16 + l], q + 4 * g, 4);
            for (int j = 0; j < nsub; j++)
                psc[(j * 2 + lg) * 16 + l] = sc_pair ? (int32_t)((uint32_t)(uint16_t)sc[j] * 0x10001u) : sc[j];
            for (int p = 0; p < 8; p++) pcr[(p * 2 + lg) * 16 + l] = gp_cr_pair(cr, p, nsub);
            d[r] = dd;
            dm[r] = ddm;
        }
    }
}

void ts_q_gemm_pack_heads(ts_type t, const uint8_t *const *rb, int lg, int s, int ns, int sc_pair, uint8_t *P) {
    const int q6 = t == TS_TYPE_Q6_K, nsub = ts_q_gemm_nsub(t);
    const uint32_t bb = ts_type_get(t)->block_bytes;
    int32_t *psc = (int32_t *)(P + TS_GP_Q), *pcr = psc + nsub * 32;
    float *d = (float *)(pcr + 8 * 32), *dm = d + 32;
    for (int l = 0; l < 16; l++) {
        int sc[16], cr[16];
        float dd = 0.0f, ddm = 0.0f;
        if (rb[l]) {
            const uint8_t *b = rb[l] + (size_t)s * bb;
            ts_q_gemm_prefetch_ahead(b, s, ns, bb);
            if (q6) ts_q_gemm_q6_K_head(b, sc, cr, &dd, &ddm);
            else ts_q_gemm_q4_K_head(b, sc, cr, &dd, &ddm); /* Q5_K: the same d, dmin and scales */
        } else {
            memset(sc, 0, sizeof sc), memset(cr, 0, sizeof cr);
        }
        for (int j = 0; j < nsub; j++) psc[(j * 2 + lg) * 16 + l] = sc_pair ? (int32_t)((uint32_t)(uint16_t)sc[j] * 0x10001u) : sc[j];
        for (int p = 0; p < 8; p++) pcr[(p * 2 + lg) * 16 + l] = gp_cr_pair(cr, p, nsub);
        d[lg * 16 + l] = dd;
        dm[lg * 16 + l] = ddm;
    }
}

/* two units of 32 rows, TS_GP_KSEG super-blocks each, at the widest layout;
 * where the AMX kernels may run, their lo/hi tiles of the same units after
 * them (TS_GP_AMX_SB_BYTES per unit and super-block); room for the AVX2
 * kernels' activation sums after the units (TS_GP_BP_BYTES; the AMX tiles
 * and those sums are never used by one call together) */
size_t ts_gemm_scratch_bytes(void) {
    size_t panels = 2 * (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(16);
    size_t amx = ts_kernels_isa_max() >= TS_ISA_AMX ? 2 * (size_t)TS_GP_KSEG * TS_GP_AMX_SB_BYTES + TS_GP_AMX_A_BYTES : 0;
    return panels + amx + TS_GP_BP_BYTES; /* the activation sums after the AMX area (gemm_avx512.c's bp_all) */
}
