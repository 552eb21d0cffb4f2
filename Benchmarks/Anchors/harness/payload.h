/*
 * payload.h - what the harness puts in the messages it publishes.
 *
 * Bytes 0-7: a sequence number, 8-15: the send time (now_ns()), both in
 * host byte order; the rest is 'x'.  Every server passes payloads through
 * byte-exact, so a subscriber reads both back: the sequence number finds
 * losses and reordering, the time gives the latency.  Hence payloads of at
 * least PAYLOAD_MIN bytes.
 */
#ifndef ANCHORS_PAYLOAD_H
#define ANCHORS_PAYLOAD_H

#include <stdint.h>
#include <string.h>

#define PAYLOAD_MIN 16

static inline void payload_make(char *p, size_t size, uint64_t seq, int64_t sent_ns)
{
	memset(p, 'x', size);
	memcpy(p, &seq, 8);
	memcpy(p + 8, &sent_ns, 8);
}

static inline uint64_t payload_seq(const char *p)
{
	uint64_t seq;

	memcpy(&seq, p, 8);
	return seq;
}

#endif
