#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static size_t N; static uint8_t *buf; static int mode; static size_t blk; static pthread_barrier_t bar;
static volatile uint64_t sink;
static __m512i rd(const uint8_t*p,size_t n,__m512i acc){
  __m512i a1=_mm512_setzero_si512(),a2=a1,a3=a1;
  const __m512i ones=_mm512_set1_epi8(1);
  for(size_t i=0;i<n;i+=256){
    if(mode&2) __asm__ volatile("prefetcht1 %0"::"m"(p[i+8192]));
    if(mode&2) __asm__ volatile("prefetcht1 %0"::"m"(p[i+8192+64]));
    if(mode&2) __asm__ volatile("prefetcht1 %0"::"m"(p[i+8192+128]));
    if(mode&2) __asm__ volatile("prefetcht1 %0"::"m"(p[i+8192+192]));
    __m512i x0=_mm512_loadu_si512(p+i),x1=_mm512_loadu_si512(p+i+64),x2=_mm512_loadu_si512(p+i+128),x3=_mm512_loadu_si512(p+i+192);
    if(mode&1){ acc=_mm512_dpbusd_epi32(acc,x0,ones);a1=_mm512_dpbusd_epi32(a1,x1,ones);a2=_mm512_dpbusd_epi32(a2,x2,ones);a3=_mm512_dpbusd_epi32(a3,x3,ones);
      acc=_mm512_dpbusd_epi32(acc,x0,x1);a1=_mm512_dpbusd_epi32(a1,x1,x2);a2=_mm512_dpbusd_epi32(a2,x2,x3);a3=_mm512_dpbusd_epi32(a3,x3,x0);}
    else {acc=_mm512_add_epi64(acc,x0);a1=_mm512_add_epi64(a1,x1);a2=_mm512_add_epi64(a2,x2);a3=_mm512_add_epi64(a3,x3);}
  }
  return _mm512_add_epi64(_mm512_add_epi64(acc,a1),_mm512_add_epi64(a2,a3));
}
static void *w(void*a){int t=(int)(intptr_t)a; __m512i acc=_mm512_setzero_si512();
  pthread_barrier_wait(&bar);
  if(mode&4){ // lockstep blocks: each block split in 2 halves, barrier per block
    for(size_t b=0;b+blk<=N;b+=blk){acc=rd(buf+b+t*(blk/2),blk/2,acc); pthread_barrier_wait(&bar);}
  } else acc=rd(buf+t*(N/2),N/2-16384,acc);
  pthread_barrier_wait(&bar); sink+=_mm512_reduce_add_epi64(acc); return 0;}
int main(int c,char**v){N=(size_t)atol(v[1])<<20; mode=atoi(v[2]); blk=(size_t)atol(v[3])<<10; int nt=2;
  buf=aligned_alloc(4096,N+65536); for(size_t i=0;i<N+65536;i++) buf[i]=(uint8_t)(i*7+1);
  double T0=now(); int R=atoi(v[4]); for(int r=0;r<R;r++){pthread_barrier_init(&bar,0,nt+1); pthread_t th[2];
    for(int t=0;t<nt;t++)pthread_create(&th[t],0,w,(void*)(intptr_t)t);
    pthread_barrier_wait(&bar); double t0=now();
    if(mode&4){for(size_t b=0;b+blk<=N;b+=blk)pthread_barrier_wait(&bar);}
    pthread_barrier_wait(&bar); double t1=now(); for(int t=0;t<nt;t++)pthread_join(th[t],0);
    if(R<=10)printf("%.1f ",N/1e9/(t1-t0)); pthread_barrier_destroy(&bar);}
  printf(" mode=%d agg=%.2f\n",mode,R*N/1e9/(now()-T0));}
