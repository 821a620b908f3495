/*
 * Options tables: getopt_long parses with them and help prints them, so
 * a command's options and its help are one list (git's parse-options).
 */
#include <assert.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"

/* More than any command has; cmd_getopt asserts it. */
#define OPTIONS_MAX 32
/* Help: the column where an option's line of help starts. */
#define HELP_COLUMN 28

static int
getopt_table(int argc, char **argv, const struct cmd_option *opts,
    int ordered)
{
	/* getopt_long reads these during each call only: built anew. */
	struct option lo[OPTIONS_MAX + 1];
	char so[1 + 3 * OPTIONS_MAX + 1], *p = so;
	size_t i;

	if (ordered)
		*p++ = '+';
	for (i = 0; opts[i].name != NULL; i++) {
		assert(i < OPTIONS_MAX);
		lo[i].name = opts[i].name;
		lo[i].has_arg = opts[i].has_arg;
		lo[i].flag = NULL;
		lo[i].val = opts[i].val;
		if (!opts[i].letter)
			continue;
		*p++ = (char)opts[i].val;
		if (opts[i].has_arg != no_argument)
			*p++ = ':';
		if (opts[i].has_arg == optional_argument)
			*p++ = ':';
	}
	*p = '\0';
	memset(&lo[i], 0, sizeof(lo[i]));
	return (getopt_long(argc, argv, so, lo, NULL));
}

int
cmd_getopt(int argc, char **argv, const struct cmd_option *opts)
{
	return (getopt_table(argc, argv, opts, 0));
}

int
cmd_getopt_ordered(int argc, char **argv, const struct cmd_option *opts)
{
	return (getopt_table(argc, argv, opts, 1));
}

const struct cmd_option *
cmd_option_find(const struct cmd_option *opts, const char *arg,
    const char **value)
{
	const struct cmd_option *o;
	size_t n;

	*value = NULL;
	if (arg[0] != '-')
		return (NULL);
	for (o = opts; o->name != NULL; o++) {
		if (arg[1] != '-') {
			if (o->letter && arg[1] == o->val && arg[2] == '\0')
				return (o);
			continue;
		}
		n = strlen(o->name);
		if (strncmp(arg + 2, o->name, n) != 0)
			continue;
		if (arg[2 + n] == '\0')
			return (o);
		if (arg[2 + n] == '=' && o->has_arg != no_argument) {
			*value = arg + 3 + n;
			return (o);
		}
	}
	return (NULL);
}

int
cmd_options_want_help(int argc, char **argv, const struct cmd_option *opts)
{
	const struct cmd_option *o;
	const char *v;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return (1);
		/* "--exclude --help" excludes a file named --help. */
		if (opts != NULL &&
		    (o = cmd_option_find(opts, argv[i], &v)) != NULL &&
		    o->has_arg == required_argument && v == NULL)
			i++;
	}
	return (0);
}

/* "--name=ARG", "--name[=ARG]" or "--name" into buf. */
static void
fmt_long(char *buf, size_t len, const struct cmd_option *o)
{
	if (o->has_arg == no_argument || o->arg == NULL)
		snprintf(buf, len, "--%s", o->name);
	else
		snprintf(buf, len, o->has_arg == optional_argument ?
		    "--%s[=%s]" : "--%s=%s", o->name, o->arg);
}

void
cmd_options_help(FILE *f, const struct cmd_option *const *tables, size_t n)
{
	const struct cmd_option *o, *p;
	char lng[64], left[80];
	size_t t, u;
	int w, seen;

	for (t = 0; t < n; t++) {
		for (o = tables[t]; o != NULL && o->name != NULL; o++) {
			/* Shared by an earlier table (--json): said there. */
			seen = 0;
			for (u = 0; u < t && !seen; u++)
				for (p = tables[u]; p != NULL &&
				    p->name != NULL && !seen; p++)
					seen = strcmp(p->name, o->name) == 0;
			if (seen)
				continue;
			fmt_long(lng, sizeof(lng), o);
			if (o->letter)
				snprintf(left, sizeof(left), "  -%c, %s",
				    o->val, lng);
			else
				snprintf(left, sizeof(left), "      %s", lng);
			w = (int)strlen(left);
			if (w < HELP_COLUMN)
				fprintf(f, "%-*s%s\n", HELP_COLUMN, left,
				    o->help);
			else
				fprintf(f, "%s\n%-*s%s\n", left, HELP_COLUMN,
				    "", o->help);
		}
	}
}

/* Whether args names the option "--name" as a word of its own. */
static int
in_args(const char *args, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	for (p = args; p != NULL && (p = strstr(p, "--")) != NULL; p += 2)
		if (strncmp(p + 2, name, n) == 0 && (p[2 + n] == '\0' ||
		    p[2 + n] == ' ' || p[2 + n] == '=' || p[2 + n] == ')' ||
		    p[2 + n] == ']'))
			return (1);
	return (0);
}

int
cmd_options_usage(char *buf, size_t len, const struct cmd_option *opts,
    const char *args)
{
	const struct cmd_option *o;
	char lng[64];
	size_t off = 0;
	int n;

	if (len == 0)
		return (-1);
	buf[0] = '\0';
	for (o = opts; o->name != NULL; o++) {
		if (in_args(args, o->name))
			continue;
		fmt_long(lng, sizeof(lng), o);
		if (o->letter)
			n = snprintf(buf + off, len - off, "%s[-%c|%s]",
			    off ? " " : "", o->val, lng);
		else
			n = snprintf(buf + off, len - off, "%s[%s]",
			    off ? " " : "", lng);
		if (n < 0 || (size_t)n >= len - off)
			return (-1);
		off += (size_t)n;
	}
	return (0);
}
