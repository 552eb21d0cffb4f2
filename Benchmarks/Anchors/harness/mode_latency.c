/*
 * mode_latency.c - publish to delivery, one message at a time.
 *
 * Stamp, publish, wait until every subscriber has the message, repeat.
 * Nothing else is in flight, so each figure is one trip through the server:
 * read, route, write, and the wake-ups on both sides.  The first opt.warmup
 * messages are not recorded.  Reported in µs: p50, p99, p99.9, min, max,
 * mean; and the CPU seconds of the server and of the harness.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "clock.h"
#include "payload.h"
#include "procstat.h"
#include "stats.h"

/* A message not delivered within this time ends the run: nothing of
 * this size takes that long unless it was lost. */
#define DELIVERY_LIMIT_NS 5000000000LL

struct run {
	conn_t *subs, pub;
	long nsubs;
	struct pollfd *pfd;    /* subscribers, then the publisher */
};

/*
 * Wait until every subscriber has message `seq`; the arrival time of the
 * last one to get it, or -1 after DELIVERY_LIMIT_NS.
 */
static int64_t wait_for_everyone(struct run *r, uint64_t seq, int64_t sent)
{
	int64_t last = 0;
	long have = 0;

	while (have < r->nsubs) {
		if (now_ns() > sent + DELIVERY_LIMIT_NS)
			return -1;
		poll(r->pfd, (nfds_t)r->nsubs + 1, 100);
		if (r->pfd[r->nsubs].revents)
			while (conn_pump(&r->pub, on_ignore) > 0)
				;
		have = 0;
		for (long s = 0; s < r->nsubs; s++) {
			conn_t *c = &r->subs[s];

			if (r->pfd[s].revents)
				while (conn_pump(c, on_timed) > 0)
					;
			if (c->next_seq > seq) {
				have++;
				if (c->done_ns > last)
					last = c->done_ns;
			}
		}
	}
	return last;
}

int run_latency(void)
{
	long total = opt.warmup + opt.n;
	size_t cap = (size_t)opt.size + 1024;
	int64_t *lat = calloc((size_t)opt.n, sizeof(int64_t)), t_start;
	char *payload = malloc((size_t)opt.size), *frame = malloc(cap), id[64];
	struct run r = { .nsubs = opt.conns };
	double cpu0, bcpu0, elapsed, cpu, sum = 0;

	r.subs = calloc((size_t)r.nsubs, sizeof(conn_t));
	r.pfd = calloc((size_t)r.nsubs + 1, sizeof(struct pollfd));
	if (!lat || !payload || !frame || !r.subs || !r.pfd)
		return 1;
	if (open_subscribers(r.subs, r.nsubs, opt.topic, on_timed) < 0)
		return 1;
	client_id(id, sizeof(id), "p", 0);
	if (conn_open(&r.pub, opt.proto, opt.addr, id, READ_BUF) < 0)
		return 1;
	for (long i = 0; i < r.nsubs; i++)
		r.pfd[i] = (struct pollfd){ .fd = r.subs[i].fd, .events = POLLIN };
	r.pfd[r.nsubs] = (struct pollfd){ .fd = r.pub.fd, .events = POLLIN };

	cpu0 = server_cpu_s();
	bcpu0 = self_cpu_s();
	t_start = now_ns();
	for (long i = 0; i < total; i++) {
		int64_t sent = now_ns(), last;
		size_t len;

		payload_make(payload, (size_t)opt.size, (uint64_t)i, sent);
		len = opt.proto->publish(frame, cap, opt.topic, payload, (size_t)opt.size);
		if (len == 0 || conn_send_all(&r.pub, frame, len) < 0) {
			fprintf(stderr, "publish failed\n");
			return 1;
		}
		last = wait_for_everyone(&r, (uint64_t)i, sent);
		if (last < 0) {
			fprintf(stderr, "%s: message %ld not delivered within 5 s\n",
				opt.proto->name, i);
			return 1;
		}
		if (i >= opt.warmup)
			lat[i - opt.warmup] = last - sent;
	}
	elapsed = ns_to_s(now_ns() - t_start);
	cpu = server_cpu_s();

	sort_samples(lat, opt.n);
	for (long i = 0; i < opt.n; i++)
		sum += (double)lat[i];
	printf("RESULT proto=%s mode=latency subs=%ld msgs=%ld payload=%ld"
	       " p50_us=%.1f p99_us=%.1f p999_us=%.1f min_us=%.1f max_us=%.1f mean_us=%.1f"
	       " elapsed_s=%.3f srv_cpu_s=%.2f bench_cpu_s=%.2f\n",
	       opt.proto->name, r.nsubs, opt.n, opt.size,
	       (double)percentile(lat, opt.n, 0.50) / 1000.0,
	       (double)percentile(lat, opt.n, 0.99) / 1000.0,
	       (double)percentile(lat, opt.n, 0.999) / 1000.0,
	       (double)lat[0] / 1000.0, (double)lat[opt.n - 1] / 1000.0,
	       sum / (double)opt.n / 1000.0, elapsed,
	       cpu >= 0 && cpu0 >= 0 ? cpu - cpu0 : -1, self_cpu_s() - bcpu0);

	for (long i = 0; i < r.nsubs; i++)
		conn_close(&r.subs[i]);
	conn_close(&r.pub);
	free(r.subs);
	free(r.pfd);
	free(lat);
	free(payload);
	free(frame);
	return 0;
}
