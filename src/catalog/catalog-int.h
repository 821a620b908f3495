#ifndef COFFER_CATALOG_INT_H
#define COFFER_CATALOG_INT_H

/*
 * Private to src/catalog: the catalog handle and its cache of prepared
 * statements.  Nothing outside this directory includes it.
 */
#include <sqlite3.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/catalog-record.h"
#include "coffer/catalog.h"

/*
 * Statements that run once per file or per chunk during a backup are
 * prepared once and kept: preparing costs more than running them.
 */
enum cat_stmt {
	ST_PATH_FIND,
	ST_PATH_CLAIM,
	ST_ENTRY_ADD,
	ST_ENTRY_ADD_MANY,
	ST_CHUNK_FIND,
	ST_CHUNK_ADD,
	ST_CHUNK_LOCATE,
	ST_CONTENT_FIND,
	ST_CONTENT_CLAIM,
	ST_CONTENT_CHUNK_ADD,
	ST_CONTENT_CHUNKS,
	ST_CONTENT_CHUNKS_PAGE,
	ST_CONTENT_INFO,
	ST_CONTENT_DATA_BYTES,
	ST_SAVEPOINT,
	ST_RELEASE,
	ST_ROLLBACK_TO,
	ST__COUNT
};

struct catalog {
	sqlite3 *db;
	char *path;		/* the database file */
	char *dir;		/* its directory: holds "lock" */
	int lock_fd;		/* -1 until catalog_lock */
	int sync_fd;		/* -1 unless bringing it up to date */
	sqlite3_stmt *st[ST__COUNT];
	struct catalog_resolver *resolver;	/* the open one (levels.c) */
	int seen_fn;		/* coffer_seen() registered */
	int damaged;		/* open failed: not a catalog, or corrupt */
	int64_t other;		/* open failed: a catalog of this format */
	/*
	 * Recent chunks, paths and contents claimed: > 0 mostly known ones
	 * (a backup of what was stored before), < 0 mostly new ones (a
	 * first backup).  Then a row is claimed with the insert first: one
	 * probe of the unique index for a new one instead of two
	 * (cat_known).
	 */
	int chunk_known, path_known, content_known;
	struct cat_ckpt *ckpt;	/* checkpoint.c */
};

/* Checkpoints of the WAL on a thread of their own, once a commit finds
 * it long (checkpoint.c); detached before the handle closes. */
int cat_ckpt_attach(struct catalog *c);
void cat_ckpt_detach(struct catalog *c);

/* Count one interned row as known (1) or new (0) in *score. */
void cat_known(int *score, int known);

/* The cached statement id, reset and with its bindings cleared; prepared
 * on first use.  NULL on error (reported). */
sqlite3_stmt *cat_stmt(struct catalog *c, enum cat_stmt id);

/* Prepare a one-off statement; NULL on error (reported with what). */
sqlite3_stmt *cat_prepare(struct catalog *c, const char *sql,
    const char *what);

/* Run SQL without results; what names the action in the error. */
int cat_exec(struct catalog *c, const char *sql, const char *what);

/*
 * A parameter of cat_run: CAT_INT(v) (any integer, as int64), CAT_TEXT(s)
 * (NULL binds NULL), CAT_BLOB(p, n) (bytes that stay put while it runs).
 * CAT_VALS(...) passes a list of them as cat_run's v and n.
 */
struct cat_val {
	enum { CAT_V_INT, CAT_V_TEXT, CAT_V_BLOB } type;
	int64_t i;
	const void *p;
	int n;
};
#define CAT_INT(v)	{ CAT_V_INT, (int64_t)(v), NULL, 0 }
#define CAT_TEXT(s)	{ CAT_V_TEXT, 0, (s), -1 }
#define CAT_BLOB(b, len)	{ CAT_V_BLOB, 0, (b), (int)(len) }
#define CAT_VALS(...)							\
	(const struct cat_val[]){ __VA_ARGS__ },			\
	sizeof((const struct cat_val[]){ __VA_ARGS__ }) / sizeof(struct cat_val)

/*
 * Run sql once, its ?1..?n bound to v[0..n), on a statement of its own
 * (so that row may use the catalog), calling row(arg, st) for each row it
 * gives (row NULL: the rows are not wanted).  A non-zero value of row
 * stops it and is returned; else 0, or -1 (reported: "cannot what: ...").
 */
typedef int cat_row_fn(void *arg, sqlite3_stmt *st);
int cat_run(struct catalog *c, const char *sql, const char *what,
    const struct cat_val *v, size_t n, cat_row_fn *row, void *arg);
/* cat_run collecting each row's first column (TEXT, not NULL) as a
 * malloc'd array of malloc'd strings (names_free). */
int cat_strings(struct catalog *c, const char *sql, const char *what,
    const struct cat_val *v, size_t n, char ***out, size_t *nout);
/* A cat_row_fn for a query of one value: column 0 of the first row into
 * *(int64_t *)arg, and stop (cat_run returns 1; 0 when there is none). */
cat_row_fn cat_row_int64;

/* A SAVEPOINT around a multi-statement change, so it is all or nothing
 * with or without a transaction opened by the caller. */
int cat_savepoint(struct catalog *c);
int cat_release(struct catalog *c);
void cat_rollback_to(struct catalog *c);

/* Bind a NUL-terminated string as a BLOB (paths: memcmp order), or NULL. */
int cat_bind_blobstr(sqlite3_stmt *st, int i, const char *s);
/* Bind a string as TEXT, or NULL. */
int cat_bind_text(sqlite3_stmt *st, int i, const char *s);

/* strdup of a TEXT column (NULL stays NULL); -1 on ENOMEM (reported). */
int cat_col_strdup(sqlite3_stmt *st, int i, char **out);

/* The wall clock in nanoseconds. */
int64_t cat_now_ns(void);

/* 1 if s is exactly n lowercase hex digits. */
int cat_is_hex(const char *s, size_t n);

/*
 * Chain resolution, shared by every query that needs the view of a
 * snapshot (entries.c explains the method), so that there is one text of
 * it.  CAT_CHAIN(name, param) is a recursive CTE "name(id, parent, depth)":
 * the snapshot whose id is bound to param (depth 0), its parent (1), ...
 * up to its full; it goes after "WITH RECURSIVE".  The depth bound only
 * guards against a damaged catalog whose parent links loop.
 */
#define CAT_CHAIN(name, param)                                             \
	name "(id, parent, depth) AS ("                                    \
	" SELECT id, parent_id, 0 FROM snapshot WHERE id = " param         \
	" UNION ALL"                                                       \
	" SELECT s.id, s.parent_id, " name ".depth + 1"                    \
	" FROM " name " JOIN snapshot s ON s.id = " name ".parent"         \
	" WHERE " name ".depth < 100000)"

/* The entry columns after the path, in the order cat_col_entry reads
 * them; t is a table prefix ("e.") or "". */
#define CAT_ENTRY_COLS(t)                                                  \
	t "kind, " t "mode, " t "uid, " t "gid, " t "uname, " t "gname, "  \
	t "size, " t "mtime_ns, " t "ctime_ns, " t "ino, " t "dev, "        \
	t "nlink, " t "rdev, " t "target, " t "xattrs, " t "acl, "          \
	t "content_id"
#define CAT_ENTRY_NCOLS 17

/*
 * The view of a chain: of each path's rows in the chain CTE or table
 * named chain (columns id, depth), the newest (smallest depth), tombstones
 * dropped.  Selects first (the key: "e.path_id AS path_id", or "p.name"
 * with a join to path), the CAT_ENTRY_COLS of entry e, then
 * "min(chain.depth) AS depth": the min() that makes the other columns come
 * from the newest row (SQLite's bare columns).  An outer query should
 * refer to depth, so that no optimizer drops the min() as unused.
 */
#define CAT_NEWEST(chain, first, join, key)                                \
	"SELECT " first ", " CAT_ENTRY_COLS("e.") ","                      \
	" min(" chain ".depth) AS depth"                                   \
	" FROM " chain " CROSS JOIN entry e ON e.snapshot_id = " chain ".id" \
	join " GROUP BY " key " HAVING e.kind <> 0"

/* catalog_close with a resolver still open: let go of the connection,
 * so that catalog_resolver_free later frees only the resolver. */
void cat_resolver_detach(struct catalog_resolver *r);

/* The full and depth of snapshot id's descendants set from its own, after
 * a rebase moved it (levels.c).  0 or -1 (reported). */
int cat_snapshot_descendants_fix(struct catalog *c, int64_t id);

/* 0 if snapshot id exists, else -1 (reported). */
int cat_snapshot_exists(struct catalog *c, int64_t id);

/* Fill e (all but path) from the CAT_ENTRY_COLS starting at column col.
 * Strings point into the statement's column memory. */
void cat_col_entry(sqlite3_stmt *st, int col, struct entry *e);

/*
 * Images (export.c): run SQL on an image being built (errors name
 * snapshot_id); copy the rows of src_sql on the catalog (?1 bound to
 * snapshot_id) through dst_sql on the image, or with meta each column of
 * its one row as a (key, value) row.  0 or -1 (reported).
 */
int cat_mem_exec(sqlite3 *mem, const char *sql, int64_t snapshot_id);
/* A new, empty in-memory image; its bytes appended to out.  NULL / -1
 * (reported). */
sqlite3 *cat_mem_new(int64_t snapshot_id);
int cat_mem_serialize(sqlite3 *mem, struct buf *out, int64_t snapshot_id);
int cat_copy_rows(struct catalog *c, sqlite3 *mem, int64_t snapshot_id,
    const char *what, const char *src_sql, const char *dst_sql, int meta,
    int64_t *nrows);

/*
 * An entry's columns from kind to acl (the catalog's entry table and a
 * record's, in the same order), bound from i on as the catalog holds
 * them: a record built from entries has the values of one read from the
 * catalog.
 */
void cat_bind_entry_cols(sqlite3_stmt *st, int i, const struct entry *e);

/*
 * A record part's slice (export.c): the rough size of an entry's rows,
 * var_bytes in its variable columns and nchunks chunk rows of its content
 * (< 0: it has none), and whether a slice of entries entries and bytes of
 * rows takes no more.
 */
size_t cat_part_row_bytes(size_t var_bytes, int64_t nchunks);
int cat_part_full(size_t entries, size_t bytes, size_t max_entries,
    size_t max_bytes);

/*
 * A row of the spool (spool.c) as read back: the entry in e (its strings
 * point into the buffer the part was read into), its content and chunks
 * when it has one.
 */
struct cat_spool_row {
	struct entry e;
	int has_content;
	const uint8_t *hash;	/* in the row, as the strings are */
	uint64_t csize;
	uint32_t nchunks;
	const uint8_t *chunks;
};
/* A part's rows as read back: raw holds them, row[i] points at the i-th
 * (checked whole). */
struct cat_spool_read {
	struct buf raw;
	const uint8_t **row;
	size_t nrows, caprows;
};
void cat_spool_read_release(struct cat_spool_read *rd);
/* The spool's parts (at least one, maybe empty); part i's rows into rd.
 * Safe from several threads at once, each with its own rd, once the
 * spool is finished (catalog_spool_finish). */
size_t cat_spool_parts(const struct catalog_spool *sp);
int cat_spool_part(const struct catalog_spool *sp, size_t i,
    struct cat_spool_read *rd);
/* A row read back: whole; its path; its content hash (NULL: none); its
 * chunk k. */
void cat_spool_row(const uint8_t *p, struct cat_spool_row *w);
const char *cat_spool_path(const uint8_t *p);
const uint8_t *cat_spool_hash(const uint8_t *p);
void cat_spool_chunk(const struct cat_spool_row *w, size_t k,
    const uint8_t **cid, uint64_t *file_offset, uint32_t *len);

#endif
