/*
 * The kernel's side of coffer mount (include/coffer/fs-fuse.h): libfuse's
 * low-level API, whose requests name nodes by number, served by the
 * caller's operations.  The low-level API rather than the path-based
 * one: libfuse's high-level API keeps a node, with its name, for every
 * path the kernel has looked up (an ls -l of a million names holds a
 * million), where here a node number names its node by itself and
 * nothing is kept per node.  One request at a time (fuse_session_loop):
 * the caller's catalog handle is used by one thread.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "coffer/fs-fuse.h"
#include "coffer/log.h"
#include "fs-int.h"

/* A snapshot's tree never changes: the kernel may keep what it was told
 * for long.  The lists of snapshots do, as backups complete. */
#define TIMEOUT_SNAPSHOT 3600.0
#define TIMEOUT_LIST 1.0
/* The most a read is given at once (the kernel asks for up to 128 KiB,
 * or max_read). */
#define READ_MAX (1u << 20)

struct srv {
	const struct fs_fuse_ops *ops;
	void *arg;
	char *rbuf;			/* READ_MAX bytes */
};

static struct srv *
srv_of(fuse_req_t req)
{
	return (fuse_req_userdata(req));
}

static void
to_stat(const struct fs_fuse_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = (uid_t)a->uid;
	st->st_gid = (gid_t)a->gid;
	st->st_size = a->size;
	st->st_blocks = a->blocks;
	st->st_blksize = 4096;
	st->st_rdev = a->rdev;
	/* coffer keeps no access time: the modification time stands in. */
	st->st_mtim = st->st_atim = rs_ns_timespec(a->mtime_ns);
	st->st_ctim = rs_ns_timespec(a->ctime_ns);
}

static void
op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct srv *s = srv_of(req);
	struct fuse_entry_param e;
	struct fs_fuse_attr a;
	uint64_t node;
	int rc;

	memset(&e, 0, sizeof(e));
	memset(&a, 0, sizeof(a));
	if ((rc = s->ops->lookup(s->arg, parent, name, &node, &a)) != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.ino = node;
	e.generation = 1;
	to_stat(&a, &e.attr);
	e.attr_timeout = e.entry_timeout = a.cache ? TIMEOUT_SNAPSHOT :
	    TIMEOUT_LIST;
	fuse_reply_entry(req, &e);
}

static void
op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct srv *s = srv_of(req);
	struct fs_fuse_attr a;
	struct stat st;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = s->ops->getattr(s->arg, ino, &a)) != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	to_stat(&a, &st);
	fuse_reply_attr(req, &st, a.cache ? TIMEOUT_SNAPSHOT : TIMEOUT_LIST);
}

static void
op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct srv *s = srv_of(req);
	char *t = NULL;
	int rc;

	if ((rc = s->ops->readlink(s->arg, ino, &t)) != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_readlink(req, t);
	free(t);
}

/* An open (of a directory or a file) by fn, its handle kept in fi. */
static void
open_req(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
    int (*fn)(void *, uint64_t, void **), void (*undo)(void *, void *))
{
	struct srv *s = srv_of(req);
	void *h = NULL;
	int rc;

	if ((rc = fn(s->arg, ino, &h)) != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fuse_reply_open(req, fi) != 0)
		undo(s->arg, h);
}

/* A close: the handle given back to fn. */
static void
release_req(fuse_req_t req, struct fuse_file_info *fi,
    void (*fn)(void *, void *))
{
	fn(srv_of(req)->arg, (void *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void
op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct fs_fuse_ops *ops = srv_of(req)->ops;

	open_req(req, ino, fi, ops->opendir, ops->releasedir);
}

struct fill {
	fuse_req_t req;
	int plus;			/* readdirplus: attributes too */
	char *buf;
	size_t size, used;
};

static int
fill_one(void *arg, const char *name, uint64_t node,
    const struct fs_fuse_attr *a, int64_t next)
{
	struct fill *f = arg;
	struct fuse_entry_param e;
	size_t need;

	memset(&e, 0, sizeof(e));
	to_stat(a, &e.attr);
	if (!f->plus)
		need = fuse_add_direntry(f->req, f->buf + f->used,
		    f->size - f->used, name, &e.attr, next);
	else {
		/* A node of 0 is no entry for the kernel to keep. */
		e.ino = node;
		e.generation = 1;
		e.attr_timeout = e.entry_timeout = a->cache ?
		    TIMEOUT_SNAPSHOT : TIMEOUT_LIST;
		need = fuse_add_direntry_plus(f->req, f->buf + f->used,
		    f->size - f->used, name, &e, next);
	}
	if (need > f->size - f->used)
		return (1);
	f->used += need;
	return (0);
}

static void
readdir_req(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi, int plus)
{
	struct srv *s = srv_of(req);
	struct fill f;
	int rc;

	memset(&f, 0, sizeof(f));
	f.req = req;
	f.plus = plus;
	f.size = size;
	if ((f.buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = s->ops->readdir(s->arg, ino, (void *)(uintptr_t)fi->fh, off,
	    fill_one, &f);
	/* What was filled is given even when the listing failed after it:
	 * the next call fails where it stopped. */
	if (rc != 0 && f.used == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, f.buf, f.used);
	free(f.buf);
}

static void
op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	readdir_req(req, ino, size, off, fi, 0);
}

static void
op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	readdir_req(req, ino, size, off, fi, 1);
}

static void
op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	release_req(req, fi, srv_of(req)->ops->releasedir);
}

static void
op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct fs_fuse_ops *ops = srv_of(req)->ops;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* A snapshot's file never changes: what the kernel has cached of
	 * it stays good across opens. */
	fi->keep_cache = 1;
	open_req(req, ino, fi, ops->open, ops->release);
}

static void
op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct srv *s = srv_of(req);
	ssize_t n;

	if (size > READ_MAX)
		size = READ_MAX;
	n = s->ops->read(s->arg, (void *)(uintptr_t)fi->fh, s->rbuf, size,
	    off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, s->rbuf, (size_t)n);
}

static void
op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	release_req(req, fi, srv_of(req)->ops->release);
}

/* getxattr (name) or listxattr (name NULL): with size 0 the size
 * needed, else the value or the list. */
static void
xattr_req(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct srv *s = srv_of(req);
	char *buf = NULL;
	ssize_t n;

	if (size > 0 && (buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = name != NULL ? s->ops->getxattr(s->arg, ino, name, buf, size) :
	    s->ops->listxattr(s->arg, ino, buf, size);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void
op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	xattr_req(req, ino, name, size);
}

static void
op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	xattr_req(req, ino, NULL, size);
}

/*
 * ACLs are checked by the kernel, asking for them as xattrs.  A link's
 * target is kept by the kernel: the caller's nodes never change theirs
 * (fs-fuse.h), and a path through a link would otherwise read it at
 * every step.
 */
static void
op_init(void *arg, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
}

static const struct fuse_lowlevel_ops ll_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};

int
fs_fuse_run(const char *mountpoint, const struct fs_fuse_opts *o,
    const struct fs_fuse_ops *ops, void *arg, int *sig)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct srv s;
	char opt[512];
	int rc, ret = -1, handlers = 0, mounted = 0;

	*sig = 0;
	memset(&s, 0, sizeof(s));
	s.ops = ops;
	s.arg = arg;
	if ((size_t)snprintf(opt, sizeof(opt),
	    "ro,default_permissions,subtype=coffer,fsname=%s%s",
	    o->fsname, o->allow_other ? ",allow_other" : "") >= sizeof(opt) ||
	    strchr(o->fsname, ',') != NULL) {
		log_error("cannot mount '%s': bad file system name '%s'",
		    mountpoint, o->fsname);
		return (-1);
	}
	if ((s.rbuf = malloc(READ_MAX)) == NULL ||
	    fuse_opt_add_arg(&args, "coffer") ||
	    fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opt)) {
		log_error("out of memory");
		goto out;
	}
	if ((se = fuse_session_new(&args, &ll_ops, sizeof(ll_ops), &s)) ==
	    NULL) {
		log_error("cannot mount '%s': libfuse refused its options",
		    mountpoint);
		goto out;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		log_error("cannot mount '%s': cannot catch signals",
		    mountpoint);
		goto out;
	}
	handlers = 1;
	/* libfuse says why on stderr ("fuse: ..."). */
	if (fuse_session_mount(se, mountpoint) != 0) {
		log_error("cannot mount '%s'", mountpoint);
		goto out;
	}
	mounted = 1;
	/* 0 when unmounted, the signal's number when one ended it. */
	rc = fuse_session_loop(se);
	if (rc < 0) {
		log_error("serving '%s' failed", mountpoint);
		goto out;
	}
	*sig = rc;
	ret = 0;
out:
	if (mounted)
		fuse_session_unmount(se);
	if (handlers)
		fuse_remove_signal_handlers(se);
	if (se != NULL)
		fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	free(s.rbuf);
	return (ret);
}
