#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coffer/jw.h"

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return (1);
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else
		return (0);
	if (len > n)
		return (0);
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return (0);
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return (0);
	return (len);
}

/* The bytes of a string, escaped, in double quotes. */
static void
put_string(FILE *f, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, l;

	putc('"', f);
	while (i < n) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc(c, f);
			i++;
		} else if (c == '\n') {
			fputs("\\n", f);
			i++;
		} else if (c == '\t') {
			fputs("\\t", f);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
		} else if ((l = utf8_len(s + i, n - i)) > 0) {
			fwrite(s + i, 1, l, f);
			i += l;
		} else {
			/* Not UTF-8: map the byte to U+00XX so the output
			 * stays valid JSON; the name is still recognizable. */
			fprintf(f, "\\u%04x", c);
			i++;
		}
	}
	putc('"', f);
}

/* What each open object or array is doing (json.st[]). */
enum {
	JS_OBJECT = 1,		/* an object, else an array */
	JS_LINES = 2,		/* an array with an element a line */
	JS_MEMBER = 4,		/* holds a member or element already */
	JS_KEY = 8		/* an object whose key awaits its value */
};

void
jw_init(struct jw *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
}

/* Before a value: the separator the container wants. */
static void
value_begin(struct jw *j)
{
	unsigned char *st;

	if (j->depth == 0)
		return;
	st = &j->st[j->depth - 1];
	if (*st & JS_OBJECT) {
		assert(*st & JS_KEY);
		*st &= (unsigned char)~JS_KEY;
		return;
	}
	if (*st & JS_MEMBER)
		putc(',', j->f);
	if (*st & JS_LINES)
		fputs("\n  ", j->f);
	*st |= JS_MEMBER;
}

/* After a value: a complete document ends its line. */
static void
value_end(struct jw *j)
{
	if (j->depth == 0)
		putc('\n', j->f);
}

static void
open_container(struct jw *j, unsigned char kind, int c)
{
	value_begin(j);
	assert(j->depth < JW_DEPTH);
	j->st[j->depth++] = kind;
	putc(c, j->f);
}

static void
close_container(struct jw *j, unsigned char kind, int c)
{
	unsigned char st;

	assert(j->depth > 0);
	st = j->st[--j->depth];
	assert((st & JS_OBJECT) == (kind & JS_OBJECT) && !(st & JS_KEY));
	if ((st & JS_LINES) && (st & JS_MEMBER))
		putc('\n', j->f);
	putc(c, j->f);
	value_end(j);
}

void
jw_begin_object(struct jw *j)
{
	open_container(j, JS_OBJECT, '{');
}

void
jw_end_object(struct jw *j)
{
	close_container(j, JS_OBJECT, '}');
}

void
jw_begin_array(struct jw *j)
{
	open_container(j, 0, '[');
}

void
jw_begin_array_lines(struct jw *j)
{
	open_container(j, JS_LINES, '[');
}

void
jw_end_array(struct jw *j)
{
	close_container(j, 0, ']');
}

struct jw *
jw_key(struct jw *j, const char *key)
{
	unsigned char *st;

	assert(j->depth > 0);
	st = &j->st[j->depth - 1];
	assert((*st & JS_OBJECT) && !(*st & JS_KEY));
	if (*st & JS_MEMBER)
		putc(',', j->f);
	*st |= JS_MEMBER | JS_KEY;
	put_string(j->f, key, strlen(key));
	putc(':', j->f);
	return (j);
}

void
jw_strn(struct jw *j, const char *s, size_t n)
{
	value_begin(j);
	put_string(j->f, s, n);
	value_end(j);
}

void
jw_str(struct jw *j, const char *s)
{
	if (s == NULL)
		jw_null(j);
	else
		jw_strn(j, s, strlen(s));
}

/* A scalar written by printf, with its container's separator. */
static void __attribute__((format(printf, 2, 3)))
put_value(struct jw *j, const char *fmt, ...)
{
	va_list ap;

	value_begin(j);
	va_start(ap, fmt);
	vfprintf(j->f, fmt, ap);
	va_end(ap);
	value_end(j);
}

void
jw_int(struct jw *j, int64_t v)
{
	put_value(j, "%" PRId64, v);
}

void
jw_uint(struct jw *j, uint64_t v)
{
	put_value(j, "%" PRIu64, v);
}

void
jw_double(struct jw *j, double v, int decimals)
{
	if (!isfinite(v))
		jw_null(j);
	else if (decimals < 0)
		put_value(j, "%g", v);
	else
		put_value(j, "%.*f", decimals, v);
}

void
jw_bool(struct jw *j, int v)
{
	put_value(j, "%s", v ? "true" : "false");
}

void
jw_null(struct jw *j)
{
	put_value(j, "null");
}
