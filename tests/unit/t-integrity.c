/*
 * Unit tests for the catalog's integrity queries: the chunks complete
 * snapshots need, what damaged chunks break across chains (a newer link
 * that replaces or deletes a path hides the damaged row), the snapshot id
 * in a record image, verify's resume state and the drill history.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/catalog-history.h"
#include "coffer/catalog-record.h"
#include "coffer/catalog.h"
#include "coffer/entry.h"
#include "coffer/fsutil.h"
#include "tap.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/t-integrity-XXXXXX";

static void
sid_of(char sid[SNAPSHOT_ID_HEX + 1], unsigned n)
{
	snprintf(sid, SNAPSHOT_ID_HEX + 1, "%032x", n);
}

static int64_t
snapshot(struct catalog *c, int64_t ds, unsigned n, int level,
    int64_t parent, int state)
{
	struct catalog_snapshot s;

	memset(&s, 0, sizeof(s));
	sid_of(s.sid, n);
	s.dataset_id = ds;
	s.level = level;
	s.parent_id = parent;
	s.state = SNAP_RUNNING;
	s.started_ns = 1000 + n;
	if (catalog_snapshot_create(c, &s))
		return (0);
	s.state = state;
	s.finished_ns = 2000 + n;
	if (catalog_snapshot_update(c, &s))
		return (0);
	return (s.id);
}

static int64_t
chunk(struct catalog *c, int tag)
{
	uint8_t cid[32];
	int64_t row = 0;

	memset(cid, tag, sizeof(cid));
	if (catalog_chunk_add(c, cid, &row))
		return (0);
	return (row);
}

static int
locate(struct catalog *c, int64_t row, int64_t pack, uint64_t off)
{
	struct catalog_chunk_loc loc;

	memset(&loc, 0, sizeof(loc));
	loc.pack_offset = off;
	loc.plain_len = 100;
	loc.stored_len = 90;
	loc.type = 1;
	return (catalog_chunk_locate(c, row, pack, &loc));
}

/* A content of one chunk. */
static int64_t
content(struct catalog *c, int tag, int64_t chunk_row)
{
	struct catalog_chunk_ref ref = { chunk_row, 0, 100 };
	uint8_t hash[32];
	int64_t id = 0;

	memset(hash, 0x80 | tag, sizeof(hash));
	if (catalog_content_put(c, hash, 100, &ref, 1, &id))
		return (0);
	return (id);
}

static int
entry(struct catalog *c, int64_t snap, const char *path, int kind,
    int64_t content_id)
{
	struct entry e;

	memset(&e, 0, sizeof(e));
	e.path = path;
	e.kind = kind;
	e.mode = 0644;
	e.size = content_id ? 100 : 0;
	e.content_id = content_id;
	return (catalog_entry_add(c, snap, &e));
}

struct breaks {
	char text[1024];
};

static int
collect(void *arg, const char *sid, const char *dataset, const char *path)
{
	struct breaks *b = arg;
	size_t n = strlen(b->text);

	/* The last hex digit names the snapshot in these tests. */
	snprintf(b->text + n, sizeof(b->text) - n, "%s%s:%c:%s",
	    n ? " " : "", dataset, sid[SNAPSHOT_ID_HEX - 1], path);
	return (0);
}

static const char *
breaks_of(struct catalog *c, int64_t row, struct breaks *b)
{
	b->text[0] = '\0';
	if (catalog_chunks_break(c, &row, 1, collect, b))
		return ("(error)");
	return (b->text);
}

static int
count_drills(void *arg, const struct catalog_drill *d)
{
	(*(int *)arg)++;
	return (0);
}

static int
check_latest(void *arg, const struct catalog_drill *d)
{
	int *ok = arg;

	*ok = strcmp(d->dataset, "ds") == 0 && d->files == 7 &&
	    strcmp(d->verdict, "fail") == 0 && d->rto_seconds < 0 &&
	    d->rpo_seconds == 60 && d->newest_ns == 1000 + 2;
	return (0);
}

int
main(void)
{
	struct catalog *c;
	struct catalog_chunk_iter *it;
	struct catalog_chunk_loc loc;
	struct catalog_verify_state vs, got;
	struct catalog_drill d;
	struct breaks b;
	struct buf img = BUF_INIT;
	char *db, sid[SNAPSHOT_ID_HEX + 1], order[64];
	uint8_t hash[32] = { 0 };
	int64_t ds, other, full, inc1, inc2, g, x, y, z, w, p1, p2;
	int64_t cax, ca2z, cby, cb2x, cwx, cw;
	size_t n;
	int rc, count, latest_ok = 0;

	if (mkdtemp(tmpdir) == NULL)
		return (1);
	db = fsutil_join(tmpdir, "catalog.db");
	c = catalog_open(db);
	ok(c != NULL, "catalog opens");
	if (c == NULL)
		return (tap_done());

	/*
	 * ds: full F (1) {a: X, b: Y, c: X}; incremental I1 (2) on F
	 * {a: Z, c deleted}; incremental I2 (3) on I1, failed {b: X, w: W}.
	 * other: full G (4) {z: X}.  X in pack p1, Y in p2, Z in no pack,
	 * W in p1 (needed by no complete snapshot).
	 */
	ok(catalog_begin(c) == 0, "begin");
	catalog_dataset_id(c, "ds", 1, &ds);
	catalog_dataset_id(c, "other", 1, &other);
	x = chunk(c, 1);
	y = chunk(c, 2);
	z = chunk(c, 3);
	w = chunk(c, 4);
	memset(hash, 7, sizeof(hash));
	ok(catalog_pack_add(c, "11111111111111111111111111111111", 1000, hash,
	    &p1) == 0 && catalog_pack_add(c,
	    "22222222222222222222222222222222", 1000, hash, &p2) == 0,
	    "packs");
	ok(locate(c, x, p1, 500) == 0 && locate(c, y, p2, 200) == 0 &&
	    locate(c, w, p1, 300) == 0, "chunks located");
	cax = content(c, 1, x);
	ca2z = content(c, 2, z);
	cby = content(c, 3, y);
	cb2x = content(c, 4, x);
	cwx = content(c, 5, x);
	cw = content(c, 6, w);
	ok(cax && ca2z && cby && cb2x && cwx && cw, "contents");
	full = snapshot(c, ds, 1, LEVEL_FULL, 0, SNAP_COMPLETE);
	inc1 = snapshot(c, ds, 2, LEVEL_INCREMENTAL, full, SNAP_COMPLETE);
	inc2 = snapshot(c, ds, 3, LEVEL_INCREMENTAL, inc1, SNAP_FAILED);
	g = snapshot(c, other, 4, LEVEL_FULL, 0, SNAP_COMPLETE);
	ok(full && inc1 && inc2 && g, "snapshots");
	ok(entry(c, full, "a", ENTRY_FILE, cax) == 0 &&
	    entry(c, full, "b", ENTRY_FILE, cby) == 0 &&
	    entry(c, full, "c", ENTRY_FILE, cwx) == 0 &&
	    entry(c, inc1, "a", ENTRY_FILE, ca2z) == 0 &&
	    entry(c, inc1, "c", ENTRY_TOMBSTONE, 0) == 0 &&
	    entry(c, inc2, "b", ENTRY_FILE, cb2x) == 0 &&
	    entry(c, inc2, "w", ENTRY_FILE, cw) == 0 &&
	    entry(c, g, "z", ENTRY_FILE, cax) == 0, "entries");
	ok(catalog_commit(c) == 0, "commit");

	/* Needed: Z (no pack) first, then X (p1), then Y (p2); not W. */
	order[0] = '\0';
	it = catalog_needed_chunks(c, NULL);
	while ((rc = catalog_chunk_iter_next(it, &loc)) == 1) {
		n = strlen(order);
		snprintf(order + n, sizeof(order) - n, "%d%c", loc.cid[0],
		    loc.pack[0] ? loc.pack[0] : '-');
	}
	catalog_chunk_iter_free(it);
	ok(rc == 0 && strcmp(order, "3-1122") == 0,
	    "needed chunks in pack order, unlocated first: %s", order);
	order[0] = '\0';
	it = catalog_needed_chunks(c, "11111111111111111111111111111111");
	while ((rc = catalog_chunk_iter_next(it, &loc)) == 1) {
		n = strlen(order);
		snprintf(order + n, sizeof(order) - n, "%d", loc.cid[0]);
	}
	catalog_chunk_iter_free(it);
	ok(rc == 0 && strcmp(order, "2") == 0,
	    "after a pack: only later packs: %s", order);

	/* X: F's a and c, G's z; not I1 (a replaced, c deleted) nor the
	 * failed I2. */
	ok(strcmp(breaks_of(c, x, &b), "ds:1:a ds:1:c other:4:z") == 0,
	    "X breaks F (a, c) and G (z), not I1: %s", b.text);
	ok(strcmp(breaks_of(c, y, &b), "ds:1:b ds:2:b") == 0,
	    "Y breaks b in F and in I1, which inherits it: %s", b.text);
	ok(strcmp(breaks_of(c, z, &b), "ds:2:a") == 0,
	    "Z breaks only I1's a: %s", b.text);
	ok(strcmp(breaks_of(c, w, &b), "") == 0,
	    "W breaks nothing complete: '%s'", b.text);
	ok(catalog_chunks_break(c, (int64_t[]){ x, y }, 2, collect, &b) == 0,
	    "two chunks at once");

	/* A record image names its snapshot. */
	ok(catalog_snapshot_export(c, inc1, &img) == 0, "export");
	ok(catalog_record_sid(img.data, img.len, sid) == 0 &&
	    strcmp(sid, "00000000000000000000000000000002") == 0,
	    "record sid: %s", sid);
	ok(catalog_record_sid("junk", 4, sid) == -1, "junk image refused");
	buf_release(&img);

	/* Verify state per mode. */
	memset(&vs, 0, sizeof(vs));
	vs.seed = 0xfeedfacecafebeefULL;
	snprintf(vs.last_pack, sizeof(vs.last_pack), "%s",
	    "11111111111111111111111111111111");
	vs.packs = 3;
	vs.errors = 1;
	ok(catalog_verify_state_get(c, "read-data", &got) == 0, "no state");
	ok(catalog_verify_state_put(c, "read-data", &vs) == 0, "put");
	ok(catalog_verify_state_get(c, "structure", &got) == 0,
	    "other mode has none");
	ok(catalog_verify_state_get(c, "read-data", &got) == 1 &&
	    got.seed == vs.seed && got.packs == 3 && got.errors == 1 &&
	    strcmp(got.last_pack, vs.last_pack) == 0, "get");
	ok(catalog_verify_state_clear(c, "read-data") == 0 &&
	    catalog_verify_state_get(c, "read-data", &got) == 0, "clear");

	/* Drills: history and each dataset's latest. */
	memset(&d, 0, sizeof(d));
	d.time_ns = 5000;
	d.dataset_id = ds;
	d.snapshot_id = inc1;
	sid_of(d.sid, 2);
	d.sample = 100;
	d.files = 5;
	d.estimate_seconds = d.rto_seconds = d.rpo_seconds = -1;
	d.rpo_age_seconds = 10;
	d.verdict = "pass";
	ok(catalog_drill_add(c, &d) == 0 && d.id > 0, "drill added");
	d.time_ns = 6000;
	d.files = 7;
	d.rpo_seconds = 60;
	d.verdict = "fail";
	ok(catalog_drill_add(c, &d) == 0, "second drill");
	d.verdict = "maybe";
	ok(catalog_drill_add(c, &d) == -1, "bad verdict refused");
	count = 0;
	rc = catalog_drill_list(c, NULL, 0, count_drills, &count);
	ok(rc == 0 && count == 2, "history of all: %d", count);
	count = 0;
	rc = catalog_drill_list(c, "other", 0, count_drills, &count);
	ok(rc == 0 && count == 0, "history of another dataset: %d", count);
	count = 0;
	rc = catalog_drill_list(c, NULL, 1, count_drills, &count);
	ok(rc == 0 && count == 1, "latest per dataset: %d", count);
	ok(catalog_drill_list(c, NULL, 1, check_latest, &latest_ok) == 0 &&
	    latest_ok, "the latest is the newest, with its fields");

	catalog_close(c);
	free(db);
	rm_tree(tmpdir);
	return (tap_done());
}
