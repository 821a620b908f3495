#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "coffer/hex.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/remote.h"
#include "coffer/signals.h"
#include "coffer/status.h"

const struct cmd_option cmd_bundles_options[] = {
	CMD_OPT_VALUE('t', "target", "NAME", "only this target's bundles"),
	CMD_OPT_FLAG('i', "imported", "the bundles imported, not exported"),
	CMD_OPT_VALUE('a', "at", "DEST",
	    "check which are at DEST (directory or rclone:...)"),
	CMD_OPT_FLAG('j', "json", "print the bundles as a JSON array"),
	CMD_OPT_END
};

struct listing {
	int json;
	struct jw j;
	int n;
	char **present;		/* --at: the bundle names there, sorted */
	size_t npresent;
	int checking;
	uint32_t last_full;	/* per target, as rows go by */
	char target[65];
	int missing_since_full;
	int missing;
};

static int
cmp_name(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

/* -1 not checked, 0 missing, 1 there. */
static int
present(struct listing *l, const char *name)
{
	if (!l->checking)
		return (-1);
	return (bsearch(&name, l->present, l->npresent, sizeof(char *),
	    cmp_name) != NULL);
}

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
	int there;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	there = present(l, b->name);
	if (strcmp(l->target, b->target) != 0) {
		snprintf(l->target, sizeof(l->target), "%s", b->target);
		l->missing_since_full = 0;
	}
	if (b->level == 0)
		l->missing_since_full = 0;
	if (there == 0) {
		l->missing++;
		l->missing_since_full++;
	}
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
		if (there < 0)
			jw_null(jw_key(&l->j, "present"));
		else
			jw_bool(jw_key(&l->j, "present"), there);
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
		    fmt_text(b->target), b->seq, catalog_level_name(b->level),
		    b->base_seq ? (snprintf(hex, sizeof(hex), "%u",
		    b->base_seq), hex) : "-", when,
		    count_words(b->snapshots), (long long)b->packs, size,
		    fmt_text(b->name));
		if (there == 0)
			printf("%-16s %5u  MISSING at the destination\n",
			    fmt_text(b->target), b->seq);
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
	const char *target = NULL, *at = NULL;
	int ch, st, rc, imported = 0;

	memset(&l, 0, sizeof(l));
	while ((ch = cmd_getopt(argc, argv, cmd_bundles_options)) != -1) {
		switch (ch) {
		case 't':
			target = optarg;
			break;
		case 'i':
			imported = 1;
			break;
		case 'a':
			at = optarg;
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
	if (at != NULL) {
		struct remote t;

		if (remote_parse(at, &t))
			return (STATUS_USAGE);
		/* A signal stops the listing and its rclone. */
		signals_install();
		rc = remote_list(&t, &l.present, &l.npresent);
		remote_release(&t);
		if (rc)
			return (STATUS_ERROR);
		l.checking = 1;
	}
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		goto out;
	if (l.json) {
		jw_init(&l.j, stdout);
		jw_begin_array_lines(&l.j);
	}
	if (engine_bundle_list(c, !imported, target, print_bundle, &l))
		st = STATUS_ERROR;
	if (l.json)
		jw_end_array(&l.j);
	cmd_close(r, c);
	/* A bundle recorded as sent that is not there: a hole in what the
	 * target can give back. */
	if (st == STATUS_OK && l.missing > 0) {
		log_error("%d bundle%s not at '%s'%s", l.missing,
		    l.missing == 1 ? " is" : "s are", at,
		    target != NULL && l.missing_since_full ? ": the chain of "
		    "its last full is broken (export a new full: --level "
		    "full)" : "");
		st = STATUS_INTEGRITY;
	}
out:
	while (l.npresent > 0)
		free(l.present[--l.npresent]);
	free(l.present);
	return (st);
}
