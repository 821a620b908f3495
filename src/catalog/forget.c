/*
 * Forgetting snapshots: their rows go, their ids stay in forgotten, so
 * that the records still in the packs (until prune removes them) never
 * bring them back; the journal carries the ids to the repository for
 * every other catalog.
 */
#include <stdlib.h>

#include "catalog-int.h"
#include "coffer/log.h"

/*
 * Delete, children first, the snapshots named in forgotten that the
 * catalog holds, leaving any that a remaining snapshot builds on (which
 * chain-aware forgetting never asks for).  *n how many went.
 */
static int
delete_forgotten(struct catalog *c, size_t *n)
{
	sqlite3_stmt *st;
	int changes, rc;

	*n = 0;
	if ((st = cat_prepare(c, "DELETE FROM snapshot"
	    " WHERE sid IN (SELECT sid FROM forgotten)"
	    " AND id NOT IN (SELECT parent_id FROM snapshot"
	    " WHERE parent_id IS NOT NULL)"
	    " AND id NOT IN (SELECT full_id FROM snapshot"
	    " WHERE full_id IS NOT NULL AND full_id != id)",
	    "forget snapshots")) == NULL)
		return (-1);
	do {
		sqlite3_reset(st);
		if ((rc = sqlite3_step(st)) != SQLITE_DONE) {
			log_error("cannot forget snapshots: %s",
			    sqlite3_errmsg(c->db));
			sqlite3_finalize(st);
			return (-1);
		}
		changes = sqlite3_changes(c->db);
		*n += (size_t)changes;
	} while (changes > 0);
	sqlite3_finalize(st);
	return (0);
}

int
catalog_forget(struct catalog *c, const char *const *sids, size_t n,
    int64_t now_ns, size_t *gone)
{
	sqlite3_stmt *st;
	size_t i;

	*gone = 0;
	if (cat_savepoint(c))
		return (-1);
	if ((st = cat_prepare(c, "INSERT INTO forgotten(sid, time_ns)"
	    " VALUES (?1, ?2) ON CONFLICT(sid) DO NOTHING",
	    "forget snapshots")) == NULL)
		goto err;
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		cat_bind_text(st, 1, sids[i]);
		sqlite3_bind_int64(st, 2, now_ns);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot forget snapshot %s: %s", sids[i],
			    sqlite3_errmsg(c->db));
			sqlite3_finalize(st);
			goto err;
		}
	}
	sqlite3_finalize(st);
	if (delete_forgotten(c, gone))
		goto err;
	return (cat_release(c));
err:
	cat_rollback_to(c);
	return (-1);
}

int
catalog_forget_apply(struct catalog *c, size_t *gone)
{
	if (cat_savepoint(c))
		return (-1);
	if (delete_forgotten(c, gone)) {
		cat_rollback_to(c);
		return (-1);
	}
	return (cat_release(c));
}
