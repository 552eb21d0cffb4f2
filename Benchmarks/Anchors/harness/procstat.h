/*
 * procstat.h - what a process costs: a server's resident memory and CPU
 * time from /proc, and the harness's own CPU time.
 */
#ifndef ANCHORS_PROCSTAT_H
#define ANCHORS_PROCSTAT_H

/* VmRSS of `pid` in KiB, or -1. */
long proc_rss_kb(int pid);
/* User plus system CPU of `pid`, all its threads, in seconds, or -1. */
double proc_cpu_s(int pid);
/* User plus system CPU of this process, in seconds. */
double self_cpu_s(void);

#endif
