/* Session 33 scratch harness (kept as the record of a decision): one thread's share of a 30B-A3B expert gate
 * (384 rows x 2048, Q4_K) against nt tokens, ts_gemm_tile (the few-token path) against ts_gemm (the panel
 * GEMM), best of 7 x 20 calls. Set the level with TS_FORCE_ISA. Build against a CPU-only Release library:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude gemm_tile_vs_panel.c build-rel/libturbospark.a -lm -lpthread */
#define TS_QUANT_INTERNAL
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tensor/quant.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  const ts_type t=TS_TYPE_Q4_K; const int64_t rows=384,n=2048;
  uint64_t ws=ts_type_row_bytes(t,n), xs=ts_type_row_bytes(TS_TYPE_Q8_K,n);
  uint8_t *w=aligned_alloc(64,ws*rows), *x=aligned_alloc(64,xs*64);
  float *f=malloc(sizeof(float)*n), *out=malloc(sizeof(float)*rows*64);
  srand(1);
  for(int r=0;r<rows;r++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(t,f,w+r*ws,n);}
  for(int c=0;c<64;c++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(TS_TYPE_Q8_K,f,x+c*xs,n);}
  void *scr=aligned_alloc(64,ts_gemm_scratch_bytes());
  printf("isa %s\n", ts_kernels_isa());
  static const int nts[]={1,2,4,5,6,8,12,16,24,32,48,64};
  for(int q=0;q<12;q++){int nt=nts[q];
    double bt=1e9,bg=1e9;
    for(int rep=0;rep<7;rep++){
      double t0=now(); for(int k=0;k<20;k++) for(int64_t r0=0;r0<rows;r0+=128) ts_gemm_tile(t,n,w+r0*ws,ws,rows-r0<128?rows-r0:128,x,xs,nt,out+r0,rows); double t1=now();
      for(int k=0;k<20;k++) ts_gemm(t,n,w,ws,rows,x,xs,nt,out,rows,scr); double t2=now();
      if((t1-t0)/20<bt)bt=(t1-t0)/20; if((t2-t1)/20<bg)bg=(t2-t1)/20;
    }
    printf("nt %2d  tile %7.1f us  gemm %7.1f us  gemm/tile %.2f\n",nt,bt*1e6,bg*1e6,bg/bt);
  }
}
