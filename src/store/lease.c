/*
 * Leases on object storage (lease.h; doc/design.md, "Leases"): a lock
 * is an object, locks/NAME, holding "coffer-lease 1 TOKEN EXPIRES INFO".
 * Nothing on object storage is conditional, so a lease is taken by
 * writing it and reading it back: the last writer wins, and finds out
 * it won.  The store supplies the object calls; this file is the same
 * for every store.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "coffer/hex.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/storage.h"

#include "lease.h"

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

/*
 * 1 if the lease's holder is a process of this host that is gone: the
 * info of coffer's writer lock begins "host HOST pid PID" (repo/lock.c).
 * A process that died (or whose store's connection died) could not give
 * its lease back; waiting out its ttl would only delay the next run.  A
 * pid reused since is taken for the holder: the lease then expires.
 */
static int
holder_gone(const struct lease *l)
{
	char host[256], me[256];
	long pid;

	if (sscanf(l->info, "host %255s pid %ld", host, &pid) != 2 ||
	    pid <= 0 || gethostname(me, sizeof(me) - 1) != 0)
		return (0);
	me[sizeof(me) - 1] = '\0';
	return (strcmp(host, me) == 0 && (pid_t)pid != getpid() &&
	    kill((pid_t)pid, 0) == -1 && errno == ESRCH);
}

/* The lease at key taken: 0 (it into *taken), 1, 2 or -1. */
static int
lease_take(const struct lease_io *io, const char *key, const char *what,
    const struct storage_lock_opts *o, struct lease *taken, char *holder,
    size_t holdersz)
{
	double end = now_monotonic() + o->wait, ttl = o->ttl > 0 ? o->ttl :
	    LEASE_TTL;
	struct lease mine, seen;
	uint8_t rnd[16];
	int rc;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return (storage_fail(EIO, "cannot get random bytes"));
	memset(&mine, 0, sizeof(mine));
	hex_encode(mine.token, rnd, sizeof(rnd));
	snprintf(mine.info, sizeof(mine.info), "%s", o->info ? o->info : "");
	mine.info[strcspn(mine.info, "\n")] = '\0';
	for (;;) {
		if ((rc = lease_read(io, key, what, &seen)) < 0)
			return (-1);
		if (rc == 0 && seen.expires > (long long)time(NULL) &&
		    strcmp(seen.token, mine.token) == 0) {
			*taken = mine;
			return (0);
		}
		if (rc == 0 && seen.expires > (long long)time(NULL) &&
		    !holder_gone(&seen)) {
			if (o->wait >= 0 && now_monotonic() >= end) {
				if (holdersz > 0)
					snprintf(holder, holdersz, "%s",
					    seen.info);
				return (1);
			}
			/* Asked to stop (signals_install): a wait for
			 * another writer must not hold the stop off. */
			if (signals_caught())
				return (2);
			store_sleep_for(o->wait < 0 || end - now_monotonic() >
			    LEASE_POLL ? LEASE_POLL : end - now_monotonic());
			continue;
		}
		/* Free: ours written, then read again (above). */
		mine.expires = (long long)time(NULL) + (long long)ttl;
		if (lease_write(io, key, what, &mine))
			return (-1);
	}
}

int
lease_lock(const struct lease_io *io, const char *prefix, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	char what[STORAGE_NAME_MAX + 16];
	struct lease_held *h;
	int rc;

	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    asprintf(&h->key, "%slocks/%s", prefix, name) < 0) {
		free(h);
		return (storage_fail(ENOMEM, "out of memory"));
	}
	snprintf(what, sizeof(what), "'locks/%s'", name);
	if ((rc = lease_take(io, h->key, what, o, &h->mine, holder,
	    holdersz)) == 0) {
		h->base.ttl = o->ttl > 0 ? o->ttl : LEASE_TTL;
		h->io = *io;
		*l = &h->base;
		return (0);
	}
	free(h->key);
	free(h);
	return (rc);
}

void
lease_unlock(struct storage_lock *l)
{
	struct lease_held *h = (struct lease_held *)l;
	const struct lease_io *io = &h->io;
	struct lease seen;

	if (lease_read(io, h->key, "lease", &seen) == 0 &&
	    strcmp(seen.token, h->mine.token) == 0)
		io->del(io->arg, h->key, "lease");
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
