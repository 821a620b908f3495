/*
 * The repository's writer lock (locks/writer), held shared by writers
 * that only add immutable, uniquely named objects (backup, export,
 * drill, verify, import) and exclusive by changes of shared state in
 * place (key slots, rotation, rewrap, retire).  Forget and prune share
 * it too, and learn from the holders (repo_lock_list) which writers
 * ran beside them.  See doc/design.md ("Many writers").
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "repo-int.h"

enum { LOCK_WAIT, LOCK_FAIL, LOCK_QUIET };
static int lock_writer(struct repo *r, int shared, int how, double timeout);

/*
 * 1 if the holder whose info line is info is a process of this host that
 * is gone: a line of info_line's begins "host HOST pid PID".  A process
 * that died (or whose store's connection died) could not give its lease
 * back; waiting out its ttl would only delay the next run.  A pid reused
 * since is taken for the holder: the lease then expires.  Containers
 * share a machine's host name but not its PIDs: a line whose nonce names
 * the pid's space ("@SPACE", fsutil_pid_space) is judged only in that
 * space; one without it (an older coffer's), by host alone.  The stores
 * whose locks are leases ask it (storage_holder_gone_fn, set before the
 * first lock is taken or listed).
 */
int
repo_lock_holder_gone(const char *info)
{
	char host[256], me[256];
	const char *nonce, *at, *space = fsutil_pid_space();
	size_t len;
	long pid;

	if (sscanf(info, "host %255s pid %ld", host, &pid) != 2 ||
	    pid <= 0 || gethostname(me, sizeof(me) - 1) != 0)
		return (0);
	me[sizeof(me) - 1] = '\0';
	if ((nonce = strstr(info, " nonce ")) != NULL) {
		nonce += 7;
		len = strcspn(nonce, " \n");
		if ((at = memchr(nonce, '@', len)) != NULL) {
			at++;
			len -= (size_t)(at - nonce);
			if (!space[0] || strlen(space) != len ||
			    memcmp(space, at, len) != 0)
				return (0);
		}
	}
	return (strcmp(host, me) == 0 && (pid_t)pid != getpid() &&
	    kill((pid_t)pid, 0) == -1 && errno == ESRCH);
}

static void
holder_gone_set(void)
{
	storage_holder_gone_fn(repo_lock_holder_gone);
}

/* Before a lock is taken or its holders listed. */
static void
holder_gone_once(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	(void)pthread_once(&once, holder_gone_set);
}

/* What this process does, in its lock's info line ("backup"), and the
 * dataset it backs up (forget keeps what it may build on). */
static char purpose[32];
static char dataset[256];
static int listed;		/* dataset lists a run's: A/B/C, "-" none */

void
repo_lock_purpose(const char *what)
{
	char *p;

	snprintf(purpose, sizeof(purpose), "%s", what ? what : "");
	/* One word ("key-rotate"): the info is one line, and a lease's
	 * holder is read back from its first words. */
	for (p = purpose; *p != '\0'; p++)
		if (*p <= ' ' || *p == 0x7f)
			*p = '-';
}

/*
 * Can name be said in the line as it is: not empty, room for it after
 * len bytes, no byte that would end the line or that a list separates
 * with?  One that cannot is left out rather than changed (cut short or
 * with a byte replaced, it would name another dataset): the line then
 * names none, which a reader takes as every dataset.
 */
static int
sayable(const char *name, size_t len, int in_list)
{
	size_t k = strlen(name), i;

	if (k == 0 || len + 1 + k >= sizeof(dataset))
		return (0);
	for (i = 0; i < k; i++)
		if ((unsigned char)name[i] < ' ' || name[i] == 0x7f ||
		    (in_list && name[i] == '/'))
			return (0);
	return (1);
}

void
repo_lock_dataset(const char *name)
{
	listed = 0;
	snprintf(dataset, sizeof(dataset), "%s", name != NULL &&
	    sayable(name, 0, 0) ? name : "");
}

/* Policy section names (name_ok) hold no '/'. */
void
repo_lock_datasets(char *const *names, size_t n)
{
	size_t i, len = 0, k;

	snprintf(dataset, sizeof(dataset), "%s", n == 0 ? "-" : "");
	listed = 1;
	for (i = 0; i < n; i++) {
		k = strlen(names[i]);
		if (!sayable(names[i], len, 1)) {
			dataset[0] = '\0';
			listed = 0;
			return;
		}
		if (i > 0)
			dataset[len++] = '/';
		memcpy(dataset + len, names[i], k + 1);
		len += k;
	}
}

int
repo_lock_names(const struct repo_lock_who *w, const char *name)
{
	const char *p = w->dataset, *end;
	size_t len = strlen(name);

	if (!w->listed)
		return (w->dataset[0] == '\0' || strcmp(w->dataset, name) == 0);
	for (; *p != '\0'; p = *end ? end + 1 : end) {
		end = p + strcspn(p, "/");
		if ((size_t)(end - p) == len && memcmp(p, name, len) == 0)
			return (1);
	}
	return (0);
}

int
repo_lock(struct repo *r, double wait)
{
	return (lock_writer(r, 0, wait != 0 ? LOCK_WAIT : LOCK_FAIL, wait) ==
	    1 ? 0 : -1);
}

int
repo_lock_shared(struct repo *r, double wait)
{
	return (lock_writer(r, 1, wait != 0 ? LOCK_WAIT : LOCK_FAIL, wait) ==
	    1 ? 0 : -1);
}

int
repo_lock_try(struct repo *r)
{
	return (lock_writer(r, 1, LOCK_QUIET, 0));
}

int
repo_lock_held(const struct repo *r)
{
	if (r->lock == NULL)
		return (REPO_UNLOCKED);
	return (r->lock_shared ? REPO_LOCKED_SHARED : REPO_LOCKED);
}

int
repo_lock_lost(const struct repo *r)
{
	return (r->lock != NULL && storage_lock_lost(r->lock));
}

int
repo_lock_parse(const char *info, struct repo_lock_who *w)
{
	char when[48];
	struct tm tm;
	const char *end;
	size_t len;
	int off = 0;

	memset(w, 0, sizeof(*w));
	if (sscanf(info, "host %255s pid %ld since %47s%n", w->host, &w->pid,
	    when, &off) != 3)
		return (-1);
	snprintf(w->since, sizeof(w->since), "%s", when);
	memset(&tm, 0, sizeof(tm));
	if ((end = strptime(when, "%Y-%m-%dT%H:%M:%S", &tm)) != NULL) {
		long long frac = 0;
		int digits = 0;

		if (*end == '.')
			for (end++; *end >= '0' && *end <= '9'; end++)
				if (digits++ < 9)
					frac = frac * 10 + (*end - '0');
		for (; digits < 9; digits++)
			frac *= 10;
		if (strcmp(end, "Z") == 0)
			w->since_ns = (int64_t)timegm(&tm) * 1000000000 +
			    frac;
	}
	info += off;
	if (strncmp(info, " nonce ", 7) == 0)
		info += 7 + strcspn(info + 7, " \n");
	if (strncmp(info, " command ", 9) != 0)
		return (0);
	info += 9;
	off = (int)strcspn(info, " \n");
	snprintf(w->command, sizeof(w->command), "%.*s", off, info);
	info += off;
	/* One too long to keep would be cut into another name: taken as
	 * none, every dataset. */
	if (strncmp(info, " dataset ", 9) == 0)
		off = 9;
	else if (strncmp(info, " datasets ", 10) == 0)
		off = 10;
	else
		return (0);
	info += off;
	if ((len = strcspn(info, "\n")) >= sizeof(w->dataset))
		return (0);
	memcpy(w->dataset, info, len);
	w->dataset[len] = '\0';
	if (off == 10) {
		if (strcmp(w->dataset, "-") == 0)
			w->dataset[0] = '\0';
		w->listed = 1;
	}
	return (0);
}

int
repo_lock_list(struct repo *r, int others, struct repo_lock_who **v,
    size_t *n)
{
	struct storage_holder *h = NULL;
	struct repo_lock_who *w;
	size_t i, nh = 0;

	*v = NULL;
	*n = 0;
	holder_gone_once();
	if (storage_lock_holders(r->st, "writer", &h, &nh))
		return (-1);
	if ((w = calloc(nh + 1, sizeof(*w))) == NULL) {
		free(h);
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < nh; i++) {
		/* Its own lock, as it wrote it (the nonce makes it so). */
		if (others && r->lock != NULL &&
		    strcmp(h[i].info, r->lock_info) == 0)
			continue;
		/* A line that is not ours: a writer of unknown age. */
		if (repo_lock_parse(h[i].info, &w[*n]) != 0)
			memset(&w[*n], 0, sizeof(w[*n]));
		snprintf(w[*n].info, sizeof(w[*n].info), "%s", h[i].info);
		w[*n].shared = h[i].shared;
		w[*n].expires = h[i].expires;
		(*n)++;
	}
	free(h);
	*v = w;
	return (0);
}

void
repo_lock_release(struct repo *r)
{
	storage_unlock(r->lock);
	r->lock = NULL;
	r->lock_shared = 0;
}

/* This process's line, to the nanosecond (prune compares it with its
 * marks' times), with a nonce that tells this lock from another of this
 * process (tests run several hosts in one). */
static void
info_line(char *info, size_t size)
{
	char host[HOST_NAME_MAX + 1] = "?", when[48], *z;
	const char *ds = purpose[0] ? dataset : "";
	unsigned char nonce[8];
	long long t = now_realtime_ns();
	int n;

	gethostname(host, sizeof(host) - 1);
	fmt_time(when, sizeof(when), t);
	if ((z = strchr(when, 'Z')) != NULL)
		snprintf(z, sizeof(when) - (size_t)(z - when), ".%09lldZ",
		    t % 1000000000);
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		memset(nonce, 0, sizeof(nonce));
	/* The nonce token ends in "@" and the pid's space when known
	 * (fsutil_pid_space): readers that predate it skip the token.  A
	 * dataset cut short would name another: one that does not fit is
	 * left out, which a reader takes as every dataset. */
	for (;;) {
		n = snprintf(info, size, "host %s pid %ld since %s nonce "
		    "%02x%02x%02x%02x%02x%02x%02x%02x%s%s%s%s%s%s\n", host,
		    (long)getpid(), when, nonce[0], nonce[1], nonce[2],
		    nonce[3], nonce[4], nonce[5], nonce[6], nonce[7],
		    fsutil_pid_space()[0] ? "@" : "", fsutil_pid_space(),
		    purpose[0] ? " command " : "", purpose,
		    ds[0] ? listed ? " datasets " : " dataset " : "", ds);
		if (n < 0 || (size_t)n < size || ds[0] == '\0')
			break;
		ds = "";
	}
}

/* Lock name with info: 1 held (*l), 0 busy (LOCK_QUIET), -1 (reported;
 * what names the holders in messages). */
static int
take(struct repo *r, const char *name, const char *what, int shared,
    int how, double timeout, const char *info, struct storage_lock **l)
{
	char holder[600];
	struct storage_lock_opts o = { info, 0, tuning_get()->lease_seconds,
	    shared };
	int rc;

	holder_gone_once();
	if ((rc = storage_lock(r->st, name, &o, l, holder,
	    sizeof(holder))) == 1 && how == LOCK_WAIT) {
		log_note("waiting for the %slock on '%s' (%s)",
		    strcmp(name, "writer") == 0 ? "" : "forget ", r->path,
		    holder[0] ? holder : "unknown");
		o.wait = timeout;
		if ((rc = storage_lock(r->st, name, &o, l, holder,
		    sizeof(holder))) == 1) {
			log_error("repository '%s' is still locked by another "
			    "%s after %.0f s (%s)", r->path, what, timeout,
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
		log_error("repository '%s' is locked by another %s (%s)",
		    r->path, what, holder[0] ? holder : "unknown");
		return (-1);
	}
	return (rc == 0 ? 1 : -1);
}

int
repo_lock_forget(struct repo *r, int shared, double wait)
{
	char info[512];

	if (r->forget_lock != NULL)
		return (0);
	info_line(info, sizeof(info));
	/* Shared, it waits for a forget; exclusive, for a forget or for
	 * writers catching up. */
	return (take(r, "forget", shared ? "forget" : "forget or writer",
	    shared, wait != 0 ? LOCK_WAIT : LOCK_FAIL, wait, info,
	    &r->forget_lock) == 1 ? 0 : -1);
}

void
repo_unlock_forget(struct repo *r)
{
	storage_unlock(r->forget_lock);
	r->forget_lock = NULL;
}

/*
 * Shared or exclusive; LOCK_WAIT (timeout seconds, < 0 for ever),
 * LOCK_FAIL (reported), LOCK_QUIET (0 when busy).  An exclusive lock
 * serves where a shared one is asked; a shared one held when the
 * exclusive is asked is given back first (never both: two shared holders
 * that both wait to be exclusive would wait for each other).
 */
static int
lock_writer(struct repo *r, int shared, int how, double timeout)
{
	char info[512];
	struct storage_lock *l;
	int rc;

	if (r->lock != NULL && (shared || !r->lock_shared))
		return (1);
	if (r->lock != NULL)
		repo_lock_release(r);
	/* Who holds it, for the message a blocked writer prints, and for
	 * coffer locks. */
	info_line(info, sizeof(info));
	if ((rc = take(r, "writer", "writer", shared, how, timeout, info,
	    &l)) != 1)
		return (rc);
	r->lock = l;
	r->lock_shared = shared;
	snprintf(r->lock_info, sizeof(r->lock_info), "%s", info);
	r->lock_info[strcspn(r->lock_info, "\n")] = '\0';
	/*
	 * Writers seal to the newest epoch, as it is now, and whoever
	 * changes the keyring starts from it as it is now: another writer
	 * may have changed either since repo_open.
	 */
	if (rp_reload_conf(r) || rp_writer_ready(r)) {
		repo_lock_release(r);
		return (-1);
	}
	return (1);
}
