/* GEMM panels: the packer shared by the AVX2 and AVX-512 panel kernels
 * (layout in quant.h, "GEMM panels"). Plain C: a panel is packed once and
 * then used by every token of the chunk, so its cost is spread over all of
 * them; the decode itself is the references' (ts_q_unpack_k), so the panel
 * can only disagree with the references through the kernels' arithmetic. */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#include <string.h>

int ts_q_gemm_nsub(uint32_t t) {
    switch (t) {
    case TS_TYPE_Q4_K: case TS_TYPE_Q5_K: return 8;
    case TS_TYPE_Q2_K: case TS_TYPE_Q3_K: case TS_TYPE_Q6_K: return 16;
    default: return 0;
    }
}

/* q_u = q + off: the unsigned operand of maddubs / vpdpbusd */
static int gp_offset(uint32_t t) { return t == TS_TYPE_Q6_K ? 32 : t == TS_TYPE_Q3_K ? 4 : 0; }

void ts_q_gemm_pack(uint32_t t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, int sc_pair,
                    uint8_t *panel) {
    const int nsub = ts_q_gemm_nsub(t), off = gp_offset(t), per = 256 / nsub; /* elements per sub-block */
    const uint32_t bb = ts_type_get(t)->block_bytes;
    const size_t sbb = TS_GP_SB_BYTES(nsub);
    ts_q_kblock k;
    for (int s = 0; s < ns; s++) {
        uint8_t *P = panel + (size_t)s * sbb;
        uint32_t *q32 = (uint32_t *)P; /* [64][2][16] */
        int32_t *sc = (int32_t *)(P + TS_GP_Q), *cr = sc + nsub * 32;
        float *d = (float *)(cr + 8 * 32), *dm = d + 32;
        for (int r = 0; r < TS_GP_ROWS; r++) {
            int lg = r / 16, l = r % 16;
            if (r >= nrows) {
                for (int g = 0; g < 64; g++) q32[(g * 2 + lg) * 16 + l] = 0;
                for (int j = 0; j < nsub; j++) sc[(j * 2 + lg) * 16 + l] = 0;
                for (int p = 0; p < 8; p++) cr[(p * 2 + lg) * 16 + l] = 0;
                d[r] = dm[r] = 0;
                continue;
            }
            ts_q_unpack_k(t, w + (uint64_t)r * ws + (uint64_t)(sb0 + s) * bb, &k);
            for (int g = 0; g < 64; g++) {
                uint8_t b[4];
                for (int i = 0; i < 4; i++) b[i] = (uint8_t)(k.q[4 * g + i] + off);
                memcpy(&q32[(g * 2 + lg) * 16 + l], b, 4);
            }
            for (int j = 0; j < nsub; j++) {
                int v = k.scale[j * per / 16];
                sc[(j * 2 + lg) * 16 + l] = sc_pair ? (int32_t)((uint32_t)(uint16_t)v * 0x10001u) : v;
            }
            for (int p = 0; p < 8; p++) {
                int c0 = off ? off * k.scale[2 * p] : k.min[2 * p];
                int c1 = off ? off * k.scale[2 * p + 1] : k.min[2 * p + 1];
                cr[(p * 2 + lg) * 16 + l] = (int32_t)((uint32_t)(uint16_t)c0 | (uint32_t)(uint16_t)c1 << 16);
            }
            d[r] = k.d;
            dm[r] = off ? k.d : k.dmin;
        }
    }
}

/* two units of 32 rows, TS_GP_KSEG super-blocks each, at the widest layout */
size_t ts_gemm_scratch_bytes(void) { return 2 * (size_t)TS_GP_KSEG * TS_GP_SB_BYTES(16); }
