/*
 * Leases on object storage (lease.h; doc/design.md, "Leases"): a lock
 * is an object, locks/NAME, holding "coffer-lease 1 TOKEN EXPIRES INFO".
 * Nothing on object storage is conditional, so a lease is taken by
 * writing it and reading it back: the last writer wins, and finds out
 * it won.  The store supplies the object calls; this file is the same
 * for every store.
 *
 * Shared leases: one object each, locks/NAME.shared/TOKEN, in the same
 * format, which only its holder writes (and renews), so no two writers
 * race on it.  A shared taker writes its lease, then reads locks/NAME;
 * an exclusive taker writes locks/NAME (and reads it back), then lists
 * locks/NAME.shared/.  Of two that overlap, at least one sees the other:
 * whichever wrote last read (or listed) after both writes were
 * committed.  If the shared taker's read misses the exclusive lease,
 * that lease was committed after the read, so after the shared lease
 * was, and the exclusive taker's listing, later still, shows it.  Given
 * a listing that shows a committed put: doc/design.md's "Consistency
 * assumed" lets a listing lag, and then an exclusive taker whose
 * listing misses a shared lease written just before may hold its lease
 * beside that shared holder for as long as the lag (seconds on Swift,
 * whose container listings are updated after the put).  A waiting
 * exclusive taker lists again and again, so it sees a lagging lease on
 * a later look; one that finds the lock free at once does not look
 * again.  What the exclusive lock protects must bear that window (the
 * shared holders' writes are immutable and uniquely named).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coffer/hex.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/storage.h"

#include "lease.h"
#include "store-int.h"

#define LEASE_POLL 0.25		/* seconds between looks at a busy lease */

struct lease {
	char token[LEASE_TOKEN];
	long long expires;
	char info[512];
};

struct lease_held {
	struct storage_lock base;
	struct lease_io io;	/* the store's calls, for unlock and renew */
	char *key;
	struct lease mine;	/* as written, for renewals */
};

void
store_sleep_for(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

double
store_jitter(void)
{
	uint32_t x = 0;

	if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
		x = (uint32_t)rand();
	return ((double)x / 4294967296.0);
}

/* The lease at key: 0 (in *l), STORAGE_MISSING or -1.  One that is not
 * a lease is an expired one, to be replaced. */
static int
lease_read(const struct lease_io *io, const char *key, const char *what,
    struct lease *l)
{
	char *data = NULL;
	int rc, off = 0;

	memset(l, 0, sizeof(*l));
	if ((rc = io->get(io->arg, key, what, LEASE_MAX, &data)) == 0) {
		if (sscanf(data, "coffer-lease 1 %32s %lld %n", l->token,
		    &l->expires, &off) < 2 || off == 0)
			l->expires = 0;
		else {
			snprintf(l->info, sizeof(l->info), "%s", data + off);
			l->info[strcspn(l->info, "\n")] = '\0';
		}
	}
	free(data);
	return (rc);
}

static int
lease_write(const struct lease_io *io, const char *key, const char *what,
    const struct lease *l)
{
	char line[sizeof(*l) + 64];
	int n;

	n = snprintf(line, sizeof(line), "coffer-lease 1 %s %lld %s\n",
	    l->token, l->expires, l->info);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = (int)strlen(line);
	return (io->put(io->arg, key, what, line, (size_t)n));
}

/* Whether a lease read (rc lease_read's) keeps others out. */
static int
live(int rc, const struct lease *l)
{
	return (rc == 0 && l->expires > (long long)time(NULL) &&
	    !store_holder_gone(l->info));
}

/*
 * A taker finds the lock busy: 1 once its wait (until end) is over, 2
 * when asked to stop (signals_install: a wait for another writer must
 * not hold the stop off), else 0 after a poll's sleep.
 */
static int
wait_more(const struct storage_lock_opts *o, double end)
{
	if (o->wait >= 0 && now_monotonic() >= end)
		return (1);
	if (signals_caught())
		return (2);
	store_sleep_for(o->wait < 0 || end - now_monotonic() > LEASE_POLL ?
	    LEASE_POLL : end - now_monotonic());
	return (0);
}

static double
ttl_of(const struct storage_lock_opts *o)
{
	return (o->ttl > 0 ? o->ttl : LEASE_TTL);
}

/* The exclusive lease at key taken as mine (its token and info set),
 * waiting until end: 0, 1, 2 or -1. */
static int
lease_take(const struct lease_io *io, const char *key, const char *what,
    const struct storage_lock_opts *o, double end, struct lease *mine,
    char *holder, size_t holdersz)
{
	struct lease seen;
	int rc;

	for (;;) {
		if ((rc = lease_read(io, key, what, &seen)) < 0)
			return (-1);
		if (rc == 0 && seen.expires > (long long)time(NULL) &&
		    strcmp(seen.token, mine->token) == 0)
			return (0);
		if (live(rc, &seen)) {
			if ((rc = wait_more(o, end)) == 1 && holdersz > 0)
				snprintf(holder, holdersz, "%s", seen.info);
			if (rc != 0)
				return (rc);
			continue;
		}
		/* Free: ours written, then read again (above). */
		mine->expires = (long long)time(NULL) + (long long)ttl_of(o);
		if (lease_write(io, key, what, mine))
			return (-1);
	}
}

/* Keys listed, for the leases under a prefix. */
struct keys {
	char **v;
	size_t n;
};

static int
key_add(void *arg, const char *key, uint64_t size)
{
	struct keys *k = arg;
	char **nv;

	(void)size;
	if ((nv = reallocarray(k->v, k->n + 1, sizeof(*nv))) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	k->v = nv;
	if ((k->v[k->n] = strdup(key)) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	k->n++;
	return (0);
}

/*
 * The live shared leases under dir (the key prefix "...locks/NAME
 * .shared/") added to *v, *n; what is not live there (expired, its
 * holder a gone process of this host, or no lease) is removed: its
 * holder wrote it last, and will not again.  0 or -1.
 */
static int
shared_live(const struct lease_io *io, const char *dir, const char *what,
    struct storage_holder **v, size_t *n)
{
	struct keys k = { NULL, 0 };
	struct lease seen;
	size_t i;
	int rc;

	rc = io->list(io->arg, dir, what, key_add, &k);
	for (i = 0; rc == 0 && i < k.n; i++) {
		if ((rc = lease_read(io, k.v[i], what, &seen)) < 0)
			break;
		if (live(rc, &seen))
			rc = store_holder_add(v, n, seen.info, 1, seen.expires);
		else if (rc == 0)
			io->del(io->arg, k.v[i], what);
		else
			rc = 0;
	}
	for (i = 0; i < k.n; i++)
		free(k.v[i]);
	free(k.v);
	return (rc);
}

/* The exclusive lease at key given back, if it is still ours. */
static void
give_back(const struct lease_io *io, const char *key, const char *what,
    const struct lease *mine)
{
	struct lease seen;

	if (lease_read(io, key, what, &seen) == 0 &&
	    strcmp(seen.token, mine->token) == 0)
		io->del(io->arg, key, what);
}

/*
 * The names of a lock's leases: the exclusive one at xkey, the shared
 * ones under sdir (each sdir TOKEN), for messages xwhat and swhat.
 */
struct lease_keys {
	char *xkey, *sdir;
	char xwhat[STORAGE_NAME_MAX + 32], swhat[STORAGE_NAME_MAX + 32];
};

/*
 * Exclusive: locks/NAME taken as lease_take does, then the shared leases
 * listed: none live, it is held.  Else, with a wait, the lease is kept
 * (renewed while the wait lasts), so that new shared takers back off
 * (writer preference), and the listing looked at again until none is
 * live; once the wait is over, given back.
 */
static int
take_exclusive(const struct lease_io *io, const struct lease_keys *k,
    const struct storage_lock_opts *o, double end, struct lease *mine,
    char *holder, size_t holdersz)
{
	struct storage_holder *v;
	double wrote;
	size_t n;
	int rc;

again:
	if ((rc = lease_take(io, k->xkey, k->xwhat, o, end, mine, holder,
	    holdersz)) != 0)
		return (rc);
	wrote = now_monotonic();
	for (;;) {
		v = NULL;
		n = 0;
		if ((rc = shared_live(io, k->sdir, k->swhat, &v, &n)) == 0 &&
		    n == 0)
			return (0);
		if (rc == 0 && (rc = wait_more(o, end)) == 1)
			store_busy_line(holder, holdersz, v[0].info, n - 1);
		free(v);
		if (rc != 0) {
			give_back(io, k->xkey, k->xwhat, mine);
			return (rc);
		}
		if (now_monotonic() - wrote < ttl_of(o) / 3)
			continue;
		if (lease_take(io, k->xkey, k->xwhat, &(struct
		    storage_lock_opts){ NULL, 0, 0, 0 }, 0, mine, NULL, 0) != 0)
			goto again;
		mine->expires = (long long)time(NULL) + (long long)ttl_of(o);
		if (lease_write(io, k->xkey, k->xwhat, mine))
			return (-1);
		wrote = now_monotonic();
	}
}

/*
 * Shared: a lease of its own, skey (sdir TOKEN), written, then
 * locks/NAME read: a live exclusive lease there, ours is removed and
 * the lock is busy (looked at again while the wait lasts).
 */
static int
take_shared(const struct lease_io *io, const struct lease_keys *k,
    const char *skey, const struct storage_lock_opts *o, double end,
    struct lease *mine, char *holder, size_t holdersz)
{
	struct lease seen;
	int rc, written = 0;

	for (;;) {
		if ((rc = lease_read(io, k->xkey, k->xwhat, &seen)) < 0)
			break;
		if (live(rc, &seen)) {
			if (written)
				io->del(io->arg, skey, k->swhat);
			written = 0;
			if ((rc = wait_more(o, end)) == 1 && holdersz > 0)
				snprintf(holder, holdersz, "%s", seen.info);
			if (rc != 0)
				return (rc);
			continue;
		}
		if (written)
			return (0);
		mine->expires = (long long)time(NULL) + (long long)ttl_of(o);
		if (lease_write(io, skey, k->swhat, mine))
			return (-1);
		written = 1;
	}
	if (written)
		io->del(io->arg, skey, k->swhat);
	return (-1);
}

static int
keys_make(struct lease_keys *k, const char *prefix, const char *name)
{
	k->sdir = NULL;
	if (asprintf(&k->xkey, "%slocks/%s", prefix, name) < 0)
		return (storage_fail(ENOMEM, "out of memory"));
	if (asprintf(&k->sdir, "%slocks/%s" STORE_SHARED "/", prefix,
	    name) < 0) {
		free(k->xkey);
		return (storage_fail(ENOMEM, "out of memory"));
	}
	snprintf(k->xwhat, sizeof(k->xwhat), "'locks/%s'", name);
	snprintf(k->swhat, sizeof(k->swhat), "'locks/%s" STORE_SHARED "/'",
	    name);
	return (0);
}

static void
keys_free(struct lease_keys *k)
{
	free(k->xkey);
	free(k->sdir);
}

int
lease_lock(const struct lease_io *io, const char *prefix, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	double end = now_monotonic() + o->wait;
	struct lease_keys k;
	struct lease_held *h;
	uint8_t rnd[16];
	int rc;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return (storage_fail(EIO, "cannot get random bytes"));
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	if (keys_make(&k, prefix, name)) {
		free(h);
		return (-1);
	}
	hex_encode(h->mine.token, rnd, sizeof(rnd));
	snprintf(h->mine.info, sizeof(h->mine.info), "%s", o->info ?
	    o->info : "");
	h->mine.info[strcspn(h->mine.info, "\n")] = '\0';
	if (o->shared) {
		if (asprintf(&h->key, "%s%s", k.sdir, h->mine.token) < 0)
			rc = storage_fail(ENOMEM, "out of memory");
		else
			rc = take_shared(io, &k, h->key, o, end, &h->mine,
			    holder, holdersz);
	} else {
		rc = take_exclusive(io, &k, o, end, &h->mine, holder,
		    holdersz);
		h->key = k.xkey;
		k.xkey = NULL;
	}
	keys_free(&k);
	if (rc == 0) {
		h->base.ttl = ttl_of(o);
		h->io = *io;
		*l = &h->base;
		return (0);
	}
	free(h->key);
	free(h);
	return (rc);
}

int
lease_holders(const struct lease_io *io, const char *prefix,
    const char *name, struct storage_holder **v, size_t *n)
{
	struct lease_keys k;
	struct lease seen;
	int rc;

	if (keys_make(&k, prefix, name))
		return (-1);
	if ((rc = lease_read(io, k.xkey, k.xwhat, &seen)) >= 0) {
		rc = live(rc, &seen) ? store_holder_add(v, n, seen.info, 0,
		    seen.expires) : 0;
		if (rc == 0)
			rc = shared_live(io, k.sdir, k.swhat, v, n);
	}
	keys_free(&k);
	return (rc);
}

void
lease_unlock(struct storage_lock *l)
{
	struct lease_held *h = (struct lease_held *)l;

	give_back(&h->io, h->key, "lease", &h->mine);
	free(h->key);
	free(h);
}

int
lease_renew(struct storage_lock *l)
{
	struct lease_held *h = (struct lease_held *)l;
	const struct lease_io *io = &h->io;
	struct lease seen;
	int rc;

	if ((rc = lease_read(io, h->key, "lease", &seen)) < 0)
		return (-1);
	if (rc == STORAGE_MISSING || strcmp(seen.token, h->mine.token) != 0)
		return (1);
	h->mine.expires = (long long)time(NULL) + (long long)l->ttl;
	return (lease_write(io, h->key, "lease", &h->mine) ? -1 : 0);
}
