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
 * Before writing (access.c): take the repository's and the catalog's
 * writer locks (waiting at most wait seconds each; < 0 for ever, 0 not at
 * all), remove what a crashed run left in tmp/, finish a key rewrap cut
 * short, mark a crashed run's snapshots failed and record which key
 * writes.  0 or -1.  engine_journal_catch_up: once the catalog is up to
 * date with the repository (and its generation checked), write the
 * journal rows the repository lacks; a failure is a warning (the next
 * run tries again).
 */
int engine_prepare_write(struct repo *r, struct catalog *c, double wait);
void engine_journal_catch_up(struct repo *r, struct catalog *c);

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
	uint64_t bytes_read;	/* of packs: headers, indexes, records */
	double seconds;
};
int engine_sync(struct repo *r, struct catalog *c, struct sync_result *res);
/* What catalog check says with a write-only key (catalog-known.h). */
struct catalog_known_counts;
int engine_known_counts(struct catalog *c, struct catalog_known_counts *n);

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

/*
 * Retention (forget.c): which complete snapshots the rules (or names) keep
 * and which go.  With rules, a kept snapshot whose parent goes is first
 * rebased (catalog_snapshot_rebase, records only) onto its nearest kept
 * ancestor, or made a full, and written again as a record of the next
 * revision signed by the authority (a full key only: ENGINE_REFUSED
 * otherwise), so that only what the rules keep stays.  A named one that a
 * kept one builds on is refused (ENGINE_REFUSED, naming them).  Unless
 * dry_run, the rest are forgotten: their rows leave the catalog and their
 * ids go to the repository's journal (the writer locks are held).  Data
 * goes with engine_prune.  ENGINE_OK, ENGINE_REFUSED or ENGINE_ERROR.
 */
struct forget_opts {
	struct retention rules;
	const char *dataset;		/* NULL: every dataset */
	const char *const *sids;	/* names to forget instead of rules */
	size_t nsids;
	int dry_run;
	int force;			/* forget named ones marked kept too */
};
struct forget_item {
	char sid[SNAPSHOT_ID_HEX + 1];
	char parent_sid[SNAPSHOT_ID_HEX + 1];
	char *dataset;
	char *tags;			/* "a,keep" or NULL */
	int level;
	int64_t time_ns;
	int keep;
	unsigned reasons;		/* RETAIN_* */
	char needed_by[SNAPSHOT_ID_HEX + 1];	/* RETAIN_CHAIN: for whom */
	/* Kept, its parent not: rebased to rebase_level on onto ("" for a
	 * full). */
	int rebase;
	int rebase_level;
	char onto[SNAPSHOT_ID_HEX + 1];
};
struct forget_result {
	struct forget_item *items;	/* by dataset, newest first */
	size_t n;
	size_t forget;			/* items not kept */
	size_t forgotten;		/* of those, removed (not dry_run) */
	size_t rebase;			/* items kept to be rebased */
	size_t rebased;			/* of those, rebased (not dry_run) */
};
enum engine_result engine_forget(struct repo *r, struct catalog *c,
    const struct forget_opts *o, struct forget_result *res);
void engine_forget_result_release(struct forget_result *res);

/*
 * Prune (prune.c): delete the packs no remaining snapshot needs anything
 * of, and repack those whose unneeded share is above max_unused (live
 * chunks copied into new packs), in the crash-safe order prune.c
 * describes.  The writer locks are held.  With dry_run, only the plan.
 * ENGINE_OK, ENGINE_ERROR or ENGINE_INTERRUPTED.
 */
struct prune_opts {
	double max_unused;		/* 0..1: repack above this share */
	int dry_run;
};
struct prune_result {
	int64_t packs;			/* in the catalog before */
	int64_t packs_deleted;		/* nothing needed: deleted */
	int64_t packs_repacked;		/* live chunks moved, then deleted */
	int64_t packs_written;		/* new packs */
	int64_t chunks_moved;
	uint64_t bytes_before;		/* of all packs */
	uint64_t bytes_deleted;		/* of the packs deleted or repacked */
	uint64_t bytes_written;		/* of the new packs */
	uint64_t bytes_read;		/* indexes, records, moved chunks */
	double seconds;
};
enum engine_result engine_prune(struct repo *r, struct catalog *c,
    const struct prune_opts *o, struct prune_result *res);

/* No level asked: incremental when a complete full exists, else full. */
#define LEVEL_AUTO (-1)

struct backup_opts {
	const char *dataset;
	const char *source;		/* the dataset's root directory */
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
 * Take a snapshot of o->source as dataset o->dataset at o->level: a full
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
 * Integrity: verify (src/engine/verify.c), audit (audit.c), drill
 * (drill.c).  None of them takes the writer locks: they read the
 * repository and write only their own catalog rows.
 */

enum verify_read {
	VERIFY_STRUCTURE = 0,		/* indexes and records only */
	VERIFY_READ_ALL = 1,		/* and every chunk's data */
	VERIFY_READ_PERCENT = 2,	/* ... of a random share of the packs */
	VERIFY_READ_SLICE = 3		/* ... of the packs whose name, as a
					 * number, is n-1 modulo m */
};

struct verify_opts {
	int read;			/* enum verify_read */
	double percent;			/* VERIFY_READ_PERCENT: (0, 100] */
	unsigned slice_n, slice_m;	/* VERIFY_READ_SLICE: 1 <= n <= m */
	double max_seconds;		/* stop after this long; 0: no limit */
	int record;			/* journal the result (verify, run) */
	int64_t now_ns;			/* the result's time (run --now);
					 * 0: the clock */
};

/* A damaged or missing chunk, or a bad snapshot record. */
struct verify_damage {
	uint8_t cid[32];
	char pack[33];			/* "" when in no pack */
	uint64_t offset;
	const char *problem;		/* static text */
};
struct verify_broken {			/* a file that damage breaks */
	char sid[SNAPSHOT_ID_HEX + 1];
	char *dataset;
	char *path;
};
struct verify_record {			/* a snapshot whose record is bad */
	char sid[SNAPSHOT_ID_HEX + 1];
	char *dataset;
	char pack[33];
	const char *problem;
};

struct verify_pack {			/* in packs/, refused: forged or damaged */
	char pack[33];
};
struct verify_meta {			/* a damaged record, by what it holds */
	char pack[33];
	uint64_t offset;
	int type;			/* enum pack_record_type */
	char *loses;			/* what a catalog rebuild would lose */
};

struct verify_result {
	char mode[32];			/* "structure", "read-data=3/7", ... */
	int complete;			/* the pass reached its end */
	int resumed;			/* it continued a stopped pass */
	char last_pack[33];		/* where a stopped pass got to */
	int64_t packs_total;		/* packs in the catalog */
	int64_t packs;			/* packs checked by this run */
	int64_t packs_read;		/* ... whose chunks were read */
	int64_t chunks;			/* needed chunks checked */
	int64_t chunks_read;		/* ... read and verified */
	int64_t bytes_read;		/* their plaintext */
	int64_t records;		/* snapshot records checked */
	int64_t earlier_packs;		/* done by the runs this one resumed */
	int64_t earlier_errors;		/* found by them */
	double seconds;
	struct verify_damage *damage;	/* in pack order */
	size_t ndamage;
	int64_t damaged_packs;
	struct verify_broken *broken;	/* by dataset, snapshot, path */
	size_t nbroken;
	int64_t broken_snapshots;
	struct verify_record *bad_records;
	size_t nbad_records;
	struct verify_pack *bad_packs;	/* packs the catalog lacks that do
					 * not open */
	size_t nbad_packs;
	struct verify_meta *bad_meta;	/* damaged snapshot and journal
					 * records; with read, damaged data
					 * records no snapshot needs */
	size_t nbad_meta;
	size_t meta_errors;		/* of them, snapshot and journal
					 * records: the data ones cost
					 * nothing, and are a warning */
};

/*
 * Check that every chunk a complete snapshot needs is in a pack that
 * exists, whose header opens and whose index decrypts and lists the chunk
 * where the catalog says, that each complete snapshot's signed record
 * is in its pack and its signature holds, and that every snapshot and
 * journal record of every pack reads (a damaged one is named with what a
 * catalog rebuild would lose: the snapshots, drills, runs it holds).
 * Each pack is read once, in name order.  A pass that starts also names
 * each pack in packs/ that the catalog lacks because it does not open
 * (forged or damaged).  With o->read, also read and verify (AEAD and
 * keyed hash) every data record of all or some packs, the needed chunks
 * and the others, each pack in offset order.
 * With o->max_seconds, stop after the pack during which the limit passes
 * and save where the pass got to; the next run of the same mode resumes
 * there, and a pass that completes forgets it.  With o->record, the
 * run's result (what was read, what was found) is a catalog row and a
 * journal record (written now when no writer holds the repository, else
 * by the next writer), so that every host and bundle knows it.  Damaged and missing
 * chunks are mapped to the snapshots and files they break.
 * ENGINE_OK, ENGINE_DAMAGED (anything wrong), ENGINE_ERROR, or
 * ENGINE_INTERRUPTED (the next run resumes where this one stopped).
 * The result is released with engine_verify_result_release.
 */
enum engine_result engine_verify(struct repo *r, struct catalog *c,
    const struct verify_opts *o, struct verify_result *res);
void engine_verify_result_release(struct verify_result *res);

enum audit_change {
	AUDIT_CORRUPT = 1,	/* content changed, size and mtime did not */
	AUDIT_MODIFIED = 2,	/* content, size, mtime, type or target */
	AUDIT_MISSING = 3,	/* in the snapshot, not on disk */
	AUDIT_NEW = 4,		/* on disk, not in the snapshot */
	AUDIT_UNREADABLE = 5	/* could not be read (warned) */
};

struct audit_opts {
	const char *source;		/* NULL: the snapshot's source */
	struct fs_walk_opts walk;
	/* Each difference, in path order.  kind: the entry's type on disk,
	 * else in the snapshot.  offset: for AUDIT_CORRUPT, where the first
	 * chunk that differs starts.  A non-zero return stops the audit
	 * and is returned. */
	int (*report)(void *arg, int change, const char *path, int kind,
	    int64_t offset);
	void *arg;
};

struct audit_result {
	int64_t entries;		/* entries seen on disk */
	int64_t files;			/* regular files rehashed */
	int64_t bytes;			/* what they held */
	int64_t corrupt, modified, missing, added, unreadable;
	int64_t recut;			/* files whose bytes matched although
					 * their chunks did not (holes mapped
					 * differently) */
	double seconds;
};

/*
 * Audit the live data against snapshot s: walk o->source, rechunk and
 * rehash each regular file whose size and mtime match its entry (the
 * backup's chunker and keyed hash), and compare: changed content with
 * unchanged size and mtime is silent corruption.  Needs the keys, writes
 * nothing.  ENGINE_CORRUPTION, ENGINE_WARN (no corruption, some file
 * unreadable), ENGINE_OK, ENGINE_REFUSED (s not complete, or with no
 * source), or ENGINE_ERROR.
 */
enum engine_result engine_audit(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct audit_opts *o,
    struct audit_result *res);

struct drill_opts {
	double sample;			/* percent of the files; 0 = all */
	const char *scratch;		/* where to make the scratch directory;
					 * NULL: $TMPDIR, else /tmp */
	int no_write;			/* stream and verify, do not write */
	int keep;			/* keep the scratch directory */
	double rto, rpo;		/* objectives in seconds; 0: none */
	int64_t now_ns;			/* the drill's time, which the RPO is
					 * measured at; 0: now */
};

struct drill_failure {
	char *path;
	char *what;
};

struct drill_result {
	struct catalog_drill rec;	/* what was recorded in the catalog */
	char *scratch;			/* the scratch directory, or NULL */
	int scratch_kept;		/* ... still there (--keep, or it could
					 * not be removed) */
	int64_t entries_total;		/* entries in the snapshot */
	int rto_missed, rpo_missed;
	struct drill_failure *failures;	/* in path order */
	size_t nfailures;
};

/*
 * Rehearse the recovery of snapshot s: restore it, or a deterministic
 * sample of its files, into a fresh scratch directory (or stream its
 * chunks through verification), check every entry's content and metadata
 * against the catalog, time it, compare with the objectives (RTO: the
 * restore time, estimated for the whole snapshot from a sample; RPO: the
 * age of the dataset's newest complete snapshot) and record the result in
 * the drill table.  ENGINE_OK (pass), ENGINE_DAMAGED (fail),
 * ENGINE_OBJECTIVE (missed objective), ENGINE_ERROR (failed on files the
 * restore could not write, or no drill could be run), ENGINE_REFUSED (s
 * not complete) or ENGINE_INTERRUPTED.  Release res with
 * engine_drill_result_release.
 */
enum engine_result engine_drill(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct drill_opts *o,
    struct drill_result *res);
void engine_drill_result_release(struct drill_result *res);

/*
 * Offsite export (export.c): a bundle of what target lacks for the chain
 * of snapshot (NULL: every complete snapshot), written to to (a
 * directory, "-", "rclone:REMOTE:PATH"; remote.h), with a .b2sum sidecar
 * where it is not a pipe, then recorded in the catalog.  No record is
 * decrypted (the catalog knows every pack a record's parts are in), so a
 * write-only key exports; with one, a snapshot whose parts' packs the
 * catalog does not know (kept since schema 9) is ENGINE_REFUSED.
 */
struct export_opts {
	const char *target;		/* the target's name */
	const char *to;			/* where the bundle goes */
	const struct catalog_snapshot *snapshot;	/* NULL: all */
	int level;			/* LEVEL_* or LEVEL_AUTO */
	int64_t now_ns;			/* the bundle's time; 0 now */
};
struct export_result {
	char name[128];			/* TARGET-NNNN.cfb */
	uint32_t seq, base_seq;
	int level;
	size_t snapshots;		/* in the manifest */
	size_t packs;			/* carried */
	size_t journal_packs;		/* of those, packs of the journal */
	uint64_t pack_bytes;		/* their size */
	uint64_t needed_bytes;		/* of that, what the snapshots need:
					 * the rest is other snapshots' data
					 * that shares their packs */
	uint64_t bytes;			/* the bundle's size */
	uint8_t manifest[32];
	char sum[2 * 64 + 1];		/* BLAKE2b-512, hex (the sidecar's) */
	double seconds;
};
enum engine_result engine_export(struct repo *r, struct catalog *c,
    const struct export_opts *o, struct export_result *res);

/*
 * Import (import.c): bundles from a directory, a pipe or an rclone
 * remote, each checked whole (signature, repository, every member's
 * name, size and hash, its place in the target's chain) before any pack
 * of it is made visible; then the catalog is brought up to date.  With
 * init, the repository at init_path is first created from the first
 * bundle (coffer.conf and key slots) and opened by open_new, which
 * unlocks it with the user's key and opens its catalog.
 */
struct import_opts {
	const char *from;		/* directory, "-", rclone:... */
	const char *init_path;		/* import --init: the new repo */
	int (*open_new)(void *arg, const char *path, struct repo **r,
	    struct catalog **c);
	void *arg;
};
struct import_result {
	size_t bundles;			/* imported */
	size_t skipped;			/* already imported */
	size_t packs;			/* made visible */
	uint64_t bytes;			/* read from bundles */
	double seconds;
	struct sync_result sync;
};
enum engine_result engine_import(struct repo **r, struct catalog **c,
    const struct import_opts *o, struct import_result *res);

/*
 * A drill from offsite bundles alone (offsite.c): the bundles at from are
 * imported into a scratch repository and catalog (under drill->scratch,
 * else $TMPDIR, else /tmp; removed afterwards unless drill->keep), which
 * open_scratch opens with the user's key at repo and catalog; the
 * snapshot named there (into *s, which the caller releases) is drilled
 * as engine_drill does, and the result also recorded in host's drill
 * history with source.  engine_drill's results, or those of
 * engine_import when the bundles would not import.
 */
struct drill_bundles_opts {
	const char *from;		/* directory, "-", rclone:... */
	const char *snapshot;		/* its name there: DATASET@latest */
	const char *source;		/* for the history: "bundles:FROM" */
	const struct drill_opts *drill;
	int (*open_scratch)(void *arg, const char *repo,
	    const char *catalog, struct repo **r, struct catalog **c);
	void *arg;
};
enum engine_result engine_drill_bundles(struct catalog *host,
    const struct drill_bundles_opts *o, struct catalog_snapshot *s,
    struct drill_result *res, struct import_result *imp);

/*
 * Under the writer lock: finish a rewrap that a crash cut short (the
 * intent file), each pack then with its new header whole, and note their
 * hashes in c (may be NULL).  Needs a full key.  0 or -1 (reported).
 */
int engine_key_recover(struct repo *r, struct catalog *c);

#endif
