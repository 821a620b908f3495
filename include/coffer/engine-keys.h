#ifndef COFFER_ENGINE_KEYS_H
#define COFFER_ENGINE_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/engine.h"
#include "coffer/repo-keys.h"

/*
 * What coffer key does (coffer-key(1)): key slots, key files and paper
 * keys (src/engine/keyslots.c), key epochs (src/engine/keys.c).  Errors
 * are reported; ENGINE_REFUSED is what the key or the request does not
 * allow, said in an error naming what would.
 */

/* 1 when the key that unlocked r is write-only (backs up, reads nothing). */
int engine_key_write_only(const struct repo *r);
/* The keyring's name of the key that unlocked r (a slot's, or a full key
 * file's or paper key's 16 hex digits: what key remove takes), or NULL
 * (a write-only key, or none unlocked). */
const char *engine_key_self(const struct repo *r);
/* The repository's writer lock, waiting at most wait seconds (< 0: for
 * ever; 0: not at all): key changes go one at a time.  0 or -1. */
int engine_key_lock(struct repo *r, double wait);

/*
 * The slots of keys/, in name order (malloc'd into *v, no key needed);
 * kind 0: a file that cannot be read, named in a warning.  0 or -1.
 */
int engine_key_slots(struct repo *r, struct repo_slot **v, size_t *n);

/*
 * Each key's last use to write, by key name (a slot's, or
 * ENGINE_KEY_FILE_FULL / _WRITE_ONLY), newest first: the catalog's
 * key_use rows, which the journal carries.  engine_key_uses_read: from an
 * open catalog.  engine_key_uses_local: from this host's catalog of r as
 * it is (catalog: its path, NULL for the default), *known 0 and nothing
 * read when there is none, or when it was damaged or of another format
 * (moved aside, with a warning, for the next run with a key to rebuild).
 * 0 or -1.  engine_key_uses_release frees.
 */
struct engine_key_uses {
	struct engine_key_use {
		char key[CATALOG_KEY_NAME_MAX + 1];
		int64_t ns;
	} *v;
	size_t n, cap;
};
int engine_key_uses_read(struct catalog *c, struct engine_key_uses *u);
int engine_key_uses_local(struct repo *r, const char *catalog,
    struct engine_key_uses *u, int *known);
/* The last use of key, or 0 when none is known. */
int64_t engine_key_last_use(const struct engine_key_uses *u,
    const char *key);
void engine_key_uses_release(struct engine_key_uses *u);

/*
 * The keys the keyring lists (coffer-key(1), REVOKING A KEY), each once:
 * a slot's (one of the n slots v) or a key file's or paper key's.
 * *out malloc'd.  0 or -1.
 */
struct engine_keyring_entry {
	char id[CCRYPTO_RECIPIENT_NAME_MAX + 1];
	const char *holder;		/* "slot" or "key file" */
};
int engine_keyring(struct repo *r, const struct repo_slot *v, size_t n,
    struct engine_keyring_entry **out, size_t *nout);

/*
 * The key epochs, oldest first (coffer.conf's, readable without a key),
 * each with the packs sealed to it from their headers; *unreadable:
 * packs whose header could not be read (reported).  *v malloc'd.  0 or
 * -1.
 */
struct engine_key_epoch {
	uint32_t epoch;
	int64_t created_ns;		/* 0: epoch 1, as old as the
					 * repository, which records no date */
	int64_t retired_ns;		/* 0: not retired */
	size_t packs;
	int newest;			/* the one new packs are sealed to */
};
int engine_key_epochs(struct repo *r, struct engine_key_epoch **v,
    size_t *n, size_t *unreadable);

/*
 * Under the writer lock (engine_key_lock), with the unlocked key:
 * engine_key_add: a new slot under pass (memlimit: Argon2id bytes, 0 the
 * default), its name into name; a write-only key adds write-only slots
 * only.  engine_key_passwd: the slot called slot under a new pass.
 * engine_key_remove: the slot or key file called name leaves the keyring
 * and keys/; refused with a write-only key, ENGINE_ERROR when it cannot
 * (not a key of the repository, the last key that reads).
 * engine_key_passwd_slot: the slot to change when none is named: the one
 * that unlocked r, else NULL (reported: a key file unlocked it).
 */
enum engine_result engine_key_add(struct repo *r, const char *pass,
    size_t passlen, uint64_t memlimit, int write_only,
    char name[REPO_SLOT_NAME_MAX]);
const char *engine_key_passwd_slot(struct repo *r);
enum engine_result engine_key_passwd(struct repo *r, const char *slot,
    const char *pass, size_t passlen, uint64_t memlimit);
enum engine_result engine_key_remove(struct repo *r, const char *name);

/*
 * The unlocked key as a key file (or a paper key, text to print) into
 * out: a write-only one when write_only (a full key may give one, without
 * the lock), else a new full key listed in the keyring under name (under
 * the writer lock; refused with a write-only key).  engine_key_export_undo
 * takes name out of the keyring again, when the key could not be handed
 * out.  out holds a secret: the caller wipes it (engine_key_wipe).
 */
enum engine_result engine_key_export(struct repo *r, int paper,
    int write_only, struct buf *out, char name[REPO_SLOT_NAME_MAX]);
void engine_key_export_undo(struct repo *r, const char *name);
/* Wipe and release a buffer that held key material. */
void engine_key_wipe(struct buf *b);

/*
 * A key file or paper key read from path ("-": standard input; a file
 * must be private, as key files are), decoded, into *ki.  With r (opened,
 * not unlocked) the whole key is checked against it (coffer.conf's MAC),
 * r is unlocked with it and owns it; without, ki owns it.
 * engine_key_import_file: the key (r's when given) as a key file into
 * out.  engine_key_import_release frees what ki owns.
 * ENGINE_REFUSED: not a key (reported); ENGINE_ERROR: not this
 * repository's, or an error (reported).
 */
struct engine_key_import {
	struct ccrypto_keys *k;		/* NULL once r owns it */
	uint8_t id[CCRYPTO_REPO_ID_BYTES];
	int write_only;
};
enum engine_result engine_key_import(const char *path, struct repo *r,
    struct engine_key_import *ki);
enum engine_result engine_key_import_file(struct repo *r,
    const struct engine_key_import *ki, struct buf *out);
void engine_key_import_release(struct engine_key_import *ki);

/*
 * Key rotation (src/engine/keys.c; coffer-key(1), ROTATION).  Each under
 * the writer lock with a full key (ENGINE_REFUSED with a write-only one).
 * engine_key_rotate: a new key epoch, its number to *epoch; packs written
 * from then on are sealed to it.
 * engine_key_rewrap: first finishes a rewrap cut short, then reseals every
 * pack's key that is not sealed to the newest epoch, in its header only
 * (crash-safe: see pack_rewrap), and updates the catalog's pack hashes.
 * A pack whose key does not open (sealed to an epoch this key does not
 * hold, or damaged) is named and left as it is: ENGINE_DAMAGED at the end.
 * engine_key_retire: refuses epoch 1 (derived from the master secret)
 * and, naming their number, an epoch that packs are still sealed to;
 * else the secret leaves the keyring and coffer.conf marks it retired.
 * engine_key_epoch_packs: how many packs are sealed to each of the n
 * epochs, from their headers (no key needed); *other: packs whose header
 * could not be read (reported).  0 or -1.
 */
struct key_rewrap_result {
	uint32_t epoch;			/* sealed to now */
	uint64_t packs;			/* looked at */
	uint64_t rewrapped;		/* headers rewritten */
	uint64_t skipped;		/* keys that did not open: left */
};
enum engine_result engine_key_rotate(struct repo *r, uint32_t *epoch);
enum engine_result engine_key_rewrap(struct repo *r, struct catalog *c,
    struct key_rewrap_result *res);
enum engine_result engine_key_retire(struct repo *r, struct catalog *c,
    uint32_t epoch);
int engine_key_epoch_packs(struct repo *r, uint32_t *epochs, size_t *counts,
    size_t n, size_t *other);
#endif
