#include "tensor/types.h"

#include <stddef.h>

static const ts_type_traits ts_traits[TS_TYPE_COUNT] = {
    [TS_TYPE_F32] = {"F32", 1, 4},
    [TS_TYPE_F16] = {"F16", 1, 2},
    [TS_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [TS_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [TS_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [TS_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [TS_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [TS_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [TS_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [TS_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [TS_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [TS_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [TS_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [TS_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [TS_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [TS_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [TS_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [TS_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [TS_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [TS_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [TS_TYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [TS_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [TS_TYPE_I8] = {"I8", 1, 1},
    [TS_TYPE_I16] = {"I16", 1, 2},
    [TS_TYPE_I32] = {"I32", 1, 4},
    [TS_TYPE_I64] = {"I64", 1, 8},
    [TS_TYPE_F64] = {"F64", 1, 8},
    [TS_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [TS_TYPE_BF16] = {"BF16", 1, 2},
    [TS_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [TS_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [TS_TYPE_MXFP4] = {"MXFP4", 32, 17},
};

const ts_type_traits *ts_type_get(uint32_t type) {
    if (type >= TS_TYPE_COUNT || !ts_traits[type].name) return NULL;
    return &ts_traits[type];
}

const char *ts_type_name(uint32_t type) {
    const ts_type_traits *t = ts_type_get(type);
    return t ? t->name : "?";
}

uint64_t ts_type_row_bytes(uint32_t type, uint64_t n) {
    const ts_type_traits *t = ts_type_get(type);
    if (!t || n % t->block_elems) return 0;
    uint64_t blocks = n / t->block_elems;
    if (blocks > UINT64_MAX / t->block_bytes) return 0;
    return blocks * t->block_bytes;
}
