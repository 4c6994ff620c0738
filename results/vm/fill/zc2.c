// zc2: write speed into a 16 MiB destination from a cached 64 KiB source, by source content.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <immintrin.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void nt(char*d,const char*s,size_t n){for(size_t i=0;i<n;i+=64){__m256i a=_mm256_load_si256((const __m256i*)(s+i)),b=_mm256_load_si256((const __m256i*)(s+i+32));_mm256_stream_si256((__m256i*)(d+i),a);_mm256_stream_si256((__m256i*)(d+i+32),b);}}
static void movsb(char*d,const char*s,size_t n){asm volatile("rep movsb":"+D"(d),"+S"(s),"+c"(n)::"memory");}
int main(int argc,char**argv){
  size_t n=(size_t)atoi(argv[1])<<20, chunk=64<<10; int reps=atoi(argv[2]);
  char*d=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0); memset(d,'b',n);
  char*s0=aligned_alloc(4096,chunk),*sa=aligned_alloc(4096,chunk),*sr=aligned_alloc(4096,chunk);
  memset(s0,0,chunk); memset(sa,'a',chunk); for(size_t i=0;i<chunk;i++) sr[i]=(char)(rand());
  const char*names[]={"zero","a","rand"}; char*src[]={s0,sa,sr};
  for(int round=0;round<4;round++) for(int m=0;m<2;m++) for(int k=0;k<3;k++){
    double t0=now();
    for(int r=0;r<reps;r++) for(size_t o=0;o<n;o+=chunk){ if(m) movsb(d+o,src[k],chunk); else nt(d+o,src[k],chunk);} _mm_sfence();
    printf("round %d %-5s %-4s %.1f GB/s\n",round,m?"movsb":"nt",names[k],(double)n*reps/(now()-t0)/1e9);
  }
}
