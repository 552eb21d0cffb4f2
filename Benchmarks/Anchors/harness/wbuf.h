/*
 * wbuf.h - the bounded buffer protocol encoders write into.
 *
 * An encoder does not check for room itself: a write that does not fit
 * sets `overflow`, every later write is ignored, and wb_done() returns 0.
 * Callers treat 0 as "could not encode", so a frame is never sent cut.
 */
#ifndef ANCHORS_WBUF_H
#define ANCHORS_WBUF_H

#include <stddef.h>

struct wbuf {
	char *p;
	size_t len, cap;
	int overflow;
};

static inline struct wbuf wbuf_make(char *out, size_t cap)
{
	struct wbuf w = { out, 0, cap, 0 };

	return w;
}

void wb_put(struct wbuf *w, const void *src, size_t n);
void wb_byte(struct wbuf *w, unsigned char b);
void wb_printf(struct wbuf *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The encoded length, or 0 if anything did not fit. */
static inline size_t wb_done(const struct wbuf *w)
{
	return w->overflow ? 0 : w->len;
}

#endif
