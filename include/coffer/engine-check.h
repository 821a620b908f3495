#ifndef COFFER_ENGINE_CHECK_H
#define COFFER_ENGINE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"

/* Checks of what is stored and what is live: verify, audit, drill (src/engine/verify.c, audit.c, drill.c). */

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
	char copy[33];			/* the pack whose copy, read and
					 * found whole, the catalog locates
					 * it in now; "" none */
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
	size_t from_copies;		/* of them, taken from a copy */
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
 * by the next writer), so that every host and bundle knows it.  With
 * o->read, a damaged or missing chunk that another pack's index names too
 * (a copy the catalog learnt of) is read there, and when it is whole the
 * catalog locates it there (damage[].copy): it breaks nothing.  The
 * other damaged and missing chunks are mapped to the snapshots and files
 * they break.
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

#endif
