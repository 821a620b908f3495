#ifndef COFFER_JSON_H
#define COFFER_JSON_H

#include <stddef.h>
#include <stdio.h>

/*
 * Minimal JSON output.  Strings are byte strings: valid UTF-8 is passed
 * through, control characters and invalid bytes are escaped (\u00XX).
 */
void json_str(FILE *f, const char *s);
void json_strn(FILE *f, const char *s, size_t n);

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
