#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "coffer/log.h"

int log_level;
unsigned long log_warnings;

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

static void __attribute__((format(printf, 2, 0)))
vreport(const char *prefix, const char *fmt, va_list ap, int errnum)
{
	char msg[4096];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	sanitize(msg);
	if (errnum)
		fprintf(stderr, "%s%s: %s\n", prefix, msg, strerror(errnum));
	else
		fprintf(stderr, "%s%s\n", prefix, msg);
}

void
log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("error: ", fmt, ap, 0);
	va_end(ap);
}

void
log_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	vreport("error: ", fmt, ap, e);
	va_end(ap);
}

/* Restore's writers warn from several threads. */
static void
count_warning(void)
{
	__atomic_add_fetch(&log_warnings, 1, __ATOMIC_RELAXED);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;

	count_warning();
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, 0);
	va_end(ap);
}

void
log_warn_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	count_warning();
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, e);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	if (log_level < 1)
		return;
	va_start(ap, fmt);
	vreport("", fmt, ap, 0);
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
	vreport("", fmt, ap, 0);
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
