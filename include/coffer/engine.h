#ifndef COFFER_ENGINE_H
#define COFFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/catalog-history.h"
#include "coffer/catalog.h"
#include "coffer/fs.h"
#include "coffer/policy.h"
#include "coffer/repo.h"

/*
 * The pipelines that commands run: backup, restore, verify, ...  They take
 * an unlocked repository and an open catalog, report their own errors
 * (through the log module), and return what the run came to: an
 * engine_result, never an exit status (src/cmd/ maps one to the other).
 */
enum engine_result {
	ENGINE_OK = 0,		/* done */
	ENGINE_WARN,		/* done, with warnings: an entry skipped,
				 * unreadable, or kept at its previous
				 * version */
	ENGINE_REFUSED,		/* a bad request, nothing done: a snapshot
				 * not complete, a target not empty, a path
				 * not in the snapshot, a snapshot that a
				 * kept one builds on */
	ENGINE_DAMAGED,		/* damaged or missing data was found */
	ENGINE_CORRUPTION,	/* audit: live content changed while its
				 * size and mtime did not */
	ENGINE_OBJECTIVE,	/* drill: the checks passed, the RTO or RPO
				 * was missed */
	ENGINE_ERROR,		/* could not run or finish: an I/O error, a
				 * full disk, no memory */
	ENGINE_INTERRUPTED	/* stopped at a safe point by the signal
				 * signals_caught() names */
};

/*
 * 0 when the unlocked key can decrypt the repository; -1, reported with
 * what (the pipeline: "restore") and the missing capability, when it is a
 * write-only key.  Every pipeline that reads records asks first.
 */
int engine_need_read(struct repo *r, const char *what);
/* 0 with a full key; -1 (reported: "WHAT needs a full key") with a
 * write-only one, for what only the authority decides (forget). */
int engine_need_full(struct repo *r, const char *what);
/* 0 when snapshot s is complete; -1, reported ("snapshot ID is running,
 * not complete"), where a pipeline that reads it must refuse it. */
struct catalog_snapshot;
int engine_need_complete(const struct catalog_snapshot *s);

/*
 * The name of the key that unlocked r, as `key list` shows its use: the
 * slot's name, or ENGINE_KEY_FILE_FULL or ENGINE_KEY_FILE_WRITE_ONLY for
 * a key file (uses of key files are recorded by kind).
 * engine_key_use_add: that key wrote, now, from this host (a catalog row
 * the journal carries); 0 or -1.
 */
#define ENGINE_KEY_FILE_FULL "key-file:full"
#define ENGINE_KEY_FILE_WRITE_ONLY "key-file:write-only"
const char *engine_key_name(const struct repo *r);
int engine_key_use_add(struct repo *r, struct catalog *c);

/*
 * coffer.conf's generation against the highest this host's catalog has
 * seen (access.c): a lower one is a coffer.conf put back from an older
 * copy, which could make writers seal to an epoch a rotation left or a
 * retirement removed.  Writing: -1 (reported); reading: a warning.  A
 * higher one is remembered.  0 or -1.
 */
int engine_generation_check(struct repo *r, struct catalog *c, int writing);

/*
 * Before writing (access.c): take the repository's writer lock, shared
 * (a writer that only adds new objects, or deletes in two phases:
 * backup, export, drill, import, forget, prune) or exclusive (changes
 * in place: keys), and the
 * catalog's writer lock (waiting at most wait seconds each; < 0 for
 * ever, 0 not at all); remove what a crashed run left in tmp/; finish a
 * key rewrap cut short; mark a crashed run's snapshots
 * failed and record which key writes.  0 or -1.
 * engine_writer_shared: the writer lock held shared from now on (after
 * the recovery of a rewrap, which takes it exclusive), the one held
 * given back first; 0 or -1 (reported).
 * engine_journal_catch_up: once the catalog is up to date with the
 * repository (and its generation checked), write the journal rows the
 * repository lacks; a failure is a warning (the next run tries again).
 */
int engine_prepare_write(struct repo *r, struct catalog *c, double wait,
    int exclusive);
int engine_writer_shared(struct repo *r, double wait);
void engine_journal_catch_up(struct repo *r, struct catalog *c);
/* Before a writer makes a snapshot complete: 0 while its writer lock is
 * its own; -1 (reported) once its lease was lost (not renewed within its
 * length), when what the snapshot builds on may have been pruned. */
int engine_lock_kept(struct repo *r);

/*
 * The catalog as a cache of the repository.  engine_sync reads the packs
 * the catalog does not know (their index trailers and snapshot records,
 * never data records) and adds their snapshots, chunks and packs to it.
 * An up-to-date catalog costs a listing of packs/ and one query.  A
 * record that cannot be read or trusted, or whose parent is not in the
 * repository, is reported and left out; a pack whose index cannot be read
 * is reported and read again next time.  0, or -1 (the catalog could not
 * be written; reported).  The caller holds the catalog's writer lock.
 */
struct sync_result {
	size_t packs_new;	/* packs added to the catalog */
	size_t packs_bad;	/* unreadable: left for the next time */
	size_t packs_missing;	/* in the catalog, not in the repository,
				 * and still needed */
	size_t packs_dropped;	/* gone (pruned elsewhere), not needed */
	size_t records;		/* snapshots added */
	size_t records_bad;	/* records left out */
	size_t journal;		/* drill results and failed runs added */
	/* A write-only key (views only): */
	size_t known;		/* snapshots known by their views */
	size_t forgotten;	/* forgets of the authority learnt */
	size_t condemned;	/* packs a prune's mark names */
	uint64_t bytes_read;	/* of packs: headers, indexes, records */
	double seconds;
};
int engine_sync(struct repo *r, struct catalog *c, struct sync_result *res);

/*
 * engine_sync before a command uses the catalog: with the catalog's
 * writer lock when it is free (taken and given back) or already held; when
 * another coffer process on this host holds it, that writer is keeping the
 * catalog in step and nothing is done.  A sync that adds snapshots says so
 * in one line on a terminal (or with -v).  0, 1 when packs or records
 * had to be left out (reported: damage), or -1 (reported).
 */
int engine_catalog_update(struct repo *r, struct catalog *c);

/*
 * The journal (journal.c): write the drill results and failed runs the
 * repository does not hold yet as one signed record in a new pack, and
 * mark them in the catalog.  flush: the writer lock is held.  flush_try:
 * takes the lock if it is free, else leaves the rows for the next writer
 * (and returns 0).  0 or -1 (reported).
 */
int engine_journal_flush(struct repo *r, struct catalog *c);
int engine_journal_flush_try(struct repo *r, struct catalog *c);

/* How the source of a snapshot of a tar stream starts ("tar:-"). */
#define ENGINE_TAR_SOURCE "tar:"

/* No level asked: incremental when a complete full exists, else full. */
#define LEVEL_AUTO (-1)

struct backup_opts {
	const char *dataset;
	const char *source;		/* the dataset's root directory */
	/* Or a tar stream (fs_walk_open_tar): a path, or "-" for standard
	 * input; source is then not used.  NULL: a walk of source.  The
	 * snapshot's source is then ENGINE_TAR_SOURCE and the stream's. */
	const char *from_tar;
	int level;			/* LEVEL_* or LEVEL_AUTO */
	struct fs_walk_opts walk;
	int compress_level;		/* zstd level; 0 = default */
	int threads;			/* 0 = one per processor */
	int new_source;			/* the dataset's root moved on purpose */
	int64_t time_ns;		/* the snapshot's time; 0: now */
	const char *tags;		/* catalog_tags_ok, or NULL */
	/*
	 * Checkpoint rules (coffer-policy(5)).  A file whose mtime or
	 * ctime is less than settle seconds old is held back: it keeps its
	 * previous version, or stays out.  A directory matching a glob of
	 * checkpoints (as excludes match) is held back whole while it
	 * lacks the file require (when set) or holds anything less than
	 * settle seconds old; it keeps its entries of the base's view.
	 * Held back is not a warning: it is said with log_note and counted.
	 */
	double settle;			/* seconds; 0: none */
	const char *require;		/* marker file name, or NULL */
	char *const *checkpoints;
	size_t ncheckpoints;
};

struct backup_result {
	char sid[SNAPSHOT_ID_HEX + 1];
	char parent_sid[SNAPSHOT_ID_HEX + 1];	/* "" for a full */
	int level;
	int depth;
	int64_t files, dirs, others;	/* entries stored in this snapshot */
	int64_t unchanged;		/* entries found unchanged vs. base */
	int64_t deleted;		/* tombstones */
	int64_t changing;		/* files that kept changing while read */
	int64_t bytes_read, bytes_new, bytes_stored;
	int64_t warnings;
	int64_t packs;
	double seconds;
	int64_t held_back;		/* files and checkpoint directories
					 * left for later (settle, require) */
};

/*
 * Take a snapshot of o->source (or of the tar stream o->from_tar, refused
 * members warned about; one that cannot be read to its end, or holds
 * nothing, is ENGINE_ERROR) as dataset o->dataset at o->level: a full
 * reads everything; a differential (base: the last full) or incremental
 * (base: the previous snapshot) stores only entries that changed since its
 * base, plus tombstones.  Durability order as in doc/design.md: packs are
 * durable before the catalog rows that use them commit; the snapshot
 * becomes complete in the last transaction.  ENGINE_OK, ENGINE_WARN (some
 * entries skipped or kept at their previous version), ENGINE_REFUSED (the
 * source is not the dataset's), ENGINE_ERROR or ENGINE_INTERRUPTED.
 */
enum engine_result engine_backup(struct repo *r, struct catalog *c,
    const struct backup_opts *o, struct backup_result *res);

struct consolidate_result {
	char sid[SNAPSHOT_ID_HEX + 1];	/* the new full */
	int64_t files, dirs, others;
	int64_t bytes_stored;		/* its snapshot record */
	double seconds;
};

/*
 * A synthetic full: a new full snapshot of src's dataset whose entries are
 * src's resolved chain, made from catalog rows alone (no source reads),
 * with its own signed snapshot record.  Restoring it equals restoring src;
 * it keeps later chains short.  ENGINE_OK, ENGINE_REFUSED (src not
 * complete) or ENGINE_ERROR.  Needs the writer locks (engine_prepare_write).
 */
enum engine_result engine_consolidate(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *src, struct consolidate_result *res);

struct restore_opts {
	const char *target;
	char *const *paths;		/* subset; NULL/0 = everything */
	size_t npaths;
	int force;			/* target may be non-empty */
	/* A target that was not empty takes the snapshot root's metadata
	 * too (an empty or new one always does). */
	int root_metadata;
	int threads;			/* 0 = one per processor */
	/* Restore only the entries for which filter returns non-zero
	 * (NULL: all).  Directories it leaves out are still made as needed
	 * to hold what is restored, with default metadata. */
	int (*filter)(void *arg, const struct entry *e);
	void *filter_arg;
};

struct restore_result {
	int64_t files;			/* entries restored */
	int64_t bytes;			/* file content written */
	int64_t failed;			/* files that could not be restored */
	int64_t damaged;		/* ... because of their stored data */
	int64_t reused;			/* of bytes, read back from files
					 * restored earlier, not fetched */
	int complete;			/* every entry was taken, if not all
					 * restored */
	double seconds;
};

/*
 * Restore snapshot s (its resolved chain) into o->target.  Every chunk is
 * authenticated and its keyed hash checked before it is written; a file
 * whose data is damaged or missing, or that cannot be written (a full
 * disk), is named, removed, and the rest goes on.  ENGINE_OK,
 * ENGINE_WARN (metadata of some entries could not be set, warned),
 * ENGINE_DAMAGED (some files' data is damaged), ENGINE_ERROR (some files
 * could not be written, or the restore could not run), ENGINE_REFUSED
 * (target not empty, a path not in the snapshot), ENGINE_INTERRUPTED.
 */
enum engine_result engine_restore(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct restore_opts *o,
    struct restore_result *res);

/*
 * Under the writer lock: finish a rewrap that a crash cut short (the
 * intent file), each pack then with its new header whole, and note their
 * hashes in c (may be NULL).  Needs a full key.  0 or -1 (reported).
 */
int engine_key_recover(struct repo *r, struct catalog *c);

#endif
