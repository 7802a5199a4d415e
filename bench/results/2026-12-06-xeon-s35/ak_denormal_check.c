/* Session 35 record: gemm_avx2.c's ak_Q4_K_3 against a copy of its inner loops without the
 * float tail (kA), same process, interleaved; built as
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -mavx2 -mfma -mf16c -Isrc -Iinclude -DAK_BARRIER= -DAK_NP=8 THIS.c build-rel/libturbospark.a -lm -lpthread
 * against /tmp/akx/gemm_avx2.c, a copy of src/tensor/gemm_avx2.c at a8a534d with its asm barrier and
 * correction loop bound made macros (AK_BARRIER, AK_NP). With the panel and activations from i & 15 / i & 63
 * the two ran alike (ratio 0.96-1.06); from rand() (as bench_ak_avx2 filled them) ak took 2.2-2.4x kA's time:
 * its d, dm and dx floats were ~1e-30, their products subnormal. */
#include "/tmp/akx/gemm_avx2.c"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define SBB 10496
__attribute__((noinline)) void kA(const uint8_t*panel,int ns,int lg,const uint8_t*const*xr,__m256i*out){
  for(int s=0;s<ns;s++){
    const uint8_t*P=panel+(size_t)s*SBB; const uint8_t*xq[3]; for(int t=0;t<3;t++) xq[t]=xr[t]+s*292;
    __m256i sb0[3],sb1[3]; for(int t=0;t<3;t++) sb0[t]=sb1[t]=_mm256_setzero_si256();
    for(int j=0;j<8;j++){
      __m256i h0[3],h1[3]; for(int t=0;t<3;t++) h0[t]=h1[t]=_mm256_setzero_si256();
#pragma GCC unroll 8
      for(int i=0;i<8;i++){ const int gg=j*8+i;
        const __m256i w0=_mm256_load_si256((const __m256i*)(P+(gg*2+lg)*64)), w1=_mm256_load_si256((const __m256i*)(P+(gg*2+lg)*64+32));
#pragma GCC unroll 4
        for(int t=0;t<3;t++){ const __m256i xb=bc32(xq[t]+4+4*gg); h0[t]=_mm256_add_epi16(h0[t],_mm256_maddubs_epi16(w0,xb)); h1[t]=_mm256_add_epi16(h1[t],_mm256_maddubs_epi16(w1,xb)); }
      }
      const __m256i s0=_mm256_load_si256((const __m256i*)(P+8192+(j*2+lg)*64)), s1=_mm256_load_si256((const __m256i*)(P+8192+(j*2+lg)*64+32));
      for(int t=0;t<3;t++){ sb0[t]=_mm256_add_epi32(sb0[t],_mm256_madd_epi16(h0[t],s0)); sb1[t]=_mm256_add_epi32(sb1[t],_mm256_madd_epi16(h1[t],s1)); }
    }
    for(int t=0;t<3;t++){ out[2*t]=_mm256_add_epi32(out[2*t],sb0[t]); out[2*t+1]=_mm256_add_epi32(out[2*t+1],sb1[t]); }
  }
}
int main(void){
  const size_t sbb = TS_GP_SB_BYTES(8);
  uint8_t *panel = aligned_alloc(64, sbb * TS_GP_KSEG);
  uint8_t *x = aligned_alloc(64, 3 * TS_GP_KSEG * QK_BYTES + 64);
  float *out = aligned_alloc(64, sizeof(float) * 4096);
  for (size_t i = 0; i < sbb * TS_GP_KSEG; i++) panel[i] = (uint8_t)(i & 15);
  for (size_t i = 0; i < 3 * TS_GP_KSEG * QK_BYTES; i++) x[i] = (uint8_t)(i & 63);
  for (int i = 0; i < 4096; i++) out[i] = 0;
  const uint8_t *xr[3] = {x, x + TS_GP_KSEG * QK_BYTES, x + 2 * TS_GP_KSEG * QK_BYTES};
  _Alignas(32) uint8_t bp[3 * TS_GP_KSEG * 16];
  bs32_pairs(xr, 3, TS_GP_KSEG, TS_GP_KSEG, bp);
  __m256i o6[6]={0};
  const long iters=200000;
  for(int rep=0;rep<6;rep++){
    double t=now(); for(long it=0;it<iters;it++){ ak_Q4_K_3(panel, 8, (int)(it&1), xr, bp, TS_GP_KSEG, out, 64, 16, 0); __asm__ volatile("":::"memory"); } t=now()-t;
    double t2=now(); for(long it=0;it<iters;it++){ kA(panel,8,(int)(it&1),xr,o6); __asm__ volatile("":::"memory"); } t2=now()-t2;
    printf("ak %.0f ns  kA %.0f ns  ratio %.2f\n", t/iters*1e9, t2/iters*1e9, t/t2);
  }
  return (int)out[3] + _mm256_extract_epi32(o6[0],0) == 7;
}
