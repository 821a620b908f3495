#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/hex.h"
#include "coffer/log.h"

/* Short hex of an id for messages: enough to grep for, not a wall. */
static const char *
short_hex(char out[17], const uint8_t *id)
{
	hex_encode(out, id, 8);
	return (out);
}

int
catalog_chunk_find(struct catalog *c, const uint8_t cid[32], int64_t *rowid)
{
	sqlite3_stmt *st;
	char h[17];
	int rc, ret;

	if ((st = cat_stmt(c, ST_CHUNK_FIND)) == NULL)
		return (-1);
	sqlite3_bind_blob(st, 1, cid, 32, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*rowid = sqlite3_column_int64(st, 0);
		ret = sqlite3_column_int(st, 1) ? 1 : 0;
	} else if (rc == SQLITE_DONE) {
		*rowid = 0;
		ret = 0;
	} else {
		log_error("cannot look up chunk %s: %s", short_hex(h, cid),
		    sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_reset(st);
	return (ret);
}

/* Insert a chunk row without a location unless cid has one: 1 inserted
 * (*rowid its row), 0 there already, -1 on error (reported). */
static int
chunk_insert(struct catalog *c, const uint8_t cid[32], int64_t *rowid)
{
	sqlite3_stmt *st;
	char h[17];
	int rc;

	if ((st = cat_stmt(c, ST_CHUNK_ADD)) == NULL)
		return (-1);
	sqlite3_bind_blob(st, 1, cid, 32, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot add chunk %s: %s", short_hex(h, cid),
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	if (sqlite3_changes(c->db) != 1)
		return (0);
	*rowid = sqlite3_last_insert_rowid(c->db);
	return (1);
}

int
catalog_chunk_claim(struct catalog *c, const uint8_t cid[32], int64_t *rowid)
{
	char h[17];
	int rc, found;

	/* Mostly new chunks: the insert first (cat_known). */
	if (c->chunk_known < 0 && (rc = chunk_insert(c, cid, rowid)) != 0) {
		if (rc < 0)
			return (-1);
		cat_known(&c->chunk_known, 0);
		return (0);
	}
	/* Known, or left without a location by a crashed run (or two
	 * files of one run share it): its row. */
	if ((found = catalog_chunk_find(c, cid, rowid)) < 0)
		return (-1);
	if (found == 0 && *rowid == 0 &&
	    (rc = chunk_insert(c, cid, rowid)) != 1) {
		if (rc == 0)
			log_error("internal error: chunk %s both missing and "
			    "there", short_hex(h, cid));
		return (-1);
	}
	cat_known(&c->chunk_known, found);
	return (found);
}

int
catalog_chunk_add(struct catalog *c, const uint8_t cid[32], int64_t *rowid)
{
	return (catalog_chunk_claim(c, cid, rowid) < 0 ? -1 : 0);
}

int
catalog_pack_add(struct catalog *c, const char *name, uint64_t size,
    const uint8_t hash[32], int64_t *rowid)
{
	sqlite3_stmt *st;
	int rc, ret = -1;

	if (name == NULL || !cat_is_hex(name, 32)) {
		log_error("bad pack name '%s'", name ? name : "");
		return (-1);
	}
	if (size > INT64_MAX) {
		log_error("cannot add pack '%s': bad size", name);
		return (-1);
	}
	/*
	 * Adding a pack twice (an import of a bundle already imported) is
	 * fine when it is the same pack; the same name with another size or
	 * hash is not.
	 */
	if ((st = cat_prepare(c, "INSERT INTO pack(name, size, hash,"
	    " created_ns, journal) VALUES (?1, ?2, ?3, ?4, 0)"
	    " ON CONFLICT(name) DO NOTHING", "add a pack")) == NULL)
		return (-1);
	cat_bind_text(st, 1, name);
	sqlite3_bind_int64(st, 2, (int64_t)size);
	sqlite3_bind_blob(st, 3, hash, 32, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, cat_now_ns());
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot add pack '%s': %s", name,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	if (sqlite3_changes(c->db) == 1) {
		*rowid = sqlite3_last_insert_rowid(c->db);
		ret = 0;
		goto out;
	}
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, "SELECT id FROM pack WHERE name = ?1"
	    " AND size = ?2 AND hash = ?3", "add a pack")) == NULL)
		return (-1);
	cat_bind_text(st, 1, name);
	sqlite3_bind_int64(st, 2, (int64_t)size);
	sqlite3_bind_blob(st, 3, hash, 32, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*rowid = sqlite3_column_int64(st, 0);
		ret = 0;
	} else if (rc == SQLITE_DONE) {
		log_error("cannot add pack '%s': the catalog has a pack of "
		    "that name with another size or hash", name);
	} else {
		log_error("cannot add pack '%s': %s", name,
		    sqlite3_errmsg(c->db));
	}
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_chunk_locate(struct catalog *c, int64_t chunk_rowid,
    int64_t pack_rowid, const struct catalog_chunk_loc *loc)
{
	sqlite3_stmt *st;
	int rc;

	if (loc->pack_offset > INT64_MAX) {
		log_error("cannot locate chunk %lld: bad offset",
		    (long long)chunk_rowid);
		return (-1);
	}
	if ((st = cat_stmt(c, ST_CHUNK_LOCATE)) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, chunk_rowid);
	sqlite3_bind_int64(st, 2, pack_rowid);
	sqlite3_bind_int64(st, 3, (int64_t)loc->pack_offset);
	sqlite3_bind_int64(st, 4, loc->plain_len);
	sqlite3_bind_int64(st, 5, loc->stored_len);
	sqlite3_bind_int(st, 6, loc->type);
	sqlite3_bind_int(st, 7, loc->flags);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot record location of chunk %lld in pack "
		    "%lld: %s", (long long)chunk_rowid, (long long)pack_rowid,
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	if (sqlite3_changes(c->db) != 1) {
		log_error("cannot record location of chunk %lld: no such "
		    "chunk", (long long)chunk_rowid);
		return (-1);
	}
	return (0);
}

/* The pairs must be in file order, not overlap and stay within size. */
static int
refs_ok(uint64_t size, const struct catalog_chunk_ref *refs, size_t n)
{
	uint64_t end = 0;
	size_t i;

	if (size > INT64_MAX)
		return (0);
	for (i = 0; i < n; i++) {
		if (refs[i].file_offset < end || refs[i].len == 0 ||
		    refs[i].len > size ||
		    refs[i].file_offset > size - refs[i].len)
			return (0);
		end = refs[i].file_offset + refs[i].len;
	}
	return (1);
}

/* Insert a content row unless its hash has one: 1 inserted, 0 there
 * already, -1 on error (the caller reports). */
static int
content_insert(struct catalog *c, const uint8_t hash[32], uint64_t size,
    size_t n)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_stmt(c, ST_CONTENT_CLAIM)) == NULL)
		return (-1);
	sqlite3_bind_blob(st, 1, hash, 32, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)size);
	sqlite3_bind_int64(st, 3, (int64_t)n);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return (-1);
	return (sqlite3_changes(c->db) == 1);
}

int
catalog_content_put(struct catalog *c, const uint8_t hash[32],
    uint64_t size, const struct catalog_chunk_ref *refs, size_t n,
    int64_t *content_id)
{
	sqlite3_stmt *st;
	char h[17];
	size_t i;
	int rc;

	if (!refs_ok(size, refs, n)) {
		log_error("cannot add content %s: chunk list out of order or "
		    "beyond its size", short_hex(h, hash));
		return (-1);
	}
	/* Mostly new contents: the insert first (cat_known). */
	if (c->content_known < 0 &&
	    (rc = content_insert(c, hash, size, n)) != 0) {
		if (rc < 0)
			goto sqlerr;
		goto added;
	}
	if ((st = cat_stmt(c, ST_CONTENT_FIND)) == NULL)
		return (-1);
	sqlite3_bind_blob(st, 1, hash, 32, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		cat_known(&c->content_known, 1);
		*content_id = sqlite3_column_int64(st, 0);
		/* The hash covers the pairs, so a size mismatch is a bug in
		 * the caller or a damaged catalog, never a coincidence. */
		if ((uint64_t)sqlite3_column_int64(st, 1) != size) {
			sqlite3_reset(st);
			log_error("content %s is in the catalog with another "
			    "size", short_hex(h, hash));
			return (-1);
		}
		sqlite3_reset(st);
		return (0);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot look up content %s: %s", short_hex(h, hash),
		    sqlite3_errmsg(c->db));
		return (-1);
	}

	/*
	 * The row and its chunk list must go in together, since a content
	 * found by hash must be complete: the caller's transaction makes
	 * them one, and a failure here is the caller's cue to roll it back.
	 * No savepoint of its own: one per file had SQLite copy every page
	 * the two inserts touch into a sub-journal, about an eighth of a
	 * small file's catalog work.
	 */
	if (content_insert(c, hash, size, n) != 1)
		goto sqlerr;
added:
	cat_known(&c->content_known, 0);
	*content_id = sqlite3_last_insert_rowid(c->db);
	if ((st = cat_stmt(c, ST_CONTENT_CHUNK_ADD)) == NULL)
		goto err;
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, *content_id);
		sqlite3_bind_int64(st, 2, (int64_t)i);
		sqlite3_bind_int64(st, 3, refs[i].chunk_rowid);
		sqlite3_bind_int64(st, 4, (int64_t)refs[i].file_offset);
		sqlite3_bind_int64(st, 5, refs[i].len);
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			sqlite3_reset(st);
			goto sqlerr;
		}
	}
	sqlite3_reset(st);
	return (0);
sqlerr:
	log_error("cannot add content %s: %s", short_hex(h, hash),
	    sqlite3_errmsg(c->db));
err:
	*content_id = 0;
	return (-1);
}

/* 1 if the content row exists, 0 if not (reported), -1 on error. */
static int
content_exists(struct catalog *c, int64_t content_id)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(c, "SELECT 1 FROM content WHERE id = ?1",
	    "look up a content")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, content_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		log_error("no content %lld in the catalog",
		    (long long)content_id);
	else if (rc != SQLITE_ROW)
		log_error("cannot look up content %lld: %s",
		    (long long)content_id, sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return (rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1);
}

int
catalog_content_info(struct catalog *c, int64_t content_id, uint8_t hash[32],
    uint64_t *size)
{
	sqlite3_stmt *st;
	const void *h = NULL;
	int rc, ret = -1;

	if ((st = cat_stmt(c, ST_CONTENT_INFO)) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, content_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		h = sqlite3_column_blob(st, 0);
	if (h != NULL && sqlite3_column_bytes(st, 0) == 32 &&
	    sqlite3_column_int64(st, 1) >= 0) {
		memcpy(hash, h, 32);
		*size = (uint64_t)sqlite3_column_int64(st, 1);
		ret = 0;
	} else if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		log_error("content %lld: not in the catalog, or damaged",
		    (long long)content_id);
	else
		log_error("cannot read content %lld: %s",
		    (long long)content_id, sqlite3_errmsg(c->db));
	sqlite3_reset(st);
	return (ret);
}

/*
 * The rows of st (ST_CONTENT_CHUNKS or _PAGE, bound) as locations; the
 * last one's seq in *seq when st gives it.  0 or -1 (reported).
 */
static int
read_locs(struct catalog *c, sqlite3_stmt *st, int64_t content_id,
    struct catalog_chunk_loc **locs, size_t *n, int64_t *seq)
{
	struct catalog_chunk_loc *v = NULL, *l;
	const unsigned char *t;
	const void *cid;
	size_t cap = 0, len = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (array_grow(&v, &cap, len, sizeof(*v), 16))
			goto err;
		l = &v[len++];
		memset(l, 0, sizeof(*l));
		l->rowid = sqlite3_column_int64(st, 0);
		cid = sqlite3_column_blob(st, 1);
		if (cid == NULL || sqlite3_column_bytes(st, 1) != 32) {
			log_error("content %lld: chunk %lld has a bad id",
			    (long long)content_id, (long long)l->rowid);
			goto err;
		}
		memcpy(l->cid, cid, 32);
		if ((t = sqlite3_column_text(st, 2)) != NULL) {
			if (!cat_is_hex((const char *)t, 32)) {
				log_error("content %lld: bad pack name '%s'",
				    (long long)content_id, (const char *)t);
				goto err;
			}
			memcpy(l->pack, t, 33);
		}
		l->pack_offset = (uint64_t)sqlite3_column_int64(st, 3);
		l->plain_len = (uint32_t)sqlite3_column_int64(st, 4);
		l->stored_len = (uint32_t)sqlite3_column_int64(st, 5);
		l->type = (uint8_t)sqlite3_column_int(st, 6);
		l->flags = (uint8_t)sqlite3_column_int(st, 7);
		l->file_offset = (uint64_t)sqlite3_column_int64(st, 8);
		if (seq != NULL)
			*seq = sqlite3_column_int64(st, 9);
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot read the chunks of content %lld: %s",
		    (long long)content_id, sqlite3_errmsg(c->db));
		goto err;
	}
	sqlite3_reset(st);
	*locs = v;
	*n = len;
	return (0);
err:
	sqlite3_reset(st);
	free(v);
	return (-1);
}

int
catalog_content_chunks(struct catalog *c, int64_t content_id,
    struct catalog_chunk_loc **locs, size_t *n)
{
	sqlite3_stmt *st;

	*locs = NULL;
	*n = 0;
	if ((st = cat_stmt(c, ST_CONTENT_CHUNKS)) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, content_id);
	if (read_locs(c, st, content_id, locs, n, NULL))
		return (-1);
	/* No rows: an empty content, or none at all (a caller's bug). */
	if (*n == 0 && content_exists(c, content_id) != 1)
		return (-1);
	return (0);
}

int
catalog_content_chunks_page(struct catalog *c, int64_t content_id,
    int64_t *seq, size_t max, struct catalog_chunk_loc **locs, size_t *n)
{
	sqlite3_stmt *st;

	*locs = NULL;
	*n = 0;
	if ((st = cat_stmt(c, ST_CONTENT_CHUNKS_PAGE)) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, content_id);
	sqlite3_bind_int64(st, 2, *seq);
	sqlite3_bind_int64(st, 3, (int64_t)max);
	return (read_locs(c, st, content_id, locs, n, seq));
}

int
catalog_chunks_mark_damaged(struct catalog *c, const int64_t *rows, size_t n)
{
	sqlite3_stmt *st;
	size_t i;
	int ret = -1;

	if (n == 0)
		return (0);
	if (cat_savepoint(c))
		return (-1);
	if ((st = cat_prepare(c, "UPDATE chunk SET damaged = 1 WHERE id = ?1",
	    "mark damaged chunks")) == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, rows[i]);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot mark damaged chunks: %s",
			    sqlite3_errmsg(c->db));
			goto out;
		}
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	if (ret == 0)
		return (cat_release(c));
	cat_rollback_to(c);
	return (-1);
}

int
catalog_pack_rehash(struct catalog *c, const char *name,
    const uint8_t hash[32])
{
	return (cat_run(c, "UPDATE pack SET hash = ?2 WHERE name = ?1",
	    "note a pack's new header", CAT_VALS(CAT_TEXT(name),
	    CAT_BLOB(hash, 32)), NULL, NULL));
}

struct places {
	struct catalog_chunk_place *v;
	size_t n, cap;
	int64_t rowid;
};

static int
place_row(void *arg, sqlite3_stmt *st)
{
	struct places *ps = arg;
	struct catalog_chunk_place *pl;
	const char *name = (const char *)sqlite3_column_text(st, 1);
	const void *cid = sqlite3_column_blob(st, 8);

	if (sqlite3_column_bytes(st, 8) != (int)sizeof(ps->v->loc.cid))
		return (0);
	if (array_grow(&ps->v, &ps->cap, ps->n, sizeof(*ps->v), 4))
		return (-1);
	pl = &ps->v[ps->n++];
	memset(pl, 0, sizeof(*pl));
	pl->pack_id = sqlite3_column_int64(st, 0);
	snprintf(pl->loc.pack, sizeof(pl->loc.pack), "%s",
	    name != NULL ? name : "");
	memcpy(pl->loc.cid, cid, sizeof(pl->loc.cid));
	pl->loc.rowid = ps->rowid;
	pl->loc.pack_offset = (uint64_t)sqlite3_column_int64(st, 2);
	pl->loc.plain_len = (uint32_t)sqlite3_column_int64(st, 3);
	pl->loc.stored_len = (uint32_t)sqlite3_column_int64(st, 4);
	pl->loc.type = (uint8_t)sqlite3_column_int(st, 5);
	pl->loc.flags = (uint8_t)sqlite3_column_int(st, 6);
	pl->located = sqlite3_column_int(st, 7);
	return (0);
}

int
catalog_chunk_places(struct catalog *c, int64_t rowid, int64_t not_pack,
    struct catalog_chunk_place **places, size_t *n)
{
	/* By the chunk's row and chunk_copy's key: a prune or verify pays
	 * for the chunks it asks about. */
	static const char sql[] =
	    "SELECT x.pack_id, p.name, x.pack_offset, x.plain_len,"
	    " x.stored_len, x.type, x.flags, x.located, ch.cid FROM"
	    " (SELECT pack_id, pack_offset, plain_len, stored_len, type,"
	    " flags, 1 AS located FROM chunk WHERE id = ?1 AND damaged = 0"
	    " UNION ALL SELECT pack_id, pack_offset, plain_len, stored_len,"
	    " type, flags, 0 FROM chunk_copy WHERE chunk_id = ?1) x"
	    " JOIN pack p ON p.id = x.pack_id JOIN chunk ch ON ch.id = ?1"
	    " WHERE x.pack_id IS NOT (CASE WHEN ?2 < 0 THEN ch.pack_id"
	    " ELSE ?2 END)"
	    " AND x.pack_id NOT IN (SELECT id FROM temp.gone)"
	    " AND NOT EXISTS (SELECT 1 FROM condemned d WHERE d.name = p.name)"
	    " ORDER BY x.located DESC, x.pack_id";
	struct places ps;

	memset(&ps, 0, sizeof(ps));
	ps.rowid = rowid;
	*places = NULL;
	*n = 0;
	if (cat_run(c, sql, "find the copies of a chunk",
	    CAT_VALS(CAT_INT(rowid), CAT_INT(not_pack)), place_row, &ps)) {
		free(ps.v);
		return (-1);
	}
	*places = ps.v;
	*n = ps.n;
	return (0);
}

int
catalog_chunk_copy_drop(struct catalog *c, int64_t chunk_rowid,
    int64_t pack_id)
{
	return (cat_run(c, "DELETE FROM chunk_copy WHERE chunk_id = ?1"
	    " AND pack_id = ?2", "forget a copy of a chunk",
	    CAT_VALS(CAT_INT(chunk_rowid), CAT_INT(pack_id)), NULL, NULL) ?
	    -1 : 0);
}
