/*
 * subscriber.c - the receiving side of a run: opening the subscribers and
 * what each does with a message delivered to it.
 */
#include <stdio.h>

#include "bench.h"
#include "clock.h"
#include "payload.h"

void on_ignore(conn_t *c, const char *payload, size_t len)
{
	(void)c;
	(void)payload;
	(void)len;
}

/* The CLI phase only asks how many messages arrived. */
void on_count(conn_t *c, const char *payload, size_t len)
{
	(void)payload;
	(void)len;
	c->count++;
}

/*
 * Throughput: count, check that sequence numbers come in order, and note
 * when the last expected message arrives.  A subscriber is finished when it
 * has the last message or as many as expected: a server that lost some on
 * the way still finishes once the last one is in.
 */
void on_message(conn_t *c, const char *payload, size_t len)
{
	uint64_t seq;

	c->count++;
	if (len < PAYLOAD_MIN)
		return;
	seq = payload_seq(payload);
	if (seq != c->next_seq)
		c->gaps++;
	c->next_seq = seq + 1;
	if (seq + 1 == c->expected || c->count == c->expected)
		c->done_ns = now_ns();
}

/* Latency: which message arrived last, and when. */
void on_timed(conn_t *c, const char *payload, size_t len)
{
	uint64_t seq = 0;

	c->count++;
	if (len >= 8)
		seq = payload_seq(payload);
	c->next_seq = seq + 1;
	c->done_ns = now_ns();
}

int open_subscribers(conn_t *subs, long count, const char *topic, deliver_fn fn)
{
	char id[64];

	for (long i = 0; i < count; i++) {
		client_id(id, sizeof(id), "s", i);
		if (conn_open(&subs[i], opt.proto, opt.addr, id, READ_BUF) < 0 ||
		    conn_subscribe(&subs[i], topic, 0, fn) < 0)
			return -1;
	}
	return 0;
}
