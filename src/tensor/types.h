/* Tensor element types: the ggml type ids used by GGUF, and their block
 * traits. The table is append-only, indexed by the on-disk id. */
#ifndef TS_TYPES_H
#define TS_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef enum ts_type {
    TS_TYPE_F32 = 0,
    TS_TYPE_F16 = 1,
    TS_TYPE_Q4_0 = 2,
    TS_TYPE_Q4_1 = 3,
    TS_TYPE_Q5_0 = 6,
    TS_TYPE_Q5_1 = 7,
    TS_TYPE_Q8_0 = 8,
    TS_TYPE_Q8_1 = 9,
    TS_TYPE_Q2_K = 10,
    TS_TYPE_Q3_K = 11,
    TS_TYPE_Q4_K = 12,
    TS_TYPE_Q5_K = 13,
    TS_TYPE_Q6_K = 14,
    TS_TYPE_Q8_K = 15,
    TS_TYPE_IQ2_XXS = 16,
    TS_TYPE_IQ2_XS = 17,
    TS_TYPE_IQ3_XXS = 18,
    TS_TYPE_IQ1_S = 19,
    TS_TYPE_IQ4_NL = 20,
    TS_TYPE_IQ3_S = 21,
    TS_TYPE_IQ2_S = 22,
    TS_TYPE_IQ4_XS = 23,
    TS_TYPE_I8 = 24,
    TS_TYPE_I16 = 25,
    TS_TYPE_I32 = 26,
    TS_TYPE_I64 = 27,
    TS_TYPE_F64 = 28,
    TS_TYPE_IQ1_M = 29,
    TS_TYPE_BF16 = 30,
    TS_TYPE_TQ1_0 = 34,
    TS_TYPE_TQ2_0 = 35,
    TS_TYPE_MXFP4 = 39,
    TS_TYPE_COUNT = 40
} ts_type;

typedef struct ts_type_traits {
    const char *name;       /* "Q4_K"; NULL for ids that are unused/removed */
    uint32_t block_elems;   /* elements per block */
    uint32_t block_bytes;   /* bytes per block */
} ts_type_traits;

/* These three take a raw u32 id on purpose: they are the validators, called
 * on ids straight from a file (the GGUF reader checks a tensor's on-disk type
 * with ts_type_get before it becomes a ts_type) and from the CUDA code, which
 * is C++ and keeps types as uint32_t (an enum parameter would not accept it).
 * Everything else takes a ts_type. */
/* NULL when the id is not a known type. */
const ts_type_traits *ts_type_get(uint32_t type);
const char *ts_type_name(uint32_t type); /* "?" when unknown */
/* Bytes of a row of n elements; 0 if n is not a whole number of blocks or
 * the type is unknown. */
uint64_t ts_type_row_bytes(uint32_t type, uint64_t n);

#endif
