/*
 * Unit tests for journal images (src/catalog/journal.c): a record of
 * format 1 imports, one of another format is refused, rows of the wrong
 * type are left out, and key uses make a record of their own only when
 * new to the repository or a day old.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/catalog-history.h"
#include "coffer/catalog-journal.h"
#include "coffer/catalog-prune.h"
#include "coffer/catalog-record.h"
#include "coffer/catalog.h"
#include "coffer/fsutil.h"
#include "coffer/name.h"
#include "tap.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/t-journal-XXXXXX";

#define PACK "00112233445566778899aabbccddeeff"
#define HOUR_NS 3600000000000LL

/* A journal image with the tables of format 1, its format row fmt, then
 * sql. */
static int
image(int fmt, const char *sql, struct buf *out)
{
	static const char tables[] =
		"CREATE TABLE meta (key TEXT PRIMARY KEY, value)"
		" WITHOUT ROWID;"
		"CREATE TABLE drill (time_ns INTEGER, dataset TEXT, sid TEXT,"
		" mode TEXT, sample REAL, files INTEGER, bytes INTEGER,"
		" failures INTEGER, seconds REAL, check_seconds REAL,"
		" estimate_seconds REAL, rto_seconds REAL, rpo_seconds REAL,"
		" rpo_age_seconds REAL, verdict TEXT, source TEXT);"
		"CREATE TABLE failed (sid TEXT, dataset TEXT, level INTEGER,"
		" parent_sid TEXT, started_ns INTEGER, finished_ns INTEGER,"
		" host TEXT, source TEXT);"
		"CREATE TABLE forgotten (sid TEXT, time_ns INTEGER);"
		"CREATE TABLE bundle (direction TEXT, target TEXT, seq INTEGER,"
		" level INTEGER, base_seq INTEGER, manifest BLOB, name TEXT,"
		" size INTEGER, packs INTEGER, snapshots TEXT,"
		" created_ns INTEGER);"
		"CREATE TABLE bundle_pack (direction TEXT, target TEXT,"
		" seq INTEGER, pack TEXT);"
		"CREATE TABLE run (rid TEXT, time_ns INTEGER, wall_ns INTEGER,"
		" seconds REAL, host TEXT, user TEXT, policy TEXT,"
		" status INTEGER);"
		"CREATE TABLE run_action (rid TEXT, seq INTEGER, kind TEXT,"
		" subject TEXT, level TEXT, slot_ns INTEGER, status INTEGER,"
		" done INTEGER, seconds REAL, detail TEXT);"
		"CREATE TABLE key_use (key TEXT, time_ns INTEGER, host TEXT);"
		"CREATE TABLE verify (time_ns INTEGER, host TEXT, mode TEXT,"
		" slice_n INTEGER, slice_m INTEGER, complete INTEGER,"
		" packs INTEGER, packs_read INTEGER, bytes_read INTEGER,"
		" damage INTEGER, seconds REAL, verdict TEXT);";
	sqlite3 *db;
	unsigned char *p;
	sqlite3_int64 n;
	char meta[64];
	int rc = -1;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return (-1);
	snprintf(meta, sizeof(meta), "INSERT INTO meta VALUES ('format', %d)",
	    fmt);
	if (sqlite3_exec(db, tables, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, meta, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if ((p = sqlite3_serialize(db, "main", &n, 0)) == NULL)
		goto out;
	buf_reset(out);
	rc = buf_append(out, p, (size_t)n);
	sqlite3_free(p);
out:
	sqlite3_close(db);
	return (rc);
}

struct last {
	char key[CATALOG_KEY_NAME_MAX + 1];
	int64_t ns;
	int n;
};

static int
last_cb(void *arg, const char *key, int64_t ns, const char *host)
{
	struct last *l = arg;

	(void)host;
	snprintf(l->key, sizeof(l->key), "%s", key);
	l->ns = ns;
	l->n++;
	return (0);
}

static void
test_import(struct catalog *c)
{
	struct buf img = BUF_INIT;
	struct last l;
	size_t added;

	ok(image(1, "INSERT INTO run VALUES ('0123456789abcdef0123456789abcdef',"
	    " 1, 2, 0.5, 'h', 'u', 'p', 0)", &img) == 0 &&
	    catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == 0 &&
	    added == 1, "a format 1 record imports (its run)");

	ok(image(1, "INSERT INTO key_use VALUES ('aaaabbbbccccdddd', 1000,"
	    " 'host1'); INSERT INTO key_use VALUES (42, 5, 'x');"
	    " INSERT INTO key_use VALUES ('../../etc', 5, 'x');"
	    " INSERT INTO key_use VALUES ('key-file:full', 'soon', 'x')",
	    &img) == 0 &&
	    catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == 0 &&
	    added == 1, "a key use imports, rows of a wrong type are left "
	    "out");
	ok(catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == 0 &&
	    added == 0, "the same key use twice is one");
	memset(&l, 0, sizeof(l));
	ok(catalog_key_use_last(c, last_cb, &l) == 0 && l.n == 1 &&
	    strcmp(l.key, "aaaabbbbccccdddd") == 0 && l.ns == 1000,
	    "key list sees it");

	ok(image(1, "INSERT INTO verify VALUES (2000, 'h', 'read-data=2/3',"
	    " 2, 3, 1, 7, 3, 4096, 0, 1.5, 'pass');"
	    " INSERT INTO verify VALUES (2001, 'h', 'structure', 0, 0, 1, 7,"
	    " 0, 0, 0, 0.5, 'maybe');"
	    " INSERT INTO verify VALUES (2002, 'h', 'read-data=4/3', 4, 3, 1,"
	    " 7, 3, 0, 0, 0.5, 'pass')", &img) == 0 &&
	    catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == 0 &&
	    added == 1, "a verify run imports, bad rows are left out");
	ok(catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == 0 &&
	    added == 0, "the same verify run twice is one");
	{
		unsigned n = 0;

		ok(catalog_verify_next_slice(c, 3, &n) == 0 && n == 3,
		    "after slice 2 of 3, a rotating verify reads slice 3");
		ok(catalog_verify_next_slice(c, 5, &n) == 0 && n == 1,
		    "of 5 slices, never read: slice 1");
	}

	ok(image(2, "INSERT INTO run VALUES ('1123456789abcdef0123456789abcdef',"
	    " 1, 2, 0.5, 'h', 'u', 'p', 0)", &img) == 0 &&
	    catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == -1 &&
	    catalog_journal_known(img.data, img.len) == 0,
	    "a format 2 record is refused, not misread");
	ok(image(6, "SELECT 1", &img) == 0 &&
	    catalog_journal_import(c, img.data, img.len, PACK, 1, &added) == -1,
	    "so is one of a development build's format 6");
	buf_release(&img);
}

/* Export the journal and, if anything, mark it written; *n the rows. */
static int
flush(struct catalog *c, size_t *n)
{
	struct catalog_journal_upto upto;
	struct buf img = BUF_INIT;
	int rc;

	rc = catalog_journal_export(c, 0, &img, n, &upto);
	if (rc == 0 && *n > 0)
		rc = catalog_journal_mark(c, PACK, &upto);
	buf_release(&img);
	return (rc);
}

static void
test_due(struct catalog *c)
{
	const int64_t t = 100 * 24 * HOUR_NS;
	struct last l;
	size_t n;

	ok(catalog_key_use_add(c, "1111222233334444", t, "h") == 0 &&
	    flush(c, &n) == 0 && n == 1, "a key's first use is a record");
	ok(catalog_key_use_add(c, "1111222233334444", t + HOUR_NS, "h") == 0 &&
	    flush(c, &n) == 0 && n == 0, "an hour later: it waits");
	ok(catalog_key_use_add(c, "5555666677778888", t + HOUR_NS, "h") == 0 &&
	    flush(c, &n) == 0 && n == 2, "another key's first use is a "
	    "record, and takes the waiting use along");
	ok(catalog_key_use_add(c, "1111222233334444", t + 2 * HOUR_NS,
	    "h") == 0 && flush(c, &n) == 0 && n == 0 &&
	    catalog_key_use_add(c, "1111222233334444", t + 25 * HOUR_NS,
	    "h") == 0 && flush(c, &n) == 0 && n == 2,
	    "a day after the last one written: a record");
	memset(&l, 0, sizeof(l));
	ok(catalog_key_use_last(c, last_cb, &l) == 0 && l.n == 3,
	    "one last use per key");
}

/* A snapshot of dataset ds in state st whose record is in pack rec. */
static int64_t
snapshot_in(struct catalog *c, int64_t ds, unsigned n, int st,
    const char *rec)
{
	static char host[] = "h", source[] = "/src";
	struct catalog_snapshot s;

	memset(&s, 0, sizeof(s));
	snprintf(s.sid, sizeof(s.sid), "%032x", 0xabc000u + n);
	s.dataset_id = ds;
	s.level = LEVEL_FULL;
	s.state = SNAP_RUNNING;
	s.started_ns = n;
	s.host = host;
	s.source = source;
	if (catalog_snapshot_create(c, &s))
		return (0);
	s.state = st;
	s.finished_ns = n + 1;
	snprintf(s.record_pack, sizeof(s.record_pack), "%s", rec);
	s.parts = 1;
	if (catalog_snapshot_update(c, &s))
		return (0);
	return (s.id);
}

/* A pack named by digit d, with a chunk n of record type type (0: none). */
static int
pack_with(struct catalog *c, char d, int type, unsigned n, char *name)
{
	struct catalog_chunk_loc loc;
	uint8_t hash[32], cid[32];
	int64_t pk, ch;

	memset(name, d, 32);
	name[32] = '\0';
	memset(hash, d, sizeof(hash));
	if (catalog_pack_add(c, name, 4096, hash, &pk))
		return (-1);
	if (type == 0)
		return (0);
	memset(cid, 0, sizeof(cid));
	memcpy(cid, &n, sizeof(n));
	memset(&loc, 0, sizeof(loc));
	loc.pack_offset = 64;
	loc.plain_len = loc.stored_len = 100;
	loc.type = (uint8_t)type;
	return (catalog_chunk_add(c, cid, &ch) ||
	    catalog_chunk_locate(c, ch, pk, &loc) ? -1 : 0);
}

/*
 * The packs an export carries as the journal's: those whose index names a
 * journal record (pack.journal, set as the pack is imported or written),
 * never one for what its chunks or records look like.
 */
static void
test_packs(struct catalog *c)
{
	struct catalog_record_part part;
	struct catalog_journal_upto upto;
	char jrn[33], data[33], typed[33], rec[33], partp[33], failed[33];
	char gone[33], mixed[33], imp[33];
	uint8_t hash[32];
	char **v = NULL;
	size_t n = 0;
	int64_t ds, s;

	ok(catalog_dataset_id(c, "ds", 1, &ds) == 1 &&
	    pack_with(c, 'a', 0, 0, jrn) == 0 &&
	    pack_with(c, 'b', 1, 1, data) == 0 &&
	    pack_with(c, 'c', 3, 2, typed) == 0 &&
	    pack_with(c, 'd', 0, 0, rec) == 0 &&
	    pack_with(c, 'e', 0, 0, partp) == 0 &&
	    pack_with(c, 'f', 0, 0, failed) == 0 &&
	    pack_with(c, '9', 0, 0, gone) == 0 &&
	    pack_with(c, '8', 1, 3, mixed) == 0 &&
	    pack_with(c, '8', 3, 4, mixed) == 0, "packs of every kind");
	memset(&part, 0, sizeof(part));
	snprintf(part.pack, sizeof(part.pack), "%s", partp);
	ok((s = snapshot_in(c, ds, 1, SNAP_COMPLETE, rec)) > 0 &&
	    catalog_snapshot_parts_set(c, s, 2, &part) == 0 &&
	    snapshot_in(c, ds, 2, SNAP_FAILED, failed) > 0,
	    "a complete snapshot in two packs, a failed one in a third");
	ok(catalog_journal_packs(c, &v, &n) == 0 && n == 0,
	    "packs added as not the journal's are not listed");
	names_free(v, n);
	memset(&upto, 0, sizeof(upto));
	ok(catalog_journal_mark(c, jrn, &upto) == 0 &&
	    catalog_journal_packs(c, &v, &n) == 0 && n == 1 &&
	    strcmp(v[0], jrn) == 0, "a pack the journal marked is listed");
	names_free(v, n);
	memset(imp, '7', 32);
	imp[32] = '\0';
	memset(hash, 7, sizeof(hash));
	ok(catalog_packs_gone(c, NULL, 0) == 0 &&
	    catalog_pack_import(c, imp, 1000, hash, NULL, 0, 1) == 0 &&
	    catalog_journal_packs(c, &v, &n) == 0 && n == 2 &&
	    strcmp(v[0], imp) == 0 && strcmp(v[1], jrn) == 0,
	    "a pack imported as the journal's is listed; no other is");
	names_free(v, n);
}

int
main(void)
{
	struct catalog *c;
	char *db;

	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return (1);
	}
	if ((db = fsutil_join(tmpdir, "catalog.db")) == NULL)
		return (1);
	c = catalog_open(db);
	ok(c != NULL, "open a catalog");
	if (c != NULL) {
		test_import(c);
		test_due(c);
		test_packs(c);
		catalog_close(c);
	}
	free(db);
	if (rm_tree(tmpdir) != 0)
		diag("cannot remove %s", tmpdir);
	return (tap_done());
}
