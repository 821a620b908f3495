/*
 * Journal images: the drill results and failed snapshots of a catalog
 * that the repository does not hold yet, as a small SQLite image (as
 * snapshot records are, export.c) that the engine signs and stores in a
 * pack.  Import is the reverse, for a catalog rebuilt on another host.
 * Names, never catalog row ids: datasets by name, snapshots by id,
 * bundles by target and number.  Format 1 (doc/format.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog-journal.h"
#include "coffer/catalog-known.h"
#include "coffer/log.h"

#define JOURNAL_FORMAT 1
#define JOURNAL_SCHEMA "jnl"

static const char journal_schema[] =
	"PRAGMA journal_mode = OFF;\n"
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;\n"
	"CREATE TABLE drill (time_ns INTEGER, dataset TEXT, sid TEXT,"
	" mode TEXT, sample REAL, files INTEGER, bytes INTEGER,"
	" failures INTEGER, seconds REAL, check_seconds REAL,"
	" estimate_seconds REAL, rto_seconds REAL, rpo_seconds REAL,"
	" rpo_age_seconds REAL, verdict TEXT, source TEXT);\n"
	"CREATE TABLE failed (sid TEXT, dataset TEXT, level INTEGER,"
	" parent_sid TEXT, started_ns INTEGER, finished_ns INTEGER,"
	" host TEXT, source TEXT);\n"
	"CREATE TABLE forgotten (sid TEXT, time_ns INTEGER);\n"
	"CREATE TABLE bundle (direction TEXT, target TEXT, seq INTEGER,"
	" level INTEGER, base_seq INTEGER, manifest BLOB, name TEXT,"
	" size INTEGER, packs INTEGER, snapshots TEXT, created_ns INTEGER);\n"
	"CREATE TABLE bundle_pack (direction TEXT, target TEXT, seq INTEGER,"
	" pack TEXT);\n"
	"CREATE TABLE run (rid TEXT, time_ns INTEGER, wall_ns INTEGER,"
	" seconds REAL, host TEXT, user TEXT, policy TEXT, status INTEGER);\n"
	"CREATE TABLE run_action (rid TEXT, seq INTEGER, kind TEXT,"
	" subject TEXT, level TEXT, slot_ns INTEGER, status INTEGER,"
	" done INTEGER, seconds REAL, detail TEXT);\n"
	"CREATE TABLE key_use (key TEXT, time_ns INTEGER, host TEXT);\n"
	"CREATE TABLE verify (time_ns INTEGER, host TEXT, mode TEXT,"
	" slice_n INTEGER, slice_m INTEGER, complete INTEGER, packs INTEGER,"
	" packs_read INTEGER, bytes_read INTEGER, damage INTEGER,"
	" seconds REAL, verdict TEXT);\n";

/* ?1 is the upper bound of the row ids taken; negated, every row up to
 * it is, also those the repository holds already (a merge). */
static const char drills_sql[] =
	"SELECT dr.time_ns, d.name, dr.sid, dr.mode, dr.sample, dr.files,"
	" dr.bytes, dr.failures, dr.seconds, dr.check_seconds,"
	" dr.estimate_seconds, dr.rto_seconds, dr.rpo_seconds,"
	" dr.rpo_age_seconds, dr.verdict, dr.source"
	" FROM drill dr JOIN dataset d ON d.id = dr.dataset_id"
	" WHERE (dr.in_repo = 0 OR ?1 < 0) AND dr.id <= abs(?1)";
static const char failed_sql[] =
	"SELECT s.sid, d.name, s.level, p.sid, s.started_ns, s.finished_ns,"
	" s.host, s.source"
	" FROM snapshot s JOIN dataset d ON d.id = s.dataset_id"
	" LEFT JOIN snapshot p ON p.id = s.parent_id"
	" WHERE s.state = 2 AND (s.record_pack IS NULL OR ?1 < 0)"
	" AND s.id <= abs(?1)";
static const char forgotten_sql[] =
	"SELECT sid, time_ns FROM forgotten"
	" WHERE (in_repo = 0 OR ?1 < 0) AND id <= abs(?1)";
static const char bundles_sql[] =
	"SELECT direction, target, seq, level, base_seq, manifest, name, size,"
	" packs, snapshots, created_ns FROM bundle"
	" WHERE (in_repo = 0 OR ?1 < 0) AND id <= abs(?1)";
static const char bundle_packs_sql[] =
	"SELECT b.direction, b.target, b.seq, bp.pack FROM bundle b"
	" JOIN bundle_pack bp ON bp.bundle_id = b.id"
	" WHERE (b.in_repo = 0 OR ?1 < 0) AND b.id <= abs(?1)";
static const char runs_sql[] =
	"SELECT rid, time_ns, wall_ns, seconds, host, user, policy, status"
	" FROM run WHERE (in_repo = 0 OR ?1 < 0) AND id <= abs(?1)";
static const char run_actions_sql[] =
	"SELECT r.rid, a.seq, a.kind, a.subject, a.level, a.slot_ns, a.status,"
	" a.done, a.seconds, a.detail FROM run r"
	" JOIN run_action a ON a.run_id = r.id"
	" WHERE (r.in_repo = 0 OR ?1 < 0) AND r.id <= abs(?1)";

static const char verifies_sql[] =
	"SELECT time_ns, host, mode, slice_n, slice_m, complete, packs,"
	" packs_read, bytes_read, damage, seconds, verdict FROM verify"
	" WHERE (in_repo = 0 OR ?1 < 0) AND id <= abs(?1)";
static const char key_uses_sql[] =
	"SELECT key, time_ns, host FROM key_use"
	" WHERE (in_repo = 0 OR ?1 < 0) AND id <= abs(?1)";
/*
 * The key uses worth a record of their own: a key's first use, or one a
 * day or more after its newest use the repository holds.  A lost catalog
 * then costs at most a day of a key's last use (coffer-key(1)), and a
 * host that backs up every hour does not add a journal pack per run,
 * which every later rebuild would read.
 */
#define KEY_USE_DAY_NS "86400000000000"
static const char key_uses_due_sql[] =
	"SELECT count(*) FROM key_use k WHERE k.in_repo = 0 AND k.id <= ?1"
	" AND NOT EXISTS (SELECT 1 FROM key_use x WHERE x.key = k.key"
	" AND x.in_repo = 1 AND x.time_ns > k.time_ns - " KEY_USE_DAY_NS ")";

static int
max_id(struct catalog *c, const char *sql, int64_t *v)
{
	*v = 0;
	return (cat_run(c, sql, "read the journal", NULL, 0, cat_row_int64,
	    v) < 0 ? -1 : 0);
}

int
catalog_journal_export(struct catalog *c, int all, struct buf *out,
    size_t *n, struct catalog_journal_upto *upto)
{
	int64_t sign = all ? -1 : 1;
	sqlite3 *mem;
	sqlite3_stmt *st;
	int64_t nd, nf, ng, nb, nbp, nr, nra, nk, nv, due = 0;
	uint64_t gen;
	char fmt[64], gensql[80];
	int ret = -1, rc;

	*n = 0;
	if (max_id(c, "SELECT coalesce(max(id), 0) FROM drill", &upto->drill) ||
	    max_id(c, "SELECT coalesce(max(id), 0) FROM snapshot",
	    &upto->snapshot) ||
	    max_id(c, "SELECT coalesce(max(id), 0) FROM forgotten",
	    &upto->forgotten) ||
	    max_id(c, "SELECT coalesce(max(id), 0) FROM bundle",
	    &upto->bundle) ||
	    max_id(c, "SELECT coalesce(max(id), 0) FROM run", &upto->run) ||
	    max_id(c, "SELECT coalesce(max(id), 0) FROM key_use",
	    &upto->key_use) ||
	    max_id(c, "SELECT coalesce(max(id), 0) FROM verify",
	    &upto->verify))
		return (-1);
	if ((st = cat_prepare(c, key_uses_due_sql, "read the journal")) ==
	    NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, upto->key_use);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		due = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW) {
		log_error("cannot read the journal: %s", sqlite3_errmsg(c->db));
		return (-1);
	}
	if ((mem = cat_mem_new(0)) == NULL)
		return (-1);
	snprintf(fmt, sizeof(fmt), "INSERT INTO meta VALUES ('format', %d)",
	    JOURNAL_FORMAT);
	if (catalog_generation_get(c, &gen))
		goto out;
	snprintf(gensql, sizeof(gensql), "INSERT INTO meta VALUES"
	    " ('conf_generation', %llu)", (unsigned long long)gen);
	if (cat_mem_exec(mem, journal_schema, 0) ||
	    cat_mem_exec(mem, "BEGIN", 0) || cat_mem_exec(mem, fmt, 0) ||
	    (gen > 0 && cat_mem_exec(mem, gensql, 0)) ||
	    cat_copy_rows(c, mem, sign * upto->drill, "drill results",
	    drills_sql,
	    "INSERT INTO drill VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
	    " ?10, ?11, ?12, ?13, ?14, ?15, ?16)", 0, &nd) ||
	    cat_copy_rows(c, mem, sign * upto->snapshot, "failed snapshots",
	    failed_sql, "INSERT INTO failed VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
	    " ?7, ?8)", 0, &nf) ||
	    cat_copy_rows(c, mem, sign * upto->forgotten, "forgotten snapshots",
	    forgotten_sql, "INSERT INTO forgotten VALUES (?1, ?2)", 0, &ng) ||
	    cat_copy_rows(c, mem, sign * upto->bundle, "bundles", bundles_sql,
	    "INSERT INTO bundle VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
	    " ?10, ?11)", 0, &nb) ||
	    cat_copy_rows(c, mem, sign * upto->bundle, "bundles' packs",
	    bundle_packs_sql, "INSERT INTO bundle_pack VALUES (?1, ?2, ?3,"
	    " ?4)", 0, &nbp) ||
	    cat_copy_rows(c, mem, sign * upto->run, "runs", runs_sql,
	    "INSERT INTO run VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", 0,
	    &nr) ||
	    cat_copy_rows(c, mem, sign * upto->run, "runs' actions",
	    run_actions_sql,
	    "INSERT INTO run_action VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
	    " ?9, ?10)", 0, &nra) ||
	    cat_copy_rows(c, mem, sign * upto->key_use, "key uses", key_uses_sql,
	    "INSERT INTO key_use VALUES (?1, ?2, ?3)", 0, &nk) ||
	    cat_copy_rows(c, mem, sign * upto->verify, "verify runs",
	    verifies_sql, "INSERT INTO verify VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
	    " ?7, ?8, ?9, ?10, ?11, ?12)", 0, &nv) ||
	    cat_mem_exec(mem, "COMMIT", 0))
		goto out;
	/* Key uses that are not due wait, unmarked, for another record
	 * (a merge takes every row). */
	if (all)
		due = nk;
	if (nd + nf + ng + nb + nr + nv + due == 0) {
		ret = 0;
		goto out;
	}
	if (cat_mem_serialize(mem, out, 0))
		goto out;
	*n = (size_t)(nd + nf + ng + nb + nr + nk + nv);
	ret = 0;
out:
	sqlite3_close(mem);
	return (ret);
}

/* One UPDATE of catalog_journal_mark: ?1 the row id bound, ?2 pack. */
static int
mark(struct catalog *c, const char *sql, int64_t upto, const char *pack)
{
	const struct cat_val v[] = { CAT_INT(upto), CAT_TEXT(pack) };

	return (cat_run(c, sql, "mark the journal", v, pack != NULL ? 2 : 1,
	    NULL, NULL));
}

int
catalog_journal_mark(struct catalog *c, const char *pack,
    const struct catalog_journal_upto *upto)
{
	if (mark(c, "UPDATE pack SET journal = 1 WHERE name = ?2", 1, pack) ||
	    mark(c, "UPDATE drill SET in_repo = 1 WHERE in_repo = 0"
	    " AND id <= ?1", upto->drill, NULL) ||
	    mark(c, "UPDATE snapshot SET record_pack = ?2 WHERE state = 2"
	    " AND record_pack IS NULL AND id <= ?1", upto->snapshot, pack) ||
	    mark(c, "UPDATE forgotten SET in_repo = 1 WHERE in_repo = 0"
	    " AND id <= ?1", upto->forgotten, NULL) ||
	    mark(c, "UPDATE bundle SET in_repo = 1 WHERE in_repo = 0"
	    " AND id <= ?1", upto->bundle, NULL) ||
	    mark(c, "UPDATE run SET in_repo = 1 WHERE in_repo = 0"
	    " AND id <= ?1", upto->run, NULL) ||
	    mark(c, "UPDATE key_use SET in_repo = 1 WHERE in_repo = 0"
	    " AND id <= ?1", upto->key_use, NULL) ||
	    mark(c, "UPDATE verify SET in_repo = 1 WHERE in_repo = 0"
	    " AND id <= ?1", upto->verify, NULL))
		return (-1);
	return (0);
}

/* A journal's drills into the catalog.  A drill known already (same
 * time and snapshot) stays. */
#define DRILL_IMPORT							\
	"INSERT INTO drill(time_ns, dataset_id, snapshot_id, sid, mode,"	\
	" sample, files, bytes, failures, seconds, check_seconds,"	\
	" estimate_seconds, rto_seconds, rpo_seconds, rpo_age_seconds,"	\
	" verdict, source, in_repo)"					\
	" SELECT j.time_ns, d.id, s.id, j.sid, j.mode, j.sample, j.files," \
	" j.bytes, j.failures, j.seconds, j.check_seconds,"		\
	" j.estimate_seconds, j.rto_seconds, j.rpo_seconds,"		\
	" j.rpo_age_seconds, j.verdict,"				\
	" CASE WHEN typeof(j.source) = 'text' THEN j.source END, 1"	\
	" FROM " JOURNAL_SCHEMA ".drill j JOIN dataset d ON d.name = j.dataset" \
	" LEFT JOIN snapshot s ON s.sid = j.sid"			\
	" WHERE typeof(j.time_ns) = 'integer' AND length(j.sid) = 32"	\
	" AND j.mode IN ('restore', 'no-write')"			\
	" AND j.sample > 0 AND j.sample <= 100"				\
	" AND j.verdict IN ('pass', 'fail', 'missed-objective')"	\
	" AND typeof(j.files) = 'integer' AND typeof(j.bytes) = 'integer'" \
	" AND typeof(j.failures) = 'integer'"				\
	" AND typeof(j.seconds) IN ('real', 'integer')"			\
	" AND typeof(j.check_seconds) IN ('real', 'integer')"		\
	" AND NOT EXISTS (SELECT 1 FROM drill x WHERE x.time_ns = j.time_ns" \
	" AND x.sid = j.sid)"						\
	" ORDER BY j.time_ns"

/*
 * The rows, checked as they are copied: values the catalog's CHECKs would
 * refuse are left out rather than fail the whole record.
 */
static const struct {
	int counts;		/* its changes are rows added */
	const char *sql;
	int authority;		/* only from a record the authority signed */
} import_sql[] = {
	/* The newest coffer.conf generation its writer had seen: a floor
	 * for this host's (a catalog rebuilt, or new, learns that a
	 * coffer.conf put back is older than the repository's). */
	{ 0, "INSERT INTO state(name, value) SELECT 'conf_generation',"
	" value FROM " JOURNAL_SCHEMA ".meta WHERE key = 'conf_generation'"
	" AND typeof(value) = 'integer' AND value > 0"
	" ON CONFLICT(name) DO UPDATE SET value = max(value, excluded.value)",
	0 },
	{ 0, "INSERT INTO dataset(name) SELECT DISTINCT dataset FROM "
	JOURNAL_SCHEMA ".drill WHERE typeof(dataset) = 'text'"
	" AND length(dataset) > 0 ON CONFLICT(name) DO NOTHING", 0 },
	/* Drills and verifies are the full key's: a write-only key signs
	 * journal records too, and must not report a recovery tested. */
	{ 1, DRILL_IMPORT, 1 },
	/* A failed run is listed with its place in its chain: its parent
	 * must be known (a failed full needs none). */
	{ 0, "INSERT INTO dataset(name) SELECT DISTINCT dataset FROM "
	JOURNAL_SCHEMA ".failed WHERE typeof(dataset) = 'text'"
	" AND length(dataset) > 0 ON CONFLICT(name) DO NOTHING", 0 },
	{ 1, "INSERT INTO snapshot(sid, dataset_id, level, parent_id,"
	" full_id, depth, state, started_ns, finished_ns, host, source,"
	" record_pack)"
	" SELECT f.sid, d.id, f.level, p.id, p.full_id,"
	" coalesce(p.depth + 1, 0), 2, f.started_ns, f.finished_ns, f.host,"
	" f.source, ?1"
	" FROM " JOURNAL_SCHEMA ".failed f JOIN dataset d ON d.name = f.dataset"
	" LEFT JOIN snapshot p ON p.sid = f.parent_sid AND p.state = 1"
	" WHERE length(f.sid) = 32 AND f.level IN (0, 1, 2)"
	" AND (f.level = 0) = (p.id IS NULL)"
	" AND typeof(f.started_ns) = 'integer'"
	" AND NOT EXISTS (SELECT 1 FROM snapshot x WHERE x.sid = f.sid)"
	" AND NOT EXISTS (SELECT 1 FROM forgotten x WHERE x.sid = f.sid)", 0 },
	/* Forgotten snapshots: remembered, then gone (catalog_forget_apply
	 * deletes them, children first, after the import). */
	/* Only those the authority signed in the pack's view (the
	 * engine notes them in temp.forget_ok): a write-only key signs
	 * journal records too, and must not forget for the full key. */
	{ 1, "INSERT INTO forgotten(sid, time_ns, in_repo)"
	" SELECT sid, time_ns, 1 FROM " JOURNAL_SCHEMA ".forgotten"
	" WHERE length(sid) = 32 AND typeof(time_ns) = 'integer'"
	" AND sid IN (SELECT sid FROM temp.forget_ok)"
	" ON CONFLICT(sid) DO NOTHING", 0 },
	/* Bundles exported and imported, and what an export carried: a
	 * bundle known already (same target and number) stays as it is. */
	{ 1, "INSERT INTO bundle(direction, target, seq, level, base_seq,"
	" manifest, name, size, packs, snapshots, created_ns, in_repo)"
	" SELECT direction, target, seq, level, base_seq, manifest, name,"
	" size, packs, snapshots, created_ns, 1 FROM " JOURNAL_SCHEMA ".bundle"
	" WHERE direction IN ('export', 'import') AND typeof(target) = 'text'"
	" AND length(target) BETWEEN 1 AND 64 AND typeof(seq) = 'integer'"
	" AND seq > 0 AND level IN (0, 1, 2) AND typeof(base_seq) = 'integer'"
	" AND base_seq >= 0 AND base_seq < seq AND (level = 0) = (base_seq = 0)"
	" AND typeof(manifest) = 'blob' AND length(manifest) = 32"
	" AND typeof(name) = 'text' AND typeof(size) = 'integer'"
	" AND typeof(packs) = 'integer' AND typeof(snapshots) = 'text'"
	" AND typeof(created_ns) = 'integer'"
	" ON CONFLICT(direction, target, seq) DO NOTHING", 0 },
	{ 0, "INSERT OR IGNORE INTO bundle_pack(bundle_id, pack)"
	" SELECT b.id, j.pack FROM " JOURNAL_SCHEMA ".bundle_pack j"
	" JOIN bundle b ON b.direction = j.direction AND b.target = j.target"
	" AND b.seq = j.seq WHERE typeof(j.pack) = 'text'"
	" AND length(j.pack) = 32", 0 },
	/* Runs of coffer run, named by rid; a run known already keeps its
	 * actions, so they are added only with their run. */
	{ 1, "INSERT INTO run(rid, time_ns, wall_ns, seconds, host, user,"
	" policy, status, in_repo)"
	" SELECT rid, time_ns, wall_ns, seconds,"
	" CASE WHEN typeof(host) = 'text' THEN host END,"
	" CASE WHEN typeof(user) = 'text' THEN user END,"
	" CASE WHEN typeof(policy) = 'text' THEN policy END, status, 1"
	" FROM " JOURNAL_SCHEMA ".run WHERE length(rid) = 32"
	" AND typeof(time_ns) = 'integer' AND typeof(wall_ns) = 'integer'"
	" AND typeof(seconds) IN ('real', 'integer')"
	" AND typeof(status) = 'integer'"
	" ON CONFLICT(rid) DO NOTHING", 0 },
	{ 0, "INSERT OR IGNORE INTO run_action(run_id, seq, kind, subject,"
	" level, slot_ns, status, done, seconds, detail)"
	" SELECT r.id, j.seq, j.kind, j.subject,"
	" CASE WHEN typeof(j.level) = 'text' THEN j.level END,"
	" CASE WHEN typeof(j.slot_ns) = 'integer' THEN j.slot_ns END,"
	" j.status, j.done, j.seconds,"
	" CASE WHEN typeof(j.detail) = 'text' THEN j.detail END"
	" FROM " JOURNAL_SCHEMA ".run_action j JOIN run r ON r.rid = j.rid"
	" WHERE typeof(j.seq) = 'integer'"
	" AND j.kind IN ('backup', 'export', 'forget', 'prune', 'drill',"
	" 'verify')"
	" AND typeof(j.subject) = 'text' AND typeof(j.status) = 'integer'"
	" AND j.done IN (0, 1) AND typeof(j.seconds) IN ('real', 'integer')",
	0 },
	/* Which key unlocked a run that wrote, and when: a use known
	 * already (same key and time) is not added twice. */
	{ 1, "INSERT INTO key_use(key, time_ns, host, in_repo)"
	" SELECT key, time_ns, CASE WHEN typeof(host) = 'text' THEN host END,"
	" 1 FROM " JOURNAL_SCHEMA ".key_use WHERE typeof(key) = 'text'"
	" AND ((length(key) = 16 AND key NOT GLOB '*[^0-9a-f]*')"
	" OR key IN ('key-file:full', 'key-file:write-only'))"
	" AND typeof(time_ns) = 'integer'"
	" ON CONFLICT(key, time_ns) DO UPDATE SET in_repo = 1"
	" WHERE in_repo = 0", 0 },
	/* Verify runs: a run known already (same time and mode) is
	 * marked as in the repository, not added twice. */
	{ 1, "INSERT INTO verify(time_ns, host, mode, slice_n, slice_m,"
	" complete, packs, packs_read, bytes_read, damage, seconds, verdict,"
	" in_repo)"
	" SELECT time_ns, CASE WHEN typeof(host) = 'text' THEN host END,"
	" mode, slice_n, slice_m, complete, packs, packs_read, bytes_read,"
	" damage, seconds, verdict, 1 FROM " JOURNAL_SCHEMA ".verify"
	" WHERE typeof(time_ns) = 'integer' AND typeof(mode) = 'text'"
	" AND length(mode) BETWEEN 1 AND 31"
	" AND typeof(slice_n) = 'integer' AND typeof(slice_m) = 'integer'"
	" AND slice_n BETWEEN 0 AND slice_m AND complete IN (0, 1)"
	" AND typeof(packs) = 'integer' AND typeof(packs_read) = 'integer'"
	" AND typeof(bytes_read) = 'integer' AND typeof(damage) = 'integer'"
	" AND typeof(seconds) IN ('real', 'integer')"
	" AND verdict IN ('pass', 'fail')"
	" ON CONFLICT(time_ns, mode) DO UPDATE SET in_repo = 1"
	" WHERE in_repo = 0", 1 },
};

int
catalog_journal_known(const uint8_t *img, size_t len)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	unsigned char *copy;
	const char *fmt;
	int format = 0, rc = -1;

	if (len < 512)
		return (0);
	if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK || (copy = sqlite3_malloc64(len)) == NULL) {
		log_error("cannot read a journal record: out of memory");
		goto out;
	}
	memcpy(copy, img, len);
	if (sqlite3_deserialize(db, "main", copy, (sqlite3_int64)len,
	    (sqlite3_int64)len, SQLITE_DESERIALIZE_FREEONCLOSE |
	    SQLITE_DESERIALIZE_READONLY) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key ="
	    " 'format'", -1, &st, NULL) != SQLITE_OK) {
		rc = 0;
		goto out;
	}
	if (sqlite3_step(st) == SQLITE_ROW &&
	    (fmt = (const char *)sqlite3_column_text(st, 0)) != NULL &&
	    strspn(fmt, "0123456789") == strlen(fmt))
		format = atoi(fmt);
	rc = format == JOURNAL_FORMAT;
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	return (rc);
}

/*
 * Journal image img as JOURNAL_SCHEMA, which the caller attached (and
 * detaches, also on failure); its format into *format, 0 when it is not
 * an image or has no format row.  0, or -1 (reported).
 */
static int
attach_image(struct catalog *c, const uint8_t *img, size_t len, int *format)
{
	sqlite3_stmt *st;
	unsigned char *copy;
	const char *v;

	*format = 0;
	if ((copy = sqlite3_malloc64(len)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	memcpy(copy, img, len);
	/* On failure sqlite3_deserialize frees copy (FREEONCLOSE). */
	if (sqlite3_deserialize(c->db, JOURNAL_SCHEMA, copy,
	    (sqlite3_int64)len, (sqlite3_int64)len,
	    SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY) !=
	    SQLITE_OK)
		return (0);
	if ((st = cat_prepare(c, "SELECT value FROM " JOURNAL_SCHEMA ".meta"
	    " WHERE key = 'format'", "read a journal record")) == NULL)
		return (-1);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    (v = (const char *)sqlite3_column_text(st, 0)) != NULL &&
	    *v != '\0' && strlen(v) < 8 && strspn(v, "0123456789") ==
	    strlen(v))
		*format = atoi(v);
	sqlite3_finalize(st);
	return (0);
}

static int
forget_ok_create(struct catalog *c)
{
	return (cat_exec(c, "CREATE TEMP TABLE IF NOT EXISTS forget_ok"
	    " (sid TEXT PRIMARY KEY) WITHOUT ROWID", "note signed forgets"));
}

int
catalog_forget_ok_add(struct catalog *c, const char *sid)
{
	if (forget_ok_create(c))
		return (-1);
	return (cat_run(c, "INSERT OR IGNORE INTO temp.forget_ok VALUES (?1)",
	    "note signed forgets", CAT_VALS(CAT_TEXT(sid)), NULL, NULL));
}

/*
 * Rows of the attached record that count only with the authority's
 * signature and lack it (a write-only key signs journal records too, and
 * a forged one may hold anything): said, and left out by the import.
 */
static int
unsigned_rows(struct catalog *c, const char *sql, const char *what,
    const char *pack)
{
	int64_t n = 0;

	if (cat_run(c, sql, "read a journal record", NULL, 0, cat_row_int64,
	    &n) < 0)
		return (-1);
	if (n > 0)
		log_warn("pack '%s': %lld %s%s not signed by a full key: left "
		    "out", pack, (long long)n, what, n == 1 ? "" : "s");
	return (0);
}

int
catalog_journal_import(struct catalog *c, const uint8_t *img, size_t len,
    const char *pack, int authority, size_t *added)
{
	sqlite3_stmt *st = NULL;
	size_t i, nsql = sizeof(import_sql) / sizeof(import_sql[0]);
	int format, ret = -1;

	*added = 0;
	if (len < 512) {
		log_error("journal record: bad image size %zu", len);
		return (-1);
	}
	if (cat_exec(c, "ATTACH ':memory:' AS " JOURNAL_SCHEMA,
	    "read a journal record"))
		return (-1);
	if (attach_image(c, img, len, &format))
		goto out;
	if (format != JOURNAL_FORMAT) {
		log_error("pack '%s': journal record has format %d; this "
		    "coffer reads format %d", pack, format, JOURNAL_FORMAT);
		goto out;
	}
	if (forget_ok_create(c) || unsigned_rows(c, "SELECT count(*) FROM "
	    JOURNAL_SCHEMA ".forgotten WHERE sid NOT IN"
	    " (SELECT sid FROM temp.forget_ok)", "forgotten snapshot", pack) ||
	    (!authority && unsigned_rows(c, "SELECT (SELECT count(*) FROM "
	    JOURNAL_SCHEMA ".drill) + (SELECT count(*) FROM " JOURNAL_SCHEMA
	    ".verify)", "drill or verify result", pack)))
		goto out;
	/* Deferred: IMMEDIATE would lock the read-only image too. */
	if (cat_exec(c, "BEGIN", "import a journal record"))
		goto out;
	for (i = 0; i < nsql; i++) {
		if (import_sql[i].authority && !authority)
			continue;
		if ((st = cat_prepare(c, import_sql[i].sql,
		    "import a journal record")) == NULL)
			goto rollback;
		cat_bind_text(st, 1, pack);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_error("cannot import a journal record: %s",
			    sqlite3_errmsg(c->db));
			goto rollback;
		}
		if (import_sql[i].counts)
			*added += (size_t)sqlite3_changes(c->db);
		sqlite3_finalize(st);
		st = NULL;
	}
	if (cat_exec(c, "COMMIT", "import a journal record"))
		goto rollback;
	ret = 0;
	goto out;
rollback:
	catalog_rollback(c);
out:
	sqlite3_finalize(st);
	(void)cat_exec(c, "DETACH " JOURNAL_SCHEMA, "close a journal record");
	return (ret);
}

/*
 * The cover: what the readable journal records hold, by the keys that
 * import uses to tell a row known (doc/format.md, "Journal record"), in
 * temporary tables of this connection.
 */
static const char cover_schema[] =
	"CREATE TEMP TABLE IF NOT EXISTS jc_drill (time_ns, sid);\n"
	"CREATE TEMP TABLE IF NOT EXISTS jc_failed (sid);\n"
	"CREATE TEMP TABLE IF NOT EXISTS jc_forgotten (sid);\n"
	"CREATE TEMP TABLE IF NOT EXISTS jc_bundle (direction, target, seq);\n"
	"CREATE TEMP TABLE IF NOT EXISTS jc_run (rid);\n"
	"CREATE TEMP TABLE IF NOT EXISTS jc_key_use (key, time_ns);\n"
	"CREATE TEMP TABLE IF NOT EXISTS jc_verify (time_ns, mode);\n";

static const char *const cover_sql[] = {
	"INSERT INTO temp.jc_drill SELECT time_ns, sid FROM "
	    JOURNAL_SCHEMA ".drill",
	"INSERT INTO temp.jc_failed SELECT sid FROM "
	    JOURNAL_SCHEMA ".failed",
	"INSERT INTO temp.jc_forgotten SELECT sid FROM "
	    JOURNAL_SCHEMA ".forgotten",
	"INSERT INTO temp.jc_bundle SELECT direction, target, seq FROM "
	    JOURNAL_SCHEMA ".bundle",
	"INSERT INTO temp.jc_run SELECT rid FROM " JOURNAL_SCHEMA ".run",
	"INSERT INTO temp.jc_key_use SELECT key, time_ns FROM "
	    JOURNAL_SCHEMA ".key_use",
	"INSERT INTO temp.jc_verify SELECT time_ns, mode FROM "
	    JOURNAL_SCHEMA ".verify",
};

int
catalog_journal_cover(struct catalog *c, const uint8_t *img, size_t len)
{
	size_t i;
	int format, ret = -1;

	if (cat_exec(c, cover_schema, "note a journal record"))
		return (-1);
	if (len < 512 || catalog_journal_known(img, len) != 1)
		return (0);	/* nothing this coffer would import */
	if (cat_exec(c, "ATTACH ':memory:' AS " JOURNAL_SCHEMA,
	    "read a journal record"))
		return (-1);
	if (attach_image(c, img, len, &format))
		goto out;
	for (i = 0; i < sizeof(cover_sql) / sizeof(cover_sql[0]); i++)
		if (cat_exec(c, cover_sql[i], "read a journal record"))
			goto out;
	ret = 0;
out:
	(void)cat_exec(c, "DETACH " JOURNAL_SCHEMA, "close a journal record");
	return (ret);
}

#define AT(t) "strftime('%Y-%m-%dT%H:%M:%SZ', " t " / 1000000000," \
	" 'unixepoch')"

/* What the repository held (in_repo) that no record of the cover holds. */
static const struct {
	const char *kind;
	const char *sql;
} lost_sql[] = {
	{ "drill", "SELECT dr.time_ns, 'of snapshot ' || substr(dr.sid, 1, 12)"
	    " || ' of ''' || d.name || ''' at ' || " AT("dr.time_ns")
	    " FROM drill dr"
	    " JOIN dataset d ON d.id = dr.dataset_id WHERE dr.in_repo"
	    " AND NOT EXISTS (SELECT 1 FROM temp.jc_drill j"
	    " WHERE j.time_ns = dr.time_ns AND j.sid = dr.sid)"
	    " ORDER BY dr.time_ns" },
	{ "run", "SELECT time_ns, rid || coalesce(' of ''' || policy || '''',"
	    " '') || ' at ' || " AT("time_ns") " FROM run WHERE in_repo AND"
	    " rid NOT IN"
	    " (SELECT rid FROM temp.jc_run) ORDER BY time_ns" },
	{ "failed snapshot", "SELECT s.started_ns, substr(s.sid, 1, 12) ||"
	    " ' of ''' || d.name || '''' FROM snapshot s"
	    " JOIN dataset d ON d.id = s.dataset_id WHERE s.state = 2"
	    " AND s.record_pack IS NOT NULL AND s.sid NOT IN"
	    " (SELECT sid FROM temp.jc_failed) ORDER BY s.started_ns" },
	{ "forgotten snapshot", "SELECT time_ns, substr(sid, 1, 12) ||"
	    " ' (a rebuild brings it back)' FROM forgotten WHERE in_repo"
	    " AND sid NOT IN (SELECT sid FROM temp.jc_forgotten)"
	    " ORDER BY time_ns" },
	{ "bundle", "SELECT created_ns, direction || ' ' || target || ' #' ||"
	    " seq FROM bundle b WHERE in_repo AND NOT EXISTS (SELECT 1 FROM"
	    " temp.jc_bundle j WHERE j.direction = b.direction AND"
	    " j.target = b.target AND j.seq = b.seq) ORDER BY created_ns" },
	{ "key use", "SELECT time_ns, key || ' at ' || " AT("time_ns")
	    " FROM key_use k WHERE in_repo AND"
	    " NOT EXISTS (SELECT 1 FROM temp.jc_key_use j WHERE j.key = k.key"
	    " AND j.time_ns = k.time_ns) ORDER BY time_ns" },
	{ "verify run", "SELECT time_ns, mode || ' at ' || " AT("time_ns")
	    " FROM verify v WHERE in_repo AND"
	    " NOT EXISTS (SELECT 1 FROM temp.jc_verify j"
	    " WHERE j.time_ns = v.time_ns AND j.mode = v.mode)"
	    " ORDER BY time_ns" },
};

int
catalog_journal_lost(struct catalog *c, catalog_lost_fn *fn, void *arg)
{
	sqlite3_stmt *st;
	size_t i;
	int rc, ret = 0;

	if (cat_exec(c, cover_schema, "note a journal record"))
		return (-1);
	for (i = 0; i < sizeof(lost_sql) / sizeof(lost_sql[0]) && !ret; i++) {
		if ((st = cat_prepare(c, lost_sql[i].sql, "find what the "
		    "journal lost")) == NULL)
			return (-1);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			if ((ret = fn(arg, lost_sql[i].kind,
			    sqlite3_column_int64(st, 0),
			    (const char *)sqlite3_column_text(st, 1))) != 0)
				break;
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			log_error("cannot find what the journal lost: %s",
			    sqlite3_errmsg(c->db));
			ret = -1;
		}
		sqlite3_finalize(st);
	}
	(void)cat_exec(c, "DROP TABLE IF EXISTS temp.jc_drill;"
	    "DROP TABLE IF EXISTS temp.jc_failed;"
	    "DROP TABLE IF EXISTS temp.jc_forgotten;"
	    "DROP TABLE IF EXISTS temp.jc_bundle;"
	    "DROP TABLE IF EXISTS temp.jc_run;"
	    "DROP TABLE IF EXISTS temp.jc_key_use;"
	    "DROP TABLE IF EXISTS temp.jc_verify;", "forget the cover");
	return (ret);
}

int
catalog_journal_forgotten(struct catalog *c, int all,
    const struct catalog_journal_upto *upto,
    int (*fn)(void *, const char *sid, int64_t time_ns), void *arg)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(c, forgotten_sql, "read the journal")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, (all ? -1 : 1) * upto->forgotten);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (fn(arg, (const char *)sqlite3_column_text(st, 0),
		    sqlite3_column_int64(st, 1))) {
			sqlite3_finalize(st);
			return (-1);
		}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot read the journal: %s", sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}
