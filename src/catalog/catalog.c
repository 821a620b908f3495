#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog-int.h"
#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/progress.h"
#include "coffer/signals.h"

/* "CFCT" in PRAGMA application_id: tells a coffer catalog from any other
 * SQLite file that a mistyped --catalog might point at. */
#define CATALOG_APPLICATION_ID 0x43464354

/*
 * The schema, format 1: created in one step in a new catalog.  The
 * catalog is a cache of the repository, so it is never migrated: a
 * catalog of any other version is moved aside and rebuilt from the
 * repository (catalog_open_or_reset).  A change to this schema bumps
 * CATALOG_SCHEMA_VERSION (doc/format.md, "The version rule").
 *
 * Sizing: a catalog holds millions of entries (every file of every full,
 * plus the changes of every differential and incremental), so the hot
 * tables are built for size and for the chain resolution query:
 *
 * - path interns relative paths once for all snapshots and datasets; an
 *   entry row then carries an integer instead of the name.  Names are
 *   BLOBs so that comparisons are memcmp order: "a" < "a-b" < "a/x", a
 *   directory always before what is inside it, whatever the locale or
 *   encoding of the names.
 * - entry and content_chunk are WITHOUT ROWID: their natural key is their
 *   primary key, and clustering by it stores each row once (no separate
 *   rowid b-tree plus key index) and keeps one snapshot's rows, or one
 *   content's chunks, together on disk.
 * - entry_path (path_id, snapshot_id) serves resolution under a subtree
 *   (paths by name, then each path's few versions side by side) and the
 *   foreign key from entry to path.  entry_content, chunk_pack and
 *   content_chunk_chunk index the other foreign keys, so that deleting a
 *   content, chunk or pack (prune) does not scan the child table per row.
 * - A full's full_id is its own id: "the snapshots of the chain of F" is
 *   then simply full_id = F.
 *
 * The snapshots:
 *
 * - snapshot.tags: sorted, comma-separated ("keep,release"), or NULL; the
 *   tag "keep" marks one that retention never forgets.  Carried by the
 *   snapshot record (its meta "tags").
 * - snapshot.revision: how many times forget rewrote the snapshot's rows
 *   so that it stands on a link that stays (0 as backed up): a record of
 *   the same snapshot with a higher revision, signed by the authority,
 *   replaces the rows in place (the row id, and so every child's
 *   parent_id, stays).
 * - snapshot.parts is how many records a complete snapshot's record is
 *   in, and snapshot_part names the packs of every part but the head
 *   (whose pack is record_pack), as the head's part table does, so that
 *   an export finds them without decrypting the head (a write-only key
 *   cannot).  NULL while not known: a running snapshot, or one rebased
 *   whose new record is not written yet.
 * - chunk.damaged: found damaged or missing (verify, restore, drill); it
 *   counts as not stored, so the next backup that meets its content
 *   stores it again, and the new copy's location clears the mark.
 * - chunk_copy: the other packs that hold a chunk, as their indexes say
 *   (two hosts that stored it at once, each in a pack of its own).  A
 *   chunk has one location; when its pack goes (another host's prune,
 *   which judged by a catalog that located the chunk in the other copy)
 *   or is condemned, a copy takes its place (catalog_chunk_copies_place).
 *   Rows only for chunks stored more than once: none on one host, and a
 *   row per chunk and other host when a fleet stored one dataset at
 *   once, until a prune keeps one copy; chunk_copy_pack serves dropping
 *   a pack's.
 * - pack.journal: whether a pack holds a journal record (1), as its
 *   index says: what every bundle carries.
 * - known_snapshot: the snapshots a write-only key knows only from the
 *   packs' view records (doc/format.md, "View record"): another host's,
 *   or its own from before this catalog.  Their rows cannot be read, so
 *   they are never a base; they say where a dataset is backed up from,
 *   and what an export of everything lists.
 * - forgotten: a forgotten snapshot's id stays, so that its record, still
 *   in a pack until prune removes it, never brings it back (a rebuild,
 *   another host's sync).
 *
 * What must outlive the host besides snapshots goes to the repository in
 * journal records (journal.c), and a row is in the repository once its
 * in_repo is set (a failed snapshot once its record_pack names its journal
 * record's pack):
 *
 * - drill: one row per recovery drill.  It names its snapshot by row
 *   (NULL once the snapshot is pruned) and by sid, so the history
 *   outlives the snapshots it exercised.  Times are seconds (REAL): they
 *   are measurements, not instants.  Objectives are NULL when none was
 *   given.  source: NULL for the repository, "bundles:SOURCE" for a drill
 *   from offsite bundles alone.
 * - verify: a row per verify run: what was read (mode; slice_n/slice_m
 *   for a slice), how far (complete), what it found (damage, verdict).
 *   A rotating [verify] of a policy takes the next slice from them.
 * - bundle: what this host exported to each target (direction 'export')
 *   and imported from each ('import'): its place in the target's chain
 *   (seq, level, the bundle it builds on) and its manifest's hash, which
 *   the next bundle names.  bundle_pack lists the packs an exported
 *   bundle carried, so that the next export sends only what the target
 *   lacks.
 * - run, run_action: the runs of `coffer run` (run.c), named by rid
 *   (random, as a snapshot's sid) so that every catalog takes a run once.
 *   time_ns is the run's clock (its --now), wall_ns when it started by the
 *   host's clock; done says an action counts for its schedule.
 * - key_use: which key unlocked each run that wrote the repository, and
 *   when: a slot by its name, a key file by its kind ("key-file:full",
 *   "key-file:write-only").
 *
 * Local only:
 *
 * - verify_state: where a verify stopped by --max-duration got to, per
 *   mode; a run that completes deletes its row.  seed fixes the random
 *   choice of packs of a percentage, so that a resumed run continues it.
 *   A rebuilt catalog starts the pass again.
 * - state: conf_generation, the highest keyring generation that
 *   coffer.conf named, authenticated, here or in a journal record (which
 *   is how a rebuilt catalog learns it again): one lower later is a
 *   coffer.conf put back from an older copy (doc/design.md, "Threat
 *   model").
 */
static const char schema[] =
	"CREATE TABLE dataset (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	name TEXT NOT NULL UNIQUE\n"
	");\n"
	"CREATE TABLE snapshot (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	sid TEXT NOT NULL UNIQUE,\n"
	"	dataset_id INTEGER NOT NULL REFERENCES dataset(id),\n"
	"	level INTEGER NOT NULL CHECK (level IN (0, 1, 2)),\n"
	"	parent_id INTEGER REFERENCES snapshot(id),\n"
	"	full_id INTEGER REFERENCES snapshot(id),\n"
	"	depth INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),\n"
	"	state INTEGER NOT NULL CHECK (state IN (0, 1, 2)),\n"
	"	started_ns INTEGER NOT NULL,\n"
	"	finished_ns INTEGER,\n"
	"	host TEXT,\n"
	"	source TEXT,\n"
	"	files INTEGER NOT NULL DEFAULT 0,\n"
	"	dirs INTEGER NOT NULL DEFAULT 0,\n"
	"	others INTEGER NOT NULL DEFAULT 0,\n"
	"	deleted INTEGER NOT NULL DEFAULT 0,\n"
	"	bytes_read INTEGER NOT NULL DEFAULT 0,\n"
	"	bytes_new INTEGER NOT NULL DEFAULT 0,\n"
	"	bytes_stored INTEGER NOT NULL DEFAULT 0,\n"
	"	warnings INTEGER NOT NULL DEFAULT 0,\n"
	"	record_pack TEXT,\n"
	"	tags TEXT,\n"
	"	parts INTEGER,\n"
	"	revision INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),\n"
	"	CHECK ((level = 0) = (parent_id IS NULL))\n"
	");\n"
	"CREATE INDEX snapshot_dataset ON snapshot(dataset_id, started_ns);\n"
	"CREATE INDEX snapshot_parent ON snapshot(parent_id);\n"
	"CREATE INDEX snapshot_full ON snapshot(full_id);\n"
	"CREATE TABLE snapshot_part (\n"
	"	snapshot_id INTEGER NOT NULL\n"
	"		REFERENCES snapshot(id) ON DELETE CASCADE,\n"
	"	idx INTEGER NOT NULL,\n"
	"	pack TEXT NOT NULL,\n"
	"	rid BLOB NOT NULL,\n"
	"	PRIMARY KEY (snapshot_id, idx)\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE path (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	name BLOB NOT NULL UNIQUE\n"
	");\n"
	"CREATE TABLE pack (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	name TEXT NOT NULL UNIQUE,\n"
	"	size INTEGER NOT NULL,\n"
	"	hash BLOB NOT NULL,\n"
	"	created_ns INTEGER NOT NULL,\n"
	"	journal INTEGER NOT NULL DEFAULT 0 CHECK (journal IN (0, 1))\n"
	");\n"
	"CREATE TABLE chunk (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	cid BLOB NOT NULL UNIQUE,\n"
	"	pack_id INTEGER REFERENCES pack(id),\n"
	"	pack_offset INTEGER,\n"
	"	plain_len INTEGER,\n"
	"	stored_len INTEGER,\n"
	"	type INTEGER,\n"
	"	flags INTEGER,\n"
	"	damaged INTEGER NOT NULL DEFAULT 0\n"
	");\n"
	"CREATE INDEX chunk_pack ON chunk(pack_id) WHERE pack_id IS NOT NULL;\n"
	"CREATE TABLE chunk_copy (\n"
	"	chunk_id INTEGER NOT NULL\n"
	"		REFERENCES chunk(id) ON DELETE CASCADE,\n"
	"	pack_id INTEGER NOT NULL REFERENCES pack(id) ON DELETE CASCADE,\n"
	"	pack_offset INTEGER NOT NULL,\n"
	"	plain_len INTEGER NOT NULL,\n"
	"	stored_len INTEGER NOT NULL,\n"
	"	type INTEGER NOT NULL,\n"
	"	flags INTEGER NOT NULL,\n"
	"	PRIMARY KEY (chunk_id, pack_id)\n"
	") WITHOUT ROWID;\n"
	"CREATE INDEX chunk_copy_pack ON chunk_copy(pack_id);\n"
	"CREATE TABLE content (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	hash BLOB NOT NULL UNIQUE,\n"
	"	size INTEGER NOT NULL,\n"
	"	nchunks INTEGER NOT NULL\n"
	");\n"
	"CREATE TABLE content_chunk (\n"
	"	content_id INTEGER NOT NULL\n"
	"		REFERENCES content(id) ON DELETE CASCADE,\n"
	"	seq INTEGER NOT NULL,\n"
	"	chunk_id INTEGER NOT NULL REFERENCES chunk(id),\n"
	"	file_offset INTEGER NOT NULL,\n"
	"	len INTEGER NOT NULL,\n"
	"	PRIMARY KEY (content_id, seq)\n"
	") WITHOUT ROWID;\n"
	"CREATE INDEX content_chunk_chunk ON content_chunk(chunk_id);\n"
	"CREATE TABLE entry (\n"
	"	snapshot_id INTEGER NOT NULL\n"
	"		REFERENCES snapshot(id) ON DELETE CASCADE,\n"
	"	path_id INTEGER NOT NULL REFERENCES path(id),\n"
	"	kind INTEGER NOT NULL,\n"
	"	mode INTEGER NOT NULL DEFAULT 0,\n"
	"	uid INTEGER NOT NULL DEFAULT 0,\n"
	"	gid INTEGER NOT NULL DEFAULT 0,\n"
	"	uname TEXT,\n"
	"	gname TEXT,\n"
	"	size INTEGER NOT NULL DEFAULT 0,\n"
	"	mtime_ns INTEGER NOT NULL DEFAULT 0,\n"
	"	ctime_ns INTEGER NOT NULL DEFAULT 0,\n"
	"	ino INTEGER NOT NULL DEFAULT 0,\n"
	"	dev INTEGER NOT NULL DEFAULT 0,\n"
	"	nlink INTEGER NOT NULL DEFAULT 0,\n"
	"	rdev INTEGER NOT NULL DEFAULT 0,\n"
	"	target BLOB,\n"
	"	xattrs BLOB,\n"
	"	acl TEXT,\n"
	"	content_id INTEGER REFERENCES content(id),\n"
	"	PRIMARY KEY (snapshot_id, path_id)\n"
	") WITHOUT ROWID;\n"
	"CREATE INDEX entry_path ON entry(path_id, snapshot_id);\n"
	"CREATE INDEX entry_content ON entry(content_id)\n"
	"	WHERE content_id IS NOT NULL;\n"
	"CREATE TABLE known_snapshot (\n"
	"	sid TEXT PRIMARY KEY,\n"
	"	dataset TEXT NOT NULL,\n"
	"	level INTEGER NOT NULL,\n"
	"	parent_sid TEXT,\n"
	"	revision INTEGER NOT NULL DEFAULT 0,\n"
	"	started_ns INTEGER NOT NULL,\n"
	"	finished_ns INTEGER,\n"
	"	host TEXT,\n"
	"	source TEXT,\n"
	"	pack TEXT NOT NULL\n"
	") WITHOUT ROWID;\n"
	"CREATE INDEX known_snapshot_dataset ON known_snapshot(dataset, started_ns);\n"
	/* Packs a prune condemned (doc/design.md, "Many writers"): by
	 * name, as a mark may come before the pack it names. */
	"CREATE TABLE condemned (\n"
	"	name TEXT PRIMARY KEY,\n"
	"	time_ns INTEGER NOT NULL\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE forgotten (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	sid TEXT NOT NULL UNIQUE,\n"
	"	time_ns INTEGER NOT NULL,\n"
	"	in_repo INTEGER NOT NULL DEFAULT 0\n"
	");\n"
	"CREATE TABLE drill (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	time_ns INTEGER NOT NULL,\n"
	"	dataset_id INTEGER NOT NULL REFERENCES dataset(id),\n"
	"	snapshot_id INTEGER\n"
	"		REFERENCES snapshot(id) ON DELETE SET NULL,\n"
	"	sid TEXT NOT NULL,\n"
	"	mode TEXT NOT NULL CHECK (mode IN ('restore', 'no-write')),\n"
	"	sample REAL NOT NULL CHECK (sample > 0 AND sample <= 100),\n"
	"	files INTEGER NOT NULL,\n"
	"	bytes INTEGER NOT NULL,\n"
	"	failures INTEGER NOT NULL,\n"
	"	seconds REAL NOT NULL,\n"
	"	check_seconds REAL NOT NULL,\n"
	"	estimate_seconds REAL,\n"
	"	rto_seconds REAL,\n"
	"	rpo_seconds REAL,\n"
	"	rpo_age_seconds REAL,\n"
	"	verdict TEXT NOT NULL\n"
	"		CHECK (verdict IN ('pass', 'fail', 'missed-objective')),\n"
	"	in_repo INTEGER NOT NULL DEFAULT 0,\n"
	"	source TEXT\n"
	");\n"
	"CREATE INDEX drill_dataset ON drill(dataset_id, time_ns);\n"
	"CREATE INDEX drill_snapshot ON drill(snapshot_id)\n"
	"	WHERE snapshot_id IS NOT NULL;\n"
	"CREATE TABLE verify_state (\n"
	"	mode TEXT PRIMARY KEY,\n"
	"	seed INTEGER NOT NULL,\n"
	"	last_pack TEXT NOT NULL,\n"
	"	started_ns INTEGER NOT NULL,\n"
	"	packs INTEGER NOT NULL DEFAULT 0,\n"
	"	chunks INTEGER NOT NULL DEFAULT 0,\n"
	"	bytes INTEGER NOT NULL DEFAULT 0,\n"
	"	errors INTEGER NOT NULL DEFAULT 0\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE verify (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	time_ns INTEGER NOT NULL,\n"
	"	host TEXT,\n"
	"	mode TEXT NOT NULL,\n"
	"	slice_n INTEGER NOT NULL DEFAULT 0,\n"
	"	slice_m INTEGER NOT NULL DEFAULT 0,\n"
	"	complete INTEGER NOT NULL,\n"
	"	packs INTEGER NOT NULL,\n"
	"	packs_read INTEGER NOT NULL,\n"
	"	bytes_read INTEGER NOT NULL,\n"
	"	damage INTEGER NOT NULL,\n"
	"	seconds REAL NOT NULL,\n"
	"	verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'fail')),\n"
	"	in_repo INTEGER NOT NULL DEFAULT 0,\n"
	"	UNIQUE (time_ns, mode)\n"
	");\n"
	"CREATE INDEX verify_slice ON verify(slice_m, time_ns);\n"
	"CREATE TABLE bundle (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	direction TEXT NOT NULL CHECK (direction IN ('export', 'import')),\n"
	"	target TEXT NOT NULL,\n"
	"	seq INTEGER NOT NULL CHECK (seq > 0),\n"
	"	level INTEGER NOT NULL CHECK (level IN (0, 1, 2)),\n"
	"	base_seq INTEGER NOT NULL DEFAULT 0,\n"
	"	manifest BLOB NOT NULL,\n"
	"	name TEXT NOT NULL,\n"
	"	size INTEGER NOT NULL,\n"
	"	packs INTEGER NOT NULL,\n"
	"	snapshots TEXT NOT NULL,\n"
	"	created_ns INTEGER NOT NULL,\n"
	"	in_repo INTEGER NOT NULL DEFAULT 0,\n"
	"	UNIQUE (direction, target, seq)\n"
	");\n"
	"CREATE TABLE bundle_pack (\n"
	"	bundle_id INTEGER NOT NULL\n"
	"		REFERENCES bundle(id) ON DELETE CASCADE,\n"
	"	pack TEXT NOT NULL,\n"
	"	PRIMARY KEY (bundle_id, pack)\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE run (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	rid TEXT NOT NULL UNIQUE,\n"
	"	time_ns INTEGER NOT NULL,\n"
	"	wall_ns INTEGER NOT NULL,\n"
	"	seconds REAL NOT NULL,\n"
	"	host TEXT,\n"
	"	user TEXT,\n"
	"	policy TEXT,\n"
	"	status INTEGER NOT NULL,\n"
	"	in_repo INTEGER NOT NULL DEFAULT 0\n"
	");\n"
	"CREATE INDEX run_time ON run(time_ns);\n"
	"CREATE TABLE run_action (\n"
	"	run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,\n"
	"	seq INTEGER NOT NULL,\n"
	"	kind TEXT NOT NULL CHECK (kind IN ('backup', 'export', 'forget',\n"
	"		'prune', 'drill', 'verify')),\n"
	"	subject TEXT NOT NULL,\n"
	"	level TEXT,\n"
	"	slot_ns INTEGER,\n"
	"	status INTEGER NOT NULL,\n"
	"	done INTEGER NOT NULL,\n"
	"	seconds REAL NOT NULL,\n"
	"	detail TEXT,\n"
	"	PRIMARY KEY (run_id, seq)\n"
	") WITHOUT ROWID;\n"
	"CREATE INDEX run_action_done ON run_action(kind, subject)\n"
	"	WHERE done = 1;\n"
	"CREATE TABLE key_use (\n"
	"	id INTEGER PRIMARY KEY,\n"
	"	key TEXT NOT NULL,\n"
	"	time_ns INTEGER NOT NULL,\n"
	"	host TEXT,\n"
	"	in_repo INTEGER NOT NULL DEFAULT 0,\n"
	"	UNIQUE (key, time_ns)\n"
	");\n"
	"CREATE TABLE state (\n"
	"	name TEXT PRIMARY KEY,\n"
	"	value INTEGER NOT NULL\n"
	") WITHOUT ROWID;\n";

#define ENTRY_ROW "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
#define ENTRY_ROWS_4 ENTRY_ROW "," ENTRY_ROW "," ENTRY_ROW "," ENTRY_ROW
#if CATALOG_ENTRIES_AT_ONCE != 16
#error "ST_ENTRY_ADD_MANY holds 16 rows"
#endif

static const char *const stmt_sql[ST__COUNT] = {
	[ST_PATH_FIND] = "SELECT id FROM path WHERE name = ?1",
	[ST_PATH_CLAIM] = "INSERT INTO path(name) VALUES (?1)"
			  " ON CONFLICT(name) DO NOTHING",
	[ST_ENTRY_ADD] =
		"INSERT INTO entry(snapshot_id, path_id, kind, mode, uid, gid,"
		" uname, gname, size, mtime_ns, ctime_ns, ino, dev, nlink,"
		" rdev, target, xattrs, acl, content_id)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
		" ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
	/* CATALOG_ENTRIES_AT_ONCE (16) rows of ST_ENTRY_ADD's columns. */
	[ST_ENTRY_ADD_MANY] =
		"INSERT INTO entry(snapshot_id, path_id, kind, mode, uid, gid,"
		" uname, gname, size, mtime_ns, ctime_ns, ino, dev, nlink,"
		" rdev, target, xattrs, acl, content_id) VALUES "
		ENTRY_ROWS_4 "," ENTRY_ROWS_4 "," ENTRY_ROWS_4 ","
		ENTRY_ROWS_4,
	[ST_CHUNK_FIND] =
		/* Stored: located, not damaged, not in a pack the last sync
		 * found gone (temp.gone: lost, or pruned elsewhere), and not
		 * in a pack a prune condemned (that pack may go before this
		 * snapshot ends). */
		"SELECT ch.id, ch.pack_id IS NOT NULL AND ch.damaged = 0"
		" AND ch.pack_id NOT IN (SELECT id FROM temp.gone)"
		" AND NOT EXISTS (SELECT 1 FROM pack p JOIN condemned d"
		" ON d.name = p.name WHERE p.id = ch.pack_id)"
		" FROM chunk ch WHERE ch.cid = ?1",
	[ST_CHUNK_ADD] = "INSERT INTO chunk(cid) VALUES (?1)"
			 " ON CONFLICT(cid) DO NOTHING",
	[ST_CHUNK_LOCATE] =
		"UPDATE chunk SET pack_id = ?2, pack_offset = ?3,"
		" plain_len = ?4, stored_len = ?5, type = ?6, flags = ?7,"
		" damaged = 0 WHERE id = ?1",
	[ST_CONTENT_FIND] = "SELECT id, size FROM content WHERE hash = ?1",
	[ST_CONTENT_CLAIM] =
		"INSERT INTO content(hash, size, nchunks) VALUES (?1, ?2, ?3)"
		" ON CONFLICT(hash) DO NOTHING",
	[ST_CONTENT_CHUNK_ADD] =
		"INSERT INTO content_chunk(content_id, seq, chunk_id,"
		" file_offset, len) VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_CONTENT_CHUNKS] =
		"SELECT cc.chunk_id, ch.cid, p.name, ch.pack_offset,"
		" coalesce(ch.plain_len, cc.len), ch.stored_len, ch.type,"
		" ch.flags, cc.file_offset"
		" FROM content_chunk cc"
		" JOIN chunk ch ON ch.id = cc.chunk_id"
		" LEFT JOIN pack p ON p.id = ch.pack_id"
		" WHERE cc.content_id = ?1 ORDER BY cc.seq",
	[ST_CONTENT_CHUNKS_PAGE] =
		"SELECT cc.chunk_id, ch.cid, p.name, ch.pack_offset,"
		" coalesce(ch.plain_len, cc.len), ch.stored_len, ch.type,"
		" ch.flags, cc.file_offset, cc.seq"
		" FROM content_chunk cc"
		" JOIN chunk ch ON ch.id = cc.chunk_id"
		" LEFT JOIN pack p ON p.id = ch.pack_id"
		" WHERE cc.content_id = ?1 AND cc.seq > ?2"
		" ORDER BY cc.seq LIMIT ?3",
	[ST_CONTENT_INFO] = "SELECT hash, size FROM content WHERE id = ?1",
	[ST_CONTENT_DATA_BYTES] = "SELECT coalesce(sum(len), 0) FROM"
		" content_chunk WHERE content_id = ?1",
	[ST_SAVEPOINT] = "SAVEPOINT catalog_op",
	[ST_RELEASE] = "RELEASE catalog_op",
	[ST_ROLLBACK_TO] = "ROLLBACK TO catalog_op",
};

sqlite3_stmt *
cat_stmt(struct catalog *c, enum cat_stmt id)
{
	sqlite3_stmt *st = c->st[id];

	if (st != NULL) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		return (st);
	}
	if (sqlite3_prepare_v3(c->db, stmt_sql[id], -1,
	    SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		log_error("cannot prepare catalog statement: %s",
		    sqlite3_errmsg(c->db));
		return (NULL);
	}
	c->st[id] = st;
	return (st);
}

sqlite3_stmt *
cat_prepare(struct catalog *c, const char *sql, const char *what)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_error("cannot %s: %s", what, sqlite3_errmsg(c->db));
		return (NULL);
	}
	return (st);
}

int
cat_exec(struct catalog *c, const char *sql, const char *what)
{
	char *msg = NULL;

	if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_error("cannot %s: %s", what,
		    msg ? msg : sqlite3_errmsg(c->db));
		sqlite3_free(msg);
		return (-1);
	}
	return (0);
}

int
cat_run(struct catalog *c, const char *sql, const char *what,
    const struct cat_val *v, size_t n, cat_row_fn *row, void *arg)
{
	sqlite3_stmt *st;
	size_t i;
	int rc, ret = 0;

	if ((st = cat_prepare(c, sql, what)) == NULL)
		return (-1);
	for (i = 0; i < n; i++) {
		if (v[i].type == CAT_V_INT)
			sqlite3_bind_int64(st, (int)i + 1, v[i].i);
		else if (v[i].type == CAT_V_TEXT)
			cat_bind_text(st, (int)i + 1, v[i].p);
		else
			sqlite3_bind_blob(st, (int)i + 1, v[i].p, v[i].n,
			    SQLITE_STATIC);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (row != NULL && (ret = row(arg, st)) != 0)
			break;
	if (ret == 0 && rc != SQLITE_DONE) {
		log_error("cannot %s: %s", what, sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
cat_row_int64(void *arg, sqlite3_stmt *st)
{
	*(int64_t *)arg = sqlite3_column_int64(st, 0);
	return (1);
}

struct strings {
	char **v;
	size_t n, cap;
	const char *what;
};

static int
strings_row(void *arg, sqlite3_stmt *st)
{
	struct strings *a = arg;

	if (array_grow(&a->v, &a->cap, a->n, sizeof(*a->v), 64) ||
	    (a->v[a->n] = strdup((const char *)sqlite3_column_text(st,
	    0))) == NULL) {
		log_errno("%s", a->what);
		return (-1);
	}
	a->n++;
	return (0);
}

int
cat_strings(struct catalog *c, const char *sql, const char *what,
    const struct cat_val *v, size_t n, char ***out, size_t *nout)
{
	struct strings a = { NULL, 0, 0, what };

	*out = NULL;
	*nout = 0;
	if (cat_run(c, sql, what, v, n, strings_row, &a)) {
		names_free(a.v, a.n);
		return (-1);
	}
	*out = a.v;
	*nout = a.n;
	return (0);
}

static int
step_cached(struct catalog *c, enum cat_stmt id, const char *what)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_stmt(c, id)) == NULL)
		return (-1);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot %s: %s", what, sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}

int
cat_savepoint(struct catalog *c)
{
	return (step_cached(c, ST_SAVEPOINT, "start a catalog savepoint"));
}

int
cat_release(struct catalog *c)
{
	return (step_cached(c, ST_RELEASE, "release a catalog savepoint"));
}

void
cat_rollback_to(struct catalog *c)
{
	/* ROLLBACK TO keeps the savepoint open; RELEASE then ends it. */
	if (step_cached(c, ST_ROLLBACK_TO, "roll back a catalog savepoint"))
		return;
	(void)step_cached(c, ST_RELEASE, "release a catalog savepoint");
}

int
cat_bind_blobstr(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		return (sqlite3_bind_null(st, i));
	/* A zero-length blob with a NULL pointer would bind as NULL. */
	return (sqlite3_bind_blob(st, i, *s ? s : "", (int)strlen(s),
	    SQLITE_STATIC));
}

int
cat_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		return (sqlite3_bind_null(st, i));
	return (sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC));
}

int
cat_col_strdup(sqlite3_stmt *st, int i, char **out)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	*out = NULL;
	if (t == NULL)
		return (0);
	if ((*out = strdup((const char *)t)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	return (0);
}

int64_t
cat_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

int
cat_is_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return (0);
	return (s[n] == '\0');
}

/* One integer from a PRAGMA or query; -1 on error (reported). */
static int
query_int(struct catalog *c, const char *sql, int64_t *v)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = cat_prepare(c, sql, "read the catalog")) == NULL)
		return (-1);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		*v = 0;
	else
		log_error("cannot read catalog '%s': %s", c->path,
		    sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return (rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1);
}

/*
 * Create the schema in a new catalog, or check that the catalog is of
 * this format.  The version is read again inside the write transaction:
 * two coffer processes opening a new catalog at once must not both
 * create the schema.  A coffer catalog of another format is not
 * reported: c->other is set to its version, for the caller to rebuild.
 */
static int
schema_check(struct catalog *c)
{
	char sql[96];
	int64_t version, app, ntables;

	if (query_int(c, "PRAGMA user_version", &version))
		return (-1);
	if (version == CATALOG_SCHEMA_VERSION)
		return (0);
	if (cat_exec(c, "BEGIN IMMEDIATE", "lock the catalog"))
		return (-1);
	if (query_int(c, "PRAGMA user_version", &version) ||
	    query_int(c, "PRAGMA application_id", &app) ||
	    query_int(c, "SELECT count(*) FROM sqlite_schema", &ntables))
		goto err;
	if ((app != 0 && app != CATALOG_APPLICATION_ID) ||
	    (version == 0 && ntables != 0)) {
		log_error("'%s' is not a coffer catalog", c->path);
		c->damaged = 1;
		goto err;
	}
	if (version == CATALOG_SCHEMA_VERSION) {
		catalog_rollback(c);
		return (0);
	}
	if (version != 0) {
		c->other = version;
		goto err;
	}
	/* PRAGMA takes no parameters; the values are our integers. */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; "
	    "PRAGMA application_id = %d", CATALOG_SCHEMA_VERSION,
	    CATALOG_APPLICATION_ID);
	if (cat_exec(c, schema, "create the catalog") ||
	    cat_exec(c, sql, "create the catalog") ||
	    cat_exec(c, "COMMIT", "create the catalog"))
		goto err;
	return (0);
err:
	catalog_rollback(c);
	return (-1);
}

static char *
dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return (strdup("."));
	if (slash == path)
		return (strdup("/"));
	return (strndup(path, (size_t)(slash - path)));
}

/* SQLite's word for a file that is not, or no longer, a database. */
static int
damaged_code(int rc)
{
	return (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT);
}

/*
 * Statement journals stay in memory.  With foreign keys on, every insert
 * of a run's long transaction journals the pages it changes, so that the
 * statement alone can be undone; SQLite moves that journal to a temporary
 * file once a statement passes 64 KiB and keeps it a file until the
 * commit, and then every later insert writes and reads it back through
 * system calls.  In memory it is emptied at the end of each statement: it
 * holds one statement's pages at most.  No memory statistics: nothing
 * reads them, and keeping them takes a process-wide mutex in every
 * allocation.  Process-wide: both must be set before SQLite's first use
 * (else SQLITE_MISUSE, and the defaults stay).
 */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;

static void
sqlite_setup(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, -1);
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/*
 * Open the catalog at path; *damaged is set when it fails because the
 * file is not a coffer catalog or is corrupt (rather than, say, not
 * readable).  With other, a coffer catalog of another format is not an
 * error but its version in *other (else reported).
 */
static struct catalog *
open_catalog(const char *path, int *damaged, int64_t *other)
{
	struct catalog *c;
	struct stat sb;
	sqlite3_stmt *st;
	const char *mode;
	int fd, rc;

	if (path == NULL || *path == '\0') {
		log_error("empty catalog path");
		return (NULL);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		goto nomem;
	c->lock_fd = -1;
	c->sync_fd = -1;
	if ((c->path = strdup(path)) == NULL || (c->dir = dir_of(path)) ==
	    NULL)
		goto nomem;

	/* The catalog holds file names in the clear: keep it private. */
	if (stat(c->dir, &sb) == -1) {
		if (errno != ENOENT) {
			log_errno("cannot stat '%s'", c->dir);
			goto err;
		}
		if (fsutil_mkdir_p(c->dir, 0700))
			goto err;
	}
	/* SQLite would create the file 0644 (less umask); WAL and shm files
	 * take the database file's mode. */
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		log_errno("cannot open catalog '%s'", path);
		goto err;
	}
	close(fd);

	pthread_once(&sqlite_once, sqlite_setup);
	/*
	 * NOMUTEX: a catalog handle is used by one thread at a time (the
	 * engines' worker threads hash, seal, read packs and write files,
	 * and never call the catalog; backup's recorder takes the handle
	 * from the walk's thread and gives it back under a lock of its
	 * own), so SQLite's per-call locking of the connection is pure cost
	 * on a backup's per-file lookups.
	 */
	rc = sqlite3_open_v2(path, &c->db,
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	    NULL);
	if (rc != SQLITE_OK) {
		log_error("cannot open catalog '%s': %s", path,
		    c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		goto err;
	}
	/* Readers (list, restore) run beside a backup; a second writer
	 * waits on the flock, so busy waits stay short. */
	sqlite3_busy_timeout(c->db, 30000);
	if (cat_exec(c, "PRAGMA foreign_keys = ON", "enable foreign keys"))
		goto err;

	/* WAL: readers do not block the writer nor it them.  FULL: a commit
	 * is durable when it returns, as the durability order needs. */
	if (sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &st,
	    NULL) != SQLITE_OK) {
		/* The first read of the file: junk fails here. */
		log_error("cannot open catalog '%s': %s", path,
		    sqlite3_errmsg(c->db));
		c->damaged = damaged_code(sqlite3_errcode(c->db));
		goto err;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		c->damaged = damaged_code(sqlite3_errcode(c->db));
	mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) :
	    NULL;
	if (mode == NULL || strcmp(mode, "wal") != 0) {
		log_error("cannot open catalog '%s': %s", path,
		    rc == SQLITE_ROW ? "WAL journal mode not available" :
		    sqlite3_errmsg(c->db));
		sqlite3_finalize(st);
		goto err;
	}
	sqlite3_finalize(st);
	/*
	 * A page cache of 8 MiB: what misses it comes from the OS's page
	 * cache in microseconds, and with the backup pipeline's buffers peak
	 * memory stays under 64 MiB however large the catalog grows; a larger
	 * cache grows the peak with the catalog (bench/README.md).
	 */
	if (cat_exec(c, "PRAGMA synchronous = FULL", "configure the catalog") ||
	    catalog_set_cache(c, CATALOG_CACHE_KIB))
		goto err;
	if (schema_check(c)) {
		if (c->other != 0 && other == NULL)
			log_error("catalog '%s' has format %lld; this coffer "
			    "reads format %d", path, (long long)c->other,
			    CATALOG_SCHEMA_VERSION);
		else if (c->other == 0)
			c->damaged |= damaged_code(sqlite3_errcode(c->db));
		goto err;
	}
	/* The packs the last sync found gone (catalog_packs_gone), which
	 * a backup's lookups read, from the first. */
	if (cat_exec(c, "CREATE TEMP TABLE IF NOT EXISTS gone"
	    " (id INTEGER PRIMARY KEY)", "open the catalog"))
		goto err;
	if (cat_ckpt_attach(c))
		goto nomem;
	return (c);
nomem:
	log_error("out of memory");
err:
	if (c != NULL) {
		*damaged = c->damaged;
		if (other != NULL)
			*other = c->other;
	}
	catalog_close(c);
	return (NULL);
}

struct catalog *
catalog_open(const char *path)
{
	int damaged = 0;

	return (open_catalog(path, &damaged, NULL));
}

/* Move path (and its -wal and -shm files) to path.WHY-TIME. */
static int
move_aside(const char *path, char *aside, size_t size, const char *why)
{
	static const char *const sfx[] = { "-wal", "-shm" };
	char from[PATH_MAX], to[PATH_MAX], when[32];
	struct tm tm;
	time_t now = time(NULL);
	size_t i;

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
	if ((size_t)snprintf(aside, size, "%s.%s-%s", path, why, when) >=
	    size) {
		log_error("catalog path '%s' is too long", path);
		return (-1);
	}
	if (rename(path, aside)) {
		log_errno("cannot move catalog '%s' aside", path);
		return (-1);
	}
	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(from, sizeof(from), "%s%s", path, sfx[i]);
		snprintf(to, sizeof(to), "%s%s", aside, sfx[i]);
		if (rename(from, to) && errno != ENOENT) {
			log_errno("cannot move '%s' aside", from);
			return (-1);
		}
	}
	return (0);
}

int
catalog_replace(struct catalog *c, const char *with, char *aside,
    size_t size)
{
	static const char *const sfx[] = { "-wal", "-shm" };
	char from[PATH_MAX];
	size_t i;
	int damaged = 0;
	struct catalog *n;

	if (c->lock_fd == -1) {
		log_error("internal error: catalog_replace without the lock");
		return (-1);
	}
	/* Closed first: its WAL is folded into it and removed (the
	 * checkpoint thread's connection closed before). */
	cat_ckpt_detach(c);
	for (i = 0; i < ST__COUNT; i++) {
		sqlite3_finalize(c->st[i]);
		c->st[i] = NULL;
	}
	if (sqlite3_close(c->db) != SQLITE_OK) {
		log_error("cannot close catalog '%s': %s", c->path,
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	c->db = NULL;
	if (move_aside(c->path, aside, size, "old"))
		return (-1);
	if (rename(with, c->path)) {
		log_errno("cannot move '%s' to '%s'", with, c->path);
		return (-1);
	}
	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(from, sizeof(from), "%s%s", with, sfx[i]);
		(void)unlink(from);
	}
	if ((n = open_catalog(c->path, &damaged, NULL)) == NULL)
		return (-1);
	/* Its WAL hook points at n: c's own instead. */
	cat_ckpt_detach(n);
	c->db = n->db;
	n->db = NULL;
	catalog_close(n);
	if (cat_ckpt_attach(c)) {
		log_error("out of memory");
		return (-1);
	}
	return (0);
}

struct catalog *
catalog_open_or_reset(const char *path, char *aside, size_t size)
{
	struct catalog *c;
	char why[32];
	int64_t other = 0;
	int damaged = 0;

	aside[0] = '\0';
	/* What a damaged catalog makes SQLite say is a warning once it is
	 * moved aside: the run goes on with a rebuilt one. */
	log_hold();
	c = open_catalog(path, &damaged, &other);
	if (c != NULL || (!damaged && other == 0)) {
		log_release(0);
		return (c);
	}
	log_release(1);
	if (damaged)
		snprintf(why, sizeof(why), "damaged");
	else
		snprintf(why, sizeof(why), "v%lld", (long long)other);
	if (move_aside(path, aside, size, why))
		return (NULL);
	if (damaged)
		log_warn("catalog '%s' was damaged: moved aside to '%s' and "
		    "rebuilt from the repository", path, aside);
	else
		log_warn("catalog '%s' has format %lld, not this coffer's %d: "
		    "moved aside to '%s' and rebuilt from the repository", path,
		    (long long)other, CATALOG_SCHEMA_VERSION, aside);
	return (open_catalog(path, &damaged, NULL));
}

void
cat_known(int *score, int known)
{
	if (known && *score < 8)
		(*score)++;
	else if (!known && *score > -8)
		(*score)--;
}

int
catalog_set_cache(struct catalog *c, int kib)
{
	char sql[64];

	/* PRAGMA takes no parameters; the value is our integer. */
	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%d", kib);
	return (cat_exec(c, sql, "size the catalog's cache"));
}

void
catalog_close(struct catalog *c)
{
	size_t i;

	if (c == NULL)
		return;
	if (c->resolver != NULL)
		cat_resolver_detach(c->resolver);
	cat_ckpt_detach(c);
	for (i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(c->st[i]);
	/* close_v2: an iterator the caller forgot keeps the handle alive
	 * until it is freed, instead of failing the close. */
	if (c->db != NULL && sqlite3_close_v2(c->db) != SQLITE_OK)
		log_error("cannot close catalog '%s': %s", c->path,
		    sqlite3_errmsg(c->db));
	if (c->lock_fd != -1)
		close(c->lock_fd);
	if (c->sync_fd != -1)
		close(c->sync_fd);
	free(c->path);
	free(c->dir);
	free(c);
}

/* FNV-1a: a name for a place, not a secret nor a check. */
static uint64_t
place_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return (h);
}

char *
catalog_default_path(const char *repo_id_hex, const char *location)
{
	const char *base = getenv("XDG_STATE_HOME"), *suffix = "";
	struct passwd *pw;
	struct buf b = BUF_INIT;
	size_t n;

	n = repo_id_hex ? strlen(repo_id_hex) : 0;
	if (n == 0 || strspn(repo_id_hex, "0123456789abcdef") != n) {
		log_error("bad repository id '%s'",
		    repo_id_hex ? repo_id_hex : "");
		return (NULL);
	}
	/* The XDG spec says a relative XDG_STATE_HOME is to be ignored. */
	if (base == NULL || base[0] != '/') {
		base = getenv("HOME");
		if (base == NULL || base[0] != '/') {
			pw = getpwuid(getuid());
			base = pw ? pw->pw_dir : NULL;
		}
		if (base == NULL || base[0] != '/') {
			log_error("cannot find the catalog: no home directory "
			    "(set XDG_STATE_HOME or use --catalog)");
			return (NULL);
		}
		suffix = "/.local/state";
	}
	n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	if (n > INT_MAX || buf_printf(&b, "%.*s%s/coffer/%s-%016llx/catalog.db",
	    (int)n, base, suffix, repo_id_hex,
	    (unsigned long long)place_hash(location))) {
		buf_release(&b);
		return (NULL);
	}
	/* The data is NUL-terminated; it passes to the caller. */
	return ((char *)b.data);
}

/* Who holds the catalog's writer lock, in the lock file, for the message
 * of whoever finds it busy: best effort. */
static void
holder_write(int fd)
{
	char line[128], when[32];
	int n;

	fmt_time(when, sizeof(when), now_realtime_ns());
	n = snprintf(line, sizeof(line), "pid %ld since %s\n", (long)getpid(),
	    when);
	if (ftruncate(fd, 0) == 0 && n > 0)
		(void)pwrite(fd, line, (size_t)n, 0);
}

static void
holder_read(int fd, char *out, size_t outsz)
{
	ssize_t n;
	size_t i;

	n = pread(fd, out, outsz - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	/* Written by anyone who can write the state directory: one line
	 * of plain characters, or nothing. */
	for (i = 0; out[i] != '\0'; i++)
		if ((unsigned char)out[i] < ' ' || (unsigned char)out[i] > '~') {
			out[0] = '\0';
			break;
		}
}

int
catalog_lock(struct catalog *c, double wait)
{
	char *name, holder[128];
	int fd;

	if (c->lock_fd != -1)
		return (0);
	if ((name = fsutil_join(c->dir, "lock")) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if ((fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		log_errno("cannot open lock file '%s'", name);
		goto err0;
	}
	/* flock, not fcntl locks: it belongs to this open file, so closing
	 * some other descriptor of the file (SQLite does) cannot drop it. */
	switch (fsutil_flock_wait(fd, wait)) {
	case 0:
		break;
	case 1:
		holder_read(fd, holder, sizeof(holder));
		log_error("catalog '%s' is locked by another coffer process%s%s%s",
		    c->dir, holder[0] ? " (" : "", holder, holder[0] ? ")" : "");
		goto err1;
	case 2:
		log_warn("catalog '%s': stopped waiting for the lock (%s)",
		    c->dir, signals_name(signals_caught()));
		goto err1;
	default:
		log_errno("cannot lock '%s'", name);
		goto err1;
	}
	c->lock_fd = fd;
	holder_write(fd);
	free(name);
	return (0);
err1:
	close(fd);
err0:
	free(name);
	return (-1);
}

int
catalog_lock_try(struct catalog *c)
{
	char *name;
	int fd;

	if (c->lock_fd != -1)
		return (2);
	if ((name = fsutil_join(c->dir, "lock")) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if ((fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		log_errno("cannot open lock file '%s'", name);
		free(name);
		return (-1);
	}
	free(name);
	while (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		if (errno == EINTR)
			continue;
		close(fd);
		return (errno == EWOULDBLOCK ? 0 : -1);
	}
	c->lock_fd = fd;
	holder_write(fd);
	return (1);
}

/* flock the file name beside the catalog with op; an fd or -1. */
static int
flock_beside(struct catalog *c, const char *name, int op)
{
	char *path;
	int fd;

	if ((path = fsutil_join(c->dir, name)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		log_errno("cannot open lock file '%s'", path);
		free(path);
		return (-1);
	}
	free(path);
	while (flock(fd, op) == -1) {
		if (errno == EINTR)
			continue;
		close(fd);
		return (-1);
	}
	return (fd);
}

int
catalog_sync_begin(struct catalog *c)
{
	if (c->sync_fd == -1 &&
	    (c->sync_fd = flock_beside(c, "sync", LOCK_EX)) == -1)
		return (-1);
	return (0);
}

void
catalog_sync_end(struct catalog *c)
{
	if (c->sync_fd != -1) {
		close(c->sync_fd);
		c->sync_fd = -1;
	}
}

void
catalog_unlock(struct catalog *c)
{
	if (c->lock_fd != -1) {
		close(c->lock_fd);
		c->lock_fd = -1;
	}
}

int
catalog_begin(struct catalog *c)
{
	/* IMMEDIATE takes the write lock now: a deferred transaction that
	 * reads first could fail to upgrade with SQLITE_BUSY midway. */
	return (cat_exec(c, "BEGIN IMMEDIATE",
	    "begin a catalog transaction"));
}

int
catalog_commit(struct catalog *c)
{
	return (cat_exec(c, "COMMIT", "commit the catalog transaction"));
}

int
catalog_set_durable(struct catalog *c, int durable)
{
	return (cat_exec(c, durable ? "PRAGMA synchronous = FULL" :
	    "PRAGMA synchronous = NORMAL", "configure the catalog"));
}

/*
 * Unchecked, a one-row insert is not a statement that may fail after
 * changing pages: SQLite writes no statement journal for it, and looks up
 * no parent row (a new file's entry and content chunks have five).
 */
int
catalog_set_checked(struct catalog *c, int checked)
{
	return (cat_exec(c, checked ? "PRAGMA foreign_keys = ON" :
	    "PRAGMA foreign_keys = OFF", "configure the catalog"));
}

void
catalog_rollback(struct catalog *c)
{
	if (c == NULL || c->db == NULL || sqlite3_get_autocommit(c->db))
		return;
	(void)cat_exec(c, "ROLLBACK", "roll back the catalog transaction");
}

int
catalog_dataset_id(struct catalog *c, const char *name, int create,
    int64_t *id)
{
	sqlite3_stmt *st;
	int rc, ret = -1;

	if (name == NULL || *name == '\0') {
		log_error("empty dataset name");
		return (-1);
	}
	if ((st = cat_prepare(c, "SELECT id FROM dataset WHERE name = ?1",
	    "look up a dataset")) == NULL)
		return (-1);
	cat_bind_text(st, 1, name);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		ret = 1;
		goto out;
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot look up dataset '%s': %s", name,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	if (!create) {
		ret = 0;
		goto out;
	}
	sqlite3_finalize(st);
	if ((st = cat_prepare(c, "INSERT INTO dataset(name) VALUES (?1)",
	    "add a dataset")) == NULL)
		return (-1);
	cat_bind_text(st, 1, name);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot add dataset '%s': %s", name,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	*id = sqlite3_last_insert_rowid(c->db);
	ret = 1;
out:
	sqlite3_finalize(st);
	return (ret);
}

static const char *const level_names[] = { "full", "differential",
	"incremental" };
static const char *const state_names[] = { "running", "complete", "failed" };

const char *
catalog_level_name(int level)
{
	return (level >= 0 && level <= LEVEL_INCREMENTAL ? level_names[level] :
	    "unknown");
}

int
catalog_level_parse(const char *s)
{
	int i;

	if (s == NULL)
		return (-1);
	for (i = 0; i <= LEVEL_INCREMENTAL; i++)
		if (strcmp(s, level_names[i]) == 0)
			return (i);
	/* The short forms people type. */
	if (strcmp(s, "diff") == 0)
		return (LEVEL_DIFFERENTIAL);
	if (strcmp(s, "incr") == 0)
		return (LEVEL_INCREMENTAL);
	return (-1);
}

const char *
catalog_state_name(int state)
{
	return (state >= 0 && state <= SNAP_FAILED ? state_names[state] :
	    "unknown");
}
