/* avx2 kernels: entered only after runtime detection (see quant.c). */
#define TS_QUANT_INTERNAL
#include "tensor/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>

void ts_q_fill_avx2(ts_q_kernels *k) { (void)k; }
#endif
