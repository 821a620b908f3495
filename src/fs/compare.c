/*
 * A restored entry against the metadata it was restored from: what drill
 * checks after its restore, before it reads the content.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "coffer/fs.h"

static int
kind_of_mode(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return (ENTRY_FILE);
	case S_IFDIR:
		return (ENTRY_DIR);
	case S_IFLNK:
		return (ENTRY_SYMLINK);
	case S_IFIFO:
		return (ENTRY_FIFO);
	case S_IFCHR:
		return (ENTRY_CHR);
	case S_IFBLK:
		return (ENTRY_BLK);
	case S_IFSOCK:
		return (ENTRY_SOCK);
	}
	return (-1);
}

static int
in_groups(const struct fs_compare_opts *o, int64_t gid)
{
	size_t i;

	for (i = 0; i < o->ngroups; i++)
		if ((int64_t)o->groups[i] == gid)
			return (1);
	return ((int64_t)getegid() == gid);
}

/*
 * The mask of an access ACL in libarchive's text form ("mask::rw-"), as
 * permission bits; -1 when there is none.  With an extended ACL, the
 * group bits of a file's mode are the mask (POSIX.1e), not the group
 * entry that the stored mode holds.
 */
static int
acl_mask(const char *acl)
{
	const char *p = acl;
	int bits = 0, i;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, "mask:", 5) == 0) {
			p += 5;
			if (*p == ':')
				p++;
			for (i = 0; i < 3 && p[i]; i++)
				if (p[i] != '-')
					bits |= 4 >> i;
			return (bits);
		}
		p = strpbrk(p, "\n,");
		if (p != NULL)
			p++;
	}
	return (-1);
}

/* The permission bits a restore with o gives back of e's. */
static uint32_t
expected_mode(const struct entry *e, const struct fs_compare_opts *o)
{
	uint32_t m = e->mode & 07777;
	int mask;

	if (e->acl != NULL && e->kind != ENTRY_SYMLINK &&
	    (mask = acl_mask(e->acl)) >= 0)
		m = (m & ~(uint32_t)070) | (uint32_t)mask << 3;
	/* Without root, a file owned by another user or group loses setuid
	 * or setgid on the way. */
	if (!o->owner && e->kind != ENTRY_SYMLINK) {
		if (e->uid != (int64_t)o->euid)
			m &= ~(uint32_t)S_ISUID;
		if (!in_groups(o, e->gid))
			m &= ~(uint32_t)S_ISGID;
	}
	return (m);
}

/* Each extended attribute stored with e is on path with its value: 0, 1
 * (msg says which is not), or -1 (errno). */
static int
check_xattrs(const char *path, const struct entry *e, char *msg,
    size_t msglen)
{
	struct entry_xattr_iter it;
	char name[XATTR_NAME_MAX + 1], *got = NULL;
	const void *value;
	const char *n;
	size_t nlen, vlen;
	ssize_t len;
	int rc;

	entry_xattrs_iter_init(&it, e->xattrs, e->xattrs_len);
	while ((rc = entry_xattrs_next(&it, &n, &nlen, &value, &vlen)) == 1) {
		snprintf(name, sizeof(name), "%.*s", (int)nlen, n);
		/* One byte more than stored: a longer value differs. */
		free(got);
		if ((got = malloc(vlen + 1)) == NULL)
			return (-1);
		len = nlen < sizeof(name) ? lgetxattr(path, name, got,
		    vlen + 1) : -1;
		if (len < 0 || (size_t)len != vlen ||
		    memcmp(got, value, vlen) != 0) {
			snprintf(msg, msglen, "extended attribute '%s' %s",
			    name, len < 0 ? "is missing" : "differs");
			free(got);
			return (1);
		}
	}
	free(got);
	if (rc < 0) {
		snprintf(msg, msglen, "its stored extended attributes are "
		    "malformed");
		return (1);
	}
	return (0);
}

int
fs_compare(const char *path, const struct entry *e,
    const struct fs_compare_opts *o, struct stat *st, char *msg,
    size_t msglen)
{
	char target[PATH_MAX + 1];
	int64_t mtime;
	ssize_t n;
	int kind;

	if (lstat(path, st))
		return (-1);
	kind = kind_of_mode(st->st_mode);
	if (kind != e->kind) {
		snprintf(msg, msglen, "is a %s, not a %s", kind < 0 ? "?" :
		    entry_kind_name(kind), entry_kind_name(e->kind));
		return (1);
	}
	if (e->kind != ENTRY_SYMLINK &&
	    (uint32_t)(st->st_mode & 07777) != expected_mode(e, o)) {
		snprintf(msg, msglen, "mode %04o, not %04o",
		    (unsigned)(st->st_mode & 07777), expected_mode(e, o));
		return (1);
	}
	mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 +
	    st->st_mtim.tv_nsec;
	/* Restore does not promise symlink times. */
	if (e->kind != ENTRY_SYMLINK && mtime != e->mtime_ns) {
		snprintf(msg, msglen, "mtime %lld.%09lld, not %lld.%09lld",
		    (long long)(mtime / 1000000000),
		    (long long)(mtime % 1000000000),
		    (long long)(e->mtime_ns / 1000000000),
		    (long long)(e->mtime_ns % 1000000000));
		return (1);
	}
	if (o->owner && ((int64_t)st->st_uid != e->uid ||
	    (int64_t)st->st_gid != e->gid)) {
		snprintf(msg, msglen, "owner %u:%u, not %lld:%lld",
		    (unsigned)st->st_uid, (unsigned)st->st_gid,
		    (long long)e->uid, (long long)e->gid);
		return (1);
	}
	if (e->xattrs_len > 0)
		switch (check_xattrs(path, e, msg, msglen)) {
		case 0:
			break;
		case 1:
			return (1);
		default:
			return (-1);
		}
	switch (e->kind) {
	case ENTRY_SYMLINK:
		n = readlink(path, target, PATH_MAX);
		if (n < 0 || e->target == NULL ||
		    (size_t)n != strlen(e->target) ||
		    memcmp(target, e->target, (size_t)n) != 0) {
			snprintf(msg, msglen, "symlink target differs");
			return (1);
		}
		break;
	case ENTRY_CHR:
	case ENTRY_BLK:
		if (o->owner && (uint64_t)st->st_rdev != e->rdev) {
			snprintf(msg, msglen, "device number differs");
			return (1);
		}
		break;
	case ENTRY_FILE:
		if ((int64_t)st->st_size != e->size) {
			snprintf(msg, msglen, "size %lld, not %lld",
			    (long long)st->st_size, (long long)e->size);
			return (1);
		}
		break;
	}
	return (0);
}
