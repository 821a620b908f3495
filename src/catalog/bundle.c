/*
 * Offsite bundles in the catalog (catalog.c's bundle tables): what each
 * target holds, and what a snapshot's chain needs from the repository.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog-journal.h"
#include "coffer/log.h"
#include "coffer/name.h"

void
catalog_bundle_release(struct catalog_bundle *b)
{
	free(b->snapshots);
	b->snapshots = NULL;
}

#define BUNDLE_COLS "id, direction = 'export', target, seq, level, base_seq," \
	" manifest, name, size, packs, snapshots, created_ns"

static int
col_bundle(sqlite3_stmt *st, struct catalog_bundle *b)
{
	const void *m = sqlite3_column_blob(st, 6);

	memset(b, 0, sizeof(*b));
	b->id = sqlite3_column_int64(st, 0);
	b->exported = sqlite3_column_int(st, 1);
	snprintf(b->target, sizeof(b->target), "%s",
	    (const char *)sqlite3_column_text(st, 2));
	b->seq = (uint32_t)sqlite3_column_int64(st, 3);
	b->level = sqlite3_column_int(st, 4);
	b->base_seq = (uint32_t)sqlite3_column_int64(st, 5);
	if (m && sqlite3_column_bytes(st, 6) == (int)sizeof(b->manifest))
		memcpy(b->manifest, m, sizeof(b->manifest));
	snprintf(b->name, sizeof(b->name), "%s",
	    (const char *)sqlite3_column_text(st, 7));
	b->size = (uint64_t)sqlite3_column_int64(st, 8);
	b->packs = sqlite3_column_int64(st, 9);
	b->created_ns = sqlite3_column_int64(st, 11);
	return (cat_col_strdup(st, 10, &b->snapshots));
}

static int
one_bundle(struct catalog *c, sqlite3_stmt *st, struct catalog_bundle *b)
{
	int rc = sqlite3_step(st), ret = 0;

	if (rc == SQLITE_ROW)
		ret = col_bundle(st, b) ? -1 : 1;
	else if (rc != SQLITE_DONE) {
		log_error("cannot read the bundles: %s", sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

/* One bundle by a query of ?1 direction, ?2 target and ?3 arg. */
static int
bundle_query(struct catalog *c, const char *where, int exported,
    const char *target, int64_t arg, struct catalog_bundle *b)
{
	char sql[512];
	sqlite3_stmt *st;

	snprintf(sql, sizeof(sql), "SELECT " BUNDLE_COLS " FROM bundle"
	    " WHERE direction = ?1 AND target = ?2 AND %s", where);
	if ((st = cat_prepare(c, sql, "find a bundle")) == NULL)
		return (-1);
	sqlite3_bind_text(st, 1, exported ? "export" : "import", -1,
	    SQLITE_STATIC);
	cat_bind_text(st, 2, target);
	sqlite3_bind_int64(st, 3, arg);
	return (one_bundle(c, st, b));
}

int
catalog_bundle_last(struct catalog *c, int exported, const char *target,
    int full_only, struct catalog_bundle *b)
{
	return (bundle_query(c, "(?3 = 0 OR level = 0) ORDER BY seq DESC"
	    " LIMIT 1", exported, target, full_only, b));
}

int
catalog_bundle_get(struct catalog *c, int exported, const char *target,
    uint32_t seq, struct catalog_bundle *b)
{
	return (bundle_query(c, "seq = ?3", exported, target, seq, b));
}

int
catalog_bundle_add(struct catalog *c, struct catalog_bundle *b,
    char *const *packs, size_t n)
{
	sqlite3_stmt *st = NULL;
	size_t i;

	if (cat_savepoint(c))
		return (-1);
	if ((st = cat_prepare(c, "INSERT INTO bundle(direction, target, seq,"
	    " level, base_seq, manifest, name, size, packs, snapshots,"
	    " created_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
	    " ?11)", "record a bundle")) == NULL)
		goto err;
	sqlite3_bind_text(st, 1, b->exported ? "export" : "import", -1,
	    SQLITE_STATIC);
	cat_bind_text(st, 2, b->target);
	sqlite3_bind_int64(st, 3, b->seq);
	sqlite3_bind_int(st, 4, b->level);
	sqlite3_bind_int64(st, 5, b->base_seq);
	sqlite3_bind_blob(st, 6, b->manifest, sizeof(b->manifest),
	    SQLITE_STATIC);
	cat_bind_text(st, 7, b->name);
	sqlite3_bind_int64(st, 8, (int64_t)b->size);
	sqlite3_bind_int64(st, 9, b->packs);
	cat_bind_text(st, 10, b->snapshots ? b->snapshots : "");
	sqlite3_bind_int64(st, 11, b->created_ns);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	b->id = sqlite3_last_insert_rowid(c->db);
	if ((st = cat_prepare(c, "INSERT OR IGNORE INTO bundle_pack(bundle_id,"
	    " pack) VALUES (?1, ?2)", "record a bundle's packs")) == NULL)
		goto err;
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, b->id);
		cat_bind_text(st, 2, packs[i]);
		if (sqlite3_step(st) != SQLITE_DONE)
			goto sqlerr;
	}
	sqlite3_finalize(st);
	return (cat_release(c));
sqlerr:
	log_error("cannot record bundle '%s': %s", b->name,
	    sqlite3_errmsg(c->db));
err:
	sqlite3_finalize(st);
	cat_rollback_to(c);
	return (-1);
}

int
catalog_bundle_held(struct catalog *c, const char *target, uint32_t from_seq,
    uint32_t to_seq, char ***packs, size_t *n)
{
	return (cat_strings(c, "SELECT DISTINCT bp.pack FROM bundle b"
	    " JOIN bundle_pack bp ON bp.bundle_id = b.id"
	    " WHERE b.direction = 'export' AND b.target = ?1"
	    " AND b.seq BETWEEN ?2 AND ?3 ORDER BY bp.pack",
	    "list what a target holds", CAT_VALS(CAT_TEXT(target),
	    CAT_INT(from_seq), CAT_INT(to_seq)), packs, n));
}

int
catalog_bundle_list(struct catalog *c, int exported, const char *target,
    int (*cb)(void *arg, const struct catalog_bundle *b), void *arg)
{
	struct catalog_bundle b;
	sqlite3_stmt *st;
	int rc, ret = 0;

	if ((st = cat_prepare(c, "SELECT " BUNDLE_COLS " FROM bundle"
	    " WHERE direction = ?1 AND (?2 IS NULL OR target = ?2)"
	    " ORDER BY target, seq", "list the bundles")) == NULL)
		return (-1);
	sqlite3_bind_text(st, 1, exported ? "export" : "import", -1,
	    SQLITE_STATIC);
	cat_bind_text(st, 2, target);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (col_bundle(st, &b)) {
			ret = -1;
			break;
		}
		ret = cb(arg, &b);
		catalog_bundle_release(&b);
		if (ret)
			break;
	}
	if (ret == 0 && rc != SQLITE_DONE) {
		log_error("cannot list the bundles: %s", sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_chain_packs(struct catalog *c, int64_t snapshot_id,
    uint32_t overhead, char ***packs, uint64_t **need, size_t *n)
{
	sqlite3_stmt *st;
	char **v = NULL;
	uint64_t *b = NULL;
	size_t k = 0, cap = 0, bcap = 0;
	int rc;

	*packs = NULL;
	*need = NULL;
	*n = 0;
	if ((st = cat_prepare(c, "WITH RECURSIVE chain(id) AS ("
	    " SELECT ?1 UNION SELECT s.parent_id FROM snapshot s"
	    " JOIN chain ON s.id = chain.id WHERE s.parent_id IS NOT NULL),"
	    " used(id) AS (SELECT DISTINCT cc.chunk_id FROM chain"
	    "  JOIN entry e ON e.snapshot_id = chain.id"
	    "  JOIN content_chunk cc ON cc.content_id = e.content_id"
	    "  WHERE e.content_id IS NOT NULL),"
	    " need(pack_id, bytes) AS (SELECT ch.pack_id,"
	    "  sum(ch.stored_len + ?2) FROM used JOIN chunk ch"
	    "  ON ch.id = used.id WHERE ch.pack_id IS NOT NULL"
	    "  GROUP BY ch.pack_id)"
	    " SELECT p.name, coalesce(need.bytes, 0) FROM pack p"
	    " LEFT JOIN need ON need.pack_id = p.id"
	    " WHERE need.pack_id IS NOT NULL OR p.name IN (SELECT record_pack"
	    "  FROM snapshot WHERE id IN chain AND record_pack IS NOT NULL)"
	    " ORDER BY p.name", "find the packs of a chain")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, snapshot_id);
	sqlite3_bind_int64(st, 2, overhead);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (array_grow(&v, &cap, k, sizeof(*v), 256) ||
		    array_grow(&b, &bcap, k, sizeof(*b), 256) ||
		    (v[k] = strdup((const char *)sqlite3_column_text(st,
		    0))) == NULL) {
			log_errno("find the packs of a chain");
			goto err;
		}
		b[k++] = (uint64_t)sqlite3_column_int64(st, 1);
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot find the packs of a chain: %s",
		    sqlite3_errmsg(c->db));
		goto err;
	}
	sqlite3_finalize(st);
	*packs = v;
	*need = b;
	*n = k;
	return (0);
err:
	sqlite3_finalize(st);
	names_free(v, k);
	free(b);
	return (-1);
}

/* A journal record is alone in its pack (doc/format.md): the packs that
 * catalog_journal_mark or catalog_pack_import noted as the journal's. */
int
catalog_journal_packs(struct catalog *c, char ***packs, size_t *n)
{
	return (cat_strings(c, "SELECT name FROM pack WHERE journal = 1"
	    " ORDER BY name", "find the packs of the journal", NULL, 0, packs,
	    n));
}
