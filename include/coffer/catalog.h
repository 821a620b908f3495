#ifndef COFFER_CATALOG_H
#define COFFER_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/entry.h"

/*
 * The catalog: a host-local SQLite database of datasets, snapshots,
 * entries, contents, chunks and packs (doc/design.md).  The only SQLite
 * user.
 * Derived data: it can be rebuilt from the packs' snapshot records.
 * All functions report their own errors and return 0 / -1 unless noted.
 *
 * This header is what the backup and restore path uses: the handle,
 * datasets, snapshots, chunks, contents, entries and their views.  The
 * rest has a header each: catalog-record.h (snapshot records),
 * catalog-journal.h (journal records), catalog-history.h (verify passes,
 * drills, runs, key uses, bundles), catalog-prune.h (forget, prune) and
 * catalog-known.h (what a write-only key knows).
 */
#define CATALOG_SCHEMA_VERSION 3	/* the catalog's format (its user_version) */

struct catalog;

/*
 * Open (creating the file, its directory and its schema if needed).  A
 * catalog of another format is refused ("has format N; this coffer reads
 * format 1").  WAL, synchronous=FULL, foreign_keys=ON.  A handle is used
 * by one thread at a time (SQLite's own locking of it is off).
 */
struct catalog *catalog_open(const char *path);
/*
 * The same, but a file that is not a coffer catalog or is corrupt is moved
 * aside to PATH.damaged-TIME, and a coffer catalog of another format (the
 * catalog is a cache, never migrated) to PATH.vN-TIME (kept, never
 * deleted; its name in aside, else ""), with a warning that it is rebuilt
 * from the repository, and a new, empty catalog opened in its place for
 * the caller to fill.
 */
struct catalog *catalog_open_or_reset(const char *path, char *aside,
    size_t size);
/*
 * Put the catalog file with in c's place (a rebuild), the old one moved
 * aside to PATH.old-TIME (its name in aside); c goes on with the new one.
 * With c's writer lock held, so that no other process sees the swap.
 */
int catalog_replace(struct catalog *c, const char *with, char *aside,
    size_t size);
void catalog_close(struct catalog *c);

/*
 * Memory for SQLite's page cache, which is also what a query's sort holds
 * before it spills to a temporary file: CATALOG_CACHE_KIB from open.
 * Both fill up to it as the catalog grows; a command that holds large
 * buffers of its own (restore's windows) asks for less.
 */
#define CATALOG_CACHE_KIB 8192
int catalog_set_cache(struct catalog *c, int kib);

/*
 * Default path: $XDG_STATE_HOME/coffer/<repo id hex>-<place>/catalog.db
 * with XDG_STATE_HOME defaulting to $HOME/.local/state, and <place> 16
 * hex digits that name the repository's location (its real path): a
 * catalog belongs to one repository at one place, so two copies of one
 * repository (imported from two offsite targets) do not share one.
 * malloc'd.
 */
char *catalog_default_path(const char *repo_id_hex, const char *location);

/*
 * The writer lock: flock on "lock" beside the database, waiting at most
 * wait seconds (< 0: for ever; 0: fail at once, "catalog is locked by
 * another coffer process").
 * Released by catalog_close.
 */
int catalog_lock(struct catalog *c, double wait);
/* Take the writer lock if it is free: 1 taken, 2 held by this handle
 * already, 0 held by another process (not reported), -1 error.
 * catalog_unlock gives it back before the catalog is closed. */
int catalog_lock_try(struct catalog *c);
void catalog_unlock(struct catalog *c);
/*
 * The sync lock ("sync" beside the database), held while the catalog is
 * brought up to date: a command waits for a sync in progress (a rebuild
 * takes a while) rather than read a catalog half-made.  Short: it is not
 * held across a backup.  begin blocks until it is free.
 */
int catalog_sync_begin(struct catalog *c);
void catalog_sync_end(struct catalog *c);

int catalog_begin(struct catalog *c);
int catalog_commit(struct catalog *c);
/* Roll back an open transaction; harmless when none is open. */
void catalog_rollback(struct catalog *c);
/*
 * Whether the commits of the transactions begun from now on are durable
 * when they return (the default), or may be lost with power (never torn:
 * the WAL stays consistent), which spares each an fsync.  Only for
 * commits that a crash may undo anyway, as a running backup's: the
 * snapshot is found running and failed.  Outside a transaction only.
 * 0 or -1 (reported).
 */
int catalog_set_durable(struct catalog *c, int durable);
/*
 * Whether SQLite checks the foreign keys of the rows written from now on
 * (the default) or leaves that to the writer.  Only for a writer that
 * inserts rows naming rows it has just read or written itself under the
 * writer's lock, and that deletes no parent row (no cascade happens):
 * the walk of a backup.  Outside a transaction only.  0 or -1 (reported).
 */
int catalog_set_checked(struct catalog *c, int checked);

/* Dataset id by name; create it when create is set.  1 found/created,
 * 0 not found (not created), -1 error. */
int catalog_dataset_id(struct catalog *c, const char *name, int create,
    int64_t *id);

enum snapshot_level {
	LEVEL_FULL = 0,
	LEVEL_DIFFERENTIAL = 1,
	LEVEL_INCREMENTAL = 2
};
enum snapshot_state {
	SNAP_RUNNING = 0,
	SNAP_COMPLETE = 1,
	SNAP_FAILED = 2
};
const char *catalog_level_name(int level);	/* "full", ... */
int catalog_level_parse(const char *s);		/* -1 if unknown */
const char *catalog_state_name(int state);	/* "running", ... */

#define SNAPSHOT_ID_HEX 32	/* 16 random bytes, hex */

struct catalog_snapshot {
	int64_t id;			/* catalog row */
	char sid[SNAPSHOT_ID_HEX + 1];	/* the snapshot's name */
	int64_t dataset_id;
	char *dataset;			/* malloc'd */
	int level;
	int64_t parent_id;		/* 0: none (a full) */
	int64_t full_id;		/* the chain's full; itself for a full */
	char parent_sid[SNAPSHOT_ID_HEX + 1];	/* "" when none */
	int depth;			/* links below it: 0 for a full */
	int state;
	int64_t started_ns;
	int64_t finished_ns;
	char *host;			/* malloc'd */
	char *source;			/* malloc'd: the root that was read */
	int64_t files;			/* regular files in this snapshot's rows */
	int64_t dirs;
	int64_t others;			/* symlinks, devices, fifos, sockets */
	int64_t deleted;		/* tombstones */
	int64_t bytes_read;		/* file content read from the source */
	int64_t bytes_new;		/* plaintext of chunks new to the repo */
	int64_t bytes_stored;		/* what those took in packs */
	int64_t warnings;
	char record_pack[33];		/* pack holding the snapshot record */
	int parts;			/* records it is in (its head and the
					 * parts); 0: not known */
	char *tags;			/* malloc'd: "keep,release", or NULL */
	int64_t revision;		/* times rebased (0: as backed up) */
};

/* Free the malloc'd strings; the struct may be reused. */
void catalog_snapshot_release(struct catalog_snapshot *s);

/*
 * Tags: names of 1-64 of [A-Za-z0-9._-], kept as one string, sorted and
 * comma-separated.  The tag "keep" marks a snapshot retention never
 * forgets (RETENTION_KEEP_TAG, policy.h).  catalog_tags_ok: 1 if s is
 * such a string (or empty).
 */
#define CATALOG_TAGS_MAX 1024
int catalog_tags_ok(const char *s);

/* Insert a new snapshot (s->sid, dataset_id, level, parent_id, full_id,
 * depth, state, started_ns, host, source, tags); sets s->id. */
int catalog_snapshot_create(struct catalog *c, struct catalog_snapshot *s);
/* Store state, finished_ns, counters, record_pack and parts of s->id. */
int catalog_snapshot_update(struct catalog *c,
    const struct catalog_snapshot *s);
/* Mark every running snapshot failed (after a crash); *n gets how many. */
int catalog_snapshot_fail_running(struct catalog *c, int *n);
/* Mark snapshot id failed, finished now, if it is still running (a run
 * that failed); outside any transaction.  0 or -1 (reported). */
int catalog_snapshot_fail(struct catalog *c, int64_t id, int64_t finished_ns);

/*
 * Find a snapshot by name: a unique prefix (>= 4 hex digits) of its id,
 * "DATASET@latest" (newest complete), "DATASET@full" (newest complete
 * full).  1 found (filled *s), 0 not found or ambiguous (reported),
 * -1 error.
 */
int catalog_snapshot_find(struct catalog *c, const char *name,
    struct catalog_snapshot *s);
int catalog_snapshot_get(struct catalog *c, int64_t id,
    struct catalog_snapshot *s);

/* The snapshot whose id is exactly sid: 1 found (filled *s), 0 not (not
 * reported), -1 error. */
int catalog_snapshot_find_sid(struct catalog *c, const char *sid,
    struct catalog_snapshot *s);

/* Call cb for each snapshot (of one dataset, or all when dataset is NULL),
 * oldest first.  Stops and returns cb's value when it is non-zero. */
int catalog_snapshot_list(struct catalog *c, const char *dataset,
    int (*cb)(void *arg, const struct catalog_snapshot *s), void *arg);

/*
 * Chunks.  A chunk row exists once its id is known; it has a location
 * only after the pack holding it is durable in packs/ (catalog_chunk_locate
 * in the transaction that follows pack_writer_finish).
 */
struct catalog_chunk_loc {
	int64_t rowid;
	uint8_t cid[32];
	char pack[33];
	uint64_t pack_offset;
	uint32_t plain_len;
	uint32_t stored_len;
	uint8_t type;
	uint8_t flags;
	uint64_t file_offset;		/* for catalog_content_chunks */
};

/* 1 if the chunk is known and stored in a pack, 0 if not (then *rowid is
 * its row if one exists, else 0), -1 on error.  A chunk marked damaged
 * counts as not stored: the next backup that meets it stores it again. */
int catalog_chunk_find(struct catalog *c, const uint8_t cid[32],
    int64_t *rowid);
/* Insert a chunk row without a location; *rowid. */
int catalog_chunk_add(struct catalog *c, const uint8_t cid[32],
    int64_t *rowid);
/*
 * catalog_chunk_find and catalog_chunk_add in one: 1 if the chunk is known
 * and stored (*rowid its row), 0 if not (*rowid its row, made now if there
 * was none), -1 on error.  While most chunks claimed lately were new (a
 * first backup) the insert is tried first, one index probe for a new
 * chunk instead of two; otherwise the lookup, one probe for a known one.
 */
int catalog_chunk_claim(struct catalog *c, const uint8_t cid[32],
    int64_t *rowid);
/*
 * A pack's header was rewritten in place (coffer key rotate --rewrap): its
 * hash (of header and index) is now hash.  No row, nothing to do.  0 or -1.
 */
int catalog_pack_rehash(struct catalog *c, const char *name,
    const uint8_t hash[32]);
/* Record a durable pack; *rowid. */
int catalog_pack_add(struct catalog *c, const char *name, uint64_t size,
    const uint8_t hash[32], int64_t *rowid);
/* Set where chunk_rowid lives (location fields of loc; loc->pack unused). */
int catalog_chunk_locate(struct catalog *c, int64_t chunk_rowid,
    int64_t pack_rowid, const struct catalog_chunk_loc *loc);

/*
 * Contents: a file's data as (file offset, chunk) pairs in offset order;
 * gaps are holes.  Identical contents share one row, found by hash (a keyed
 * hash over the pairs, computed by the caller).  catalog_content_put runs
 * inside the caller's transaction, which it leaves half written when it
 * fails: the caller then rolls the transaction back.
 */
struct catalog_chunk_ref {
	int64_t chunk_rowid;
	uint64_t file_offset;
	uint32_t len;
};
int catalog_content_put(struct catalog *c, const uint8_t hash[32],
    uint64_t size, const struct catalog_chunk_ref *refs, size_t n,
    int64_t *content_id);
/* A content's hash and size, by its row.  0 or -1 (reported). */
int catalog_content_info(struct catalog *c, int64_t content_id,
    uint8_t hash[32], uint64_t *size);
/* The chunks of a content with their locations, in file order; malloc'd
 * array.  A chunk without a location has pack[0] == '\0'. */
int catalog_content_chunks(struct catalog *c, int64_t content_id,
    struct catalog_chunk_loc **locs, size_t *n);
/*
 * The same a page at a time, for a file too large to hold the list of:
 * at most max chunks after the cursor *seq (start it at -1), which moves
 * on to the last one given; fewer than max at the end.  0 or -1.
 */
int catalog_content_chunks_page(struct catalog *c, int64_t content_id,
    int64_t *seq, size_t max, struct catalog_chunk_loc **locs, size_t *n);

/* Add an entry (or tombstone) to a snapshot's own rows. */
int catalog_entry_add(struct catalog *c, int64_t snapshot_id,
    const struct entry *e);
/* The same, replacing the snapshot's own row of e->path if it has one
 * (a tar stream's name that turns out to have hard links).  0 or -1. */
int catalog_entry_replace(struct catalog *c, int64_t snapshot_id,
    const struct entry *e);
/*
 * Add n entries, CATALOG_ENTRIES_AT_ONCE to a statement and the rest one
 * by one: SQLite sets an insert up once for all of its rows.  0, or -1
 * (reported): then none, some or all were added, and the caller's
 * transaction is to be rolled back.
 */
#define CATALOG_ENTRIES_AT_ONCE 16
int catalog_entries_add(struct catalog *c, int64_t snapshot_id,
    const struct entry *const *e, size_t n);

/*
 * The resolved entries of a snapshot: its chain (itself, its parent, ...
 * back to its full) resolved in one SQL query, newest entry per path
 * winning, tombstones dropped; in path order (a directory before what is
 * in it).  under: NULL, or a relative path: only that path and what is
 * below it.  The struct entry's strings are valid until the next call.
 */
struct catalog_iter;
struct catalog_iter *catalog_entries(struct catalog *c, int64_t snapshot_id,
    const char *under);
/* 1 with *e filled, 0 at the end, -1 on error. */
int catalog_iter_next(struct catalog_iter *it, struct entry *e);
void catalog_iter_free(struct catalog_iter *it);

/*
 * Levels (doc/design.md, "Levels").  The base of a new snapshot: for a
 * differential, the dataset's newest complete full; for an incremental,
 * its newest complete snapshot of any level.  1 found (*base filled),
 * 0 none (always for LEVEL_FULL), -1 error (also for an unknown level).
 */
int catalog_snapshot_base(struct catalog *c, int64_t dataset_id, int level,
    struct catalog_snapshot *base);

/*
 * Single-path lookups in the view of a snapshot (its chain resolved), for
 * change detection while a backup walks the source.  The chain is prepared
 * once; each lookup is one indexed query.  A path that is found is also
 * remembered as seen, so that catalog_resolver_tombstones can then add a
 * tombstone to a new snapshot for every path of the view that the walk did
 * not see.  One resolver per catalog handle at a time; create it outside a
 * transaction or in one that commits, and look up inside a transaction
 * (a lookup in autocommit mode opens a read transaction of its own, which
 * costs more than the lookup: bench/README.md).
 */
struct catalog_resolver;
struct catalog_resolver *catalog_resolver_new(struct catalog *c,
    int64_t snapshot_id);
/* 1 found (*e filled; strings valid until the next call), 0 absent or
 * deleted in the view, -1 error. */
int catalog_resolver_get(struct catalog_resolver *r, const char *path,
    struct entry *e);
/* Add a tombstone (kind ENTRY_TOMBSTONE) to snapshot_id's own rows for
 * each path in the view that was not seen and has no row in snapshot_id
 * yet; *n gets how many. */
/* Count dir and every path below it as seen (a directory the walk left
 * out on purpose keeps its entries of the view). */
int catalog_resolver_keep_under(struct catalog_resolver *r, const char *dir);
/*
 * Put dir and every path below it back in snapshot_id as view r has
 * them, after the walk stored some of them (a checkpoint found being
 * written in the middle of it): snapshot_id's own rows there are
 * dropped, and, with copy (a full, which has no base to fall through
 * to), r's entries added in their place; every path there counts as
 * seen in r.  r NULL: no view, the rows are only dropped.  delta[] gets,
 * per entry kind (ENTRY_TOMBSTONE..ENTRY_SOCK), rows added minus rows
 * dropped.  0 or -1.
 */
int catalog_put_back(struct catalog *c, struct catalog_resolver *r,
    int64_t snapshot_id, const char *dir, int copy,
    int64_t delta[ENTRY_SOCK + 1]);
int catalog_resolver_tombstones(struct catalog_resolver *r,
    int64_t snapshot_id, int64_t *n);
void catalog_resolver_free(struct catalog_resolver *r);

/*
 * Differences between the views of two snapshots a (older) and b, in path
 * order, from the catalog alone.  cb gets the change and the entries of a
 * and b (NULL where the path is absent).  Stops and returns cb's value when
 * it is non-zero.
 *   DIFF_ADDED     only in b
 *   DIFF_DELETED   only in a
 *   DIFF_MODIFIED  type, content (content id, size), symlink target or
 *                  device number differ
 *   DIFF_METADATA  same content; mode, owner, mtime, xattrs or ACL differ
 */
enum catalog_diff_kind {
	DIFF_ADDED = 1,
	DIFF_DELETED = 2,
	DIFF_MODIFIED = 3,
	DIFF_METADATA = 4
};
int catalog_diff(struct catalog *c, int64_t a, int64_t b,
    int (*cb)(void *arg, int change, const struct entry *ea,
    const struct entry *eb), void *arg);

/*
 * Rebase snapshot k onto a, a link of its chain (its nearest ancestor
 * that stays), or onto nothing (a == 0): k's own rows are rewritten in
 * place, from catalog rows alone, so that k resolves to exactly the tree
 * it resolved to before.  On nothing k becomes a full (its rows: its
 * view); on a full, a differential; else an incremental on a (its rows:
 * what differs between the views of k and a, every column compared, with
 * a tombstone for each path of a's view that k's lacks).  k keeps its
 * row and sid, so its children's parent stays; the full and depth of k
 * and of its descendants follow, and k's counts of rows (files, dirs,
 * others, deleted) are counted again.  The revision is the caller's.
 * Rebasing a full on nothing does nothing.  All or nothing; 0 or -1.
 */
int catalog_snapshot_rebase(struct catalog *c, int64_t k, int64_t a);
/*
 * The next revision of snapshot id (after a rebase, before its new
 * record is written): revision + 1, and the places of its old record's
 * parts forgotten (the new record's are added as it is written).  0 or
 * -1.
 */
int catalog_snapshot_revise(struct catalog *c, int64_t id);

/*
 * Synthetic full: copy the view of snapshot src (its resolved chain) into
 * the own rows of dst, a new full snapshot, with no source reads.  Fills
 * counts with the rows copied (files, dirs, others); storing them in dst's
 * row is the caller's job.
 */
int catalog_snapshot_materialize(struct catalog *c, int64_t src, int64_t dst,
    int64_t counts[3]);

/* A pack the catalog knows. */
struct catalog_pack {
	int64_t rowid;
	char name[33];
	uint64_t size;
};

/* Every pack, sorted by name, as a malloc'd array. */
int catalog_packs(struct catalog *c, struct catalog_pack **v, size_t *n);

/*
 * The chunks that complete snapshots need: those of the contents of every
 * entry row of a complete snapshot or of a snapshot in its chain, each
 * once, in (pack name, offset) order; chunks that are in no pack
 * (loc->pack[0] == '\0') come first.  after: NULL, or a pack name: only
 * the chunks in packs whose name sorts after it (and no unlocated ones).
 * next: 1 with *loc filled (file_offset unused), 0 at the end, -1.
 */
struct catalog_chunk_iter;
struct catalog_chunk_iter *catalog_needed_chunks(struct catalog *c,
    const char *after);
int catalog_chunk_iter_next(struct catalog_chunk_iter *it,
    struct catalog_chunk_loc *loc);
void catalog_chunk_iter_free(struct catalog_chunk_iter *it);

/*
 * What damaged chunks (rows) break: for each complete snapshot whose
 * resolved view has an entry whose content uses one of them, cb gets the
 * snapshot's id, its dataset and the entry's path; each pair once, by
 * dataset, then snapshot time, then path.  One query.  Stops and returns
 * cb's value when it is non-zero.
 */
int catalog_chunks_break(struct catalog *c, const int64_t *chunks, size_t n,
    int (*cb)(void *arg, const char *sid, const char *dataset,
    const char *path), void *arg);

/*
 * Mark n chunks (by row) damaged or missing, as verify, restore or drill
 * found them: the next backup that meets their content stores them again
 * (catalog_chunk_find), and locating the new copy clears the mark.  0 or
 * -1 (reported).
 */
int catalog_chunks_mark_damaged(struct catalog *c, const int64_t *rows,
    size_t n);

/*
 * The packs said to hold chunk row rowid besides pack not_pack (-1: the
 * one it is located in): where the catalog locates it (located = 1),
 * unless damaged, then its copies (chunk_copy: the other packs whose
 * indexes name it), none condemned or gone from the repository at the
 * last sync; malloc'd in *places, *n of them.  A place is only the word
 * of whoever wrote its pack's index (a write-only key holder can name
 * any chunk id over content of its own): read it before trusting it.
 * catalog_chunk_copy_drop: the copy of chunk_rowid in pack_id
 * forgotten (read, and found not to be the chunk).  0 or -1 (reported).
 */
struct catalog_chunk_place {
	int64_t pack_id;
	int located;			/* 1: the location, 0: a copy */
	struct catalog_chunk_loc loc;	/* loc.pack its name */
};
int catalog_chunk_places(struct catalog *c, int64_t rowid, int64_t not_pack,
    struct catalog_chunk_place **places, size_t *n);
int catalog_chunk_copy_drop(struct catalog *c, int64_t chunk_rowid,
    int64_t pack_id);

#endif
