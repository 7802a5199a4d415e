/* Peak arithmetic rate of this machine's cores, for judging kernel efficiency:
 * int8 dot products (AVX-512 VNNI vpdpbusd, AVX-VNNI 256-bit vpdpbusd, AVX2
 * vpmaddubsw + vpmaddwd + vpaddd, AVX2 vpmaddubsw + vpaddw (the AVX2 GEMM's
 * loop: its i16 sums take one madd per sub-block, not per maddubs), AMX-INT8
 * tdpbssd on full 16 x 64 tiles)
 * and f32 FMA (512 and 256 bits), from register-only loops with 12
 * independent accumulators (4 tiles for AMX: enough to cover the latency),
 * on 1..T threads. GOPS counts a multiply-add as 2 ops.
 *
 *   cc -O2 -march=native -pthread -o /tmp/peak_ops bench/peak_ops.c
 *   /tmp/peak_ops [-t 1,2] [-s seconds per test]
 * Kinds the CPU lacks (per __builtin_cpu_supports) are skipped with a note. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__AMX_INT8__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define ITERS 4096L
static volatile int sink;

/* Each kernel runs ITERS x 12 instructions (or instruction groups) and
 * returns the ops it did. */
#define ACC12(T, Z) T a0 = Z, a1 = Z, a2 = Z, a3 = Z, a4 = Z, a5 = Z, a6 = Z, a7 = Z, a8 = Z, a9 = Z, a10 = Z, a11 = Z
#define ALL12(OP) OP(a0); OP(a1); OP(a2); OP(a3); OP(a4); OP(a5); OP(a6); OP(a7); OP(a8); OP(a9); OP(a10); OP(a11)
/* the accumulators and operands pass through an empty asm each iteration, so
 * the compiler can neither merge the 12 identical chains nor hoist work */
#define BAR12()                                                                                          \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), \
                     "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11), "+v"(w), "+v"(x))

/* the 12 ymm integer accumulators into sink, so the loops are not dead code */
#define SINK12_I256()                                                                                                  \
    do {                                                                                                               \
        __m256i s_ = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),           \
                                      _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));          \
        s_ = _mm256_add_epi32(s_, _mm256_add_epi32(_mm256_add_epi32(a8, a9), _mm256_add_epi32(a10, a11)));            \
        sink = _mm256_extract_epi32(s_, 0);                                                                            \
    } while (0)

#if defined(__AVX512VNNI__)
static double k_vnni512(long reps) {
    __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(-2);
    ACC12(__m512i, _mm512_setzero_si512());
    for (long r = 0; r < reps * ITERS; r++) {
#define OPV(a) a = _mm512_dpbusd_epi32(a, w, x)
        ALL12(OPV);
        BAR12();
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
    sink = _mm512_reduce_add_epi32(s);
    return (double)reps * ITERS * 12 * 64 * 2;
}
#endif
#if defined(__AVXVNNI__)
static double k_vnni256(long reps) {
    __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2);
    ACC12(__m256i, _mm256_setzero_si256());
    for (long r = 0; r < reps * ITERS; r++) {
#define OPA(a) a = _mm256_dpbusd_avx_epi32(a, w, x)
        ALL12(OPA);
        BAR12();
    }
    SINK12_I256();
    return (double)reps * ITERS * 12 * 32 * 2;
}
#endif
static double k_avx2_int8(long reps) {
    __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
    ACC12(__m256i, _mm256_setzero_si256());
    for (long r = 0; r < reps * ITERS; r++) {
/* the chain feeds itself (a as the signed operand) so that no two groups are
 * the same expression; 32 multiply-adds per maddubs+madd+add */
#define OPM(a) a = _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), one))
        ALL12(OPM);
        BAR12();
    }
    SINK12_I256();
    return (double)reps * ITERS * 12 * 32 * 2;
}
/* The AVX2 prefill GEMM's inner loop (src/tensor/gemm_avx2.c): maddubs
 * outputs summed in i16 (paddw), one madd per sub-block left out, so this is
 * that kernel's ceiling, above maddubs+madd+add's. */
static double k_avx2_pair(long reps) {
    __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2);
    ACC12(__m256i, _mm256_setzero_si256());
    for (long r = 0; r < reps * ITERS; r++) {
#define OPP(a) a = _mm256_add_epi16(x, _mm256_maddubs_epi16(w, a))
        ALL12(OPP);
        BAR12();
    }
    SINK12_I256();
    return (double)reps * ITERS * 12 * 32 * 2;
}
#if defined(__AVX512F__)
static double k_fma512(long reps) {
    __m512 w = _mm512_set1_ps(1.0001f), x = _mm512_set1_ps(0.9999f);
    ACC12(__m512, _mm512_setzero_ps());
    for (long r = 0; r < reps * ITERS; r++) {
#define OPF(a) a = _mm512_fmadd_ps(w, x, a)
        ALL12(OPF);
        BAR12();
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    sink = (int)_mm512_reduce_add_ps(s);
    return (double)reps * ITERS * 12 * 16 * 2;
}
#endif
static double k_fma256(long reps) {
    __m256 w = _mm256_set1_ps(1.0001f), x = _mm256_set1_ps(0.9999f);
    ACC12(__m256, _mm256_setzero_ps());
    for (long r = 0; r < reps * ITERS; r++) {
#define OPG(a) a = _mm256_fmadd_ps(w, x, a)
        ALL12(OPG);
        BAR12();
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float f[8];
    _mm256_storeu_ps(f, s);
    sink = (int)f[0];
    return (double)reps * ITERS * 12 * 8 * 2;
}

#if defined(__AMX_INT8__) && defined(__linux__)
/* the kernel must grant the tile state (once per process); each thread loads
 * its own tile configuration */
static int amx_ok(void) { return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0; }
static double k_amx(long reps) {
    struct {
        unsigned char palette, start, reserved[14];
        unsigned short colsb[16];
        unsigned char rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    static signed char ab[16][64] __attribute__((aligned(64)));
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    for (long r = 0; r < reps * ITERS; r++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    int c[16][16];
    _tile_stored(0, c, 64);
    _tile_release();
    sink = c[0][0];
    return (double)reps * ITERS * 4 * 16 * 16 * 64 * 2;
}
#endif

typedef double (*kfn)(long);
typedef struct {
    kfn f;
    long reps;
    double ops, secs;
    pthread_barrier_t *bar;
} job;

static void *worker(void *p) {
    job *j = p;
    pthread_barrier_wait(j->bar);
    double t0 = now();
    j->ops = j->f(j->reps);
    j->secs = now() - t0;
    return NULL;
}

/* GOPS of nth threads running f together for about `secs` seconds: best of 3 */
static double measure(kfn f, int nth, double secs) {
    long reps = 1;
    double t0 = now();
    f(reps);
    double dt = now() - t0;
    reps = (long)(secs / (dt > 1e-6 ? dt : 1e-6));
    if (reps < 1) reps = 1;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[64];
        job jb[64];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)nth);
        for (int i = 0; i < nth; i++) {
            jb[i] = (job){f, reps, 0, 0, &bar};
            pthread_create(&th[i], NULL, worker, &jb[i]);
        }
        double ops = 0, slow = 0;
        for (int i = 0; i < nth; i++) {
            pthread_join(th[i], NULL);
            ops += jb[i].ops;
            if (jb[i].secs > slow) slow = jb[i].secs;
        }
        pthread_barrier_destroy(&bar);
        if (ops / slow / 1e9 > best) best = ops / slow / 1e9;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads[8] = {1, 2}, nt = 2;
    double secs = 0.3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            nt = 0;
            for (char *s = strtok(argv[++i], ","); s && nt < 8; s = strtok(NULL, ",")) threads[nt++] = atoi(s);
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            secs = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: peak_ops [-t 1,2] [-s seconds]\n");
            return 1;
        }
    }
    for (int i = 0; i < nt; i++)
        if (threads[i] < 1 || threads[i] > 64) {
            fprintf(stderr, "peak_ops: threads must be 1..64\n");
            return 1;
        }
    struct {
        const char *name;
        kfn f;
        int ok;
    } ks[] = {
#if defined(__AMX_INT8__) && defined(__linux__)
        {"int8 tdpbssd 16x16x64 (AMX-INT8)", k_amx, amx_ok()},
#endif
#if defined(__AVX512VNNI__)
        {"int8 vpdpbusd zmm (AVX512_VNNI)", k_vnni512, 1},
#endif
#if defined(__AVXVNNI__)
        {"int8 vpdpbusd ymm (AVX-VNNI)", k_vnni256, 1},
#endif
        {"int8 maddubs+madd+add ymm (AVX2)", k_avx2_int8, 1},
        {"int8 maddubs+paddw ymm (AVX2 GEMM)", k_avx2_pair, 1},
#if defined(__AVX512F__)
        {"f32 fma zmm (AVX-512F)", k_fma512, 1},
#endif
        {"f32 fma ymm (AVX2/FMA)", k_fma256, 1},
    };
    printf("%-36s", "kind \\ threads (GOPS)");
    for (int i = 0; i < nt; i++) printf(" %8d", threads[i]);
    printf("\n");
    for (size_t k = 0; k < sizeof ks / sizeof *ks; k++) {
        printf("%-36s", ks[k].name);
        if (!ks[k].ok) {
            printf(" skipped: the kernel did not grant the tile state\n");
            continue;
        }
        for (int i = 0; i < nt; i++) printf(" %8.1f", measure(ks[k].f, threads[i], secs)), fflush(stdout);
        printf("\n");
    }
    return 0;
}
