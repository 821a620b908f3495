/*
 * The repository's writer lock (locks/writer).  See doc/design.md
 * ("Many writers").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "repo-int.h"

enum { LOCK_WAIT, LOCK_FAIL, LOCK_QUIET };
static int lock_writer(struct repo *r, int how, double timeout);

/* Text read from the repository goes to a terminal: no control bytes. */
static void
sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

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
	char info[256] = "", host[HOST_NAME_MAX + 1] = "?", when[32];
	struct stat st;
	ssize_t n;
	int fd;

	if (r->lock_fd != -1)
		return (1);
	if ((fd = rp_open_in(r, r->dirs[DIR_LOCKS], "writer", "locks/writer",
	    O_RDWR | O_CREAT, S_IFREG, 0)) == -1)
		return (-1);
	/* The lock is written to: a second name for another file (a hard
	 * link planted in the repository) must not be. */
	if (fstat(fd, &st) || st.st_nlink != 1) {
		log_error("repository '%s': 'locks/writer' has other names "
		    "(a hard link): refused", r->path);
		goto err;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK) {
			log_errno("repository '%s': cannot lock 'locks/writer'",
			    r->path);
			goto err;
		}
		n = pread(fd, info, sizeof(info) - 1, 0);
		info[n > 0 ? n : 0] = '\0';
		info[strcspn(info, "\n")] = '\0';
		sanitize(info);
		if (how == LOCK_QUIET) {
			close(fd);
			return (0);
		}
		if (how == LOCK_FAIL) {
			log_error("repository '%s' is locked by another "
			    "writer (%s)", r->path, info[0] ? info : "unknown");
			goto err;
		}
		log_note("waiting for the lock on '%s' (%s)", r->path,
		    info[0] ? info : "unknown");
		switch (fsutil_flock_wait(fd, timeout)) {
		case 0:
			break;
		case 1:
			log_error("repository '%s' is still locked by another "
			    "writer after %.0f s (%s)", r->path, timeout,
			    info[0] ? info : "unknown");
			goto err;
		case 2:
			/* Stopping is not a failure of the repository. */
			log_warn("repository '%s': stopped waiting for the "
			    "lock (%s)", r->path,
			    signals_name(signals_caught()));
			goto err;
		default:
			log_errno("repository '%s': cannot lock "
			    "'locks/writer'", r->path);
			goto err;
		}
	}
	/* Who holds it, for the message a blocked writer prints. */
	gethostname(host, sizeof(host) - 1);
	fmt_time(when, sizeof(when), now_realtime_ns());
	snprintf(info, sizeof(info), "host %s pid %ld since %s\n", host,
	    (long)getpid(), when);
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, info, strlen(info), 0);
	r->lock_fd = fd;
	/*
	 * Writers seal to the newest epoch, as it is now, and whoever
	 * changes the keyring starts from it as it is now: another writer
	 * may have changed either since repo_open.
	 */
	if (rp_reload_conf(r) || rp_writer_ready(r)) {
		r->lock_fd = -1;
		goto err;
	}
	return (1);
err:
	close(fd);
	return (-1);
}
