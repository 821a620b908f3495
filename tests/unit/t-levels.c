/*
 * Unit tests for snapshot levels in the catalog: base selection, the
 * resolver (lookups and tombstones), diff between views and synthetic
 * fulls, on a hand-made dataset whose every answer is written out here;
 * then timings (diagnostics) on a 100,000-path full with 10 incremental
 * links, whose views and diffs are checked against a model.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/buf.h"
#include "coffer/catalog.h"
#include "coffer/entry.h"
#include "coffer/fsutil.h"
#include "coffer/progress.h"
#include "tap.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/t-levels-XXXXXX";
static char *dbpath;

/* xorshift64*: reproducible pseudo-random numbers. */
static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint64_t
rnd(void)
{
	return (xorshift64s(&rng_state));
}

static int64_t
new_snapshot(struct catalog *c, int64_t dataset_id, unsigned n, int level,
    int64_t parent_id, int64_t started, int state)
{
	static char host[] = "testhost", source[] = "/data/src";
	struct catalog_snapshot s;

	memset(&s, 0, sizeof(s));
	snprintf(s.sid, sizeof(s.sid), "1e7e1%027x", n);
	s.dataset_id = dataset_id;
	s.level = level;
	s.parent_id = parent_id;
	s.state = state;
	s.started_ns = started;
	s.host = host;
	s.source = source;
	if (catalog_snapshot_create(c, &s))
		return (0);
	return (s.id);
}

static void
fill_entry(struct entry *e, const char *path, int kind, int64_t size)
{
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->kind = kind;
	e->mode = kind == ENTRY_DIR ? 0755 : 0644;
	e->uid = 1000;
	e->gid = 100;
	e->uname = "user";
	e->gname = "users";
	e->size = size;
	e->mtime_ns = 1000;
	e->ctime_ns = 1001;
	e->ino = 7;
	e->dev = 8;
	e->nlink = 1;
}

static int add_failures;

static void
add(struct catalog *c, int64_t snap, const struct entry *e)
{
	if (catalog_entry_add(c, snap, e)) {
		diag("cannot add '%s' to %lld", e->path, (long long)snap);
		add_failures++;
	}
}

static void
add_simple(struct catalog *c, int64_t snap, const char *path, int kind,
    int64_t size, int64_t content)
{
	struct entry e;

	fill_entry(&e, path, kind, size);
	e.content_id = content;
	add(c, snap, &e);
}

static int64_t
content(struct catalog *c, unsigned n, uint64_t size)
{
	uint8_t hash[32];
	int64_t id = 0;

	memset(hash, 0, sizeof(hash));
	hash[0] = 0xcc;
	hash[31] = (uint8_t)n;
	if (catalog_content_put(c, hash, size, NULL, 0, &id))
		add_failures++;
	return (id);
}

/* The hand-made dataset (see build()). */
static int64_t ds, snap_f, snap_i1, snap_d, snap_i2;
static int64_t c1, c2, c3, c4, c5;
static struct buf xa1 = BUF_INIT, xa2 = BUF_INIT;

/*
 * F: the full.  I1 on F, D (differential) on F, I2 on I1; created in that
 * order, so that D's rows lie between the chain I2 -> I1 -> F's ids.
 */
static void
build(struct catalog *c)
{
	struct entry e;

	ok(catalog_dataset_id(c, "/data/lv", 1, &ds) == 1, "dataset");
	ok(catalog_begin(c) == 0, "begin");
	c1 = content(c, 1, 10);
	c2 = content(c, 2, 20);
	c3 = content(c, 3, 10);
	c4 = content(c, 4, 25);
	c5 = content(c, 5, 5);
	entry_xattrs_add(&xa1, "user.a", "1", 1);
	entry_xattrs_add(&xa2, "user.a", "2", 1);

	snap_f = new_snapshot(c, ds, 1, LEVEL_FULL, 0, 100, SNAP_COMPLETE);
	add_simple(c, snap_f, "a", ENTRY_DIR, 0, 0);
	add_simple(c, snap_f, "a/f1", ENTRY_FILE, 10, c1);
	add_simple(c, snap_f, "a/f2", ENTRY_FILE, 20, c2);
	add_simple(c, snap_f, "a/sub", ENTRY_DIR, 0, 0);
	add_simple(c, snap_f, "a/sub/x", ENTRY_FILE, 5, c5);
	add_simple(c, snap_f, "a/sub/y", ENTRY_FILE, 5, c5);
	add_simple(c, snap_f, "b", ENTRY_FILE, 5, c5);
	fill_entry(&e, "c", ENTRY_SYMLINK, 0);
	e.target = "t1";
	add(c, snap_f, &e);
	add_simple(c, snap_f, "d", ENTRY_FILE, 5, c5);
	fill_entry(&e, "dev", ENTRY_CHR, 0);
	e.rdev = 5;
	add(c, snap_f, &e);
	add_simple(c, snap_f, "e", ENTRY_FILE, 5, c5);
	add_simple(c, snap_f, "g", ENTRY_FILE, 5, c5);
	add_simple(c, snap_f, "h", ENTRY_FILE, 5, c5);
	add_simple(c, snap_f, "k", ENTRY_FIFO, 0, 0);
	fill_entry(&e, "x1", ENTRY_FILE, 5);
	e.content_id = c5;
	e.xattrs = xa1.data;
	e.xattrs_len = xa1.len;
	add(c, snap_f, &e);
	fill_entry(&e, "y1", ENTRY_FILE, 5);
	e.content_id = c5;
	e.acl = "user::rw-\ngroup::r--\nother::r--\n";
	add(c, snap_f, &e);
	add_simple(c, snap_f, "z", ENTRY_FILE, 5, c5);

	/* I1: b file -> directory with a file in it; d chmod; e deleted;
	 * a/f1 rewritten (same size); new1 added; a/sub removed with all
	 * that was in it. */
	snap_i1 = new_snapshot(c, ds, 2, LEVEL_INCREMENTAL, snap_f, 200,
	    SNAP_COMPLETE);
	add_simple(c, snap_i1, "b", ENTRY_DIR, 0, 0);
	add_simple(c, snap_i1, "b/inner", ENTRY_FILE, 5, c5);
	fill_entry(&e, "d", ENTRY_FILE, 5);
	e.content_id = c5;
	e.mode = 0600;
	add(c, snap_i1, &e);
	add_simple(c, snap_i1, "e", ENTRY_TOMBSTONE, 0, 0);
	add_simple(c, snap_i1, "a/f1", ENTRY_FILE, 10, c3);
	add_simple(c, snap_i1, "new1", ENTRY_FILE, 5, c5);
	add_simple(c, snap_i1, "a/sub", ENTRY_TOMBSTONE, 0, 0);
	add_simple(c, snap_i1, "a/sub/x", ENTRY_TOMBSTONE, 0, 0);
	add_simple(c, snap_i1, "a/sub/y", ENTRY_TOMBSTONE, 0, 0);

	/* D on F: a/f2 grows; b becomes a symlink; h touched (mtime only);
	 * k deleted; z2 added. */
	snap_d = new_snapshot(c, ds, 3, LEVEL_DIFFERENTIAL, snap_f, 250,
	    SNAP_COMPLETE);
	add_simple(c, snap_d, "a/f2", ENTRY_FILE, 25, c4);
	fill_entry(&e, "b", ENTRY_SYMLINK, 0);
	e.target = "elsewhere";
	add(c, snap_d, &e);
	fill_entry(&e, "h", ENTRY_FILE, 5);
	e.content_id = c5;
	e.mtime_ns = 2000;
	add(c, snap_d, &e);
	add_simple(c, snap_d, "k", ENTRY_TOMBSTONE, 0, 0);
	add_simple(c, snap_d, "z2", ENTRY_FILE, 5, c5);

	/* I2 on I1: c retargeted; g with only ctime, inode, device and
	 * link count changed (a copy); dev's rdev changed; x1's xattrs and
	 * y1's ACL changed; new1 deleted again; e recreated as it was in F;
	 * a/f2 chown; new2 added. */
	snap_i2 = new_snapshot(c, ds, 4, LEVEL_INCREMENTAL, snap_i1, 300,
	    SNAP_COMPLETE);
	fill_entry(&e, "c", ENTRY_SYMLINK, 0);
	e.target = "t2";
	add(c, snap_i2, &e);
	fill_entry(&e, "g", ENTRY_FILE, 5);
	e.content_id = c5;
	e.ctime_ns = 5555;
	e.ino = 99;
	e.dev = 98;
	e.nlink = 2;
	add(c, snap_i2, &e);
	fill_entry(&e, "dev", ENTRY_CHR, 0);
	e.rdev = 6;
	add(c, snap_i2, &e);
	fill_entry(&e, "x1", ENTRY_FILE, 5);
	e.content_id = c5;
	e.xattrs = xa2.data;
	e.xattrs_len = xa2.len;
	add(c, snap_i2, &e);
	fill_entry(&e, "y1", ENTRY_FILE, 5);
	e.content_id = c5;
	e.acl = "user::rw-\ngroup::rw-\nother::r--\n";
	add(c, snap_i2, &e);
	add_simple(c, snap_i2, "new1", ENTRY_TOMBSTONE, 0, 0);
	add_simple(c, snap_i2, "e", ENTRY_FILE, 5, c5);
	fill_entry(&e, "a/f2", ENTRY_FILE, 20);
	e.content_id = c2;
	e.uid = 2000;
	add(c, snap_i2, &e);
	add_simple(c, snap_i2, "new2", ENTRY_FILE, 5, c5);

	ok(catalog_commit(c) == 0 && add_failures == 0 && snap_f && snap_i1 &&
	    snap_d && snap_i2, "hand-made dataset built");
}

/* The names of a snapshot's view, comma-separated. */
static char *
view_str(struct catalog *c, int64_t id)
{
	struct catalog_iter *it;
	struct buf b = BUF_INIT;
	struct entry e;
	int rc;

	if ((it = catalog_entries(c, id, NULL)) == NULL)
		return (NULL);
	buf_printf(&b, "%s", "");
	while ((rc = catalog_iter_next(it, &e)) == 1)
		buf_printf(&b, "%s%s", b.len ? "," : "", e.path);
	catalog_iter_free(it);
	if (rc != 0) {
		buf_release(&b);
		return (NULL);
	}
	return ((char *)b.data);
}

static void
check_view(struct catalog *c, int64_t id, const char *want, const char *name)
{
	char *got = view_str(c, id);

	if (!ok(got != NULL && strcmp(got, want) == 0, "%s", name))
		diag("got  '%s'\n# want '%s'", got ? got : "(error)", want);
	free(got);
}

static void
test_base(struct catalog *c)
{
	struct catalog_snapshot s;
	int64_t ds2, ds3, t1, t2, failed, running;

	check_view(c, snap_f, "a,a/f1,a/f2,a/sub,a/sub/x,a/sub/y,b,c,d,dev,e,"
	    "g,h,k,x1,y1,z", "view of F");
	check_view(c, snap_i1, "a,a/f1,a/f2,b,b/inner,c,d,dev,g,h,k,new1,x1,"
	    "y1,z", "view of I1");
	check_view(c, snap_i2, "a,a/f1,a/f2,b,b/inner,c,d,dev,e,g,h,k,new2,"
	    "x1,y1,z", "view of I2");
	check_view(c, snap_d, "a,a/f1,a/f2,a/sub,a/sub/x,a/sub/y,b,c,d,dev,"
	    "e,g,h,x1,y1,z,z2", "view of D");

	/* A failed full and a running incremental, both newer: ignored. */
	failed = new_snapshot(c, ds, 5, LEVEL_FULL, 0, 800, SNAP_FAILED);
	running = new_snapshot(c, ds, 6, LEVEL_INCREMENTAL, snap_i2, 900,
	    SNAP_RUNNING);
	ok(failed > 0 && running > 0, "failed and running snapshots");

	ok(catalog_snapshot_base(c, ds, LEVEL_FULL, &s) == 0,
	    "a full has no base");
	ok(catalog_snapshot_base(c, ds, LEVEL_DIFFERENTIAL, &s) == 1 &&
	    s.id == snap_f && s.level == LEVEL_FULL,
	    "differential: base is the newest complete full");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_base(c, ds, LEVEL_INCREMENTAL, &s) == 1 &&
	    s.id == snap_i2 && s.depth == 2 && s.full_id == snap_f &&
	    strcmp(s.dataset, "/data/lv") == 0,
	    "incremental: base is the newest complete snapshot (I2)");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_base(c, ds, 7, &s) == -1, "bad level");

	/* Another dataset: nothing, then ties on start time. */
	ok(catalog_dataset_id(c, "/data/other", 1, &ds2) == 1, "dataset 2");
	ok(catalog_snapshot_base(c, ds2, LEVEL_INCREMENTAL, &s) == 0 &&
	    catalog_snapshot_base(c, ds2, LEVEL_DIFFERENTIAL, &s) == 0,
	    "no base in an empty dataset");
	t1 = new_snapshot(c, ds2, 7, LEVEL_FULL, 0, 5000, SNAP_COMPLETE);
	t2 = new_snapshot(c, ds2, 8, LEVEL_FULL, 0, 5000, SNAP_COMPLETE);
	ok(t1 > 0 && t2 > t1, "two fulls started at the same time");
	ok(catalog_snapshot_base(c, ds2, LEVEL_DIFFERENTIAL, &s) == 1 &&
	    s.id == t2, "tie on start time: the later row");
	catalog_snapshot_release(&s);
	ok(catalog_dataset_id(c, "/data/third", 1, &ds3) == 1 &&
	    new_snapshot(c, ds3, 9, LEVEL_FULL, 0, 10, SNAP_COMPLETE) > 0 &&
	    new_snapshot(c, ds3, 10, LEVEL_INCREMENTAL, t1, 20,
	    SNAP_COMPLETE) == 0, "(an incremental across datasets is "
	    "refused)");
	ok(catalog_snapshot_base(c, ds3, LEVEL_INCREMENTAL, &s) == 1 &&
	    s.level == LEVEL_FULL && s.dataset_id == ds3,
	    "incremental on a lone full: the full");
	catalog_snapshot_release(&s);
}

static int
str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a == b);
	return (strcmp(a, b) == 0);
}

static int64_t
raw_int(const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_open(dbpath, &h) != SQLITE_OK)
		return (-1);
	if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(h);
	return (v);
}

static void
test_resolver(struct catalog *c)
{
	struct catalog_resolver *r, *r2;
	struct entry e;
	int64_t i3, n;
	static const char *walk[] = { "a", "a/f1", "a/f2", "c", "d", "dev",
		"e", "h", "new2", "x1", "y1", "z", "new-in-source", "new1",
		"a/sub" };
	char sql[256];
	size_t i;
	int rc, good, found;

	ok(catalog_resolver_new(c, 424242) == NULL, "unknown snapshot");
	r = catalog_resolver_new(c, snap_i2);
	ok(r != NULL, "resolver on I2");
	if (r == NULL)
		return;
	ok(catalog_resolver_new(c, snap_f) == NULL,
	    "one resolver at a time");

	ok(catalog_resolver_get(r, "a/f1", &e) == 1 && e.kind == ENTRY_FILE &&
	    e.content_id == c3 && e.size == 10 && strcmp(e.path, "a/f1") == 0,
	    "a/f1: I1's version");
	ok(catalog_resolver_get(r, "h", &e) == 1 && e.mtime_ns == 1000,
	    "h: F's version (D's is not in the chain)");
	ok(catalog_resolver_get(r, "k", &e) == 1 && e.kind == ENTRY_FIFO,
	    "k: present (D's tombstone is not in the chain)");
	ok(catalog_resolver_get(r, "z2", &e) == 0,
	    "z2: only in D, absent");
	ok(catalog_resolver_get(r, "new1", &e) == 0, "new1: deleted in I2");
	ok(catalog_resolver_get(r, "a/sub", &e) == 0,
	    "a/sub: deleted in I1");
	ok(catalog_resolver_get(r, "a/sub/x", &e) == 0,
	    "a/sub/x: deleted in I1");
	ok(catalog_resolver_get(r, "nope/never", &e) == 0,
	    "a path never stored");
	ok(catalog_resolver_get(r, "b", &e) == 1 && e.kind == ENTRY_DIR,
	    "b: a directory since I1");
	rc = catalog_resolver_get(r, "x1", &e);
	good = rc == 1 && e.kind == ENTRY_FILE && e.mode == 0644 &&
	    e.uid == 1000 && e.gid == 100 && str_eq(e.uname, "user") &&
	    str_eq(e.gname, "users") && e.size == 5 && e.mtime_ns == 1000 &&
	    e.ctime_ns == 1001 && e.ino == 7 && e.dev == 8 && e.nlink == 1 &&
	    e.rdev == 0 && e.target == NULL && e.xattrs_len == xa2.len &&
	    memcmp(e.xattrs, xa2.data, xa2.len) == 0 && e.acl == NULL &&
	    e.content_id == c5 && strcmp(e.path, "x1") == 0;
	ok(good, "x1: every field of I2's version");
	ok(catalog_resolver_get(r, "c", &e) == 1 && str_eq(e.target, "t2") &&
	    e.kind == ENTRY_SYMLINK, "c: I2's target");
	ok(catalog_resolver_get(r, "y1", &e) == 1 &&
	    str_eq(e.acl, "user::rw-\ngroup::rw-\nother::r--\n"),
	    "y1: I2's ACL");
	ok(catalog_resolver_get(r, "dev", &e) == 1 && e.rdev == 6,
	    "dev: I2's rdev");

	/*
	 * A new incremental I3 on I2.  The walk sees everything but b,
	 * b/inner, g and k; g gets a row of I3 without a lookup.  b and
	 * b/inner (a directory and what was in it), and k get tombstones;
	 * g keeps its row; the looked-up deleted and absent paths (new1,
	 * a/sub, new-in-source) get none.
	 */
	catalog_resolver_free(r);
	r = catalog_resolver_new(c, snap_i2);
	i3 = new_snapshot(c, ds, 11, LEVEL_INCREMENTAL, snap_i2, 1000,
	    SNAP_RUNNING);
	ok(r != NULL && i3 > 0 && catalog_begin(c) == 0,
	    "new resolver on I2, I3 created");
	if (r == NULL)
		return;
	found = 0;
	for (i = 0; i < sizeof(walk) / sizeof(walk[0]); i++)
		if (catalog_resolver_get(r, walk[i], &e) == 1)
			found++;
	ok(found == 12, "walk: 12 of 15 found (%d)", found);
	add_simple(c, i3, "g", ENTRY_FILE, 6, c5);
	add_simple(c, i3, "new-in-source", ENTRY_FILE, 5, c5);
	n = -1;
	rc = catalog_resolver_tombstones(r, i3, &n);
	ok(rc == 0 && n == 3, "3 tombstones (%lld)", (long long)n);
	ok(catalog_commit(c) == 0 && add_failures == 0, "commit I3");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM entry WHERE "
	    "snapshot_id = %lld AND kind = 0 AND mode = 0 AND uid = 0 AND "
	    "size = 0 AND mtime_ns = 0 AND content_id IS NULL AND "
	    "uname IS NULL", (long long)i3);
	ok(raw_int(sql) == 3, "tombstone rows: kind 0, other columns neutral");
	check_view(c, i3, "a,a/f1,a/f2,c,d,dev,e,g,h,new-in-source,new2,x1,"
	    "y1,z", "view of I3: unseen paths deleted");
	catalog_resolver_free(r);

	/* Nothing seen: everything in the view gets a tombstone. */
	r = catalog_resolver_new(c, snap_d);
	i3 = new_snapshot(c, ds, 12, LEVEL_INCREMENTAL, snap_d, 1100,
	    SNAP_RUNNING);
	n = -1;
	rc = r != NULL && i3 > 0 ? catalog_resolver_tombstones(r, i3, &n) : -1;
	ok(rc == 0 && n == 17, "nothing seen: 17 tombstones (%lld)",
	    (long long)n);
	check_view(c, i3, "", "view of an incremental where all was deleted");
	catalog_resolver_free(r);

	/* A rollback of the transaction that made the resolver is noticed
	 * rather than taken for an empty (or other) view. */
	r2 = catalog_resolver_new(c, snap_f);
	catalog_resolver_free(r2);
	ok(catalog_begin(c) == 0, "begin");
	r = catalog_resolver_new(c, snap_i2);
	ok(r != NULL && catalog_resolver_get(r, "a", &e) == 1,
	    "resolver in a transaction");
	catalog_rollback(c);
	i3 = new_snapshot(c, ds, 13, LEVEL_INCREMENTAL, snap_i2, 1200,
	    SNAP_RUNNING);
	ok(r != NULL && catalog_resolver_tombstones(r, i3, &n) == -1,
	    "tombstones after the chain was rolled back: refused");
	catalog_resolver_free(r);
	r = catalog_resolver_new(c, snap_i2);
	ok(r != NULL && catalog_resolver_get(r, "a/f1", &e) == 1 &&
	    e.content_id == c3, "a new resolver works after that");
	catalog_resolver_free(r);
}

/* Diff output as "M a/f1,T a/f2,..." (A added, D deleted, M modified,
 * T metadata); "!" marks a callback whose arguments were inconsistent. */
struct diffout {
	struct buf b;
	int64_t a_size, b_size;	/* of a/f2 */
	int stop_after;
	long n;			/* changes reported */
	long kinds[5];		/* of each DIFF_* */
	long bad;		/* inconsistent callbacks */
};

static int
diff_cb(void *arg, int change, const struct entry *ea, const struct entry *eb)
{
	struct diffout *d = arg;
	const struct entry *any = ea ? ea : eb;
	static const char letters[] = "?ADMT";
	int bad;

	bad = change < 1 || change > 4 || any == NULL ||
	    (change == DIFF_ADDED) != (ea == NULL) ||
	    (change == DIFF_DELETED) != (eb == NULL) ||
	    (ea && eb && strcmp(ea->path, eb->path) != 0) ||
	    (ea && ea->kind == ENTRY_TOMBSTONE) ||
	    (eb && eb->kind == ENTRY_TOMBSTONE);
	buf_printf(&d->b, "%s%s%c %s", d->b.len ? "," : "", bad ? "!" : "",
	    letters[change >= 1 && change <= 4 ? change : 0],
	    any ? any->path : "(null)");
	if (any && strcmp(any->path, "a/f2") == 0) {
		d->a_size = ea ? ea->size : -1;
		d->b_size = eb ? eb->size : -1;
	}
	d->n++;
	d->kinds[change >= 1 && change <= 4 ? change : 0]++;
	d->bad += bad;
	if (d->stop_after && --d->stop_after == 0)
		return (7);
	return (0);
}

static void
check_diff(struct catalog *c, int64_t a, int64_t b, const char *want,
    const char *name, struct diffout *d)
{
	int rc;

	memset(d, 0, sizeof(*d));
	buf_printf(&d->b, "%s", "");
	rc = catalog_diff(c, a, b, diff_cb, d);
	if (!ok(rc == 0 && strcmp((char *)d->b.data, want) == 0, "%s", name))
		diag("rc %d\n# got  '%s'\n# want '%s'", rc,
		    (char *)d->b.data, want);
	buf_release(&d->b);
}

static void
test_diff(struct catalog *c)
{
	struct diffout d;
	int rc;

	check_diff(c, snap_f, snap_i2,
	    "M a/f1,T a/f2,D a/sub,D a/sub/x,D a/sub/y,M b,A b/inner,M c,"
	    "T d,M dev,A new2,T x1,T y1", "diff F I2", &d);
	ok(d.a_size == 20 && d.b_size == 20, "a/f2 entries of both sides");
	check_diff(c, snap_i1, snap_i2,
	    "T a/f2,M c,M dev,A e,D new1,A new2,T x1,T y1", "diff I1 I2", &d);
	check_diff(c, snap_f, snap_d, "M a/f2,M b,T h,D k,A z2", "diff F D",
	    &d);
	ok(d.a_size == 20 && d.b_size == 25, "a/f2 sizes 20 -> 25");
	check_diff(c, snap_d, snap_i2,
	    "M a/f1,M a/f2,D a/sub,D a/sub/x,D a/sub/y,M b,A b/inner,M c,"
	    "T d,M dev,T h,A k,A new2,T x1,T y1,D z2",
	    "diff D I2 (two chains)", &d);
	check_diff(c, snap_i2, snap_d,
	    "M a/f1,M a/f2,A a/sub,A a/sub/x,A a/sub/y,M b,D b/inner,M c,"
	    "T d,M dev,T h,D k,D new2,T x1,T y1,A z2",
	    "diff I2 D (reversed)", &d);
	check_diff(c, snap_i2, snap_i2, "", "diff of a snapshot with itself",
	    &d);

	memset(&d, 0, sizeof(d));
	d.stop_after = 2;
	rc = catalog_diff(c, snap_f, snap_i2, diff_cb, &d);
	ok(rc == 7 && strcmp((char *)d.b.data, "M a/f1,T a/f2") == 0,
	    "diff stops on the callback's value");
	buf_release(&d.b);
	ok(catalog_diff(c, snap_f, 424242, diff_cb, &d) == -1,
	    "diff with an unknown snapshot");
}

/* Compare two resolutions field by field; 1 if equal. */
static int
same_views(struct catalog *c, int64_t a, int64_t b, size_t *n)
{
	struct catalog_iter *ia, *ib;
	struct entry x, y;
	int ra, rb, bad = 0;

	*n = 0;
	ia = catalog_entries(c, a, NULL);
	ib = catalog_entries(c, b, NULL);
	if (ia == NULL || ib == NULL)
		bad = 1;
	while (!bad) {
		ra = catalog_iter_next(ia, &x);
		rb = catalog_iter_next(ib, &y);
		if (ra != rb) {
			bad = 1;
			diag("one view ends first after %zu", *n);
		}
		if (ra != 1)
			break;
		if (strcmp(x.path, y.path) != 0 || x.kind != y.kind ||
		    x.mode != y.mode || x.uid != y.uid || x.gid != y.gid ||
		    !str_eq(x.uname, y.uname) || !str_eq(x.gname, y.gname) ||
		    x.size != y.size || x.mtime_ns != y.mtime_ns ||
		    x.ctime_ns != y.ctime_ns || x.ino != y.ino ||
		    x.dev != y.dev || x.nlink != y.nlink || x.rdev != y.rdev ||
		    !str_eq(x.target, y.target) ||
		    x.xattrs_len != y.xattrs_len || (x.xattrs_len &&
		    memcmp(x.xattrs, y.xattrs, x.xattrs_len) != 0) ||
		    !str_eq(x.acl, y.acl) || x.content_id != y.content_id) {
			diag("entries differ at '%s' / '%s'", x.path, y.path);
			bad = 1;
		}
		(*n)++;
	}
	catalog_iter_free(ia);
	catalog_iter_free(ib);
	return (!bad);
}

static void
test_materialize(struct catalog *c)
{
	struct diffout d;
	int64_t f2, f3, counts[3] = { -1, -1, -1 };
	char sql[128];
	size_t n;
	int rc;

	f2 = new_snapshot(c, ds, 20, LEVEL_FULL, 0, 2000, SNAP_RUNNING);
	ok(f2 > 0 && catalog_snapshot_materialize(c, snap_i2, f2, counts) ==
	    0, "materialize I2 into a new full");
	ok(counts[0] == 11 && counts[1] == 2 && counts[2] == 3,
	    "counts: 11 files, 2 dirs, 3 others (%lld %lld %lld)",
	    (long long)counts[0], (long long)counts[1],
	    (long long)counts[2]);
	rc = same_views(c, snap_i2, f2, &n);
	ok(rc && n == 16, "the new full's view is I2's, field by field (%zu)",
	    n);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM entry WHERE "
	    "snapshot_id = %lld AND kind = 0", (long long)f2);
	ok(raw_int(sql) == 0, "no tombstones copied");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM entry WHERE "
	    "snapshot_id = %lld", (long long)f2);
	ok(raw_int(sql) == 16, "one row per path of the view");
	check_diff(c, snap_i2, f2, "", "diff I2 and its synthetic full", &d);

	ok(catalog_snapshot_materialize(c, snap_i2, f2, counts) == -1,
	    "a full that has rows is refused");
	ok(catalog_snapshot_materialize(c, snap_d, snap_i1, counts) == -1,
	    "an incremental target is refused");
	ok(catalog_snapshot_materialize(c, 424242, f2, counts) == -1 &&
	    catalog_snapshot_materialize(c, snap_i2, 424242, counts) == -1,
	    "unknown snapshots are refused");
	f3 = new_snapshot(c, ds, 21, LEVEL_FULL, 0, 2100, SNAP_RUNNING);
	ok(f3 > 0 && catalog_snapshot_materialize(c, snap_d, f3, counts) == 0 &&
	    counts[0] == 12 && counts[1] == 2 && counts[2] == 3 &&
	    same_views(c, snap_d, f3, &n) && n == 17,
	    "materialize D (a differential)");
}

/* A resolver outlives its catalog handle without harm. */
static void
test_close(void)
{
	struct catalog *ch = catalog_open(dbpath);
	struct catalog_resolver *r;
	struct entry e;
	int64_t n;

	r = ch ? catalog_resolver_new(ch, snap_i2) : NULL;
	ok(r != NULL && catalog_resolver_get(r, "a/f1", &e) == 1,
	    "resolver on a second handle");
	catalog_close(ch);
	ok(r != NULL && catalog_resolver_get(r, "a/f1", &e) == -1 &&
	    catalog_resolver_tombstones(r, snap_i2, &n) == -1,
	    "after the handle is closed: errors, no crash");
	catalog_resolver_free(r);
}

/*
 * Timings: a full of NPATHS paths and NLINKS incrementals on it, each
 * rewriting, deleting and adding paths.  The views and diffs are checked
 * against a model of what was written: each path's size and mtime after
 * the full, after link NLINKS - 1 and after the last link (-1: deleted).
 */
struct model {
	int64_t size, mtime;
};

/* Changes from a to b over np model paths, counted by DIFF_* kind. */
static void
model_diff(const struct model *a, const struct model *b, size_t np,
    long kinds[5])
{
	size_t i;

	memset(kinds, 0, 5 * sizeof(*kinds));
	for (i = 0; i < np; i++) {
		if (a[i].size < 0 && b[i].size < 0)
			continue;
		if (a[i].size < 0)
			kinds[DIFF_ADDED]++;
		else if (b[i].size < 0)
			kinds[DIFF_DELETED]++;
		else if (a[i].size != b[i].size)
			kinds[DIFF_MODIFIED]++;
		else if (a[i].mtime != b[i].mtime)
			kinds[DIFF_METADATA]++;
	}
}

/* A diff's counts against the model's, the "new" paths added on top. */
static void
check_counts(const struct diffout *d, const long want[5], long added,
    const char *name)
{
	if (!ok(d->bad == 0 && d->kinds[0] == 0 &&
	    d->kinds[DIFF_ADDED] == want[DIFF_ADDED] + added &&
	    d->kinds[DIFF_DELETED] == want[DIFF_DELETED] &&
	    d->kinds[DIFF_MODIFIED] == want[DIFF_MODIFIED] &&
	    d->kinds[DIFF_METADATA] == want[DIFF_METADATA],
	    "%s: %ld added, %ld deleted, %ld modified, %ld metadata", name,
	    want[DIFF_ADDED] + added, want[DIFF_DELETED],
	    want[DIFF_MODIFIED], want[DIFF_METADATA]))
		diag("got %ld added, %ld deleted, %ld modified, %ld metadata, "
		    "%ld bad", d->kinds[DIFF_ADDED], d->kinds[DIFF_DELETED],
		    d->kinds[DIFF_MODIFIED], d->kinds[DIFF_METADATA],
		    d->bad + d->kinds[0]);
}

#define NDIRS 100
#define NPATHS 100000
#define NLINKS 10

static void
test_timing(struct catalog *c)
{
	struct catalog_resolver *r;
	struct catalog_iter *it;
	struct diffout d;
	struct entry e;
	char **names;
	int64_t dsb, ids[NLINKS + 1], i_new, f_new, n, counts[3];
	struct model *m_full, *m_prev, *m_last;
	size_t i, np = 0, found = 0, nview = 0, m_present = 0;
	long want[5];
	double t0, t;
	int link, j, rc = 0, *touched;

	names = calloc(NPATHS, sizeof(*names));
	touched = calloc(NPATHS, sizeof(*touched));
	m_full = calloc(NPATHS, sizeof(*m_full));
	m_prev = calloc(NPATHS, sizeof(*m_prev));
	m_last = calloc(NPATHS, sizeof(*m_last));
	if (names == NULL || touched == NULL || m_full == NULL ||
	    m_prev == NULL || m_last == NULL)
		abort();
	for (i = 0; i < NDIRS; i++) {
		if (asprintf(&names[np++], "dir%03zu", i) < 0)
			abort();
		for (j = 0; j < NPATHS / NDIRS - 1; j++)
			if (asprintf(&names[np++], "dir%03zu/file%05d", i, j) <
			    0)
				abort();
	}
	ok(catalog_dataset_id(c, "/data/big", 1, &dsb) == 1, "big dataset");
	t0 = now_monotonic();
	rc |= catalog_begin(c);
	ids[0] = new_snapshot(c, dsb, 100, LEVEL_FULL, 0, 1, SNAP_COMPLETE);
	for (i = 0; i < np; i++) {
		int dir = strchr(names[i], '/') == NULL;

		fill_entry(&e, names[i], dir ? ENTRY_DIR : ENTRY_FILE,
		    dir ? 0 : (int64_t)(rnd() % 100000));
		add(c, ids[0], &e);
		m_last[i].size = e.size;
		m_last[i].mtime = e.mtime_ns;
	}
	memcpy(m_full, m_last, np * sizeof(*m_full));
	for (link = 1; link <= NLINKS; link++) {
		char name[64];

		ids[link] = new_snapshot(c, dsb, 100 + (unsigned)link,
		    LEVEL_INCREMENTAL, ids[link - 1], 1 + link, SNAP_COMPLETE);
		if (link == NLINKS)
			memcpy(m_prev, m_last, np * sizeof(*m_prev));
		/* ~1000 rewritten, touched or deleted files (1 in 10
		 * deleted, 1 in 10 touched: same size, new mtime), 100 new.
		 * A path drawn twice in a link is skipped. */
		for (j = 0; j < 1000; j++) {
			int64_t size = j;

			i = rnd() % np;
			if (strchr(names[i], '/') == NULL ||
			    touched[i] == link)
				continue;
			touched[i] = link;
			if (j % 10 == 5 && m_last[i].size >= 0)
				size = m_last[i].size;
			fill_entry(&e, names[i], j % 10 ? ENTRY_FILE :
			    ENTRY_TOMBSTONE, j % 10 ? size : 0);
			e.mtime_ns = 1000 + link;
			add(c, ids[link], &e);
			m_last[i].size = j % 10 ? size : -1;
			m_last[i].mtime = e.mtime_ns;
		}
		for (j = 0; j < 100; j++) {
			snprintf(name, sizeof(name), "dir%03d/new%02d-%03d",
			    (int)(rnd() % NDIRS), link, j);
			fill_entry(&e, name, ENTRY_FILE, j);
			add(c, ids[link], &e);
		}
	}
	rc |= catalog_commit(c);
	ok(rc == 0 && add_failures == 0, "%d paths, %d incrementals",
	    NPATHS, NLINKS);
	diag("build: %.2f s", now_monotonic() - t0);

	t0 = now_monotonic();
	it = catalog_entries(c, ids[NLINKS], NULL);
	while (it && catalog_iter_next(it, &e) == 1)
		nview++;
	catalog_iter_free(it);
	diag("catalog_entries of the %d-link chain: %zu paths in %.3f s",
	    NLINKS + 1, nview, now_monotonic() - t0);
	for (i = 0; i < np; i++)
		m_present += m_last[i].size >= 0;
	ok(nview == m_present + 100 * NLINKS, "the chain's view: %zu paths",
	    m_present + 100 * NLINKS);

	/* Lookups as a walk makes them: every path of the full, in order. */
	t0 = now_monotonic();
	r = catalog_resolver_new(c, ids[NLINKS]);
	t = now_monotonic() - t0;
	ok(r != NULL, "resolver on the last link");
	if (r == NULL)
		goto out;
	t0 = now_monotonic();
	for (i = 0; i < np; i++)
		if (catalog_resolver_get(r, names[i], &e) == 1)
			found++;
	diag("resolver_new %.4f s; %zu resolver_get (autocommit): %.3f s, "
	    "%.2f us each, %zu found", t, np, now_monotonic() - t0,
	    (now_monotonic() - t0) * 1e6 / (double)np, found);
	ok(found == m_present, "resolver_get finds the %zu paths of the full "
	    "still there", m_present);
	found = 0;
	ok(catalog_begin(c) == 0, "begin");
	t0 = now_monotonic();
	for (i = 0; i < np; i++)
		if (catalog_resolver_get(r, names[i], &e) == 1)
			found++;
	t = now_monotonic() - t0;
	diag("%zu resolver_get in a transaction: %.3f s, %.2f us each", np, t,
	    t * 1e6 / (double)np);
	i_new = new_snapshot(c, dsb, 200, LEVEL_INCREMENTAL, ids[NLINKS], 100,
	    SNAP_RUNNING);
	t0 = now_monotonic();
	n = -1;
	rc = catalog_resolver_tombstones(r, i_new, &n);
	ok(rc == 0 && (size_t)n == nview - found, "tombstones for the %lld "
	    "new paths the walk did not see", (long long)n);
	diag("resolver_tombstones: %lld in %.3f s", (long long)n,
	    now_monotonic() - t0);
	ok(catalog_commit(c) == 0, "commit");
	catalog_resolver_free(r);

	t0 = now_monotonic();
	memset(&d, 0, sizeof(d));
	rc = catalog_diff(c, ids[0], ids[NLINKS], diff_cb, &d);
	diag("catalog_diff full vs link %d: %ld changes in %.3f s", NLINKS,
	    d.n, now_monotonic() - t0);
	ok(rc == 0, "diff full / last link");
	model_diff(m_full, m_last, np, want);
	check_counts(&d, want, 100 * NLINKS, "diff full / last link");
	buf_release(&d.b);
	t0 = now_monotonic();
	memset(&d, 0, sizeof(d));
	rc = catalog_diff(c, ids[NLINKS - 1], ids[NLINKS], diff_cb, &d);
	diag("catalog_diff link %d vs link %d: %ld changes in %.3f s",
	    NLINKS - 1, NLINKS, d.n, now_monotonic() - t0);
	ok(rc == 0, "diff of neighbours");
	model_diff(m_prev, m_last, np, want);
	check_counts(&d, want, 100, "diff of neighbours");
	buf_release(&d.b);

	f_new = new_snapshot(c, dsb, 201, LEVEL_FULL, 0, 200, SNAP_RUNNING);
	t0 = now_monotonic();
	rc = catalog_snapshot_materialize(c, ids[NLINKS], f_new, counts);
	diag("materialize the %d-link chain: %.3f s", NLINKS + 1,
	    now_monotonic() - t0);
	ok(rc == 0 && (size_t)(counts[0] + counts[1] + counts[2]) == nview,
	    "materialized %lld files, %lld dirs", (long long)counts[0],
	    (long long)counts[1]);
	t0 = now_monotonic();
	memset(&d, 0, sizeof(d));
	rc = catalog_diff(c, f_new, ids[NLINKS], diff_cb, &d);
	diag("catalog_diff synthetic full vs link %d (two chains): %.3f s",
	    NLINKS, now_monotonic() - t0);
	ok(rc == 0 && d.b.len == 0, "no difference");
	buf_release(&d.b);
out:
	for (i = 0; i < np; i++)
		free(names[i]);
	free(names);
	free(touched);
	free(m_full);
	free(m_prev);
	free(m_last);
}

int
main(void)
{
	struct catalog *c;

	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return (1);
	}
	if ((dbpath = fsutil_join(tmpdir, "catalog.db")) == NULL)
		return (1);
	c = catalog_open(dbpath);
	ok(c != NULL, "open catalog");
	if (c == NULL)
		return (tap_done());
	build(c);
	test_base(c);
	test_resolver(c);
	test_diff(c);
	test_materialize(c);
	test_close();
	if (getenv("T_LEVELS_QUICK") == NULL)
		test_timing(c);
	catalog_close(c);
	buf_release(&xa1);
	buf_release(&xa2);

	if (getenv("T_LEVELS_KEEP") != NULL)
		diag("kept %s", tmpdir);
	else if (rm_tree(tmpdir) != 0)
		diag("cannot remove %s", tmpdir);
	free(dbpath);
	return (tap_done());
}
