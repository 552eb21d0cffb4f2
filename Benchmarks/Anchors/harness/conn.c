/*
 * conn.c - sockets for the harness, the same for every protocol: connect,
 * write everything, read and hand complete frames to the protocol's
 * parser, and wait for the server's sync replies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* "host:port"; the port is after the last colon. */
static int connect_tcp(const char *hostport)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	const char *colon = strrchr(hostport, ':');
	struct addrinfo *res;
	char host[256];
	size_t hlen;
	int fd, one = 1;

	if (!colon || (hlen = (size_t)(colon - hostport)) >= sizeof(host)) {
		fprintf(stderr, "bad tcp address: tcp:%s\n", hostport);
		return -1;
	}
	memcpy(host, hostport, hlen);
	host[hlen] = 0;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
		fprintf(stderr, "cannot resolve tcp:%s\n", hostport);
		return -1;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	/* Small frames one at a time (latency, pings) must not wait for
	 * Nagle; the Unix sockets of the other servers never wait. */
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int connect_addr(const char *addr)
{
	if (strncmp(addr, "unix:", 5) == 0)
		return connect_unix(addr + 5);
	if (strncmp(addr, "tcp:", 4) == 0)
		return connect_tcp(addr + 4);
	fprintf(stderr, "address must start with unix: or tcp: (%s)\n", addr);
	return -1;
}

int conn_open(conn_t *c, const struct proto *p, const char *addr,
	      const char *client_id, size_t bufsize)
{
	char req[1024];
	size_t n;

	memset(c, 0, sizeof(*c));
	c->proto = p;
	c->fd = connect_addr(addr);
	if (c->fd < 0) {
		fprintf(stderr, "%s: connect %s: %s\n", p->name, addr, strerror(errno));
		return -1;
	}
	/* Non-blocking, so that one thread can serve every connection of a
	 * run from one poll loop. */
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	c->cap = bufsize;
	c->buf = malloc(c->cap);
	if (!c->buf)
		return -1;
	n = p->hello(req, sizeof(req), client_id);
	if (n == 0 || conn_send_all(c, req, n) < 0)
		return -1;
	return conn_wait_syncs(c, 1, 5000, NULL);
}

void conn_close(conn_t *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
}

int conn_send_all(conn_t *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(c->fd, p, len);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };

			poll(&pfd, 1, 1000);
		} else if (!(n < 0 && errno == EINTR)) {
			return -1;
		}
	}
	return 0;
}

ssize_t conn_pump(conn_t *c, deliver_fn deliver)
{
	ssize_t n, used;

	if (c->len == c->cap) {
		fprintf(stderr, "%s: frame larger than read buffer (%zu)\n",
			c->proto->name, c->cap);
		return -2;
	}
	n = read(c->fd, c->buf + c->len, c->cap - c->len);
	if (n == 0)
		return 0;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -1 : -2;
	c->len += (size_t)n;
	used = c->proto->parse(c, c->buf, c->len, deliver);
	if (used < 0) {
		fprintf(stderr, "%s: protocol error\n", c->proto->name);
		return -2;
	}
	/* Keep the start of an incomplete frame for the next read. */
	if (used > 0) {
		memmove(c->buf, c->buf + used, c->len - (size_t)used);
		c->len -= (size_t)used;
	}
	return n;
}

int conn_wait_syncs(conn_t *c, uint64_t target, int timeout_ms, deliver_fn deliver)
{
	int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;

	while (c->syncs < target) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		int64_t left_ms = (deadline - now_ns()) / 1000000;
		ssize_t n;

		if (left_ms <= 0) {
			fprintf(stderr, "%s: timed out waiting for the server\n", c->proto->name);
			return -1;
		}
		poll(&pfd, 1, (int)left_ms);
		n = conn_pump(c, deliver);
		if (n == 0 || n == -2) {
			fprintf(stderr, "%s: connection closed by server\n", c->proto->name);
			return -1;
		}
	}
	return 0;
}

int conn_sync(conn_t *c, int timeout_ms, deliver_fn deliver)
{
	char req[64];
	size_t n = c->proto->ping(req, sizeof(req));

	if (n == 0 || conn_send_all(c, req, n) < 0)
		return -1;
	return conn_wait_syncs(c, c->syncs + 1, timeout_ms, deliver);
}

int conn_subscribe(conn_t *c, const char *topic, unsigned id, deliver_fn deliver)
{
	char req[512];
	size_t n = c->proto->subscribe(req, sizeof(req), topic, id);

	if (n == 0 || conn_send_all(c, req, n) < 0)
		return -1;
	return conn_wait_syncs(c, c->syncs + 1, 5000, deliver);
}
