/*
 * proto_redis.c - Redis pub/sub, RESP2 (over a Unix socket in the runs).
 *
 *   hello      PING                    -> +PONG                 (sync)
 *   subscribe  SUBSCRIBE topic         -> [subscribe topic n]   (sync)
 *   publish    PUBLISH topic payload   -> :receivers            (dropped)
 *   store      SET topic payload       -> +OK                   (dropped)
 *   ping       PING                    -> +PONG, or [pong ""] once subscribed (sync)
 *   delivery   [message topic payload]
 *
 * Redis has no retained messages; SET is the nearest thing to "keep one
 * value under this topic", so the fill figure is a plain key's cost.
 */
#include <stdio.h>
#include <string.h>

#include "conn.h"

/* A command is an array of bulk strings: *<argc>, then $<len> <bytes>. */
static size_t command(char *out, size_t cap, int argc, const char *const *argv,
		      const size_t *lens)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_printf(&w, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		wb_printf(&w, "$%zu\r\n", lens[i]);
		wb_put(&w, argv[i], lens[i]);
		wb_put(&w, "\r\n", 2);
	}
	return wb_done(&w);
}

static size_t redis_ping(char *out, size_t cap)
{
	const char *argv[] = { "PING" };
	const size_t lens[] = { 4 };

	return command(out, cap, 1, argv, lens);
}

static size_t redis_hello(char *out, size_t cap, const char *client_id)
{
	(void)client_id;        /* RESP2 needs no handshake; PING is the sync */
	return redis_ping(out, cap);
}

static size_t redis_subscribe(char *out, size_t cap, const char *topic, unsigned id)
{
	const char *argv[] = { "SUBSCRIBE", topic };
	const size_t lens[] = { 9, strlen(topic) };

	(void)id;
	return command(out, cap, 2, argv, lens);
}

static size_t redis_publish(char *out, size_t cap, const char *topic,
			    const void *payload, size_t len)
{
	const char *argv[] = { "PUBLISH", topic, payload };
	const size_t lens[] = { 7, strlen(topic), len };

	return command(out, cap, 3, argv, lens);
}

static size_t redis_store(char *out, size_t cap, const char *topic,
			  const void *payload, size_t len)
{
	const char *argv[] = { "SET", topic, payload };
	const size_t lens[] = { 3, strlen(topic), len };

	return command(out, cap, 3, argv, lens);
}

/* ---------- RESP parsing ---------- */

/* One parsed value: a line (+ - :), a bulk string ($) or an array's
 * header (*). */
struct item {
	char type;
	const char *s;  /* the line's text, or the bulk string's bytes         */
	long long n;    /* length of s, or the array's element count           */
};

/* What the parsers return instead of a position. */
#define INCOMPLETE ((const char *)0)   /* wait for more bytes      */
#define MALFORMED ((const char *)1)    /* not RESP: give up        */

/* "<type><text>\r\n" at p; returns the byte after the CRLF. */
static const char *parse_line(const char *p, const char *end, struct item *it)
{
	const char *cr = memchr(p, '\r', (size_t)(end - p));

	if (!cr || cr + 1 >= end)
		return INCOMPLETE;
	if (cr[1] != '\n')
		return MALFORMED;
	it->type = p[0];
	it->s = p + 1;
	it->n = cr - (p + 1);
	return cr + 2;
}

static long long line_number(const struct item *it)
{
	const char *s = it->s, *e = it->s + it->n;
	long long v = 0, sign = 1;

	if (s < e && *s == '-') {
		sign = -1;
		s++;
	}
	while (s < e)
		v = v * 10 + (*s++ - '0');
	return sign * v;
}

/*
 * One RESP value at p.  For an array, `it` gets its header and the first
 * `max` elements go to elems[] (the rest are parsed and skipped); nesting
 * deeper than a few levels is not something pub/sub sends.
 */
static const char *parse_value(const char *p, const char *end, struct item *it,
			       struct item *elems, int max, int depth)
{
	const char *q = parse_line(p, end, it);
	long long n;

	if (q == INCOMPLETE || q == MALFORMED)
		return q;
	switch (it->type) {
	case '+': case '-': case ':':
		return q;
	case '$':
		n = line_number(it);
		if (n < 0) {           /* the null bulk string */
			it->s = NULL;
			it->n = 0;
			return q;
		}
		if (end - q < n + 2)
			return INCOMPLETE;
		it->s = q;
		it->n = n;
		return q + n + 2;
	case '*':
		if (depth > 4)
			return MALFORMED;
		n = line_number(it);
		it->n = n;
		for (long long i = 0; i < n; i++) {
			struct item skipped;

			q = parse_value(q, end, i < max ? &elems[i] : &skipped, NULL, 0, depth + 1);
			if (q == INCOMPLETE || q == MALFORMED)
				return q;
		}
		return q;
	default:
		return MALFORMED;
	}
}

static int item_is(const struct item *it, const char *s)
{
	size_t n = strlen(s);

	return it->n == (long long)n && memcmp(it->s, s, n) == 0;
}

static ssize_t redis_parse(conn_t *c, const char *buf, size_t len, deliver_fn deliver)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		struct item top, el[3] = { 0 };
		const char *next = parse_value(p, end, &top, el, 3, 0);

		if (next == INCOMPLETE)
			break;
		if (next == MALFORMED)
			return -1;
		if (top.type == '*' && top.n >= 1 && el[0].type == '$') {
			/* push messages of a subscribed connection */
			if (top.n == 3 && item_is(&el[0], "message"))
				deliver(c, el[2].s, (size_t)el[2].n);
			else if (item_is(&el[0], "subscribe") || item_is(&el[0], "pong"))
				c->syncs++;
		} else if (top.type == '+' && item_is(&top, "PONG")) {
			c->syncs++;
		} else if (top.type == '-') {
			if (c->errors++ < 3)
				fprintf(stderr, "redis error: %.*s\n", (int)top.n, top.s);
		}
		p = next;
	}
	return p - buf;
}

const struct proto proto_redis = {
	.name = "redis",
	.default_addr = "unix:/tmp/anchors/redis.sock",
	.hello = redis_hello,
	.subscribe = redis_subscribe,
	.publish = redis_publish,
	.store = redis_store,
	.ping = redis_ping,
	.parse = redis_parse,
};
