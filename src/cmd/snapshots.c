#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"

static int
print_one(void *arg, const struct catalog_snapshot *s)
{
	struct cmd_listing *ls = arg;
	char when[32], size[32];
	const char *t, *e;

	fmt_time(when, sizeof(when), s->started_ns);
	if (ls->json) {
		struct jw *j = &ls->j;

		jw_begin_object(j);
		jw_str(jw_key(j, "id"), s->sid);
		jw_str(jw_key(j, "dataset"), s->dataset);
		jw_str(jw_key(j, "level"), catalog_level_name(s->level));
		jw_str(jw_key(j, "parent"),
		    s->parent_sid[0] ? s->parent_sid : NULL);
		jw_int(jw_key(j, "depth"), s->depth);
		jw_int(jw_key(j, "revision"), s->revision);
		jw_str(jw_key(j, "time"), when);
		jw_str(jw_key(j, "state"), catalog_state_name(s->state));
		jw_str(jw_key(j, "host"), s->host);
		jw_str(jw_key(j, "source"), s->source);
		jw_int(jw_key(j, "files"), s->files);
		jw_int(jw_key(j, "dirs"), s->dirs);
		jw_int(jw_key(j, "others"), s->others);
		jw_int(jw_key(j, "deleted"), s->deleted);
		jw_int(jw_key(j, "bytes_read"), s->bytes_read);
		jw_int(jw_key(j, "bytes_new"), s->bytes_new);
		jw_int(jw_key(j, "bytes_stored"), s->bytes_stored);
		jw_int(jw_key(j, "warnings"), s->warnings);
		jw_begin_array(jw_key(j, "tags"));
		for (t = s->tags; t != NULL && *t != '\0'; t = e ? e + 1 :
		    NULL) {
			e = strchr(t, ',');
			jw_strn(j, t, e ? (size_t)(e - t) : strlen(t));
		}
		jw_end_array(j);
		jw_double(jw_key(j, "seconds"),
		    s->finished_ns > s->started_ns ?
		    (double)(s->finished_ns - s->started_ns) / 1e9 : 0.0, 3);
		jw_end_object(j);
	} else {
		/* SIZE is what the run read from the source; DEPTH the
		 * snapshots below it in its chain (0 for a full). */
		if (ls->n == 0)
			printf("%-12s  %-16s  %-12s  %5s  %-20s  %-8s  %9s  "
			    "%10s  %-8s  %s\n", "ID", "DATASET", "LEVEL",
			    "DEPTH", "TIME", "STATE", "FILES", "SIZE", "TAGS",
			    "SOURCE");
		fmt_bytes(size, sizeof(size), (double)s->bytes_read);
		printf("%-12.12s  %-16s  %-12s  %5d  %-20s  %-8s  %9lld  %10s  "
		    "%-8s  %s\n", fmt_text(s->sid), fmt_text(s->dataset),
		    catalog_level_name(s->level), s->depth, when,
		    catalog_state_name(s->state), (long long)s->files, size,
		    s->tags ? fmt_text(s->tags) : "-",
		    s->source ? fmt_text(s->source) : "-");
	}
	ls->n++;
	return (0);
}

static int
list_snapshots(struct catalog *c, const char *dataset, struct cmd_listing *ls)
{
	return (engine_snapshot_list(c, dataset, print_one, ls));
}

int
cmd_snapshots(int argc, char **argv, const struct global_opts *g)
{
	return (cmd_listing(argc, argv, g, "snapshots", list_snapshots));
}
