/*
 * The log module's counts, on which main's exit status rests (an "error:"
 * line never comes with status 0), and log_hold/log_release: what an
 * attempt reported comes out in order once its outcome is known, errors
 * as warnings when the caller got over them, and is counted as printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/log.h"
#include "tap.h"

static char out[8192];

/* Run f with stderr going to a file; what it printed goes to out. */
static void
capture(void (*f)(void))
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	f();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

/* What was printed, as TAP comments, when a check fails. */
static void
show(void)
{
	char *p, *save = NULL, copy[sizeof(out)];

	memcpy(copy, out, sizeof(out));
	for (p = strtok_r(copy, "\n", &save); p; p = strtok_r(NULL, "\n",
	    &save))
		diag("%s", p);
}

static void
plain(void)
{
	log_error("one %d", 1);
	errno = ENOENT;
	log_errno("two");
	log_warn("three");
}

static void
got_over(void)
{
	log_hold();
	log_error("a damaged catalog");
	log_warn("a slot refused");
	errno = ELOOP;
	log_errno("a link");
	log_release(1);
}

static void
not_got_over(void)
{
	log_hold();
	log_error("first");
	log_warn("second");
	log_release(0);
}

static void
nested(void)
{
	log_hold();
	log_hold();
	log_error("inner");
	log_release(0);
	fputs("between\n", stderr);
	log_release(1);
}

static void
many(void)
{
	int i;

	log_hold();
	for (i = 0; i < 100; i++)
		log_error("number %d", i);
	log_release(0);
}

int
main(void)
{
	unsigned long e0, w0;

	e0 = log_errors;
	w0 = log_warnings;
	capture(plain);
	show();
	ok(strcmp(out, "error: one 1\nerror: two: No such file or "
	    "directory\nwarning: three\n") == 0, "errors and warnings as "
	    "they come");
	ok(log_errors - e0 == 2 && log_warnings - w0 == 1,
	    "two errors and a warning counted");

	e0 = log_errors;
	w0 = log_warnings;
	capture(got_over);
	show();
	ok(strcmp(out, "warning: a damaged catalog\nwarning: a slot "
	    "refused\nwarning: a link: Too many levels of symbolic links\n") ==
	    0, "got over: every error a warning, in order");
	ok(log_errors == e0 && log_warnings - w0 == 3,
	    "no error counted, three warnings");

	e0 = log_errors;
	w0 = log_warnings;
	capture(not_got_over);
	show();
	ok(strcmp(out, "error: first\nwarning: second\n") == 0,
	    "not got over: as reported, in order");
	ok(log_errors - e0 == 1 && log_warnings - w0 == 1,
	    "one error and one warning counted");

	e0 = log_errors;
	capture(nested);
	show();
	ok(strcmp(out, "between\nwarning: inner\n") == 0,
	    "nested: the outermost release prints, and decides");
	ok(log_errors == e0, "and counts no error");

	e0 = log_errors;
	capture(many);
	ok(strstr(out, "error: number 0\n") != NULL &&
	    strstr(out, "more messages left out") != NULL,
	    "more than it keeps: the rest said in one line");
	ok(log_errors > e0, "and counted as errors");
	return (tap_done());
}
