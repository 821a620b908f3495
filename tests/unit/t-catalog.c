/*
 * Unit tests for the catalog: schema and other formats, locking, datasets,
 * snapshots and their names, chunks, packs, contents, chain resolution
 * (checked against a model kept in C) and the snapshot export.
 */
#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/catalog-browse.h"
#include "coffer/catalog-record.h"
#include "coffer/catalog.h"
#include "coffer/entry.h"
#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/progress.h"
#include "tap.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/t-catalog-XXXXXX";

static char *
tmp_path(const char *name)
{
	char *p = fsutil_join(tmpdir, name);

	if (p == NULL)
		abort();
	return (p);
}

/* xorshift64*: reproducible pseudo-random numbers for the models. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rnd(void)
{
	return (xorshift64s(&rng_state));
}

/* A sid from a fixed prefix and a counter: predictable prefixes. */
static void
make_sid(char sid[SNAPSHOT_ID_HEX + 1], const char *prefix, unsigned n)
{
	char tail[SNAPSHOT_ID_HEX + 1];
	size_t lp = strlen(prefix);

	snprintf(tail, sizeof(tail), "%032x", n);
	memcpy(sid, prefix, lp);
	memcpy(sid + lp, tail + lp, SNAPSHOT_ID_HEX - lp);
	sid[SNAPSHOT_ID_HEX] = '\0';
}

static int64_t
new_snapshot(struct catalog *c, int64_t dataset_id, const char *sid,
    int level, int64_t parent_id, int64_t started, int state)
{
	static char host[] = "testhost", source[] = "/data/src";
	struct catalog_snapshot s;

	memset(&s, 0, sizeof(s));
	snprintf(s.sid, sizeof(s.sid), "%s", sid);
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

static int
complete(struct catalog *c, int64_t id)
{
	struct catalog_snapshot s;
	int ret;

	if (catalog_snapshot_get(c, id, &s))
		return (-1);
	s.state = SNAP_COMPLETE;
	s.finished_ns = s.started_ns + 1;
	ret = catalog_snapshot_update(c, &s);
	catalog_snapshot_release(&s);
	return (ret);
}

static int
raw_exec(const char *db, const char *sql)
{
	sqlite3 *h;
	int rc;

	if (sqlite3_open(db, &h) != SQLITE_OK)
		return (-1);
	rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
	sqlite3_close(h);
	return (rc == SQLITE_OK ? 0 : -1);
}

static int64_t
raw_int(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
		return (-1);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return (v);
}

static void
test_open(void)
{
	char *db = tmp_path("state/coffer/r1/catalog.db");
	char *dir = tmp_path("state/coffer/r1");
	char *other = tmp_path("newer.db"), *junk = tmp_path("junk.db");
	char *foreign = tmp_path("foreign.db");
	struct catalog *c, *c2;
	struct stat sb;
	char aside[PATH_MAX + 64];
	sqlite3 *h;
	int64_t id;

	c = catalog_open(db);
	ok(c != NULL, "open creates the catalog and its directories");
	ok(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700,
	    "catalog directory is mode 0700");
	ok(stat(db, &sb) == 0 && (sb.st_mode & 0077) == 0,
	    "catalog file is private");
	ok(sqlite3_open(db, &h) == SQLITE_OK, "raw open");
	ok(raw_int(h, "PRAGMA user_version") == CATALOG_SCHEMA_VERSION,
	    "user_version is the schema version");
	ok(raw_int(h, "SELECT count(*) FROM sqlite_schema WHERE type = "
	    "'table' AND name IN ('dataset', 'snapshot', 'path', 'entry', "
	    "'pack', 'chunk', 'content', 'content_chunk')") == 8,
	    "schema has its tables");
	ok(raw_int(h, "SELECT count(*) FROM pragma_journal_mode WHERE "
	    "journal_mode = 'wal'") == 1, "journal mode is WAL");
	ok(raw_int(h, "SELECT count(*) FROM pragma_foreign_key_list('entry')")
	    == 3, "entry has its foreign keys");
	sqlite3_close(h);

	ok(catalog_dataset_id(c, "/data/imagenet", 1, &id) == 1 && id > 0,
	    "dataset created");

	/* The writer lock. */
	ok(catalog_lock(c, 0) == 0, "lock taken");
	ok(catalog_lock(c, 0) == 0, "lock taken again by its holder");
	c2 = catalog_open(db);
	ok(c2 != NULL, "second handle opens");
	ok(catalog_lock(c2, 0) == -1, "second handle cannot lock");
	catalog_close(c);
	ok(catalog_lock(c2, 1) == 0, "lock free after close (waiting)");
	catalog_close(c2);

	/* Transactions. */
	c = catalog_open(db);
	ok(c != NULL && catalog_begin(c) == 0 &&
	    catalog_dataset_id(c, "/rolled/back", 1, &id) == 1,
	    "dataset added in a transaction");
	catalog_rollback(c);
	ok(catalog_dataset_id(c, "/rolled/back", 0, &id) == 0,
	    "rollback undoes it");
	ok(catalog_begin(c) == 0 && catalog_begin(c) == -1,
	    "no nested transactions");
	ok(catalog_dataset_id(c, "/kept", 1, &id) == 1 &&
	    catalog_commit(c) == 0 && catalog_dataset_id(c, "/kept", 0, &id) ==
	    1, "commit keeps it");
	ok(catalog_set_durable(c, 0) == 0 && catalog_begin(c) == 0 &&
	    catalog_dataset_id(c, "/lazy", 1, &id) == 1 &&
	    catalog_commit(c) == 0 && catalog_dataset_id(c, "/lazy", 0, &id) ==
	    1, "a commit that need not be durable keeps it too");
	ok(catalog_begin(c) == 0 && catalog_set_durable(c, 1) == -1 &&
	    catalog_commit(c) == 0, "durability not changed in a transaction");
	ok(catalog_set_durable(c, 1) == 0, "durable again");
	catalog_close(c);

	/* Reopen keeps the data. */
	c = catalog_open(db);
	ok(c != NULL && catalog_dataset_id(c, "/data/imagenet", 0, &id) == 1,
	    "reopen keeps data");
	catalog_close(c);

	/* Another format is refused, or moved aside for a rebuild. */
	c = catalog_open(other);
	catalog_close(c);
	ok(raw_exec(other, "PRAGMA user_version = 99") == 0, "bump version");
	ok(catalog_open(other) == NULL, "a newer format is refused");
	ok(raw_exec(other, "PRAGMA user_version = 11") == 0,
	    "a development build's format 11");
	ok(catalog_open(other) == NULL, "an older format is refused");
	c = catalog_open_or_reset(other, aside, sizeof(aside));
	ok(c != NULL && strstr(aside, "newer.db.v11-") != NULL &&
	    stat(aside, &sb) == 0, "or moved aside, kept (%s)", aside);
	ok(c != NULL && catalog_dataset_id(c, "/new", 1, &id) == 1,
	    "and a new catalog made in its place");
	catalog_close(c);

	/* Not a catalog. */
	ok(fsutil_write_file(junk, "not a database, not at all, no sir.....",
	    40, 0600, 0) == 0, "write junk file");
	ok(catalog_open(junk) == NULL, "junk file refused");
	ok(raw_exec(foreign, "CREATE TABLE t (x)") == 0, "foreign database");
	ok(catalog_open(foreign) == NULL, "foreign database refused");

	free(db);
	free(dir);
	free(other);
	free(junk);
	free(foreign);
}

static void
test_default_path(void)
{
	char *p, *q;

	setenv("XDG_STATE_HOME", "/x/state/", 1);
	p = catalog_default_path("00ff", "/srv/repo");
	ok(p && strncmp(p, "/x/state/coffer/00ff-", 21) == 0 &&
	    strlen(p) == 21 + 16 + strlen("/catalog.db") &&
	    strcmp(p + 37, "/catalog.db") == 0,
	    "default path under XDG_STATE_HOME (%s)", p ? p : "NULL");
	q = catalog_default_path("00ff", "/srv/repo");
	ok(p && q && strcmp(p, q) == 0, "one place, one path");
	free(q);
	q = catalog_default_path("00ff", "/mnt/copy/repo");
	ok(p && q && strcmp(p, q) != 0,
	    "the same repository at another place: another catalog");
	free(q);
	free(p);
	setenv("XDG_STATE_HOME", "relative", 1);
	setenv("HOME", "/home/u", 1);
	p = catalog_default_path("00ff", "/srv/repo");
	ok(p && strncmp(p, "/home/u/.local/state/coffer/00ff-", 33) == 0,
	    "relative XDG_STATE_HOME ignored (%s)", p ? p : "NULL");
	free(p);
	unsetenv("XDG_STATE_HOME");
	p = catalog_default_path("abc", "/srv/repo");
	ok(p && strncmp(p, "/home/u/.local/state/coffer/abc-", 32) == 0,
	    "default path under HOME");
	free(p);
	ok(catalog_default_path("../x", "/srv/repo") == NULL,
	    "bad repo id refused");
}

static int
count_cb(void *arg, const struct catalog_snapshot *s)
{
	int *n = arg;

	(*n)++;
	return (0);
}

static int
stop_cb(void *arg, const struct catalog_snapshot *s)
{
	int *n = arg;

	return (++(*n) == 2 ? 42 : 0);
}

static void
test_snapshots(struct catalog *c)
{
	struct catalog_snapshot s, bad;
	char sid[SNAPSHOT_ID_HEX + 1], sid_f2[SNAPSHOT_ID_HEX + 1];
	int64_t ds, ds2, f1, i1, f2, r, x;
	int n;

	ok(catalog_dataset_id(c, "/ckpt/llama", 1, &ds) == 1, "dataset");
	ok(catalog_dataset_id(c, "/ckpt/llama", 0, &x) == 1 && x == ds,
	    "dataset found");
	ok(catalog_dataset_id(c, "/nope", 0, &x) == 0, "no such dataset");
	ok(catalog_dataset_id(c, "/other", 1, &ds2) == 1 && ds2 != ds,
	    "second dataset");

	ok(catalog_level_parse("incremental") == LEVEL_INCREMENTAL &&
	    catalog_level_parse("full") == LEVEL_FULL &&
	    catalog_level_parse("bogus") == -1, "level names parse");
	ok(strcmp(catalog_level_name(LEVEL_DIFFERENTIAL), "differential") ==
	    0 && strcmp(catalog_state_name(SNAP_FAILED), "failed") == 0,
	    "level and state names");

	make_sid(sid, "abcd1", 1);
	ok((f1 = new_snapshot(c, ds, sid, LEVEL_FULL, 0, 1000,
	    SNAP_RUNNING)) > 0, "full created");
	make_sid(sid, "abcd2", 2);
	ok((i1 = new_snapshot(c, ds, sid, LEVEL_INCREMENTAL, f1, 2000,
	    SNAP_RUNNING)) > 0, "incremental created");
	make_sid(sid_f2, "5eed", 3);
	ok((f2 = new_snapshot(c, ds, sid_f2, LEVEL_FULL, 0, 3000,
	    SNAP_RUNNING)) > 0, "second full created");
	make_sid(sid, "77770", 4);
	ok((r = new_snapshot(c, ds2, sid, LEVEL_FULL, 0, 500,
	    SNAP_RUNNING)) > 0, "other dataset's full");
	ok(new_snapshot(c, ds, sid, LEVEL_FULL, 0, 1, 0) == 0,
	    "duplicate sid refused");
	ok(new_snapshot(c, ds, "xyz", LEVEL_FULL, 0, 1, 0) == 0,
	    "bad sid refused");
	make_sid(sid, "eeee", 5);
	ok(new_snapshot(c, ds, sid, LEVEL_DIFFERENTIAL, i1, 1, 0) == 0,
	    "differential on an incremental refused");
	ok(new_snapshot(c, ds2, sid, LEVEL_INCREMENTAL, f1, 1, 0) == 0,
	    "incremental across datasets refused");
	ok(new_snapshot(c, ds, sid, LEVEL_INCREMENTAL, 0, 1, 0) == 0,
	    "incremental without parent refused");

	ok(catalog_snapshot_get(c, i1, &s) == 0, "get incremental");
	ok(s.level == LEVEL_INCREMENTAL && s.parent_id == f1 &&
	    s.full_id == f1 && s.depth == 1 && s.state == SNAP_RUNNING,
	    "incremental chain fields derived");
	ok(strcmp(s.dataset, "/ckpt/llama") == 0 &&
	    strcmp(s.host, "testhost") == 0 &&
	    strcmp(s.source, "/data/src") == 0, "strings filled");
	make_sid(sid, "abcd1", 1);
	ok(strcmp(s.parent_sid, sid) == 0, "parent sid filled");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_get(c, f1, &s) == 0 && s.full_id == f1 &&
	    s.parent_id == 0 && s.parent_sid[0] == '\0' && s.depth == 0,
	    "a full is its own full");
	catalog_snapshot_release(&s);

	/* @latest and @full look only at complete snapshots. */
	ok(catalog_snapshot_find(c, "/ckpt/llama@latest", &s) == 0,
	    "no complete snapshot yet");
	ok(complete(c, f1) == 0 && complete(c, i1) == 0, "complete two");
	ok(catalog_snapshot_find(c, "/ckpt/llama@latest", &s) == 1 &&
	    s.id == i1, "@latest is the incremental");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_find(c, "/ckpt/llama@full", &s) == 1 &&
	    s.id == f1, "@full is the first full");
	catalog_snapshot_release(&s);
	ok(complete(c, f2) == 0, "complete second full");
	ok(catalog_snapshot_find(c, "/ckpt/llama@latest", &s) == 1 &&
	    s.id == f2 && strcmp(s.sid, sid_f2) == 0, "@latest moves");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_find(c, "/ckpt/llama@full", &s) == 1 &&
	    s.id == f2, "@full moves");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_find(c, "/nope@latest", &s) == 0,
	    "@latest of unknown dataset");
	ok(catalog_snapshot_find(c, "/ckpt/llama@yesterday", &s) == 0,
	    "unknown @ suffix");

	/* Prefixes. */
	ok(catalog_snapshot_find(c, "abcd", &s) == 0, "ambiguous prefix");
	ok(catalog_snapshot_find(c, "abcd2", &s) == 1 && s.id == i1,
	    "unique prefix");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_find(c, "ABCD1", &s) == 1 && s.id == f1,
	    "upper case prefix");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_find(c, sid_f2, &s) == 1 && s.id == f2,
	    "full sid");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_find(c, "5ee", &s) == 0, "too short prefix");
	ok(catalog_snapshot_find(c, "ffff", &s) == 0, "unknown prefix");
	ok(catalog_snapshot_find(c, "abc%", &s) == 0 &&
	    catalog_snapshot_find(c, "ab_d", &s) == 0 &&
	    catalog_snapshot_find(c, "'; DROP TABLE snapshot; --", &s) == 0,
	    "wildcards and quotes are no patterns");
	ok(catalog_snapshot_find(c, "7777", &s) == 1 && s.id == r,
	    "snapshot still there");
	catalog_snapshot_release(&s);

	/* Update writes counters and the record pack. */
	ok(catalog_snapshot_get(c, r, &s) == 0, "get other");
	s.files = 10;
	s.dirs = 2;
	s.others = 1;
	s.deleted = 3;
	s.bytes_read = 1 << 20;
	s.bytes_new = 12345;
	s.bytes_stored = 2345;
	s.warnings = 1;
	memcpy(s.record_pack, "0123456789abcdef0123456789abcdef", 33);
	ok(catalog_snapshot_update(c, &s) == 0, "update");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_get(c, r, &s) == 0 && s.files == 10 &&
	    s.dirs == 2 && s.others == 1 && s.deleted == 3 &&
	    s.bytes_read == 1 << 20 && s.bytes_new == 12345 &&
	    s.bytes_stored == 2345 && s.warnings == 1 &&
	    strcmp(s.record_pack, "0123456789abcdef0123456789abcdef") == 0 &&
	    s.state == SNAP_RUNNING, "update stored");
	catalog_snapshot_release(&s);
	memset(&bad, 0, sizeof(bad));
	bad.id = 99999;
	ok(catalog_snapshot_update(c, &bad) == -1, "update of unknown id");

	ok(catalog_snapshot_fail_running(c, &n) == 0 && n == 1,
	    "fail_running marks one (%d)", n);
	ok(catalog_snapshot_get(c, r, &s) == 0 && s.state == SNAP_FAILED,
	    "running snapshot failed");
	catalog_snapshot_release(&s);
	ok(catalog_snapshot_fail_running(c, &n) == 0 && n == 0,
	    "fail_running again: none");

	n = 0;
	ok(catalog_snapshot_list(c, NULL, count_cb, &n) == 0 && n == 4,
	    "list all (%d)", n);
	n = 0;
	ok(catalog_snapshot_list(c, "/ckpt/llama", count_cb, &n) == 0 &&
	    n == 3, "list one dataset (%d)", n);
	n = 0;
	ok(catalog_snapshot_list(c, NULL, stop_cb, &n) == 42 && n == 2,
	    "list stops on callback value");
}

static void
cid_of(uint8_t cid[32], unsigned n)
{
	memset(cid, 0, 32);
	cid[0] = 0xc1;
	cid[28] = (uint8_t)(n >> 24);
	cid[29] = (uint8_t)(n >> 16);
	cid[30] = (uint8_t)(n >> 8);
	cid[31] = (uint8_t)n;
}

static int64_t content_a, content_b;

static void
test_chunks(struct catalog *c)
{
	struct catalog_chunk_loc loc, *locs;
	struct catalog_chunk_ref refs[3];
	uint8_t cid1[32], cid2[32], cid3[32], hash[32], h2[32];
	int64_t r1, r2, r3, again, pk, pk2, ct, ct2;
	size_t n;

	cid_of(cid1, 1);
	cid_of(cid2, 2);
	cid_of(cid3, 3);
	memset(hash, 0x11, sizeof(hash));
	ok(catalog_chunk_find(c, cid1, &r1) == 0 && r1 == 0, "unknown chunk");
	ok(catalog_chunk_add(c, cid1, &r1) == 0 && r1 > 0, "chunk added");
	ok(catalog_chunk_find(c, cid1, &again) == 0 && again == r1,
	    "chunk known, no location");
	ok(catalog_chunk_add(c, cid1, &again) == 0 && again == r1,
	    "adding again gives its row");
	ok(catalog_chunk_add(c, cid2, &r2) == 0 && r2 != r1, "second chunk");
	ok(catalog_chunk_add(c, cid3, &r3) == 0, "third chunk");

	ok(catalog_pack_add(c, "00112233445566778899aabbccddeeff", 4096, hash,
	    &pk) == 0 && pk > 0, "pack added");
	ok(catalog_pack_add(c, "00112233445566778899aabbccddeeff", 4096, hash,
	    &pk2) == 0 && pk2 == pk, "same pack again");
	memset(h2, 0x22, sizeof(h2));
	ok(catalog_pack_add(c, "00112233445566778899aabbccddeeff", 4096, h2,
	    &pk2) == -1, "same name, other hash refused");
	ok(catalog_pack_add(c, "packs/../x", 1, hash, &pk2) == -1,
	    "bad pack name refused");

	memset(&loc, 0, sizeof(loc));
	loc.pack_offset = 64;
	loc.plain_len = 1000;
	loc.stored_len = 700;
	loc.type = 1;
	loc.flags = 2;
	ok(catalog_chunk_locate(c, r1, pk, &loc) == 0, "chunk located");
	loc.pack_offset = 800;
	loc.plain_len = 500;
	ok(catalog_chunk_locate(c, r3, pk, &loc) == 0, "third located");
	ok(catalog_chunk_locate(c, 99999, pk, &loc) == -1,
	    "locating an unknown chunk fails");
	ok(catalog_chunk_find(c, cid1, &again) == 1 && again == r1,
	    "chunk found with location");
	ok(catalog_chunk_find(c, cid2, &again) == 0 && again == r2,
	    "second still without location");

	/* A content: chunk 1 at 0, a hole, chunk 2 at 2000. */
	refs[0].chunk_rowid = r1;
	refs[0].file_offset = 0;
	refs[0].len = 1000;
	refs[1].chunk_rowid = r2;
	refs[1].file_offset = 2000;
	refs[1].len = 300;
	ok(catalog_content_put(c, hash, 2300, refs, 2, &ct) == 0 && ct > 0,
	    "content put");
	ok(catalog_content_put(c, hash, 2300, refs, 2, &ct2) == 0 &&
	    ct2 == ct, "same hash, same content row");
	ok(catalog_content_put(c, hash, 9999, refs, 2, &ct2) == -1,
	    "same hash, other size refused");
	refs[1].file_offset = 500;
	ok(catalog_content_put(c, h2, 2300, refs, 2, &ct2) == -1,
	    "overlapping chunks refused");
	refs[1].file_offset = 2000;
	refs[1].chunk_rowid = 99999;
	ok(catalog_content_put(c, h2, 2300, refs, 2, &ct2) == -1,
	    "unknown chunk refused");
	ok(catalog_content_chunks(c, ct2, &locs, &n) == -1 ||
	    (free(locs), 0), "failed put left no content");

	ok(catalog_content_chunks(c, ct, &locs, &n) == 0 && n == 2,
	    "content chunks");
	if (n == 2) {
		ok(locs[0].rowid == r1 && memcmp(locs[0].cid, cid1, 32) == 0 &&
		    strcmp(locs[0].pack, "00112233445566778899aabbccddeeff") ==
		    0 && locs[0].pack_offset == 64 &&
		    locs[0].plain_len == 1000 && locs[0].stored_len == 700 &&
		    locs[0].type == 1 && locs[0].flags == 2 &&
		    locs[0].file_offset == 0, "first chunk location");
		ok(locs[1].rowid == r2 && locs[1].pack[0] == '\0' &&
		    locs[1].file_offset == 2000 && locs[1].plain_len == 300,
		    "second chunk has no location yet");
	}
	free(locs);
	content_a = ct;

	refs[0].chunk_rowid = r3;
	refs[0].file_offset = 0;
	refs[0].len = 500;
	memset(h2, 0x33, sizeof(h2));
	ok(catalog_content_put(c, h2, 500, refs, 1, &content_b) == 0,
	    "second content");
	memset(h2, 0x44, sizeof(h2));
	ok(catalog_content_put(c, h2, 0, NULL, 0, &ct2) == 0 &&
	    catalog_content_chunks(c, ct2, &locs, &n) == 0 && n == 0,
	    "empty content");
	free(locs);
	ok(catalog_content_chunks(c, 424242, &locs, &n) == -1,
	    "unknown content");
}

/*
 * Chunks and contents are claimed with the insert first once most recent
 * ones were new: known ones must still come back as the same row, and a
 * size mismatch still be refused, whichever way round the run looks.
 */
static void
test_claims(struct catalog *c)
{
	struct catalog_chunk_loc loc, *locs;
	struct catalog_chunk_ref ref;
	uint8_t cid[32], hash[32], first[32];
	int64_t rows[40], row, pk, ct0 = 0, ct;
	size_t n;
	int i, same = 1, claimed = 1;

	cid_of(cid, 1000);
	ok(catalog_chunk_claim(c, cid, &row) == 0 && row > 0,
	    "new chunk claimed");
	ok(catalog_chunk_claim(c, cid, &rows[0]) == 0 && rows[0] == row,
	    "claimed again: its row, still not stored");
	memset(hash, 0x55, sizeof(hash));
	memset(&loc, 0, sizeof(loc));
	loc.plain_len = loc.stored_len = 10;
	ok(catalog_pack_add(c, "ffeeddccbbaa99887766554433221100", 100, hash,
	    &pk) == 0 && catalog_chunk_locate(c, row, pk, &loc) == 0,
	    "claimed chunk located");
	ok(catalog_chunk_claim(c, cid, &rows[0]) == 1 && rows[0] == row,
	    "stored chunk claimed: known, its row");

	/* 40 new contents turn the catalog to inserting first... */
	ref.chunk_rowid = row;
	ref.file_offset = 0;
	ref.len = 10;
	for (i = 0; i < 40; i++) {
		memset(hash, 0, sizeof(hash));
		hash[0] = 0x77;
		hash[1] = (uint8_t)i;
		if (i == 0)
			memcpy(first, hash, sizeof(first));
		if (catalog_content_put(c, hash, 10, &ref, 1, &rows[i]) != 0 ||
		    catalog_content_chunks(c, rows[i], &locs, &n) != 0)
			claimed = 0;
		else {
			claimed &= n == 1 && locs[0].rowid == row;
			free(locs);
		}
	}
	ok(claimed, "new contents put with their chunk rows");
	ct0 = rows[0];
	/* ... where a known one is still its row, and checked. */
	ok(catalog_content_put(c, first, 10, &ref, 1, &ct) == 0 && ct == ct0,
	    "known content after new ones: same row");
	ok(catalog_content_put(c, first, 11, &ref, 1, &ct) == -1,
	    "known content with another size refused");
	for (i = 0; i < 40; i++)
		same &= catalog_content_put(c, first, 10, &ref, 1, &ct) == 0 &&
		    ct == ct0;
	ok(same, "known content again and again: same row");
	ok(catalog_content_chunks(c, ct0, &locs, &n) == 0 && n == 1,
	    "its chunk rows not doubled");
	if (n == 1)
		free(locs);
}

static void
fill_entry(struct entry *e, const char *path, int kind, int64_t size,
    int64_t mtime)
{
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->kind = kind;
	e->mode = kind == ENTRY_DIR ? 0755 : 0644;
	e->uid = 1000;
	e->gid = 100;
	e->size = size;
	e->mtime_ns = mtime;
	e->ctime_ns = mtime + 1;
	e->nlink = 1;
}

/* Resolve into one string "path:size,path:size,..." for comparisons. */
static char *
resolve_str(struct catalog *c, int64_t id, const char *under)
{
	struct catalog_iter *it;
	struct buf b = BUF_INIT;
	struct entry e;
	int rc;

	if ((it = catalog_entries(c, id, under)) == NULL)
		return (NULL);
	buf_printf(&b, "%s", "");
	while ((rc = catalog_iter_next(it, &e)) == 1)
		buf_printf(&b, "%s%s:%lld", b.len ? "," : "", e.path,
		    (long long)e.size);
	catalog_iter_free(it);
	if (rc != 0) {
		buf_release(&b);
		return (NULL);
	}
	return ((char *)b.data);
}

static int
check_resolve(struct catalog *c, int64_t id, const char *under,
    const char *want, const char *name)
{
	char *got = resolve_str(c, id, under);
	int r = ok(got != NULL && strcmp(got, want) == 0, "%s", name);

	if (!r)
		diag("got  '%s'\n# want '%s'", got ? got : "(error)", want);
	free(got);
	return (r);
}

static int64_t small_full, small_incr2;

static void
test_entries(struct catalog *c)
{
	static const char *paths[] = { "b", "a/b/c", "a-b/x", "a", "a.txt",
		"a-b", "a/b", "ab", "a0", "a/b-c", "a/\xc3\xa9t\xc3\xa9" };
	struct catalog_iter *it;
	struct buf xb = BUF_INIT;
	struct stderr_capture cap;
	struct entry e;
	char sid[SNAPSHOT_ID_HEX + 1];
	const char *err;
	int64_t ds, full, i1, i2, d1;
	size_t i;
	int rc, good;

	ok(catalog_dataset_id(c, "/data/tree", 1, &ds) == 1, "tree dataset");
	make_sid(sid, "feed0", 1);
	full = new_snapshot(c, ds, sid, LEVEL_FULL, 0, 10000, SNAP_RUNNING);
	ok(full > 0, "full for entries");
	ok(catalog_begin(c) == 0, "begin");
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int dir = strcmp(paths[i], "a") == 0 ||
		    strcmp(paths[i], "a/b") == 0 ||
		    strcmp(paths[i], "a-b") == 0;

		fill_entry(&e, paths[i], dir ? ENTRY_DIR : ENTRY_FILE,
		    dir ? 0 : (int64_t)(i + 1), 1);
		if (catalog_entry_add(c, full, &e))
			break;
	}
	ok(i == sizeof(paths) / sizeof(paths[0]), "entries added");

	/* One entry with every field set. */
	entry_xattrs_add(&xb, "user.k", "v\0w", 3);
	fill_entry(&e, "link", ENTRY_SYMLINK, 0, 7);
	e.uname = "alice";
	e.gname = "staff";
	e.target = "../t a r g e t";
	e.xattrs = xb.data;
	e.xattrs_len = xb.len;
	e.acl = "user::rw-\ngroup::r--\nother::r--\n";
	e.ino = UINT64_MAX - 5;
	e.dev = 0x8000000000000001ULL;
	e.rdev = 77;
	e.nlink = 3;
	ok(catalog_entry_add(c, full, &e) == 0, "full entry added");
	fill_entry(&e, "data.bin", ENTRY_FILE, 2300, 9);
	e.content_id = content_a;
	ok(catalog_entry_add(c, full, &e) == 0, "entry with content");
	ok(catalog_entry_add(c, full, &e) == -1, "duplicate entry refused");
	fill_entry(&e, "../etc/passwd", ENTRY_FILE, 1, 1);
	ok(catalog_entry_add(c, full, &e) == -1, "unsafe path refused");
	fill_entry(&e, "/abs", ENTRY_FILE, 1, 1);
	ok(catalog_entry_add(c, full, &e) == -1, "absolute path refused");
	fill_entry(&e, "x", ENTRY_FILE, 1, 1);
	e.content_id = 987654;
	ok(catalog_entry_add(c, full, &e) == -1, "unknown content refused");
	ok(catalog_commit(c) == 0, "commit");
	/* A backup's walk leaves its foreign keys to itself, and then
	 * checks them again. */
	ok(catalog_set_checked(c, 0) == 0 && catalog_begin(c) == 0 &&
	    catalog_entry_add(c, full, &e) == 0,
	    "unchecked: unknown content taken");
	catalog_rollback(c);
	ok(catalog_set_checked(c, 1) == 0 && catalog_begin(c) == 0 &&
	    catalog_entry_add(c, full, &e) == -1,
	    "checked again: unknown content refused");
	catalog_rollback(c);
	stderr_capture_begin(&cap);
	catalog_rollback(c);
	err = stderr_capture_end(&cap);
	if (!ok(err != NULL && err[0] == '\0' && catalog_begin(c) == 0 &&
	    catalog_commit(c) == 0, "rollback without a transaction: no error, "
	    "the catalog still usable"))
		diag("stderr: %s", err ? err : "(not captured)");

	check_resolve(c, full, NULL,
	    "a:0,a-b:0,a-b/x:3,a.txt:5,a/b:0,a/b-c:10,a/b/c:2,"
	    "a/\xc3\xa9t\xc3\xa9:11,a0:9,ab:8,b:1,data.bin:2300,link:0",
	    "full resolved in memcmp path order");
	check_resolve(c, full, "a", "a:0,a/b:0,a/b-c:10,a/b/c:2,"
	    "a/\xc3\xa9t\xc3\xa9:11", "under 'a': itself and below, no 'a-b'");
	check_resolve(c, full, "a/", "a:0,a/b:0,a/b-c:10,a/b/c:2,"
	    "a/\xc3\xa9t\xc3\xa9:11", "under 'a/' is under 'a'");
	check_resolve(c, full, "a/b", "a/b:0,a/b/c:2", "under 'a/b'");
	check_resolve(c, full, "a-b", "a-b:0,a-b/x:3", "under 'a-b'");
	check_resolve(c, full, "b", "b:1", "under a file: the file");
	check_resolve(c, full, "zzz", "", "under a missing path: nothing");
	check_resolve(c, full, "a%", "", "under with a wildcard: nothing");
	check_resolve(c, full, "", "a:0,a-b:0,a-b/x:3,a.txt:5,a/b:0,"
	    "a/b-c:10,a/b/c:2,a/\xc3\xa9t\xc3\xa9:11,a0:9,ab:8,b:1,"
	    "data.bin:2300,link:0", "empty under: everything");

	/* Every field comes back. */
	it = catalog_entries(c, full, "link");
	ok(it != NULL && catalog_iter_next(it, &e) == 1, "read link entry");
	good = it && strcmp(e.path, "link") == 0 && e.kind == ENTRY_SYMLINK &&
	    e.mode == 0644 && e.uid == 1000 && e.gid == 100 &&
	    e.uname && strcmp(e.uname, "alice") == 0 && e.gname &&
	    strcmp(e.gname, "staff") == 0 && e.mtime_ns == 7 &&
	    e.ctime_ns == 8 && e.ino == UINT64_MAX - 5 &&
	    e.dev == 0x8000000000000001ULL && e.rdev == 77 && e.nlink == 3 &&
	    e.target && strcmp(e.target, "../t a r g e t") == 0 &&
	    e.xattrs_len == xb.len && memcmp(e.xattrs, xb.data, xb.len) == 0 &&
	    e.acl && strcmp(e.acl, "user::rw-\ngroup::r--\nother::r--\n") ==
	    0 && e.content_id == 0;
	ok(good, "all fields round trip");
	ok(it && catalog_iter_next(it, &e) == 0, "end of iteration");
	ok(it && catalog_iter_next(it, &e) == 0, "end stays the end");
	catalog_iter_free(it);
	it = catalog_entries(c, full, "data.bin");
	ok(it && catalog_iter_next(it, &e) == 1 && e.content_id == content_a &&
	    e.uname == NULL && e.target == NULL && e.xattrs_len == 0 &&
	    e.acl == NULL, "content id and NULL strings");
	catalog_iter_free(it);
	ok(catalog_entries(c, 424242, NULL) == NULL, "unknown snapshot");
	buf_release(&xb);

	/*
	 * A chain: full -> i1 -> i2, and a differential d1 on the full.
	 * i1: modifies a.txt, deletes b, adds new; i2: deletes a/b/c and a
	 * (tombstones hide them, not their siblings), recreates b, modifies
	 * new.  d1: deletes ab.
	 */
	ok(complete(c, full) == 0, "full complete");
	make_sid(sid, "feed1", 2);
	i1 = new_snapshot(c, ds, sid, LEVEL_INCREMENTAL, full, 10001,
	    SNAP_COMPLETE);
	make_sid(sid, "feed2", 3);
	i2 = new_snapshot(c, ds, sid, LEVEL_INCREMENTAL, i1, 10002,
	    SNAP_COMPLETE);
	make_sid(sid, "feed3", 4);
	d1 = new_snapshot(c, ds, sid, LEVEL_DIFFERENTIAL, full, 10003,
	    SNAP_COMPLETE);
	ok(i1 > 0 && i2 > 0 && d1 > 0, "chain snapshots created");
	rc = catalog_begin(c);
	fill_entry(&e, "a.txt", ENTRY_FILE, 500, 2);
	rc |= catalog_entry_add(c, i1, &e);
	fill_entry(&e, "b", ENTRY_TOMBSTONE, 0, 0);
	rc |= catalog_entry_add(c, i1, &e);
	fill_entry(&e, "new", ENTRY_FILE, 42, 2);
	rc |= catalog_entry_add(c, i1, &e);
	fill_entry(&e, "a/b/c", ENTRY_TOMBSTONE, 0, 0);
	rc |= catalog_entry_add(c, i2, &e);
	fill_entry(&e, "a", ENTRY_TOMBSTONE, 0, 0);
	rc |= catalog_entry_add(c, i2, &e);
	fill_entry(&e, "b", ENTRY_DIR, 0, 3);
	rc |= catalog_entry_add(c, i2, &e);
	fill_entry(&e, "new", ENTRY_FILE, 43, 3);
	rc |= catalog_entry_add(c, i2, &e);
	fill_entry(&e, "ab", ENTRY_TOMBSTONE, 0, 0);
	rc |= catalog_entry_add(c, d1, &e);
	rc |= catalog_commit(c);
	ok(rc == 0, "chain entries added");

	check_resolve(c, i1, NULL,
	    "a:0,a-b:0,a-b/x:3,a.txt:500,a/b:0,a/b-c:10,a/b/c:2,"
	    "a/\xc3\xa9t\xc3\xa9:11,a0:9,ab:8,data.bin:2300,link:0,new:42",
	    "incremental 1 resolved");
	check_resolve(c, i2, NULL,
	    "a-b:0,a-b/x:3,a.txt:500,a/b:0,a/b-c:10,"
	    "a/\xc3\xa9t\xc3\xa9:11,a0:9,ab:8,b:0,data.bin:2300,link:0,new:43",
	    "incremental 2 resolved (tombstones, recreation)");
	check_resolve(c, i2, "a", "a/b:0,a/b-c:10,a/\xc3\xa9t\xc3\xa9:11",
	    "incremental 2 under 'a'");
	check_resolve(c, i2, "b", "b:0", "recreated path under itself");
	check_resolve(c, i1, "b", "", "deleted path under itself");
	check_resolve(c, d1, NULL,
	    "a:0,a-b:0,a-b/x:3,a.txt:5,a/b:0,a/b-c:10,a/b/c:2,"
	    "a/\xc3\xa9t\xc3\xa9:11,a0:9,b:1,data.bin:2300,link:0",
	    "differential resolved against its full only");
	check_resolve(c, full, "a.txt", "a.txt:5", "full unchanged");
	small_full = full;
	small_incr2 = i2;
}

/*
 * Entries added sixteen to a statement and the rest one by one (a
 * backup's recorder): every row as given, and a bad entry in a batch
 * refuses the call.
 */
static void
test_entries_batch(struct catalog *c)
{
	enum { N = 2 * CATALOG_ENTRIES_AT_ONCE + 5 };
	struct entry e[N], got;
	const struct entry *ep[N];
	struct catalog_iter *it;
	struct stderr_capture cap;
	char paths[N][16], sid[SNAPSHOT_ID_HEX + 1];
	const char *err;
	int64_t ds, snap;
	size_t i, n = 0, good = 0;

	ok(catalog_dataset_id(c, "/data/batch", 1, &ds) == 1, "batch dataset");
	make_sid(sid, "ba7c4", 1);
	snap = new_snapshot(c, ds, sid, LEVEL_FULL, 0, 20000, SNAP_RUNNING);
	for (i = 0; i < N; i++) {
		snprintf(paths[i], sizeof(paths[i]), "f%02zu", i);
		fill_entry(&e[i], paths[i], ENTRY_FILE, (int64_t)i + 1,
		    (int64_t)i);
		e[i].content_id = i % 2 ? content_a : 0;
		e[i].uname = i % 3 ? "alice" : NULL;
		ep[i] = &e[i];
	}
	ok(catalog_begin(c) == 0 && catalog_entries_add(c, snap, ep, N) ==
	    0 && catalog_commit(c) == 0, "%d entries added", (int)N);
	it = catalog_entries(c, snap, NULL);
	while (it && catalog_iter_next(it, &got) == 1) {
		i = n++;
		if (i < N && strcmp(got.path, paths[i]) == 0 &&
		    got.size == (int64_t)i + 1 && got.mtime_ns == (int64_t)i &&
		    got.content_id == (i % 2 ? content_a : 0) &&
		    (i % 3 ? got.uname && strcmp(got.uname, "alice") == 0 :
		    got.uname == NULL))
			good++;
	}
	catalog_iter_free(it);
	ok(n == N && good == N, "every row as given (%zu of %zu)", good, n);

	/* A bad path in the second batch of sixteen. */
	for (i = 0; i < N; i++)
		snprintf(paths[i], sizeof(paths[i]), "g%02zu", i);
	e[CATALOG_ENTRIES_AT_ONCE + 3].path = "../escape";
	stderr_capture_begin(&cap);
	ok(catalog_begin(c) == 0 && catalog_entries_add(c, snap, ep, N) ==
	    -1, "a batch with an unsafe path refused");
	catalog_rollback(c);
	err = stderr_capture_end(&cap);
	ok(err != NULL && strstr(err, "unsafe path") != NULL,
	    "and said why");
	ok(complete(c, snap) == 0, "batch snapshot complete");
}

static void
test_export(struct catalog *c)
{
	struct catalog_snapshot s;
	struct buf b = BUF_INIT;
	unsigned char *img;
	sqlite3 *h;
	sqlite3_stmt *st;
	int good;

	ok(catalog_snapshot_export(c, small_full, &b) == 0 && b.len > 0,
	    "export full (%zu bytes)", b.len);
	ok(sqlite3_open(":memory:", &h) == SQLITE_OK, "open image db");
	img = sqlite3_malloc64(b.len);
	memcpy(img, b.data, b.len);
	ok(sqlite3_deserialize(h, "main", img, (sqlite3_int64)b.len,
	    (sqlite3_int64)b.len, SQLITE_DESERIALIZE_FREEONCLOSE |
	    SQLITE_DESERIALIZE_READONLY) == SQLITE_OK, "deserialize");
	ok(raw_int(h, "SELECT value FROM meta WHERE key = 'format'") == 1,
	    "format 1");
	ok(raw_int(h, "SELECT value FROM meta WHERE key = 'part'") == 0 &&
	    raw_int(h, "SELECT value FROM meta WHERE key = 'parts'") == 1 &&
	    raw_int(h, "SELECT count(*) FROM part") == 0,
	    "the head of a record of one part");
	ok(raw_int(h, "SELECT count(*) FROM entry") == 13, "13 entries");
	ok(raw_int(h, "SELECT count(*) FROM content") == 1, "one content");
	ok(raw_int(h, "SELECT count(*) FROM content_chunk") == 2,
	    "two content chunks");
	ok(raw_int(h, "SELECT value FROM meta WHERE key = 'level'") ==
	    LEVEL_FULL, "level full");
	ok(raw_int(h, "SELECT count(*) FROM meta WHERE key = 'parent_sid' "
	    "AND value IS NULL") == 1, "no parent");
	ok(raw_int(h, "SELECT count(*) FROM entry e JOIN content c ON "
	    "c.hash = e.content WHERE e.path = CAST('data.bin' AS BLOB) AND "
	    "c.size = 2300") == 1, "entry refers to its content by hash");
	ok(raw_int(h, "SELECT count(*) FROM content_chunk WHERE seq = 1 AND "
	    "file_offset = 2000 AND len = 300 AND length(cid) = 32") == 1,
	    "content chunk row");
	ok(raw_int(h, "SELECT count(*) FROM entry WHERE path = "
	    "CAST('link' AS BLOB) AND uname = 'alice' AND "
	    "target = CAST('../t a r g e t' AS BLOB) AND ino = -6") == 1,
	    "entry columns");
	catalog_snapshot_get(c, small_full, &s);
	good = sqlite3_prepare_v2(h, "SELECT value FROM meta WHERE key = ?1",
	    -1, &st, NULL) == SQLITE_OK;
	sqlite3_bind_text(st, 1, "sid", -1, SQLITE_STATIC);
	good = good && sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), s.sid) == 0;
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, "dataset", -1, SQLITE_STATIC);
	good = good && sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "/data/tree") == 0;
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, "full_sid", -1, SQLITE_STATIC);
	good = good && sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), s.sid) == 0;
	sqlite3_finalize(st);
	ok(good, "meta sid, dataset and full sid");
	catalog_snapshot_release(&s);
	sqlite3_close(h);

	/* An incremental carries only its own rows, tombstones included. */
	ok(catalog_snapshot_export(c, small_incr2, &b) == 0, "export incr");
	ok(sqlite3_open(":memory:", &h) == SQLITE_OK, "open image db");
	img = sqlite3_malloc64(b.len);
	memcpy(img, b.data, b.len);
	sqlite3_deserialize(h, "main", img, (sqlite3_int64)b.len,
	    (sqlite3_int64)b.len, SQLITE_DESERIALIZE_FREEONCLOSE |
	    SQLITE_DESERIALIZE_READONLY);
	ok(raw_int(h, "SELECT count(*) FROM entry") == 4 &&
	    raw_int(h, "SELECT count(*) FROM entry WHERE kind = 0") == 2,
	    "incremental's own 4 rows, 2 tombstones");
	ok(raw_int(h, "SELECT count(*) FROM content") == 0, "no contents");
	ok(raw_int(h, "SELECT value FROM meta WHERE key = 'depth'") == 2,
	    "depth 2");
	ok(raw_int(h, "SELECT count(*) FROM meta WHERE key = 'parent_sid' "
	    "AND value LIKE 'feed1%'") == 1, "parent sid");
	sqlite3_close(h);

	ok(catalog_snapshot_export(c, 424242, &b) == -1, "export unknown");
	buf_release(&b);
}

/*
 * The big chain: a full of NPATHS entries and NLINKS - 1 incrementals,
 * each changing, deleting and adding paths, checked against a model.
 */
#define NDIRS 500
#define NPATHS 50000
#define NLINKS 20
#define NEW_PER_LINK 300
#define MAXPATHS (NPATHS + NLINKS * NEW_PER_LINK)

struct mpath {
	char name[32];
	int kind;		/* 0: absent */
	int64_t size;
	int64_t mtime;
	int touched;		/* link that last wrote it */
};

static int
mpath_cmp(const void *a, const void *b)
{
	const struct mpath *x = *(const struct mpath *const *)a;
	const struct mpath *y = *(const struct mpath *const *)b;

	return (strcmp(x->name, y->name));
}

/* Compare a resolution with the model; under NULL or a directory. */
static int
check_model(struct catalog *c, int64_t id, const struct mpath *m, size_t nm,
    const char *under, double *secs)
{
	const struct mpath **v;
	struct catalog_iter *it;
	struct entry e;
	size_t i, n = 0, k = 0, ul = under ? strlen(under) : 0;
	double t0;
	int rc, bad = 0;

	v = calloc(nm, sizeof(*v));
	for (i = 0; i < nm; i++) {
		if (m[i].kind == 0)
			continue;
		if (under && !(strcmp(m[i].name, under) == 0 ||
		    (strncmp(m[i].name, under, ul) == 0 &&
		    m[i].name[ul] == '/')))
			continue;
		v[n++] = &m[i];
	}
	qsort(v, n, sizeof(*v), mpath_cmp);
	t0 = now_monotonic();
	it = catalog_entries(c, id, under);
	while (it && (rc = catalog_iter_next(it, &e)) == 1) {
		if (k >= n || strcmp(e.path, v[k]->name) != 0 ||
		    e.kind != v[k]->kind || e.size != v[k]->size ||
		    e.mtime_ns != v[k]->mtime) {
			if (bad++ < 3)
				diag("mismatch at %zu: got '%s' %d %lld, want "
				    "'%s'", k, e.path, e.kind,
				    (long long)e.size,
				    k < n ? v[k]->name : "(end)");
		}
		k++;
	}
	*secs = now_monotonic() - t0;
	if (it == NULL || rc != 0)
		bad++;
	catalog_iter_free(it);
	free(v);
	if (k != n) {
		diag("got %zu entries, want %zu", k, n);
		bad++;
	}
	return (bad == 0);
}

static void
test_big_chain(struct catalog *c)
{
	struct mpath *m, *mid;
	struct entry e;
	char sid[SNAPSHOT_ID_HEX + 1];
	int64_t ds, ids[NLINKS];
	size_t nm = 0, i, rows = 0;
	double t0, t_ins, t;
	int link, rc = 0, j;

	m = calloc(MAXPATHS, sizeof(*m));
	mid = calloc(MAXPATHS, sizeof(*m));
	for (i = 0; i < NDIRS; i++) {
		snprintf(m[nm].name, sizeof(m[nm].name), "dir%03zu", i);
		m[nm].kind = ENTRY_DIR;
		m[nm].touched = -1;
		nm++;
		for (j = 0; j < NPATHS / NDIRS - 1; j++) {
			snprintf(m[nm].name, sizeof(m[nm].name),
			    "dir%03zu/file%05d", i, j);
			m[nm].kind = ENTRY_FILE;
			m[nm].size = (int64_t)(rnd() % 100000);
			m[nm].mtime = 1;
			m[nm].touched = -1;
			nm++;
		}
	}

	ok(catalog_dataset_id(c, "/data/big", 1, &ds) == 1, "big dataset");
	t0 = now_monotonic();
	rc |= catalog_begin(c);
	for (link = 0; link < NLINKS && rc == 0; link++) {
		make_sid(sid, "b1600", (unsigned)link);
		ids[link] = new_snapshot(c, ds, sid, link ? LEVEL_INCREMENTAL :
		    LEVEL_FULL, link ? ids[link - 1] : 0, 100000 + link,
		    SNAP_COMPLETE);
		if (ids[link] == 0) {
			rc = -1;
			break;
		}
		if (link == 0) {
			for (i = 0; i < nm && rc == 0; i++) {
				fill_entry(&e, m[i].name, m[i].kind,
				    m[i].size, m[i].mtime);
				rc |= catalog_entry_add(c, ids[0], &e);
				rows++;
			}
			continue;
		}
		/* ~1500 modifications, ~300 deletions, NEW_PER_LINK new. */
		for (j = 0; j < 1800 && rc == 0; j++) {
			struct mpath *p = &m[rnd() % nm];

			if (p->touched == link || p->kind == ENTRY_DIR)
				continue;
			p->touched = link;
			if (p->kind != 0 && j % 6 == 0) {
				p->kind = 0;
				fill_entry(&e, p->name, ENTRY_TOMBSTONE, 0, 0);
			} else {
				/* Modified, or recreated if it was gone. */
				p->kind = ENTRY_FILE;
				p->size = (int64_t)(rnd() % 100000);
				p->mtime = link + 1;
				fill_entry(&e, p->name, p->kind, p->size,
				    p->mtime);
			}
			rc |= catalog_entry_add(c, ids[link], &e);
			rows++;
		}
		for (j = 0; j < NEW_PER_LINK && rc == 0; j++) {
			struct mpath *p = &m[nm++];

			snprintf(p->name, sizeof(p->name),
			    "dir%03d/new%02d-%03d", (int)(rnd() % NDIRS), link,
			    j);
			p->kind = ENTRY_FILE;
			p->size = j;
			p->mtime = link + 1;
			p->touched = link;
			fill_entry(&e, p->name, p->kind, p->size, p->mtime);
			rc |= catalog_entry_add(c, ids[link], &e);
			rows++;
		}
		if (link == NLINKS / 2)
			memcpy(mid, m, MAXPATHS * sizeof(*m));
	}
	rc |= catalog_commit(c);
	t_ins = now_monotonic() - t0;
	ok(rc == 0, "chain of %d snapshots, %zu rows inserted", NLINKS, rows);
	diag("insert: %zu rows in %.2f s", rows, t_ins);

	ok(check_model(c, ids[NLINKS - 1], m, nm, NULL, &t),
	    "depth %d resolution matches the model", NLINKS - 1);
	diag("resolve %d-link chain over %zu paths: %.3f s", NLINKS, nm, t);
	ok(check_model(c, ids[NLINKS / 2], mid, nm, NULL, &t),
	    "depth %d resolution matches the model", NLINKS / 2);
	diag("resolve %d-link chain: %.3f s", NLINKS / 2 + 1, t);
	ok(check_model(c, ids[NLINKS - 1], m, nm, "dir123", &t),
	    "subtree resolution matches the model");
	diag("resolve subtree 'dir123' of the %d-link chain: %.4f s",
	    NLINKS, t);
	free(m);
	free(mid);
}

static void
random_cid(uint8_t cid[32])
{
	int i;

	for (i = 0; i < 32; i += 8)
		put_le64(cid + i, rnd());
}

/* Bytes of path, 0 if it is not there. */
static off_t
file_size(const char *path)
{
	struct stat st;

	return (stat(path, &st) == 0 ? st.st_size : 0);
}

/*
 * A writer's commits leave the WAL to the checkpoint thread: the database
 * file takes the pages while the catalog is open, with no commit large
 * enough for the commit to checkpoint itself; and however many commits
 * follow, the WAL stays bounded.  Chunk ids at random, a commit every
 * 2,000: each commit dirties the chunk id index all over, as a backup's.
 */
static void
test_checkpoints(void)
{
	char *db = tmp_path("wal.db"), *wal = tmp_path("wal.db-wal");
	struct catalog *c = catalog_open(db);
	uint8_t cid[32];
	off_t before, max_wal = 0;
	int64_t row;
	int i, k, failed = 0;

	ok(c != NULL, "open a catalog to fill");
	if (c == NULL)
		return;
	before = file_size(db);
	for (i = 0; i < 8 && !failed; i++) {
		failed |= catalog_begin(c);
		for (k = 0; k < 2000 && !failed; k++) {
			random_cid(cid);
			failed |= catalog_chunk_add(c, cid, &row);
		}
		failed |= catalog_commit(c);
	}
	ok(!failed && file_size(wal) < 16000 * 4096,
	    "commits below the inline checkpoint");
	/* The thread's checkpoint, which writes the pages as it goes: a
	 * minute at most, on a busy host under ThreadSanitizer (make tsan);
	 * the wait ends once the pages are in. */
	for (i = 0; i < 6000 && file_size(db) <= before + (1 << 20); i++)
		usleep(10000);
	ok(file_size(db) > before + (1 << 20),
	    "the database took the WAL's pages, the catalog open");
	for (i = 0; i < 60 && !failed; i++) {
		failed |= catalog_begin(c);
		for (k = 0; k < 2000 && !failed; k++) {
			random_cid(cid);
			failed |= catalog_chunk_add(c, cid, &row);
		}
		failed |= catalog_commit(c);
		if (file_size(wal) > max_wal)
			max_wal = file_size(wal);
	}
	ok(!failed, "136,000 chunks in 68 commits");
	/* Without checkpoints, some 120 MB. */
	ok(max_wal > 0 && max_wal < 96 << 20, "the WAL stays bounded: %lld "
	    "bytes at most", (long long)max_wal);
	catalog_close(c);
	ok(file_size(wal) == 0, "closed: no WAL left");
	free(wal);
	free(db);
}

/* The children of dir ("" the root) in id's view by catalog_children,
 * from after on, as "name,name,...". */
static char *
children_str(struct catalog *c, int64_t id, const char *dir,
    const char *after)
{
	struct catalog_children *it;
	struct buf b = BUF_INIT;
	struct entry e;
	int64_t pid;
	int rc;

	if ((it = catalog_children(c, id, dir, after)) == NULL)
		return (NULL);
	buf_printf(&b, "%s", "");
	while ((rc = catalog_children_next(it, &e, &pid)) == 1)
		buf_printf(&b, "%s%s", b.len ? "," : "", e.path);
	catalog_children_free(it);
	if (rc != 0) {
		buf_release(&b);
		return (NULL);
	}
	return ((char *)b.data);
}

/* The same from the whole view (catalog_entries): the model. */
static char *
children_model(struct catalog *c, int64_t id, const char *dir,
    const char *after)
{
	struct catalog_iter *it;
	struct buf b = BUF_INIT;
	struct entry e;
	size_t n = strlen(dir);
	const char *rest;

	if ((it = catalog_entries(c, id, NULL)) == NULL)
		return (NULL);
	buf_printf(&b, "%s", "");
	while (catalog_iter_next(it, &e) == 1) {
		if (entry_path_is_root(e.path))
			continue;
		if (n > 0 && (strncmp(e.path, dir, n) != 0 ||
		    e.path[n] != '/'))
			continue;
		rest = e.path + (n > 0 ? n + 1 : 0);
		if (strchr(rest, '/') != NULL ||
		    (after != NULL && strcmp(e.path, after) <= 0))
			continue;
		buf_printf(&b, "%s%s", b.len ? "," : "", e.path);
	}
	catalog_iter_free(it);
	return ((char *)b.data);
}

static void
test_browse(struct catalog *c)
{
	static const char *dirs[] = { "", "a", "a/b", "a-b", "b", "zzz" };
	static const char *afters[] = { NULL, "a", "a-b", "a/b", "a0", "zz" };
	const int64_t snaps[] = { small_full, small_incr2 };
	struct catalog_browse *b;
	struct catalog_chunk_ref refs[4];
	struct catalog_chunk_loc *locs;
	struct entry e;
	uint8_t cid[32], hash[32];
	int64_t pid, pid2, ct;
	uint64_t bytes;
	size_t i, j, k, n;
	char *got, *want;
	int good = 1;

	for (k = 0; k < 2; k++)
		for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
			for (j = 0; j < sizeof(afters) / sizeof(afters[0]);
			    j++) {
				got = children_str(c, snaps[k], dirs[i],
				    afters[j]);
				want = children_model(c, snaps[k], dirs[i],
				    afters[j]);
				if (got == NULL || want == NULL ||
				    strcmp(got, want) != 0) {
					diag("snapshot %zu, '%s' after '%s': "
					    "got '%s', want '%s'", k, dirs[i],
					    afters[j] ? afters[j] : "", got ?
					    got : "(error)", want ? want : "");
					good = 0;
				}
				free(got);
				free(want);
			}
	ok(good, "children: a directory's names, its subtrees skipped, "
	    "from any name on, as the resolved view has them");
	got = children_str(c, small_full, "a", NULL);
	ok(got != NULL && strcmp(got, "a/b,a/b-c,a/\xc3\xa9t\xc3\xa9") == 0,
	    "children of 'a': not 'a/b/c', not 'a-b'");
	free(got);

	b = catalog_browse_new(c);
	ok(b != NULL, "browse handle");
	ok(catalog_browse_get(b, small_full, "a/b/c", &pid, &e) == 1 &&
	    strcmp(e.path, "a/b/c") == 0 && e.size == 2 && pid > 0,
	    "get by name");
	pid2 = pid;
	ok(catalog_browse_get(b, small_full, NULL, &pid2, &e) == 1 &&
	    strcmp(e.path, "a/b/c") == 0 && pid2 == pid, "get by path row");
	ok(catalog_browse_get(b, small_full, "a/b/nothing", &pid, &e) == 0,
	    "a path not in the view");
	got = children_model(c, small_incr2, "", NULL);
	ok(got != NULL && catalog_browse_get(b, small_incr2, "a-b", &pid,
	    &e) == (strstr(got, "a-b") != NULL),
	    "get agrees with the view of an incremental");
	free(got);
	catalog_browse_free(b);

	/* Chunks at 0 (100), 100 (100), a hole, 300 (50), 1000 (10). */
	memset(hash, 0xb7, sizeof(hash));
	ok(catalog_begin(c) == 0, "begin");
	for (i = 0; i < 4; i++) {
		memset(cid, (int)(0xc0 + i), sizeof(cid));
		if (catalog_chunk_add(c, cid, &refs[i].chunk_rowid))
			break;
	}
	refs[0].file_offset = 0;
	refs[0].len = 100;
	refs[1].file_offset = 100;
	refs[1].len = 100;
	refs[2].file_offset = 300;
	refs[2].len = 50;
	refs[3].file_offset = 1000;
	refs[3].len = 10;
	ok(i == 4 && catalog_content_put(c, hash, 1010, refs, 4, &ct) == 0 &&
	    catalog_commit(c) == 0, "a content with holes");
	{
		static const struct {
			uint64_t off;
			size_t max, n;
			uint64_t first;
		} at[] = { { 0, 10, 4, 0 }, { 99, 10, 4, 0 },
			{ 100, 10, 3, 100 }, { 250, 10, 3, 100 },
			{ 300, 1, 1, 300 }, { 999, 10, 2, 300 },
			{ 1005, 10, 1, 1000 }, { 5000, 10, 1, 1000 } };

		good = 1;
		for (i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			if (catalog_content_chunks_at(c, ct, at[i].off,
			    at[i].max, &locs, &n) != 0 || n != at[i].n ||
			    locs[0].file_offset != at[i].first) {
				diag("at %llu: %zu chunks",
				    (unsigned long long)at[i].off, n);
				good = 0;
			}
			free(locs);
		}
		ok(good, "chunks at an offset: from the last that starts "
		    "at or before it");
	}
	ok(catalog_content_data_bytes(c, ct, &bytes) == 0 && bytes == 260,
	    "data bytes: the holes left out");
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
	test_open();
	test_default_path();
	test_checkpoints();

	db = tmp_path("main.db");
	c = catalog_open(db);
	ok(c != NULL, "open main catalog");
	if (c == NULL)
		return (tap_done());
	test_snapshots(c);
	test_chunks(c);
	test_claims(c);
	test_entries(c);
	test_entries_batch(c);
	test_browse(c);
	test_export(c);
	test_big_chain(c);
	catalog_close(c);

	/* Everything survives a reopen. */
	c = catalog_open(db);
	ok(c != NULL && check_resolve(c, small_incr2, "a",
	    "a/b:0,a/b-c:10,a/\xc3\xa9t\xc3\xa9:11", "resolution after reopen"),
	    "reopened catalog");
	catalog_close(c);
	free(db);

	if (getenv("T_CATALOG_KEEP") != NULL)
		diag("kept %s", tmpdir);
	else if (rm_tree(tmpdir) != 0)
		diag("cannot remove %s", tmpdir);
	return (tap_done());
}
