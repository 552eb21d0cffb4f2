/*
 * conn.h - one client connection to a server, whatever its protocol.
 */
#ifndef ANCHORS_CONN_H
#define ANCHORS_CONN_H

#include <stdint.h>

#include "proto.h"
#include "wbuf.h"

struct conn {
	int fd;
	const struct proto *proto;
	char *buf;          /* read buffer: bytes not parsed yet             */
	size_t len, cap;    /* bytes in it / its size                        */
	uint64_t syncs;     /* sync replies seen (see proto.h)               */
	uint64_t errors;    /* error replies seen                            */
	uint64_t count;     /* messages delivered to this connection         */
	uint64_t expected;  /* throughput: messages it is to receive         */
	uint64_t next_seq;  /* sequence number expected next                 */
	uint64_t gaps;      /* deliveries whose sequence number was not next */
	int64_t done_ns;    /* arrival of the last expected message
	                       (throughput) or of the latest one (latency)  */
};

/*
 * Connect to "unix:/path" or "tcp:host:port", make the socket
 * non-blocking, send the protocol's hello and wait for its sync reply.
 * `bufsize` bounds the largest frame the connection can receive.
 */
int conn_open(conn_t *c, const struct proto *p, const char *addr,
	      const char *client_id, size_t bufsize);
void conn_close(conn_t *c);

/* Write the whole buffer, waiting while the socket is full. */
int conn_send_all(conn_t *c, const void *buf, size_t len);

/* One read() and parse: bytes read, 0 at EOF, -1 when there was nothing
 * to read, -2 on an error (a message has been printed). */
ssize_t conn_pump(conn_t *c, deliver_fn deliver);

/* Read until c->syncs reaches `target`; 0, or -1 on timeout or EOF. */
int conn_wait_syncs(conn_t *c, uint64_t target, int timeout_ms, deliver_fn deliver);

/* A ping and its reply: everything sent before has been handled. */
int conn_sync(conn_t *c, int timeout_ms, deliver_fn deliver);

/* Subscribe and wait for the server's confirmation. */
int conn_subscribe(conn_t *c, const char *topic, unsigned id, deliver_fn deliver);

#endif
