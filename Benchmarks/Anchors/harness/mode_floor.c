/*
 * mode_floor.c - the machine's floor for the latency figure.
 *
 * The latency loop (write, then poll and read) through a trivial echo
 * process on a Unix socketpair, no server at all: two hops and two
 * process wake-ups, which is the least any broker's round trip can cost
 * on this machine.  A broker's latency is read against it.  opt.echo_cpu
 * pins the echo process, for the CPU placements of the latency phase.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "clock.h"
#include "payload.h"
#include "stats.h"

static void pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* The child: send back whatever arrives, until EOF. */
static void echo(int fd, char *buf, size_t size)
{
	ssize_t n;

	if (opt.echo_cpu >= 0)
		pin_to(opt.echo_cpu);
	while ((n = read(fd, buf, size)) > 0)
		if (write(fd, buf, (size_t)n) != n)
			break;
	_exit(0);
}

/* Read exactly `size` bytes, waiting at most 5 s for each part. */
static int read_all(int fd, char *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 5000) <= 0)
			return -1;
		n = read(fd, buf + got, size - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

int run_floor(void)
{
	long total = opt.warmup + opt.n;
	size_t size = (size_t)opt.size;
	int64_t *lat = calloc((size_t)opt.n, sizeof(int64_t));
	char *msg = malloc(size), *in = malloc(size);
	int sv[2];
	pid_t child;

	if (!lat || !msg || !in || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(sv[0]);
		echo(sv[1], in, size);
	}
	close(sv[1]);
	for (long i = 0; i < total; i++) {
		int64_t sent = now_ns();

		payload_make(msg, size, (uint64_t)i, sent);
		if (write(sv[0], msg, size) != (ssize_t)size || read_all(sv[0], in, size) < 0)
			return 1;
		if (i >= opt.warmup)
			lat[i - opt.warmup] = now_ns() - sent;
	}
	close(sv[0]);
	waitpid(child, NULL, 0);

	sort_samples(lat, opt.n);
	printf("RESULT proto=floor mode=latency subs=1 msgs=%ld payload=%ld"
	       " p50_us=%.1f p99_us=%.1f p999_us=%.1f min_us=%.1f max_us=%.1f\n",
	       opt.n, opt.size,
	       (double)percentile(lat, opt.n, 0.50) / 1000.0,
	       (double)percentile(lat, opt.n, 0.99) / 1000.0,
	       (double)percentile(lat, opt.n, 0.999) / 1000.0,
	       (double)lat[0] / 1000.0, (double)lat[opt.n - 1] / 1000.0);
	free(lat);
	free(msg);
	free(in);
	return 0;
}
