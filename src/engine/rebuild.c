/*
 * The catalog made anew from the repository (coffer catalog rebuild), and
 * brought up to date once more for coffer catalog check
 * (include/coffer/engine-catalog.h).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/engine-catalog.h"
#include "coffer/log.h"

int
engine_catalog_rebuild(struct repo *r, const char *path, double wait,
    struct sync_result *res, char *aside, size_t asize)
{
	struct catalog *c = NULL, *n = NULL;
	char *p, tmp[PATH_MAX];
	int rc = -1;

	aside[0] = '\0';
	p = engine_catalog_path(r, path);
	if (p == NULL || (size_t)snprintf(tmp, sizeof(tmp), "%s.rebuild",
	    p) >= sizeof(tmp)) {
		log_error("cannot find a place for the catalog");
		free(p);
		return (-1);
	}
	if ((c = catalog_open_or_reset(p, aside, asize)) == NULL ||
	    catalog_lock(c, wait))
		goto out;
	/* What an interrupted rebuild left. */
	(void)unlink(tmp);
	if ((n = catalog_open(tmp)) == NULL)
		goto out;
	if (engine_sync(r, n, res) || catalog_copy_history(n, p))
		goto out;
	catalog_close(n);
	n = NULL;
	if (catalog_replace(c, tmp, aside, asize))
		goto out;
	rc = 0;
out:
	catalog_close(n);
	if (rc != 0)
		(void)unlink(tmp);
	catalog_close(c);
	free(p);
	return (rc);
}

int
engine_catalog_resync(struct repo *r, struct catalog *c,
    struct sync_result *res)
{
	int held, rc;

	if ((held = catalog_lock_try(c)) <= 0) {
		if (held == 0)
			log_error("catalog is being written by another coffer "
			    "process; check again when it is done");
		return (held == 0 ? 1 : -1);
	}
	rc = engine_sync(r, c, res);
	catalog_unlock(c);
	return (rc ? -1 : 0);
}

char *
engine_catalog_path(const struct repo *r, const char *path)
{
	char *p;

	if (path == NULL)
		return (catalog_default_path(repo_id_hex(r), repo_path(r)));
	if ((p = strdup(path)) == NULL)
		log_errno("out of memory");
	return (p);
}
