/* The engine's CUDA backend: the op table (src/compute/backend.h) over the
 * kernels of src/compute/cuda (cuda_kernels.h), for dense and MoE models
 * (routed experts resident in device memory, src/experts/expert_cache.h).
 *
 * Ownership: weights are uploaded once at bind (one device allocation per
 * tensor, never changed after load); a stream is one cudaStream_t with its
 * own cuBLAS handle, scratch and error word, so sessions on different
 * threads share nothing mutable here.
 *
 * Errors: the compute ops return nothing, so a stream keeps the first failure
 * (a launcher's status naming the op, or a CUDA error) and enqueues nothing
 * more after it; sync reports it once, as TS_ERR_DEVICE (or the launcher's
 * TS_ERR_ARG / TS_ERR_UNSUPPORTED) with the op's name, and so does an
 * error word a kernel set (a position outside the cache, a token outside the
 * vocabulary; the word is mapped host memory, read at sync without a copy).
 *
 * Matmul paths (the CPU's default and --precise modes as close as the kernels
 * allow):
 *   - quantized weights, up to TS_CUDA_MAX_DECODE_TOK tokens: x quantized
 *     once per partner format (Q8_0 / Q8_K, bit for bit the CPU's) and dotted
 *     in int8 (the CPU default path);
 *   - F32/F16/BF16 weights, and every weight in precise mode: F32 activations,
 *     weights dequantized in registers, in groups of TS_CUDA_MAX_DECODE_TOK
 *     tokens (the CPU's F32 path); float weights use it up to
 *     CUDA_FLOAT_MATVEC_MAX tokens, beyond which the GEMM pays;
 *   - otherwise (prefill chunks): weight tiles dequantized to F16 and multiplied
 *     by cuBLAS on tensor cores with F32 accumulation (ts_cuda_gemm). F16 as
 *     llama.cpp's cuBLAS path; the error it adds is measured against the CPU
 *     by tests/cuda/test_cuda_backend.cu. F16 weights multiply x as F16 hi +
 *     lo (two GEMMs): with x in F16 alone, the F16 fixtures' prefill reached a
 *     KL of 1.0e-4 against the CPU's F32 activations (a seed of session 22).
 *
 * Attention: the split-K decode / tiled prefill kernels take F16 caches and
 * head_dim 64, 128 or 256; other head sizes (the tiny fixture models) and F32
 * caches run a plain one-warp-per-row online-softmax kernel here, exact but
 * not fast. RoPE runs as the op table splits it (a cos/sin table, then the
 * rotation), and kv_store converts to the cache type (F16 round to nearest
 * even, as the CPU's to_f16). */
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>

/* cuda_common.cuh names its stream cast ts_stream(), which here is the
 * backend's stream type: rename the cast for this file. */
#define ts_stream ts_cuda_stream_cast
#include "compute/cuda/cuda_common.cuh"
#undef ts_stream
extern "C" {
#include "compute/backend.h"
}

#define CUDA_FLOAT_MATVEC_MAX 64                /* tokens up to which F32/F16/BF16 weights skip the GEMM */
/* Prefill of int8-path experts on the tensor cores (ts_cuda_moe_gemm_items)
 * rather than the dp4a items kernel; -DCUDA_MOE_GEMM=0 for the latter. */
#ifndef CUDA_MOE_GEMM
#define CUDA_MOE_GEMM 1
#endif
#define CUDA_WEIGHT_SLACK 16                    /* bytes after each weight: the byte readers read one word past */

typedef struct cuda_backend {
    ts_backend base;
    int device;
    char name[256];       /* cudaDeviceProp.name */
    int cc_major, cc_minor;
    size_t total_mem;     /* bytes of device memory */
    bool pdl;             /* launches carry programmatic dependent launch (not ts_backend_opts.cuda_no_pdl) */
} cuda_backend;

typedef struct cuda_stream {
    ts_stream base;
    int device;
    bool pdl;               /* the backend's pdl, set for the thread at every op's entry */
    cudaStream_t s;
    cublasHandle_t blas;
    ts_status err;          /* first failure since the last sync, TS_OK when none */
    char err_msg[512];      /* its message, naming the op */
    /* (1) the error word (TS_CUDA_ERR_* bits) the kernels set, in pinned host
     * memory (mapped: err_dev is its device address), so a sync reads it
     * with no copy of its own: a replayed token is a launch and a sync. The
     * kernels only ever set bits (atomicOr); two that race without PCIe
     * atomics can lose one of their bits, never leave the word clear, and
     * the host reads and clears it only after the stream has drained. */
    unsigned *err_dev;
    volatile unsigned *err_host;
    bool exact_act;         /* --precise: F32 activations everywhere */
    void *q8;               /* (2, q8_stride) partner-format activations: [0] Q8_0, [1] Q8_K */
    size_t q8_stride;       /* bytes per slot, 256-aligned */
    void *gemm;             /* (gemm_bytes) converted x + dequantized weight tiles */
    size_t gemm_bytes;
    void *attn;             /* (attn_bytes) split-K partial results; grown at first use */
    size_t attn_bytes;
    int32_t *pos;           /* (max_tokens) positions of the attention call's tokens (a desc without pos) */
    /* moe_matmul_grouped (prefill through the expert tables) */
    void *q8g;              /* (q8g_bytes) partner-format activations of max_expert_rows rows */
    size_t q8g_bytes;
    void *xg16;             /* (max_expert_rows, max_in) F16 activations of the tensor-core path */
    int64_t max_expert_rows;
    int32_t *items;         /* (max_expert_rows, 3) device: {expert, first row, rows} per item */
    int32_t *items_host;    /* (max_expert_rows, 3) pinned: what items holds */
    int n_items;            /* items in items_host / items */
    int64_t max_tokens;
    bool capturing;         /* between capture_begin and capture_end */
    /* RoPE tables the forward pass asked for (rope_table) and no op has read
     * yet: the fused kernels compute the angles from the positions, so a
     * table is made only when the plain rope op (the composed fallbacks: an
     * F32 cache, head_dim > 256) first reads it, and a decode step has no
     * launch for it. An entry lives until the next rope_table on its cs. */
    struct {
        const float *freq;  /* (n_rot/2) */
        const int32_t *pos; /* (n_tok) device */
        float *cs;          /* (n_tok, n_rot/2, 2) device: where the table goes; NULL: a free entry */
        float mscale;
        int n_rot, n_tok;
    } rope_due[2];
    int seg;                /* the segment being recorded */
    cudaGraphExec_t graph[TS_MAX_SEGMENTS]; /* the recorded segments, NULL where none */
    /* the sampler (cuda_sample), sized at its first use */
    void *smp_scratch;      /* (smp_scratch_bytes) ts_cuda_sample's */
    size_t smp_scratch_bytes;
    void *smp_am;           /* (ts_cuda_argmax_scratch_bytes) greedy's, after smp_scratch in its allocation: the
                               chain never writes it, so its ticket stays zero between calls */
    int32_t smp_vocab;      /* n_vocab the scratch is for */
    uint64_t *smp_rng;      /* (4) device RNG state */
    int32_t *smp_ring;      /* (smp_cap) device copy of the ring of accepted ids */
    int32_t *smp_ring_pos;  /* (1) where the device appends (unused after) */
    int32_t *smp_id;        /* (1) the drawn id: smp_host + 32 as the device addresses it (mapped), so the
                               draw lands where the host reads it, with no copy */
    int32_t smp_cap;        /* ring entries allocated */
    uint8_t *smp_host;      /* (smp_host_bytes) pinned, mapped: rng (32 B), id (4 B, at 32), ring (at 64) */
    size_t smp_host_bytes;
} cuda_stream;

struct ts_event {
    cudaEvent_t ev;
};

static cuda_backend *cbe(ts_backend *be) { return (cuda_backend *)be; }
static const cuda_backend *cbe_c(const ts_backend *be) { return (const cuda_backend *)be; }
static cuda_stream *cst(ts_stream *st) { return (cuda_stream *)st; }

/* The runtime's current device is per host thread: a session may run on any
 * thread, so every entry point makes the backend's device current first. */
static cudaError_t use_device(int device) {
    int cur = -1;
    cudaError_t e = cudaGetDevice(&cur);
    if (e != cudaSuccess) return e;
    return cur == device ? cudaSuccess : cudaSetDevice(device);
}

static ts_status cuda_err(cudaError_t e, const char *what) {
    return ts_fail(TS_ERR_DEVICE, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* "needed X, Y free of Z" for an allocation that failed */
static ts_status oom(size_t bytes, const char *what) {
    (void)cudaGetLastError(); /* an allocation failure is not sticky; keep launch checks clean */
    size_t fr = 0, tot = 0;
    char a[32], b[32], c[32];
    ts_fmt_bytes(bytes, 1, a, sizeof a);
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        return ts_fail(TS_ERR_NOMEM, "cuda: out of device memory for %s: %s needed", what, a);
    }
    return ts_fail(TS_ERR_NOMEM, "cuda: out of device memory for %s: %s needed, %s free of %s", what, a,
                   ts_fmt_bytes(fr, 1, b, sizeof b), ts_fmt_bytes(tot, 1, c, sizeof c));
}

/* ---- stream errors ---- */

/* Keeps the first failure (the thread's last message, prefixed with the op). */
static void note(cuda_stream *c, ts_status st, const char *op) {
    if (st == TS_OK || c->err != TS_OK) return;
    c->err = st;
    snprintf(c->err_msg, sizeof c->err_msg, "cuda %s: %s", op, ts_last_error());
}

static void note_cuda(cuda_stream *c, cudaError_t e, const char *op) {
    if (e == cudaSuccess) return;
    note(c, cuda_err(e, op), op);
}

/* Ops enqueue nothing once the stream has failed; sync reports the failure. */
static bool live(cuda_stream *c) {
    if (c->err != TS_OK) return false;
    ts_cuda_set_launch_pdl(c->pdl);
    note_cuda(c, use_device(c->device), "set device");
    return c->err == TS_OK;
}

#define OP(c, call, name) note((c), (call), (name))

/* ---- small kernels the op table splits differently from the fused ones ---- */

__global__ void iota_kernel(int32_t *pos, int pos0, int n) {
    ts_pdl_enter();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pos[i] = pos0 + i;
}

/* cs (n_tok, half, 2) = cos/sin of the float32 angle pos[t] * freq[i], times
 * mscale (rope_cs: the fused kernels' formula) */
__global__ void rope_table_kernel(const float *freq, int half, const int32_t *pos, int n_tok, float mscale, float *cs) {
    ts_pdl_enter();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_tok * half) return;
    int t = (int)(i / half), j = (int)(i % half);
    const float2 c = rope_cs((float)pos[t], freq[j], mscale);
    cs[2 * i] = c.x;
    cs[2 * i + 1] = c.y;
}

/* the CPU's rotation, without FMA contraction (rope_rot) */
__global__ void rope_kernel(float *x, int n_tok, int n_head, int head_dim, int half, const float *cs, int neox) {
    ts_pdl_enter();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_tok * n_head * half) return;
    int j = (int)(i % half);
    int64_t th = i / half; /* token * n_head + head */
    int t = (int)(th / n_head);
    float *v = x + th * head_dim;
    const float2 c = make_float2(cs[((int64_t)t * half + j) * 2], cs[((int64_t)t * half + j) * 2 + 1]);
    int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
    const float2 y = rope_rot(v[a], v[b], c);
    v[a] = y.x;
    v[b] = y.y;
}

/* k, v (n_tok, n_head_kv, hd) -> caches at positions pos[t] */
__global__ void kv_store_kernel(void *kc, void *vc, const float *k, const float *v, int n_tok, int n_head_kv, int hd,
                                int n_ctx, const int32_t *pos, int f16, unsigned *err) {
    ts_pdl_enter();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_tok * n_head_kv * hd) return;
    int d = (int)(i % hd);
    int h = (int)((i / hd) % n_head_kv);
    int t = (int)(i / ((int64_t)hd * n_head_kv));
    int p = pos[t];
    if (p < 0 || p >= n_ctx) {
        if (d == 0 && h == 0) atomicOr(err, TS_CUDA_ERR_POS);
        return;
    }
    int64_t dst = ((int64_t)h * n_ctx + p) * hd + d;
    if (f16) {
        ((__half *)kc)[dst] = __float2half_rn(k[i]);
        ((__half *)vc)[dst] = __float2half_rn(v[i]);
    } else {
        ((float *)kc)[dst] = k[i];
        ((float *)vc)[dst] = v[i];
    }
}

#define ATT_GEN_MAXD 8 /* dims per lane: head_dim <= 256 */

template <bool F16> TS_DEV float kv_at(const void *p, int64_t i) {
    if (F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

/* One warp per (token, head): keys in increasing position, online softmax. */
template <bool F16>
__global__ void attn_generic_kernel(const float *q, const void *kc, const void *vc, float *out, int n_tok, int n_head,
                                    int n_head_kv, int hd, int n_ctx, const int32_t *posv, int window, float scale,
                                    unsigned *err) {
    ts_pdl_enter();
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= n_tok * n_head) return;
    int t = row / n_head, h = row % n_head;
    int hk = h / (n_head / n_head_kv);
    int pos = posv[t];
    if (pos < 0 || pos >= n_ctx) {
        if (lane == 0) atomicOr(err, TS_CUDA_ERR_POS);
        for (int d = lane; d < hd; d += 32) out[(int64_t)row * hd + d] = 0.0f;
        return;
    }
    int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const float *qr = q + (int64_t)row * hd;
    float qv[ATT_GEN_MAXD], o[ATT_GEN_MAXD];
#pragma unroll
    for (int j = 0; j < ATT_GEN_MAXD; j++) {
        int d = lane + 32 * j;
        qv[j] = d < hd ? qr[d] : 0.0f;
        o[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int64_t base = (int64_t)hk * n_ctx * hd;
    for (int p = lo; p <= pos; p++) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < ATT_GEN_MAXD; j++) {
            int d = lane + 32 * j;
            if (d < hd) s += qv[j] * kv_at<F16>(kc, base + (int64_t)p * hd + d);
        }
        s = warp_sum(s) * scale;
        float mn = fmaxf(m, s);
        float corr = expf(m - mn), e = expf(s - mn);
        l = l * corr + e;
#pragma unroll
        for (int j = 0; j < ATT_GEN_MAXD; j++) {
            int d = lane + 32 * j;
            if (d < hd) o[j] = o[j] * corr + e * kv_at<F16>(vc, base + (int64_t)p * hd + d);
        }
        m = mn;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int j = 0; j < ATT_GEN_MAXD; j++) {
        int d = lane + 32 * j;
        if (d < hd) out[(int64_t)row * hd + d] = o[j] * inv;
    }
}

static unsigned grid_1d(int64_t n, int block) {
    int64_t b = (n + block - 1) / block;
    return (unsigned)(b < 1 ? 1 : b);
}

/* ---- backend ---- */

static void cuda_destroy(ts_backend *be) { free(be); }

static void cuda_describe(const ts_backend *be, char *buf, size_t n) {
    const cuda_backend *b = cbe_c(be);
    char t[32], f[32];
    size_t fr = 0, tot = 0;
    if (use_device(b->device) != cudaSuccess || cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, n, "cuda: device %d: %s, sm_%d%d, %s", b->device, b->name, b->cc_major, b->cc_minor,
                 ts_fmt_bytes(b->total_mem, 1, t, sizeof t));
        return;
    }
    snprintf(buf, n, "cuda: device %d: %s, sm_%d%d, %s (%s free)", b->device, b->name, b->cc_major, b->cc_minor,
             ts_fmt_bytes(b->total_mem, 1, t, sizeof t), ts_fmt_bytes(fr, 1, f, sizeof f));
}

static void *cuda_alloc(ts_backend *be, size_t bytes) {
    cudaError_t e = use_device(cbe(be)->device);
    if (e != cudaSuccess) {
        cuda_err(e, "set device");
        return NULL;
    }
    void *p = NULL;
    e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        oom(bytes, "a buffer");
        return NULL;
    }
    if (e != cudaSuccess) {
        cuda_err(e, "cudaMalloc");
        return NULL;
    }
    /* the memset runs on the legacy stream, which the sessions' non-blocking
     * streams do not wait for: done before anyone can use the buffer */
    if ((e = cudaMemset(p, 0, bytes)) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess) {
        cudaFree(p);
        cuda_err(e, "cudaMemset");
        return NULL;
    }
    return p;
}

static void cuda_dealloc(ts_backend *be, void *p, size_t bytes) {
    (void)bytes;
    if (!p) return;
    (void)use_device(cbe(be)->device);
    cudaFree(p);
}

static ts_status cuda_mem_info(ts_backend *be, uint64_t *free_bytes, uint64_t *total_bytes) {
    size_t fr = 0, tot = 0;
    cudaError_t e = use_device(cbe(be)->device);
    if (e == cudaSuccess) e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) return cuda_err(e, "cudaMemGetInfo");
    *free_bytes = fr;
    *total_bytes = tot;
    return TS_OK;
}

static void *cuda_host_alloc(ts_backend *be, size_t bytes) {
    (void)use_device(cbe(be)->device);
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        ts_fail(TS_ERR_NOMEM, "cuda: cannot allocate %zu bytes of pinned host memory: %s", bytes, cudaGetErrorString(e));
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cuda_host_free(ts_backend *be, void *p, size_t bytes) {
    (void)be;
    (void)bytes;
    if (p) cudaFreeHost(p);
}

static ts_status cuda_weight_bind(ts_backend *be, const void *host, size_t bytes, const void **dev) {
    *dev = NULL;
    cudaError_t e = use_device(cbe(be)->device);
    if (e != cudaSuccess) return cuda_err(e, "set device");
    void *p = NULL;
    e = cudaMalloc(&p, bytes + CUDA_WEIGHT_SLACK);
    if (e == cudaErrorMemoryAllocation) return oom(bytes, "the model's weights");
    if (e != cudaSuccess) return cuda_err(e, "cudaMalloc (weights)");
    /* a copy from pageable memory may return before its DMA lands, and the
     * sessions' non-blocking streams do not wait for the legacy stream: the
     * weight is complete before bind returns */
    if ((e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemset((uint8_t *)p + bytes, 0, CUDA_WEIGHT_SLACK)) != cudaSuccess ||
        (e = cudaDeviceSynchronize()) != cudaSuccess) {
        cudaFree(p);
        return cuda_err(e, "uploading weights");
    }
    *dev = p;
    return TS_OK;
}

static void cuda_weight_unbind(ts_backend *be, const void *dev, size_t bytes) {
    cuda_dealloc(be, (void *)dev, bytes);
}

/* ---- streams ---- */

static void cuda_stream_free(ts_stream *st) {
    if (!st) return;
    cuda_stream *c = cst(st);
    (void)use_device(c->device);
    if (c->s) cudaStreamSynchronize(c->s);
    if (c->blas) cublasDestroy(c->blas);
    if (c->err_host) cudaFreeHost((void *)c->err_host);
    cudaFree(c->q8);
    cudaFree(c->gemm);
    cudaFree(c->attn);
    cudaFree(c->pos);
    cudaFree(c->q8g);
    cudaFree(c->xg16);
    cudaFree(c->items);
    if (c->items_host) cudaFreeHost(c->items_host);
    cudaFree(c->smp_scratch);
    cudaFree(c->smp_rng);
    cudaFree(c->smp_ring);
    if (c->smp_host) cudaFreeHost(c->smp_host);
    for (int i = 0; i < TS_MAX_SEGMENTS; i++)
        if (c->graph[i]) cudaGraphExecDestroy(c->graph[i]);
    if (c->s) cudaStreamDestroy(c->s);
    (void)cudaGetLastError();
    free(c);
}

static ts_status cuda_stream_new(ts_backend *be, int n_threads, ts_stream **out) {
    (void)n_threads;
    *out = NULL;
    cuda_stream *c = (cuda_stream *)ts_calloc(1, sizeof *c);
    if (!c) return TS_ERR_NOMEM;
    c->base.be = be;
    c->base.n_threads = 1;
    c->device = cbe(be)->device;
    c->pdl = cbe(be)->pdl;
    ts_status st = TS_OK;
    cudaError_t e;
    if ((e = use_device(c->device)) != cudaSuccess) st = cuda_err(e, "set device");
    else if ((e = cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking)) != cudaSuccess) st = cuda_err(e, "cudaStreamCreate");
    else if ((e = cudaHostAlloc((void **)&c->err_host, sizeof(unsigned), cudaHostAllocMapped)) != cudaSuccess)
        st = cuda_err(e, "cudaHostAlloc (error word)");
    else if ((e = cudaHostGetDevicePointer((void **)&c->err_dev, (void *)c->err_host, 0)) != cudaSuccess)
        st = cuda_err(e, "cudaHostGetDevicePointer (error word)");
    else {
        *c->err_host = 0;
        cublasStatus_t bs = cublasCreate(&c->blas);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            c->blas = NULL;
            st = ts_fail(TS_ERR_DEVICE, "cuda: cublasCreate failed (status %d)", (int)bs);
        } else if ((bs = cublasSetStream(c->blas, c->s)) != CUBLAS_STATUS_SUCCESS) {
            st = ts_fail(TS_ERR_DEVICE, "cuda: cublasSetStream failed (status %d)", (int)bs);
        }
    }
    if (st != TS_OK) {
        cuda_stream_free(&c->base);
        return st;
    }
    *out = &c->base;
    return TS_OK;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static ts_status cuda_reserve(ts_stream *st, const ts_backend_reserve *r) {
    cuda_stream *c = cst(st);
    cudaError_t e = use_device(c->device);
    if (e != cudaSuccess) return cuda_err(e, "set device");
    if (r->max_tokens < 1 || r->max_in < 1) return ts_fail(TS_ERR_ARG, "cuda reserve: %lld tokens, %lld inputs",
                                                           (long long)r->max_tokens, (long long)r->max_in);
    cudaStreamSynchronize(c->s);
    cudaFree(c->q8);
    cudaFree(c->gemm);
    cudaFree(c->pos);
    c->q8 = c->gemm = NULL;
    c->pos = NULL;
    c->exact_act = r->exact_act;
    c->max_tokens = r->max_tokens;

    /* quantized activations of one decode matvec (or of the top-k experts'
     * rows, moe_matmul), per partner format; the K-quant partner needs whole
     * 256-element super-blocks */
    int64_t n_in = (r->max_in + 255) / 256 * 256;
    const int q8_rows = TS_CUDA_MAX_DECODE_TOK > TS_CUDA_MOE_MAX_K ? TS_CUDA_MAX_DECODE_TOK : TS_CUDA_MOE_MAX_K;
    size_t a = ts_cuda_q8_bytes(TS_TYPE_Q8_0, n_in, q8_rows);
    size_t b = ts_cuda_q8_bytes(TS_TYPE_Q8_K, n_in, q8_rows);
    c->q8_stride = align256(a > b ? a : b);
    /* the GEMM: x converted plus at least 128 dequantized rows, more rows
     * meaning fewer cuBLAS calls */
    ts_cuda_mat wm = {NULL, TS_TYPE_F16, r->max_in, 1, 0, NULL};
    c->gemm_bytes = align256(ts_cuda_gemm_scratch_min(&wm, (int)r->max_tokens) + TS_CUDA_GEMM_TILE_BYTES);
    size_t need = 2 * c->q8_stride + c->gemm_bytes + sizeof(int32_t) * (size_t)r->max_tokens;
    /* the grouped expert matmul: every (token, rank) row of a prefill chunk */
    cudaFree(c->q8g);
    cudaFree(c->xg16);
    cudaFree(c->items);
    if (c->items_host) cudaFreeHost(c->items_host);
    c->q8g = c->xg16 = NULL;
    c->items = c->items_host = NULL;
    c->n_items = 0;
    c->max_expert_rows = r->max_expert_rows;
    if (r->max_expert_rows > 0) {
        size_t ga = ts_cuda_q8_bytes(TS_TYPE_Q8_0, n_in, (int)r->max_expert_rows);
        size_t gb = ts_cuda_q8_bytes(TS_TYPE_Q8_K, n_in, (int)r->max_expert_rows);
        c->q8g_bytes = align256(ga > gb ? ga : gb);
        const size_t ib = sizeof(int32_t) * 3 * (size_t)r->max_expert_rows;
        const size_t xb = align256((size_t)r->max_expert_rows * (size_t)n_in * 2);
        if ((e = cudaMalloc(&c->q8g, c->q8g_bytes)) != cudaSuccess || (e = cudaMalloc((void **)&c->items, ib)) != cudaSuccess ||
            (e = cudaHostAlloc((void **)&c->items_host, ib, cudaHostAllocDefault)) != cudaSuccess ||
            (CUDA_MOE_GEMM && !c->exact_act && (e = cudaMalloc(&c->xg16, xb)) != cudaSuccess)) {
            if (e == cudaErrorMemoryAllocation) return oom(c->q8g_bytes + 2 * ib + xb, "a session's expert scratch");
            return cuda_err(e, "cudaMalloc (expert scratch)");
        }
    }
    if ((e = cudaMalloc(&c->q8, 2 * c->q8_stride)) != cudaSuccess ||
        (e = cudaMalloc(&c->gemm, c->gemm_bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->pos, sizeof(int32_t) * (size_t)r->max_tokens)) != cudaSuccess) {
        cudaFree(c->q8);
        cudaFree(c->gemm);
        c->q8 = c->gemm = NULL;
        if (e == cudaErrorMemoryAllocation) return oom(need, "a session's scratch");
        return cuda_err(e, "cudaMalloc (scratch)");
    }
    return TS_OK;
}

static void cuda_to_host(ts_stream *st, void *host, const void *dev, size_t bytes) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    note_cuda(c, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->s), "copy to host");
    note_cuda(c, cudaStreamSynchronize(c->s), "copy to host");
}

static void cuda_to_host_async(ts_stream *st, void *host, const void *dev, size_t bytes) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    note_cuda(c, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->s), "copy to host");
}

static void cuda_to_device(ts_stream *st, void *dev, const void *host, size_t bytes) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    note_cuda(c, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->s), "copy to device");
}

static ts_status cuda_sync(ts_stream *st) {
    cuda_stream *c = cst(st);
    if (c->err == TS_OK) {
        note_cuda(c, use_device(c->device), "set device");
        if (c->err == TS_OK) note_cuda(c, cudaStreamSynchronize(c->s), "sync (a kernel enqueued since the last sync failed)");
        if (c->err == TS_OK && *c->err_host) {
            unsigned w = *c->err_host;
            *c->err_host = 0; /* the stream is drained: no kernel of it writes the word now */
            ts_fail(TS_ERR_DEVICE, "%s%s%s%s", w & TS_CUDA_ERR_POS ? "a position outside the KV cache; " : "",
                    w & TS_CUDA_ERR_TOKEN ? "a token id outside the vocabulary; " : "",
                    w & TS_CUDA_ERR_EMPTY ? "no token could be sampled; " : "",
                    w & TS_CUDA_ERR_EXPERT ? "an expert id outside the layer's experts; " : "");
            note(c, TS_ERR_DEVICE, "kernel check");
        }
    }
    ts_status r = c->err;
    if (r != TS_OK) {
        ts_fail(r, "%s", c->err_msg);
        c->err = TS_OK; /* reported once; a lost device fails again at the next op */
    }
    return r;
}

static ts_event *cuda_event_new(ts_backend *be) {
    ts_event *ev = (ts_event *)ts_calloc(1, sizeof *ev);
    if (!ev) return NULL;
    cudaError_t e = use_device(cbe(be)->device);
    if (e == cudaSuccess) e = cudaEventCreate(&ev->ev);
    if (e != cudaSuccess) {
        cuda_err(e, "cudaEventCreate");
        free(ev);
        return NULL;
    }
    return ev;
}

static void cuda_event_free(ts_backend *be, ts_event *ev) {
    if (!ev) return;
    (void)use_device(cbe(be)->device);
    cudaEventDestroy(ev->ev);
    free(ev);
}

static void cuda_event_record(ts_stream *st, ts_event *ev) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    note_cuda(c, cudaEventRecord(ev->ev, c->s), "event record");
}

static void cuda_event_wait(ts_stream *st, ts_event *ev) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    note_cuda(c, cudaStreamWaitEvent(c->s, ev->ev, 0), "stream wait");
}

static ts_status cuda_event_sync(ts_backend *be, ts_event *ev) {
    cudaError_t e = use_device(cbe(be)->device);
    if (e == cudaSuccess) e = cudaEventSynchronize(ev->ev);
    return e == cudaSuccess ? TS_OK : cuda_err(e, "cudaEventSynchronize");
}

static double cuda_event_elapsed(ts_event *a, ts_event *b) {
    float ms = 0;
    if (cudaEventSynchronize(b->ev) != cudaSuccess || cudaEventElapsedTime(&ms, a->ev, b->ev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0.0;
    }
    return (double)ms * 1e-3;
}

/* ---- compute ---- */

static ts_cuda_mat cmat(const ts_mat *w) {
    ts_cuda_mat m = {w->data, (uint32_t)w->type, w->n_in, w->n_out, w->row_bytes, w->bias};
    return m;
}

static void cuda_embed(ts_stream *st, const ts_mat *emb, const int32_t *ids, int n, float scale, float *out) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    ts_cuda_mat m = cmat(emb);
    OP(c, ts_cuda_embed(c->s, &m, ids, n, scale, out, c->err_dev), "embed");
}

static bool is_float_type(ts_type t) { return t == TS_TYPE_F32 || t == TS_TYPE_F16 || t == TS_TYPE_BF16; }

/* Which kernel runs a weight at n_tok tokens: 0 = int8 matvec, 1 = F32
 * matvec in token groups, 2 = GEMM. */
static int matmul_path(const cuda_stream *c, ts_type t, int n_tok) {
    bool q8 = ts_cuda_q8_partner(t) != TS_TYPE_COUNT;
    if (!c->exact_act && q8 && n_tok <= TS_CUDA_MAX_DECODE_TOK) return 0;
    if (c->exact_act || (is_float_type(t) && n_tok <= CUDA_FLOAT_MATVEC_MAX) || (!q8 && n_tok <= TS_CUDA_MAX_DECODE_TOK)) return 1;
    return 2;
}

/* y[i] (+)= x . w[i]^T; with norm (only when every weight takes the int8
 * path) x is RMSNormed inside the activation quantization, the CPU's
 * rmsnorm-then-quantize in one pass. accumulate: y[i] += the product (the
 * residual add folded into the output store). */
static void matmul_impl(cuda_stream *c, int n_w, const ts_mat *const *w, float *const *y, const float *x, int n_tok,
                        const float *norm, float eps, bool accumulate) {
    if (n_w > TS_CUDA_MAX_MATS && n_w <= TS_MATMUL_MAX_W) { /* the op table's limit, in launches of the kernels' */
        for (int i0 = 0; i0 < n_w && c->err == TS_OK; i0 += TS_CUDA_MAX_MATS)
            matmul_impl(c, n_w - i0 < TS_CUDA_MAX_MATS ? n_w - i0 : TS_CUDA_MAX_MATS, w + i0, y + i0, x, n_tok, norm, eps, accumulate);
        return;
    }
    if (n_w < 1 || n_w > TS_CUDA_MAX_MATS || n_tok < 1 || n_tok > c->max_tokens) {
        note(c, ts_fail(TS_ERR_ARG, "%d weights, %d tokens (reserved %lld)", n_w, n_tok, (long long)c->max_tokens), "matmul");
        return;
    }
    const int64_t n_in = w[0]->n_in;
    ts_cuda_mat m[TS_CUDA_MAX_MATS];
    for (int i = 0; i < n_w; i++) {
        if (!ts_cuda_type_supported(w[i]->type)) {
            note(c, ts_fail(TS_ERR_UNSUPPORTED, "%s: weight type %s has no CUDA kernel", w[i]->name ? w[i]->name : "weight",
                            ts_type_name(w[i]->type)), "matmul");
            return;
        }
        m[i] = cmat(w[i]);
    }
    int path[TS_CUDA_MAX_MATS];
    for (int i = 0; i < n_w; i++) path[i] = matmul_path(c, w[i]->type, n_tok);
    /* int8: x quantized once per partner format, one launch per format */
    static const uint32_t partners[2] = {TS_TYPE_Q8_0, TS_TYPE_Q8_K};
    for (int p = 0; p < 2 && c->err == TS_OK; p++) {
        ts_cuda_mat pm[TS_CUDA_MAX_MATS];
        float *py[TS_CUDA_MAX_MATS];
        int k = 0;
        for (int i = 0; i < n_w; i++)
            if (path[i] == 0 && ts_cuda_q8_partner(w[i]->type) == partners[p]) {
                pm[k] = m[i];
                py[k++] = y[i];
            }
        if (!k) continue;
        void *q8 = (uint8_t *)c->q8 + (size_t)p * c->q8_stride;
        OP(c, ts_cuda_quantize_q8(c->s, partners[p], x, n_in, n_tok, norm, eps, q8), "matmul (quantize activations)");
        if (c->err == TS_OK) OP(c, ts_cuda_matvec_q8(c->s, k, pm, py, partners[p], q8, n_tok, accumulate), "matmul (int8 matvec)");
    }
    /* F32 activations: every such weight in one launch per token group */
    {
        ts_cuda_mat fm[TS_CUDA_MAX_MATS];
        float *fy[TS_CUDA_MAX_MATS];
        int k = 0, idx[TS_CUDA_MAX_MATS];
        for (int i = 0; i < n_w; i++)
            if (path[i] == 1) {
                fm[k] = m[i];
                idx[k++] = i;
            }
        for (int t0 = 0; k && t0 < n_tok && c->err == TS_OK; t0 += TS_CUDA_MAX_DECODE_TOK) {
            int nt = n_tok - t0 < TS_CUDA_MAX_DECODE_TOK ? n_tok - t0 : TS_CUDA_MAX_DECODE_TOK;
            for (int j = 0; j < k; j++) fy[j] = y[idx[j]] + (int64_t)t0 * fm[j].n_out;
            OP(c, ts_cuda_matvec(c->s, k, fm, fy, x + (int64_t)t0 * n_in, nt, NULL, NULL, accumulate), "matmul (f32 matvec)");
        }
    }
    for (int i = 0; i < n_w && c->err == TS_OK; i++)
        if (path[i] == 2)
            OP(c, ts_cuda_gemm(c->s, c->blas, &m[i], y[i], x, n_tok, TS_TYPE_F16, accumulate, c->gemm, c->gemm_bytes),
               "matmul (gemm)");
}

static void cuda_matmul(ts_stream *st, int n_w, const ts_mat *const *w, float *const *y, const float *x, int n_tok) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    matmul_impl(c, n_w, w, y, x, n_tok, NULL, 0.0f, false);
}

/* Fused where every weight takes one path: the int8 path normalizes inside
 * the activation quantization (xn not written); the F32 decode matvec
 * (the MoE router, --precise) computes 1/rms in every block and stores xn
 * from the same launch (ts_cuda_norm_matvec), so a decode token's router
 * waits for no one-block rmsnorm kernel. Otherwise rmsnorm, then matmul. */
static void cuda_norm_matmul(ts_stream *st, const float *x, const float *norm, float eps, float *xn, bool keep_xn, int n_w,
                             const ts_mat *const *w, float *const *y, int n_tok) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    bool q8 = n_w >= 1, flt = n_w >= 1 && n_w <= TS_CUDA_MAX_MATS && n_tok <= TS_CUDA_MAX_DECODE_TOK;
    for (int i = 0; i < n_w; i++) {
        const int p = matmul_path(c, w[i]->type, n_tok);
        q8 = q8 && p == 0;
        flt = flt && p == 1 && ts_cuda_type_supported(w[i]->type);
    }
    if (q8 && !keep_xn) {
        matmul_impl(c, n_w, w, y, x, n_tok, norm, eps, false);
        return;
    }
    if (flt) {
        ts_cuda_mat m[TS_CUDA_MAX_MATS];
        for (int i = 0; i < n_w; i++) m[i] = cmat(w[i]);
        OP(c, ts_cuda_norm_matvec(c->s, n_w, m, y, x, n_tok, norm, eps, keep_xn ? xn : NULL), "norm_matmul (f32 matvec)");
        return;
    }
    ts_backend_compose_norm_matmul(st, x, norm, eps, xn, keep_xn, n_w, w, y, n_tok);
}

/* int8 path: act(gate) * up is made, stored and quantized in one kernel,
 * then the matvec accumulates into the residual */
static void cuda_act_matmul_add(ts_stream *st, ts_act act, float *gate, const float *up, const ts_mat *w, int n_tok, float *x,
                                float *tmp) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    uint32_t partner = ts_cuda_q8_partner(w->type);
    if (matmul_path(c, w->type, n_tok) != 0 || n_tok > c->max_tokens) {
        ts_backend_compose_act_matmul_add(st, act, gate, up, w, n_tok, x, tmp);
        return;
    }
    void *q8 = (uint8_t *)c->q8 + (size_t)(partner == TS_TYPE_Q8_K) * c->q8_stride;
    OP(c, ts_cuda_quantize_q8_act(c->s, partner, (int)act, gate, up, w->n_in, n_tok, gate, q8), "act + quantize");
    ts_cuda_mat m = cmat(w);
    float *y[1] = {x};
    if (c->err == TS_OK) OP(c, ts_cuda_matvec_q8(c->s, 1, &m, y, partner, q8, n_tok, true), "matmul (int8 matvec)");
}

static void cuda_matmul_add(ts_stream *st, const ts_mat *w, const float *a, int n_tok, float *x, float *tmp) {
    (void)tmp;
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    float *y[1] = {x};
    matmul_impl(c, 1, &w, y, a, n_tok, NULL, 0.0f, true);
}

static void cuda_rmsnorm(ts_stream *st, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_rmsnorm(c->s, x, w, n, rows, eps, out), "rmsnorm");
}

static void rope_table_launch(cuda_stream *c, const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs) {
    int half = n_rot / 2;
    if (half < 1 || n_tok < 1) return;
    ts_launch(&rope_table_kernel, grid_1d((int64_t)n_tok * half, 256), 256, 0, c->s)(freq, half, pos, n_tok, mscale, cs);
    note_cuda(c, cudaGetLastError(), "rope table");
}

/* Deferred until an op reads cs (rope_due); made now when both entries hold
 * other tables. */
static void cuda_rope_table(ts_stream *st, const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    int k = c->rope_due[0].cs == cs ? 0 : c->rope_due[1].cs == cs ? 1 : !c->rope_due[0].cs ? 0 : !c->rope_due[1].cs ? 1 : -1;
    if (k < 0) {
        rope_table_launch(c, freq, n_rot, pos, n_tok, mscale, cs);
        return;
    }
    c->rope_due[k].freq = freq, c->rope_due[k].pos = pos, c->rope_due[k].cs = cs;
    c->rope_due[k].mscale = mscale, c->rope_due[k].n_rot = n_rot, c->rope_due[k].n_tok = n_tok;
}

static void cuda_rope(ts_stream *st, float *x, int n_tok, int n_head, int head_dim, int n_rot, const float *cs, ts_rope_mode mode) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    for (int i = 0; i < 2; i++)
        if (cs && c->rope_due[i].cs == cs) { /* the table's first reader */
            rope_table_launch(c, c->rope_due[i].freq, c->rope_due[i].n_rot, c->rope_due[i].pos, c->rope_due[i].n_tok,
                              c->rope_due[i].mscale, c->rope_due[i].cs);
            c->rope_due[i].cs = NULL;
        }
    int half = n_rot / 2;
    if (half < 1 || n_tok < 1 || n_head < 1) return;
    ts_launch(&rope_kernel, grid_1d((int64_t)n_tok * n_head * half, 256), 256, 0, c->s)(x, n_tok, n_head, head_dim, half, cs,
                                                                                 mode == TS_ROPE_NEOX);
    note_cuda(c, cudaGetLastError(), "rope");
}

/* The chunk's positions on the device: the desc's (the forward pass's
 * s->pos, so a recording stays valid), or pos0.. written here for a caller
 * that gave none. */
static const int32_t *desc_pos(cuda_stream *c, const ts_attn_desc *d) {
    if (d->pos) return d->pos;
    ts_launch(&iota_kernel, grid_1d(d->n_tok, 128), 128, 0, c->s)(c->pos, d->pos0, d->n_tok);
    note_cuda(c, cudaGetLastError(), "positions");
    return c->pos;
}

static bool desc_ok(cuda_stream *c, const ts_attn_desc *d, const char *op) {
    if (d->n_tok < 1 || d->n_tok > c->max_tokens || d->pos0 < 0 || d->pos0 + d->n_tok > d->n_ctx) {
        note(c, ts_fail(TS_ERR_ARG, "%d tokens at positions %d.. outside the cache of %d (reserved %lld tokens)", d->n_tok, d->pos0,
                        d->n_ctx, (long long)c->max_tokens), op);
        return false;
    }
    return true;
}

static void cuda_kv_store(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *k, const float *v) {
    cuda_stream *c = cst(st);
    if (!live(c) || !desc_ok(c, d, "kv store")) return;
    const int32_t *pos = desc_pos(c, d);
    int64_t n = (int64_t)d->n_tok * d->n_head_kv * d->head_dim;
    ts_launch(&kv_store_kernel, grid_1d(n, 256), 256, 0, c->s)(kv->k, kv->v, k, v, d->n_tok, d->n_head_kv, d->head_dim, d->n_ctx, pos,
                                                        d->kv_type == TS_TYPE_F16, c->err_dev);
    note_cuda(c, cudaGetLastError(), "kv store");
}

/* The rope_kv_store kernel's arguments for r (F16 cache; the caller checked it). */
static ts_cuda_rope_kv rope_args(cuda_stream *c, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q,
                                 float *k, const float *v) {
    ts_cuda_rope_kv a = {q, k, v, desc_pos(c, d), r->freq, r->q_norm, r->k_norm, (uint16_t *)kv->k, (uint16_t *)kv->v, c->err_dev,
                         d->n_tok, d->n_head, d->n_head_kv, d->head_dim, r->n_rot, d->n_ctx,
                         r->mode == TS_ROPE_NEOX ? TS_CUDA_ROPE_NEOX : TS_CUDA_ROPE_NORMAL, r->mscale, r->eps};
    return a;
}

/* RoPE computed from the positions on the device (the table the forward
 * pass made is not read), the per-head norms and the F16 store in one
 * kernel; an F32 cache takes the plain ops. */
static void cuda_rope_kv_store(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q, float *k,
                               const float *v) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    if (d->kv_type != TS_TYPE_F16 || d->head_dim > 256 || !r->freq) {
        ts_backend_compose_rope_kv_store(st, kv, d, r, q, k, v);
        return;
    }
    if (!desc_ok(c, d, "rope + kv store")) return;
    ts_cuda_rope_kv a = rope_args(c, kv, d, r, q, k, v);
    OP(c, ts_cuda_rope_kv_store(c->s, &a), "rope + kv store");
}

/* The F16 cache and a head_dim the tiled kernels take (ts_cuda_attention);
 * anything else runs the generic kernel. */
static bool attn_fast(const ts_attn_desc *d) {
    return d->kv_type == TS_TYPE_F16 && (d->head_dim == 64 || d->head_dim == 128 || d->head_dim == 256);
}

/* The split-K scratch for a, grown (outside a recording) to what it needs. */
static bool attn_scratch_ready(cuda_stream *c, const ts_cuda_attn *a, const char *op) {
    size_t need = ts_cuda_attn_scratch_bytes(a);
    if (need <= c->attn_bytes) return true;
    if (c->capturing) {
        /* growing means a sync and an allocation, neither allowed while recording */
        note(c, ts_fail(TS_ERR_ARG, "the split-K scratch (%zu bytes) must be sized by a plain step before recording", need), op);
        return false;
    }
    /* sized at the first decode step of this shape: the split depends on
     * head_dim and the heads, which reserve does not know */
    cudaError_t e = cudaStreamSynchronize(c->s);
    if (e == cudaSuccess) {
        cudaFree(c->attn);
        c->attn = NULL;
        c->attn_bytes = 0;
        e = cudaMalloc(&c->attn, need);
    }
    if (e == cudaErrorMemoryAllocation) {
        note(c, oom(need, "attention scratch"), op);
        return false;
    }
    note_cuda(c, e, "attention (scratch)");
    if (c->err != TS_OK) return false;
    c->attn_bytes = need;
    return true;
}

static void cuda_attention(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *out) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    if (!desc_ok(c, d, "attention")) return;
    if (d->head_dim > 32 * ATT_GEN_MAXD || d->n_head_kv < 1 || d->n_head % d->n_head_kv) {
        note(c, ts_fail(TS_ERR_ARG, "%d tokens, head_dim %d, %d/%d heads", d->n_tok, d->head_dim, d->n_head, d->n_head_kv),
             "attention");
        return;
    }
    const int32_t *pos = desc_pos(c, d);
    if (!attn_fast(d)) {
        int rows = d->n_tok * d->n_head;
        if (d->kv_type == TS_TYPE_F16)
            ts_launch(&attn_generic_kernel<true>, grid_1d(rows, 4), 128, 0, c->s)(q, kv->k, kv->v, out, d->n_tok, d->n_head, d->n_head_kv,
                                                                           d->head_dim, d->n_ctx, pos, d->window, d->scale, c->err_dev);
        else
            ts_launch(&attn_generic_kernel<false>, grid_1d(rows, 4), 128, 0, c->s)(q, kv->k, kv->v, out, d->n_tok, d->n_head, d->n_head_kv,
                                                                            d->head_dim, d->n_ctx, pos, d->window, d->scale, c->err_dev);
        note_cuda(c, cudaGetLastError(), "attention");
        return;
    }
    ts_cuda_attn a = {q, (const uint16_t *)kv->k, (const uint16_t *)kv->v, pos, out, c->err_dev,
                      d->n_tok, d->n_head, d->n_head_kv, d->head_dim, d->n_ctx, d->window, d->scale};
    if (!attn_scratch_ready(c, &a, "attention")) return;
    OP(c, ts_cuda_attention(c->s, &a, c->attn, c->attn_bytes), "attention");
}

/* Decode with the int8 Wo: the attention's split-K merge also quantizes its
 * output for Wo (one launch fewer), then the matvec adds into x. With r (one
 * token, ts_cuda_rope_attention_fits) the attention kernel also does RoPE and
 * the K/V store (one launch fewer again); r NULL: the caller stored them. */
static void attn_wo(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q, float *k,
                    const float *v, float *att, const ts_mat *w, float *x, float *tmp) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    const uint32_t partner = ts_cuda_q8_partner(w->type);
    const bool int8 = attn_fast(d) && d->n_tok <= TS_CUDA_MAX_DECODE_TOK && d->n_tok <= c->max_tokens && d->n_head_kv >= 1 &&
                      d->n_head % d->n_head_kv == 0 && matmul_path(c, w->type, d->n_tok) == 0 &&
                      w->n_in == (int64_t)d->n_head * d->head_dim && ts_cuda_q8_bytes(partner, w->n_in, d->n_tok) > 0;
    ts_cuda_attn a = {q, (const uint16_t *)kv->k, (const uint16_t *)kv->v, desc_pos(c, d), att, c->err_dev,
                      d->n_tok, d->n_head, d->n_head_kv, d->head_dim, d->n_ctx, d->window, d->scale};
    ts_cuda_rope_kv ra;
    memset(&ra, 0, sizeof ra);
    bool rope = false;
    if (r && attn_fast(d) && r->freq && d->n_tok <= c->max_tokens) {
        ra = rope_args(c, kv, d, r, q, k, v);
        rope = ts_cuda_rope_attention_fits(&ra, &a);
    }
    if (r && !rope) cuda_rope_kv_store(st, kv, d, r, q, k, v);
    if (!rope && !int8) {
        ts_backend_compose_attn_matmul_add(st, kv, d, q, att, w, x, tmp);
        return;
    }
    if (!desc_ok(c, d, "attention") || !attn_scratch_ready(c, &a, "attention")) return;
    void *q8 = int8 ? (uint8_t *)c->q8 + (size_t)(partner == TS_TYPE_Q8_K) * c->q8_stride : NULL;
    if (rope)
        OP(c, ts_cuda_rope_attention(c->s, &ra, &a, c->attn, c->attn_bytes, partner, q8), "rope + attention");
    else
        OP(c, ts_cuda_attention_q8(c->s, &a, c->attn, c->attn_bytes, partner, q8), "attention + quantize");
    if (c->err != TS_OK) return;
    if (!int8) {
        cuda_matmul_add(st, w, att, d->n_tok, x, tmp);
        return;
    }
    ts_cuda_mat m = cmat(w);
    float *y[1] = {x};
    OP(c, ts_cuda_matvec_q8(c->s, 1, &m, y, partner, q8, d->n_tok, true), "matmul (int8 matvec)");
}

static void cuda_attn_matmul_add(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *att,
                                 const ts_mat *w, float *x, float *tmp) {
    attn_wo(st, kv, d, NULL, (float *)q, NULL, NULL, att, w, x, tmp);
}

static void cuda_rope_attn_matmul_add(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const ts_rope_args *r, float *q,
                                      float *k, const float *v, float *att, const ts_mat *w, float *x, float *tmp) {
    attn_wo(st, kv, d, r, q, k, v, att, w, x, tmp);
}

static void cuda_act_mul(ts_stream *st, ts_act act, const float *gate, const float *up, int64_t n, float *out) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_act_mul(c->s, (int)act, gate, up, n, out), "act_mul");
}

static void cuda_add(ts_stream *st, float *x, const float *y, int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_add(c->s, x, y, n), "add");
}

static void cuda_scale_add(ts_stream *st, float *x, const float *y, float a, int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_scale_add(c->s, x, y, a, n), "scale_add");
}

static void cuda_scale(ts_stream *st, float *x, const float *y, float a, int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_scale(c->s, x, y, a, n), "scale");
}

static void cuda_softcap(ts_stream *st, float *x, int64_t n, float cap) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_softcap(c->s, x, n, cap), "softcap");
}

/* ---- routed experts ---- */

static void cuda_moe_route(ts_stream *st, const float *r, int n_tok, int n_expert, int k, bool renorm, int32_t *ids, float *w) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_moe_route(c->s, r, n_tok, n_expert, k, renorm, ids, w), "moe_route");
}

/* Streamed decode planned on the device: the pass (one warp: the policy,
 * the prefetch judgement, the counters, the session's tables) and the fill
 * of its misses by the SMs from the pinned host tier. A prefetch's fill runs
 * beside the compute (the session's copy stream), so it takes a few blocks,
 * enough to keep the PCIe link's requests in flight, not the device. */
static_assert((int)TS_XP_COUNT == (int)TS_CUDA_CS_COUNT && (int)TS_XP_BYTES_PF == (int)TS_CUDA_CS_BYTES_PF &&
                  (int)TS_XP_PF_SAVED == (int)TS_CUDA_CS_PF_SAVED && (int)TS_XP_LAYOUT_W == TS_CUDA_LAYOUT_W,
              "the backend's expert-pass counters are the kernels' by index");
#define TS_PREFETCH_FILL_BLOCKS 32

static void cuda_expert_pass(ts_stream *st, const ts_expert_slots *x, const int32_t *ids, int k, bool prefetch, const void **const *tab) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    ts_cuda_cache_layer l;
    memset(&l, 0, sizeof l);
    l.n_slots = x->n_slots;
    l.n_experts = x->n_experts;
    l.policy = x->policy;
    l.slot_expert = x->slot_expert;
    l.slot_tick = x->slot_tick;
    l.expert_slot = x->expert_slot;
    l.expert_count = x->expert_count;
    l.tick = x->tick;
    l.prefetched = x->prefetched;
    l.stats = x->stats;
    l.layout = x->layout;
    l.slots = x->slots;
    l.stride = x->stride;
    int32_t *slot = x->plan, *hit = x->plan + TS_CUDA_CACHE_MAX_K, *evicted = x->plan + 2 * TS_CUDA_CACHE_MAX_K;
    OP(c, ts_cuda_cache_pass(c->s, &l, ids, k, prefetch, slot, hit, evicted, prefetch ? NULL : tab, c->err_dev), "expert pass");
    if (c->err == TS_OK)
        OP(c, ts_cuda_expert_fill(c->s, &l, x->tier, ids, slot, hit, k, prefetch ? TS_PREFETCH_FILL_BLOCKS : 0, c->err_dev),
           "expert pass (copying misses)");
}

static ts_cuda_moe_mat cmoe(const ts_expert_mat *w) {
    ts_cuda_moe_mat m = {w->table, w->n_expert, (uint32_t)w->type, w->n_in, w->n_out, w->row_bytes};
    return m;
}

/* Sets sharing a path (and partner format) go in one launch: gate and up of
 * the usual file. The int8 path quantizes x (1 or k rows) once. */
static void cuda_moe_matmul(ts_stream *st, int n_set, const ts_expert_mat *const *w, float *const *y, const int32_t *ids, int k,
                            const float *x, bool x_per_expert) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    if (n_set < 1 || n_set > 2 || k < 1 || k > TS_CUDA_MOE_MAX_K) {
        note(c, ts_fail(TS_ERR_ARG, "%d expert sets, top-%d (at most 2 and %d)", n_set, k, TS_CUDA_MOE_MAX_K), "moe_matmul");
        return;
    }
    ts_cuda_moe_mat m[2];
    uint32_t partner[2];
    for (int s = 0; s < n_set; s++) {
        if (!ts_cuda_type_supported(w[s]->type)) {
            note(c, ts_fail(TS_ERR_UNSUPPORTED, "%s: weight type %s has no CUDA kernel", w[s]->name ? w[s]->name : "experts",
                            ts_type_name(w[s]->type)), "moe_matmul");
            return;
        }
        m[s] = cmoe(w[s]);
        partner[s] = c->exact_act ? (uint32_t)TS_TYPE_COUNT : ts_cuda_q8_partner(w[s]->type);
    }
    const int rows = x_per_expert ? k : 1;
    for (int s0 = 0; s0 < n_set && c->err == TS_OK;) {
        const int ns = s0 + 1 < n_set && partner[s0 + 1] == partner[s0] ? 2 : 1;
        if (partner[s0] != (uint32_t)TS_TYPE_COUNT) {
            void *q8 = (uint8_t *)c->q8 + (size_t)(partner[s0] == TS_TYPE_Q8_K) * c->q8_stride;
            OP(c, ts_cuda_quantize_q8(c->s, partner[s0], x, m[s0].n_in, rows, NULL, 0.0f, q8), "moe_matmul (quantize activations)");
            if (c->err == TS_OK)
                OP(c, ts_cuda_moe_matvec_q8(c->s, ns, m + s0, y + s0, ids, k, partner[s0], q8, x_per_expert, c->err_dev),
                   "moe_matmul (int8 matvec)");
        } else {
            OP(c, ts_cuda_moe_matvec(c->s, ns, m + s0, y + s0, ids, k, x, x_per_expert, c->err_dev), "moe_matmul (f32 matvec)");
        }
        s0 += ns;
    }
}

/* int8 path: act(gate) * up made, stored and quantized (k rows) in one
 * kernel, then the k down projections */
static void cuda_moe_act_matmul(ts_stream *st, ts_act act, float *gate, const float *up, const ts_expert_mat *w, float *y,
                                const int32_t *ids, int k) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    const uint32_t partner = c->exact_act ? (uint32_t)TS_TYPE_COUNT : ts_cuda_q8_partner(w->type);
    if (partner == (uint32_t)TS_TYPE_COUNT || k < 1 || k > TS_CUDA_MOE_MAX_K) {
        ts_backend_compose_moe_act_matmul(st, act, gate, up, w, y, ids, k);
        return;
    }
    void *q8 = (uint8_t *)c->q8 + (size_t)(partner == TS_TYPE_Q8_K) * c->q8_stride;
    OP(c, ts_cuda_quantize_q8_act(c->s, partner, (int)act, gate, up, w->n_in, k, gate, q8), "moe act + quantize");
    ts_cuda_moe_mat m = cmoe(w);
    float *ys[1] = {y};
    if (c->err == TS_OK) OP(c, ts_cuda_moe_matvec_q8(c->s, 1, &m, ys, ids, k, partner, q8, true, c->err_dev), "moe_matmul (int8 matvec)");
}

/* Prefill through the tables: int8 experts run as items of up to
 * TS_CUDA_MAX_DECODE_TOK rows of one expert, all in one launch per set pair
 * (ts_cuda_moe_matvec_q8_items); other types, and --precise, run each group
 * as a plain matmul of that expert (the host table gives its address). */
/* The groups as items of at most max_rows rows, in c->items; returns their
 * count. The down projection of a layer reuses its gate/up's items (the
 * same groups), which are then not copied again. */
static int group_items(cuda_stream *c, const ts_expert_groups *g, int max_rows) {
    int n = 0;
    bool same = true;
    for (int j = 0; j < g->n_group; j++)
        for (int r = 0; r < g->cnt[j]; r += max_rows, n++) {
            const int32_t it[3] = {g->id[j], g->off[j] + r, g->cnt[j] - r < max_rows ? g->cnt[j] - r : max_rows};
            same = same && n < c->n_items && !memcmp(c->items_host + 3 * n, it, sizeof it);
            if (!same) memcpy(c->items_host + 3 * n, it, sizeof it);
        }
    if (!same || n != c->n_items) {
        c->n_items = n;
        note_cuda(c, cudaMemcpyAsync(c->items, c->items_host, sizeof(int32_t) * 3 * (size_t)n, cudaMemcpyHostToDevice, c->s),
                  "moe_matmul_grouped (items)");
    }
    return n;
}

static void cuda_moe_matmul_grouped(ts_stream *st, int n_set, const ts_expert_mat *const *w, float *const *y, const ts_expert_groups *g,
                                    const float *x) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    if (n_set < 1 || n_set > 2 || g->n_rows < 1 || g->n_rows > c->max_expert_rows) {
        note(c, ts_fail(TS_ERR_ARG, "%d expert sets, %d rows (reserved %lld)", n_set, g->n_rows, (long long)c->max_expert_rows),
             "moe_matmul_grouped");
        return;
    }
    uint32_t partner = c->exact_act ? (uint32_t)TS_TYPE_COUNT : ts_cuda_q8_partner(w[0]->type);
    if (n_set == 2 && ts_cuda_q8_partner(w[1]->type) != partner) partner = TS_TYPE_COUNT;
    if (partner == (uint32_t)TS_TYPE_COUNT) {
        for (int j = 0; j < g->n_group && c->err == TS_OK; j++) {
            ts_mat m[2];
            const ts_mat *mp[2];
            float *yp[2];
            for (int s = 0; s < n_set; s++) {
                m[s] = (ts_mat){.data = w[s]->host_table[g->id[j]], .type = w[s]->type, .n_in = w[s]->n_in, .n_out = w[s]->n_out,
                                .row_bytes = w[s]->row_bytes, .bias = NULL, .name = w[s]->name};
                mp[s] = &m[s];
                yp[s] = y[s] + (size_t)g->off[j] * (size_t)w[s]->n_out;
            }
            matmul_impl(c, n_set, mp, yp, x + (size_t)g->off[j] * (size_t)w[0]->n_in, g->cnt[j], NULL, 0.0f, false);
        }
        return;
    }
    ts_cuda_moe_mat m[2];
    for (int s = 0; s < n_set; s++) m[s] = cmoe(w[s]);
    bool tc = c->xg16 && m[0].n_in % 128 == 0;
    for (int s = 0; s < n_set; s++) tc = tc && ts_cuda_moe_gemm_type(m[s].type);
    const int n = group_items(c, g, tc ? TS_CUDA_MOE_GEMM_ROWS : TS_CUDA_MAX_DECODE_TOK);
    if (tc) {
        if (c->err == TS_OK)
            OP(c, ts_cuda_convert_f32(c->s, x, (int64_t)g->n_rows * m[0].n_in, c->xg16, TS_TYPE_F16), "moe_matmul_grouped (x to F16)");
        if (c->err == TS_OK)
            OP(c, ts_cuda_moe_gemm_items(c->s, n_set, m, y, c->items, n, c->xg16, g->n_rows, c->err_dev),
               "moe_matmul_grouped (tensor cores)");
        return;
    }
    if (c->err == TS_OK)
        OP(c, ts_cuda_quantize_q8(c->s, partner, x, m[0].n_in, g->n_rows, NULL, 0.0f, c->q8g), "moe_matmul_grouped (quantize)");
    if (c->err == TS_OK)
        OP(c, ts_cuda_moe_matvec_q8_items(c->s, n_set, m, y, c->items, n, partner, c->q8g, g->n_rows, c->err_dev),
           "moe_matmul_grouped (int8 matvec)");
}

static void cuda_moe_combine(ts_stream *st, float *out, const float *y, const float *w, const int32_t *rows, int n_tok, int k,
                             int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_moe_combine(c->s, out, y, w, rows, n_tok, k, n), "moe_combine");
}

static void cuda_moe_combine_add(ts_stream *st, float *x, float *tmp, const float *y, const float *w, int k, int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    (void)tmp; /* the sum goes straight into x */
    OP(c, ts_cuda_moe_combine_add(c->s, x, y, w, NULL, 1, k, n), "moe_combine_add");
}

static void cuda_gather_rows(ts_stream *st, float *out, const float *x, const int32_t *idx, int n_rows, int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_gather_rows(c->s, out, x, idx, n_rows, n), "gather_rows");
}

static void cuda_gated_add(ts_stream *st, float *x, const float *y, const float *g, int n_tok, int64_t n) {
    cuda_stream *c = cst(st);
    if (!live(c)) return;
    OP(c, ts_cuda_gated_add(c->s, x, y, g, n_tok, n), "gated_add");
}

/* ---- recorded decode steps ---- */

static ts_status cuda_capture_begin(ts_stream *st, int seg) {
    cuda_stream *c = cst(st);
    if (c->capturing) return ts_fail(TS_ERR_ARG, "cuda: a recording is already open");
    if (seg < 0 || seg >= TS_MAX_SEGMENTS) return ts_fail(TS_ERR_LIMIT, "cuda: recording segment %d (at most %d)", seg, TS_MAX_SEGMENTS);
    if (!live(c)) return cuda_sync(st);
    if (seg == 0)
        for (int i = 0; i < TS_MAX_SEGMENTS; i++)
            if (c->graph[i]) cudaGraphExecDestroy(c->graph[i]), c->graph[i] = NULL;
    c->seg = seg;
    /* thread-local: another session's thread may call unsafe CUDA APIs meanwhile */
    cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return cuda_err(e, "cudaStreamBeginCapture");
    c->capturing = true;
    return TS_OK;
}

static ts_status cuda_capture_end(ts_stream *st) {
    cuda_stream *c = cst(st);
    if (!c->capturing) return ts_fail(TS_ERR_ARG, "cuda: no recording is open");
    c->capturing = false;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->s, &g);
    if (c->err != TS_OK) { /* an op failed while recording: report it, keep nothing */
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return cuda_sync(st);
    }
    if (e != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return cuda_err(e, "cudaStreamEndCapture (an op could not be recorded)");
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return cuda_err(e, "cudaGraphInstantiate");
    }
    if (c->graph[c->seg]) cudaGraphExecDestroy(c->graph[c->seg]);
    c->graph[c->seg] = x;
    return TS_OK;
}

static ts_status cuda_replay(ts_stream *st, int seg) {
    cuda_stream *c = cst(st);
    if (seg < 0 || seg >= TS_MAX_SEGMENTS || !c->graph[seg]) return ts_fail(TS_ERR_ARG, "cuda: nothing recorded as segment %d", seg);
    if (!live(c)) return cuda_sync(st);
    note_cuda(c, cudaGraphLaunch(c->graph[seg], c->s), "replaying the decode step");
    return TS_OK; /* a failure surfaces at the next sync, as for any op */
}

/* ---- sampling ---- */

#define CUDA_SAMPLE_RING_MAX 8192 /* ts_cuda_sample's ring limit */

/* Device state and pinned staging for a vocab and ring size. */
static ts_status sample_reserve(cuda_stream *c, int32_t n_vocab, int32_t cap) {
    cudaError_t e = cudaSuccess;
    if (n_vocab != c->smp_vocab) {
        const size_t chain = align256(ts_cuda_sample_scratch_bytes(n_vocab));
        const size_t need = chain + align256(ts_cuda_argmax_scratch_bytes(n_vocab));
        cudaFree(c->smp_scratch);
        c->smp_scratch = c->smp_am = NULL;
        c->smp_vocab = 0;
        if ((e = cudaMalloc(&c->smp_scratch, need)) != cudaSuccess) return e == cudaErrorMemoryAllocation ? oom(need, "the sampler") : cuda_err(e, "cudaMalloc (sampler)");
        /* the argmax part must start zeroed (ts_cuda_argmax) */
        if ((e = cudaMemsetAsync(c->smp_scratch, 0, need, c->s)) != cudaSuccess) return cuda_err(e, "cudaMemset (sampler)");
        c->smp_scratch_bytes = chain;
        c->smp_am = (uint8_t *)c->smp_scratch + chain;
        c->smp_vocab = n_vocab;
    }
    if (!c->smp_rng) {
        if ((e = cudaMalloc((void **)&c->smp_rng, 64)) != cudaSuccess) return cuda_err(e, "cudaMalloc (sampler)");
        c->smp_ring_pos = (int32_t *)((uint8_t *)c->smp_rng + 48);
    }
    if (cap > c->smp_cap) {
        cudaFree(c->smp_ring);
        c->smp_ring = NULL;
        c->smp_cap = 0;
        if ((e = cudaMalloc((void **)&c->smp_ring, sizeof(int32_t) * (size_t)cap)) != cudaSuccess) return cuda_err(e, "cudaMalloc (sampler)");
        c->smp_cap = cap;
    }
    size_t hb = 64 + sizeof(int32_t) * (size_t)cap;
    if (hb > c->smp_host_bytes) {
        if (c->smp_host) cudaFreeHost(c->smp_host);
        c->smp_host = NULL;
        c->smp_host_bytes = 0;
        c->smp_id = NULL;
        if ((e = cudaHostAlloc((void **)&c->smp_host, hb, cudaHostAllocMapped)) != cudaSuccess) return cuda_err(e, "cudaHostAlloc (sampler)");
        c->smp_host_bytes = hb;
        uint8_t *dev = NULL;
        if ((e = cudaHostGetDevicePointer((void **)&dev, c->smp_host, 0)) != cudaSuccess) return cuda_err(e, "cudaHostGetDevicePointer (sampler)");
        c->smp_id = (int32_t *)(dev + 32);
    }
    return TS_OK;
}

/* The state goes up, one kernel chain draws, the advanced RNG comes back
 * (32 bytes instead of the logits row) and the id is written straight into
 * mapped host memory; greedy moves nothing but its launch. */
static ts_status cuda_sample(ts_stream *st, float *logits, int32_t n_vocab, ts_sample_desc *d, int32_t *id) {
    cuda_stream *c = cst(st);
    *id = -1;
    int32_t cap = d->recent ? d->recent_cap : 0;
    if (cap > CUDA_SAMPLE_RING_MAX)
        return ts_fail(TS_ERR_UNSUPPORTED, "cuda sample: a repetition window of %d ids (the device sampler takes %d)", cap,
                       CUDA_SAMPLE_RING_MAX);
    if (!live(c)) return cuda_sync(st);
    ts_status rs = sample_reserve(c, n_vocab, cap);
    if (rs != TS_OK) return rs;
    /* greedy without a penalty: the chain's steps reduce to NaN -> -inf and
     * the argmax, which many blocks do faster than the chain's one (7B
     * vocabulary: 21 us a token); no RNG goes up or comes back (greedy draws
     * nothing: d->rng is left as it is, as on the CPU) */
    const bool greedy = d->temperature <= 0.0f && (!cap || d->repeat_penalty == 1.0f);
    if (greedy) {
        OP(c, ts_cuda_argmax(c->s, logits, n_vocab, c->smp_id, c->smp_am, c->err_dev), "sample (greedy)");
    } else {
        memcpy(c->smp_host, d->rng, 32);
        if (cap) memcpy(c->smp_host + 64, d->recent, sizeof(int32_t) * (size_t)cap);
        note_cuda(c, cudaMemcpyAsync(c->smp_rng, c->smp_host, 32, cudaMemcpyHostToDevice, c->s), "sample (state)");
        if (cap) note_cuda(c, cudaMemcpyAsync(c->smp_ring, c->smp_host + 64, sizeof(int32_t) * (size_t)cap, cudaMemcpyHostToDevice, c->s), "sample (ring)");
        note_cuda(c, cudaMemsetAsync(c->smp_ring_pos, 0, sizeof(int32_t), c->s), "sample (ring)");
        ts_cuda_sampler_params p = {d->temperature, d->top_k, d->top_p, d->min_p, d->repeat_penalty};
        ts_cuda_sampler_state ss = {c->smp_rng, cap ? c->smp_ring : NULL, c->smp_ring_pos, cap};
        if (c->err == TS_OK)
            OP(c, ts_cuda_sample(c->s, logits, n_vocab, &p, &ss, c->smp_id, c->err_dev, c->smp_scratch, c->smp_scratch_bytes), "sample");
    }
    /* the id is written where the host reads it (smp_id); the advanced RNG
     * state comes back when the chain drew */
    if (!greedy) note_cuda(c, cudaMemcpyAsync(c->smp_host, c->smp_rng, 32, cudaMemcpyDeviceToHost, c->s), "sample (result)");
    ts_status r = cuda_sync(st);
    if (r != TS_OK) return r;
    if (!greedy) memcpy(d->rng, c->smp_host, 32);
    *id = *(volatile int32_t *)(c->smp_host + 32);
    if (*id < 0) return ts_fail(TS_ERR_ARG, "sampling: every logit is -inf or NaN: no token can be chosen");
    return TS_OK;
}

static const ts_backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = cuda_destroy,
    .describe = cuda_describe,
    .alloc = cuda_alloc,
    .dealloc = cuda_dealloc,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .mem_info = cuda_mem_info,
    .weight_bind = cuda_weight_bind,
    .weight_unbind = cuda_weight_unbind,
    .stream_new = cuda_stream_new,
    .stream_free = cuda_stream_free,
    .reserve = cuda_reserve,
    .to_host = cuda_to_host,
    .to_host_async = cuda_to_host_async,
    .to_device = cuda_to_device,
    .sync = cuda_sync,
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_sync = cuda_event_sync,
    .event_elapsed = cuda_event_elapsed,
    .embed = cuda_embed,
    .matmul = cuda_matmul,
    .rmsnorm = cuda_rmsnorm,
    .rope_table = cuda_rope_table,
    .rope = cuda_rope,
    .kv_store = cuda_kv_store,
    .attention = cuda_attention,
    .act_mul = cuda_act_mul,
    .add = cuda_add,
    .scale_add = cuda_scale_add,
    .scale = cuda_scale,
    .softcap = cuda_softcap,
    .moe_route = cuda_moe_route,
    .moe_matmul = cuda_moe_matmul,
    .moe_matmul_grouped = cuda_moe_matmul_grouped,
    .moe_combine = cuda_moe_combine,
    .gather_rows = cuda_gather_rows,
    .gated_add = cuda_gated_add,
    .norm_matmul = cuda_norm_matmul,
    .matmul_add = cuda_matmul_add,
    .act_matmul_add = cuda_act_matmul_add,
    .attn_matmul_add = cuda_attn_matmul_add,
    .moe_act_matmul = cuda_moe_act_matmul,
    .moe_combine_add = cuda_moe_combine_add,
    .rope_kv_store = cuda_rope_kv_store,
    .rope_attn_matmul_add = cuda_rope_attn_matmul_add,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .replay = cuda_replay,
    .expert_pass = cuda_expert_pass,
    .sample = cuda_sample,
};

extern "C" ts_status ts_backend_cuda_new(int device, bool pdl, ts_backend **out) {
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ts_fail(TS_ERR_DEVICE, "cuda: no usable CUDA device: %s (%s)%s", cudaGetErrorString(e), cudaGetErrorName(e),
                       e == cudaErrorInsufficientDriver ? "; install or update the NVIDIA driver" : "");
    }
    if (n == 0) return ts_fail(TS_ERR_DEVICE, "cuda: no CUDA device found");
    if (device < 0 || device >= n) return ts_fail(TS_ERR_ARG, "cuda: device %d does not exist (%d device%s)", device, n, n == 1 ? "" : "s");
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, device)) != cudaSuccess) return cuda_err(e, "cudaGetDeviceProperties");
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
        (void)cudaGetLastError();
        return cuda_err(e, "creating a context");
    }
    /* the build carries code for some architectures only (TS_CUDA_GENCODE:
     * sm_90a and compute_90 PTX by default); ask whether one runs here */
    cudaFuncAttributes fa;
    if ((e = cudaFuncGetAttributes(&fa, (const void *)iota_kernel)) != cudaSuccess) {
        (void)cudaGetLastError();
        return ts_fail(TS_ERR_UNSUPPORTED,
                       "cuda: %s (sm_%d%d) cannot run this build's kernels: %s; the build targets sm_90 and newer "
                       "(rebuild with -DTS_CUDA_GENCODE for this GPU, or use --backend cpu)",
                       p.name, p.major, p.minor, cudaGetErrorString(e));
    }
    cuda_backend *b = (cuda_backend *)ts_calloc(1, sizeof *b);
    if (!b) return TS_ERR_NOMEM;
    b->base.ops = &cuda_ops;
    b->base.kind = TS_BACKEND_CUDA;
    b->base.host_memory = false;
    b->base.n_threads = 1;
    b->device = device;
    snprintf(b->name, sizeof b->name, "%s", p.name);
    b->cc_major = p.major;
    b->cc_minor = p.minor;
    b->total_mem = p.totalGlobalMem;
    b->pdl = pdl;
    *out = &b->base;
    return TS_OK;
}
