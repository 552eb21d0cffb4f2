/*
 * proto_mqtt.c - MQTT 3.1.1 at QoS 0 (Mosquitto, over a Unix socket in the
 * runs).
 *
 *   hello      CONNECT, clean session, no keep-alive -> CONNACK  (sync)
 *   subscribe  SUBSCRIBE topic at QoS 0              -> SUBACK   (sync)
 *   publish    PUBLISH at QoS 0                      -> nothing
 *   store      PUBLISH at QoS 0 with the retain flag -> nothing
 *   ping       PINGREQ                               -> PINGRESP (sync)
 *   delivery   PUBLISH from the broker
 */
#include <stdio.h>
#include <string.h>

#include "conn.h"

enum packet {
	CONNECT = 1, CONNACK = 2, PUBLISH = 3, SUBSCRIBE = 8, SUBACK = 9,
	PINGREQ = 12, PINGRESP = 13,
};

/* Fixed header: type and flags, then the remaining length as a varint
 * of 7 bits a byte, least significant first. */
static void fixed_header(struct wbuf *w, unsigned type_flags, size_t remaining)
{
	wb_byte(w, (unsigned char)type_flags);
	do {
		unsigned char b = remaining % 128;

		remaining /= 128;
		wb_byte(w, remaining ? b | 0x80 : b);
	} while (remaining);
}

/* A string: two bytes of length, big-endian, then the bytes. */
static void string16(struct wbuf *w, const char *s, size_t n)
{
	wb_byte(w, (unsigned char)(n >> 8));
	wb_byte(w, (unsigned char)n);
	wb_put(w, s, n);
}

static size_t mqtt_hello(char *out, size_t cap, const char *client_id)
{
	struct wbuf w = wbuf_make(out, cap);
	size_t idlen = strlen(client_id);

	fixed_header(&w, CONNECT << 4, 10 + 2 + idlen);
	string16(&w, "MQTT", 4);
	wb_byte(&w, 4);         /* protocol level 4: 3.1.1 */
	wb_byte(&w, 0x02);      /* clean session */
	wb_byte(&w, 0);         /* keep-alive 0: off, the runs are short */
	wb_byte(&w, 0);
	string16(&w, client_id, idlen);
	return wb_done(&w);
}

static size_t mqtt_subscribe(char *out, size_t cap, const char *topic, unsigned id)
{
	struct wbuf w = wbuf_make(out, cap);
	size_t tlen = strlen(topic);

	id = id % 65535 + 1;    /* a packet identifier may not be 0 */
	fixed_header(&w, SUBSCRIBE << 4 | 0x2, 2 + 2 + tlen + 1);
	wb_byte(&w, (unsigned char)(id >> 8));
	wb_byte(&w, (unsigned char)id);
	string16(&w, topic, tlen);
	wb_byte(&w, 0);         /* requested QoS */
	return wb_done(&w);
}

static size_t publish(char *out, size_t cap, const char *topic,
		      const void *payload, size_t len, int retain)
{
	struct wbuf w = wbuf_make(out, cap);
	size_t tlen = strlen(topic);

	/* QoS 0: no packet identifier, the payload follows the topic. */
	fixed_header(&w, PUBLISH << 4 | (retain ? 1 : 0), 2 + tlen + len);
	string16(&w, topic, tlen);
	wb_put(&w, payload, len);
	return wb_done(&w);
}

static size_t mqtt_publish(char *out, size_t cap, const char *topic,
			   const void *payload, size_t len)
{
	return publish(out, cap, topic, payload, len, 0);
}

static size_t mqtt_store(char *out, size_t cap, const char *topic,
			 const void *payload, size_t len)
{
	return publish(out, cap, topic, payload, len, 1);
}

static size_t mqtt_ping(char *out, size_t cap)
{
	struct wbuf w = wbuf_make(out, cap);

	fixed_header(&w, PINGREQ << 4, 0);
	return wb_done(&w);
}

static ssize_t mqtt_parse(conn_t *c, const char *buf, size_t len, deliver_fn deliver)
{
	const unsigned char *p = (const unsigned char *)buf, *end = p + len;

	while (end - p >= 2) {
		const unsigned char *body = p + 1;
		size_t remaining = 0;
		unsigned shift = 0;

		/* the remaining length: at most 4 bytes */
		for (;;) {
			if (body >= end)
				return (const char *)p - buf;
			remaining |= (size_t)(*body & 0x7f) << shift;
			if (!(*body++ & 0x80))
				break;
			shift += 7;
			if (shift > 21)
				return -1;
		}
		if ((size_t)(end - body) < remaining)
			break;

		switch (p[0] >> 4) {
		case PUBLISH: {
			size_t tlen, skip;

			if (remaining < 2)
				return -1;
			tlen = (size_t)body[0] << 8 | body[1];
			/* topic, and a packet identifier if QoS > 0 */
			skip = 2 + tlen + ((p[0] & 0x06) ? 2 : 0);
			if (skip > remaining)
				return -1;
			deliver(c, (const char *)body + skip, remaining - skip);
			break;
		}
		case CONNACK:
			if (remaining >= 2 && body[1] != 0) {
				fprintf(stderr, "mqtt: connection refused, code %u\n", body[1]);
				c->errors++;
				return -1;
			}
			c->syncs++;
			break;
		case SUBACK:
			if (remaining >= 3 && body[2] == 0x80) {
				fprintf(stderr, "mqtt: subscription refused\n");
				c->errors++;
			}
			c->syncs++;
			break;
		case PINGRESP:
			c->syncs++;
			break;
		default:
			break;
		}
		p = body + remaining;
	}
	return (const char *)p - buf;
}

const struct proto proto_mqtt = {
	.name = "mqtt",
	.default_addr = "unix:/tmp/anchors/mosq.sock",
	.hello = mqtt_hello,
	.subscribe = mqtt_subscribe,
	.publish = mqtt_publish,
	.store = mqtt_store,
	.ping = mqtt_ping,
	.parse = mqtt_parse,
};
