/* Throughput of the vector operation classes the AVX2 prefill micro-kernel
 * (src/tensor/gemm_avx2.c's ak) is made of, alone and in 1:1 mixes with
 * vpmaddubsw: 12 independent register chains per class (asm, so the
 * compiler keeps them), per cycle of a 1-add-per-cycle dependent chain.
 * It answers how many of the kernel's non-maddubs operations (the paddw
 * sums, the per-sub-block madd, the epilogue's cvt/mul/fma) share ports
 * with the maddubs: on Zen 3 (session 28) maddubs, madd, mulps, fma and
 * cvtdq2ps each ran 2 a cycle, a maddubs+madd mix 2 a cycle in all (the
 * same two pipes), maddubs+paddw 2.8 and maddubs+mulps 2.3.
 *   gcc -O2 -mavx2 -mfma bench/bench_ports_avx2.c -o /tmp/bench_ports_avx2 &&
 * /tmp/bench_ports_avx2 The clock estimate assumes one dependent integer add
 * per cycle. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
#define N 100000000L
__attribute__((noinline)) double clk(void) {
  long a = 0;
  double t = now();
  for (long i = 0; i < N; i++) {
    __asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0"
                     : "+r"(a));
  }
  t = now() - t;
  return 4.0 * N / t / 1e9;
}
/* 12 independent chains, A and B alternating (A = B: one class alone) */
#define BODY(OP) MIX2(OP, OP)
#define MIX2(A, B)                                                             \
  __asm__ volatile(                                                            \
      A " %%ymm12,%%ymm0,%%ymm0\n\t" B " %%ymm12,%%ymm1,%%ymm1\n\t" A          \
        " %%ymm12,%%ymm2,%%ymm2\n\t" B " %%ymm12,%%ymm3,%%ymm3\n\t" A          \
        " %%ymm12,%%ymm4,%%ymm4\n\t" B " %%ymm12,%%ymm5,%%ymm5\n\t" A          \
        " %%ymm12,%%ymm6,%%ymm6\n\t" B " %%ymm12,%%ymm7,%%ymm7\n\t" A          \
        " %%ymm12,%%ymm8,%%ymm8\n\t" B " %%ymm12,%%ymm9,%%ymm9\n\t" A          \
        " %%ymm12,%%ymm10,%%ymm10\n\t" B " %%ymm12,%%ymm11,%%ymm11\n\t" ::     \
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",  \
              "xmm8", "xmm9", "xmm10", "xmm11")
#define T(NAME, STMT)                                                          \
  __attribute__((noinline)) double NAME(void) {                                \
    double t = now();                                                          \
    for (long i = 0; i < N / 10; i++) {                                        \
      STMT;                                                                    \
    }                                                                          \
    t = now() - t;                                                             \
    return 12.0 * (N / 10) / t / 1e9;                                          \
  }
T(t_maddubs, BODY("vpmaddubsw"))
T(t_madd, BODY("vpmaddwd"))
T(t_paddw, BODY("vpaddw"))
T(t_mulps, BODY("vmulps"))
T(t_fma, BODY("vfmadd231ps"))
T(t_cvt,
  __asm__ volatile(
      "vcvtdq2ps %%ymm12,%%ymm0\n\tvcvtdq2ps %%ymm12,%%ymm1\n\tvcvtdq2ps "
      "%%ymm12,%%ymm2\n\tvcvtdq2ps %%ymm12,%%ymm3\n\tvcvtdq2ps "
      "%%ymm12,%%ymm4\n\tvcvtdq2ps %%ymm12,%%ymm5\n\tvcvtdq2ps "
      "%%ymm12,%%ymm6\n\tvcvtdq2ps %%ymm12,%%ymm7\n\tvcvtdq2ps "
      "%%ymm12,%%ymm8\n\tvcvtdq2ps %%ymm12,%%ymm9\n\tvcvtdq2ps "
      "%%ymm12,%%ymm10\n\tvcvtdq2ps %%ymm12,%%ymm11\n\t" ::
          : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
            "xmm8", "xmm9", "xmm10", "xmm11"))
T(t_ub_madd, MIX2("vpmaddubsw", "vpmaddwd"))
T(t_ub_paddw, MIX2("vpmaddubsw", "vpaddw"))
T(t_ub_mul, MIX2("vpmaddubsw", "vmulps"))
T(t_ub_fma, MIX2("vpmaddubsw", "vfmadd231ps"))
int main(void) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "bench_ports_avx2: this CPU has no AVX2/FMA\n");
    return 1;
  }
  double c = clk();
  printf("clock ~%.2f GHz (1 add/cycle chain)\n", c);
  struct {
    const char *n;
    double (*f)(void);
  } t[] = {{"maddubs", t_maddubs}, {"madd", t_madd},
           {"paddw", t_paddw},     {"mulps", t_mulps},
           {"fma", t_fma},         {"cvt", t_cvt},
           {"ub+madd", t_ub_madd}, {"ub+paddw", t_ub_paddw},
           {"ub+mulps", t_ub_mul}, {"ub+fma", t_ub_fma}};
  for (int i = 0; i < 10; i++) {
    double g = t[i].f();
    printf("%-10s %.2f Gop/s = %.2f /cycle\n", t[i].n, g, g / c);
  }
}
