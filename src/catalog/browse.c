/*
 * Browsing views a path and a directory at a time (catalog-browse.h).
 * The queries are resolve_under's (entries.c) narrowed: one path's
 * versions from entry_path, kept when their snapshot is in the chain,
 * the newest winning.
 */
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-browse.h"
#include "coffer/log.h"

#define CHAIN_CTE "WITH RECURSIVE " CAT_CHAIN("chain", "?1") " "

/* One path's newest row in the chain, from the path row p. */
#define ONE_PATH(where)                                                    \
	CHAIN_CTE                                                          \
	"SELECT p.name, p.id, " CAT_ENTRY_COLS("e.") ", min(chain.depth)"  \
	" FROM path p"                                                     \
	" CROSS JOIN entry x INDEXED BY entry_path ON x.path_id = p.id"    \
	" CROSS JOIN chain ON chain.id = x.snapshot_id"                    \
	" CROSS JOIN entry e ON e.snapshot_id = x.snapshot_id"             \
	"  AND e.path_id = x.path_id"                                      \
	" WHERE " where                                                    \
	" GROUP BY p.name HAVING e.kind <> 0 ORDER BY p.name"

static const char by_name[] = ONE_PATH("p.name = ?2");
static const char by_id[] = ONE_PATH("p.id = ?2");
/*
 * Names from ?2 on (inclusive), below ?3 when bound: a range of the path
 * index, which also gives the GROUP BY order, so rows come as the scan
 * reaches them and a caller that stops early has paid for what it read.
 */
static const char from_to[] = ONE_PATH("p.name >= ?2 AND p.name < ?3");
static const char from[] = ONE_PATH("p.name >= ?2");

struct catalog_browse {
	struct catalog *c;
	sqlite3_stmt *name, *id;
	void *mem;		/* the last entry, copied (entry_dup) */
};

struct catalog_browse *
catalog_browse_new(struct catalog *c)
{
	struct catalog_browse *b;

	if ((b = calloc(1, sizeof(*b))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	b->c = c;
	if ((b->name = cat_prepare(c, by_name, "look up a path")) == NULL ||
	    (b->id = cat_prepare(c, by_id, "look up a path")) == NULL) {
		catalog_browse_free(b);
		return (NULL);
	}
	return (b);
}

void
catalog_browse_free(struct catalog_browse *b)
{
	if (b == NULL)
		return;
	sqlite3_finalize(b->name);
	sqlite3_finalize(b->id);
	free(b->mem);
	free(b);
}

/* A row of ONE_PATH into *e and *path_id. */
static void
col_node(sqlite3_stmt *st, struct entry *e, int64_t *path_id)
{
	memset(e, 0, sizeof(*e));
	e->path = (const char *)sqlite3_column_text(st, 0);
	*path_id = sqlite3_column_int64(st, 1);
	cat_col_entry(st, 2, e);
}

int
catalog_browse_get(struct catalog_browse *b, int64_t snapshot_id,
    const char *name, int64_t *path_id, struct entry *e)
{
	sqlite3_stmt *st = name != NULL ? b->name : b->id;
	int rc;

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	sqlite3_bind_int64(st, 1, snapshot_id);
	if (name != NULL)
		cat_bind_blobstr(st, 2, name);
	else
		sqlite3_bind_int64(st, 2, *path_id);
	free(b->mem);
	b->mem = NULL;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		col_node(st, e, path_id);
		/* Copied, and the statement reset: a long-lived reader
		 * holds no read transaction between calls (it would keep
		 * writers' checkpoints from emptying the WAL). */
		if (e->path == NULL || entry_dup(e, &b->mem, e))
			rc = -1;
		else
			rc = 1;
	} else if (rc == SQLITE_DONE)
		rc = 0;
	else {
		log_error("cannot look up '%s' in snapshot %lld: %s",
		    name ? name : "", (long long)snapshot_id,
		    sqlite3_errmsg(b->c->db));
		rc = -1;
	}
	sqlite3_reset(st);
	return (rc);
}

struct catalog_children {
	struct catalog *c;
	sqlite3_stmt *st;
	int64_t snapshot_id;
	size_t plen;		/* the prefix: "dir/", or "" for the root */
	struct buf lo;		/* the lower bound bound to st */
	char *hi;		/* "dir0", NULL for the root */
	int done;
};

void
catalog_children_free(struct catalog_children *it)
{
	if (it == NULL)
		return;
	sqlite3_finalize(it->st);
	buf_release(&it->lo);
	free(it->hi);
	free(it);
}

/* Run the query again from it->lo. */
static void
children_bind(struct catalog_children *it)
{
	sqlite3_reset(it->st);
	sqlite3_bind_int64(it->st, 1, it->snapshot_id);
	/* Never NULL: an empty blob is bound as a zero-length one. */
	sqlite3_bind_blob(it->st, 2, it->lo.len ? (const void *)it->lo.data :
	    (const void *)"", (int)it->lo.len, SQLITE_STATIC);
	if (it->hi != NULL)
		cat_bind_blobstr(it->st, 3, it->hi);
}

/* memcmp order of two byte strings, as SQLite orders BLOBs. */
static int
blob_cmp(const void *a, size_t na, const void *b, size_t nb)
{
	int r = memcmp(a, b, na < nb ? na : nb);

	return (r != 0 ? r : na < nb ? -1 : na > nb);
}

struct catalog_children *
catalog_children(struct catalog *c, int64_t snapshot_id, const char *dir,
    const char *after)
{
	struct catalog_children *it;
	size_t n = strlen(dir);

	if ((it = calloc(1, sizeof(*it))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	it->c = c;
	it->snapshot_id = snapshot_id;
	buf_init(&it->lo);
	it->plen = n > 0 ? n + 1 : 0;
	/* "dir/" is before every name in dir, and the first name after
	 * after is after with a NUL byte appended (no path has one): the
	 * later of the two. */
	if (n > 0 && (buf_append(&it->lo, dir, n) || buf_append(&it->lo, "/",
	    1)))
		goto err;
	if (after != NULL && (it->lo.len == 0 || blob_cmp(after,
	    strlen(after) + 1, it->lo.data, it->lo.len) > 0)) {
		buf_reset(&it->lo);
		if (buf_append(&it->lo, after, strlen(after) + 1))
			goto err;
	}
	if (n > 0) {
		if ((it->hi = malloc(n + 2)) == NULL) {
			log_error("out of memory");
			goto err;
		}
		memcpy(it->hi, dir, n);
		it->hi[n] = '0';	/* '0' follows '/' */
		it->hi[n + 1] = '\0';
	}
	if ((it->st = cat_prepare(c, n > 0 ? from_to : from,
	    "list a directory")) == NULL)
		goto err;
	children_bind(it);
	return (it);
err:
	catalog_children_free(it);
	return (NULL);
}

int
catalog_children_next(struct catalog_children *it, struct entry *e,
    int64_t *path_id)
{
	const char *rest, *slash;
	int rc;

	while (!it->done) {
		rc = sqlite3_step(it->st);
		if (rc == SQLITE_DONE) {
			it->done = 1;
			break;
		}
		if (rc != SQLITE_ROW) {
			log_error("cannot list a directory of snapshot %lld: "
			    "%s", (long long)it->snapshot_id,
			    sqlite3_errmsg(it->c->db));
			return (-1);
		}
		col_node(it->st, e, path_id);
		if (e->path == NULL) {
			log_error("out of memory");
			return (-1);
		}
		rest = e->path + it->plen;
		if (it->plen == 0 && entry_path_is_root(e->path))
			continue;
		if ((slash = strchr(rest, '/')) == NULL)
			return (1);
		/* Below a child: on from "dir/child0", past its subtree. */
		buf_reset(&it->lo);
		if (buf_append(&it->lo, e->path, (size_t)(slash - e->path)) ||
		    buf_append(&it->lo, "0", 1))
			return (-1);
		children_bind(it);
	}
	return (0);
}

/* A probe of the bisection: the first chunk at or after seq. */
static int
probe(sqlite3_stmt *st, int64_t content_id, int64_t seq, int64_t *at,
    uint64_t *off)
{
	int rc;

	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, content_id);
	sqlite3_bind_int64(st, 2, seq);
	if ((rc = sqlite3_step(st)) != SQLITE_ROW)
		return (rc == SQLITE_DONE ? 0 : -1);
	*at = sqlite3_column_int64(st, 0);
	*off = (uint64_t)sqlite3_column_int64(st, 1);
	return (1);
}

int
catalog_content_chunks_at(struct catalog *c, int64_t content_id,
    uint64_t offset, size_t max, struct catalog_chunk_loc **locs,
    size_t *n)
{
	sqlite3_stmt *st, *ends;
	int64_t lo, hi, mid, at;
	uint64_t off;
	int rc = -1;

	*locs = NULL;
	*n = 0;
	if ((st = cat_prepare(c, "SELECT seq, file_offset FROM content_chunk"
	    " WHERE content_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT 1",
	    "find a chunk")) == NULL)
		return (-1);
	if ((ends = cat_prepare(c, "SELECT min(seq), max(seq) FROM "
	    "content_chunk WHERE content_id = ?1", "find a chunk")) == NULL)
		goto out;
	sqlite3_bind_int64(ends, 1, content_id);
	if (sqlite3_step(ends) != SQLITE_ROW)
		goto fail;
	if (sqlite3_column_type(ends, 0) == SQLITE_NULL) {
		rc = 0;		/* no chunks: all hole */
		goto out;
	}
	lo = sqlite3_column_int64(ends, 0);
	hi = sqlite3_column_int64(ends, 1);
	/* The last seq whose chunk starts at or before offset: lo's does,
	 * or none does and the list is read from its start. */
	if (probe(st, content_id, lo, &at, &off) != 1)
		goto fail;
	if (off <= offset) {
		while (lo < hi) {
			mid = lo + (hi - lo + 1) / 2;
			if ((rc = probe(st, content_id, mid, &at, &off)) < 0)
				goto fail;
			if (rc == 1 && off <= offset)
				lo = at;
			else
				hi = mid - 1;
		}
	}
	sqlite3_finalize(st);
	sqlite3_finalize(ends);
	at = lo - 1;
	return (catalog_content_chunks_page(c, content_id, &at, max, locs, n));
fail:
	log_error("cannot find the chunks of content %lld: %s",
	    (long long)content_id, sqlite3_errmsg(c->db));
	rc = -1;
out:
	sqlite3_finalize(st);
	sqlite3_finalize(ends);
	return (rc);
}

int
catalog_content_data_bytes(struct catalog *c, int64_t content_id,
    uint64_t *bytes)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_stmt(c, ST_CONTENT_DATA_BYTES)) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, content_id);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*bytes = (uint64_t)sqlite3_column_int64(st, 0);
	else
		log_error("cannot read the size of content %lld: %s",
		    (long long)content_id, sqlite3_errmsg(c->db));
	sqlite3_reset(st);
	return (rc == SQLITE_ROW ? 0 : -1);
}
