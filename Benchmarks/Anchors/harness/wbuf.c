/*
 * wbuf.c - appends to a bounded buffer; see wbuf.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wbuf.h"

void wb_put(struct wbuf *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

void wb_byte(struct wbuf *w, unsigned char b)
{
	wb_put(w, &b, 1);
}

void wb_printf(struct wbuf *w, const char *fmt, ...)
{
	size_t room = w->cap - w->len;
	va_list ap;
	int n;

	if (w->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(w->p + w->len, room, fmt, ap);
	va_end(ap);
	/* vsnprintf says how long the text would have been: too long is an
	 * overflow, even though a cut copy is in the buffer. */
	if (n < 0 || (size_t)n >= room)
		w->overflow = 1;
	else
		w->len += (size_t)n;
}
