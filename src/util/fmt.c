#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/fmt.h"

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

/*
 * How many bytes at p are to be escaped (1 or 2), or 0: C0 controls, DEL,
 * '"' and '\\', a C1 control written in UTF-8 (U+0080..U+009F, which some
 * terminals obey: U+009B is CSI) and a byte that begins no valid UTF-8
 * sequence (a lone 0x9b is CSI to an 8-bit terminal).  *len: the bytes of
 * the character at p otherwise.
 */
static size_t
special(const unsigned char *p, size_t *len)
{
	size_t n, i;

	*len = 1;
	if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
		return (1);
	if (*p < 0x80)
		return (0);
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return (2);
	if (*p >= 0xc2 && *p <= 0xdf)
		n = 2;
	else if (*p >= 0xe0 && *p <= 0xef)
		n = 3;
	else if (*p >= 0xf0 && *p <= 0xf4)
		n = 4;
	else
		return (1);
	for (i = 1; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return (1);
	*len = n;
	return (0);
}

static int
needs_quotes(const char *s)
{
	const unsigned char *p;
	size_t len;

	for (p = (const unsigned char *)s; *p; p += len)
		if (special(p, &len))
			return (1);
	return (0);
}

/* s in double quotes with C escapes, into f. */
static void
put_quoted(FILE *f, const char *s)
{
	const unsigned char *p;
	size_t n, len, i;

	putc('"', f);
	for (p = (const unsigned char *)s; *p; p += len) {
		if ((n = special(p, &len)) == 0) {
			fwrite(p, 1, len, f);
			continue;
		}
		len = n;
		for (i = 0; i < n; i++) {
			switch (p[i]) {
			case '\n':
				fputs("\\n", f);
				break;
			case '\t':
				fputs("\\t", f);
				break;
			case '"':
			case '\\':
				putc('\\', f);
				putc(p[i], f);
				break;
			default:
				fprintf(f, "\\%03o", p[i]);
			}
		}
	}
	putc('"', f);
}

void
fmt_path(FILE *f, const char *s)
{
	if (needs_quotes(s))
		put_quoted(f, s);
	else
		fputs(s, f);
}

/* fmt_text's buffers: FMT_TEXT_SLOTS per thread, taken in turn, each
 * freed when its turn comes again. */
#define FMT_TEXT_SLOTS 8
static _Thread_local char *slot_buf[FMT_TEXT_SLOTS];
static _Thread_local unsigned slot_next;

const char *
fmt_text(const char *s)
{
	unsigned i;
	char *buf = NULL;
	size_t len = 0;
	FILE *m;

	if (s == NULL || !needs_quotes(s))
		return (s);
	i = slot_next++ % FMT_TEXT_SLOTS;
	if ((m = open_memstream(&buf, &len)) == NULL)
		return ("\"?\"");
	put_quoted(m, s);
	if (fclose(m) != 0) {
		free(buf);
		return ("\"?\"");
	}
	free(slot_buf[i]);
	slot_buf[i] = buf;
	return (buf);
}

/* "+HH:MM", "+HHMM", "+HH" or "Z" into seconds east of UTC; -1 if not. */
static int
parse_offset(const char *p, long *secs)
{
	int sign, hh, mm = 0;

	if (strcmp(p, "Z") == 0 || strcmp(p, "z") == 0 || *p == '\0') {
		*secs = 0;
		return (0);
	}
	if (*p != '+' && *p != '-')
		return (-1);
	sign = *p++ == '-' ? -1 : 1;
	if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
		return (-1);
	hh = (p[0] - '0') * 10 + (p[1] - '0');
	p += 2;
	if (*p == ':')
		p++;
	if (*p != '\0') {
		if (!isdigit((unsigned char)p[0]) ||
		    !isdigit((unsigned char)p[1]) || p[2] != '\0')
			return (-1);
		mm = (p[0] - '0') * 10 + (p[1] - '0');
	}
	if (hh > 23 || mm > 59)
		return (-1);
	*secs = sign * (hh * 3600L + mm * 60L);
	return (0);
}

int
fmt_parse_time(const char *s, int64_t *ns, int *date_only)
{
	static const char *const forms[] = {
		"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S",
		"%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"
	};
	struct tm tm;
	const char *end = NULL;
	size_t i;
	long off;
	time_t t;

	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		memset(&tm, 0, sizeof(tm));
		if ((end = strptime(s, forms[i], &tm)) != NULL &&
		    parse_offset(end, &off) == 0)
			break;
	}
	if (i == sizeof(forms) / sizeof(forms[0]))
		return (-1);
	/* A date alone takes no offset: "2026-11-01+01" is not a time. */
	if (i == 4 && *end != '\0')
		return (-1);
	if ((t = timegm(&tm)) == (time_t)-1)
		return (-1);
	*ns = ((int64_t)t - off) * 1000000000;
	if (date_only != NULL)
		*date_only = i == 4;
	return (0);
}
