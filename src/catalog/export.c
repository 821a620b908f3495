#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/log.h"

/*
 * The snapshot record: one snapshot's own rows as a small, self-contained
 * SQLite database.  It names everything by content (path names, content
 * hashes, chunk ids), never by catalog row ids, so a rebuild or an import
 * into another catalog can insert it as it is.  It leaves out record_pack:
 * the record is what will be stored in that pack.  Format 1.
 */
#define EXPORT_FORMAT 1

static const char export_schema[] =
	"PRAGMA journal_mode = OFF;\n"
	"CREATE TABLE meta (\n"
	"	key TEXT PRIMARY KEY,\n"
	"	value\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE entry (\n"
	"	path BLOB PRIMARY KEY,\n"
	"	kind INTEGER NOT NULL,\n"
	"	mode INTEGER, uid INTEGER, gid INTEGER,\n"
	"	uname TEXT, gname TEXT,\n"
	"	size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER,\n"
	"	ino INTEGER, dev INTEGER, nlink INTEGER, rdev INTEGER,\n"
	"	target BLOB, xattrs BLOB, acl TEXT,\n"
	"	content BLOB\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE content (\n"
	"	hash BLOB PRIMARY KEY,\n"
	"	size INTEGER NOT NULL,\n"
	"	nchunks INTEGER NOT NULL\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE content_chunk (\n"
	"	content BLOB NOT NULL,\n"
	"	seq INTEGER NOT NULL,\n"
	"	cid BLOB NOT NULL,\n"
	"	file_offset INTEGER NOT NULL,\n"
	"	len INTEGER NOT NULL,\n"
	"	PRIMARY KEY (content, seq)\n"
	") WITHOUT ROWID;\n";

/* Every column is named with AS: meta's keys are the column names. */
static const char meta_sql[] =
	"SELECT s.sid AS sid, d.name AS dataset, s.level AS level,"
	" p.sid AS parent_sid, f.sid AS full_sid, s.depth AS depth,"
	" s.state AS state, s.started_ns AS started_ns,"
	" s.finished_ns AS finished_ns, s.host AS host, s.source AS source,"
	" s.files AS files, s.dirs AS dirs, s.others AS others,"
	" s.deleted AS deleted, s.bytes_read AS bytes_read,"
	" s.bytes_new AS bytes_new, s.bytes_stored AS bytes_stored,"
	" s.warnings AS warnings"
	" FROM snapshot s JOIN dataset d ON d.id = s.dataset_id"
	" LEFT JOIN snapshot p ON p.id = s.parent_id"
	" LEFT JOIN snapshot f ON f.id = s.full_id"
	" WHERE s.id = ?1";

static const struct copy {
	const char *what;
	const char *src;	/* on the catalog, ?1 = snapshot id */
	const char *dst;	/* on the export, one parameter per column */
} copies[] = {
	{ "entries",
	  "SELECT p.name, e.kind, e.mode, e.uid, e.gid, e.uname, e.gname,"
	  " e.size, e.mtime_ns, e.ctime_ns, e.ino, e.dev, e.nlink, e.rdev,"
	  " e.target, e.xattrs, e.acl, c.hash"
	  " FROM entry e JOIN path p ON p.id = e.path_id"
	  " LEFT JOIN content c ON c.id = e.content_id"
	  " WHERE e.snapshot_id = ?1",
	  "INSERT INTO entry VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
	  " ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)" },
	{ "contents",
	  "SELECT c.hash, c.size, c.nchunks FROM content c"
	  " WHERE c.id IN (SELECT content_id FROM entry"
	  " WHERE snapshot_id = ?1)",
	  "INSERT INTO content VALUES (?1, ?2, ?3)" },
	{ "content chunks",
	  "SELECT c.hash, cc.seq, ch.cid, cc.file_offset, cc.len"
	  " FROM content c JOIN content_chunk cc ON cc.content_id = c.id"
	  " JOIN chunk ch ON ch.id = cc.chunk_id"
	  " WHERE c.id IN (SELECT content_id FROM entry"
	  " WHERE snapshot_id = ?1)",
	  "INSERT INTO content_chunk VALUES (?1, ?2, ?3, ?4, ?5)" },
};

int
cat_mem_exec(sqlite3 *mem, const char *sql, int64_t snapshot_id)
{
	char *msg = NULL;

	if (sqlite3_exec(mem, sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_error("cannot export snapshot %lld: %s",
		    (long long)snapshot_id, msg ? msg : sqlite3_errmsg(mem));
		sqlite3_free(msg);
		return (-1);
	}
	return (0);
}

/*
 * Copy the rows of src (on the catalog) through dst (on the export).
 * Row by row through this connection, rather than ATTACH and INSERT ...
 * SELECT: ATTACH is refused inside a transaction, and the backup exports
 * its snapshot before the transaction that completes it commits.
 * With meta set, each column of src's single row becomes a meta row.
 */
int
cat_copy_rows(struct catalog *c, sqlite3 *mem, int64_t snapshot_id,
    const char *what, const char *src_sql, const char *dst_sql, int meta,
    int64_t *nrows)
{
	sqlite3_stmt *src = NULL, *dst = NULL;
	int i, n, rc, ret = -1;

	*nrows = 0;
	if ((src = cat_prepare(c, src_sql, "export a snapshot")) == NULL)
		return (-1);
	if (sqlite3_prepare_v2(mem, dst_sql, -1, &dst, NULL) != SQLITE_OK) {
		log_error("cannot export snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(mem));
		goto out;
	}
	sqlite3_bind_int64(src, 1, snapshot_id);
	n = sqlite3_column_count(src);
	while ((rc = sqlite3_step(src)) == SQLITE_ROW) {
		for (i = 0; i < (meta ? n : 1); i++) {
			sqlite3_reset(dst);
			if (meta) {
				sqlite3_bind_text(dst, 1,
				    sqlite3_column_name(src, i), -1,
				    SQLITE_STATIC);
				sqlite3_bind_value(dst, 2,
				    sqlite3_column_value(src, i));
			} else {
				int j;

				for (j = 0; j < n; j++)
					sqlite3_bind_value(dst, j + 1,
					    sqlite3_column_value(src, j));
			}
			if (sqlite3_step(dst) != SQLITE_DONE) {
				log_error("cannot export the %s of snapshot "
				    "%lld: %s", what, (long long)snapshot_id,
				    sqlite3_errmsg(mem));
				goto out;
			}
		}
		(*nrows)++;
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot read the %s of snapshot %lld: %s", what,
		    (long long)snapshot_id, sqlite3_errmsg(c->db));
		goto out;
	}
	ret = 0;
out:
	sqlite3_finalize(src);
	sqlite3_finalize(dst);
	return (ret);
}

sqlite3 *
cat_mem_new(int64_t snapshot_id)
{
	sqlite3 *mem = NULL;

	if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
		log_error("cannot export %lld: %s", (long long)snapshot_id,
		    mem ? sqlite3_errmsg(mem) : "out of memory");
		sqlite3_close(mem);
		return (NULL);
	}
	/* An empty image makes it a memdb database: its pages are one block
	 * that sqlite3_serialize can hand out without copying. */
	if (sqlite3_deserialize(mem, "main", NULL, 0, 0,
	    SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) !=
	    SQLITE_OK) {
		log_error("cannot export %lld: %s", (long long)snapshot_id,
		    sqlite3_errmsg(mem));
		sqlite3_close(mem);
		return (NULL);
	}
	return (mem);
}

int
cat_mem_serialize(sqlite3 *mem, struct buf *out, int64_t snapshot_id)
{
	sqlite3_int64 size = 0;
	unsigned char *img;
	int owned = 0, rc;

	img = sqlite3_serialize(mem, "main", &size, SQLITE_SERIALIZE_NOCOPY);
	if (img == NULL) {
		/* Not one block after all: take a copy. */
		if ((img = sqlite3_serialize(mem, "main", &size, 0)) == NULL) {
			log_error("cannot export %lld: cannot serialize the "
			    "record", (long long)snapshot_id);
			return (-1);
		}
		owned = 1;
	}
	if (size < 0 || (uint64_t)size > SIZE_MAX) {
		log_error("cannot export %lld: record too large",
		    (long long)snapshot_id);
		rc = -1;
	} else
		rc = buf_append(out, img, (size_t)size);
	if (owned)
		sqlite3_free(img);
	return (rc);
}

int
catalog_snapshot_export_append(struct catalog *c, int64_t snapshot_id,
    struct buf *out)
{
	sqlite3 *mem;
	char fmt[64];
	int64_t n;
	size_t i;
	int ret = -1;

	if ((mem = cat_mem_new(snapshot_id)) == NULL)
		return (-1);
	if (cat_mem_exec(mem, export_schema, snapshot_id) ||
	    cat_mem_exec(mem, "BEGIN", snapshot_id))
		goto out;
	snprintf(fmt, sizeof(fmt), "INSERT INTO meta VALUES ('format', %d)",
	    EXPORT_FORMAT);
	if (cat_mem_exec(mem, fmt, snapshot_id))
		goto out;
	if (cat_copy_rows(c, mem, snapshot_id, "metadata", meta_sql,
	    "INSERT INTO meta VALUES (?1, ?2)", 1, &n))
		goto out;
	if (n != 1) {
		log_error("cannot export snapshot %lld: no such snapshot",
		    (long long)snapshot_id);
		goto out;
	}
	for (i = 0; i < sizeof(copies) / sizeof(copies[0]); i++)
		if (cat_copy_rows(c, mem, snapshot_id, copies[i].what,
		    copies[i].src, copies[i].dst, 0, &n))
			goto out;
	if (cat_mem_exec(mem, "COMMIT", snapshot_id))
		goto out;
	ret = cat_mem_serialize(mem, out, snapshot_id);
out:
	sqlite3_close(mem);
	return (ret);
}

int
catalog_snapshot_export(struct catalog *c, int64_t snapshot_id,
    struct buf *out)
{
	buf_reset(out);
	return (catalog_snapshot_export_append(c, snapshot_id, out));
}
