#ifndef COFFER_FMT_H
#define COFFER_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Text output for people: names in listings, sizes, times. */

/*
 * A path for a line-oriented listing: printed as is when it holds only
 * printable bytes, else in double quotes with C escapes (\n, \t, \\, \",
 * \ooo for other control bytes), as git quotes unusual names.  Valid UTF-8
 * passes through, so UTF-8 names stay readable; C1 controls (U+0080 to
 * U+009F) and bytes of no valid UTF-8 sequence are escaped.
 */
void fmt_path(FILE *f, const char *s);

/*
 * Text from outside (a record's source, host, user, policy path, a
 * name) for a human's output, quoted as fmt_path quotes it: s itself
 * when it needs nothing, else a buffer of the calling thread's, valid
 * until eight more calls of fmt_text on that thread (so up to eight in
 * one printf).  NULL stays NULL.  Never fails: out of memory, "\"?\"".
 */
const char *fmt_text(const char *s);

/* Human-readable sizes for tables: "1.5 GiB" into out (at least 16 bytes). */
void fmt_bytes(char *out, size_t outlen, double bytes);
/* ISO-8601 UTC time from ns since the epoch into out (at least 32 bytes). */
void fmt_time(char *out, size_t outlen, long long ns);
/*
 * A time as people write it, into ns since the epoch: RFC 3339
 * ("2026-11-01T02:15:00Z", "2026-11-01T03:15:00+01:00"; the seconds, the
 * Z and the T may be left out, a space for the T) or a date alone
 * ("2026-11-01", its 00:00 UTC; *date_only then 1 when not NULL).
 * 0, or -1 (nothing said).
 */
int fmt_parse_time(const char *s, int64_t *ns, int *date_only);

#endif
