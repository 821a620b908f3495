#ifndef COFFER_FMT_H
#define COFFER_FMT_H

#include <stddef.h>
#include <stdio.h>

/* Text output for people: names in listings, sizes, times. */

/*
 * A path for a line-oriented listing: printed as is when it holds only
 * printable bytes, else in double quotes with C escapes (\n, \t, \\, \",
 * \ooo for other control bytes), as git quotes unusual names.  Bytes >= 0x80
 * pass through, so UTF-8 names stay readable.
 */
void fmt_path(FILE *f, const char *s);

/* Human-readable sizes for tables: "1.5 GiB" into out (at least 16 bytes). */
void fmt_bytes(char *out, size_t outlen, double bytes);
/* ISO-8601 UTC time from ns since the epoch into out (at least 32 bytes). */
void fmt_time(char *out, size_t outlen, long long ns);

#endif
