#ifndef COFFER_REPO_H
#define COFFER_REPO_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/chunk.h"
#include "coffer/crypto.h"

/*
 * The repository: a directory on storage that need not be trusted (see
 * doc/format.md).  coffer.conf (public parameters, MAC'd under the meta key),
 * keys/ (key slots), packs/ab/ab... (immutable packs), tmp/, locks/.
 */
#define REPO_FORMAT_VERSION 1
/* Files at the top of a repository, beside coffer.conf. */
#define REPO_KEYRING "keyring"
#define REPO_INTENT "rewrap"

struct repo;

struct repo_init_opts {
	/* Exactly one of: a passphrase for a key slot, or a key file path. */
	const char *passphrase;
	size_t passlen;
	const char *key_file;		/* written, mode 0600, must not exist */
	uint64_t kdf_memory;		/* Argon2id bytes; 0 = default */
	const struct chunker_params *chunker;	/* NULL = defaults */
	char *key_name;			/* when not NULL: the new key's name
					 * in the keyring (17 bytes) */
};

/*
 * Create a repository at path (absent or an empty directory).  Returns 0,
 * or -1 (reported).  On failure nothing half-made is left behind when the
 * directory did not exist before.
 */
int repo_init(const char *path, const struct repo_init_opts *o);

/*
 * Open a repository: read and parse coffer.conf (no keys yet).  NULL when
 * path is not a coffer repository or cannot be read (reported).
 */
struct repo *repo_open(const char *path);

/*
 * Unlock the keys: with a key file (when key_file is set) or by trying the
 * passphrase on each slot in keys/; then verify coffer.conf's MAC.
 * 0, or -1 (reported: "wrong passphrase", "key file does not belong to
 * this repository", "coffer.conf has been tampered with").
 */
int repo_unlock(struct repo *r, const char *key_file, const char *pass,
    size_t passlen);

void repo_close(struct repo *r);

/* Absolute (resolved when opened); for messages. */
const char *repo_path(const struct repo *r);
const uint8_t *repo_id(const struct repo *r);		/* 16 bytes */
const char *repo_id_hex(const struct repo *r);		/* 32 hex */
const struct chunker_params *repo_chunker_params(const struct repo *r);
/* Keys; NULL before repo_unlock. */
const struct ccrypto_keys *repo_keys(const struct repo *r);

/*
 * The repository's writer lock (locks/writer; its info line names this
 * host, pid, time and purpose): repo_lock exclusive, for changes of
 * shared state in place; repo_lock_shared beside other shared holders,
 * for writers that only add new objects.  Waiting at most wait seconds
 * for the holders that exclude it (< 0: for ever; 0: fail at once with
 * "repository is locked by ...").  Held until repo_lock_release or repo_close;
 * asking for the exclusive lock while holding it shared gives the shared
 * one back first.  0 or -1 (reported).
 */
int repo_lock(struct repo *r, double wait);
int repo_lock_shared(struct repo *r, double wait);
/* Shared, if nobody holds it exclusive: 1 taken (or held), 0 held by
 * another writer (not reported), -1 error (reported). */
int repo_lock_try(struct repo *r);
void repo_lock_release(struct repo *r);
enum { REPO_UNLOCKED, REPO_LOCKED_SHARED, REPO_LOCKED };
int repo_lock_held(const struct repo *r);
/* 1 once the lock held is a lease that may be another's (storage_lock_lost). */
int repo_lock_lost(const struct repo *r);
/*
 * A holder, from its info line ("host H pid P since T command C dataset
 * D", the last two when set; a run's or a watch's "datasets A/B/C", "-"
 * for none, in dataset with listed set): repo_lock_parse, 0 or -1 when
 * the line is not one (another program's); since_ns 0 when its time
 * cannot be read.  repo_lock_names: 1 if w may back up dataset (its
 * line names it, or names none: older lines, and a list too long for
 * one, say nothing).  repo_lock_datasets: the datasets this process may
 * back up (a run's, a watch's policy's), for its line.
 * repo_lock_list: the live holders of the writer lock (with others set,
 * all but this process's own), exclusive first, malloc'd into *v
 * (free()); one whose line is not one has only info, shared and expires
 * (since_ns 0: as old as can be).  repo_lock_dataset: the dataset this process backs up, for its
 * line.  0 or -1 (reported).
 */
struct repo_lock_who {
	char host[256];
	long pid;
	char since[48];		/* RFC 3339, UTC, to the nanosecond */
	int64_t since_ns;
	char command[32];
	char dataset[256];
	int listed;			/* dataset is a list: A/B/C */
	int shared;
	long long expires;
	char info[512];			/* the line as written */
};
int repo_lock_parse(const char *info, struct repo_lock_who *w);
int repo_lock_names(const struct repo_lock_who *w, const char *dataset);
void repo_lock_datasets(char *const *names, size_t n);
/* 1 if the holder that wrote lock line info is a process of this host
 * that has ended (what the stores whose locks are leases are told to ask:
 * storage_holder_gone_fn). */
int repo_lock_holder_gone(const char *info);
/* Forgets exclude each other (locks/forget, exclusive), not the writers:
 * two at once would each rebase by a plan the other changes.  A writer
 * takes it shared while its catalog catches up, so that what it builds
 * on is never what a forget in progress removes.  wait: seconds, < 0 for
 * ever, 0 fail at once.  0 or -1 (reported). */
int repo_lock_forget(struct repo *r, int shared, double wait);
void repo_unlock_forget(struct repo *r);
int repo_lock_list(struct repo *r, int others, struct repo_lock_who **v,
    size_t *n);
void repo_lock_dataset(const char *name);
/* The word (the command) this process's lock info ends with. */
void repo_lock_purpose(const char *what);

/* Remove leftovers in tmp/ (packs of a crashed run), never another
 * writer's put in progress (storage_clean).  Writer lock held. */
int repo_clean_tmp(struct repo *r);

/* Path of a pack file, for messages: REPO/packs/ab/<name>; malloc'd. */
char *repo_pack_path(const struct repo *r, const char *name);

/*
 * Every object of the repository goes through the storage interface
 * (include/coffer/storage.h; on the local store never through a link,
 * never blocking on a FIFO, anything that is not what is expected
 * refused, naming it).  Whoever can write the repository cannot make
 * coffer reach outside it.
 *
 * repo_pack_stage: begin the put of pack name (import): its bytes are
 * written to *p (bundle_reader_copy), and it appears whole under
 * packs/ab/ at repo_pack_commit, or not at all (repo_pack_abort, NULL
 * fine); repo_pack_staged once they are all written, so that the put
 * holds no memory until its commit (storage_put_end).  0 or -1
 * (reported).
 * Pack names are PACK_NAME_LEN lowercase hex digits; others are refused.
 */
struct storage_put;
int repo_pack_stage(struct repo *r, const char *name, struct storage_put **p);
int repo_pack_staged(struct storage_put *p);
int repo_pack_commit(struct storage_put *p);
void repo_pack_abort(struct storage_put *p);
/* Delete pack name from packs/ and fsync its directory (prune).  A pack
 * already gone is fine.  0 or -1 (reported). */
int repo_pack_remove(const struct repo *r, const char *name);

/*
 * The names of the packs in packs/, sorted: a malloc'd array of malloc'd
 * strings.  What is not a pack there (other names, a pack in the wrong
 * fan-out directory) is left out with a warning; a fan-out directory that
 * is not one is an error.  0 or -1 (reported).
 */
int repo_list_packs(const struct repo *r, char ***names, size_t *n);

/*
 * What a bare machine needs besides packs to open a repository (export,
 * import --init): coffer.conf and the key slots, as stored (the slots are
 * encrypted; coffer.conf is authenticated by its MAC).  name is the path
 * inside the repository: "coffer.conf", "keys/NAME".
 */
struct repo_file {
	char name[80];
	unsigned char *data;
	size_t len;
};
int repo_meta_files(struct repo *r, struct repo_file **files, size_t *n);
void repo_files_free(struct repo_file *files, size_t n);
/*
 * Create a repository at path (new or empty) from such files, as init
 * does but with the given identity; nothing is trusted until repo_unlock
 * checks coffer.conf's MAC with the key.  On failure nothing is left.
 */
int repo_init_from(const char *path, const struct repo_file *files,
    size_t n);
/* Undo repo_init_from (an import --init that failed): 0 or -1. */
int repo_remove_made(const char *path);
/* 1 if packs/ holds a pack of that name, 0 if not, -1 on error. */
int repo_pack_exists(const struct repo *r, const char *name);

/*
 * Packs.  A pack is: header, records, encrypted index trailer (doc/format.md).
 *   header  = "CFPK" | u8 version (1) | u24 key epoch | repo id[16] |
 *             pack id[16] | sealed pack key[80]
 *   record  = u8 type | u8 flags | u32 plain len | u32 stored len |
 *             nonce[24] | ciphertext(stored len) + tag[16]
 *   trailer = nonce[24] | ciphertext(index) + tag | mac[32] | u32 length
 *             of (nonce..tag) | "CFPI"
 *   mac     = keyed BLAKE2b-256 (id key) of "CFPK" | repo id | pack id |
 *             pack key | nonce..tag | u32 length: only a holder of the
 *             id key makes a pack that opens
 *   index   = u32 count | count * (id[32] | u8 type | u8 flags |
 *             u64 offset | u32 plain len | u32 stored len)
 * Record AD = id | type | repo id | flags | plain len: a record cannot be
 * moved to another id, type or repository, nor its flags flipped.
 * Index AD = "CFPI" | repo id | pack id.
 */
#define PACK_NAME_LEN 32		/* hex of the 16-byte pack id */
#define PACK_HEADER_BYTES (4 + 4 + 16 + 16 + CCRYPTO_SEALED_KEY_BYTES)
/* No pack is smaller: a header and an index of no entry (its count
 * alone), sealed, with its length and magic. */
#define PACK_MIN_BYTES (PACK_HEADER_BYTES + CCRYPTO_NONCE_BYTES + 4 + \
	CCRYPTO_TAG_BYTES + 4 + 4)
#define PACK_RECORD_HEADER_BYTES (1 + 1 + 4 + 4 + CCRYPTO_NONCE_BYTES)
#define PACK_RECORD_MAX (1u << 30)	/* larger records are rejected */
#define PACK_TARGET_SIZE (64u << 20)
/* A pack is also closed at this many records: its writer holds each
 * record's index entry until then, and a 64 MiB pack of tiny files would
 * hold a million. */
#define PACK_TARGET_RECORDS 16384u

enum pack_record_type {
	PACK_REC_DATA = 1,
	PACK_REC_SNAPSHOT = 2,
	PACK_REC_JOURNAL = 3,		/* drill results, failed runs */
	PACK_REC_VIEW = 4		/* what every key may read (view.c) */
};
enum pack_record_flags { PACK_FLAG_ZSTD = 1 };

struct pack_entry {
	uint8_t id[CCRYPTO_ID_BYTES];
	uint8_t type;
	uint8_t flags;
	uint64_t offset;
	uint32_t plain_len;
	uint32_t stored_len;
};

struct pack_info {
	char name[PACK_NAME_LEN + 1];
	uint64_t size;
	/*
	 * Keyed BLAKE2b-256 (id key) of the header and the index trailer.
	 * Not of every byte: that doubled the hashing a backup does, and the
	 * records are authenticated one by one; the trailer names each
	 * record's id, offset and lengths.  Whole-file hashes, for carrying
	 * packs offsite, are computed when they are read for export.
	 */
	uint8_t hash[32];
	uint32_t count;
};

struct pack_writer;

/* Start a new pack in tmp/.  Needs only public material.  NULL on error. */
struct pack_writer *pack_writer_new(struct repo *r);

/*
 * Encrypt payload (stored_len bytes: zstd output when flags has
 * PACK_FLAG_ZSTD, else the plain bytes) as a record and append it.
 * plain_len is the decompressed length.  The record's location is stored
 * in *e (may be NULL).  0, or -1 (reported; the pack is unusable).
 */
int pack_writer_add(struct pack_writer *w, uint8_t type, uint8_t flags,
    const uint8_t id[CCRYPTO_ID_BYTES], const void *payload, size_t stored_len,
    uint32_t plain_len, struct pack_entry *e);

/*
 * The same in two steps, so that records can be sealed on many threads:
 * pack_writer_seal encrypts into out (PACK_RECORD_SIZE(stored_len) bytes)
 * and only reads w, so calls may run concurrently with each other and with
 * pack_writer_append; pack_writer_append (one thread) adds a record sealed
 * by this writer at the end of the pack.  0, or -1 (reported).
 */
#define PACK_RECORD_SIZE(n) \
	((size_t)PACK_RECORD_HEADER_BYTES + (size_t)(n) + CCRYPTO_TAG_BYTES)
void pack_writer_seal(const struct pack_writer *w, uint8_t type,
    uint8_t flags, const uint8_t id[CCRYPTO_ID_BYTES], const void *payload,
    size_t stored_len, uint32_t plain_len, uint8_t *out);
int pack_writer_append(struct pack_writer *w,
    const uint8_t id[CCRYPTO_ID_BYTES], const uint8_t *rec, size_t len,
    struct pack_entry *e);

/* Bytes written so far; the pack's name. */
uint64_t pack_writer_size(const struct pack_writer *w);
const char *pack_writer_name(const struct pack_writer *w);
uint32_t pack_writer_count(const struct pack_writer *w);

/*
 * Write the index trailer, fsync, rename into packs/, fsync the directory.
 * Only after this returns 0 may a catalog transaction reference the pack.
 * The writing is done by the writer's own thread; finish_start writes the
 * trailer and has the thread make the pack durable while the caller goes
 * on, and finish_wait waits for it; finish is the two together.  Nothing
 * may be added after finish_start.
 */
int pack_writer_finish(struct pack_writer *w, struct pack_info *info);
int pack_writer_finish_start(struct pack_writer *w);
int pack_writer_finish_wait(struct pack_writer *w, struct pack_info *info);
/* 1 once finish_wait would not wait (finishing started, the thread done). */
int pack_writer_finish_ready(struct pack_writer *w);

/* Free; an unfinished pack's temporary file is removed.  NULL is fine. */
void pack_writer_free(struct pack_writer *w);

struct pack_reader;

/*
 * Open a pack by name: check the header (magic, version, repository id,
 * pack id = name), unseal its key and check the pack's MAC over its
 * trailer (read in pieces), before anything else in it is read.  NULL
 * (reported) if missing, damaged or forged.
 */
struct pack_reader *pack_reader_open(struct repo *r, const char *name);
/*
 * Open a pack to read its index and view record only, with any key: a
 * write-only key does not unseal the pack key (none of the pack's other
 * records then reads) and the index's seal under the index key, which
 * every key derives, authenticates it.  A full key opens it whole, as
 * pack_reader_open does.  NULL (reported) as pack_reader_open.
 */
struct pack_reader *pack_reader_open_index(struct repo *r, const char *name);
/*
 * A pack a listing named, opened as pack_reader_open (whole) or
 * pack_reader_open_index (index_only) do; one that has gone since (a
 * prune beside) is NULL with *gone set, not reported.
 */
struct pack_reader *pack_reader_open_listed(struct repo *r, const char *name,
    int index_only, int *gone);

/*
 * Read, authenticate, decompress the record described by e and check that
 * the keyed hash of its plaintext equals e->id.  The plaintext replaces
 * out's content.  0, or -1 with the damage reported ("pack 'x': record at
 * offset N: authentication failed").  z may be NULL (one is made).
 */
int pack_reader_get(struct pack_reader *p, const struct pack_entry *e,
    struct compressor *z, struct buf *out);
/* The same into out, which holds e->plain_len bytes (no copy). */
int pack_reader_read(struct pack_reader *p, const struct pack_entry *e,
    struct compressor *z, uint8_t *out);
/*
 * pack_reader_read but for the last check: the record is authenticated
 * (its id is in the AEAD's associated data) and decompressed, and the
 * keyed hash of the plaintext is left to the caller, who must compare it
 * with e->id before trusting a byte (restore hashes eight chunks at once:
 * ccrypto_chunk_ids) and report a difference with pack_report_mismatch.
 */
int pack_reader_read_unhashed(struct pack_reader *p,
    const struct pack_entry *e, struct compressor *z, uint8_t *out);
void pack_report_mismatch(const char *pack, uint64_t offset);
/* The record's stored payload (zstd output when e->flags says so), after
 * authentication, into out: to copy a record into another pack as it is.
 * The keyed hash is not checked (the AEAD binds the id).  0 or -1. */
int pack_reader_get_stored(struct pack_reader *p, const struct pack_entry *e,
    struct buf *out);

/* Read and decrypt the index trailer (its MAC checked again): malloc'd
 * array in *ents, in offset order, records neither overlapping nor
 * outside the pack (else refused as damaged).  0 / -1. */
int pack_reader_index(struct pack_reader *p, struct pack_entry **ents,
    size_t *n);

/*
 * 1 if the len bytes at off of pack name are in memory (the page cache),
 * as far as their first and last bytes tell; 0 if not, or if that cannot
 * be known.  Reading them costs no disk I/O then.  Nothing is reported.
 */
int pack_cached(const struct repo *r, const char *name, uint64_t off,
    uint64_t len);

/* With quiet, a damaged record is reported as a warning, not an error
 * (verify's reading of records nothing needs). */
void pack_reader_set_quiet(struct pack_reader *p, int quiet);
/* The pack's hash (struct pack_info), computed when it was opened. */
const uint8_t *pack_reader_hash(const struct pack_reader *p);
uint64_t pack_reader_size(const struct pack_reader *p);
const char *pack_reader_name(const struct pack_reader *p);
void pack_reader_close(struct pack_reader *p);

/*
 * Key rotation in place (coffer key rotate --rewrap; doc/format.md,
 * "Rewrap intent").  pack_epoch: the key epoch pack name is sealed to,
 * from its header (no key needed).  0 or -1 (reported).
 * pack_rewrap: under the writer lock with a full key, reseal the pack key
 * of each of the n (at most PACK_REWRAP_BATCH) packs in names that is not
 * sealed to the seal epoch, in its header only; changed[i] is 1 for each
 * that was, 0 for one sealed to it already, -1 for one whose key does not
 * open (an epoch this key does not hold, a damaged header: reported, left
 * as it is).  The intent file makes it crash-safe.  0 or -1 (reported).
 * pack_rewrap_recover: finish a rewrap cut short (the intent file), before
 * anything else under the lock: 1 and the packs it rewrote (*names,
 * malloc'd), 0 when there was nothing to finish, -1 (reported).
 */
#define PACK_REWRAP_BATCH 128
int pack_epoch(struct repo *r, const char *name, uint32_t *epoch);
int pack_rewrap(struct repo *r, char **names, size_t n, int *changed);
int pack_rewrap_recover(struct repo *r, char ***names, size_t *nnames);
/* 1 when a rewrap was cut short (its intent is there), 0, -1 (reported). */
int pack_rewrap_pending(struct repo *r);

#endif
