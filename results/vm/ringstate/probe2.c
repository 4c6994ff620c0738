// probe2.c: which copy pairings and ring sizes keep a two-core shared-memory stream fast on this VM.
// Two processes pinned to CPUs 0 and 1. Each round: the cache-line round trip (minimum and median of
// 2000 ping-pongs), then one stream of 3000 MSG-byte messages per configuration given on the command
// line. A configuration is four numbers MODE SKEW RSKEW SLOTS:
//   MODE  bit 0: the sender copies into the ring with REP MOVSB (else a 32-byte AVX2 loop);
//         bit 1: the receiver copies out with REP MOVSB (else the AVX2 loop);
//         bit 2 / bit 3: the sender / receiver uses glibc's memcpy instead (overrides bits 0 / 1);
//   SKEW  bytes added to every ring slot's address; RSKEW bytes added to the receive buffer's;
//   SLOTS ring slots of MSG bytes the stream cycles through (at most RING/MSG).
// Output per configuration: MODE/SKEW/RSKEW/SLOTS GB/s [s S r R], S and R the sender's and the
// receiver's own copy time in ns per KiB. Usage: probe2 ROUNDS SLEEP_US CONFIG...
// Build: gcc -O2 -mavx2 -fno-builtin [-DMSG_KIB=64] -o probe2 probe2.c   (MSG_KIB defaults to 32)
// Extends ../spell/probe.c (ours).
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdint.h>
#include <time.h>
#include <immintrin.h>
#include <x86intrin.h>
#include <sys/wait.h>
#define RING (4<<20)
#ifndef MSG_KIB
#define MSG_KIB 32
#endif
#define MSG (MSG_KIB<<10)
#define SLOTS (RING/MSG)
struct ctl { volatile uint64_t head __attribute__((aligned(128))); volatile uint64_t tail __attribute__((aligned(128)));
 volatile uint64_t ping __attribute__((aligned(128))); volatile uint64_t pong __attribute__((aligned(128)));
 volatile uint64_t cmd __attribute__((aligned(128))); volatile uint64_t mode; volatile uint64_t n; volatile uint64_t done __attribute__((aligned(128))); volatile uint64_t rcyc; volatile uint64_t skew, rskew, slots; };
static void vcopy(char*d,const char*s,size_t n){ for(size_t i=0;i<n;i+=128){ __m256i a=_mm256_loadu_si256((void*)(s+i)),b=_mm256_loadu_si256((void*)(s+i+32)),c=_mm256_loadu_si256((void*)(s+i+64)),e=_mm256_loadu_si256((void*)(s+i+96));
 _mm256_storeu_si256((void*)(d+i),a);_mm256_storeu_si256((void*)(d+i+32),b);_mm256_storeu_si256((void*)(d+i+64),c);_mm256_storeu_si256((void*)(d+i+96),e);} }
static void mcopy(char*d,const char*s,size_t n){ asm volatile("rep movsb":"+D"(d),"+S"(s),"+c"(n)::"memory"); }
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static double ghz;
int main(int argc,char**argv){
 if(argc<3||(argc-3)%4){ fprintf(stderr,"usage: probe2 ROUNDS SLEEP_US [MODE SKEW RSKEW SLOTS]...\n"); return 2; }
 for(int k=3;k<argc;k+=4){ int sl=atoi(argv[k+3]),sk=atoi(argv[k+1]),rs=atoi(argv[k+2]);
   if(sl<1||sl>SLOTS||sk<0||sk>8192||rs<0||rs>4096){ fprintf(stderr,"config %d (%s %s %s %s): want 1 <= SLOTS <= %d, 0 <= SKEW <= 8192, 0 <= RSKEW <= 4096\n",(k-3)/4+1,argv[k],argv[k+1],argv[k+2],argv[k+3],SLOTS); return 2; } }
 int rounds=atoi(argv[1]);
 struct ctl*c=mmap(0,sizeof *c,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
 char*ring=mmap(0,RING+8192,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); memset(ring,0,RING+8192);
 char*buf=(char*)aligned_alloc(4096,MSG+4096); memset(buf,3,MSG);
 // calibrate tsc
 struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0); uint64_t r0=__rdtsc(); usleep(50000); uint64_t r1=__rdtsc(); clock_gettime(CLOCK_MONOTONIC,&t1);
 ghz=(r1-r0)/((t1.tv_sec-t0.tv_sec)*1e9+(t1.tv_nsec-t0.tv_nsec));
 if(fork()==0){ pin(1); uint64_t seen=0;
   for(;;){ while(c->cmd==seen){ if(c->ping!=c->pong) c->pong=c->ping; }
     seen=c->cmd; if(seen==(uint64_t)-1) _exit(0);
     int mode=c->mode; uint64_t n=c->n; uint64_t t=c->tail;
     uint64_t cy=0; for(uint64_t k=0;k<n;k++){ while(c->head==t); char*src=ring+c->skew+(t%c->slots)*MSG; uint64_t q=__rdtsc(); if(mode&8) memcpy(buf+c->rskew,src,MSG); else if(mode&2) mcopy(buf+c->rskew,src,MSG); else vcopy(buf+c->rskew,src,MSG); cy+=__rdtsc()-q; t++; c->tail=t; } c->rcyc=cy;
     c->done=seen; }
 }
 pin(0); uint64_t cmd=0;
 for(int r=0;r<rounds;r++){
   // RTT
   uint64_t best=~0ull; uint64_t samp[2000];
   for(int i=0;i<2000;i++){ uint64_t a=__rdtsc(); c->ping=i+1+r*100000ull; while(c->pong!=c->ping); samp[i]=__rdtsc()-a; if(samp[i]<best)best=samp[i]; }
   // median
   for(int i=1;i<2000;i++){uint64_t x=samp[i];int j=i-1;while(j>=0&&samp[j]>x){samp[j+1]=samp[j];j--;}samp[j+1]=x;}
   printf("%d rtt_min %.0f med %.0f ns",r,best/ghz,samp[1000]/ghz);
   int NM=(argc-3)/4;
   for(int m=0;m<NM;m++){ int mo=atoi(argv[3+4*m]); c->skew=atoi(argv[4+4*m]); c->rskew=atoi(argv[5+4*m]); c->slots=atoi(argv[6+4*m]); uint64_t n=3000; c->mode=mo; c->n=n; uint64_t h=c->head; cmd++; 
     uint64_t a=__rdtsc(); c->cmd=cmd; uint64_t cy=0;
     for(uint64_t k=0;k<n;k++){ while(h-c->tail>=c->slots); char*d=ring+c->skew+(h%c->slots)*MSG; uint64_t q=__rdtsc(); if(mo&4) memcpy(d,buf,MSG); else if(mo&1) mcopy(d,buf,MSG); else vcopy(d,buf,MSG); cy+=__rdtsc()-q; h++; c->head=h; }
     while(c->done!=cmd){} double ns=(__rdtsc()-a)/ghz; printf(" %d/%llu/%llu/%llu %.1f [s %.0f r %.0f]",mo,(unsigned long long)c->skew,(unsigned long long)c->rskew,(unsigned long long)c->slots,n*(double)MSG/ns,cy/ghz/n/MSG_KIB,c->rcyc/ghz/n/MSG_KIB); }
   printf("\n"); fflush(stdout); usleep(atoi(argv[2]));
 }
 c->cmd=-1; wait(0);
}
