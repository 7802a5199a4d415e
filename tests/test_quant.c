/* Quant kernels: references against the gguf-py oracle (fixtures), and every
 * dispatched fast path, on every ISA this CPU has, against the references.
 *
 * Tolerance of a dot product (documented in docs/KERNELS.md): the kernels
 * compute each block's integer sum exactly, so fast and reference differ only
 * by float rounding of the per-block scale products and the accumulation
 * order. With M = sum_i |w_i * x_i| (dequantized, in double) and B the number
 * of accumulated terms (blocks, or elements/8 for float rows), both are within
 * (B + 16) * (2^-23 * M + 2^-149) of the exact value (the last term covers
 * results in the float subnormal range); we require
 *   |fast - ref| <= (B + 16) * (2^-23 * M + 2^-149)
 * and the same between the reference and the double dot of the dequantized
 * rows. Dequantization and activation quantization must match bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TS_QUANT_INTERNAL /* ts_q_gemm_nsub: which types have panel kernels */
#include "tensor/quant.h"
#include "test_util.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

/* Does a kernel hand back the upper halves of the ymm/zmm registers clean?
 * A dirty upper state left by an AVX kernel makes every legacy-SSE
 * instruction the caller runs next slow (seen on a Zen 3 VM: 10x on the
 * element-wise ops after the AVX2 GEMM). XGETBV(1) reads XINUSE, whose bit 2
 * is set while that state is not in its initial (vzeroupper'd) form.
 * Returns 1 dirty, 0 clean, -1 when the CPU cannot say. This file is built
 * without AVX, so nothing here touches the ymm state between the kernel's
 * return and the read. */
static int upper_dirty(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return -1; /* OSXSAVE */
    if (__get_cpuid_max(0, NULL) < 0xd) return -1;
    __cpuid_count(0xd, 1, a, b, c, d);
    if (!(a & (1u << 2))) return -1; /* XGETBV with ECX = 1 */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return (lo >> 2) & 1;
#else
    return -1;
#endif
}
static int upper_checked, upper_bad;
static void note_upper(const char *what, ts_type t, int isa) {
    int u = upper_dirty();
    if (u < 0) return;
    upper_checked++;
    if (u) {
        upper_bad++;
        CHECKF(0, "%s %s isa=%s returned with the upper ymm/zmm state dirty (no vzeroupper)", what, ts_type_name(t), ts_isa_name(isa));
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float frand(void) { return (float)((rnd() >> 11) * 0x1p-53) * 2.0f - 1.0f; } /* [-1, 1) */
static float gauss(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) s += frand();
    return s * 0.8660254f;
}

static int same_float(float a, float b) {
    if (isnan(a) && isnan(b)) return 1;
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub;
}

static const ts_type all_types[] = {TS_TYPE_F32,  TS_TYPE_F16,  TS_TYPE_BF16, TS_TYPE_Q4_0,   TS_TYPE_Q4_1,
                                     TS_TYPE_Q5_0, TS_TYPE_Q5_1, TS_TYPE_Q8_0, TS_TYPE_Q2_K,   TS_TYPE_Q3_K,
                                     TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K, TS_TYPE_IQ4_NL, TS_TYPE_MXFP4};
#define NTYPES (int)(sizeof all_types / sizeof all_types[0])

/* ------------------------------------------------------------------ */
/* fixtures from gguf-py                                               */

static void *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)n);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static void test_fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/quant/%s", TS_FIXTURES, name);
    size_t len;
    uint8_t *buf = read_file(path, &len);
    CHECKF(buf != NULL && len >= 24, "%s: cannot read", path);
    if (!buf || len < 24) { free(buf); return; }
    uint32_t hdr[6];
    memcpy(hdr, buf, 24);
    /* raw header words; the type id is checked by ts_type_row_bytes below (0 when unknown) */
    uint32_t type = hdr[2], n = hdr[3], nbytes = hdr[4], kind = hdr[5];
    CHECKF(!memcmp(buf, "TSQF", 4) && hdr[1] == 1 && len == 24 + (size_t)nbytes + 4 * (size_t)n, "%s: bad header", name);
    if (len != 24 + (size_t)nbytes + 4 * (size_t)n) { free(buf); return; }
    CHECKF(ts_type_row_bytes(type, n) == nbytes, "%s: size %u for %u elems", name, nbytes, n);
    float *got = malloc(4 * (size_t)n), *want = malloc(4 * (size_t)n);
    uint8_t *q = malloc(nbytes);
    int max_isa = ts_kernels_isa_max();
    if (kind == 0) {
        memcpy(want, buf + 24 + nbytes, 4 * (size_t)n);
        for (int isa = -1; isa <= max_isa; isa++) {
            if (isa < 0) ts_dequant_row_ref(type, buf + 24, got, n);
            else {
                ts_kernels_set_isa(isa);
                ts_dequant_row(type, buf + 24, got, n);
            }
            int bad = 0, first = -1;
            for (uint32_t i = 0; i < n; i++)
                if (!same_float(got[i], want[i])) { bad++; if (first < 0) first = (int)i; }
            CHECKF(bad == 0, "%s (%s): %d of %u differ from gguf-py, first [%d] %.9g vs %.9g", name,
                   isa < 0 ? "ref" : ts_isa_name(isa), bad, n, first, first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
        }
    } else {
        memcpy(want, buf + 24, 4 * (size_t)n); /* source floats */
        for (int isa = -1; isa <= max_isa; isa++) {
            if (isa < 0) ts_quantize_row_ref(type, want, q, n);
            else {
                ts_kernels_set_isa(isa);
                ts_quantize_row(type, want, q, n);
            }
            int bad = 0, first = -1;
            for (uint32_t i = 0; i < nbytes; i += 2)
                if (memcmp(q + i, buf + 24 + 4 * (size_t)n + i, 2)) { bad++; if (first < 0) first = (int)i / 2; }
            CHECKF(bad == 0, "%s (%s): %d of %u roundings differ, first src %.9g", name, isa < 0 ? "ref" : ts_isa_name(isa),
                   bad, n, first >= 0 ? want[first] : 0);
        }
    }
    ts_kernels_set_isa(max_isa);
    free(buf);
    free(got);
    free(want);
    free(q);
}

/* ------------------------------------------------------------------ */
/* fp16 / bf16 conversions                                             */

#if defined(__x86_64__)
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
#endif

static void test_conversions(void) {
    int bad = 0, bad_hw = 0;
    int hw = 0;
#if defined(__x86_64__)
    hw = ts_kernels_isa_max() >= TS_ISA_AVX2; /* the dispatcher requires F16C for AVX2 */
#endif
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ts_f16_to_f32((uint16_t)h);
        uint16_t back = ts_f32_to_f16(f);
        int nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        if (nan ? !(isnan(f) && (back & 0x7e00) == 0x7e00 && (back & 0x8000) == (h & 0x8000)) : back != h) bad++;
#if defined(__x86_64__)
        if (hw && !nan && !same_float(f, hw_h2f((uint16_t)h))) bad_hw++;
#endif
        float b = ts_bf16_to_f32((uint16_t)h);
        uint16_t bb = ts_f32_to_bf16(b);
        int bnan = ((h >> 7) & 0xff) == 0xff && (h & 0x7f);
        if (bnan ? !isnan(b) || !isnan(ts_bf16_to_f32(bb)) : bb != h) bad++;
    }
    CHECKF(bad == 0, "%d f16/bf16 round trips differ", bad);
    CHECKF(bad_hw == 0, "%d f16->f32 differ from F16C", bad_hw);
#if defined(__x86_64__)
    if (hw) {
        /* f32 -> f16 rounding against the F16C instruction on random bit patterns */
        int badr = 0;
        for (int i = 0; i < 2000000; i++) {
            uint32_t u = (uint32_t)rnd();
            if (i & 1) u = (u & 0x8fffffffu) | 0x30000000u; /* exponents near the f16 range */
            float f;
            memcpy(&f, &u, 4);
            if (isnan(f)) continue;
            if (ts_f32_to_f16(f) != hw_f2h(f)) badr++;
        }
        CHECKF(badr == 0, "%d f32->f16 roundings differ from F16C", badr);
    }
#endif
    CHECK(ts_e8m0_half_to_f32(128) == 1.0f && ts_e8m0_half_to_f32(0) == 0x1p-128f && ts_e8m0_half_to_f32(255) == 0x1p127f);
}

/* ------------------------------------------------------------------ */
/* fast paths vs references                                            */

enum { SC_RANDOM, SC_SANE, SC_TINY, SC_HUGE, SC_ZERO, SC_NEG, SC_MAXQ, SC_COUNT };
static const char *sc_name[SC_COUNT] = {"random", "sane", "tiny", "huge", "zero", "negative", "max-quants"};

static uint16_t f16_for(int sc) {
    switch (sc) {
    case SC_TINY: return (uint16_t)(1 + rnd() % 0x3ff);         /* subnormal */
    case SC_HUGE: return (uint16_t)(0x7800 + rnd() % 0x3ff);    /* 32768..65504 */
    case SC_ZERO: return 0;
    case SC_NEG: return ts_f32_to_f16(-(0.001f + 0.1f * (frand() + 1)));
    case SC_RANDOM: {
        uint16_t h = (uint16_t)rnd();
        if (((h >> 10) & 0x1f) >= 0x1e) h &= (uint16_t)~0x4000; /* finite, at most ~2 */
        return h;
    }
    default: return ts_f32_to_f16((rnd() & 1 ? -1 : 1) * (0.001f + 0.05f * (frand() + 1)));
    }
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* f16 scale offsets in a block (ggml layouts), -1 terminated */
static const int *scale_offsets(ts_type t) {
    static const int o0[] = {0, -1}, o02[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1}, q6k[] = {208, -1},
                     none[] = {-1};
    switch (t) {
    case TS_TYPE_Q4_0: case TS_TYPE_Q5_0: case TS_TYPE_Q8_0: case TS_TYPE_IQ4_NL: return o0;
    case TS_TYPE_Q4_1: case TS_TYPE_Q5_1: case TS_TYPE_Q4_K: case TS_TYPE_Q5_K: return o02;
    case TS_TYPE_Q2_K: return q2k;
    case TS_TYPE_Q3_K: return q3k;
    case TS_TYPE_Q6_K: return q6k;
    default: return none;
    }
}

/* A weight row of type t with n elements for scenario sc. */
static void make_weights(ts_type t, int sc, uint8_t *w, int64_t n) {
    const ts_type_traits *tr = ts_type_get(t);
    uint64_t bytes = ts_type_row_bytes(t, (uint64_t)n);
    if (t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float v = gauss();
            if (sc == SC_TINY) v *= 1e-38f;
            if (sc == SC_HUGE) v = t == TS_TYPE_F16 ? frand() * 65504.0f : v * 1e30f;
            if (sc == SC_ZERO) v = 0;
            if (sc == SC_NEG) v = -fabsf(v);
            if (sc == SC_MAXQ) v = t == TS_TYPE_F16 ? (rnd() & 1 ? 65504.0f : -65504.0f) : (rnd() & 1 ? 1e30f : -1e30f);
            if (sc == SC_RANDOM && t != TS_TYPE_F32) {
                uint16_t h = (uint16_t)rnd();
                if (t == TS_TYPE_F16 && ((h >> 10) & 0x1f) == 0x1f) h &= (uint16_t)~0x4000;
                if (t == TS_TYPE_BF16) h = (uint16_t)((h & 0x80ff) | (0x3000 + (rnd() % 0x1000)) ); /* |v| ~ 1e-10..1e10 */
                memcpy(w + 2 * i, &h, 2);
                continue;
            }
            if (t == TS_TYPE_F32) memcpy(w + 4 * i, &v, 4);
            else {
                uint16_t h = t == TS_TYPE_F16 ? ts_f32_to_f16(v) : ts_f32_to_bf16(v);
                memcpy(w + 2 * i, &h, 2);
            }
        }
        if (t == TS_TYPE_F16 && sc == SC_TINY) /* f16 subnormals */
            for (int64_t i = 0; i < n; i++) put16(w + 2 * i, (uint16_t)((rnd() & 0x83ff)));
        return;
    }
    if (sc == SC_SANE) {
        /* realistic rows from the reference quantizer */
        float *f = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) f[i] = gauss() * 0.05f;
        ts_quantize_row_ref(t, f, w, n);
        free(f);
        return;
    }
    for (uint64_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    uint64_t nb = bytes / tr->block_bytes;
    for (uint64_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * tr->block_bytes;
        if (sc == SC_MAXQ) {
            /* extreme quants: all bits set, or the most negative pattern */
            int pat = (int)(rnd() % 3);
            uint8_t v = pat == 0 ? 0xff : pat == 1 ? 0x00 : 0x88;
            if (t == TS_TYPE_Q8_0) v = pat == 0 ? 0x7f : 0x80;
            memset(p, v, tr->block_bytes);
        }
        for (const int *o = scale_offsets(t); *o >= 0; o++) put16(p + *o, f16_for(sc == SC_MAXQ ? SC_SANE : sc));
        if (t == TS_TYPE_MXFP4) {
            int e = sc == SC_TINY ? (int)(rnd() % 3) : sc == SC_HUGE ? 180 + (int)(rnd() % 20) : sc == SC_ZERO ? 0 : 110 + (int)(rnd() % 20);
            p[0] = (uint8_t)e;
            if (sc == SC_ZERO) memset(p + 1, 0, 16);
        }
        if (sc == SC_ZERO && (t == TS_TYPE_Q4_1 || t == TS_TYPE_Q5_1)) put16(p + 2, 0);
    }
}

/* Activation row in the partner format of wtype. */
static void make_acts(ts_type wtype, int sc, uint8_t *x, int64_t n, float *tmp) {
    ts_type p = ts_type_dot_partner(wtype);
    for (int64_t i = 0; i < n; i++) {
        tmp[i] = gauss();
        if (sc == SC_MAXQ) tmp[i] = rnd() & 1 ? 3.0f : -3.0f; /* all quants at +-127 */
        if (sc == SC_TINY && p == TS_TYPE_F32) tmp[i] *= 1e-3f;
    }
    ts_quantize_row_ref(p, tmp, x, n);
}

static double dot_tol(ts_type t, int64_t n, double mag) {
    const ts_type_traits *tr = ts_type_get(t);
    double terms = tr->block_elems == 1 ? (double)n / 8 : (double)(n / tr->block_elems);
    /* plus the float subnormal spacing per term, for results near underflow */
    return (terms + 16) * (0x1p-23 * mag + 0x1p-149);
}

/* The comparison every dot check goes through (and the self-test exercises). */
static int dot_close(double got, double want, double tol) { return isfinite(got) && fabs(got - want) <= tol; }

typedef struct {
    uint8_t *w, *x;
    float *wf, *xf, *tmp;
} bufs;

static void test_dot_case(ts_type t, int64_t n, int sc, int isa, bufs *b) {
    ts_type p = ts_type_dot_partner(t);
    make_weights(t, sc, b->w, n);
    make_acts(t, sc, b->x, n, b->tmp);
    ts_dequant_row_ref(t, b->w, b->wf, n);
    ts_dequant_row_ref(p, b->x, b->xf, n);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += (double)b->wf[i] * b->xf[i];
        mag += fabs((double)b->wf[i] * b->xf[i]);
    }
    if (!isfinite(mag)) {
        CHECKF(0, "%s %s n=%lld: test data not finite", ts_type_name(t), sc_name[sc], (long long)n);
        return;
    }
    double tol = dot_tol(t, n, mag);
    float ref = ts_vec_dot_ref(t, n, b->w, b->x);
    float fast = ts_vec_dot(t, n, b->w, b->x);
    if (isa == 0)
        CHECKF(dot_close(ref, exact, tol), "%s %s n=%lld: ref %.9g vs dequantized dot %.9g (tol %.3g)", ts_type_name(t),
               sc_name[sc], (long long)n, ref, exact, tol);
    CHECKF(dot_close(fast, ref, tol), "%s %s n=%lld isa=%s: fast %.9g vs ref %.9g (tol %.3g)", ts_type_name(t), sc_name[sc],
           (long long)n, ts_isa_name(isa), fast, ref, tol);
    if (sc == SC_ZERO && t != TS_TYPE_MXFP4) CHECKF(fast == 0 && ref == 0, "%s zero scales: %g %g", ts_type_name(t), fast, ref);

    /* fast dequant must equal the reference bit for bit */
    float *fd = b->tmp;
    ts_dequant_row(t, b->w, fd, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !same_float(fd[i], b->wf[i]);
    CHECKF(bad == 0, "%s %s isa=%s: fast dequant differs in %d", ts_type_name(t), sc_name[sc], ts_isa_name(isa), bad);
}

/* Multi-row and tile entry points against per-pair reference dots. */
static void test_rows_tile(ts_type t, int64_t n, int isa, bufs *b) {
    enum { R = 5, C = 7 };
    ts_type p = ts_type_dot_partner(t);
    uint64_t ws = ts_type_row_bytes(t, (uint64_t)n), xs = ts_type_row_bytes(p, (uint64_t)n);
    uint8_t *W = malloc(ws * R + 1), *X = malloc(xs * C + 1);
    /* odd base addresses: the kernels must not assume alignment */
    uint8_t *w = W + 1, *x = X + 1;
    for (int r = 0; r < R; r++) make_weights(t, r % 2 ? SC_SANE : SC_RANDOM, w + r * ws, n);
    for (int c = 0; c < C; c++) make_acts(t, SC_RANDOM, x + c * xs, n, b->tmp);
    float rows[R], out[C * (R + 2)];
    double ref[C][R], tol[C][R];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) {
            ref[c][r] = ts_vec_dot_ref(t, n, w + r * ws, x + c * xs);
            ts_dequant_row_ref(t, w + r * ws, b->wf, n);
            ts_dequant_row_ref(p, x + c * xs, b->xf, n);
            double mag = 0;
            for (int64_t i = 0; i < n; i++) mag += fabs((double)b->wf[i] * b->xf[i]);
            tol[c][r] = dot_tol(t, n, mag);
        }
    ts_vec_dot_rows(t, n, w, ws, R, x + 2 * xs, rows);
    note_upper("vec_dot_rows", t, isa);
    int bad = 0;
    for (int r = 0; r < R; r++) bad += !dot_close(rows[r], ref[2][r], tol[2][r]);
    CHECKF(bad == 0, "%s n=%lld isa=%s: vec_dot_rows %d bad", ts_type_name(t), (long long)n, ts_isa_name(isa), bad);
    for (int nc = 1; nc <= C; nc++) {
        for (int i = 0; i < C * (R + 2); i++) out[i] = -12345.0f;
        ts_gemm_tile(t, n, w, ws, R, x, xs, nc, out, R + 2);
        note_upper("gemm_tile", t, isa);
        bad = 0;
        int clobber = 0;
        for (int c = 0; c < C; c++)
            for (int r = 0; r < R + 2; r++) {
                float v = out[c * (R + 2) + r];
                if (c < nc && r < R) bad += !dot_close(v, ref[c][r], tol[c][r]);
                else clobber += v != -12345.0f;
            }
        CHECKF(bad == 0 && clobber == 0, "%s n=%lld isa=%s ncols=%d: gemm_tile %d bad, %d written outside", ts_type_name(t),
               (long long)n, ts_isa_name(isa), nc, bad, clobber);
    }
    free(W);
    free(X);
}

/* ts_gemm (the prefill GEMM: panel kernels for the K-quants, ts_gemm_tile
 * elsewhere) against per-pair reference dots: rows not a multiple of the
 * 32-row panel or the 16-row lane group, 1..C columns (the micro-kernels
 * take 6 or 4, the AMX tiles 32 or 16), rows long enough to cross the packed K segment, extreme
 * quants and activations, odd addresses, nothing written outside the tile. */
static void test_gemm_cols(ts_type t, int64_t n, int C0, int C, int isa, bufs *b);
static void test_gemm(ts_type t, int64_t n, int C, int isa, bufs *b) { test_gemm_cols(t, n, 1, C, isa, b); }
/* columns C0..C of C */
static void test_gemm_cols(ts_type t, int64_t n, int C0, int C, int isa, bufs *b) {
    enum { R = 70, OS = R + 3 };
    static const int nrs[] = {1, 5, 16, 31, 33, 64, 70};
    ts_type p = ts_type_dot_partner(t);
    uint64_t ws = ts_type_row_bytes(t, (uint64_t)n), xs = ts_type_row_bytes(p, (uint64_t)n);
    uint8_t *W = malloc(ws * R + 1), *X = malloc(xs * C + 1);
    uint8_t *w = W + 1, *x = X + 1;
    /* extreme quants only where a panel kernel runs: the 32-element AVX2
     * tiles subtract the offset after the lane products are rounded, so a
     * row of all-zero weights (Q4_0 quants all 8) gives ~1e-7, not 0 */
    int maxq = ts_q_gemm_nsub(t) > 0;
    for (int r = 0; r < R; r++) make_weights(t, maxq && r % 7 == 3 ? SC_MAXQ : r % 2 ? SC_SANE : SC_RANDOM, w + r * ws, n);
    for (int c = 0; c < C; c++) make_acts(t, c == 5 ? SC_MAXQ : SC_RANDOM, x + c * xs, n, b->tmp);
    double *ref = malloc(sizeof(double) * R * C), *tol = malloc(sizeof(double) * R * C);
    float *xf = malloc(sizeof(float) * (size_t)n * C);
    for (int c = 0; c < C; c++) ts_dequant_row_ref(p, x + c * xs, xf + (size_t)c * n, n);
    for (int r = 0; r < R; r++) {
        ts_dequant_row_ref(t, w + r * ws, b->wf, n);
        for (int c = 0; c < C; c++) {
            double mag = 0;
            for (int64_t i = 0; i < n; i++) mag += fabs((double)b->wf[i] * xf[(size_t)c * n + i]);
            ref[r * C + c] = ts_vec_dot_ref(t, n, w + r * ws, x + c * xs);
            tol[r * C + c] = dot_tol(t, n, mag);
        }
    }
    void *scratch = aligned_alloc(64, ts_gemm_scratch_bytes());
    float *out = malloc(sizeof(float) * OS * C);
    int bad = 0, clobber = 0, cases = 0;
    for (size_t k = 0; k < sizeof nrs / sizeof *nrs; k++)
        for (int nc = C0; nc <= C; nc++) {
            int nr = nrs[k];
            for (int i = 0; i < OS * C; i++) out[i] = -12345.0f;
            ts_gemm(t, n, w, ws, nr, x, xs, nc, out, OS, scratch);
            note_upper("gemm", t, isa);
            int b0 = bad;
            for (int c = 0; c < C; c++)
                for (int r = 0; r < OS; r++) {
                    float v = out[c * OS + r];
                    if (c < nc && r < nr) {
                        if (!dot_close(v, ref[r * C + c], tol[r * C + c])) {
                            if (bad - b0 < 2)
                                fprintf(stderr, "  %s n=%lld rows=%d cols=%d [%d,%d]: %.9g vs ref %.9g (tol %.3g)\n",
                                        ts_type_name(t), (long long)n, nr, nc, c, r, v, ref[r * C + c], tol[r * C + c]);
                            bad++;
                        }
                    } else clobber += v != -12345.0f;
                }
            cases++;
        }
    CHECKF(bad == 0 && clobber == 0, "%s n=%lld isa=%s: gemm %d bad, %d written outside (%d shapes)", ts_type_name(t),
           (long long)n, ts_isa_name(isa), bad, clobber, cases);
    free(scratch);
    free(out);
    free(xf);
    free(ref);
    free(tol);
    free(W);
    free(X);
}

/* The AMX GEMM gives the VNNI one's bits for the types with a min (Q4_K,
 * Q5_K, Q2_K: the same integer sums, the same float code after them; for
 * Q6_K and Q3_K the offset leaves the weights, so only test_gemm's tolerance
 * holds). Only where the CPU has both levels. */
/* R weight rows of t and C partner activation rows, n elements each, a
 * GEMM scratch and two (C, R) outputs, for the bit-for-bit GEMM checks
 * below; maxq: extreme quants in every 7th weight row and every 61st
 * activation row. */
typedef struct {
    uint8_t *w, *x;
    uint64_t ws, xs; /* row bytes of w, x */
    void *scratch;
    float *o[2];
} gemm_case;
static gemm_case gemm_case_new(ts_type t, int R, int C, int64_t n, int maxq, bufs *b) {
    gemm_case g;
    g.ws = ts_type_row_bytes(t, (uint64_t)n), g.xs = ts_type_row_bytes(ts_type_dot_partner(t), (uint64_t)n);
    g.w = malloc(g.ws * (uint64_t)R), g.x = malloc(g.xs * (uint64_t)C);
    for (int r = 0; r < R; r++) make_weights(t, maxq && r % 7 == 3 ? SC_MAXQ : r % 2 ? SC_SANE : SC_RANDOM, g.w + r * g.ws, n);
    for (int c = 0; c < C; c++) make_acts(t, maxq && c % 61 == 5 ? SC_MAXQ : SC_RANDOM, g.x + c * g.xs, n, b->tmp);
    g.scratch = aligned_alloc(64, ts_gemm_scratch_bytes());
    for (int l = 0; l < 2; l++) g.o[l] = malloc(sizeof(float) * (size_t)R * (size_t)C);
    return g;
}
static void gemm_case_free(gemm_case *g) { free(g->o[0]), free(g->o[1]), free(g->scratch), free(g->w), free(g->x); }

static void test_gemm_amx_bits(bufs *b) {
    if (ts_kernels_isa_max() < TS_ISA_AMX) {
        printf("%-60s not run: no AMX level on this CPU\n", "amx gemm = avx512 gemm, bit for bit");
        return;
    }
    static const ts_type ts[] = {TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q2_K};
    /* on the tiles: a block of TS_GP_AMX_TOK tokens and one of 16, then 5 to vk */
    enum { R = 70, C = TS_GP_AMX_TOK + 21, N = 9 * 256 };
    int diff = 0;
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) {
        const ts_type t = ts[k];
        gemm_case g = gemm_case_new(t, R, C, N, 1, b);
        for (int l = 0; l < 2; l++) {
            CHECK(ts_kernels_set_isa(l ? TS_ISA_AMX : TS_ISA_AVX512) == 0);
            ts_gemm(t, N, g.w, g.ws, R, g.x, g.xs, C, g.o[l], R, g.scratch);
        }
        int d = memcmp(g.o[0], g.o[1], sizeof(float) * R * C) != 0;
        CHECKF(!d, "%s: the amx gemm's bits differ from the avx512 one's", ts_type_name(t));
        diff += d;
        gemm_case_free(&g);
    }
    printf("%-60s %s\n", "amx gemm = avx512 gemm, bit for bit (Q4_K, Q5_K, Q2_K)", diff ? "DIFFERS" : "same");
    /* which kernels ran: Q6_K's tiles round apart from the AVX-512 kernels
     * (the offset leaves the weights), so its bits differ from
     * TS_GP_AMX_MIN_COLS_OFF tokens and are the same below */
    {
        const ts_type t = TS_TYPE_Q6_K;
        gemm_case g = gemm_case_new(t, R, C, N, 0, b);
        int same[2];
        for (int k = 0; k < 2; k++) {
            const int nc = ts_q_gemm_amx_min_cols(t) - 1 + k;
            for (int l = 0; l < 2; l++) {
                CHECK(ts_kernels_set_isa(l ? TS_ISA_AMX : TS_ISA_AVX512) == 0);
                ts_gemm(t, N, g.w, g.ws, R, g.x, g.xs, nc, g.o[l], R, g.scratch);
            }
            same[k] = memcmp(g.o[0], g.o[1], sizeof(float) * R * (size_t)nc) == 0;
        }
        CHECKF(same[0] && !same[1], "Q6_K at the amx level: %d tokens %s the avx512 bits, %d tokens %s", ts_q_gemm_amx_min_cols(t) - 1,
               same[0] ? "gives" : "does not give", ts_q_gemm_amx_min_cols(t), same[1] ? "gives them too (the tiles did not run)" : "does not");
        printf("%-60s %s\n", "amx level: avx512 kernels under TS_GP_AMX_MIN_COLS_OFF tokens", same[0] && !same[1] ? "yes" : "NO");
        gemm_case_free(&g);
    }
}

/* The panel kernels for Q4_K/Q5_K (AVX2, and VNNI since session 38) take
 * the activation sums per 32 of a call's tokens computed at once where they
 * fit TS_GP_BP_BYTES, else per token group and segment: a call over 487
 * tokens (past the room) against the same columns 16 at a time and 101 at
 * a time (within it), bit for bit, at every panel level of the CPU. At the
 * AMX level the 487 run 480 on the tiles and a tail of 7 through the VNNI
 * kernel (sums per group), the 16s the VNNI kernel alone (under the
 * threshold), the 101s 96 on the tiles and 5 through the VNNI kernel (sums
 * at once); the min types' tiles give the VNNI kernel's bits.
 * test_gemm's other calls all fit. */
static void test_gemm_sums(bufs *b) {
    static const ts_type ts[] = {TS_TYPE_Q4_K, TS_TYPE_Q5_K};
    enum { R = 40, C = 487, N = 9 * 256 };
    static const int chunk[2] = {16, 101};
    CHECK((uint64_t)C * (N / 256) * 16 > TS_GP_BP_BYTES && (uint64_t)chunk[1] * (N / 256) * 16 <= TS_GP_BP_BYTES);
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++)
        CHECK(chunk[1] % 16 && chunk[1] >= ts_q_gemm_amx_min_cols(ts[k]) && chunk[0] < ts_q_gemm_amx_min_cols(ts[k]) && C % 16);
    const int max_isa = ts_kernels_isa_max();
    char levels[64] = "";
    int diff = 0;
    for (int isa = TS_ISA_AVX2; isa <= max_isa; isa++) {
        CHECK(ts_kernels_set_isa(isa) == 0);
        snprintf(levels + strlen(levels), sizeof levels - strlen(levels), "%s%s", *levels ? ", " : "", ts_isa_name(isa));
        for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) {
            const ts_type t = ts[k];
            gemm_case g = gemm_case_new(t, R, C, N, 1, b);
            ts_gemm(t, N, g.w, g.ws, R, g.x, g.xs, C, g.o[0], R, g.scratch);
            for (int h = 0; h < 2; h++) {
                for (int c0 = 0; c0 < C; c0 += chunk[h]) {
                    const int nc = C - c0 < chunk[h] ? C - c0 : chunk[h];
                    ts_gemm(t, N, g.w, g.ws, R, g.x + (uint64_t)c0 * g.xs, g.xs, nc, g.o[1] + (size_t)c0 * R, R, g.scratch);
                }
                int d = memcmp(g.o[0], g.o[1], sizeof(float) * R * C) != 0;
                CHECKF(!d, "%s at %s: the gemm differs between its two ways of taking the activation sums (%d a call)",
                       ts_type_name(t), ts_isa_name(isa), chunk[h]);
                diff += d;
            }
            gemm_case_free(&g);
        }
    }
    ts_kernels_set_isa(max_isa);
    if (!*levels) {
        printf("%-60s not run: no AVX2 level on this CPU\n", "gemm: activation sums at once = per group");
        return;
    }
    printf("%-60s %s (%s)\n", "gemm: activation sums at once = per group (Q4_K, Q5_K)", diff ? "DIFFERS" : "same", levels);
}

/* The K-quant dots at the avx512 level take the VNNI step (quant_x86.h).
 * Tiles of 2-4 columns (ts_gemm_tile) hold the same integers in the same
 * lanes as the AVX2 level's maddubs + madd, so the same bits. One column
 * (ts_vec_dot_rows) packs chunk pairs: each super-block's integer is the
 * same, spread over other lanes, so the row's float sum may differ in its
 * last bits: it must stay within dot_tol of the AVX2 dot's (the rounding of
 * the terms, as every dot against the reference). Every 7th weight row and
 * 61st activation row hold extreme quants: a lane's 4 products at their
 * largest, where the VNNI step's i16 argument (and the pair's packssdw) is
 * tightest (Q6_K). */
static void test_kdot_vnni_bits(bufs *b) {
    const char *what = "k-quant dots: avx512 (VNNI) = avx2 (tiles bit for bit)";
    if (ts_kernels_isa_max() < TS_ISA_AVX512 || !__builtin_cpu_supports("avx512vnni")) {
        printf("%-60s not run: no AVX-512 VNNI on this CPU\n", what);
        return;
    }
    static const ts_type ts[] = {TS_TYPE_Q2_K, TS_TYPE_Q3_K, TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K};
    enum { R = 29, C = 4, N = 7 * 256 };
    int diff = 0, far = 0, last_bits = 0, rows1 = 0;
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) {
        const ts_type t = ts[k];
        const ts_type p = ts_type_dot_partner(t);
        gemm_case g = gemm_case_new(t, R, 122, N, 1, b); /* activation rows 5 and 66 extreme */
        for (int c0 = 0; c0 + C <= 122; c0 += 61) {
            const uint8_t *x = g.x + (uint64_t)(c0 + 5) * g.xs; /* rows c0 + 5 .. c0 + 8 */
            for (int nc = 1; nc <= C; nc++) {
                for (int l = 0; l < 2; l++) {
                    CHECK(ts_kernels_set_isa(l ? TS_ISA_AVX512 : TS_ISA_AVX2) == 0);
                    if (nc == 1) ts_vec_dot_rows(t, N, g.w, g.ws, R, x, g.o[l]);
                    else ts_gemm_tile(t, N, g.w, g.ws, R, x, g.xs, nc, g.o[l], R);
                }
                if (nc == 1) {
                    ts_dequant_row_ref(p, x, b->xf, N);
                    for (int r = 0; r < R; r++) {
                        ts_dequant_row_ref(t, g.w + (uint64_t)r * g.ws, b->wf, N);
                        double mag = 0;
                        for (int64_t i = 0; i < N; i++) mag += fabs((double)b->wf[i] * b->xf[i]);
                        const int close = dot_close(g.o[1][r], g.o[0][r], dot_tol(t, N, mag));
                        CHECKF(close, "%s, one column, activation row %d, weight row %d: avx512 %.9g against avx2 %.9g (tol %.3g)",
                               ts_type_name(t), c0 + 5, r, g.o[1][r], g.o[0][r], dot_tol(t, N, mag));
                        far += !close;
                        last_bits += memcmp(&g.o[0][r], &g.o[1][r], sizeof(float)) != 0;
                        rows1++;
                    }
                    continue;
                }
                int d = memcmp(g.o[0], g.o[1], sizeof(float) * R * (size_t)nc) != 0;
                CHECKF(!d, "%s, %d column(s) from row %d: the avx512 dot's bits differ from the avx2 one's", ts_type_name(t), nc,
                       c0 + 5);
                diff += d;
            }
        }
        gemm_case_free(&g);
    }
    ts_kernels_set_isa(ts_kernels_isa_max());
    printf("%-60s %s; one column: %d of %d rows in their last bits, %d beyond the tolerance\n", what,
           diff ? "DIFFERS" : "same", last_bits, rows1, far);
}

static void test_quantize_acts(int isa, bufs *b) {
    static const ts_type acts[] = {TS_TYPE_Q8_0, TS_TYPE_Q8_K, TS_TYPE_F16, TS_TYPE_BF16};
    int64_t n = 33 * 256;
    uint64_t cap = ts_type_row_bytes(TS_TYPE_F32, (uint64_t)n);
    uint8_t *q1 = malloc(cap), *q2 = malloc(cap);
    for (int k = 0; k < 4; k++)
        for (int sc = 0; sc < 4; sc++) {
            for (int64_t i = 0; i < n; i++) {
                b->tmp[i] = gauss() * (sc == 1 ? 1e-30f : sc == 2 ? 1e20f : 1.0f);
                if (sc == 3 && (i / 256) % 2) b->tmp[i] = 0; /* all-zero blocks */
                if (sc == 3 && i % 97 == 0) b->tmp[i] = (i & 1 ? 0.5f : -0.5f) * 127.0f / 127.0f; /* ties */
            }
            uint64_t bytes = ts_type_row_bytes(acts[k], (uint64_t)n);
            ts_quantize_row_ref(acts[k], b->tmp, q1, n);
            ts_quantize_row(acts[k], b->tmp, q2, n);
            CHECKF(!memcmp(q1, q2, bytes), "quantize %s case %d isa=%s differs from ref", ts_type_name(acts[k]), sc,
                   ts_isa_name(isa));
            if (acts[k] == TS_TYPE_Q8_0 || acts[k] == TS_TYPE_Q8_K) {
                /* partner contract: quants in [-127, 127], bsums exact */
                int bad = 0;
                if (acts[k] == TS_TYPE_Q8_0) {
                    const ts_block_q8_0 *y = (const ts_block_q8_0 *)q1;
                    for (int64_t i = 0; i < n / 32; i++)
                        for (int j = 0; j < 32; j++) bad += y[i].qs[j] == -128;
                } else {
                    const ts_block_q8_K *y = (const ts_block_q8_K *)q1;
                    for (int64_t i = 0; i < n / 256; i++)
                        for (int j = 0; j < 16; j++) {
                            int s = 0;
                            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l], bad += y[i].qs[16 * j + l] == -128;
                            bad += s != y[i].bsums[j];
                        }
                }
                CHECKF(bad == 0, "quantize %s violates the partner contract (%d)", ts_type_name(acts[k]), bad);
            }
        }
    free(q1);
    free(q2);
}

/* A test that cannot fail is a defect: the comparator must reject a result
 * off by a flipped quant or by more than the tolerance. */
static void test_self_check(bufs *b) {
    int64_t n = 256;
    make_weights(TS_TYPE_Q4_K, SC_SANE, b->w, n);
    make_acts(TS_TYPE_Q4_K, SC_SANE, b->x, n, b->tmp);
    ts_dequant_row_ref(TS_TYPE_Q4_K, b->w, b->wf, n);
    ts_dequant_row_ref(TS_TYPE_Q8_K, b->x, b->xf, n);
    double mag = 0;
    for (int64_t i = 0; i < n; i++) mag += fabs((double)b->wf[i] * b->xf[i]);
    double tol = dot_tol(TS_TYPE_Q4_K, n, mag);
    float good = ts_vec_dot(TS_TYPE_Q4_K, n, b->w, b->x);
    CHECK(dot_close(good, ts_vec_dot_ref(TS_TYPE_Q4_K, n, b->w, b->x), tol));
    CHECK(!dot_close(good + 2 * tol, ts_vec_dot_ref(TS_TYPE_Q4_K, n, b->w, b->x), tol));
    /* flip one quant nibble where the activation is largest */
    ts_block_q4_K *blk = (ts_block_q4_K *)b->w;
    int at = 0;
    for (int i = 0; i < 32; i++)
        if (fabsf(b->xf[i]) > fabsf(b->xf[at])) at = i;
    blk->qs[at] ^= 0x08;
    float bad = ts_vec_dot(TS_TYPE_Q4_K, n, b->w, b->x);
    CHECKF(!dot_close(bad, good, tol), "a flipped quant went unnoticed (%g vs %g, tol %g)", bad, good, tol);
    /* and a fixture with one corrupted float must be rejected */
    float a = 1.0f, c = nextafterf(1.0f, 2.0f);
    CHECK(!same_float(a, c));
}

/* The vector packers (Q4_K, Q5_K, Q6_K vectorized) against the scalar one:
 * the AVX2 kernels' (sc_pair 1) and the VNNI kernels' (sc_pair 0). The same
 * bytes for every row count a unit can have (rows past nrows zero), 1..8
 * super-blocks from an offset, random block bytes (any bytes are a block:
 * the scales' and d's decodes are the shared ones). */
typedef void (*pack_fn)(ts_type, const uint8_t *, uint64_t, int, int64_t, int, uint8_t *);
static void test_pack_vec(const char *name, pack_fn pack, int sc_pair) {
    static const ts_type types[] = {TS_TYPE_Q4_K, TS_TYPE_Q5_K, TS_TYPE_Q6_K, TS_TYPE_Q3_K};
    static const int nrs[] = {1, 7, 8, 9, 15, 16, 17, 24, 31, 32};
    static const int nss[] = {1, 3, 8};
    int cases = 0, bad = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const ts_type t = types[ti];
        const uint64_t bb = ts_type_get(t)->block_bytes, ws = 10 * bb + 3; /* an odd row stride */
        const size_t sbb = TS_GP_SB_BYTES(ts_q_gemm_nsub(t)), len = (size_t)TS_GP_KSEG * sbb;
        uint8_t *w = malloc(ws * TS_GP_ROWS + 1), *a = aligned_alloc(64, len), *v = aligned_alloc(64, len);
        uint32_t st = 0x9e3779b9u + (uint32_t)ti;
        for (uint64_t i = 0; i < ws * TS_GP_ROWS + 1; i++) {
            st = st * 1664525u + 1013904223u;
            w[i] = (uint8_t)(st >> 24);
        }
        for (size_t k = 0; k < sizeof nrs / sizeof *nrs; k++)
            for (size_t j = 0; j < sizeof nss / sizeof *nss; j++)
                for (int sb0 = 0; sb0 < 2; sb0++) {
                    memset(a, 0xab, len), memset(v, 0xab, len);
                    ts_q_gemm_pack(t, w + 1, ws, nrs[k], sb0, nss[j], sc_pair, a);
                    pack(t, w + 1, ws, nrs[k], sb0, nss[j], v);
                    if (memcmp(a, v, len)) {
                        size_t o = 0;
                        while (a[o] == v[o]) o++;
                        if (bad < 3)
                            fprintf(stderr, "  %s %s rows=%d ns=%d sb0=%d: panels differ first at byte %zu (%02x vs %02x)\n", name,
                                    ts_type_name(t), nrs[k], nss[j], sb0, o, a[o], v[o]);
                        bad++;
                    }
                    cases++;
                }
        free(w), free(a), free(v);
    }
    CHECKF(bad == 0, "%s panel packer: %d of %d cases differ from the scalar packer", name, bad, cases);
    char what[96];
    snprintf(what, sizeof what, "%s panel packer = scalar packer (Q4_K, Q5_K, Q6_K; Q3_K)", name);
    printf("%-60s %d cases, %d differ\n", what, cases, bad);
}

static void test_pack_vecs(void) {
#if defined(__x86_64__)
    if (ts_kernels_isa_max() < TS_ISA_AVX2) printf("%-60s not run: no AVX2 on this CPU\n", "avx2 panel packer = scalar packer");
    else test_pack_vec("avx2", ts_q_gemm_pack_avx2, 1);
    /* the VNNI kernels' packer: where the dispatcher would run them (quant.c:
     * the AVX-512 level and CPUID.(7,0):ECX[11]) */
    unsigned a, b, c, d;
    if (ts_kernels_isa_max() < TS_ISA_AVX512 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((c >> 11) & 1u))
        printf("%-60s not run: no AVX-512 VNNI on this CPU\n", "avx512 panel packer = scalar packer");
    else test_pack_vec("avx512", ts_q_gemm_pack_avx512, 0);
#endif
}

int main(void) {
    static const char *fixtures[] = {"F16.bin",  "BF16.bin", "F16_round.bin", "F16_round2.bin", "BF16_round.bin",
                                     "Q4_0.bin", "Q4_1.bin", "Q5_0.bin",      "Q5_1.bin",       "Q8_0.bin",
                                     "Q2_K.bin", "Q3_K.bin", "Q4_K.bin",      "Q5_K.bin",       "Q6_K.bin",
                                     "IQ4_NL.bin", "MXFP4.bin"};
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) test_fixture(fixtures[i]);
    test_conversions();

    int64_t nmax = 70 * 256;
    bufs b;
    b.w = malloc(ts_type_row_bytes(TS_TYPE_F32, (uint64_t)nmax));
    b.x = malloc(ts_type_row_bytes(TS_TYPE_Q8_K, (uint64_t)nmax) + ts_type_row_bytes(TS_TYPE_F32, (uint64_t)nmax));
    b.wf = malloc(sizeof(float) * (size_t)nmax);
    b.xf = malloc(sizeof(float) * (size_t)nmax);
    b.tmp = malloc(sizeof(float) * (size_t)nmax);

    int max_isa = ts_kernels_isa_max();
    printf("kernels: %s (max %s)\n", ts_kernels_isa(), ts_isa_name(max_isa));
    static const int nblocks[] = {1, 3, 7, 33};
    for (int isa = 0; isa <= max_isa; isa++) {
        CHECK(ts_kernels_set_isa(isa) == 0);
        for (int ti = 0; ti < NTYPES; ti++) {
            ts_type t = all_types[ti];
            CHECK(ts_type_supported(t));
            int be = (int)ts_type_get(t)->block_elems;
            for (int k = 0; k < 4; k++) {
                /* float rows: odd lengths, not multiples of the SIMD width */
                int64_t n = be == 1 ? (int64_t)nblocks[k] * 37 : (int64_t)nblocks[k] * be;
                for (int sc = 0; sc < SC_COUNT; sc++)
                    for (int rep = 0; rep < 3; rep++) test_dot_case(t, n, sc, isa, &b);
            }
            test_rows_tile(t, be == 1 ? 75 : 3 * be, isa, &b);
            test_rows_tile(t, be == 1 ? 8 : be, isa, &b);
            /* 32-element quants: long rows cross the AVX2 kernels' 512-block
             * activation segments (odd block count: pair loop + tail) */
            if (be == 32) test_rows_tile(t, 545 * 32, isa, &b);
            /* prefill GEMM: one block, and (K-quants) past the 8-super-block
             * packed segment; 32-element types at n not a multiple of 256 */
            test_gemm(t, be == 1 ? 37 : be, 17, isa, &b);
            test_gemm(t, be == 1 ? 300 : be == 32 ? 37 * 32 : 9 * 256, 17, isa, &b);
            /* the AMX kernels (from TS_GP_AMX_MIN_COLS(_OFF) tokens, the AVX-512
             * ones below) take whole 16s of tokens on the tiles, then vk */
            if (ts_q_gemm_nsub(t)) test_gemm(t, 9 * 256, ts_q_gemm_amx_min_cols(t) + 5, isa, &b);
            if (ts_q_gemm_nsub(t) && isa == TS_ISA_AMX) {
                const int c0 = ts_q_gemm_amx_min_cols(t);
                test_gemm_cols(t, 9 * 256, c0 - 2, c0 + 21, isa, &b);
            }
            /* and past one block of gathered activations (TS_GP_AMX_TOK):
             * one block and 14 or 15 tokens to vk, then a second block of 16
             * with none or one */
            if (ts_q_gemm_nsub(t) && isa == TS_ISA_AMX) test_gemm_cols(t, 9 * 256, TS_GP_AMX_TOK + 14, TS_GP_AMX_TOK + 17, isa, &b);
        }
        test_quantize_acts(isa, &b);
        test_self_check(&b);
    }
    /* said apart: a CPU that cannot report XINUSE checks nothing here */
    printf("upper ymm/zmm state after the kernels: %d checks, %d dirty%s\n", upper_checked, upper_bad,
           upper_checked ? "" : " (XGETBV(1) unavailable: not checked)");
    test_gemm_amx_bits(&b);
    test_gemm_sums(&b);
    test_kdot_vnni_bits(&b);
    test_pack_vecs();
    CHECK(ts_kernels_set_isa(max_isa + 1) == -1);
    ts_kernels_set_isa(max_isa);
    CHECK(!ts_type_supported(TS_TYPE_IQ2_XXS) && ts_type_dot_partner(TS_TYPE_IQ2_XXS) == TS_TYPE_COUNT);
    free(b.w);
    free(b.x);
    free(b.wf);
    free(b.xf);
    free(b.tmp);
    return tu_finish();
}
