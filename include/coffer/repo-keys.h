#ifndef COFFER_REPO_KEYS_H
#define COFFER_REPO_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/crypto.h"

/*
 * The key slots of a repository (coffer key): the part of the repo
 * module (src/repo/slots.c, keyring.c) that lists and changes what keys/
 * and the keyring hold.  See doc/format.md ("Key slots") and coffer-key(1).
 */
struct repo;

/*
 * Unlock with keys found elsewhere (a paper key typed back): id must be
 * this repository's and coffer.conf's MAC must check; what names the key
 * in messages.  Takes k (freed on failure).  0 or -1 (reported).
 */
int repo_unlock_with(struct repo *r, struct ccrypto_keys *k,
    const uint8_t id[CCRYPTO_REPO_ID_BYTES], const char *what);
/* The name of the slot in keys/ that unlocked; NULL for a key file. */
const char *repo_unlocked_slot(const struct repo *r);
/* The keyring's name of the key that unlocked r (a slot's, or a full key
 * file's or paper key's 16 hex digits), or NULL (write-only, locked). */
const char *repo_unlocked_name(const struct repo *r);
/*
 * The slot a passphrase tries first, before the others in name order
 * (the one that opened last on this host): each slot tried costs an
 * Argon2id run whose parameters the repository chose.  Before
 * repo_unlock; NULL or "" for none.
 */
void repo_slot_prefer(struct repo *r, const char *name);
/*
 * coffer.conf's generation (its keyring line's: it grows with every key
 * change), authenticated by repo_unlock.
 */
uint64_t repo_generation(const struct repo *r);
/*
 * Before repo_lock, for a rotation: a keyring holding an epoch that
 * coffer.conf does not list (coffer.conf put back from an older copy, or
 * a rotation cut short) does not stop the lock; the rotation numbers
 * past that epoch and writes both anew.
 */
void repo_allow_unlisted(struct repo *r);

/*
 * The key slots in keys/ (coffer key), in name order, read without a
 * passphrase: kind is CCRYPTO_SLOT_HOLDER or _WRITE_ONLY, or 0 for a file
 * this coffer cannot read (reported); mtime_ns is when it was written,
 * 0 when not known (the storage interface does not say: always, now).
 * *slots is malloc'd.  0 or -1 (reported).
 */
#define REPO_SLOT_NAME_MAX 65
struct repo_slot {
	char name[REPO_SLOT_NAME_MAX];	/* in keys/ */
	int kind;
	uint64_t opslimit, memlimit;
	int64_t mtime_ns;
	int unlocked;			/* the slot that unlocked r */
};
int repo_slots(struct repo *r, struct repo_slot **slots, size_t *n);
/*
 * Slot changes, by a holder of the unlocked key: each slot file is
 * written to a temporary name, fsynced and renamed into keys/, and keys/
 * fsynced; no pack is rewritten.  All 0 or -1 (reported).
 * slot_add: a new slot (its name, 16 hex, in name) wrapping a new full
 * key of its own (listed in the keyring under that name, under the
 * writer lock) under pass, or the unlocked key's write-only part when
 * write_only (a write-only key adds only those).  memlimit: Argon2id
 * bytes, 0 the default.  slot_passwd: the slot called name (or
 * "keys/name") under pass, at memlimit (0: its old cost); a full slot
 * gets a new key of its own.  slot_remove: the slot or key file called
 * name leaves the keyring (written under a new key), then keys/; refuses
 * the last key that reads, and any removal with a write-only key.
 */
int repo_slot_add(struct repo *r, const char *pass, size_t passlen,
    uint64_t memlimit, int write_only, char name[REPO_SLOT_NAME_MAX]);
int repo_slot_passwd(struct repo *r, const char *name, const char *pass,
    size_t passlen, uint64_t memlimit);
int repo_slot_remove(struct repo *r, const char *name);

/*
 * Key epochs (coffer key rotate; doc/format.md, "Key epochs").  Epoch 1
 * is the X25519 pair derived from the master secret; coffer.conf lists
 * the later ones and the keyring holds the secrets of all.
 * repo_epochs: coffer.conf's list (epochs from 2, increasing), valid
 * until r changes; needs no key.
 * Under the writer lock, with a full key: repo_epoch_rotate makes epoch
 * max + 1 (its secret to the keyring, then its public key to
 * coffer.conf), the one every writer seals to from then on;
 * repo_epoch_retire removes epoch's secret from the keyring and marks it
 * retired in coffer.conf (the caller checked no pack needs it; the newest
 * is refused).  0 or -1 (reported).
 */
#define REPO_EPOCHS_MAX 63
struct repo_epoch {
	uint32_t epoch;
	uint8_t pk[CCRYPTO_KEY_BYTES];
	int64_t created_ns;
	int64_t retired_ns;		/* 0 while not retired */
};
int repo_epochs(const struct repo *r, const struct repo_epoch **v,
    size_t *n);
/* When epoch 1 was retired (coffer.conf's "epoch 1 retired"), or 0. */
int64_t repo_epoch1_retired(const struct repo *r);
/*
 * A new full key file's key (coffer key export): a holder key over r's
 * material with a recipient of its own, listed in the keyring (written,
 * under the writer lock) as name (16 hex digits, made here).  *k is the
 * caller's to free.  0 or -1 (reported).  key_file_drop: take name out of
 * the keyring again, when the key could not be handed out.
 */
int repo_key_file_new(struct repo *r, struct ccrypto_keys **k,
    char name[REPO_SLOT_NAME_MAX]);
void repo_key_file_drop(struct repo *r, const char *name);
/*
 * The names the keyring lists (read without a key, for coffer key list:
 * the keyring authenticates them only when it opens) into names[0..max),
 * *n of them (none when there is no keyring).  0, or -1 (reported).
 */
int repo_keyring_names(struct repo *r,
    char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1], size_t max, size_t *n);
int repo_epoch_rotate(struct repo *r, uint32_t *epoch);
int repo_epoch_retire(struct repo *r, uint32_t epoch);

/*
 * A bundle's coffer.conf and keyring (files as repo_meta_files gives them)
 * into r when its coffer.conf lists a newer key epoch than r's and
 * authenticates under r's key (import, under the writer lock, full key):
 * a chain of bundles that spans a rotation then reads on a machine made
 * from its first bundle.  0 (taken, or nothing newer), -1 (reported).
 */
struct repo_file;
int repo_adopt_epochs(struct repo *r, const struct repo_file *files,
    size_t n);

/*
 * The rewrap intent (REPO/rewrap, doc/format.md): written whole and
 * durably before pack headers change in place, removed after.
 * intent_read: 1 and its bytes (malloc'd), 0 when there is none, -1 on
 * error.  All reported.
 */
int repo_intent_write(struct repo *r, const void *data, size_t len);
int repo_intent_read(struct repo *r, unsigned char **data, size_t *len);
int repo_intent_remove(struct repo *r);

#endif
