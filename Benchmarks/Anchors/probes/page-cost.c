/*
 * page-cost.c - what appending 1,100-byte records to a file costs per record, five ways, on the file system of DIR:
 * write() with O_APPEND (the state log before 1de1f16); the file allocated (fallocate) or extended (ftruncate) and
 * its pages made writable (MADV_POPULATE_WRITE), then memcpy into a shared mapping (LogTail's way: "prep" is what
 * its preparer thread pays, "copy" what the broker's thread pays); pages populated for reading, the copy faulting
 * each one writable; the file extended and nothing populated, the copy faulting every page in. 32 MiB each, three
 * rounds. A design probe for issue 51; not part of the package.
 *
 *   cc -O2 -o /tmp/page-cost Benchmarks/Anchors/probes/page-cost.c && /tmp/page-cost /tmp/some-dir-on-the-disk
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
#define SIZE (32L<<20)
int main(int argc,char**argv){
  const char*dir=argv[1]; char path[512]; char rec[1100]; memset(rec,'x',sizeof rec);
  for(int round=0;round<3;round++){
    /* write(): append 1100-byte records */
    snprintf(path,sizeof path,"%s/w",dir); int fd=open(path,O_RDWR|O_CREAT|O_TRUNC|O_APPEND,0600);
    double t=now(); long n=0; for(long off=0;off+1100<=SIZE;off+=1100){write(fd,rec,1100);n++;} double w=now()-t; close(fd); unlink(path);
    /* fallocate + populate write + memcpy */
    const char *modes[]={"falloc+popw","trunc+popw","falloc+popr","trunc+nopop"};
    printf("round %d: write %.2f us/rec", round, w/n);
    for(int m=0;m<4;m++){
      snprintf(path,sizeof path,"%s/m",dir); fd=open(path,O_RDWR|O_CREAT|O_TRUNC,0600);
      t=now();
      if(m==0||m==2) fallocate(fd,0,0,SIZE); else ftruncate(fd,SIZE);
      char*p=mmap(NULL,SIZE,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
      if(m==0||m==1) madvise(p,SIZE,MADV_POPULATE_WRITE); else if(m==2) madvise(p,SIZE,MADV_POPULATE_READ);
      double prep=now()-t; t=now();
      for(long off=0;off+1100<=SIZE;off+=1100) memcpy(p+off,rec,1100);
      double cp=now()-t;
      printf(" | %s prep %.2f + copy %.2f us/rec", modes[m], prep/n, cp/n);
      munmap(p,SIZE); close(fd); unlink(path);
    }
    printf("\n");
  }
}
