#ifndef COFFER_RESTORE_INT_H
#define COFFER_RESTORE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "coffer/buf.h"
#include "coffer/fs.h"

/*
 * Private to the restore writer: restore.c (the writer, its temporary
 * names and entries), restore-plain.c (files written without libarchive),
 * restore-dirs.c (directories and their metadata) and restore-link.c
 * (hard links).
 */
struct archive;
struct archive_entry;
struct entry;

enum { RS_IDLE, RS_IN_ENTRY };

/* Entries never lead outside the target: through a symlink, "..", or an
 * absolute path. */
#define RS_SECURE_OPTS (ARCHIVE_EXTRACT_SECURE_SYMLINKS | \
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
	 * (path ""): their metadata, set at close (rs_set_dirs). */
	struct dir_meta *dirs;
	size_t ndirs, capdirs;
	struct buf acl;		/* scratch: an ACL's extended attribute */
	unsigned long warnings;	/* metadata that could not be restored */
	/*
	 * A plain file (rs_plain_begin): written as an unnamed inode of its
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
 * below the target through no symlink (rs_set_dirs).
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

static inline const char *
rs_cur(const struct fs_restore *r)
{
	return ((const char *)r->path.data);
}

/* The current file's temporary name, and their last components. */
static inline const char *
rs_tmp_path(const struct fs_restore *r)
{
	return ((const char *)r->tmp.data);
}

static inline const char *
rs_tmp_base(const struct fs_restore *r)
{
	return ((const char *)r->tmp.data + r->tbase);
}

static inline const char *
rs_cur_base(const struct fs_restore *r)
{
	return ((const char *)r->path.data + r->base);
}

/* Each is described where it is defined. */

/* restore.c */

int rs_disk_enter(const struct fs_restore *r);
void rs_disk_leave(int own);
int rs_check(struct fs_restore *r, int st, const char *what,
    const char *path);
void rs_drop_stale(struct fs_restore *r, int fd, const char *dir);
int rs_set_path(struct fs_restore *r, const char *path);
int rs_set_tmp(struct fs_restore *r);
void rs_close_pfd(struct fs_restore *r);
void rs_drop_tmp(struct fs_restore *r);
int rs_file_id(int dfd, const char *name, int flags, struct fs_file_id *id,
    uint32_t *nlink);
int rs_same_inode(const struct fs_file_id *a, const struct fs_file_id *b,
    int owner);
int rs_put_in_place(struct fs_restore *r);

/* restore-plain.c */

/* How an unnamed file is linked at a name (tmpfile_link). */
enum { RS_LINK_UNKNOWN, RS_LINK_EMPTY_PATH, RS_LINK_PROC, RS_LINK_NONE };

int rs_link_fd(int fd, int how, int dfd, const char *name);
int rs_plain_begin(struct fs_restore *r, const struct entry *e);
int rs_plain_data(struct fs_restore *r, const void *buf, size_t len,
    int64_t off);
void rs_plain_drop(struct fs_restore *r);
int rs_plain_finish(struct fs_restore *r);

/* restore-dirs.c */

int rs_begin_dir(struct fs_restore *r, const struct entry *e);
void rs_set_dirs(struct fs_restore *r);

#endif
