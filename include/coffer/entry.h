#ifndef COFFER_ENTRY_H
#define COFFER_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"

/*
 * One file-system entry's metadata as coffer stores it: what the walker
 * produces, the catalog keeps and restore writes back.  Paths are relative
 * to the dataset's root ("train/x.jpg"), never absolute, never with "." or
 * ".." components.  Strings point into storage owned by whoever filled the
 * struct; they stay valid until that owner's next call.
 */
enum entry_kind {
	ENTRY_TOMBSTONE = 0,	/* the path was deleted (differential/incr.) */
	ENTRY_FILE = 1,
	ENTRY_DIR = 2,
	ENTRY_SYMLINK = 3,
	ENTRY_FIFO = 4,
	ENTRY_CHR = 5,
	ENTRY_BLK = 6,
	ENTRY_SOCK = 7
};

struct entry {
	const char *path;
	int kind;		/* enum entry_kind */
	uint32_t mode;		/* permission bits only: 07777 */
	int64_t uid, gid;
	const char *uname;	/* may be NULL */
	const char *gname;	/* may be NULL */
	int64_t size;		/* logical size of a file; 0 otherwise */
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint64_t ino;
	uint64_t dev;
	uint32_t nlink;
	uint64_t rdev;		/* devices */
	const char *target;	/* symlink target, else NULL */
	/* Extended attributes, encoded with entry_xattrs_*; may be empty. */
	const uint8_t *xattrs;
	size_t xattrs_len;
	/* POSIX.1e ACL in libarchive's text form (access + default); or NULL. */
	const char *acl;
	/* Catalog row of the file's content (chunk list); 0 when none. */
	int64_t content_id;
};

/* One-letter type name for listings: "-", "d", "l", "p", "c", "b", "s". */
const char *entry_kind_char(int kind);
/* Word for JSON: "file", "dir", "symlink", "fifo", "chr", "blk", "sock". */
const char *entry_kind_name(int kind);

/*
 * Extended attributes are kept as one blob: repeated
 *   u32 name length | name | u32 value length | value
 * entry_xattrs_add appends one pair; entry_xattrs_next iterates over an
 * untrusted blob (returns 1 with a pair, 0 at the end, -1 if malformed).
 */
int entry_xattrs_add(struct buf *b, const char *name, const void *value,
    size_t len);
struct entry_xattr_iter {
	const uint8_t *p;
	size_t left;
};
void entry_xattrs_iter_init(struct entry_xattr_iter *it, const uint8_t *p,
    size_t len);
int entry_xattrs_next(struct entry_xattr_iter *it, const char **name,
    size_t *name_len, const void **value, size_t *value_len);

/*
 * A deep copy of src in *dst: its strings and xattrs live in one malloc'd
 * block, returned in *mem (free it to release the copy).  0, or -1 on
 * ENOMEM (reported).
 */
int entry_dup(struct entry *dst, void **mem, const struct entry *src);

/*
 * 1 if a relative path is safe to store and restore: not empty, no leading
 * '/', no "." or ".." component, no empty component, no NUL.
 */
int entry_path_is_safe(const char *path);

/*
 * The dataset root's own entry (its mode, owner, times, xattrs, ACL) is
 * stored under ENTRY_ROOT_PATH; restore gives them to the target, never
 * writes that path.  1 if path is it.
 */
#define ENTRY_ROOT_PATH "."
int entry_path_is_root(const char *path);

#endif
