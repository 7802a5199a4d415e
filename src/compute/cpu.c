/* The CPU backend: ops of backend.h over the quant kernels (tensor/quant.h)
 * and a persistent thread pool.
 *
 * Threading rule: every output element is computed by exactly one thread,
 * with work split on fixed block boundaries that do not depend on the thread
 * count, so results are bit-identical for any number of threads. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/threadpool.h"
#include "compute/backend.h"
#include "compute/cpu_kernels.h"
#include "tensor/quant.h"
#include "tensor/types.h"

/* ---- small float kernels: references and dispatch ---- */

static float ref_dot_f32(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static float ref_dot_f16(const float *a, const uint16_t *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * ts_f16_to_f32(b[i]);
    return s;
}
static void ref_axpy_f32(float a, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}
static void ref_axpy_f16(float a, const uint16_t *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * ts_f16_to_f32(x[i]);
}
static void ref_to_f16(const float *x, uint16_t *y, int n) {
    for (int i = 0; i < n; i++) y[i] = ts_f32_to_f16(x[i]);
}

static void ref_qk_f32(const float *q, int qs, int nr, const float *kt, int kts, int nk, int n, float scale, float *s, int ss) {
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++) {
            float a = 0;
            for (int i = 0; i < n; i++) a += q[(size_t)r * qs + i] * kt[(size_t)i * kts + j];
            s[(size_t)r * ss + j] = a * scale;
        }
}
static float ref_exp_sum(float *s, int n, float m) {
    float sum = 0;
    for (int j = 0; j < n; j++) sum += s[j] = ts_softmax_exp(s[j] - m);
    return sum;
}
static float ref_row_max(const float *s, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    return mx;
}
static void ref_pv_f32(const float *p, int ps, int nr, const float *V, int nk, int n, float *y, int ys) {
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++) ref_axpy_f32(p[(size_t)r * ps + j], V + (size_t)j * n, y + (size_t)r * ys, n);
}

static void ref_silu_mul(const float *g, const float *u, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ts_cpu_kernels_ref(ts_cpu_kernels *k) {
    k->silu_mul = ref_silu_mul;
    k->qk_f32 = ref_qk_f32;
    k->exp_sum = ref_exp_sum;
    k->row_max = ref_row_max;
    k->pv_f32 = ref_pv_f32;
    k->dot_f32 = ref_dot_f32;
    k->dot_f16 = ref_dot_f16;
    k->axpy_f32 = ref_axpy_f32;
    k->axpy_f16 = ref_axpy_f16;
    k->to_f16 = ref_to_f16;
}

static ts_cpu_kernels g_kernels;
static pthread_once_t g_kernels_once = PTHREAD_ONCE_INIT;

static void kernels_init(void) {
    ts_cpu_kernels_ref(&g_kernels);
#if defined(__x86_64__)
    /* the quant dispatcher's choice (CPU detection and TS_FORCE_ISA) covers
     * these kernels too: AVX2 + FMA + F16C + BMI2 */
    if (strcmp(ts_kernels_isa(), "scalar") != 0) ts_cpu_kernels_avx2(&g_kernels);
#endif
}

const ts_cpu_kernels *ts_cpu_kernels_get(void) {
    pthread_once(&g_kernels_once, kernels_init);
    return &g_kernels;
}

/* ---- the backend ---- */

#define CPU_MAX_MATS TS_MATMUL_MAX_W /* weights per matmul call */
#define CPU_ROW_GRAIN 16   /* rows per block of a matmul split */
#define CPU_TOK_TILE 16    /* activation rows per gemm tile */
#define CPU_ROW_TILE 128   /* weight rows per gemm tile: stay in L2 while all tokens pass (16-row tiles ran ~25% slower) */
/* from this many tokens the panel GEMM's unpack pays (ts_gemm): a 30B-A3B
 * expert gate's share (384 x 2048 Q4_K, session 33, a Xeon) took 0.88x the
 * tile path's time at 5 tokens on AVX2, 0.97x on AVX-512, 0.80-0.84x at 6 */
#define CPU_GEMM_MIN_TOK 6

/* The backend itself holds nothing mutable: weights are the file's own
 * bytes, memory comes from mmap, and every stream has its own pool and
 * scratch, so sessions on different threads never contend here. */
typedef struct cpu_backend {
    ts_backend base;
} cpu_backend;

typedef struct cpu_stream {
    ts_stream base;
    ts_pool *pool;
    const ts_cpu_kernels *k;
    uint8_t *qbuf;         /* (CPU_MAX_MATS, qbuf_stride) partner-format activations */
    size_t qbuf_stride;    /* bytes per slot */
    float *scores;         /* (n_threads, n_ctx) attention scores */
    int n_ctx;             /* capacity of one scores row */
    bool exact_act;        /* F32 activations: dequantize weight rows instead of quantizing x */
    float *wrow;           /* (n_threads, wrow_n) exact mode: one dequantized weight row per thread */
    int64_t wrow_n;
    int32_t *mg_idx;       /* (mg_idx_n) a grouped matmul's row lists: see mmg_dedup */
    int64_t mg_idx_n;
    uint8_t *kscratch;     /* (n_threads, kscratch_stride) prefill GEMM panels / attention tiles: see kscratch_reserve */
    size_t kscratch_stride;
    ts_status err;         /* an op's failure since the last sync (expert_pass's bad ids); its message is left then */
} cpu_stream;

/* CPU events are host timestamps: the ops are synchronous, so an op's time
 * ends when it returns. */
struct ts_event {
    double t;
};

static cpu_stream *cstream(ts_stream *st) { return (cpu_stream *)st; }

static void *cpu_alloc(ts_backend *be, size_t bytes) {
    (void)be;
    if (!bytes) bytes = 1;
    /* anonymous mappings are zero-filled and committed on first touch, so a
     * long context costs memory only as far as it is used (NORESERVE: a
     * 128k-position cache must not be refused up front by overcommit) */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        ts_fail(TS_ERR_NOMEM, "cannot allocate %zu bytes", bytes);
        return NULL;
    }
    /* 2 MB pages for what is read every token (expert slots, KV): the weight
     * mapping's reason (src/base/base.c); committed 2 MB at a time, still on
     * first touch */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static void cpu_dealloc(ts_backend *be, void *p, size_t bytes) {
    (void)be;
    if (p) munmap(p, bytes ? bytes : 1);
}

static ts_status cpu_weight_bind(ts_backend *be, const void *host, size_t bytes, const void **dev) {
    (void)be;
    (void)bytes;
    *dev = host; /* zero-copy: the ops read the mapped file in place */
    return TS_OK;
}

static void cpu_weight_unbind(ts_backend *be, const void *dev, size_t bytes) {
    (void)be;
    (void)dev;
    (void)bytes;
}

static void cpu_describe(const ts_backend *be, char *buf, size_t n) {
    snprintf(buf, n, "cpu: %s, %d threads, %s prefetch", ts_kernels_isa(), be->n_threads, ts_kernels_prefetch());
}

static void cpu_destroy(ts_backend *be) { free(be); }

static ts_status cpu_stream_new(ts_backend *be, int n_threads, ts_stream **out) {
    *out = NULL;
    cpu_stream *c = ts_calloc(1, sizeof *c);
    if (!c) return TS_ERR_NOMEM;
    ts_status st = ts_pool_new(n_threads > 0 ? n_threads : be->n_threads, &c->pool);
    if (st != TS_OK) {
        free(c);
        return st;
    }
    c->base.be = be;
    c->base.n_threads = ts_pool_size(c->pool);
    c->k = ts_cpu_kernels_get();
    *out = &c->base;
    return TS_OK;
}

static void cpu_stream_free(ts_stream *st) {
    if (!st) return;
    cpu_stream *c = cstream(st);
    ts_pool_free(c->pool);
    free(c->qbuf);
    free(c->mg_idx);
    free(c->scores);
    free(c->wrow);
    free(c->kscratch);
    free(c);
}

static void cpu_to_host(ts_stream *st, void *host, const void *dev, size_t bytes) {
    (void)st;
    if (host != dev) memcpy(host, dev, bytes);
}

static void cpu_to_device(ts_stream *st, void *dev, const void *host, size_t bytes) {
    (void)st;
    if (host != dev) memcpy(dev, host, bytes);
}

static ts_status cpu_sync(ts_stream *st) {
    cpu_stream *c = cstream(st);
    ts_status r = c->err;
    c->err = TS_OK;
    return r;
}

static ts_event *cpu_event_new(ts_backend *be) {
    (void)be;
    return ts_calloc(1, sizeof(ts_event));
}

static void cpu_event_free(ts_backend *be, ts_event *ev) {
    (void)be;
    free(ev);
}

static void cpu_event_record(ts_stream *st, ts_event *ev) {
    (void)st;
    ev->t = ts_now();
}

static double cpu_event_elapsed(ts_event *a, ts_event *b) { return b->t - a->t; }

/* A CPU stream's ops have run by the time they return. */
static void cpu_event_wait(ts_stream *st, ts_event *ev) {
    (void)st;
    (void)ev;
}

static ts_status cpu_event_sync(ts_backend *be, ts_event *ev) {
    (void)be;
    (void)ev;
    return TS_OK;
}

/* ---- per-thread kernel scratch (matmul + attention own it) ----
 * One 64-byte aligned slot per thread, used by one op at a time: the prefill
 * GEMM's weight panels (ts_gemm_scratch_bytes) and the tiled attention's
 * query/key blocks (attn_scratch_bytes). Sized once here, never on the
 * decode path. */
static size_t attn_scratch_bytes(int head_dim);

static ts_status kscratch_reserve(cpu_stream *c, const ts_backend_reserve *r) {
    (void)r;
    size_t want = ts_gemm_scratch_bytes(), a = attn_scratch_bytes(512);
    if (a > want) want = a;
    want = (want + 63) / 64 * 64;
    if (want <= c->kscratch_stride) return TS_OK;
    free(c->kscratch);
    c->kscratch = aligned_alloc(64, want * (size_t)c->base.n_threads);
    if (!c->kscratch) {
        c->kscratch_stride = 0;
        return ts_fail(TS_ERR_NOMEM, "cpu backend: cannot allocate kernel scratch");
    }
    c->kscratch_stride = want;
    return TS_OK;
}

static uint8_t *kscratch(cpu_stream *c, int ith) { return c->kscratch + (size_t)ith * c->kscratch_stride; }

static ts_status cpu_reserve(ts_stream *st, const ts_backend_reserve *r) {
    cpu_stream *c = cstream(st);
    /* widest partner row: Q8_K (292 B / 256 elements) beats Q8_0 (34 B / 32);
     * F32 partners are read from x directly */
    int64_t in = (r->max_in + 255) / 256 * 256;
    size_t stride = (size_t)r->max_tokens * (size_t)(in / 256 * 292 + 64);
    stride = (stride + 63) / 64 * 64;
    if (stride > c->qbuf_stride) {
        free(c->qbuf);
        c->qbuf = aligned_alloc(64, stride * CPU_MAX_MATS);
        if (!c->qbuf) {
            c->qbuf_stride = 0;
            return ts_fail(TS_ERR_NOMEM, "cpu backend: cannot allocate activation buffers");
        }
        c->qbuf_stride = stride;
    }
    c->exact_act = r->exact_act;
    if (r->exact_act && r->max_in > c->wrow_n) {
        free(c->wrow);
        c->wrow = malloc(sizeof(float) * (size_t)r->max_in * (size_t)c->base.n_threads);
        if (!c->wrow) {
            c->wrow_n = 0;
            return ts_fail(TS_ERR_NOMEM, "cpu backend: cannot allocate weight-row scratch");
        }
        c->wrow_n = r->max_in;
    }
    /* mmg_dedup: three lists of a run's rows, and a token map */
    const int64_t mg = r->max_expert_rows > 0 ? 3 * r->max_expert_rows + r->max_tokens : 0;
    if (mg > c->mg_idx_n) {
        free(c->mg_idx);
        c->mg_idx = malloc(sizeof(int32_t) * (size_t)mg);
        if (!c->mg_idx) {
            c->mg_idx_n = 0;
            return ts_fail(TS_ERR_NOMEM, "cpu backend: cannot allocate expert row lists");
        }
        c->mg_idx_n = mg;
    }
    ts_status kst = kscratch_reserve(c, r);
    if (kst != TS_OK) return kst;
    if (r->n_ctx > c->n_ctx) {
        free(c->scores);
        c->scores = malloc(sizeof(float) * (size_t)r->n_ctx * (size_t)c->base.n_threads);
        if (!c->scores) {
            c->n_ctx = 0;
            return ts_fail(TS_ERR_NOMEM, "cpu backend: cannot allocate attention scratch");
        }
        c->n_ctx = r->n_ctx;
    }
    return TS_OK;
}

/* Runs fn over [0, n) split in grain-aligned shares, on as many threads as
 * have at least min_share items each (1 thread for small n: a dispatch costs
 * more than the work). */
typedef void (*range_fn)(void *ctx, int64_t lo, int64_t hi, int ith);
typedef struct {
    range_fn fn;
    void *ctx;
    int64_t n, grain;
} range_job;

static void range_worker(void *arg, int ith, int nth) {
    range_job *j = arg;
    int64_t lo, hi;
    ts_pool_split(j->n, j->grain, ith, nth, &lo, &hi);
    if (lo < hi) j->fn(j->ctx, lo, hi, ith);
}

static void cpu_for(cpu_stream *c, int64_t n, int64_t grain, int64_t min_share, range_fn fn, void *ctx) {
    if (n <= 0) return;
    int64_t want = min_share > 0 ? n / min_share : n;
    int nth = ts_pool_size(c->pool);
    if (want < nth) nth = want < 1 ? 1 : (int)want;
    if (nth == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    range_job j = {fn, ctx, n, grain};
    ts_pool_run_n(c->pool, nth, range_worker, &j);
}

/* ---- embed ---- */
typedef struct {
    const ts_mat *emb;
    const int32_t *ids;
    float scale;
    float *out;
} embed_ctx;

static void embed_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    embed_ctx *e = arg;
    int64_t n = e->emb->n_in;
    for (int64_t t = lo; t < hi; t++) {
        float *o = e->out + t * n;
        ts_dequant_row(e->emb->type, (const uint8_t *)e->emb->data + (uint64_t)e->ids[t] * e->emb->row_bytes, o, n);
        if (e->scale != 1.0f)
            for (int64_t i = 0; i < n; i++) o[i] *= e->scale;
    }
}

static void cpu_embed(ts_stream *be, const ts_mat *emb, const int32_t *ids, int n, float scale, float *out) {
    embed_ctx e = {emb, ids, scale, out};
    cpu_for(cstream(be), n, 1, 4, embed_range, &e);
}

/* ---- matmul ---- */
typedef struct {
    cpu_stream *c;
    int n_w;
    const ts_mat *const *w;
    float *const *y;
    const float *x;
    int n_tok;
    int64_t n_in;
    int n_slots;
    ts_type slot_type[CPU_MAX_MATS];    /* partner type of each distinct slot */
    uint64_t slot_row[CPU_MAX_MATS];    /* bytes per partner row */
    const uint8_t *slot_x[CPU_MAX_MATS];
    int w_slot[CPU_MAX_MATS];           /* slot of each weight */
    int64_t q_chunk;                    /* elements per quantization unit */
} mm_job;

/* rows rows of x (n_in floats each) into partner format pt at xq, xs bytes a
 * row, split over (row, q_chunk) units among the run's threads. */
static void mm_quantize(ts_type pt, const float *x, int64_t n_in, int64_t q_chunk, int64_t rows, uint8_t *xq, uint64_t xs, int ith,
                        int nth) {
    int64_t chunks = n_in / q_chunk, lo, hi;
    ts_pool_split(rows * chunks, 1, ith, nth, &lo, &hi);
    uint64_t cbytes = ts_type_row_bytes(pt, (uint64_t)q_chunk);
    for (int64_t u = lo; u < hi; u++) {
        int64_t t = u / chunks, ch = u % chunks;
        ts_quantize_row(pt, x + t * n_in + ch * q_chunk, xq + (uint64_t)t * xs + (uint64_t)ch * cbytes, q_chunk);
    }
}

/* This thread's contiguous, grain-aligned share of w's rows against n_tok
 * activation rows: x in F32, xq (stride xs) in w's partner format. */
static void mm_rows(cpu_stream *c, const ts_mat *w, const float *x, const uint8_t *xq, uint64_t xs, int n_tok, float *y, int ith,
                    int nth) {
    const int64_t n_in = w->n_in;
    int64_t lo, hi;
    ts_pool_split(w->n_out, CPU_ROW_GRAIN, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const uint8_t *wd = (const uint8_t *)w->data;
    if (c->exact_act && w->type != TS_TYPE_F32 && w->type != TS_TYPE_F16 && w->type != TS_TYPE_BF16) {
        /* reference precision: the row dequantized once, dotted in F32 with every token */
        float *row = c->wrow + (size_t)ith * (size_t)c->wrow_n;
        for (int64_t r = lo; r < hi; r++) {
            ts_dequant_row(w->type, wd + (uint64_t)r * w->row_bytes, row, n_in);
            for (int t = 0; t < n_tok; t++) y[(int64_t)t * w->n_out + r] = ts_vec_dot(TS_TYPE_F32, n_in, row, x + (int64_t)t * n_in);
        }
    } else if (n_tok == 1) {
        ts_vec_dot_rows(w->type, n_in, wd + (uint64_t)lo * w->row_bytes, w->row_bytes, hi - lo, xq, y + lo);
    } else if (n_tok >= CPU_GEMM_MIN_TOK && c->kscratch) {
        /* weight panels unpacked once into this thread's scratch, reused by every token */
        ts_gemm(w->type, n_in, wd + (uint64_t)lo * w->row_bytes, w->row_bytes, hi - lo, xq, xs, n_tok, y + lo, w->n_out,
                kscratch(c, ith));
    } else {
        /* row tiles stay in cache while every token passes over them */
        for (int64_t r0 = lo; r0 < hi; r0 += CPU_ROW_TILE) {
            int64_t nr = hi - r0 < CPU_ROW_TILE ? hi - r0 : CPU_ROW_TILE;
            for (int t0 = 0; t0 < n_tok; t0 += CPU_TOK_TILE) {
                int nt = n_tok - t0 < CPU_TOK_TILE ? n_tok - t0 : CPU_TOK_TILE;
                ts_gemm_tile(w->type, n_in, wd + (uint64_t)r0 * w->row_bytes, w->row_bytes, nr, xq + (uint64_t)t0 * xs, xs, nt,
                             y + (int64_t)t0 * w->n_out + r0, w->n_out);
            }
        }
    }
    if (w->bias)
        for (int t = 0; t < n_tok; t++) {
            float *yr = y + (int64_t)t * w->n_out;
            for (int64_t r = lo; r < hi; r++) yr[r] += w->bias[r];
        }
}

static void mm_worker(void *arg, int ith, int nth) {
    mm_job *j = arg;
    /* 1. activations -> partner formats */
    bool any_q = false;
    for (int s = 0; s < j->n_slots; s++) {
        if (j->slot_type[s] == TS_TYPE_F32) continue;
        any_q = true;
        mm_quantize(j->slot_type[s], j->x, j->n_in, j->q_chunk, j->n_tok, (uint8_t *)j->slot_x[s], j->slot_row[s], ith, nth);
    }
    if (any_q && nth > 1) ts_pool_barrier(j->c->pool);

    /* 2. each thread owns a contiguous, grain-aligned share of every weight's rows */
    for (int wi = 0; wi < j->n_w; wi++)
        mm_rows(j->c, j->w[wi], j->x, j->slot_x[j->w_slot[wi]], j->slot_row[j->w_slot[wi]], j->n_tok, j->y[wi], ith, nth);
}

/* The distinct partner formats of n weights' activations (F32 for all in
 * exact mode): slot_type[s] and its row bytes at n_in, and each weight's slot
 * in w_slot. Returns the slot count. */
static int mm_partner_slots(const cpu_stream *c, int n, const ts_type *wt, int64_t n_in, ts_type *slot_type, uint64_t *slot_row,
                            int *w_slot) {
    int n_slots = 0;
    for (int i = 0; i < n; i++) {
        ts_type pt = c->exact_act ? TS_TYPE_F32 : ts_type_dot_partner(wt[i]);
        int s = 0;
        while (s < n_slots && slot_type[s] != pt) s++;
        if (s == n_slots) {
            slot_type[s] = pt;
            slot_row[s] = ts_type_row_bytes(pt, (uint64_t)n_in);
            n_slots++;
        }
        w_slot[i] = s;
    }
    return n_slots;
}

/* quantization units: 256-element chunks when they divide the row (K-quant
 * partners need whole super-blocks), else whole rows */
static int64_t mm_q_chunk(int64_t n_in) { return n_in % 256 == 0 ? 256 : n_in; }

/* threads for a matmul of `macs` multiply-adds: below ~64k a single
 * thread is cheaper than waking the pool */
static int mm_threads(const cpu_stream *c, double macs) { return macs < 65536.0 ? 1 : ts_pool_size(c->pool); }

static void cpu_matmul(ts_stream *be, int n_w, const ts_mat *const *w, float *const *y, const float *x, int n_tok) {
    cpu_stream *c = cstream(be);
    mm_job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.n_w = n_w;
    j.w = w;
    j.y = y;
    j.x = x;
    j.n_tok = n_tok;
    j.n_in = w[0]->n_in;
    j.q_chunk = mm_q_chunk(j.n_in);
    int64_t rows = 0;
    ts_type wt[CPU_MAX_MATS];
    for (int i = 0; i < n_w; i++) wt[i] = w[i]->type, rows += w[i]->n_out;
    j.n_slots = mm_partner_slots(c, n_w, wt, j.n_in, j.slot_type, j.slot_row, j.w_slot);
    for (int s = 0; s < j.n_slots; s++)
        j.slot_x[s] = j.slot_type[s] == TS_TYPE_F32 ? (const uint8_t *)x : c->qbuf + (size_t)s * c->qbuf_stride;
    ts_pool_run_n(c->pool, mm_threads(c, (double)rows * (double)j.n_in * n_tok), mm_worker, &j);
}

/* ---- rmsnorm ---- */
typedef struct {
    const float *x, *w;
    int64_t n;
    float eps;
    float *out;
} norm_ctx;

static void norm_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    norm_ctx *a = arg;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = a->x + r * a->n;
        float *o = a->out + r * a->n;
        /* four chains: one double add per element in a single chain was a
         * 4-cycle latency each (~1.6% of a 30B-A3B prefill's time) */
        double s4[4] = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= a->n; i += 4)
            for (int c = 0; c < 4; c++) s4[c] += (double)x[i + c] * x[i + c];
        for (; i < a->n; i++) s4[0] += (double)x[i] * x[i];
        const double ss = (s4[0] + s4[1]) + (s4[2] + s4[3]);
        float inv = (float)(1.0 / sqrt(ss / (double)a->n + (double)a->eps));
        for (int64_t i = 0; i < a->n; i++) o[i] = x[i] * inv * a->w[i];
    }
}

static void cpu_rmsnorm(ts_stream *be, const float *x, const float *w, int64_t n, int64_t rows, float eps, float *out) {
    norm_ctx a = {x, w, n, eps, out};
    cpu_for(cstream(be), rows, 1, n >= 1024 ? 2 : 4096 / (n ? n : 1) + 1, norm_range, &a);
}

/* ---- rope ---- */
typedef struct {
    const float *freq;
    int half;
    const int32_t *pos;
    float mscale;
    float *cs;
} rtab_ctx;

static void rtab_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    rtab_ctx *a = arg;
    for (int64_t t = lo; t < hi; t++) {
        float p = (float)a->pos[t];
        float *cs = a->cs + t * a->half * 2;
        for (int i = 0; i < a->half; i++) {
            /* float32 angle, as the reference implementations compute it */
            float th = p * a->freq[i];
            cs[2 * i] = cosf(th) * a->mscale;
            cs[2 * i + 1] = sinf(th) * a->mscale;
        }
    }
}

static void cpu_rope_table(ts_stream *be, const float *freq, int n_rot, const int32_t *pos, int n_tok, float mscale, float *cs) {
    rtab_ctx a = {freq, n_rot / 2, pos, mscale, cs};
    cpu_for(cstream(be), n_tok, 1, 16, rtab_range, &a);
}

typedef struct {
    float *x;
    int n_head, head_dim, n_rot;
    const float *cs;
    ts_rope_mode mode;
} rope_ctx;

static void rope_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    rope_ctx *a = arg;
    int half = a->n_rot / 2;
    for (int64_t t = lo; t < hi; t++) {
        const float *cs = a->cs + t * half * 2;
        for (int h = 0; h < a->n_head; h++) {
            float *v = a->x + (t * a->n_head + h) * a->head_dim;
            if (a->mode == TS_ROPE_NEOX) {
                for (int i = 0; i < half; i++) {
                    float c = cs[2 * i], s = cs[2 * i + 1];
                    float x0 = v[i], x1 = v[i + half];
                    v[i] = x0 * c - x1 * s;
                    v[i + half] = x0 * s + x1 * c;
                }
            } else {
                for (int i = 0; i < half; i++) {
                    float c = cs[2 * i], s = cs[2 * i + 1];
                    float x0 = v[2 * i], x1 = v[2 * i + 1];
                    v[2 * i] = x0 * c - x1 * s;
                    v[2 * i + 1] = x0 * s + x1 * c;
                }
            }
        }
    }
}

static void cpu_rope(ts_stream *be, float *x, int n_tok, int n_head, int head_dim, int n_rot, const float *cs, ts_rope_mode mode) {
    rope_ctx a = {x, n_head, head_dim, n_rot, cs, mode};
    cpu_for(cstream(be), n_tok, 1, 16, rope_range, &a);
}

/* ---- KV cache and attention ---- */
typedef struct {
    cpu_stream *c;
    const ts_kv_layer *kv;
    const ts_attn_desc *d;
    const float *k, *v;
} kvs_ctx;

static void kvs_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    kvs_ctx *a = arg;
    const ts_attn_desc *d = a->d;
    int hd = d->head_dim;
    for (int64_t t = lo; t < hi; t++) {
        int64_t pos = d->pos0 + t;
        for (int h = 0; h < d->n_head_kv; h++) {
            int64_t src = (t * d->n_head_kv + h) * hd;
            int64_t dst = ((int64_t)h * d->n_ctx + pos) * hd;
            if (d->kv_type == TS_TYPE_F16) {
                a->c->k->to_f16(a->k + src, (uint16_t *)a->kv->k + dst, hd);
                a->c->k->to_f16(a->v + src, (uint16_t *)a->kv->v + dst, hd);
            } else {
                memcpy((float *)a->kv->k + dst, a->k + src, sizeof(float) * (size_t)hd);
                memcpy((float *)a->kv->v + dst, a->v + src, sizeof(float) * (size_t)hd);
            }
        }
    }
}

static void cpu_kv_store(ts_stream *be, const ts_kv_layer *kv, const ts_attn_desc *d, const float *k, const float *v) {
    kvs_ctx a = {cstream(be), kv, d, k, v};
    cpu_for(cstream(be), d->n_tok, 1, 16, kvs_range, &a);
}

typedef struct {
    cpu_stream *c;
    const ts_kv_layer *kv;
    const ts_attn_desc *d;
    const float *q;
    float *out;
} attn_ctx;

/* ---- prefill attention: tiled, online softmax ----
 * An item is (block of query tokens, kv head): its rows are every query head
 * of the kv head's group for each token of the block (GQA: they share K/V).
 * Keys go by in blocks of ATT_KB, converted to F32 once per item; each row
 * keeps a running max m, sum l and output O (online softmax), so no row of
 * scores over the whole context is ever formed. Per row the keys are visited
 * in increasing position and the softmax is exact up to float rounding; the
 * item is computed by one thread in a fixed order, so results do not depend
 * on the thread count. */
#define ATT_KB 64        /* keys per block */
#define ATT_QB_MAX 16    /* query tokens per item */

#define ATT_KTS (ATT_KB + 16) /* floats per row of the transposed key block: a 16-key step from any start stays inside */

/* Scratch of an item with `rows` rows: K and V blocks (ATT_KB, hd) f32, the
 * keys transposed (hd, ATT_KTS), the scores of TS_ATT_NR rows against a
 * block (TS_ATT_NR, ATT_KTS), O (rows, hd), then (rows, 2) doubles m, l. */
static size_t attn_item_bytes(int rows, int hd) {
    return sizeof(float) * ((size_t)2 * ATT_KB * hd + (size_t)hd * ATT_KTS + (size_t)TS_ATT_NR * ATT_KTS + (size_t)rows * hd) +
           sizeof(double) * (size_t)rows * 2;
}
static size_t attn_scratch_bytes(int head_dim) { return attn_item_bytes(ATT_QB_MAX * 8, head_dim); }

/* query tokens per item that fit the scratch, 0 if not even one */
static int attn_qb(const cpu_stream *c, const ts_attn_desc *d) {
    int group = d->n_head / d->n_head_kv;
    for (int qb = ATT_QB_MAX; qb >= 1; qb /= 2)
        if (attn_item_bytes(qb * group, d->head_dim) <= c->kscratch_stride) return qb;
    return 0;
}

typedef struct {
    attn_ctx a;
    int qb, nqb;
} attn_tctx;

static void attn_tiled_range(void *arg, int64_t lo, int64_t hi, int ith) {
    attn_tctx *tc = arg;
    const attn_ctx *a = &tc->a;
    const ts_attn_desc *d = a->d;
    const ts_cpu_kernels *k = a->c->k;
    const int hd = d->head_dim, group = d->n_head / d->n_head_kv, nkv = d->n_head_kv;
    const int64_t nitems = (int64_t)tc->nqb * nkv;
    const bool f16 = d->kv_type == TS_TYPE_F16;
    float *Kf = (float *)kscratch(a->c, ith), *Vf = Kf + (size_t)ATT_KB * hd, *KT = Vf + (size_t)ATT_KB * hd;
    float *sc = KT + (size_t)hd * ATT_KTS, *O = sc + (size_t)TS_ATT_NR * ATT_KTS;
    double *ml = (double *)(O + (size_t)tc->qb * group * hd); /* (rows, 2): running max, running sum */
    for (int64_t it = lo; it < hi; it++) {
        /* zig-zag: item pairs (early block, late block) so contiguous thread
         * shares get similar causal work */
        int64_t z = it % 2 == 0 ? it / 2 : nitems - 1 - it / 2;
        int qblk = (int)(z / nkv), kvh = (int)(z % nkv);
        int t0 = qblk * tc->qb, nt = d->n_tok - t0 < tc->qb ? d->n_tok - t0 : tc->qb;
        int rows = nt * group;
        int pfirst = d->pos0 + t0, plast = d->pos0 + t0 + nt - 1;
        int kstart = d->window > 0 && pfirst - d->window + 1 > 0 ? pfirst - d->window + 1 : 0;
        memset(O, 0, sizeof(float) * (size_t)rows * hd);
        for (int r = 0; r < rows; r++) ml[2 * r] = -INFINITY, ml[2 * r + 1] = 0;
        size_t base = (size_t)kvh * (size_t)d->n_ctx * (size_t)hd;
        for (int kb0 = kstart; kb0 <= plast; kb0 += ATT_KB) {
            int nk = plast - kb0 + 1 < ATT_KB ? plast - kb0 + 1 : ATT_KB;
            const float *Kb, *Vb;
            if (f16) {
                const uint16_t *K16 = (const uint16_t *)a->kv->k + base + (size_t)kb0 * hd;
                const uint16_t *V16 = (const uint16_t *)a->kv->v + base + (size_t)kb0 * hd;
                ts_dequant_row(TS_TYPE_F16, K16, Kf, (int64_t)nk * hd);
                ts_dequant_row(TS_TYPE_F16, V16, Vf, (int64_t)nk * hd);
                Kb = Kf, Vb = Vf;
            } else {
                Kb = (const float *)a->kv->k + base + (size_t)kb0 * hd;
                Vb = (const float *)a->kv->v + base + (size_t)kb0 * hd;
            }
            /* the block's keys transposed once, for every row of the item;
             * the columns past nk zero (qk_f32 reads whole 16-key steps) */
            for (int i = 0; i < hd; i++) {
                float *kt = KT + (size_t)i * ATT_KTS;
                for (int j = 0; j < nk; j++) kt[j] = Kb[(size_t)j * hd + i];
                memset(kt + nk, 0, sizeof(float) * (size_t)(ATT_KTS - nk));
            }
            for (int tt = 0; tt < nt; tt++) {
                int pos = pfirst + tt;
                int ps = d->window > 0 && pos - d->window + 1 > 0 ? pos - d->window + 1 : 0;
                int jlo = ps > kb0 ? ps - kb0 : 0, jhi = pos - kb0 < nk - 1 ? pos - kb0 : nk - 1;
                if (jlo > jhi) continue;
                const int nj = jhi - jlo + 1;
                /* the token's query heads of this kv head, TS_ATT_NR at a time */
                for (int g0 = 0; g0 < group; g0 += TS_ATT_NR) {
                    const int nr = group - g0 < TS_ATT_NR ? group - g0 : TS_ATT_NR;
                    const float *q = a->q + ((int64_t)(t0 + tt) * d->n_head + kvh * group + g0) * hd;
                    k->qk_f32(q, hd, nr, KT + jlo, ATT_KTS, nj, hd, d->scale, sc, ATT_KTS);
                    for (int ri = 0; ri < nr; ri++) {
                        const int r = tt * group + g0 + ri;
                        float *o = O + (size_t)r * hd, *s = sc + (size_t)ri * ATT_KTS;
                        const float mx = k->row_max(s, nj);
                        double m = ml[2 * r];
                        if (mx > m) {
                            /* new running max: rescale what was accumulated */
                            if (m > -INFINITY) {
                                const float f = ts_softmax_exp((float)(m - mx));
                                ml[2 * r + 1] *= f;
                                for (int i = 0; i < hd; i++) o[i] *= f;
                            }
                            ml[2 * r] = m = mx;
                        }
                        ml[2 * r + 1] += k->exp_sum(s, nj, (float)m);
                    }
                    k->pv_f32(sc, ATT_KTS, nr, Vb + (size_t)jlo * hd, nj, hd, O + (size_t)(tt * group + g0) * hd, hd);
                }
            }
        }
        for (int tt = 0; tt < nt; tt++)
            for (int gi = 0; gi < group; gi++) {
                int r = tt * group + gi;
                float inv = (float)(1.0 / ml[2 * r + 1]);
                float *dst = a->out + ((int64_t)(t0 + tt) * d->n_head + kvh * group + gi) * hd;
                const float *o = O + (size_t)r * hd;
                for (int i = 0; i < hd; i++) dst[i] = o[i] * inv;
            }
    }
}

static void attn_range(void *arg, int64_t lo, int64_t hi, int ith) {
    attn_ctx *a = arg;
    const ts_attn_desc *d = a->d;
    const ts_cpu_kernels *k = a->c->k;
    int hd = d->head_dim, group = d->n_head / d->n_head_kv;
    float *sc = a->c->scores + (size_t)ith * (size_t)a->c->n_ctx;
    bool f16 = d->kv_type == TS_TYPE_F16;
    /* items are (token, head), head fastest */
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = it / d->n_head;
        int h = (int)(it % d->n_head), kvh = h / group;
        int pos = d->pos0 + (int)t;
        int start = d->window > 0 && pos - d->window + 1 > 0 ? pos - d->window + 1 : 0;
        int n = pos - start + 1;
        const float *q = a->q + it * hd;
        float *o = a->out + it * hd;
        size_t base = ((size_t)kvh * (size_t)d->n_ctx + (size_t)start) * (size_t)hd;
        float mx = -INFINITY;
        if (f16) {
            const uint16_t *K = (const uint16_t *)a->kv->k + base;
            for (int j = 0; j < n; j++) sc[j] = k->dot_f16(q, K + (size_t)j * hd, hd) * d->scale;
        } else {
            const float *K = (const float *)a->kv->k + base;
            for (int j = 0; j < n; j++) sc[j] = k->dot_f32(q, K + (size_t)j * hd, hd) * d->scale;
        }
        for (int j = 0; j < n; j++) mx = sc[j] > mx ? sc[j] : mx;
        double sum = 0;
        for (int j = 0; j < n; j++) {
            sc[j] = ts_softmax_exp(sc[j] - mx);
            sum += sc[j];
        }
        float inv = (float)(1.0 / sum);
        memset(o, 0, sizeof(float) * (size_t)hd);
        if (f16) {
            const uint16_t *V = (const uint16_t *)a->kv->v + base;
            for (int j = 0; j < n; j++) k->axpy_f16(sc[j] * inv, V + (size_t)j * hd, o, hd);
        } else {
            const float *V = (const float *)a->kv->v + base;
            for (int j = 0; j < n; j++) k->axpy_f32(sc[j] * inv, V + (size_t)j * hd, o, hd);
        }
    }
}

static void cpu_attention(ts_stream *st, const ts_kv_layer *kv, const ts_attn_desc *d, const float *q, float *out) {
    cpu_stream *c = cstream(st);
    attn_ctx a = {c, kv, d, q, out};
    int qb = d->n_tok > 1 && c->kscratch ? attn_qb(c, d) : 0;
    if (qb > 0) {
        /* prefill: tiled online softmax over blocks of keys */
        attn_tctx tc = {a, qb, (d->n_tok + qb - 1) / qb};
        cpu_for(c, (int64_t)tc.nqb * d->n_head_kv, 1, 1, attn_tiled_range, &tc);
        return;
    }
    cpu_for(c, (int64_t)d->n_tok * d->n_head, 1, 1, attn_range, &a);
}

/* ---- element-wise ---- */
typedef struct {
    const ts_cpu_kernels *k;
    ts_act act;
    const float *gate, *up;
    float *out;
    float *x;
    const float *y;
    float cap;
} ew_ctx;

static void actmul_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    ew_ctx *a = arg;
    if (a->act == TS_ACT_SILU) {
        a->k->silu_mul(a->gate + lo, a->up + lo, a->out + lo, hi - lo);
    } else {
        const float c = 0.7978845608028654f; /* sqrt(2/pi) */
        for (int64_t i = lo; i < hi; i++) {
            float g = a->gate[i];
            a->out[i] = 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) * a->up[i];
        }
    }
}

static void cpu_act_mul(ts_stream *be, ts_act act, const float *gate, const float *up, int64_t n, float *out) {
    ew_ctx a = {.k = cstream(be)->k, .act = act, .gate = gate, .up = up, .out = out};
    cpu_for(cstream(be), n, 256, 4096, actmul_range, &a);
}

static void add_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    ew_ctx *a = arg;
    for (int64_t i = lo; i < hi; i++) a->x[i] += a->y[i];
}

static void cpu_add(ts_stream *be, float *x, const float *y, int64_t n) {
    ew_ctx a = {.x = x, .y = y};
    cpu_for(cstream(be), n, 256, 32768, add_range, &a);
}

static void scale_add_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    ew_ctx *a = arg;
    for (int64_t i = lo; i < hi; i++) a->x[i] += a->cap * a->y[i];
}

static void cpu_scale_add(ts_stream *be, float *x, const float *y, float a, int64_t n) {
    ew_ctx c = {.x = x, .y = y, .cap = a};
    cpu_for(cstream(be), n, 256, 32768, scale_add_range, &c);
}

static void scale_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    ew_ctx *a = arg;
    for (int64_t i = lo; i < hi; i++) a->x[i] = a->cap * a->y[i];
}

static void cpu_scale(ts_stream *be, float *x, const float *y, float a, int64_t n) {
    ew_ctx c = {.x = x, .y = y, .cap = a};
    cpu_for(cstream(be), n, 256, 32768, scale_range, &c);
}

static void softcap_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    ew_ctx *a = arg;
    for (int64_t i = lo; i < hi; i++) a->x[i] = a->cap * tanhf(a->x[i] / a->cap);
}

static void cpu_softcap(ts_stream *be, float *x, int64_t n, float cap) {
    ew_ctx a = {.x = x, .cap = cap};
    cpu_for(cstream(be), n, 256, 8192, softcap_range, &a);
}

/* ---- routed experts: the ids and the tables are host memory here ---- */

static void cpu_moe_route(ts_stream *be, const float *r, int n_tok, int n_expert, int k, bool renorm, int32_t *ids, float *w) {
    (void)be;
    for (int t = 0; t < n_tok; t++)
        ts_moe_route_row(r + (size_t)t * n_expert, n_expert, k, renorm, ids + (size_t)t * k, w + (size_t)t * k);
}

static ts_mat expert_of(const ts_expert_mat *w, int32_t e) {
    ts_mat m = {.data = w->table[e], .type = w->type, .n_in = w->n_in, .n_out = w->n_out, .row_bytes = w->row_bytes,
                .bias = NULL, .name = w->name};
    return m;
}

/* Shared x: as many experts per matmul call as it takes (each row is
 * computed alone, so the batching changes nothing but the pool wake-ups). */
static void cpu_moe_matmul(ts_stream *be, int n_set, const ts_expert_mat *const *w, float *const *y, const int32_t *ids, int k,
                           const float *x, bool x_per_expert) {
    ts_mat m[TS_MATMUL_MAX_W];
    const ts_mat *mp[TS_MATMUL_MAX_W];
    float *yp[TS_MATMUL_MAX_W];
    const int per = x_per_expert ? 1 : TS_MATMUL_MAX_W / n_set;
    for (int i0 = 0; i0 < k; i0 += per) {
        const int ni = k - i0 < per ? k - i0 : per;
        int n = 0;
        for (int i = i0; i < i0 + ni; i++)
            for (int s = 0; s < n_set; s++) {
                m[n] = expert_of(w[s], ids[i]);
                mp[n] = &m[n];
                yp[n++] = y[s] + (size_t)i * (size_t)w[s]->n_out;
            }
        cpu_matmul(be, n, mp, yp, x_per_expert ? x + (size_t)i0 * (size_t)w[0]->n_in : x, 1);
    }
}

/* Grouped prefill: the groups' rows are consecutive in x, so one pool run
 * quantizes all of them (once per partner type), then, after one barrier,
 * each thread takes its share of every group's rows for each weight set.
 * Per group that is what cpu_matmul on the group alone computes (the same
 * calls on the same rows, so the same bits), without a pool run and a
 * barrier per expert: a 30B-A3B 512-token prefill made ~5,300 of each.
 * Groups go in runs whose partner rows fit the activation buffers. */
typedef struct {
    cpu_stream *c;
    int n_set;
    const ts_expert_mat *const *w; /* (n_set) */
    float *const *y;               /* (n_set) outputs, (rows, n_out), group rows at their offsets */
    const ts_expert_groups *g;
    int g0, g1;                    /* this run's groups */
    const float *x;                /* (rows, n_in) every group's activations */
    int n_slots;
    ts_type slot_type[CPU_MAX_MATS]; /* partner type of each distinct slot */
    uint8_t *slot_x[CPU_MAX_MATS];   /* (rows of groups g0 .. g1-1, slot_row) */
    uint64_t slot_row[CPU_MAX_MATS];
    int w_slot[CPU_MAX_MATS];        /* slot of each set */
    int64_t q_chunk;
    /* rows relative to the run's first: those converted (n_uq), and the
     * rest with the converted row of their token (n_dup pairs); NULL: every
     * row converted */
    const int32_t *uq, *dup, *dup_src;
    int64_t n_uq, n_dup;
} mmg_job;

/* A token's rows of x are equal where g->row_tok says so: its first row in
 * the run is converted, the others copy its bytes (the same conversion, so
 * the same bits). A 30B-A3B prefill converted each token's gate/up input 8
 * times (session 33: 2.5% of the capped prompt for all conversions). false
 * (convert every row) without the lists' room or a token past max_tokens. */
static bool mmg_dedup(cpu_stream *c, const ts_expert_groups *g, int64_t r0, int64_t nr, mmg_job *j) {
    if (!g->row_tok || 3 * nr > c->mg_idx_n) return false;
    int32_t *uq = c->mg_idx, *dup = uq + nr, *src = dup + nr, *first = src + nr;
    const int64_t n_map = c->mg_idx_n - 3 * nr;
    int64_t nu = 0, nd = 0;
    for (int64_t i = 0; i < nr; i++) {
        const int32_t t = g->row_tok[r0 + i];
        if (t < 0 || t >= n_map) return false;
        first[t] = -1;
    }
    for (int64_t i = 0; i < nr; i++) {
        const int32_t t = g->row_tok[r0 + i];
        if (first[t] < 0) first[t] = (int32_t)i, uq[nu++] = (int32_t)i;
        else dup[nd] = (int32_t)i, src[nd++] = first[t];
    }
    j->uq = uq, j->dup = dup, j->dup_src = src, j->n_uq = nu, j->n_dup = nd;
    return true;
}

static void mmg_worker(void *arg, int ith, int nth) {
    mmg_job *j = arg;
    const ts_expert_groups *g = j->g;
    const int64_t n_in = j->w[0]->n_in, r0 = g->off[j->g0];
    const int64_t nr = g->off[j->g1 - 1] + g->cnt[j->g1 - 1] - r0;
    bool any_q = false;
    for (int s = 0; s < j->n_slots; s++) {
        if (j->slot_type[s] == TS_TYPE_F32) continue;
        any_q = true;
        if (!j->uq) {
            mm_quantize(j->slot_type[s], j->x + r0 * n_in, n_in, j->q_chunk, nr, j->slot_x[s], j->slot_row[s], ith, nth);
            continue;
        }
        const int64_t chunks = n_in / j->q_chunk;
        const uint64_t cbytes = ts_type_row_bytes(j->slot_type[s], (uint64_t)j->q_chunk);
        int64_t lo, hi;
        ts_pool_split(j->n_uq * chunks, 1, ith, nth, &lo, &hi);
        for (int64_t u = lo; u < hi; u++) {
            const int64_t i = j->uq[u / chunks], ch = u % chunks;
            ts_quantize_row(j->slot_type[s], j->x + (r0 + i) * n_in + ch * j->q_chunk,
                            j->slot_x[s] + (uint64_t)i * j->slot_row[s] + (uint64_t)ch * cbytes, j->q_chunk);
        }
    }
    if (any_q && j->uq && j->n_dup > 0) {
        if (nth > 1) ts_pool_barrier(j->c->pool);
        int64_t lo, hi;
        ts_pool_split(j->n_dup, 1, ith, nth, &lo, &hi);
        for (int s = 0; s < j->n_slots; s++) {
            if (j->slot_type[s] == TS_TYPE_F32) continue;
            const uint64_t rb = ts_type_row_bytes(j->slot_type[s], (uint64_t)n_in), sr = j->slot_row[s];
            for (int64_t d = lo; d < hi; d++)
                memcpy(j->slot_x[s] + (uint64_t)j->dup[d] * sr, j->slot_x[s] + (uint64_t)j->dup_src[d] * sr, rb);
        }
    }
    if (any_q && nth > 1) ts_pool_barrier(j->c->pool);
    for (int gi = j->g0; gi < j->g1; gi++)
        for (int s = 0; s < j->n_set; s++) {
            const ts_mat m = expert_of(j->w[s], g->id[gi]);
            const int sl = j->w_slot[s];
            const int64_t rr = g->off[gi] - r0;
            const uint8_t *xq = j->slot_type[sl] == TS_TYPE_F32 ? (const uint8_t *)(j->x + (int64_t)g->off[gi] * n_in)
                                                                 : j->slot_x[sl] + (uint64_t)rr * j->slot_row[sl];
            mm_rows(j->c, &m, j->x + (int64_t)g->off[gi] * n_in, xq, j->slot_row[sl], g->cnt[gi],
                    j->y[s] + (size_t)g->off[gi] * (size_t)m.n_out, ith, nth);
        }
}

static void cpu_moe_matmul_grouped(ts_stream *be, int n_set, const ts_expert_mat *const *w, float *const *y, const ts_expert_groups *g,
                                   const float *x) {
    cpu_stream *c = cstream(be);
    const int64_t n_in = w[0]->n_in;
    mmg_job j = {.c = c, .n_set = n_set, .w = w, .y = y, .g = g, .x = x, .q_chunk = mm_q_chunk(n_in)};
    ts_type wt[CPU_MAX_MATS];
    for (int i = 0; i < n_set; i++) wt[i] = w[i]->type;
    j.n_slots = mm_partner_slots(c, n_set, wt, n_in, j.slot_type, j.slot_row, j.w_slot);
    /* each slot gets an equal part of the activation buffers; a group is at
     * most max_tokens rows, which one qbuf_stride holds */
    const size_t part = (size_t)CPU_MAX_MATS / (size_t)j.n_slots * c->qbuf_stride;
    int64_t cap = INT64_MAX;
    for (int s = 0; s < j.n_slots; s++) {
        j.slot_x[s] = c->qbuf + (size_t)s * part;
        if (j.slot_type[s] != TS_TYPE_F32 && (int64_t)(part / j.slot_row[s]) < cap) cap = (int64_t)(part / j.slot_row[s]);
    }
    for (int g0 = 0; g0 < g->n_group;) {
        int g1 = g0 + 1;
        int64_t rows = g->cnt[g0];
        while (g1 < g->n_group && rows + g->cnt[g1] <= cap) rows += g->cnt[g1++];
        j.g0 = g0;
        j.g1 = g1;
        if (!mmg_dedup(c, g, g->off[g0], rows, &j)) j.uq = NULL;
        /* one group alone: cpu_matmul's thread rule; several: the whole pool */
        const int nth = g1 - g0 == 1 ? mm_threads(c, (double)w[0]->n_out * n_set * (double)n_in * (double)rows) : ts_pool_size(c->pool);
        ts_pool_run_n(c->pool, nth, mmg_worker, &j);
        g0 = g1;
    }
}

/* Per token in rank order, scale then scale_add (their own range
 * functions, so the same products and sums); the tokens of a prefill chunk
 * split over the pool. */
typedef struct {
    float *out;
    const float *y, *w;
    const int32_t *rows;
    int k;
    int64_t n;
} combine_ctx;

static void combine_range(void *arg, int64_t lo, int64_t hi, int ith) {
    const combine_ctx *a = arg;
    const int k = a->k;
    const int64_t n = a->n;
    for (int64_t t = lo; t < hi; t++) {
        float *o = a->out + t * n;
        for (int i = 0; i < k; i++) {
            const int64_t r = a->rows ? a->rows[t * k + i] : t * k + i;
            ew_ctx c = {.x = o, .y = a->y + r * n, .cap = a->w[t * k + i]};
            if (i == 0) scale_range(&c, 0, n, ith);
            else scale_add_range(&c, 0, n, ith);
        }
    }
}

static void cpu_moe_combine(ts_stream *be, float *out, const float *y, const float *w, const int32_t *rows, int n_tok, int k,
                            int64_t n) {
    combine_ctx a = {out, y, w, rows, k, n};
    cpu_for(cstream(be), n_tok, 1, n >= 32768 ? 1 : 32768 / n, combine_range, &a);
}

typedef struct {
    float *out;
    const float *x;
    const int32_t *idx;
    int64_t n;
} gather_ctx;

static void gather_range(void *arg, int64_t lo, int64_t hi, int ith) {
    (void)ith;
    const gather_ctx *a = arg;
    for (int64_t j = lo; j < hi; j++) memcpy(a->out + j * a->n, a->x + (int64_t)a->idx[j] * a->n, sizeof(float) * (size_t)a->n);
}

static void cpu_gather_rows(ts_stream *be, float *out, const float *x, const int32_t *idx, int n_rows, int64_t n) {
    gather_ctx a = {out, x, idx, n};
    cpu_for(cstream(be), n_rows, 1, n >= 32768 ? 1 : 32768 / n, gather_range, &a);
}

static void cpu_gated_add(ts_stream *be, float *x, const float *y, const float *g, int n_tok, int64_t n) {
    for (int t = 0; t < n_tok; t++) {
        float gsig = 1.0f / (1.0f + expf(-g[t]));
        cpu_scale_add(be, x + (size_t)t * (size_t)n, y + (size_t)t * (size_t)n, gsig, n);
    }
}

/* The reference itself: slots, tier and tables are host memory here. A
 * failure is the stream's until its sync, as a device's would be. */
static void cpu_expert_pass(ts_stream *st, const ts_expert_slots *c, const int32_t *ids, int k, bool prefetch, const void **const *tab) {
    cpu_stream *cs = cstream(st);
    if (cs->err != TS_OK) return;
    ts_status r = ts_backend_expert_pass_ref(c, ids, k, prefetch, tab);
    if (r != TS_OK) cs->err = r;
}

static const ts_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .describe = cpu_describe,
    .alloc = cpu_alloc,
    .dealloc = cpu_dealloc,
    .host_alloc = cpu_alloc,
    .host_free = cpu_dealloc,
    .weight_bind = cpu_weight_bind,
    .weight_unbind = cpu_weight_unbind,
    .stream_new = cpu_stream_new,
    .stream_free = cpu_stream_free,
    .reserve = cpu_reserve,
    .to_host = cpu_to_host,
    .to_host_async = cpu_to_host, /* done at once: there by the next sync too */
    .to_device = cpu_to_device,
    .sync = cpu_sync,
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_sync = cpu_event_sync,
    .event_elapsed = cpu_event_elapsed,
    .embed = cpu_embed,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .rope_table = cpu_rope_table,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .act_mul = cpu_act_mul,
    .add = cpu_add,
    .scale_add = cpu_scale_add,
    .scale = cpu_scale,
    .softcap = cpu_softcap,
    .moe_route = cpu_moe_route,
    .moe_matmul = cpu_moe_matmul,
    .moe_matmul_grouped = cpu_moe_matmul_grouped,
    .moe_combine = cpu_moe_combine,
    .gather_rows = cpu_gather_rows,
    .gated_add = cpu_gated_add,
    .expert_pass = cpu_expert_pass,
    .norm_matmul = ts_backend_compose_norm_matmul,
    .matmul_add = ts_backend_compose_matmul_add,
    .moe_act_matmul = ts_backend_compose_moe_act_matmul,
    .moe_combine_add = ts_backend_compose_moe_combine_add,
    .rope_kv_store = ts_backend_compose_rope_kv_store,
    .act_matmul_add = ts_backend_compose_act_matmul_add,
    .attn_matmul_add = ts_backend_compose_attn_matmul_add,
    .rope_attn_matmul_add = ts_backend_compose_rope_attn_matmul_add,
};

ts_status ts_backend_cpu_new(int n_threads, ts_backend **out) {
    *out = NULL;
    if (ts_kernels_force_error()) return ts_fail(TS_ERR_ARG, "cpu backend: %s", ts_kernels_force_error());
    cpu_backend *c = ts_calloc(1, sizeof *c);
    if (!c) return TS_ERR_NOMEM;
    c->base.ops = &cpu_ops;
    c->base.kind = TS_BACKEND_CPU;
    c->base.host_memory = true;
    c->base.n_threads = n_threads > 0 ? (n_threads > TS_POOL_MAX_THREADS ? TS_POOL_MAX_THREADS : n_threads) : ts_pool_default_threads();
    ts_cpu_kernels_get(); /* one-time kernel selection happens here, at creation */
    *out = &c->base;
    return TS_OK;
}
