#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

struct diff_state {
	int json;		/* --json: changes go to j */
	struct jw j;
	int64_t n[5];		/* by change kind */
	int64_t total;
};

static int
print_change(void *arg, int change, const struct entry *ea,
    const struct entry *eb)
{
	static const char mark[] = " +-MU";
	static const char *const word[] = { "", "added", "deleted",
		"modified", "metadata" };
	struct diff_state *d = arg;
	const struct entry *e = eb ? eb : ea;

	if (change < DIFF_ADDED || change > DIFF_METADATA)
		return (0);
	if (d->json) {
		jw_begin_object(&d->j);
		jw_str(jw_key(&d->j, "path"), e->path);
		jw_str(jw_key(&d->j, "change"), word[change]);
		jw_str(jw_key(&d->j, "type"), entry_kind_name(e->kind));
		if (ea && eb && ea->kind != eb->kind)
			jw_str(jw_key(&d->j, "old_type"),
			    entry_kind_name(ea->kind));
		jw_end_object(&d->j);
	} else {
		printf("%c ", mark[change]);
		fmt_path(stdout, e->path);
		putchar('\n');
	}
	d->n[change]++;
	d->total++;
	return (0);
}

const struct cmd_option cmd_diff_options[] = {
	CMD_OPT_FLAG('j', "json", "print the changes as a JSON array"),
	CMD_OPT_END
};

int
cmd_diff(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot a, b;
	struct diff_state d;
	struct repo *r;
	struct catalog *c;
	int ch, st;

	memset(&d, 0, sizeof(d));
	while ((ch = cmd_getopt(argc, argv, cmd_diff_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("diff"));
		d.json = 1;
	}
	if (argc - optind != 2)
		return (cmd_usage_error("diff"));
	/* From the catalog alone: no key needed. */
	if ((st = cmd_open(g, 0, &r, &c)) != STATUS_OK)
		return (st);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if ((st = cmd_snapshot(c, argv[optind], &a)) != STATUS_OK ||
	    (st = cmd_snapshot(c, argv[optind + 1], &b)) != STATUS_OK)
		goto out;
	if (a.dataset_id != b.dataset_id)
		log_warn("comparing snapshots of different datasets ('%s' and "
		    "'%s')", a.dataset, b.dataset);
	if (d.json) {
		jw_init(&d.j, stdout);
		jw_begin_array_lines(&d.j);
	}
	if (engine_diff(c, a.id, b.id, print_change, &d) < 0)
		st = STATUS_REPO;
	if (d.json)
		jw_end_array(&d.j);
	else if (st == STATUS_OK && isatty(STDOUT_FILENO))
		printf("%lld added, %lld deleted, %lld modified, "
		    "%lld metadata only\n", (long long)d.n[DIFF_ADDED],
		    (long long)d.n[DIFF_DELETED], (long long)d.n[DIFF_MODIFIED],
		    (long long)d.n[DIFF_METADATA]);
out:
	catalog_snapshot_release(&a);
	catalog_snapshot_release(&b);
	cmd_close(r, c);
	return (st);
}
