/* Session 33 scratch harness: ts_gemm_tile (one thread, 256 rows x 2048, weights in cache) at 1..5 columns,
 * best of 9 x 20 calls; argv[1] a type name (Q4_K default); the level from TS_FORCE_ISA. Built against a CPU-only
 * Release library: gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude tilek.c build-rel/libturbospark.a -lm -lpthread */
#define TS_QUANT_INTERNAL
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include "tensor/quant.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  ts_type t=TS_TYPE_Q4_K; for(int q=0;q<TS_TYPE_COUNT;q++) if(argc>1 && ts_type_supported(q) && !strcmp(ts_type_name(q),argv[1])) t=q; const int64_t rows=256,n=2048;
  uint64_t ws=ts_type_row_bytes(t,n), xs=ts_type_row_bytes(ts_type_dot_partner(t),n);
  uint8_t *w=aligned_alloc(64,ws*rows), *x=aligned_alloc(64,xs*8);
  float *f=malloc(sizeof(float)*n), *out=malloc(sizeof(float)*rows*8);
  srand(1);
  for(int r=0;r<rows;r++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(t,f,w+r*ws,n);}
  for(int c=0;c<8;c++){for(int i=0;i<n;i++)f[i]=(float)rand()/RAND_MAX-0.5f; ts_quantize_row(ts_type_dot_partner(t),f,x+c*xs,n);}
  printf("%s %s:", ts_type_name(t), ts_kernels_isa());
  for(int nt=1;nt<=5;nt++){ double b=1e9;
    for(int rep=0;rep<9;rep++){ double t0=now(); for(int k=0;k<20;k++) ts_gemm_tile(t,n,w,ws,rows,x,xs,nt,out,rows); double d=(now()-t0)/20; if(d<b)b=d; }
    printf("  nt%d %.1f", nt, b*1e6); }
  printf(" us\n");
}
