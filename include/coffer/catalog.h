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
 */
#define CATALOG_SCHEMA_VERSION 11

struct catalog;

/*
 * Open (creating the file and its directory if needed) and migrate to the
 * current schema.  WAL, synchronous=FULL, foreign_keys=ON.  A handle is
 * used by one thread at a time (SQLite's own locking of it is off).
 */
struct catalog *catalog_open(const char *path);
/*
 * The same, but a file that is not a coffer catalog or is corrupt is moved
 * aside to PATH.damaged-TIME (kept, never deleted; its name in aside, else
 * "") and a new, empty catalog opened in its place.
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

/* Default path: $XDG_STATE_HOME/coffer/<repo id hex>/catalog.db with
 * XDG_STATE_HOME defaulting to $HOME/.local/state.  malloc'd. */
char *catalog_default_path(const char *repo_id_hex);

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

/* Add an entry (or tombstone) to a snapshot's own rows. */
int catalog_entry_add(struct catalog *c, int64_t snapshot_id,
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
 * (a lookup in autocommit mode opens a read transaction of its own and
 * costs about three times as much).
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

/*
 * The snapshot's own rows (the snapshot, its dataset's name, its entries
 * with their paths, their contents as chunk-id lists) as an SQLite database
 * image (sqlite3_serialize), replacing out's content.  This is what the
 * signed snapshot record carries, so the catalog can be rebuilt from packs.
 */
int catalog_snapshot_export(struct catalog *c, int64_t snapshot_id,
    struct buf *out);
/* The same, after what out holds (a record's header, say: no copy). */
int catalog_snapshot_export_append(struct catalog *c, int64_t snapshot_id,
    struct buf *out);

/*
 * A snapshot record in parts (format 2; export.c describes it): where a
 * part was stored, as the head names it.
 */
struct catalog_record_part {
	char pack[33];			/* the pack holding it */
	uint8_t rid[32];		/* its record id (keyed hash) */
};
/*
 * A part is held whole while it is stored (backup) and read (verify,
 * rebuild): its size is the peak memory of both.  Parts of 32,768
 * entries and about 8 MiB hold a backup of small files under 64 MiB, and
 * a rebuild takes less time with them than with twice as large ones.
 * Readers take parts of any size.
 */
#define CATALOG_RECORD_PART_ENTRIES 32768
#define CATALOG_RECORD_PART_BYTES (8u << 20)
/*
 * A full's parts from its spool are built while its walk goes on, beside
 * the walk's own buffers (catalog_part_maker), and what is left at the
 * end two at a time (catalog_snapshot_export_spool): an eighth of the
 * size, so that a part built during the walk adds about 2 MiB to its
 * peak.
 */
#define CATALOG_SPOOL_PART_ENTRIES (CATALOG_RECORD_PART_ENTRIES / 8)
#define CATALOG_SPOOL_PART_BYTES (CATALOG_RECORD_PART_BYTES / 8)

/*
 * emit stores one part: rec holds room bytes (zeros) for the caller's
 * use, then the part's image; emit may write in rec, keep parts of it or
 * release it (the export frees what is left).  part is its index, head is
 * set for the last one.  For every part but the head it fills *where, or
 * leaves it to a later call: before the head is built, emit is called
 * with rec NULL and part the number of parts before the head, and fills
 * where[0..part) with their places.  0, or -1 (reported) to stop the
 * export.
 */
typedef int (*catalog_part_emit_fn)(void *arg, struct buf *rec, size_t room,
    int part, int head, struct catalog_record_part *where);
/*
 * Export snapshot snapshot_id as a sequence of part images of at most
 * max_entries entries and about max_bytes of rows each, handing each to
 * emit as soon as it is made: memory holds one part, whatever the
 * snapshot's size, and SQLite's copy of it is freed before emit runs.
 * Reads the catalog only.  0 or -1 (reported).
 */
int catalog_snapshot_export_parts(struct catalog *c, int64_t snapshot_id,
    size_t max_entries, size_t max_bytes, size_t room,
    catalog_part_emit_fn emit, void *arg);

/*
 * A full backup's record rows, spooled as its entries are recorded
 * (spool.c), so that its record is built from them rather than read back
 * out of the catalog.  catalog_spool_new: an empty spool cutting parts as
 * catalog_snapshot_export_parts would; NULL if none can be had (the
 * export then reads the catalog).  catalog_spool_entry: the entry just
 * added to the catalog, with its content's hash, chunk ids and refs (hash
 * NULL: no content).  catalog_spool_off: the snapshot's rows are no longer
 * only what was spooled (an entry copied or put back): its record must be
 * read from the catalog.  A spool that cannot take a row turns itself
 * off.  Used by one thread at a time: the one holding the catalog.
 */
struct catalog_spool;
struct catalog_spool *catalog_spool_new(struct catalog *c,
    size_t max_entries, size_t max_bytes);
void catalog_spool_entry(struct catalog_spool *sp, const struct entry *e,
    const uint8_t hash[32], const uint8_t (*cids)[32],
    const struct catalog_chunk_ref *refs, size_t nchunks);
void catalog_spool_off(struct catalog_spool *sp);
/* Its last rows written out (or it is off): before the export. */
void catalog_spool_finish(struct catalog_spool *sp);
int catalog_spool_usable(const struct catalog_spool *sp);
void catalog_spool_free(struct catalog_spool *sp);
/*
 * Parts closed while the run goes on, so that they can be built and
 * stored before it ends (catalog_part_maker).  catalog_spool_closed: 1
 * with part i's place in the spool when it is closed (all its rows
 * written), 0 while it is open, past the last or the spool is off.
 * catalog_spool_dup: a descriptor of the spool's file of the caller's
 * own, that stays good when the spool turns off or is freed; -1 if
 * there is none.
 */
struct catalog_spool_range {
	uint64_t lo, hi;		/* bytes of the spool's file */
};
int catalog_spool_closed(const struct catalog_spool *sp, size_t i,
    struct catalog_spool_range *r);
int catalog_spool_dup(const struct catalog_spool *sp);
/*
 * catalog_snapshot_export_parts, but each part's rows from the spool
 * (usable, holding every entry of the snapshot) instead of the catalog;
 * the metadata still comes from the catalog.  The parts hold the same
 * rows as catalog_snapshot_export_parts would give them, in record order
 * rather than path id order.
 */
int catalog_snapshot_export_spool(struct catalog *c, int64_t snapshot_id,
    struct catalog_spool *sp, size_t first, size_t room,
    catalog_part_emit_fn emit, void *arg);

/*
 * A full's parts built while its run goes on, from the spool's closed
 * parts, so that the record left to build at the end is its last part
 * and head (catalog_snapshot_export_spool with first the number built).
 * catalog_part_maker_new reads the snapshot's metadata as it is now (a
 * running snapshot's: readers take it from the head) and keeps a handle
 * on the spool's file of its own; from then on the maker touches neither
 * the catalog nor sp, and catalog_part_maker_build, part i of rows r
 * (catalog_spool_closed) into rec (room bytes, then its image), may run
 * on any one thread at a time.  0 or -1 (reported, unless cancelled).
 * catalog_part_maker_cancel, from any thread: the build under way, and
 * any after, stop soon and fail; catalog_part_maker_cancelled says so.
 */
struct catalog_part_maker;
struct catalog_part_maker *catalog_part_maker_new(struct catalog *c,
    int64_t snapshot_id, const struct catalog_spool *sp, size_t room);
int catalog_part_maker_build(struct catalog_part_maker *m, size_t part,
    const struct catalog_spool_range *r, struct buf *rec);
void catalog_part_maker_cancel(struct catalog_part_maker *m);
int catalog_part_maker_cancelled(const struct catalog_part_maker *m);
void catalog_part_maker_free(struct catalog_part_maker *m);

/*
 * Where the parts of a snapshot's record are (schema 9), so that an
 * export finds them without reading the head, which a write-only key
 * cannot open.  catalog_snapshot_part_add: part idx (not the head) of
 * snapshot_id is where says, in the caller's transaction (the count goes
 * in snapshot.parts, catalog_snapshot_update).  catalog_snapshot_parts_set:
 * the count and every part but the head (partv[i] is part i, i < parts -
 * 1) at once, replacing what was known.  catalog_snapshot_part_packs: the
 * packs holding its parts other than the head, sorted, each once
 * (names_free, coffer/name.h).  0 or -1 (reported).
 */
int catalog_snapshot_part_add(struct catalog *c, int64_t snapshot_id,
    int idx, const struct catalog_record_part *where);
int catalog_snapshot_parts_set(struct catalog *c, int64_t snapshot_id,
    int parts, const struct catalog_record_part *partv);
int catalog_snapshot_part_packs(struct catalog *c, int64_t snapshot_id,
    char ***packs, size_t *n);

/*
 * Integrity: verify, audit and drills (src/catalog/verify.c).
 */

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
 * The snapshot id inside a snapshot record's image (what
 * catalog_snapshot_export made).  Check the record's signature first: the
 * image is parsed by SQLite.  0, or -1 (reported).
 */
int catalog_record_sid(const void *img, size_t len,
    char sid[SNAPSHOT_ID_HEX + 1]);

/*
 * Where a verify pass stopped by its time limit got to, per mode (a short
 * string naming what the pass checks).  get: 1 found, 0 none, -1.
 */
struct catalog_verify_state {
	uint64_t seed;			/* the pass's random choices */
	char last_pack[33];		/* the last pack done */
	int64_t started_ns;		/* when the pass began */
	int64_t packs, chunks, bytes, errors;	/* done so far */
};
int catalog_verify_state_get(struct catalog *c, const char *mode,
    struct catalog_verify_state *vs);
int catalog_verify_state_put(struct catalog *c, const char *mode,
    const struct catalog_verify_state *vs);
int catalog_verify_state_clear(struct catalog *c, const char *mode);

/*
 * Verify results: one row per verify run (coffer verify, a policy's
 * [verify]), journaled so that other hosts, rebuilt catalogs and imported
 * bundles know what was checked, when, and what was found.  mode is
 * verify_result's ("structure", "read-data", "read-data=P%",
 * "read-data=N/M"); slice_n and slice_m the N/M of a slice (0 else);
 * verdict "pass" (nothing wrong) or "fail".
 */
struct catalog_verify_run {
	int64_t id;
	int64_t time_ns;		/* when it started */
	const char *host;
	const char *mode;
	unsigned slice_n, slice_m;
	int complete;			/* 0: stopped, the next run resumes */
	int64_t packs;			/* packs checked */
	int64_t packs_read;		/* ... whose data was read */
	int64_t bytes_read;
	int64_t damage;			/* problems found */
	double seconds;
	const char *verdict;
};
/* Add v (all but id).  A row of the same time and mode stays. */
int catalog_verify_run_add(struct catalog *c,
    const struct catalog_verify_run *v);
/* Call cb for each verify run, oldest first (the strings are valid during
 * the call); stops and returns cb's value when it is non-zero. */
int catalog_verify_run_list(struct catalog *c,
    int (*cb)(void *arg, const struct catalog_verify_run *v), void *arg);
/*
 * The slice (1..m) that a rotating verify of m slices reads next: the
 * one after the newest run of m slices, or that one again when it
 * stopped before its end; 1 when none.  0, or -1 (reported).
 */
int catalog_verify_next_slice(struct catalog *c, unsigned m, unsigned *n);

/*
 * Recovery drills: one row each.  Seconds are wall time; a negative
 * optional value means none (NULL in the table).
 */
struct catalog_drill {
	int64_t id;
	int64_t time_ns;		/* when it started */
	int64_t dataset_id;
	const char *dataset;		/* list only */
	int64_t snapshot_id;		/* 0 once the snapshot is pruned */
	char sid[SNAPSHOT_ID_HEX + 1];
	int no_write;			/* streamed and verified, not written */
	double sample;			/* percent of the files */
	int64_t files;			/* entries checked */
	int64_t bytes;			/* file content checked */
	int64_t failures;		/* entries that failed a check */
	double seconds;			/* restore (or stream) time */
	double check_seconds;		/* checking the restored tree */
	double estimate_seconds;	/* full restore, from a sample */
	double rto_seconds, rpo_seconds;	/* objectives */
	double rpo_age_seconds;		/* age of the newest snapshot */
	const char *verdict;		/* "pass", "fail", "missed-objective" */
	const char *source;		/* NULL: the repository; else where
					 * it recovered from ("bundles:...") */
	int64_t newest_ns;		/* list only: start of the dataset's
					 * newest complete snapshot, or 0 */
};
/* Add d (all but id, dataset, newest_ns); sets d->id. */
int catalog_drill_add(struct catalog *c, struct catalog_drill *d);
/*
 * Call cb for each drill (of one dataset, or all when dataset is NULL),
 * by dataset then time; with latest, only each dataset's newest.  The
 * strings are valid during the call.  Stops and returns cb's value when
 * it is non-zero.
 */
int catalog_drill_list(struct catalog *c, const char *dataset, int latest,
    int (*cb)(void *arg, const struct catalog_drill *d), void *arg);


/*
 * Bringing the catalog up to date with the repository (import.c).
 *
 * catalog_pack_names: the names of the packs the catalog knows, sorted;
 * a malloc'd array of malloc'd strings.
 *
 * catalog_pack_import: add pack name (size, keyed hash of its header and
 * index; journal: it holds a journal record) and the location of each
 * chunk of its index.  A chunk known
 * without a location gets this one; one located elsewhere keeps its
 * place.  All or nothing.
 *
 * catalog_record_peek: the metadata of a snapshot record's image (the
 * rows catalog_snapshot_export wrote, signature already checked).
 *
 * catalog_record_import: insert the snapshot of a record stored in
 * record_pack, with its entries, contents and chunks (chunks without a
 * location until their pack is imported).  0 imported, 1 known already
 * (complete), 2 its parent is not in the catalog (not reported), -1 error
 * (reported); nothing changed unless 0.  A snapshot of that id that is not complete (a run
 * interrupted after its last pack was durable) is replaced.  Must be
 * called outside any transaction.
 *
 * Revisions (a snapshot rebased by forget): a record whose revision is
 * above 0 is refused (-1, reported) unless authority says the record
 * carries the authority's signature, checked; a complete snapshot of the
 * same id is replaced in place (its row, and so its children, stay) only
 * by a record of a higher revision, so that whatever order the records
 * come in, the highest wins.
 */
struct catalog_record_meta {
	int format;			/* 1 (one image) or 2 (in parts) */
	int parts;			/* of a head (1 for format 1) */
	char sid[SNAPSHOT_ID_HEX + 1];
	char parent_sid[SNAPSHOT_ID_HEX + 1];
	char full_sid[SNAPSHOT_ID_HEX + 1];
	char dataset[256];
	int level;
	int depth;
	int64_t started_ns;
	int64_t revision;		/* meta "revision": 0 when absent */
};

int catalog_pack_names(struct catalog *c, char ***names, size_t *n);
int catalog_pack_import(struct catalog *c, const char *name, uint64_t size,
    const uint8_t hash[32], const struct catalog_chunk_loc *locs, size_t n,
    int journal);
int catalog_record_peek(struct catalog *c, const uint8_t *img, size_t len,
    struct catalog_record_meta *m);
/*
 * What a record image is, read from its meta and part tables alone, with
 * no catalog (verify, sync): format, snapshot id, its index among the
 * snapshot's parts, and, of a head, the count of parts and where the
 * others are (partv[i] is part i, i < parts - 1; malloc'd).  A format 1
 * record is a head of one part; a part that is not a head has parts 0.
 * 0, or -1 (reported: "snapshot record: ...") if the image is malformed.
 */
struct catalog_record_info {
	int format;
	int part;
	int parts;
	int64_t revision;		/* 0 when absent */
	char sid[SNAPSHOT_ID_HEX + 1];
	struct catalog_record_part *partv;
};
int catalog_record_info(const uint8_t *img, size_t len,
    struct catalog_record_info *ri);
void catalog_record_info_release(struct catalog_record_info *ri);

/*
 * Fetch part idx of a snapshot record in parts, from where the head says
 * it is: *img points to its image, its signature checked and its record
 * id compared, valid until the next call.  0, or -1 (reported) if it is
 * missing, damaged or not the record named.
 */
typedef int (*catalog_part_fetch_fn)(void *arg,
    const struct catalog_record_part *where, int idx, const uint8_t **img,
    size_t *len);
/*
 * catalog_record_import with a record in parts: img must be a head (3 is
 * returned for any other part, which is imported with its head: nothing
 * is done).  The head's snapshot is inserted as running and committed,
 * then each part in a transaction of its own (fetched with fetch), then
 * the head's own rows and the change to complete in the last one.  A
 * part missing or not the one the head names (another snapshot's, another
 * copy of that index) leaves the snapshot out (-1, reported, its rows
 * deleted); a crash leaves it running, replaced when its head is read
 * again.
 */
int catalog_record_import(struct catalog *c, const uint8_t *img, size_t len,
    const char *record_pack, int authority, catalog_part_fetch_fn fetch,
    void *arg, struct catalog_record_meta *m);
/*
 * Mark n chunks (by row) damaged or missing, as verify, restore or drill
 * found them: the next backup that meets their content stores them again
 * (catalog_chunk_find), and locating the new copy clears the mark.  0 or
 * -1 (reported).
 */
int catalog_chunks_mark_damaged(struct catalog *c, const int64_t *rows,
    size_t n);

/* Copy the drill history and key uses of the catalog file from into c (a
 * rebuild): rows c has already (same time and snapshot, same key and
 * time) are not copied twice. */
int catalog_copy_history(struct catalog *c, const char *from);


/*
 * The journal (journal.c): drill results, failed or interrupted
 * snapshots and forgotten ones, which the catalog alone would lose with
 * the host, carried in the repository as signed journal records.
 *
 * catalog_journal_export: the rows not yet in the repository as a journal
 * image appended to out, or with all every row (prune's merge of journal
 * packs); *n how many (0: nothing to write, out unchanged) and *upto what
 * catalog_journal_mark needs to mark exactly those.  Key uses alone make a
 * record only when one is new to the repository: the key's newest use
 * there is a day older or more, or there is none; otherwise they wait for
 * the next record written for something else, so that a host backing up
 * hourly adds no record per run.
 * catalog_journal_mark: they are now in pack (durable), in the caller's
 * transaction.
 * catalog_journal_import: the rows of a journal image stored in pack
 * (signature checked by the caller) that the catalog lacks; *added how
 * many.  Outside any
 * transaction.  0 or -1 (reported).
 */
struct catalog_journal_upto {
	int64_t drill;			/* drill rows up to this id */
	int64_t snapshot;		/* failed snapshots up to this id */
	int64_t forgotten;		/* forgotten snapshots up to this id */
	int64_t bundle;			/* bundles up to this id */
	int64_t run;			/* runs up to this id */
	int64_t key_use;		/* key uses up to this id */
	int64_t verify;			/* verify runs up to this id */
};
int catalog_journal_export(struct catalog *c, int all, struct buf *out,
    size_t *n, struct catalog_journal_upto *upto);
int catalog_journal_mark(struct catalog *c, const char *pack,
    const struct catalog_journal_upto *upto);
/* 1 if this coffer imports every row of journal image img (a format it
 * knows), 0 if not (a later format, or not an image), -1 on error. */
int catalog_journal_known(const uint8_t *img, size_t len);
/* authority: the record is the authority's (view.c), so its drills and
 * verifies count; otherwise they are left out, with a warning. */
int catalog_journal_import(struct catalog *c, const uint8_t *img,
    size_t len, const char *pack, int authority, size_t *added);

/*
 * What a catalog rebuild would lose to damaged journal records (verify):
 * catalog_journal_cover notes the rows of each journal record that reads
 * (temporary tables of this connection; a format this coffer does not
 * import notes nothing); catalog_journal_lost then calls fn for each row
 * the repository held (in_repo) that no noted record holds: its kind
 * ("drill", "run", "failed snapshot", "forgotten snapshot", "bundle",
 * "key use"), its time and what names it, and forgets the notes.  fn's
 * non-zero return stops it and is returned.  0 or -1 (reported).
 */
typedef int catalog_lost_fn(void *arg, const char *kind, int64_t time_ns,
    const char *name);
int catalog_journal_cover(struct catalog *c, const uint8_t *img,
    size_t len);
int catalog_journal_lost(struct catalog *c, catalog_lost_fn *fn, void *arg);
/*
 * The complete snapshots a rebuild would lose with snapshot sid's record
 * (sid itself when complete, and every snapshot whose chain goes through
 * it): fn(arg, sid, dataset) for each, sid first.  snapshot_of_part: the
 * snapshot (sid, 33 bytes) whose record part rid (32 bytes) is, 1; 0 if
 * no part has that id; -1 (reported).
 */
typedef int catalog_snapshot_fn(void *arg, const char *sid,
    const char *dataset);
int catalog_snapshot_lost(struct catalog *c, const char *sid,
    catalog_snapshot_fn *fn, void *arg);
int catalog_snapshot_of_part(struct catalog *c, const uint8_t *rid,
    char *sid);

/*
 * Key use (keyuse.c): which key unlocked a run that wrote the repository.
 * key names it: a slot by its name, a key file by "key-file:full" or
 * "key-file:write-only" (all key files of a kind are the same bytes, so
 * nothing else tells them apart).  catalog_key_use_add: one use at
 * time_ns from host (NULL: unknown), to be journaled; a use known
 * already (same key and time) is not added twice.  catalog_key_use_last:
 * cb gets each key's newest use, by key; stops and returns cb's value
 * when it is non-zero.  0 or -1 (reported).
 */
#define CATALOG_KEY_NAME_MAX 64
/*
 * The highest coffer.conf generation this catalog has seen (0: none):
 * catalog_generation_get; catalog_generation_raise sets it to gen if that
 * is higher.  0 or -1 (reported).
 */
int catalog_generation_get(struct catalog *c, uint64_t *gen);
int catalog_generation_raise(struct catalog *c, uint64_t gen);
/*
 * The key slot that last opened the repository on this host, kept beside
 * the catalog at catpath (a passphrase tries it first: whoever can write
 * the repository can plant slots that are costly to try).
 * slot_hint_get: its name into out ("" when none or unreadable);
 * slot_hint_set: remember name (a failure is reported, and is no more
 * than a hint not kept).
 */
void catalog_slot_hint_get(const char *catpath, char *out, size_t size);
void catalog_slot_hint_set(const char *catpath, const char *name);
int catalog_key_use_add(struct catalog *c, const char *key, int64_t time_ns,
    const char *host);
int catalog_key_use_last(struct catalog *c,
    int (*cb)(void *arg, const char *key, int64_t time_ns, const char *host),
    void *arg);

/*
 * Forgetting (forget.c).  catalog_forget: the snapshots sids go from the
 * catalog with their rows, children first, and their ids are kept in
 * forgotten (for the journal, and so that their records, still in the
 * packs until prune, never bring them back); one that a remaining
 * snapshot builds on is first rebased (catalog_snapshot_rebase: its
 * rows rewritten, its tree the same) onto its nearest ancestor that
 * stays, or made a full, so that every host that learns the forget, in
 * whatever order, ends with the same trees; only a failed snapshot's
 * parent stays.  *gone how many went.  catalog_forget_apply: the same
 * for the ids forgotten already (a sync that imported a record again, or
 * a forget from another host).  All or nothing; 0 or -1 (reported).
 * catalog_forgotten_has: 1 if sid is forgotten, 0 if not, -1.
 */
int catalog_forget(struct catalog *c, const char *const *sids, size_t n,
    int64_t now_ns, size_t *gone);
int catalog_forget_apply(struct catalog *c, size_t *gone);
int catalog_forgotten_has(struct catalog *c, const char *sid);

/*
 * Prune (prune.c).  catalog_prune_begin marks the live chunks (those an
 * entry of a snapshot the catalog holds uses), for the calls below.
 * catalog_prune_packs: every pack with its located and live chunks and
 * their stored bytes, by name.  catalog_prune_chunks: the chunks located
 * in one pack, by offset, with whether they are live.  catalog_prune_drop
 * (in the caller's transaction, after the live chunks of the packs going
 * were located elsewhere with catalog_chunk_locate): the contents nothing
 * uses, the chunk rows left in those packs, and the packs.  0 or -1.
 */
struct catalog_prune_pack {
	int64_t id;
	char name[33];
	uint64_t size;
	int64_t chunks, live_chunks;
	uint64_t live_bytes;		/* stored bytes of the live chunks */
};
struct catalog_prune_chunk {
	int64_t rowid;
	uint64_t offset;
	int live;
};
int catalog_prune_begin(struct catalog *c);
int catalog_prune_packs(struct catalog *c, struct catalog_prune_pack **packs,
    size_t *n);
int catalog_prune_chunks(struct catalog *c, int64_t pack_id,
    struct catalog_prune_chunk **chunks, size_t *n);
int catalog_prune_drop(struct catalog *c, const int64_t *packs, size_t n);
/*
 * Packs the catalog lists that the repository no longer holds (a sync):
 * catalog_packs_gone notes them, so that catalog_pack_import relocates
 * their chunks to a new pack that holds them too (another host's repack);
 * catalog_packs_gone_drop then removes the gone packs nothing needs, with
 * their chunk rows and the contents no entry uses.  *dropped how many.
 */
int catalog_packs_gone(struct catalog *c, const char *const *names,
    size_t n);
int catalog_packs_gone_drop(struct catalog *c, size_t *dropped);

/*
 * Offsite bundles (src/catalog/bundle.c): what this host exported to each
 * target and imported from it.
 */
struct catalog_bundle {
	int64_t id;
	int exported;			/* 1 exported, 0 imported */
	char target[65];
	uint32_t seq;
	int level;
	uint32_t base_seq;		/* 0 for a full */
	uint8_t manifest[32];		/* BLAKE2b-256 of its manifest */
	char name[128];			/* its file name */
	uint64_t size;
	int64_t packs;
	char *snapshots;		/* malloc'd: sids, space-separated */
	int64_t created_ns;
};
void catalog_bundle_release(struct catalog_bundle *b);
/*
 * The newest bundle of target in a direction (exported or not); with
 * full_only the newest full.  1 found (*b filled), 0 none, -1 error.
 */
int catalog_bundle_last(struct catalog *c, int exported, const char *target,
    int full_only, struct catalog_bundle *b);
/* A bundle of seq: 1 found, 0 not, -1. */
int catalog_bundle_get(struct catalog *c, int exported, const char *target,
    uint32_t seq, struct catalog_bundle *b);
/* Record b (sets b->id) with the packs it carried, all or nothing. */
int catalog_bundle_add(struct catalog *c, struct catalog_bundle *b,
    char *const *packs, size_t n);
/*
 * The packs that exported bundles of target with from_seq <= seq <= to_seq
 * hold,
 * as a sorted malloc'd array of malloc'd names.
 */
int catalog_bundle_held(struct catalog *c, const char *target,
    uint32_t from_seq, uint32_t to_seq, char ***packs, size_t *n);
/* Each bundle (of target, or of all when NULL), by target and seq. */
int catalog_bundle_list(struct catalog *c, int exported, const char *target,
    int (*cb)(void *arg, const struct catalog_bundle *b), void *arg);
/*
 * The packs a snapshot's chain needs for its data (the chunks of every
 * entry of the snapshot and its ancestors) and for its records' heads,
 * sorted and unique, malloc'd; (*need)[i] is how many of pack i's bytes
 * the chain's chunks take (their stored length plus overhead each), 0 for
 * a pack held for a record head only.  Record parts are named by the
 * heads.
 */
int catalog_chain_packs(struct catalog *c, int64_t snapshot_id,
    uint32_t overhead, char ***packs, uint64_t **need, size_t *n);
/*
 * The packs of journal records (drills, failed runs, forgets, bundles,
 * runs, key uses) that the catalog lists, whoever wrote them, sorted,
 * malloc'd (names_free, coffer/name.h): packs that hold no chunk of
 * another record type than a journal record's and no record of a
 * snapshot the catalog holds (but a failed one).  An export carries them
 * all, unread.  0 or -1 (reported).
 */
int catalog_journal_packs(struct catalog *c, char ***packs, size_t *n);

/*
 * The runs of `coffer run` (src/catalog/run.c, schema version 8): each
 * run with its actions, journaled to the repository like drill results.
 */
struct catalog_run {
	int64_t id;
	char rid[SNAPSHOT_ID_HEX + 1];	/* its name: random, 32 hex */
	int64_t time_ns;		/* the run's clock (--now) */
	int64_t wall_ns;		/* when it started, by the host's clock */
	double seconds;			/* how long it took */
	const char *host, *user, *policy;
	int status;			/* its exit status */
};
struct catalog_run_action {
	const char *kind;		/* backup, export, forget, prune, drill */
	const char *subject;		/* dataset, target, drill/dataset, "" */
	const char *level;		/* full, ... or NULL */
	int64_t slot_ns;		/* the schedule's slot it served, or 0 */
	int status;			/* its exit status */
	int done;			/* counts as done for its schedule */
	double seconds;
	const char *detail;		/* snapshot id, bundle, a summary */
};
/* Add run r (all but id; sets id) and its n actions, all or nothing. */
int catalog_run_add(struct catalog *c, struct catalog_run *r,
    const struct catalog_run_action *a, size_t n);
/* The run clock's time of the newest done action of kind and subject:
 * 1 found (*time_ns), 0 none, -1 error. */
int catalog_run_last(struct catalog *c, const char *kind,
    const char *subject, int64_t *time_ns);
/*
 * Each run whose clock is at or after since_ns (0: all), oldest first,
 * with its actions in order; strings valid during the call.  Stops and
 * returns cb's value when it is non-zero.
 */
int catalog_run_list(struct catalog *c, int64_t since_ns,
    int (*cb)(void *arg, const struct catalog_run *r,
    const struct catalog_run_action *a, size_t n), void *arg);

/*
 * For each kind and subject of action, and done or not, the run clock's
 * time of the newest such action (src/catalog/run.c): what coffer run's
 * schedules need of the history.  Strings valid during the call.  Stops
 * and returns cb's value when it is non-zero; 0 or -1.
 */
int catalog_run_newest(struct catalog *c, int (*cb)(void *arg,
    const char *kind, const char *subject, int done, int64_t time_ns),
    void *arg);

#endif
