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
#include "fs-int.h"
#include "restore-int.h"

/*
 * A restore's directories: made or found below the target, their
 * metadata remembered (struct dir_meta says why) and set at close.
 */

/*
 * POSIX.1e ACLs are given to directories as Linux keeps them, in the
 * extended attributes system.posix_acl_access and _default
 * (linux/posix_acl_xattr.h): a version, then (tag, permissions, id)
 * entries in the order of their tags and ids, little-endian.  libarchive
 * would set them by name, and coffer does not link libacl.
 */
#define PACL_VERSION 2
#define PACL_NO_ID UINT32_MAX

struct pacl {
	uint16_t tag, perm;
	uint32_t id;
};

static int
pacl_tag(int tag)
{
	switch (tag) {
	case ARCHIVE_ENTRY_ACL_USER_OBJ:
		return (0x01);
	case ARCHIVE_ENTRY_ACL_USER:
		return (0x02);
	case ARCHIVE_ENTRY_ACL_GROUP_OBJ:
		return (0x04);
	case ARCHIVE_ENTRY_ACL_GROUP:
		return (0x08);
	case ARCHIVE_ENTRY_ACL_MASK:
		return (0x10);
	case ARCHIVE_ENTRY_ACL_OTHER:
		return (0x20);
	default:
		return (-1);
	}
}

static int
pacl_cmp(const void *x, const void *y)
{
	const struct pacl *a = x, *b = y;

	if (a->tag != b->tag)
		return (a->tag < b->tag ? -1 : 1);
	return (a->id < b->id ? -1 : a->id > b->id);
}

/*
 * The ACL of type (access or default) that r->ae holds, appended to r->acl
 * as its extended attribute; *len is how long (0: none).  Named users and
 * groups are looked up by name first, as libarchive does for owners.  0,
 * or -1 (out of memory, reported).
 */
static int
acl_xattr(struct fs_restore *r, int type, size_t *len)
{
	struct pacl *v = NULL;
	const char *name;
	size_t n = 0, cap = 0, i, start = r->acl.len;
	int t, perm, tag, qual, pt;
	uint8_t b[8];

	*len = 0;
	if (archive_entry_acl_reset(r->ae, type) == 0)
		return (0);
	while (archive_entry_acl_next(r->ae, type, &t, &perm, &tag, &qual,
	    &name) == ARCHIVE_OK) {
		if ((pt = pacl_tag(tag)) < 0)
			continue;
		if (array_grow(&v, &cap, n, sizeof(*v), 8))
			goto err;
		v[n].tag = (uint16_t)pt;
		v[n].perm = (uint16_t)(perm & 7);
		v[n].id = tag == ARCHIVE_ENTRY_ACL_USER ?
		    (uint32_t)archive_write_disk_uid(r->a, name, qual) :
		    tag == ARCHIVE_ENTRY_ACL_GROUP ?
		    (uint32_t)archive_write_disk_gid(r->a, name, qual) :
		    PACL_NO_ID;
		n++;
	}
	qsort(v, n, sizeof(*v), pacl_cmp);
	if (buf_put_u32(&r->acl, PACL_VERSION))
		goto err;
	for (i = 0; i < n; i++) {
		b[0] = (uint8_t)v[i].tag;
		b[1] = (uint8_t)(v[i].tag >> 8);
		b[2] = (uint8_t)v[i].perm;
		b[3] = (uint8_t)(v[i].perm >> 8);
		put_u32(b + 4, v[i].id);
		if (buf_append(&r->acl, b, sizeof(b)))
			goto err;
	}
	free(v);
	*len = r->acl.len - start;
	return (0);
err:
	free(v);
	return (-1);
}

/*
 * Remember e's metadata for the directory at path below the target (""
 * for the target itself), to be set at close.  0, or -1 (out of memory,
 * reported).
 */
static int
remember_dir(struct fs_restore *r, const struct entry *e, const char *path)
{
	struct dir_meta *d;
	size_t plen = strlen(path) + 1, alen[2] = { 0, 0 };
	uint32_t mode = e->mode & 07777;
	uint8_t *p;

	buf_reset(&r->acl);
	if (e->acl != NULL && *e->acl != '\0') {
		archive_entry_clear(r->ae);
		archive_entry_set_filetype(r->ae, AE_IFDIR);
		archive_entry_set_perm(r->ae, mode);
		if (archive_entry_acl_from_text(r->ae, e->acl,
		    ARCHIVE_ENTRY_ACL_TYPE_POSIX1E) != ARCHIVE_OK) {
			r->warnings++;
			log_warn("cannot restore the ACL of '%s': not a "
			    "POSIX.1e ACL; restoring it without", e->path);
		} else {
			/* As for files (fs_restore_begin): the group bits
			 * are the group:: entry's until the ACL's mask
			 * takes their place. */
			if (archive_entry_acl_count(r->ae,
			    ARCHIVE_ENTRY_ACL_TYPE_ACCESS) > 0)
				mode = (mode & 07707) |
				    (archive_entry_perm(r->ae) & 070);
			archive_entry_set_perm(r->ae, mode);
			if (acl_xattr(r, ARCHIVE_ENTRY_ACL_TYPE_ACCESS,
			    &alen[0]) ||
			    acl_xattr(r, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT,
			    &alen[1]))
				return (-1);
		}
	}
	if (array_grow(&r->dirs, &r->capdirs, r->ndirs, sizeof(*r->dirs),
	    64))
		return (-1);
	/* Sizes of what is in memory already: no overflow. */
	if ((p = malloc(plen + e->xattrs_len + r->acl.len)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	d = &r->dirs[r->ndirs++];
	memset(d, 0, sizeof(*d));
	d->path = memcpy(p, path, plen);
	p += plen;
	if (e->xattrs_len > 0)
		d->xattrs = memcpy(p, e->xattrs, e->xattrs_len);
	d->xattrs_len = e->xattrs_len;
	p += e->xattrs_len;
	if (r->acl.len > 0)
		memcpy(p, r->acl.data, r->acl.len);
	d->acl[0] = p;
	d->acl_len[0] = alen[0];
	d->acl[1] = p + alen[0];
	d->acl_len[1] = alen[1];
	d->mode = mode;
	d->mtime_ns = e->mtime_ns;
	if ((d->owner = (r->opts & ARCHIVE_EXTRACT_OWNER) != 0)) {
		d->uid = archive_write_disk_uid(r->a, e->uname, e->uid);
		d->gid = archive_write_disk_gid(r->a, e->gname, e->gid);
	}
	return (0);
}

/*
 * A directory: made here (mode 0700 until its own is set at close), or
 * found there (FS_RESTORE_FORCE), through its parent opened below the
 * target through no symlink.  When that parent cannot be reached so (it
 * is missing, or not a directory), or something else is in the way,
 * libarchive makes it as before (it makes the directories above, replaces
 * what is in the way, refuses a symlink on the way), told to set nothing
 * about it, so that it has nothing to set by name at close.  0, or -1
 * (reported).
 */
int
rs_begin_dir(struct fs_restore *r, const struct entry *e)
{
	const char *base;
	int pfd, fd, made = 0, own, st1, st2 = ARCHIVE_OK;

	if ((pfd = fs_open_parent(r->dirfd, e->path, &base)) != -1) {
		if (mkdirat(pfd, base, 0700) == 0)
			made = 1;
		else if (errno == EEXIST && (fd = openat(pfd, base, O_RDONLY |
		    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
			made = 1;
			if (r->force)
				rs_drop_stale(r, fd, e->path);
			close(fd);
		}
		if (pfd != r->dirfd)
			close(pfd);
	}
	if (!made) {
		archive_entry_clear(r->ae);
		archive_entry_set_pathname(r->ae, e->path);
		archive_entry_set_filetype(r->ae, AE_IFDIR);
		archive_entry_set_perm(r->ae, 0700);
		if ((own = rs_disk_enter(r)) < 0)
			return (-1);
		(void)archive_write_disk_set_options(r->a, r->opts &
		    RS_SECURE_OPTS);
		st1 = archive_write_header(r->a, r->ae);
		if (st1 == ARCHIVE_OK || st1 == ARCHIVE_WARN)
			st2 = archive_write_finish_entry(r->a);
		(void)archive_write_disk_set_options(r->a, r->opts);
		rs_disk_leave(own);
		if (rs_check(r, st1, "restore", e->path) ||
		    rs_check(r, st2, "restore", e->path) || r->fatal)
			return (-1);
	}
	return (remember_dir(r, e, e->path));
}

int
fs_restore_root(struct fs_restore *r, const struct entry *e)
{
	assert(r->state == RS_IDLE);
	if (e->kind != ENTRY_DIR) {
		log_error("cannot restore the metadata of the snapshot's root: "
		    "it is a %s, not a directory", entry_kind_name(e->kind));
		return (-1);
	}
	return (remember_dir(r, e, ""));
}

/* A directory's path is a prefix of those below it: in reverse order,
 * they come before it, and the target ("") comes last. */
static int
deeper_first(const void *x, const void *y)
{
	const struct dir_meta *a = x, *b = y;

	return (-strcmp(a->path, b->path));
}

/* The directory at path below dirfd, reached through no symlink. */
static int
open_dir_beneath(int dirfd, const char *path)
{
	const char *base;
	int fd, pfd, e;

	fd = fs_open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY);
	if (fd != -1 || errno != ENOSYS)
		return (fd);
	if ((pfd = fs_open_parent(dirfd, path, &base)) == -1)
		return (-1);
	fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	e = errno;
	if (pfd != dirfd)
		close(pfd);
	errno = e;
	return (fd);
}

static void
dir_warn(struct fs_restore *r, const struct dir_meta *d, const char *what)
{
	r->warnings++;
	log_warn("incomplete restore of '%s': cannot set its %s: %s",
	    *d->path != '\0' ? d->path : r->target, what, strerror(errno));
}

static void
set_xattrs(struct fs_restore *r, const struct dir_meta *d, int fd)
{
	struct entry_xattr_iter it;
	const char *name;
	const void *value;
	size_t nl, vl;

	entry_xattrs_iter_init(&it, d->xattrs, d->xattrs_len);
	while (entry_xattrs_next(&it, &name, &nl, &value, &vl) == 1) {
		buf_reset(&r->name);
		if (buf_append(&r->name, name, nl) || buf_put_u8(&r->name, 0))
			return;
		name = (const char *)r->name.data;
		/* The ACLs are set as such (as libarchive skips them). */
		if (strcmp(name, "system.posix_acl_access") == 0 ||
		    strcmp(name, "system.posix_acl_default") == 0)
			continue;
		if (fsetxattr(fd, name, value, vl, 0))
			dir_warn(r, d, "extended attributes");
	}
}

/*
 * One directory's metadata, in libarchive's order: the owner first (a
 * change of owner clears setuid and setgid), extended attributes before
 * the mode without root (the mode may forbid writing them) and after it
 * with root (security.capability goes with other changes), the ACLs after
 * the mode (the access ACL's mask takes the group bits), the times last.
 */
static void
set_dir(struct fs_restore *r, const struct dir_meta *d, int root)
{
	static const char *const acl_name[2] = {
		"system.posix_acl_access", "system.posix_acl_default"
	};
	struct timespec ts[2];
	int fd, i;

	if (*d->path == '\0')
		fd = r->dirfd;
	else if ((fd = open_dir_beneath(r->dirfd, d->path)) == -1) {
		r->warnings++;
		log_warn("incomplete restore of '%s': cannot open it to set "
		    "its mode, owner and times: %s", d->path,
		    strerror(errno));
		return;
	}
	if (d->owner && fchown(fd, (uid_t)d->uid, (gid_t)d->gid))
		dir_warn(r, d, "owner");
	if (!root && d->xattrs_len > 0)
		set_xattrs(r, d, fd);
	if (fchmod(fd, (mode_t)d->mode))
		dir_warn(r, d, "mode");
	if (root && d->xattrs_len > 0)
		set_xattrs(r, d, fd);
	for (i = 0; i < 2; i++)
		if (d->acl_len[i] > 0 && fsetxattr(fd, acl_name[i],
		    d->acl[i], d->acl_len[i], 0))
			dir_warn(r, d, "ACL");
	ts[0] = ts[1] = rs_ns_timespec(d->mtime_ns);
	if (futimens(fd, ts))
		dir_warn(r, d, "times");
	if (fd != r->dirfd)
		close(fd);
}

/* Every directory's metadata, those below a directory before its own. */
void
rs_set_dirs(struct fs_restore *r)
{
	size_t i;
	int root = geteuid() == 0;

	if (r->ndirs > 1)	/* a writer that made none has no array */
		qsort(r->dirs, r->ndirs, sizeof(*r->dirs), deeper_first);
	for (i = 0; i < r->ndirs; i++)
		set_dir(r, &r->dirs[i], root);
}
