/*
 * prepare-cost.c - what making a file's pages writable ahead costs per page, in the pattern of LogTail's preparer:
 * `fallocate` ASTEP bytes at a time, `MADV_POPULATE_WRITE` CHUNK pages a call, the pages then written; with
 * DONTNEED 1, the pages 256 KiB behind given back (`MADV_DONTNEED`); with THREADS 1, a second thread busy meanwhile
 * (for TLB shootdowns); TRUNC=1 in the environment extends with ftruncate instead of fallocate. 64 MiB on the file system of DIR. A design probe for issue
 * 51 (results: Benchmarks/Results/state-log-latency-2026-12-07.md, "Night"); not part of the package.
 *
 *   cc -O2 -o /tmp/prepare-cost Benchmarks/Anchors/probes/prepare-cost.c -lpthread
 *   /tmp/prepare-cost DIR CHUNK DONTNEED THREADS ASTEP      # e.g. /tmp/prepare-cost /var/tmp 64 1 0 1048576
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
#define SPAN (256L<<20)
#define TOTAL (64L<<20)
volatile int spin=1;
static void*spinner(void*a){while(spin){} return 0;}
int main(int argc,char**argv){
  if(argc!=6){fprintf(stderr,"usage: %s DIR CHUNK DONTNEED THREADS ASTEP\n",argv[0]);return 2;}
  const char*dir=argv[1]; int chunk=atoi(argv[2]); int dontneed=atoi(argv[3]); int threads=atoi(argv[4]); long astep=atol(argv[5]);
  pthread_t th; if(threads) pthread_create(&th,0,spinner,0);
  char path[512]; snprintf(path,sizeof path,"%s/pp",dir); int fd=open(path,O_RDWR|O_CREAT|O_TRUNC,0600);
  char*p=mmap(NULL,SPAN,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
  long allocated=0, released=0; double tf=0,tp=0,td=0; long pages=0;
  for(long off=0; off<TOTAL; off+=chunk*4096L){
    double t=now();
    if(allocated<off+chunk*4096L){ if(getenv("TRUNC")) ftruncate(fd,allocated+astep); else fallocate(fd,getenv("KEEP")?FALLOC_FL_KEEP_SIZE:0,allocated,astep); allocated+=astep; }
    double t1=now(); tf+=t1-t;
    madvise(p+off,chunk*4096L,MADV_POPULATE_WRITE);
    double t2=now(); tp+=t2-t1;
    memset(p+off,'x',chunk*4096L);
    double t3=now();
    long below=off-(256L<<10); if(dontneed && below>released){ madvise(p+released,below-released,MADV_DONTNEED); released=below;}
    td+=now()-t3; pages+=chunk;
  }
  printf("chunk %d dontneed %d threads %d astep %ld: falloc %.2f popw %.2f dontneed %.2f us/page\n",chunk,dontneed,threads,astep,tf/pages,tp/pages,td/pages);
  spin=0; unlink(path); return 0;
}
