/*
 * proto.h - what a protocol module gives the harness.
 *
 * A module only encodes requests and parses what the server sends back.
 * Sockets, timing and counting are the harness's (conn.c and the modes),
 * so the four servers are driven by the same code and differ only in the
 * bytes on the wire.
 *
 * The contract the harness relies on:
 *   - every request built by hello(), subscribe() and ping() makes the
 *     server send exactly one reply that parse() counts in c->syncs
 *     (CONNACK, SUBACK, PONG, OK, a subscribe confirmation...).  Counting
 *     them is how the harness knows the server has handled everything sent
 *     before; a protocol that does not acknowledge a SUBSCRIBE appends a
 *     ping to it (NATS does);
 *   - publish() and store() make no sync reply; other replies to them
 *     (Redis's ":1" for PUBLISH) are parsed and dropped;
 *   - parse() consumes complete frames only and calls deliver() once per
 *     message delivered to a subscription, with the payload byte-exact:
 *     the harness keeps a sequence number and a send time in its first 16
 *     bytes.
 *
 * Encoders write into `out` (at most `cap` bytes) through struct wbuf and
 * return the frame's length, or 0 when it did not fit.
 */
#ifndef ANCHORS_PROTO_H
#define ANCHORS_PROTO_H

#include <stddef.h>
#include <sys/types.h>

typedef struct conn conn_t;

/* Called by parse() once per delivered message. */
typedef void (*deliver_fn)(conn_t *c, const char *payload, size_t len);

struct proto {
	const char *name;          /* as given to -P and printed in RESULT    */
	const char *default_addr;  /* "unix:/path" or "tcp:host:port"         */

	/* Sent right after connect(); one sync reply. */
	size_t (*hello)(char *out, size_t cap, const char *client_id);
	/* Subscribe to one topic; one sync reply.  `id` is unique per conn. */
	size_t (*subscribe)(char *out, size_t cap, const char *topic, unsigned id);
	/* Publish one message, fire and forget (QoS 0, no acknowledgement). */
	size_t (*publish)(char *out, size_t cap, const char *topic,
			  const void *payload, size_t len);
	/* Keep one value under `topic` on the server; NULL if it cannot. */
	size_t (*store)(char *out, size_t cap, const char *topic,
			const void *payload, size_t len);
	/* A round trip; one sync reply. */
	size_t (*ping)(char *out, size_t cap);
	/* Parse the complete frames of buf[0..len); bytes consumed, or -1. */
	ssize_t (*parse)(conn_t *c, const char *buf, size_t len, deliver_fn deliver);
};

extern const struct proto proto_redis;
extern const struct proto proto_mqtt;
extern const struct proto proto_nats;
extern const struct proto proto_notifyd;

#endif
