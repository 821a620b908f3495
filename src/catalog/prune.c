/*
 * What prune needs of the catalog: which chunks a snapshot still needs
 * (live), how much of each pack that is, and the one transaction that
 * moves chunks into new packs and drops what is gone.
 *
 * Live = referenced by an entry of a snapshot the catalog holds (through
 * its content).  Forgotten snapshots' rows are gone, so their chunks are
 * not; the chunks of failed runs were never committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-prune.h"
#include "coffer/log.h"

int
catalog_prune_begin(struct catalog *c)
{
	return (cat_exec(c, "DROP TABLE IF EXISTS temp.live;"
	    "CREATE TEMP TABLE live (id INTEGER PRIMARY KEY);"
	    "INSERT OR IGNORE INTO temp.live SELECT cc.chunk_id"
	    " FROM entry e JOIN content_chunk cc"
	    " ON cc.content_id = e.content_id WHERE e.content_id IS NOT NULL",
	    "find the chunks snapshots need"));
}

int
catalog_prune_packs(struct catalog *c, struct catalog_prune_pack **packs,
    size_t *n)
{
	struct catalog_prune_pack *v = NULL;
	size_t k = 0, cap = 0;
	sqlite3_stmt *st;
	int rc;

	*packs = NULL;
	*n = 0;
	if ((st = cat_prepare(c, "SELECT p.id, p.name, p.size,"
	    " count(ch.id), count(l.id),"
	    " coalesce(sum(CASE WHEN l.id IS NOT NULL THEN ch.stored_len"
	    " END), 0), p.created_ns,"
	    " (SELECT time_ns FROM condemned d WHERE d.name = p.name)"
	    " FROM pack p LEFT JOIN chunk ch ON ch.pack_id = p.id"
	    " LEFT JOIN temp.live l ON l.id = ch.id"
	    " GROUP BY p.id ORDER BY p.name", "plan the prune")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (array_grow(&v, &cap, k, sizeof(*v), 64))
			goto err;
		memset(&v[k], 0, sizeof(v[k]));
		v[k].id = sqlite3_column_int64(st, 0);
		snprintf(v[k].name, sizeof(v[k].name), "%s",
		    (const char *)sqlite3_column_text(st, 1));
		v[k].size = (uint64_t)sqlite3_column_int64(st, 2);
		v[k].chunks = sqlite3_column_int64(st, 3);
		v[k].live_chunks = sqlite3_column_int64(st, 4);
		v[k].live_bytes = (uint64_t)sqlite3_column_int64(st, 5);
		v[k].seen_ns = sqlite3_column_int64(st, 6);
		v[k].condemned_ns = sqlite3_column_int64(st, 7);
		k++;
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot plan the prune: %s", sqlite3_errmsg(c->db));
		goto err;
	}
	sqlite3_finalize(st);
	*packs = v;
	*n = k;
	return (0);
err:
	sqlite3_finalize(st);
	free(v);
	return (-1);
}

int
catalog_prune_copy(struct catalog *c, int64_t pack_id, const uint8_t cid[32],
    int64_t *rowid, struct catalog_chunk_place **places, size_t *nplaces)
{
	int64_t row = 0;
	int rc;

	*rowid = 0;
	*places = NULL;
	*nplaces = 0;
	/* Live? */
	if ((rc = cat_run(c, "SELECT ch.id FROM chunk ch"
	    " JOIN temp.live l ON l.id = ch.id WHERE ch.cid = ?1",
	    "plan the prune", CAT_VALS(CAT_BLOB(cid, 32)), cat_row_int64,
	    &row)) <= 0)
		return (rc);
	*rowid = row;
	if (catalog_chunk_places(c, row, pack_id, places, nplaces))
		return (-1);
	return (1);
}

int
catalog_prune_drop(struct catalog *c, const int64_t *packs, size_t n)
{
	static const char *const gc[] = {
		/* Contents no entry uses (their chunk lists cascade). */
		"DELETE FROM content WHERE id NOT IN (SELECT content_id"
		" FROM entry WHERE content_id IS NOT NULL)",
	};
	/* The copies (chunk_copy) of the chunks and in the packs dropped
	 * go by their foreign keys' cascade, as content_chunk does. */
	static const char *const drop[] = {
		"DELETE FROM chunk WHERE pack_id = ?1"
		" AND id NOT IN (SELECT chunk_id FROM content_chunk)",
		"DELETE FROM condemned WHERE name ="
		" (SELECT name FROM pack WHERE id = ?1)",
		"DELETE FROM pack WHERE id = ?1",
	};
	sqlite3_stmt *st = NULL;
	size_t i, k;

	for (i = 0; i < sizeof(gc) / sizeof(gc[0]); i++)
		if (cat_exec(c, gc[i], "drop what prune removed"))
			return (-1);
	/* The chunk rows that were in the packs going (live ones moved
	 * already), their marks, then the packs. */
	for (i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
		if ((st = cat_prepare(c, drop[i], "drop what prune removed")) ==
		    NULL)
			return (-1);
		for (k = 0; k < n; k++) {
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 1, packs[k]);
			if (sqlite3_step(st) != SQLITE_DONE) {
				log_error("cannot drop what prune removed: %s",
				    sqlite3_errmsg(c->db));
				sqlite3_finalize(st);
				return (-1);
			}
		}
		sqlite3_finalize(st);
	}
	return (0);
}

int
catalog_condemn(struct catalog *c, const char *name, int64_t time_ns)
{
	if (!cat_is_hex(name, 32) || time_ns <= 0) {
		log_error("bad mark of pack '%s'", name);
		return (-1);
	}
	/* Marked twice (two prunes at once): the first mark counts. */
	return (cat_run(c, "INSERT INTO condemned(name, time_ns)"
	    " VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE"
	    " SET time_ns = min(time_ns, excluded.time_ns)",
	    "note a condemned pack", CAT_VALS(CAT_TEXT(name),
	    CAT_INT(time_ns)), NULL, NULL));
}

int
catalog_packs_gone(struct catalog *c, const char *const *names, size_t n)
{
	sqlite3_stmt *st;
	size_t i;

	if (cat_exec(c, "DELETE FROM temp.gone", "note the packs gone"))
		return (-1);
	if (n == 0)
		return (0);
	if ((st = cat_prepare(c, "INSERT OR IGNORE INTO temp.gone"
	    " SELECT id FROM pack WHERE name = ?1", "note the packs gone")) ==
	    NULL)
		return (-1);
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		cat_bind_text(st, 1, names[i]);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot note the packs gone: %s",
			    sqlite3_errmsg(c->db));
			sqlite3_finalize(st);
			return (-1);
		}
	}
	sqlite3_finalize(st);
	return (0);
}

int
catalog_chunk_copies_place(struct catalog *c)
{
	/*
	 * Each step is driven by an index (chunk_pack, chunk_copy's key and
	 * chunk_copy_pack), so a sync pays for the chunks that move, not
	 * for the copies: a fleet whose hosts all stored one dataset at
	 * once has a copy row per chunk and per other host.
	 */
	static const char *const sql[] = {
		"CREATE TEMP TABLE IF NOT EXISTS moving (chunk_id INTEGER"
		" PRIMARY KEY, pack_id INTEGER)",
		"DELETE FROM temp.moving",
		/* The chunks whose pack went: a copy in a pack that has not,
		 * one not condemned if there is one.  Not the chunks of a
		 * condemned pack, still there: a copy is its index's word
		 * (a write-only key can forge one), which only a prune,
		 * reading the copy, may take (catalog_prune_copy). */
		"INSERT INTO temp.moving SELECT ch.id, k.pack_id"
		" FROM chunk ch JOIN chunk_copy k ON k.chunk_id = ch.id"
		" WHERE ch.pack_id IN (SELECT id FROM temp.gone)"
		" AND k.pack_id IS NOT ch.pack_id"
		" AND k.pack_id NOT IN (SELECT id FROM temp.gone)"
		" ORDER BY ch.id, EXISTS (SELECT 1 FROM pack p JOIN condemned d"
		" ON d.name = p.name WHERE p.id = k.pack_id), k.pack_id"
		" ON CONFLICT(chunk_id) DO NOTHING",
		"UPDATE chunk SET (pack_id, pack_offset, plain_len,"
		" stored_len, type, flags, damaged) ="
		" (SELECT k.pack_id, k.pack_offset, k.plain_len, k.stored_len,"
		" k.type, k.flags, 0 FROM temp.moving m JOIN chunk_copy k"
		" ON k.chunk_id = m.chunk_id AND k.pack_id = m.pack_id"
		" WHERE m.chunk_id = chunk.id)"
		" WHERE id IN (SELECT chunk_id FROM temp.moving)",
		/* The copies that are the place now, and those gone. */
		"DELETE FROM chunk_copy WHERE (chunk_id, pack_id) IN"
		" (SELECT chunk_id, pack_id FROM temp.moving)",
		"DELETE FROM chunk_copy WHERE pack_id IN"
		" (SELECT id FROM temp.gone)",
	};
	int64_t any = 0;
	size_t i;

	/* None, but where hosts raced. */
	if (cat_run(c, "SELECT 1 FROM chunk_copy LIMIT 1",
	    "place the copies of chunks", NULL, 0, cat_row_int64, &any) < 0)
		return (-1);
	if (any == 0)
		return (0);
	if (cat_exec(c, "BEGIN IMMEDIATE", "place the copies of chunks"))
		return (-1);
	for (i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
		if (cat_exec(c, sql[i], "place the copies of chunks")) {
			catalog_rollback(c);
			return (-1);
		}
	return (cat_exec(c, "COMMIT", "place the copies of chunks"));
}

int
catalog_packs_gone_drop(struct catalog *c, size_t *dropped)
{
	static const char *const sql[] = {
		/* Contents no entry uses any more (forgotten elsewhere). */
		"DELETE FROM content WHERE id NOT IN (SELECT content_id"
		" FROM entry WHERE content_id IS NOT NULL)",
		/* What the gone packs held that nothing uses (its copies
		 * cascade). */
		"DELETE FROM chunk WHERE pack_id IN (SELECT id FROM temp.gone)"
		" AND id NOT IN (SELECT chunk_id FROM content_chunk)",
		/* The marks of the gone packs dropped below. */
		"DELETE FROM condemned WHERE name IN (SELECT name FROM pack"
		" WHERE id IN (SELECT id FROM temp.gone)"
		" AND id NOT IN (SELECT pack_id FROM chunk"
		" WHERE pack_id IS NOT NULL))",
		/* The gone packs nothing is located in now. */
		"DELETE FROM pack WHERE id IN (SELECT id FROM temp.gone)"
		" AND id NOT IN (SELECT pack_id FROM chunk"
		" WHERE pack_id IS NOT NULL)",
	};
	size_t i;

	*dropped = 0;
	if (cat_exec(c, "BEGIN IMMEDIATE", "drop the packs gone"))
		return (-1);
	for (i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		if (cat_exec(c, sql[i], "drop the packs gone")) {
			catalog_rollback(c);
			return (-1);
		}
		if (i == 3)
			*dropped = (size_t)sqlite3_changes(c->db);
	}
	/* The packs still needed stay noted as gone until the next sync:
	 * prune trusts no copy of a chunk there (catalog_prune_copy), and a
	 * backup counts none as stored (catalog_chunk_claim), so it stores
	 * again what it meets of them.  A pack that comes back is not gone
	 * at the next sync. */
	if (cat_exec(c, "DELETE FROM temp.gone WHERE id NOT IN"
	    " (SELECT id FROM pack); COMMIT", "drop the packs gone")) {
		catalog_rollback(c);
		return (-1);
	}
	return (0);
}
