#ifndef COFFER_STORE_LEASE_H
#define COFFER_STORE_LEASE_H

/*
 * Private to the object stores (src/store/s3.c, src/store/rclone.c):
 * what they share.  A lease is how a store without locks locks: an
 * object, "coffer-lease 1 TOKEN EXPIRES INFO", read, written and removed
 * through the store's own calls (struct lease_io).  And the waits of
 * their retries.
 */
#include <stddef.h>
#include <stdint.h>

#include "coffer/storage.h"

#define LEASE_TTL 900.0		/* a lease's default length, seconds */
#define LEASE_MAX 4096		/* bytes of a lease object */
#define LEASE_TOKEN 33		/* a token: 32 hex digits and a NUL */

/*
 * A store's object calls on the store's own keys (under locks/, which
 * names refuse): what names the object in messages ("'locks/NAME'").
 * get: the object whole, at most max bytes, malloc'd and NUL-terminated
 * into *data: 0, STORAGE_MISSING or -1 (recorded).  put: written whole
 * (replaced): 0 or -1.  del: removed, best effort.  list: every key
 * that begins with prefix (a key ending in '/'), a key as get takes it,
 * to fn (with its size), in no order, every page of the listing: 0,
 * fn's non-zero value, or -1 (recorded).
 */
struct lease_io {
	int (*get)(void *arg, const char *key, const char *what, size_t max,
	    char **data);
	int (*put)(void *arg, const char *key, const char *what,
	    const void *data, size_t len);
	void (*del)(void *arg, const char *key, const char *what);
	int (*list)(void *arg, const char *prefix, const char *what,
	    int (*fn)(void *, const char *, uint64_t), void *fnarg);
	void *arg;
};

/*
 * storage_lock by a lease (its contract and results: o's wait, ttl,
 * info and shared; 1 busy with the holder's info into holder; 2 asked to
 * stop while waiting): the object prefix "locks/" name, through io.
 * Exclusive: free when missing or expired (or its holder a process of
 * this host that is gone), and no live shared lease is listed under
 * prefix "locks/" name ".shared/": ours is written, then read back,
 * and held if it is still ours.  Best effort: two writers that write
 * within one read's time may both believe they hold it.  Shared: our
 * lease prefix "locks/" name ".shared/" TOKEN, written, then
 * locks/NAME read; held when no live exclusive lease is there (lease.c
 * says why of two takers that overlap one sees the other).  The handle,
 * *l, is lease_unlock's to free.
 */
int lease_lock(const struct lease_io *io, const char *prefix,
    const char *name, const struct storage_lock_opts *o,
    struct storage_lock **l, char *holder, size_t holdersz);

/* The store's holders (storage_lock_holders) of the lock name under
 * prefix: the expired shared leases met are removed.  0 or -1. */
int lease_holders(const struct lease_io *io, const char *prefix,
    const char *name, struct storage_holder **v, size_t *n);

/* The store's unlock, for a lease_lock's l: best effort, the lease
 * removed if it is still ours (else it expires); l freed. */
void lease_unlock(struct storage_lock *l);

/* The store's renew, for a lease_lock's l: the lease made to last its
 * ttl from now, if it is still ours: 0, 1 when it is another's or gone,
 * -1 failed. */
int lease_renew(struct storage_lock *l);

/* Sleep s seconds (through EINTR). */
void store_sleep_for(double s);

/* A uniform double in [0, 1): a retry's jitter. */
double store_jitter(void);

#endif
