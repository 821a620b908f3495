#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-record.h"
#include "coffer/log.h"
#include "coffer/tuning.h"

/*
 * The snapshot record: one snapshot's own rows as a small, self-contained
 * SQLite database.  It names everything by content (path names, content
 * hashes, chunk ids), never by catalog row ids, so a rebuild or an import
 * into another catalog can insert it as it is.  It leaves out record_pack:
 * the record is what will be stored in that pack.  Format 1, in parts
 * (below); doc/format.md, "Snapshot record".
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

/* A head's list of the other parts. */
static const char part_schema[] =
	"CREATE TABLE part (\n"
	"	idx INTEGER PRIMARY KEY,\n"
	"	pack TEXT NOT NULL,\n"
	"	rid BLOB NOT NULL\n"
	");\n";

/* Every column is named with AS: meta's keys are the column names. */
static const char meta_sql[] =
	"SELECT s.sid AS sid, d.name AS dataset, s.level AS level,"
	" p.sid AS parent_sid, f.sid AS full_sid, s.depth AS depth,"
	" s.state AS state, s.started_ns AS started_ns,"
	" s.finished_ns AS finished_ns, s.host AS host, s.source AS source,"
	" s.files AS files, s.dirs AS dirs, s.others AS others,"
	" s.deleted AS deleted, s.bytes_read AS bytes_read,"
	" s.bytes_new AS bytes_new, s.bytes_stored AS bytes_stored,"
	" s.warnings AS warnings, s.tags AS tags, s.revision AS revision"
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

/* The snapshot's metadata (its row, named columns) into meta. */
static int
copy_meta(struct catalog *c, sqlite3 *mem, int64_t snapshot_id)
{
	int64_t n;

	if (cat_copy_rows(c, mem, snapshot_id, "metadata", meta_sql,
	    "INSERT INTO meta VALUES (?1, ?2)", 1, &n))
		return (-1);
	if (n != 1) {
		log_error("cannot export snapshot %lld: no such snapshot",
		    (long long)snapshot_id);
		return (-1);
	}
	return (0);
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
catalog_snapshot_export(struct catalog *c, int64_t snapshot_id,
    struct buf *out)
{
	sqlite3 *mem;
	char fmt[96];
	int64_t n;
	size_t i;
	int ret = -1;

	buf_reset(out);
	if ((mem = cat_mem_new(snapshot_id)) == NULL)
		return (-1);
	if (cat_mem_exec(mem, export_schema, snapshot_id) ||
	    cat_mem_exec(mem, "BEGIN", snapshot_id))
		goto out;
	/* The head of a record of one part. */
	snprintf(fmt, sizeof(fmt), "INSERT INTO meta VALUES ('format', %d),"
	    " ('part', 0), ('parts', 1)", EXPORT_FORMAT);
	if (cat_mem_exec(mem, fmt, snapshot_id) ||
	    cat_mem_exec(mem, part_schema, snapshot_id))
		goto out;
	if (copy_meta(c, mem, snapshot_id))
		goto out;
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

/*
 * The snapshot record in parts, so that neither the writer nor a reader
 * ever holds more than one bounded slice of a snapshot, whatever its
 * number of files.
 *
 * Part i (0-based) is a database of the export schema holding a slice of
 * the snapshot's entries, in the catalog's entry order (path id: the
 * table's clustering, so slices are read without sorting millions of
 * rows), with the contents and content chunks those entries reference
 * (a content shared by two slices is in both).  A slice ends at
 * max_entries entries or at about max_bytes of rows, whichever comes
 * first; one entry is never split, so a file of very many chunks makes a
 * part larger than max_bytes.  Every part's meta holds the snapshot's
 * metadata plus format = 1 and part = i, and every part is signed on its
 * own: the signature covers the snapshot id and the index.
 *
 * The last part is the head, written after all the others: its meta also
 * holds parts = N (the count, head included), and its table
 *
 *	part (idx INTEGER PRIMARY KEY, pack TEXT, rid BLOB)
 *
 * names each other part 0..N-2: the pack that holds it and its record id
 * (the keyed hash of the signed record, which the pack reader checks).
 * A reader takes a snapshot in only through its head: the head says how
 * many parts there are and binds each one by id, so a part missing, a
 * part of another snapshot, or another part of the same index cannot
 * pass.  A part without a head (a run that died before its end) is
 * nothing.  A snapshot small enough for one part is one record, the head,
 * with no part rows.
 */

/*
 * A slice's entries, in path id order after ?2; ?1 = snapshot id.  The
 * columns after the entry's: its path id, its content's row and the
 * content row's other columns.
 */
static const char slice_entries_sql[] =
	"SELECT p.name, e.kind, e.mode, e.uid, e.gid, e.uname, e.gname,"
	" e.size, e.mtime_ns, e.ctime_ns, e.ino, e.dev, e.nlink, e.rdev,"
	" e.target, e.xattrs, e.acl, c.hash, e.path_id, c.id, c.size,"
	" c.nchunks"
	" FROM entry e JOIN path p ON p.id = e.path_id"
	" LEFT JOIN content c ON c.id = e.content_id"
	" WHERE e.snapshot_id = ?1 AND e.path_id > ?2"
	" ORDER BY e.path_id";
#define SLICE_ENTRY_COLS 18
enum { COL_HASH = 17, COL_PATH_ID, COL_CONTENT, COL_CSIZE, COL_NCHUNKS };

static const char more_sql[] =
	"SELECT 1 FROM entry WHERE snapshot_id = ?1 AND path_id > ?2 LIMIT 1";

/* A content's chunks, in order (?1 = content row). */
static const char content_chunks_sql[] =
	"SELECT cc.seq, ch.cid, cc.file_offset, cc.len"
	" FROM content_chunk cc JOIN chunk ch ON ch.id = cc.chunk_id"
	" WHERE cc.content_id = ?1 ORDER BY cc.seq";

/* The statements a slice is copied through, on both sides. */
struct slice_stmts {
	sqlite3_stmt *entries, *chunks;		/* on the catalog */
	sqlite3_stmt *put_entry, *put_content, *put_chunk;	/* export */
};

static void
slice_stmts_release(struct slice_stmts *ss)
{
	sqlite3_finalize(ss->put_entry);
	sqlite3_finalize(ss->put_content);
	sqlite3_finalize(ss->put_chunk);
	ss->put_entry = ss->put_content = ss->put_chunk = NULL;
}

static int
mem_prepare(sqlite3 *mem, const char *sql, sqlite3_stmt **st,
    int64_t snapshot_id)
{
	if (sqlite3_prepare_v2(mem, sql, -1, st, NULL) != SQLITE_OK) {
		log_error("cannot export snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(mem));
		return (-1);
	}
	return (0);
}

/* The statements a slice is put into its image through. */
static int
slice_stmts_prepare(sqlite3 *mem, struct slice_stmts *ss,
    int64_t snapshot_id)
{
	return (mem_prepare(mem, copies[0].dst, &ss->put_entry,
	    snapshot_id) ||
	    mem_prepare(mem, "INSERT INTO content VALUES (?1, ?2, ?3)"
	    " ON CONFLICT DO NOTHING", &ss->put_content, snapshot_id) ||
	    mem_prepare(mem, "INSERT INTO content_chunk VALUES (?1, ?2, ?3,"
	    " ?4, ?5)", &ss->put_chunk, snapshot_id) ? -1 : 0);
}

size_t
cat_part_row_bytes(size_t var_bytes, int64_t nchunks)
{
	return (96 + var_bytes + (nchunks < 0 ? 0 :
	    64 + 80 * (size_t)nchunks));
}

int
cat_part_full(size_t entries, size_t bytes, size_t max_entries,
    size_t max_bytes)
{
	return (entries >= max_entries || bytes >= max_bytes);
}

/*
 * The content of the entry src is on, and its chunk rows, unless the
 * slice has it already (two files of one content).
 */
static int
copy_content(struct catalog *c, sqlite3 *mem, struct slice_stmts *ss,
    int64_t snapshot_id)
{
	sqlite3_stmt *src = ss->entries, *ch = ss->chunks;
	int j, rc;

	sqlite3_reset(ss->put_content);
	sqlite3_bind_value(ss->put_content, 1,
	    sqlite3_column_value(src, COL_HASH));
	sqlite3_bind_value(ss->put_content, 2,
	    sqlite3_column_value(src, COL_CSIZE));
	sqlite3_bind_value(ss->put_content, 3,
	    sqlite3_column_value(src, COL_NCHUNKS));
	if (sqlite3_step(ss->put_content) != SQLITE_DONE) {
		log_error("cannot export the contents of snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(mem));
		return (-1);
	}
	if (sqlite3_changes(mem) == 0)
		return (0);
	sqlite3_reset(ch);
	sqlite3_bind_int64(ch, 1, sqlite3_column_int64(src, COL_CONTENT));
	while ((rc = sqlite3_step(ch)) == SQLITE_ROW) {
		sqlite3_reset(ss->put_chunk);
		sqlite3_bind_value(ss->put_chunk, 1,
		    sqlite3_column_value(src, COL_HASH));
		for (j = 0; j < 4; j++)
			sqlite3_bind_value(ss->put_chunk, j + 2,
			    sqlite3_column_value(ch, j));
		if (sqlite3_step(ss->put_chunk) != SQLITE_DONE) {
			log_error("cannot export the content chunks of "
			    "snapshot %lld: %s", (long long)snapshot_id,
			    sqlite3_errmsg(mem));
			sqlite3_reset(ch);
			return (-1);
		}
	}
	sqlite3_reset(ch);
	if (rc != SQLITE_DONE) {
		log_error("cannot read the content chunks of snapshot %lld: "
		    "%s", (long long)snapshot_id, sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}

/*
 * The next slice, after path id lo: its entries, with the contents and
 * content chunks they reference, in one pass over the entries; *hi is the
 * last one's path id (lo when there is none).  An entry's size is
 * estimated from its variable columns and its content's chunk rows; an
 * upper bound, since a content repeated in the slice is stored once.
 */
static int
copy_slice(struct catalog *c, sqlite3 *mem, struct slice_stmts *ss,
    int64_t snapshot_id, int64_t lo, size_t max_entries, size_t max_bytes,
    int64_t *hi)
{
	static const int var_cols[] = { 0, 5, 6, 14, 15, 16 };
	sqlite3_stmt *src = ss->entries;
	size_t n = 0, bytes = 0, var, k;
	int j, rc = SQLITE_DONE, ret = -1;

	*hi = lo;
	if (slice_stmts_prepare(mem, ss, snapshot_id))
		goto out;
	sqlite3_reset(src);
	sqlite3_bind_int64(src, 1, snapshot_id);
	sqlite3_bind_int64(src, 2, lo);
	while (!cat_part_full(n, bytes, max_entries, max_bytes) &&
	    (rc = sqlite3_step(src)) == SQLITE_ROW) {
		sqlite3_reset(ss->put_entry);
		for (j = 0; j < SLICE_ENTRY_COLS; j++)
			sqlite3_bind_value(ss->put_entry, j + 1,
			    sqlite3_column_value(src, j));
		if (sqlite3_step(ss->put_entry) != SQLITE_DONE) {
			log_error("cannot export the entries of snapshot "
			    "%lld: %s", (long long)snapshot_id,
			    sqlite3_errmsg(mem));
			goto out;
		}
		*hi = sqlite3_column_int64(src, COL_PATH_ID);
		for (var = k = 0; k < sizeof(var_cols) / sizeof(var_cols[0]);
		    k++)
			var += (size_t)sqlite3_column_bytes(src, var_cols[k]);
		if (sqlite3_column_type(src, COL_HASH) != SQLITE_NULL) {
			bytes += cat_part_row_bytes(var,
			    sqlite3_column_int64(src, COL_NCHUNKS));
			if (copy_content(c, mem, ss, snapshot_id))
				goto out;
		} else
			bytes += cat_part_row_bytes(var, -1);
		n++;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot read the entries of snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(c->db));
		goto out;
	}
	ret = 0;
out:
	sqlite3_reset(src);
	slice_stmts_release(ss);
	return (ret);
}

/* 1 if the snapshot has entries after path id hi, 0 if not, -1. */
static int
more_entries(struct catalog *c, sqlite3_stmt *more, int64_t snapshot_id,
    int64_t hi)
{
	int rc;

	sqlite3_reset(more);
	sqlite3_bind_int64(more, 1, snapshot_id);
	sqlite3_bind_int64(more, 2, hi);
	rc = sqlite3_step(more);
	sqlite3_reset(more);
	if (rc == SQLITE_ROW)
		return (1);
	if (rc == SQLITE_DONE)
		return (0);
	log_error("cannot read the entries of snapshot %lld: %s",
	    (long long)snapshot_id, sqlite3_errmsg(c->db));
	return (-1);
}

/* The head's part rows. */
static int
write_part_table(sqlite3 *mem, int64_t snapshot_id,
    const struct catalog_record_part *parts, size_t n)
{
	sqlite3_stmt *st;
	size_t i;
	int ret = 0;

	if (cat_mem_exec(mem, part_schema, snapshot_id))
		return (-1);
	if (sqlite3_prepare_v2(mem, "INSERT INTO part VALUES (?1, ?2, ?3)",
	    -1, &st, NULL) != SQLITE_OK) {
		log_error("cannot export snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(mem));
		return (-1);
	}
	for (i = 0; i < n && ret == 0; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, (int64_t)i);
		sqlite3_bind_text(st, 2, parts[i].pack, -1, SQLITE_STATIC);
		sqlite3_bind_blob(st, 3, parts[i].rid, sizeof(parts[i].rid),
		    SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot export snapshot %lld: %s",
			    (long long)snapshot_id, sqlite3_errmsg(mem));
			ret = -1;
		}
	}
	sqlite3_finalize(st);
	return (ret);
}

/*
 * The finished image of *memp into rec, behind room bytes: SQLite's image
 * and page cache are freed (*memp closed) before the part is compressed
 * and stored, so that a part is held once, not twice, while it is.
 */
static int
take_image(sqlite3 **memp, int64_t snapshot_id, size_t room,
    struct buf *rec)
{
	sqlite3_int64 size = 0;
	unsigned char *img;
	int owned = 0, rc = -1;

	img = sqlite3_serialize(*memp, "main", &size, SQLITE_SERIALIZE_NOCOPY);
	if (img == NULL) {
		if ((img = sqlite3_serialize(*memp, "main", &size, 0)) ==
		    NULL) {
			log_error("cannot export %lld: cannot serialize the "
			    "record", (long long)snapshot_id);
			return (-1);
		}
		owned = 1;
	}
	if (size < 0 || (uint64_t)size > SIZE_MAX - room - 1) {
		log_error("cannot export %lld: record too large",
		    (long long)snapshot_id);
		goto out;
	}
	if (buf_reserve(rec, room + (size_t)size))
		goto out;
	memset(rec->data, 0, room);
	memcpy(rec->data + room, img, (size_t)size);
	rec->len = room + (size_t)size;
	if (owned)
		sqlite3_free(img);
	owned = 0;
	sqlite3_close(*memp);
	*memp = NULL;
	rc = 0;
out:
	if (owned)
		sqlite3_free(img);
	return (rc);
}

/* take_image, then hand it to emit. */
static int
emit_image(sqlite3 **memp, int64_t snapshot_id, size_t room, int part,
    int head, catalog_part_emit_fn emit, void *arg,
    struct catalog_record_part *where)
{
	struct buf rec = BUF_INIT;
	int rc = -1;

	if (take_image(memp, snapshot_id, room, &rec) == 0)
		rc = emit(arg, &rec, room, part, head, where);
	buf_release(&rec);
	return (rc);
}

/*
 * A part from the spool: its rows into the image in the order of each
 * table's key (path; content hash; content hash and seq), so that every
 * B-tree grows at its end, a content repeated in the part once.  Paths
 * hold no NUL: strcmp's order is SQLite's for these BLOBs.
 */
static int
row_path_cmp(const void *a, const void *b)
{
	return (strcmp(cat_spool_path(*(const uint8_t *const *)a),
	    cat_spool_path(*(const uint8_t *const *)b)));
}

/* Rows with content only. */
static int
row_hash_cmp(const void *a, const void *b)
{
	return (memcmp(cat_spool_hash(*(const uint8_t *const *)a),
	    cat_spool_hash(*(const uint8_t *const *)b), 32));
}

/*
 * A spooled slice's rows go into its image ROWS_AT_ONCE to a statement:
 * SQLite sets a statement up (its cursors opened, the tables' roots
 * read) once for all of them rather than for each row.  A batch that is
 * not full at the end runs with the rest of its rows NULL, which the
 * statement leaves out (no table's first column is ever NULL).  Rows are
 * bound in place (SQLITE_STATIC): what they point to, the slice's rows as
 * read, outlives the statement's run.  An image has no journal: a
 * statement that fails fails the part.
 */
#define ROWS_AT_ONCE 16

struct rows_batch {
	sqlite3_stmt *st;
	int ncols;		/* columns a row */
	int n;			/* rows bound */
};

static int
batch_prepare(sqlite3 *mem, struct rows_batch *b, const char *table,
    int ncols, const char *conflict, int64_t snapshot_id)
{
	struct buf sql = BUF_INIT;
	int g, k, rc = -1;

	b->ncols = ncols;
	b->n = 0;
	if (buf_printf(&sql, "INSERT INTO %s SELECT * FROM (VALUES ", table))
		goto out;
	for (g = 0; g < ROWS_AT_ONCE; g++)
		for (k = 0; k < ncols; k++)
			if (buf_puts(&sql, k > 0 ? ",?" : g > 0 ? ",(?" :
			    "(?") || (k == ncols - 1 && buf_puts(&sql, ")")))
				goto out;
	if (buf_printf(&sql, ") WHERE column1 IS NOT NULL%s", conflict) ||
	    buf_put_u8(&sql, 0))
		goto out;
	rc = mem_prepare(mem, (const char *)sql.data, &b->st, snapshot_id);
out:
	buf_release(&sql);
	return (rc);
}

/* Where the next row's first column is bound. */
static int
batch_at(const struct rows_batch *b)
{
	return (b->n * b->ncols + 1);
}

/* The rows bound so far into the image: 0, or -1 (the caller reports). */
static int
batch_run(struct rows_batch *b)
{
	int g, rc;

	if (b->n == 0)
		return (0);
	for (g = b->n; g < ROWS_AT_ONCE; g++)
		sqlite3_bind_null(b->st, g * b->ncols + 1);
	rc = sqlite3_step(b->st);
	sqlite3_reset(b->st);
	b->n = 0;
	return (rc == SQLITE_DONE ? 0 : -1);
}

/* A row bound: run the statement once it has all its rows. */
static int
batch_next(struct rows_batch *b)
{
	return (++b->n < ROWS_AT_ONCE ? 0 : batch_run(b));
}

struct spool_batches {
	struct rows_batch entry, content, chunk;
};

static int
spool_batches_prepare(sqlite3 *mem, struct spool_batches *sb,
    int64_t snapshot_id)
{
	return (batch_prepare(mem, &sb->entry, "entry", 18, "",
	    snapshot_id) ||
	    batch_prepare(mem, &sb->content, "content", 3,
	    " ON CONFLICT DO NOTHING", snapshot_id) ||
	    batch_prepare(mem, &sb->chunk, "content_chunk", 5, "",
	    snapshot_id) ? -1 : 0);
}

static void
spool_batches_release(struct spool_batches *sb)
{
	sqlite3_finalize(sb->entry.st);
	sqlite3_finalize(sb->content.st);
	sqlite3_finalize(sb->chunk.st);
}

/* The entry of a spooled row. */
static int
put_spool_entry(struct rows_batch *b, const struct cat_spool_row *w)
{
	int at = batch_at(b);

	cat_bind_blobstr(b->st, at, w->e.path);
	cat_bind_entry_cols(b->st, at + 1, &w->e);
	if (w->has_content)
		sqlite3_bind_blob(b->st, at + 17, w->hash, 32,
		    SQLITE_STATIC);
	else
		sqlite3_bind_null(b->st, at + 17);
	return (batch_next(b));
}

/* The content of a spooled row and its chunks. */
static int
put_spool_content(struct spool_batches *sb, const struct cat_spool_row *w)
{
	const uint8_t *hash = w->hash, *cid;
	uint64_t off;
	uint32_t len, k;
	int at = batch_at(&sb->content);

	sqlite3_bind_blob(sb->content.st, at, hash, 32, SQLITE_STATIC);
	sqlite3_bind_int64(sb->content.st, at + 1, (int64_t)w->csize);
	sqlite3_bind_int64(sb->content.st, at + 2, w->nchunks);
	if (batch_next(&sb->content))
		return (-1);
	for (k = 0; k < w->nchunks; k++) {
		cat_spool_chunk(w, k, &cid, &off, &len);
		at = batch_at(&sb->chunk);
		sqlite3_bind_blob(sb->chunk.st, at, hash, 32, SQLITE_STATIC);
		sqlite3_bind_int64(sb->chunk.st, at + 1, k);
		sqlite3_bind_blob(sb->chunk.st, at + 2, cid, 32,
		    SQLITE_STATIC);
		sqlite3_bind_int64(sb->chunk.st, at + 3, (int64_t)off);
		sqlite3_bind_int64(sb->chunk.st, at + 4, len);
		if (batch_next(&sb->chunk))
			return (-1);
	}
	return (0);
}

/*
 * The rows read into rd into mem's tables, each table's in its key order
 * (rd's list of rows is reordered).  0, -1 (reported), or 1: mem is full
 * (SQLITE_FULL), not reported.
 */
static int
spool_slice(struct cat_spool_read *rd, sqlite3 *mem, int64_t snapshot_id)
{
	struct spool_batches sb = { { NULL, 0, 0 }, { NULL, 0, 0 },
	    { NULL, 0, 0 } };
	struct cat_spool_row w;
	const uint8_t **row;
	size_t n, nc = 0, i;
	int ret = -1;

	row = rd->row;
	n = rd->nrows;
	if (spool_batches_prepare(mem, &sb, snapshot_id))
		goto out;
	qsort(row, n, sizeof(*row), row_path_cmp);
	for (i = 0; i < n; i++) {
		cat_spool_row(row[i], &w);
		if (put_spool_entry(&sb.entry, &w))
			goto sqlerr;
		if (w.has_content)
			row[nc++] = row[i];
	}
	if (batch_run(&sb.entry))
		goto sqlerr;
	qsort(row, nc, sizeof(*row), row_hash_cmp);
	for (i = 0; i < nc; i++) {
		if (i > 0 && memcmp(cat_spool_hash(row[i]),
		    cat_spool_hash(row[i - 1]), 32) == 0)
			continue;
		cat_spool_row(row[i], &w);
		if (put_spool_content(&sb, &w))
			goto sqlerr;
	}
	if (batch_run(&sb.content) || batch_run(&sb.chunk))
		goto sqlerr;
	ret = 0;
	goto out;
sqlerr:
	if (sqlite3_errcode(mem) == SQLITE_FULL) {
		ret = 1;
		goto out;
	}
	log_error("cannot export snapshot %lld: %s", (long long)snapshot_id,
	    sqlite3_errmsg(mem));
out:
	spool_batches_release(&sb);
	return (ret);
}

/* A part's image, its transaction open: the schema and its metadata. */
static sqlite3 *
part_image_new(struct catalog *c, int64_t snapshot_id, size_t part)
{
	sqlite3 *mem;
	char sql[96];

	if ((mem = cat_mem_new(snapshot_id)) == NULL)
		return (NULL);
	snprintf(sql, sizeof(sql), "INSERT INTO meta VALUES ('format', %d), "
	    "('part', %zu)", EXPORT_FORMAT, part);
	if (cat_mem_exec(mem, export_schema, snapshot_id) ||
	    cat_mem_exec(mem, "BEGIN", snapshot_id) ||
	    cat_mem_exec(mem, sql, snapshot_id) ||
	    copy_meta(c, mem, snapshot_id))
		goto fail;
	return (mem);
fail:
	sqlite3_close(mem);
	return (NULL);
}

/*
 * The head's own rows, the parts before it (nparts of them, whose places
 * emit may complete only now) listed.
 */
static int
finish_head(sqlite3 *mem, int64_t snapshot_id, struct catalog_record_part
    *parts, size_t nparts, size_t room, catalog_part_emit_fn emit, void *arg)
{
	char sql[96];

	if (nparts > 0 && emit(arg, NULL, room, (int)nparts, 0, parts))
		return (-1);
	snprintf(sql, sizeof(sql), "INSERT INTO meta VALUES ('parts', %zu)",
	    nparts + 1);
	return (cat_mem_exec(mem, sql, snapshot_id) ||
	    write_part_table(mem, snapshot_id, parts, nparts) ? -1 : 0);
}

/* Room for part nparts's place in *parts. */
static int
part_room(struct catalog_record_part **parts, size_t *cap, size_t nparts,
    int64_t snapshot_id)
{
	if (nparts > INT32_MAX - 1) {
		log_error("cannot export snapshot %lld: too many parts",
		    (long long)snapshot_id);
		return (-1);
	}
	return (array_grow(parts, cap, nparts, sizeof(**parts), 64));
}

/* The parts, each slice read from the catalog. */
int
catalog_snapshot_export_parts(struct catalog *c, int64_t snapshot_id,
    size_t max_entries, size_t max_bytes, size_t room,
    catalog_part_emit_fn emit, void *arg)
{
	struct catalog_record_part *parts = NULL, where;
	struct slice_stmts ss = { 0 };
	sqlite3_stmt *more = NULL;
	sqlite3 *mem = NULL;
	size_t nparts = 0, cap = 0;
	int64_t lo = INT64_MIN, hi = INT64_MIN;
	int head = 0, ret = -1;

	if (max_entries == 0)
		max_entries = 1;
	if ((ss.entries = cat_prepare(c, slice_entries_sql,
	    "export a snapshot")) == NULL || (ss.chunks = cat_prepare(c,
	    content_chunks_sql, "export a snapshot")) == NULL ||
	    (more = cat_prepare(c, more_sql, "export a snapshot")) == NULL)
		goto out;
	while (!head) {
		if (part_room(&parts, &cap, nparts, snapshot_id) ||
		    (mem = part_image_new(c, snapshot_id, nparts)) == NULL ||
		    copy_slice(c, mem, &ss, snapshot_id, lo, max_entries,
		    max_bytes, &hi) ||
		    (head = more_entries(c, more, snapshot_id, hi)) < 0)
			goto out;
		head = !head;
		if (head && finish_head(mem, snapshot_id, parts, nparts, room,
		    emit, arg))
			goto out;
		if (cat_mem_exec(mem, "COMMIT", snapshot_id))
			goto out;
		memset(&where, 0, sizeof(where));
		if (emit_image(&mem, snapshot_id, room, (int)nparts, head,
		    emit, arg, &where))
			goto out;
		parts[nparts++] = where;
		lo = hi;
	}
	ret = 0;
out:
	sqlite3_close(mem);
	sqlite3_finalize(ss.entries);
	sqlite3_finalize(ss.chunks);
	sqlite3_finalize(more);
	free(parts);
	return (ret);
}

/*
 * A full's record from its spool, built at the end of the run, part
 * after part, each in an image of its own that starts as a copy of one
 * holding the schema and the snapshot's metadata (the export's only read
 * of the catalog, done here first).  emit has each as it is built.  One
 * thread builds them all: a helper that built every other part saved
 * less than 5% (bench/README.md, issue 42).
 */
struct spool_export {
	struct catalog_spool *sp;
	int64_t snapshot_id;
	size_t room;
	size_t nparts;		/* the spool's, the head included */
	struct buf tmpl;	/* the image every part starts from */
};

/*
 * Part's image from the template, its transaction open.  With rec, in
 * place: rec holds the record's room bytes, then the image, which SQLite
 * works in as its database, cap bytes at most (not resizeable: a part
 * that outgrows them fails with SQLITE_FULL), so that the finished
 * record is that buffer rather than a copy of it.  Without, in a copy of
 * SQLite's own that grows as needed.
 */
static sqlite3 *
spool_image_new(const struct spool_export *se, size_t part, struct buf *rec,
    size_t cap)
{
	unsigned char *img;
	sqlite3 *mem = NULL;
	char sql[64];
	int rc;

	if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
		goto nomem;
	if (rec != NULL) {
		buf_reset(rec);
		if (cap < se->tmpl.len || buf_reserve(rec, se->room + cap))
			goto nomem;
		img = rec->data + se->room;
		memcpy(img, se->tmpl.data, se->tmpl.len);
		rc = sqlite3_deserialize(mem, "main", img,
		    (sqlite3_int64)se->tmpl.len,
		    (sqlite3_int64)(rec->cap - se->room), 0);
	} else {
		if ((img = sqlite3_malloc64(se->tmpl.len)) == NULL)
			goto nomem;
		memcpy(img, se->tmpl.data, se->tmpl.len);
		/* The copy is the handle's from here, freed also if this
		 * fails. */
		rc = sqlite3_deserialize(mem, "main", img,
		    (sqlite3_int64)se->tmpl.len, (sqlite3_int64)se->tmpl.len,
		    SQLITE_DESERIALIZE_FREEONCLOSE |
		    SQLITE_DESERIALIZE_RESIZEABLE);
	}
	if (rc != SQLITE_OK) {
		log_error("cannot export %lld: %s", (long long)se->snapshot_id,
		    sqlite3_errmsg(mem));
		sqlite3_close(mem);
		return (NULL);
	}
	snprintf(sql, sizeof(sql), "UPDATE meta SET value = %zu "
	    "WHERE key = 'part'", part);
	if (cat_mem_exec(mem, "PRAGMA journal_mode = OFF", se->snapshot_id) ||
	    cat_mem_exec(mem, "BEGIN", se->snapshot_id) ||
	    cat_mem_exec(mem, sql, se->snapshot_id)) {
		sqlite3_close(mem);
		return (NULL);
	}
	return (mem);
nomem:
	log_error("cannot export %lld: out of memory",
	    (long long)se->snapshot_id);
	sqlite3_close(mem);
	return (NULL);
}

/*
 * The room a part's image is first given, beyond the template: twice the
 * bytes of its rows and 1 MiB (a part of small files makes an image of
 * about 1.1 times its rows).  What the image does not fill is never
 * touched, so it costs address space, not memory.
 */
static size_t
first_cap(const struct spool_export *se, const struct cat_spool_read *rd)
{
	size_t want = tuning_get()->record_image_bytes;

	if (want == 0)
		want = rd->raw.len < SIZE_MAX / 4 ? 2 * rd->raw.len + (1u << 20) :
		    SIZE_MAX / 2;
	return (se->tmpl.len + want);
}

/*
 * A part but the head, whole, into rec (room bytes, then its image,
 * built in place).  Its rows are read from the spool into rd, and stay
 * there for the next part.  A part
 * whose image outgrows its room is built again in twice as much.
 */
static int
build_spool_part(const struct spool_export *se, size_t part,
    struct cat_spool_read *rd, struct buf *rec)
{
	sqlite3_int64 size = 0;
	unsigned char *img;
	sqlite3 *mem;
	size_t cap;
	int rc;

	for (cap = 0;; cap *= 2) {
		if (cat_spool_part(se->sp, part, rd))
			return (-1);
		if (cap == 0)
			cap = first_cap(se, rd);
		if (cap > SIZE_MAX / 2 - se->room) {
			log_error("cannot export %lld: record too large",
			    (long long)se->snapshot_id);
			return (-1);
		}
		if ((mem = spool_image_new(se, part, rec, cap)) == NULL)
			return (-1);
		if ((rc = spool_slice(rd, mem, se->snapshot_id)) == 0 &&
		    (rc = sqlite3_exec(mem, "COMMIT", NULL, NULL, NULL)) !=
		    SQLITE_OK) {
			if (rc != SQLITE_FULL)
				log_error("cannot export snapshot %lld: %s",
				    (long long)se->snapshot_id,
				    sqlite3_errmsg(mem));
			rc = rc == SQLITE_FULL ? 1 : -1;
		}
		if (rc == 0) {
			img = sqlite3_serialize(mem, "main", &size,
			    SQLITE_SERIALIZE_NOCOPY);
			if (img != rec->data + se->room || size < 0 ||
			    (uint64_t)size > rec->cap - se->room) {
				log_error("cannot export %lld: cannot "
				    "serialize the record",
				    (long long)se->snapshot_id);
				rc = -1;
			}
		}
		sqlite3_close(mem);
		if (rc != 1)
			break;
	}
	if (rc != 0)
		return (-1);
	memset(rec->data, 0, se->room);
	rec->len = se->room + (size_t)size;
	return (0);
}

/* The template: part 0's schema and metadata, committed. */
static int
make_template(struct catalog *c, struct spool_export *se)
{
	sqlite3 *mem;
	int ret = -1;

	if ((mem = part_image_new(c, se->snapshot_id, 0)) == NULL)
		return (-1);
	if (cat_mem_exec(mem, "COMMIT", se->snapshot_id) ||
	    cat_mem_serialize(mem, &se->tmpl, se->snapshot_id))
		goto out;
	if (se->tmpl.len == 0) {
		log_error("cannot export %lld: cannot serialize the record",
		    (long long)se->snapshot_id);
		goto out;
	}
	ret = 0;
out:
	sqlite3_close(mem);
	return (ret);
}

static int
export_spool(struct catalog *c, int64_t snapshot_id,
    struct catalog_spool *sp, size_t room, catalog_part_emit_fn emit,
    void *arg)
{
	struct spool_export se;
	struct cat_spool_read rd = { BUF_INIT, NULL, 0, 0 };
	struct catalog_record_part *parts = NULL, where;
	struct buf rec = BUF_INIT;
	sqlite3 *mem = NULL;
	size_t part, cap = 0;
	int rc, ret = -1;

	memset(&se, 0, sizeof(se));
	se.sp = sp;
	se.snapshot_id = snapshot_id;
	se.room = room;
	se.nparts = cat_spool_parts(sp);
	if (se.nparts == 0) {
		log_error("internal error: a spool of no record part");
		return (-1);
	}
	buf_init(&se.tmpl);
	if (make_template(c, &se))
		goto out;
	for (part = 0; part + 1 < se.nparts; part++) {
		if (part_room(&parts, &cap, part, snapshot_id) ||
		    build_spool_part(&se, part, &rd, &rec))
			goto out;
		memset(&where, 0, sizeof(where));
		if (emit(arg, &rec, room, (int)part, 0, &where))
			goto out;
		buf_release(&rec);
		parts[part] = where;
	}
	if (part_room(&parts, &cap, part, snapshot_id) ||
	    cat_spool_part(sp, part, &rd) ||
	    (mem = spool_image_new(&se, part, NULL, 0)) == NULL)
		goto out;
	if ((rc = spool_slice(&rd, mem, snapshot_id)) != 0) {
		/* Full: beyond what SQLite lets an image grow to. */
		if (rc == 1)
			log_error("cannot export snapshot %lld: %s",
			    (long long)snapshot_id, sqlite3_errmsg(mem));
		goto out;
	}
	cat_spool_read_release(&rd);
	if (finish_head(mem, snapshot_id, parts, part, room, emit, arg) ||
	    cat_mem_exec(mem, "COMMIT", snapshot_id))
		goto out;
	memset(&where, 0, sizeof(where));
	if (emit_image(&mem, snapshot_id, room, (int)part, 1, emit, arg,
	    &where))
		goto out;
	ret = 0;
out:
	buf_release(&se.tmpl);
	sqlite3_close(mem);
	cat_spool_read_release(&rd);
	buf_release(&rec);
	free(parts);
	return (ret);
}

int
catalog_snapshot_export_spool(struct catalog *c, int64_t snapshot_id,
    struct catalog_spool *sp, size_t room, catalog_part_emit_fn emit,
    void *arg)
{
	if (!catalog_spool_usable(sp)) {
		log_error("internal error: exporting from a spool turned off");
		return (-1);
	}
	return (export_spool(c, snapshot_id, sp, room, emit, arg));
}
