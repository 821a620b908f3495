#ifndef COFFER_FS_FUSE_H
#define COFFER_FS_FUSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coffer/buf.h"

/*
 * A read-only file system served through FUSE (src/fs/fuse.c, the only
 * libfuse user): the kernel's requests become calls of the operations
 * below on nodes the caller numbers (FS_FUSE_ROOT is the root), one at a
 * time on the calling thread.  The caller keeps nothing per node: a node
 * number must name its node by itself, for as long as the mount lasts,
 * and a symbolic link's node its target (the kernel keeps it).
 */
#define FS_FUSE_ROOT 1

/* The names under which the kernel asks for a POSIX.1e ACL. */
#define FS_FUSE_ACL_ACCESS "system.posix_acl_access"
#define FS_FUSE_ACL_DEFAULT "system.posix_acl_default"

struct fs_fuse_attr {
	uint64_t ino;			/* st_ino: equal for a hardlink's names */
	uint32_t mode;			/* S_IF* and the permission bits */
	uint32_t nlink;
	int64_t uid, gid;
	int64_t size;
	int64_t blocks;			/* 512-byte units */
	int64_t mtime_ns, ctime_ns;
	uint64_t rdev;
	int cache;			/* the answer holds for the mount's
					 * life (a snapshot's), or is to be
					 * asked again (the snapshot lists) */
};

/*
 * readdir's filler: an entry, node with its attributes a (the kernel
 * takes them with the names, sparing a lookup of each), whose successor
 * is at next; node 0 for "." and "..", of which only a->ino and the type
 * in a->mode count.  1 when the kernel's buffer is full and name was not
 * taken (stop), else 0.
 */
typedef int (*fs_fuse_fill_fn)(void *fill, const char *name, uint64_t node,
    const struct fs_fuse_attr *a, int64_t next);

/*
 * Each returns 0 (or a length) or a negative errno, which the kernel
 * gets: -ENOENT, -EIO, ...  readdir fills the entries from position off
 * (0: the first) until fill says stop or there are no more.  read
 * returns the bytes read into buf (fewer only at the end of the file).
 * getxattr and listxattr with size 0 return the size needed, else the
 * bytes put in buf, -ERANGE when size is too small.  readlink gives a
 * malloc'd target.
 */
struct fs_fuse_ops {
	int (*lookup)(void *arg, uint64_t parent, const char *name,
	    uint64_t *node, struct fs_fuse_attr *a);
	int (*getattr)(void *arg, uint64_t node, struct fs_fuse_attr *a);
	int (*readlink)(void *arg, uint64_t node, char **target);
	int (*opendir)(void *arg, uint64_t node, void **dh);
	int (*readdir)(void *arg, uint64_t node, void *dh, int64_t off,
	    fs_fuse_fill_fn fill, void *fill_arg);
	void (*releasedir)(void *arg, void *dh);
	int (*open)(void *arg, uint64_t node, void **fh);
	ssize_t (*read)(void *arg, void *fh, char *buf, size_t size,
	    int64_t off);
	void (*release)(void *arg, void *fh);
	ssize_t (*getxattr)(void *arg, uint64_t node, const char *name,
	    void *buf, size_t size);
	ssize_t (*listxattr)(void *arg, uint64_t node, char *buf,
	    size_t size);
};

struct fs_fuse_opts {
	const char *fsname;		/* shown in /proc/mounts */
	int allow_other;		/* other users may enter the mount
					 * (as root, or with user_allow_other
					 * in /etc/fuse.conf) */
};

/*
 * Mount a read-only file system at mountpoint and serve ops (with arg)
 * on this thread until it is unmounted (fusermount3 -u, umount) or
 * SIGINT, SIGTERM or SIGHUP arrives, then unmount it.  The kernel checks
 * permissions against the modes given (default_permissions).  0 when it
 * ended so (*sig the signal, or 0), -1 when it could not be mounted or
 * served (reported).
 */
int fs_fuse_run(const char *mountpoint, const struct fs_fuse_opts *o,
    const struct fs_fuse_ops *ops, void *arg, int *sig);

/*
 * The access (def 0) or default (def 1) part of acl, an entry's ACL in
 * libarchive's text form, as the value of FS_FUSE_ACL_ACCESS or
 * FS_FUSE_ACL_DEFAULT (the kernel's posix_acl_xattr) in out (src/fs/
 * aentry.c, which owns libarchive).  1 when it has that part, 0 when not
 * (none, or an NFSv4 ACL), -1 out of memory (reported).
 */
int fs_fuse_acl_xattr(const char *acl, int def, struct buf *out);

#endif
