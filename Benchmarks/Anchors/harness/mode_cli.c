/*
 * mode_cli.c - two helpers for the CLI phase, where each server's own
 * command-line publisher is timed by clirun.
 *
 *   listen  a subscriber that counts what the CLIs really delivered, so a
 *           fast CLI that publishes nothing is caught;
 *   pub1    a minimal compiled one-shot publisher (connect, publish, ping
 *           round trip, exit): the floor for any CLI of that protocol.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "clock.h"

/* Count messages on opt.topic until opt.n arrived or opt.timeout passed;
 * create opt.ready_file once subscribed, so the script knows when to
 * start publishing. */
int run_listen(void)
{
	int64_t deadline = now_ns() + (int64_t)(opt.timeout * 1e9);
	unsigned long long received;
	char id[64];
	conn_t c;

	client_id(id, sizeof(id), "l", 0);
	if (conn_open(&c, opt.proto, opt.addr, id, READ_BUF) < 0 ||
	    conn_subscribe(&c, opt.topic, 0, on_count) < 0)
		return 1;
	if (opt.ready_file) {
		FILE *f = fopen(opt.ready_file, "w");

		if (f)
			fclose(f);
	}
	while (c.count < (uint64_t)opt.n && now_ns() < deadline) {
		struct pollfd pfd = { .fd = c.fd, .events = POLLIN };

		poll(&pfd, 1, 100);
		if (conn_pump(&c, on_count) == 0)
			break;
	}
	received = (unsigned long long)c.count;
	printf("RESULT proto=%s mode=listen expected=%ld received=%llu\n",
	       opt.proto->name, opt.n, received);
	conn_close(&c);
	return received == (unsigned long long)opt.n ? 0 : 2;
}

/* The ping round trip makes sure the publish was handled before exit,
 * as a CLI that reports success must. */
int run_pub1(void)
{
	char id[64], frame[4096];
	size_t len;
	conn_t c;

	client_id(id, sizeof(id), "c", 0);
	if (conn_open(&c, opt.proto, opt.addr, id, 4096) < 0)
		return 1;
	len = opt.proto->publish(frame, sizeof(frame), opt.topic, opt.message,
				 strlen(opt.message));
	if (len == 0 || conn_send_all(&c, frame, len) < 0 ||
	    conn_sync(&c, 5000, on_ignore) < 0)
		return 1;
	conn_close(&c);
	return 0;
}
