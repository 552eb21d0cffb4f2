/*
 * write-cost.c - what appending to a file with write() costs per 1,100 bytes when the same bytes go in writes of
 * 1, 4, 16, 64 and 256 records: the per-call share of a kilobyte record's write. 64 MiB each, two rounds, on the file
 * system of DIR. A design probe for issue 51 (results: Benchmarks/Results/state-log-latency-2026-12-07.md, "Night");
 * not part of the package.
 *
 *   cc -O2 -o /tmp/write-cost Benchmarks/Anchors/probes/write-cost.c && /tmp/write-cost DIR
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  if(argc!=2){fprintf(stderr,"usage: %s DIR\n",argv[0]);return 2;}
  static char buf[1<<20]; memset(buf,'x',sizeof buf); char path[256]; snprintf(path,256,"%s/wc",argv[1]);
  int sizes[]={1100,4400,17600,70400,281600};
  for(int r=0;r<2;r++) for(int i=0;i<5;i++){
    int fd=open(path,O_RDWR|O_CREAT|O_TRUNC|O_APPEND,0600); long total=64L<<20; long n=0;
    double t=now(); for(long off=0;off+sizes[i]<=total;off+=sizes[i]){write(fd,buf,sizes[i]);n++;}
    double el=now()-t; printf("chunk %6d: %.2f us per 1100 B\n",sizes[i],el/(n*(sizes[i]/1100.0))); close(fd); unlink(path);
  }
}
