/*
 * fs: walk a tree with every kind of entry and awkward name, restore what
 * was walked into a fresh target, compare; then the ways a restore is
 * attacked (unsafe paths, a symlink planted to write through) and the ways
 * a walk meets unreadable files.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "coffer/fs.h"
#include "coffer/log.h"
#include "tap.h"
/* The direct writer is private to src/fs; its refusals are tested here. */
#include "../../src/fs/fs-int.h"

#define MiB (1024 * 1024)

static char base[64];		/* mkdtemp */
static int is_root;

/* Path under a directory, in one of a few rotating buffers. */
static const char *
pj(const char *dir, const char *rel)
{
	static char b[8][PATH_MAX];
	static int i;
	char *p = b[i++ % 8];
	int n = snprintf(p, PATH_MAX, "%s/%s", dir, rel);

	if (n < 0 || n >= PATH_MAX) {
		fprintf(stderr, "path too long: %s/%s\n", dir, rel);
		exit(2);
	}
	return (p);
}

static int
write_file(const char *path, const void *p, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd == -1)
		return (-1);
	if (n > 0 && write(fd, p, n) != (ssize_t)n) {
		close(fd);
		return (-1);
	}
	close(fd);
	return (chmod(path, mode));
}

static int
pwrite_at(const char *path, const void *p, size_t n, off_t off)
{
	int fd = open(path, O_WRONLY);
	ssize_t w;

	if (fd == -1)
		return (-1);
	w = pwrite(fd, p, n, off);
	close(fd);
	return (w == (ssize_t)n ? 0 : -1);
}

/* Allocate n blocks past path's end; 1 if it then has more blocks than
 * bytes, 0 where the file system cannot. */
static int
prealloc(const char *path, off_t end, off_t n)
{
	struct stat st;
	int fd = open(path, O_WRONLY), r;

	if (fd == -1)
		return (0);
	r = fallocate(fd, FALLOC_FL_KEEP_SIZE, end, n) == 0 &&
	    fstat(fd, &st) == 0 && st.st_blocks * 512 >= st.st_size;
	close(fd);
	return (r);
}

/* Whole file into memory (up to 128 MiB); NULL on error. */
static unsigned char *
slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *p;
	int fd;

	if ((fd = open(path, O_RDONLY)) == -1 || fstat(fd, &st) ||
	    st.st_size > 128 * MiB) {
		if (fd != -1)
			close(fd);
		return (NULL);
	}
	p = malloc((size_t)st.st_size + 1);
	if (p == NULL || read(fd, p, (size_t)st.st_size) != st.st_size) {
		free(p);
		close(fd);
		return (NULL);
	}
	close(fd);
	*len = (size_t)st.st_size;
	return (p);
}

static int
same_content(const char *a, const char *b)
{
	unsigned char *pa, *pb;
	size_t la = 0, lb = 0;
	int same;

	pa = slurp(a, &la);
	pb = slurp(b, &lb);
	same = pa != NULL && pb != NULL && la == lb && memcmp(pa, pb, la) == 0;
	free(pa);
	free(pb);
	return (same);
}

static int64_t
mtime_ns(const struct stat *st)
{
	return ((int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
}

static int
rm_fn(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (flag == FTW_DP)
		return (rmdir(path));
	return (unlink(path));
}

static int
chmod_fn(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(path, 0700);
	return (0);
}

static void
rm_rf(const char *path)
{
	nftw(path, chmod_fn, 16, FTW_PHYS);
	nftw(path, rm_fn, 16, FTW_PHYS | FTW_DEPTH);
}

/* Give every entry a distinct mtime with nanoseconds (children first). */
static int mt_seq;

static int
mtime_fn(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	struct timespec ts[2];

	ts[0].tv_sec = ts[1].tv_sec = 1500000000 + mt_seq * 1000;
	ts[0].tv_nsec = ts[1].tv_nsec = 123456789 - mt_seq;
	mt_seq++;
	if (f->level > 0)
		utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
	return (0);
}

/* A POSIX ACL xattr blob: version 2, then (tag u16, perm u16, id u32). */
struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

static size_t
acl_blob(unsigned char *b, const struct acl_ent *e, size_t n)
{
	size_t i, o = 4;

	b[0] = 2;
	b[1] = b[2] = b[3] = 0;
	for (i = 0; i < n; i++, o += 8) {
		b[o] = (unsigned char)e[i].tag;
		b[o + 1] = (unsigned char)(e[i].tag >> 8);
		b[o + 2] = (unsigned char)e[i].perm;
		b[o + 3] = (unsigned char)(e[i].perm >> 8);
		b[o + 4] = (unsigned char)e[i].id;
		b[o + 5] = (unsigned char)(e[i].id >> 8);
		b[o + 6] = (unsigned char)(e[i].id >> 16);
		b[o + 7] = (unsigned char)(e[i].id >> 24);
	}
	return (o);
}

#define A_USER_OBJ 1
#define A_USER 2
#define A_GROUP_OBJ 4
#define A_MASK 0x10
#define A_OTHER 0x20
#define A_NOID 0xffffffffu

static const struct acl_ent acl_access[] = {
	{ A_USER_OBJ, 6, A_NOID }, { A_USER, 4, 65534 },
	{ A_GROUP_OBJ, 4, A_NOID }, { A_MASK, 6, A_NOID },
	{ A_OTHER, 0, A_NOID }
};
static const struct acl_ent acl_default[] = {
	{ A_USER_OBJ, 7, A_NOID }, { A_USER, 5, 65534 },
	{ A_GROUP_OBJ, 5, A_NOID }, { A_MASK, 5, A_NOID },
	{ A_OTHER, 1, A_NOID }
};

static const char bad_name[] = "bad-\xff\xfe-bytes";
static const char nl_name[] = "new\nline";
static const char utf8_name[] = "\xc3\xbc" "ber \xe2\x98\x83";
static int have_user_xattr, have_acl, have_dev, have_prealloc;
static unsigned char xattr_val[] = { 'v', 0, 'a', 'l' };

static int
build_source(const char *src)
{
	static unsigned char big[3 * MiB], blk[4096];
	unsigned char acl[64];
	size_t i, n;
	uint32_t x = 12345;

	for (i = 0; i < sizeof(big); i++) {
		x = x * 1103515245 + 12345;
		big[i] = (unsigned char)(x >> 16);
	}
	memset(blk, 0xab, sizeof(blk));
	if (mkdir(src, 0755) ||
	    write_file(pj(src, "empty"), "", 0, 0644) ||
	    write_file(pj(src, "small.txt"), "hello\n", 6, 0644) ||
	    write_file(pj(src, "big.bin"), big, sizeof(big), 0644) ||
	    write_file(pj(src, "sparse"), "", 0, 0644) ||
	    truncate(pj(src, "sparse"), 64 * MiB) ||
	    pwrite_at(pj(src, "sparse"), blk, sizeof(blk), 1 * MiB) ||
	    pwrite_at(pj(src, "sparse"), blk, sizeof(blk), 40 * MiB) ||
	    write_file(pj(src, "with space"), "s", 1, 0644) ||
	    write_file(pj(src, nl_name), "n", 1, 0644) ||
	    write_file(pj(src, utf8_name), "u", 1, 0644) ||
	    write_file(pj(src, "-dash"), "d", 1, 0644) ||
	    write_file(pj(src, bad_name), "b", 1, 0644) ||
	    symlink("missing/target", pj(src, "dangling")) ||
	    symlink("/etc/passwd", pj(src, "abs-link")) ||
	    write_file(pj(src, "hl1"), "linked", 6, 0640) ||
	    link(pj(src, "hl1"), pj(src, "hl2")) ||
	    mkdir(pj(src, "d"), 0755) || mkdir(pj(src, "d/e"), 0750) ||
	    mkdir(pj(src, "d/e/f"), 0700) || mkdir(pj(src, "empty-dir"), 0755) ||
	    mkfifo(pj(src, "fifo"), 0640) ||
	    write_file(pj(src, "xattr-file"), "x", 1, 0644) ||
	    write_file(pj(src, "m0000"), "zero", 4, 0) ||
	    write_file(pj(src, "m0600"), "six", 3, 0600) ||
	    write_file(pj(src, "m4755"), "suid", 4, 0755) ||
	    chmod(pj(src, "m4755"), 04755) ||
	    mkdir(pj(src, "sticky"), 0755) || chmod(pj(src, "sticky"), 01777) ||
	    write_file(pj(src, "sticky/in"), "i", 1, 0644) ||
	    mkdir(pj(src, "dir0000"), 0755) ||
	    write_file(pj(src, "dir0000/inner"), "in", 2, 0644) ||
	    chmod(pj(src, "dir0000"), 0) ||
	    write_file(pj(src, "skip.tmp"), "t", 1, 0644) ||
	    mkdir(pj(src, "sub"), 0755) ||
	    write_file(pj(src, "sub/also.tmp"), "t", 1, 0644) ||
	    write_file(pj(src, "sub/keep"), "k", 1, 0644) ||
	    mkdir(pj(src, "sub/deep"), 0755) ||
	    write_file(pj(src, "sub/deep/gone"), "g", 1, 0644) ||
	    mkdir(pj(src, "excluded-dir"), 0755) ||
	    write_file(pj(src, "excluded-dir/f"), "f", 1, 0644) ||
	    write_file(pj(src, "acl-file"), "acl", 3, 0644) ||
	    mkdir(pj(src, "acl-dir"), 0755))
		return (-1);
	/* A hole, and more blocks preallocated past the end than it has
	 * bytes: read whole, the hole as the zeros it holds. */
	if (write_file(pj(src, "prealloc"), "", 0, 0644) ||
	    pwrite_at(pj(src, "prealloc"), blk, sizeof(blk), 0) ||
	    pwrite_at(pj(src, "prealloc"), blk, sizeof(blk), 512 * 1024))
		return (-1);
	have_prealloc = prealloc(pj(src, "prealloc"), 516 * 1024, 4 * MiB);
	have_dev = mknod(pj(src, "chr"), S_IFCHR | 0620, makedev(1, 3)) == 0;
	have_user_xattr = setxattr(pj(src, "xattr-file"), "user.coffer",
	    xattr_val, sizeof(xattr_val), 0) == 0;
	n = acl_blob(acl, acl_access, 5);
	have_acl = setxattr(pj(src, "acl-file"), "system.posix_acl_access",
	    acl, n, 0) == 0;
	n = acl_blob(acl, acl_default, 5);
	have_acl = have_acl && setxattr(pj(src, "acl-dir"),
	    "system.posix_acl_default", acl, n, 0) == 0;
	mt_seq = 0;
	return (nftw(src, mtime_fn, 16, FTW_PHYS | FTW_DEPTH));
}

/* What the walk returned, kept for the comparisons after restore. */
struct rec {
	char *path;
	int kind;
	uint32_t mode;
	int64_t size, mtime_ns;
	uint64_t ino, rdev;
	uint32_t nlink;
	char *target;
	char *acl;
	int has_xattr;
	int64_t data;		/* bytes fs_walk_read returned */
	int restored;		/* 0 ok, -1 failed */
	struct fs_file_id id;	/* the inode restored (a regular file) */
};

static struct rec recs[128];
static size_t nrecs;

static struct rec *
find(const char *path)
{
	size_t i;

	for (i = 0; i < nrecs; i++)
		if (strcmp(recs[i].path, path) == 0)
			return (&recs[i]);
	return (NULL);
}

static int
xattr_in(const struct entry *e, const char *want, const void *val,
    size_t vlen)
{
	struct entry_xattr_iter it;
	const char *name;
	const void *v;
	size_t nl, vl;

	entry_xattrs_iter_init(&it, e->xattrs, e->xattrs_len);
	while (entry_xattrs_next(&it, &name, &nl, &v, &vl) == 1)
		if (nl == strlen(want) && memcmp(name, want, nl) == 0)
			return (vl == vlen && memcmp(v, val, vl) == 0);
	return (0);
}

/* Walk src with the test's excludes and restore each entry into r. */
static int
walk_and_restore(const char *src, struct fs_restore *r)
{
	static char p1[] = "*.tmp", p2[] = "excluded-dir", p3[] = "sub/deep/*";
	char *const ex[] = { p1, p2, p3 };
	struct fs_walk_opts o = { .excludes = ex, .nexcludes = 3 };
	struct fs_walk *w;
	struct entry e;
	struct rec *rc, *first;
	const void *buf;
	size_t len, i;
	int64_t off;
	int st, rd, bad_order = 0;

	if ((w = fs_walk_open(src, &o)) == NULL)
		return (-1);
	while ((st = fs_walk_next(w, &e)) == 1) {
		if (fs_walk_details(w, &e)) {
			st = -1;
			break;
		}
		if (nrecs == sizeof(recs) / sizeof(recs[0]))
			break;
		rc = &recs[nrecs++];
		rc->path = strdup(e.path);
		rc->kind = e.kind;
		rc->mode = e.mode;
		rc->size = e.size;
		rc->mtime_ns = e.mtime_ns;
		rc->ino = e.ino;
		rc->nlink = e.nlink;
		rc->rdev = e.rdev;
		rc->target = e.target ? strdup(e.target) : NULL;
		rc->acl = e.acl ? strdup(e.acl) : NULL;
		rc->has_xattr = xattr_in(&e, "user.coffer", xattr_val,
		    sizeof(xattr_val));

		/* The second name of a hard-linked file becomes a link. */
		first = NULL;
		for (i = 0; e.kind == ENTRY_FILE && e.nlink > 1 &&
		    i + 1 < nrecs; i++)
			if (recs[i].kind == ENTRY_FILE &&
			    recs[i].ino == e.ino) {
				first = &recs[i];
				break;
			}
		if (first != NULL) {
			rc->restored = fs_restore_hardlink(r, &e, first->path,
			    &first->id);
			continue;
		}
		if ((rc->restored = fs_restore_begin(r, &e)) != 0)
			continue;
		off = -1;
		while ((rd = fs_walk_read(w, &buf, &len, &off)) == 1) {
			/* e's strings must survive fs_walk_read. */
			if (strcmp(e.path, rc->path) != 0)
				bad_order = 1;
			rc->data += (int64_t)len;
			if (fs_restore_data(r, buf, len, off)) {
				rc->restored = -1;
				break;
			}
		}
		if (rc->restored == 0 && rd == 0) {
			rc->restored = fs_restore_finish(r);
			if (rc->restored == 0 && e.kind == ENTRY_FILE &&
			    fs_restore_file_id(r, &rc->id))
				rc->restored = -1;
		} else {
			rc->restored = -1;
			fs_restore_discard(r);
		}
	}
	fs_walk_close(w);
	ok(st == 0, "walk ends without a fatal error");
	ok(!bad_order, "entry strings stay valid while reading data");
	return (st);
}

static void
check_walk(const char *src)
{
	static const char *present[] = { "empty", "small.txt", "big.bin",
		"sparse", "with space", nl_name, utf8_name, "-dash", bad_name,
		"dangling", "abs-link", "hl1", "hl2", "d", "d/e", "d/e/f",
		"empty-dir", "fifo", "xattr-file", "m0000", "m0600", "m4755",
		"sticky", "sticky/in", "dir0000", "dir0000/inner", "sub",
		"sub/keep", "sub/deep", "acl-file", "acl-dir" };
	static const char *absent[] = { "skip.tmp", "sub/also.tmp",
		"excluded-dir", "excluded-dir/f", "sub/deep/gone", "", "." };
	struct rec *rc, *h1, *h2;
	struct stat st;
	size_t i;
	int all = 1, times = 1, rel = 1;

	for (i = 0; i < sizeof(present) / sizeof(present[0]); i++)
		if (find(present[i]) == NULL) {
			diag("missing from walk: '%s'", present[i]);
			all = 0;
		}
	ok(all, "walk returns every entry, awkward names included");
	for (i = 0, all = 1; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (find(absent[i]) != NULL) {
			diag("should be excluded: '%s'", absent[i]);
			all = 0;
		}
	ok(all, "excluded names, an excluded directory's content and the "
	    "root are not returned");
	for (i = 0; i < nrecs; i++) {
		if (recs[i].path[0] == '/' || strncmp(recs[i].path, src,
		    strlen(src)) == 0 || !entry_path_is_safe(recs[i].path))
			rel = 0;
		if (lstat(pj(src, recs[i].path), &st) ||
		    mtime_ns(&st) != recs[i].mtime_ns)
			times = 0;
	}
	ok(rel, "paths are relative to the root");
	ok(times, "mtime_ns matches lstat for every entry");

	rc = find("small.txt");
	ok(rc && rc->kind == ENTRY_FILE && rc->size == 6 &&
	    rc->mode == 0644 && rc->data == 6, "regular file metadata");
	rc = find("big.bin");
	ok(rc && rc->size == 3 * MiB && rc->data == 3 * MiB,
	    "3 MiB file read whole");
	rc = find("empty");
	ok(rc && rc->size == 0 && rc->data == 0, "empty file");
	rc = find("sparse");
	ok(rc && rc->size == 64 * MiB && rc->data >= 8192 &&
	    rc->data < 1 * MiB, "sparse file: only data regions read "
	    "(%lld bytes)", rc ? (long long)rc->data : -1LL);
	rc = find("prealloc");
	if (have_prealloc)
		ok(rc && rc->size == 516 * 1024 && rc->data == rc->size,
		    "a file with blocks preallocated past its end is read "
		    "whole (%lld bytes)", rc ? (long long)rc->data : -1LL);
	else
		skip("a file with blocks preallocated past its end: no "
		    "fallocate here");
	rc = find("dangling");
	ok(rc && rc->kind == ENTRY_SYMLINK && rc->target &&
	    strcmp(rc->target, "missing/target") == 0,
	    "dangling symlink and its target");
	rc = find("abs-link");
	ok(rc && rc->kind == ENTRY_SYMLINK && rc->target &&
	    strcmp(rc->target, "/etc/passwd") == 0, "absolute symlink");
	h1 = find("hl1");
	h2 = find("hl2");
	ok(h1 && h2 && h1->nlink == 2 && h2->nlink == 2 && h1->ino == h2->ino,
	    "hard links: nlink 2, same inode");
	rc = find("fifo");
	ok(rc && rc->kind == ENTRY_FIFO && rc->mode == 0640, "fifo");
	rc = find("d/e/f");
	ok(rc && rc->kind == ENTRY_DIR && rc->mode == 0700, "nested dir");
	if (have_dev) {
		rc = find("chr");
		ok(rc && rc->kind == ENTRY_CHR && rc->rdev == makedev(1, 3),
		    "character device and its numbers");
	} else
		skip("character device: cannot mknod here");
	ok(find("m0000") && find("m0000")->mode == 0, "mode 0000");
	ok(find("m0600") && find("m0600")->mode == 0600, "mode 0600");
	ok(find("m4755") && find("m4755")->mode == 04755, "mode 4755");
	ok(find("sticky") && find("sticky")->mode == 01777, "mode 1777 dir");
	if (have_user_xattr) {
		rc = find("xattr-file");
		ok(rc && rc->has_xattr, "user.* xattr with a NUL in its value");
	} else
		skip("user.* xattr: none on this file system");
	if (have_acl) {
		rc = find("acl-file");
		ok(rc && rc->acl && strstr(rc->acl, "user:") &&
		    strstr(rc->acl, ":65534") && strstr(rc->acl, "mask::"),
		    "extended access ACL as text");
		rc = find("acl-dir");
		ok(rc && rc->acl && strstr(rc->acl, "default:user:"),
		    "default ACL as text");
		rc = find("small.txt");
		ok(rc && rc->acl == NULL, "no ACL text for a plain mode");
	} else {
		skip("extended access ACL: no POSIX ACLs on this file system");
		skip("default ACL: no POSIX ACLs on this file system");
		skip("no ACL text for a plain mode: no POSIX ACLs here");
	}
}

static int
xattr_eq(const char *path, const char *name, const void *want, size_t n)
{
	unsigned char got[256];
	ssize_t r = lgetxattr(path, name, got, sizeof(got));

	return (r == (ssize_t)n && memcmp(got, want, n) == 0);
}

static void
check_restore(const char *src, const char *dst)
{
	struct stat s, d, d2;
	char lnk[PATH_MAX];
	unsigned char acl[64];
	size_t i, n;
	ssize_t ln;
	int failed = 0, meta = 1, content = 1, links = 1;
	struct rec *rc;

	for (i = 0; i < nrecs; i++) {
		rc = &recs[i];
		if (rc->restored) {
			diag("restore of '%s' failed", rc->path);
			failed = 1;
			continue;
		}
		if (lstat(pj(dst, rc->path), &d) || lstat(pj(src, rc->path),
		    &s)) {
			diag("missing after restore: '%s'", rc->path);
			meta = 0;
			continue;
		}
		if ((d.st_mode & S_IFMT) != (s.st_mode & S_IFMT) ||
		    (d.st_mode & 07777) != (s.st_mode & 07777) ||
		    mtime_ns(&d) != mtime_ns(&s) || d.st_uid != s.st_uid ||
		    d.st_gid != s.st_gid ||
		    (S_ISREG(s.st_mode) && d.st_size != s.st_size)) {
			diag("metadata differs: '%s' (mode %o/%o mtime "
			    "%lld/%lld)", rc->path, (unsigned)d.st_mode,
			    (unsigned)s.st_mode, (long long)mtime_ns(&d),
			    (long long)mtime_ns(&s));
			meta = 0;
		}
		if (S_ISREG(s.st_mode) && !same_content(pj(src, rc->path),
		    pj(dst, rc->path))) {
			diag("content differs: '%s'", rc->path);
			content = 0;
		}
		if (S_ISLNK(s.st_mode)) {
			ln = readlink(pj(dst, rc->path), lnk, sizeof(lnk) - 1);
			if (ln < 0 || (lnk[ln] = '\0', rc->target == NULL) ||
			    strcmp(lnk, rc->target) != 0)
				links = 0;
		}
	}
	ok(!failed, "every walked entry restored without error");
	ok(meta, "type, mode, owner, mtime (ns) and size match");
	ok(content, "content matches byte for byte");
	ok(links, "symlink targets match");
	ok(lstat(pj(dst, "hl1"), &d) == 0 && lstat(pj(dst, "hl2"), &d2) == 0 &&
	    d.st_ino == d2.st_ino && d.st_nlink == 2,
	    "hard link pair shares an inode");
	ok(lstat(pj(dst, "sparse"), &d) == 0 && d.st_size == 64 * MiB &&
	    d.st_blocks * 512 < 1 * MiB, "sparse file: 64 MiB with holes "
	    "kept (%lld bytes allocated)", (long long)d.st_blocks * 512);
	ok(lstat(pj(dst, "fifo"), &d) == 0 && S_ISFIFO(d.st_mode), "fifo");
	if (have_dev)
		ok(lstat(pj(dst, "chr"), &d) == 0 && S_ISCHR(d.st_mode) &&
		    d.st_rdev == makedev(1, 3), "character device");
	else
		skip("character device: cannot mknod here");
	ok(lstat(pj(dst, "d/e/f"), &d) == 0 && S_ISDIR(d.st_mode) &&
	    lstat(pj(dst, "empty-dir"), &d) == 0 && S_ISDIR(d.st_mode),
	    "empty directories");
	ok(lstat(pj(dst, "dir0000"), &d) == 0 && (d.st_mode & 07777) == 0 &&
	    lstat(pj(dst, "dir0000/inner"), &d) == 0,
	    "a 0000 directory is filled, then gets its mode at close");
	ok(lstat(pj(dst, "sticky"), &d) == 0 && (d.st_mode & 07777) == 01777,
	    "sticky directory mode");
	if (have_user_xattr)
		ok(xattr_eq(pj(dst, "xattr-file"), "user.coffer", xattr_val,
		    sizeof(xattr_val)), "xattr value restored");
	else
		skip("xattr value restored: no user xattrs here");
	if (have_acl) {
		n = acl_blob(acl, acl_access, 5);
		ok(xattr_eq(pj(dst, "acl-file"), "system.posix_acl_access",
		    acl, n) && lstat(pj(dst, "acl-file"), &d) == 0 &&
		    (d.st_mode & 0777) == 0660, "access ACL restored "
		    "(mask in the group bits)");
		n = acl_blob(acl, acl_default, 5);
		ok(xattr_eq(pj(dst, "acl-dir"), "system.posix_acl_default",
		    acl, n), "default ACL restored");
	} else {
		skip("access ACL restored: no POSIX ACLs here");
		skip("default ACL restored: no POSIX ACLs here");
	}
}

/* A made-up entry for the restore-side tests. */
static struct entry
mk(const char *path, int kind)
{
	struct entry e;

	memset(&e, 0, sizeof(e));
	e.path = path;
	e.kind = kind;
	e.mode = kind == ENTRY_DIR ? 0755 : 0644;
	e.uid = getuid();
	e.gid = getgid();
	e.mtime_ns = 1600000000LL * 1000000000 + 5;
	return (e);
}

static int
exists(const char *path)
{
	struct stat st;

	return (lstat(path, &st) == 0);
}

static void
test_hostile(void)
{
	char dst[PATH_MAX], out[PATH_MAX], abs_path[PATH_MAX];
	struct fs_restore *r;
	struct fs_file_id fid;
	struct entry e;
	char data[100];
	unsigned long w0;
	int rc;

	snprintf(dst, sizeof(dst), "%s/hostile/target", base);
	snprintf(out, sizeof(out), "%s/outside", base);
	snprintf(abs_path, sizeof(abs_path), "%s/abs-escape", base);
	if (mkdir(out, 0755)) {
		ok(0, "mkdir outside");
		return;
	}
	r = fs_restore_open(dst, 0);
	ok(r != NULL, "restore creates a missing target (and parents)");
	if (r == NULL)
		return;

	e = mk("../evil", ENTRY_FILE);
	ok(fs_restore_begin(r, &e) == -1, "'../evil' refused");
	e = mk(abs_path, ENTRY_FILE);
	ok(fs_restore_begin(r, &e) == -1, "absolute path refused");
	e = mk("a/../../b", ENTRY_FILE);
	ok(fs_restore_begin(r, &e) == -1, "'a/../../b' refused");
	e = mk("a//b", ENTRY_FILE);
	ok(fs_restore_begin(r, &e) == -1, "empty component refused");
	e = mk("x", ENTRY_FILE);
	memset(&fid, 0, sizeof(fid));
	ok(fs_restore_hardlink(r, &e, "../outside/y", &fid) == -1,
	    "hard link to '../outside/y' refused");
	ok(!exists(pj(base, "hostile/evil")) && !exists(pj(base, "evil")) &&
	    !exists(pj(base, "b")) && !exists(abs_path) &&
	    !exists(pj(dst, "x")), "nothing created by refused entries");

	/* A symlink out of the target, then an entry through it. */
	e = mk("link", ENTRY_SYMLINK);
	e.mode = 0777;
	e.target = out;
	ok(fs_restore_begin(r, &e) == 0 && fs_restore_finish(r) == 0,
	    "symlink pointing outside restored as a symlink");
	e = mk("link/file", ENTRY_FILE);
	e.size = 5;
	w0 = log_warnings;
	rc = fs_restore_begin(r, &e);
	if (rc == 0) {
		fs_restore_data(r, "evil\n", 5, 0);
		fs_restore_finish(r);
	}
	ok(rc == -1 && !exists(pj(out, "file")),
	    "'link/file' is not written through the symlink");
	e = mk("rel", ENTRY_SYMLINK);
	e.mode = 0777;
	e.target = "../..";
	ok(fs_restore_begin(r, &e) == 0 && fs_restore_finish(r) == 0,
	    "symlink to '../..' restored");
	e = mk("rel/outside/f2", ENTRY_FILE);
	ok(fs_restore_begin(r, &e) == -1 && !exists(pj(out, "f2")),
	    "'rel/outside/f2' is not written through it either");
	(void)w0;

	/* The restore object stays usable after refused entries. */
	e = mk("ok-after", ENTRY_FILE);
	e.size = 3;
	ok(fs_restore_begin(r, &e) == 0 &&
	    fs_restore_data(r, "abc", 3, 0) == 0 && fs_restore_finish(r) == 0,
	    "later entries still restore");

	/*
	 * A second name links the inode restored, checked; in a directory
	 * not made yet too (libarchive makes it).  Another file at the first
	 * name (a freed inode's number given to it, say) is refused.
	 */
	ok(fs_restore_file_id(r, &fid) == 0, "a finished file's inode known");
	e = mk("sub/ok-link", ENTRY_FILE);
	{
		struct stat a, b;

		ok(fs_restore_hardlink(r, &e, "ok-after", &fid) == 0 &&
		    stat(pj(dst, "ok-after"), &a) == 0 &&
		    stat(pj(dst, "sub/ok-link"), &b) == 0 &&
		    a.st_ino == b.st_ino,
		    "second name in a new directory: the same inode");
	}
	e = mk("ok-link2", ENTRY_FILE);
	fid.btime_nsec ^= 1;
	fid.uid ^= 1;
	ok(fs_restore_hardlink(r, &e, "ok-after", &fid) == -1 &&
	    !exists(pj(dst, "ok-link2")), "another inode's name refused");
	e = mk("sub2/ok-link3", ENTRY_FILE);
	ok(fs_restore_hardlink(r, &e, "ok-after", &fid) == -1 &&
	    !exists(pj(dst, "sub2/ok-link3")),
	    "refused in a new directory too");
	ok(fs_restore_hardlink(r, &e, "ok-after", NULL) == -1,
	    "an unknown inode is refused");

	/* Blocks in any order; a trailing hole kept by the final size. */
	e = mk("unordered", ENTRY_FILE);
	e.size = 3 * MiB;
	memset(data, 'z', sizeof(data));
	ok(fs_restore_begin(r, &e) == 0 &&
	    fs_restore_data(r, data, 100, 2 * MiB) == 0 &&
	    fs_restore_data(r, data, 100, 0) == 0 &&
	    fs_restore_finish(r) == 0, "blocks written out of order");

	/* Discard removes a half-written file. */
	e = mk("partial", ENTRY_FILE);
	e.size = 1000;
	ok(fs_restore_begin(r, &e) == 0 &&
	    fs_restore_data(r, data, 10, 0) == 0, "partial file started");
	fs_restore_discard(r);
	ok(!exists(pj(dst, "partial")), "discard leaves no torn file");

	/* A socket has no meaning once its process is gone: skipped. */
	e = mk("sock", ENTRY_SOCK);
	ok(fs_restore_begin(r, &e) == 0 && fs_restore_finish(r) == 0 &&
	    !exists(pj(dst, "sock")), "sockets are skipped");

	ok(fs_restore_close(r) == 0, "close");
	{
		struct stat st;
		unsigned char *p;
		size_t n = 0;

		ok(lstat(pj(dst, "unordered"), &st) == 0 &&
		    st.st_size == 3 * MiB && st.st_blocks * 512 < MiB &&
		    (p = slurp(pj(dst, "unordered"), &n)) != NULL &&
		    p[0] == 'z' && p[99] == 'z' && p[100] == 0 &&
		    p[2 * MiB + 99] == 'z' && p[3 * MiB - 1] == 0 &&
		    (free(p), 1), "out-of-order blocks and holes land right");
		ok(lstat(pj(dst, "ok-after"), &st) == 0 &&
		    mtime_ns(&st) == 1600000000LL * 1000000000 + 5,
		    "mtime with nanoseconds");
	}
	ok(fs_restore_close(NULL) == 0, "close(NULL)");
}

/* A byte of the test pattern at file offset off (never all zero). */
static unsigned char
pat(int64_t off)
{
	return ((unsigned char)((off * 2654435761u) >> 13) | 1);
}

/* 1 if path's bytes [off, off+n) follow pat(); n == 0: the whole file. */
static int
has_pattern(const char *path, int64_t off, size_t n)
{
	unsigned char *p;
	size_t len = 0, i;
	int good;

	if ((p = slurp(path, &len)) == NULL)
		return (0);
	if (n == 0)
		n = len - (size_t)off;
	good = (size_t)off + n <= len;
	for (i = 0; good && i < n; i++)
		good = p[off + (int64_t)i] == pat(off + (int64_t)i);
	free(p);
	return (good);
}

/* Pages of path's first n bytes in the page cache; -1 if unknown. */
static long
resident_pages(const char *path, size_t n)
{
	long psz = sysconf(_SC_PAGESIZE), cnt = 0;
	unsigned char vec[4096];
	size_t i, np = (n + (size_t)psz - 1) / (size_t)psz;
	void *m;
	int fd;

	if (np > sizeof(vec) || (fd = open(path, O_RDONLY)) == -1)
		return (-1);
	m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return (-1);
	if (mincore(m, n, vec)) {
		munmap(m, n);
		return (-1);
	}
	munmap(m, n);
	for (i = 0; i < np; i++)
		cnt += vec[i] & 1;
	return (cnt);
}

/* Can files in dir be opened O_DIRECT? */
static int
dir_takes_direct(const char *dir)
{
	const char *f = pj(dir, ".probe");
	int fd = open(f, O_WRONLY | O_CREAT | O_DIRECT, 0600);

	if (fd == -1)
		return (0);
	close(fd);
	unlink(f);
	return (1);
}

/* Write [from, to) of the pattern in pieces of odd sizes. */
static int
feed(struct fs_restore *r, int64_t from, int64_t to)
{
	static unsigned char b[300007];
	int64_t off;
	size_t n, i;

	for (off = from; off < to; off += (int64_t)n) {
		n = (size_t)(to - off) < sizeof(b) ? (size_t)(to - off) :
		    sizeof(b) - (size_t)(off % 7);
		for (i = 0; i < n; i++)
			b[i] = pat(off + (int64_t)i);
		if (fs_restore_data(r, b, n, off))
			return (-1);
	}
	return (0);
}

static void test_direct_writer(void);
static void test_kept(const char *dst);

/*
 * Large files' data goes around the page cache (src/fs/direct.c): it must
 * land exactly, tails and gaps included, and the writer must refuse a
 * file that is not the one just created.
 */
static void
test_direct(void)
{
	char dst[PATH_MAX];
	struct fs_restore *r;
	struct entry e;
	struct stat st;
	long res;
	int direct;

	snprintf(dst, sizeof(dst), "%s/direct", base);
	if (!ok((r = fs_restore_open(dst, 0)) != NULL, "direct: open target"))
		return;
	direct = dir_takes_direct(dst);
	if (!direct)
		diag("no O_DIRECT under %s: the page cache checks skipped",
		    dst);

	/* Contiguous, in odd pieces, with a tail of no whole block. */
	e = mk("big", ENTRY_FILE);
	e.size = 5 * MiB + 123;
	ok(fs_restore_begin(r, &e) == 0 && feed(r, 0, e.size) == 0 &&
	    fs_restore_finish(r) == 0, "direct: a 5 MiB file written");
	/* A gap after the first MiB and a half, then more data. */
	e = mk("gap", ENTRY_FILE);
	e.size = 6 * MiB;
	ok(fs_restore_begin(r, &e) == 0 && feed(r, 0, 3 * MiB / 2) == 0 &&
	    feed(r, 4 * MiB, 5 * MiB + 77) == 0 && fs_restore_finish(r) == 0,
	    "direct: a file with a gap written");
	/* The same writer, after a discard, for the next file. */
	e = mk("dropped", ENTRY_FILE);
	e.size = 3 * MiB;
	ok(fs_restore_begin(r, &e) == 0 && feed(r, 0, 2 * MiB + 5) == 0,
	    "direct: a file begun");
	fs_restore_discard(r);
	e = mk("after", ENTRY_FILE);
	e.size = 2 * MiB;
	ok(fs_restore_begin(r, &e) == 0 && feed(r, 0, e.size) == 0 &&
	    fs_restore_finish(r) == 0, "direct: the next file written");
	ok(fs_restore_close(r) == 0, "direct: close");

	/* Before anything reads it back. */
	if (direct) {
		res = resident_pages(pj(dst, "big"), 4 * MiB);
		ok(res == 0, "direct: the data did not go through the page "
		    "cache (%ld of 1024 pages there)", res);
	}
	ok(lstat(pj(dst, "big"), &st) == 0 && st.st_size == 5 * MiB + 123 &&
	    has_pattern(pj(dst, "big"), 0, 0), "direct: every byte, the tail too");
	ok(lstat(pj(dst, "gap"), &st) == 0 && st.st_size == 6 * MiB &&
	    has_pattern(pj(dst, "gap"), 0, 3 * MiB / 2) &&
	    has_pattern(pj(dst, "gap"), 4 * MiB, MiB + 77) &&
	    st.st_blocks * 512 < 5 * MiB, "direct: data around a hole");
	{
		unsigned char *p;
		size_t n = 0, i;
		int zero = 0;

		if ((p = slurp(pj(dst, "gap"), &n)) != NULL && n == 6 * MiB) {
			zero = 1;
			for (i = 3 * MiB / 2; i < 4 * MiB; i++)
				zero &= p[i] == 0;
			for (i = 5 * MiB + 77; i < 6 * MiB; i++)
				zero &= p[i] == 0;
		}
		free(p);
		ok(zero, "direct: the hole and the end read as zeros");
	}
	ok(!exists(pj(dst, "dropped")), "direct: a discarded file is gone");
	ok(has_pattern(pj(dst, "after"), 0, 0) &&
	    lstat(pj(dst, "after"), &st) == 0 && st.st_size == 2 * MiB,
	    "direct: the file after it is whole");

	/* Data past the entry's size fails the file (it was cut silently
	 * when written directly, then truncated at finish). */
	if ((r = fs_restore_open(dst, FS_RESTORE_FORCE)) != NULL) {
		e = mk("too-long", ENTRY_FILE);
		e.size = 2 * MiB;
		ok(fs_restore_begin(r, &e) == 0 &&
		    feed(r, 0, 3 * MiB) == -1,
		    "direct: data past the size is refused");
		fs_restore_discard(r);
		ok(fs_restore_close(r) == 0 && !exists(pj(dst, "too-long")),
		    "direct: ... and the file removed");
	}
	if (!direct) {
		skip("direct writer: no O_DIRECT under %s", base);
		skip("kept descriptors: no O_DIRECT under %s", base);
		return;
	}
	test_direct_writer();
	test_kept(dst);
}

/* 1 if n bytes read back at off match the pattern. */
static int
reads_back(struct fs_reader *rd, int fd, int64_t off, size_t n)
{
	unsigned char *p;
	size_t i;
	int good;

	if ((p = malloc(n)) == NULL)
		return (0);
	memset(p, 0, n);
	good = fs_reader_read(rd, fd, p, n, off) == 0;
	for (i = 0; good && i < n; i++)
		good = p[i] == pat(off + (int64_t)i);
	free(p);
	return (good);
}

/*
 * A file written directly can be read back through the descriptor its
 * writer kept (restore copies shared chunks from there): at any offset,
 * through the tail written by libarchive, from the file written even if
 * another now has its name.
 */
static void
test_kept(const char *dst)
{
	struct fs_restore *r;
	struct fs_reader *rd = NULL;
	struct entry e;
	unsigned char c;
	int64_t size = 5 * MiB + 123;
	int fd = -1;

	if (!ok((r = fs_restore_open(dst, FS_RESTORE_FORCE)) != NULL &&
	    (rd = fs_reader_new()) != NULL, "kept: open"))
		return;
	e = mk("kept", ENTRY_FILE);
	e.size = size;
	ok(fs_restore_begin(r, &e) == 0 && feed(r, 0, size) == 0 &&
	    fs_restore_finish(r) == 0 && (fd = fs_restore_keep(r)) >= 0 &&
	    fs_restore_keep(r) == -1,
	    "kept: a large file's descriptor, handed over once");
	e = mk("kept-small", ENTRY_FILE);
	e.size = 1000;
	ok(fs_restore_begin(r, &e) == 0 && feed(r, 0, e.size) == 0 &&
	    fs_restore_finish(r) == 0 && fs_restore_keep(r) == -1,
	    "kept: none for a file that went through the page cache");
	ok(fs_restore_close(r) == 0, "kept: close the writer");
	if (fd < 0) {
		fs_reader_free(rd);
		return;
	}
	ok(reads_back(rd, fd, 0, 100) && reads_back(rd, fd, 4095, 2 * MiB + 7) &&
	    reads_back(rd, fd, 3 * MiB, MiB) && reads_back(rd, fd, size - 50, 50),
	    "kept: read back at any offset, the tail too");
	errno = 0;
	ok(fs_reader_read(rd, fd, &c, 1, size) == -1 && errno == EIO,
	    "kept: reading past the end fails (EIO)");
	/* Another file under its name changes nothing read. */
	ok(rename(pj(dst, "kept"), pj(dst, "kept-moved")) == 0 &&
	    write_file(pj(dst, "kept"), "other", 5, 0644) == 0 &&
	    reads_back(rd, fd, size - 4000, 4000),
	    "kept: the file written is read, not the one at its name");
	close(fd);
	fs_reader_free(rd);
}

/* A new empty file for the direct writer's tests. */
static int
fresh(const char *dir, const char *name)
{
	return (write_file(pj(dir, name), "", 0, 0644));
}

/* The writer itself: what it writes, what it hands back, what it refuses
 * (files it did not just create, places others could swap them in). */
static void
test_direct_writer(void)
{
	static unsigned char b[MiB + 5000];
	char dir[PATH_MAX], mnt[PATH_MAX + 16];
	struct direct_writer *d;
	const void *tail;
	size_t tlen, i;
	int64_t toff;
	int dirfd = -1, rc, e;

	snprintf(dir, sizeof(dir), "%s/refuse", base);
	if (!ok(mkdir(dir, 0755) == 0 && (dirfd = open(dir, O_RDONLY |
	    O_DIRECTORY)) != -1, "direct: a directory for refusals"))
		return;
	if (!ok((d = direct_new()) != NULL, "direct: new")) {
		close(dirfd);
		return;
	}
	for (i = 0; i < sizeof(b); i++)
		b[i] = pat((int64_t)i);
	ok(fresh(dir, "new") == 0 &&
	    direct_begin(d, dirfd, "new", 8 * MiB) == 1 &&
	    direct_active(d) && direct_write(d, b, sizeof(b)) == 0 &&
	    direct_next(d) == (int64_t)sizeof(b) &&
	    direct_end(d, &tail, &tlen, &toff) == 0 &&
	    toff == MiB + 4096 && tlen == 904 &&
	    memcmp(tail, b + toff, tlen) == 0 && !direct_active(d),
	    "direct: the aligned part written, the rest handed back");
	ok(has_pattern(pj(dir, "new"), 0, MiB + 4096),
	    "direct: ... and on disk");

	ok(fresh(dir, "small") == 0 &&
	    direct_begin(d, dirfd, "small", 512 * 1024) == 0,
	    "direct: a small file is left to the page cache");
	ok(write_file(pj(dir, "full"), "x", 1, 0644) == 0 &&
	    direct_begin(d, dirfd, "full", 8 * MiB) == 0,
	    "direct: a file with data in it is refused");
	ok(fresh(dir, "two") == 0 &&
	    link(pj(dir, "two"), pj(dir, "two-b")) == 0 &&
	    direct_begin(d, dirfd, "two", 8 * MiB) == 0,
	    "direct: a file with a second name is refused");
	ok(mkdir(pj(dir, "real"), 0755) == 0 && fresh(dir, "real/f") == 0 &&
	    symlink("real", pj(dir, "via")) == 0 &&
	    direct_begin(d, dirfd, "via/f", 8 * MiB) == 0 &&
	    direct_begin(d, dirfd, "real/f", 8 * MiB) == 1,
	    "direct: no symlink is followed on the way");
	direct_abandon(d);
	ok(fresh(base, "outside-f") == 0 &&
	    direct_begin(d, dirfd, "../outside-f", 8 * MiB) == 0,
	    "direct: nothing above the directory is opened");
	ok(mkdir(pj(dir, "shared"), 0755) == 0 &&
	    chmod(pj(dir, "shared"), 0775) == 0 &&
	    fresh(dir, "shared/f") == 0 &&
	    direct_begin(d, dirfd, "shared/f", 8 * MiB) == 0,
	    "direct: a file where others may write is refused");
	if (is_root) {
		ok(fresh(dir, "theirs") == 0 &&
		    chown(pj(dir, "theirs"), 12345, 12345) == 0 &&
		    direct_begin(d, dirfd, "theirs", 8 * MiB) == 0,
		    "direct: another user's file is refused");
		ok(mkdir(pj(dir, "their-dir"), 0755) == 0 &&
		    chown(pj(dir, "their-dir"), 12345, 12345) == 0 &&
		    fresh(dir, "their-dir/f") == 0 &&
		    direct_begin(d, dirfd, "their-dir/f", 8 * MiB) == 0,
		    "direct: a file in another user's directory is refused");
	} else {
		skip("direct: other owners (not root)");
		skip("direct: other owners' directories (not root)");
	}

	/*
	 * Lent memory: whole blocks aligned as the file are written from
	 * it, after the call; what is not aligned is copied.  Once the
	 * ticket is waited for, the caller may change it.
	 */
	{
		size_t n = 3 * MiB + 8192, cut = 12345, k;
		unsigned char *lent = aligned_alloc(4096, n + 4096);
		uint64_t t;
		int good;

		for (k = 0; lent && k < n; k++)
			lent[k] = pat((int64_t)k);
		/* From offset 0: a first piece ending mid-block, then the
		 * rest from lent + cut (aligned as its offset is), then an
		 * unaligned copy of the same bytes for the last MiB. */
		good = lent && fresh(dir, "lent") == 0 &&
		    direct_begin(d, dirfd, "lent", 8 * MiB) == 1 &&
		    direct_lend(d, lent, cut) == 0 &&
		    direct_lend(d, lent + cut, 2 * MiB - cut) == 0;
		t = good ? direct_ticket(d) : 0;
		if (good) {
			direct_wait(d, t);
			memset(lent, 0, 2 * MiB);	/* no longer read */
			memmove(lent + 1, lent + 2 * MiB, n - 2 * MiB);
			good = direct_lend(d, lent + 1, n - 2 * MiB) == 0 &&
			    direct_end(d, &tail, &tlen, &toff) == 0 &&
			    toff + (int64_t)tlen == (int64_t)n;
		}
		ok(good && has_pattern(pj(dir, "lent"), 0, (size_t)toff),
		    "direct: lent memory written, aligned or not, and free "
		    "once its ticket is waited for");
		free(lent);
	}

	/* A write failing on the writer's thread reaches the caller. */
	snprintf(mnt, sizeof(mnt), "%s/full-fs", dir);
	if (is_root && mkdir(mnt, 0755) == 0 &&
	    mount("coffer-test", mnt, "tmpfs", 0, "size=2m,mode=0755") == 0) {
		rc = fresh(mnt, "f") == 0 &&
		    direct_begin(d, dirfd, "full-fs/f", 8 * MiB) == 1;
		for (i = 0; rc && i < 4; i++)
			rc = direct_write(d, b, MiB) == 0;
		e = errno;
		if (rc && direct_end(d, &tail, &tlen, &toff) != 0) {
			rc = 0;
			e = errno;
		}
		ok(!rc && e == ENOSPC && !direct_active(d),
		    "direct: a full disk on the writer's thread is reported "
		    "(%s)", strerror(e));
		/* ... and from lent memory, at the next call. */
		{
			static unsigned char al[MiB] __attribute__((aligned(4096)));

			rc = fresh(mnt, "g") == 0 &&
			    direct_begin(d, dirfd, "full-fs/g", 8 * MiB) == 1;
			for (i = 0; rc && i < 4; i++)
				rc = direct_lend(d, al, MiB) == 0;
			e = errno;
			if (rc && direct_end(d, &tail, &tlen, &toff) != 0) {
				rc = 0;
				e = errno;
			}
			ok(!rc && e == ENOSPC && !direct_active(d),
			    "direct: a lent write failing later is reported "
			    "(%s)", strerror(e));
		}
		umount(mnt);
	} else
		skip("direct: a full disk (needs root and tmpfs)");
	direct_free(d);
	close(dirfd);
}

/* Walk as an unprivileged user: unreadable files are warned and skipped. */
static void
test_unreadable(void)
{
	char dir[PATH_MAX];
	pid_t pid;
	int status;

	if (!is_root) {
		skip("unreadable files: needs root to drop to another user");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/unread", base);
	if (chmod(base, 0711) || mkdir(dir, 0755) ||
	    write_file(pj(dir, "a-readable"), "ok", 2, 0644) ||
	    write_file(pj(dir, "secret"), "no", 2, 0) ||
	    mkdir(pj(dir, "closed"), 0755) ||
	    write_file(pj(dir, "closed/f"), "f", 1, 0644) ||
	    chmod(pj(dir, "closed"), 0) ||
	    write_file(pj(dir, "z-after"), "ok", 2, 0644) ||
	    write_file(pj(dir, "secret.tmp"), "no", 2, 0) ||
	    mkdir(pj(dir, "closed.tmp"), 0)) {
		ok(0, "set up unreadable tree");
		return;
	}
	fflush(stdout);
	if ((pid = fork()) == 0) {
		static char pat[] = "*.tmp";
		char *const ex[] = { pat };
		struct fs_walk_opts o = { .excludes = ex, .nexcludes = 1 };
		struct fs_walk *w;
		struct entry e;
		const void *b;
		size_t len;
		int64_t off;
		int st, got = 0, res = 0;

		if (setgid(65534) || setuid(65534))
			_exit(100);
		log_warnings = 0;
		if ((w = fs_walk_open(dir, &o)) == NULL)
			_exit(101);
		while ((st = fs_walk_next(w, &e)) == 1) {
			if (strcmp(e.path, "secret") == 0) {
				/* Either skipped here or refused on read. */
				if (fs_walk_read(w, &b, &len, &off) != -1)
					res |= 1;
			} else if (strcmp(e.path, "a-readable") == 0 ||
			    strcmp(e.path, "z-after") == 0) {
				if (fs_walk_read(w, &b, &len, &off) != 1 ||
				    len != 2)
					res |= 2;
				got++;
			} else if (strcmp(e.path, "closed/f") == 0)
				res |= 4;
		}
		fs_walk_close(w);
		if (st != 0)
			res |= 8;
		if (got != 2)
			res |= 16;
		/* Exactly the two; excluded unreadable ones are silent. */
		if (log_warnings != 2)
			res |= 32;
		_exit(res);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		ok(0, "fork");
		return;
	}
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "as nobody: unreadable file and directory warned about and "
	    "skipped, excluded ones silently, the walk goes on (status %d)",
	    WEXITSTATUS(status));
	chmod(base, 0700);
}

/* Files that change between the walk's stat and our read. */
static void
test_changing(void)
{
	char dir[PATH_MAX];
	struct fs_walk *w;
	struct entry e;
	const void *b;
	size_t len;
	int64_t off;
	int st, shrank = 99, replaced = 99, reread = 99, again = 99, grown = 0;
	int after = 0;
	int64_t newsize = -1;
	unsigned long w0 = log_warnings;

	snprintf(dir, sizeof(dir), "%s/changing", base);
	if (mkdir(dir, 0755) || mkdir(pj(dir, "d"), 0755) ||
	    write_file(pj(dir, "d/shrinks"), "0123456789", 10, 0644) ||
	    write_file(pj(dir, "d/replaced"), "0123456789", 10, 0644) ||
	    write_file(pj(dir, "other"), "other file", 10, 0644)) {
		ok(0, "set up changing tree");
		return;
	}
	if ((w = fs_walk_open(dir, NULL)) == NULL) {
		ok(0, "walk changing tree");
		return;
	}
	while ((st = fs_walk_next(w, &e)) == 1) {
		if (strcmp(e.path, "d/shrinks") == 0) {
			/* Shrinks after the stat: noticed, then reread. */
			truncate(pj(dir, "d/shrinks"), 4);
			while ((shrank = fs_walk_read(w, &b, &len, &off)) == 1)
				;
			reread = fs_walk_reread(w, &e);
			newsize = e.size;
			while ((again = fs_walk_read(w, &b, &len, &off)) == 1)
				grown += (int)len;
		} else if (strcmp(e.path, "d/replaced") == 0) {
			rename(pj(dir, "other"), pj(dir, "d/replaced"));
			replaced = fs_walk_read(w, &b, &len, &off);
		} else if (e.kind == ENTRY_FILE)
			after++;
	}
	fs_walk_close(w);
	ok(st == 0 && shrank == FS_WALK_CHANGED && reread == 0 && again == 0 &&
	    grown == 4 && newsize == 4, "a file that shrank while walking is "
	    "reported as changed, and a reread gets its new content");
	ok(replaced == -1 && log_warnings >= w0 + 1,
	    "a file replaced while walking is warned about and skipped");
	(void)after;
}

/* The same entries whatever the spelling of the root. */
static void
test_roots(const char *src)
{
	char root[PATH_MAX + 8], cwd[PATH_MAX];
	struct fs_walk *w;
	struct entry e;
	size_t n1 = 0, n2 = 0, n3 = 0;
	int bad = 0, saw_bad_name = 0;

	snprintf(root, sizeof(root), "%s//", src);
	if ((w = fs_walk_open(root, NULL)) != NULL) {
		while (fs_walk_next(w, &e) == 1) {
			n1++;
			if (!entry_path_is_safe(e.path))
				bad = 1;
		}
		fs_walk_close(w);
	}
	/* Under a UTF-8 locale, non-UTF-8 names still come through. */
	if (setlocale(LC_ALL, "C.UTF-8") == NULL)
		diag("no C.UTF-8 locale; walking under C");
	if (getcwd(cwd, sizeof(cwd)) != NULL && chdir(src) == 0) {
		if ((w = fs_walk_open(".", NULL)) != NULL) {
			while (fs_walk_next(w, &e) == 1) {
				n2++;
				if (!entry_path_is_safe(e.path))
					bad = 1;
				if (strcmp(e.path, bad_name) == 0)
					saw_bad_name = 1;
			}
			fs_walk_close(w);
		}
		if ((w = fs_walk_open("./", NULL)) != NULL) {
			while (fs_walk_next(w, &e) == 1)
				n3++;
			fs_walk_close(w);
		}
		if (chdir(cwd))
			bad = 1;
	}
	setlocale(LC_ALL, "C");
	ok(n1 > 0 && n1 == n2 && n2 == n3 && !bad, "root as 'dir//', '.' "
	    "and './' give the same relative paths (%zu, %zu, %zu)", n1, n2,
	    n3);
	ok(saw_bad_name, "non-UTF-8 name unchanged under a UTF-8 locale");

	ok(fs_walk_open(pj(src, "small.txt"), NULL) == NULL,
	    "a file as root is refused");
	ok(fs_walk_open(pj(src, "no-such"), NULL) == NULL,
	    "a missing root is refused");
	ok(fs_walk_open(pj(src, "abs-link"), NULL) == NULL,
	    "a symlink as root is not followed");
}

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return ((double)t.tv_sec + (double)t.tv_nsec / 1e9);
}

/* fs_walk_read throughput on a file in page cache (T_FS_BENCH_MB, 0=off). */
static void
bench(void)
{
	const char *env = getenv("T_FS_BENCH_MB");
	long mb = env ? atol(env) : 1024;
	char dir[PATH_MAX];
	static unsigned char blk[MiB];
	struct fs_walk *w;
	struct entry e;
	const void *b;
	size_t len, maxlen = 0;
	int64_t off, tot = 0;
	double t0, t;
	long i;
	int fd, rc;

	if (mb <= 0)
		return;
	snprintf(dir, sizeof(dir), "%s/bench", base);
	memset(blk, 0x5a, sizeof(blk));
	if (mkdir(dir, 0755) ||
	    (fd = open(pj(dir, "f"), O_WRONLY | O_CREAT, 0644)) == -1) {
		ok(0, "bench setup");
		return;
	}
	for (i = 0; i < mb; i++)
		if (write(fd, blk, sizeof(blk)) != (ssize_t)sizeof(blk))
			break;
	close(fd);
	if ((w = fs_walk_open(dir, NULL)) == NULL || fs_walk_next(w, &e) != 1) {
		fs_walk_close(w);
		ok(0, "bench walk");
		return;
	}
	t0 = now();
	while ((rc = fs_walk_read(w, &b, &len, &off)) == 1) {
		tot += (int64_t)len;
		if (len > maxlen)
			maxlen = len;
	}
	t = now() - t0;
	fs_walk_close(w);
	ok(rc == 0 && tot == (int64_t)mb * MiB, "bench file read whole");
	diag("fs_walk_read: %ld MiB from page cache in %.3f s: %.0f MiB/s "
	    "(blocks of %zu KiB)", mb, t, (double)tot / MiB / t,
	    maxlen / 1024);
	unlink(pj(dir, "f"));
}

/*
 * The root itself, asked for: first, as ".", with its own metadata, which
 * fs_restore_root gives the target after everything in it (a mode without
 * write permission would have kept the rest out).
 */
static void
test_root_entry(void)
{
	char src[PATH_MAX], dst[PATH_MAX];
	struct fs_walk_opts o = { 0 };
	struct timespec ts[2] = { { 1577836800, 5 }, { 1577836800, 5 } };
	struct fs_restore *r = NULL;
	struct fs_walk *w;
	struct entry e, root;
	struct stat st;
	int n = 0, dots = 0, rc;

	snprintf(src, sizeof(src), "%s/rootsrc", base);
	snprintf(dst, sizeof(dst), "%s/rootdst", base);
	if (mkdir(src, 0755) || mkdir(pj(src, "d"), 0755) ||
	    chmod(src, 0551) || utimensat(AT_FDCWD, src, ts, 0)) {
		ok(0, "root entry setup");
		return;
	}
	o.root = 1;
	memset(&root, 0, sizeof(root));
	if ((w = fs_walk_open(src, &o)) == NULL) {
		ok(0, "walk with the root");
		return;
	}
	while ((rc = fs_walk_next(w, &e)) == 1) {
		if (n++ == 0) {
			root = e;
			root.path = FS_ROOT_PATH;
			root.uname = root.gname = NULL;
			ok(strcmp(e.path, FS_ROOT_PATH) == 0 &&
			    e.kind == ENTRY_DIR && e.mode == 0551 &&
			    e.mtime_ns == 1577836800000000005LL,
			    "the root comes first, as '.', with its metadata");
			if ((r = fs_restore_open(dst, 0)) == NULL ||
			    fs_restore_root(r, &root))
				ok(0, "fs_restore_root");
		} else {
			if (strcmp(e.path, FS_ROOT_PATH) == 0)
				dots++;
			if (r != NULL && (fs_restore_begin(r, &e) ||
			    fs_restore_finish(r)))
				ok(0, "restore '%s' below the root", e.path);
		}
	}
	fs_walk_close(w);
	ok(rc == 0 && n == 2 && dots == 0, "and only once (%d entries)", n);
	ok(r != NULL && fs_restore_close(r) == 0, "close the restore");
	ok(stat(dst, &st) == 0 && (st.st_mode & 07777) == 0551 &&
	    st.st_mtim.tv_sec == 1577836800 && st.st_mtim.tv_nsec == 5 &&
	    stat(pj(dst, "d"), &st) == 0,
	    "the target has the root's mode and times, set after its "
	    "contents");
	(void)chmod(src, 0755);
	(void)chmod(dst, 0755);
}

int
main(void)
{
	char src[PATH_MAX], dst[PATH_MAX];
	struct fs_restore *r;

	is_root = geteuid() == 0;
	snprintf(base, sizeof(base), "/tmp/t-fs.XXXXXX");
	if (mkdtemp(base) == NULL) {
		perror("mkdtemp");
		return (1);
	}
	/* Anything written by mistake relative to the cwd lands here. */
	if (chdir(base)) {
		perror("chdir");
		return (1);
	}
	snprintf(src, sizeof(src), "%s/src", base);
	snprintf(dst, sizeof(dst), "%s/dst", base);
	if (!ok(build_source(src) == 0, "build source tree"))
		goto out;
	if (!have_acl)
		diag("no POSIX ACLs here; ACL checks skipped");

	/* Walk and restore interleaved, as a copy would: the restore's
	 * cwd handling must survive archive_read_disk's fchdir()s. */
	r = fs_restore_open(dst, is_root ? FS_RESTORE_OWNER : 0);
	if (!ok(r != NULL, "open restore target"))
		goto out;
	walk_and_restore(src, r);
	ok(fs_restore_close(r) == 0, "close restore (deferred dir metadata)");
	check_walk(src);
	check_restore(src, dst);

	ok(fs_restore_open(dst, 0) == NULL,
	    "a non-empty target is refused without FORCE");
	r = fs_restore_open(dst, FS_RESTORE_FORCE);
	ok(r != NULL, "... and accepted with FORCE");
	if (r != NULL) {
		struct entry e = mk("small.txt", ENTRY_FILE);
		unsigned char *p;
		size_t n = 0;

		e.size = 4;
		ok(fs_restore_begin(r, &e) == 0 &&
		    fs_restore_data(r, "new!", 4, 0) == 0 &&
		    fs_restore_finish(r) == 0 && fs_restore_close(r) == 0,
		    "FORCE overwrites an existing file");
		p = slurp(pj(dst, "small.txt"), &n);
		ok(p && n == 4 && memcmp(p, "new!", 4) == 0,
		    "overwritten content");
		free(p);
	}

	test_hostile();
	test_direct();
	test_roots(src);
	test_root_entry();
	test_changing();
	test_unreadable();
	bench();
out:
	while (nrecs > 0) {
		nrecs--;
		free(recs[nrecs].path);
		free(recs[nrecs].target);
		free(recs[nrecs].acl);
	}
	if (chdir("/") == 0)
		rm_rf(base);
	ok(!exists(base), "temporary directory removed");
	return (tap_done());
}
