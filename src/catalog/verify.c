/*
 * The catalog's side of integrity: the chunks that complete snapshots
 * need, what a damaged chunk breaks, the snapshot id inside a snapshot
 * record, verify's resume state and the drill history.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog-record.h"
#include "coffer/log.h"

/*
 * The snapshots whose rows complete snapshots need: the complete ones and
 * every snapshot in their chains.  UNION, not UNION ALL: each once, and a
 * damaged catalog whose parent links loop still terminates.
 */
#define KEEP_CTE                                                          \
	"keep(id) AS ("                                                   \
	" SELECT id FROM snapshot WHERE state = 1"                        \
	" UNION"                                                          \
	" SELECT s.parent_id FROM keep JOIN snapshot s ON s.id = keep.id" \
	" WHERE s.parent_id IS NOT NULL)"

/*
 * Every chunk that an entry row of those snapshots uses, once, in pack
 * order.  A superset of the union of their resolved views (a row that a
 * newer link of the chain hides is still counted): what it costs is a few
 * chunks verified that only an older, still complete, snapshot needs.
 * The contents are made distinct first: the fulls of one dataset share
 * most of them, so each content's chunk list is read once, not once per
 * snapshot.  Chunks without a pack (NULL name) sort first.
 */
static const char needed_sql[] =
	"WITH RECURSIVE " KEEP_CTE
	" SELECT ch.id, ch.cid, p.name, ch.pack_offset, ch.plain_len,"
	" ch.stored_len, ch.type, ch.flags"
	" FROM chunk ch LEFT JOIN pack p ON p.id = ch.pack_id"
	" WHERE ch.id IN (SELECT cc.chunk_id FROM content_chunk cc"
	"  WHERE cc.content_id IN (SELECT e.content_id FROM keep"
	"  CROSS JOIN entry e ON e.snapshot_id = keep.id"
	"  WHERE e.content_id IS NOT NULL))"
	" AND (?1 IS NULL OR p.name > ?1)"
	" ORDER BY p.name, ch.pack_offset";

struct catalog_chunk_iter {
	struct catalog *c;
	sqlite3_stmt *st;
	int done;
};

struct catalog_chunk_iter *
catalog_needed_chunks(struct catalog *c, const char *after)
{
	struct catalog_chunk_iter *it;

	if ((it = calloc(1, sizeof(*it))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	it->c = c;
	if ((it->st = cat_prepare(c, needed_sql,
	    "list the chunks that snapshots need")) == NULL) {
		free(it);
		return (NULL);
	}
	cat_bind_text(it->st, 1, after);
	return (it);
}

int
catalog_chunk_iter_next(struct catalog_chunk_iter *it,
    struct catalog_chunk_loc *loc)
{
	const unsigned char *t;
	const void *cid;
	int rc;

	if (it->done)
		return (0);
	rc = sqlite3_step(it->st);
	if (rc == SQLITE_DONE) {
		it->done = 1;
		return (0);
	}
	if (rc != SQLITE_ROW) {
		log_error("cannot list the chunks that snapshots need: %s",
		    sqlite3_errmsg(it->c->db));
		return (-1);
	}
	memset(loc, 0, sizeof(*loc));
	loc->rowid = sqlite3_column_int64(it->st, 0);
	cid = sqlite3_column_blob(it->st, 1);
	if (cid == NULL || sqlite3_column_bytes(it->st, 1) != 32) {
		log_error("catalog: chunk %lld has a bad id",
		    (long long)loc->rowid);
		return (-1);
	}
	memcpy(loc->cid, cid, 32);
	if ((t = sqlite3_column_text(it->st, 2)) != NULL) {
		if (!cat_is_hex((const char *)t, 32)) {
			log_error("catalog: chunk %lld: bad pack name '%s'",
			    (long long)loc->rowid, (const char *)t);
			return (-1);
		}
		memcpy(loc->pack, t, 33);
	}
	loc->pack_offset = (uint64_t)sqlite3_column_int64(it->st, 3);
	loc->plain_len = (uint32_t)sqlite3_column_int64(it->st, 4);
	loc->stored_len = (uint32_t)sqlite3_column_int64(it->st, 5);
	loc->type = (uint8_t)sqlite3_column_int(it->st, 6);
	loc->flags = (uint8_t)sqlite3_column_int(it->st, 7);
	return (1);
}

void
catalog_chunk_iter_free(struct catalog_chunk_iter *it)
{
	if (it == NULL)
		return;
	sqlite3_finalize(it->st);
	free(it);
}

int
catalog_packs(struct catalog *c, struct catalog_pack **out, size_t *n)
{
	struct catalog_pack *v = NULL, *p;
	sqlite3_stmt *st;
	const unsigned char *t;
	size_t len = 0, cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if ((st = cat_prepare(c, "SELECT id, name, size FROM pack"
	    " ORDER BY name", "list packs")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (array_grow(&v, &cap, len, sizeof(*v), 64))
			goto err;
		p = &v[len++];
		memset(p, 0, sizeof(*p));
		p->rowid = sqlite3_column_int64(st, 0);
		t = sqlite3_column_text(st, 1);
		if (t == NULL || !cat_is_hex((const char *)t, 32)) {
			log_error("catalog: pack %lld has a bad name",
			    (long long)p->rowid);
			goto err;
		}
		memcpy(p->name, t, 33);
		p->size = (uint64_t)sqlite3_column_int64(st, 2);
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot list packs: %s", sqlite3_errmsg(c->db));
		goto err;
	}
	sqlite3_finalize(st);
	*out = v;
	*n = len;
	return (0);
err:
	sqlite3_finalize(st);
	free(v);
	return (-1);
}

/*
 * What a set of damaged chunks breaks, in one query.
 *
 * chain: every complete snapshot (root) with the links of its chain, at
 * their depth below it.  hit: the entry rows, in any of those chains,
 * whose content uses a damaged chunk (driven by the indexes on
 * content_chunk(chunk_id) and entry(content_id), so the cost follows the
 * damage, not the catalog; CROSS JOIN keeps that order whatever the
 * planner guesses of a temporary table without statistics).  Such a row
 * breaks its root only when it is what the root's view resolves for that
 * path: when no link nearer the root (smaller depth) has a row, or a
 * tombstone, for the same path.
 */
static const char breaks_sql[] =
	"WITH RECURSIVE chain(root, id, parent, depth) AS ("
	" SELECT id, id, parent_id, 0 FROM snapshot WHERE state = 1"
	" UNION ALL"
	" SELECT chain.root, s.id, s.parent_id, chain.depth + 1"
	" FROM chain JOIN snapshot s ON s.id = chain.parent"
	" WHERE chain.depth < 100000),"
	" bad_content(id) AS (SELECT DISTINCT cc.content_id"
	"  FROM temp.coffer_bad b"
	"  CROSS JOIN content_chunk cc ON cc.chunk_id = b.chunk_id),"
	" hit(root, path_id, depth) AS (SELECT chain.root, e.path_id,"
	"  chain.depth FROM bad_content bc"
	"  CROSS JOIN entry e ON e.content_id = bc.id"
	"  CROSS JOIN chain ON chain.id = e.snapshot_id)"
	" SELECT DISTINCT s.sid, d.name, p.name, s.started_ns FROM hit"
	" CROSS JOIN snapshot s ON s.id = hit.root"
	" CROSS JOIN dataset d ON d.id = s.dataset_id"
	" CROSS JOIN path p ON p.id = hit.path_id"
	" WHERE NOT EXISTS (SELECT 1 FROM chain c2"
	"  CROSS JOIN entry e2 ON e2.snapshot_id = c2.id"
	"  AND e2.path_id = hit.path_id"
	"  WHERE c2.root = hit.root AND c2.depth < hit.depth)"
	" ORDER BY d.name, s.started_ns, s.sid, p.name";

int
catalog_chunks_break(struct catalog *c, const int64_t *chunks, size_t n,
    int (*cb)(void *arg, const char *sid, const char *dataset,
    const char *path), void *arg)
{
	sqlite3_stmt *st = NULL;
	size_t i;
	int rc, ret = -1;

	if (n == 0)
		return (0);
	if (cat_exec(c, "DROP TABLE IF EXISTS temp.coffer_bad;"
	    " CREATE TEMP TABLE coffer_bad(chunk_id INTEGER PRIMARY KEY)",
	    "prepare the damage report"))
		return (-1);
	if ((st = cat_prepare(c, "INSERT OR IGNORE INTO temp.coffer_bad"
	    " VALUES (?1)", "prepare the damage report")) == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, chunks[i]);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot prepare the damage report: %s",
			    sqlite3_errmsg(c->db));
			goto out;
		}
	}
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, breaks_sql,
	    "find what damaged chunks break")) == NULL)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *sid = (const char *)sqlite3_column_text(st, 0);
		const char *ds = (const char *)sqlite3_column_text(st, 1);
		const char *path = (const char *)sqlite3_column_text(st, 2);

		if (sid == NULL || ds == NULL || path == NULL) {
			log_error("cannot find what damaged chunks break: "
			    "out of memory");
			goto out;
		}
		if ((rc = cb(arg, sid, ds, path)) != 0) {
			ret = rc;
			goto done;
		}
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot find what damaged chunks break: %s",
		    sqlite3_errmsg(c->db));
		goto out;
	}
	ret = 0;
	goto done;
out:
	ret = -1;
done:
	sqlite3_finalize(st);
	(void)cat_exec(c, "DROP TABLE IF EXISTS temp.coffer_bad",
	    "clean up the damage report");
	return (ret);
}

int
catalog_record_sid(const void *img, size_t len,
    char sid[SNAPSHOT_ID_HEX + 1])
{
	sqlite3 *mem = NULL;
	sqlite3_stmt *st = NULL;
	const unsigned char *t;
	int ret = -1;

	if (len == 0 || len > INT32_MAX) {
		log_error("snapshot record: bad image size %zu", len);
		return (-1);
	}
	if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK)
		goto sqlerr;
	/* Read-only and not freed by SQLite: the image stays the caller's
	 * and is never written. */
	if (sqlite3_deserialize(mem, "main", (unsigned char *)(uintptr_t)img,
	    (sqlite3_int64)len, (sqlite3_int64)len,
	    SQLITE_DESERIALIZE_READONLY) != SQLITE_OK)
		goto sqlerr;
	if (sqlite3_prepare_v2(mem, "SELECT value FROM meta WHERE key = 'sid'",
	    -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	if (sqlite3_step(st) != SQLITE_ROW)
		goto sqlerr;
	t = sqlite3_column_text(st, 0);
	if (t == NULL || !cat_is_hex((const char *)t, SNAPSHOT_ID_HEX)) {
		log_error("snapshot record: bad snapshot id");
		goto out;
	}
	memcpy(sid, t, SNAPSHOT_ID_HEX + 1);
	ret = 0;
	goto out;
sqlerr:
	log_error("snapshot record: cannot read its image: %s",
	    mem ? sqlite3_errmsg(mem) : "out of memory");
out:
	sqlite3_finalize(st);
	sqlite3_close(mem);
	return (ret);
}

int
catalog_verify_state_get(struct catalog *c, const char *mode,
    struct catalog_verify_state *vs)
{
	sqlite3_stmt *st;
	const unsigned char *t;
	int rc, ret = -1;

	memset(vs, 0, sizeof(*vs));
	if ((st = cat_prepare(c, "SELECT seed, last_pack, started_ns, packs,"
	    " chunks, bytes, errors FROM verify_state WHERE mode = ?1",
	    "read the verify state")) == NULL)
		return (-1);
	cat_bind_text(st, 1, mode);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		ret = 0;
		goto out;
	}
	if (rc != SQLITE_ROW) {
		log_error("cannot read the verify state: %s",
		    sqlite3_errmsg(c->db));
		goto out;
	}
	vs->seed = (uint64_t)sqlite3_column_int64(st, 0);
	t = sqlite3_column_text(st, 1);
	if (t == NULL || !cat_is_hex((const char *)t, 32)) {
		/* Not worth failing over: start the pass again. */
		log_warn("verify state of mode '%s' is damaged; starting "
		    "over", mode);
		ret = 0;
		goto out;
	}
	memcpy(vs->last_pack, t, 33);
	vs->started_ns = sqlite3_column_int64(st, 2);
	vs->packs = sqlite3_column_int64(st, 3);
	vs->chunks = sqlite3_column_int64(st, 4);
	vs->bytes = sqlite3_column_int64(st, 5);
	vs->errors = sqlite3_column_int64(st, 6);
	ret = 1;
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_verify_state_put(struct catalog *c, const char *mode,
    const struct catalog_verify_state *vs)
{
	sqlite3_stmt *st;
	int ret = -1;

	if (!cat_is_hex(vs->last_pack, 32)) {
		log_error("bad pack name '%s'", vs->last_pack);
		return (-1);
	}
	if ((st = cat_prepare(c, "INSERT OR REPLACE INTO verify_state(mode,"
	    " seed, last_pack, started_ns, packs, chunks, bytes, errors)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	    "save the verify state")) == NULL)
		return (-1);
	cat_bind_text(st, 1, mode);
	sqlite3_bind_int64(st, 2, (int64_t)vs->seed);
	cat_bind_text(st, 3, vs->last_pack);
	sqlite3_bind_int64(st, 4, vs->started_ns);
	sqlite3_bind_int64(st, 5, vs->packs);
	sqlite3_bind_int64(st, 6, vs->chunks);
	sqlite3_bind_int64(st, 7, vs->bytes);
	sqlite3_bind_int64(st, 8, vs->errors);
	if (sqlite3_step(st) != SQLITE_DONE)
		log_error("cannot save the verify state: %s",
		    sqlite3_errmsg(c->db));
	else
		ret = 0;
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_verify_state_clear(struct catalog *c, const char *mode)
{
	return (cat_run(c, "DELETE FROM verify_state WHERE mode = ?1",
	    "clear the verify state", CAT_VALS(CAT_TEXT(mode)), NULL, NULL));
}

/* A REAL that may be NULL: NULL for a negative value ("none"). */
static void
bind_opt(sqlite3_stmt *st, int i, double v)
{
	if (v >= 0)
		sqlite3_bind_double(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

static double
col_opt(sqlite3_stmt *st, int i)
{
	return (sqlite3_column_type(st, i) == SQLITE_NULL ? -1 :
	    sqlite3_column_double(st, i));
}

int
catalog_drill_add(struct catalog *c, struct catalog_drill *d)
{
	sqlite3_stmt *st;
	int ret = -1;

	if (!cat_is_hex(d->sid, SNAPSHOT_ID_HEX) || d->verdict == NULL) {
		log_error("cannot record the drill: bad snapshot id or "
		    "verdict");
		return (-1);
	}
	if ((st = cat_prepare(c, "INSERT INTO drill(time_ns, dataset_id,"
	    " snapshot_id, sid, mode, sample, files, bytes, failures,"
	    " seconds, check_seconds, estimate_seconds, rto_seconds,"
	    " rpo_seconds, rpo_age_seconds, verdict, source) VALUES (?1, ?2,"
	    " ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
	    " ?17)",
	    "record the drill")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, d->time_ns);
	sqlite3_bind_int64(st, 2, d->dataset_id);
	if (d->snapshot_id)
		sqlite3_bind_int64(st, 3, d->snapshot_id);
	cat_bind_text(st, 4, d->sid);
	cat_bind_text(st, 5, d->no_write ? "no-write" : "restore");
	sqlite3_bind_double(st, 6, d->sample);
	sqlite3_bind_int64(st, 7, d->files);
	sqlite3_bind_int64(st, 8, d->bytes);
	sqlite3_bind_int64(st, 9, d->failures);
	sqlite3_bind_double(st, 10, d->seconds);
	sqlite3_bind_double(st, 11, d->check_seconds);
	bind_opt(st, 12, d->estimate_seconds);
	bind_opt(st, 13, d->rto_seconds);
	bind_opt(st, 14, d->rpo_seconds);
	bind_opt(st, 15, d->rpo_age_seconds);
	cat_bind_text(st, 16, d->verdict);
	cat_bind_text(st, 17, d->source);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot record the drill: %s",
		    sqlite3_errmsg(c->db));
		goto out;
	}
	d->id = sqlite3_last_insert_rowid(c->db);
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_drill_list(struct catalog *c, const char *dataset, int latest,
    int (*cb)(void *arg, const struct catalog_drill *d), void *arg)
{
	struct catalog_drill d;
	sqlite3_stmt *st;
	const unsigned char *t;
	int rc, ret = 0;

	/* Its own statement: cb may use the catalog. */
	if ((st = cat_prepare(c, "SELECT dr.id, dr.time_ns, dr.dataset_id,"
	    " d.name, dr.snapshot_id, dr.sid, dr.mode, dr.sample, dr.files,"
	    " dr.bytes, dr.failures, dr.seconds, dr.check_seconds,"
	    " dr.estimate_seconds, dr.rto_seconds, dr.rpo_seconds,"
	    " dr.rpo_age_seconds, dr.verdict,"
	    " (SELECT max(s.started_ns) FROM snapshot s"
	    "  WHERE s.dataset_id = dr.dataset_id AND s.state = 1),"
	    " dr.source"
	    " FROM drill dr JOIN dataset d ON d.id = dr.dataset_id"
	    " WHERE (?1 IS NULL OR d.name = ?1)"
	    " AND (?2 = 0 OR dr.id = (SELECT x.id FROM drill x"
	    "  WHERE x.dataset_id = dr.dataset_id"
	    "  ORDER BY x.time_ns DESC, x.id DESC LIMIT 1))"
	    " ORDER BY d.name, dr.time_ns, dr.id", "list drills")) == NULL)
		return (-1);
	cat_bind_text(st, 1, dataset);
	sqlite3_bind_int(st, 2, latest != 0);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&d, 0, sizeof(d));
		d.id = sqlite3_column_int64(st, 0);
		d.time_ns = sqlite3_column_int64(st, 1);
		d.dataset_id = sqlite3_column_int64(st, 2);
		d.dataset = (const char *)sqlite3_column_text(st, 3);
		d.snapshot_id = sqlite3_column_int64(st, 4);
		t = sqlite3_column_text(st, 5);
		if (t != NULL && strlen((const char *)t) <= SNAPSHOT_ID_HEX)
			memcpy(d.sid, t, strlen((const char *)t) + 1);
		t = sqlite3_column_text(st, 6);
		d.no_write = t != NULL && strcmp((const char *)t,
		    "no-write") == 0;
		d.sample = sqlite3_column_double(st, 7);
		d.files = sqlite3_column_int64(st, 8);
		d.bytes = sqlite3_column_int64(st, 9);
		d.failures = sqlite3_column_int64(st, 10);
		d.seconds = sqlite3_column_double(st, 11);
		d.check_seconds = sqlite3_column_double(st, 12);
		d.estimate_seconds = col_opt(st, 13);
		d.rto_seconds = col_opt(st, 14);
		d.rpo_seconds = col_opt(st, 15);
		d.rpo_age_seconds = col_opt(st, 16);
		d.verdict = (const char *)sqlite3_column_text(st, 17);
		d.newest_ns = sqlite3_column_int64(st, 18);
		d.source = (const char *)sqlite3_column_text(st, 19);
		if (d.dataset == NULL || d.verdict == NULL) {
			log_error("cannot list drills: out of memory");
			ret = -1;
			break;
		}
		if ((ret = cb(arg, &d)) != 0)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot list drills: %s", sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_lost(struct catalog *c, const char *sid,
    catalog_snapshot_fn *fn, void *arg)
{
	sqlite3_stmt *st;
	int rc, ret = 0;

	/* A record whose parent a rebuild lacks is left out: the whole
	 * subtree below sid goes with it. */
	if ((st = cat_prepare(c, "WITH RECURSIVE below(id, depth) AS ("
	    " SELECT id, 0 FROM snapshot WHERE sid = ?1"
	    " UNION SELECT s.id, b.depth + 1 FROM snapshot s"
	    " JOIN below b ON s.parent_id = b.id)"
	    " SELECT s.sid, d.name FROM below b JOIN snapshot s ON s.id = b.id"
	    " JOIN dataset d ON d.id = s.dataset_id WHERE s.state = 1"
	    " ORDER BY b.depth, s.sid", "find what a record holds")) == NULL)
		return (-1);
	cat_bind_text(st, 1, sid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((ret = fn(arg, (const char *)sqlite3_column_text(st, 0),
		    (const char *)sqlite3_column_text(st, 1))) != 0)
			break;
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot find what a record holds: %s",
		    sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_of_part(struct catalog *c, const uint8_t *rid, char *sid)
{
	sqlite3_stmt *st;
	int rc, ret = 0;

	if ((st = cat_prepare(c, "SELECT s.sid FROM snapshot_part p"
	    " JOIN snapshot s ON s.id = p.snapshot_id WHERE p.rid = ?1"
	    " LIMIT 1", "find a record part")) == NULL)
		return (-1);
	sqlite3_bind_blob(st, 1, rid, 32, SQLITE_STATIC);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(sid, 33, "%s", (const char *)sqlite3_column_text(st,
		    0));
		ret = 1;
	} else if (rc != SQLITE_DONE) {
		log_error("cannot find a record part: %s",
		    sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_verify_run_add(struct catalog *c, const struct catalog_verify_run *v)
{
	sqlite3_stmt *st;
	int ret = -1;

	if ((st = cat_prepare(c, "INSERT INTO verify(time_ns, host, mode,"
	    " slice_n, slice_m, complete, packs, packs_read, bytes_read,"
	    " damage, seconds, verdict) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,"
	    " ?8, ?9, ?10, ?11, ?12) ON CONFLICT(time_ns, mode) DO NOTHING",
	    "record the verify run")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, v->time_ns);
	cat_bind_text(st, 2, v->host);
	cat_bind_text(st, 3, v->mode);
	sqlite3_bind_int64(st, 4, v->slice_n);
	sqlite3_bind_int64(st, 5, v->slice_m);
	sqlite3_bind_int(st, 6, v->complete != 0);
	sqlite3_bind_int64(st, 7, v->packs);
	sqlite3_bind_int64(st, 8, v->packs_read);
	sqlite3_bind_int64(st, 9, v->bytes_read);
	sqlite3_bind_int64(st, 10, v->damage);
	sqlite3_bind_double(st, 11, v->seconds);
	cat_bind_text(st, 12, v->verdict);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot record the verify run: %s",
		    sqlite3_errmsg(c->db));
		goto out;
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_verify_run_list(struct catalog *c,
    int (*cb)(void *arg, const struct catalog_verify_run *v), void *arg)
{
	struct catalog_verify_run v;
	sqlite3_stmt *st;
	int rc, ret = 0;

	if ((st = cat_prepare(c, "SELECT id, time_ns, host, mode, slice_n,"
	    " slice_m, complete, packs, packs_read, bytes_read, damage,"
	    " seconds, verdict FROM verify ORDER BY time_ns, id",
	    "list verify runs")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&v, 0, sizeof(v));
		v.id = sqlite3_column_int64(st, 0);
		v.time_ns = sqlite3_column_int64(st, 1);
		v.host = (const char *)sqlite3_column_text(st, 2);
		v.mode = (const char *)sqlite3_column_text(st, 3);
		v.slice_n = (unsigned)sqlite3_column_int64(st, 4);
		v.slice_m = (unsigned)sqlite3_column_int64(st, 5);
		v.complete = sqlite3_column_int(st, 6);
		v.packs = sqlite3_column_int64(st, 7);
		v.packs_read = sqlite3_column_int64(st, 8);
		v.bytes_read = sqlite3_column_int64(st, 9);
		v.damage = sqlite3_column_int64(st, 10);
		v.seconds = sqlite3_column_double(st, 11);
		v.verdict = (const char *)sqlite3_column_text(st, 12);
		if ((ret = cb(arg, &v)) != 0)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot list verify runs: %s", sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_verify_next_slice(struct catalog *c, unsigned m, unsigned *n)
{
	sqlite3_stmt *st;
	unsigned last;
	int rc;

	*n = 1;
	if ((st = cat_prepare(c, "SELECT slice_n, complete FROM verify"
	    " WHERE slice_m = ?1 AND slice_n BETWEEN 1 AND ?1"
	    " ORDER BY time_ns DESC, id DESC LIMIT 1",
	    "find the next verify slice")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, m);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		last = (unsigned)sqlite3_column_int64(st, 0);
		/* A slice stopped at its time limit is resumed first. */
		*n = sqlite3_column_int(st, 1) ? last % m + 1 : last;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot find the next verify slice: %s",
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}
