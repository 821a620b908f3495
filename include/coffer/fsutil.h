#ifndef COFFER_FSUTIL_H
#define COFFER_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Durable file-system helpers (redis/casync style).  All report their own
 * errors, naming the failing call and the path, and return 0 or -1.
 */

/* fsync the directory at path. */
int fsutil_fsync_dir(const char *path);

/*
 * Write data to path atomically and durably: a temporary file beside it
 * opened O_EXCL, write, fsync, rename, fsync of the directory.  Fails if the
 * path exists and !replace.
 */
int fsutil_write_file(const char *path, const void *data, size_t len,
    mode_t mode, int replace);
/* The same for name (one component) in the directory dirfd, never through
 * a symlink; what names the file in messages. */
int fsutil_write_file_at(int dirfd, const char *name, const char *what,
    const void *data, size_t len, mode_t mode, int replace);

/* Read a whole (small) file, at most max bytes, into a malloc'd buffer. */
int fsutil_read_file(const char *path, size_t max, unsigned char **data,
    size_t *len);
/* The same from an open descriptor (read to its end); what names it. */
int fsutil_read_fd(int fd, size_t max, unsigned char **data, size_t *len,
    const char *what);

/* write(2) all of it, retrying on EINTR and short writes.  0, or -1
 * reported as a failed write to what. */
int fsutil_write_all(int fd, const void *p, size_t n, const char *what);
/* The same, not reported: -1 with errno set, for a caller that says it
 * (or not: a broken pipe to a program that reports its own failure). */
int fsutil_write_all_quiet(int fd, const void *p, size_t n);
/* pread(2) exactly n bytes; a short read is an error ("truncated"). */
int fsutil_pread_all(int fd, void *p, size_t n, off_t off, const char *what);

/* mkdir -p with mode; existing directories are fine. */
int fsutil_mkdir_p(const char *path, mode_t mode);

/* 1 if path is an empty directory, 0 if it has entries, -1 on error.
 * A missing path counts as empty when missing_ok (returns 1). */
int fsutil_dir_is_empty(const char *path, int missing_ok);

/* 1 if the len bytes at off of the file open as fd are in memory (the
 * page cache), as far as their first and last bytes tell; 0 if not or
 * unknown (len 0).  Reading them then costs no disk I/O. */
int fsutil_cached(int fd, uint64_t off, uint64_t len);

/* A directory at path for something new (what: "a repository"): made
 * (mode 0700; *created) unless it is there and empty.  Its descriptor,
 * or -1 (reported; nothing made is left). */
int fsutil_dir_new(const char *path, const char *what, int *created);

/*
 * Remove name, relative to the directory at (or AT_FDCWD), and, if it is a
 * directory, everything below it, as rm -rf would: a symlink is removed,
 * never followed; a directory without read, write or search permission
 * (a restored 0000 or 0555) is opened up first.  A name already gone is
 * fine.  Each failure is reported, with what naming the tree; the rest is
 * still removed.  0, or -1.
 */
int fsutil_remove_tree(int at, const char *name, const char *what);

/*
 * Open name, one component in the directory dirfd, as a regular file
 * (want S_IFREG; flags O_RDONLY, O_RDWR, O_RDWR | O_CREAT) or a directory
 * (want S_IFDIR): never through a symbolic link (O_NOFOLLOW), never
 * blocking on a FIFO or a device (opened O_NONBLOCK, then fstat; a regular
 * file's reads block again).  An fd, or -1 with errno, not reported;
 * *wrong is 1 when something other than want is there (a link, a FIFO, a
 * directory for a file: fsutil_kind_at says what), errno ENOENT when
 * nothing is.
 */
int fsutil_open_in(int dirfd, const char *name, int flags, mode_t want,
    int *wrong);
/* What is at name in dirfd, not following a link, for a message: "a
 * regular file", "a directory", "a symbolic link", "a FIFO", "a socket",
 * "a device", "missing". */
const char *fsutil_kind_at(int dirfd, const char *name);

/* Join a and b with one '/', into a malloc'd string (NULL on ENOMEM). */
char *fsutil_join(const char *a, const char *b);

/* flock(fd, LOCK_EX), waiting at most timeout seconds (< 0: for ever).
 * 0 taken, 1 timed out, 2 a signal asked to stop meanwhile
 * (signals_caught), -1 error (errno; not reported). */
int fsutil_flock_wait(int fd, double timeout);
/* The same with how LOCK_SH or LOCK_EX. */
int fsutil_flock_wait_how(int fd, int how, double timeout);

/*
 * The space this process's pid belongs to: the running kernel (its boot
 * id) and the PID namespace, as "BOOT.NS"; "" when /proc does not tell.
 * Containers on one machine may share its host name and not its PIDs: a
 * lease's holder named by host and pid is judged gone only by a process
 * of the same space.
 */
const char *fsutil_pid_space(void);

#endif
