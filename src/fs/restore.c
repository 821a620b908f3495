#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "coffer/buf.h"
#include "coffer/entry.h"
#include "coffer/fs.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/tuning.h"
#include "fs-int.h"

enum { IDLE, IN_ENTRY };

/* Entries never lead outside the target: through a symlink, "..", or an
 * absolute path. */
#define SECURE_OPTS (ARCHIVE_EXTRACT_SECURE_SYMLINKS | \
	ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS)

struct fs_restore {
	struct archive *a;
	struct archive_entry *ae;
	char *target;
	int opts;		/* archive_write_disk options */
	int primary;		/* opened, not duplicated: gives the cwd back */
	int dirfd;		/* the target directory */
	uint64_t gen;		/* which fs_restore_open it came from */
	int cwdfd;		/* the caller's working directory (primary) */
	mode_t umask;		/* the caller's (primary) */
	int state;
	int kind;		/* of the current entry */
	int fatal;		/* archive_write_disk gave up */
	struct buf path;	/* current entry's path, NUL-terminated */
	struct buf name;	/* scratch: an xattr name */
	/*
	 * A regular file is written under a temporary name beside its own
	 * (tmp, NUL-terminated) and renamed over it once finished: until
	 * then, whatever was at its path stays as it was.  pfd is their
	 * directory (dirfd itself, or -1 when none is open); base and tbase
	 * the offsets of the last components in path and tmp.
	 */
	struct buf tmp;
	size_t base, tbase;
	int pfd;
	uint32_t run;		/* temporary names: this run's tag (dups share it) */
	struct direct_writer *dw;	/* a large file's data */
	int force;		/* FS_RESTORE_FORCE */
	int in_dir;		/* the entry was begun from its directory
				 * (disk_enter_at) */
	int nolib;		/* the entry has nothing in libarchive */
	/* The directories this writer made or found, and the target's own
	 * (path ""): their metadata, set at close (set_dirs). */
	struct dir_meta *dirs;
	size_t ndirs, capdirs;
	struct buf acl;		/* scratch: an ACL's extended attribute */
	unsigned long warnings;	/* metadata that could not be restored */
	/*
	 * A plain file (plain_begin): written as an unnamed inode of its
	 * directory (O_TMPFILE), given its metadata, and linked at its
	 * path once whole.  ffd is it; fsize its size, fend the end of
	 * what was written; fmode, fuid, fgid (fowner: to be set) and
	 * fmtime_ns its metadata.  cdir is the directory of the last one,
	 * opened below the target through no symlink, whose path below the
	 * target is cdir_path (cdir_len bytes; cdir -1: none open).
	 */
	int plain;		/* the current entry is one */
	int last_plain;		/* the last file finished was one */
	int ffd;
	int64_t fsize, fend, fmtime_ns;
	uint32_t fmode;
	int fowner;
	int64_t fuid, fgid;
	int cdir;
	int cdir_notmp;		/* its file system refused O_TMPFILE */
	char *cdir_path;
	size_t cdir_len, cdir_cap;
	/* The inode of the current regular file, and of the last one
	 * finished (has_id): what its second names are linked to. */
	struct fs_file_id id;
	int has_id;
	int id_trusted;		/* libarchive's: created as this euid's */
};

/*
 * A directory's metadata, set once everything in it is written: its mode
 * could forbid writing in it, and what is written in it moves its times.
 * libarchive would defer the same for the directories it creates, and set
 * it at close by name, following whatever the directories above have
 * become meanwhile: a local user who owns one of them (restored with its
 * owner) could swap what is below for a symlink and have the mode, owner
 * and times of a directory outside the target set.  So directories are
 * made here, and their metadata set from a descriptor of each, opened
 * below the target through no symlink (set_dirs).
 */
struct dir_meta {
	char *path;		/* with its xattrs and ACLs after it */
	uint32_t mode;
	int owner;		/* uid and gid are to be set */
	int64_t uid, gid;
	int64_t mtime_ns;
	const uint8_t *xattrs;	/* entry_xattrs format */
	size_t xattrs_len;
	/* system.posix_acl_access and _default, or none (len 0). */
	const uint8_t *acl[2];
	size_t acl_len[2];
};

/*
 * archive_write_disk sets the umask to 0 around each header and puts back
 * what it found, chdir()s for paths longer than PATH_MAX (and back), and
 * resolves every path against the working directory: state that a thread
 * shares with the thread that created it and the threads it creates,
 * unless it unshares it (unshare(CLONE_FS)).  So the first time a thread
 * calls into a writer of a restore, it unshares and changes into that
 * restore's target, holding disk_mu, so that the copy it takes is not in
 * another thread's mid-header; from then on writers on several threads
 * create, finish and link files at the same time (a restore of many small
 * files spent a fifth of its time waiting for its turn).  A thread that
 * cannot unshare (a seccomp filter may refuse it) holds disk_mu for every
 * call but writing data (which only uses the file's descriptor), and
 * changes into the target each time: another thread sharing its directory
 * may have moved it.
 */
static pthread_mutex_t disk_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local uint64_t thread_own;	/* gen it has its own fs for */
static _Thread_local uint64_t thread_shared;	/* gen it could not unshare */
static atomic_uint_fast64_t gens;
/*
 * Where a thread with its own working directory is, below its target:
 * the first thread_dir_len bytes of thread_dir (a path's directory, not
 * NUL-terminated), none for the target itself, or somewhere unknown
 * (DIR_UNKNOWN).
 */
#define DIR_UNKNOWN SIZE_MAX
static _Thread_local char thread_dir[PATH_MAX];
static _Thread_local size_t thread_dir_len;
static atomic_int no_openat2;	/* the kernel has none (before 5.6) */

/*
 * Before a call into r's archive_write_disk on this thread.  1: the thread
 * has its own umask and working directory, in r's target.  0: it shares
 * them; disk_mu is held and the working directory is r's target until
 * disk_leave(0).  -1: error (reported; nothing held).
 */
static int
disk_enter(const struct fs_restore *r)
{
	int own = 0;

	if (thread_own == r->gen) {
		if (thread_dir_len == 0)
			return (1);
		if (fchdir(r->dirfd)) {
			thread_dir_len = DIR_UNKNOWN;
			log_errno("cannot change to target '%s'", r->target);
			return (-1);
		}
		thread_dir_len = 0;
		return (1);
	}
	pthread_mutex_lock(&disk_mu);
	if (thread_shared != r->gen) {
		if (unshare(CLONE_FS) == 0)
			own = 1;
		else
			thread_shared = r->gen;
	}
	if (fchdir(r->dirfd)) {
		pthread_mutex_unlock(&disk_mu);
		log_errno("cannot change to target '%s'", r->target);
		return (-1);
	}
	if (own) {
		thread_own = r->gen;
		thread_dir_len = 0;
		pthread_mutex_unlock(&disk_mu);
	}
	return (own);
}

/*
 * As disk_enter, before a call about a regular file's path, but in the
 * file's directory where it can: there *name is the last component of
 * path, else path itself.  libarchive's symlink check opens, stats and
 * closes every directory on a path, from the working directory down
 * (files two directories deep: 20.8 system calls each from the target,
 * 15.7 from their directory, strace); this opens the directory once for
 * the files that follow in it, below the target and through no symlink
 * (fs_open_parent), else leaves it to libarchive: a directory that is
 * missing or not reachable that way (a symlink, which --force replaces)
 * is libarchive's to create or refuse, as before.  Only for regular
 * files, which leave libarchive nothing to do by name at close (entries
 * carry no file flags; directories are made and set here: set_dirs).
 */
static int
disk_enter_at(const struct fs_restore *r, const char *path,
    const char **name)
{
	const char *slash = strrchr(path, '/'), *base;
	size_t len = slash != NULL ? (size_t)(slash - path) : 0;
	int fd;

	*name = path;
	if (thread_own != r->gen || len == 0 || len > sizeof(thread_dir) ||
	    atomic_load_explicit(&no_openat2, memory_order_relaxed))
		return (disk_enter(r));
	if (len != thread_dir_len || memcmp(thread_dir, path, len) != 0) {
		thread_dir_len = DIR_UNKNOWN;
		if ((fd = fs_open_parent(r->dirfd, path, &base)) == -1) {
			if (errno == ENOSYS)
				atomic_store(&no_openat2, 1);
			return (disk_enter(r));
		}
		if (fchdir(fd)) {
			close(fd);
			return (disk_enter(r));
		}
		close(fd);
		memcpy(thread_dir, path, len);
		thread_dir_len = len;
	}
	*name = slash + 1;
	return (1);
}

static void
disk_leave(int own)
{
	if (!own)
		pthread_mutex_unlock(&disk_mu);
}

static const char *
errstr(struct archive *a)
{
	const char *s = archive_error_string(a);

	return (s != NULL ? s : "unknown error");
}

static void
writer_free(struct fs_restore *r)
{
	if (r == NULL)
		return;
	if (r->a != NULL)
		archive_write_free(r->a);
	if (r->ae != NULL)
		archive_entry_free(r->ae);
	if (r->pfd != -1 && r->pfd != r->dirfd)
		close(r->pfd);
	if (r->dirfd != -1)
		close(r->dirfd);
	if (r->cwdfd != -1)
		close(r->cwdfd);
	if (r->ffd != -1)
		close(r->ffd);
	if (r->cdir != -1 && r->cdir != r->dirfd)
		close(r->cdir);
	free(r->cdir_path);
	direct_free(r->dw);
	for (size_t i = 0; i < r->ndirs; i++)
		free(r->dirs[i].path);
	free(r->dirs);
	buf_release(&r->path);
	buf_release(&r->name);
	buf_release(&r->acl);
	buf_release(&r->tmp);
	free(r->target);
	free(r);
}

/*
 * SECURE_NOABSOLUTEPATHS means entries carry relative paths, resolved
 * against the working directory: each thread calling into a writer is in
 * the target for the call (disk_enter), or for a regular file in its
 * directory below the target (disk_enter_at), and the primary writer puts
 * the caller's working directory back at close.  Nothing else may rely on
 * the working directory meanwhile: no archive_read_disk walk (it
 * fchdir()s back to where it was opened), no relative path (the
 * repository's is absolute for this reason).
 */
static int
leave(struct fs_restore *r)
{
	if (fchdir(r->cwdfd)) {
		/* Only a vanished or unsearchable cwd gets here; relative
		 * paths elsewhere would now be wrong, so say so loudly. */
		log_errno("cannot return to the working directory");
		return (-1);
	}
	return (0);
}

/*
 * Map a libarchive status for the current entry: WARN is reported and
 * accepted, FAILED loses the entry, FATAL loses the restore.
 */
static int
check(struct fs_restore *r, int st, const char *what, const char *path)
{
	switch (st) {
	case ARCHIVE_OK:
		return (0);
	case ARCHIVE_WARN:
		r->warnings++;
		log_warn("incomplete restore of '%s': %s", path,
		    errstr(r->a));
		return (0);
	case ARCHIVE_FATAL:
		r->fatal = 1;
		/* FALLTHROUGH */
	default:
		log_error("cannot %s '%s': %s", what, path, errstr(r->a));
		return (-1);
	}
}

/* archive_write_disk_new reads the umask by setting it. */
static struct archive *
locked_disk_new(void)
{
	struct archive *a;

	pthread_mutex_lock(&disk_mu);
	a = archive_write_disk_new();
	pthread_mutex_unlock(&disk_mu);
	return (a);
}

/* A writer with its own archive_write_disk, not yet in any directory. */
static struct fs_restore *
writer_new(const char *target, int opts)
{
	struct fs_restore *r;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	r->dirfd = r->cwdfd = r->pfd = r->ffd = r->cdir = -1;
	r->opts = opts;
	buf_init(&r->path);
	buf_init(&r->name);
	buf_init(&r->tmp);
	buf_init(&r->acl);
	if ((r->target = strdup(target)) == NULL ||
	    (r->dw = direct_new()) == NULL ||
	    (r->a = locked_disk_new()) == NULL ||
	    (r->ae = archive_entry_new()) == NULL) {
		log_error("out of memory");
		goto err;
	}
	if (archive_write_disk_set_options(r->a, opts) != ARCHIVE_OK ||
	    archive_write_disk_set_standard_lookup(r->a) != ARCHIVE_OK) {
		log_error("cannot set up restore into '%s': %s", target,
		    errstr(r->a));
		goto err;
	}
	return (r);
err:
	writer_free(r);
	return (NULL);
}

/* A name set_tmp makes, of a run other than r's. */
static int
stale_name(const struct fs_restore *r, const char *name)
{
	char tag[9];
	size_t i;

	if (strncmp(name, ".coffer-", 8) != 0 || strlen(name) != 8 + 16)
		return (0);
	for (i = 8; i < 8 + 16; i++)
		if (!isdigit((unsigned char)name[i]) &&
		    (name[i] < 'a' || name[i] > 'f'))
			return (0);
	(void)snprintf(tag, sizeof(tag), "%08" PRIx32, r->run);
	return (memcmp(name + 8, tag, 8) != 0);
}

/*
 * Directory fd (FS_RESTORE_FORCE: it was there before this run) loses the
 * temporary names an earlier run left in it, killed between linking a
 * finished file there and renaming it into place: regular files only, of
 * a name only coffer makes, and never this run's own.  Best effort: what
 * cannot be read or removed is left, with a warning.
 */
static void
drop_stale(struct fs_restore *r, int fd, const char *dir)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int dfd;

	if ((dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1 ||
	    (d = fdopendir(dfd)) == NULL) {
		if (dfd != -1)
			close(dfd);
		log_warn_errno("cannot look for temporary names left in '%s'",
		    *dir != '\0' ? dir : r->target);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!stale_name(r, de->d_name) ||
		    (de->d_type != DT_REG && de->d_type != DT_UNKNOWN) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (unlinkat(dfd, de->d_name, 0) == 0)
			log_info("removed '%s%s%s', left by an interrupted "
			    "restore", dir, *dir != '\0' ? "/" : "", de->d_name);
		else if (errno != ENOENT)
			log_warn_errno("cannot remove '%s%s%s', left by an "
			    "interrupted restore", dir, *dir != '\0' ? "/" : "",
			    de->d_name);
	}
	closedir(d);
}

struct fs_restore *
fs_restore_open(const char *target, int flags)
{
	struct fs_restore *r;
	int opts, empty;

	if (!(flags & FS_RESTORE_FORCE)) {
		if ((empty = fsutil_dir_is_empty(target, 1)) < 0)
			return (NULL);
		if (!empty) {
			log_error("target '%s' is not empty (use --force)",
			    target);
			return (NULL);
		}
	}
	if (fsutil_mkdir_p(target, 0755))
		return (NULL);
	/*
	 * The SECURE flags refuse "..", absolute paths and writing through
	 * a symlink placed by an earlier entry.  No EXTRACT_SPARSE: it
	 * would turn zero blocks of the data into holes; holes come from
	 * the gaps between the blocks we are given.
	 */
	opts = SECURE_OPTS | ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_XATTR |
	    ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_FFLAGS;
	if (flags & FS_RESTORE_OWNER)
		opts |= ARCHIVE_EXTRACT_OWNER;
	if ((r = writer_new(target, opts)) == NULL)
		return (NULL);
	r->primary = 1;
	r->force = (flags & FS_RESTORE_FORCE) != 0;
	r->gen = atomic_fetch_add(&gens, 1) + 1;
	if ((r->dirfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1) {
		log_errno("cannot open target '%s'", target);
		goto err;
	}
	/* Not a secret: a tag of this run's temporary names that no other
	 * run's is likely to have. */
	if (getrandom(&r->run, sizeof(r->run), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(r->run))
		r->run = (uint32_t)getpid() ^ (uint32_t)time(NULL) << 16;
	if (r->force)
		drop_stale(r, r->dirfd, "");
	/* O_PATH: the caller's cwd need not be readable to return to it. */
	if ((r->cwdfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open the working directory");
		goto err;
	}
	/* The caller's umask comes back at close, whatever the writers did
	 * with it. */
	pthread_mutex_lock(&disk_mu);
	r->umask = umask(0);
	umask(r->umask);
	pthread_mutex_unlock(&disk_mu);
	return (r);
err:
	writer_free(r);
	return (NULL);
}

struct fs_restore *
fs_restore_dup(struct fs_restore *r)
{
	struct fs_restore *d;

	if ((d = writer_new(r->target, r->opts)) == NULL)
		return (NULL);
	d->gen = r->gen;
	d->force = r->force;
	d->run = r->run;
	d->umask = r->umask;
	if ((d->dirfd = fcntl(r->dirfd, F_DUPFD_CLOEXEC, 0)) == -1) {
		log_errno("cannot open target '%s'", r->target);
		writer_free(d);
		return (NULL);
	}
	return (d);
}

static int
set_path(struct fs_restore *r, const char *path)
{
	buf_reset(&r->path);
	if (buf_puts(&r->path, path) || buf_reserve(&r->path, 1))
		return (-1);
	r->path.data[r->path.len] = '\0';
	return (0);
}

static const char *
cur(const struct fs_restore *r)
{
	return ((const char *)r->path.data);
}

/* The current file's temporary name, and their last components. */
static const char *
tmp_path(const struct fs_restore *r)
{
	return ((const char *)r->tmp.data);
}

static const char *
tmp_base(const struct fs_restore *r)
{
	return ((const char *)r->tmp.data + r->tbase);
}

static const char *
cur_base(const struct fs_restore *r)
{
	return ((const char *)r->path.data + r->base);
}

/*
 * A temporary name beside the current path: ".coffer-", the run's tag and
 * a count of the process's names, 8 hex digits each.  Within a run no two
 * are alike; a name of another run's tag was left by one that died
 * between making and renaming it (drop_stale).  0, or -1 (out of memory,
 * reported).
 */
static atomic_uint_least32_t tmp_count;

static int
set_tmp(struct fs_restore *r)
{
	const char *p = cur(r), *slash = strrchr(p, '/');
	char name[8 + 16 + 1];

	(void)snprintf(name, sizeof(name), ".coffer-%08" PRIx32 "%08" PRIx32,
	    r->run, (uint32_t)atomic_fetch_add(&tmp_count, 1));
	r->base = slash != NULL ? (size_t)(slash - p) + 1 : 0;
	buf_reset(&r->tmp);
	if (buf_append(&r->tmp, p, r->base) || buf_puts(&r->tmp, name) ||
	    buf_put_u8(&r->tmp, 0))
		return (-1);
	r->tbase = r->base;
	return (0);
}

static void
close_pfd(struct fs_restore *r)
{
	if (r->pfd != -1 && r->pfd != r->dirfd)
		close(r->pfd);
	r->pfd = -1;
}

/*
 * The current file is given up: its temporary name is removed, from its
 * directory's descriptor (a directory on the way swapped for a symlink
 * since cannot lead elsewhere).
 */
static void
drop_tmp(struct fs_restore *r)
{
	if (r->pfd == -1)
		log_warn("cannot remove incomplete '%s' (as '%s'): its "
		    "directory is not open", cur(r), tmp_path(r));
	else if (unlinkat(r->pfd, tmp_base(r), 0) && errno != ENOENT)
		log_warn_errno("cannot remove incomplete '%s' (as '%s')",
		    cur(r), tmp_path(r));
	close_pfd(r);
}

/*
 * The identity of the regular file name in dfd (name "" and AT_EMPTY_PATH
 * in flags: dfd itself), with its link count in *nlink.  0, 1 when it is
 * not a regular file (or not there), or -1 (errno).
 */
static int
file_id(int dfd, const char *name, int flags, struct fs_file_id *id,
    uint32_t *nlink)
{
	struct statx sx;

	if (statx(dfd, name, flags | AT_SYMLINK_NOFOLLOW,
	    STATX_TYPE | STATX_INO | STATX_UID | STATX_GID | STATX_NLINK |
	    STATX_BTIME, &sx))
		return (errno == ENOENT ? 1 : -1);
	if (!S_ISREG(sx.stx_mode))
		return (1);
	memset(id, 0, sizeof(*id));
	id->dev = ((uint64_t)sx.stx_dev_major << 32) | sx.stx_dev_minor;
	id->ino = sx.stx_ino;
	id->uid = sx.stx_uid;
	id->gid = sx.stx_gid;
	if ((id->has_btime = (sx.stx_mask & STATX_BTIME) != 0)) {
		id->btime_sec = sx.stx_btime.tv_sec;
		id->btime_nsec = sx.stx_btime.tv_nsec;
	}
	if (nlink != NULL)
		*nlink = sx.stx_nlink;
	return (0);
}

/* One inode, not another given its number since?  owner too: whether its
 * owner and group are the same. */
static int
same_inode(const struct fs_file_id *a, const struct fs_file_id *b,
    int owner)
{
	if (a->dev != b->dev || a->ino != b->ino)
		return (0);
	if (owner && (a->uid != b->uid || a->gid != b->gid))
		return (0);
	if (a->has_btime && b->has_btime && (a->btime_sec != b->btime_sec ||
	    a->btime_nsec != b->btime_nsec))
		return (0);
	return (1);
}

/*
 * The inode at the current file's temporary name in pfd.  new: it has
 * just been created there, by this process, with no other name; a local
 * user who owns the directory may have put another file in its place.
 * 0, or -1 (reported).  An inode of another owner (where this euid's
 * files are not its own: an NFS server's root_squash) is written, but
 * not trusted to be the one made (id_trusted): no second name is linked
 * to it.
 */
static int
tmp_id(struct fs_restore *r, struct fs_file_id *id, int new)
{
	uint32_t nlink = 0;
	int st;

	if ((st = file_id(r->pfd, tmp_base(r), 0, id, &nlink)) < 0) {
		log_errno("cannot restore '%s': cannot stat '%s'", cur(r),
		    tmp_path(r));
		return (-1);
	}
	if (st == 1 || (new && nlink != 1)) {
		log_error("cannot restore '%s': '%s' was replaced while it "
		    "was written", cur(r), tmp_path(r));
		return (-1);
	}
	if (new)
		r->id_trusted = id->uid == (int64_t)geteuid();
	return (0);
}

/*
 * The current file, finished under its temporary name, takes its path:
 * whatever was there is replaced at once, as libarchive would have
 * replaced it (a directory only if it is empty).  0, or -1 (reported;
 * the temporary name is left to drop_tmp).
 */
static int
put_in_place(struct fs_restore *r)
{
	if (renameat(r->pfd, tmp_base(r), r->pfd, cur_base(r)) == 0)
		return (0);
	if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
		if (unlinkat(r->pfd, cur_base(r), AT_REMOVEDIR) == 0) {
			if (renameat(r->pfd, tmp_base(r), r->pfd,
			    cur_base(r)) == 0)
				return (0);
		} else {
			log_errno("cannot restore '%s': cannot replace the "
			    "directory there", cur(r));
			return (-1);
		}
	}
	log_errno("cannot restore '%s': cannot rename '%s' into place",
	    cur(r), tmp_path(r));
	return (-1);
}

static int
add_xattrs(struct fs_restore *r, const struct entry *e)
{
	struct entry_xattr_iter it;
	const char *name;
	const void *value;
	size_t nl, vl;
	int st;

	entry_xattrs_iter_init(&it, e->xattrs, e->xattrs_len);
	while ((st = entry_xattrs_next(&it, &name, &nl, &value, &vl)) == 1) {
		/* libarchive wants NUL-terminated names. */
		buf_reset(&r->name);
		if (buf_append(&r->name, name, nl) ||
		    buf_put_u8(&r->name, 0))
			return (-1);
		archive_entry_xattr_add_entry(r->ae,
		    (const char *)r->name.data, value, vl);
	}
	if (st < 0 && ++r->warnings)
		log_warn("malformed extended attributes of '%s'; "
		    "restoring the rest", e->path);
	return (0);
}

static int
add_acl(struct fs_restore *r, const struct entry *e)
{
	/* Access and default entries ("default:" marks the latter), as
	 * fs_walk_next stored them; NFSv4 text has more fields. */
	if (archive_entry_acl_from_text(r->ae, e->acl,
	    ARCHIVE_ENTRY_ACL_TYPE_POSIX1E) == ARCHIVE_OK)
		return (0);
	archive_entry_acl_clear(r->ae);
	if (archive_entry_acl_from_text(r->ae, e->acl,
	    ARCHIVE_ENTRY_ACL_TYPE_NFS4) == ARCHIVE_OK)
		return (0);
	archive_entry_acl_clear(r->ae);
	r->warnings++;
	log_warn("cannot parse the ACL of '%s'; restoring it without",
	    e->path);
	return (0);
}

static int
filetype_of(int kind)
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
static struct timespec
ns_timespec(int64_t ns)
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

static void
set_mtime(struct archive_entry *ae, int64_t ns)
{
	struct timespec ts = ns_timespec(ns);

	archive_entry_set_mtime(ae, ts.tv_sec, ts.tv_nsec);
	archive_entry_set_atime(ae, ts.tv_sec, ts.tv_nsec);
}

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
enum { LINK_UNKNOWN, LINK_EMPTY_PATH, LINK_PROC, LINK_NONE };
static atomic_int tmpfile_link;

static int
link_fd(int fd, int how, int dfd, const char *name)
{
	char p[32];

	if (how == LINK_EMPTY_PATH)
		return (linkat(fd, "", dfd, name, AT_EMPTY_PATH));
	(void)snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	return (linkat(AT_FDCWD, p, dfd, name, AT_SYMLINK_FOLLOW));
}

/* Which way an unnamed file of directory dfd can be linked, tried on one
 * under the current path's temporary name (removed again). */
static int
plain_probe(struct fs_restore *r, int dfd)
{
	static const int ways[2] = { LINK_EMPTY_PATH, LINK_PROC };
	int fd, i, how = LINK_NONE;

	if (set_tmp(r))
		return (LINK_UNKNOWN);
	if ((fd = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600)) ==
	    -1)
		return (LINK_UNKNOWN);
	for (i = 0; i < 2 && how == LINK_NONE; i++)
		if (link_fd(fd, ways[i], dfd, tmp_base(r)) == 0) {
			how = ways[i];
			(void)unlinkat(dfd, tmp_base(r), 0);
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
static int
plain_begin(struct fs_restore *r, const struct entry *e)
{
	const char *base;
	int how, dfd, fd;

	if (e->size >= (int64_t)FS_RESTORE_DIRECT_MIN || e->xattrs_len > 0 ||
	    (e->acl != NULL && *e->acl != '\0') || (e->mode & 07000) != 0 ||
	    (how = atomic_load(&tmpfile_link)) == LINK_NONE)
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
	if (how == LINK_UNKNOWN)
		how = plain_probe(r, dfd);
	if (how != LINK_EMPTY_PATH && how != LINK_PROC) {
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
static int
plain_data(struct fs_restore *r, const void *buf, size_t len, int64_t off)
{
	const unsigned char *p = buf;
	ssize_t n;

	if (off > r->fsize || len > (uint64_t)(r->fsize - off)) {
		log_error("cannot write '%s': data past its size", cur(r));
		return (-1);
	}
	while (len > 0) {
		if ((n = pwrite(r->ffd, p, len, off)) < 0) {
			if (errno == EINTR)
				continue;
			log_errno("cannot write '%s'", cur(r));
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

static void
plain_drop(struct fs_restore *r)
{
	close(r->ffd);
	r->ffd = -1;
	r->plain = 0;
}

static void
plain_warn(struct fs_restore *r, const char *what)
{
	r->warnings++;
	log_warn("incomplete restore of '%s': cannot set its %s: %s", cur(r),
	    what, strerror(errno));
}

/*
 * The plain file is written: its size (a hole at its end), owner, mode
 * (the umask may have hidden some of it) and times, in libarchive's
 * order, then its name.  0, or -1 (reported; nothing is left of it).
 */
static int
plain_finish(struct fs_restore *r)
{
	struct timespec ts[2];
	int how = atomic_load(&tmpfile_link);

	if (r->fend < r->fsize && ftruncate(r->ffd, r->fsize)) {
		log_errno("cannot write '%s'", cur(r));
		goto fail;
	}
	if (r->fowner && fchown(r->ffd, (uid_t)r->fuid, (gid_t)r->fgid))
		plain_warn(r, "owner");
	if ((r->fmode & r->umask) != 0 && fchmod(r->ffd, (mode_t)r->fmode))
		plain_warn(r, "mode");
	ts[0] = ts[1] = ns_timespec(r->fmtime_ns);
	if (futimens(r->ffd, ts))
		plain_warn(r, "times");
	if (file_id(r->ffd, "", AT_EMPTY_PATH, &r->id, NULL)) {
		log_errno("cannot restore '%s'", cur(r));
		goto fail;
	}
	if (link_fd(r->ffd, how, r->cdir, cur_base(r)) == 0)
		goto done;
	if (errno != EEXIST) {
		log_errno("cannot restore '%s': cannot link it into place",
		    cur(r));
		goto fail;
	}
	/* Something is there (FS_RESTORE_FORCE): replaced at once. */
	if (set_tmp(r))
		goto fail;
	if (link_fd(r->ffd, how, r->cdir, tmp_base(r))) {
		log_errno("cannot restore '%s': cannot link it as '%s'",
		    cur(r), tmp_path(r));
		goto fail;
	}
	r->pfd = r->cdir;
	if (put_in_place(r)) {
		if (unlinkat(r->cdir, tmp_base(r), 0) && errno != ENOENT)
			log_warn_errno("cannot remove '%s'", tmp_path(r));
		r->pfd = -1;
		goto fail;
	}
	r->pfd = -1;
done:
	plain_drop(r);
	r->last_plain = 1;
	r->has_id = 1;
	return (0);
fail:
	plain_drop(r);
	return (-1);
}

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
static int
begin_dir(struct fs_restore *r, const struct entry *e)
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
				drop_stale(r, fd, e->path);
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
		if ((own = disk_enter(r)) < 0)
			return (-1);
		(void)archive_write_disk_set_options(r->a, r->opts &
		    SECURE_OPTS);
		st1 = archive_write_header(r->a, r->ae);
		if (st1 == ARCHIVE_OK || st1 == ARCHIVE_WARN)
			st2 = archive_write_finish_entry(r->a);
		(void)archive_write_disk_set_options(r->a, r->opts);
		disk_leave(own);
		if (check(r, st1, "restore", e->path) ||
		    check(r, st2, "restore", e->path) || r->fatal)
			return (-1);
	}
	return (remember_dir(r, e, e->path));
}

int
fs_restore_root(struct fs_restore *r, const struct entry *e)
{
	assert(r->state == IDLE);
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
	ts[0] = ts[1] = ns_timespec(d->mtime_ns);
	if (futimens(fd, ts))
		dir_warn(r, d, "times");
	if (fd != r->dirfd)
		close(fd);
}

/* Every directory's metadata, those below a directory before its own. */
static void
set_dirs(struct fs_restore *r)
{
	size_t i;
	int root = geteuid() == 0;

	if (r->ndirs > 1)	/* a writer that made none has no array */
		qsort(r->dirs, r->ndirs, sizeof(*r->dirs), deeper_first);
	for (i = 0; i < r->ndirs; i++)
		set_dir(r, &r->dirs[i], root);
}

int
fs_restore_begin(struct fs_restore *r, const struct entry *e)
{
	const char *name;
	int ft, st, own;

	assert(r->state == IDLE);
	r->has_id = 0;
	if (r->fatal) {
		log_error("cannot restore '%s': an earlier error stopped "
		    "this writer", e->path);
		return (-1);
	}
	if (!entry_path_is_safe(e->path)) {
		log_error("refusing to restore unsafe path '%s'", e->path);
		return (-1);
	}
	if (e->kind == ENTRY_SOCK) {
		/* archive_write_disk would create an empty regular file; a
		 * socket only means something to the process that bound it
		 * (tar skips them too). */
		if (set_path(r, e->path))
			return (-1);
		log_info("not restoring socket '%s'", e->path);
		r->kind = e->kind;
		r->nolib = 1;
		r->state = IN_ENTRY;
		return (0);
	}
	if ((ft = filetype_of(e->kind)) < 0) {
		log_error("cannot restore '%s': unknown kind %d", e->path,
		    e->kind);
		return (-1);
	}
	if (e->kind == ENTRY_SYMLINK && (e->target == NULL ||
	    *e->target == '\0')) {
		log_error("cannot restore symlink '%s': no target", e->path);
		return (-1);
	}
	if (set_path(r, e->path))
		return (-1);
	if (e->kind == ENTRY_DIR) {
		if (begin_dir(r, e))
			return (-1);
		r->kind = e->kind;
		r->nolib = 1;
		r->state = IN_ENTRY;
		return (0);
	}
	r->nolib = 0;
	r->last_plain = 0;
	if (e->kind == ENTRY_FILE && (st = plain_begin(r, e)) <= 0) {
		if (st == 0) {
			r->kind = e->kind;
			r->state = IN_ENTRY;
		}
		return (st);
	}

	archive_entry_clear(r->ae);
	archive_entry_set_pathname(r->ae, e->path);
	archive_entry_set_filetype(r->ae, (unsigned int)ft);
	archive_entry_set_uid(r->ae, e->uid);
	archive_entry_set_gid(r->ae, e->gid);
	if (e->uname != NULL)
		archive_entry_set_uname(r->ae, e->uname);
	if (e->gname != NULL)
		archive_entry_set_gname(r->ae, e->gname);
	set_mtime(r->ae, e->mtime_ns);
	if (e->kind == ENTRY_FILE)
		archive_entry_set_size(r->ae, e->size);
	if (e->kind == ENTRY_SYMLINK)
		archive_entry_set_symlink(r->ae, e->target);
	if (e->kind == ENTRY_CHR || e->kind == ENTRY_BLK)
		archive_entry_set_rdev(r->ae, (dev_t)e->rdev);
	if (e->xattrs_len > 0 && add_xattrs(r, e))
		return (-1);
	if (e->acl != NULL && *e->acl != '\0' && add_acl(r, e))
		return (-1);
	/*
	 * After the ACL: parsing user::/group::/other:: entries rewrites the
	 * permission bits, and the stored mode (stat()'s) is authoritative,
	 * except for the group bits of a file with an extended access ACL:
	 * stat() shows its mask there, which comes back with the ACL, while
	 * libarchive wants the group:: entry in the mode.
	 */
	if (archive_entry_acl_count(r->ae, ARCHIVE_ENTRY_ACL_TYPE_ACCESS) > 0)
		archive_entry_set_perm(r->ae, (e->mode & 07707) |
		    (archive_entry_perm(r->ae) & 070));
	else
		archive_entry_set_perm(r->ae, e->mode & 07777);

	r->in_dir = 0;
	if (e->kind == ENTRY_FILE) {
		/* Written under a temporary name (set_tmp), renamed over
		 * its path once finished. */
		if (set_tmp(r) || (own = disk_enter_at(r, e->path,
		    &name)) < 0)
			return (-1);
		r->in_dir = name != e->path;
		archive_entry_set_pathname(r->ae, r->in_dir ? tmp_base(r) :
		    tmp_path(r));
	} else if ((own = disk_enter(r)) < 0)
		return (-1);
	st = archive_write_header(r->a, r->ae);
	if (e->kind == ENTRY_FILE && (st == ARCHIVE_OK ||
	    st == ARCHIVE_WARN)) {
		/* The directory the file was just created in: the working
		 * one when the file was begun from there, or opened below
		 * the target through no symlink. */
		const char *b;

		if (r->in_dir)
			r->pfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		else
			r->pfd = fs_open_parent(r->dirfd, tmp_path(r), &b);
		if (r->pfd == -1)
			log_errno("cannot restore '%s': cannot open its "
			    "directory", e->path);
		else if (tmp_id(r, &r->id, 1))
			close_pfd(r);
	}
	disk_leave(own);
	if (check(r, st, "restore", e->path) || r->fatal ||
	    (e->kind == ENTRY_FILE && r->pfd == -1)) {
		if (e->kind == ENTRY_FILE && (st == ARCHIVE_OK ||
		    st == ARCHIVE_WARN)) {
			/* Created: closed and removed. */
			r->kind = e->kind;
			r->state = IN_ENTRY;
			fs_restore_discard(r);
		}
		return (-1);
	}
	r->kind = e->kind;
	r->state = IN_ENTRY;
	if (e->kind == ENTRY_FILE)
		(void)direct_begin(r->dw, r->pfd, tmp_base(r), e->size);
	return (0);
}

/* Before finishing the current entry: where it was begun.  (Its file
 * may have gone on on another thread.) */
static int
entry_enter(const struct fs_restore *r)
{
	const char *name;

	return (r->in_dir ? disk_enter_at(r, cur(r), &name) : disk_enter(r));
}

/*
 * Write data through libarchive.  Its failed write(2) is only a warning
 * ("Write failed"), as is data past the entry's size; either would leave
 * a torn file that looks restored, so here both fail the file.
 */
static int
write_block(struct fs_restore *r, const void *buf, size_t len, int64_t off)
{
	la_ssize_t st;
	int e;

	st = archive_write_data_block(r->a, buf, len, off);
	if (st == ARCHIVE_OK)
		return (0);
	if (st == ARCHIVE_FATAL)
		r->fatal = 1;
	e = archive_errno(r->a);
	if (e > 0)
		log_error("cannot write '%s': %s", cur(r), strerror(e));
	else
		log_error("cannot write '%s': %s", cur(r), errstr(r->a));
	return (-1);
}

/*
 * The file's data written directly so far goes out; what O_DIRECT cannot
 * take of it, through libarchive.  0, or -1 (reported).
 */
static int
direct_flush(struct fs_restore *r)
{
	const void *tail;
	size_t len;
	int64_t off;

	if (direct_end(r->dw, &tail, &len, &off)) {
		log_errno("cannot write '%s'", cur(r));
		return (-1);
	}
	return (len > 0 ? write_block(r, tail, len, off) : 0);
}

static int
restore_data(struct fs_restore *r, const void *buf, size_t len,
    int64_t offset, int lent)
{
	assert(r->state == IN_ENTRY && r->kind == ENTRY_FILE);
	if (r->fatal) {
		log_error("cannot write '%s': an earlier error stopped this "
		    "writer", cur(r));
		return (-1);
	}
	if (offset < 0) {
		log_error("cannot write '%s': negative offset", cur(r));
		return (-1);
	}
	if (r->plain)
		return (plain_data(r, buf, len, offset));
	if (direct_active(r->dw)) {
		/* Data past the entry's size goes to libarchive, which
		 * refuses it. */
		if (offset == direct_next(r->dw) && (uint64_t)offset + len <=
		    (uint64_t)archive_entry_size(r->ae)) {
			if ((lent ? direct_lend(r->dw, buf, len) :
			    direct_write(r->dw, buf, len)) == 0)
				return (0);
			log_errno("cannot write '%s'", cur(r));
			return (-1);
		}
		/* A gap (a hole) or a step back: the rest goes through
		 * libarchive, which seeks. */
		if (direct_flush(r))
			return (-1);
	}
	return (write_block(r, buf, len, offset));
}

int
fs_restore_data(struct fs_restore *r, const void *buf, size_t len,
    int64_t offset)
{
	return (restore_data(r, buf, len, offset, 0));
}

int
fs_restore_data_lent(struct fs_restore *r, const void *buf, size_t len,
    int64_t offset)
{
	return (restore_data(r, buf, len, offset, 1));
}

uint64_t
fs_restore_ticket(struct fs_restore *r)
{
	return (direct_ticket(r->dw));
}

void
fs_restore_wait(struct fs_restore *r, uint64_t ticket)
{
	direct_wait(r->dw, ticket);
}

int
fs_restore_finish(struct fs_restore *r)
{
	struct fs_file_id id;
	int st, own;

	assert(r->state == IN_ENTRY);
	if (r->plain) {
		r->state = IDLE;
		return (plain_finish(r));
	}
	if (direct_active(r->dw) && direct_flush(r)) {
		fs_restore_discard(r);
		return (-1);
	}
	r->state = IDLE;
	if (r->nolib)
		return (0);
	if (r->fatal || (own = entry_enter(r)) < 0)
		goto fail;
	st = archive_write_finish_entry(r->a);
	disk_leave(own);
	if (check(r, st, "finish", cur(r)) || r->fatal)
		goto fail;
	if (r->kind == ENTRY_FILE) {
		/* Its owner is set by now. */
		if (tmp_id(r, &id, 0))
			goto fail;
		if (!same_inode(&id, &r->id, 0)) {
			log_error("cannot restore '%s': '%s' was replaced "
			    "while it was written", cur(r), tmp_path(r));
			goto fail;
		}
		if (put_in_place(r))
			goto fail;
		close_pfd(r);
		r->id = id;
		r->has_id = r->id_trusted;
	}
	return (0);
fail:
	if (r->kind == ENTRY_FILE)
		drop_tmp(r);
	return (-1);
}

int
fs_restore_keep(struct fs_restore *r)
{
	assert(r->state == IDLE);
	return (r->last_plain ? -1 : direct_take_fd(r->dw));
}

void
fs_restore_discard(struct fs_restore *r)
{
	int own;

	if (r->state != IN_ENTRY)
		return;
	if (r->plain) {
		/* Unnamed: nothing of it stays. */
		r->state = IDLE;
		plain_drop(r);
		return;
	}
	direct_abandon(r->dw);
	r->state = IDLE;
	if (r->nolib)
		return;
	/* Closes the descriptor; its metadata is wasted work. */
	if (!r->fatal && (own = entry_enter(r)) >= 0) {
		(void)archive_write_finish_entry(r->a);
		disk_leave(own);
	}
	/* Whatever happened above, no part of a file stays to look
	 * whole, and what was at its path stays as it was. */
	if (r->kind == ENTRY_FILE)
		drop_tmp(r);
}

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

	if ((st = file_id(dfd, name, *name == '\0' ? AT_EMPTY_PATH : 0, &at,
	    NULL)) != 0)
		return (st < 0 ? -1 : 0);
	return (same_inode(&at, id, 1));
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

	if (link_fd(fd, LINK_EMPTY_PATH, dfd, name) == 0)
		return (0);
	if (errno == EEXIST)
		return (-1);
	if (link_fd(fd, LINK_PROC, dfd, name) == 0)
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

	if (set_path(r, e->path) || set_tmp(r))
		return (-1);
	if ((r->pfd = fs_open_parent(r->dirfd, e->path, &b)) == -1) {
		if (errno == ENOENT)
			return (1);
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		return (-1);
	}
	if ((epfd = fs_open_parent(r->dirfd, existing, &ebase)) == -1) {
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		close_pfd(r);
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
	    tmp_base(r))) == 1)
		log_error("cannot link '%s' to '%s': '%s' is no longer the "
		    "file restored there", e->path, existing, existing);
	else if (lk != 0)
		log_errno("cannot link '%s' to '%s'", e->path, existing);
	else if (put_in_place(r))
		drop_tmp(r);
	else {
		/* A rename between two names of one file leaves both. */
		if (unlinkat(r->pfd, tmp_base(r), 0) && errno != ENOENT)
			log_warn_errno("cannot remove '%s'", tmp_path(r));
		rc = 0;
	}
out:
	if (fd != -1)
		close(fd);
	if (epfd != r->dirfd)
		close(epfd);
	close_pfd(r);
	return (rc);
}

int
fs_restore_hardlink(struct fs_restore *r, const struct entry *e,
    const char *existing, const struct fs_file_id *id)
{
	const char *b;
	int st, own, is;

	assert(r->state == IDLE);
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
	archive_entry_set_pathname(r->ae, tmp_path(r));
	archive_entry_set_hardlink(r->ae, existing);
	archive_entry_set_filetype(r->ae, AE_IFREG);
	archive_entry_set_perm(r->ae, e->mode & 07777);
	archive_entry_set_size(r->ae, 0);
	if ((own = disk_enter(r)) < 0)
		return (-1);
	st = archive_write_header(r->a, r->ae);
	if (st == ARCHIVE_OK || st == ARCHIVE_WARN) {
		if (check(r, st, "link", e->path) == 0)
			st = archive_write_finish_entry(r->a);
	}
	disk_leave(own);
	if (check(r, st, "link", e->path))
		return (-1);
	if (r->fatal)
		return (-1);
	if ((r->pfd = fs_open_parent(r->dirfd, tmp_path(r), &b)) == -1) {
		log_errno("cannot link '%s' to '%s'", e->path, existing);
		return (-1);
	}
	if ((is = is_inode(r->pfd, tmp_base(r), id)) != 1) {
		if (is == 0)
			log_error("cannot link '%s' to '%s': '%s' is no longer "
			    "the file restored there", e->path, existing,
			    existing);
		else
			log_errno("cannot link '%s' to '%s'", e->path,
			    existing);
		drop_tmp(r);
		return (-1);
	}
	if (put_in_place(r)) {
		drop_tmp(r);
		return (-1);
	}
	close_pfd(r);
	return (0);
}

/*
 * Tests only (COFFER_TEST_BEFORE_DIR_METADATA): a shell command, run once
 * every entry is written and before the directories' metadata is set: the
 * point where a local user who owns a restored directory may have
 * rearranged what is below it.
 */
static void
test_hook(const struct fs_restore *r)
{
	if (r->primary)
		tuning_run_hook("COFFER_TEST_BEFORE_DIR_METADATA",
		    tuning_get()->test_before_dir_metadata, NULL, NULL);
}

int
fs_restore_close(struct fs_restore *r)
{
	int ret = 0, st, own;

	if (r == NULL)
		return (0);
	if (r->state == IN_ENTRY && fs_restore_finish(r))
		ret = -1;
	test_hook(r);
	/* libarchive has nothing left to set by name but the modes of the
	 * directories it made above a file that came without them (a
	 * subset), when the umask hides some of 0700: from inside the
	 * target.  After FATAL, libarchive refuses every call but free. */
	if (r->fatal || (own = disk_enter(r)) < 0)
		ret = -1;
	else {
		st = archive_write_close(r->a);
		disk_leave(own);
		if (check(r, st, "finish restore into", r->target))
			ret = -1;
	}
	set_dirs(r);
	if (ret == 0 && r->warnings > 0)
		ret = 1;
	if (r->primary) {
		/* This thread's directory and umask: its own or the
		 * process's, as they were at open. */
		pthread_mutex_lock(&disk_mu);
		if (leave(r))
			ret = -1;
		umask(r->umask);
		thread_own = 0;
		pthread_mutex_unlock(&disk_mu);
	}
	writer_free(r);
	return (ret);
}
