/*
 * coffer catalog rebuild | check: the catalog is a cache of the
 * repository (every command brings it up to date on its own); these make
 * a new one from scratch, and say how the two compare.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-catalog.h"
#include "coffer/engine-check.h"
#include "coffer/engine-keys.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

const struct cmd_option cmd_catalog_options[] = {
	CMD_OPT_FLAG('j', "json", "print the result as JSON"),
	CMD_OPT_END
};

/* rebuild and check: --json, and no operand.  0, or -1. */
static int
parse_json(int argc, char **argv, int *json)
{
	int ch;

	*json = 0;
	while ((ch = cmd_getopt(argc, argv, cmd_catalog_options)) != -1) {
		if (ch != 'j')
			return (-1);
		*json = 1;
	}
	return (optind == argc ? 0 : -1);
}

/* The members that rebuild's and check's JSON objects share. */
static void
sync_members(struct jw *j, const char *what, const struct sync_result *res)
{
	jw_str(jw_key(j, "action"), what);
	jw_uint(jw_key(j, "snapshots_added"), res->records);
	jw_uint(jw_key(j, "packs_added"), res->packs_new);
	jw_uint(jw_key(j, "packs_unreadable"), res->packs_bad);
	jw_uint(jw_key(j, "packs_missing"), res->packs_missing);
	jw_uint(jw_key(j, "records_bad"), res->records_bad);
	jw_uint(jw_key(j, "bytes_read"), res->bytes_read);
	jw_uint(jw_key(j, "snapshots_known_by_view"), res->known);
	jw_double(jw_key(j, "seconds"), res->seconds, 3);
}

static void
print_sync(const char *what, const struct sync_result *res, const char *aside)
{
	if (log_level < 0 && res->packs_bad == 0 && res->records_bad == 0 &&
	    res->packs_missing == 0)
		return;
	printf("%s: %zu snapshot%s and %zu pack%s from the repository "
	    "(%llu bytes read, %.1f s)", what, res->records,
	    res->records == 1 ? "" : "s", res->packs_new,
	    res->packs_new == 1 ? "" : "s",
	    (unsigned long long)res->bytes_read, res->seconds);
	if (res->packs_bad || res->records_bad)
		printf("; %zu unreadable pack%s, %zu snapshot record%s left "
		    "out", res->packs_bad, res->packs_bad == 1 ? "" : "s",
		    res->records_bad, res->records_bad == 1 ? "" : "s");
	if (res->packs_missing)
		printf("; %zu pack%s the catalog knew %s missing from the "
		    "repository", res->packs_missing,
		    res->packs_missing == 1 ? "" : "s",
		    res->packs_missing == 1 ? "is" : "are");
	printf("\n");
	if (aside && aside[0])
		printf("the previous catalog is kept as '%s'\n", aside);
}

/*
 * A new catalog from the repository alone, built beside the old one and
 * put in its place under the catalog's writer lock.  The drill history
 * the old one holds is carried over.
 */
static int
rebuild(const struct global_opts *g, int json)
{
	struct engine_store_mark m;
	struct sync_result res;
	struct jw j;
	struct repo *r;
	char aside[PATH_MAX + 64];
	int st;

	if ((st = cmd_open(g, OPEN_KEYS, &r, NULL)) != STATUS_OK)
		return (st);
	engine_store_mark(&m);
	if (engine_catalog_rebuild(r, g->catalog, g->wait, &res, aside,
	    sizeof(aside))) {
		cmd_close(r, NULL);
		return (cmd_repo_failure(&m));
	}
	if (json) {
		jw_init(&j, stdout);
		jw_begin_object(&j);
		sync_members(&j, "rebuilt", &res);
		jw_str(jw_key(&j, "previous"), aside);
		jw_end_object(&j);
	} else {
		print_sync("rebuilt", &res, aside);
	}
	/* What the new catalog cannot know: said once, here. */
	if (engine_key_write_only(r) && !json && log_level >= 0)
		printf("this key is write-only: the new catalog knows every "
		    "pack's chunks and %zu snapshot%s by their views, not "
		    "their files; the next backup of each dataset is a full (it "
		    "stores only what is new)\n", res.known,
		    res.known == 1 ? "" : "s");
	cmd_close(r, NULL);
	return (res.packs_bad || res.records_bad ? STATUS_INTEGRITY :
	    STATUS_OK);
}

/*
 * catalog check with a write-only key: what it can know (every pack's
 * chunks, the snapshots this host holds the rows of, whether their
 * chunks are all in packs) and what it cannot (the snapshots known only
 * by their views: verify them with the key that reads).
 */
static int
check_views(struct repo *r, struct catalog *c, const struct sync_result *res,
    int json)
{
	struct catalog_known_counts n;
	struct jw j;
	int st;

	if (engine_known_counts(c, &n))
		return (STATUS_REPO);
	if (json) {
		jw_init(&j, stdout);
		jw_begin_object(&j);
		sync_members(&j, "checked", res);
		jw_int(jw_key(&j, "snapshots_readable"), n.readable);
		jw_int(jw_key(&j, "snapshots_known_total"), n.known);
		jw_int(jw_key(&j, "chunks_missing"), n.chunks_unlocated);
		jw_int(jw_key(&j, "snapshots_broken"), n.snapshots_broken);
		jw_end_object(&j);
	} else {
		print_sync("checked", res, NULL);
		printf("%lld snapshot%s with rows this key wrote: %s\n",
		    (long long)n.readable, n.readable == 1 ? "" : "s",
		    res->packs_missing > 0 ? "packs they need are missing "
		    "from the repository" : n.snapshots_broken == 0 ?
		    "every chunk is in a pack" : "some chunks are in no pack");
		if (n.snapshots_broken > 0)
			printf("%lld chunk%s in no pack, needed by %lld "
			    "snapshot%s\n", (long long)n.chunks_unlocated,
			    n.chunks_unlocated == 1 ? "" : "s",
			    (long long)n.snapshots_broken,
			    n.snapshots_broken == 1 ? "" : "s");
		printf("%lld snapshot%s known by %s only: this key cannot "
		    "read %s files (verify %s with the key that reads)\n",
		    (long long)n.known, n.known == 1 ? "" : "s", n.known == 1 ?
		    "its view" : "their views", n.known == 1 ? "its" : "their",
		    n.known == 1 ? "it" : "them");
	}
	st = STATUS_OK;
	if (res->packs_bad || res->records_bad || res->packs_missing ||
	    n.snapshots_broken)
		st = STATUS_INTEGRITY;
	return (st);
}

/*
 * The catalog against the repository: what the repository holds that the
 * catalog cannot use (unreadable packs, records left out), what the
 * catalog knows that the repository lost, and, from verify's structure
 * pass, which snapshots that breaks.
 */
static int
check(const struct global_opts *g, int json)
{
	struct engine_store_mark m;
	struct sync_result res;
	struct verify_opts vo;
	struct verify_result vr;
	struct jw j;
	struct catalog *c;
	struct repo *r;
	int st;

	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	/* Once more, for the counts: an up-to-date catalog reads nothing. */
	engine_store_mark(&m);
	if (engine_catalog_resync(r, c, &res)) {
		cmd_close(r, c);
		return (cmd_repo_failure(&m));
	}
	if (engine_key_write_only(r)) {
		st = check_views(r, c, &res, json);
		cmd_close(r, c);
		return (st);
	}
	memset(&vo, 0, sizeof(vo));
	vo.read = VERIFY_STRUCTURE;
	st = cmd_status(engine_verify(r, c, &vo, &vr));
	if (st == STATUS_OK || st == STATUS_INTEGRITY) {
		if (json) {
			jw_init(&j, stdout);
			jw_begin_object(&j);
			sync_members(&j, "checked", &res);
			cmd_verify_print(&vr, jw_key(&j, "verify"));
			jw_end_object(&j);
		} else {
			print_sync("checked", &res, NULL);
			if (log_level >= 0 || st != STATUS_OK)
				cmd_verify_print(&vr, NULL);
		}
		if (res.packs_bad || res.records_bad || res.packs_missing)
			st = STATUS_INTEGRITY;
	}
	engine_verify_result_release(&vr);
	cmd_close(r, c);
	return (st);
}

int
cmd_catalog_rebuild(int argc, char **argv, const struct global_opts *g)
{
	int json;

	if (parse_json(argc, argv, &json))
		return (cmd_usage_error("catalog rebuild"));
	return (rebuild(g, json));
}

/*
 * Where the repository's catalog is (--catalog, COFFER_CATALOG, or its
 * place under XDG_STATE_HOME): no key, since the path is named by the id
 * coffer.conf claims and by where the repository is; nothing is opened
 * but coffer.conf.
 */
int
cmd_catalog_path(int argc, char **argv, const struct global_opts *g)
{
	static const struct cmd_option none[] = { CMD_OPT_END };
	struct repo *r;
	char *path;
	int st;

	if (cmd_getopt(argc, argv, none) != -1 || optind != argc)
		return (cmd_usage_error("catalog path"));
	if ((st = cmd_open(g, 0, &r, NULL)) != STATUS_OK)
		return (st);
	path = engine_catalog_path(r, g->catalog);
	cmd_close(r, NULL);
	if (path == NULL)
		return (STATUS_ERROR);
	printf("%s\n", path);
	free(path);
	return (STATUS_OK);
}

int
cmd_catalog_check(int argc, char **argv, const struct global_opts *g)
{
	int json;

	if (parse_json(argc, argv, &json))
		return (cmd_usage_error("catalog check"));
	return (check(g, json));
}
