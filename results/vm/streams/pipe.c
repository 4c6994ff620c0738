// pipe: two processes (CPU 0 sends, CPU 1 receives) move MSGS messages of SIZE bytes through a
// shared ring of SLOTS fragments of FRAG bytes, copy-in/copy-out. NBUF distinct source and
// destination buffers taken in turn. COPYIN/COPYOUT: libc|movsb|nt. Prints GB/s per pass.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
#include <immintrin.h>
static void movsb(void *d, const void *s, size_t n){ __asm__ volatile("rep movsb":"+D"(d),"+S"(s),"+c"(n)::"memory"); }
static void ntcopy(void *d, const void *s, size_t n){ char*dd=d; const char*ss=s;
  for(size_t i=0;i<n;i+=128){ __m256i a=_mm256_loadu_si256((const void*)(ss+i)),b=_mm256_loadu_si256((const void*)(ss+i+32)),c=_mm256_loadu_si256((const void*)(ss+i+64)),e=_mm256_loadu_si256((const void*)(ss+i+96));
    _mm256_stream_si256((void*)(dd+i),a);_mm256_stream_si256((void*)(dd+i+32),b);_mm256_stream_si256((void*)(dd+i+64),c);_mm256_stream_si256((void*)(dd+i+96),e);} _mm_sfence(); }
typedef void (*cp)(void*,const void*,size_t);
static cp pick(const char*s){ if(!strcmp(s,"movsb"))return movsb; if(!strcmp(s,"nt"))return ntcopy; return (cp)memcpy; }
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
struct ctl { volatile uint64_t head __attribute__((aligned(128))); volatile uint64_t tail __attribute__((aligned(128))); };
int main(int argc,char**argv){
  if(argc<9){fprintf(stderr,"usage: pipe SIZE MSGS NBUF FRAG SLOTS COPYIN COPYOUT PASSES\n");return 2;}
  size_t size=strtoull(argv[1],0,0); long msgs=atol(argv[2]); int nbuf=atoi(argv[3]); size_t frag=strtoull(argv[4],0,0); int slots=atoi(argv[5]);
  cp cin=pick(argv[6]), cout=pick(argv[7]); int passes=atoi(argv[8]); int win=argc>9?atoi(argv[9]):1;
  struct ctl *c=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  char *ring=mmap(0,frag*slots,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS|MAP_POPULATE,-1,0);
  memset(ring,'r',frag*slots);
  volatile uint64_t *go=(uint64_t*)c+64; // pass start/stop barrier line
  pid_t p=fork();
  size_t nf=(size+frag-1)/frag;
  if(p==0){ // receiver
    pin(1); char*dst=mmap(0,size*nbuf,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0); memset(dst,'b',size*nbuf);
    uint64_t seq=0;
    for(int ps=0;ps<passes;ps++){
      __atomic_store_n(&go[8],ps+1,__ATOMIC_RELEASE);
      double t0=now();
      for(long g=0;g<msgs;g+=win) for(size_t f=0;f<nf;f++) for(long m=g;m<g+win;m++){ char*d=dst+(m%nbuf)*size;
        {seq++; seq--; while(__atomic_load_n(&c->head,__ATOMIC_ACQUIRE)<=seq) _mm_pause();
          size_t n=f==nf-1?size-f*frag:frag; cout(d+f*frag,ring+(seq%slots)*frag,n); __atomic_store_n(&c->tail,seq+1,__ATOMIC_RELEASE); seq++;} }
      double t=now()-t0; printf("%.2f ",size*(double)msgs/t/1e9); fflush(stdout);
      while(__atomic_load_n(&go[0],__ATOMIC_ACQUIRE)<(uint64_t)ps+1) _mm_pause();
    }
    printf("\n"); _exit(0);
  }
  pin(0); char*src=mmap(0,size*nbuf,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0); memset(src,'a',size*nbuf);
  uint64_t seq=0;
  for(int ps=0;ps<passes;ps++){
    while(__atomic_load_n(&go[8],__ATOMIC_ACQUIRE)<(uint64_t)ps+1) _mm_pause();
    for(long g=0;g<msgs;g+=win) for(size_t f=0;f<nf;f++) for(long m=g;m<g+win;m++){ char*s=src+(m%nbuf)*size;
      { while(seq-__atomic_load_n(&c->tail,__ATOMIC_ACQUIRE)>=(uint64_t)slots) _mm_pause();
        size_t n=f==nf-1?size-f*frag:frag; cin(ring+(seq%slots)*frag,s+f*frag,n); __atomic_store_n(&c->head,seq+1,__ATOMIC_RELEASE); seq++;} }
    while(__atomic_load_n(&c->tail,__ATOMIC_ACQUIRE)<seq) _mm_pause();
    __atomic_store_n(&go[0],ps+1,__ATOMIC_RELEASE);
  }
  wait(0); return 0; }
