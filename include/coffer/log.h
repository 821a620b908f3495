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

/* "error: ..." on stderr; counted in log_errors. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "error: ...: strerror(errno)"; errno is read on entry; counted. */
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

/*
 * An attempt the caller may get over (a damaged catalog it rebuilds, a
 * key slot among others that may open): from log_hold to log_release,
 * the errors and warnings this thread reports are kept, in order, and
 * printed by log_release, each error as a warning when got_over is set
 * (nothing was left failed), else as it was.  Holds nest; the outermost
 * release prints.  log_hold returns -1 when it cannot keep them (out of
 * memory): they are then printed as they come.
 */
int log_hold(void);
void log_release(int got_over);

/* Number of warnings reported since start.  Any thread may report one
 * (a lease's renewal, restore's writers): read it with log_warning_count
 * where other threads run. */
extern unsigned long log_warnings;
unsigned long log_warning_count(void);

/*
 * Number of errors reported since start.  An error is never printed for
 * something the run then got over (that is a warning): main() turns a
 * command's success (0 or 1) into STATUS_ERROR when this is not 0, so
 * that "error:" on stderr always comes with a failing exit status.
 */
extern unsigned long log_errors;

#endif
