/*
 * coffer log [--json] [--since DURATION|TIME]: what every coffer run did,
 * from the runs the catalog holds (and, through the journal, every host
 * that ran a policy on this repository).
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/progress.h"
#include "coffer/status.h"

const struct cmd_option cmd_log_options[] = {
	CMD_OPT_VALUE('s', "since", "WHEN",
	    "runs from WHEN on: a duration ago (7d) or a time (UTC)"),
	CMD_OPT_FLAG('j', "json", "print a JSON array"),
	CMD_OPT_END
};

static const char *
outcome(int status)
{
	return (status == STATUS_OK ? "ok" : status == STATUS_WARN ?
	    "warning" : "FAILED");
}

static int
print_run(void *arg, const struct catalog_run *r,
    const struct catalog_run_action *a, size_t n)
{
	struct cmd_listing *ls = arg;
	char when[32], t[32];
	size_t i;

	fmt_time(when, sizeof(when), r->time_ns);
	if (ls->json) {
		struct jw *j = &ls->j;

		jw_begin_object(j);
		jw_str(jw_key(j, "run"), r->rid);
		jw_str(jw_key(j, "time"), when);
		fmt_time(when, sizeof(when), r->wall_ns);
		jw_str(jw_key(j, "started"), when);
		jw_double(jw_key(j, "seconds"), r->seconds, 3);
		jw_int(jw_key(j, "status"), r->status);
		jw_str(jw_key(j, "host"), r->host);
		jw_str(jw_key(j, "user"), r->user);
		jw_str(jw_key(j, "policy"), r->policy);
		jw_begin_array(jw_key(j, "actions"));
		for (i = 0; i < n; i++) {
			jw_begin_object(j);
			jw_str(jw_key(j, "action"), a[i].kind);
			jw_str(jw_key(j, "subject"), a[i].subject);
			jw_str(jw_key(j, "level"), a[i].level);
			if (a[i].slot_ns) {
				fmt_time(when, sizeof(when), a[i].slot_ns);
				jw_str(jw_key(j, "slot"), when);
			} else
				jw_null(jw_key(j, "slot"));
			jw_int(jw_key(j, "status"), a[i].status);
			jw_double(jw_key(j, "seconds"), a[i].seconds, 3);
			jw_str(jw_key(j, "detail"), a[i].detail);
			jw_end_object(j);
		}
		jw_end_array(j);
		jw_end_object(j);
		ls->n++;
		return (0);
	}
	cmd_fmt_seconds(t, sizeof(t), r->seconds);
	printf("%s  run %.8s  exit %d  %s  %s@%s  %s\n", when,
	    fmt_text(r->rid), r->status, t, r->user ? fmt_text(r->user) : "?",
	    r->host ? fmt_text(r->host) : "?",
	    r->policy ? fmt_text(r->policy) : "");
	for (i = 0; i < n; i++) {
		cmd_fmt_seconds(t, sizeof(t), a[i].seconds);
		printf("  %-7s %-24s %-13s %-8s %s (%s)\n",
		    fmt_text(a[i].kind),
		    a[i].subject[0] ? fmt_text(a[i].subject) : "-",
		    a[i].level ? fmt_text(a[i].level) : "-",
		    outcome(a[i].status),
		    a[i].detail ? fmt_text(a[i].detail) : "", t);
	}
	ls->n++;
	return (0);
}

int
cmd_log(int argc, char **argv, const struct global_opts *g)
{
	struct cmd_listing ls = { .json = 0 };
	struct repo *r;
	struct catalog *c;
	int64_t since = 0;
	int ch, st;

	while ((ch = cmd_getopt(argc, argv, cmd_log_options)) != -1) {
		switch (ch) {
		case 's':
			if (cmd_parse_since("--since", optarg,
			    now_realtime_ns(), &since))
				return (STATUS_USAGE);
			break;
		case 'j':
			ls.json = 1;
			break;
		default:
			return (cmd_usage_error("log"));
		}
	}
	if (optind != argc)
		return (cmd_usage_error("log"));
	if ((st = cmd_open(g, 0, &r, &c)) != STATUS_OK)
		return (st);
	if (ls.json) {
		jw_init(&ls.j, stdout);
		jw_begin_array_lines(&ls.j);
	}
	if (engine_run_list(c, since, print_run, &ls) < 0)
		st = STATUS_REPO;
	if (ls.json)
		jw_end_array(&ls.j);
	cmd_close(r, c);
	return (st);
}
