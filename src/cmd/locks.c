/*
 * coffer locks: who holds the repository's writer lock now, shared or
 * exclusive, and until when.  Lock lines are not secret: no key is
 * needed, and nothing is taken or written.
 */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "cmd.h"
#include "coffer/engine-open.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/status.h"

const struct cmd_option cmd_locks_options[] = {
	CMD_OPT_FLAG('j', "json", "print the holders as JSON"),
	CMD_OPT_END
};

/* A run's or a watch's datasets, A/B/C, as an array. */
static void
datasets(struct jw *j, const char *list)
{
	const char *p, *end;

	jw_begin_array(jw_key(j, "datasets"));
	for (p = list; *p != '\0'; p = *end ? end + 1 : end) {
		end = p + strcspn(p, "/");
		jw_strn(j, p, (size_t)(end - p));
	}
	jw_end_array(j);
}

static void
print_json(const struct engine_lock_holder *v, size_t n)
{
	struct jw j;
	char when[32];
	size_t i;

	jw_init(&j, stdout);
	jw_begin_array(&j);
	for (i = 0; i < n; i++) {
		jw_begin_object(&j);
		jw_str(jw_key(&j, "mode"), v[i].shared ? "shared" :
		    "exclusive");
		jw_str(jw_key(&j, "host"), v[i].host[0] ? v[i].host : NULL);
		if (v[i].pid > 0)
			jw_int(jw_key(&j, "pid"), v[i].pid);
		else
			jw_null(jw_key(&j, "pid"));
		jw_str(jw_key(&j, "since"), v[i].since[0] ? v[i].since :
		    NULL);
		jw_str(jw_key(&j, "command"), v[i].command[0] ?
		    v[i].command : NULL);
		jw_str(jw_key(&j, "dataset"), v[i].dataset[0] &&
		    !v[i].listed ? v[i].dataset : NULL);
		if (v[i].listed)
			datasets(&j, v[i].dataset);
		if (v[i].expires > 0) {
			fmt_time(when, sizeof(when),
			    v[i].expires * 1000000000LL);
			jw_str(jw_key(&j, "expires"), when);
		} else
			jw_null(jw_key(&j, "expires"));
		jw_str(jw_key(&j, "info"), v[i].info);
		jw_end_object(&j);
	}
	jw_end_array(&j);
}

/* A run or a watch whose line lists no datasets (an older coffer's)
 * may back up any. */
static int
any_dataset(const struct engine_lock_holder *h)
{
	return (!h->listed && (strcmp(h->command, "run") == 0 ||
	    strcmp(h->command, "watch") == 0));
}

static void
print_table(const struct engine_lock_holder *v, size_t n)
{
	char when[32], since[48], *dot;
	size_t i;

	if (n > 0)
		printf("%-9s  %-20s  %7s  %-20s  %-12s  %-20s  %s\n", "MODE",
		    "HOST", "PID", "SINCE", "COMMAND", "EXPIRES", "DATASET");
	for (i = 0; i < n; i++) {
		/* A line of another form is shown whole. */
		if (v[i].host[0] == '\0') {
			printf("%-9s  %s\n", v[i].shared ? "shared" :
			    "exclusive", fmt_text(v[i].info));
			continue;
		}
		if (v[i].expires > 0)
			fmt_time(when, sizeof(when),
			    v[i].expires * 1000000000LL);
		/* To the second in the table. */
		snprintf(since, sizeof(since), "%s", v[i].since);
		if ((dot = strchr(since, '.')) != NULL)
			snprintf(dot, sizeof(since) - (size_t)(dot - since),
			    "Z");
		printf("%-9s  %-20s  %7ld  %-20s  %-12s  %-20s  %s\n",
		    v[i].shared ? "shared" : "exclusive", fmt_text(v[i].host),
		    v[i].pid, fmt_text(since), v[i].command[0] ?
		    fmt_text(v[i].command) : "-", v[i].expires > 0 ? when :
		    "with its process", v[i].dataset[0] ?
		    fmt_text(v[i].dataset) : any_dataset(&v[i]) ? "(any)" :
		    "-");
	}
}

int
cmd_locks(int argc, char **argv, const struct global_opts *g)
{
	struct engine_lock_holder *v;
	struct repo *r;
	size_t n;
	int ch, json = 0, st;

	while ((ch = cmd_getopt(argc, argv, cmd_locks_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("locks"));
		json = 1;
	}
	if (optind != argc)
		return (cmd_usage_error("locks"));
	if ((st = cmd_open(g, 0, &r, NULL)) != STATUS_OK)
		return (st);
	if (engine_lock_holders(r, &v, &n)) {
		cmd_close(r, NULL);
		return (STATUS_ERROR);
	}
	if (json)
		print_json(v, n);
	else
		print_table(v, n);
	free(v);
	cmd_close(r, NULL);
	return (STATUS_OK);
}
