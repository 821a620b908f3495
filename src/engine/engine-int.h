/*
 * Internal to src/engine: the packer, which stores chunks and records in
 * packs in doc/design.md's durability order, shared by backup and
 * consolidate.
 */
#ifndef COFFER_ENGINE_INT_H
#define COFFER_ENGINE_INT_H

#include <stdint.h>

#include "coffer/catalog-record.h"
#include "coffer/catalog.h"
#include "coffer/chunk.h"
#include "coffer/hmap.h"
#include "coffer/repo.h"

/*
 * zstd level 1: on a training tree (bf16 checkpoints, JSONL text,
 * incompressible shards) level 3 stores 0.2% less for 19% more CPU;
 * --compression raises it.
 */
#define DEFAULT_ZSTD_LEVEL 1

/* A snapshot record's header: magic, version, signature. */
#define SNAPSHOT_RECORD_HEADER (4 + 1 + CCRYPTO_SIG_BYTES)

/* A chunk written to the open pack, waiting for the pack to be durable. */
struct pending {
	uint8_t id[CCRYPTO_ID_BYTES];
	int64_t rowid;
	struct pack_entry ent;		/* where it went, once appended */
};

struct packer {
	struct repo *repo;
	struct catalog *cat;
	struct compressor *z;
	int zstd_level;
	struct pack_writer *pw;
	/* The pack before, being made durable by its writer's thread: its
	 * chunks are pend[0..nfinishing). */
	struct pack_writer *finishing;
	size_t nfinishing;
	int64_t fin_pack;		/* its row, once recorded, or 0 */
	size_t nlocated;		/* of its chunks, located so far */
	struct pending *pend;
	size_t npend, cappend;
	struct hmap pend_ids;		/* chunk id -> index in pend */
	struct buf zbuf;		/* compressor output */
	struct buf view;		/* the open pack's view (view.c) */
	uint64_t target_size;		/* flush a pack at this size */
	uint64_t uncommitted;		/* bytes of the packs located since
					 * the last commit */
	/* What this run added. */
	int64_t bytes_new;		/* plaintext of new chunks */
	int64_t bytes_stored;		/* their records in packs */
	int64_t packs;
	/* Snapshot records are also signed by the authority (a full key):
	 * they rewrite snapshots (forget's rebase; packer.c). */
	int authority;
};

/* 0, or -1 (reported).  zstd_level 0 means the default. */
int packer_init(struct packer *p, struct repo *r, struct catalog *c,
    int zstd_level);
/* Drops an unfinished pack (its temporary file is removed). */
void packer_release(struct packer *p);

/*
 * Storing a chunk, in steps so that chunks can be sealed on many threads.
 * packer_lookup:
 * 1 when the repository (or this run) already has the chunk, 0 when it is
 * new; *rowid either way.  A new chunk is reserved: it must then be sealed
 * with packer_writer()'s key (pack_writer_seal) and added with
 * packer_append before the next packer_flush.
 */
int packer_lookup(struct packer *p, const uint8_t id[CCRYPTO_ID_BYTES],
    int64_t *rowid);
/* The open pack, made when there is none; NULL on error. */
struct pack_writer *packer_writer(struct packer *p);
int packer_append(struct packer *p, const uint8_t id[CCRYPTO_ID_BYTES],
    const uint8_t *rec, size_t len, uint32_t plain_len);

/*
 * Make every pack durable in packs/ (the one finishing in the background
 * and the open one), record them and locate their chunks in the catalog,
 * then commit once, and open the next transaction: nothing the caller's
 * transaction holds commits before all of it is durable.  The catalog
 * must be inside a transaction.  0 or -1.
 */
int packer_flush(struct packer *p);

/*
 * When the open pack has reached its target size (PACK_TARGET_SIZE bytes
 * or PACK_TARGET_RECORDS records), start finishing it in the background
 * and go on with a new one; it is recorded here the next time a pack is
 * full, and committed then once 16 packs' worth were recorded since the
 * last commit (committing the caller's transaction too: only for a run
 * whose snapshot is still running), or by packer_flush.
 */
int packer_maybe_flush(struct packer *p);
/*
 * The pack finishing, once durable, located (and the run committed when
 * due), as packer_maybe_flush would do when the next pack fills: a
 * caller with time to spare (backup's recorder between files) spares
 * the one that fills it the wait.  LOCATE_AT_ONCE chunks a call, so that
 * a caller that hands the catalog over between calls keeps each hold
 * short.  0, or -1 (reported).
 */
#define LOCATE_AT_ONCE 1024
int packer_locate_ready(struct packer *p);

/*
 * Sign snapshot s's own catalog rows and store them as a snapshot record
 * in parts (catalog_snapshot_export_parts; each part signed, the head
 * last), the parts added to packs as they are made; sets s->record_pack
 * to the head's pack.  Packs that fill meanwhile are made durable and
 * located but not committed: s is complete in the caller's transaction,
 * which packer_flush commits.  0 or -1.
 */
int packer_snapshot_record(struct packer *p, struct catalog_snapshot *s,
    struct catalog_spool *sp);
/* A spool for a full's record (catalog_spool_new), with the packer's
 * part sizes; NULL when the record is to be read from the catalog. */
struct catalog_spool *packer_record_spool(struct packer *p);

/*
 * Reading snapshot records by pack and record id (the parts a head
 * names), keeping the last pack open.  record_reader_get: 1 with *img
 * pointing at the image of the signed record (valid until the next
 * call), 0 if it is missing, damaged or badly signed (reported), -1 on a
 * fatal error (out of memory).
 */
struct record_reader {
	struct repo *repo;
	struct compressor *z;
	struct pack_reader *pr;
	struct pack_entry *ents;
	size_t nents;
	struct buf data;
	uint64_t bytes_read;
};
void record_reader_init(struct record_reader *rr, struct repo *r);
void record_reader_release(struct record_reader *rr);
/* Free the last record's buffers (a part of a snapshot record is large);
 * the reader stays open for the next. */
void record_reader_trim(struct record_reader *rr);
int record_reader_get(struct record_reader *rr, const char *pack,
    const uint8_t rid[CCRYPTO_ID_BYTES], const uint8_t **img, size_t *len);

/*
 * The snapshot record, format 1 (doc/format.md, "Snapshot record"), in
 * one of two variants told apart by the byte after the magic (a variant,
 * not a version):
 *
 *	"CFSN" | 1 | Ed25519 signature | image
 *	"CFSN" | 2 | Ed25519 signature | authority signature | image
 *
 * the image one part of catalog_snapshot_export_parts or a whole
 * catalog_snapshot_export; the signature (the writer's) over
 * "coffer-snapshot\0" | repository id | image; variant 2's authority
 * signature over SNAPSHOT_REBASE_CTX "\0" | repository id | image.
 * snapshot_record_open checks the form and the signature (with the key
 * slot's public key, never one from the repo) and points *img at the
 * image.  The signed message is built in rec's header, which is then no
 * longer the record's: only the image is left to read.  1 good, 0
 * malformed or badly signed (*why says which; nothing printed).
 */
int snapshot_record_open(const struct repo *r, uint8_t *rec, size_t len,
    const uint8_t **img, size_t *imglen, const char **why);
/*
 * The same, and *authority 1 when the record is of variant 2 and this
 * key could check its authority signature; 0 otherwise.  A variant 2
 * record whose authority signature is bad is refused (0).
 */
#define SNAPSHOT_REBASE_CTX "coffer-rebase"
int snapshot_record_open_auth(const struct repo *r, uint8_t *rec,
    size_t len, const uint8_t **img, size_t *imglen, int *authority,
    const char **why);

/* The same for a journal record (journal.c). */
int journal_record_open(const struct repo *r, const uint8_t *rec,
    size_t len, struct buf *scratch, const uint8_t **img, size_t *imglen,
    const char **why);
/*
 * The catalog's journal rows (all, or those not in the repository yet) as
 * one signed journal record in a new durable pack; the catalog is not
 * changed: *info and *upto are what catalog_pack_add and
 * catalog_journal_mark need.  *n 0: nothing to write, no pack.  0 or -1.
 */
struct catalog_journal_upto;
int journal_write(struct repo *r, struct catalog *c, int all,
    struct pack_info *info, struct catalog_journal_upto *upto, size_t *n);

/*
 * Record a bundle of manifest m in the catalog (export.c): exported or
 * imported, its manifest's hash, file name and size, the packs it
 * carried (packs[0..npacks), kept for an export) and how many.  0 or -1.
 */
struct bundle_manifest;
int engine_bundle_record(struct catalog *c, const struct bundle_manifest *m,
    int exported, const uint8_t hash[32], const char *name, uint64_t size,
    char *const *packs, size_t npacks, int64_t ncarried);

/* Hostname (malloc'd; "" when unknown), for snapshot rows. */
char *engine_host_name(void);

/*
 * Checkpoint rules (checkpoint.c, backup_opts' settle, require and
 * checkpoints).  checkpoint_unsettled: 1 if times this recent are within
 * o's settle time of the host's clock.  checkpoint_held: 1 if directory
 * rel below o->source is a checkpoint to hold back whole (*why says why),
 * else 0; one that cannot be read is left to the walk (0).
 * checkpoint_within: 1 if a directory above path (below o->source) is a
 * checkpoint, the outermost such one being path's first *len bytes; 0 if
 * none is.
 */
struct backup_opts;
int checkpoint_unsettled(const struct backup_opts *o, int64_t mtime_ns,
    int64_t ctime_ns);
int checkpoint_held(const struct backup_opts *o, const char *rel,
    const char **why);
int checkpoint_within(const struct backup_opts *o, const char *path,
    size_t *len);


/*
 * View records (view.c; doc/format.md, "View record"): what every key may
 * read of a pack besides its index.  note_snapshot: add snapshot s, whose
 * record's head is going into the open pack, to view v.  note_forgotten:
 * add the forgotten rows a journal record holds (catalog_journal_export's
 * all and upto), signed by the authority; nothing with a write-only key
 * or without such rows.  view_write: add v to pack w as its view record
 * and empty v (nothing when v is empty).  0 or -1 (reported).
 * view_parse: call sink for each item of the view record of pack; 0, 1
 * when malformed or a forget is not the authority's (reported, the rest
 * left out), -1 on error.
 */
struct catalog_known;
struct catalog_journal_upto;
struct view_sink {
	int (*snapshot)(void *arg, const struct catalog_known *k);
	int (*forgotten)(void *arg, const char *sid, int64_t time_ns);
	/* May be NULL: the authority's signature of journal record id. */
	int (*journal)(void *arg, const uint8_t *id, const uint8_t *sig);
	void *arg;
	/* May be NULL: pack condemned by a prune at time_ns (authority's). */
	int (*condemned)(void *arg, const char *pack, int64_t time_ns);
};
int view_note_snapshot(struct buf *v, const struct catalog_snapshot *s,
    uint32_t revision);
int view_note_forgotten(struct repo *r, struct catalog *c, int all,
    const struct catalog_journal_upto *upto, struct buf *v);
int view_write(struct pack_writer *w, struct repo *r, struct buf *v);
/*
 * note_journal: the authority's signature of journal record id (image
 * img), so that readers take its drills and verifies; nothing with a
 * write-only key.  0 or -1.  journal_signed: 1 if sig (from a view) is
 * the authority's over img, else 0.
 */
int view_note_journal(struct repo *r, const uint8_t id[CCRYPTO_ID_BYTES],
    const uint8_t *img, size_t len, struct buf *v);
int view_journal_signed(struct repo *r, const uint8_t *sig,
    const uint8_t *img, size_t len);
/* The margin of prune's marks and of what forget keeps for a backup
 * beside it (prune.c): clocks apart, listings late; nanoseconds. */
int64_t engine_margin_ns(void);
/* note_condemned: prune's mark, packs condemned at time_ns, signed by the
 * authority (a full key: the caller checks).  0 or -1. */
int view_note_condemned(struct repo *r, int64_t time_ns,
    const char *const *packs, size_t n, struct buf *v);
int view_parse(struct repo *r, const uint8_t *p, size_t len,
    const char *pack, const struct view_sink *sink);

/* The pack entry of a chunk where the catalog locates it (places.c). */
void loc_entry(const struct catalog_chunk_loc *l, struct pack_entry *e);

/*
 * Reading a chunk where a pack's index says it is (places.c), before
 * trusting that place: an index is its writer's word, and a write-only
 * key holder can name any chunk id over content of its own.  A check
 * keeps the pack it last read open (the places asked about in a row are
 * mostly in one or two packs); z and out are the caller's.
 * place_check_first: the index of the first of the n places whose
 * record authenticates and hashes to its id, or -1 when none does (what
 * each one that does not holds is reported as a warning, and *bad, when
 * not NULL, gets its index, as many as n); *bytes grows by what was
 * read.  place_check_release closes the pack kept open.
 */
struct place_check {
	struct repo *repo;
	struct compressor *z;
	struct buf *out;
	struct pack_reader *pr;
};
int place_check_first(struct place_check *pc,
    const struct catalog_chunk_place *places, size_t n, size_t *bad,
    size_t *nbad, uint64_t *bytes);
/*
 * The n chunk rows, damaged where the catalog locates them (verify,
 * restore): each one another pack holds too (a copy the catalog learnt
 * of) is read there, and the first whole copy becomes its place, with a
 * warning naming the pack; copies found not to be the chunk are
 * forgotten.  rows keeps, in order, the rows not taken, *n of them, even
 * after an error.  taken, unless NULL, gets at [i] the pack taken for
 * the i-th row given, or "".  *ntaken how many were.  0 or -1 (reported).
 */
int place_take_copies(struct place_check *pc, struct catalog *c,
    int64_t *rows, size_t *n, char (*taken)[33], size_t *ntaken);
void place_check_release(struct place_check *pc);

#endif
