#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/log.h"

/* Insert a path row unless it has one: 1 inserted (*id its row), 0
 * there already, -1 on error (the caller reports). */
static int
path_insert(struct catalog *c, const char *path, int64_t *id)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_stmt(c, ST_PATH_CLAIM)) == NULL)
		return (-1);
	cat_bind_blobstr(st, 1, path);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return (-1);
	if (sqlite3_changes(c->db) != 1)
		return (0);
	*id = sqlite3_last_insert_rowid(c->db);
	return (1);
}

/* Intern a relative path; *id its row. */
static int
path_id(struct catalog *c, const char *path, int64_t *id)
{
	sqlite3_stmt *st;
	int rc;

	/* Mostly new paths: the insert first (cat_known). */
	if (c->path_known < 0 && (rc = path_insert(c, path, id)) != 0) {
		if (rc < 0)
			goto err;
		cat_known(&c->path_known, 0);
		return (0);
	}
	if ((st = cat_stmt(c, ST_PATH_FIND)) == NULL)
		return (-1);
	cat_bind_blobstr(st, 1, path);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*id = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (rc == SQLITE_ROW) {
		cat_known(&c->path_known, 1);
		return (0);
	}
	if (rc != SQLITE_DONE || path_insert(c, path, id) != 1)
		goto err;
	cat_known(&c->path_known, 0);
	return (0);
err:
	log_error("cannot add path '%s': %s", path, sqlite3_errmsg(c->db));
	return (-1);
}

void
cat_bind_entry_cols(sqlite3_stmt *st, int i, const struct entry *e)
{
	sqlite3_bind_int(st, i, e->kind);
	sqlite3_bind_int64(st, i + 1, e->mode);
	sqlite3_bind_int64(st, i + 2, e->uid);
	sqlite3_bind_int64(st, i + 3, e->gid);
	cat_bind_text(st, i + 4, e->uname);
	cat_bind_text(st, i + 5, e->gname);
	sqlite3_bind_int64(st, i + 6, e->size);
	sqlite3_bind_int64(st, i + 7, e->mtime_ns);
	sqlite3_bind_int64(st, i + 8, e->ctime_ns);
	/* SQLite integers are signed 64-bit: store the bits. */
	sqlite3_bind_int64(st, i + 9, (int64_t)e->ino);
	sqlite3_bind_int64(st, i + 10, (int64_t)e->dev);
	sqlite3_bind_int64(st, i + 11, e->nlink);
	sqlite3_bind_int64(st, i + 12, (int64_t)e->rdev);
	cat_bind_blobstr(st, i + 13, e->target);
	if (e->xattrs_len > 0)
		sqlite3_bind_blob(st, i + 14, e->xattrs, (int)e->xattrs_len,
		    SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i + 14);
	cat_bind_text(st, i + 15, e->acl);
}

/* e checked, and its path's row in *pid: 0, or -1 (reported). */
static int
entry_admit(struct catalog *c, const struct entry *e, int64_t *pid)
{
	/* Restore trusts the catalog's paths: refuse bad ones at the door. */
	if (!entry_path_is_safe(e->path) && !entry_path_is_root(e->path)) {
		log_error("cannot add entry '%s': unsafe path",
		    e->path ? e->path : "");
		return (-1);
	}
	if (e->kind < ENTRY_TOMBSTONE || e->kind > ENTRY_SOCK) {
		log_error("cannot add entry '%s': bad kind %d", e->path,
		    e->kind);
		return (-1);
	}
	if (e->xattrs_len > INT32_MAX) {
		log_error("cannot add entry '%s': extended attributes too "
		    "large", e->path);
		return (-1);
	}
	return (path_id(c, e->path, pid));
}

/* An entry's row from column at on: snapshot, path, its own, content. */
static void
bind_entry(sqlite3_stmt *st, int at, int64_t snapshot_id, int64_t pid,
    const struct entry *e)
{
	sqlite3_bind_int64(st, at, snapshot_id);
	sqlite3_bind_int64(st, at + 1, pid);
	cat_bind_entry_cols(st, at + 2, e);
	if (e->content_id != 0)
		sqlite3_bind_int64(st, at + 18, e->content_id);
	else
		sqlite3_bind_null(st, at + 18);
}

int
catalog_entry_add(struct catalog *c, int64_t snapshot_id,
    const struct entry *e)
{
	sqlite3_stmt *st;
	int64_t pid;
	int rc;

	if (entry_admit(c, e, &pid) ||
	    (st = cat_stmt(c, ST_ENTRY_ADD)) == NULL)
		return (-1);
	bind_entry(st, 1, snapshot_id, pid, e);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		log_error("cannot add entry '%s': %s", e->path,
		    sqlite3_errmsg(c->db));
	sqlite3_reset(st);
	return (rc == SQLITE_DONE ? 0 : -1);
}

int
catalog_entry_replace(struct catalog *c, int64_t snapshot_id,
    const struct entry *e)
{
	sqlite3_stmt *st;
	int64_t pid;
	int rc;

	if (entry_admit(c, e, &pid))
		return (-1);
	if (sqlite3_prepare_v2(c->db, "DELETE FROM entry WHERE snapshot_id = ?1"
	    " AND path_id = ?2", -1, &st, NULL) != SQLITE_OK) {
		log_error("cannot replace entry '%s': %s", e->path,
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	sqlite3_bind_int64(st, 1, snapshot_id);
	sqlite3_bind_int64(st, 2, pid);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot replace entry '%s': %s", e->path,
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	return (catalog_entry_add(c, snapshot_id, e));
}

int
catalog_entries_add(struct catalog *c, int64_t snapshot_id,
    const struct entry *const *e, size_t n)
{
	sqlite3_stmt *st;
	int64_t pid[CATALOG_ENTRIES_AT_ONCE];
	size_t i, g;
	int rc;

	for (i = 0; n - i >= CATALOG_ENTRIES_AT_ONCE;
	    i += CATALOG_ENTRIES_AT_ONCE) {
		for (g = 0; g < CATALOG_ENTRIES_AT_ONCE; g++)
			if (entry_admit(c, e[i + g], &pid[g]))
				return (-1);
		if ((st = cat_stmt(c, ST_ENTRY_ADD_MANY)) == NULL)
			return (-1);
		for (g = 0; g < CATALOG_ENTRIES_AT_ONCE; g++)
			bind_entry(st, (int)g * 19 + 1, snapshot_id, pid[g],
			    e[i + g]);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE) {
			log_error("cannot add entries '%s' to '%s': %s",
			    e[i]->path, e[i + CATALOG_ENTRIES_AT_ONCE - 1]->path,
			    sqlite3_errmsg(c->db));
			return (-1);
		}
	}
	for (; i < n; i++)
		if (catalog_entry_add(c, snapshot_id, e[i]))
			return (-1);
	return (0);
}

/*
 * Chain resolution, one query per iterator (CAT_CHAIN and CAT_NEWEST in
 * catalog-int.h hold the text that the diff, the resolver and synthetic
 * fulls share).
 *
 * chain: the snapshot (depth 0), its parent (1), ... up to its full, which
 * has no parent.
 *
 * Newest wins: of each path's rows in the chain, the one with the smallest
 * depth.  GROUP BY path name with min(depth) picks it, and SQLite fills
 * the other (bare) columns of an aggregate with a single min() from the
 * row that holds the minimum (documented in lang_select, "bare columns").
 * That is the equivalent of ROW_NUMBER() OVER (PARTITION BY path ORDER
 * BY depth) = 1, chosen because it needs one sort instead of two: SQLite
 * does not carry a window's order out of its subquery, so the window
 * version sorts by path for the window and again by name for the output.
 * Tombstones (kind 0) are dropped after the choice, in HAVING, so that a
 * deletion hides the older rows of its path.  ORDER BY repeats the GROUP
 * BY, which SQLite satisfies without another sort.  Names are BLOBs: the
 * order is memcmp order, a directory before its contents.  (Queries that
 * need no names group by path id instead and skip the path table.)
 *
 * CROSS JOIN fixes the join order, so the plan stays the same whether or
 * not ANALYZE statistics exist.
 */
#define CHAIN_CTE "WITH RECURSIVE " CAT_CHAIN("chain", "?1") " "

/* The whole snapshot: driven by the chain, each link's rows read in
 * primary key order, then one sort by name (the GROUP BY). */
static const char resolve_all[] =
	CHAIN_CTE
	CAT_NEWEST("chain", "p.name", " CROSS JOIN path p ON p.id = e.path_id",
	    "p.name")
	" ORDER BY p.name";

/*
 * A subtree: driven by the names, a range of the path index holding the
 * path itself and "under/" <= name < "under0" ('0' follows '/').  One
 * range rather than an OR of two, so that the index also gives the GROUP
 * BY order and nothing is sorted; names between "under" and "under/"
 * ("under-old", "under.txt") are skipped while scanning the index, before
 * any join.  Each path's versions then come from entry_path, where they
 * lie side by side, kept when their snapshot is in the chain.  The cost
 * follows the size of the subtree, not of the snapshot.
 */
static const char resolve_under[] =
	CHAIN_CTE
	"SELECT p.name, " CAT_ENTRY_COLS("e.") ", min(chain.depth)"
	" FROM path p"
	" CROSS JOIN entry x INDEXED BY entry_path ON x.path_id = p.id"
	" CROSS JOIN chain ON chain.id = x.snapshot_id"
	" CROSS JOIN entry e ON e.snapshot_id = x.snapshot_id"
	"  AND e.path_id = x.path_id"
	" WHERE p.name >= ?2 AND p.name < ?4"
	"  AND (p.name = ?2 OR p.name >= ?3)"
	" GROUP BY p.name HAVING e.kind <> 0 ORDER BY p.name";

struct catalog_iter {
	struct catalog *c;
	sqlite3_stmt *st;
	int64_t snapshot_id;
	int done;		/* stepping on would run the query again */
	char *under;		/* the bounds bound to the statement */
	char *under_lo;
	char *under_hi;
};

void
catalog_iter_free(struct catalog_iter *it)
{
	if (it == NULL)
		return;
	sqlite3_finalize(it->st);
	free(it->under);
	free(it->under_lo);
	free(it->under_hi);
	free(it);
}

/* Set it->under and the range bounds "under/" and "under0". */
static int
set_under(struct catalog_iter *it, const char *under)
{
	size_t n = strlen(under);

	/* "a/b/" means "a/b". */
	while (n > 0 && under[n - 1] == '/')
		n--;
	if ((it->under = malloc(n + 1)) == NULL ||
	    (it->under_lo = malloc(n + 2)) == NULL ||
	    (it->under_hi = malloc(n + 2)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	memcpy(it->under, under, n);
	it->under[n] = '\0';
	memcpy(it->under_lo, under, n);
	it->under_lo[n] = '/';
	it->under_lo[n + 1] = '\0';
	memcpy(it->under_hi, under, n);
	it->under_hi[n] = '0';
	it->under_hi[n + 1] = '\0';
	return (0);
}

int
cat_snapshot_exists(struct catalog *c, int64_t id)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(c, "SELECT 1 FROM snapshot WHERE id = ?1",
	    "look up a snapshot")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		log_error("no snapshot with catalog id %lld", (long long)id);
	else if (rc != SQLITE_ROW)
		log_error("cannot look up snapshot %lld: %s", (long long)id,
		    sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return (rc == SQLITE_ROW ? 0 : -1);
}

struct catalog_iter *
catalog_entries(struct catalog *c, int64_t snapshot_id, const char *under)
{
	struct catalog_iter *it;

	if (cat_snapshot_exists(c, snapshot_id))
		return (NULL);
	if ((it = calloc(1, sizeof(*it))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	it->c = c;
	it->snapshot_id = snapshot_id;
	if (under != NULL && under[0] != '\0' && strspn(under, "/") !=
	    strlen(under)) {
		if (set_under(it, under))
			goto err;
	}
	/* Its own statement: the caller reads contents and may write other
	 * rows while it iterates. */
	if ((it->st = cat_prepare(c, it->under ? resolve_under : resolve_all,
	    "resolve a snapshot")) == NULL)
		goto err;
	sqlite3_bind_int64(it->st, 1, snapshot_id);
	if (it->under != NULL) {
		cat_bind_blobstr(it->st, 2, it->under);
		cat_bind_blobstr(it->st, 3, it->under_lo);
		cat_bind_blobstr(it->st, 4, it->under_hi);
	}
	return (it);
err:
	catalog_iter_free(it);
	return (NULL);
}

int
catalog_iter_next(struct catalog_iter *it, struct entry *e)
{
	sqlite3_stmt *st = it->st;
	int rc;

	if (it->done)
		return (0);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		it->done = 1;
		return (0);
	}
	if (rc != SQLITE_ROW) {
		log_error("cannot resolve snapshot %lld: %s",
		    (long long)it->snapshot_id, sqlite3_errmsg(it->c->db));
		return (-1);
	}
	/*
	 * The strings point into the statement's column memory, valid until
	 * the next step.  sqlite3_column_text gives BLOBs (path, target) a
	 * terminating NUL without changing their bytes.
	 */
	memset(e, 0, sizeof(*e));
	e->path = (const char *)sqlite3_column_text(st, 0);
	cat_col_entry(st, 1, e);
	if (e->path == NULL) {
		log_error("cannot resolve snapshot %lld: out of memory",
		    (long long)it->snapshot_id);
		return (-1);
	}
	return (1);
}

void
cat_col_entry(sqlite3_stmt *st, int col, struct entry *e)
{
	/*
	 * sqlite3_column_text gives BLOBs (target) a terminating NUL without
	 * changing their bytes.
	 */
	e->kind = sqlite3_column_int(st, col);
	e->mode = (uint32_t)sqlite3_column_int64(st, col + 1);
	e->uid = sqlite3_column_int64(st, col + 2);
	e->gid = sqlite3_column_int64(st, col + 3);
	e->uname = (const char *)sqlite3_column_text(st, col + 4);
	e->gname = (const char *)sqlite3_column_text(st, col + 5);
	e->size = sqlite3_column_int64(st, col + 6);
	e->mtime_ns = sqlite3_column_int64(st, col + 7);
	e->ctime_ns = sqlite3_column_int64(st, col + 8);
	/* SQLite integers are signed 64-bit: the bits were stored. */
	e->ino = (uint64_t)sqlite3_column_int64(st, col + 9);
	e->dev = (uint64_t)sqlite3_column_int64(st, col + 10);
	e->nlink = (uint32_t)sqlite3_column_int64(st, col + 11);
	e->rdev = (uint64_t)sqlite3_column_int64(st, col + 12);
	e->target = (const char *)sqlite3_column_text(st, col + 13);
	e->xattrs = sqlite3_column_blob(st, col + 14);
	e->xattrs_len = (size_t)sqlite3_column_bytes(st, col + 14);
	e->acl = (const char *)sqlite3_column_text(st, col + 15);
	e->content_id = sqlite3_column_int64(st, col + 16);
}
