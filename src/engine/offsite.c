/*
 * A drill from offsite bundles alone: what a bad day would do after the
 * site is lost.  The bundles are imported, as a bare machine would, into
 * a scratch repository with a scratch catalog (nothing of this host's
 * repository or catalog is used to recover), the snapshot is drilled as
 * any drill is (restore or stream, check every entry, time it), and the
 * result is recorded in this host's drill history with where it came
 * from, so that weekly offsite drills show in drill history and in the
 * metrics beside the others.  The scratch goes afterwards unless kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/catalog-history.h"
#include "coffer/engine-check.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/progress.h"

struct scratch_open {
	const struct drill_bundles_opts *o;
	const char *catalog;
};

static int
open_new(void *arg, const char *path, struct repo **r, struct catalog **c)
{
	struct scratch_open *so = arg;

	return (so->o->open_scratch(so->o->arg, path, so->catalog, r, c));
}

/* The result, recorded in the host's catalog under the host's rows. */
static int
record_host(struct catalog *host, const struct catalog_snapshot *s,
    const char *source, struct drill_result *res)
{
	struct catalog_snapshot hs;
	struct catalog_drill d = res->rec;
	int found;

	memset(&hs, 0, sizeof(hs));
	if (catalog_dataset_id(host, s->dataset, 1, &d.dataset_id) < 0 ||
	    (found = catalog_snapshot_find_sid(host, s->sid, &hs)) < 0)
		return (-1);
	d.snapshot_id = found ? hs.id : 0;
	catalog_snapshot_release(&hs);
	d.source = source;
	if (catalog_drill_add(host, &d))
		return (-1);
	res->rec.id = d.id;
	res->rec.dataset_id = d.dataset_id;
	res->rec.snapshot_id = d.snapshot_id;
	res->rec.source = source;
	return (0);
}

enum engine_result
engine_drill_bundles(struct catalog *host, const struct drill_bundles_opts *o,
    struct catalog_snapshot *s, struct drill_result *res,
    struct import_result *imp)
{
	struct scratch_open so;
	struct import_opts io;
	struct drill_opts dopts = *o->drill;
	struct repo *r = NULL;
	struct catalog *c = NULL;
	const char *parent = o->drill->scratch;
	char *dir = NULL, *repo = NULL, *cat = NULL;
	enum engine_result st = ENGINE_ERROR;
	int rc;

	memset(res, 0, sizeof(*res));
	memset(s, 0, sizeof(*s));
	if (parent == NULL && ((parent = getenv("TMPDIR")) == NULL ||
	    *parent == '\0'))
		parent = "/tmp";
	if ((dir = fsutil_join(parent, "coffer-offsite-drill.XXXXXX")) ==
	    NULL || mkdtemp(dir) == NULL) {
		log_errno("cannot make a scratch directory in '%s'", parent);
		free(dir);
		return (ENGINE_ERROR);
	}
	if ((repo = fsutil_join(dir, "repo")) == NULL ||
	    (cat = fsutil_join(dir, "catalog.db")) == NULL) {
		log_errno("out of memory");
		goto out;
	}
	so.o = o;
	so.catalog = cat;
	memset(&io, 0, sizeof(io));
	io.from = o->from;
	io.init_path = repo;
	io.open_new = open_new;
	io.arg = &so;
	if ((st = engine_import(&r, &c, &io, imp)) != ENGINE_OK)
		goto out;
	st = ENGINE_ERROR;
	if (r == NULL || c == NULL) {
		log_error("'%s' held no bundle to drill from", o->from);
		st = ENGINE_REFUSED;
		goto out;
	}
	if ((rc = catalog_snapshot_find(c, o->snapshot, s)) <= 0) {
		if (rc == 0)
			log_error("the bundles at '%s' hold no snapshot '%s'",
			    o->from, o->snapshot);
		st = rc == 0 ? ENGINE_REFUSED : ENGINE_ERROR;
		goto out;
	}
	dopts.scratch = dir;
	dopts.keep = 0;		/* the whole scratch is kept or not, below */
	st = engine_drill(r, c, s, &dopts, res);
	if (res->rec.verdict != NULL && record_host(host, s, o->source,
	    res)) {
		log_error("the drill could not be recorded in this host's "
		    "catalog");
		if (st == ENGINE_OK)
			st = ENGINE_ERROR;
	}
out:
	catalog_close(c);
	repo_close(r);
	if (o->drill->keep)
		log_warn("kept the scratch repository '%s'", dir);
	else if (fsutil_remove_tree(AT_FDCWD, dir, "the scratch repository"))
		log_warn("could not remove all of '%s'", dir);
	free(repo);
	free(cat);
	free(dir);
	return (st);
}
