/*
 * clock.h - the one clock every figure is read from.
 *
 * CLOCK_MONOTONIC in nanoseconds.  Publisher and subscribers of a run live
 * in one process, so a latency is the difference of two readings of this
 * clock and needs no synchronisation between machines or processes.
 */
#ifndef ANCHORS_CLOCK_H
#define ANCHORS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double ns_to_s(int64_t ns)
{
	return (double)ns / 1e9;
}

#endif
