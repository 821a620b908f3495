#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "coffer/buf.h"
#include "coffer/entry.h"
#include "coffer/fs.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/tuning.h"
#include "fs-int.h"

/*
 * File data is read by us, not by archive_read_data_block: libarchive
 * turns a read error (EIO on a bad sector) into ARCHIVE_FATAL, which ends
 * the whole walk, and silently returns a short file when it shrank.  We
 * pread() the data regions that SEEK_DATA/SEEK_HOLE report, so holes are
 * skipped, a failure loses only that file, and a file that changes while
 * it is read is noticed (FS_WALK_CHANGED).  Speed is not the reason:
 * our 256 KiB preads are somewhat faster from page cache than
 * libarchive's 64 KiB blocks (its buffer follows the file system's
 * transfer size and cannot be set), and either is far ahead of chunking
 * and hashing.
 */
#define READ_SIZE (256 * 1024)
/* Smaller files are read in one or two calls: no readahead to widen. */
#define SEQUENTIAL_MIN (1024 * 1024)

struct region {
	int64_t off, len;
};

/*
 * The walk reads ahead: a thread of its own goes through the tree
 * (libarchive's reads of directories and an lstat per entry, a good part
 * of a walk of small files) while the caller reads the files and stores
 * them.  The entries it found wait in a ring, in the walk's order, each
 * with its own copies of its strings and its stat.  The directories that
 * skip_dir left out just before an entry (libarchive skips them within
 * one call) go with it, so that the caller hears of them (skipped_dir) in
 * the walk's order.
 */
#define NAHEAD 64
enum { AH_ENTRY, AH_EOF, AH_FATAL };

struct ahead {
	int type;
	struct entry e;		/* its strings are in the bufs below */
	struct stat st;		/* the walk's stat of it */
	struct buf skips;	/* left out before it: (why, rel NUL)... */
	struct buf path, source, uname, gname, target;
};

struct fs_walk {
	/* A tar stream's walk: the calls go to tar.c (fs_walk_open_tar). */
	struct fs_tar_in *tar;
	/* The walker's (the read-ahead thread's, or the caller's when it
	 * could not be started): */
	struct archive *a;
	struct archive_entry *ae;
	/* Details (xattrs, ACLs) on demand: see fs_walk_details. */
	struct archive *da;
	struct archive_entry *dae;
	char *root;		/* as given, for messages */
	size_t prefix_len;	/* root without trailing slashes */
	int rootfd;		/* files are opened relative to it */
	char **excludes;
	size_t nexcludes;
	int started;		/* the root entry has been consumed */
	int want_root;		/* ... and is returned (fs_walk_opts root) */
	int wfatal;		/* libarchive is in its FATAL state */
	int filtered;		/* our filter made libarchive skip one */
	struct buf skips;	/* skip_dir's since the last item */
	int (*skip_dir)(void *, const char *, const char **);
	void (*skipped_dir)(void *, const char *, const char *);
	void *skip_arg;

	/* The ring between them, under mu. */
	struct ahead *ring;
	size_t rhead, rcount;
	pthread_t th;
	int threaded;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int wwaits, cwaits;	/* the walker, the caller, wait on cv */
	int stop;

	/* The caller's: */
	int fatal;		/* the walk is over, failed */
	struct stat st;		/* the current entry's stat */
	/* The current file's content. */
	int in_file;		/* a regular file with data still to read */
	int fd;
	uint64_t dev, ino;
	int64_t size, mtime_ns, ctime_ns;
	struct region *map;	/* data regions, holes between them */
	size_t nmap, mapcap, mapi;
	uint8_t *rbuf;		/* fs_walk_read's, on first use */

	/* Own copies of the current entry's strings (see fs_walk_next). */
	struct buf path;	/* relative path */
	struct buf source;	/* as libarchive opened it */
	struct buf uname, gname, target, xattrs;
	char *acl;
};

static const char *
errstr(struct archive *a)
{
	const char *s = archive_error_string(a);

	return (s != NULL ? s : "unknown error");
}

/* Copy a C string into b, NUL-terminated (buf keeps a spare byte). */
static int
set_str(struct buf *b, const char *s)
{
	buf_reset(b);
	if (buf_puts(b, s) || buf_reserve(b, 1))
		return (-1);
	b->data[b->len] = '\0';
	return (0);
}

static const char *
opt_str(struct buf *b, const char *s, int *err)
{
	if (s == NULL)
		return (NULL);
	if (set_str(b, s)) {
		*err = 1;
		return (NULL);
	}
	return ((const char *)b->data);
}

static int
match_excludes(char *const *excludes, size_t n, const char *rel)
{
	const char *base = strrchr(rel, '/'), *pat;
	size_t i;

	base = base != NULL ? base + 1 : rel;
	for (i = 0; i < n; i++) {
		pat = excludes[i];
		if (strchr(pat, '/') == NULL) {
			if (fnmatch(pat, base, 0) == 0)
				return (1);
		} else {
			/* "/x" anchors at the root: the same as "x". */
			while (*pat == '/')
				pat++;
			if (fnmatch(pat, rel, FNM_PATHNAME) == 0)
				return (1);
		}
	}
	return (0);
}

static int
excluded(const struct fs_walk *w, const char *rel)
{
	return (match_excludes(w->excludes, w->nexcludes, rel));
}

int
fs_walk_excluded(const struct fs_walk_opts *o, const char *rel)
{
	char *p;
	size_t n;
	int hit = 0;

	if (o->nexcludes == 0)
		return (0);
	if ((p = strdup(rel)) == NULL)
		return (0);
	/* The path itself, then each directory above it: the walk does not
	 * descend into an excluded directory. */
	for (n = strlen(p); !hit; ) {
		p[n] = '\0';
		hit = match_excludes(o->excludes, o->nexcludes, p);
		while (n > 0 && p[n - 1] != '/')
			n--;
		if (n == 0)
			break;
		n--;
	}
	free(p);
	return (hit);
}

/* The path below the root, or NULL if p is the root (or not below it). */
static const char *
rel_of(const struct fs_walk *w, const char *p)
{
	const char *rel;

	if (strncmp(p, w->root, w->prefix_len) != 0)
		return (NULL);
	rel = p + w->prefix_len;
	while (*rel == '/')
		rel++;
	return (*rel != '\0' ? rel : NULL);
}

/*
 * Excludes are applied before libarchive reads xattrs and ACLs: cheaper,
 * and an unreadable file that is
 * excluded gives no warning.  Returning 0 makes libarchive skip the entry
 * with ARCHIVE_RETRY (and not descend into it).
 */
static int
filter(struct archive *a, void *arg, struct archive_entry *ae)
{
	struct fs_walk *w = arg;
	const char *p = archive_entry_pathname(ae), *rel, *why = NULL;

	if (p == NULL || (rel = rel_of(w, p)) == NULL)
		return (1);
	if (excluded(w, rel)) {
		w->filtered = 1;
		return (0);
	}
	/* Once the walk has failed or is stopping, nothing more is asked. */
	if (w->skip_dir != NULL && archive_entry_filetype(ae) == AE_IFDIR &&
	    !w->wfatal && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED) &&
	    w->skip_dir(w->skip_arg, rel, &why)) {
		size_t len = w->skips.len;

		if (why == NULL)
			why = "was left out";
		/* Told to the caller with the next item (produce); a
		 * record is added whole or not at all. */
		if (buf_append(&w->skips, &why, sizeof(why)) ||
		    buf_append(&w->skips, rel, strlen(rel) + 1)) {
			w->skips.len = len;
			w->wfatal = 1;
		}
		w->filtered = 1;
		return (0);
	}
	return (1);
}

static void *walker_main(void *);

/*
 * The read-ahead thread, its signals blocked (the caller's thread takes
 * them).  Without it the caller walks too (peek), the same way.
 */
static void
start_walker(struct fs_walk *w)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	w->threaded = !tuning_get()->walk_sync &&
	    pthread_create(&w->th, NULL, walker_main, w) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

struct fs_walk *
fs_walk_open(const char *root, const struct fs_walk_opts *o)
{
	struct fs_walk *w;
	struct stat st;
	size_t i, n;
	int flags = 0;

	if (lstat(root, &st)) {
		log_errno("cannot open '%s'", root);
		return (NULL);
	}
	if (!S_ISDIR(st.st_mode)) {
		/* Symlinks are never followed, not even at the root: the
		 * caller should name the directory itself. */
		log_error("'%s' is not a directory%s", root,
		    S_ISLNK(st.st_mode) ? " (it is a symbolic link)" : "");
		return (NULL);
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		goto nomem;
	w->rootfd = w->fd = -1;
	if (pthread_mutex_init(&w->mu, NULL) != 0) {
		free(w);
		log_error("out of memory");
		return (NULL);
	}
	if (pthread_cond_init(&w->cv, NULL) != 0) {
		pthread_mutex_destroy(&w->mu);
		free(w);
		log_error("out of memory");
		return (NULL);
	}
	buf_init(&w->skips);
	buf_init(&w->path);
	buf_init(&w->source);
	buf_init(&w->uname);
	buf_init(&w->gname);
	buf_init(&w->target);
	buf_init(&w->xattrs);
	if ((w->root = strdup(root)) == NULL)
		goto nomem;
	if ((w->rootfd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		log_errno("cannot open '%s'", root);
		goto err;
	}

	/*
	 * libarchive names the root's children root + "/" + name, after
	 * dropping the root's trailing slashes ("a//" -> "a/x", "/" ->
	 * "/x", "." -> "./x").  The relative path is what follows that
	 * prefix and its slashes.
	 */
	n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		n--;
	w->prefix_len = n;

	w->want_root = o != NULL && o->root;
	if (o != NULL) {
		w->skip_dir = o->skip_dir;
		w->skipped_dir = o->skipped_dir;
		w->skip_arg = o->skip_arg;
	}
	if (o != NULL && o->nexcludes > 0) {
		if ((w->excludes = calloc(o->nexcludes, sizeof(char *))) ==
		    NULL)
			goto nomem;
		w->nexcludes = o->nexcludes;
		for (i = 0; i < o->nexcludes; i++)
			if ((w->excludes[i] = strdup(o->excludes[i])) == NULL)
				goto nomem;
	}

	if ((w->a = archive_read_disk_new()) == NULL ||
	    (w->ae = archive_entry_new()) == NULL ||
	    (w->da = archive_read_disk_new()) == NULL ||
	    (w->dae = archive_entry_new()) == NULL)
		goto nomem;
	if (archive_read_disk_set_symlink_physical(w->da) != ARCHIVE_OK ||
	    archive_read_disk_set_standard_lookup(w->da) != ARCHIVE_OK ||
	    archive_read_disk_set_behavior(w->da, ARCHIVE_READDISK_NO_SPARSE |
	    ARCHIVE_READDISK_NO_FFLAGS) != ARCHIVE_OK) {
		log_error("cannot set up walk of '%s': %s", root,
		    errstr(w->da));
		goto err;
	}
	/*
	 * Physical walk: a symlink is stored as a symlink, never followed.
	 * Xattrs and ACLs are read.  NO_SPARSE: libarchive would open every
	 * regular file at header time to map its holes, which an unchanged
	 * file in an incremental never needs; we map holes ourselves when a
	 * file is read (SEEK_DATA/SEEK_HOLE).  No RESTORE_ATIME: putting
	 * atime back means utimes() on every file, which bumps ctime and
	 * defeats change detection by ctime.  NO_FFLAGS: coffer does not
	 * store file flags (chattr), and reading them cost an open, an ioctl
	 * and a close per file, the bulk of an unchanged incremental.
	 * NO_XATTR, NO_ACL: the same for xattrs and ACLs, which a changed
	 * entry gets from fs_walk_details (an xattr or ACL change moves
	 * ctime, so an unchanged entry needs neither).
	 */
	flags |= ARCHIVE_READDISK_NO_SPARSE | ARCHIVE_READDISK_NO_FFLAGS |
	    ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL;
	if (o != NULL && o->one_file_system)
		flags |= ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS;
	if (archive_read_disk_set_symlink_physical(w->a) != ARCHIVE_OK ||
	    archive_read_disk_set_standard_lookup(w->a) != ARCHIVE_OK ||
	    archive_read_disk_set_behavior(w->a, flags) != ARCHIVE_OK ||
	    ((w->nexcludes > 0 || w->skip_dir != NULL) &&
	    archive_read_disk_set_metadata_filter_callback(w->a, filter, w) !=
	    ARCHIVE_OK)) {
		log_error("cannot set up walk of '%s': %s", root,
		    errstr(w->a));
		goto err;
	}
	if (archive_read_disk_open(w->a, root) != ARCHIVE_OK) {
		log_error("cannot open '%s': %s", root, errstr(w->a));
		goto err;
	}
	if ((w->ring = calloc(NAHEAD, sizeof(*w->ring))) == NULL)
		goto nomem;
	start_walker(w);
	return (w);
nomem:
	log_error("out of memory");
err:
	fs_walk_close(w);
	return (NULL);
}

/*
 * Fill the ring item a from the current archive_entry.  0, or -1
 * (reported) when out of memory.  The strings are copied: the
 * archive_entry is reused.
 */
static int
fill_entry(struct fs_walk *w, struct ahead *a, const char *rel, int kind)
{
	struct archive_entry *ae = w->ae;
	struct entry *e = &a->e;
	const struct stat *st;
	int err = 0;

	memset(e, 0, sizeof(*e));
	if (set_str(&a->path, rel))
		return (-1);
	e->path = (const char *)a->path.data;
	e->kind = kind;
	/* With an extended ACL, libarchive has already set the group bits
	 * to the ACL's group:: entry (not the mask that stat shows); the
	 * ACL text and this mode round-trip through archive_write_disk. */
	e->mode = (uint32_t)(archive_entry_perm(ae) & 07777);
	e->uid = archive_entry_uid(ae);
	e->gid = archive_entry_gid(ae);
	e->uname = opt_str(&a->uname, archive_entry_uname(ae), &err);
	e->gname = opt_str(&a->gname, archive_entry_gname(ae), &err);
	e->size = kind == ENTRY_FILE ? archive_entry_size(ae) : 0;
	e->mtime_ns = (int64_t)archive_entry_mtime(ae) * 1000000000 +
	    archive_entry_mtime_nsec(ae);
	e->ctime_ns = (int64_t)archive_entry_ctime(ae) * 1000000000 +
	    archive_entry_ctime_nsec(ae);
	e->ino = (uint64_t)archive_entry_ino64(ae);
	e->dev = (uint64_t)archive_entry_dev(ae);
	e->nlink = (uint32_t)archive_entry_nlink(ae);
	if (kind == ENTRY_CHR || kind == ENTRY_BLK)
		e->rdev = (uint64_t)archive_entry_rdev(ae);
	if (kind == ENTRY_SYMLINK) {
		e->target = opt_str(&a->target, archive_entry_symlink(ae),
		    &err);
		if (e->target == NULL && !err)
			e->target = opt_str(&a->target, "", &err);
	}
	if (err)
		return (-1);
	if ((st = archive_entry_stat(ae)) != NULL)
		a->st = *st;
	else
		memset(&a->st, 0, sizeof(a->st));
	/* Extended attributes and ACLs come with fs_walk_details. */
	e->content_id = 0;
	return (0);
}

static int open_file(struct fs_walk *w, int warn);

int
fs_walk_details(struct fs_walk *w, struct entry *e)
{
	struct archive_entry *ae = w->dae;
	int r;

	if (w->tar != NULL)
		return (fs_tar_in_details(w->tar, e));
	buf_reset(&w->xattrs);
	free(w->acl);
	w->acl = NULL;
	e->xattrs = NULL;
	e->xattrs_len = 0;
	e->acl = NULL;
	/*
	 * Most files have neither, and one llistxattr says so: ACLs are
	 * xattrs too (system.posix_acl_access and _default, system.nfs4_acl)
	 * and are listed with the others.  libarchive would make three
	 * system calls (the list, and libacl's stat and getxattr), which
	 * for a tree of small files is a good part of the walk.  A non-empty
	 * list, or an error, takes the full way.  A file about to be read is
	 * opened here and asked through its descriptor, which saves
	 * resolving its whole source path once more; one that cannot be
	 * opened is asked by path (the read then warns that it cannot).
	 */
	if (w->in_file && w->fd == -1)
		(void)open_file(w, 0);
	if (w->fd != -1 ? flistxattr(w->fd, NULL, 0) == 0 :
	    llistxattr(fs_walk_source_path(w), NULL, 0) == 0)
		return (0);
	archive_entry_clear(ae);
	archive_entry_copy_pathname(ae, fs_walk_source_path(w));
	/* The walk's stat: libarchive would lstat() the path again. */
	r = archive_read_disk_entry_from_file(w->da, ae, w->fd, &w->st);
	if (r < ARCHIVE_WARN) {
		log_warn("cannot read the extended attributes of '%s': %s",
		    fs_walk_source_path(w), errstr(w->da));
		return (0);
	}
	/* w->xattrs is empty: cleared above. */
	if (fs_ae_get_xattrs(ae, &w->xattrs))
		return (-1);
	e->xattrs = w->xattrs.len ? w->xattrs.data : NULL;
	e->xattrs_len = w->xattrs.len;

	/*
	 * libarchive keeps the mode-derived user::, group:: and other::
	 * entries of an access ACL in the mode, not as ACL entries, so a
	 * non-zero count means an extended ACL (or a default ACL).  The mode
	 * stays stat()'s: its group bits are the ACL's mask, which restore
	 * sets back after the ACL.
	 */
	if (archive_entry_acl_count(ae, ARCHIVE_ENTRY_ACL_TYPE_POSIX1E |
	    ARCHIVE_ENTRY_ACL_TYPE_NFS4) > 0) {
		w->acl = archive_entry_acl_to_text(ae, NULL,
		    ARCHIVE_ENTRY_ACL_STYLE_EXTRA_ID);
		if (w->acl == NULL)
			log_warn("cannot convert the ACL of '%s' to text",
			    fs_walk_source_path(w));
	}
	e->acl = w->acl;
	return (0);
}

static void
end_file(struct fs_walk *w)
{
	if (w->fd != -1)
		close(w->fd);
	w->fd = -1;
	w->in_file = 0;
}

static int
add_region(struct fs_walk *w, int64_t off, int64_t len)
{
	/* libarchive's extents may run past the size it stat()ed. */
	if (off < 0 || len <= 0 || off >= w->size)
		return (0);
	if (len > w->size - off)
		len = w->size - off;
	if (array_grow(&w->map, &w->mapcap, w->nmap, sizeof(*w->map), 16))
		return (-1);
	w->map[w->nmap].off = off;
	w->map[w->nmap].len = len;
	w->nmap++;
	return (0);
}

/*
 * The data regions of the open file, holes between them, from
 * SEEK_DATA/SEEK_HOLE.  A file system without them gets one region: all
 * data, which is correct, only slower for sparse files.  So does a file
 * with as many blocks as bytes, which has no holes worth skipping (or,
 * with blocks preallocated past its end, holes that are then read as the
 * zeros they are): two system calls fewer for nearly every file.
 */
static int
map_regions(struct fs_walk *w, const struct stat *st)
{
	off_t off = 0, data, hole;

	w->nmap = w->mapi = 0;
	if ((int64_t)st->st_blocks * 512 >= w->size)
		return (add_region(w, 0, w->size));
	while (off < w->size) {
		if ((data = lseek(w->fd, off, SEEK_DATA)) == -1) {
			if (errno == ENXIO)
				break;		/* only a hole is left */
			return (add_region(w, off, w->size - off));
		}
		if ((hole = lseek(w->fd, data, SEEK_HOLE)) == -1)
			hole = w->size;
		if (add_region(w, data, hole - data))
			return (-1);
		off = hole;
	}
	return (0);
}

/* Set up reading the current entry, a regular file. */
static int
start_file(struct fs_walk *w, const struct entry *e)
{
	w->dev = e->dev;
	w->ino = e->ino;
	w->size = e->size;
	w->mtime_ns = e->mtime_ns;
	w->ctime_ns = e->ctime_ns;
	w->nmap = w->mapi = 0;
	return (0);
}

/*
 * Open the current entry, a regular file, and map its regions.  warn: say
 * why it cannot be (the read's own open does; fs_walk_details' early one
 * leaves that to it).  On failure the descriptor is closed.
 */
static int
open_file(struct fs_walk *w, int warn)
{
	const char *src = fs_walk_source_path(w);
	const char *rel = (const char *)w->path.data;
	struct stat st;
	int fl = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

	/* O_NOATIME works for the owner and for root only. */
	w->fd = openat(w->rootfd, rel, fl | O_NOATIME);
	if (w->fd == -1 && errno == EPERM)
		w->fd = openat(w->rootfd, rel, fl);
	if (w->fd == -1) {
		if (warn)
			log_warn_errno("cannot read '%s'", src);
		return (-1);
	}
	/* By name: make sure it is still the file that was stat()ed. */
	if (fstat(w->fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_dev != w->dev || (uint64_t)st.st_ino != w->ino) {
		if (warn)
			log_warn("cannot read '%s': replaced during the "
			    "backup", src);
		goto fail;
	}
	if (w->size > SEQUENTIAL_MIN)
		(void)posix_fadvise(w->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (map_regions(w, &st) == 0)
		return (0);
fail:
	close(w->fd);
	w->fd = -1;
	return (-1);
}

/* 1 when the open file is not what was stat()ed at its header. */
static int
file_changed(struct fs_walk *w, struct stat *st)
{
	if (fstat(w->fd, st))
		return (1);
	return (st->st_size != w->size ||
	    (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec !=
	    w->mtime_ns ||
	    (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec !=
	    w->ctime_ns);
}

static void
swap_buf(struct buf *x, struct buf *y)
{
	struct buf t = *x;

	*x = *y;
	*y = t;
}

/*
 * The walker: the next item of the walk into a (its slot in the ring,
 * not yet published).  Its type: AH_ENTRY, AH_EOF or
 * AH_FATAL (reported).
 */
static int
produce_one(struct fs_walk *w, struct ahead *a)
{
	const char *p, *rel;
	int r, kind;

	if (w->wfatal)
		return (AH_FATAL);
	for (;;) {
		/* The caller is closing the walk: no more of it. */
		if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
			return (AH_EOF);
		w->filtered = 0;
		r = archive_read_next_header2(w->a, w->ae);
		if (r == ARCHIVE_EOF)
			return (AH_EOF);
		p = archive_entry_pathname(w->ae);
		if (r == ARCHIVE_FATAL) {
			w->wfatal = 1;
			log_error("cannot walk '%s': %s", w->root,
			    errstr(w->a));
			return (AH_FATAL);
		}
		if (r == ARCHIVE_RETRY && w->filtered)
			continue;
		if (r == ARCHIVE_FAILED || r == ARCHIVE_RETRY) {
			if (!w->started) {
				log_error("cannot read '%s': %s", w->root,
				    errstr(w->a));
				w->wfatal = 1;
				return (AH_FATAL);
			}
			/* The entry is skipped.  For a directory that
			 * cannot be listed, libarchive clears the entry
			 * and its message names the directory. */
			if (p != NULL)
				log_warn("cannot read '%s': %s", p,
				    errstr(w->a));
			else
				log_warn("%s", errstr(w->a));
			continue;
		}
		if (p == NULL) {
			log_warn("entry without a name below '%s'; skipped",
			    w->root);
			continue;
		}
		if (r == ARCHIVE_WARN)
			log_warn("'%s': %s", p, errstr(w->a));
		if (set_str(&a->source, p))
			goto fatal;

		if (!w->started) {
			w->started = 1;
			if (archive_read_disk_descend(w->a) != ARCHIVE_OK) {
				log_error("cannot descend into '%s': %s",
				    w->root, errstr(w->a));
				goto fatal;
			}
			if (!w->want_root)
				continue;
			if (fill_entry(w, a, FS_ROOT_PATH, ENTRY_DIR))
				goto fatal;
			return (AH_ENTRY);
		}
		if ((rel = rel_of(w, p)) == NULL) {
			log_error("'%s' is not below '%s'", p, w->root);
			goto fatal;
		}
		if (!entry_path_is_safe(rel)) {
			log_warn("cannot store the name '%s'; skipped", p);
			continue;
		}
		/* Normally done by filter() already. */
		if (excluded(w, rel))
			continue;
		if ((kind = fs_ae_kind(archive_entry_filetype(w->ae))) < 0) {
			log_warn("'%s' has an unknown file type; skipped", p);
			continue;
		}
		if (kind == ENTRY_DIR &&
		    archive_read_disk_can_descend(w->a) &&
		    archive_read_disk_descend(w->a) != ARCHIVE_OK)
			log_warn("cannot descend into '%s': %s", p,
			    errstr(w->a));
		if (fill_entry(w, a, rel, kind))
			goto fatal;
		return (AH_ENTRY);
	}
fatal:
	w->wfatal = 1;
	return (AH_FATAL);
}

/* The next item, with the directories skip_dir left out before it. */
static int
produce(struct fs_walk *w, struct ahead *a)
{
	int type = produce_one(w, a);

	buf_reset(&a->skips);
	if (w->wfatal)
		return (AH_FATAL);	/* the walk failed: none are told */
	swap_buf(&a->skips, &w->skips);
	return (type);
}

static void *
walker_main(void *arg)
{
	struct fs_walk *w = arg;
	struct ahead *a;
	int type;

	thread_name("walk");
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->rcount == NAHEAD && !w->stop) {
			w->wwaits = 1;
			pthread_cond_wait(&w->cv, &w->mu);
			w->wwaits = 0;
		}
		if (w->stop)
			break;
		/* The slot after the last published one stays this
		 * thread's until published: the caller only takes. */
		a = &w->ring[(w->rhead + w->rcount) % NAHEAD];
		pthread_mutex_unlock(&w->mu);
		type = produce(w, a);
		pthread_mutex_lock(&w->mu);
		a->type = type;
		w->rcount++;
		if (w->cwaits)
			pthread_cond_broadcast(&w->cv);
		if (type == AH_EOF || type == AH_FATAL)
			break;
	}
	pthread_mutex_unlock(&w->mu);
	return (NULL);
}

/* The ring's first item, waiting for the walker to publish one. */
static struct ahead *
peek(struct fs_walk *w)
{
	struct ahead *a;

	if (!w->threaded) {
		if (w->rcount == 0) {
			a = &w->ring[w->rhead];
			a->type = produce(w, a);
			w->rcount = 1;
		}
		return (&w->ring[w->rhead]);
	}
	pthread_mutex_lock(&w->mu);
	while (w->rcount == 0) {
		w->cwaits = 1;
		pthread_cond_wait(&w->cv, &w->mu);
		w->cwaits = 0;
	}
	a = &w->ring[w->rhead];
	pthread_mutex_unlock(&w->mu);
	return (a);
}

/* The first item is taken: its slot goes back to the walker, which is
 * woken only once half the ring is free (a wakeup is a system call). */
static void
pop(struct fs_walk *w)
{
	if (!w->threaded) {
		w->rhead = (w->rhead + 1) % NAHEAD;
		w->rcount--;
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->rhead = (w->rhead + 1) % NAHEAD;
	w->rcount--;
	if (w->wwaits && w->rcount <= NAHEAD / 2)
		pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int
fs_walk_next(struct fs_walk *w, struct entry *e)
{
	struct ahead *a;
	const char *why, *rel;
	size_t off, n;

	if (w->tar != NULL)
		return (fs_tar_in_next(w->tar, e));
	end_file(w);
	if (w->fatal)
		return (-1);
	for (;;) {
		a = peek(w);
		/* Each told once: the end stays the ring's last item. */
		for (off = 0; off < a->skips.len; off += sizeof(why) + n) {
			memcpy(&why, a->skips.data + off, sizeof(why));
			rel = (const char *)a->skips.data + off + sizeof(why);
			n = strlen(rel) + 1;
			if (w->skipped_dir != NULL)
				w->skipped_dir(w->skip_arg, rel, why);
		}
		buf_reset(&a->skips);
		switch (a->type) {
		case AH_EOF:
			return (0);
		case AH_FATAL:
			w->fatal = 1;
			return (-1);
		}
		/* The entry's strings become the walk's, whose last ones
		 * go back to the ring with the slot. */
		swap_buf(&w->path, &a->path);
		swap_buf(&w->source, &a->source);
		swap_buf(&w->uname, &a->uname);
		swap_buf(&w->gname, &a->gname);
		swap_buf(&w->target, &a->target);
		*e = a->e;
		w->st = a->st;
		pop(w);
		if (e->kind == ENTRY_FILE && e->size > 0) {
			if (start_file(w, e)) {
				w->fatal = 1;
				return (-1);
			}
			w->in_file = 1;
		}
		return (1);
	}
}

/*
 * Tests only (COFFER_TEST_BEFORE_CHANGE_CHECK): a shell command run each
 * time a regular file has been read to its end, before the check whether
 * it changed while read, with the file's path in COFFER_TEST_PATH: where
 * a writer's append would make the copy a torn one.
 */
static void
test_hook(const struct fs_walk *w)
{
	tuning_run_hook("COFFER_TEST_BEFORE_CHANGE_CHECK",
	    tuning_get()->test_before_change_check, "COFFER_TEST_PATH",
	    fs_walk_source_path(w));
}

int
fs_walk_read_into(struct fs_walk *w, void *dst, size_t cap, size_t *len,
    int64_t *offset)
{
	struct region *rg;
	ssize_t n;
	size_t want;

	if (w->tar != NULL)
		return (fs_tar_in_read(w->tar, dst, cap, len, offset));
	if (!w->in_file)
		return (0);
	if (w->fd == -1 && open_file(w, 1))
		goto fail;
	while (w->mapi < w->nmap && w->map[w->mapi].len == 0)
		w->mapi++;
	if (w->mapi == w->nmap) {
		struct stat st;

		test_hook(w);
		/* Written to while we read it: the caller decides. */
		if (file_changed(w, &st))
			return (FS_WALK_CHANGED);
		end_file(w);
		return (0);
	}
	rg = &w->map[w->mapi];
	want = (uint64_t)rg->len < cap ? (size_t)rg->len : cap;
	do
		n = pread(w->fd, dst, want, rg->off);
	while (n == -1 && errno == EINTR);
	if (n == -1) {
		log_warn_errno("cannot read '%s'", fs_walk_source_path(w));
		goto fail;
	}
	if (n == 0)
		return (FS_WALK_CHANGED);	/* it shrank */
	*len = (size_t)n;
	*offset = rg->off;
	rg->off += n;
	rg->len -= n;
	return (1);
fail:
	end_file(w);
	return (-1);
}

int
fs_walk_read(struct fs_walk *w, const void **buf, size_t *len,
    int64_t *offset)
{
	if (w->rbuf == NULL && (w->rbuf = malloc(READ_SIZE)) == NULL) {
		/* The file is skipped, and the walk ends at the next entry. */
		log_error("out of memory");
		w->fatal = 1;
		end_file(w);
		return (-1);
	}
	*buf = w->rbuf;
	return (fs_walk_read_into(w, w->rbuf, READ_SIZE, len, offset));
}

int
fs_walk_reread(struct fs_walk *w, struct entry *e)
{
	struct stat st;

	if (!w->in_file || w->fd == -1) {
		log_error("internal error: no file to reread");
		return (-1);
	}
	if (fstat(w->fd, &st)) {
		log_warn_errno("cannot read '%s'", fs_walk_source_path(w));
		end_file(w);
		return (-1);
	}
	w->size = st.st_size;
	w->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 +
	    st.st_mtim.tv_nsec;
	w->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 +
	    st.st_ctim.tv_nsec;
	e->size = w->size;
	e->mtime_ns = w->mtime_ns;
	e->ctime_ns = w->ctime_ns;
	e->mode = st.st_mode & 07777;
	e->uid = st.st_uid;
	e->gid = st.st_gid;
	e->nlink = (uint32_t)st.st_nlink;
	if (map_regions(w, &st)) {
		end_file(w);
		return (-1);
	}
	return (0);
}

struct fs_walk *
fs_walk_open_tar(const char *file, const struct fs_walk_opts *o)
{
	struct fs_walk *w;

	if ((w = calloc(1, sizeof(*w))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	if ((w->tar = fs_tar_in_open(file, o)) == NULL) {
		free(w);
		return (NULL);
	}
	return (w);
}

int
fs_walk_link_next(struct fs_walk *w, struct entry *e, const char **to)
{
	return (w->tar != NULL ? fs_tar_in_link_next(w->tar, e, to) : 0);
}

const char *
fs_walk_source_path(const struct fs_walk *w)
{
	if (w->tar != NULL)
		return (fs_tar_in_source(w->tar));
	return (w->source.len ? (const char *)w->source.data : w->root);
}

void
fs_walk_close(struct fs_walk *w)
{
	size_t i;

	if (w == NULL)
		return;
	if (w->tar != NULL) {
		fs_tar_in_close(w->tar);
		free(w->rbuf);
		free(w);
		return;
	}
	if (w->threaded) {
		pthread_mutex_lock(&w->mu);
		__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->th, NULL);
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	for (i = 0; w->ring != NULL && i < NAHEAD; i++) {
		buf_release(&w->ring[i].skips);
		buf_release(&w->ring[i].path);
		buf_release(&w->ring[i].source);
		buf_release(&w->ring[i].uname);
		buf_release(&w->ring[i].gname);
		buf_release(&w->ring[i].target);
	}
	free(w->ring);
	end_file(w);
	if (w->rootfd != -1)
		close(w->rootfd);
	if (w->a != NULL)
		archive_read_free(w->a);
	if (w->ae != NULL)
		archive_entry_free(w->ae);
	if (w->da != NULL)
		archive_read_free(w->da);
	if (w->dae != NULL)
		archive_entry_free(w->dae);
	for (i = 0; i < w->nexcludes; i++)
		free(w->excludes[i]);
	free(w->excludes);
	free(w->root);
	free(w->acl);
	free(w->map);
	free(w->rbuf);
	buf_release(&w->skips);
	buf_release(&w->path);
	buf_release(&w->source);
	buf_release(&w->uname);
	buf_release(&w->gname);
	buf_release(&w->target);
	buf_release(&w->xattrs);
	free(w);
}
