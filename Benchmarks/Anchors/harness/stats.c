/*
 * stats.c - see stats.h.
 */
#include <stdlib.h>

#include "stats.h"

static int ascending(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

void sort_samples(int64_t *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), ascending);
}

int64_t percentile(const int64_t *sorted, long n, double p)
{
	/* rank = ceil(p * n), 1-based; the small margin keeps an exact
	 * product such as 0.5 * 20000 from rounding up a rank. */
	long k = (long)(p * (double)n + 0.999999) - 1;

	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return sorted[k];
}
