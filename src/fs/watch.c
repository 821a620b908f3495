/*
 * A checkpoint tree watched for steps (include/coffer/fs-watch.h).  The
 * inotify code is Linux's and stays in this file; elsewhere, and where it
 * cannot work, the tree is scanned only.  Events are not interpreted:
 * any event says "look again", and the scan that follows is what counts,
 * so that a lost or overflowed event queue costs a scan, never a step.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/inotify.h>
#include <sys/vfs.h>
#endif

#include "coffer/fs-watch.h"
#include "coffer/log.h"

/* Directories above the steps, and inside a step, looked into at most. */
#define DEPTH_MAX 16

struct fs_watch {
	char *root;
	int fd;				/* inotify, or -1 */
	int want_inotify;
	int started;			/* the first scan chose */
	int root_failed;		/* said once while it lasts */
	const char *polled;
};

struct scan {
	struct fs_watch *w;
	char *const *globs;
	size_t n;
	const char *require;
	int (*want)(void *, const struct fs_watch_step *);
	int (*step)(void *, const struct fs_watch_step *);
	void *arg;
};

struct fs_watch *
fs_watch_open(const char *root, int inotify)
{
	struct fs_watch *w;

	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->root = strdup(root)) == NULL) {
		free(w);
		log_error("out of memory");
		return (NULL);
	}
	w->fd = -1;
	w->want_inotify = inotify;
	return (w);
}

void
fs_watch_close(struct fs_watch *w)
{
	if (w == NULL)
		return;
	if (w->fd != -1)
		close(w->fd);
	free(w->root);
	free(w);
}

int
fs_watch_fd(const struct fs_watch *w)
{
	return (w->fd);
}

const char *
fs_watch_polled(const struct fs_watch *w)
{
	return (w->polled);
}

static void
give_up(struct fs_watch *w, const char *why)
{
	if (w->fd != -1)
		close(w->fd);
	w->fd = -1;
	w->polled = why;
}

#ifdef __linux__
/* statfs magic numbers of file systems whose changes can come from
 * elsewhere, where inotify sees only this host's writes. */
static int
remote_fs(const char *path)
{
	static const long magic[] = {
		0x6969,			/* NFS */
		0xff534d42,		/* CIFS */
		0xfe534d42,		/* SMB2 */
		0x517b,			/* SMB */
		0x65735546,		/* FUSE */
		0x00c36400,		/* Ceph */
		0x0bd00bd0,		/* Lustre */
		0x47504653,		/* GPFS */
		0x19830326,		/* BeeGFS (FhGFS) */
		0x01021997,		/* v9fs */
		0x564c,			/* NCP */
		0x73757245,		/* Coda */
		0x6b414653		/* AFS */
	};
	struct statfs sf;
	size_t i;

	if (statfs(path, &sf) != 0)
		return (0);
	for (i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if ((unsigned long)sf.f_type == (unsigned long)magic[i])
			return (1);
	return (0);
}

static void
start(struct fs_watch *w)
{
	w->started = 1;
	if (!w->want_inotify) {
		w->polled = "inotify is off (COFFER_WATCH_INOTIFY=0)";
		return;
	}
	if (remote_fs(w->root)) {
		w->polled = "a network file system: inotify sees only this "
		    "host's writes";
		return;
	}
	if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1)
		w->polled = errno == EMFILE ? "no inotify instance to spare "
		    "(fs.inotify.max_user_instances)" : "inotify cannot start";
}

/* Watch the directory path (a step, or one above the steps). */
static void
add(struct fs_watch *w, const char *path)
{
	if (w->fd == -1)
		return;
	if (inotify_add_watch(w->fd, path, IN_CREATE | IN_CLOSE_WRITE |
	    IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB |
	    IN_ONLYDIR | IN_DONT_FOLLOW) == -1 && errno == ENOSPC)
		give_up(w, "the inotify watches ran out "
		    "(fs.inotify.max_user_watches)");
}

int
fs_watch_drain(struct fs_watch *w)
{
	char buf[4096]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	int any = 0;

	if (w->fd == -1)
		return (0);
	while (read(w->fd, buf, sizeof(buf)) > 0)
		any = 1;
	return (any);
}
#else
static void
start(struct fs_watch *w)
{
	w->started = 1;
	w->polled = "no inotify on this system";
}

static void
add(struct fs_watch *w, const char *path)
{
	(void)w;
	(void)path;
}

int
fs_watch_drain(struct fs_watch *w)
{
	(void)w;
	return (0);
}
#endif

int
fs_checkpoint_match(char *const *globs, size_t n, const char *rel)
{
	const char *base = strrchr(rel, '/');
	size_t i;

	base = base != NULL ? base + 1 : rel;
	for (i = 0; i < n; i++)
		if (strchr(globs[i], '/') != NULL ?
		    fnmatch(globs[i], rel, FNM_PATHNAME | FNM_PERIOD) == 0 :
		    fnmatch(globs[i], base, FNM_PERIOD) == 0)
			return (1);
	return (0);
}

static int64_t
newer(int64_t t, const struct stat *st)
{
	int64_t m = (int64_t)st->st_mtim.tv_sec * 1000000000 +
	    st->st_mtim.tv_nsec;
	int64_t c = (int64_t)st->st_ctim.tv_sec * 1000000000 +
	    st->st_ctim.tv_nsec;

	if (m > t)
		t = m;
	return (c > t ? c : t);
}

/* The newest change in the tree at path (its directories watched). */
static int64_t
tree_newest(struct fs_watch *w, const char *path, int64_t t, int depth)
{
	char sub[4096];
	struct dirent *de;
	struct stat st;
	DIR *d;

	if ((d = opendir(path)) == NULL)
		return (t);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		t = newer(t, &st);
		if (S_ISDIR(st.st_mode) && depth < DEPTH_MAX &&
		    snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) <
		    (int)sizeof(sub)) {
			add(w, sub);
			t = tree_newest(w, sub, t, depth + 1);
		}
	}
	closedir(d);
	return (t);
}

static int
one_step(struct scan *s, const char *path, const char *rel,
    const struct stat *dst)
{
	struct fs_watch_step st;
	struct stat m;
	char marker[4096];

	add(s->w, path);
	memset(&st, 0, sizeof(st));
	st.name = rel;
	if (s->require == NULL) {
		st.marked = 1;
		st.marked_ns = newer(0, dst);
	} else if (snprintf(marker, sizeof(marker), "%s/%s", path,
	    s->require) < (int)sizeof(marker) &&
	    lstat(marker, &m) == 0 && S_ISREG(m.st_mode)) {
		st.marked = 1;
		st.marked_ns = newer(0, &m);
	}
	if (st.marked && s->want(s->arg, &st))
		st.changed_ns = tree_newest(s->w, path, newer(0, dst), 0);
	return (s->step(s->arg, &st));
}

/* The directory path (rel below the root; "" the root): its steps. */
static int
scan_dir(struct scan *s, const char *path, const char *rel, int depth)
{
	char sub[4096], subrel[4096];
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0;

	if ((d = opendir(path)) == NULL) {
		if (depth > 0)
			return (0);
		if (!s->w->root_failed)
			log_warn_errno("cannot read the checkpoint directory "
			    "'%s'", path);
		s->w->root_failed = 1;
		return (-1);
	}
	if (depth == 0)
		s->w->root_failed = 0;
	add(s->w, path);
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >=
		    (int)sizeof(sub) || snprintf(subrel, sizeof(subrel),
		    "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
		    (int)sizeof(subrel))
			continue;
		if (fs_checkpoint_match(s->globs, s->n, subrel))
			rc = one_step(s, sub, subrel, &st);
		else if (depth < DEPTH_MAX)
			rc = scan_dir(s, sub, subrel, depth + 1);
	}
	closedir(d);
	return (rc);
}

int
fs_watch_scan(struct fs_watch *w, char *const *globs, size_t n,
    const char *require, int (*want)(void *arg,
    const struct fs_watch_step *s), int (*step)(void *arg,
    const struct fs_watch_step *s), void *arg)
{
	struct scan s = { w, globs, n, require, want, step, arg };

	if (!w->started)
		start(w);
	/* Events that come during the scan are read after it, and call
	 * for another: none is lost between. */
	return (scan_dir(&s, w->root, "", 0));
}
