/*
 * batch.c - see batch.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "payload.h"

/*
 * Where the payload starts inside an encoded frame is the protocol's
 * business; it is found by encoding a payload that begins with a marker and
 * looking for the marker.
 */
static const char marker[8] = { 'S', 'e', 'N', 't', 'I', 'n', 'E', 'l' };

int batch_init(struct batch *b, const struct proto *p, const char *topic,
	       size_t size, size_t target)
{
	size_t cap = size + 1024, off = 0;
	char *payload = malloc(size), *one = malloc(cap);
	int ok;

	memset(b, 0, sizeof(*b));
	if (!payload || !one) {
		free(payload);
		free(one);
		return -1;
	}
	payload_make(payload, size, 0, 0);
	memcpy(payload, marker, sizeof(marker));
	b->frame = p->publish(one, cap, topic, payload, size);
	while (off + 8 <= b->frame && memcmp(one + off, marker, 8) != 0)
		off++;
	ok = b->frame > 0 && off + 8 <= b->frame;
	if (ok) {
		b->seq_off = off;
		b->frames = target / b->frame ? target / b->frame : 1;
		b->buf = malloc(b->frames * b->frame);
		ok = b->buf != NULL;
	}
	if (ok)
		for (size_t i = 0; i < b->frames; i++)
			memcpy(b->buf + i * b->frame, one, b->frame);
	else
		fprintf(stderr, "cannot encode a publish frame\n");
	free(payload);
	free(one);
	return ok ? 0 : -1;
}

void batch_fill(struct batch *b, uint64_t seq, size_t count)
{
	for (size_t i = 0; i < count; i++, seq++)
		memcpy(b->buf + i * b->frame + b->seq_off, &seq, 8);
	b->len = count * b->frame;
	b->pos = 0;
}

void batch_free(struct batch *b)
{
	free(b->buf);
	b->buf = NULL;
}
