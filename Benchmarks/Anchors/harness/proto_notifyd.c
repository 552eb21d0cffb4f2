/*
 * proto_notifyd.c - notifyd wire protocol, version 1 (see notifyd's PROTOCOL.md).
 *
 *   greeting   HELLO notifyd 1 ...      sent unprompted on connect  (skipped)
 *   hello      PING                     -> PONG                     (sync)
 *   subscribe  SUB topic                -> OK                       (sync)
 *   publish    PUB topic size + payload -> nothing (no ack; retained, notifyd's normal path)
 *   store      the same PUB: a publish is retained unless it says noretain
 *   ping       PING                     -> PONG                     (sync)
 *   delivery   MSG topic seq time uid pid unit size + payload
 *
 * Every frame is a line ending in "\n" ("\r\n" accepted); MSG and LAST are
 * followed by exactly <size> payload bytes and a line break.  We never send
 * request ids, but a "#id " prefix on a reply is skipped anyway.  ERR lines
 * are counted in c->errors (first three printed); DROP lines (messages the
 * daemon dropped for a subscriber that fell behind) show up in the harness
 * as lost/gaps; the first one is printed and the total at exit.
 */
#include <stdio.h>
#include <string.h>

#include "conn.h"

static size_t nd_hello(char *out, size_t cap, const char *client_id)
{
	struct wbuf w = wbuf_make(out, cap);

	(void)client_id;        /* the server greets first; PING gives the sync */
	wb_put(&w, "PING\n", 5);
	return wb_done(&w);
}

static size_t nd_subscribe(char *out, size_t cap, const char *topic, unsigned id)
{
	struct wbuf w = wbuf_make(out, cap);

	(void)id;
	wb_printf(&w, "SUB %s\n", topic);
	return wb_done(&w);
}

/* Used for both publish and store: notifyd retains every PUB by default. */
static size_t nd_publish(char *out, size_t cap, const char *topic,
			 const void *payload, size_t len)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_printf(&w, "PUB %s %zu\n", topic, len);
	wb_put(&w, payload, len);
	wb_byte(&w, '\n');
	return wb_done(&w);
}

static size_t nd_ping(char *out, size_t cap)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_put(&w, "PING\n", 5);
	return wb_done(&w);
}

/* ---------- parsing ---------- */

static unsigned long long drops_announced, drop_lines;

__attribute__((destructor)) static void nd_report_drops(void)
{
	if (drop_lines)
		fprintf(stderr, "notifyd: %llu DROP notices, %llu messages dropped in all\n",
			drop_lines, drops_announced);
}

/* Is the line p[0..n) the verb `v` (upper case, as the server sends it),
 * alone or followed by a blank? */
static int verb(const char *p, size_t n, const char *v, size_t vl)
{
	return n >= vl && memcmp(p, v, vl) == 0 && (n == vl || p[vl] == ' ' || p[vl] == '\t');
}

/* The unsigned number in the last token of p[0..n); -1 if there is none. */
static long long last_num(const char *p, size_t n)
{
	const char *d = p + n;
	long long v = 0, mul = 1;
	int digits = 0;

	while (d > p && (d[-1] == ' ' || d[-1] == '\t'))
		d--;
	while (d > p && d[-1] >= '0' && d[-1] <= '9') {
		if (++digits > 18)
			return -1;      /* far over any max_payload */
		v += (long long)(*--d - '0') * mul;
		mul *= 10;
	}
	return digits && (d == p || d[-1] == ' ' || d[-1] == '\t') ? v : -1;
}

static ssize_t nd_parse(conn_t *c, const char *buf, size_t len, deliver_fn deliver)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line = p, *next;
		size_t n;

		if (!nl)
			break;
		next = nl + 1;
		n = (size_t)(nl - p);
		if (n && line[n - 1] == '\r')
			n--;
		if (n && line[0] == '#') {       /* "#id " prefix of a reply */
			while (n && *line != ' ' && *line != '\t')
				line++, n--;
			while (n && (*line == ' ' || *line == '\t'))
				line++, n--;
		}

		if (verb(line, n, "MSG", 3) || verb(line, n, "LAST", 4)) {
			long long size = last_num(line, n);
			const char *pl = next;

			if (size < 0)
				return -1;
			if ((size_t)(end - pl) < (size_t)size + 1)
				break;          /* payload (and its line break) not complete */
			next = pl + size;
			if (*next == '\r') {
				if (end - next < 2)
					break;
				next++;
			}
			if (*next != '\n')
				return -1;
			next++;
			if (line[0] == 'M')
				deliver(c, pl, (size_t)size);
		} else if (verb(line, n, "PONG", 4) || verb(line, n, "OK", 2)) {
			c->syncs++;
		} else if (verb(line, n, "ERR", 3)) {
			if (c->errors++ < 3)
				fprintf(stderr, "notifyd error: %.*s\n", (int)n, line);
		} else if (verb(line, n, "DROP", 4)) {
			/* DROP <topic> <count> <first-seq> <last-seq> */
			const char *q = line + 5, *e = line + n;
			unsigned long long count = 0;

			while (q < e && *q != ' ')       /* skip the topic */
				q++;
			while (q < e && *q == ' ')
				q++;
			while (q < e && *q >= '0' && *q <= '9')
				count = count * 10 + (unsigned long long)(*q++ - '0');
			drops_announced += count;
			if (drop_lines++ == 0)
				fprintf(stderr, "notifyd: %.*s (further DROP lines not shown)\n",
					(int)n, line);
		}
		/* HELLO, and frames of kinds we never ask for: nothing to do */
		p = next;
	}
	return p - buf;
}

const struct proto proto_notifyd = {
	.name = "notifyd",
	.default_addr = "unix:/tmp/anchors/notifyd.sock",
	.hello = nd_hello,
	.subscribe = nd_subscribe,
	.publish = nd_publish,
	.store = nd_publish,
	.ping = nd_ping,
	.parse = nd_parse,
};
