#ifndef COFFER_REPO_INT_H
#define COFFER_REPO_INT_H

/*
 * Private to src/repo: the repository handle and what its files share.
 * Nothing outside this directory includes it.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/repo.h"
#include "coffer/repo-keys.h"
#include "coffer/storage.h"

/* coffer.conf: a few lines, and one of about 130 bytes per key epoch. */
#define CONF_MAX 16384
#define KEYRING_MAX 65536
#define INTENT_MAX (1u << 20)
#define SLOT_MAX 65536
#define KEYFILE_MAX 4096
/*
 * Files in keys/ tried with a passphrase.  Each costs an Argon2id run:
 * whoever can write the repository must not be able to make opening it
 * arbitrarily slow.
 */
#define SLOT_FILES_MAX 32
/* A keyring generation is at most this (coffer.conf's keyring line). */
#define KEYRING_GEN_MAX (1ULL << 53)

struct repo {
	char *path;			/* storage_where, for messages */
	struct storage *st;		/* every object goes through it */
	uint8_t id[CCRYPTO_REPO_ID_BYTES];
	char id_hex[2 * CCRYPTO_REPO_ID_BYTES + 1];
	struct chunker_params chunker;
	/* coffer.conf up to (not including) its "mac" line, and the MAC. */
	unsigned char *conf;
	size_t conf_len, conf_body_len;
	uint8_t mac[CCRYPTO_MAC_BYTES];
	struct ccrypto_keys *keys;
	/* The key epochs from 2 on that coffer.conf lists. */
	struct repo_epoch epochs[REPO_EPOCHS_MAX];
	size_t nepochs;
	int64_t retired1_ns;		/* epoch 1 retired; 0 */
	uint64_t keyring_gen;		/* its keyring's */
	uint8_t keyring_mac[CCRYPTO_MAC_BYTES];	/* of that line */
	int keyring_bad;		/* there, and did not open */
	/* The authority's signature of the bytes before its line. */
	uint8_t auth_sig[CCRYPTO_SIG_BYTES];
	size_t auth_body_len;
	char slot[NAME_MAX + 1];	/* the slot that unlocked; "" else */
	char prefer[NAME_MAX + 1];	/* the slot to try first; "" */
	int allow_unlisted;		/* a rotation may mend the keyring's
					 * epoch that coffer.conf lacks */
	struct storage_lock *lock;	/* the writer lock, when held */
	int lock_shared;		/* ... and held shared */
	char lock_info[512];		/* ... and its line, which names it */
	struct storage_lock *forget_lock;	/* repo_lock_forget's */
};

/* The objects of a repository beside its packs (doc/format.md). */
#define CONF_NAME "coffer.conf"
#define KEYS_DIR "keys"
#define PACKS_DIR "packs"

/*
 * repo.c: rp_get: a small object whole (storage_get), at most max bytes,
 * NUL-terminated: 0, STORAGE_MISSING (reported unless missing_ok) or -1
 * (reported).  rp_exists: 1 when object name is there, 0 when missing,
 * -1 (reported).
 */
int rp_get(const struct repo *r, const char *name, size_t max,
    unsigned char **data, size_t *len, int missing_ok);
int rp_exists(const struct repo *r, const char *name);

/*
 * repo.c: the names fn keeps of a listing of dir (fn's arg is a struct
 * rp_names, fn calls rp_names_add), sorted: a malloc'd array of
 * malloc'd strings.  0 or -1 (reported).
 */
struct rp_names {
	const struct repo *r;
	char **v;
	size_t n, cap;
};
int rp_names_add(struct rp_names *nl, const char *name);
int rp_list_names(const struct repo *r, const char *dir,
    int (*fn)(void *, const char *, uint64_t), char ***names, size_t *n);

/*
 * packfile.c: the object of pack name ("packs/ab/NAME") into obj; a name
 * that is not a pack's is refused (reported unless quiet).  0 or -1.
 */
#define RP_PACK_OBJ_MAX (sizeof(PACKS_DIR) + 4 + PACK_NAME_LEN)
int rp_pack_object(const char *name, char obj[RP_PACK_OBJ_MAX], int quiet);

/* repo.c: a buffer of key material wiped and released; a new key's
 * name (16 hex digits, random); strcmp for qsort of char *. */
void rp_wipe_release(struct buf *b);
void rp_key_name_new(char name[17]);
int rp_cmp_names(const void *a, const void *b);

/*
 * conf.c: coffer.conf.  rp_conf_text: the whole file, signed and MAC'd
 * with k.  rp_conf_parse: text (NUL-terminated, written into) into r's
 * fields, untrusted until rp_verify_conf checks the MAC and signature
 * with r->keys and loads the epochs.  rp_reload_conf reads it again
 * (under the lock); rp_write_conf writes it from r's fields.  0 or -1
 * (reported).
 */
int rp_conf_text(struct buf *b, const struct ccrypto_keys *k,
    const uint8_t *id, const struct chunker_params *c,
    const struct repo_epoch *ep, size_t nepochs, int64_t retired1, uint64_t keyring_gen,
    const uint8_t *keyring_mac);
int rp_conf_parse(struct repo *r, unsigned char *text, size_t len);
int rp_verify_conf(struct repo *r);
int rp_reload_conf(struct repo *r);
int rp_write_conf(struct repo *r);

/*
 * keyring.c: the keyring and the key epochs.  rp_load_epochs: r->keys'
 * epochs from coffer.conf and the keyring; rp_writer_ready: what a
 * writer checks under the lock; rp_write_keyring: the keyring one
 * generation on, then coffer.conf naming it.  0 or -1 (reported).
 */
int rp_load_epochs(struct repo *r);
int rp_writer_ready(struct repo *r);
int rp_write_keyring(struct repo *r);

/* slots.c: the names in keys/, sorted, at most SLOT_FILES_MAX. */
int rp_slot_names(struct repo *r, char ***names, size_t *n);

/* pack.c, for rewrap.c: pack headers. */
#define SEALED_OFF (8 + CCRYPTO_REPO_ID_BYTES + 16)
int rp_header_check(const struct repo *r, const uint8_t *hdr,
    const char *name, const char *path, uint32_t *epoch);
void rp_unseal_error(const char *path, uint32_t epoch, int rc);
void rp_header_set_epoch(uint8_t *hdr, uint32_t epoch);
int rp_pack_key_is_own(struct repo *r, const char *name, const char *path,
    const uint8_t *hdr, uint8_t *key);

/* rewrap.c, for pack.c: a header torn by a rewrap cut short. */
int rp_intent_header(struct repo *r, const char *name, uint8_t *hdr,
    uint32_t *epoch, uint8_t *key);

#endif
