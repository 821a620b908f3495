#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/signals.h"

/* What is at name in dirfd, for a message ("a symbolic link"). */
const char *
fsutil_kind_at(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return ("missing");
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: return ("a regular file");
	case S_IFDIR: return ("a directory");
	case S_IFLNK: return ("a symbolic link");
	case S_IFIFO: return ("a FIFO");
	case S_IFSOCK: return ("a socket");
	default: return ("a device");
	}
}

int
fsutil_open_in(int dirfd, const char *name, int flags, mode_t want,
    int *wrong)
{
	struct stat st;
	int fd, e;

	*wrong = 0;
	flags |= O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	if (want == S_IFDIR)
		flags |= O_DIRECTORY;
	if ((fd = openat(dirfd, name, flags, 0600)) == -1) {
		e = errno;
		*wrong = e == ELOOP || e == ENOTDIR || e == EISDIR;
		errno = e;
		return (-1);
	}
	if (fstat(fd, &st))
		goto err;
	if ((st.st_mode & S_IFMT) != want) {
		*wrong = 1;
		errno = EINVAL;
		goto err;
	}
	/* Reads of a regular file block as they should. */
	if (want == S_IFREG && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK &
	    (O_APPEND | O_NONBLOCK)) == -1)
		goto err;
	return (fd);
err:
	e = errno;
	close(fd);
	errno = e;
	return (-1);
}

int
fsutil_fsync_dir(const char *path)
{
	int fd;

	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open directory '%s'", path);
		return (-1);
	}
	if (fsync(fd)) {
		log_errno("fsync of directory '%s' failed", path);
		close(fd);
		return (-1);
	}
	close(fd);
	return (0);
}

int
fsutil_write_all_quiet(int fd, const void *p, size_t n)
{
	const char *c = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return (-1);
		}
		c += w;
		n -= (size_t)w;
	}
	return (0);
}

int
fsutil_write_all(int fd, const void *p, size_t n, const char *what)
{
	if (fsutil_write_all_quiet(fd, p, n) == 0)
		return (0);
	log_errno("write to '%s' failed", what);
	return (-1);
}

int
fsutil_pread_all(int fd, void *p, size_t n, off_t off, const char *what)
{
	char *c = p;
	ssize_t r;

	while (n > 0) {
		r = pread(fd, c, n, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			log_errno("read of '%s' failed", what);
			return (-1);
		}
		if (r == 0) {
			log_error("'%s' is truncated", what);
			return (-1);
		}
		c += r;
		n -= (size_t)r;
		off += r;
	}
	return (0);
}

static char *
dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return (strdup("."));
	if (slash == path)
		return (strdup("/"));
	return (strndup(path, (size_t)(slash - path)));
}

int
fsutil_write_file_at(int dirfd, const char *name, const char *what,
    const void *data, size_t len, mode_t mode, int replace)
{
	char tmp[NAME_MAX + 1];
	uint8_t rnd[8];
	char rhex[17];
	int fd;

	/* Temporary names only need to be unlikely to collide. */
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memset(rnd, (int)getpid(), sizeof(rnd));
	hex_encode(rhex, rnd, sizeof(rnd));
	if (strchr(name, '/') != NULL || (size_t)snprintf(tmp, sizeof(tmp),
	    ".%s.tmp-%s", name, rhex) >= sizeof(tmp)) {
		log_error("bad file name '%s'", what);
		return (-1);
	}
	/* O_EXCL: an existing name, a symlink included, is never opened. */
	if ((fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, mode)) == -1) {
		log_errno("cannot create a temporary file for '%s'", what);
		return (-1);
	}
	if (fsutil_write_all(fd, data, len, what))
		goto err;
	if (fchmod(fd, mode)) {
		log_errno("fchmod of '%s' failed", what);
		goto err;
	}
	if (fsync(fd)) {
		log_errno("fsync of '%s' failed", what);
		goto err;
	}
	if (close(fd)) {
		fd = -1;
		log_errno("close of '%s' failed", what);
		goto err;
	}
	fd = -1;
	if (!replace) {
		/* link(2) fails if the name exists, a dangling symlink
		 * included: no race with another writer of the same name. */
		if (linkat(dirfd, tmp, dirfd, name, 0)) {
			if (errno == EEXIST)
				log_error("'%s' already exists", what);
			else
				log_errno("cannot create '%s'", what);
			goto err;
		}
		unlinkat(dirfd, tmp, 0);
	} else if (renameat(dirfd, tmp, dirfd, name)) {
		log_errno("cannot replace '%s'", what);
		goto err;
	}
	if (fsync(dirfd)) {
		log_errno("fsync of the directory of '%s' failed", what);
		return (-1);
	}
	return (0);
err:
	if (fd != -1)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	return (-1);
}

int
fsutil_write_file(const char *path, const void *data, size_t len,
    mode_t mode, int replace)
{
	const char *base = strrchr(path, '/');
	char *dir;
	int dfd, rc;

	if ((dir = dir_of(path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open directory '%s'", dir);
		free(dir);
		return (-1);
	}
	rc = fsutil_write_file_at(dfd, base ? base + 1 : path, path, data,
	    len, mode, replace);
	close(dfd);
	free(dir);
	return (rc);
}

int
fsutil_read_fd(int fd, size_t max, unsigned char **data, size_t *len,
    const char *what)
{
	unsigned char *p = NULL, *q;
	size_t n = 0, cap = 0;
	ssize_t r;

	for (;;) {
		if (n == cap) {
			if (cap >= max + 1)
				break;
			cap = cap ? cap * 2 : 4096;
			if (cap > max + 1)
				cap = max + 1;
			if ((q = realloc(p, cap + 1)) == NULL) {
				log_error("out of memory");
				goto err;
			}
			p = q;
		}
		r = read(fd, p + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			log_errno("cannot read '%s'", what);
			goto err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		log_error("'%s' is too large (more than %zu bytes)", what, max);
		goto err;
	}
	if (p == NULL && (p = malloc(1)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	p[n] = '\0';
	*data = p;
	*len = n;
	return (0);
err:
	if (p != NULL)
		explicit_bzero(p, n);
	free(p);
	return (-1);
}

int
fsutil_read_file(const char *path, size_t max, unsigned char **data,
    size_t *len)
{
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		log_errno("cannot open '%s'", path);
		return (-1);
	}
	rc = fsutil_read_fd(fd, max, data, len, path);
	close(fd);
	return (rc);
}

int
fsutil_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t i, n = strlen(path);

	if (n == 0 || n >= sizeof(buf)) {
		log_error("bad directory name '%s'", path);
		return (-1);
	}
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) && errno != EEXIST) {
			log_errno("cannot create directory '%s'", buf);
			return (-1);
		}
		if (i < n)
			buf[i] = '/';
	}
	return (0);
}

/* 1 if the byte at off is in the page cache (read without waiting). */
static int
nowait_byte(int fd, uint64_t off)
{
	char c;
	struct iovec v = { &c, 1 };

	return (preadv2(fd, &v, 1, (off_t)off, RWF_NOWAIT) == 1);
}

int
fsutil_cached(int fd, uint64_t off, uint64_t len)
{
	return (len > 0 && nowait_byte(fd, off) &&
	    nowait_byte(fd, off + len - 1));
}

int
fsutil_dir_new(const char *path, const char *what, int *created)
{
	int e, dfd;

	*created = 0;
	if ((e = fsutil_dir_is_empty(path, 1)) < 0)
		return (-1);
	if (e == 0) {
		log_error("'%s' is not empty: %s needs a new or empty "
		    "directory", path, what);
		return (-1);
	}
	if (mkdir(path, 0700) == 0)
		*created = 1;
	else if (errno != EEXIST) {
		log_errno("cannot create directory '%s'", path);
		return (-1);
	}
	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open directory '%s'", path);
		if (*created)
			rmdir(path);
		*created = 0;
	}
	return (dfd);
}

int
fsutil_dir_is_empty(const char *path, int missing_ok)
{
	struct dirent *d;
	DIR *dir;

	if ((dir = opendir(path)) == NULL) {
		if (errno == ENOENT && missing_ok)
			return (1);
		log_errno("cannot open directory '%s'", path);
		return (-1);
	}
	while ((d = readdir(dir)) != NULL) {
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..")) {
			closedir(dir);
			return (0);
		}
	}
	closedir(dir);
	return (1);
}

int
fsutil_remove_tree(int at, const char *name, const char *what)
{
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int fd, e, rc = 0;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return (0);
		goto err;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(at, name, 0) && errno != ENOENT)
			goto err;
		return (0);
	}
	/* AT_SYMLINK_NOFOLLOW: a directory swapped for a symlink since the
	 * fstatat leaves its target's mode alone (glibc >= 2.32). */
	if ((fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 && errno == EACCES &&
	    fchmodat(at, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
		fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd == -1)
		goto err;
	/* Write permission, to remove what is in it. */
	(void)fchmod(fd, 0700);
	if ((dir = fdopendir(fd)) == NULL) {
		e = errno;
		close(fd);
		errno = e;
		goto err;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fsutil_remove_tree(dirfd(dir), de->d_name, what))
			rc = -1;
	}
	closedir(dir);
	if (rc == 0 && unlinkat(at, name, AT_REMOVEDIR))
		goto err;
	return (rc);
err:
	log_errno("cannot remove '%s' from '%s'", name, what);
	return (-1);
}

char *
fsutil_join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p;

	while (la > 1 && a[la - 1] == '/')
		la--;
	if ((p = malloc(la + lb + 2)) == NULL)
		return (NULL);
	memcpy(p, a, la);
	p[la] = '/';
	memcpy(p + la + 1, b, lb + 1);
	return (p);
}

int
fsutil_flock_wait(int fd, double timeout)
{
	return (fsutil_flock_wait_how(fd, LOCK_EX, timeout));
}

int
fsutil_flock_wait_how(int fd, int how, double timeout)
{
	struct timespec now, end, nap = { 0, 20 * 1000 * 1000 };

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)timeout;
	end.tv_nsec += (long)((timeout - (double)(time_t)timeout) * 1e9);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		if (flock(fd, how | LOCK_NB) == 0)
			return (0);
		if (errno != EWOULDBLOCK && errno != EINTR)
			return (-1);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (timeout >= 0 && (now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)))
			return (1);
		/* Asked to stop (signals_install): a wait of an hour for
		 * another writer must not hold the stop off. */
		if (signals_caught())
			return (2);
		/* Polled, from 20 ms up to half a second: a blocking flock
		 * could not be given a deadline. */
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 500 * 1000 * 1000)
			nap.tv_nsec *= 2;
		if (nap.tv_nsec > 500 * 1000 * 1000)
			nap.tv_nsec = 500 * 1000 * 1000;
	}
}

static char pid_space[64];
static pthread_once_t pid_space_once = PTHREAD_ONCE_INIT;

static void
pid_space_init(void)
{
	char boot[64], hexs[13];
	struct stat st;
	ssize_t n;
	size_t i, k = 0;
	int fd;

	if ((fd = open("/proc/sys/kernel/random/boot_id",
	    O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, boot, sizeof(boot) - 1);
	close(fd);
	if (n <= 0 || stat("/proc/self/ns/pid", &st) != 0)
		return;
	/* Twelve hex digits of the boot id tell kernels apart enough. */
	for (i = 0; i < (size_t)n && k < sizeof(hexs) - 1; i++)
		if ((boot[i] >= '0' && boot[i] <= '9') ||
		    (boot[i] >= 'a' && boot[i] <= 'f'))
			hexs[k++] = boot[i];
	hexs[k] = '\0';
	if (k == sizeof(hexs) - 1)
		snprintf(pid_space, sizeof(pid_space), "%s.%llu", hexs,
		    (unsigned long long)st.st_ino);
}

const char *
fsutil_pid_space(void)
{
	pthread_once(&pid_space_once, pid_space_init);
	return (pid_space);
}
