/*
 * Direct writes of a restored file's data (fs-int.h).  The writer's thread
 * writes requests in order, O_DIRECT, so the pool that decrypts and hashes
 * does not wait for the disk.  A request is either one of two aligned
 * staging buffers, which direct_write copies into, or memory the caller
 * lends (direct_lend) when it is aligned as the file is, written from
 * there without a copy.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "coffer/fs.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "fs-int.h"

/* 4096 satisfies every device's logical block size, and the memory
 * alignment of any file system that asks for less. */
#define DIRECT_ALIGN 4096
#define DIRECT_STAGE (1u << 20)
#define DIRECT_MIN FS_RESTORE_DIRECT_MIN
#define DIRECT_QUEUE 16

struct direct_req {
	int fd;
	const unsigned char *p;
	size_t len;
	int64_t off;
};

struct direct_writer {
	unsigned char *buf[2];
	uint64_t buf_seq[2];	/* the request writing it out */
	int cur;		/* the buffer the caller fills */
	size_t fill;		/* bytes in it */
	int64_t start;		/* the file offset of its first byte */
	int fd;			/* O_DIRECT, -1 when not active */
	int readable;		/* fd was opened for reading too */
	int kept;		/* the last file's, once ended: -1 or an
				 * O_RDWR descriptor for direct_take_fd */

	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* Under mu: requests queued, and written (in order; request n is
	 * q[(n - 1) % DIRECT_QUEUE]). */
	struct direct_req q[DIRECT_QUEUE];
	uint64_t queued, done;
	int err;		/* errno of the first failed write, until the
				 * owner takes it; later requests are skipped */
	int quit;
};

/*
 * Write all of len bytes at off.  A file system that takes O_DIRECT at
 * open but not this write (EINVAL: another alignment) gets it, and the rest
 * of the file, through the page cache.  0, or an errno.
 */
static int
write_all(int fd, const unsigned char *p, size_t len, int64_t off)
{
	ssize_t n;
	int fl, e;

	while (len > 0) {
		n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			e = errno;
			if (e == EINVAL && (fl = fcntl(fd, F_GETFL)) != -1 &&
			    (fl & O_DIRECT) &&
			    fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0)
				continue;
			return (e);
		}
		if (n == 0)
			return (EIO);
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return (0);
}

int
fs_open_beneath(int dirfd, const char *path, int flags)
{
#ifdef SYS_openat2
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)flags | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS;
	return ((int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how)));
#else
	(void)dirfd;
	(void)path;
	(void)flags;
	errno = ENOSYS;
	return (-1);
#endif
}

/*
 * Without openat2 (before Linux 5.6): one component at a time, none of
 * them followed if it is a symlink, no "..".  Renames in between may take
 * it elsewhere below dirfd, never out through a symlink.
 */
static int
open_dir_walk(int dirfd, char *path)
{
	char *p = path, *slash;
	int fd = dirfd, next, e;

	for (;;) {
		if ((slash = strchr(p, '/')) != NULL)
			*slash = '\0';
		if (*p == '\0' || strcmp(p, "..") == 0) {
			errno = EXDEV;
			next = -1;
		} else
			next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		e = errno;
		if (fd != dirfd)
			close(fd);
		if (next == -1) {
			errno = e;
			return (-1);
		}
		fd = next;
		if (slash == NULL)
			return (fd);
		p = slash + 1;
	}
}

int
fs_open_parent(int dirfd, const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *parent;
	int pfd, e;

	*base = path;
	if (slash == NULL)
		return (dirfd);
	if ((parent = strndup(path, (size_t)(slash - path))) == NULL)
		return (-1);
	pfd = fs_open_beneath(dirfd, parent, O_PATH | O_DIRECTORY);
	if (pfd == -1 && errno == ENOSYS)
		pfd = open_dir_walk(dirfd, parent);
	e = errno;
	free(parent);
	errno = e;
	*base = slash + 1;
	return (pfd);
}

static void *
writer_thread(void *arg)
{
	struct direct_writer *d = arg;
	struct direct_req r;
	int err, skip;

	thread_name("write");
	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (d->done == d->queued && !d->quit)
			pthread_cond_wait(&d->cv, &d->mu);
		if (d->done == d->queued)
			break;
		r = d->q[d->done % DIRECT_QUEUE];
		skip = d->err != 0;
		pthread_mutex_unlock(&d->mu);
		err = skip ? 0 : write_all(r.fd, r.p, r.len, r.off);
		pthread_mutex_lock(&d->mu);
		if (err && !d->err)
			d->err = err;
		d->done++;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return (NULL);
}

/* Queue len bytes at p for file offset off: the request's number. */
static uint64_t
enqueue(struct direct_writer *d, const unsigned char *p, size_t len,
    int64_t off)
{
	struct direct_req *r;
	uint64_t seq;

	pthread_mutex_lock(&d->mu);
	while (d->queued - d->done == DIRECT_QUEUE)
		pthread_cond_wait(&d->cv, &d->mu);
	r = &d->q[d->queued % DIRECT_QUEUE];
	r->fd = d->fd;
	r->p = p;
	r->len = len;
	r->off = off;
	seq = ++d->queued;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return (seq);
}

/* Requests up to seq written (or skipped after a failure). */
static void
wait_seq(struct direct_writer *d, uint64_t seq)
{
	pthread_mutex_lock(&d->mu);
	while (d->done < seq)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
}

/* 0, or -1 with errno if a write failed (the error is taken). */
static int
take_err(struct direct_writer *d)
{
	int err;

	pthread_mutex_lock(&d->mu);
	err = d->err;
	d->err = 0;
	pthread_mutex_unlock(&d->mu);
	if (err) {
		errno = err;
		return (-1);
	}
	return (0);
}

/* Everything queued written: 0, or -1 with errno. */
static int
wait_idle(struct direct_writer *d)
{
	wait_seq(d, d->queued);
	return (take_err(d));
}

/* Queue the staged buffer's fill bytes (whole blocks) and go on in the
 * other one once it is written out.  0, or -1 with errno. */
static int
hand_over(struct direct_writer *d)
{
	d->buf_seq[d->cur] = enqueue(d, d->buf[d->cur], d->fill, d->start);
	d->start += (int64_t)d->fill;
	d->fill = 0;
	d->cur ^= 1;
	wait_seq(d, d->buf_seq[d->cur]);
	return (take_err(d));
}

/* Not active any more: wait for the thread, close. */
static int
stop(struct direct_writer *d)
{
	int rc = 0, e = 0;

	if (d->fd == -1)
		return (0);
	if (wait_idle(d)) {
		rc = -1;
		e = errno;
	}
	close(d->fd);
	d->fd = -1;
	if (rc)
		errno = e;
	return (rc);
}

/* A write failed (errno says why): not active any more.  -1, errno
 * kept. */
static int
fail(struct direct_writer *d)
{
	int e = errno;

	(void)stop(d);
	errno = e;
	return (-1);
}

/* The last file's descriptor, not taken: closed. */
static void
drop_kept(struct direct_writer *d)
{
	if (d->kept != -1)
		close(d->kept);
	d->kept = -1;
}

struct direct_writer *
direct_new(void)
{
	struct direct_writer *d;

	if ((d = calloc(1, sizeof(*d))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	d->fd = -1;
	d->kept = -1;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	return (d);
}

void
direct_free(struct direct_writer *d)
{
	if (d == NULL)
		return;
	drop_kept(d);
	(void)stop(d);
	if (d->started) {
		pthread_mutex_lock(&d->mu);
		d->quit = 1;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
	}
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d->buf[0]);
	free(d->buf[1]);
	free(d);
}

/* Buffers and thread, the first time.  0, or -1 (this file is not written
 * directly; the next one tries again). */
static int
prepare(struct direct_writer *d)
{
	int i;

	if (d->started)
		return (0);
	for (i = 0; i < 2; i++)
		if (d->buf[i] == NULL && (d->buf[i] =
		    aligned_alloc(DIRECT_ALIGN, DIRECT_STAGE)) == NULL)
			return (-1);
	if (pthread_create(&d->thread, NULL, writer_thread, d))
		return (-1);
	d->started = 1;
	return (0);
}

#ifdef SYS_openat2
/*
 * Local file systems, where a direct write costs what the disk does.  Over
 * NFS, SMB or FUSE each would be a synchronous round trip.
 */
static int
local_fs(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf))
		return (0);
	switch ((unsigned long)sf.f_type) {
	case 0xEF53:		/* ext2/3/4 */
	case 0x58465342:	/* XFS */
	case 0x9123683E:	/* Btrfs */
	case 0xF2F52010:	/* F2FS */
	case 0xCA451A4E:	/* bcachefs */
	case 0x01021994:	/* tmpfs */
		return (1);
	default:
		return (0);
	}
}


int
direct_begin(struct direct_writer *d, int dirfd, const char *path,
    int64_t size)
{
	struct stat st;
	const char *base;
	int pfd, fd = -1;

	drop_kept(d);
	(void)stop(d);
	if (size < (int64_t)DIRECT_MIN || prepare(d))
		return (0);
	/*
	 * The file is opened again by name, so it must be the one the caller
	 * just created, and stay so: its directory is this euid's and
	 * writable by no one else (no other user can rename or put a file
	 * there), and the file is regular, ours, empty, with no other name.
	 */
	if ((pfd = fs_open_parent(dirfd, path, &base)) < 0)
		return (0);
	if (fstat(pfd, &st) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		goto no;
	/* Readable too if the file's mode lets its owner read, so that what
	 * is written can be read back (direct_take_fd). */
	d->readable = 1;
	if ((fd = fs_open_beneath(pfd, base, O_RDWR | O_DIRECT)) < 0) {
		d->readable = 0;
		if ((fd = fs_open_beneath(pfd, base, O_WRONLY | O_DIRECT)) < 0)
			goto no;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != geteuid() || st.st_size != 0 || !local_fs(fd))
		goto no;
	if (pfd != dirfd)
		close(pfd);
	d->fd = fd;
	d->cur = 0;
	d->fill = 0;
	d->start = 0;
	return (1);
no:
	if (fd >= 0)
		close(fd);
	if (pfd != dirfd)
		close(pfd);
	return (0);
}
#else
int
direct_begin(struct direct_writer *d, int dirfd, const char *path,
    int64_t size)
{
	(void)d;
	(void)dirfd;
	(void)path;
	(void)size;
	return (0);
}
#endif

int
direct_active(const struct direct_writer *d)
{
	return (d->fd != -1);
}

int64_t
direct_next(const struct direct_writer *d)
{
	return (d->start + (int64_t)d->fill);
}

int
direct_lend(struct direct_writer *d, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t k, m;

	if (take_err(d))	/* an earlier write failed */
		return (fail(d));
	/* A block begun in the staging buffer is completed there. */
	if (d->fill % DIRECT_ALIGN) {
		k = DIRECT_ALIGN - d->fill % DIRECT_ALIGN;
		if (k > len)
			k = len;
		memcpy(d->buf[d->cur] + d->fill, p, k);
		d->fill += k;
		p += k;
		len -= k;
		if (d->fill % DIRECT_ALIGN)
			return (0);
	}
	m = len & ~(size_t)(DIRECT_ALIGN - 1);
	if (m == 0 || (uintptr_t)p % DIRECT_ALIGN)
		return (direct_write(d, p, len));
	/* Staged blocks go first, then the lent ones. */
	if (d->fill > 0 && hand_over(d))
		return (fail(d));
	(void)enqueue(d, p, m, d->start);
	d->start += (int64_t)m;
	return (direct_write(d, p + m, len - m));
}

uint64_t
direct_ticket(struct direct_writer *d)
{
	uint64_t t;

	pthread_mutex_lock(&d->mu);
	t = d->queued;
	pthread_mutex_unlock(&d->mu);
	return (t);
}

void
direct_wait(struct direct_writer *d, uint64_t ticket)
{
	wait_seq(d, ticket);
}

int
direct_write(struct direct_writer *d, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t n;

	while (len > 0) {
		n = DIRECT_STAGE - d->fill;
		if (n > len)
			n = len;
		memcpy(d->buf[d->cur] + d->fill, p, n);
		d->fill += n;
		p += n;
		len -= n;
		if (d->fill == DIRECT_STAGE && hand_over(d))
			return (fail(d));
	}
	return (0);
}

int
direct_end(struct direct_writer *d, const void **tail, size_t *tail_len,
    int64_t *tail_off)
{
	size_t n = d->fill & ~(size_t)(DIRECT_ALIGN - 1);
	int err = 0;

	*tail = NULL;
	*tail_len = 0;
	*tail_off = 0;
	if (d->fd == -1)
		return (0);
	if (wait_idle(d))
		err = errno;
	else if (n > 0)
		err = write_all(d->fd, d->buf[d->cur], n, d->start);
	if (!err && d->readable) {
		/* Handed on by direct_take_fd, or closed by the next stop. */
		d->kept = d->fd;
		d->fd = -1;
	}
	(void)stop(d);
	if (err) {
		errno = err;
		return (-1);
	}
	*tail = d->buf[d->cur] + n;
	*tail_len = d->fill - n;
	*tail_off = d->start + (int64_t)n;
	return (0);
}

void
direct_abandon(struct direct_writer *d)
{
	drop_kept(d);
	(void)stop(d);
}

int
direct_take_fd(struct direct_writer *d)
{
	int fd = d->kept;

	d->kept = -1;
	return (fd);
}

/*
 * Reading back (fs.h): through a buffer of the reader's own, in aligned
 * blocks, which any descriptor takes, O_DIRECT or not.
 */
struct fs_reader {
	unsigned char *buf;
};

struct fs_reader *
fs_reader_new(void)
{
	struct fs_reader *rd;

	if ((rd = calloc(1, sizeof(*rd))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	return (rd);
}

void
fs_reader_free(struct fs_reader *rd)
{
	if (rd == NULL)
		return;
	free(rd->buf);
	free(rd);
}

int
fs_reader_read(struct fs_reader *rd, int fd, void *buf, size_t len,
    int64_t off)
{
	unsigned char *p = buf;
	size_t skip, want, n;
	ssize_t got;
	int64_t at;

	if (rd->buf == NULL &&
	    (rd->buf = aligned_alloc(DIRECT_ALIGN, DIRECT_STAGE)) == NULL)
		return (-1);
	while (len > 0) {
		at = off & ~(int64_t)(DIRECT_ALIGN - 1);
		skip = (size_t)(off - at);
		want = skip + len;
		if (want > DIRECT_STAGE)
			want = DIRECT_STAGE;
		want = (want + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
		do
			got = pread(fd, rd->buf, want, at);
		while (got < 0 && errno == EINTR);
		if (got < 0)
			return (-1);
		if ((size_t)got <= skip) {
			errno = EIO;	/* the file is shorter */
			return (-1);
		}
		n = (size_t)got - skip;
		if (n > len)
			n = len;
		memcpy(p, rd->buf + skip, n);
		p += n;
		len -= n;
		off += (int64_t)n;
	}
	return (0);
}
