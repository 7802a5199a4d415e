/* Quantized row kernels. Every type has a scalar reference (the *_ref
 * functions, kept forever: tests compare every fast path against them) and a
 * dispatched fast path chosen once by runtime CPU detection (AVX-512, AVX2,
 * else the scalar code).
 *
 * Dot products pair a weight row with an activation row converted to the
 * weight type's "partner" format: Q8_0 for the 32-element quants, Q8_K for the
 * K-quants, F32 for F32/F16/BF16 (so float models keep full precision). */
#ifndef TS_QUANT_H
#define TS_QUANT_H

#include <stdint.h>

#include "tensor/types.h"

/* fp16/bf16 <-> fp32, exact (round-to-nearest-even on the way down). */
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_f16(float f);
float ts_bf16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float f);

/* True for the weight types the kernels can dequantize and dot. */
int ts_type_supported(uint32_t type);
/* Partner activation format for dot products with this weight type. */
uint32_t ts_type_dot_partner(uint32_t wtype);

/* ---- scalar references ---- */
/* n must be a multiple of the type's block size. */
void ts_dequant_row_ref(uint32_t type, const void *src, float *dst, int64_t n);
/* Quantize activations into a partner format (Q8_0, Q8_K, F32, F16). */
void ts_quantize_row_ref(uint32_t type, const float *src, void *dst, int64_t n);
/* dot(w, x) with w of wtype and x in ts_type_dot_partner(wtype). */
float ts_vec_dot_ref(uint32_t wtype, int64_t n, const void *w, const void *x);

/* ---- dispatched fast paths (same contracts) ---- */
void ts_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);
void ts_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
float ts_vec_dot(uint32_t wtype, int64_t n, const void *w, const void *x);
/* Several weight rows against one activation row: out[r] = dot(w + r*row_stride, x). */
void ts_vec_dot_rows(uint32_t wtype, int64_t n, const void *w, uint64_t row_stride, int64_t nrows, const void *x, float *out);

/* Name of the ISA the dispatcher picked ("avx512", "avx2", "scalar");
 * TS_FORCE_ISA=scalar|avx2|avx512 in the environment overrides detection
 * (downwards only), for tests and benchmarks. */
const char *ts_kernels_isa(void);

#endif
