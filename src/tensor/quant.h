/* Quantized row kernels. Every type has a scalar reference (the *_ref
 * functions, kept forever: tests compare every fast path against them) and a
 * dispatched fast path chosen once by runtime CPU detection (AVX-512, AVX2,
 * else the scalar code).
 *
 * Dot products pair a weight row with an activation row converted to the
 * weight type's "partner" format: Q8_0 for the 32-element quants, Q8_K for the
 * K-quants, F32 for F32/F16/BF16 (so float models keep full precision).
 *
 * Block layouts are bit-exact ggml (see docs/KERNELS.md). Partner rows must
 * come from ts_quantize_row*: their int8 quants are in [-127, 127] (never
 * -128; the SIMD paths rely on it to avoid int16 saturation), and Q8_K bsums
 * are the exact sums of each 16 quants. Weight quants may take any bit
 * pattern. Rows need no alignment. */
#ifndef TS_QUANT_H
#define TS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/types.h"

/* ---- block structs (packed byte layouts, ggml-compatible) ---- */
#define TS_QK 32   /* elements per block of the 32-element quants */
#define TS_QK_K 256 /* elements per K-quant super-block */

typedef struct { uint16_t d; int8_t qs[TS_QK]; } ts_block_q8_0;                      /* 34 B */
typedef struct { float d; int8_t qs[TS_QK_K]; int16_t bsums[TS_QK_K / 16]; } ts_block_q8_K; /* 292 B */
typedef struct { uint16_t d; uint8_t qs[TS_QK / 2]; } ts_block_q4_0;                 /* 18 B */
typedef struct { uint16_t d, m; uint8_t qs[TS_QK / 2]; } ts_block_q4_1;              /* 20 B */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[TS_QK / 2]; } ts_block_q5_0;  /* 22 B */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[TS_QK / 2]; } ts_block_q5_1; /* 24 B */
typedef struct { uint16_t d; uint8_t qs[TS_QK / 2]; } ts_block_iq4_nl;               /* 18 B */
typedef struct { uint8_t e; uint8_t qs[TS_QK / 2]; } ts_block_mxfp4;                 /* 17 B */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } ts_block_q2_K; /* 84 B */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } ts_block_q3_K; /* 110 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } ts_block_q4_K; /* 144 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } ts_block_q5_K; /* 176 B */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } ts_block_q6_K; /* 210 B */

/* Non-linear 4-bit codebooks (IQ4_NL; MXFP4 = doubled E2M1 values). */
extern const int8_t ts_kvalues_iq4nl[16];
extern const int8_t ts_kvalues_mxfp4[16];

/* fp16/bf16 <-> fp32, exact (round-to-nearest-even on the way down; NaN stays
 * NaN with its sign, quieted). */
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_f16(float f);
float ts_bf16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float f);
/* E8M0 scale of MXFP4, halved (the codebook is doubled): 2^(e-128). */
float ts_e8m0_half_to_f32(uint8_t e);

/* True for the weight types the kernels can dequantize and dot: F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, MXFP4. */
int ts_type_supported(ts_type type);
/* Partner activation format for dot products with this weight type
 * (TS_TYPE_COUNT when unsupported). */
ts_type ts_type_dot_partner(ts_type wtype);

/* ---- scalar references ---- */
/* n must be a multiple of the type's block size; types as ts_type_supported
 * plus Q8_K. */
void ts_dequant_row_ref(ts_type type, const void *src, float *dst, int64_t n);
/* Round-to-nearest quantization of a row into any supported type (activation
 * formats Q8_0/Q8_K/F32/F16/BF16 and, for tests and tools, the weight types;
 * the weight quantizers are simple, not ggml's error-minimizing search). */
void ts_quantize_row_ref(ts_type type, const float *src, void *dst, int64_t n);
/* dot(w, x) with w of wtype and x in ts_type_dot_partner(wtype); accumulates
 * across blocks in double. */
float ts_vec_dot_ref(ts_type wtype, int64_t n, const void *w, const void *x);

/* ---- dispatched fast paths (same contracts) ---- */
void ts_dequant_row(ts_type type, const void *src, float *dst, int64_t n);
void ts_quantize_row(ts_type type, const float *src, void *dst, int64_t n);
float ts_vec_dot(ts_type wtype, int64_t n, const void *w, const void *x);
/* Several weight rows against one activation row: out[r] = dot(w + r*row_stride, x).
 * row_stride in bytes. */
void ts_vec_dot_rows(ts_type wtype, int64_t n, const void *w, uint64_t row_stride, int64_t nrows, const void *x, float *out);
/* Matrix-matrix tile for prefill: nrows weight rows (w + r*w_stride bytes)
 * times ncols activation rows in the partner format (x + c*x_stride bytes):
 *   out[c*out_stride + r] = dot(w row r, x row c)      (out_stride in floats)
 * i.e. each activation row gets its own output row, as a (tokens, features)
 * matrix. Weight blocks are loaded once per group of activation columns. */
void ts_gemm_tile(ts_type wtype, int64_t n, const void *w, uint64_t w_stride, int64_t nrows,
                  const void *x, uint64_t x_stride, int64_t ncols, float *out, int64_t out_stride);

/* Prefill GEMM: the same result contract as ts_gemm_tile, for any nrows and
 * ncols, built for chunks of many tokens. Weight rows are unpacked once per
 * panel (32 rows x up to 2048 elements) into `scratch`, as int8 quants in the
 * inner kernel's layout plus per-sub-block integer scales, and that panel is
 * reused by every activation column before the next is unpacked; the weights
 * themselves are only read (no repacked copy of a matrix ever exists).
 * scratch: ts_gemm_scratch_bytes() bytes, 64-byte aligned, one per thread.
 * Types without a panel kernel at the current ISA go through ts_gemm_tile. */
size_t ts_gemm_scratch_bytes(void);
void ts_gemm(ts_type wtype, int64_t n, const void *w, uint64_t w_stride, int64_t nrows, const void *x,
             uint64_t x_stride, int64_t ncols, float *out, int64_t out_stride, void *scratch);

/* ISA levels, ordered. */
enum { TS_ISA_SCALAR = 0, TS_ISA_AVX2 = 1, TS_ISA_AVX512 = 2, TS_ISA_AMX = 3 };
#define TS_ISA_COUNT 4

/* Name of the ISA the dispatcher picked ("amx", "avx512", "avx2", "scalar";
 * amx is avx512 plus the AMX-INT8 prefill GEMM, where the CPU has AMX-INT8,
 * AVX512_VNNI and the kernel grants the tile state);
 * TS_FORCE_ISA=scalar|avx2|avx512|amx in the environment overrides detection
 * (downwards only; set and empty reads as unset; another value makes the
 * CPU backend refuse to start:
 * ts_kernels_force_error), for tests and benchmarks. */
const char *ts_kernels_isa(void);
/* Highest level this CPU (and build) supports. */
int ts_kernels_isa_max(void);
/* NULL, or why TS_FORCE_ISA (not a level's name, or above this CPU's best)
 * or TS_PREFETCH (neither near nor far) was not applied: the CPU backend
 * refuses to start with it. */
const char *ts_kernels_force_error(void);
/* The decode prefetch the K-quant dots use ("near" or "far": see
 * ts_q_prefetch_ahead below, under TS_QUANT_INTERNAL): chosen by CPUID; TS_PREFETCH=near|far in the environment
 * overrides it, read once with TS_FORCE_ISA (another value makes the CPU
 * backend refuse to start, through ts_kernels_force_error). */
const char *ts_kernels_prefetch(void);
/* For tests and benchmarks, not thread-safe: switch the dispatcher to level
 * isa. Returns 0, or -1 (nothing changed) when the CPU lacks it. */
int ts_kernels_set_isa(int isa);
const char *ts_isa_name(int isa);

/* ---- internal: shared by quant.c and the per-ISA kernel files ---- */
#ifdef TS_QUANT_INTERNAL
/* dot of one weight row (n elements) with one partner row. */
typedef float (*ts_q_dot_fn)(int64_t n, const void *w, const void *x);
/* one weight row against ncols (1..TS_Q_MAXCOLS) partner rows x + c*x_stride:
 * out[c*out_stride] = dot(w, x_c). */
#define TS_Q_MAXCOLS 4
typedef void (*ts_q_dotc_fn)(int64_t n, const void *w, const void *x, uint64_t x_stride, int ncols, float *out, int64_t out_stride);
typedef void (*ts_q_conv_fn)(const void *src, float *dst, int64_t n);
typedef void (*ts_q_quant_fn)(const float *src, void *dst, int64_t n);

/* Decode (one column) streams each thread's rows from memory once, and the
 * hardware prefetchers alone leave a core short of its read bandwidth: the
 * K-quant dot kernels (AVX2 and AVX-512) prefetch each super-block's bytes
 * ahead (rows are contiguous, so it runs on into the next row; past a
 * thread's share it is wasted, never a fault), in one of two ways chosen
 * once by CPUID (quant.c) and read-only after:
 *   near: into L1 (prefetcht0), TS_K_PREFETCH bytes ahead; measured against
 *         no prefetch on Zen 3 and kept there, where far is unmeasured;
 *   far:  into L2 (prefetcht1), TS_K_PREFETCH_FAR bytes ahead, everywhere
 *         else. On Zen 4, with near, the Q4_K dot of a long row (ffn_down's
 *         18944: 21 KB of Q8_K activations, which the weight stream pushes
 *         out of L1) read 16.2-16.6 GB/s from memory on one thread, against
 *         23.1-23.3 for the same stream with 4 KB of activations; far read
 *         23.8-24.2. The 7B decode against near, medians of alternating
 *         rounds: Zen 4 1.2x on one thread; the H200 host's Xeon 1.10x on 1
 *         thread, 1.11x on 4, 1.18x on 16 (docs/KERNELS.md).
 * The instructions are asm: GCC 12 drops __builtin_prefetch from both
 * arms once the loop is unswitched on the mode (seen at -O1 and -O2). */
#ifndef TS_K_PREFETCH
#define TS_K_PREFETCH 2048
#endif
#ifndef TS_K_PREFETCH_FAR
#define TS_K_PREFETCH_FAR 8192
#endif
typedef enum { TS_Q_PREFETCH_NEAR = 0, TS_Q_PREFETCH_FAR = 1 } ts_q_prefetch_mode;
/* set once by the kernel table's initialisation, before any kernel runs */
extern ts_q_prefetch_mode ts_q_prefetch;
#if defined(__x86_64__)
static inline void ts_q_prefetch_ahead(const void *blk, int bytes, ts_q_prefetch_mode mode) {
    const char *p = blk;
    if (mode == TS_Q_PREFETCH_FAR) {
        for (int o = 0; o < bytes; o += 64) __asm__ volatile("prefetcht1 %0" ::"m"(p[TS_K_PREFETCH_FAR + o]));
        return;
    }
    for (int o = 0; TS_K_PREFETCH > 0 && o < bytes; o += 64) __asm__ volatile("prefetcht0 %0" ::"m"(p[TS_K_PREFETCH + o]));
}
#endif

/* whole-call kernels, optional: they may precompute per-call state (e.g. the
 * activation scales) once for all rows. Same contracts as ts_vec_dot_rows /
 * ts_gemm_tile. */
typedef void (*ts_q_rows_fn)(int64_t n, const void *w, uint64_t row_stride, int64_t nrows, const void *x, float *out);
typedef void (*ts_q_tile_fn)(int64_t n, const void *w, uint64_t w_stride, int64_t nrows, const void *x, uint64_t x_stride,
                             int64_t ncols, float *out, int64_t out_stride);

typedef void (*ts_q_gemm_fn)(int64_t n, const void *w, uint64_t w_stride, int64_t nrows, const void *x,
                             uint64_t x_stride, int64_t ncols, float *out, int64_t out_stride, void *scratch);

typedef struct ts_q_kernels {
    ts_q_dot_fn dot[TS_TYPE_COUNT];     /* NULL: fall back to the next lower ISA */
    ts_q_dotc_fn dotc[TS_TYPE_COUNT];   /* NULL: loop over dot */
    ts_q_conv_fn dequant[TS_TYPE_COUNT];
    ts_q_quant_fn quantize[TS_TYPE_COUNT];
    ts_q_rows_fn rows[TS_TYPE_COUNT];   /* NULL: ts_vec_dot_rows loops over dot */
    ts_q_tile_fn tile[TS_TYPE_COUNT];   /* NULL: ts_gemm_tile groups columns over dotc */
    ts_q_gemm_fn gemm[TS_TYPE_COUNT];   /* NULL: ts_gemm goes through ts_gemm_tile */
} ts_q_kernels;

/* One K-quant super-block as integers (the references' decode, shared with
 * the GEMM panel packer): value[i] = d*scale[i/16]*q[i] - dmin*min[i/16]. */
typedef struct {
    int8_t q[TS_QK_K];
    int scale[16];
    int min[16];
    float d, dmin;
} ts_q_kblock;
/* 0, or -1 when t is not a K-quant. */
int ts_q_unpack_k(ts_type t, const void *blk, ts_q_kblock *k);

/* ---- GEMM panels (gemm.c packs, gemm_avx2.c / gemm_avx512.c compute) ----
 * A panel unit is 32 weight rows (two lane groups of 16) over ns super-blocks.
 * Per super-block, at s * TS_GP_SB_BYTES(nsub):
 *   q  [64 k-groups][2 lg][16 rows][4] u8   unsigned quants q_u (<= 63), 4
 *                                          consecutive elements per row
 *   sc [nsub][2 lg][16 rows] i32           scale of each sub-block (256/nsub
 *                                          elements); as an i16 pair (s, s)
 *                                          when packed for maddubs/madd
 *   cr [8][2 lg][16 rows] 2 x i16          correction of the 16-groups 2p, 2p+1;
 *                                          at nsub 8, that of the sub-blocks
 *                                          2p, 2p+1 (p < 4; 0 after)
 *   d  [2 lg][16 rows] f32, dm [2 lg][16 rows] f32
 * and the super-block's value for an activation row x (Q8_K, scale dx) is
 *   dx * (d * sum_j sc_j * sum_{i in j} q_u[i] x[i]  -  dm * sum_g cr_g * bsum_g(x))
 * (Q4_K/Q5_K/Q2_K: cr = min, dm = dmin; Q6_K/Q3_K: q_u = q + off, cr = off*scale,
 * dm = d; in the paired cr, the same sum as sum_j min_j * bsum32_j(x)). Rows
 * past nrows are zero. */
#define TS_GP_ROWS 32
#define TS_GP_KSEG 8 /* super-blocks per packed segment */
#define TS_GP_Q 8192
#define TS_GP_SB_BYTES(nsub) (TS_GP_Q + (nsub) * 128 + 8 * 128 + 2 * 128)
/* The AMX kernels' copy of a unit's quants, per super-block (gemm_avx512.c):
 * [2 lg][4 k-steps of 64][lo, hi, min][16 k-groups][16 rows][4] i8 */
#define TS_GP_AMX_SB_BYTES (2 * 4 * 3 * 1024)
/* Fewer tokens than this go to the AVX-512 panel kernels at the AMX level:
 * the split into tiles costs a pass over the panel per call, which a few
 * tokens do not repay. Session 33 (A rows read in place) put it at 192 (a
 * 30B-A3B expert gate at 32 tokens 0.73 ms on the tiles, 0.39 without).
 * Session 37, with the A gather (bench/results/2026-12-06-xeon-s37,
 * amx_threshold.c, one thread, interleaved): the tiles against the VNNI
 * kernel at 16 / 32 / 48 / 64 tokens, Q4_K 384 x 2048 1.32 / 1.05 / 0.96 /
 * 0.89, Q4_K 512 x 3584 1.30 / 1.06 / 0.89 / 0.88, Q6_K 256 x 8960 1.07 /
 * 0.83 / 0.68 / 0.61: 48 for the types with a min (a third tile), 32 for
 * the offset types. Session 38 made the VNNI kernel faster for Q4_K (its
 * scale step by vpdpwssd, the correction per 32) and Q5_K (the correction);
 * the same harness with a Q5_K shape (bench/results/2026-12-06-xeon-s38,
 * run.sh thr; Q4_K from the first of two runs, Q5_K from the second, the
 * first's VNNI run having met a slow phase) at 32 / 48 / 64 / 96 / 128 tokens: Q4_K
 * 384 x 2048 1.32 / 1.20 / 1.10 / 0.99 / 0.91, Q4_K 512 x 3584 1.30 / 1.17 /
 * 1.09 / 0.97 / 0.91, Q5_K 512 x 3584 1.18 / 1.04 / 0.94 / 0.87 / 0.80, Q6_K
 * 256 x 8960 0.92 / 0.76 / 0.67 / 0.60 / 0.54: Q4_K from 96, Q5_K from 64,
 * the offset types still from 32. Q2_K (not measured; its VNNI kernel gained
 * the scale step) goes with Q5_K. */
#define TS_GP_AMX_MIN_COLS 64     /* Q5_K, Q2_K */
#define TS_GP_AMX_MIN_COLS_Q4K 96 /* Q4_K */
#define TS_GP_AMX_MIN_COLS_OFF 32 /* Q6_K, Q3_K */
/* Tokens per block of the AMX kernels' gathered activations (gemm_avx512.c,
 * amx_gather): TS_GP_KSEG super-blocks x 256 bytes each, after the tiles in
 * the scratch; a call over more tokens packs its weights once a block. */
#define TS_GP_AMX_TOK 512
#define TS_GP_AMX_A_BYTES ((size_t)TS_GP_KSEG * TS_GP_AMX_TOK * 256)
/* The panel kernels' activation sums per 32 elements (i16 pairs, 16 bytes a
 * row and super-block: gemm_pack.h's gp_bs32_pairs), for every token of a
 * call at once where they fit: per row block they were recomputed, ~2% of a
 * MoE prefill. In the scratch after the units (AVX2) or after the AMX area
 * (the VNNI kernels; ts_gemm_scratch_bytes). */
#define TS_GP_BP_BYTES (64 * 1024)
/* sub-blocks per super-block the panel uses for type t (8: scales per 32
 * elements; 16: per 16), 0 when t has no panel form */
int ts_q_gemm_nsub(ts_type t);
/* off of q_u = q + off, the unsigned operand of maddubs / vpdpbusd (Q6_K 32,
 * Q3_K 4; 0 for the types with a min, whose correction is cr = min) */
int ts_q_gemm_offset(ts_type t);
/* tokens from which the AMX level runs type t on the tiles
 * (TS_GP_AMX_MIN_COLS_Q4K for Q4_K, TS_GP_AMX_MIN_COLS_OFF for the offset
 * types, TS_GP_AMX_MIN_COLS for the other types with a min) */
int ts_q_gemm_amx_min_cols(ts_type t);
/* Packs rows [0, nrows) (nrows <= 32) of w (row stride ws bytes), super-blocks
 * [sb0, sb0+ns), into panel. sc_pair: scales as (s, s) i16 pairs. */
void ts_q_gemm_pack(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, int sc_pair,
                    uint8_t *panel);
/* The vector packers' heads (Q4_K, Q5_K, Q6_K): rows rb[0..15] of lane
 * group lg (NULL past nrows: zeros), super-block s of ns, their scales (as
 * (s, s) i16 pairs when sc_pair), corrections, d and dm into the panel's
 * super-block P through the scalar decoders; the block two ahead prefetched. */
void ts_q_gemm_pack_heads(ts_type t, const uint8_t *const *rb, int lg, int s, int ns, int sc_pair, uint8_t *P);
/* The block two super-blocks after b (bb bytes a block) prefetched, when the
 * packer will still read it (s + 2 < ns): the heads decoders' one look-ahead. */
static inline void ts_q_gemm_prefetch_ahead(const uint8_t *b, int s, int ns, uint32_t bb) {
    if (s + 2 < ns)
        for (uint32_t o = 0; o < bb; o += 64) __builtin_prefetch(b + 2 * (size_t)bb + o);
}
/* The AVX2 kernels' packer (sc_pair 1): the same bytes as ts_q_gemm_pack,
 * Q4_K, Q5_K and Q6_K vectorized (gemm_avx2.c); call only where AVX2 runs. */
#if defined(__x86_64__)
void ts_q_gemm_pack_avx2(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, uint8_t *panel);
/* The VNNI kernels' packer (sc_pair 0), the same bytes as ts_q_gemm_pack
 * (gemm_avx512.c); call only where AVX-512 F/BW/VL/DQ and VNNI run. */
void ts_q_gemm_pack_avx512(ts_type t, const uint8_t *w, uint64_t ws, int nrows, int64_t sb0, int ns, uint8_t *panel);
#endif
/* A Q4_K block's panel fields but its quants: the 8 sub-block scales, the 16
 * corrections (each sub-block's min, twice), d and dmin (the packers' shared
 * decode; gemm_avx512.c's vector packer takes the quants itself). */
void ts_q_gemm_q4_K_head(const uint8_t *b, int *sc, int *cr, float *d, float *dm);
/* The same for Q6_K: 16 scales, the corrections 32 * scale, d twice. */
void ts_q_gemm_q6_K_head(const uint8_t *b, int *sc, int *cr, float *d, float *dm);

void ts_q_fill_ref(ts_q_kernels *k);
#if defined(__x86_64__)
void ts_q_fill_avx2(ts_q_kernels *k);
void ts_q_fill_avx512(ts_q_kernels *k, int vnni);
void ts_q_fill_gemm_avx2(ts_q_kernels *k);
/* vnni: the CPU has AVX512_VNNI (else the AVX2 panel kernels stay) */
void ts_q_fill_gemm_avx512(ts_q_kernels *k, int vnni);
/* the AMX-INT8 panel kernels (gemm_avx512.c): only once the tile state is
 * granted to this process (quant.c asks the kernel) */
void ts_q_fill_gemm_amx(ts_q_kernels *k);
#endif
#endif

#endif
