#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "coffer/hex.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

const struct cmd_option cmd_bundles_options[] = {
	CMD_OPT_VALUE('t', "target", "NAME", "only this target's bundles"),
	CMD_OPT_FLAG('i', "imported", "the bundles imported, not exported"),
	CMD_OPT_FLAG('j', "json", "print the bundles as a JSON array"),
	CMD_OPT_END
};

struct listing {
	int json;
	struct jw j;
	int n;
};

static int
count_words(const char *s)
{
	int n = 0;

	for (; s && *s; s++)
		if (*s != ' ' && (s[1] == ' ' || s[1] == '\0'))
			n++;
	return (n);
}

static int
print_bundle(void *arg, const struct catalog_bundle *b)
{
	struct listing *l = arg;
	char when[32], size[32], hex[2 * sizeof(b->manifest) + 1];
	time_t t = (time_t)(b->created_ns / 1000000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (l->json) {
		hex_encode(hex, b->manifest, sizeof(b->manifest));
		jw_begin_object(&l->j);
		jw_str(jw_key(&l->j, "target"), b->target);
		jw_uint(jw_key(&l->j, "sequence"), b->seq);
		jw_str(jw_key(&l->j, "level"),
		    catalog_level_name(b->level));
		if (b->base_seq)
			jw_uint(jw_key(&l->j, "base_sequence"),
			    b->base_seq);
		else
			jw_null(jw_key(&l->j, "base_sequence"));
		jw_str(jw_key(&l->j, "name"), b->name);
		jw_str(jw_key(&l->j, "time"), when);
		jw_int(jw_key(&l->j, "packs"), b->packs);
		jw_uint(jw_key(&l->j, "bytes"), b->size);
		jw_str(jw_key(&l->j, "manifest"), hex);
		jw_key(&l->j, "snapshots");
		jw_begin_array(&l->j);
		{
			const char *p = b->snapshots, *e;

			while (p && *p) {
				e = strchr(p, ' ');
				jw_strn(&l->j, p, e ? (size_t)(e - p) :
				    strlen(p));
				p = e ? e + 1 : NULL;
			}
		}
		jw_end_array(&l->j);
		jw_end_object(&l->j);
	} else {
		if (l->n == 0)
			printf("%-16s %5s  %-13s %5s  %-20s  %9s %6s %10s  "
			    "%s\n", "TARGET", "SEQ", "LEVEL", "BASE", "TIME",
			    "SNAPSHOTS", "PACKS", "SIZE", "NAME");
		fmt_bytes(size, sizeof(size), (double)b->size);
		printf("%-16s %5u  %-13s %5s  %-20s  %9d %6lld %10s  %s\n",
		    b->target, b->seq, catalog_level_name(b->level),
		    b->base_seq ? (snprintf(hex, sizeof(hex), "%u",
		    b->base_seq), hex) : "-", when,
		    count_words(b->snapshots), (long long)b->packs, size,
		    b->name);
	}
	l->n++;
	return (0);
}

int
cmd_bundles(int argc, char **argv, const struct global_opts *g)
{
	struct listing l;
	struct repo *r;
	struct catalog *c;
	const char *target = NULL;
	int ch, st, imported = 0;

	memset(&l, 0, sizeof(l));
	while ((ch = cmd_getopt(argc, argv, cmd_bundles_options)) != -1) {
		switch (ch) {
		case 't':
			target = optarg;
			break;
		case 'i':
			imported = 1;
			break;
		case 'j':
			l.json = 1;
			break;
		default:
			return (cmd_usage_error("bundles"));
		}
	}
	if (argc - optind != 0)
		return (cmd_usage_error("bundles"));
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	if (l.json) {
		jw_init(&l.j, stdout);
		jw_begin_array_lines(&l.j);
	}
	if (catalog_bundle_list(c, !imported, target, print_bundle, &l))
		st = STATUS_ERROR;
	if (l.json)
		jw_end_array(&l.j);
	cmd_close(r, c);
	return (st);
}
