/* Kernel dispatch: one table of function pointers per ISA level, built once.
 * Each level starts from the scalar references and overlays what the faster
 * kernel files provide, so a type without a SIMD kernel still works. The ISA
 * files are only entered after runtime CPU detection says they may be. */
#define TS_QUANT_INTERNAL
#include <stdbool.h>
#include "tensor/quant.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static ts_q_kernels q_tables[TS_ISA_COUNT];
static int q_max_isa;   /* what the CPU (and the build) can run */
static int q_isa;       /* what the dispatcher uses */
static char q_force_err[160]; /* why TS_FORCE_ISA or TS_PREFETCH was not applied, "" when it was or is unset */
static const ts_q_kernels *q_k;
static pthread_once_t q_once = PTHREAD_ONCE_INIT;
ts_q_prefetch_mode ts_q_prefetch = TS_Q_PREFETCH_FAR;

static void q_overlay(ts_q_kernels *dst, const ts_q_kernels *src) {
    for (int t = 0; t < TS_TYPE_COUNT; t++) {
        /* a level that brings its own dot/dotc also replaces the lower level's
         * whole-call kernels (possibly with none), so the higher ISA wins */
        if (src->dot[t]) dst->dot[t] = src->dot[t], dst->rows[t] = src->rows[t];
        if (src->dotc[t]) dst->dotc[t] = src->dotc[t], dst->tile[t] = src->tile[t];
        if (src->rows[t]) dst->rows[t] = src->rows[t];
        if (src->tile[t]) dst->tile[t] = src->tile[t];
        if (src->dequant[t]) dst->dequant[t] = src->dequant[t];
        if (src->quantize[t]) dst->quantize[t] = src->quantize[t];
        if (src->gemm[t]) dst->gemm[t] = src->gemm[t];
    }
}

#if defined(__x86_64__)
#include <cpuid.h>
/* F16C from CPUID.1:ECX[29]: clang 14's __builtin_cpu_supports does not
 * know the "f16c" name. */
static bool q_has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c >> 29) & 1u;
}
/* AVX512_VNNI from CPUID.(7,0):ECX[11] (vpdpbusd / vpdpwssd on zmm) */
static bool q_has_vnni512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (c >> 11) & 1u;
}
/* AMX-INT8: CPUID.(7,0):EDX[24] (tiles) and [25] (int8 dot products), the
 * OS saving the tile state (XCR0 bits 17, 18), and, on Linux, the kernel
 * granting this process the tile data (ARCH_REQ_XCOMP_PERM, once for all
 * threads; without it the first tile instruction faults). */
static bool q_has_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1u) || !((d >> 25) & 1u)) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false; /* OSXSAVE: xgetbv may run */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}
#endif

/* near only on Zen 3 (AMD family 19h without AVX-512), where it was
 * measured against no prefetch and far has not been measured; far elsewhere:
 * it beat near on Zen 4 and on the H200 host's Xeon (quant.h) */
static ts_q_prefetch_mode q_detect_prefetch(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return TS_Q_PREFETCH_FAR;
    const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
    if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return TS_Q_PREFETCH_FAR;
    const unsigned family = ((a >> 8) & 0xf) + (((a >> 8) & 0xf) == 0xf ? (a >> 20) & 0xff : 0);
    if (family == 0x19 && !__builtin_cpu_supports("avx512f")) return TS_Q_PREFETCH_NEAR;
#endif
    return TS_Q_PREFETCH_FAR;
}

static int q_detect(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    int isa = TS_ISA_SCALAR;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && q_has_f16c() && __builtin_cpu_supports("bmi2"))
        isa = TS_ISA_AVX2;
    if (isa == TS_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        isa = TS_ISA_AVX512;
    return isa;
#else
    return TS_ISA_SCALAR;
#endif
}

static void q_init(void) {
    ts_q_fill_ref(&q_tables[0]);
    q_tables[1] = q_tables[0];
    q_tables[2] = q_tables[0];
    q_tables[3] = q_tables[0];
    q_max_isa = q_detect();
#if defined(__x86_64__)
    ts_q_kernels tmp;
    if (q_max_isa >= TS_ISA_AVX2) {
        memset(&tmp, 0, sizeof tmp);
        ts_q_fill_avx2(&tmp);
        ts_q_fill_gemm_avx2(&tmp);
        q_overlay(&q_tables[1], &tmp);
        q_overlay(&q_tables[2], &tmp);
    }
    if (q_max_isa >= TS_ISA_AVX512) {
        memset(&tmp, 0, sizeof tmp);
        ts_q_fill_avx512(&tmp, q_has_vnni512());
        ts_q_fill_gemm_avx512(&tmp, q_has_vnni512());
        q_overlay(&q_tables[2], &tmp);
        q_tables[3] = q_tables[2];
        if (q_has_vnni512() && q_has_amx()) {
            memset(&tmp, 0, sizeof tmp);
            ts_q_fill_gemm_amx(&tmp);
            q_overlay(&q_tables[3], &tmp);
            q_max_isa = TS_ISA_AMX;
        }
    }
#endif
    q_isa = q_max_isa;
    ts_q_prefetch = q_detect_prefetch();
    const char *pf = getenv("TS_PREFETCH");
    if (pf && *pf) {
        if (!strcmp(pf, "near")) ts_q_prefetch = TS_Q_PREFETCH_NEAR;
        else if (!strcmp(pf, "far")) ts_q_prefetch = TS_Q_PREFETCH_FAR;
        else snprintf(q_force_err, sizeof q_force_err, "TS_PREFETCH=%.32s: not near or far", pf);
    }
    const char *f = getenv("TS_FORCE_ISA");
    if (f && *f) { /* set but empty reads as unset */
        int want = -1;
        for (int i = TS_ISA_SCALAR; i < TS_ISA_COUNT; i++)
            if (!strcmp(f, ts_isa_name(i))) want = i;
        /* a typo or a level this CPU lacks would otherwise run the best
         * kernels under a name that says otherwise: kept for the backend to
         * refuse (ts_kernels_force_error) */
        if (want < 0)
            snprintf(q_force_err, sizeof q_force_err, "TS_FORCE_ISA=%.32s: not one of scalar, avx2, avx512, amx", f);
        else if (want > q_max_isa)
            snprintf(q_force_err, sizeof q_force_err, "TS_FORCE_ISA=%s: this CPU's best kernel level is %s (the variable only lowers it)", f,
                     ts_isa_name(q_max_isa));
        else q_isa = want;
    }
    q_k = &q_tables[q_isa];
}

static inline const ts_q_kernels *q_get(void) {
    pthread_once(&q_once, q_init);
    return q_k;
}

const char *ts_isa_name(int isa) {
    switch (isa) {
    case TS_ISA_SCALAR: return "scalar";
    case TS_ISA_AVX2: return "avx2";
    case TS_ISA_AVX512: return "avx512";
    case TS_ISA_AMX: return "amx";
    default: return "?";
    }
}

const char *ts_kernels_isa(void) {
    q_get();
    return ts_isa_name(q_isa);
}

int ts_kernels_isa_max(void) {
    q_get();
    return q_max_isa;
}

const char *ts_kernels_prefetch(void) {
    q_get();
    return ts_q_prefetch == TS_Q_PREFETCH_NEAR ? "near" : "far";
}

const char *ts_kernels_force_error(void) {
    q_get();
    return q_force_err[0] ? q_force_err : NULL;
}

int ts_kernels_set_isa(int isa) {
    q_get();
    if (isa < TS_ISA_SCALAR || isa > q_max_isa) return -1;
    q_isa = isa;
    q_k = &q_tables[isa];
    return 0;
}

/* Every kernel call returns with the upper ymm/zmm state clean. The
 * compilers end an AVX function with vzeroupper, except where their own
 * analysis decides otherwise (a function with 256-bit arguments; some
 * unoptimized or sanitized builds), and a dirty upper state makes every
 * legacy-SSE instruction the caller runs next slow on some CPUs (10x on a
 * Zen 3 VM). One vzeroupper per call here makes it hold by construction;
 * test_quant checks it after every entry. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx"))) static void q_vzeroupper(void) { __builtin_ia32_vzeroupper(); }
#define CLEAN_UPPER()                                \
    do {                                             \
        if (q_isa >= TS_ISA_AVX2) q_vzeroupper();    \
    } while (0)
#else
#define CLEAN_UPPER() ((void)0)
#endif

/* Unsupported types are refused at model load (ts_type_supported); here they
 * produce zeros rather than touching memory whose layout is unknown. */
void ts_dequant_row(ts_type type, const void *src, float *dst, int64_t n) {
    const ts_q_kernels *k = q_get();
    if (type < TS_TYPE_COUNT && k->dequant[type]) {
        k->dequant[type](src, dst, n);
        CLEAN_UPPER();
    } else {
        memset(dst, 0, (size_t)n * sizeof(float));
    }
}

void ts_quantize_row(ts_type type, const float *src, void *dst, int64_t n) {
    const ts_q_kernels *k = q_get();
    if (type < TS_TYPE_COUNT && k->quantize[type]) {
        k->quantize[type](src, dst, n);
        CLEAN_UPPER();
    }
}

float ts_vec_dot(ts_type wtype, int64_t n, const void *w, const void *x) {
    const ts_q_kernels *k = q_get();
    if (wtype >= TS_TYPE_COUNT || !k->dot[wtype]) return 0;
    float v = k->dot[wtype](n, w, x);
    CLEAN_UPPER();
    return v;
}

void ts_vec_dot_rows(ts_type wtype, int64_t n, const void *w, uint64_t row_stride, int64_t nrows, const void *x,
                     float *out) {
    const ts_q_kernels *k = q_get();
    if (wtype < TS_TYPE_COUNT && k->rows[wtype] && nrows > 0) {
        k->rows[wtype](n, w, row_stride, nrows, x, out);
        CLEAN_UPPER();
        return;
    }
    ts_q_dot_fn f = wtype < TS_TYPE_COUNT ? k->dot[wtype] : NULL;
    const uint8_t *p = w;
    for (int64_t r = 0; r < nrows; r++) out[r] = f ? f(n, p + r * row_stride, x) : 0.0f;
    CLEAN_UPPER();
}

void ts_gemm_tile(ts_type wtype, int64_t n, const void *w, uint64_t w_stride, int64_t nrows, const void *x,
                  uint64_t x_stride, int64_t ncols, float *out, int64_t out_stride) {
    const ts_q_kernels *k = q_get();
    ts_q_dot_fn f = wtype < TS_TYPE_COUNT ? k->dot[wtype] : NULL;
    ts_q_dotc_fn fc = wtype < TS_TYPE_COUNT ? k->dotc[wtype] : NULL;
    if (wtype < TS_TYPE_COUNT && k->tile[wtype]) {
        if (nrows > 0 && ncols > 0) k->tile[wtype](n, w, w_stride, nrows, x, x_stride, ncols, out, out_stride);
        CLEAN_UPPER();
        return;
    }
    const uint8_t *pw = w, *px = x;
    /* Columns in groups of TS_Q_MAXCOLS: within a group each weight block is
     * decoded once and used for every column; across row loops the group's
     * activations stay in L1/L2 while the weights stream. */
    for (int64_t c0 = 0; c0 < ncols; c0 += TS_Q_MAXCOLS) {
        int nc = (int)(ncols - c0 < TS_Q_MAXCOLS ? ncols - c0 : TS_Q_MAXCOLS);
        const uint8_t *xc = px + c0 * x_stride;
        float *oc = out + c0 * out_stride;
        for (int64_t r = 0; r < nrows; r++) {
            const uint8_t *wr = pw + r * w_stride;
            if (fc) {
                fc(n, wr, xc, x_stride, nc, oc + r, out_stride);
            } else {
                for (int c = 0; c < nc; c++) oc[c * out_stride + r] = f ? f(n, wr, xc + c * x_stride) : 0.0f;
            }
        }
    }
    CLEAN_UPPER();
}

void ts_gemm(ts_type wtype, int64_t n, const void *w, uint64_t w_stride, int64_t nrows, const void *x,
             uint64_t x_stride, int64_t ncols, float *out, int64_t out_stride, void *scratch) {
    const ts_q_kernels *k = q_get();
    if (nrows <= 0 || ncols <= 0) return;
    if (wtype < TS_TYPE_COUNT && k->gemm[wtype]) {
        k->gemm[wtype](n, w, w_stride, nrows, x, x_stride, ncols, out, out_stride, scratch);
        CLEAN_UPPER();
        return;
    }
    /* no panel kernel: row tiles that stay in cache while all columns pass */
    enum { ROWS = 128, COLS = 16 };
    const uint8_t *pw = w, *px = x;
    for (int64_t r0 = 0; r0 < nrows; r0 += ROWS) {
        int64_t nr = nrows - r0 < ROWS ? nrows - r0 : ROWS;
        for (int64_t c0 = 0; c0 < ncols; c0 += COLS) {
            int64_t nc = ncols - c0 < COLS ? ncols - c0 : COLS;
            ts_gemm_tile(wtype, n, pw + (uint64_t)r0 * w_stride, w_stride, nr, px + (uint64_t)c0 * x_stride, x_stride, nc,
                         out + c0 * out_stride + r0, out_stride);
        }
    }
}
