/*
 * The repository directory on the local file system: every file of the
 * repository is reached from descriptors opened once, relative to them,
 * never through a link (doc/design.md, "Threat model").  The storage
 * interface of the object-storage work replaces this file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "repo-int.h"

const char *const dir_names[NDIRS] = { "keys", "packs", "tmp", "locks" };

/*
 * Open name, one component of the repository in dirfd, as a regular file
 * (want S_IFREG, flags O_RDONLY or O_RDWR | O_CREAT) or a directory (want
 * S_IFDIR) with fsutil_open_in: never through a symlink, never blocking on
 * a FIFO; anything that is not what is expected is refused, naming it by
 * rel (its path in the repository).  An fd, or -1 (reported unless quiet;
 * errno ENOENT when it does not exist).
 */
int
rp_open_in(const struct repo *r, int dirfd, const char *name, const char *rel,
    int flags, mode_t want, int quiet)
{
	int fd, wrong, e;

	if ((fd = fsutil_open_in(dirfd, name, flags, want, &wrong)) != -1 ||
	    quiet)
		return (fd);
	e = errno;
	if (wrong)
		log_error("repository '%s': '%s' is %s where %s belongs: "
		    "refused", r->path, rel, fsutil_kind_at(dirfd, name),
		    want == S_IFDIR ? "a directory" : "a regular file");
	else
		log_errno("repository '%s': cannot open '%s'", r->path, rel);
	errno = e;
	return (-1);
}

/* Read a small regular file of the repository, at most max bytes. */
int
rp_read_in(const struct repo *r, int dirfd, const char *name, const char *rel,
    size_t max, unsigned char **data, size_t *len)
{
	int fd, rc;

	if ((fd = rp_open_in(r, dirfd, name, rel, O_RDONLY, S_IFREG, 0)) == -1)
		return (-1);
	rc = fsutil_read_fd(fd, max, data, len, rel);
	close(fd);
	return (rc);
}

/* Undo a failed init: what init creates, and nothing else (failures
 * reported; path, the repository, names it). */
void
rp_remove_made(int dfd, const char *path)
{
	const char *const *d;

	for (d = dir_names; d < dir_names + NDIRS; d++)
		(void)fsutil_remove_tree(dfd, *d, path);
	unlinkat(dfd, REPO_KEYRING, 0);
	unlinkat(dfd, "coffer.conf", 0);
}

/*
 * The layout of a new repository at path, which must be new or empty:
 * the directory (made if missing: *created) and its subdirectories.  Its
 * descriptor, or -1 (reported; nothing made is left).
 */
int
rp_make_layout(const char *path, int *created)
{
	const char *const *d;
	int dfd;

	if ((dfd = fsutil_dir_new(path, "a repository", created)) == -1)
		return (-1);
	for (d = dir_names; d < dir_names + NDIRS; d++)
		if (mkdirat(dfd, *d, 0700)) {
			log_errno("cannot create directory '%s/%s'", path, *d);
			goto err;
		}
	return (dfd);
err:
	rp_unmake_layout(dfd, path, *created);
	return (-1);
}

/* Undo rp_make_layout and what was written into it; closes dfd. */
void
rp_unmake_layout(int dfd, const char *path, int created)
{
	if (dfd != -1) {
		rp_remove_made(dfd, path);
		close(dfd);
	}
	if (created)
		rmdir(path);
}

int
repo_remove_made(const char *path)
{
	int dfd;

	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return (-1);
	rp_remove_made(dfd, path);
	close(dfd);
	/* Fails, leaving it, if anything else is there (not ours). */
	return (rmdir(path) == 0 || errno == ENOENT ? 0 : -1);
}

int
rp_store_open(struct repo *r, const char *path)
{
	int i;

	r->dfd = -1;
	for (i = 0; i < NDIRS; i++)
		r->dirs[i] = -1;
	/* Absolute, for messages: the working directory may change. */
	if ((r->path = realpath(path, NULL)) == NULL &&
	    (r->path = strdup(path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	/* The repository's own path may be a link (a mount point's); nothing
	 * below it is followed. */
	if ((r->dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			log_error("'%s' is not a coffer repository", path);
		else
			log_errno("cannot open repository '%s'", path);
		return (-1);
	}
	if (fstatat(r->dfd, "coffer.conf", &(struct stat){ 0 },
	    AT_SYMLINK_NOFOLLOW) && errno == ENOENT) {
		log_error("'%s' is not a coffer repository", path);
		return (-1);
	}
	return (0);
}

int
rp_store_dirs(struct repo *r)
{
	int i;

	for (i = 0; i < NDIRS; i++)
		if ((r->dirs[i] = rp_open_in(r, r->dfd, dir_names[i],
		    dir_names[i], O_RDONLY, S_IFDIR, 0)) == -1)
			return (-1);
	return (0);
}

void
rp_store_close(struct repo *r)
{
	int i;

	for (i = 0; i < NDIRS; i++)
		if (r->dirs[i] != -1)
			close(r->dirs[i]);
	if (r->dfd != -1)
		close(r->dfd);
}

DIR *
rp_store_dir(const struct repo *r, enum repo_dir which)
{
	DIR *d;
	int fd;

	if ((fd = dup(r->dirs[which])) == -1 || (d = fdopendir(fd)) == NULL) {
		log_errno("repository '%s': cannot read '%s'", r->path,
		    dir_names[which]);
		if (fd != -1)
			close(fd);
		return (NULL);
	}
	/* A dup shares its offset with r->dirs: read from the start. */
	rewinddir(d);
	return (d);
}
