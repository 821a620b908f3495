/*
 * Direct writes of a restored file's data (fs-int.h): two aligned buffers,
 * one filled by the caller while the writer's thread writes the other with
 * O_DIRECT, so the pool that decrypts and hashes does not wait for the
 * disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "coffer/log.h"
#include "fs-int.h"

/* 4096 satisfies every device's logical block size, and the memory
 * alignment of any file system that asks for less. */
#define DIRECT_ALIGN 4096
#define DIRECT_STAGE (1u << 20)
#define DIRECT_MIN DIRECT_STAGE

struct direct_writer {
	unsigned char *buf[2];
	int cur;		/* the buffer the caller fills */
	size_t fill;		/* bytes in it */
	int64_t start;		/* the file offset of its first byte */
	int fd;			/* O_DIRECT, -1 when not active */

	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* The write the thread has been handed, under mu. */
	int busy;
	int req_fd;
	const unsigned char *req;
	size_t req_len;
	int64_t req_off;
	int err;		/* errno of the last failed write, or 0 */
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
	int fl;

	while (len > 0) {
		n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EINVAL && (fl = fcntl(fd, F_GETFL)) != -1 &&
			    (fl & O_DIRECT) &&
			    fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0)
				continue;
			return (errno);
		}
		if (n == 0)
			return (EIO);
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return (0);
}

static void *
writer_thread(void *arg)
{
	struct direct_writer *d = arg;
	int err;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (!d->busy && !d->quit)
			pthread_cond_wait(&d->cv, &d->mu);
		if (!d->busy)
			break;
		pthread_mutex_unlock(&d->mu);
		err = write_all(d->req_fd, d->req, d->req_len, d->req_off);
		pthread_mutex_lock(&d->mu);
		if (err && !d->err)
			d->err = err;
		d->busy = 0;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return (NULL);
}

/* The thread's write done: 0, or -1 with errno if a write failed. */
static int
wait_idle(struct direct_writer *d)
{
	int err;

	pthread_mutex_lock(&d->mu);
	while (d->busy)
		pthread_cond_wait(&d->cv, &d->mu);
	err = d->err;
	d->err = 0;
	pthread_mutex_unlock(&d->mu);
	if (err) {
		errno = err;
		return (-1);
	}
	return (0);
}

/* Hand the full buffer to the thread and go on in the other one. */
static int
hand_over(struct direct_writer *d)
{
	if (wait_idle(d))
		return (-1);
	pthread_mutex_lock(&d->mu);
	d->req_fd = d->fd;
	d->req = d->buf[d->cur];
	d->req_len = d->fill;
	d->req_off = d->start;
	d->busy = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	d->start += (int64_t)d->fill;
	d->fill = 0;
	d->cur ^= 1;
	return (0);
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

struct direct_writer *
direct_new(void)
{
	struct direct_writer *d;

	if ((d = calloc(1, sizeof(*d))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	d->fd = -1;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	return (d);
}

void
direct_free(struct direct_writer *d)
{
	if (d == NULL)
		return;
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

/* Buffers and thread, the first time.  0, or -1 (then never direct). */
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

int
direct_begin(struct direct_writer *d, int dirfd, const char *path,
    int64_t size)
{
#ifdef SYS_openat2
	struct open_how how;
	struct stat st;
	long fd;

	(void)stop(d);
	if (size < (int64_t)DIRECT_MIN || prepare(d))
		return (0);
	/* Below dirfd, through no symlink: whatever happened to the path
	 * since the caller created the file, this opens nothing outside. */
	memset(&how, 0, sizeof(how));
	how.flags = O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS;
	if ((fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how))) < 0)
		return (0);
	/* And it is the file just created: only this process's euid could
	 * have made it, no other name for it exists, nothing is in it. */
	if (fstat((int)fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != geteuid() || st.st_size != 0) {
		close((int)fd);
		return (0);
	}
	d->fd = (int)fd;
	d->cur = 0;
	d->fill = 0;
	d->start = 0;
	return (1);
#else
	(void)d;
	(void)dirfd;
	(void)path;
	(void)size;
	return (0);
#endif
}

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
direct_write(struct direct_writer *d, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t n;
	int e;

	while (len > 0) {
		n = DIRECT_STAGE - d->fill;
		if (n > len)
			n = len;
		memcpy(d->buf[d->cur] + d->fill, p, n);
		d->fill += n;
		p += n;
		len -= n;
		if (d->fill == DIRECT_STAGE && hand_over(d)) {
			e = errno;
			(void)stop(d);
			errno = e;
			return (-1);
		}
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
	(void)stop(d);
}
