#ifndef COFFER_LOG_H
#define COFFER_LOG_H

#include <stdarg.h>

/*
 * Diagnostics on stderr, git style: "error: cannot open 'x': reason".
 * Messages are lowercase, without a full stop.  Report an error once, where
 * it is first seen.  Below src/cmd/ nothing else writes to stdout or
 * stderr: the library speaks through these functions.
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

/*
 * Someone is watching: stderr is a terminal and log_level >= 0.  Lines
 * that only help a person waiting ("waiting for the lock ...") and the
 * progress line are shown then.
 */
int log_watched(void);

/* A line on stderr when log_watched() or verbose, without a prefix. */
void log_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The progress line (coffer/progress.h): line replaces the one drawn
 * before, in place, without a newline; NULL erases it.  Only when
 * log_watched().
 */
void log_progress(const char *line);

/* Number of warnings reported since start. */
extern unsigned long log_warnings;

#endif
