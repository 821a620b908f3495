/*
 * Bundles: what an export carries offsite (doc/format.md, "Bundles").
 *
 * A bundle is a pax archive of regular files, written and read with
 * libarchive, in this order:
 *
 *   coffer.conf            the repository's, verbatim (its MAC needs the key)
 *   keys/NAME ...          its key slots, verbatim (already encrypted)
 *   keyring                its key epochs' secrets, verbatim (sealed), if any
 *   packs/ab/NAME ...      packs, verbatim (no re-encryption)
 *   coffer-bundle.json     the manifest
 *   coffer-bundle.sig      Ed25519 over "coffer-bundle\0" || manifest
 *
 * The manifest comes last so that a bundle is written in one pass, each
 * pack hashed as it is copied; a reader stages everything and trusts
 * nothing until the signature and every hash checked out.  Members carry
 * no owner, mode or time of the source: names are pack names (random) and
 * the size of a pack, never a file name, path or file size of the data.
 */
#ifndef COFFER_BUNDLE_H
#define COFFER_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"

#define BUNDLE_FORMAT 1
#define BUNDLE_MANIFEST "coffer-bundle.json"
#define BUNDLE_SIG "coffer-bundle.sig"
#define BUNDLE_SUFFIX ".cfb"
#define BUNDLE_HASH_BYTES 32		/* BLAKE2b-256 of each member */
#define BUNDLE_SUM_BYTES 64		/* BLAKE2b-512 of the bundle (b2sum) */
#define BUNDLE_TARGET_MAX 64		/* bytes of a target's name */
#define BUNDLE_META_MAX (1u << 20)	/* coffer.conf, a key slot, manifest */
#define BUNDLE_SLOTS_MAX 32

/* A file the bundle carries, as the manifest lists it. */
struct bundle_file {
	char *name;			/* member name */
	uint64_t size;
	uint8_t hash[BUNDLE_HASH_BYTES];
};

struct bundle_manifest {
	int format;
	uint8_t repo_id[16];
	char target[BUNDLE_TARGET_MAX + 1];
	uint32_t seq;			/* 1, 2, ... within the target */
	int level;			/* LEVEL_FULL, ... (catalog.h) */
	uint32_t base_seq;		/* the bundle it builds on; 0: none */
	uint8_t base_hash[BUNDLE_HASH_BYTES];	/* that bundle's manifest */
	int64_t created_ns;
	char **snapshots;		/* sids (hex) */
	size_t nsnapshots;
	struct bundle_file *files;	/* coffer.conf, keys, packs */
	size_t nfiles;
};

void bundle_manifest_release(struct bundle_manifest *m);
/* Append a file to m (name copied).  0 or -1 (ENOMEM, reported). */
int bundle_manifest_add_file(struct bundle_manifest *m, const char *name,
    uint64_t size, const uint8_t hash[BUNDLE_HASH_BYTES]);
int bundle_manifest_add_snapshot(struct bundle_manifest *m, const char *sid);
/* JSON text of m into out (appended).  0 or -1. */
int bundle_manifest_encode(const struct bundle_manifest *m, struct buf *out);
/*
 * Parse a manifest (already authenticated, still parsed as if hostile):
 * every field present, of its type and range, member names well-formed
 * and unique.  0, or -1 with *why set to a static description.
 */
int bundle_manifest_decode(const void *text, size_t len,
    struct bundle_manifest *m, const char **why);
/* BLAKE2b-256 of a manifest's text: how the next bundle names it. */
void bundle_manifest_hash(const void *text, size_t len,
    uint8_t out[BUNDLE_HASH_BYTES]);
void bundle_manifest_sign(const struct ccrypto_keys *k, const void *text,
    size_t len, uint8_t sig[CCRYPTO_SIG_BYTES]);
int bundle_manifest_verify(const struct ccrypto_keys *k, const void *text,
    size_t len, const uint8_t sig[CCRYPTO_SIG_BYTES]);

/* What a member name is, by its shape alone. */
enum bundle_member {
	BUNDLE_M_BAD = 0,
	BUNDLE_M_CONF,			/* coffer.conf */
	BUNDLE_M_KEY,			/* keys/NAME: NAME hex, 1-64 digits,
					 * and keyring */
	BUNDLE_M_PACK,			/* packs/ab/NAME: a pack name */
	BUNDLE_M_MANIFEST,
	BUNDLE_M_SIG
};
enum bundle_member bundle_member_kind(const char *name);

/*
 * Writing.  out is an open descriptor (a file, a pipe, a child's stdin);
 * the writer never seeks.  Members are added in the order above.
 */
struct repo;
struct storage_put;
struct bundle_writer;
struct bundle_writer *bundle_writer_new(int out, const char *what);
/*
 * out is a pipe to a program (rclone) that reports its own failures: a
 * write that finds the pipe broken fails without a message of its own,
 * which would only say "Broken pipe" before the program's reason.
 */
void bundle_writer_quiet_pipe(struct bundle_writer *w);
/*
 * Copy pack from r, read in ranges, as member packs/ab/NAME; *size gets
 * its size, hash the BLAKE2b-256 of its bytes.  0 or -1 (reported).
 */
int bundle_writer_add_pack(struct bundle_writer *w, struct repo *r,
    const char *pack, uint64_t *size, uint8_t hash[BUNDLE_HASH_BYTES]);
int bundle_writer_add_mem(struct bundle_writer *w, const char *name,
    const void *p, size_t n, uint8_t hash[BUNDLE_HASH_BYTES]);
/* End the archive; sum gets the BLAKE2b-512 of every byte written. */
int bundle_writer_finish(struct bundle_writer *w,
    uint8_t sum[BUNDLE_SUM_BYTES], uint64_t *size);
void bundle_writer_free(struct bundle_writer *w);

/*
 * Reading, as a stream (no seeking): only regular files with safe names
 * (bundle_member_kind), each once, are accepted; anything else ends the
 * read with an error naming it.
 */
struct bundle_reader;
struct bundle_reader *bundle_reader_new(int in, const char *what);
/* The next member: 1 (name valid until the next call), 0 at the end,
 * -1 error (reported). */
int bundle_reader_next(struct bundle_reader *r, const char **name,
    enum bundle_member *kind, uint64_t *size);
/* The current member's data written to the put to (NULL: read and
 * discard), hashed. */
int bundle_reader_copy(struct bundle_reader *r, struct storage_put *to,
    uint8_t hash[BUNDLE_HASH_BYTES]);
/* The current member's data into out (at most max bytes, else -1). */
int bundle_reader_read(struct bundle_reader *r, struct buf *out, size_t max);
/* Bytes read from the stream so far. */
uint64_t bundle_reader_offset(const struct bundle_reader *r);
void bundle_reader_free(struct bundle_reader *r);

#endif
