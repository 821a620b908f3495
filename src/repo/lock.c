/*
 * The repository's writer lock (locks/writer).  See doc/design.md
 * ("Many writers").
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "repo-int.h"

enum { LOCK_WAIT, LOCK_FAIL, LOCK_QUIET };
static int lock_writer(struct repo *r, int how, double timeout);

int
repo_lock(struct repo *r, double wait)
{
	return (lock_writer(r, wait != 0 ? LOCK_WAIT : LOCK_FAIL, wait) == 1 ?
	    0 : -1);
}

int
repo_lock_try(struct repo *r)
{
	return (lock_writer(r, LOCK_QUIET, 0));
}

/* LOCK_WAIT (timeout seconds, < 0 for ever), LOCK_FAIL (reported),
 * LOCK_QUIET (0 when busy). */
static int
lock_writer(struct repo *r, int how, double timeout)
{
	char info[256], holder[256], host[HOST_NAME_MAX + 1] = "?", when[32];
	struct storage_lock_opts o = { info, 0, tuning_get()->lease_seconds };
	struct storage_lock *l;
	int rc;

	if (r->lock != NULL)
		return (1);
	/* Who holds it, for the message a blocked writer prints. */
	gethostname(host, sizeof(host) - 1);
	fmt_time(when, sizeof(when), now_realtime_ns());
	snprintf(info, sizeof(info), "host %s pid %ld since %s\n", host,
	    (long)getpid(), when);
	if ((rc = storage_lock(r->st, "writer", &o, &l, holder,
	    sizeof(holder))) == 1 && how == LOCK_WAIT) {
		log_note("waiting for the lock on '%s' (%s)", r->path,
		    holder[0] ? holder : "unknown");
		o.wait = timeout;
		if ((rc = storage_lock(r->st, "writer", &o, &l, holder,
		    sizeof(holder))) == 1) {
			log_error("repository '%s' is still locked by another "
			    "writer after %.0f s (%s)", r->path, timeout,
			    holder[0] ? holder : "unknown");
			return (-1);
		}
		if (rc == 2) {
			/* Stopping is not a failure of the repository. */
			log_warn("repository '%s': stopped waiting for the "
			    "lock (%s)", r->path,
			    signals_name(signals_caught()));
			return (-1);
		}
	}
	if (rc == 1 && how == LOCK_QUIET)
		return (0);
	if (rc == 1) {
		log_error("repository '%s' is locked by another writer (%s)",
		    r->path, holder[0] ? holder : "unknown");
		return (-1);
	}
	if (rc != 0)
		return (-1);
	r->lock = l;
	/*
	 * Writers seal to the newest epoch, as it is now, and whoever
	 * changes the keyring starts from it as it is now: another writer
	 * may have changed either since repo_open.
	 */
	if (rp_reload_conf(r) || rp_writer_ready(r)) {
		r->lock = NULL;
		storage_unlock(l);
		return (-1);
	}
	return (1);
}
