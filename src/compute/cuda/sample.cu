/* Sampling on the device: greedy argmax, and the CPU sampler's whole chain
 * (docs/SAMPLING.md, src/sample/sample.c) so that identical logits and RNG
 * state give the CPU's id.
 *
 * Greedy (ts_cuda_argmax): blocks reduce slices to (max, lowest id), the last
 * block to finish (an atomic ticket) reduces the slices and resets the
 * ticket, so the call is one launch and graph-safe.
 *
 * The chain (ts_cuda_sample) is one block of 1024 threads. Everything the
 * CPU computes in an order that matters for rounding is computed in that
 * order here: Z (top-p) is summed in ascending id order, the top-p walk, the
 * temperature weights, their sum W and the draw walk in sorted order, each as
 * a sequential double sum by one thread (the exp() terms are computed in
 * parallel first). The sorted order (logit descending, id ascending) is
 * produced in rounds of up to 1024 candidates: a radix select on the logit
 * bits finds the round's last logit, an ordered compaction takes the
 * candidates above it plus the lowest ids among its ties, and a bitonic sort
 * orders them; rounds continue only while the walks need more candidates
 * (usually one round: top-k 40, or top-p inside the first 1024).
 *
 * Cost notes (to be measured): with top-k off and top-p on, Z is a sequential
 * sum over every candidate (the CPU's order), ~150k dependent double adds on
 * a 150k vocabulary. The device exp() is within 1 ulp of glibc's; a pick can
 * differ from the CPU's only if the draw falls within ~1e-16 relative of a
 * bucket edge (the same caveat as between two libms). */
#include <limits.h>

#include "compute/cuda/cuda_common.cuh"

namespace {

/* ------------------------------------------------------------ argmax */

#define AM_THREADS 256
#define AM_PER_THREAD 16

TS_DEV bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

TS_DEV void argmax_warp(float &v, int &i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (better(ov, oi, v, i)) v = ov, i = oi;
    }
}

/* (best value, id) of the block; every thread gets it. */
template <int NT> TS_DEV void argmax_block(float &v, int &i, float *sv, int *si) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    argmax_warp(v, i);
    if (lane == 0) sv[warp] = v, si[warp] = i;
    __syncthreads();
    /* warp 0 reduces the per-warp winners and publishes the block's in
     * slot 0. (Every thread looping over all NT/32 slots read out of bounds
     * and picked wrong ids on the H200 at NT = 1024, though the loop's
     * bounds are constants: compute-sanitizer memcheck, 2026-12-01.) */
    if (warp == 0) {
        float wv = lane < NT / 32 ? sv[lane] : -INFINITY;
        int wi = lane < NT / 32 ? si[lane] : INT_MAX;
        argmax_warp(wv, wi);
        if (lane == 0) sv[0] = wv, si[0] = wi;
    }
    __syncthreads();
    v = sv[0], i = si[0];
    __syncthreads();
}

int am_blocks(int64_t n) {
    int64_t b = (n + AM_THREADS * AM_PER_THREAD - 1) / (AM_THREADS * AM_PER_THREAD);
    return (int)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

__global__ void __launch_bounds__(AM_THREADS)
    argmax_kernel(float *l, int64_t n, int32_t *out, unsigned *err, unsigned *ticket, float2 *part) {
    ts_pdl_enter();
    __shared__ float sv[AM_THREADS / 32];
    __shared__ int si[AM_THREADS / 32];
    __shared__ bool last;
    float v = -INFINITY;
    int id = INT_MAX;
    for (int64_t k = (int64_t)blockIdx.x * AM_THREADS + threadIdx.x; k < n; k += (int64_t)gridDim.x * AM_THREADS) {
        float x = l[k];
        if (isnan(x)) l[k] = x = -INFINITY; /* in place, as the CPU sampler does */
        if (better(x, (int)k, v, id)) v = x, id = (int)k;
    }
    argmax_block<AM_THREADS>(v, id, sv, si);
    if (threadIdx.x == 0) {
        part[blockIdx.x] = make_float2(v, __int_as_float(id));
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    v = -INFINITY, id = INT_MAX;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += AM_THREADS) {
        /* volatile: written by other blocks during this launch, must not come from L1 */
        const volatile float *pv = (const volatile float *)(part + b);
        const float pv0 = pv[0], pv1 = pv[1];
        if (better(pv0, __float_as_int(pv1), v, id)) v = pv0, id = __float_as_int(pv1);
    }
    argmax_block<AM_THREADS>(v, id, sv, si);
    if (threadIdx.x == 0) {
        /* all -inf: the CPU's greedy finds id 0 at -inf and reports an error */
        if (v == -INFINITY) {
            *out = -1;
            if (err) atomicOr(err, TS_CUDA_ERR_EMPTY);
        } else {
            *out = id;
        }
        *ticket = 0; /* ready for the next call (graph replay) */
    }
}

/* ------------------------------------------------------------ the chain */

#define SM_T 1024 /* threads of the sampling block */
#define SM_ROUND 1024

TS_DEV uint32_t ord32(float f) {
    if (f == 0.0f) f = 0.0f; /* -0 == +0 for the CPU's comparisons: one key for both */
    const uint32_t u = __float_as_uint(f);
    return u ^ ((u >> 31) ? 0xffffffffu : 0x80000000u);
}
/* Sort key: larger = earlier (logit descending, then id ascending). */
TS_DEV uint64_t skey(uint32_t o, int i) { return (uint64_t)o << 32 | (uint32_t)(0xffffffffu - (uint32_t)i); }

struct SmScratch {
    int32_t *ids;    /* (n) member ids of an ordered compaction */
    double *e;       /* (n) exp terms in the order they are summed */
    int32_t *sid;    /* (n) the sorted prefix: ids */
    float *slog;     /* (n) the sorted prefix: candidate logits */
};

struct SmShared {
    int hist[2048];
    uint64_t key[SM_ROUND];
    int id[SM_ROUND];
    double e[SM_ROUND];
    int scan[32];
    int misc[8];
    float fv[32];
    int fi[32];
};

/* Candidate i: its candidate logit in cl (0 for +inf when any +inf exists). */
TS_DEV bool cand(const float *l, int i, bool pinf, float &cl) {
    const float v = l[i];
    if (pinf) {
        cl = 0.0f;
        return v == INFINITY;
    }
    cl = v;
    return v > -INFINITY;
}

/* Exclusive block scan of one int per thread; *total gets the sum. */
TS_DEV int excl_scan(int v, SmShared &S, int *total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) S.scan[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = S.scan[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        S.scan[lane] = w; /* inclusive over warps */
    }
    __syncthreads();
    const int before = (warp ? S.scan[warp - 1] : 0) + x - v;
    *total = S.scan[31];
    __syncthreads();
    return before;
}

TS_DEV int block_sum_int(int v, SmShared &S) {
    int total;
    excl_scan(v, S, &total);
    return total;
}

/* Among the eligible candidates (key < prev), the R-th by the order, found
 * on the 32-bit logit key: *thr = that logit's key, *quota = how many of the
 * candidates with exactly that logit key belong to the top R (the lowest
 * ids). Returns false when at most R are eligible (take them all). */
TS_DEV bool select_r(const float *l, int n, bool pinf, uint64_t prev, int R, SmShared &S, uint32_t *thr, int *quota) {
    uint32_t prefix = 0;
    int need = R;
    for (int pass = 0; pass < 3; pass++) {
        const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        const int bits = pass == 2 ? 10 : 11;
        const uint32_t hmask = pass == 0 ? 0u : (0xffffffffu << (shift + bits)); /* bits already fixed */
        for (int b = threadIdx.x; b < 2048; b += SM_T) S.hist[b] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += SM_T) {
            float cl;
            if (!cand(l, i, pinf, cl)) continue;
            const uint32_t o = ord32(cl);
            if (skey(o, i) >= prev || (o & hmask) != prefix) continue;
            atomicAdd(&S.hist[(o >> shift) & ((1u << bits) - 1)], 1);
        }
        __syncthreads();
        /* bins from the top: thread t takes bins 2047-2t and 2046-2t */
        const int b0 = 2047 - 2 * (int)threadIdx.x, b1 = b0 - 1;
        const int c0 = S.hist[b0], c1 = S.hist[b1];
        int total;
        const int above = excl_scan(c0 + c1, S, &total);
        if (pass == 0 && total <= R) return false; /* uniform: every thread sees the same total */
        if (above < need && above + c0 >= need) S.misc[0] = b0, S.misc[1] = above;
        else if (above + c0 < need && above + c0 + c1 >= need) S.misc[0] = b1, S.misc[1] = above + c0;
        __syncthreads();
        prefix |= (uint32_t)S.misc[0] << shift;
        need -= S.misc[1];
        __syncthreads();
    }
    *thr = prefix;
    *quota = need;
    return true;
}

/* Writes the members (eligible, logit key > thr, or == thr within the first
 * quota of those in id order; every eligible one when all) in ascending id
 * order to out (global or shared); returns their count. */
TS_DEV int compact(const float *l, int n, bool pinf, uint64_t prev, bool all, uint32_t thr, int quota, int *out,
                   SmShared &S) {
    const int chunk = (n + SM_T - 1) / SM_T, lo = min(n, (int)threadIdx.x * chunk), hi = min(n, lo + chunk);
    int gt = 0, eq = 0;
    for (int i = lo; i < hi; i++) {
        float cl;
        if (!cand(l, i, pinf, cl)) continue;
        const uint32_t o = ord32(cl);
        if (skey(o, i) >= prev) continue;
        if (all || o > thr) gt++;
        else if (o == thr) eq++;
    }
    int t;
    const int eq_before = excl_scan(eq, S, &t);
    const int take = all ? 0 : max(0, min(eq, quota - eq_before));
    int total;
    int off = excl_scan(gt + take, S, &total);
    int k = 0;
    for (int i = lo; i < hi; i++) {
        float cl;
        if (!cand(l, i, pinf, cl)) continue;
        const uint32_t o = ord32(cl);
        if (skey(o, i) >= prev) continue;
        if (all || o > thr) out[off++] = i;
        else if (o == thr) {
            if (k < take) out[off++] = i;
            k++;
        }
    }
    __syncthreads();
    return total;
}

/* Sorts S.key/S.id (SM_ROUND entries, padded with key 0) by key descending. */
TS_DEV void bitonic_desc(SmShared &S) {
    const int i = threadIdx.x;
    for (int k = 2; k <= SM_ROUND; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int p = i ^ j;
            if (p > i) {
                const bool desc = (i & k) == 0;
                const uint64_t a = S.key[i], b = S.key[p];
                if (desc ? a < b : a > b) {
                    S.key[i] = b, S.key[p] = a;
                    const int t = S.id[i];
                    S.id[i] = S.id[p], S.id[p] = t;
                }
            }
            __syncthreads();
        }
    }
}

TS_DEV uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
TS_DEV double rng_uniform(uint64_t *s) {
    const uint64_t r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return (double)(r >> 11) * 0x1.0p-53;
}

__global__ void __launch_bounds__(SM_T) sample_kernel(float *l, int n, const ts_cuda_sampler_params p,
                                                      const ts_cuda_sampler_state st, int32_t *out_id, unsigned *err,
                                                      SmScratch sc) {
    ts_pdl_enter();
    __shared__ SmShared S;
    __shared__ double dsh[4];
    const int tid = threadIdx.x;

    /* 1. NaN -> -inf, in the caller's array */
    for (int i = tid; i < n; i += SM_T)
        if (isnan(l[i])) l[i] = -INFINITY;
    __syncthreads();
    /* 2. repetition penalty, once per distinct id of the ring */
    if (st.recent && p.repeat_penalty != 1.0f) {
        for (int k = tid; k < st.recent_cap; k += SM_T) {
            const int id = st.recent[k];
            if (id < 0 || id >= n) continue;
            bool first = true;
            for (int j = 0; j < k && first; j++) first = st.recent[j] != id;
            if (first) l[id] = l[id] > 0.0f ? __fdiv_rn(l[id], p.repeat_penalty) : fmul_rn(l[id], p.repeat_penalty);
        }
    }
    __syncthreads();

    /* 3. max (and its lowest id) */
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = tid; i < n; i += SM_T)
        if (better(l[i], i, bv, bi)) bv = l[i], bi = i;
    argmax_block<SM_T>(bv, bi, S.fv, S.fi);
    int pick = -1;
    if (p.temperature <= 0.0f || bv == -INFINITY) {
        pick = bv == -INFINITY ? -1 : bi;
    } else {
        const bool pinf = bv == INFINITY;
        const double m = pinf ? 0.0 : (double)bv;
        int cnt = 0;
        for (int i = tid; i < n; i += SM_T) {
            float cl;
            cnt += cand(l, i, pinf, cl);
        }
        const int nc = block_sum_int(cnt, S);
        const int K = (p.top_k > 0 && p.top_k < nc) ? p.top_k : nc;
        const bool top_p = p.top_p < 1.0f, min_p = p.min_p > 0.0f;

        /* 4. Z over the top-K candidates in ascending id order */
        double z = 0.0;
        if (top_p) {
            uint32_t thr = 0;
            int quota = 0;
            const bool sel = K < nc && select_r(l, n, pinf, ~0ull, K, S, &thr, &quota);
            const int cntk = compact(l, n, pinf, ~0ull, !sel, thr, quota, sc.ids, S);
            for (int j = tid; j < cntk; j += SM_T) {
                float cl;
                cand(l, sc.ids[j], pinf, cl);
                sc.e[j] = exp((double)cl - m);
            }
            __syncthreads();
            if (tid == 0) {
                double s = 0.0;
                for (int j = 0; j < cntk; j++) s += sc.e[j];
                dsh[0] = s;
            }
            __syncthreads();
            z = dsh[0];
        }
        const double target = (double)p.top_p * z;

        /* 5. sorted rounds and the top-p / min-p walk (thread 0 carries cum) */
        uint64_t prev = ~0ull;
        int done = 0, keep = -1;
        double cum = 0.0;
        while (keep < 0) {
            const int R = min(SM_ROUND, K - done);
            uint32_t thr = 0;
            int quota = 0;
            const bool sel = select_r(l, n, pinf, prev, R, S, &thr, &quota);
            S.key[tid] = 0;
            S.id[tid] = INT_MAX;
            __syncthreads();
            const int cnt_r = compact(l, n, pinf, prev, !sel, thr, quota, S.id, S);
            if (tid < cnt_r) {
                float cl;
                cand(l, S.id[tid], pinf, cl);
                S.key[tid] = skey(ord32(cl), S.id[tid]);
            }
            __syncthreads();
            bitonic_desc(S);
            if (tid < cnt_r) {
                const int id = S.id[tid];
                float cl;
                cand(l, id, pinf, cl);
                sc.sid[done + tid] = id;
                sc.slog[done + tid] = cl;
                S.e[tid] = exp((double)cl - m);
            }
            __syncthreads();
            if (tid == 0) {
                int kp = -1;
                for (int j = 0; j < cnt_r && kp < 0; j++) {
                    const int g = done + j;
                    if (min_p && g >= 1 && !(S.e[j] >= (double)p.min_p)) kp = g; /* min-p cut before g */
                    else if (top_p && (cum += S.e[j]) >= target) kp = g + 1;
                    else if (g + 1 == K) kp = K;
                }
                if (kp < 0 && done + cnt_r >= K) kp = K; /* (cnt_r == 0 cannot happen while done < K) */
                S.misc[2] = kp;
                S.key[0] = S.key[cnt_r - 1]; /* the round's last key: the next round starts below it */
            }
            __syncthreads();
            keep = S.misc[2];
            prev = S.key[0];
            done += cnt_r;
            __syncthreads();
        }

        /* 6. temperature weights of the survivors, W, one draw, the walk */
        const double t = (double)p.temperature;
        for (int j = tid; j < keep; j += SM_T) sc.e[j] = exp(((double)sc.slog[j] - m) / t);
        __syncthreads();
        if (tid == 0) {
            double w = 0.0;
            for (int j = 0; j < keep; j++) w += sc.e[j];
            uint64_t s4[4] = {st.rng[0], st.rng[1], st.rng[2], st.rng[3]};
            const double tgt = rng_uniform(s4) * w;
            st.rng[0] = s4[0], st.rng[1] = s4[1], st.rng[2] = s4[2], st.rng[3] = s4[3];
            double acc = 0.0;
            int c = keep - 1;
            for (int j = 0; j < keep; j++) {
                acc += sc.e[j];
                if (tgt < acc) {
                    c = j;
                    break;
                }
            }
            S.misc[3] = sc.sid[c];
        }
        __syncthreads();
        pick = S.misc[3];
    }
    if (tid == 0) {
        *out_id = pick;
        if (pick < 0) {
            if (err) atomicOr(err, TS_CUDA_ERR_EMPTY);
        } else if (st.recent && st.recent_cap > 0) {
            const int at = *st.recent_pos;
            st.recent[at] = pick;
            *st.recent_pos = (at + 1) % st.recent_cap;
        }
    }
}

size_t align_up(size_t v) { return (v + 255) & ~(size_t)255; }

} // namespace

size_t ts_cuda_argmax_scratch_bytes(int64_t n) { return 256 + (size_t)am_blocks(n) * sizeof(float2); }

ts_status ts_cuda_argmax(void *stream, float *logits, int64_t n, int32_t *out_id, void *scratch, unsigned *err) {
    TS_ARG_CHECK(logits && out_id && scratch && n >= 1 && n < INT_MAX, "cuda argmax: NULL pointer or n %lld",
                 (long long)n);
    TS_ARG_CHECK(((uintptr_t)scratch & 15) == 0, "cuda argmax: scratch not 16-byte aligned");
    const int blocks = am_blocks(n);
    ts_launch(&argmax_kernel, blocks, AM_THREADS, 0, ts_stream(stream))(logits, n, out_id, err, (unsigned *)scratch,
                                                                 (float2 *)((uint8_t *)scratch + 256));
    TS_CUDA_LAUNCHED("argmax");
    return TS_OK;
}

size_t ts_cuda_sample_scratch_bytes(int32_t n_vocab) {
    if (n_vocab < 1) return 0;
    const size_t n = (size_t)n_vocab;
    return align_up(n * 4) + align_up(n * 8) + align_up(n * 4) + align_up(n * 4);
}

ts_status ts_cuda_sample(void *stream, float *logits, int32_t n_vocab, const ts_cuda_sampler_params *p,
                         const ts_cuda_sampler_state *st, int32_t *out_id, unsigned *err, void *scratch,
                         size_t scratch_bytes) {
    TS_ARG_CHECK(logits && p && st && st->rng && out_id && n_vocab >= 1, "cuda sample: NULL pointer or vocab %d",
                 (int)n_vocab);
    TS_ARG_CHECK(isfinite(p->temperature), "cuda sample: temperature must be finite");
    TS_ARG_CHECK(p->top_p > 0.0f && !isnan(p->top_p), "cuda sample: top-p %g must be > 0", (double)p->top_p);
    TS_ARG_CHECK(p->min_p >= 0.0f && p->min_p <= 1.0f, "cuda sample: min-p %g must be in [0, 1]", (double)p->min_p);
    TS_ARG_CHECK(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty), "cuda sample: repeat penalty %g",
                 (double)p->repeat_penalty);
    TS_ARG_CHECK(!st->recent || (st->recent_pos && st->recent_cap >= 1 && st->recent_cap <= 8192),
                 "cuda sample: recent ring of %d (1..8192) needs recent_pos", (int)st->recent_cap);
    const size_t need = ts_cuda_sample_scratch_bytes(n_vocab);
    TS_ARG_CHECK(scratch && scratch_bytes >= need && ((uintptr_t)scratch & 255) == 0,
                 "cuda sample: scratch %zu bytes (256-aligned) given, %zu needed", scratch_bytes, need);
    const size_t n = (size_t)n_vocab;
    uint8_t *b = (uint8_t *)scratch;
    SmScratch sc;
    sc.ids = (int32_t *)b;
    sc.e = (double *)(b + align_up(n * 4));
    sc.sid = (int32_t *)(b + align_up(n * 4) + align_up(n * 8));
    sc.slog = (float *)(b + align_up(n * 4) + align_up(n * 8) + align_up(n * 4));
    ts_launch(&sample_kernel, 1, SM_T, 0, ts_stream(stream))(logits, n_vocab, *p, *st, out_id, err, sc);
    TS_CUDA_LAUNCHED("sample");
    return TS_OK;
}
