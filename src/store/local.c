/*
 * The local store: a directory on a local or network file system.  Every
 * object is reached from the directory's descriptor, one component at a
 * time (fsutil_open_in): never through a link, never blocking on a FIFO
 * or a device, and whatever is not the regular file or directory
 * expected is refused, naming it (doc/design.md, "Threat model").
 * Puts are written in tmp/, fsynced, renamed into place, and the
 * directory fsynced (the durability order).  Locks are flock(2) on
 * files in locks/.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/storage.h"
#include "store-int.h"

#define TMP_DIR "tmp"
#define LOCK_DIR "locks"

struct local {
	struct storage base;
	int dfd;
};

struct local_obj {
	struct storage_obj base;
	int fd;
};

/* One descriptor a put: an import holds one put open for each pack of a
 * bundle. */
struct local_put {
	struct storage_put base;
	int fd;
	char tmp[32];
};

/* A lock: flock(2) on locks/NAME, LOCK_EX or LOCK_SH.  A shared
 * holder's info is a file of its own, locks/NAME.shared/TOKEN, which it
 * keeps flocked LOCK_EX as long as it holds: one that a lister can
 * flock is a dead holder's. */
struct local_lock {
	struct storage_lock base;
	int fd;
	int sdfd, infofd;		/* a shared holder's; else -1 */
	char token[33];
};

static struct local *
local_of(struct storage *st)
{
	return ((struct local *)st);
}

/* A failure of a call, with errno, on rel (the object's name). */
static int
fail_errno(struct local *l, const char *what, const char *rel)
{
	int e = errno;

	return (storage_fail(e, "repository '%s': %s '%s' failed: %s",
	    l->base.where, what, rel, strerror(e)));
}

/* Something other than want at rel (name in dirfd): refused. */
static int
fail_kind(struct local *l, int dirfd, const char *name, const char *rel,
    mode_t want)
{
	return (storage_fail(EINVAL, "repository '%s': '%s' is %s where %s "
	    "belongs: refused", l->base.where, rel,
	    fsutil_kind_at(dirfd, name), want == S_IFDIR ? "a directory" :
	    "a regular file"));
}

/*
 * Open name in dirfd as want (flags as fsutil_open_in's), rel naming it
 * in messages.  An fd; -1 with STORAGE_MISSING in *missing when
 * nothing is there (not recorded), or -1 recorded.
 */
static int
open_at(struct local *l, int dirfd, const char *name, const char *rel,
    int flags, mode_t want, int *missing)
{
	int fd, wrong;

	*missing = 0;
	if ((fd = fsutil_open_in(dirfd, name, flags, want, &wrong)) != -1)
		return (fd);
	if (wrong)
		return (fail_kind(l, dirfd, name, rel, want));
	if (errno == ENOENT) {
		*missing = 1;
		return (-1);
	}
	return (fail_errno(l, "open of", rel));
}

/* Make directory name in dirfd (rel for messages), and fsync dirfd. */
static int
make_dir(struct local *l, int dirfd, const char *name, const char *rel)
{
	if (mkdirat(dirfd, name, 0700) == 0) {
		if (fsync(dirfd))
			return (fail_errno(l, "fsync of the directory of",
			    rel));
	} else if (errno != EEXIST)
		return (fail_errno(l, "creation of", rel));
	return (0);
}

/*
 * The directory holding object name, walked to from the store's one
 * component at a time, each a directory and none a link: its fd, and
 * *leaf the name's last component.  With create, missing directories are
 * made.  -1 and *missing when one is not there (not recorded), or -1
 * recorded.
 */
static int
walk(struct local *l, const char *name, int create, const char **leaf,
    int *missing)
{
	char rel[STORAGE_NAME_MAX + 8], *part, *slash;
	int dfd, fd;

	*missing = 0;
	snprintf(rel, sizeof(rel), "%s", name);
	if ((dfd = dup(l->dfd)) == -1)
		return (fail_errno(l, "open of", "."));
	/* rel is cut after each directory in turn, naming it in messages. */
	for (part = rel; (slash = strchr(part, '/')) != NULL;
	    part = slash + 1) {
		*slash = '\0';
		if (create && make_dir(l, dfd, part, rel))
			fd = -1;
		else
			fd = open_at(l, dfd, part, rel, O_RDONLY, S_IFDIR,
			    missing);
		close(dfd);
		if ((dfd = fd) == -1)
			return (-1);
		*slash = '/';
	}
	*leaf = name + (part - rel);
	return (dfd);
}

/* Object name open as a regular file: an fd, -1 and *missing, or -1. */
static int
open_object(struct local *l, const char *name, int *missing)
{
	const char *leaf;
	int dfd, fd;

	if ((dfd = walk(l, name, 0, &leaf, missing)) == -1)
		return (-1);
	fd = open_at(l, dfd, leaf, name, O_RDONLY, S_IFREG, missing);
	close(dfd);
	return (fd);
}

static int
local_open(struct storage *st, const char *name, struct storage_obj **o,
    uint64_t *size)
{
	struct local *l = local_of(st);
	struct local_obj *h;
	struct stat sb;
	int fd, missing;

	if ((fd = open_object(l, name, &missing)) == -1)
		return (missing ? STORAGE_MISSING : -1);
	if (fstat(fd, &sb) || (h = calloc(1, sizeof(*h))) == NULL) {
		fail_errno(l, "open of", name);
		close(fd);
		return (-1);
	}
	h->fd = fd;
	*size = (uint64_t)sb.st_size;
	*o = &h->base;
	return (0);
}

static int
local_stat(struct storage *st, const char *name, uint64_t *size)
{
	struct storage_obj *o;
	int rc;

	if ((rc = local_open(st, name, &o, size)) == 0) {
		close(((struct local_obj *)o)->fd);
		free(o);
	}
	return (rc);
}

static int
local_read(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got)
{
	struct local_obj *h = (struct local_obj *)o;
	ssize_t n;

	do
		n = pread(h->fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return (fail_errno(local_of(o->st), "read of", o->name));
	*got = (size_t)n;
	return (0);
}

static int
local_cached(struct storage_obj *o, uint64_t off, uint64_t len)
{
	struct local_obj *h = (struct local_obj *)o;

	return (fsutil_cached(h->fd, off, len));
}

static void
local_obj_close(struct storage_obj *o)
{
	close(((struct local_obj *)o)->fd);
	free(o);
}

/* The store's tmp/, opened through no link: an fd, or -1 recorded. */
static int
tmp_dir(struct local *l)
{
	int fd, missing;

	if ((fd = open_at(l, l->dfd, TMP_DIR, TMP_DIR, O_RDONLY, S_IFDIR,
	    &missing)) == -1 && missing)
		fail_errno(l, "open of", TMP_DIR);
	return (fd);
}

/* A new file tmp/put-RANDOM, its name into tmp (5 + 16 hex + NUL): the
 * descriptor, or -1 (errno).  Only unlikely to collide: O_EXCL refuses
 * what is there, a link included. */
static int
tmp_create(int tmpdir, char *tmp)
{
	uint8_t rnd[8];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memset(rnd, (int)getpid(), sizeof(rnd));
	memcpy(tmp, "put-", 4);
	hex_encode(tmp + 4, rnd, sizeof(rnd));
	return (openat(tmpdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600));
}

static int
local_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p)
{
	struct local *l = local_of(st);
	struct local_put *h;
	struct stat sb;
	int tmpdir, tries;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	h->fd = -1;
	if ((tmpdir = tmp_dir(l)) == -1) {
		free(h);
		return (-1);
	}
	/*
	 * The file is held (flock) until the put ends: storage_clean, which
	 * any writer may run beside others' puts, removes only files nobody
	 * holds.  A clean may meet it between its creation and the flock:
	 * then it is made again, under a new name.  A file system without
	 * flock makes clean go by age alone.
	 */
	for (tries = 0;; tries++) {
		if ((h->fd = tmp_create(tmpdir, h->tmp)) == -1) {
			fail_errno(l, "creation of a temporary file for", name);
			close(tmpdir);
			free(h);
			return (-1);
		}
		if (flock(h->fd, LOCK_EX | LOCK_NB) == 0) {
			if (fstat(h->fd, &sb) == 0 && sb.st_nlink > 0)
				break;	/* held, and still there */
		} else if (errno != EWOULDBLOCK || tries >= 8)
			break;	/* no flock here: clean goes by age */
		/* A clean took it: it goes; a new one. */
		unlinkat(tmpdir, h->tmp, 0);
		close(h->fd);
	}
	close(tmpdir);
	*p = &h->base;
	return (0);
}

static int
local_put_write(struct storage_put *p, const void *data, size_t len)
{
	struct local_put *h = (struct local_put *)p;

	if (fsutil_write_all_quiet(h->fd, data, len))
		return (fail_errno(local_of(p->st), "write of", p->name));
	return (0);
}

/* The put's file in tmpdir (-1: tmp/ opened again) goes, and the put. */
static void
put_free(struct local_put *h, int tmpdir)
{
	int own = tmpdir == -1;

	if (h->fd != -1)
		close(h->fd);
	if (own)
		tmpdir = tmp_dir(local_of(h->base.st));
	if (tmpdir != -1)
		unlinkat(tmpdir, h->tmp, 0);
	if (own && tmpdir != -1)
		close(tmpdir);
	free(h);
}

static void
local_put_abort(struct storage_put *p)
{
	put_free((struct local_put *)p, -1);
}

/*
 * The durability order: the data fsynced in tmp/, renamed into place (a
 * new object's directories made first), the directory fsynced.  With
 * STORAGE_PUT_NEW, link(2) instead of rename: it fails if the name is
 * taken, a dangling link included.
 */
static int
local_put_commit(struct storage_put *p)
{
	struct local_put *h = (struct local_put *)p;
	struct local *l = local_of(p->st);
	const char *leaf;
	int dfd = -1, tmpdir = -1, rc = -1, missing;

	/* Closed (its flock given up) only once renamed: see put_begin. */
	if (fsync(h->fd)) {
		fail_errno(l, "fsync of", p->name);
		goto out;
	}
	if ((tmpdir = tmp_dir(l)) == -1 ||
	    (dfd = walk(l, p->name, 1, &leaf, &missing)) == -1)
		goto out;
	if (p->flags & STORAGE_PUT_NEW) {
		if (linkat(tmpdir, h->tmp, dfd, leaf, 0)) {
			if (errno == EEXIST)
				storage_fail(EEXIST, "repository '%s': '%s' "
				    "already exists", l->base.where, p->name);
			else
				fail_errno(l, "creation of", p->name);
			goto out;
		}
	} else if (renameat(tmpdir, h->tmp, dfd, leaf)) {
		if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST)
			fail_kind(l, dfd, leaf, p->name, S_IFREG);
		else
			fail_errno(l, "rename into place of", p->name);
		goto out;
	}
	if (fsync(dfd)) {
		fail_errno(l, "fsync of the directory of", p->name);
		goto out;
	}
	rc = 0;
out:
	if (dfd != -1)
		close(dfd);
	/* Renamed: nothing of that name is left to unlink (a link left
	 * by STORAGE_PUT_NEW is). */
	put_free(h, tmpdir);
	if (tmpdir != -1)
		close(tmpdir);
	return (rc);
}

static int
local_del(struct storage *st, const char *name)
{
	struct local *l = local_of(st);
	const char *leaf;
	int dfd, missing, rc = 0;

	if ((dfd = walk(l, name, 0, &leaf, &missing)) == -1)
		return (missing ? 0 : -1);
	/* unlinkat removes a link itself, never what it names; a directory
	 * is not an object. */
	if (unlinkat(dfd, leaf, 0) && errno != ENOENT)
		rc = errno == EISDIR ? fail_kind(l, dfd, leaf, name, S_IFREG) :
		    fail_errno(l, "removal of", name);
	else if (fsync(dfd))
		rc = fail_errno(l, "fsync of the directory of", name);
	close(dfd);
	return (rc);
}

static int
local_mkdir(struct storage *st, const char *dir)
{
	char tail[STORAGE_NAME_MAX + 3];
	const char *leaf;
	int dfd, missing;

	/* dir's own last component too: walk to "dir/x", making them. */
	snprintf(tail, sizeof(tail), "%s/x", dir);
	if ((dfd = walk(local_of(st), tail, 1, &leaf, &missing)) == -1)
		return (-1);
	close(dfd);
	return (0);
}

struct lister {
	struct local *l;
	int (*fn)(void *, const char *, uint64_t);
	void *arg;
	size_t named;			/* entries given to fn */
	char rel[STORAGE_NAME_MAX + 1];
};

/*
 * Every object below the directory dfd (closed here), whose name is
 * li->rel (len bytes; "" at the top), depth components deep.
 */
static int
list_dir(struct lister *li, int dfd, size_t len, int depth)
{
	struct dirent *de;
	struct stat sb;
	size_t n, named;
	int fd, rc = 0, missing;
	DIR *d;

	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return (fail_errno(li->l, "listing of", li->rel));
	}
	while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
		/* Hidden names are temporaries (fsutil_write_file_at's). */
		if (de->d_name[0] == '.')
			continue;
		n = (size_t)snprintf(li->rel + len, sizeof(li->rel) - len,
		    "%s%s", len ? "/" : "", de->d_name);
		if (n >= sizeof(li->rel) - len || !storage_name_ok(li->rel)) {
			/* The store's own, at the top, are no objects. */
			if (depth > 0 || (strcmp(de->d_name, TMP_DIR) &&
			    strcmp(de->d_name, LOCK_DIR)))
				log_warn("repository '%s': '%.*s/%s' is not an "
				    "object name: left out", li->l->base.where,
				    (int)len, li->rel, de->d_name);
		} else if (fstatat(dirfd(d), de->d_name, &sb,
		    AT_SYMLINK_NOFOLLOW))
			rc = errno == ENOENT ? 0 :
			    fail_errno(li->l, "stat of", li->rel);
		else if (S_ISREG(sb.st_mode)) {
			li->named++;
			rc = li->fn(li->arg, li->rel, (uint64_t)sb.st_size);
		} else if (S_ISDIR(sb.st_mode) && depth + 1 < STORAGE_DEPTH_MAX) {
			named = li->named;
			if ((fd = open_at(li->l, dirfd(d), de->d_name, li->rel,
			    O_RDONLY, S_IFDIR, &missing)) != -1)
				rc = list_dir(li, fd, len + n, depth + 1);
			else if (!missing)
				rc = -1;
			/* Empty: named, for whoever expects an object. */
			if (rc == 0 && fd != -1 && li->named == named) {
				li->rel[len + n] = '\0';
				li->named++;
				rc = li->fn(li->arg, li->rel,
				    STORAGE_NOT_OBJECT);
			}
		} else {
			log_warn("repository '%s': '%s' is %s: not an object",
			    li->l->base.where, li->rel, S_ISDIR(sb.st_mode) ?
			    "a directory too deep for an object" :
			    fsutil_kind_at(dirfd(d), de->d_name));
			li->named++;
			rc = li->fn(li->arg, li->rel, STORAGE_NOT_OBJECT);
		}
		li->rel[len] = '\0';
	}
	if (rc == 0 && errno != 0)
		rc = fail_errno(li->l, "listing of", li->rel);
	closedir(d);
	return (rc);
}

static int
local_list(struct storage *st, const char *dir,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	struct lister li = { local_of(st), fn, arg, 0, "" };
	char tail[STORAGE_NAME_MAX + 3];
	const char *leaf, *p;
	int dfd, missing, depth = 1;

	/* Not a dup: that would share its offset in the directory. */
	if (dir[0] == '\0')
		return ((dfd = openat(li.l->dfd, ".", O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1 ? fail_errno(li.l, "listing of", ".") :
		    list_dir(&li, dfd, 0, 0));
	/* dir's own last component is a directory too: walk to "dir/x". */
	snprintf(tail, sizeof(tail), "%s/x", dir);
	if ((dfd = walk(li.l, tail, 0, &leaf, &missing)) == -1)
		return (missing ? 0 : -1);
	for (p = dir; (p = strchr(p, '/')) != NULL; p++)
		depth++;
	snprintf(li.rel, sizeof(li.rel), "%s", dir);
	return (list_dir(&li, dfd, strlen(dir), depth));
}

/*
 * Remove tmp/name if it is a crashed put's: unless another put, still
 * being written, holds a flock on it (put_begin).  Removed while this
 * holds the flock, so that a put that takes it after finds its file gone
 * (and makes another).  Where flock is not there, only a file untouched
 * for CLEAN_AGE is taken for a leftover.  0, or -1 with errno.
 */
#define CLEAN_AGE (24 * 3600)
static int
remove_leftover(int dfd, const char *name, const struct stat *sb)
{
	int fd, rc;

	if (!S_ISREG(sb->st_mode))
		return (unlinkat(dfd, name, 0));
	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return (errno == ENOENT ? 0 : -1);
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 ||
	    (errno != EWOULDBLOCK && time(NULL) - sb->st_mtime >= CLEAN_AGE))
		rc = unlinkat(dfd, name, 0);
	else
		rc = 0;		/* in progress */
	close(fd);
	return (rc);
}

static int
local_clean(struct storage *st)
{
	struct local *l = local_of(st);
	struct dirent *de;
	struct stat sb;
	int dfd, missing, rc = 0;
	DIR *d;

	if ((dfd = open_at(l, l->dfd, TMP_DIR, TMP_DIR, O_RDONLY, S_IFDIR,
	    &missing)) == -1)
		return (missing ? 0 : -1);
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return (fail_errno(l, "listing of", TMP_DIR));
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW))
			continue;	/* gone: a put committed */
		/* A directory is not a put's leftover: left alone. */
		if (S_ISDIR(sb.st_mode))
			log_warn("repository '%s': 'tmp/%s' is a directory, not a "
			    "leftover of coffer's: left alone", l->base.where,
			    de->d_name);
		else if (remove_leftover(dfd, de->d_name, &sb) &&
		    errno != ENOENT)
			rc = fail_errno(l, "removal of leftover", TMP_DIR);
	}
	closedir(d);
	return (rc);
}

/* name's directory of shared holders in locks/ (dfd), into dir. */
static void
shared_dir(char *dir, size_t size, const char *name)
{
	snprintf(dir, size, "%s" STORE_SHARED, name);
}

/*
 * The live shared holders of name (its directory in locks/, dfd) added
 * to *v: each info file is flocked LOCK_EX by its holder, so one that
 * can be flocked LOCK_SH is a dead holder's, removed.  What is not a
 * regular file of one name there is left alone, never followed.
 * 0 or -1 (recorded).
 */
static int
shared_holders(struct local *l, int dfd, const char *name,
    struct storage_holder **v, size_t *n)
{
	char dir[NAME_MAX + 16], rel[STORAGE_NAME_MAX + 32], info[512];
	struct stat sb, now;
	struct dirent *de;
	int sdfd, fd, missing, wrong, rc = 0;
	ssize_t got;
	DIR *d;

	shared_dir(dir, sizeof(dir), name);
	snprintf(rel, sizeof(rel), LOCK_DIR "/%s", dir);
	if ((sdfd = open_at(l, dfd, dir, rel, O_RDONLY, S_IFDIR,
	    &missing)) == -1)
		return (missing ? 0 : -1);
	if ((d = fdopendir(sdfd)) == NULL) {
		close(sdfd);
		return (fail_errno(l, "listing of", rel));
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((fd = fsutil_open_in(sdfd, de->d_name, O_RDONLY, S_IFREG,
		    &wrong)) == -1) {
			if (wrong)
				log_warn("repository '%s': '%s/%s' is %s, not a "
				    "lock holder's: left alone", l->base.where,
				    rel, de->d_name, fsutil_kind_at(sdfd,
				    de->d_name));
			continue;
		}
		if (fstat(fd, &sb) || sb.st_nlink != 1) {
			close(fd);
			continue;
		}
		if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
			/* Its holder is gone; removed if it is still the
			 * file tested. */
			if (fstatat(sdfd, de->d_name, &now,
			    AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino ==
			    sb.st_ino && now.st_dev == sb.st_dev)
				(void)unlinkat(sdfd, de->d_name, 0);
			close(fd);
			continue;
		}
		got = pread(fd, info, sizeof(info) - 1, 0);
		info[got > 0 ? got : 0] = '\0';
		close(fd);
		rc = store_holder_add(v, n, info, 1, 0);
	}
	closedir(d);
	return (rc);
}

/* Who keeps a taker of name out, as a holder line: the exclusive holder
 * (its info in locks/NAME, fd) when one is, else the shared ones. */
static void
busy_line(struct local *l, int dfd, const char *name, int fd, char *holder,
    size_t holdersz)
{
	struct storage_holder *v = NULL;
	size_t n = 0;
	ssize_t got;

	if (holdersz == 0)
		return;
	holder[0] = '\0';
	if (flock(fd, LOCK_SH | LOCK_NB) == -1) {
		got = pread(fd, holder, holdersz - 1, 0);
		holder[got > 0 ? got : 0] = '\0';
		holder[strcspn(holder, "\n")] = '\0';
		return;
	}
	flock(fd, LOCK_UN);
	if (shared_holders(l, dfd, name, &v, &n) == 0 && n > 0)
		store_busy_line(holder, holdersz, v[0].info, n - 1);
	free(v);
}

/*
 * A shared holder's info file, made in name's directory in locks/ (dfd)
 * and flocked LOCK_EX for as long as h holds.  A lister may test it
 * between its creation and the flock, take it for a dead holder's and
 * remove it: then it is made anew.  0 or -1 (recorded).
 */
static int
shared_file(struct local *l, int dfd, const char *name, const char *info,
    struct local_lock *h)
{
	char dir[NAME_MAX + 16], rel[STORAGE_NAME_MAX + 32];
	uint8_t rnd[16];
	struct stat sb;
	int missing = 0;

	shared_dir(dir, sizeof(dir), name);
	snprintf(rel, sizeof(rel), LOCK_DIR "/%s", dir);
	if (make_dir(l, dfd, dir, rel) || (h->sdfd = open_at(l, dfd, dir,
	    rel, O_RDONLY, S_IFDIR, &missing)) == -1)
		return (missing ? fail_errno(l, "open of", rel) : -1);
	for (;;) {
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return (storage_fail(EIO, "cannot get random bytes"));
		hex_encode(h->token, rnd, sizeof(rnd));
		if ((h->infofd = openat(h->sdfd, h->token, O_RDWR | O_CREAT |
		    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
			return (fail_errno(l, "creation of a holder in", rel));
		if (flock(h->infofd, LOCK_EX) || fstat(h->infofd, &sb))
			return (fail_errno(l, "lock of a holder in", rel));
		if (sb.st_nlink == 1)
			break;
		close(h->infofd);
		h->infofd = -1;
	}
	if (info != NULL)
		(void)!pwrite(h->infofd, info, strlen(info), 0);
	return (0);
}

static void
lock_free(struct local_lock *h)
{
	if (h->infofd != -1) {
		(void)unlinkat(h->sdfd, h->token, 0);
		close(h->infofd);
	}
	if (h->sdfd != -1)
		close(h->sdfd);
	if (h->fd != -1)
		close(h->fd);
	free(h);
}

/* locks/NAME open (made if create) as the regular file of one name it
 * must be, and the directory locks/ into *dfd: an fd, -1 and *missing,
 * or -1 (recorded). */
static int
lock_file(struct local *l, const char *name, int create, int *dfd,
    int *missing)
{
	char rel[STORAGE_NAME_MAX + 8];
	const char *leaf;
	struct stat sb;
	int fd;

	snprintf(rel, sizeof(rel), LOCK_DIR "/%s", name);
	if ((*dfd = walk(l, rel, create, &leaf, missing)) == -1)
		return (-1);
	fd = open_at(l, *dfd, leaf, rel, create ? O_RDWR | O_CREAT :
	    O_RDONLY, S_IFREG, missing);
	if (fd == -1 && *missing && create)
		fail_errno(l, "creation of", rel);
	if (fd == -1) {
		close(*dfd);
		return (-1);
	}
	/* The lock is written to: a second name for another file (a hard
	 * link planted in the store) must not be. */
	if (fstat(fd, &sb) || sb.st_nlink != 1) {
		close(fd);
		close(*dfd);
		return (storage_fail(EINVAL, "repository '%s': '%s' has other "
		    "names (a hard link): refused", l->base.where, rel));
	}
	return (fd);
}

static int
local_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **lk,
    char *holder, size_t holdersz)
{
	struct local *l = local_of(st);
	int how = o->shared ? LOCK_SH : LOCK_EX, rc = -1;
	char rel[STORAGE_NAME_MAX + 8];
	struct local_lock *h;
	int dfd, missing;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	h->sdfd = h->infofd = -1;
	if ((h->fd = lock_file(l, name, 1, &dfd, &missing)) == -1) {
		free(h);
		return (-1);
	}
	switch (flock(h->fd, how | LOCK_NB) == 0 ? 0 : errno != EWOULDBLOCK ?
	    -1 : o->wait == 0 ? 1 : fsutil_flock_wait_how(h->fd, how,
	    o->wait)) {
	case 0:
		break;
	case 1:
		busy_line(l, dfd, name, h->fd, holder, holdersz);
		rc = 1;
		goto out;
	case 2:
		rc = 2;
		goto out;
	default:
		snprintf(rel, sizeof(rel), LOCK_DIR "/%s", name);
		fail_errno(l, "lock of", rel);
		goto out;
	}
	/* Who holds it, for whoever finds it busy. */
	if (o->shared) {
		if (shared_file(l, dfd, name, o->info, h))
			goto out;
	} else if (ftruncate(h->fd, 0) == 0 && o->info != NULL)
		(void)!pwrite(h->fd, o->info, strlen(o->info), 0);
	close(dfd);
	*lk = &h->base;
	return (0);
out:
	close(dfd);
	lock_free(h);
	return (rc);
}

static void
local_unlock(struct storage_lock *lk)
{
	lock_free((struct local_lock *)lk);
}

static int
local_holders(struct storage *st, const char *name,
    struct storage_holder **v, size_t *n)
{
	struct local *l = local_of(st);
	char info[512];
	ssize_t got;
	int dfd, fd, missing, rc;

	if ((fd = lock_file(l, name, 0, &dfd, &missing)) == -1)
		return (missing ? 0 : -1);
	rc = 0;
	if (flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK) {
		got = pread(fd, info, sizeof(info) - 1, 0);
		info[got > 0 ? got : 0] = '\0';
		rc = store_holder_add(v, n, info, 0, 0);
	}
	close(fd);
	if (rc == 0)
		rc = shared_holders(l, dfd, name, v, n);
	close(dfd);
	return (rc);
}

static void
local_close(struct storage *st)
{
	struct local *l = local_of(st);

	close(l->dfd);
	free(l);
}

static const struct storage_ops local_ops = {
	.stat = local_stat,
	.open = local_open,
	.read = local_read,
	.cached = local_cached,
	.obj_close = local_obj_close,
	.put_begin = local_put_begin,
	.put_write = local_put_write,
	.put_commit = local_put_commit,
	.put_abort = local_put_abort,
	.del = local_del,
	.mkdir = local_mkdir,
	.list = local_list,
	.clean = local_clean,
	.lock = local_lock,
	.unlock = local_unlock,
	.holders = local_holders,
	.close = local_close,
};

/* A new store at path: new or empty; made, with tmp/ and locks/. */
static int
create_at(const char *path)
{
	int dfd, created;

	if ((dfd = fsutil_dir_new(path, "a repository", &created)) == -1)
		return (-1);
	if ((mkdirat(dfd, TMP_DIR, 0700) && errno != EEXIST) ||
	    (mkdirat(dfd, LOCK_DIR, 0700) && errno != EEXIST) || fsync(dfd)) {
		log_errno("cannot make the directories of '%s'", path);
		unlinkat(dfd, TMP_DIR, AT_REMOVEDIR);
		unlinkat(dfd, LOCK_DIR, AT_REMOVEDIR);
		close(dfd);
		if (created)
			rmdir(path);
		return (-1);
	}
	close(dfd);
	return (0);
}

struct storage *
storage_local_open(const char *path, unsigned flags)
{
	struct local *l;

	if ((flags & STORAGE_CREATE) && create_at(path))
		return (NULL);
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	l->base.ops = &local_ops;
	/* Absolute, for messages: the working directory may change. */
	if ((l->base.where = realpath(path, NULL)) == NULL &&
	    (l->base.where = strdup(path)) == NULL) {
		log_error("out of memory");
		free(l);
		return (NULL);
	}
	/* The path itself may be a link (a mount point's); nothing below it
	 * is followed. */
	if ((l->dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open repository '%s'", path);
		free(l->base.where);
		free(l);
		return (NULL);
	}
	return (&l->base);
}

/* The empty directories below dfd (closed here), depth first; what is
 * not an empty directory stays. */
static void
remove_empty(int dfd)
{
	struct dirent *de;
	struct stat sb;
	int fd;
	DIR *d;

	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(sb.st_mode))
			continue;
		if ((fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) != -1)
			remove_empty(fd);
		(void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

int
storage_local_unmake(const char *path, int keep)
{
	int dfd, rc = 0;

	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return (errno == ENOENT ? 0 : -1);
	if (fsutil_remove_tree(dfd, TMP_DIR, path) ||
	    fsutil_remove_tree(dfd, LOCK_DIR, path))
		rc = -1;
	remove_empty(dfd);
	/* Fails, leaving it, if anything else is there (not ours). */
	if (rc == 0 && !keep && rmdir(path) && errno != ENOENT)
		rc = -1;
	return (rc);
}
