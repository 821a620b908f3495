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
#include "restore-int.h"

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
 * rs_disk_leave(0).  -1: error (reported; nothing held).
 */
int
rs_disk_enter(const struct fs_restore *r)
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
 * As rs_disk_enter, before a call about a regular file's path, but in the
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
 * carry no file flags; directories are made and set here: rs_set_dirs).
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
		return (rs_disk_enter(r));
	if (len != thread_dir_len || memcmp(thread_dir, path, len) != 0) {
		thread_dir_len = DIR_UNKNOWN;
		if ((fd = fs_open_parent(r->dirfd, path, &base)) == -1) {
			if (errno == ENOSYS)
				atomic_store(&no_openat2, 1);
			return (rs_disk_enter(r));
		}
		if (fchdir(fd)) {
			close(fd);
			return (rs_disk_enter(r));
		}
		close(fd);
		memcpy(thread_dir, path, len);
		thread_dir_len = len;
	}
	*name = slash + 1;
	return (1);
}

void
rs_disk_leave(int own)
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
 * the target for the call (rs_disk_enter), or for a regular file in its
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
int
rs_check(struct fs_restore *r, int st, const char *what,
    const char *path)
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

/* A name rs_set_tmp makes, of a run other than r's. */
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
void
rs_drop_stale(struct fs_restore *r, int fd, const char *dir)
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
	opts = RS_SECURE_OPTS | ARCHIVE_EXTRACT_TIME |
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
		rs_drop_stale(r, r->dirfd, "");
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

int
rs_set_path(struct fs_restore *r, const char *path)
{
	buf_reset(&r->path);
	if (buf_puts(&r->path, path) || buf_reserve(&r->path, 1))
		return (-1);
	r->path.data[r->path.len] = '\0';
	return (0);
}


/*
 * A temporary name beside the current path: ".coffer-", the run's tag and
 * a count of the process's names, 8 hex digits each.  Within a run no two
 * are alike; a name of another run's tag was left by one that died
 * between making and renaming it (rs_drop_stale).  0, or -1 (out of memory,
 * reported).
 */
static atomic_uint_least32_t tmp_count;

int
rs_set_tmp(struct fs_restore *r)
{
	const char *p = rs_cur(r), *slash = strrchr(p, '/');
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

void
rs_close_pfd(struct fs_restore *r)
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
void
rs_drop_tmp(struct fs_restore *r)
{
	if (r->pfd == -1)
		log_warn("cannot remove incomplete '%s' (as '%s'): its "
		    "directory is not open", rs_cur(r), rs_tmp_path(r));
	else if (unlinkat(r->pfd, rs_tmp_base(r), 0) && errno != ENOENT)
		log_warn_errno("cannot remove incomplete '%s' (as '%s')",
		    rs_cur(r), rs_tmp_path(r));
	rs_close_pfd(r);
}

/*
 * The identity of the regular file name in dfd (name "" and AT_EMPTY_PATH
 * in flags: dfd itself), with its link count in *nlink.  0, 1 when it is
 * not a regular file (or not there), or -1 (errno).
 */
int
rs_file_id(int dfd, const char *name, int flags, struct fs_file_id *id,
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
int
rs_same_inode(const struct fs_file_id *a, const struct fs_file_id *b,
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

	if ((st = rs_file_id(r->pfd, rs_tmp_base(r), 0, id, &nlink)) < 0) {
		log_errno("cannot restore '%s': cannot stat '%s'", rs_cur(r),
		    rs_tmp_path(r));
		return (-1);
	}
	if (st == 1 || (new && nlink != 1)) {
		log_error("cannot restore '%s': '%s' was replaced while it "
		    "was written", rs_cur(r), rs_tmp_path(r));
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
 * the temporary name is left to rs_drop_tmp).
 */
int
rs_put_in_place(struct fs_restore *r)
{
	if (renameat(r->pfd, rs_tmp_base(r), r->pfd, rs_cur_base(r)) == 0)
		return (0);
	if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
		if (unlinkat(r->pfd, rs_cur_base(r), AT_REMOVEDIR) == 0) {
			if (renameat(r->pfd, rs_tmp_base(r), r->pfd,
			    rs_cur_base(r)) == 0)
				return (0);
		} else {
			log_errno("cannot restore '%s': cannot replace the "
			    "directory there", rs_cur(r));
			return (-1);
		}
	}
	log_errno("cannot restore '%s': cannot rename '%s' into place",
	    rs_cur(r), rs_tmp_path(r));
	return (-1);
}

static void
set_mtime(struct archive_entry *ae, int64_t ns)
{
	struct timespec ts = rs_ns_timespec(ns);

	archive_entry_set_mtime(ae, ts.tv_sec, ts.tv_nsec);
	archive_entry_set_atime(ae, ts.tv_sec, ts.tv_nsec);
}


int
fs_restore_begin(struct fs_restore *r, const struct entry *e)
{
	const char *name;
	int ft, st, own;

	assert(r->state == RS_IDLE);
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
		if (rs_set_path(r, e->path))
			return (-1);
		log_info("not restoring socket '%s'", e->path);
		r->kind = e->kind;
		r->nolib = 1;
		r->state = RS_IN_ENTRY;
		return (0);
	}
	if ((ft = fs_ae_filetype(e->kind)) < 0) {
		log_error("cannot restore '%s': unknown kind %d", e->path,
		    e->kind);
		return (-1);
	}
	if (e->kind == ENTRY_SYMLINK && (e->target == NULL ||
	    *e->target == '\0')) {
		log_error("cannot restore symlink '%s': no target", e->path);
		return (-1);
	}
	if (rs_set_path(r, e->path))
		return (-1);
	if (e->kind == ENTRY_DIR) {
		if (rs_begin_dir(r, e))
			return (-1);
		r->kind = e->kind;
		r->nolib = 1;
		r->state = RS_IN_ENTRY;
		return (0);
	}
	r->nolib = 0;
	r->last_plain = 0;
	if (e->kind == ENTRY_FILE && (st = rs_plain_begin(r, e)) <= 0) {
		if (st == 0) {
			r->kind = e->kind;
			r->state = RS_IN_ENTRY;
		}
		return (st);
	}

	archive_entry_clear(r->ae);
	archive_entry_set_pathname(r->ae, e->path);
	if (fs_ae_set(r->ae, e, &r->name, &r->warnings))
		return (-1);
	set_mtime(r->ae, e->mtime_ns);

	r->in_dir = 0;
	if (e->kind == ENTRY_FILE) {
		/* Written under a temporary name (rs_set_tmp), renamed over
		 * its path once finished. */
		if (rs_set_tmp(r) || (own = disk_enter_at(r, e->path,
		    &name)) < 0)
			return (-1);
		r->in_dir = name != e->path;
		archive_entry_set_pathname(r->ae, r->in_dir ? rs_tmp_base(r) :
		    rs_tmp_path(r));
	} else if ((own = rs_disk_enter(r)) < 0)
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
			r->pfd = fs_open_parent(r->dirfd, rs_tmp_path(r), &b);
		if (r->pfd == -1)
			log_errno("cannot restore '%s': cannot open its "
			    "directory", e->path);
		else if (tmp_id(r, &r->id, 1))
			rs_close_pfd(r);
	}
	rs_disk_leave(own);
	if (rs_check(r, st, "restore", e->path) || r->fatal ||
	    (e->kind == ENTRY_FILE && r->pfd == -1)) {
		if (e->kind == ENTRY_FILE && (st == ARCHIVE_OK ||
		    st == ARCHIVE_WARN)) {
			/* Created: closed and removed. */
			r->kind = e->kind;
			r->state = RS_IN_ENTRY;
			fs_restore_discard(r);
		}
		return (-1);
	}
	r->kind = e->kind;
	r->state = RS_IN_ENTRY;
	if (e->kind == ENTRY_FILE)
		(void)direct_begin(r->dw, r->pfd, rs_tmp_base(r), e->size);
	return (0);
}

/* Before finishing the current entry: where it was begun.  (Its file
 * may have gone on on another thread.) */
static int
entry_enter(const struct fs_restore *r)
{
	const char *name;

	return (r->in_dir ? disk_enter_at(r, rs_cur(r), &name) :
	    rs_disk_enter(r));
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
		log_error("cannot write '%s': %s", rs_cur(r), strerror(e));
	else
		log_error("cannot write '%s': %s", rs_cur(r), errstr(r->a));
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
		log_errno("cannot write '%s'", rs_cur(r));
		return (-1);
	}
	return (len > 0 ? write_block(r, tail, len, off) : 0);
}

static int
restore_data(struct fs_restore *r, const void *buf, size_t len,
    int64_t offset, int lent)
{
	assert(r->state == RS_IN_ENTRY && r->kind == ENTRY_FILE);
	if (r->fatal) {
		log_error("cannot write '%s': an earlier error stopped this "
		    "writer", rs_cur(r));
		return (-1);
	}
	if (offset < 0) {
		log_error("cannot write '%s': negative offset", rs_cur(r));
		return (-1);
	}
	if (r->plain)
		return (rs_plain_data(r, buf, len, offset));
	if (direct_active(r->dw)) {
		/* Data past the entry's size goes to libarchive, which
		 * refuses it. */
		if (offset == direct_next(r->dw) && (uint64_t)offset + len <=
		    (uint64_t)archive_entry_size(r->ae)) {
			if ((lent ? direct_lend(r->dw, buf, len) :
			    direct_write(r->dw, buf, len)) == 0)
				return (0);
			log_errno("cannot write '%s'", rs_cur(r));
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

	assert(r->state == RS_IN_ENTRY);
	if (r->plain) {
		r->state = RS_IDLE;
		return (rs_plain_finish(r));
	}
	if (direct_active(r->dw) && direct_flush(r)) {
		fs_restore_discard(r);
		return (-1);
	}
	r->state = RS_IDLE;
	if (r->nolib)
		return (0);
	if (r->fatal || (own = entry_enter(r)) < 0)
		goto fail;
	st = archive_write_finish_entry(r->a);
	rs_disk_leave(own);
	if (rs_check(r, st, "finish", rs_cur(r)) || r->fatal)
		goto fail;
	if (r->kind == ENTRY_FILE) {
		/* Its owner is set by now. */
		if (tmp_id(r, &id, 0))
			goto fail;
		if (!rs_same_inode(&id, &r->id, 0)) {
			log_error("cannot restore '%s': '%s' was replaced "
			    "while it was written", rs_cur(r), rs_tmp_path(r));
			goto fail;
		}
		if (rs_put_in_place(r))
			goto fail;
		rs_close_pfd(r);
		r->id = id;
		r->has_id = r->id_trusted;
	}
	return (0);
fail:
	if (r->kind == ENTRY_FILE)
		rs_drop_tmp(r);
	return (-1);
}

int
fs_restore_keep(struct fs_restore *r)
{
	assert(r->state == RS_IDLE);
	return (r->last_plain ? -1 : direct_take_fd(r->dw));
}

void
fs_restore_discard(struct fs_restore *r)
{
	int own;

	if (r->state != RS_IN_ENTRY)
		return;
	if (r->plain) {
		/* Unnamed: nothing of it stays. */
		r->state = RS_IDLE;
		rs_plain_drop(r);
		return;
	}
	direct_abandon(r->dw);
	r->state = RS_IDLE;
	if (r->nolib)
		return;
	/* Closes the descriptor; its metadata is wasted work. */
	if (!r->fatal && (own = entry_enter(r)) >= 0) {
		(void)archive_write_finish_entry(r->a);
		rs_disk_leave(own);
	}
	/* Whatever happened above, no part of a file stays to look
	 * whole, and what was at its path stays as it was. */
	if (r->kind == ENTRY_FILE)
		rs_drop_tmp(r);
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
	if (r->state == RS_IN_ENTRY && fs_restore_finish(r))
		ret = -1;
	test_hook(r);
	/* libarchive has nothing left to set by name but the modes of the
	 * directories it made above a file that came without them (a
	 * subset), when the umask hides some of 0700: from inside the
	 * target.  After FATAL, libarchive refuses every call but free. */
	if (r->fatal || (own = rs_disk_enter(r)) < 0)
		ret = -1;
	else {
		st = archive_write_close(r->a);
		rs_disk_leave(own);
		if (rs_check(r, st, "finish restore into", r->target))
			ret = -1;
	}
	rs_set_dirs(r);
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
