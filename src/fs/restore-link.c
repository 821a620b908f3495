#include <assert.h>
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
#include "coffer/tuning.h"
#include "fs-int.h"
#include "restore-int.h"

/*
 * A restored inode's second names (hard links): linked below the target
 * through no symlink, to the inode itself, never to whatever has taken
 * its first name since.
 */

int
fs_restore_file_id(const struct fs_restore *r, struct fs_file_id *id)
{
	if (!r->has_id)
		return (-1);
	*id = r->id;
	return (0);
}

/* Is name in dfd (or dfd itself, name "") the inode id? 1 yes, 0 no (or
 * none), -1 (errno). */
static int
is_inode(int dfd, const char *name, const struct fs_file_id *id)
{
	struct fs_file_id at;
	int st;

	if ((st = rs_file_id(dfd, name, *name == '\0' ? AT_EMPTY_PATH : 0, &at,
	    NULL)) != 0)
		return (st < 0 ? -1 : 0);
	return (rs_same_inode(&at, id, 1));
}

/*
 * Link fd (opened O_PATH, checked to be the restored inode) as name in
 * dfd: from the descriptor itself (AT_EMPTY_PATH, which before Linux 6.10
 * needs CAP_DAC_READ_SEARCH, or /proc/self/fd).  Without either, by
 * existing's name in epfd, and the new name checked to be the inode id,
 * removed if not.  0, -1 (errno), or 1: that name was another file.
 */
static int
link_inode(int fd, int epfd, const char *ebase, const struct fs_file_id *id,
    int dfd, const char *name)
{
	int st;

	if (rs_link_fd(fd, RS_LINK_EMPTY_PATH, dfd, name) == 0)
		return (0);
	if (errno == EEXIST)
		return (-1);
	if (rs_link_fd(fd, RS_LINK_PROC, dfd, name) == 0)
		return (0);
	if (errno == EEXIST || linkat(epfd, ebase, dfd, name, 0))
		return (-1);
	if ((st = is_inode(dfd, name, id)) == 1)
		return (0);
	(void)unlinkat(dfd, name, 0);
	return (st == 0 ? 1 : -1);
}

/*
 * A second name, from the directories' descriptors opened below the target
 * through no symlink and from a descriptor of the first name's inode,
 * checked to be the one restored: linked under a temporary name and
 * renamed over the path, so that whatever was there stays until it is
 * replaced at once.  0, -1 (reported), or 1: the new name's directory does
 * not exist.
 */
static int
link_beneath(struct fs_restore *r, const struct entry *e,
    const char *existing, const struct fs_file_id *id)
{
	const char *ebase, *b;
	int epfd, fd = -1, rc = -1, lk, is;

	if (rs_set_path(r, e->path) || rs_set_tmp(r))
		return (-1);
	if ((r->pfd = fs_open_parent(r->dirfd, e->path, &b)) == -1) {
		if (errno == ENOENT)
			return (1);
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		return (-1);
	}
	if ((epfd = fs_open_parent(r->dirfd, existing, &ebase)) == -1) {
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		rs_close_pfd(r);
		return (-1);
	}
	if ((fd = openat(epfd, ebase, O_PATH | O_NOFOLLOW | O_CLOEXEC)) ==
	    -1 || (is = is_inode(fd, "", id)) < 0) {
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		goto out;
	}
	if (is == 0) {
		log_error("cannot link '%s' to '%s': '%s' is no longer the "
		    "file restored there", e->path, existing, existing);
		goto out;
	}
	if ((lk = link_inode(fd, epfd, ebase, id, r->pfd,
	    rs_tmp_base(r))) == 1)
		log_error("cannot link '%s' to '%s': '%s' is no longer the "
		    "file restored there", e->path, existing, existing);
	else if (lk != 0)
		log_errno("cannot link '%s' to '%s'", e->path, existing);
	else if (rs_put_in_place(r))
		rs_drop_tmp(r);
	else {
		/* A rename between two names of one file leaves both. */
		if (unlinkat(r->pfd, rs_tmp_base(r), 0) && errno != ENOENT)
			log_warn_errno("cannot remove '%s'", rs_tmp_path(r));
		rc = 0;
	}
out:
	if (fd != -1)
		close(fd);
	if (epfd != r->dirfd)
		close(epfd);
	rs_close_pfd(r);
	return (rc);
}

int
fs_restore_hardlink(struct fs_restore *r, const struct entry *e,
    const char *existing, const struct fs_file_id *id)
{
	const char *b;
	int st, own, is;

	assert(r->state == RS_IDLE);
	r->has_id = 0;
	if (r->fatal)
		return (-1);
	if (!entry_path_is_safe(e->path) || !entry_path_is_safe(existing)) {
		log_error("refusing to link unsafe path '%s' to '%s'",
		    e->path, existing);
		return (-1);
	}
	if (id == NULL) {
		log_error("cannot link '%s' to '%s': the file restored there "
		    "cannot be told from another (it is not this user's)",
		    e->path, existing);
		return (-1);
	}
	tuning_run_hook("COFFER_TEST_BEFORE_HARDLINK",
	    tuning_get()->test_before_hardlink, "COFFER_TEST_PATH", existing);
	if ((st = link_beneath(r, e, existing, id)) != 1)
		return (st);
	/*
	 * Its directory is not there yet: libarchive makes it, and links
	 * the temporary name by existing's path, which is then checked to
	 * be the inode restored before it takes e->path.
	 */
	archive_entry_clear(r->ae);
	archive_entry_set_pathname(r->ae, rs_tmp_path(r));
	archive_entry_set_hardlink(r->ae, existing);
	archive_entry_set_filetype(r->ae, AE_IFREG);
	archive_entry_set_perm(r->ae, e->mode & 07777);
	archive_entry_set_size(r->ae, 0);
	if ((own = rs_disk_enter(r)) < 0)
		return (-1);
	st = archive_write_header(r->a, r->ae);
	if (st == ARCHIVE_OK || st == ARCHIVE_WARN) {
		if (rs_check(r, st, "link", e->path) == 0)
			st = archive_write_finish_entry(r->a);
	}
	rs_disk_leave(own);
	if (rs_check(r, st, "link", e->path))
		return (-1);
	if (r->fatal)
		return (-1);
	if ((r->pfd = fs_open_parent(r->dirfd, rs_tmp_path(r), &b)) == -1) {
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		return (-1);
	}
	if ((is = is_inode(r->pfd, rs_tmp_base(r), id)) != 1) {
		if (is == 0)
			log_error("cannot link '%s' to '%s': '%s' is no longer "
			    "the file restored there", e->path, existing,
			    existing);
		else
			log_errno("cannot link '%s' to '%s'", e->path,
			    existing);
		rs_drop_tmp(r);
		return (-1);
	}
	if (rs_put_in_place(r)) {
		rs_drop_tmp(r);
		return (-1);
	}
	rs_close_pfd(r);
	return (0);
}
