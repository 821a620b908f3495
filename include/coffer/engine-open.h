#ifndef COFFER_ENGINE_OPEN_H
#define COFFER_ENGINE_OPEN_H

#include <stddef.h>

#include "coffer/engine.h"
#include "coffer/storage.h"

/*
 * A repository opened for a command (src/engine/open.c): unlocked, with
 * its catalog brought up to date, ready to write.
 *
 * The catalog is chosen by the repository's id, which only the key
 * authenticates (coffer.conf's MAC), and brought up to date from signed
 * records: a command that uses it unlocks the keys first.  Without a key
 * file, passphrase gives the passphrase (asked only once the repository
 * opened; pass_free wipes it) and the slot that opened last on this host
 * is tried first.  check, when set, is asked once the key is unlocked and
 * before anything is locked or written (what the key cannot do).  A
 * damaged catalog is moved aside and rebuilt (a warning).  With write:
 * engine_prepare_write, then the journal caught up.
 */
struct engine_open_opts {
	const char *repo;		/* the repository (required) */
	const char *catalog;		/* NULL: the default place */
	const char *key_file;		/* NULL: a passphrase */
	int unlock;			/* unlock the keys */
	int want_catalog;		/* open the catalog (unlocks too) */
	int write;			/* a writer: locks, crash recovery */
	int exclusive;			/* ... of shared state in place: the
					 * writer lock exclusive, not shared */
	int rotate;			/* a key rotation: an epoch coffer.conf
					 * does not list does not stop it */
	double wait;			/* for the writer locks */
	double forget_wait;		/* a writer, for a forget in
					 * progress: seconds, < 0 for ever,
					 * 0 fail at once */
	int (*passphrase)(void *arg, char **pass, size_t *len);
	void (*pass_free)(char *pass, size_t len);
	int (*check)(const void *arg, struct repo *r);
	const void *check_arg;
	void *arg;			/* passphrase's */
};

/*
 * engine_open's failures (reported).  ENGINE_OPEN_STORE: the repository's
 * store could not be reached or read (a connection refused or timed out,
 * a server's errors after the retries, an I/O error, a full disk): it may
 * pass.  ENGINE_OPEN_REPO: anything else, the repository's or the
 * catalog's: not a repository, a wrong key, locked by another writer, a
 * hostile or damaged object, a rollback.
 */
enum {
	ENGINE_OPEN_REPO = -1,
	ENGINE_OPEN_STORE = -2
};

/*
 * Open as o says into *r and (with want_catalog) *c.  0; ENGINE_OPEN_REPO
 * or ENGINE_OPEN_STORE (reported) when the repository or its catalog
 * cannot be opened, unlocked, locked or brought up to date; or what
 * passphrase or check returned when not 0 (> 0).  *damaged: the sync
 * left damaged packs or records out (reported).
 */
int engine_open(const struct engine_open_opts *o, struct repo **r,
    struct catalog **c, int *damaged);
/* Close both; either may be NULL. */
void engine_close(struct repo *r, struct catalog *c);
/* The command this process runs, named in the writer lock it takes
 * (coffer locks shows it). */
void engine_lock_purpose(const char *command);
/* The dataset this process backs up, in its lock's info line: a forget
 * beside it keeps what it may build on. */
void engine_lock_dataset(const char *name);
/* A run's or a watch's: the datasets of policy p, which it may back up
 * (a forget beside it keeps what they may build on, and only theirs).
 * 0 or -1 (out of memory, reported). */
struct policy;
int engine_lock_datasets(const struct policy *p);
/*
 * Who holds r's writer lock now (coffer locks), from the info line each
 * holder wrote ("host H pid P since T command C"; fields it lacks are ""
 * and 0): an array malloc'd into *v (free()), exclusive holders first.
 * 0 or -1 (reported).
 */
struct engine_lock_holder {
	char host[256];
	long pid;
	char since[48];		/* RFC 3339, UTC */
	char command[32];
	char dataset[256];	/* a backup's; "" when not said */
	int listed;		/* dataset lists a run's or a watch's
				 * datasets: A/B/C ("" none) */
	int shared;
	long long expires;	/* Unix seconds; 0: held while the process
				 * lives (a local lock) */
	char info[512];		/* the line as written */
};
int engine_lock_holders(struct repo *r, struct engine_lock_holder **v,
    size_t *n);
/* Where r is (absolute, resolved when opened), for messages. */
const char *engine_repo_path(const struct repo *r);

/*
 * coffer init: a new repository at path (absent or an empty directory)
 * with one key, a slot for o->passphrase or the key file o->key_file.
 * 0; 1 if the location is not new (objects under an s3: or rclone:
 * prefix); or -1 (reported, both); nothing half-made is left behind in a
 * directory that did not exist before.
 */
int engine_init(const char *path, const struct repo_init_opts *o);
/*
 * Whether a step failed in the store (the disk, the connection, the
 * server: exit 5) or in the repository (missing, hostile or refused
 * objects, a wrong key: exit 3): engine_store_mark before the step, and
 * engine_store_failed after it failed, 1 if the store failed meanwhile.
 */
struct engine_store_mark {
	int code;
	char msg[STORAGE_MSG_MAX];
};
void engine_store_mark(struct engine_store_mark *m);
int engine_store_failed(const struct engine_store_mark *m);
/* Whether a repository location names object storage ("s3:..."), which
 * has no directory to check first. */
int engine_repo_is_remote(const char *location);
/* The CA bundle for HTTPS object storage (--cacert, COFFER_CACERT). */
void engine_set_cacert(const char *file);

/*
 * Memory for a passphrase on its way to engine_open or engine_init:
 * locked, left out of core dumps, wiped when freed.  engine_secret_new:
 * n bytes, or NULL (reported); engine_secret_free: NULL is fine.
 */
char *engine_secret_new(size_t n);
void engine_secret_free(char *p);

#endif
