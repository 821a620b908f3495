#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "coffer/log.h"

void
buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = b->cap = 0;
}

void
buf_release(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
}

void
buf_trim(struct buf *b, size_t keep)
{
	uint8_t *p;

	b->len = 0;
	if (b->cap <= keep)
		return;
	if (keep == 0) {
		buf_release(b);
		return;
	}
	/* Shrinking in place cannot fail in practice; if it does, the
	 * buffer simply keeps its memory. */
	if ((p = realloc(b->data, keep)) != NULL) {
		b->data = p;
		b->cap = keep;
	}
}

int
array_grow(void *arrp, size_t *cap, size_t n, size_t size, size_t first)
{
	void *old, *p;
	size_t c;

	if (n < *cap)
		return (0);
	/* Doubled as often as it takes: n need not be *cap. */
	for (c = *cap ? *cap : (first ? first : 1); c <= n; c *= 2)
		if (c > SIZE_MAX / 2) {
			log_error("out of memory");
			return (-1);
		}
	memcpy(&old, arrp, sizeof(old));
	if ((p = reallocarray(old, c, size)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	memcpy(arrp, &p, sizeof(p));
	*cap = c;
	return (0);
}

int
buf_reserve(struct buf *b, size_t extra)
{
	size_t want, cap;
	uint8_t *p;

	/* One spare byte keeps printf'd data NUL-terminated. */
	if (extra > SIZE_MAX - b->len - 1) {
		log_error("buffer size overflow");
		return (-1);
	}
	want = b->len + extra + 1;
	if (want <= b->cap)
		return (0);
	cap = b->cap ? b->cap : 256;
	while (cap < want)
		cap = cap > SIZE_MAX / 2 ? want : cap * 2;
	if ((p = realloc(b->data, cap)) == NULL) {
		log_error("out of memory (%zu bytes)", cap);
		return (-1);
	}
	b->data = p;
	b->cap = cap;
	return (0);
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n))
		return (-1);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return (0);
}

int
buf_put_u8(struct buf *b, uint8_t v)
{
	return (buf_append(b, &v, 1));
}

int
buf_put_u32(struct buf *b, uint32_t v)
{
	uint8_t p[4];

	put_u32(p, v);
	return (buf_append(b, p, 4));
}

int
buf_put_u64(struct buf *b, uint64_t v)
{
	uint8_t p[8];

	put_u64(p, v);
	return (buf_append(b, p, 8));
}

int
buf_puts(struct buf *b, const char *s)
{
	return (buf_append(b, s, strlen(s)));
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n))
		return (-1);
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return (0);
}

void
put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void
put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

uint32_t
get_u32(const uint8_t *p)
{
	return ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24);
}

uint64_t
get_u64(const uint8_t *p)
{
	return ((uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32);
}

void
reader_init(struct reader *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->err = 0;
}

int
reader_bytes(struct reader *r, size_t n, const uint8_t **p)
{
	if (r->err || n > r->len) {
		r->err = 1;
		return (-1);
	}
	*p = r->p;
	r->p += n;
	r->len -= n;
	return (0);
}

int
reader_copy(struct reader *r, void *dst, size_t n)
{
	const uint8_t *p;

	if (reader_bytes(r, n, &p))
		return (-1);
	memcpy(dst, p, n);
	return (0);
}

int
reader_u8(struct reader *r, uint8_t *v)
{
	const uint8_t *p;

	if (reader_bytes(r, 1, &p))
		return (-1);
	*v = p[0];
	return (0);
}

int
reader_u32(struct reader *r, uint32_t *v)
{
	const uint8_t *p;

	if (reader_bytes(r, 4, &p))
		return (-1);
	*v = get_u32(p);
	return (0);
}

int
reader_u64(struct reader *r, uint64_t *v)
{
	const uint8_t *p;

	if (reader_bytes(r, 8, &p))
		return (-1);
	*v = get_u64(p);
	return (0);
}
