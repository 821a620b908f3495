/*
 * Forgetting snapshots: their rows go, their ids stay in forgotten, so
 * that the records still in the packs (until prune removes them) never
 * bring them back; the journal carries the ids to the repository for
 * every other catalog.
 */
#include <stdlib.h>

#include "catalog-int.h"
#include "coffer/catalog-prune.h"
#include "coffer/log.h"

/* The complete snapshots that stay and build on a forgotten one. */
static const char dependants_sql[] =
	"SELECT s.id FROM snapshot s JOIN snapshot p ON p.id = s.parent_id"
	" WHERE s.state = 1 AND s.sid NOT IN (SELECT sid FROM forgotten)"
	" AND p.sid IN (SELECT sid FROM forgotten) ORDER BY s.id";

/* The nearest link of ?1's chain below it that stays. */
static const char anchor_sql[] =
	"WITH RECURSIVE " CAT_CHAIN("chain", "?1")
	" SELECT ch.id FROM chain ch JOIN snapshot s ON s.id = ch.id"
	" WHERE ch.depth > 0 AND s.sid NOT IN (SELECT sid FROM forgotten)"
	" ORDER BY ch.depth LIMIT 1";

/*
 * Before forgotten snapshots go, each one that stays and builds on one
 * of them is rebased onto its nearest ancestor that stays (or made a
 * full): its tree is the same, only its rows change.  Whatever the order
 * a catalog learns forgets and records in, it ends with the same trees.
 * *n how many were rebased.
 */
static int
rebase_dependants(struct catalog *c, size_t *n)
{
	sqlite3_stmt *st;
	int64_t *ids = NULL, *nids, a;
	size_t k = 0, cap = 0, i;
	int rc, ret = -1;

	*n = 0;
	if ((st = cat_prepare(c, dependants_sql, "find dependants")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (k == cap) {
			cap = cap ? 2 * cap : 16;
			if ((nids = reallocarray(ids, cap, sizeof(*ids))) ==
			    NULL) {
				log_error("out of memory");
				goto out;
			}
			ids = nids;
		}
		ids[k++] = sqlite3_column_int64(st, 0);
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot find the dependants of forgotten snapshots: "
		    "%s", sqlite3_errmsg(c->db));
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;
	for (i = 0; i < k; i++) {
		if ((st = cat_prepare(c, anchor_sql, "find a link that stays"))
		    == NULL)
			goto out;
		sqlite3_bind_int64(st, 1, ids[i]);
		rc = sqlite3_step(st);
		a = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			log_error("cannot find a link that stays: %s",
			    sqlite3_errmsg(c->db));
			goto out;
		}
		sqlite3_finalize(st);
		st = NULL;
		if (catalog_snapshot_rebase(c, ids[i], a))
			goto out;
		(*n)++;
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	free(ids);
	return (ret);
}

/*
 * Delete, children first, the snapshots named in forgotten that the
 * catalog holds, once those that stay no longer build on them; a failed
 * snapshot's parent stays.  *n how many went.
 */
static int
delete_forgotten(struct catalog *c, size_t *n)
{
	sqlite3_stmt *st;
	size_t rebased;
	int changes, rc;

	*n = 0;
	if (rebase_dependants(c, &rebased))
		return (-1);
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

int
catalog_forgotten_has(struct catalog *c, const char *sid)
{
	int64_t one;

	return (cat_run(c, "SELECT 1 FROM forgotten WHERE sid = ?1",
	    "look up a forgotten snapshot", CAT_VALS(CAT_TEXT(sid)),
	    cat_row_int64, &one));
}
