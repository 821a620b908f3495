#ifndef COFFER_ENGINE_CATALOG_H
#define COFFER_ENGINE_CATALOG_H

#include <stddef.h>

#include "coffer/catalog-known.h"
#include "coffer/engine.h"

/*
 * coffer catalog rebuild and check on the engine (src/engine/rebuild.c).
 *
 * engine_catalog_rebuild: a new catalog of r from the repository alone,
 * built beside the old one at path (NULL: the default place for r) and
 * put in its place under the catalog's writer lock (waiting at most wait
 * seconds); the drill history and key uses the old one holds are carried
 * over.  The old one's new name goes to aside ("" when there was none),
 * what the sync read to *res.  0 or -1 (reported).
 *
 * engine_catalog_resync: engine_sync of c under its writer lock, taken if
 * free: 0, 1 when another coffer process holds it (reported), -1.
 */
int engine_catalog_rebuild(struct repo *r, const char *path, double wait,
    struct sync_result *res, char *aside, size_t asize);
int engine_catalog_resync(struct repo *r, struct catalog *c,
    struct sync_result *res);

/*
 * Where r's catalog is: path when not NULL (--catalog), else its place
 * for the id coffer.conf claims and where r is (catalog_default_path).
 * malloc'd, or NULL (reported).
 */
char *engine_catalog_path(const struct repo *r, const char *path);

/* What catalog check says with a write-only key: the snapshots known by
 * their views only, and those whose chunks are not all in packs
 * (src/engine/sync.c).  0 or -1. */
int engine_known_counts(struct catalog *c, struct catalog_known_counts *n);

#endif
