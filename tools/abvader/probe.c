// probe.c: a phase probe for this VM. Two processes pinned to CPUs 0 and 1: the minimum and median
// cache-line round trip over 2000 ping-pongs, then 3000 32 KiB messages through a 4 MiB ring per
// copy pairing (vv: vector in and out; mv: movsb in, vector out; mm: movsb both), printing GB/s and
// [s r]: the sender's and the receiver's own copy time, ns per KiB. Usage: probe ROUNDS SLEEP_US.
// Build: gcc -O2 -mavx2 -o probe probe.c
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
#define MSG (32<<10)
#define SLOTS (RING/MSG)
struct ctl { volatile uint64_t head __attribute__((aligned(128))); volatile uint64_t tail __attribute__((aligned(128)));
 volatile uint64_t ping __attribute__((aligned(128))); volatile uint64_t pong __attribute__((aligned(128)));
 volatile uint64_t cmd __attribute__((aligned(128))); volatile uint64_t mode; volatile uint64_t n; volatile uint64_t done __attribute__((aligned(128))); volatile uint64_t rcyc; };
static void vcopy(char*d,const char*s,size_t n){ for(size_t i=0;i<n;i+=128){ __m256i a=_mm256_loadu_si256((void*)(s+i)),b=_mm256_loadu_si256((void*)(s+i+32)),c=_mm256_loadu_si256((void*)(s+i+64)),e=_mm256_loadu_si256((void*)(s+i+96));
 _mm256_storeu_si256((void*)(d+i),a);_mm256_storeu_si256((void*)(d+i+32),b);_mm256_storeu_si256((void*)(d+i+64),c);_mm256_storeu_si256((void*)(d+i+96),e);} }
static void mcopy(char*d,const char*s,size_t n){ asm volatile("rep movsb":"+D"(d),"+S"(s),"+c"(n)::"memory"); }
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static double ghz;
int main(int argc,char**argv){
 int rounds=atoi(argv[1]);
 struct ctl*c=mmap(0,sizeof *c,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
 char*ring=mmap(0,RING,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); memset(ring,0,RING);
 char*buf=(char*)aligned_alloc(4096,MSG+4096); memset(buf,3,MSG);
 // calibrate tsc
 struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0); uint64_t r0=__rdtsc(); usleep(50000); uint64_t r1=__rdtsc(); clock_gettime(CLOCK_MONOTONIC,&t1);
 ghz=(r1-r0)/((t1.tv_sec-t0.tv_sec)*1e9+(t1.tv_nsec-t0.tv_nsec));
 if(fork()==0){ pin(1); uint64_t seen=0;
   for(;;){ while(c->cmd==seen){ if(c->ping!=c->pong) c->pong=c->ping; }
     seen=c->cmd; if(seen==(uint64_t)-1) _exit(0);
     int mode=c->mode; uint64_t n=c->n; uint64_t t=c->tail;
     uint64_t cy=0; for(uint64_t k=0;k<n;k++){ while(c->head==t); char*src=ring+(t%SLOTS)*MSG; uint64_t q=__rdtsc(); if(mode&2) mcopy(buf,src,MSG); else vcopy(buf,src,MSG); cy+=__rdtsc()-q; t++; c->tail=t; } c->rcyc=cy;
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
   int modes[3]={0,1,3}; const char*nm[3]={"vv","mv","mm"};
   for(int m=0;m<3;m++){ uint64_t n=3000; c->mode=modes[m]; c->n=n; uint64_t h=c->head; cmd++; 
     uint64_t a=__rdtsc(); c->cmd=cmd; uint64_t cy=0;
     for(uint64_t k=0;k<n;k++){ while(h-c->tail>=SLOTS); char*d=ring+(h%SLOTS)*MSG; uint64_t q=__rdtsc(); if(modes[m]&1) mcopy(d,buf,MSG); else vcopy(d,buf,MSG); cy+=__rdtsc()-q; h++; c->head=h; }
     while(c->done!=cmd); double ns=(__rdtsc()-a)/ghz; printf(" %s %.1f [s %.0f r %.0f]",nm[m],n*(double)MSG/ns,cy/ghz/n/32,c->rcyc/ghz/n/32); }
   printf("\n"); fflush(stdout); usleep(atoi(argv[2]));
 }
 c->cmd=-1; wait(0);
}
