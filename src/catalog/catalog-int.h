#ifndef COFFER_CATALOG_INT_H
#define COFFER_CATALOG_INT_H

/*
 * Private to src/catalog: the catalog handle and its cache of prepared
 * statements.  Nothing outside this directory includes it.
 */
#include <sqlite3.h>
#include <stdint.h>

#include "coffer/catalog.h"

/*
 * Statements that run once per file or per chunk during a backup are
 * prepared once and kept: preparing costs more than running them.
 */
enum cat_stmt {
	ST_PATH_FIND,
	ST_PATH_ADD,
	ST_ENTRY_ADD,
	ST_CHUNK_FIND,
	ST_CHUNK_ADD,
	ST_CHUNK_LOCATE,
	ST_CONTENT_FIND,
	ST_CONTENT_ADD,
	ST_CONTENT_CHUNK_ADD,
	ST_CONTENT_CHUNKS,
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
	sqlite3_stmt *st[ST__COUNT];
};

/* The cached statement id, reset and with its bindings cleared; prepared
 * on first use.  NULL on error (reported). */
sqlite3_stmt *cat_stmt(struct catalog *c, enum cat_stmt id);

/* Prepare a one-off statement; NULL on error (reported with what). */
sqlite3_stmt *cat_prepare(struct catalog *c, const char *sql,
    const char *what);

/* Run SQL without results; what names the action in the error. */
int cat_exec(struct catalog *c, const char *sql, const char *what);

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

#endif
