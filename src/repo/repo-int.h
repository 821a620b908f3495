#ifndef COFFER_REPO_INT_H
#define COFFER_REPO_INT_H

/*
 * Private to src/repo: the repository handle and what its files share.
 * Nothing outside this directory includes it.
 */
#include <dirent.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/repo.h"
#include "coffer/repo-keys.h"

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

/* The directories of a repository, opened once, never through a link. */
enum repo_dir { DIR_KEYS, DIR_PACKS, DIR_TMP, DIR_LOCKS, NDIRS };
extern const char *const dir_names[NDIRS];

struct repo {
	char *path;			/* for messages */
	int dfd;			/* the repository's directory */
	int dirs[NDIRS];
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
	int lock_fd;
};

/*
 * store.c: the repository directory, reached without following links;
 * the seam a storage interface replaces.
 * rp_store_open: r->path and r->dfd for the repository at path (its
 * coffer.conf must be there); rp_store_dirs: r->dirs, once coffer.conf
 * has been read; rp_store_close closes what they opened.  0 or -1
 * (reported).  rp_open_in: name in dirfd as a regular file (want S_IFREG)
 * or directory (S_IFDIR), never through a link, never blocking on a FIFO,
 * refused naming rel otherwise; an fd or -1 (errno ENOENT when missing,
 * reported unless quiet).  rp_read_in: a small regular file, at most max
 * bytes, malloc'd into *data.  rp_make_layout: a new repository's
 * directories at path (new or empty; *created when the directory was
 * made), its fd or -1; rp_unmake_layout undoes it (closes dfd);
 * rp_remove_made removes what init makes in dfd, and nothing else.
 */
int rp_store_open(struct repo *r, const char *path);
/* One of r->dirs to read with readdir (closedir it): NULL (reported). */
DIR *rp_store_dir(const struct repo *r, enum repo_dir which);
int rp_store_dirs(struct repo *r);
void rp_store_close(struct repo *r);
int rp_open_in(const struct repo *r, int dirfd, const char *name,
    const char *rel, int flags, mode_t want, int quiet);
int rp_read_in(const struct repo *r, int dirfd, const char *name,
    const char *rel, size_t max, unsigned char **data, size_t *len);
int rp_make_layout(const char *path, int *created);
void rp_unmake_layout(int dfd, const char *path, int created);
void rp_remove_made(int dfd, const char *path);

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
