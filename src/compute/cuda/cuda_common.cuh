/* Shared plumbing of the CUDA kernel files: error checks that name file:line,
 * exact float helpers usable on host and device (the decoders are also
 * compiled for the host and checked there against the CPU references), and
 * unaligned byte readers. */
#ifndef TS_CUDA_COMMON_CUH
#define TS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "base/base.h"
#include "tensor/quant.h"
#include "tensor/types.h"
}
#include "compute/cuda/cuda_kernels.h"

/* Device code paths: compiled for the GPU, or for the CPU emulation harness
 * (tests/cuda/emu), which runs the kernels on host threads; the plain host
 * compile (test_cuda_decode) takes the portable paths. */
#if defined(__CUDA_ARCH__) || defined(TS_CUDA_EMU)
#define TS_DEVICE_PATH 1
#else
#define TS_DEVICE_PATH 0
#endif

#define TS_HD __host__ __device__ __forceinline__
#define TS_DEV __device__ __forceinline__

/* ---- errors ---- */

static inline ts_status ts_cuda_fail(cudaError_t e, const char *what, const char *file, int line) {
    return ts_fail(TS_ERR_DEVICE, "%s:%d: %s: %s (%s)", file, line, what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Returns from the enclosing function on a failed runtime call. */
#define TS_CUDA_CHECK(call)                                                           \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) return ts_cuda_fail(e_, #call, __FILE__, __LINE__);    \
    } while (0)

/* After a launch: configuration errors and sticky errors of earlier work. */
#define TS_CUDA_LAUNCHED(name)                                                        \
    do {                                                                              \
        cudaError_t e_ = cudaGetLastError();                                          \
        if (e_ != cudaSuccess) return ts_cuda_fail(e_, "launch " name, __FILE__, __LINE__); \
    } while (0)

#define TS_ARG_CHECK(cond, ...)                                                       \
    do {                                                                              \
        if (!(cond)) return ts_fail(TS_ERR_ARG, __VA_ARGS__);                         \
    } while (0)

static inline cudaStream_t ts_stream(void *s) { return (cudaStream_t)s; }

template <typename T> TS_HD T ts_cdiv(T a, T b) { return (a + b - 1) / b; }

/* ---- exact float arithmetic ----
 * Round-to-nearest without contraction into FMA, so decoders reproduce the
 * CPU's dequantized values bit for bit (nvcc contracts a*b+c by default). */
TS_HD float fmul_rn(float a, float b) {
#if TS_DEVICE_PATH
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
TS_HD float fadd_rn(float a, float b) {
#if TS_DEVICE_PATH
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
TS_HD float fsub_rn(float a, float b) {
#if TS_DEVICE_PATH
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

TS_HD float bits_to_f32(uint32_t u) {
#if TS_DEVICE_PATH
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

TS_HD uint32_t f32_to_bits(float f) {
#if TS_DEVICE_PATH
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

/* f16 -> f32 is exact in hardware; the host side uses the CPU reference. */
TS_HD float h2f(uint16_t h) {
#if TS_DEVICE_PATH
    return __half2float(__ushort_as_half(h));
#else
    return ts_f16_to_f32(h);
#endif
}

/* f32 -> f16 bits, round to nearest even (ts_f32_to_f16). */
TS_HD uint16_t f2h(float f) {
#if TS_DEVICE_PATH
    return __half_as_ushort(__float2half_rn(f));
#else
    return ts_f32_to_f16(f);
#endif
}

TS_HD float bf2f(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

/* 2^(e-128), the halved E8M0 scale of MXFP4 (ts_e8m0_half_to_f32). */
TS_HD float e8m0_half(uint8_t e) { return bits_to_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23); }

/* Round to nearest even (the CPU's lrintf under the default rounding mode). */
TS_HD int rne_int(float v) {
#if TS_DEVICE_PATH
    return __float2int_rn(v);
#else
    return (int)lrintf(v);
#endif
}

/* ---- byte readers ----
 * Quantized blocks sit at any byte offset (18-, 34-, 210-byte blocks), so
 * reads go through these. A is the alignment of p the caller can guarantee;
 * on the device a 2-aligned 32-bit read is two 16-bit reads, an unaligned
 * one two aligned reads and a funnel shift (the word after p is read:
 * buffers keep 4 bytes of slack). The aligned address is p minus its
 * misalignment, pointer arithmetic on p: a pointer rebuilt from an integer
 * loses its address space, and the decoders' reads of the shared-memory
 * staging then compile to generic 64-bit loads (LD.E, with their address
 * arithmetic: ~8 instructions a word) instead of LDS. */
TS_HD uint32_t rd8(const uint8_t *p) { return p[0]; }
/* p 2-aligned on the device: every block type with 16-bit fields has an even
 * block size and rows start 16-aligned (one 16-bit load, not two bytes and a
 * permute) */
TS_HD uint32_t rd16(const uint8_t *p) {
#if TS_DEVICE_PATH
    return *(const uint16_t *)p;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

template <int A> TS_HD uint32_t rd32(const uint8_t *p) {
#if TS_DEVICE_PATH
    if (A % 4 == 0) return *(const uint32_t *)p;
    if (A % 2 == 0) return (uint32_t)*(const uint16_t *)p | (uint32_t)*(const uint16_t *)(p + 2) << 16;
    const uint32_t mis = (uint32_t)(uintptr_t)p & 3u;
    const uint32_t *w = (const uint32_t *)(p - mis);
    return __funnelshift_r(w[0], w[1], mis * 8);
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}

/* Per-byte helpers for the int8 path (host fallbacks for the host checks). */
TS_HD int dp4a(uint32_t a, uint32_t b, int c) {
#if TS_DEVICE_PATH
    return __dp4a((int)a, (int)b, c);
#else
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

/* c + the dot product of a's four unsigned bytes with b's four signed ones
 * (dp4a's mixed-sign form: weights 0..255 against int8 activations). */
TS_HD int dp4a_us(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    for (int i = 0; i < 4; i++) c += (int)(uint8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

/* c + a.lo16 * b.byte0 + a.hi16 * b.byte1 (dp2a_lo) or bytes 2, 3 of b
 * (dp2a_hi), all signed: two 16-bit values scaled by two int8 in one op. */
TS_HD int dp2a_lo(uint32_t a, uint32_t b, int c) {
#if TS_DEVICE_PATH
    return __dp2a_lo((int)a, (int)b, c);
#else
    return c + (int)(int16_t)a * (int)(int8_t)b + (int)(int16_t)(a >> 16) * (int)(int8_t)(b >> 8);
#endif
}
TS_HD int dp2a_hi(uint32_t a, uint32_t b, int c) {
#if TS_DEVICE_PATH
    return __dp2a_hi((int)a, (int)b, c);
#else
    return dp2a_lo(a, b >> 16, c);
#endif
}

/* Bytes of {a, b} (a's 0-3, b's 4-7) picked by the selector's four nibbles,
 * each 0..7 (bit 3, prmt's sign replication, must be clear). */
TS_HD uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDA_ARCH__)
    /* prmt itself: __byte_perm masks the selector to its 3-bit fields first,
     * an op per call when the selector is not a constant */
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
#else
    const uint64_t v = (uint64_t)b << 32 | a;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((sel >> (4 * i)) & 7))) & 255) << (8 * i);
    return r;
#endif
}

/* ---- warp reductions ---- */
#if defined(__CUDACC__) || defined(TS_CUDA_EMU)
TS_DEV float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
TS_DEV double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* RoPE as the CPU computes it (no FMA contraction): the position's angle
 * pos * freq, its cos and sin times mscale, and a pair (x0, x1) rotated to
 * (x0 c - x1 s, x0 s + x1 c). One definition for rope_kv_kernel and the
 * attention kernel that does its work, so the two give the same bits. */
TS_DEV float2 rope_cs(float pos, float freq, float mscale) {
    const float th = fmul_rn(pos, freq);
    return make_float2(fmul_rn(cosf(th), mscale), fmul_rn(sinf(th), mscale));
}
TS_DEV float2 rope_rot(float x0, float x1, float2 cs) {
    return make_float2(fsub_rn(fmul_rn(x0, cs.x), fmul_rn(x1, cs.y)), fadd_rn(fmul_rn(x0, cs.y), fmul_rn(x1, cs.x)));
}

/* 1/rms from a sum of squares in double, as the CPU computes it:
 * (float)(1 / sqrt(ss / n + eps)) */
TS_DEV float rms_scale(double ss, int64_t n, float eps) { return (float)(1.0 / sqrt(ss / (double)n + (double)eps)); }
/* This thread's part of a row's sum of squares, in double: the row's float4s
 * tid, tid + nthreads, ... (rows start 16-aligned: n % 32 == 0), added in
 * that order; the block adds the parts. Every kernel that normalizes a row
 * inside itself sums this way. The loads go out four at a time before any is
 * added, missing words as zeros (+0 leaves the sum's bits as they are): with
 * `#pragma unroll 4` on the plain loop, a thread whose count was not a
 * multiple of 4 ran the rest in the unroll's remainder loop, one L2 round
 * trip a word, and q8_quant's 7B rows (896 words on 256 threads) had half the
 * block wait three of them in series before its barrier. */
TS_DEV double row_sumsq_part(const float *row, int64_t n, int tid, int nthreads) {
    const float4 *r4 = (const float4 *)row;
    const int64_t n4 = n / 4;
    double ss = 0;
    for (int64_t i = tid; i < n4; i += 4 * (int64_t)nthreads) {
        float4 q[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t k = i + (int64_t)j * nthreads;
            q[j] = k < n4 ? r4[k] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            ss += (double)q[j].x * q[j].x + (double)q[j].y * q[j].y + (double)q[j].z * q[j].z + (double)q[j].w * q[j].w;
    }
    return ss;
}
TS_DEV float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
TS_DEV int warp_sum_i(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <int N> struct Log2 {
    static constexpr int v = N <= 1 ? 0 : 1 + Log2<N / 2>::v;
};
template <> struct Log2<1> {
    static constexpr int v = 0;
};
/* Sums of the warp's N lane values v[0..N-1] (N a power of 2 <= 32) with
 * N - 1 + 5 - log2 N shuffles instead of 5 N (N = 4: 6 instead of 20; N =
 * 16: 16 instead of 80): each halving step keeps one half of the values in a
 * lane and sends the other half to its partner. The additions are warp_sum's
 * (partners 16, 8, 4, 2, 1, each sum a + b with a the lane's own), so every
 * sum is bit-identical to warp_sum(v[j]). Value j's sum ends in lanes
 * j << (5 - log2 N) up to the next value's (returned there); v is clobbered. */
template <int N> TS_DEV float warp_sum_n(float (&v)[N], int lane) {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "warp_sum_n: N a power of 2 <= 32");
#pragma unroll
    for (int h = N / 2, o = 16; h >= 1; h >>= 1, o >>= 1) {
        const bool up = (lane & o) != 0;
#pragma unroll
        for (int i = 0; i < h; i++) {
            const float keep = up ? v[i + h] : v[i], send = up ? v[i] : v[i + h];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
    float t = v[0];
#pragma unroll
    for (int o = 16 / N; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}
#endif

/* ---- launches: programmatic dependent launch (PDL) ----
 *
 * Why: a decode token is ~300 short kernels in one graph, each bound by
 * latency (launch, block start, the first DRAM round trip), not by its work.
 * With PDL (sm_90+) a kernel's blocks are launched while its predecessor in
 * the stream drains; they run their prologue (address arithmetic, L2
 * prefetch of weights, which nothing in a token writes) and wait in
 * ts_pdl_enter until the predecessor has finished and its writes are
 * visible. So every kernel launched through ts_launch must call
 * ts_pdl_enter before it reads anything another kernel writes and before it
 * writes anything: then each kernel completes only after its predecessor, and
 * stream order holds transitively, as without PDL. Non-kernel nodes (copies,
 * event waits, cuBLAS) keep full dependencies.
 *
 * Whether launches carry the attribute is the calling host thread's setting
 * (ts_cuda_set_launch_pdl), as the current device is: the backend sets it
 * from its options at every op's entry; default on. */
#if defined(__CUDACC__) || defined(TS_CUDA_EMU)
#ifndef TS_PDL_TRIGGER_FIRST
/* 1: let the next kernel launch before this one has waited (two kernels
 * ahead). Measured slower on the H200 (SmolLM2 tg128 1,089 against 1,174, 7B
 * 253 against 279: bench/results/2026-12-01-h200-pdl): the early blocks take
 * SM slots the running kernel's blocks still need. */
#define TS_PDL_TRIGGER_FIRST 0
#endif
TS_DEV void ts_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#if TS_PDL_TRIGGER_FIRST
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#else
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#endif
}

/* Asynchronous global -> shared copies (sm_80+ cp.async, bypassing L1): 16
 * bytes between 16-aligned addresses (all 16 source bytes must be readable).
 * A thread's copies since its last commit form one group;
 * ts_cp_async_wait<N> returns when at most N of its groups are still in
 * flight. Other threads see the bytes only after a barrier that follows
 * their writers' waits (__syncwarp within a warp). The emulation and host
 * compiles copy at once. */
TS_DEV void ts_cp_async16(void *dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
#else
    memcpy(dst, src, 16);
#endif
}
TS_DEV void ts_cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> TS_DEV void ts_cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* An L2 prefetch of the 128-byte line at p (a hint: never changes results). */
TS_DEV void ts_prefetch_l2(const void *p) {
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}
#endif

#if defined(TS_CUDA_EMU)
#define ts_launch emu::launch /* the emulation runs launches in order: PDL has nothing to do */
#elif defined(__CUDACC__)
bool ts_cuda_launch_pdl(void);

template <typename... P> struct TsLaunch {
    void (*k)(P...);
    dim3 g, b;
    size_t smem;
    cudaStream_t s;
    /* Errors surface through cudaGetLastError (TS_CUDA_LAUNCHED). */
    template <typename... A> void operator()(A &&...args) const {
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = g;
        cfg.blockDim = b;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = s;
        cfg.attrs = at;
        cfg.numAttrs = ts_cuda_launch_pdl() ? 1 : 0;
        (void)cudaLaunchKernelEx(&cfg, k, static_cast<A &&>(args)...);
    }
};
/* ts_launch(&kernel, grid, block, smem, stream)(args...): kernel<<<grid,
 * block, smem, stream>>>(args...) with the PDL attribute when it is on. */
template <typename... P> TsLaunch<P...> ts_launch(void (*k)(P...), dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0) {
    return TsLaunch<P...>{k, g, b, smem, s};
}
#endif

/* Multiprocessors of the current device (cached per device id). */
ts_status ts_cuda_sm_count(int *n);

/* act(g) * u with the CPU's formulas and rounding (act_mul; also folded
 * into the int8 quantization of the down projection's input) */
TS_DEV float silu_mul(float g, float u) { return fmul_rn(__fdiv_rn(g, fadd_rn(1.0f, expf(-g))), u); }

TS_DEV float gelu_mul(float g, float u) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    /* CPU: 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) * up, left to right */
    const float g3 = fmul_rn(fmul_rn(fmul_rn(0.044715f, g), g), g);
    const float t = tanhf(fmul_rn(c, fadd_rn(g, g3)));
    return fmul_rn(fmul_rn(fmul_rn(0.5f, g), fadd_rn(1.0f, t)), u);
}

#endif
