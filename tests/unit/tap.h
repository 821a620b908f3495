/*
 * Minimal TAP producer for coffer's unit tests (header-only).
 *   ok(cond, "name %d", i);  ...  return tap_done();
 */
#ifndef COFFER_TAP_H
#define COFFER_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_n, tap_failed;

static inline int __attribute__((format(printf, 2, 3)))
ok(int cond, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return (cond);
}

static inline void __attribute__((format(printf, 1, 2)))
diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A test that cannot run here: counted, not failed. */
static inline void __attribute__((format(printf, 1, 2)))
skip(const char *fmt, ...)
{
	va_list ap;

	printf("ok %d # skip ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static inline int
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return (tap_failed ? 1 : 0);
}

#endif
