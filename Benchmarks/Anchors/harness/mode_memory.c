/*
 * mode_memory.c - what a server holds in memory: for idle subscribed
 * connections (idle) and for stored values (fill).  Both read the server's
 * VmRSS before and after; the run script gives each measurement a fresh
 * server, so earlier load does not count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"
#include "clock.h"
#include "payload.h"

static void sleep_s(double s)
{
	usleep((useconds_t)(s * 1e6));
}

/*
 * idle: opt.conns connections, each subscribed to a topic of its own
 * (TOPIC-i), then opt.hold seconds of nothing before RSS is read: what a
 * server pays per client that waits.
 */
int run_idle(void)
{
	conn_t *subs = calloc((size_t)opt.conns, sizeof(conn_t));
	long rss0 = server_rss_kb(), rss;
	int64_t t0 = now_ns();
	double setup_s;

	if (!subs)
		return 1;
	for (long i = 0; i < opt.conns; i++) {
		char id[64], topic[128];

		client_id(id, sizeof(id), "i", i);
		snprintf(topic, sizeof(topic), "%s-%ld", opt.topic, i);
		/* A small read buffer: these connections receive nothing. */
		if (conn_open(&subs[i], opt.proto, opt.addr, id, 4096) < 0 ||
		    conn_subscribe(&subs[i], topic, 0, on_ignore) < 0) {
			fprintf(stderr, "idle: connection %ld failed\n", i);
			return 1;
		}
	}
	setup_s = ns_to_s(now_ns() - t0);

	sleep_s(opt.hold);
	rss = server_rss_kb();
	printf("RESULT proto=%s mode=idle conns=%ld rss_before_kb=%ld rss_kb=%ld"
	       " per_conn_kb=%.2f setup_s=%.3f\n",
	       opt.proto->name, opt.conns, rss0, rss,
	       (double)(rss - rss0) / (double)opt.conns, setup_s);
	for (long i = 0; i < opt.conns; i++)
		conn_close(&subs[i]);
	free(subs);
	return 0;
}

/*
 * fill: opt.n values of opt.size bytes under TOPIC-i, with the protocol's
 * store encoder (an MQTT retained PUBLISH, a notifyd PUB, which is
 * retained; for Redis a plain SET stands in).  Written ~128 KiB at a time,
 * then a ping round trip says the server has handled them all; after
 * disconnecting and opt.hold seconds RSS is read.
 */
int run_fill(void)
{
	size_t cap = 256 * 1024, len = 0;
	char *buf = malloc(cap), *payload = malloc((size_t)opt.size), id[64];
	long rss0 = server_rss_kb(), rss;
	unsigned long long errors;
	double fill_s;
	int64_t t0;
	conn_t c;

	if (!opt.proto->store) {
		printf("RESULT proto=%s mode=fill unsupported=1\n", opt.proto->name);
		return 0;
	}
	if (!buf || !payload)
		return 1;
	client_id(id, sizeof(id), "f", 0);
	if (conn_open(&c, opt.proto, opt.addr, id, READ_BUF) < 0)
		return 1;
	t0 = now_ns();
	for (long i = 0; i < opt.n; i++) {
		char topic[128];
		size_t n;

		snprintf(topic, sizeof(topic), "%s-%ld", opt.topic, i);
		payload_make(payload, (size_t)opt.size, (uint64_t)i, 0);
		n = opt.proto->store(buf + len, cap - len, topic, payload, (size_t)opt.size);
		if (n == 0) {
			fprintf(stderr, "fill: payload too large\n");
			return 1;
		}
		len += n;
		if (len > cap / 2 || i == opt.n - 1) {
			if (conn_send_all(&c, buf, len) < 0)
				return 1;
			/* Read replies as we go (Redis answers each SET), so that
			 * neither side's buffers fill up. */
			while (conn_pump(&c, on_ignore) > 0)
				;
			len = 0;
		}
	}
	if (conn_sync(&c, 60000, on_ignore) < 0)
		return 1;
	fill_s = ns_to_s(now_ns() - t0);
	errors = (unsigned long long)c.errors;

	conn_close(&c);
	sleep_s(opt.hold);
	rss = server_rss_kb();
	printf("RESULT proto=%s mode=fill topics=%ld payload=%ld rss_before_kb=%ld rss_kb=%ld"
	       " per_topic_b=%.1f fill_s=%.3f errors=%llu\n",
	       opt.proto->name, opt.n, opt.size, rss0, rss,
	       (double)(rss - rss0) * 1024.0 / (double)opt.n, fill_s, errors);
	free(buf);
	free(payload);
	return 0;
}
