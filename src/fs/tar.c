/*
 * Tar streams: a snapshot written as a pax archive (coffer dump), and an
 * archive in any format libarchive reads taken as a backup's source
 * (backup --from-tar).  Entries go through aentry.c, as the walk's and
 * restore's do, so an entry means the same on disk and in a stream.
 */
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "coffer/buf.h"
#include "coffer/entry.h"
#include "coffer/fs.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "fs-int.h"

static const char *
errstr(struct archive *a)
{
	const char *s = archive_error_string(a);

	return (s != NULL ? s : "unknown error");
}

/* Holes are written as zeros, which the pax writer drops (they lie in a
 * hole of the sparse map) without copying them. */
static const uint8_t zeros[64 * 1024];

/* C.UTF-8 for LC_CTYPE, or 0 where there is none. */
static locale_t
utf8_locale(void)
{
	locale_t l;

	if ((l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0)) ==
	    (locale_t)0)
		l = newlocale(LC_CTYPE_MASK, "C.utf8", (locale_t)0);
	return (l);
}

struct fs_tar_out {
	struct archive *a;
	struct archive_entry *ae;
	char *what;
	struct buf tmp, path;
	unsigned long warnings;
	int in_file;		/* a regular file's data is being written */
	int64_t pos, size;
	int broken;		/* a write failed: the stream is cut */
	int fd;
	int discard;		/* failed: what libarchive still writes
				 * (its buffer, the end of the archive) goes
				 * nowhere, and the stream stays cut */
	locale_t utf8;		/* C.UTF-8, for headers; 0: none */
};

/*
 * The stream's writes.  Not archive_write_open_fd: a failed stream must
 * end without libarchive's end of archive, and archive_write_fail, the
 * way to skip it, leaks the writer's block buffer in archive_write_free
 * (libarchive 3.6).  So a failed stream is closed like a good one, into
 * nothing.
 */
static la_ssize_t
tar_write(struct archive *a, void *arg, const void *data, size_t len)
{
	struct fs_tar_out *t = arg;

	if (!t->discard && fsutil_write_all_quiet(t->fd, data, len)) {
		archive_set_error(a, errno, "%s", strerror(errno));
		return (-1);
	}
	return ((la_ssize_t)len);
}

struct fs_tar_out *
fs_tar_out_open(int fd, const char *what)
{
	struct fs_tar_out *t;

	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->what = strdup(what)) == NULL) {
		free(t);
		log_error("out of memory");
		return (NULL);
	}
	buf_init(&t->tmp);
	buf_init(&t->path);
	t->fd = fd;
	if ((t->a = archive_write_new()) == NULL ||
	    (t->ae = archive_entry_new()) == NULL) {
		log_error("out of memory");
		goto err;
	}
	/*
	 * Full pax, not restricted: every entry gets its extended header,
	 * so mtime and ctime keep their nanoseconds.  Names are UTF-8 in
	 * pax; coffer runs in the C locale, where libarchive would take
	 * every byte above 127 for one it cannot translate, so headers are
	 * written under C.UTF-8 (the thread's locale, for that call): a
	 * UTF-8 name goes as it is, another as its bytes, with pax's
	 * hdrcharset=BINARY (which GNU tar ignores, with a warning, and
	 * then takes the bytes too).  Without C.UTF-8, every name so.
	 */
	t->utf8 = utf8_locale();
	if (archive_write_set_format_pax(t->a) != ARCHIVE_OK ||
	    (t->utf8 == (locale_t)0 && archive_write_set_format_option(t->a,
	    "pax", "hdrcharset", "BINARY") != ARCHIVE_OK) ||
	    archive_write_set_bytes_in_last_block(t->a, 1) != ARCHIVE_OK ||
	    archive_write_open2(t->a, t, NULL, tar_write, NULL, NULL) !=
	    ARCHIVE_OK) {
		log_error("cannot write a tar stream to %s: %s", what,
		    errstr(t->a));
		goto err;
	}
	return (t);
err:
	(void)fs_tar_out_close(t, 0);
	return (NULL);
}

static int
out_failed(struct fs_tar_out *t, const char *path)
{
	log_error("cannot write '%s' to %s: %s", path, t->what,
	    errstr(t->a));
	t->broken = 1;
	return (-1);
}

int
fs_tar_out_begin(struct fs_tar_out *t, const struct entry *e,
    const char *link_to, const struct fs_region *data, size_t ndata)
{
	size_t i;
	int st;

	if (t->broken)
		return (-1);
	if (e->kind == ENTRY_SOCK) {
		/* A socket means something only to the process that
		 * bound it; tar leaves them out too. */
		log_info("not writing socket '%s'", e->path);
		return (0);
	}
	if (fs_ae_filetype(e->kind) < 0) {
		log_error("cannot write '%s': unknown kind %d", e->path,
		    e->kind);
		t->broken = 1;
		return (-1);
	}
	buf_reset(&t->path);
	if (buf_puts(&t->path, e->path) || buf_put_u8(&t->path, 0))
		return (-1);
	archive_entry_clear(t->ae);
	archive_entry_copy_pathname(t->ae, e->path);
	if (fs_ae_set(t->ae, e, &t->tmp, &t->warnings))
		return (-1);
	if (e->ctime_ns != 0) {
		struct timespec ts = rs_ns_timespec(e->ctime_ns);

		archive_entry_set_ctime(t->ae, ts.tv_sec, ts.tv_nsec);
	}
	if (link_to != NULL) {
		archive_entry_copy_hardlink(t->ae, link_to);
		archive_entry_set_size(t->ae, 0);
	} else if (e->kind == ENTRY_FILE && data != NULL)
		for (i = 0; i < ndata; i++)
			archive_entry_sparse_add_entry(t->ae, data[i].off,
			    data[i].len);
	if (t->utf8 != (locale_t)0) {
		locale_t old = uselocale(t->utf8);

		st = archive_write_header(t->a, t->ae);
		uselocale(old);
	} else
		st = archive_write_header(t->a, t->ae);
	if (st == ARCHIVE_WARN)
		log_warn("'%s': %s", e->path, errstr(t->a));
	else if (st != ARCHIVE_OK)
		return (out_failed(t, e->path));
	t->in_file = e->kind == ENTRY_FILE && link_to == NULL;
	t->pos = 0;
	t->size = t->in_file ? e->size : 0;
	return (0);
}

/* len bytes of buf (zeros when NULL) as the file's next. */
static int
put(struct fs_tar_out *t, const void *buf, int64_t len)
{
	la_ssize_t n;
	size_t step;

	while (len > 0) {
		if (buf != NULL || len < (int64_t)sizeof(zeros))
			step = (size_t)len;
		else
			step = sizeof(zeros);
		n = archive_write_data(t->a, buf != NULL ? buf : zeros, step);
		if (n < 0 || (size_t)n != step)
			return (out_failed(t, (const char *)t->path.data));
		if (buf != NULL)
			buf = (const uint8_t *)buf + step;
		len -= (int64_t)step;
		t->pos += (int64_t)step;
	}
	return (0);
}

int
fs_tar_out_data(struct fs_tar_out *t, const void *buf, size_t len,
    int64_t offset)
{
	if (t->broken)
		return (-1);
	if (!t->in_file || offset < t->pos || (int64_t)len > t->size ||
	    offset > t->size - (int64_t)len) {
		log_error("internal error: data of '%s' out of order",
		    (const char *)t->path.data);
		t->broken = 1;
		return (-1);
	}
	if (put(t, NULL, offset - t->pos))
		return (-1);
	return (put(t, buf, (int64_t)len));
}

int
fs_tar_out_finish(struct fs_tar_out *t)
{
	if (t->broken)
		return (-1);
	if (t->in_file && put(t, NULL, t->size - t->pos))
		return (-1);
	t->in_file = 0;
	return (0);
}

int
fs_tar_out_close(struct fs_tar_out *t, int ok)
{
	int rc = 0;

	if (t == NULL)
		return (0);
	if (t->a != NULL) {
		if (!ok || t->broken) {
			t->discard = 1;
			(void)archive_write_close(t->a);
		} else if (archive_write_close(t->a) != ARCHIVE_OK) {
			log_error("cannot write a tar stream to %s: %s",
			    t->what, errstr(t->a));
			rc = -1;
		}
		archive_write_free(t->a);
	}
	archive_entry_free(t->ae);
	if (t->utf8 != (locale_t)0)
		freelocale(t->utf8);
	buf_release(&t->tmp);
	buf_release(&t->path);
	free(t->what);
	free(t);
	return (rc);
}

/*
 * A tar stream in (backup --from-tar): an archive in any format and
 * filter libarchive reads, as the entries and data of a walk
 * (fs_walk_open_tar; walk.c hands the fs_walk_* calls here).
 *
 * Names are taken as archive_write_disk's secure flags would write them
 * (ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS, _NODOTDOT, _SYMLINKS): "./"
 * and "." components, repeated and trailing '/' are dropped; an absolute
 * name, a ".." component, a name below a symlink of the archive, one too
 * long for the file system, or one already seen are refused (a warning;
 * the rest goes on).  A hardlink must name a regular file earlier in the
 * archive.  Symlink targets are kept as they are, as a walk keeps them:
 * restore never follows them.  A stream that cannot be read to its end
 * (cut short, corrupt, a header libarchive refuses), a tar archive
 * without its end (end_marked) and one that holds nothing are fatal.
 *
 * What it remembers grows with the entries: a 16-byte key of each name
 * (duplicates, hardlinks' targets, symlinks on the way) and each hardlink
 * until the end, when the caller takes them (fs_walk_link_next).
 */
/* An extended attribute's value Linux can set, and all of them. */
#define XATTR_VALUE_MAX (64 * 1024)
#define XATTRS_MAX (1024 * 1024)

struct tar_link {
	struct entry e;
	void *mem;
	char *to;
};

struct fs_tar_in {
	locale_t utf8;			/* C.UTF-8, for headers; 0: none */
	struct archive *a;
	struct archive_entry *ae;
	char *name;			/* for messages */
	struct fs_walk_opts o;
	int fatal, eof;
	uint64_t nheaders;		/* read so far */
	int64_t last_end;		/* where the last member ended */
	/* The current file's data block, what is left of it. */
	int in_file;
	const uint8_t *blk;
	size_t blen;
	int64_t boff;
	int64_t size, end;		/* the member's; its data's so far */
	/* The current entry's strings. */
	struct buf path, source, uname, gname, target, xattrs, tmp;
	char *acl;
	/* Names seen: key -> enum entry_kind. */
	struct hmap seen;
	size_t nsymlinks;
	struct tar_link *links;
	size_t nlinks, caplinks, nextlink;
};

/*
 * A name's key: two 64-bit hashes of it.  An archive made to collide two
 * names only gets one of them refused (a second member of a name, a name
 * below a symlink) or a hard link to a name it lacks taken until
 * record_links finds nothing there: never a name that escapes.
 */
static void
name_key(uint8_t key[16], const char *s, size_t n)
{
	uint64_t h1 = 14695981039346656037ULL, h2 = 0x9e3779b97f4a7c15ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h1 = (h1 ^ (uint8_t)s[i]) * 1099511628211ULL;
		h2 = (h2 + (uint8_t)s[i]) * 0xff51afd7ed558ccdULL;
		h2 ^= h2 >> 29;
	}
	put_u64(key, h1);
	put_u64(key + 8, h2 ^ n);
}

static int
seen_kind(const struct fs_tar_in *t, const char *s, size_t n)
{
	uint8_t key[16];
	int64_t k;

	name_key(key, s, n);
	return (hmap_get(&t->seen, key, &k) ? (int)k : -1);
}

/*
 * The archive's name as a path of the dataset, in out.  NULL with *why
 * when it is refused.  "" (the archive's "." or "./") is the root.
 */
static const char *
clean_name(const char *name, struct buf *out, const char **why)
{
	const char *p = name, *c;
	size_t n;

	buf_reset(out);
	if (*p == '/') {
		*why = "an absolute name";
		return (NULL);
	}
	while (*p != '\0') {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		for (c = p; *c != '\0' && *c != '/'; c++)
			;
		n = (size_t)(c - p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			*why = "a '..' component";
			return (NULL);
		}
		if (n > NAME_MAX) {
			*why = "a component longer than 255 bytes";
			return (NULL);
		}
		if (!(n == 1 && p[0] == '.') && ((out->len > 0 &&
		    buf_put_u8(out, '/')) || buf_append(out, p, n)))
			goto nomem;
		p = c;
	}
	if (out->len >= PATH_MAX) {
		*why = "a name longer than 4095 bytes";
		return (NULL);
	}
	if (buf_put_u8(out, 0))
		goto nomem;
	out->len--;
	return ((const char *)out->data);
nomem:
	*why = NULL;
	return (NULL);
}

/* A directory above path is a symlink of the archive. */
static int
below_symlink(const struct fs_tar_in *t, const char *path)
{
	const char *s;

	if (t->nsymlinks == 0)
		return (0);
	for (s = strchr(path, '/'); s != NULL; s = strchr(s + 1, '/'))
		if (seen_kind(t, path, (size_t)(s - path)) == ENTRY_SYMLINK)
			return (1);
	return (0);
}

static int
in_fatal(struct fs_tar_in *t)
{
	log_error("cannot read the archive %s: %s", t->name, errstr(t->a));
	t->fatal = 1;
	return (-1);
}

struct fs_tar_in *
fs_tar_in_open(const char *file, const struct fs_walk_opts *o)
{
	struct fs_tar_in *t;
	int st;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		goto nomem;
	t->utf8 = utf8_locale();
	t->o = *o;
	hmap_init(&t->seen, 16);
	if ((t->a = archive_read_new()) == NULL ||
	    (t->ae = archive_entry_new()) == NULL)
		goto nomem;
	if (strcmp(file, "-") == 0)
		t->name = strdup("on standard input");
	else if ((t->name = malloc(strlen(file) + 3)) != NULL)
		snprintf(t->name, strlen(file) + 3, "'%s'", file);
	if (t->name == NULL)
		goto nomem;
	archive_read_support_filter_all(t->a);
	archive_read_support_format_all(t->a);
	/* A file that is no archive is refused, not taken as one entry. */
	st = strcmp(file, "-") == 0 ?
	    archive_read_open_fd(t->a, 0, 64 * 1024) :
	    archive_read_open_filename(t->a, file, 64 * 1024);
	if (st != ARCHIVE_OK) {
		log_error("cannot read the archive %s: %s", t->name,
		    errstr(t->a));
		fs_tar_in_close(t);
		return (NULL);
	}
	return (t);
nomem:
	log_error("out of memory");
	fs_tar_in_close(t);
	return (NULL);
}

static int
set_cstr(struct buf *b, const char *s)
{
	buf_reset(b);
	if (buf_puts(b, s) || buf_put_u8(b, 0))
		return (-1);
	return (0);
}

/* The entry's extended attributes and ACL; 1 refused (*why). */
static int
take_details(struct fs_tar_in *t, struct entry *e, const char **why)
{
	const char *name;
	const void *value;
	size_t size;

	buf_reset(&t->xattrs);
	free(t->acl);
	t->acl = NULL;
	archive_entry_xattr_reset(t->ae);
	while (archive_entry_xattr_next(t->ae, &name, &value, &size) ==
	    ARCHIVE_OK) {
		if (name == NULL || *name == '\0')
			continue;
		if (size > XATTR_VALUE_MAX ||
		    t->xattrs.len + size > XATTRS_MAX) {
			*why = "extended attributes larger than a file "
			    "system takes";
			return (1);
		}
		if (entry_xattrs_add(&t->xattrs, name, value, size))
			return (-1);
	}
	e->xattrs = t->xattrs.len ? t->xattrs.data : NULL;
	e->xattrs_len = t->xattrs.len;
	if (archive_entry_acl_count(t->ae, ARCHIVE_ENTRY_ACL_TYPE_POSIX1E |
	    ARCHIVE_ENTRY_ACL_TYPE_NFS4) > 0 &&
	    (t->acl = archive_entry_acl_to_text(t->ae, NULL,
	    ARCHIVE_ENTRY_ACL_STYLE_EXTRA_ID)) == NULL)
		log_warn("cannot convert the ACL of '%s' to text",
		    (const char *)t->path.data);
	e->acl = t->acl;
	return (0);
}

/* Keep a hardlink for the end.  0 or -1. */
static int
defer_link(struct fs_tar_in *t, const struct entry *e, const char *to)
{
	struct tar_link *l;

	if (array_grow(&t->links, &t->caplinks, t->nlinks,
	    sizeof(*t->links), 16))
		return (-1);
	l = &t->links[t->nlinks];
	if (entry_dup(&l->e, &l->mem, e))
		return (-1);
	if ((l->to = strdup(to)) == NULL) {
		free(l->mem);
		log_error("out of memory");
		return (-1);
	}
	t->nlinks++;
	return (0);
}

/*
 * The current header as *e: 1 taken, 0 left out (warned), -1 fatal.
 */
static int
take_entry(struct fs_tar_in *t, struct entry *e)
{
	struct archive_entry *ae = t->ae;
	const char *raw = archive_entry_pathname(ae), *path, *why = NULL;
	const char *hl = archive_entry_hardlink(ae);
	struct timespec ts;
	uint8_t key[16];
	int kind, rc;

	if (raw == NULL)
		raw = "";
	if (set_cstr(&t->source, raw))
		return (-1);
	if ((path = clean_name(raw, &t->path, &why)) == NULL) {
		if (why == NULL)
			return (-1);
		log_warn("archive %s: '%s' is %s: left out", t->name, raw,
		    why);
		return (0);
	}
	kind = hl != NULL && archive_entry_size(ae) == 0 ? ENTRY_FILE :
	    fs_ae_kind(archive_entry_filetype(ae));
	if (*path == '\0') {
		if (kind != ENTRY_DIR || !t->o.root) {
			log_warn("archive %s: '%s' is not a directory and "
			    "cannot be the root: left out", t->name, raw);
			return (0);
		}
		path = ENTRY_ROOT_PATH;
		if (set_cstr(&t->path, path))
			return (-1);
		path = (const char *)t->path.data;
	}
	if (kind < 0) {
		log_warn("archive %s: '%s' is of an unknown type: left out",
		    t->name, raw);
		return (0);
	}
	if (below_symlink(t, path)) {
		log_warn("archive %s: '%s' lies below a symbolic link of "
		    "the archive: left out", t->name, raw);
		return (0);
	}
	if (seen_kind(t, path, strlen(path)) >= 0) {
		log_warn("archive %s: '%s' appears more than once: the "
		    "first kept", t->name, raw);
		return (0);
	}
	if (fs_walk_excluded(&t->o, path))
		return (0);
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->kind = kind;
	e->mode = (uint32_t)(archive_entry_perm(ae) & 07777);
	e->uid = archive_entry_uid(ae);
	e->gid = archive_entry_gid(ae);
	if (archive_entry_uname(ae) != NULL) {
		if (set_cstr(&t->uname, archive_entry_uname(ae)))
			return (-1);
		e->uname = (const char *)t->uname.data;
	}
	if (archive_entry_gname(ae) != NULL) {
		if (set_cstr(&t->gname, archive_entry_gname(ae)))
			return (-1);
		e->gname = (const char *)t->gname.data;
	}
	e->size = kind == ENTRY_FILE ? archive_entry_size(ae) : 0;
	if (e->size < 0)
		e->size = 0;
	ts.tv_sec = archive_entry_mtime(ae);
	ts.tv_nsec = archive_entry_mtime_nsec(ae);
	e->mtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (archive_entry_ctime_is_set(ae))
		e->ctime_ns = (int64_t)archive_entry_ctime(ae) * 1000000000 +
		    archive_entry_ctime_nsec(ae);
	e->nlink = 1;
	if (kind == ENTRY_CHR || kind == ENTRY_BLK)
		e->rdev = (uint64_t)archive_entry_rdev(ae);
	if (kind == ENTRY_SYMLINK) {
		const char *to = archive_entry_symlink(ae);

		if (to == NULL || *to == '\0') {
			log_warn("archive %s: symbolic link '%s' has no "
			    "target: left out", t->name, raw);
			return (0);
		}
		if (set_cstr(&t->target, to))
			return (-1);
		e->target = (const char *)t->target.data;
	}
	if ((rc = take_details(t, e, &why)) != 0) {
		if (rc < 0)
			return (-1);
		log_warn("archive %s: '%s' has %s: left out", t->name, raw,
		    why);
		return (0);
	}
	name_key(key, path, strlen(path));
	if (hmap_put(&t->seen, key, kind))
		return (-1);
	if (kind == ENTRY_SYMLINK)
		t->nsymlinks++;
	if (hl != NULL && archive_entry_size(ae) == 0) {
		struct buf to = BUF_INIT;
		const char *p;

		if ((p = clean_name(hl, &to, &why)) == NULL ||
		    seen_kind(t, p, strlen(p)) != ENTRY_FILE) {
			if (p == NULL && why == NULL) {
				buf_release(&to);
				return (-1);
			}
			log_warn("archive %s: '%s' is a hard link to '%s', "
			    "%s: left out", t->name, raw, hl, p == NULL ?
			    why : "no regular file before it in the archive");
			buf_release(&to);
			return (0);
		}
		rc = defer_link(t, e, p);
		buf_release(&to);
		return (rc < 0 ? -1 : 0);
	}
	return (1);
}

/*
 * A tar archive ends with zero blocks, which libarchive consumes before
 * it says ARCHIVE_EOF; but an archive cut short between two members (a
 * writer killed after a record of 10 KiB of small files) it takes for a
 * whole one.  So a tar archive whose end consumed nothing after the last
 * member is refused.  Other formats have ends of their own, which
 * libarchive checks.
 */
static int
end_marked(struct fs_tar_in *t)
{
	if ((archive_format(t->a) & ARCHIVE_FORMAT_BASE_MASK) !=
	    ARCHIVE_FORMAT_TAR)
		return (1);
	return (archive_filter_bytes(t->a, 0) > t->last_end);
}

int
fs_tar_in_next(struct fs_tar_in *t, struct entry *e)
{
	locale_t old;
	int st, rc;

	if (t->fatal)
		return (-1);
	if (t->eof)
		return (0);
	t->in_file = 0;
	t->blen = 0;
	for (;;) {
		/* What is left of the last member, so that end_marked can
		 * tell where it ended. */
		if (t->nheaders > 0 &&
		    archive_read_data_skip(t->a) < ARCHIVE_WARN)
			return (in_fatal(t));
		t->last_end = archive_filter_bytes(t->a, 0);
		/* Names as their bytes: see fs_tar_out_open. */
		old = (locale_t)0;
		if (t->utf8 != (locale_t)0)
			old = uselocale(t->utf8);
		st = archive_read_next_header2(t->a, t->ae);
		rc = st == ARCHIVE_OK || st == ARCHIVE_WARN ?
		    take_entry(t, e) : 0;
		if (old != (locale_t)0)
			uselocale(old);
		if (st == ARCHIVE_EOF && t->nheaders == 0) {
			/* An ssh that failed, a stream of nothing: not a
			 * tree that lost every file. */
			log_error("the archive %s holds no entries: no "
			    "snapshot of nothing", t->name);
			t->fatal = 1;
			return (-1);
		}
		if (st == ARCHIVE_EOF && !end_marked(t)) {
			log_error("cannot read the archive %s: it ends without "
			    "tar's end of archive (cut short?)", t->name);
			t->fatal = 1;
			return (-1);
		}
		if (st == ARCHIVE_EOF) {
			t->eof = 1;
			return (0);
		}
		t->nheaders++;
		if (st == ARCHIVE_WARN)
			log_warn("archive %s: %s", t->name, errstr(t->a));
		else if (st != ARCHIVE_OK)
			return (in_fatal(t));
		if (rc < 0) {
			t->fatal = 1;
			return (-1);
		}
		if (rc == 0)
			continue;
		t->in_file = e->kind == ENTRY_FILE && e->size > 0;
		t->size = e->size;
		t->end = 0;
		return (1);
	}
}

int
fs_tar_in_read(struct fs_tar_in *t, void *dst, size_t cap, size_t *len,
    int64_t *offset)
{
	const void *b;
	size_t n;
	int st;

	if (t->fatal)
		return (-1);
	if (!t->in_file)
		return (0);
	while (t->blen == 0) {
		st = archive_read_data_block(t->a, &b, &n, &t->boff);
		if (st == ARCHIVE_EOF) {
			t->in_file = 0;
			return (0);
		}
		if (st != ARCHIVE_OK && st != ARCHIVE_WARN)
			return (in_fatal(t));
		/* libarchive's sparse maps come from the archive: data
		 * outside the member or going back is damage. */
		if (t->boff < t->end || (int64_t)n > t->size ||
		    t->boff > t->size - (int64_t)n) {
			log_error("cannot read the archive %s: '%s' has data "
			    "outside its size", t->name,
			    (const char *)t->source.data);
			t->fatal = 1;
			return (-1);
		}
		t->blk = b;
		t->blen = n;
		t->end = t->boff + (int64_t)n;
	}
	n = t->blen < cap ? t->blen : cap;
	memcpy(dst, t->blk, n);
	*len = n;
	*offset = t->boff;
	t->blk += n;
	t->blen -= n;
	t->boff += (int64_t)n;
	return (1);
}

const char *
fs_tar_in_source(const struct fs_tar_in *t)
{
	return (t->source.len ? (const char *)t->source.data : t->name);
}

int
fs_tar_in_details(struct fs_tar_in *t, struct entry *e)
{
	e->xattrs = t->xattrs.len ? t->xattrs.data : NULL;
	e->xattrs_len = t->xattrs.len;
	e->acl = t->acl;
	return (0);
}

int
fs_tar_in_link_next(struct fs_tar_in *t, struct entry *e, const char **to)
{
	struct tar_link *l;

	if (!t->eof || t->nextlink == t->nlinks)
		return (0);
	l = &t->links[t->nextlink++];
	*e = l->e;
	*to = l->to;
	return (1);
}

void
fs_tar_in_close(struct fs_tar_in *t)
{
	size_t i;

	if (t == NULL)
		return;
	if (t->a != NULL)
		archive_read_free(t->a);
	archive_entry_free(t->ae);
	if (t->utf8 != (locale_t)0)
		freelocale(t->utf8);
	free(t->name);
	buf_release(&t->path);
	buf_release(&t->source);
	buf_release(&t->uname);
	buf_release(&t->gname);
	buf_release(&t->target);
	buf_release(&t->xattrs);
	buf_release(&t->tmp);
	free(t->acl);
	hmap_release(&t->seen);
	for (i = 0; i < t->nlinks; i++) {
		free(t->links[i].mem);
		free(t->links[i].to);
	}
	free(t->links);
	free(t);
}
