/* CUDA kernel families of the dense forward pass, one launcher per family.
 *
 * Plain C: a stream is passed as `void *` (a cudaStream_t; NULL = the legacy
 * default stream) and the cuBLAS handle likewise, so C code needs no CUDA
 * headers. Every pointer is device memory unless its comment says host; a
 * kernel's outputs may also be mapped host memory by its device address (the
 * engine's error word and greedy id are).
 *
 * Every launcher checks its arguments (TS_ERR_ARG, TS_ERR_UNSUPPORTED), then
 * the launch itself (cudaGetLastError -> TS_ERR_DEVICE naming file:line). None
 * synchronizes, allocates, or reads device memory on the host, so a decode
 * step made of these calls can be captured in a CUDA graph once and replayed:
 * whatever changes per token (positions, token ids, the sampler's RNG state)
 * is read from device memory, and no grid depends on the KV length.
 *
 * Values read from device memory cannot be checked on the host: a kernel that
 * meets one out of range (a position outside the cache, a token id outside
 * the vocabulary) skips that item and ORs a TS_CUDA_ERR_* bit into `*err`
 * when err is not NULL; the caller checks it after a synchronization.
 *
 * Layouts are the CPU backend's (src/compute/backend.h): activations (rows,
 * cols) row-major, rows = tokens; weights as ts_mat, one contiguous quantized
 * row of n_in elements per output feature, ggml block layouts bit for bit
 * (src/tensor/quant.h); the KV cache of a layer (n_head_kv, n_ctx, head_dim)
 * in F16. docs/KERNELS.md (CUDA section) describes each kernel. */
#ifndef TS_CUDA_KERNELS_H
#define TS_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_CUDA_MAX_MATS 4       /* weights sharing one input in one matvec call */
#define TS_CUDA_MAX_DECODE_TOK 8 /* tokens of one matvec call (a small decode batch) */

/* Bits of the error word kernels OR into (see above). */
#define TS_CUDA_ERR_POS 1u   /* a position < 0 or >= n_ctx */
#define TS_CUDA_ERR_TOKEN 2u /* a token id < 0 or >= the embedding's rows */
#define TS_CUDA_ERR_EMPTY 4u /* sampling: every logit -inf or NaN (id -1 written) */

/* A weight matrix in device memory: GGUF ne = [n_in, n_out]. */
typedef struct ts_cuda_mat {
    const void *data;   /* (n_out, row_bytes) in `type`; 16-byte aligned */
    uint32_t type;      /* ts_type of the rows */
    int64_t n_in;       /* elements per row; a multiple of 32 (256 for K-quants) */
    int64_t n_out;      /* rows */
    uint64_t row_bytes; /* bytes per row, = ts_type_row_bytes(type, n_in) */
    const float *bias;  /* (n_out) added to the product, or NULL */
} ts_cuda_mat;

/* Number of CUDA devices (0 without a driver or device: *n = 0, TS_OK). */
ts_status ts_cuda_device_count(int *n);

/* Whether this host thread's kernel launches let a kernel start while its
 * predecessor in the stream drains (programmatic dependent launch, sm_90+;
 * cuda_common.cuh says how the kernels keep stream order). Per thread, like
 * the current device; on by default. */
void ts_cuda_set_launch_pdl(bool on);

/* ---- 1. decode matrix-vector products ---------------------------------- */

/* True when ts_cuda_matvec / ts_cuda_gemm / ts_cuda_dequant take this type:
 * F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, MXFP4. */
bool ts_cuda_type_supported(uint32_t type);

/* inv (rows) = 1 / sqrt(mean(x^2) + eps) per row of x (rows, n), the sum of
 * squares in double as the CPU rmsnorm does, so the value is the CPU's. */
ts_status ts_cuda_rms_inv(void *stream, const float *x, int64_t n, int64_t rows, float eps, float *inv);

/* F32 activations (the CPU --precise path): for each i < n_w,
 *   y[i] (n_tok, w[i].n_out) = x' . w[i]^T (+ w[i].bias)      (accumulate: y[i] += that)
 * with x' = x (n_tok, n_in) or, when inv_rms and norm_w are given, the RMSNorm
 * folded into the load: x'[t][k] = (x[t][k] * inv_rms[t]) * norm_w[k]
 * (inv_rms from ts_cuda_rms_inv). Weights are dequantized in registers as
 * ts_dequant_row does, products accumulated in float. w and y are host
 * arrays of n_w (1..TS_CUDA_MAX_MATS) entries; all w[i] share n_in; n_tok is
 * 1..TS_CUDA_MAX_DECODE_TOK; no y[i] may overlap x. Weights of different types
 * are allowed (one launch per distinct type). */
ts_status ts_cuda_matvec(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, const float *x, int n_tok,
                         const float *inv_rms, const float *norm_w, bool accumulate);
/* ts_cuda_matvec with the RMSNorm folded in and no 1/rms launch before it:
 * every block computes inv = 1 / sqrt(mean(x^2) + eps) per token itself (as
 * ts_cuda_rms_inv: the CPU's value) and, when xn is given, the normalized
 * rows xn (n_tok, n_in) = (x * inv) * norm_w are stored too (the CPU
 * rmsnorm's values), for ops that read them after. xn must not overlap x.
 * y = the product (no accumulate). */
ts_status ts_cuda_norm_matvec(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, const float *x, int n_tok,
                              const float *norm_w, float eps, float *xn);

/* int8 activations, the CPU's default path: x is quantized once to the
 * weights' partner format (Q8_0 for the 32-element quants, Q8_K for the
 * K-quants, bit for bit what ts_quantize_row produces) and every weight block
 * is dotted in integers (dp4a), scales applied in float per 32 elements.
 * Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K. */
/* TS_TYPE_Q8_0 or TS_TYPE_Q8_K; TS_TYPE_COUNT for types without an int8 path. */
uint32_t ts_cuda_q8_partner(uint32_t wtype);
/* Bytes of a quantized activation buffer for n_tok rows of n_in elements:
 * int8 quants (n_tok, n_in), then float scales (n_tok, n_in/32 for Q8_0,
 * n_in/256 for Q8_K), then int32 sums (n_tok, n_in/32: sum of each 32 quants,
 * for Q8_0; n_in/16: Q8_K's bsums), each part 256-byte aligned. 0 if n_in is
 * not a multiple of the partner's block. */
size_t ts_cuda_q8_bytes(uint32_t partner, int64_t n_in, int n_tok);
/* q8 (ts_cuda_q8_bytes) = partner-format x (n_tok, n_in); with norm_w, x is
 * RMSNormed first (1/rms computed here, as ts_cuda_rms_inv). Any n_tok >= 1. */
ts_status ts_cuda_quantize_q8(void *stream, uint32_t partner, const float *x, int64_t n_in, int n_tok,
                              const float *norm_w, float eps, void *q8);
/* q8 = partner-format act(gate) * up (n_tok, n_in), the CPU's act_mul
 * formulas; the product is also stored to gate_out (may equal gate): the
 * FFN's act_mul and the down projection's activation quantization in one
 * pass. act: TS_CUDA_ACT_*. */
ts_status ts_cuda_quantize_q8_act(void *stream, uint32_t partner, int act, const float *gate, const float *up, int64_t n_in,
                                  int n_tok, float *gate_out, void *q8);
/* As ts_cuda_matvec, from a q8 buffer of the given partner format: every
 * w[i] must have that partner. */
ts_status ts_cuda_matvec_q8(void *stream, int n_w, const ts_cuda_mat *w, float *const *y, uint32_t partner,
                            const void *q8, int n_tok, bool accumulate);
/* Test hook (not thread-safe; set before launches): which weight loader
 * ts_cuda_matvec_q8 uses: -1 its own choice per launch (the default), 0 the
 * register loaders, 1 the cp.async ring. Every loader sums in the same order,
 * so results are bit-identical whichever runs. */
void ts_cuda_matvec_q8_force_loader(int mode);
/* Test and benchmark hook (the same caveats): how ts_cuda_matvec_q8 splits a
 * row group's chunks: -1 by its rule (MVQ_KW1), 0 never one warp per group
 * where a team would take it, 1 always one warp per group. The sums' order
 * differs between the two splits; each is checked against the CPU. */
void ts_cuda_matvec_q8_force_kw1(int mode);
/* Benchmark and test hook (the same caveats): rows per group of the
 * one-token launches that are not Q8_0: -1 (or anything else) by the rule
 * (mvq_rows), 2 or 4 (MVQ_R1, MVQ_R1_BIG) those rows. Row sums do not depend
 * on it (tests require equal outputs). */
void ts_cuda_matvec_q8_force_rows(int mode);
/* Test and benchmark hook (the same caveats): 1 gives every weight type of a
 * one-token ts_cuda_matvec_q8 call its own launch, as for n_tok > 1;
 * anything else lets a pair of types (Q4_K or Q5_K with Q6_K: a Q4_K_M
 * layer's Q/K and V) share one launch. Sums do not depend on it (tests
 * require equal outputs under either split of a group's chunks). */
void ts_cuda_matvec_q8_force_split(int mode);
/* Launches ts_cuda_matvec_q8 makes for these weights with the hooks as set:
 * one per distinct type, less one where a pair shares a launch; 0 for
 * arguments out of range. Host only: no GPU needed. */
int ts_cuda_matvec_q8_launches(int n_w, const ts_cuda_mat *w, int n_tok);
/* Rows per group ts_cuda_matvec_q8 gives a launch of these weights (one
 * type) on a GPU of `sms` SMs; 0 for arguments it would refuse. Host only: no
 * GPU needed (the rule's test). */
int ts_cuda_matvec_q8_rows(int n_w, const ts_cuda_mat *w, int n_tok, int sms);

/* ---- 2. prefill GEMM ----------------------------------------------------- */

/* dst (n_rows, w.n_in) in dst_type (F32, F16 or BF16) = rows row0.. of w,
 * dequantized as ts_dequant_row does (F32: bit-identical), then rounded to
 * nearest even for F16/BF16. */
ts_status ts_cuda_dequant(void *stream, const ts_cuda_mat *w, int64_t row0, int64_t n_rows, void *dst, uint32_t dst_type);
/* dst (n) in dst_type (F16 or BF16) = x rounded to nearest even. */
ts_status ts_cuda_convert_f32(void *stream, const float *x, int64_t n, void *dst, uint32_t dst_type);
/* Smallest scratch ts_cuda_gemm accepts: x converted (twice for F16/BF16
 * weights: hi and lo), plus 128 dequantized weight rows; more scratch means
 * fewer, larger cuBLAS calls. */
size_t ts_cuda_gemm_scratch_min(const ts_cuda_mat *w, int n_tok);
/* Tile room a session gives ts_cuda_gemm beyond that minimum (bench_gemm
 * times the call with it too, so its figures are the engine's). */
#define TS_CUDA_GEMM_TILE_BYTES ((size_t)32 << 20)
/* y (n_tok, w.n_out) = x (n_tok, n_in) . w^T (+ bias) (accumulate: y += that).
 * Weight rows are dequantized to compute_type (TS_TYPE_F16 or TS_TYPE_BF16)
 * tile by tile into scratch, x converted once, and each tile multiplied by
 * cublasGemmEx with float accumulation (tensor cores). F32 weights are
 * multiplied in F32 as they are (no TF32), compute_type unused. Weights
 * already in compute_type are multiplied in place, by x's 16-bit value and
 * then by its rounding residual (x = hi + lo), so the activations keep about
 * 22 bits (F16) as the CPU's F32 path keeps 24. cublas is a cublasHandle_t;
 * its stream is set to `stream`. */
ts_status ts_cuda_gemm(void *stream, void *cublas, const ts_cuda_mat *w, float *y, const float *x, int n_tok,
                       uint32_t compute_type, bool accumulate, void *scratch, size_t scratch_bytes);

/* ---- 3. RMSNorm, RoPE + KV store ------------------------------------------ */

/* out (rows, n) = x / rms(x) * w per row, as the CPU op (sum of squares in
 * double); out may equal x. Per-head (qk-norm): n = head_dim, rows = tokens * heads. */
ts_status ts_cuda_rmsnorm(void *stream, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out);

enum { TS_CUDA_ROPE_NORMAL = 0, TS_CUDA_ROPE_NEOX = 1 }; /* = ts_rope_mode */

/* Per token t and head: optional per-head RMSNorm (q_norm/k_norm), then the
 * first n_rot dims rotated by th = (float)pos[t] * freq[i], cos(th) * mscale
 * and sin(th) * mscale (the CPU rope_table's float32 angle); NORMAL rotates
 * pairs (2i, 2i+1), NEOX pairs (i, i + n_rot/2). q and k are rotated in place;
 * with k_cache, the rotated k and v are stored as F16 at position pos[t]:
 * cache[(h * n_ctx + pos) * head_dim + d]. */
typedef struct ts_cuda_rope_kv {
    float *q;                /* (n_tok, n_head, head_dim), or NULL */
    float *k;                /* (n_tok, n_head_kv, head_dim) */
    const float *v;          /* (n_tok, n_head_kv, head_dim); needed with k_cache */
    const int32_t *pos;      /* (n_tok) position of each token */
    const float *freq;       /* (n_rot / 2) rotation frequencies */
    const float *q_norm;     /* (head_dim) per-head RMSNorm weight for q, or NULL */
    const float *k_norm;     /* (head_dim) per-head RMSNorm weight for k, or NULL */
    uint16_t *k_cache;       /* (n_head_kv, n_ctx, head_dim) F16, or NULL: rotate only */
    uint16_t *v_cache;       /* (n_head_kv, n_ctx, head_dim) F16 */
    unsigned *err;           /* TS_CUDA_ERR_POS when a pos is outside [0, n_ctx), or NULL */
    int n_tok, n_head, n_head_kv, head_dim;
    int n_rot;               /* even, <= head_dim */
    int n_ctx;               /* cache positions per head (its stride) */
    int mode;                /* TS_CUDA_ROPE_NORMAL / TS_CUDA_ROPE_NEOX */
    float mscale;            /* multiplies cos and sin */
    float eps;               /* of the per-head RMSNorm */
} ts_cuda_rope_kv;

ts_status ts_cuda_rope_kv_store(void *stream, const ts_cuda_rope_kv *a);

/* ---- 4. attention ---------------------------------------------------------- */

/* out = softmax(scale q.K^T + mask) V per query head, K/V from the F16 cache:
 * token t attends to positions [max(0, pos[t] - window + 1), pos[t]] (window 0
 * = no limit), GQA head h reads kv head h / (n_head / n_head_kv). n_tok <=
 * TS_CUDA_MAX_DECODE_TOK runs split-K flash-decoding over the whole n_ctx
 * (blocks past a token's position exit at once, so the grid depends on n_ctx,
 * never on the current length); more tokens run a tiled flash-attention
 * kernel. head_dim: 64, 128 or 256. */
typedef struct ts_cuda_attn {
    const float *q;        /* (n_tok, n_head, head_dim) */
    const uint16_t *k;     /* (n_head_kv, n_ctx, head_dim) F16 */
    const uint16_t *v;     /* (n_head_kv, n_ctx, head_dim) F16 */
    const int32_t *pos;    /* (n_tok) */
    float *out;            /* (n_tok, n_head, head_dim) */
    unsigned *err;         /* TS_CUDA_ERR_POS for a pos outside [0, n_ctx) (its row is written as 0), or NULL */
    int n_tok, n_head, n_head_kv, head_dim, n_ctx;
    int window;            /* sliding window in positions, 0 = global */
    float scale;
} ts_cuda_attn;

size_t ts_cuda_attn_scratch_bytes(const ts_cuda_attn *a);
ts_status ts_cuda_attention(void *stream, const ts_cuda_attn *a, void *scratch, size_t scratch_bytes);
/* ts_cuda_attention, then its output quantized to `partner` into q8 for the
 * next int8 matvec (Wo), as ts_cuda_quantize_q8(out) would: with split-K the
 * splits are merged inside the quantization kernel (one launch fewer than
 * combine + quantize). out and q8 hold exactly the values of the two calls.
 * Decode only: n_tok <= TS_CUDA_MAX_DECODE_TOK; n_head * head_dim must suit
 * the partner (ts_cuda_q8_bytes > 0). */
ts_status ts_cuda_attention_q8(void *stream, const ts_cuda_attn *a, void *scratch, size_t scratch_bytes, uint32_t partner,
                               void *q8);
/* ts_cuda_rope_kv_store(r), then ts_cuda_attention_q8(a, partner, q8) (q8
 * NULL: ts_cuda_attention(a)), in one decode kernel: the query rows are rotated
 * where the attention reads them and the new k/v row is stored by every
 * block that reads it (the same bits). The cache and out hold exactly the two
 * calls' values, bit for bit; r->q and r->k are left as they were (not
 * rotated). Only where ts_cuda_rope_attention_fits: one token, r and a naming
 * the same q, pos and cache, both per-head norms or neither, at most 8 query
 * heads per kv head. */
bool ts_cuda_rope_attention_fits(const ts_cuda_rope_kv *r, const ts_cuda_attn *a);
ts_status ts_cuda_rope_attention(void *stream, const ts_cuda_rope_kv *r, const ts_cuda_attn *a, void *scratch,
                                 size_t scratch_bytes, uint32_t partner, void *q8);

/* ---- 5. element-wise ---------------------------------------------------- */

enum { TS_CUDA_ACT_SILU = 0, TS_CUDA_ACT_GELU_TANH = 1 }; /* = ts_act */

/* out (n) = act(gate) * up, the CPU's formulas; out may equal gate or up. */
ts_status ts_cuda_act_mul(void *stream, int act, const float *gate, const float *up, int64_t n, float *out);
/* x (n) += y */
ts_status ts_cuda_add(void *stream, float *x, const float *y, int64_t n);
/* x (n) = a * y; x may equal y */
ts_status ts_cuda_scale(void *stream, float *x, const float *y, float a, int64_t n);
/* x (n) += a * y */
ts_status ts_cuda_scale_add(void *stream, float *x, const float *y, float a, int64_t n);
/* x (n) = cap * tanh(x / cap) */
ts_status ts_cuda_softcap(void *stream, float *x, int64_t n, float cap);
/* out (n, emb.n_in) = rows ids[0..n) of emb dequantized, times scale; an id
 * outside [0, emb.n_out) gives a zero row and TS_CUDA_ERR_TOKEN in *err. */
ts_status ts_cuda_embed(void *stream, const ts_cuda_mat *emb, const int32_t *ids, int n, float scale, float *out,
                        unsigned *err);

/* ---- 6. sampling ------------------------------------------------------- */

/* Greedy: *out_id = argmax of logits (n), ties to the lowest id, NaN set to
 * -inf in place (the CPU sampler's first step; the chain below does the same);
 * -1 (and TS_CUDA_ERR_EMPTY) when every logit is -inf or NaN. The scratch
 * (ts_cuda_argmax_scratch_bytes) must be zeroed once after allocation; each
 * call leaves it zeroed again. */
size_t ts_cuda_argmax_scratch_bytes(int64_t n);
ts_status ts_cuda_argmax(void *stream, float *logits, int64_t n, int32_t *out_id, void *scratch, unsigned *err);

/* The CPU sampler's chain (docs/SAMPLING.md) on the device: NaN -> -inf, the
 * repetition penalty over the distinct ids of the ring `recent`, then greedy
 * (temperature <= 0) or top-k, top-p, min-p, temperature and one draw from the
 * xoshiro256** state rng[4] (advanced in device memory), with the same
 * candidate order, sums in the same order and the same walk, so identical
 * logits and RNG state give the CPU's id. logits (n_vocab) are modified in
 * place as the CPU does. The id is written to *out_id (-1 and
 * TS_CUDA_ERR_EMPTY when nothing can be chosen) and, if `recent` is given,
 * appended to the ring (the CPU's sampler_accept). Parameters are host values
 * fixed for a graph; validate them as sampler_new does. */
typedef struct ts_cuda_sampler_params {
    float temperature;    /* <= 0: greedy */
    int32_t top_k;        /* <= 0 or >= candidates: off */
    float top_p;          /* >= 1: off; > 0 */
    float min_p;          /* 0: off; [0, 1] */
    float repeat_penalty; /* 1: off; > 0 */
} ts_cuda_sampler_params;

typedef struct ts_cuda_sampler_state {
    uint64_t *rng;        /* (4) xoshiro256** state, seeded as ts_rng_seed */
    int32_t *recent;      /* (recent_cap) ring of accepted ids, -1 = empty slot; or NULL */
    int32_t *recent_pos;  /* (1) next ring slot to write */
    int32_t recent_cap;   /* repeat_last_n (host value) */
} ts_cuda_sampler_state;

size_t ts_cuda_sample_scratch_bytes(int32_t n_vocab);
ts_status ts_cuda_sample(void *stream, float *logits, int32_t n_vocab, const ts_cuda_sampler_params *p,
                         const ts_cuda_sampler_state *st, int32_t *out_id, unsigned *err, void *scratch,
                         size_t scratch_bytes);


/* ---- 7. routed experts (MoE) ----------------------------------------------
 * The experts of one projection of one MoE layer are addressed by id through
 * a table in device memory, so the selected ids never come to the host and a
 * decode token stays one graph. moe.cu; CPU references beside each kernel. */

/* One projection's experts: expert e's (n_out, row_bytes) matrix in `type`
 * is at table[e] (device memory holding device pointers, each 16-byte
 * aligned). All experts share type and shape. */
typedef struct ts_cuda_moe_mat {
    const void *const *table; /* (n_expert) device pointers */
    int32_t n_expert;         /* entries of the table: an id outside [0, n_expert) is skipped, TS_CUDA_ERR_EXPERT */
    uint32_t type;            /* ts_type of the rows */
    int64_t n_in;             /* elements per row */
    int64_t n_out;            /* rows */
    uint64_t row_bytes;       /* bytes per row */
} ts_cuda_moe_mat;

#define TS_CUDA_ERR_EXPERT 8u /* an expert id outside [0, n_expert) (its output rows written as 0) */
#define TS_CUDA_MOE_MAX_K 16  /* experts per token (top-k) a call takes at most */

/* Per token t < n_tok: ids[t] (k) = the top-k of r[t] (n_expert) by value,
 * descending, ties to the lower id, as ts_topk (with NaN logits the two
 * may choose differently);
 * w[t] (k) = exp(r - max) / sum, the sum over all n_expert or, with renorm,
 * over the k, in double (forward/moe.c's reference, ts_moe_route_row).
 * k <= TS_CUDA_MOE_MAX_K, n_expert <= 1024. */
ts_status ts_cuda_moe_route(void *stream, const float *r, int n_tok, int n_expert, int k, bool renorm, int32_t *ids, float *w);

/* F32 activations, any type ts_cuda_type_supported takes (the --precise path
 * and F32/F16/BF16 experts): for each s < n_set (1 or 2) and i < k,
 *   y[s] row i (w[s].n_out) = x_i . W_s[ids[i]]^T
 * x_i = x (one row of n_in) or, with x_per_expert, row i of x (k, n_in).
 * Weights dequantized as ts_dequant_row does, sums in float. y[s] are host
 * arrays of n_set device pointers; every w[s] shares n_in. */
ts_status ts_cuda_moe_matvec(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *ids, int k,
                             const float *x, bool x_per_expert, unsigned *err);
/* int8 activations (the default path): as above from a q8 buffer
 * (ts_cuda_quantize_q8 of x: 1 row, or k rows with x_per_expert) of the
 * weights' partner format; types with ts_cuda_q8_partner != TS_TYPE_COUNT. */
ts_status ts_cuda_moe_matvec_q8(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *ids, int k,
                                uint32_t partner, const void *q8, bool x_per_expert, unsigned *err);
/* A chunk's activation rows grouped by expert (prefill): item j covers rows
 * it[3j+1] .. it[3j+1] + it[3j+2] - 1 of x and of each y[s], all routed to
 * expert it[3j]; 1 <= it[3j+2] <= TS_CUDA_MAX_DECODE_TOK (8). The items
 * cover some or all of the rows, each at most once (a streamed pass runs
 * only the experts it fetched; rows no item covers are not written); an
 * item's rows share every weight load.
 * items: device memory, (n_item, 3) int32 {expert id, first row, rows};
 * q8: ts_cuda_quantize_q8 of x (n_rows, n_in), exactly n_rows rows; y[s]
 * (n_rows, w[s].n_out), row r = x_r . W_s[expert of r's item]^T with the
 * int8 dot of ts_cuda_moe_matvec_q8 (a row equals its result up to the
 * order of the float additions). An item with an id outside [0, n_expert)
 * gets zero rows and TS_CUDA_ERR_EXPERT; one whose rows are not 1..8 inside
 * [0, n_rows) is skipped (nothing written) with the same bit. n_item 0 (and
 * n_rows 0) launches nothing. */
ts_status ts_cuda_moe_matvec_q8_items(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y,
                                      const int32_t *items, int n_item, uint32_t partner, const void *q8, int n_rows,
                                      unsigned *err);
/* The same grouped product on the tensor cores (qgemm.cuh), for items of
 * 1..TS_CUDA_MOE_GEMM_ROWS rows: x16 is x (n_rows, n_in) in F16
 * (ts_cuda_convert_f32, 16-byte aligned), the weights are dequantized to F16
 * in shared memory (ts_dequant_row's values rounded to nearest even, as
 * ts_cuda_gemm multiplies them), sums in float. A row's result does not
 * depend on the item it is in. Quantized types only
 * (ts_cuda_moe_gemm_type), n_in a multiple of 128; at most 65535 items.
 * Otherwise as ts_cuda_moe_matvec_q8_items (bad ids: zero rows and
 * TS_CUDA_ERR_EXPERT; bad items: skipped with the same bit). */
#define TS_CUDA_MOE_GEMM_ROWS 64
bool ts_cuda_moe_gemm_type(uint32_t type);
ts_status ts_cuda_moe_gemm_items(void *stream, int n_set, const ts_cuda_moe_mat *w, float *const *y, const int32_t *items,
                                 int n_item, const void *x16, int n_rows, unsigned *err);
/* out (n_tok, n): for each t, out[t] = w[t][0] * y[r0]; then out[t] += w[t][i] * y[ri]
 * for i = 1..k-1 in that order (mul and add rounded separately, no FMA: the
 * CPU's scale and scale_add), ri = rows[t * k + i], or t * k + i when rows is NULL. */
ts_status ts_cuda_moe_combine(void *stream, float *out, const float *y, const float *w, const int32_t *rows, int n_tok, int k,
                              int64_t n);
/* x (n_tok, n) += what ts_cuda_moe_combine would write, each element's sum
 * formed the same way and then added (rounded) to x: combine then add, one
 * launch. */
ts_status ts_cuda_moe_combine_add(void *stream, float *x, const float *y, const float *w, const int32_t *rows, int n_tok,
                                  int k, int64_t n);
/* out row j (n) = x row idx[j], j < n_rows (a copy). */
ts_status ts_cuda_gather_rows(void *stream, float *out, const float *x, const int32_t *idx, int n_rows, int64_t n);
/* x[t] (n) += sigmoid(g[t]) * y[t] for t < n_tok, sigmoid = 1 / (1 + expf(-g)) rounded as the CPU does. */
ts_status ts_cuda_gated_add(void *stream, float *x, const float *y, const float *g, int n_tok, int64_t n);

/* ---- 8. the expert cache's policy ------------------------------------------
 * One MoE layer's slot-cache state (experts/policy.h's cache_layer, with the
 * expert cache's prefetch marks and counters: src/experts/expert_cache.c) in
 * device memory, a streamed routed pass's whole bookkeeping on the device
 * and the copy of its misses into the slots (expert_policy.cu): the engine's
 * streamed decode plans on the device with these, no host round trip a
 * layer. */
#define TS_CUDA_CACHE_MAX_K 64       /* requests a pass (CACHE_MAX_K) */
#define TS_CUDA_CACHE_MAX_SLOTS 1024 /* slots a layer */
enum { TS_CUDA_CACHE_LFU = 0, TS_CUDA_CACHE_LRU = 1 }; /* cache_policy's values */
/* A pass's counters (ts_cuda_cache_layer.stats), the host cache's expert_cache_stats fields of the same names */
enum {
    TS_CUDA_CS_PASSES, TS_CUDA_CS_REQUESTS, TS_CUDA_CS_HITS, TS_CUDA_CS_MISSES, TS_CUDA_CS_COLD, TS_CUDA_CS_EVICT,
    TS_CUDA_CS_BYTES_REQ, TS_CUDA_CS_BYTES_UP, TS_CUDA_CS_PF_COPIES, TS_CUDA_CS_PF_SAVED, TS_CUDA_CS_PF_WASTED,
    TS_CUDA_CS_BYTES_PF, TS_CUDA_CS_COUNT
};
#define TS_CUDA_LAYOUT_W 5 /* u64 per expert in ts_cuda_cache_layer.layout */
typedef struct ts_cuda_cache_layer {
    int32_t n_slots;        /* 1..TS_CUDA_CACHE_MAX_SLOTS */
    int32_t n_experts;
    int32_t policy;         /* TS_CUDA_CACHE_LFU or _LRU */
    int32_t *slot_expert;   /* (n_slots) device: expert held, -1 = empty */
    uint64_t *slot_tick;    /* (n_slots) device: tick of last use */
    int32_t *expert_slot;   /* (n_experts) device: slot holding the expert, -1 = not resident */
    uint64_t *expert_count; /* (n_experts) device: cumulative requests */
    uint64_t *tick;         /* (1) device: passes committed so far */
    uint8_t *prefetched;    /* (n_slots) device: 1 = filled by a prefetch no pass has asked for yet; NULL: no prefetch accounting */
    uint64_t *stats;        /* (TS_CUDA_CS_COUNT) device counters the passes add to; NULL: none */
    const uint64_t *layout; /* (n_experts, TS_CUDA_LAYOUT_W) device: offsets inside a slot of the gate, up and down slices; the laid-out length (bytes a miss copies, from the slot's start); the three slices' bytes. Needed with stats, tables or a fill */
    uint8_t *slots;         /* (n_slots, stride) device: slot s at slots + s * stride. Needed with tables or a fill */
    uint64_t stride;        /* bytes a slot */
} ts_cuda_cache_layer;
/* A streamed routed pass on the device state c, as the host cache makes it
 * (expert_cache.c: begin_locked, end_locked; expert_cache_prefetch_on):
 * cache_plan_make's plan of req (k device ids) -> slot, hit (0/1), evicted
 * (k device ints: the plan's fields), then
 * - not a prefetch: the layer's prefetches judged (a hit on a prefetched
 *   slot adds PF_SAVED; every other prefetched slot, evicted by this pass or
 *   not, PF_WASTED; all marks cleared), cache_commit, the pass's counters
 *   (PASSES, REQUESTS, HITS, MISSES, COLD, EVICT, BYTES_REQ += each
 *   request's layout[e][4], BYTES_UP += each miss's layout[e][3]), and with
 *   tab (a host array of 3 device tables, (n_experts) each, indexed by
 *   expert id: gate, up, down) tab[p][req[i]] = slots + slot[i] * stride +
 *   layout[req[i]][p] for every request (other entries untouched);
 * - a prefetch: cache_prefetch_commit, each miss's slot marked prefetched,
 *   PF_COPIES += misses, BYTES_PF += their layout[e][3]; tab is not written
 *   (a prefetched expert's entries are written by the pass that asks for it).
 * Each part only where its arrays are given (prefetched, stats, tab may be
 * NULL). Not k distinct ids in range: nothing changes or is written,
 * TS_CUDA_ERR_EXPERT in *err (may be NULL). Refused (TS_ERR_ARG, no launch):
 * k above n_slots or TS_CUDA_CACHE_MAX_K, stats or tab without layout, tab
 * without slots (a prefetch's too). The slots' bytes are the caller's:
 * ts_cuda_expert_fill copies the misses. */
ts_status ts_cuda_cache_pass(void *stream, const ts_cuda_cache_layer *c, const int32_t *req, int k, bool prefetch, int32_t *slot,
                             int32_t *hit, int32_t *evicted, const void **const *tab, unsigned *err);
/* For each request i < k with hit[i] == 0 (a cache pass's outputs, device
 * memory): copies layout[req[i]][3] bytes from tier + req[i] * c->stride
 * (device-accessible: the host tier's pinned memory, read by the SMs over
 * the bus) to c->slots + slot[i] * c->stride, the layout a slot has; no host
 * round trip. An id or slot out of range, or a length above the stride:
 * that request skipped, TS_CUDA_ERR_EXPERT. max_blocks > 0 caps the blocks
 * (a prefetch's fill beside compute kernels leaves them SMs); 0: as many as
 * the bytes need. Refused (TS_ERR_ARG): NULL pointers, k outside
 * 0..min(TS_CUDA_CACHE_MAX_K, n_slots), no layout or slots, stride 0,
 * max_blocks < 0. */
ts_status ts_cuda_expert_fill(void *stream, const ts_cuda_cache_layer *c, const uint8_t *tier, const int32_t *req, const int32_t *slot,
                              const int32_t *hit, int k, int max_blocks, unsigned *err);

#ifdef __cplusplus
}
#endif

#endif
