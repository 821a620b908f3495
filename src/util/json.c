#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coffer/json.h"

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

void
json_strn(FILE *f, const char *str, size_t n)
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

void
json_str(FILE *f, const char *s)
{
	if (s == NULL)
		fputs("null", f);
	else
		json_strn(f, s, strlen(s));
}

void
fmt_bytes(char *out, size_t outlen, double b)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (b >= 1024 && u < 5) {
		b /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, outlen, "%.0f B", b);
	else
		snprintf(out, outlen, "%.1f %s", b, units[u]);
}

void
fmt_time(char *out, size_t outlen, long long ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void
fmt_path(FILE *f, const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
			break;
	if (*p == '\0') {
		fputs(s, f);
		return;
	}
	putc('"', f);
	for (p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '"':
		case '\\':
			putc('\\', f);
			putc(*p, f);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\%03o", *p);
			else
				putc(*p, f);
		}
	}
	putc('"', f);
}
