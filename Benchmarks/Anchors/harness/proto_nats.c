/*
 * proto_nats.c - the NATS client protocol, core NATS (no JetStream), over
 * TCP loopback: nats-server has no Unix socket listener.
 *
 *   hello      CONNECT {"verbose":false,...} + PING -> INFO (ignored), PONG (sync)
 *   subscribe  SUB topic sid + PING                 -> PONG (sync)
 *   publish    PUB topic size + payload             -> nothing
 *   store      none: core NATS keeps no messages
 *   ping       PING                                 -> PONG (sync)
 *   delivery   MSG topic sid [reply-to] size + payload
 *
 * "verbose":false, so the server sends no +OK per request.  SUB has no
 * reply of its own, hence the PING after it.  The server's own PINGs are
 * answered, or it would close a connection busy with a long run.
 */
#include <stdio.h>
#include <string.h>

#include "conn.h"

static size_t nats_hello(char *out, size_t cap, const char *client_id)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_printf(&w, "CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"%s\","
		  "\"lang\":\"c\",\"version\":\"bench\",\"protocol\":0}\r\nPING\r\n",
		  client_id);
	return wb_done(&w);
}

static size_t nats_subscribe(char *out, size_t cap, const char *topic, unsigned id)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_printf(&w, "SUB %s %u\r\nPING\r\n", topic, id + 1);
	return wb_done(&w);
}

static size_t nats_publish(char *out, size_t cap, const char *topic,
			   const void *payload, size_t len)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_printf(&w, "PUB %s %zu\r\n", topic, len);
	wb_put(&w, payload, len);
	wb_put(&w, "\r\n", 2);
	return wb_done(&w);
}

static size_t nats_ping(char *out, size_t cap)
{
	struct wbuf w = wbuf_make(out, cap);

	wb_put(&w, "PING\r\n", 6);
	return wb_done(&w);
}

static int starts_with(const char *p, size_t n, const char *word)
{
	size_t wl = strlen(word);

	return n >= wl && memcmp(p, word, wl) == 0;
}

/* The payload size: the last token of a MSG line. */
static size_t msg_size(const char *line, const char *line_end)
{
	const char *d = line_end;
	size_t size = 0, mul = 1;

	while (d > line && d[-1] >= '0' && d[-1] <= '9') {
		size += (size_t)(*--d - '0') * mul;
		mul *= 10;
	}
	return size;
}

static ssize_t nats_parse(conn_t *c, const char *buf, size_t len, deliver_fn deliver)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *cr = memchr(p, '\r', (size_t)(end - p));
		size_t n;

		if (!cr || cr + 1 >= end)
			break;
		if (cr[1] != '\n')
			return -1;
		n = (size_t)(cr - p);      /* the control line, without CRLF */

		if (starts_with(p, n, "MSG ")) {
			size_t size = msg_size(p, cr);

			if ((size_t)(end - (cr + 2)) < size + 2)
				break;      /* the payload is not all here yet */
			deliver(c, cr + 2, size);
			p = cr + 2 + size + 2;
			continue;
		}
		if (starts_with(p, n, "PING")) {
			conn_send_all(c, "PONG\r\n", 6);
		} else if (starts_with(p, n, "PONG")) {
			c->syncs++;
		} else if (starts_with(p, n, "-ERR")) {
			if (c->errors++ < 3)
				fprintf(stderr, "nats error: %.*s\n", (int)n, p);
		}
		/* INFO and +OK need nothing */
		p = cr + 2;
	}
	return p - buf;
}

const struct proto proto_nats = {
	.name = "nats",
	.default_addr = "tcp:127.0.0.1:4222",
	.hello = nats_hello,
	.subscribe = nats_subscribe,
	.publish = nats_publish,
	.store = NULL,
	.ping = nats_ping,
	.parse = nats_parse,
};
