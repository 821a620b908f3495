/*
 * Bringing the catalog up to date with the repository: packs it has not
 * seen (their index: where each chunk is) and snapshot records (a
 * snapshot's own rows, export.c) inserted as they are.  The repository is
 * the source of truth; this file turns what it holds into rows.
 *
 * A record is authenticated by its signature before it gets here, but it
 * is parsed as if it were hostile all the same: SQLite opens it read-only,
 * in defensive mode, and every value it gives is checked before it is
 * used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog-prune.h"
#include "coffer/catalog-record.h"
#include "coffer/log.h"

#define RECORD_SCHEMA "rec"
#define RECORD_FORMAT 1		/* export.c's */

int
catalog_pack_names(struct catalog *c, char ***names, size_t *n)
{
	return (cat_strings(c, "SELECT name FROM pack ORDER BY name",
	    "list packs", NULL, 0, names, n));
}

/* Run st with ?1..?7: chunk loc's id, pack and place in it. */
static int
step_loc(sqlite3_stmt *st, const struct catalog_chunk_loc *loc, int64_t pack)
{
	sqlite3_reset(st);
	sqlite3_bind_blob(st, 1, loc->cid, 32, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, pack);
	sqlite3_bind_int64(st, 3, (int64_t)loc->pack_offset);
	sqlite3_bind_int64(st, 4, loc->plain_len);
	sqlite3_bind_int64(st, 5, loc->stored_len);
	sqlite3_bind_int(st, 6, loc->type);
	sqlite3_bind_int(st, 7, loc->flags);
	return (sqlite3_step(st));
}

int
catalog_pack_import(struct catalog *c, const char *name, uint64_t size,
    const uint8_t hash[32], const struct catalog_chunk_loc *locs, size_t n,
    int journal)
{
	sqlite3_stmt *st = NULL, *copy = NULL;
	int64_t pack;
	size_t i;
	int ret = -1;

	if (cat_savepoint(c))
		return (-1);
	if (catalog_pack_add(c, name, size, hash, &pack))
		goto out;
	if (journal && cat_run(c, "UPDATE pack SET journal = 1 WHERE id = ?1",
	    "import a pack", CAT_VALS(CAT_INT(pack)), NULL, NULL))
		goto out;
	/*
	 * A chunk known without a place (an interrupted run reserved it),
	 * marked damaged (another host healed it), in a pack that is gone
	 * (another host repacked it) or in one a prune condemned (whose live
	 * chunks it copies out before the pack goes) gets this one; a chunk
	 * stored twice (two hosts raced) keeps the place it has, and this
	 * one is noted as a copy: the place it has may go in a prune that
	 * judged by another host's catalog, which located it here.
	 */
	if ((st = cat_prepare(c, "INSERT INTO chunk(cid, pack_id, pack_offset,"
	    " plain_len, stored_len, type, flags)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
	    " ON CONFLICT(cid) DO UPDATE SET pack_id = excluded.pack_id,"
	    " pack_offset = excluded.pack_offset,"
	    " plain_len = excluded.plain_len,"
	    " stored_len = excluded.stored_len, type = excluded.type,"
	    " flags = excluded.flags, damaged = 0"
	    " WHERE chunk.pack_id IS NULL OR chunk.damaged = 1"
	    " OR chunk.pack_id IN (SELECT id FROM temp.gone)"
	    " OR EXISTS (SELECT 1 FROM pack p JOIN condemned d"
	    " ON d.name = p.name WHERE p.id = chunk.pack_id)",
	    "import a pack")) == NULL ||
	    (copy = cat_prepare(c, "INSERT INTO chunk_copy(chunk_id, pack_id,"
	    " pack_offset, plain_len, stored_len, type, flags)"
	    " SELECT id, ?2, ?3, ?4, ?5, ?6, ?7 FROM chunk"
	    " WHERE cid = ?1 AND pack_id IS NOT ?2 ON CONFLICT DO NOTHING",
	    "import a pack")) == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		if (step_loc(st, &locs[i], pack) != SQLITE_DONE)
			goto fail;
		if (sqlite3_changes(c->db) > 0)
			continue;
		/* Located elsewhere, and kept there. */
		if (step_loc(copy, &locs[i], pack) != SQLITE_DONE)
			goto fail;
	}
	ret = 0;
	goto out;
fail:
	log_error("cannot import pack '%s': %s", name, sqlite3_errmsg(c->db));
out:
	sqlite3_finalize(st);
	sqlite3_finalize(copy);
	if (ret == 0)
		return (cat_release(c));
	cat_rollback_to(c);
	return (-1);
}

/* Attach the record image read-only as schema "rec".  0 or -1. */
static int
attach(struct catalog *c, const uint8_t *img, size_t len)
{
	unsigned char *copy;
	int rc;

	if (len < 512 || len > (size_t)INT64_MAX) {
		log_error("snapshot record: bad image size %zu", len);
		return (-1);
	}
	if (cat_exec(c, "ATTACH ':memory:' AS " RECORD_SCHEMA,
	    "read a snapshot record"))
		return (-1);
	/* deserialize takes ownership of sqlite3_malloc'd memory. */
	if ((copy = sqlite3_malloc64(len)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	memcpy(copy, img, len);
	rc = sqlite3_deserialize(c->db, RECORD_SCHEMA, copy, (sqlite3_int64)len,
	    (sqlite3_int64)len, SQLITE_DESERIALIZE_FREEONCLOSE |
	    SQLITE_DESERIALIZE_READONLY);
	if (rc != SQLITE_OK) {
		log_error("snapshot record: cannot read its image: %s",
		    sqlite3_errstr(rc));
		goto err;
	}
	return (0);
err:
	(void)cat_exec(c, "DETACH " RECORD_SCHEMA, "close a snapshot record");
	return (-1);
}

static void
detach(struct catalog *c)
{
	(void)cat_exec(c, "DETACH " RECORD_SCHEMA, "close a snapshot record");
}

/* One meta value of the attached record, as text ("" if absent) or int. */
static int
meta_text(struct catalog *c, const char *key, char *out, size_t size)
{
	sqlite3_stmt *st;
	const unsigned char *t;
	int rc;

	out[0] = '\0';
	if ((st = cat_prepare(c, "SELECT value FROM " RECORD_SCHEMA ".meta"
	    " WHERE key = ?1", "read a snapshot record")) == NULL)
		return (-1);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && (t = sqlite3_column_text(st, 0)) != NULL)
		snprintf(out, size, "%s", (const char *)t);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("snapshot record: cannot read '%s': %s", key,
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}

static int
meta_int(struct catalog *c, const char *key, int64_t *v)
{
	char t[32], *end;

	if (meta_text(c, key, t, sizeof(t)))
		return (-1);
	*v = strtoll(t, &end, 10);
	if (t[0] == '\0' || *end != '\0') {
		log_error("snapshot record: bad or missing '%s'", key);
		return (-1);
	}
	return (0);
}

/* Read and check the attached record's meta rows. */
static int
read_meta(struct catalog *c, struct catalog_record_meta *m)
{
	int64_t format, level, depth, state;
	char rev[32], *end;

	memset(m, 0, sizeof(*m));
	if (meta_int(c, "format", &format) || meta_text(c, "sid", m->sid,
	    sizeof(m->sid)) || meta_text(c, "parent_sid", m->parent_sid,
	    sizeof(m->parent_sid)) || meta_text(c, "full_sid", m->full_sid,
	    sizeof(m->full_sid)) || meta_text(c, "dataset", m->dataset,
	    sizeof(m->dataset)) || meta_int(c, "level", &level) ||
	    meta_int(c, "depth", &depth) || meta_int(c, "state", &state) ||
	    meta_int(c, "started_ns", &m->started_ns))
		return (-1);
	if (format != RECORD_FORMAT) {
		log_error("snapshot record: has format %lld; this coffer reads "
		    "format %d", (long long)format, RECORD_FORMAT);
		return (-1);
	}
	if (!cat_is_hex(m->sid, SNAPSHOT_ID_HEX) || m->dataset[0] == '\0' ||
	    level < LEVEL_FULL || level > LEVEL_INCREMENTAL || depth < 0 ||
	    depth > 1000000 || state != SNAP_COMPLETE ||
	    (level == LEVEL_FULL) != (m->parent_sid[0] == '\0') ||
	    (level == LEVEL_FULL) != (depth == 0) ||
	    (m->parent_sid[0] && (!cat_is_hex(m->parent_sid,
	    SNAPSHOT_ID_HEX) || !cat_is_hex(m->full_sid, SNAPSHOT_ID_HEX)))) {
		log_error("snapshot record%s%s: its metadata is inconsistent",
		    m->sid[0] ? " " : "", cat_is_hex(m->sid, SNAPSHOT_ID_HEX) ?
		    m->sid : "");
		return (-1);
	}
	m->level = (int)level;
	m->depth = (int)depth;
	/* Records before rebases have none: revision 0. */
	if (meta_text(c, "revision", rev, sizeof(rev)))
		return (-1);
	if (rev[0] != '\0') {
		m->revision = strtoll(rev, &end, 10);
		if (*end != '\0' || m->revision < 0) {
			log_error("snapshot record %s: bad revision '%s'",
			    m->sid, rev);
			return (-1);
		}
	}
	return (0);
}

int
catalog_record_peek(struct catalog *c, const uint8_t *img, size_t len,
    struct catalog_record_meta *m)
{
	int rc;

	if (attach(c, img, len))
		return (-1);
	rc = read_meta(c, m);
	detach(c);
	return (rc);
}

/* The statements of an import, in order; ?1 = the new snapshot's row. */
static const char *const import_sql[] = {
	"INSERT INTO path(name) SELECT path FROM " RECORD_SCHEMA ".entry"
	" WHERE true ON CONFLICT(name) DO NOTHING",
	"INSERT INTO chunk(cid) SELECT DISTINCT cid FROM " RECORD_SCHEMA
	".content_chunk WHERE length(cid) = 32"
	" ON CONFLICT(cid) DO NOTHING",
	"INSERT INTO content(hash, size, nchunks)"
	" SELECT hash, size, nchunks FROM " RECORD_SCHEMA ".content"
	" WHERE length(hash) = 32 AND size >= 0 AND nchunks >= 0"
	" ON CONFLICT(hash) DO NOTHING",
	"INSERT INTO content_chunk(content_id, seq, chunk_id, file_offset, len)"
	" SELECT c.id, rc.seq, ch.id, rc.file_offset, rc.len"
	" FROM " RECORD_SCHEMA ".content_chunk rc"
	" JOIN content c ON c.hash = rc.content"
	" JOIN chunk ch ON ch.cid = rc.cid"
	" WHERE rc.seq >= 0 AND rc.file_offset >= 0 AND rc.len > 0"
	" ON CONFLICT DO NOTHING",
	"INSERT INTO entry(snapshot_id, path_id, kind, mode, uid, gid, uname,"
	" gname, size, mtime_ns, ctime_ns, ino, dev, nlink, rdev, target,"
	" xattrs, acl, content_id)"
	" SELECT ?1, p.id, e.kind, coalesce(e.mode, 0), coalesce(e.uid, 0),"
	" coalesce(e.gid, 0), e.uname, e.gname, coalesce(e.size, 0),"
	" coalesce(e.mtime_ns, 0), coalesce(e.ctime_ns, 0),"
	" coalesce(e.ino, 0), coalesce(e.dev, 0), coalesce(e.nlink, 0),"
	" coalesce(e.rdev, 0), e.target, e.xattrs, e.acl, c.id"
	" FROM " RECORD_SCHEMA ".entry e JOIN path p ON p.name = e.path"
	" LEFT JOIN content c ON c.hash = e.content",
};

/* A content whose chunks did not all arrive is not a content. */
static const char check_sql[] =
	"SELECT count(*) FROM " RECORD_SCHEMA ".content rc"
	" JOIN content c ON c.hash = rc.hash"
	" WHERE c.nchunks != (SELECT count(*) FROM content_chunk cc"
	" WHERE cc.content_id = c.id)"
	" OR (SELECT count(*) FROM " RECORD_SCHEMA ".entry e"
	" WHERE e.content IS NOT NULL AND NOT EXISTS (SELECT 1 FROM content"
	" x WHERE x.hash = e.content)) != 0";

/*
 * A snapshot's row taken over by a record of it (a later revision, or the
 * record of a run that was interrupted), in place: the row and its id
 * stay, so that children keep their parent.  The record's parent must
 * continue a chain of the same dataset that does not pass through the
 * snapshot itself.  Running until complete_snapshot.
 */
static int
reuse_snapshot(struct catalog *c, const struct catalog_snapshot *s)
{
	sqlite3_stmt *st;
	int rc, ret = -1;

	if (s->level != LEVEL_FULL) {
		if ((st = cat_prepare(c, "WITH RECURSIVE " CAT_CHAIN("chain",
		    "?1") " SELECT (SELECT dataset_id FROM snapshot"
		    " WHERE id = ?1), (SELECT level FROM snapshot WHERE id = ?1),"
		    " EXISTS (SELECT 1 FROM chain WHERE id = ?2)",
		    "replace a snapshot")) == NULL)
			return (-1);
		sqlite3_bind_int64(st, 1, s->parent_id);
		sqlite3_bind_int64(st, 2, s->id);
		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW || sqlite3_column_int64(st, 0) !=
		    s->dataset_id || sqlite3_column_int(st, 2) != 0 ||
		    (s->level == LEVEL_DIFFERENTIAL &&
		    sqlite3_column_int(st, 1) != LEVEL_FULL)) {
			log_error("cannot replace snapshot %s: %s", s->sid,
			    rc == SQLITE_ROW ? "its record does not continue "
			    "the chain of its parent" : sqlite3_errmsg(c->db));
			sqlite3_finalize(st);
			return (-1);
		}
		sqlite3_finalize(st);
	}
	if ((st = cat_prepare(c, "UPDATE snapshot SET level = ?2,"
	    " parent_id = ?3, full_id = coalesce(?4, id),"
	    " depth = coalesce((SELECT depth + 1 FROM snapshot"
	    " WHERE id = ?3), 0),"
	    " state = 0, started_ns = ?6, finished_ns = NULL, host = ?7,"
	    " source = ?8, tags = ?9, record_pack = NULL, parts = NULL"
	    " WHERE id = ?1 AND dataset_id = ?10", "replace a snapshot")) ==
	    NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, s->id);
	sqlite3_bind_int(st, 2, s->level);
	if (s->level != LEVEL_FULL) {
		sqlite3_bind_int64(st, 3, s->parent_id);
		sqlite3_bind_int64(st, 4, s->full_id);
	}
	sqlite3_bind_int64(st, 6, s->started_ns);
	cat_bind_text(st, 7, s->host);
	cat_bind_text(st, 8, s->source);
	cat_bind_text(st, 9, s->tags && *s->tags ? s->tags : NULL);
	sqlite3_bind_int64(st, 10, s->dataset_id);
	if (sqlite3_step(st) != SQLITE_DONE)
		log_error("cannot replace snapshot %s: %s", s->sid,
		    sqlite3_errmsg(c->db));
	else if (sqlite3_changes(c->db) != 1)
		log_error("cannot replace snapshot %s: its record is of "
		    "another dataset", s->sid);
	else
		ret = 0;
	sqlite3_finalize(st);
	return (ret);
}

/*
 * Insert the attached record's snapshot, running: its parts are still to
 * come.  0, 2 if its parent is not there, -1.
 */
static int
insert_snapshot(struct catalog *c, const struct catalog_record_meta *m,
    int64_t reuse, int64_t *rowid)
{
	struct catalog_snapshot s;
	int64_t dataset;
	char host[256], source[4096], tags[CATALOG_TAGS_MAX + 2];
	int found, rc = -1;

	memset(&s, 0, sizeof(s));
	if ((found = catalog_dataset_id(c, m->dataset, 1, &dataset)) < 0)
		return (-1);
	memcpy(s.sid, m->sid, sizeof(s.sid));
	s.dataset_id = dataset;
	s.level = m->level;
	/* A non-full's depth and full come from its parent, as the catalog
	 * holds it: a rebase of an ancestor (a later revision) moves them,
	 * and leaves the records of its descendants as they were. */
	s.depth = 0;
	s.state = SNAP_RUNNING;
	s.started_ns = m->started_ns;
	if (meta_text(c, "host", host, sizeof(host)) ||
	    meta_text(c, "source", source, sizeof(source)) ||
	    meta_text(c, "tags", tags, sizeof(tags)))
		return (-1);
	s.host = host;
	s.source = source;
	/* Malformed tags are not trusted as marks. */
	if (catalog_tags_ok(tags))
		s.tags = tags;
	else
		log_warn("snapshot %s: its record's tags are malformed; left "
		    "out", m->sid);
	if (m->level != LEVEL_FULL) {
		struct catalog_snapshot p;

		if ((found = catalog_snapshot_find_sid(c, m->parent_sid, &p)) <
		    0)
			return (-1);
		/* A differential on a parent not yet a full: the record of
		 * the parent's rebase (a later revision) may still come. */
		if (!found || p.state != SNAP_COMPLETE ||
		    (m->level == LEVEL_DIFFERENTIAL &&
		    p.level != LEVEL_FULL)) {
			if (found)
				catalog_snapshot_release(&p);
			return (2);	/* not yet: the caller may retry */
		}
		s.parent_id = p.id;
		s.full_id = p.full_id;
		catalog_snapshot_release(&p);
	}
	if (reuse != 0) {
		s.id = reuse;
		if (reuse_snapshot(c, &s))
			goto out;
	} else if (catalog_snapshot_create(c, &s))
		goto out;
	*rowid = s.id;
	rc = 0;
out:
	s.host = s.source = s.tags = NULL;
	return (rc);
}

/* Snapshot rowid complete, with the counters of the attached record. */
static int
complete_snapshot(struct catalog *c, const struct catalog_record_meta *m,
    int64_t rowid, const char *record_pack)
{
	struct catalog_snapshot s;
	sqlite3_stmt *st;
	int64_t v;
	int rc = -1;

	memset(&s, 0, sizeof(s));
	s.id = rowid;
	memcpy(s.sid, m->sid, sizeof(s.sid));
	s.state = SNAP_COMPLETE;
	memcpy(s.record_pack, record_pack, sizeof(s.record_pack));
	s.parts = m->parts > 0 ? m->parts : 1;
	if (meta_int(c, "finished_ns", &s.finished_ns) ||
	    meta_int(c, "files", &s.files) || meta_int(c, "dirs", &s.dirs) ||
	    meta_int(c, "others", &s.others) ||
	    meta_int(c, "deleted", &s.deleted) ||
	    meta_int(c, "bytes_read", &s.bytes_read) ||
	    meta_int(c, "bytes_new", &s.bytes_new) ||
	    meta_int(c, "bytes_stored", &s.bytes_stored) ||
	    meta_int(c, "warnings", &v))
		goto out;
	s.warnings = v;
	if (catalog_snapshot_update(c, &s))
		goto out;
	if ((st = cat_prepare(c, "UPDATE snapshot SET revision = ?2"
	    " WHERE id = ?1", "complete a snapshot")) == NULL)
		goto out;
	sqlite3_bind_int64(st, 1, rowid);
	sqlite3_bind_int64(st, 2, m->revision);
	v = sqlite3_step(st);
	sqlite3_finalize(st);
	if (v != SQLITE_DONE) {
		log_error("cannot complete snapshot %s: %s", m->sid,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	/* A revision moves the snapshot: its descendants follow. */
	if (m->revision > 0 && cat_snapshot_descendants_fix(c, rowid))
		goto out;
	rc = 0;
out:
	return (rc);
}

/* Insert the attached record's rows under snapshot rowid and check that
 * every content came with its chunks. */
static int
import_rows(struct catalog *c, const char *sid, int64_t rowid)
{
	sqlite3_stmt *st = NULL;
	size_t i;
	int ret = -1;

	for (i = 0; i < sizeof(import_sql) / sizeof(import_sql[0]); i++) {
		if ((st = cat_prepare(c, import_sql[i],
		    "import a snapshot record")) == NULL)
			return (-1);
		sqlite3_bind_int64(st, 1, rowid);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot import snapshot %s: %s", sid,
			    sqlite3_errmsg(c->db));
			goto out;
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	if ((st = cat_prepare(c, check_sql, "import a snapshot record")) ==
	    NULL)
		return (-1);
	if (sqlite3_step(st) != SQLITE_ROW) {
		log_error("cannot import snapshot %s: %s", sid,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	if (sqlite3_column_int64(st, 0) != 0) {
		log_error("snapshot %s: its record is inconsistent (contents "
		    "without their chunks)", sid);
		goto out;
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

/*
 * In the open savepoint: 1 if snapshot m->sid is known complete at
 * m->revision or higher.  Else 0, and a row of it (complete at a lower
 * revision, or a run interrupted after its last pack was durable, or an
 * import of parts cut short) is emptied of its rows, to be taken over in
 * place (*reuse its id; 0 when there is none).  -1 on error.
 */
static int
known_or_replace(struct catalog *c, const struct catalog_record_meta *m,
    int64_t *reuse)
{
	static const char *const empty_sql[] = {
		"DELETE FROM entry WHERE snapshot_id = ?1",
		"DELETE FROM snapshot_part WHERE snapshot_id = ?1",
	};
	struct catalog_snapshot old;
	sqlite3_stmt *st;
	size_t i;
	int found, keep;

	*reuse = 0;
	if ((found = catalog_snapshot_find_sid(c, m->sid, &old)) <= 0)
		return (found);
	keep = old.state == SNAP_COMPLETE && old.revision >= m->revision;
	*reuse = old.id;
	catalog_snapshot_release(&old);
	if (keep)
		return (1);
	for (i = 0; i < sizeof(empty_sql) / sizeof(empty_sql[0]); i++) {
		if ((st = cat_prepare(c, empty_sql[i], "replace a snapshot")) ==
		    NULL)
			return (-1);
		sqlite3_bind_int64(st, 1, *reuse);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot replace snapshot %s: %s", m->sid,
			    sqlite3_errmsg(c->db));
			sqlite3_finalize(st);
			return (-1);
		}
		sqlite3_finalize(st);
	}
	return (0);
}

/* A revision above 0 only with the authority's signature. */
static int
revision_ok(const struct catalog_record_meta *m, int authority)
{
	if (m->revision == 0 || authority)
		return (1);
	log_error("snapshot record %s: revision %lld without the authority's "
	    "signature: left out", m->sid, (long long)m->revision);
	return (0);
}

/* Delete what an import of parts did so far. */
static void
drop_snapshot(struct catalog *c, int64_t rowid)
{
	sqlite3_stmt *st;

	if (cat_savepoint(c))
		return;
	if ((st = cat_prepare(c, "DELETE FROM snapshot WHERE id = ?1",
	    "drop a snapshot left out")) == NULL) {
		cat_rollback_to(c);
		return;
	}
	sqlite3_bind_int64(st, 1, rowid);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot drop snapshot row %lld: %s",
		    (long long)rowid, sqlite3_errmsg(c->db));
		sqlite3_finalize(st);
		cat_rollback_to(c);
		return;
	}
	sqlite3_finalize(st);
	(void)cat_release(c);
}

/* One part (not the head) under snapshot rowid, in its own transaction. */
static int
import_part(struct catalog *c, const struct catalog_record_meta *m,
    int64_t rowid, int idx, const uint8_t *img, size_t len)
{
	struct catalog_record_info ri;
	int ret = -1;

	if (catalog_record_info(img, len, &ri))
		return (-1);
	if (ri.part != idx || ri.parts != 0 ||
	    strcmp(ri.sid, m->sid) != 0) {
		log_error("snapshot %s: its part %d is another record (of "
		    "snapshot %s, part %d)", m->sid, idx, ri.sid, ri.part);
		catalog_record_info_release(&ri);
		return (-1);
	}
	catalog_record_info_release(&ri);
	if (attach(c, img, len))
		return (-1);
	if (cat_savepoint(c))
		goto out0;
	if (import_rows(c, m->sid, rowid))
		goto out;
	ret = 0;
out:
	if (ret == 0) {
		if (cat_release(c))
			ret = -1;
	} else
		cat_rollback_to(c);
out0:
	detach(c);
	return (ret);
}

/*
 * From its head: the snapshot row (running) in a first
 * transaction, each part in one of its own, the head's rows and the
 * change to complete in the last.  ATTACH is refused inside a
 * transaction, so one transaction for all the parts is not to be had;
 * a snapshot that is running is not one restore, levels or a rebuild
 * use, and the next reading of its head replaces it (known_or_replace).
 */
static int
import_parts(struct catalog *c, const uint8_t *img, size_t len,
    const char *record_pack, int authority,
    const struct catalog_record_info *ri, catalog_part_fetch_fn fetch,
    void *arg, struct catalog_record_meta *m)
{
	struct catalog_snapshot old;
	const uint8_t *pimg;
	size_t plen;
	int64_t rowid = 0, reuse;
	int i, rc, found, ret = -1;

	if (attach(c, img, len))
		return (-1);
	if (read_meta(c, m) || !revision_ok(m, authority))
		goto out0;
	m->parts = ri->parts;
	if (strcmp(m->sid, ri->sid) != 0) {
		log_error("snapshot record %s: its metadata is inconsistent",
		    ri->sid);
		goto out0;
	}
	/*
	 * A complete snapshot that a later revision replaces loses its rows
	 * in the first transaction: its parts are all fetched and checked
	 * first, so that a missing one leaves it as it was.
	 */
	if ((found = catalog_snapshot_find_sid(c, m->sid, &old)) < 0)
		goto out0;
	if (found) {
		rc = old.state == SNAP_COMPLETE;
		if (rc && old.revision >= m->revision) {
			catalog_snapshot_release(&old);
			detach(c);
			return (1);
		}
		catalog_snapshot_release(&old);
		for (i = 0; rc && i + 1 < ri->parts; i++)
			if (fetch(arg, &ri->partv[i], i, &pimg, &plen)) {
				log_error("snapshot %s: its part %d of %d is "
				    "missing or damaged", m->sid, i + 1,
				    ri->parts);
				goto out0;
			}
	}
	if (cat_savepoint(c))
		goto out0;
	if ((rc = known_or_replace(c, m, &reuse)) == 0)
		rc = insert_snapshot(c, m, reuse, &rowid);
	if (rc == 1 || rc == 2) {
		/* Known already; or its parent is not here yet, retried. */
		cat_rollback_to(c);
		detach(c);
		return (rc);
	}
	if (rc != 0) {
		cat_rollback_to(c);
		goto out0;
	}
	if (cat_release(c))
		goto out0;
	detach(c);

	for (i = 0; i + 1 < ri->parts; i++) {
		if (fetch(arg, &ri->partv[i], i, &pimg, &plen)) {
			log_error("snapshot %s: its part %d of %d is missing "
			    "or damaged", m->sid, i + 1, ri->parts);
			goto fail;
		}
		if (import_part(c, m, rowid, i, pimg, plen))
			goto fail;
	}

	if (attach(c, img, len))
		goto fail;
	if (cat_savepoint(c)) {
		detach(c);
		goto fail;
	}
	if (import_rows(c, m->sid, rowid) ||
	    catalog_snapshot_parts_set(c, rowid, ri->parts, ri->partv) ||
	    complete_snapshot(c, m, rowid, record_pack)) {
		cat_rollback_to(c);
		detach(c);
		goto fail;
	}
	if (cat_release(c)) {
		detach(c);
		goto fail;
	}
	detach(c);
	return (0);
fail:
	drop_snapshot(c, rowid);
	return (-1);
out0:
	detach(c);
	return (ret);
}

int
catalog_record_import(struct catalog *c, const uint8_t *img, size_t len,
    const char *record_pack, int authority, catalog_part_fetch_fn fetch,
    void *arg, struct catalog_record_meta *m)
{
	struct catalog_record_info ri;
	int rc;

	memset(m, 0, sizeof(*m));
	if (catalog_record_info(img, len, &ri))
		return (-1);
	if (ri.parts == 0)
		rc = 3;
	else
		rc = import_parts(c, img, len, record_pack, authority, &ri,
		    fetch, arg, m);
	catalog_record_info_release(&ri);
	return (rc);
}

/* One integer of meta, or def when absent; -1 if not an integer. */
static int
info_int(sqlite3 *mem, sqlite3_stmt *st, const char *key, int64_t def,
    int64_t *v)
{
	int rc;

	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	*v = def;
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER) {
			log_error("snapshot record: bad '%s'", key);
			return (-1);
		}
		*v = sqlite3_column_int64(st, 0);
	} else if (rc != SQLITE_DONE) {
		log_error("snapshot record: cannot read '%s': %s", key,
		    sqlite3_errmsg(mem));
		return (-1);
	}
	return (0);
}

/* A head's part table into ri->partv: rows 0..parts-2, each once. */
static int
info_parts(sqlite3 *mem, struct catalog_record_info *ri)
{
	sqlite3_stmt *st = NULL;
	const unsigned char *pack;
	int64_t idx, n = 0;
	int rc, ret = -1;

	if (ri->parts <= 1)
		return (0);
	if ((ri->partv = calloc((size_t)ri->parts - 1,
	    sizeof(*ri->partv))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if (sqlite3_prepare_v2(mem, "SELECT idx, pack, rid FROM part"
	    " ORDER BY idx", -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		idx = sqlite3_column_int64(st, 0);
		pack = sqlite3_column_text(st, 1);
		if (idx != n || n >= ri->parts - 1 || pack == NULL ||
		    !cat_is_hex((const char *)pack, 32) ||
		    sqlite3_column_type(st, 2) != SQLITE_BLOB ||
		    sqlite3_column_bytes(st, 2) != 32)
			goto bad;
		memcpy(ri->partv[n].pack, pack, 33);
		memcpy(ri->partv[n].rid, sqlite3_column_blob(st, 2), 32);
		n++;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	if (n != ri->parts - 1)
		goto bad;
	ret = 0;
	goto out;
bad:
	log_error("snapshot record %s: its list of parts is malformed",
	    ri->sid);
	goto out;
sqlerr:
	log_error("snapshot record %s: cannot read its parts: %s", ri->sid,
	    sqlite3_errmsg(mem));
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_record_info(const uint8_t *img, size_t len,
    struct catalog_record_info *ri)
{
	sqlite3 *mem = NULL;
	sqlite3_stmt *st = NULL;
	const unsigned char *t;
	int64_t format, part, parts, revision;
	int ret = -1;

	memset(ri, 0, sizeof(*ri));
	if (len < 512 || len > INT32_MAX) {
		log_error("snapshot record: bad image size %zu", len);
		return (-1);
	}
	if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK)
		goto sqlerr;
	sqlite3_db_config(mem, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	/* Read-only and not freed by SQLite: the image stays the caller's
	 * and is never written. */
	if (sqlite3_deserialize(mem, "main", (unsigned char *)(uintptr_t)img,
	    (sqlite3_int64)len, (sqlite3_int64)len,
	    SQLITE_DESERIALIZE_READONLY) != SQLITE_OK)
		goto sqlerr;
	if (sqlite3_prepare_v2(mem, "SELECT value FROM meta WHERE key = ?1",
	    -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_bind_text(st, 1, "sid", -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW ||
	    (t = sqlite3_column_text(st, 0)) == NULL ||
	    !cat_is_hex((const char *)t, SNAPSHOT_ID_HEX)) {
		log_error("snapshot record: bad snapshot id");
		goto out;
	}
	memcpy(ri->sid, t, SNAPSHOT_ID_HEX + 1);
	if (info_int(mem, st, "format", 0, &format) ||
	    info_int(mem, st, "part", 0, &part) ||
	    info_int(mem, st, "parts", 0, &parts) ||
	    info_int(mem, st, "revision", 0, &revision))
		goto out;
	ri->revision = revision < 0 ? 0 : revision;
	if (format != RECORD_FORMAT) {
		log_error("snapshot record %s: has format %lld; this coffer "
		    "reads format %d", ri->sid, (long long)format,
		    RECORD_FORMAT);
		goto out;
	}
	if (part < 0 || parts < 0 || parts > INT32_MAX ||
	    (parts != 0 && part != parts - 1)) {
		log_error("snapshot record %s: part %lld of %lld is malformed",
		    ri->sid, (long long)part, (long long)parts);
		goto out;
	}
	ri->part = (int)part;
	ri->parts = (int)parts;
	if (info_parts(mem, ri))
		goto out;
	ret = 0;
	goto out;
sqlerr:
	log_error("snapshot record: cannot read its image: %s",
	    mem ? sqlite3_errmsg(mem) : "out of memory");
out:
	sqlite3_finalize(st);
	sqlite3_close(mem);
	if (ret)
		catalog_record_info_release(ri);
	return (ret);
}

void
catalog_record_info_release(struct catalog_record_info *ri)
{
	free(ri->partv);
	ri->partv = NULL;
}

int
catalog_copy_history(struct catalog *c, const char *from)
{
	static const char *const sql[] = {
		"INSERT INTO dataset(name) SELECT name FROM old.dataset"
		" WHERE true ON CONFLICT(name) DO NOTHING",
		"INSERT INTO drill(time_ns, dataset_id, snapshot_id, sid, mode,"
		" sample, files, bytes, failures, seconds, check_seconds,"
		" estimate_seconds, rto_seconds, rpo_seconds, rpo_age_seconds,"
		" verdict)"
		" SELECT d.time_ns, nd.id, s.id, d.sid, d.mode, d.sample,"
		" d.files, d.bytes, d.failures, d.seconds, d.check_seconds,"
		" d.estimate_seconds, d.rto_seconds, d.rpo_seconds,"
		" d.rpo_age_seconds, d.verdict"
		" FROM old.drill d JOIN old.dataset od ON od.id = d.dataset_id"
		" JOIN dataset nd ON nd.name = od.name"
		" LEFT JOIN snapshot s ON s.sid = d.sid"
		" WHERE NOT EXISTS (SELECT 1 FROM drill x"
		" WHERE x.time_ns = d.time_ns AND x.sid = d.sid)"
		" ORDER BY d.time_ns",
		/* Key uses the journal does not carry yet (a day's). */
		"INSERT INTO key_use(key, time_ns, host, in_repo)"
		" SELECT key, time_ns, host, in_repo FROM old.key_use"
		" WHERE true ON CONFLICT(key, time_ns) DO NOTHING",
	};
	sqlite3_stmt *st;
	size_t i;
	int rc = -1;

	if ((st = cat_prepare(c, "ATTACH ?1 AS old", "read the old catalog")) ==
	    NULL)
		return (-1);
	cat_bind_text(st, 1, from);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot read the old catalog '%s': %s", from,
		    sqlite3_errmsg(c->db));
		sqlite3_finalize(st);
		return (-1);
	}
	sqlite3_finalize(st);
	if (cat_exec(c, "BEGIN IMMEDIATE", "copy the drill history"))
		goto out;
	for (i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
		if (cat_exec(c, sql[i], "copy the drill history"))
			goto out;
	if (cat_exec(c, "COMMIT", "copy the drill history"))
		goto out;
	rc = 0;
out:
	catalog_rollback(c);
	(void)cat_exec(c, "DETACH old", "close the old catalog");
	return (rc);
}
