/*
 * stats.h - sorting samples and reading percentiles off them.
 */
#ifndef ANCHORS_STATS_H
#define ANCHORS_STATS_H

#include <stdint.h>

void sort_samples(int64_t *v, long n);

/*
 * Nearest rank: the smallest sample with at least p of all samples at or
 * below it (p in 0..1).  `sorted` holds n >= 1 samples in ascending order.
 * The same rule for every figure, in bench and in clirun.
 */
int64_t percentile(const int64_t *sorted, long n, double p);

#endif
