#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "coffer/buf.h"
#include "coffer/entry.h"
#include "coffer/fs.h"
#include "coffer/log.h"
#include "fs-int.h"
#include "restore-int.h"

/*
 * A plain file (no extended attributes, no ACL, no setuid, setgid or
 * sticky bit, smaller than FS_RESTORE_DIRECT_MIN) bypasses libarchive: it
 * is made an unnamed inode of its directory (O_TMPFILE), written, given
 * its owner, mode and times on its descriptor, and only then linked at
 * its path.  Until that link it has no name at all: a crash or kill -9
 * leaves no part of it anywhere in the tree (the kernel frees an unlinked
 * inode), and what was at its path (FS_RESTORE_FORCE) stays as it was,
 * then is replaced at once by a rename from a temporary name.  One
 * directory entry is made per file, not a temporary name made, renamed
 * and removed, in 6 system calls instead of libarchive's 14; and the
 * inode is allocated without the directory's lock (only linkat takes
 * it), so writers in one directory do not wait for each other in ext4's
 * allocator, which is slow right after rm -rf of a tree.
 *
 * The descriptor is linked with linkat(AT_EMPTY_PATH), which before
 * Linux 6.10 needs CAP_DAC_READ_SEARCH, or through /proc/self/fd: which
 * one works is found once (plain_probe).  With neither, or where the file system has no
 * O_TMPFILE, files go through libarchive under a temporary name.
 */
static atomic_int tmpfile_link;

int
rs_link_fd(int fd, int how, int dfd, const char *name)
{
	char p[32];

	if (how == RS_LINK_EMPTY_PATH)
		return (linkat(fd, "", dfd, name, AT_EMPTY_PATH));
	(void)snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	return (linkat(AT_FDCWD, p, dfd, name, AT_SYMLINK_FOLLOW));
}

/* Which way an unnamed file of directory dfd can be linked, tried on one
 * under the current path's temporary name (removed again). */
static int
plain_probe(struct fs_restore *r, int dfd)
{
	static const int ways[2] = { RS_LINK_EMPTY_PATH, RS_LINK_PROC };
	int fd, i, how = RS_LINK_NONE;

	if (rs_set_tmp(r))
		return (RS_LINK_UNKNOWN);
	if ((fd = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600)) ==
	    -1)
		return (RS_LINK_UNKNOWN);
	for (i = 0; i < 2 && how == RS_LINK_NONE; i++)
		if (rs_link_fd(fd, ways[i], dfd, rs_tmp_base(r)) == 0) {
			how = ways[i];
			(void)unlinkat(dfd, rs_tmp_base(r), 0);
		}
	close(fd);
	atomic_store(&tmpfile_link, how);
	return (how);
}

/*
 * The directory of path below the target, opened through no symlink
 * (fs_open_parent); kept open for the files that follow in it, as
 * disk_enter_at keeps its working directory.  *base is path's last
 * component.  -1 (errno) when it cannot be reached so.
 */
static int
plain_dir(struct fs_restore *r, const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash != NULL ? (size_t)(slash - path) : 0;
	char *p;
	int fd;

	*base = slash != NULL ? slash + 1 : path;
	if (r->cdir != -1 && len == r->cdir_len &&
	    (len == 0 || memcmp(r->cdir_path, path, len) == 0))
		return (r->cdir);
	if (r->cdir != -1 && r->cdir != r->dirfd)
		close(r->cdir);
	r->cdir = -1;
	r->cdir_notmp = 0;
	if (len > r->cdir_cap) {
		if ((p = realloc(r->cdir_path, len)) == NULL)
			return (-1);
		r->cdir_path = p;
		r->cdir_cap = len;
	}
	if ((fd = fs_open_parent(r->dirfd, path, base)) == -1)
		return (-1);
	if (len > 0)
		memcpy(r->cdir_path, path, len);
	r->cdir_len = len;
	r->cdir = fd;
	return (fd);
}

/*
 * Begin e, a regular file, as a plain file if it is one and its
 * directory can take it.  0 begun, -1 failed (reported), 1 not a plain
 * file here (libarchive's to write).
 */
int
rs_plain_begin(struct fs_restore *r, const struct entry *e)
{
	const char *base;
	int how, dfd, fd;

	if (e->size >= (int64_t)FS_RESTORE_DIRECT_MIN || e->xattrs_len > 0 ||
	    (e->acl != NULL && *e->acl != '\0') || (e->mode & 07000) != 0 ||
	    (how = atomic_load(&tmpfile_link)) == RS_LINK_NONE)
		return (1);
	/* Missing, or not reachable through no symlink: libarchive makes
	 * it or refuses, as for any other entry. */
	if ((dfd = plain_dir(r, e->path, &base)) == -1 || r->cdir_notmp)
		return (1);
	if ((fd = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC,
	    (mode_t)(e->mode & 0777))) == -1) {
		/* This file system has no O_TMPFILE. */
		if (errno == EOPNOTSUPP || errno == EISDIR ||
		    errno == EINVAL) {
			r->cdir_notmp = 1;
			return (1);
		}
		log_errno("cannot restore '%s'", e->path);
		return (-1);
	}
	if (how == RS_LINK_UNKNOWN)
		how = plain_probe(r, dfd);
	if (how != RS_LINK_EMPTY_PATH && how != RS_LINK_PROC) {
		close(fd);
		return (1);
	}
	r->ffd = fd;
	r->base = (size_t)(base - e->path);
	r->fsize = e->size;
	r->fend = 0;
	r->fmode = e->mode & 0777;
	r->fmtime_ns = e->mtime_ns;
	if ((r->fowner = (r->opts & ARCHIVE_EXTRACT_OWNER) != 0)) {
		r->fuid = archive_write_disk_uid(r->a, e->uname, e->uid);
		r->fgid = archive_write_disk_gid(r->a, e->gname, e->gid);
	}
	r->plain = 1;
	return (0);
}

/* Data past the file's size is refused, as libarchive refuses it. */
int
rs_plain_data(struct fs_restore *r, const void *buf, size_t len, int64_t off)
{
	const unsigned char *p = buf;
	ssize_t n;

	if (off > r->fsize || len > (uint64_t)(r->fsize - off)) {
		log_error("cannot write '%s': data past its size", rs_cur(r));
		return (-1);
	}
	while (len > 0) {
		if ((n = pwrite(r->ffd, p, len, off)) < 0) {
			if (errno == EINTR)
				continue;
			log_errno("cannot write '%s'", rs_cur(r));
			return (-1);
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	if (off > r->fend)
		r->fend = off;
	return (0);
}

void
rs_plain_drop(struct fs_restore *r)
{
	close(r->ffd);
	r->ffd = -1;
	r->plain = 0;
}

static void
plain_warn(struct fs_restore *r, const char *what)
{
	r->warnings++;
	log_warn("incomplete restore of '%s': cannot set its %s: %s", rs_cur(r),
	    what, strerror(errno));
}

/*
 * The plain file is written: its size (a hole at its end), owner, mode
 * (the umask may have hidden some of it) and times, in libarchive's
 * order, then its name.  0, or -1 (reported; nothing is left of it).
 */
int
rs_plain_finish(struct fs_restore *r)
{
	struct timespec ts[2];
	int how = atomic_load(&tmpfile_link);

	if (r->fend < r->fsize && ftruncate(r->ffd, r->fsize)) {
		log_errno("cannot write '%s'", rs_cur(r));
		goto fail;
	}
	if (r->fowner && fchown(r->ffd, (uid_t)r->fuid, (gid_t)r->fgid))
		plain_warn(r, "owner");
	if ((r->fmode & r->umask) != 0 && fchmod(r->ffd, (mode_t)r->fmode))
		plain_warn(r, "mode");
	ts[0] = ts[1] = rs_ns_timespec(r->fmtime_ns);
	if (futimens(r->ffd, ts))
		plain_warn(r, "times");
	if (rs_file_id(r->ffd, "", AT_EMPTY_PATH, &r->id, NULL)) {
		log_errno("cannot restore '%s'", rs_cur(r));
		goto fail;
	}
	if (rs_link_fd(r->ffd, how, r->cdir, rs_cur_base(r)) == 0)
		goto done;
	if (errno != EEXIST) {
		log_errno("cannot restore '%s': cannot link it into place",
		    rs_cur(r));
		goto fail;
	}
	/* Something is there (FS_RESTORE_FORCE): replaced at once. */
	if (rs_set_tmp(r))
		goto fail;
	if (rs_link_fd(r->ffd, how, r->cdir, rs_tmp_base(r))) {
		log_errno("cannot restore '%s': cannot link it as '%s'",
		    rs_cur(r), rs_tmp_path(r));
		goto fail;
	}
	r->pfd = r->cdir;
	if (rs_put_in_place(r)) {
		if (unlinkat(r->cdir, rs_tmp_base(r), 0) && errno != ENOENT)
			log_warn_errno("cannot remove '%s'", rs_tmp_path(r));
		r->pfd = -1;
		goto fail;
	}
	r->pfd = -1;
done:
	rs_plain_drop(r);
	r->last_plain = 1;
	r->has_id = 1;
	return (0);
fail:
	rs_plain_drop(r);
	return (-1);
}
