#ifndef COFFER_FS_INT_H
#define COFFER_FS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "coffer/buf.h"
#include "coffer/entry.h"

/*
 * Private to src/fs: opening below the target, and writing a restored
 * file's data around the page cache.
 *
 * Restore writes gigabytes that nobody reads back soon.  Through the page
 * cache every one of its pages is newly allocated, which evicts what the
 * machine was using it for, and costs a fault in the host where the guest's
 * free memory is handed back to it (virtio-balloon free page reporting;
 * bench/README.md has what that cost a restore).  So the data
 * of a large file goes to the disk O_DIRECT, queued to a thread of the
 * writer's own: from the caller's memory where it is aligned as the file
 * is (direct_lend), else copied into two staging buffers of the writer's.
 * What O_DIRECT cannot take (the last partial block, data after a gap, a
 * file system that refuses it) goes through the page cache as before; the
 * caller writes that part.
 */
struct direct_writer;

/*
 * An entry's metadata and libarchive's archive_entry (aentry.c), one way
 * for the walk, restore and the tar streams.  fs_ae_kind: an AE_IF*
 * type as enum entry_kind, -1 for none; fs_ae_filetype the other way.
 * fs_ae_set: e's type, owner, mode, mtime, size, symlink target, device,
 * extended attributes and ACL into ae (path and other times are the
 * caller's); tmp is scratch; what cannot be set is warned and counted in
 * *warnings.  0, or -1 out of memory.  fs_ae_get_xattrs: ae's extended
 * attributes appended to out (entry_xattrs_add); 0 or -1.
 */
struct archive_entry;
int fs_ae_kind(unsigned int ft);
int fs_ae_filetype(int kind);
int fs_ae_set(struct archive_entry *ae, const struct entry *e,
    struct buf *tmp, unsigned long *warnings);
int fs_ae_get_xattrs(struct archive_entry *ae, struct buf *out);
/*
 * A tar stream read as a walk (tar.c): walk.c's fs_walk_* calls on a walk
 * opened by fs_walk_open_tar come here, with the same contracts.
 */
struct fs_walk_opts;
struct fs_tar_in;
struct fs_tar_in *fs_tar_in_open(const char *file,
    const struct fs_walk_opts *o);
int fs_tar_in_next(struct fs_tar_in *t, struct entry *e);
int fs_tar_in_details(struct fs_tar_in *t, struct entry *e);
int fs_tar_in_read(struct fs_tar_in *t, void *dst, size_t cap, size_t *len,
    int64_t *offset);
const char *fs_tar_in_source(const struct fs_tar_in *t);
int fs_tar_in_link_next(struct fs_tar_in *t, struct entry *e,
    const char **to);
void fs_tar_in_close(struct fs_tar_in *t);

/* Nanoseconds since the epoch as seconds and a non-negative remainder. */
struct timespec rs_ns_timespec(int64_t ns);

/* openat2 of path below dirfd, through no symlink, no ".." and no magic
 * link (O_NOFOLLOW | O_CLOEXEC added): nothing outside is opened.  -1
 * with errno, ENOSYS without openat2. */
int fs_open_beneath(int dirfd, const char *path, int flags);

/* The directory holding path below dirfd, opened so (O_PATH; without
 * openat2, a component at a time, none followed): dirfd itself for a path
 * with no '/'.  *base is path's last component.  -1 with errno. */
int fs_open_parent(int dirfd, const char *path, const char **base);

/* NULL (reported) when out of memory. */
struct direct_writer *direct_new(void);
void direct_free(struct direct_writer *d);

/*
 * Start writing the file at path below dirfd, just created by the caller
 * and still empty, directly.  1 if it will be (the writer is active), 0
 * if not: the file is small; it cannot be opened so (no O_DIRECT, not a
 * local file system, a symlink or ".." on the way, too long a path); its
 * directory belongs to another user or others may write to it (then the
 * file could be swapped for another between its creation and this open);
 * or it is not a new empty file of this euid's with one name.  Nothing is
 * reported.
 */
int direct_begin(struct direct_writer *d, int dirfd, const char *path,
    int64_t size);

/* Active: data at offset direct_next() is taken by direct_write. */
int direct_active(const struct direct_writer *d);
int64_t direct_next(const struct direct_writer *d);

/* Take len bytes at direct_next().  0, or -1 with errno (a write failed;
 * the writer is no longer active). */
int direct_write(struct direct_writer *d, const void *buf, size_t len);

/*
 * Take len bytes at direct_next() as direct_write does, but the caller
 * lends buf: where it is aligned in memory as the file's offsets are
 * (buf + i at a multiple of 4096 where direct_next() + i is), its whole
 * blocks are written from there, without a copy; the rest is copied.
 * buf must stay as it is until direct_wait(d, direct_ticket(d)) returns,
 * or direct_end or direct_abandon does.  0, or -1 with errno (a write
 * failed, here or earlier; the writer is no longer active).
 */
int direct_lend(struct direct_writer *d, const void *buf, size_t len);

/* A mark of what has been taken so far; direct_wait returns once it is
 * written, or failed (the failure is for the owner's next call).  Both
 * may be called from a thread other than the owner's. */
uint64_t direct_ticket(struct direct_writer *d);
void direct_wait(struct direct_writer *d, uint64_t ticket);

/*
 * Write out everything taken but the last partial block, which *tail
 * (*tail_len bytes, at file offset *tail_off) is left for the caller to
 * write through the page cache, and stop being active.  0, or -1 with
 * errno.  The tail stays valid until the next direct_begin.
 */
int direct_end(struct direct_writer *d, const void **tail, size_t *tail_len,
    int64_t *tail_off);

/* Stop, writing nothing more (the file is being thrown away). */
void direct_abandon(struct direct_writer *d);

/*
 * After direct_end succeeded: the file's descriptor (O_RDWR, O_DIRECT
 * unless a write refused it), which the caller owns from now on; -1 if
 * the file's mode did not let it be opened for reading.  Not taken, it is
 * closed by the next direct_begin, direct_abandon or direct_free.
 */
int direct_take_fd(struct direct_writer *d);

#endif
