#include <stdio.h>
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
