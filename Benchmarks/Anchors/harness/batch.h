/*
 * batch.h - the publisher's frames, encoded once.
 *
 * Throughput is about the server, so the publisher must cost next to
 * nothing: one PUBLISH frame is encoded once and copied to fill about
 * `target` bytes, and before each write only the sequence number inside
 * each frame's payload is changed.  Writes are then ~64 KiB of pipelined
 * frames.
 */
#ifndef ANCHORS_BATCH_H
#define ANCHORS_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct batch {
	char *buf;
	size_t frame;      /* bytes per frame                     */
	size_t seq_off;    /* where the sequence number is, in it */
	size_t frames;     /* frames the buffer holds             */
	size_t len, pos;   /* bytes to write / written so far     */
};

int batch_init(struct batch *b, const struct proto *p, const char *topic,
	       size_t size, size_t target);

/* Make the first `count` frames carry seq, seq + 1, ...; pos = 0. */
void batch_fill(struct batch *b, uint64_t seq, size_t count);

void batch_free(struct batch *b);

#endif
