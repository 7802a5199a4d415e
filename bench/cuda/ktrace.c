/* ktrace: every kernel's start and end on the GPU, from CUPTI's activity
 * records, for any CUDA program, with no change to it: the driver loads this
 * library when CUDA_INJECTION64_PATH names it and calls InitializeInjection.
 *
 * Why: a decode token is ~270 short kernels in one graph, each overlapping its
 * predecessor under programmatic dependent launch. ncu times kernels one at a
 * time (serialized, each from a clean start), so it cannot say how long a
 * replayed token spends between kernels, or which kernel the token waits on;
 * nsys is not on the device. CUPTI's concurrent-kernel records are what nsys
 * itself reads: the GPU's own start and end timestamps of each kernel as it
 * ran, graph replays included (a graph's kernels carry the correlation id of
 * their cudaGraphLaunch, so each replay is one group).
 *
 * Output (KTRACE_OUT, default ktrace.tsv), one kernel a row, in the order the
 * records arrive: start, end (ns, CUPTI's clock), correlation id, graph id,
 * graph node id, stream, grid size, block size, registers, the mangled name.
 * With KTRACE_MEMCPY=1 the device's copies too, in the same columns: grid,
 * block and registers 0, the name "memcpy:KIND:BYTES" (KIND HtoD, DtoH, DtoD
 * or other): what a token spends on copies between graph replays (the
 * logits out, the next id in). A "#" line at the end gives the kernel count,
 * CUPTI's dropped-record count and the copy count; bench/cuda/ktrace_summary.py
 * refuses a trace that dropped any, or that has no such line (a process that
 * died before the flush).
 *
 * Build (here: the CUDA toolkit's CUPTI headers and library):
 *   gcc -O2 -shared -fPIC -I/usr/local/cuda/include bench/cuda/ktrace.c \
 *       -L/usr/local/cuda/lib64 -lcupti -o build-cuda/libktrace.so
 * Use:
 *   CUDA_INJECTION64_PATH=$PWD/build-cuda/libktrace.so KTRACE_OUT=t.tsv \
 *       build-cuda/turbospark bench -m F --backend cuda -p 0 -n 128 -r 1
 *   python3 bench/cuda/ktrace_summary.py t.tsv
 * This is a measuring tool beside the engine, not part of it: it reads the
 * environment and writes to stderr, which the library never does. */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (16u << 20)

static FILE *out;
static uint64_t n_kernels, n_copies;
static int failed;

static void report(CUptiResult r, const char *what) {
    const char *s = "?";
    cuptiGetResultString(r, &s);
    fprintf(stderr, "ktrace: %s: %s\n", what, s);
    failed = 1;
}

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = aligned_alloc(8, BUF_BYTES);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    for (;;) {
        CUptiResult r = cuptiActivityGetNextRecord(buf, valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
        if (r != CUPTI_SUCCESS) {
            report(r, "reading a record");
            break;
        }
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            const char *kind = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "HtoD"
                               : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "DtoH"
                               : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "DtoD"
                                                                                : "other";
            if (out)
                fprintf(out, "%llu\t%llu\t%u\t%u\t%llu\t%u\t0\t0\t0\tmemcpy:%s:%llu\n", (unsigned long long)m->start,
                        (unsigned long long)m->end, m->correlationId, m->graphId, (unsigned long long)m->graphNodeId,
                        m->streamId, kind, (unsigned long long)m->bytes);
            n_copies++;
            continue;
        }
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        if (out)
            fprintf(out, "%llu\t%llu\t%u\t%u\t%llu\t%u\t%lld\t%d\t%u\t%s\n", (unsigned long long)k->start,
                    (unsigned long long)k->end, k->correlationId, k->graphId, (unsigned long long)k->graphNodeId,
                    k->streamId, (long long)k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ,
                    (unsigned)k->registersPerThread, k->name ? k->name : "?");
        n_kernels++;
    }
    free(buf);
}

static void finish(void) {
    CUptiResult r = cuptiActivityFlushAll(1);
    if (r != CUPTI_SUCCESS) report(r, "cuptiActivityFlushAll");
    size_t dropped = 0;
    r = cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
    if (r != CUPTI_SUCCESS) report(r, "cuptiActivityGetNumDroppedRecords");
    if (out) {
        fprintf(out, "# kernels %llu dropped %zu copies %llu%s\n", (unsigned long long)n_kernels, dropped,
                (unsigned long long)n_copies, failed ? " errors 1" : "");
        if (fclose(out) != 0) fprintf(stderr, "ktrace: writing the trace failed\n");
        out = NULL;
    }
    fprintf(stderr, "ktrace: %llu kernel records, %llu copies, %zu dropped%s\n", (unsigned long long)n_kernels,
            (unsigned long long)n_copies, dropped, failed ? ", with CUPTI errors (above)" : "");
}

int InitializeInjection(void) {
    const char *path = getenv("KTRACE_OUT");
    if (!path || !*path) path = "ktrace.tsv";
    out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "ktrace: cannot write %s\n", path);
        return 0;
    }
    fprintf(out, "start\tend\tcorr\tgraph\tnode\tstream\tgrid\tblock\tregs\tname\n");
    CUptiResult r = cuptiActivityRegisterCallbacks(buf_request, buf_complete);
    if (r != CUPTI_SUCCESS) {
        report(r, "cuptiActivityRegisterCallbacks");
        return 0;
    }
    /* concurrent: kernels keep overlapping as they do untraced (the plain
     * KERNEL kind serializes them) */
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        report(r, "cuptiActivityEnable(CONCURRENT_KERNEL)");
        return 0;
    }
    const char *mc = getenv("KTRACE_MEMCPY");
    if (mc && !strcmp(mc, "1") && (r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY)) != CUPTI_SUCCESS) {
        report(r, "cuptiActivityEnable(MEMCPY)");
        return 0;
    }
    atexit(finish);
    return 1;
}
