#ifndef COFFER_LOG_H
#define COFFER_LOG_H

#include <stdarg.h>

/*
 * Diagnostics on stderr, git style: "error: cannot open 'x': reason".
 * Messages are lowercase, without a full stop.  Report an error once, where
 * it is first seen.
 */

/* 0 = normal, -1 = quiet (errors only), 1.. = verbose. */
extern int log_level;

/* "error: ..." on stderr. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "error: ...: strerror(errno)"; errno is read on entry. */
void log_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "warning: ..." on stderr; counted in log_warnings. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "warning: ...: strerror(errno)". */
void log_warn_errno(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* A line on stderr when log_level >= 1 (verbose). */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Number of warnings reported since start. */
extern unsigned long log_warnings;

#endif
