/*
 * treecmp: compare two directory trees the way a restore must reproduce
 * them.  Test helper; needs only libc.
 *
 *   treecmp [--root] [--ignore-root] [--symlink-times] [--no-atime] A B
 *
 * For every path relative to A and B: presence, type, permission bits
 * (07777), owner, mtime (ns; directories too, symlinks only with
 * --symlink-times), content, symlink target, device numbers, xattrs (except
 * security.selinux), hardlink groups and allocated size (B may not use more
 * than A plus 64 KiB: holes must stay holes).  The roots themselves are
 * compared only with --root.  Access times are never compared (--no-atime is
 * accepted for clarity).  One line per difference on stdout; paths are
 * escaped C-style.  Exit 0 identical, 1 different, 2 error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define SLACK_BLOCKS (64 * 1024 / 512)	/* st_blocks counts 512-byte units */

struct node {
	char *path;		/* relative; "" is the root */
	struct stat st;
	const char *link;	/* hardlink group: smallest path sharing the inode */
};

struct tree {
	const char *root;
	struct node *v;
	size_t n, cap;
};

static int opt_root, opt_symlink_times;
static int ndiff;

__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("treecmp: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static void *xrealloc(void *p, size_t n)
{
	if ((p = realloc(p, n ? n : 1)) == NULL)
		die("out of memory");
	return p;
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = xrealloc(NULL, la + lb + 2);

	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb + 1);
	return s;
}

/* Absolute-ish path of a node for system calls. */
static char *full(const struct tree *t, const char *rel)
{
	return *rel ? join(t->root, rel) : join(t->root, ".");
}

/* Print a path with control characters, backslash and DEL escaped. */
static void put_path(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\\')
			fputs("\\\\", stdout);
		else if (*p == '\n')
			fputs("\\n", stdout);
		else if (*p == '\t')
			fputs("\\t", stdout);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\%03o", *p);
		else
			putchar(*p);
	}
	if (!*s)
		putchar('.');
}

static void head(const char *what, const char *path)
{
	printf("%s differs: ", what);
	put_path(path);
	ndiff++;
}

__attribute__((format(printf, 3, 4)))
static void differ(const char *what, const char *path, const char *fmt, ...)
{
	va_list ap;

	head(what, path);
	fputs(": ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* "what differs: path: x vs y" where x and y are paths too. */
static void differ_paths(const char *what, const char *path, const char *x,
    const char *y)
{
	head(what, path);
	fputs(": ", stdout);
	put_path(x);
	fputs(" vs ", stdout);
	put_path(y);
	putchar('\n');
}

static void add(struct tree *t, char *rel)
{
	char *p = full(t, rel);

	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 1024;
		t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
	}
	if (lstat(p, &t->v[t->n].st))
		die("cannot lstat '%s': %s", p, strerror(errno));
	t->v[t->n].path = rel;
	t->v[t->n].link = NULL;
	t->n++;
	free(p);
}

static void walk(struct tree *t, const char *rel)
{
	char *p = full(t, rel);
	DIR *d = opendir(p);
	struct dirent *de;

	if (d == NULL)
		die("cannot open directory '%s': %s", p, strerror(errno));
	while ((errno = 0, de = readdir(d)) != NULL) {
		char *child;
		size_t i;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		child = *rel ? join(rel, de->d_name) : strdup(de->d_name);
		if (child == NULL)
			die("out of memory");
		i = t->n;
		add(t, child);
		if (S_ISDIR(t->v[i].st.st_mode))
			walk(t, child);
	}
	if (errno)
		die("cannot read directory '%s': %s", p, strerror(errno));
	closedir(d);
	free(p);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct node *)a)->path,
	    ((const struct node *)b)->path);
}

static int by_inode(const void *a, const void *b)
{
	const struct node *x = *(const struct node *const *)a;
	const struct node *y = *(const struct node *const *)b;

	if (x->st.st_dev != y->st.st_dev)
		return x->st.st_dev < y->st.st_dev ? -1 : 1;
	if (x->st.st_ino != y->st.st_ino)
		return x->st.st_ino < y->st.st_ino ? -1 : 1;
	return strcmp(x->path, y->path);
}

/*
 * Name each hardlink group by its smallest path: two trees have the same
 * partition into groups exactly when every path has the same group name.
 */
static void link_groups(struct tree *t)
{
	struct node **ix = xrealloc(NULL, t->n * sizeof(*ix));
	size_t i, j;

	for (i = 0; i < t->n; i++) {
		ix[i] = &t->v[i];
		ix[i]->link = ix[i]->path;
	}
	qsort(ix, t->n, sizeof(*ix), by_inode);
	for (i = 0; i < t->n; i = j)
		for (j = i + 1; j < t->n &&
		    ix[j]->st.st_dev == ix[i]->st.st_dev &&
		    ix[j]->st.st_ino == ix[i]->st.st_ino; j++)
			ix[j]->link = ix[i]->path;
	free(ix);
}

static void load(struct tree *t, const char *root)
{
	char *rootrel = strdup("");

	if (rootrel == NULL)
		die("out of memory");
	t->root = root;
	add(t, rootrel);
	if (!S_ISDIR(t->v[0].st.st_mode))
		die("'%s' is not a directory", root);
	walk(t, rootrel);
	qsort(t->v, t->n, sizeof(*t->v), by_path);
	link_groups(t);
}

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFCHR: return "chr";
	case S_IFBLK: return "blk";
	case S_IFSOCK: return "sock";
	}
	return "unknown";
}

/* Next offset at or after off holding data; size when only a hole is left. */
static off_t next_data(int fd, off_t off, off_t size)
{
	off_t d = lseek(fd, off, SEEK_DATA);

	if (d < 0)
		return errno == ENXIO ? size : off;
	return d;
}

/*
 * Compare two files of the same size.  A range that is a hole in both is
 * equal (zeros) and is not read: 100 MiB sparse files cost nothing.
 */
static void cmp_content(const struct tree *ta, const struct tree *tb,
    const char *rel, off_t size)
{
	static char ba[1 << 20], bb[1 << 20];
	char *pa = full(ta, rel), *pb = full(tb, rel);
	int fa, fb;
	off_t off = 0, da, db;
	ssize_t na, nb, k;

	if ((fa = open(pa, O_RDONLY | O_NOFOLLOW)) < 0)
		die("cannot open '%s': %s", pa, strerror(errno));
	if ((fb = open(pb, O_RDONLY | O_NOFOLLOW)) < 0)
		die("cannot open '%s': %s", pb, strerror(errno));
	while (off < size) {
		da = next_data(fa, off, size);
		db = next_data(fb, off, size);
		if ((off = da < db ? da : db) >= size)
			break;
		na = pread(fa, ba, sizeof(ba), off);
		nb = pread(fb, bb, sizeof(bb), off);
		if (na <= 0 || nb <= 0)
			die("cannot read '%s': %s", na <= 0 ? pa : pb,
			    na == 0 || nb == 0 ? "file shrank" : strerror(errno));
		if (na != nb || memcmp(ba, bb, na)) {
			for (k = 0; k < na && k < nb && ba[k] == bb[k]; k++)
				;
			differ("content", rel, "first at byte %lld",
			    (long long)(off + k));
			break;
		}
		off += na;
	}
	close(fa);
	close(fb);
	free(pa);
	free(pb);
}

/* The NUL-separated xattr names of p, their total length in *len. */
static char *xattr_names(const char *p, size_t *len)
{
	ssize_t n = llistxattr(p, NULL, 0);
	char *buf;

	if (n < 0 && (errno == ENOTSUP || errno == ENOSYS))
		n = 0;
	if (n < 0)
		die("cannot list xattrs of '%s': %s", p, strerror(errno));
	buf = xrealloc(NULL, n + 1);
	if (n > 0 && (n = llistxattr(p, buf, n)) < 0)
		die("cannot list xattrs of '%s': %s", p, strerror(errno));
	*len = n;
	return buf;
}

static int has_name(const char *list, size_t len, const char *name)
{
	for (size_t i = 0; i < len; i += strlen(list + i) + 1)
		if (!strcmp(list + i, name))
			return 1;
	return 0;
}

static char *xattr_value(const char *p, const char *name, ssize_t *n)
{
	char *v;

	if ((*n = lgetxattr(p, name, NULL, 0)) < 0)
		die("cannot read xattr '%s' of '%s': %s", name, p,
		    strerror(errno));
	v = xrealloc(NULL, *n + 1);
	if (*n > 0 && (*n = lgetxattr(p, name, v, *n)) < 0)
		die("cannot read xattr '%s' of '%s': %s", name, p,
		    strerror(errno));
	return v;
}

static void cmp_xattrs(const struct tree *ta, const struct tree *tb,
    const char *rel)
{
	char *pa = full(ta, rel), *pb = full(tb, rel);
	size_t la, lb, i;
	char *na = xattr_names(pa, &la), *nb = xattr_names(pb, &lb);

	for (i = 0; i < la; i += strlen(na + i) + 1) {
		const char *name = na + i;
		ssize_t va_len, vb_len;
		char *va, *vb;

		if (!strcmp(name, "security.selinux"))
			continue;
		if (!has_name(nb, lb, name)) {
			differ("xattr", rel, "%s only in %s", name, ta->root);
			continue;
		}
		va = xattr_value(pa, name, &va_len);
		vb = xattr_value(pb, name, &vb_len);
		if (va_len != vb_len || memcmp(va, vb, va_len))
			differ("xattr", rel, "%s value", name);
		free(va);
		free(vb);
	}
	for (i = 0; i < lb; i += strlen(nb + i) + 1)
		if (strcmp(nb + i, "security.selinux") &&
		    !has_name(na, la, nb + i))
			differ("xattr", rel, "%s only in %s", nb + i, tb->root);
	free(na);
	free(nb);
	free(pa);
	free(pb);
}

static void cmp_symlink(const struct tree *ta, const struct tree *tb,
    const char *rel)
{
	char *pa = full(ta, rel), *pb = full(tb, rel);
	static char la[65536], lb[65536];
	ssize_t na = readlink(pa, la, sizeof(la) - 1);
	ssize_t nb = readlink(pb, lb, sizeof(lb) - 1);

	if (na < 0 || nb < 0)
		die("cannot readlink '%s': %s", na < 0 ? pa : pb,
		    strerror(errno));
	la[na] = lb[nb] = '\0';
	if (na != nb || memcmp(la, lb, na))
		differ_paths("target", rel, la, lb);
	free(pa);
	free(pb);
}

static void cmp_node(const struct tree *ta, const struct node *a,
    const struct tree *tb, const struct node *b)
{
	const struct stat *x = &a->st, *y = &b->st;
	const char *rel = a->path;

	if ((x->st_mode & S_IFMT) != (y->st_mode & S_IFMT)) {
		differ("type", rel, "%s vs %s", type_name(x->st_mode),
		    type_name(y->st_mode));
		return;
	}
	if ((x->st_mode & 07777) != (y->st_mode & 07777))
		differ("mode", rel, "%04o vs %04o",
		    (unsigned)(x->st_mode & 07777),
		    (unsigned)(y->st_mode & 07777));
	if (x->st_uid != y->st_uid || x->st_gid != y->st_gid)
		differ("owner", rel, "%u:%u vs %u:%u", (unsigned)x->st_uid,
		    (unsigned)x->st_gid, (unsigned)y->st_uid,
		    (unsigned)y->st_gid);
	if ((!S_ISLNK(x->st_mode) || opt_symlink_times) &&
	    (x->st_mtim.tv_sec != y->st_mtim.tv_sec ||
	    x->st_mtim.tv_nsec != y->st_mtim.tv_nsec))
		differ("mtime", rel, "%lld.%09ld vs %lld.%09ld",
		    (long long)x->st_mtim.tv_sec, x->st_mtim.tv_nsec,
		    (long long)y->st_mtim.tv_sec, y->st_mtim.tv_nsec);
	if (strcmp(a->link, b->link))
		differ_paths("hardlink", rel, a->link, b->link);
	if (S_ISREG(x->st_mode)) {
		if (x->st_size != y->st_size)
			differ("size", rel, "%lld vs %lld",
			    (long long)x->st_size, (long long)y->st_size);
		else
			cmp_content(ta, tb, rel, x->st_size);
		if (y->st_blocks > x->st_blocks + SLACK_BLOCKS)
			differ("allocation", rel, "%lld vs %lld blocks",
			    (long long)x->st_blocks, (long long)y->st_blocks);
	} else if (S_ISLNK(x->st_mode)) {
		cmp_symlink(ta, tb, rel);
	} else if ((S_ISCHR(x->st_mode) || S_ISBLK(x->st_mode)) &&
	    x->st_rdev != y->st_rdev) {
		differ("device", rel, "%u,%u vs %u,%u", major(x->st_rdev),
		    minor(x->st_rdev), major(y->st_rdev), minor(y->st_rdev));
	}
	cmp_xattrs(ta, tb, rel);
}

static void tree_free(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].path);
	free(t->v);
}

/* Report a path present in one tree only, but not every path below it. */
static void only_in(const struct tree *t, const char *rel, const char **skip)
{
	size_t n = *skip ? strlen(*skip) : 0;

	if (*skip && !strncmp(rel, *skip, n) && rel[n] == '/')
		return;
	printf("only in %s: ", t->root);
	put_path(rel);
	putchar('\n');
	ndiff++;
	*skip = rel;
}

static void usage(void)
{
	fputs("usage: treecmp [--root] [--ignore-root] [--symlink-times] "
	    "[--no-atime] A B\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	struct tree a = { 0 }, b = { 0 };
	const char *skip_a = NULL, *skip_b = NULL;
	size_t i = 0, j = 0;
	int k;

	for (k = 1; k < argc && argv[k][0] == '-' && argv[k][1]; k++) {
		if (!strcmp(argv[k], "--"))  {
			k++;
			break;
		} else if (!strcmp(argv[k], "--root")) {
			opt_root = 1;
		} else if (!strcmp(argv[k], "--ignore-root")) {
			opt_root = 0;
		} else if (!strcmp(argv[k], "--symlink-times")) {
			opt_symlink_times = 1;
		} else if (strcmp(argv[k], "--no-atime")) {
			usage();
		}
	}
	if (argc - k != 2)
		usage();
	load(&a, argv[k]);
	load(&b, argv[k + 1]);

	/* Both arrays are sorted by path and start with the root "". */
	if (opt_root)
		cmp_node(&a, &a.v[0], &b, &b.v[0]);
	for (i = j = 1; i < a.n || j < b.n;) {
		int c = i == a.n ? 1 : j == b.n ? -1 :
		    strcmp(a.v[i].path, b.v[j].path);

		if (c < 0) {
			only_in(&a, a.v[i++].path, &skip_a);
		} else if (c > 0) {
			only_in(&b, b.v[j++].path, &skip_b);
		} else {
			cmp_node(&a, &a.v[i], &b, &b.v[j]);
			i++;
			j++;
		}
	}
	if (fflush(stdout) || ferror(stdout))
		die("cannot write output: %s", strerror(errno));
	tree_free(&a);
	tree_free(&b);
	return ndiff ? 1 : 0;
}
