/* A CPU emulation of the CUDA execution model, for checking the kernels'
 * logic on a machine without a GPU (tests/cuda/emu/run.sh). Not a substitute
 * for the GPU run: it proves indexing, synchronization structure and results,
 * not speed, memory ordering or the hardware's arithmetic.
 *
 * Every CUDA thread of a block is a host thread; __syncthreads is a barrier
 * of the block, __syncwarp a barrier of the warp, shuffles exchange through a
 * per-warp slot array between two warp barriers. Blocks run one after
 * another, so __shared__ arrays are function-local statics. Threads that
 * return early drop out of their barriers, as exited GPU threads do. Device
 * memory is host memory of the exact requested size, so AddressSanitizer
 * reports any read or write past an allocation. Included first (-include)
 * into the kernel sources (their <<<>>> launches rewritten by run.sh) and the
 * tests; emu_runtime.cpp supplies the runtime API and cuBLAS stubs. */
#ifndef TS_CUDA_EMU_H
#define TS_CUDA_EMU_H

#define TS_CUDA_EMU 1

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __forceinline__
#define __forceinline__ inline

namespace emu {

struct Block {
    std::barrier<> bar;
    std::vector<std::unique_ptr<std::barrier<>>> wbar;
    std::vector<uint64_t> xch; /* (warps, 32) shuffle slots */
    explicit Block(int n) : bar(n), xch((size_t)((n + 31) / 32) * 32) {
        for (int w = 0; w < (n + 31) / 32; w++) wbar.emplace_back(new std::barrier<>(n - 32 * w < 32 ? n - 32 * w : 32));
    }
};

struct Ctx {
    uint3 tid, bid;
    dim3 bdim, gdim;
    int lane, warp;
    Block *blk;
};
inline thread_local Ctx ctx;

/* Stream capture (CUDA graphs): while a host thread records, its launches
 * and async copies are kept as closures (arguments by value, as a graph
 * node keeps them) and run when the graph is launched. */
using Recording = std::vector<std::function<void()>>;
inline thread_local Recording *recording = nullptr;

template <typename... P> struct Launch {
    void (*k)(P...);
    dim3 g, b;
    template <typename... A> void operator()(A &&...args) const {
        if (recording) {
            recording->push_back([self = *this, ... a = P(args)]() { self.run(a...); });
            return;
        }
        run(args...);
    }
    template <typename... A> void run(A &&...args) const {
        const int n = (int)(b.x * b.y * b.z);
        for (unsigned z = 0; z < g.z; z++)
            for (unsigned y = 0; y < g.y; y++)
                for (unsigned x = 0; x < g.x; x++) {
                    Block blk(n);
                    std::vector<std::thread> th;
                    th.reserve(n);
                    for (int i = 0; i < n; i++)
                        th.emplace_back([&, i] {
                            ctx.tid = make_uint3(i % b.x, (i / b.x) % b.y, i / (b.x * b.y));
                            ctx.bid = make_uint3(x, y, z);
                            ctx.bdim = b, ctx.gdim = g, ctx.lane = i % 32, ctx.warp = i / 32, ctx.blk = &blk;
                            k(args...);
                            blk.wbar[ctx.warp]->arrive_and_drop();
                            blk.bar.arrive_and_drop();
                        });
                    for (auto &t : th) t.join();
                }
    }
};

template <typename... P> Launch<P...> launch(void (*k)(P...), dim3 g, dim3 b, size_t = 0, cudaStream_t = 0) {
    return Launch<P...>{k, g, b};
}

template <typename T> T shfl(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    uint64_t *slot = &ctx.blk->xch[(size_t)ctx.warp * 32];
    slot[ctx.lane] = u;
    ctx.blk->wbar[ctx.warp]->arrive_and_wait();
    uint64_t r = slot[src & 31];
    ctx.blk->wbar[ctx.warp]->arrive_and_wait();
    T out;
    memcpy(&out, &r, sizeof out);
    return out;
}

/* every lane's v, in lane order (a whole warp, as the reduce intrinsics) */
template <typename T> void gather(T v, T out[32]) {
    uint64_t *slot = &ctx.blk->xch[(size_t)ctx.warp * 32];
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    slot[ctx.lane] = u;
    ctx.blk->wbar[ctx.warp]->arrive_and_wait();
    for (int i = 0; i < 32; i++) memcpy(&out[i], &slot[i], sizeof(T));
    ctx.blk->wbar[ctx.warp]->arrive_and_wait();
}

} // namespace emu

#define threadIdx (emu::ctx.tid)
#define blockIdx (emu::ctx.bid)
#define blockDim (emu::ctx.bdim)
#define gridDim (emu::ctx.gdim)

inline void __syncthreads() { emu::ctx.blk->bar.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::ctx.blk->wbar[emu::ctx.warp]->arrive_and_wait(); }
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) { return emu::shfl(v, emu::ctx.lane ^ o); }
template <typename T> T __shfl_sync(unsigned, T v, int src) { return emu::shfl(v, src); }
inline int __any_sync(unsigned, int v) {
    int a[32];
    emu::gather(v, a);
    for (int i = 1; i < 32; i++) a[0] |= a[i];
    return a[0] != 0;
}
inline unsigned __reduce_max_sync(unsigned, unsigned v) {
    unsigned a[32];
    emu::gather(v, a);
    for (int i = 1; i < 32; i++) a[0] = a[i] > a[0] ? a[i] : a[0];
    return a[0];
}
inline unsigned __reduce_min_sync(unsigned, unsigned v) {
    unsigned a[32];
    emu::gather(v, a);
    for (int i = 1; i < 32; i++) a[0] = a[i] < a[0] ? a[i] : a[0];
    return a[0];
}
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned d) {
    const T r = emu::shfl(v, emu::ctx.lane - (int)d);
    return emu::ctx.lane >= (int)d ? r : v;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename T> T __ldg(const T *p) { return *p; }
template <typename T> T __ldcg(const T *p) { return *p; }
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int __float2int_rn(float v) { return (int)lrintf(v); }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
    return (unsigned)((((uint64_t)hi << 32) | lo) >> (sh & 31));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned sh) {
    return (unsigned)((((uint64_t)hi << 32) | lo) >> (sh < 32 ? sh : 32));
}
inline unsigned __vsub4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(uint8_t)((a >> (8 * i)) - (b >> (8 * i))) << (8 * i);
    return r;
}
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
inline int __dp2a_lo(int a, int b, int c) {
    return c + (int)(int16_t)a * (int)(int8_t)b + (int)(int16_t)((unsigned)a >> 16) * (int)(int8_t)((unsigned)b >> 8);
}
inline int __dp2a_hi(int a, int b, int c) { return __dp2a_lo(a, (int)((unsigned)b >> 16), c); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }

/* Warp-level matrix multiply (mma.h's wmma), for the tensor-core kernels:
 * every thread holds the whole fragment (the hardware spreads it over the
 * warp), loads and multiplies it itself, and lane 0 stores it between two
 * warp barriers. Sums run in k order in float; the hardware's order is not
 * specified, so the tests compare with a tolerance. Only what the kernels
 * use: 16x16x16, __half inputs, float accumulators. */
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename L = void> struct fragment {
    float v[16 * 16]; /* a: (m, k), b: (k, n), accumulator: (m, n), row-major */
};
template <typename Use, int M, int N, int K, typename T, typename L>
inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, float x) {
    for (float &e : f.v) e = x;
}
inline float emu_h2f(const __half *p) { return __half2float(*p); }
template <typename L> inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __half, L> &f, const __half *p, unsigned ldm) {
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 16; k++)
            f.v[m * 16 + k] = emu_h2f(std::is_same<L, row_major>::value ? p + m * ldm + k : p + k * ldm + m);
}
template <typename L> inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __half, L> &f, const __half *p, unsigned ldm) {
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++)
            f.v[k * 16 + n] = emu_h2f(std::is_same<L, row_major>::value ? p + k * ldm + n : p + n * ldm + k);
}
template <typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, __half, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __half, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c) {
    float r[256];
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float acc = c.v[m * 16 + n];
            for (int k = 0; k < 16; k++) acc += a.v[m * 16 + k] * b.v[k * 16 + n];
            r[m * 16 + n] = acc;
        }
    memcpy(d.v, r, sizeof r);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l) {
    __syncwarp();
    if (emu::ctx.lane == 0)
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16; n++) p[l == mem_row_major ? m * ldm + n : n * ldm + m] = f.v[m * 16 + n];
    __syncwarp();
}
} // namespace wmma
} // namespace nvcuda

#endif
