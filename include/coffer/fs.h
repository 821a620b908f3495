#ifndef COFFER_FS_H
#define COFFER_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coffer/entry.h"

/*
 * The file system side: walking a source tree with archive_read_disk and
 * writing a restored tree with archive_write_disk (the only libarchive
 * user for disks), and the tar streams of dump and backup --from-tar.
 */

struct fs_walk_opts {
	int one_file_system;
	/* Glob patterns (fnmatch): a pattern without '/' matches a name at
	 * any depth; with '/', the path relative to the root. */
	char *const *excludes;
	size_t nexcludes;
	/* Return the root itself too, first, as "." (FS_ROOT_PATH): its
	 * mode, owner, times, xattrs and ACL are the dataset's. */
	int root;
	/*
	 * Asked about each directory below the root before the walk
	 * descends into it, with its path relative to the root: non-zero
	 * leaves it and all below it out, with *why (a static string)
	 * saying why.  It is asked on the walk's own thread, which reads
	 * ahead of the caller: it may look at the file system, not at the
	 * caller's state.  skipped_dir is then told, on the caller's thread
	 * and in the walk's order (from fs_walk_next, before the entries
	 * after it), and reports and acts.  NULL: none.
	 */
	int (*skip_dir)(void *arg, const char *rel, const char **why);
	void (*skipped_dir)(void *arg, const char *rel, const char *why);
	void *skip_arg;
};

/* The path of the walk's root among the entries below it (fs_walk_opts
 * root): what a restore's target itself takes its metadata from. */
#define FS_ROOT_PATH ENTRY_ROOT_PATH

struct fs_walk;

/*
 * Start walking root (a directory).  Symlinks are never followed.  NULL
 * (reported) if root cannot be opened or is not a directory.
 */
struct fs_walk *fs_walk_open(const char *root, const struct fs_walk_opts *o);

/*
 * Next entry below the root (the root itself first, as FS_ROOT_PATH, when
 * the options ask for it), with path relative to the root.  Metadata: type, mode, owner, times (ns), inode,
 * device, link count, symlink target; not xattrs and ACLs (see
 * fs_walk_details).  An entry that cannot be read is warned about
 * (log_warn) and skipped.  1 entry, 0 end, -1 fatal.
 */
int fs_walk_next(struct fs_walk *w, struct entry *e);

/*
 * Add the current entry's extended attributes and ACL to *e (valid until
 * the next fs_walk_next).  Separate because they cost an open, two
 * fchdirs and a few syscalls per file, which an entry whose stat shows no
 * change does not need.  0, or -1 (out of memory); an unreadable
 * attribute is a warning.
 */
int fs_walk_details(struct fs_walk *w, struct entry *e);

/*
 * The current file's content, a block at a time, in increasing offset
 * order; a gap between blocks is a hole.  1 block, 0 end of file,
 * -1 read error (warned; the caller skips the file), FS_WALK_CHANGED when
 * the file's size, mtime or ctime changed while it was read (nothing
 * printed: the caller may fs_walk_reread once, or give up on the file).
 */
#define FS_WALK_CHANGED (-2)
int fs_walk_read(struct fs_walk *w, const void **buf, size_t *len,
    int64_t *offset);
/* The same, reading at most cap bytes into the caller's dst. */
int fs_walk_read_into(struct fs_walk *w, void *dst, size_t cap, size_t *len,
    int64_t *offset);

/*
 * After FS_WALK_CHANGED: take the file's current size, times, mode and
 * owner into *e and start reading it again from the beginning.  0, or -1
 * (warned; skip the file).
 */
int fs_walk_reread(struct fs_walk *w, struct entry *e);

/*
 * A walk of a tar stream instead of a directory (backup --from-tar): the
 * entries and data of file (a path, or "-" for standard input), an
 * archive in any format and compression libarchive reads, through the
 * same calls; names are sanitized or refused as restore's secure flags
 * would (src/fs/tar.c).  Inodes are 0, ctime is the archive's or 0;
 * a hardlink is kept for fs_walk_link_next.  fs_walk_reread is never
 * needed (nothing changes while read); a read error is the stream's end:
 * fs_walk_next then fails.  o: excludes and root only.  NULL (reported).
 */
struct fs_walk *fs_walk_open_tar(const char *file,
    const struct fs_walk_opts *o);

/*
 * Once fs_walk_next has returned 0: the further names that the source
 * gave as hard links to a name before them (a tar stream's), with their
 * own metadata in *e and in *to the path of that name (a regular file
 * of the walk).  1, or 0 when there are no more (always, for a disk
 * walk: it gives inode numbers and link counts instead).  Valid until the
 * walk is closed.
 */
int fs_walk_link_next(struct fs_walk *w, struct entry *e, const char **to);

/* The current entry's path as opened (root + relative path). */
const char *fs_walk_source_path(const struct fs_walk *w);

void fs_walk_close(struct fs_walk *w);

/* 1 if the walk with options o leaves rel (a path below the root) out:
 * it, or a directory above it, matches an exclude pattern. */
int fs_walk_excluded(const struct fs_walk_opts *o, const char *rel);

enum fs_restore_flags {
	FS_RESTORE_OWNER = 1,	/* restore uid/gid (when root) */
	FS_RESTORE_FORCE = 2	/* target may be non-empty; overwrite */
};

struct fs_restore;

/* A regular file this large may have its data written around the page
 * cache (O_DIRECT, where the target allows it safely). */
#define FS_RESTORE_DIRECT_MIN (1u << 20)

/*
 * Restore into target (created if absent; must be empty unless
 * FS_RESTORE_FORCE).  Entries are written through archive_write_disk with
 * SECURE_SYMLINKS | SECURE_NODOTDOT | SECURE_NOABSOLUTEPATHS and time,
 * permission, xattr and ACL restoration.  NULL (reported) on error.
 *
 * libarchive resolves the entries' relative paths against the working
 * directory: each thread calling into a writer unshares its working
 * directory and umask where the kernel lets it and changes into the target,
 * or else changes the directory it shares, under a lock, for each call.
 * Close puts the caller's back.  From open to close, nothing else may use
 * relative paths or walk a tree with archive_read_disk, on any thread that
 * calls into a writer or shares its directory with one.
 */
struct fs_restore *fs_restore_open(const char *target, int flags);

/*
 * Another writer into the same target, for another thread: each writer is
 * used by one thread at a time.  Directories' metadata is set by the
 * writer that created them, at its close; close the duplicates before the
 * writer they came from.  NULL (reported) on error.
 */
struct fs_restore *fs_restore_dup(struct fs_restore *r);

/*
 * Create one entry.  For a regular file, its content follows with
 * fs_restore_data (any order of offsets; gaps stay holes) and then
 * fs_restore_finish.  For others, fs_restore_finish at once.  Unsafe paths
 * are refused.  0, or -1 (reported; the run may go on with the next entry).
 *
 * A directory is made with mode 0700 (or found, FS_RESTORE_FORCE); its
 * mode, owner, extended attributes, ACLs and times are set at close, those
 * of the directories below it first, each from a descriptor opened below
 * the target through no symlink: a directory that has become a symlink
 * meanwhile is left alone (a warning).
 *
 * A regular file takes its path only at fs_restore_finish, whole, with
 * its metadata: a plain one (no extended attributes or ACL, no setuid,
 * setgid or sticky bit, under FS_RESTORE_DIRECT_MIN) is written as an
 * unnamed inode of its directory (O_TMPFILE) and linked there, others
 * under a temporary name (".coffer-" and 16 hex digits) renamed into
 * place.  Until then, and for good if it is discarded or fails (or the
 * process dies, for a plain file), whatever was at its path
 * (FS_RESTORE_FORCE) is left as it was; a name already there is replaced
 * at once, by a rename.  With FS_RESTORE_FORCE, the temporary names an
 * earlier run left (killed between the two) go from the target and from
 * each directory that was already there, as it is begun.
 */
int fs_restore_begin(struct fs_restore *r, const struct entry *e);
int fs_restore_data(struct fs_restore *r, const void *buf, size_t len,
    int64_t offset);
int fs_restore_finish(struct fs_restore *r);

/*
 * As fs_restore_data, but the caller lends buf: a large file's data may be
 * written from it after the call returns (to the disk directly, from
 * there, where buf is aligned as the file is: buf + i at a multiple of
 * 4096 where offset + i is).  buf must stay as it is until
 * fs_restore_wait(r, fs_restore_ticket(r)) returns, or fs_restore_finish
 * or fs_restore_discard does.  A write that fails after the call fails the
 * file's next call.
 */
int fs_restore_data_lent(struct fs_restore *r, const void *buf, size_t len,
    int64_t offset);
/* A mark of the data lent so far, and a wait until it is written (or
 * failed).  fs_restore_wait may be called from any thread, while the
 * writer is in use on another. */
uint64_t fs_restore_ticket(struct fs_restore *r);
void fs_restore_wait(struct fs_restore *r, uint64_t ticket);

/* The current file cannot be completed: remove what was written of it
 * (its temporary name, from its directory's descriptor); what was at its
 * path is left as it was. */
void fs_restore_discard(struct fs_restore *r);

/*
 * Right after a successful fs_restore_finish of a regular file: a
 * descriptor of that file, to read back what was written, which the
 * caller owns and reads with fs_reader_read; -1 if there is none (its data
 * went through the page cache, or its mode does not let its owner read).
 * It is the file that was written, whatever is renamed in the target
 * since.  Restore copies a chunk that several files share from the first
 * one rather than fetch, decrypt and hash it again.
 */
int fs_restore_keep(struct fs_restore *r);

/* Reading back a kept file: one reader per thread, with a buffer of its
 * own.  NULL (reported) when out of memory. */
struct fs_reader;
struct fs_reader *fs_reader_new(void);
void fs_reader_free(struct fs_reader *rd);
/* len bytes at off of fd into buf: 0, or -1 with errno (EIO: the file is
 * shorter).  Nothing is reported. */
int fs_reader_read(struct fs_reader *rd, int fd, void *buf, size_t len,
    int64_t off);

/*
 * Which inode a restored file is: its number, and what tells it from a
 * later inode given the same number once it is freed (a local user who
 * removes a file restore made and creates one of theirs may get it): its
 * owner and group, which no one else can give a file they create, and its
 * birth time where the file system keeps one.
 */
struct fs_file_id {
	uint64_t dev, ino;
	int64_t uid, gid;
	int64_t btime_sec;
	uint32_t btime_nsec;
	int has_btime;
};

/*
 * Right after a successful fs_restore_finish of a regular file: the inode
 * it was written to, read from its descriptor (or checked, by name, to be
 * the one created for it before it took its path).  0, or -1 when there is
 * none to give.
 */
int fs_restore_file_id(const struct fs_restore *r, struct fs_file_id *id);

/*
 * Make e->path a hard link to existing (a path restored earlier), which
 * must still be the inode id (fs_restore_file_id): the link is made from a
 * descriptor of that inode, opened and checked, never by existing's path,
 * whose directory may be a local user's who put a file of theirs there
 * since.  id NULL: that inode is not known (refused).  0, or -1
 * (reported; then e->path is left as it was).
 */
int fs_restore_hardlink(struct fs_restore *r, const struct entry *e,
    const char *existing, const struct fs_file_id *id);

/*
 * The metadata of the target itself, from e (the snapshot's root, a
 * directory), to be set at close after everything in it, as a
 * directory's.  0, or -1 (reported).
 */
int fs_restore_root(struct fs_restore *r, const struct entry *e);

/* Set the directories' metadata, close.  0, 1 when some metadata (an
 * owner, a mode, extended attributes, an ACL, times) could not be
 * restored in its life (warned), or -1.  NULL is fine. */
int fs_restore_close(struct fs_restore *r);

/*
 * How the restore that made a tree was placed (fs_compare): what it could
 * give back.
 */
struct fs_compare_opts {
	int owner;		/* it ran as root: owners and device numbers
				 * were set, and are compared */
	uid_t euid;		/* else setuid survives only on files of
				 * euid's, */
	const gid_t *groups;	/* and setgid only on files of these groups
				 * (or the egid's) */
	size_t ngroups;
};

/*
 * Compare what is at path (not followed if a symlink; its lstat in *st)
 * with e, as a restore placed as o makes it: type; permission bits (with
 * an extended ACL, its mask as the group bits); mtime, except a
 * symlink's; owner and device number (o->owner); each stored extended
 * attribute; a symlink's target; a regular file's size.  Content is not
 * read.  0 when they match, 1 when they differ (msg, of msglen bytes,
 * says how: "mode 0755, not 0750"), -1 when path cannot be examined or
 * memory ran out (errno; nothing reported).
 */
struct stat;
int fs_compare(const char *path, const struct entry *e,
    const struct fs_compare_opts *o, struct stat *st, char *msg,
    size_t msglen);

/*
 * A tar stream out (tar.c): a pax archive (libarchive's pax writer) of
 * entries as restore writes them to disk: type, mode, owner (ids and
 * names), mtime and ctime in nanoseconds, extended attributes, ACL,
 * symlink target, device numbers; a further name of a file as a hardlink;
 * a regular file's holes as a sparse map (GNU.sparse 1.0, which GNU tar
 * and bsdtar extract as holes).  Written to fd, which the caller owns;
 * what names it in messages ("standard output", a path).  NULL (reported).
 */
struct fs_tar_out;
struct fs_tar_out *fs_tar_out_open(int fd, const char *what);

/* A data region of a regular file: holes lie between regions. */
struct fs_region {
	int64_t off, len;
};

/*
 * Write one entry's header.  link_to: the path of an earlier entry this
 * one is a further name of (a hardlink; no data follows), else NULL.  A
 * regular file's data follows with fs_tar_out_data, in increasing offset
 * order, then fs_tar_out_finish; data, ndata: its data regions, when it
 * has holes (NULL: none).  A socket is left out (noted).  0, or -1
 * (reported; the stream is broken: fs_tar_out_close(t, 0)).
 */
int fs_tar_out_begin(struct fs_tar_out *t, const struct entry *e,
    const char *link_to, const struct fs_region *data, size_t ndata);
int fs_tar_out_data(struct fs_tar_out *t, const void *buf, size_t len,
    int64_t offset);
int fs_tar_out_finish(struct fs_tar_out *t);

/*
 * ok: the archive's end is written; else the stream stops where it is,
 * without one, so that no reader takes what was written for a whole
 * archive.  0, or -1 (reported).  NULL is fine.
 */
int fs_tar_out_close(struct fs_tar_out *t, int ok);

#endif
