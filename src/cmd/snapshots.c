#include <stdio.h>

#include "cmd.h"
#include "coffer/json.h"

static int
print_one(void *arg, const struct catalog_snapshot *s)
{
	struct cmd_listing *ls = arg;
	char when[32], size[32];

	fmt_time(when, sizeof(when), s->started_ns);
	if (ls->json) {
		printf("%s\n  {\"id\":\"%s\",\"dataset\":", ls->n ? "," : "",
		    s->sid);
		json_str(stdout, s->dataset);
		printf(",\"level\":\"%s\",\"parent\":",
		    catalog_level_name(s->level));
		if (s->parent_sid[0])
			printf("\"%s\"", s->parent_sid);
		else
			fputs("null", stdout);
		printf(",\"depth\":%d,\"time\":\"%s\",\"state\":\"%s\","
		    "\"host\":", s->depth, when, catalog_state_name(s->state));
		json_str(stdout, s->host);
		fputs(",\"source\":", stdout);
		json_str(stdout, s->source);
		printf(",\"files\":%lld,\"dirs\":%lld,\"others\":%lld,"
		    "\"deleted\":%lld,\"bytes_read\":%lld,\"bytes_new\":%lld,"
		    "\"bytes_stored\":%lld,\"warnings\":%lld,\"seconds\":%.3f}",
		    (long long)s->files, (long long)s->dirs,
		    (long long)s->others, (long long)s->deleted,
		    (long long)s->bytes_read, (long long)s->bytes_new,
		    (long long)s->bytes_stored, (long long)s->warnings,
		    s->finished_ns > s->started_ns ?
		    (double)(s->finished_ns - s->started_ns) / 1e9 : 0.0);
	} else {
		/* SIZE is what the run read from the source; DEPTH the
		 * snapshots below it in its chain (0 for a full). */
		if (ls->n == 0)
			printf("%-12s  %-16s  %-12s  %5s  %-20s  %-8s  %9s  "
			    "%10s  %s\n", "ID", "DATASET", "LEVEL", "DEPTH",
			    "TIME", "STATE", "FILES", "SIZE", "SOURCE");
		fmt_bytes(size, sizeof(size), (double)s->bytes_read);
		printf("%-12.12s  %-16s  %-12s  %5d  %-20s  %-8s  %9lld  %10s  "
		    "%s\n", s->sid, s->dataset, catalog_level_name(s->level),
		    s->depth, when, catalog_state_name(s->state),
		    (long long)s->files, size, s->source ? s->source : "-");
	}
	ls->n++;
	return (0);
}

static int
list_snapshots(struct catalog *c, const char *dataset, struct cmd_listing *ls)
{
	return (catalog_snapshot_list(c, dataset, print_one, ls));
}

int
cmd_snapshots(int argc, char **argv, const struct global_opts *g)
{
	return (cmd_listing(argc, argv, g, "snapshots", list_snapshots));
}
