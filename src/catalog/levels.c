#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/buf.h"
#include "coffer/log.h"

/*
 * Snapshot levels: single-path lookups in the view of a base snapshot
 * while a backup walks its source, the tombstones of what the walk did
 * not see, and synthetic fulls.
 *
 * The resolver's chain lives in a TEMP table, filled once by
 * catalog_resolver_new, so that each lookup is plain index probes instead
 * of a recursive CTE per call (which would rebuild the chain for each of
 * the 20,000 to 1,000,000 lookups of a backup).  Being in the
 * connection's temp database, it follows transactions: a rollback of the
 * transaction that created the resolver takes it back to what it held
 * before (emptied by the last catalog_resolver_free), which
 * catalog_resolver_tombstones detects rather than take an empty view for
 * one where nothing was deleted.  Lookups cannot tell: create the
 * resolver outside a transaction or in one that commits.
 *
 * The paths that were seen are a bitmap of path ids in memory (a bit per
 * path row of the catalog: 1.25 MB for 10,000,000 paths), read by
 * catalog_resolver_tombstones through an SQL function.  Unlike a TEMP
 * table, it costs no statement per lookup and survives rollbacks of the
 * backup's batches.
 */
static const char chain_setup[] =
	"CREATE TEMP TABLE IF NOT EXISTS coffer_chain ("
	" id INTEGER PRIMARY KEY,"
	" depth INTEGER NOT NULL"
	");"
	"DELETE FROM temp.coffer_chain;";

static const char chain_fill[] =
	"WITH RECURSIVE " CAT_CHAIN("chain", "?1")
	" INSERT INTO temp.coffer_chain(id, depth)"
	" SELECT id, depth FROM chain";

static const char chain_bounds[] =
	"SELECT count(*), min(id), max(id), (SELECT max(id) FROM path)"
	" FROM temp.coffer_chain";

/*
 * One path's newest row in the chain.  Driven by the name: its path row
 * (the unique index on name), then that path's rows in entry_path, which
 * lie side by side, limited to the snapshot ids between the chain's
 * smallest and largest (?2, ?3), so that versions in older fulls and
 * their chains are skipped inside the index range; each is kept if its
 * snapshot is a link (the chain table's primary key), and the shallowest
 * wins: min() with bare columns again, so there is always exactly one row
 * (all NULL when the path has none in the chain) and no sorter to open,
 * which ORDER BY depth LIMIT 1 needs.  A tombstone comes back as such:
 * the caller reports the path as absent.
 *
 * The chain is a TEMP table, not a CTE in the query (evaluated again at
 * each lookup), and the lookup is driven by the name, not by the chain (a
 * probe per link, so a cost that grows with the chain).  Outside a
 * transaction each lookup is its own read transaction (WAL locks), which
 * costs several times the lookup: the backup looks up inside its
 * transactions.  The timings are in bench/README.md.
 */
static const char lookup_sql[] =
	"SELECT e.path_id, p.name, min(ch.depth), " CAT_ENTRY_COLS("e.")
	" FROM path p"
	" CROSS JOIN entry x INDEXED BY entry_path ON x.path_id = p.id"
	"  AND x.snapshot_id BETWEEN ?2 AND ?3"
	" CROSS JOIN temp.coffer_chain ch ON ch.id = x.snapshot_id"
	" CROSS JOIN entry e ON e.snapshot_id = x.snapshot_id"
	"  AND e.path_id = x.path_id"
	" WHERE p.name = ?1";
#define LOOKUP_COL_ENTRY 3

/*
 * A tombstone in snapshot ?1 for each path of the view that was not seen.
 * A path that already has a row of ?1 (the walk recorded it without a
 * lookup) keeps it.  The view is the same CAT_NEWEST as everywhere, over
 * the chain table, by path id: no names needed.  The paths seen are left
 * out before the rows are grouped by path (a path's rows are all seen or
 * none), so that only the few unseen ones are sorted: grouping every row
 * of the view was most of an unchanged run's end.
 */
static const char tombstones_sql[] =
	"INSERT INTO entry(snapshot_id, path_id, kind)"
	" SELECT ?1, v.path_id, 0 FROM ("
	CAT_NEWEST("coffer_chain", "e.path_id AS path_id",
	    " WHERE NOT coffer_seen(e.path_id)", "e.path_id")
	") v"
	" WHERE v.depth >= 0"
	"  AND NOT EXISTS (SELECT 1 FROM entry o"
	"   WHERE o.snapshot_id = ?1 AND o.path_id = v.path_id)";

struct catalog_resolver {
	struct catalog *c;
	int64_t snapshot_id;
	int64_t nlinks;		/* the chain table: rows, smallest id */
	int64_t lo;
	sqlite3_stmt *lookup;
	uint64_t *seen;		/* bit per path id */
	size_t seen_words;
	struct buf strs;	/* the last entry's strings */
};

/* coffer_seen(path_id): 1 if the open resolver saw it. */
static void
seen_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct catalog *c = sqlite3_user_data(ctx);
	struct catalog_resolver *r = c->resolver;
	int64_t id = sqlite3_value_int64(argv[0]);
	uint64_t w;

	if (r == NULL) {
		sqlite3_result_error(ctx, "no open resolver", -1);
		return;
	}
	w = (uint64_t)id >> 6;
	sqlite3_result_int(ctx, id >= 0 && w < r->seen_words &&
	    (r->seen[w] >> (id & 63) & 1));
}

static int
mark_seen(struct catalog_resolver *r, int64_t id)
{
	uint64_t w = (uint64_t)id >> 6;
	uint64_t *p;
	size_t n;

	if (id < 0)
		return (0);
	if (w >= r->seen_words) {
		/* A path added since resolver_new: grow by half again. */
		n = (size_t)w + 1 + r->seen_words / 2;
		if ((p = realloc(r->seen, n * sizeof(*p))) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		memset(p + r->seen_words, 0,
		    (n - r->seen_words) * sizeof(*p));
		r->seen = p;
		r->seen_words = n;
	}
	r->seen[w] |= (uint64_t)1 << (id & 63);
	return (0);
}

void
cat_resolver_detach(struct catalog_resolver *r)
{
	sqlite3_finalize(r->lookup);
	r->lookup = NULL;
	r->c->resolver = NULL;
	r->c = NULL;
}

void
catalog_resolver_free(struct catalog_resolver *r)
{
	if (r == NULL)
		return;
	if (r->c != NULL && r->c->resolver == r) {
		r->c->resolver = NULL;
		/* No stale chain for a rollback to bring back. */
		(void)cat_exec(r->c, "DELETE FROM temp.coffer_chain",
		    "clear the resolver's chain");
	}
	sqlite3_finalize(r->lookup);
	free(r->seen);
	buf_release(&r->strs);
	free(r);
}

struct catalog_resolver *
catalog_resolver_new(struct catalog *c, int64_t snapshot_id)
{
	struct catalog_resolver *r;
	sqlite3_stmt *st = NULL;
	int64_t lo, hi, maxpath;

	if (c->resolver != NULL) {
		log_error("cannot resolve snapshot %lld: a resolver is "
		    "already open", (long long)snapshot_id);
		return (NULL);
	}
	if (cat_snapshot_exists(c, snapshot_id))
		return (NULL);
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	r->c = c;
	r->snapshot_id = snapshot_id;
	buf_init(&r->strs);
	if (!c->seen_fn) {
		/* Once per connection: replacing or deleting a function
		 * fails while any statement is running. */
		if (sqlite3_create_function_v2(c->db, "coffer_seen", 1,
		    SQLITE_UTF8 | SQLITE_DIRECTONLY, c, seen_fn, NULL, NULL,
		    NULL) != SQLITE_OK) {
			log_error("cannot register the resolver function: %s",
			    sqlite3_errmsg(c->db));
			goto err;
		}
		c->seen_fn = 1;
	}
	if (cat_exec(c, chain_setup, "prepare the resolver's chain table"))
		goto err;
	if ((st = cat_prepare(c, chain_fill, "resolve a snapshot's chain")) ==
	    NULL)
		goto err;
	sqlite3_bind_int64(st, 1, snapshot_id);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot resolve the chain of snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(c->db));
		goto err;
	}
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, chain_bounds, "resolve a snapshot's chain")) ==
	    NULL)
		goto err;
	if (sqlite3_step(st) != SQLITE_ROW) {
		log_error("cannot resolve the chain of snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(c->db));
		goto err;
	}
	r->nlinks = sqlite3_column_int64(st, 0);
	r->lo = lo = sqlite3_column_int64(st, 1);
	hi = sqlite3_column_int64(st, 2);
	maxpath = sqlite3_column_int64(st, 3);
	sqlite3_finalize(st);
	st = NULL;
	if (maxpath < 0 || (uint64_t)maxpath >> 6 >= SIZE_MAX /
	    sizeof(uint64_t)) {
		log_error("cannot resolve snapshot %lld: bad path ids",
		    (long long)snapshot_id);
		goto err;
	}
	r->seen_words = (size_t)((uint64_t)maxpath >> 6) + 1;
	if ((r->seen = calloc(r->seen_words, sizeof(*r->seen))) == NULL) {
		log_error("out of memory");
		goto err;
	}
	if (sqlite3_prepare_v3(c->db, lookup_sql, -1,
	    SQLITE_PREPARE_PERSISTENT, &r->lookup, NULL) != SQLITE_OK) {
		log_error("cannot prepare the resolver lookup: %s",
		    sqlite3_errmsg(c->db));
		goto err;
	}
	/* Bindings survive resets: only the name changes per lookup. */
	sqlite3_bind_int64(r->lookup, 2, lo);
	sqlite3_bind_int64(r->lookup, 3, hi);
	c->resolver = r;
	return (r);
err:
	sqlite3_finalize(st);
	catalog_resolver_free(r);
	return (NULL);
}

/* Copy a column's bytes plus a NUL into r->strs at *off. */
static const char *
keep_col(struct catalog_resolver *r, sqlite3_stmt *st, int i, size_t *off)
{
	const void *p;
	size_t n;
	char *dst;

	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return (NULL);
	p = sqlite3_column_blob(st, i);
	n = (size_t)sqlite3_column_bytes(st, i);
	dst = (char *)r->strs.data + *off;
	if (n)
		memcpy(dst, p, n);
	dst[n] = '\0';
	*off += n + 1;
	return (dst);
}

int
catalog_resolver_get(struct catalog_resolver *r, const char *path,
    struct entry *e)
{
	sqlite3_stmt *st = r->lookup;
	const char *name, *uname, *gname, *target, *xattrs, *acl;
	size_t need, off = 0;
	int rc, i, ret = -1;
	static const int strcols[] = { 1, LOOKUP_COL_ENTRY + 4,
		LOOKUP_COL_ENTRY + 5, LOOKUP_COL_ENTRY + 13,
		LOOKUP_COL_ENTRY + 14, LOOKUP_COL_ENTRY + 15 };

	if (r->c == NULL) {
		log_error("cannot look up '%s': the catalog was closed",
		    path ? path : "");
		return (-1);
	}
	if (path == NULL)
		return (0);
	cat_bind_blobstr(st, 1, path);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		ret = 0;
		goto out;
	}
	if (rc != SQLITE_ROW) {
		log_error("cannot look up '%s' in snapshot %lld: %s", path,
		    (long long)r->snapshot_id, sqlite3_errmsg(r->c->db));
		goto out;
	}
	if (sqlite3_column_type(st, LOOKUP_COL_ENTRY) == SQLITE_NULL ||
	    sqlite3_column_int(st, LOOKUP_COL_ENTRY) == ENTRY_TOMBSTONE) {
		ret = 0;
		goto out;
	}
	/*
	 * Copy the strings out, so that the statement is reset now: a
	 * statement left on a row would hold a read transaction open for
	 * the whole walk, and keep the WAL from being checkpointed.
	 */
	need = 0;
	for (i = 0; i < (int)(sizeof(strcols) / sizeof(strcols[0])); i++)
		need += (size_t)sqlite3_column_bytes(st, strcols[i]) + 1;
	buf_reset(&r->strs);
	if (buf_reserve(&r->strs, need))
		goto out;
	/* Strings first: column_type means nothing after a conversion. */
	name = keep_col(r, st, 1, &off);
	uname = keep_col(r, st, LOOKUP_COL_ENTRY + 4, &off);
	gname = keep_col(r, st, LOOKUP_COL_ENTRY + 5, &off);
	target = keep_col(r, st, LOOKUP_COL_ENTRY + 13, &off);
	xattrs = keep_col(r, st, LOOKUP_COL_ENTRY + 14, &off);
	acl = keep_col(r, st, LOOKUP_COL_ENTRY + 15, &off);
	memset(e, 0, sizeof(*e));
	cat_col_entry(st, LOOKUP_COL_ENTRY, e);
	e->path = name;
	e->uname = uname;
	e->gname = gname;
	e->target = target;
	e->xattrs = (const uint8_t *)xattrs;
	e->acl = acl;
	if (xattrs == NULL)
		e->xattrs_len = 0;
	if (mark_seen(r, sqlite3_column_int64(st, 0)))
		goto out;
	ret = 1;
out:
	sqlite3_reset(st);
	return (ret);
}

/* The paths at or below dir, bound by bind_under: names sort bytewise, so
 * dir's children lie in [dir/, dir0). */
#define UNDER " (name = ?1 OR (name >= ?2 AND name < ?3))"

static int
bind_under(sqlite3_stmt *st, const char *dir)
{
	struct buf lo = BUF_INIT, hi = BUF_INIT;
	int rc = -1;

	if (buf_printf(&lo, "%s/", dir) == 0 &&
	    buf_printf(&hi, "%s0", dir) == 0) {
		cat_bind_blobstr(st, 1, dir);
		sqlite3_bind_blob(st, 2, lo.data, (int)lo.len,
		    SQLITE_TRANSIENT);
		sqlite3_bind_blob(st, 3, hi.data, (int)hi.len,
		    SQLITE_TRANSIENT);
		rc = 0;
	}
	buf_release(&lo);
	buf_release(&hi);
	return (rc);
}

int
catalog_resolver_keep_under(struct catalog_resolver *r, const char *dir)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(r->c, "SELECT id FROM path WHERE" UNDER,
	    "keep a directory")) == NULL)
		return (-1);
	if (bind_under(st, dir)) {
		sqlite3_finalize(st);
		return (-1);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (mark_seen(r, sqlite3_column_int64(st, 0)))
			break;
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		log_error("cannot keep '%s' in the view: %s", dir,
		    sqlite3_errmsg(r->c->db));
	sqlite3_finalize(st);
	return (rc == SQLITE_DONE ? 0 : -1);
}

int
catalog_put_back(struct catalog *c, struct catalog_resolver *r,
    int64_t snapshot_id, const char *dir, int copy,
    int64_t delta[ENTRY_SOCK + 1])
{
	struct buf names = BUF_INIT;
	sqlite3_stmt *st = NULL;
	struct entry e;
	size_t off;
	int rc = -1, k, found;

	memset(delta, 0, sizeof(int64_t) * (ENTRY_SOCK + 1));
	if (r != NULL && r->c != c) {
		log_error("cannot put back '%s': the view's catalog was "
		    "closed", dir);
		return (-1);
	}
	/* What the walk stored there goes. */
	if ((st = cat_prepare(c, "SELECT kind, count(*) FROM entry"
	    " WHERE snapshot_id = ?4 AND path_id IN (SELECT id FROM path"
	    " WHERE" UNDER ") GROUP BY kind", "put back a directory")) == NULL)
		goto out;
	if (bind_under(st, dir))
		goto out;
	sqlite3_bind_int64(st, 4, snapshot_id);
	while ((k = sqlite3_step(st)) == SQLITE_ROW) {
		int kind = sqlite3_column_int(st, 0);

		if (kind >= 0 && kind <= ENTRY_SOCK)
			delta[kind] -= sqlite3_column_int64(st, 1);
	}
	if (k != SQLITE_DONE)
		goto fail;
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, "DELETE FROM entry WHERE snapshot_id = ?4"
	    " AND path_id IN (SELECT id FROM path WHERE" UNDER ")",
	    "put back a directory")) == NULL)
		goto out;
	if (bind_under(st, dir))
		goto out;
	sqlite3_bind_int64(st, 4, snapshot_id);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto fail;
	sqlite3_finalize(st);
	st = NULL;
	/* The view's versions: those of the base fall through by
	 * themselves, a full copies them. */
	if (copy && r != NULL) {
		if ((st = cat_prepare(c, "SELECT name FROM path WHERE"
		    UNDER " ORDER BY name", "put back a directory")) == NULL)
			goto out;
		if (bind_under(st, dir))
		goto out;
		while ((k = sqlite3_step(st)) == SQLITE_ROW)
			if (buf_append(&names, sqlite3_column_blob(st, 0),
			    (size_t)sqlite3_column_bytes(st, 0)) ||
			    buf_append(&names, "", 1))
				goto out;
		if (k != SQLITE_DONE)
			goto fail;
		sqlite3_finalize(st);
		st = NULL;
		for (off = 0; off < names.len; off += strlen(
		    (char *)names.data + off) + 1) {
			if ((found = catalog_resolver_get(r,
			    (char *)names.data + off, &e)) < 0)
				goto out;
			if (found == 0)
				continue;
			if (catalog_entry_add(c, snapshot_id, &e))
				goto out;
			if (e.kind >= 0 && e.kind <= ENTRY_SOCK)
				delta[e.kind]++;
		}
	}
	rc = r != NULL ? catalog_resolver_keep_under(r, dir) : 0;
	goto out;
fail:
	log_error("cannot put back '%s' in snapshot %lld: %s", dir,
	    (long long)snapshot_id, sqlite3_errmsg(c->db));
out:
	sqlite3_finalize(st);
	buf_release(&names);
	return (rc);
}

int
catalog_resolver_tombstones(struct catalog_resolver *r, int64_t snapshot_id,
    int64_t *n)
{
	struct catalog *c = r->c;
	sqlite3_stmt *st;
	int rc, ok, ret = -1;

	*n = 0;
	if (c == NULL) {
		log_error("cannot add tombstones to snapshot %lld: the catalog "
		    "was closed", (long long)snapshot_id);
		return (-1);
	}
	/*
	 * The chain table is the view: check that it is still this
	 * resolver's, not emptied or put back to an older content by a
	 * rollback of the transaction that filled it.
	 */
	if ((st = cat_prepare(c, "SELECT count(*), min(id),"
	    " count(*) FILTER (WHERE depth = 0 AND id = ?1)"
	    " FROM temp.coffer_chain", "check the resolver's chain")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, r->snapshot_id);
	rc = sqlite3_step(st);
	ok = rc == SQLITE_ROW && sqlite3_column_int64(st, 0) == r->nlinks &&
	    sqlite3_column_int64(st, 1) == r->lo &&
	    sqlite3_column_int64(st, 2) == 1;
	if (!ok)
		log_error("cannot add tombstones to snapshot %lld: %s",
		    (long long)snapshot_id, rc == SQLITE_ROW ? "the resolver's "
		    "chain was rolled back" : sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	if (!ok)
		return (-1);
	if ((st = cat_prepare(c, tombstones_sql, "add tombstones")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, snapshot_id);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot add tombstones to snapshot %lld: %s",
		    (long long)snapshot_id, sqlite3_errmsg(c->db));
		goto out;
	}
	*n = sqlite3_changes64(c->db);
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

/*
 * Synthetic full: the view of src, by path id (no names needed, no
 * order), inserted as dst's own rows in one statement; tombstones are
 * dropped by the view itself.  Then the kinds of dst's rows are counted
 * (a scan of dst's rows only: tens of ms for 100,000).  The insert costs
 * two to three resolutions: each row also goes into entry_path and
 * entry_content and has its three foreign keys checked.
 */
static const char materialize_sql[] =
	"WITH RECURSIVE " CAT_CHAIN("chain", "?1")
	" INSERT INTO entry(snapshot_id, path_id, " CAT_ENTRY_COLS("") ")"
	" SELECT ?2, v.path_id, " CAT_ENTRY_COLS("v.") " FROM ("
	CAT_NEWEST("chain", "e.path_id AS path_id", "", "e.path_id")
	") v WHERE v.depth >= 0";

static const char materialize_count_sql[] =
	"SELECT count(*) FILTER (WHERE kind = 1),"
	" count(*) FILTER (WHERE kind = 2),"
	" count(*) FILTER (WHERE kind > 2)"
	" FROM entry WHERE snapshot_id = ?1";

int
catalog_snapshot_materialize(struct catalog *c, int64_t src, int64_t dst,
    int64_t counts[3])
{
	sqlite3_stmt *st;
	int rc, ret = -1;

	counts[0] = counts[1] = counts[2] = 0;
	if (cat_snapshot_exists(c, src))
		return (-1);
	/* dst: a full of the same dataset, with no rows yet. */
	if ((st = cat_prepare(c, "SELECT d.level = 0 AND d.id <> s.id,"
	    " d.dataset_id = s.dataset_id,"
	    " EXISTS (SELECT 1 FROM entry WHERE snapshot_id = d.id)"
	    " FROM snapshot s, snapshot d WHERE s.id = ?1 AND d.id = ?2",
	    "look up a snapshot")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, src);
	sqlite3_bind_int64(st, 2, dst);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		if (rc == SQLITE_DONE)
			log_error("cannot consolidate snapshot %lld: no "
			    "snapshot with catalog id %lld", (long long)src,
			    (long long)dst);
		else
			log_error("cannot look up snapshot %lld: %s",
			    (long long)dst, sqlite3_errmsg(c->db));
		goto out;
	}
	if (!sqlite3_column_int(st, 0) || !sqlite3_column_int(st, 1) ||
	    sqlite3_column_int(st, 2)) {
		log_error("cannot consolidate snapshot %lld into snapshot "
		    "%lld: %s", (long long)src, (long long)dst,
		    !sqlite3_column_int(st, 0) ? "the target is not a new full" :
		    !sqlite3_column_int(st, 1) ? "they are of other datasets" :
		    "the target already has entries");
		goto out;
	}
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, materialize_sql, "consolidate a snapshot")) ==
	    NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, src);
	sqlite3_bind_int64(st, 2, dst);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot consolidate snapshot %lld into snapshot "
		    "%lld: %s", (long long)src, (long long)dst,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, materialize_count_sql,
	    "count a snapshot's entries")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, dst);
	if (sqlite3_step(st) != SQLITE_ROW) {
		log_error("cannot count the entries of snapshot %lld: %s",
		    (long long)dst, sqlite3_errmsg(c->db));
		goto out;
	}
	counts[0] = sqlite3_column_int64(st, 0);
	counts[1] = sqlite3_column_int64(st, 1);
	counts[2] = sqlite3_column_int64(st, 2);
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

/*
 * Rebase: a snapshot's own rows rewritten in place so that it resolves to
 * the same tree on a link that stays (catalog.h says why in place).  The
 * chains are TEMP tables of their own (not the resolver's, which a
 * backup may hold open) and follow the caller's transaction.
 */
static const char rebase_setup[] =
	"CREATE TEMP TABLE IF NOT EXISTS coffer_rebase_k ("
	" id INTEGER PRIMARY KEY, depth INTEGER NOT NULL);"
	"CREATE TEMP TABLE IF NOT EXISTS coffer_rebase_a ("
	" id INTEGER PRIMARY KEY, depth INTEGER NOT NULL);"
	"CREATE TEMP TABLE IF NOT EXISTS coffer_rebase_rk ("
	" path_id INTEGER PRIMARY KEY, kind, mode, uid, gid, uname, gname,"
	" size, mtime_ns, ctime_ns, ino, dev, nlink, rdev, target, xattrs,"
	" acl, content_id, depth);"
	"CREATE TEMP TABLE IF NOT EXISTS coffer_rebase_ra ("
	" path_id INTEGER PRIMARY KEY, kind, mode, uid, gid, uname, gname,"
	" size, mtime_ns, ctime_ns, ino, dev, nlink, rdev, target, xattrs,"
	" acl, content_id, depth);"
	"DELETE FROM temp.coffer_rebase_k; DELETE FROM temp.coffer_rebase_a;"
	"DELETE FROM temp.coffer_rebase_rk; DELETE FROM temp.coffer_rebase_ra;";

static const char rebase_clear[] =
	"DELETE FROM temp.coffer_rebase_k; DELETE FROM temp.coffer_rebase_a;"
	"DELETE FROM temp.coffer_rebase_rk; DELETE FROM temp.coffer_rebase_ra;";

static const char rebase_chain_k[] =
	"WITH RECURSIVE " CAT_CHAIN("chain", "?1")
	" INSERT INTO temp.coffer_rebase_k(id, depth)"
	" SELECT id, depth FROM chain";

static const char rebase_chain_a[] =
	"WITH RECURSIVE " CAT_CHAIN("chain", "?1")
	" INSERT INTO temp.coffer_rebase_a(id, depth)"
	" SELECT id, depth FROM chain";

/*
 * To a full: the view's rows that come from older links become k's own
 * (k's newest rows are its own already: no conflict), then k's
 * tombstones go, as a full has none.  SQLite reads the view into a
 * temporary table before inserting into the table it reads.
 */
static const char rebase_full_sql[] =
	"INSERT INTO entry(snapshot_id, path_id, " CAT_ENTRY_COLS("") ")"
	" SELECT ?1, v.path_id, " CAT_ENTRY_COLS("v.") " FROM ("
	CAT_NEWEST("coffer_rebase_k", "e.path_id AS path_id", "", "e.path_id")
	") v WHERE v.depth > 0";

/*
 * To a link a of k's chain: only the paths that the links above a
 * (depth < ?1) have rows for can differ between the views of k and a.
 * rk: k's newest row for each, tombstones included; ra: a's view of the
 * same paths, probed by path (entry_path), so that a's whole view is
 * never built.
 */
static const char rebase_rk_sql[] =
	"INSERT INTO temp.coffer_rebase_rk"
	" SELECT e.path_id, " CAT_ENTRY_COLS("e.") ", min(ck.depth)"
	" FROM coffer_rebase_k ck CROSS JOIN entry e ON e.snapshot_id = ck.id"
	" WHERE ck.depth < ?1 GROUP BY e.path_id";

static const char rebase_ra_sql[] =
	"INSERT INTO temp.coffer_rebase_ra"
	" SELECT x.path_id, " CAT_ENTRY_COLS("x.") ", min(ca.depth)"
	" FROM temp.coffer_rebase_rk r"
	" CROSS JOIN entry x INDEXED BY entry_path ON x.path_id = r.path_id"
	" CROSS JOIN coffer_rebase_a ca ON ca.id = x.snapshot_id"
	" GROUP BY x.path_id HAVING x.kind <> 0";

/* Every column, so that the tree is the same to the byte of metadata. */
#define REBASE_SAME                                                        \
	" a.kind = k.kind AND a.mode = k.mode AND a.uid = k.uid"            \
	" AND a.gid = k.gid AND a.uname IS k.uname AND a.gname IS k.gname"  \
	" AND a.size = k.size AND a.mtime_ns = k.mtime_ns"                  \
	" AND a.ctime_ns = k.ctime_ns AND a.ino = k.ino AND a.dev = k.dev"  \
	" AND a.nlink = k.nlink AND a.rdev = k.rdev AND a.target IS k.target" \
	" AND a.xattrs IS k.xattrs AND a.acl IS k.acl"                      \
	" AND a.content_id IS k.content_id"

static const char *const rebase_diff_sql[] = {
	"DELETE FROM entry WHERE snapshot_id = ?1",
	/* What k has that a has not, or not so. */
	"INSERT INTO entry(snapshot_id, path_id, " CAT_ENTRY_COLS("") ")"
	" SELECT ?1, k.path_id, " CAT_ENTRY_COLS("k.")
	" FROM temp.coffer_rebase_rk k"
	" LEFT JOIN temp.coffer_rebase_ra a ON a.path_id = k.path_id"
	" WHERE k.kind <> 0 AND (a.path_id IS NULL OR NOT (" REBASE_SAME "))",
	/* What a has that k deleted. */
	"INSERT INTO entry(snapshot_id, path_id, kind)"
	" SELECT ?1, k.path_id, 0 FROM temp.coffer_rebase_rk k"
	" JOIN temp.coffer_rebase_ra a ON a.path_id = k.path_id"
	" WHERE k.kind = 0",
};

/* Run sql with ?1 bound to v, for the rebase of snapshot k. */
static int
rebase_step(struct catalog *c, const char *sql, int64_t v, int64_t k)
{
	char what[64];

	snprintf(what, sizeof(what), "rebase snapshot %lld", (long long)k);
	return (cat_run(c, sql, what, CAT_VALS(CAT_INT(v)), NULL, NULL));
}

/* k's chain into coffer_rebase_k; a's depth in it in *da (-1: a is not
 * in it). */
static int
rebase_chain(struct catalog *c, int64_t k, int64_t a, int64_t *da)
{
	*da = -1;
	if (cat_exec(c, rebase_setup, "prepare a rebase") ||
	    rebase_step(c, rebase_chain_k, k, k))
		return (-1);
	return (cat_run(c, "SELECT depth FROM temp.coffer_rebase_k"
	    " WHERE id = ?1", "rebase a snapshot", CAT_VALS(CAT_INT(a)),
	    cat_row_int64, da) < 0 ? -1 : 0);
}

/*
 * k's row: its new place, and the counts of its own rows.  Then its
 * descendants: the same parents, but their full and depth follow k's.
 */
static const char rebase_row_sql[] =
	"UPDATE snapshot SET"
	" level = CASE WHEN ?2 IS NULL THEN 0"
	"  WHEN (SELECT level FROM snapshot WHERE id = ?2) = 0 THEN 1"
	"  ELSE 2 END,"
	" parent_id = ?2,"
	" full_id = coalesce((SELECT full_id FROM snapshot WHERE id = ?2), id),"
	" depth = coalesce((SELECT depth + 1 FROM snapshot WHERE id = ?2), 0),"
	" files = (SELECT count(*) FROM entry WHERE snapshot_id = ?1"
	"  AND kind = 1),"
	" dirs = (SELECT count(*) FROM entry WHERE snapshot_id = ?1"
	"  AND kind = 2),"
	" others = (SELECT count(*) FROM entry WHERE snapshot_id = ?1"
	"  AND kind > 2),"
	" deleted = (SELECT count(*) FROM entry WHERE snapshot_id = ?1"
	"  AND kind = 0)"
	" WHERE id = ?1";

static const char rebase_descendants_sql[] =
	"WITH RECURSIVE d(id, full, depth) AS ("
	" SELECT id, full_id, depth FROM snapshot WHERE id = ?1"
	" UNION ALL"
	" SELECT s.id, d.full, d.depth + 1 FROM d"
	" JOIN snapshot s ON s.parent_id = d.id WHERE d.depth < 100000)"
	" UPDATE snapshot SET full_id = d.full, depth = d.depth"
	" FROM d WHERE snapshot.id = d.id AND d.id <> ?1";

int
cat_snapshot_descendants_fix(struct catalog *c, int64_t id)
{
	return (rebase_step(c, rebase_descendants_sql, id, id));
}

int
catalog_snapshot_rebase(struct catalog *c, int64_t k, int64_t a)
{
	struct catalog_snapshot s;
	sqlite3_stmt *st;
	int64_t da;
	size_t i;
	int rc;

	memset(&s, 0, sizeof(s));
	if (catalog_snapshot_get(c, k, &s))
		return (-1);
	rc = s.level == LEVEL_FULL;
	catalog_snapshot_release(&s);
	if (rc && a == 0)
		return (0);	/* a full stands on its own already */
	if (cat_savepoint(c))
		return (-1);
	if (rebase_chain(c, k, a, &da))
		goto err;
	if (a != 0 && da <= 0) {
		log_error("cannot rebase snapshot %lld on %lld: not a link "
		    "of its chain", (long long)k, (long long)a);
		goto err;
	}
	if (a == 0) {
		if (rebase_step(c, rebase_full_sql, k, k) ||
		    rebase_step(c, "DELETE FROM entry WHERE snapshot_id = ?1"
		    " AND kind = 0", k, k))
			goto err;
	} else {
		if (rebase_step(c, rebase_chain_a, a, k) ||
		    rebase_step(c, rebase_rk_sql, da, k) ||
		    rebase_step(c, rebase_ra_sql, 0, k))
			goto err;
		for (i = 0; i < sizeof(rebase_diff_sql) /
		    sizeof(rebase_diff_sql[0]); i++)
			if (rebase_step(c, rebase_diff_sql[i], k, k))
				goto err;
	}
	if ((st = cat_prepare(c, rebase_row_sql, "rebase a snapshot")) == NULL)
		goto err;
	sqlite3_bind_int64(st, 1, k);
	if (a != 0)
		sqlite3_bind_int64(st, 2, a);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		log_error("cannot rebase snapshot %lld: %s", (long long)k,
		    sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE || cat_snapshot_descendants_fix(c, k) ||
	    cat_exec(c, rebase_clear, "finish a rebase"))
		goto err;
	return (cat_release(c));
err:
	cat_rollback_to(c);
	return (-1);
}
