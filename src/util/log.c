#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/log.h"

int log_level;
unsigned long log_warnings;
unsigned long log_errors;

/*
 * Messages carry names from outside (files of the source tree, text read
 * from the repository): a terminal must not take any of it for a control
 * sequence.  C0 controls, DEL and UTF-8's C1 controls become '?'.
 */
static void
sanitize(char *s)
{
	unsigned char *p = (unsigned char *)s;

	for (; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			p[0] = p[1] = '?';
			p++;
		}
	}
}

/* What log_hold keeps of this thread's messages, in order. */
#define HOLD_MAX 64
struct held {
	int depth;
	size_t n, dropped;
	struct {
		int error;
		char *text;
	} m[HOLD_MAX];
};
static _Thread_local struct held *held;

/* Counted where they are printed, so that none escapes main's check;
 * restore's writers warn from several threads. */
static void
count(int error)
{
	__atomic_add_fetch(error ? &log_errors : &log_warnings, 1,
	    __ATOMIC_RELAXED);
}

unsigned long
log_warning_count(void)
{
	return (__atomic_load_n(&log_warnings, __ATOMIC_RELAXED));
}

static void
print(int error, const char *msg)
{
	count(error);
	fprintf(stderr, "%s%s\n", error ? "error: " : "warning: ", msg);
}

/* The message, ": strerror(errnum)" when errnum, sanitized, into msg. */
static void __attribute__((format(printf, 3, 0)))
vformat(char *msg, size_t size, const char *fmt, va_list ap, int errnum)
{
	size_t n;

	vsnprintf(msg, size, fmt, ap);
	if (errnum && (n = strlen(msg)) < size)
		snprintf(msg + n, size - n, ": %s", strerror(errnum));
	sanitize(msg);
}

static void __attribute__((format(printf, 2, 0)))
vreport(int error, const char *fmt, va_list ap, int errnum)
{
	char msg[4096];

	vformat(msg, sizeof(msg), fmt, ap, errnum);
	if (held == NULL) {
		print(error, msg);
		return;
	}
	if (held->n == HOLD_MAX || (held->m[held->n].text = strdup(msg)) ==
	    NULL) {
		held->dropped++;
		return;
	}
	held->m[held->n++].error = error;
}

void
log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(1, fmt, ap, 0);
	va_end(ap);
}

void
log_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	vreport(1, fmt, ap, e);
	va_end(ap);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(0, fmt, ap, 0);
	va_end(ap);
}

void
log_warn_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	vreport(0, fmt, ap, e);
	va_end(ap);
}

int
log_hold(void)
{
	if (held == NULL && (held = calloc(1, sizeof(*held))) == NULL)
		return (-1);	/* then reported as they come */
	held->depth++;
	return (0);
}

void
log_release(int got_over)
{
	struct held *h = held;
	size_t i;

	if (h == NULL || --h->depth > 0)
		return;
	held = NULL;
	for (i = 0; i < h->n; i++) {
		print(h->m[i].error && !got_over, h->m[i].text);
		free(h->m[i].text);
	}
	if (h->dropped > 0) {
		char msg[64];

		snprintf(msg, sizeof(msg), "%zu more messages left out",
		    h->dropped);
		print(!got_over, msg);
	}
	free(h);
}

/* A line without a prefix, printed at once. */
static void __attribute__((format(printf, 1, 0)))
vplain(const char *fmt, va_list ap)
{
	char msg[4096];

	vformat(msg, sizeof(msg), fmt, ap, 0);
	fprintf(stderr, "%s\n", msg);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_level < 1)
		return;
	va_start(ap, fmt);
	vplain(fmt, ap);
	va_end(ap);
}

int
log_watched(void)
{
	return (log_level >= 0 && isatty(STDERR_FILENO));
}

void
log_note(const char *fmt, ...)
{
	va_list ap;

	if (log_level < 1 && !log_watched())
		return;
	va_start(ap, fmt);
	vplain(fmt, ap);
	va_end(ap);
}

void
log_progress(const char *line)
{
	if (!log_watched())
		return;
	/* Carriage return and erase to the end of the line: the next one
	 * is drawn over it. */
	fprintf(stderr, "\r\033[K%s", line ? line : "");
}
