/*
 * An entry's metadata to and from libarchive's archive_entry: shared by
 * the walk (from the disk), restore (to the disk) and the tar streams of
 * coffer dump and backup --from-tar (tar.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <archive.h>
#include <archive_entry.h>

#include "coffer/buf.h"
#include "coffer/entry.h"
#include "coffer/fs-fuse.h"
#include "coffer/log.h"
#include "fs-int.h"

int
fs_ae_kind(unsigned int ft)
{
	switch (ft) {
	case AE_IFREG:
		return (ENTRY_FILE);
	case AE_IFDIR:
		return (ENTRY_DIR);
	case AE_IFLNK:
		return (ENTRY_SYMLINK);
	case AE_IFIFO:
		return (ENTRY_FIFO);
	case AE_IFCHR:
		return (ENTRY_CHR);
	case AE_IFBLK:
		return (ENTRY_BLK);
	case AE_IFSOCK:
		return (ENTRY_SOCK);
	default:
		return (-1);
	}
}

int
fs_ae_filetype(int kind)
{
	switch (kind) {
	case ENTRY_FILE:
		return (AE_IFREG);
	case ENTRY_DIR:
		return (AE_IFDIR);
	case ENTRY_SYMLINK:
		return (AE_IFLNK);
	case ENTRY_FIFO:
		return (AE_IFIFO);
	case ENTRY_CHR:
		return (AE_IFCHR);
	case ENTRY_BLK:
		return (AE_IFBLK);
	default:
		return (-1);
	}
}

/* Nanoseconds since the epoch as seconds and a non-negative remainder. */
struct timespec
rs_ns_timespec(int64_t ns)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return (ts);
}

int
fs_ae_get_xattrs(struct archive_entry *ae, struct buf *out)
{
	const char *name;
	const void *value;
	size_t size;

	if (archive_entry_xattr_reset(ae) == 0)
		return (0);
	while (archive_entry_xattr_next(ae, &name, &value, &size) ==
	    ARCHIVE_OK) {
		if (name == NULL || *name == '\0')
			continue;
		if (entry_xattrs_add(out, name, value, size))
			return (-1);
	}
	return (0);
}

static int
add_xattrs(struct archive_entry *ae, const struct entry *e, struct buf *tmp,
    unsigned long *warnings)
{
	struct entry_xattr_iter it;
	const char *name;
	const void *value;
	size_t nl, vl;
	int st;

	entry_xattrs_iter_init(&it, e->xattrs, e->xattrs_len);
	while ((st = entry_xattrs_next(&it, &name, &nl, &value, &vl)) == 1) {
		/* libarchive wants NUL-terminated names. */
		buf_reset(tmp);
		if (buf_append(tmp, name, nl) || buf_put_u8(tmp, 0))
			return (-1);
		archive_entry_xattr_add_entry(ae, (const char *)tmp->data,
		    value, vl);
	}
	if (st < 0) {
		(*warnings)++;
		log_warn("malformed extended attributes of '%s'; "
		    "restoring the rest", e->path);
	}
	return (0);
}

static void
add_acl(struct archive_entry *ae, const struct entry *e,
    unsigned long *warnings)
{
	/* Access and default entries ("default:" marks the latter), as
	 * fs_walk_next stored them; NFSv4 text has more fields. */
	if (archive_entry_acl_from_text(ae, e->acl,
	    ARCHIVE_ENTRY_ACL_TYPE_POSIX1E) == ARCHIVE_OK)
		return;
	archive_entry_acl_clear(ae);
	if (archive_entry_acl_from_text(ae, e->acl,
	    ARCHIVE_ENTRY_ACL_TYPE_NFS4) == ARCHIVE_OK)
		return;
	archive_entry_acl_clear(ae);
	(*warnings)++;
	log_warn("cannot parse the ACL of '%s'; restoring it without",
	    e->path);
}

int
fs_ae_set(struct archive_entry *ae, const struct entry *e, struct buf *tmp,
    unsigned long *warnings)
{
	struct timespec ts = rs_ns_timespec(e->mtime_ns);

	archive_entry_set_filetype(ae, (unsigned int)fs_ae_filetype(e->kind));
	archive_entry_set_uid(ae, e->uid);
	archive_entry_set_gid(ae, e->gid);
	if (e->uname != NULL)
		archive_entry_set_uname(ae, e->uname);
	if (e->gname != NULL)
		archive_entry_set_gname(ae, e->gname);
	archive_entry_set_mtime(ae, ts.tv_sec, ts.tv_nsec);
	if (e->kind == ENTRY_FILE)
		archive_entry_set_size(ae, e->size);
	if (e->kind == ENTRY_SYMLINK)
		archive_entry_set_symlink(ae, e->target);
	if (e->kind == ENTRY_CHR || e->kind == ENTRY_BLK)
		archive_entry_set_rdev(ae, (dev_t)e->rdev);
	if (e->xattrs_len > 0 && add_xattrs(ae, e, tmp, warnings))
		return (-1);
	if (e->acl != NULL && *e->acl != '\0')
		add_acl(ae, e, warnings);
	/*
	 * After the ACL: parsing user::/group::/other:: entries rewrites the
	 * permission bits, and the stored mode (stat()'s) is authoritative,
	 * except for the group bits of a file with an extended access ACL:
	 * stat() shows its mask there, which comes back with the ACL, while
	 * libarchive wants the group:: entry in the mode.
	 */
	if (archive_entry_acl_count(ae, ARCHIVE_ENTRY_ACL_TYPE_ACCESS) > 0)
		archive_entry_set_perm(ae, (e->mode & 07707) |
		    (archive_entry_perm(ae) & 070));
	else
		archive_entry_set_perm(ae, e->mode & 07777);
	return (0);
}

/* The kernel's posix_acl_xattr: a version, then (tag, perm, id) entries
 * in the order it checks them in (tag, then id). */
#define ACL_XATTR_VERSION 2
#define ACL_UNDEFINED_ID 0xffffffffu

struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

static int
acl_tag(int tag, uint16_t *out)
{
	switch (tag) {
	case ARCHIVE_ENTRY_ACL_USER_OBJ: *out = 0x01; break;
	case ARCHIVE_ENTRY_ACL_USER: *out = 0x02; break;
	case ARCHIVE_ENTRY_ACL_GROUP_OBJ: *out = 0x04; break;
	case ARCHIVE_ENTRY_ACL_GROUP: *out = 0x08; break;
	case ARCHIVE_ENTRY_ACL_MASK: *out = 0x10; break;
	case ARCHIVE_ENTRY_ACL_OTHER: *out = 0x20; break;
	default: return (-1);
	}
	return (0);
}

static int
acl_ent_cmp(const void *a, const void *b)
{
	const struct acl_ent *x = a, *y = b;

	if (x->tag != y->tag)
		return (x->tag < y->tag ? -1 : 1);
	return (x->id < y->id ? -1 : x->id > y->id);
}

int
fs_fuse_acl_xattr(const char *acl, int def, struct buf *out)
{
	struct archive_entry *ae;
	struct acl_ent *v = NULL;
	size_t n = 0, cap = 0, i;
	const char *name;
	int type = def ? ARCHIVE_ENTRY_ACL_TYPE_DEFAULT :
	    ARCHIVE_ENTRY_ACL_TYPE_ACCESS;
	int t, perm, tag, qual, rc = -1;
	uint8_t rec[8];

	buf_reset(out);
	if (acl == NULL || *acl == '\0')
		return (0);
	if ((ae = archive_entry_new()) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	/* Not POSIX.1e (NFSv4's, or damaged): none to show. */
	if (archive_entry_acl_from_text(ae, acl,
	    ARCHIVE_ENTRY_ACL_TYPE_POSIX1E) != ARCHIVE_OK ||
	    archive_entry_acl_reset(ae, type) == 0) {
		rc = 0;
		goto out;
	}
	while (archive_entry_acl_next(ae, type, &t, &perm, &tag, &qual,
	    &name) == ARCHIVE_OK) {
		if (array_grow(&v, &cap, n, sizeof(*v), 8))
			goto out;
		if (acl_tag(tag, &v[n].tag))
			continue;
		v[n].perm = (uint16_t)(perm & 07);
		v[n].id = (v[n].tag == 0x02 || v[n].tag == 0x08) ?
		    (uint32_t)qual : ACL_UNDEFINED_ID;
		n++;
	}
	qsort(v, n, sizeof(*v), acl_ent_cmp);
	put_u32(rec, ACL_XATTR_VERSION);
	/* put_u32 is little-endian, as the kernel's format is. */
	if (buf_append(out, rec, 4))
		goto out;
	for (i = 0; i < n; i++) {
		rec[0] = (uint8_t)v[i].tag;
		rec[1] = (uint8_t)(v[i].tag >> 8);
		rec[2] = (uint8_t)v[i].perm;
		rec[3] = (uint8_t)(v[i].perm >> 8);
		put_u32(rec + 4, v[i].id);
		if (buf_append(out, rec, 8))
			goto out;
	}
	rc = n > 0 ? 1 : 0;
out:
	free(v);
	archive_entry_free(ae);
	return (rc);
}
