/*
 * Checkpoint rules of a backup (backup_opts settle, require, checkpoints):
 * a checkpoint is written over minutes, file by file, and a snapshot
 * must hold either all of it or none of it.  A directory that matches a
 * glob of checkpoints is looked at whole before the walk enters it: its
 * marker file (require) must be there, and nothing in it may have
 * changed in the last settle seconds.  Times are the host's clock, which
 * file times are set by, never a snapshot's --time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/engine.h"
#include "coffer/fs-watch.h"
#include "coffer/progress.h"
#include "engine-int.h"

/* A checkpoint directory deeper than this is not looked into further. */
#define DEPTH_MAX 64

static int64_t
stat_ns(const struct timespec *ts)
{
	return ((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec);
}

int
checkpoint_unsettled(const struct backup_opts *o, int64_t mtime_ns,
    int64_t ctime_ns)
{
	int64_t since;

	if (!(o->settle > 0))
		return (0);
	since = now_realtime_ns() - (int64_t)(o->settle * 1e9);
	return (mtime_ns > since || ctime_ns > since);
}

/* As excludes match: without '/', a name at any depth; with '/', the
 * path below the root. */
static int
is_checkpoint(const struct backup_opts *o, const char *rel)
{
	return (fs_checkpoint_match(o->checkpoints, o->ncheckpoints, rel));
}

/* 1 if anything in the directory fd (closed here) is unsettled, 0 if
 * not, -1 if it cannot be read (then the walk warns as it goes in). */
static int
unsettled_tree(const struct backup_opts *o, int fd, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0, sub;

	if (fstat(fd, &st) != 0) {
		close(fd);
		return (-1);
	}
	if (checkpoint_unsettled(o, stat_ns(&st.st_mtim), stat_ns(&st.st_ctim)))
	{
		close(fd);
		return (1);
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return (-1);
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			rc = -1;
			break;
		}
		if (checkpoint_unsettled(o, stat_ns(&st.st_mtim),
		    stat_ns(&st.st_ctim))) {
			rc = 1;
			break;
		}
		if (S_ISDIR(st.st_mode) && depth < DEPTH_MAX) {
			if ((sub = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
				rc = -1;
				break;
			}
			rc = unsettled_tree(o, sub, depth + 1);
		}
	}
	closedir(d);
	return (rc);
}

int
checkpoint_within(const struct backup_opts *o, const char *path, size_t *len)
{
	char dir[4096];
	const char *slash;

	if (o->ncheckpoints == 0)
		return (0);
	for (slash = strchr(path, '/'); slash != NULL;
	    slash = strchr(slash + 1, '/')) {
		size_t n = (size_t)(slash - path);

		if (n == 0 || n >= sizeof(dir))
			continue;
		memcpy(dir, path, n);
		dir[n] = '\0';
		if (is_checkpoint(o, dir)) {
			*len = n;
			return (1);
		}
	}
	return (0);
}

int
checkpoint_held(const struct backup_opts *o, const char *rel,
    const char **why)
{
	struct stat st;
	char path[4096];
	int fd, rc;

	*why = NULL;
	if (o->ncheckpoints == 0 || !is_checkpoint(o, rel))
		return (0);
	if (snprintf(path, sizeof(path), "%s/%s", o->source, rel) >=
	    (int)sizeof(path))
		return (0);
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return (0);
	if (o->require != NULL && (fstatat(fd, o->require, &st,
	    AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		*why = "has no marker file";
		return (1);
	}
	if ((rc = unsettled_tree(o, fd, 0)) == 1) {
		*why = "was written to within the settle time";
		return (1);
	}
	return (0);
}
