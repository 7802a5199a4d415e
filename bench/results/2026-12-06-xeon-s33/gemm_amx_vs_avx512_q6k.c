/* Session 33 scratch harness (the record of the AMX threshold): one thread, ts_gemm at the AVX-512 level against
 * the AMX level on the same weights and tokens, best of 7 x 20 calls; built against 9bf9198 (before the threshold).
 * Q4_K 384 x 2048 here; gemm_amx_vs_avx512_q6k.c: Q6_K 256 x 8960. */
#define TS_QUANT_INTERNAL
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tensor/quant.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  const ts_type t=TS_TYPE_Q6_K; const int64_t rows=256,n=8960; /* one thread's share of a 30B-A3B expert gate */
  uint64_t ws=ts_type_row_bytes(t,n), xs=ts_type_row_bytes(TS_TYPE_Q8_K,n);
  uint8_t *w=aligned_alloc(64,ws*rows), *x=aligned_alloc(64,xs*16);
  float *f=malloc(sizeof(float)*n), *out=malloc(sizeof(float)*rows*16);
  srand(1);
  for(int r=0;r<rows;r++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(t,f,w+r*ws,n);}
  for(int c=0;c<16;c++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(TS_TYPE_Q8_K,f,x+c*xs,n);}
  void *scr=aligned_alloc(64,ts_gemm_scratch_bytes());
  printf("isa %s\n", ts_kernels_isa());
  int nts[]={32,64,128,192,256,320,384,448,512,512,512,512}; x=realloc(x,0); x=aligned_alloc(64,xs*512); for(int c=0;c<512;c++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(TS_TYPE_Q8_K,f,x+c*xs,n);} out=realloc(out,sizeof(float)*rows*512); for(int q=0;q<12;q++){int nt=nts[q];
    double bt=1e9,bg=1e9;
    for(int rep=0;rep<7;rep++){
      double t0=now(); ts_kernels_set_isa(TS_ISA_AVX512); for(int k=0;k<20;k++) ts_gemm(t,n,w,ws,rows,x,xs,nt,out,rows,scr); ts_kernels_set_isa(TS_ISA_AMX); double t1=now();
      for(int k=0;k<20;k++) ts_gemm(t,n,w,ws,rows,x,xs,nt,out,rows,scr); double t2=now();
      if((t1-t0)/20<bt)bt=(t1-t0)/20; if((t2-t1)/20<bg)bg=(t2-t1)/20;
    }
    printf("nt %2d  avx512 %7.1f us  amx %7.1f us  amx/avx512 %.2f\n",nt,bt*1e6,bg*1e6,bg/bt);
  }
}
