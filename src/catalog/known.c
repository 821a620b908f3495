/*
 * What a write-only key knows of snapshots it cannot read: their view
 * records (src/engine/view.c) name each snapshot, its dataset, level,
 * parent, times, host and source, and say which snapshots the authority
 * forgot.  A full key reads the snapshot records themselves and never
 * needs these rows.
 */
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-known.h"
#include "coffer/log.h"

int
catalog_known_add(struct catalog *c, const struct catalog_known *k,
    const char *pack)
{
	sqlite3_stmt *st;
	int rc;

	/* Not for a snapshot whose rows are here, nor one forgotten; a
	 * later revision (a rebase) replaces an earlier one. */
	if ((st = cat_prepare(c, "INSERT INTO known_snapshot(sid, dataset,"
	    " level, parent_sid, revision, started_ns, finished_ns, host,"
	    " source, pack)"
	    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10"
	    " WHERE NOT EXISTS (SELECT 1 FROM snapshot WHERE sid = ?1)"
	    " AND NOT EXISTS (SELECT 1 FROM forgotten WHERE sid = ?1)"
	    " ON CONFLICT(sid) DO UPDATE SET level = excluded.level,"
	    " parent_sid = excluded.parent_sid, revision = excluded.revision,"
	    " pack = excluded.pack"
	    " WHERE excluded.revision > known_snapshot.revision",
	    "note a snapshot known by its view")) == NULL)
		return (-1);
	cat_bind_text(st, 1, k->sid);
	cat_bind_text(st, 2, k->dataset);
	sqlite3_bind_int(st, 3, k->level);
	if (k->parent_sid[0] != '\0')
		cat_bind_text(st, 4, k->parent_sid);
	sqlite3_bind_int64(st, 5, k->revision);
	sqlite3_bind_int64(st, 6, k->started_ns);
	sqlite3_bind_int64(st, 7, k->finished_ns);
	cat_bind_text(st, 8, k->host);
	cat_bind_text(st, 9, k->source);
	cat_bind_text(st, 10, pack);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
	if (rc)
		log_error("cannot note snapshot %s: %s", k->sid,
		    sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return (rc);
}

int
catalog_forgotten_import(struct catalog *c, const char *sid, int64_t time_ns)
{
	if (cat_run(c, "INSERT INTO forgotten(sid, time_ns, in_repo)"
	    " VALUES (?1, ?2, 1) ON CONFLICT(sid) DO NOTHING",
	    "note a forgotten snapshot", CAT_VALS(CAT_TEXT(sid),
	    CAT_INT(time_ns)), NULL, NULL))
		return (-1);
	return (cat_run(c, "DELETE FROM known_snapshot WHERE sid = ?1",
	    "note a forgotten snapshot", CAT_VALS(CAT_TEXT(sid)), NULL, NULL));
}

int
catalog_dataset_source(struct catalog *c, const char *dataset, char **source)
{
	sqlite3_stmt *st;
	const unsigned char *t;
	int rc;

	*source = NULL;
	if ((st = cat_prepare(c, "SELECT source FROM ("
	    " SELECT s.source, s.started_ns FROM snapshot s"
	    " JOIN dataset d ON d.id = s.dataset_id"
	    " WHERE d.name = ?1 AND s.state = 1"
	    " UNION ALL SELECT source, started_ns FROM known_snapshot"
	    " WHERE dataset = ?1)"
	    " ORDER BY started_ns DESC LIMIT 1",
	    "find a dataset's source")) == NULL)
		return (-1);
	cat_bind_text(st, 1, dataset);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((t = sqlite3_column_text(st, 0)) != NULL &&
		    (*source = strdup((const char *)t)) == NULL) {
			log_error("out of memory");
			rc = -1;
		} else
			rc = *source != NULL;
	} else if (rc == SQLITE_DONE)
		rc = 0;
	else {
		log_error("cannot find a dataset's source: %s",
		    sqlite3_errmsg(c->db));
		rc = -1;
	}
	sqlite3_finalize(st);
	return (rc);
}

int
catalog_known_list(struct catalog *c,
    int (*fn)(void *, const char *sid, const char *dataset), void *arg)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(c, "SELECT sid, dataset FROM known_snapshot"
	    " ORDER BY dataset, started_ns", "list known snapshots")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (fn(arg, (const char *)sqlite3_column_text(st, 0),
		    (const char *)sqlite3_column_text(st, 1))) {
			sqlite3_finalize(st);
			return (-1);
		}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot list known snapshots: %s",
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}

int
catalog_known_counts(struct catalog *c, struct catalog_known_counts *n)
{
	static const char sql[] =
	    "SELECT (SELECT count(*) FROM known_snapshot),"
	    " (SELECT count(*) FROM snapshot WHERE state = 1),"
	    " (SELECT count(DISTINCT cc.chunk_id) FROM entry e"
	    "  JOIN snapshot s ON s.id = e.snapshot_id AND s.state = 1"
	    "  JOIN content_chunk cc ON cc.content_id = e.content_id"
	    "  JOIN chunk k ON k.id = cc.chunk_id"
	    "  WHERE k.pack_id IS NULL OR k.damaged = 1),"
	    " (SELECT count(DISTINCT e.snapshot_id) FROM entry e"
	    "  JOIN snapshot s ON s.id = e.snapshot_id AND s.state = 1"
	    "  JOIN content_chunk cc ON cc.content_id = e.content_id"
	    "  JOIN chunk k ON k.id = cc.chunk_id"
	    "  WHERE k.pack_id IS NULL OR k.damaged = 1)";
	sqlite3_stmt *st;
	int rc;

	memset(n, 0, sizeof(*n));
	if ((st = cat_prepare(c, sql, "count what this key knows")) == NULL)
		return (-1);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		n->known = sqlite3_column_int64(st, 0);
		n->readable = sqlite3_column_int64(st, 1);
		n->chunks_unlocated = sqlite3_column_int64(st, 2);
		n->snapshots_broken = sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW) {
		log_error("cannot count what this key knows: %s",
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}

int
catalog_bundles_imported(struct catalog *c)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(c, "SELECT 1 FROM bundle"
	    " WHERE direction = 'import' LIMIT 1", "look up imports")) == NULL)
		return (-1);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return (1);
	if (rc == SQLITE_DONE)
		return (0);
	log_error("cannot look up imports: %s", sqlite3_errmsg(c->db));
	return (-1);
}
