#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog-int.h"
#include "coffer/catalog-record.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"

/*
 * A full backup's record rows, written down as the backup records its
 * entries, so that the snapshot record's parts are built from them at the
 * end instead of read back out of the catalog (export.c,
 * catalog_snapshot_export_spool).  Reading a part's rows back (an entry,
 * its path, its content and its chunks, each a probe of a B-tree of its
 * own) cost as much as inserting them into the part; a part's rows are
 * here one read of a file, in memory order of their keys once sorted.
 *
 * The spool is an unlinked file in the catalog's directory, private to the
 * run.  A row:
 *
 *	struct spool_row | path | uname | gname | target | xattrs | acl |
 *	    nchunks x struct spool_chunk
 *
 * in the host's byte order (the file never outlives the process); each
 * string with its NUL, a length of 0 for one that is NULL, so that a row
 * read back is a struct entry pointing into the part's buffer.  Parts
 * are cut as rows come, by the export's rule: at max_entries entries or
 * once about max_bytes of rows are in.  Anything the spool cannot take (a
 * write that fails: a full disk) turns it off; the export then reads the
 * catalog, as it does for what the spool never saw.
 */

#define SPOOL_FLUSH (1u << 20)

struct spool_row {
	uint32_t len;			/* the whole row */
	uint32_t has_content;
	int32_t kind;
	uint32_t mode, nlink;
	/* Bytes stored: a string's with its NUL, 0 when it is NULL. */
	uint32_t pathlen, unamelen, gnamelen, targetlen, acllen;
	uint32_t xattrslen, nchunks;
	int64_t uid, gid, size, mtime_ns, ctime_ns;
	uint64_t ino, dev, rdev;
	uint64_t csize;			/* the content's size */
	uint8_t hash[32];		/* the content's hash */
};

struct spool_chunk {
	uint8_t cid[32];
	uint64_t file_offset;
	uint32_t len;
	uint32_t pad;
};

struct catalog_spool {
	int fd;
	uint64_t off;			/* bytes in the file */
	struct buf w;			/* rows not yet written */
	size_t max_entries, max_bytes;
	uint64_t *ends;			/* each closed part's end offset */
	size_t nends, capends;
	size_t entries, bytes;		/* of the open part */
	int stopped;			/* the export reads the catalog */
};

struct catalog_spool *
catalog_spool_new(struct catalog *c, size_t max_entries, size_t max_bytes)
{
	struct catalog_spool *sp;
	int fd;

	if ((fd = open(c->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
		return (NULL);
	if ((sp = calloc(1, sizeof(*sp))) == NULL) {
		close(fd);
		return (NULL);
	}
	sp->fd = fd;
	sp->max_entries = max_entries > 0 ? max_entries : 1;
	sp->max_bytes = max_bytes;
	buf_init(&sp->w);
	return (sp);
}

void
catalog_spool_free(struct catalog_spool *sp)
{
	if (sp == NULL)
		return;
	if (sp->fd >= 0)
		close(sp->fd);
	buf_release(&sp->w);
	free(sp->ends);
	free(sp);
}

/* Off for good: what it holds goes, and the export reads the catalog. */
void
catalog_spool_off(struct catalog_spool *sp)
{
	if (sp == NULL || sp->stopped)
		return;
	sp->stopped = 1;
	buf_release(&sp->w);
	if (sp->fd >= 0) {
		close(sp->fd);
		sp->fd = -1;
	}
}

int
catalog_spool_usable(const struct catalog_spool *sp)
{
	return (sp != NULL && !sp->stopped);
}

/* Not fsutil_write_all: a write that fails is no error here, the spool
 * only turns off. */
static int
spool_flush(struct catalog_spool *sp)
{
	size_t done = 0;
	ssize_t n;

	while (done < sp->w.len) {
		n = pwrite(sp->fd, sp->w.data + done, sp->w.len - done,
		    (off_t)(sp->off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (-1);
		done += (size_t)n;
	}
	sp->off += sp->w.len;
	buf_reset(&sp->w);
	/* What a file of very many chunks took goes back. */
	buf_trim(&sp->w, 2 * SPOOL_FLUSH);
	return (0);
}

/* Bytes a string takes in a row, its NUL included; 0 for NULL. */
static size_t
str_bytes(const char *s)
{
	return (s != NULL ? strlen(s) + 1 : 0);
}

/* The string's length from the bytes it takes. */
static size_t
str_len(uint32_t bytes)
{
	return (bytes > 0 ? bytes - 1 : 0);
}

static void
put(uint8_t **p, const void *s, size_t n)
{
	if (n > 0)
		memcpy(*p, s, n);
	*p += n;
}

void
catalog_spool_entry(struct catalog_spool *sp, const struct entry *e,
    const uint8_t hash[32], const uint8_t (*cids)[32],
    const struct catalog_chunk_ref *refs, size_t nchunks)
{
	struct spool_row r;
	struct spool_chunk ch;
	uint8_t *p;
	size_t i, len, est;

	if (!catalog_spool_usable(sp))
		return;
	memset(&r, 0, sizeof(r));
	r.kind = e->kind;
	r.mode = e->mode;
	r.nlink = e->nlink;
	r.uid = e->uid;
	r.gid = e->gid;
	r.size = e->size;
	r.mtime_ns = e->mtime_ns;
	r.ctime_ns = e->ctime_ns;
	r.ino = e->ino;
	r.dev = e->dev;
	r.rdev = e->rdev;
	r.pathlen = (uint32_t)str_bytes(e->path);
	r.unamelen = (uint32_t)str_bytes(e->uname);
	r.gnamelen = (uint32_t)str_bytes(e->gname);
	r.targetlen = (uint32_t)str_bytes(e->target);
	r.acllen = (uint32_t)str_bytes(e->acl);
	r.xattrslen = (uint32_t)e->xattrs_len;
	if (hash != NULL) {
		r.has_content = 1;
		memcpy(r.hash, hash, sizeof(r.hash));
		r.csize = (uint64_t)e->size;
		r.nchunks = (uint32_t)nchunks;
	}
	len = sizeof(r) + r.pathlen + r.unamelen + r.gnamelen + r.targetlen +
	    r.xattrslen + r.acllen + (size_t)r.nchunks * sizeof(ch);
	if (len > UINT32_MAX || nchunks > UINT32_MAX ||
	    e->xattrs_len > UINT32_MAX) {
		catalog_spool_off(sp);
		return;
	}
	r.len = (uint32_t)len;

	/* Parts are cut as the export cuts slices (copy_slice). */
	est = cat_part_row_bytes(str_len(r.pathlen) + str_len(r.unamelen) +
	    str_len(r.gnamelen) + str_len(r.targetlen) + str_len(r.acllen) +
	    r.xattrslen, hash != NULL ? (int64_t)nchunks : -1);
	if (sp->entries > 0 && cat_part_full(sp->entries, sp->bytes,
	    sp->max_entries, sp->max_bytes)) {
		if ((sp->w.len > 0 && spool_flush(sp)) ||
		    array_grow(&sp->ends, &sp->capends, sp->nends,
		    sizeof(*sp->ends), 16)) {
			catalog_spool_off(sp);
			return;
		}
		sp->ends[sp->nends++] = sp->off;
		sp->entries = sp->bytes = 0;
	}
	if (buf_reserve(&sp->w, len)) {
		catalog_spool_off(sp);
		return;
	}
	p = sp->w.data + sp->w.len;
	put(&p, &r, sizeof(r));
	put(&p, e->path, r.pathlen);
	put(&p, e->uname, r.unamelen);
	put(&p, e->gname, r.gnamelen);
	put(&p, e->target, r.targetlen);
	put(&p, e->xattrs, r.xattrslen);
	put(&p, e->acl, r.acllen);
	for (i = 0; i < r.nchunks; i++) {
		memset(&ch, 0, sizeof(ch));
		memcpy(ch.cid, cids[i], sizeof(ch.cid));
		ch.file_offset = refs[i].file_offset;
		ch.len = refs[i].len;
		put(&p, &ch, sizeof(ch));
	}
	sp->w.len += len;
	sp->entries++;
	sp->bytes += est;
	if (sp->w.len >= SPOOL_FLUSH && spool_flush(sp))
		catalog_spool_off(sp);
}

/* The parts: the closed ones and the last (empty when no row came). */
size_t
cat_spool_parts(const struct catalog_spool *sp)
{
	return (sp->nends + 1);
}

void
catalog_spool_finish(struct catalog_spool *sp)
{
	if (!catalog_spool_usable(sp))
		return;
	if (sp->w.len > 0 && spool_flush(sp))
		catalog_spool_off(sp);
	buf_release(&sp->w);
}

void
cat_spool_read_release(struct cat_spool_read *rd)
{
	buf_release(&rd->raw);
	free(rd->row);
	memset(rd, 0, sizeof(*rd));
}

/* Part i's rows: its bytes of the file, the last one's ending where the
 * file ends, each row checked whole. */
int
cat_spool_part(const struct catalog_spool *sp, size_t i,
    struct cat_spool_read *rd)
{
	uint64_t lo, hi;
	size_t at;

	rd->nrows = 0;
	lo = i == 0 ? 0 : sp->ends[i - 1];
	hi = i < sp->nends ? sp->ends[i] : sp->off;
	if (sp->w.len > 0 || hi < lo || hi - lo > SIZE_MAX - 1) {
		log_error("internal error: a bad part of spooled rows");
		return (-1);
	}
	buf_reset(&rd->raw);
	if (buf_reserve(&rd->raw, (size_t)(hi - lo)) ||
	    fsutil_pread_all(sp->fd, rd->raw.data, (size_t)(hi - lo),
	    (off_t)lo, "the snapshot's spooled rows"))
		return (-1);
	rd->raw.len = (size_t)(hi - lo);
	for (at = 0; at < rd->raw.len;) {
		struct spool_row r;
		size_t need;

		if (rd->raw.len - at < sizeof(r))
			goto bad;
		memcpy(&r, rd->raw.data + at, sizeof(r));
		need = sizeof(r) + (size_t)r.pathlen + r.unamelen +
		    r.gnamelen + r.targetlen + r.xattrslen + r.acllen +
		    (size_t)r.nchunks * sizeof(struct spool_chunk);
		/* Every row has a path, NUL-terminated: the export sorts
		 * by it with strcmp and leaves out rows without one. */
		if (r.len != need || r.len > rd->raw.len - at ||
		    r.pathlen == 0 ||
		    rd->raw.data[at + sizeof(r) + r.pathlen - 1] != '\0')
			goto bad;
		if (array_grow(&rd->row, &rd->caprows, rd->nrows,
		    sizeof(*rd->row), 1024))
			return (-1);
		rd->row[rd->nrows++] = rd->raw.data + at;
		at += r.len;
	}
	return (0);
bad:
	log_error("internal error: the snapshot's spooled rows are damaged");
	return (-1);
}

/* The string of n bytes at *p (NULL when n is 0); *p moves past it. */
static const char *
take_str(const uint8_t **p, uint32_t n)
{
	const char *s = n > 0 ? (const char *)*p : NULL;

	*p += n;
	return (s);
}

void
cat_spool_row(const uint8_t *p, struct cat_spool_row *w)
{
	const uint8_t *row = p;
	struct spool_row r;

	memcpy(&r, p, sizeof(r));
	memset(w, 0, sizeof(*w));
	p += sizeof(r);
	w->e.kind = r.kind;
	w->e.mode = r.mode;
	w->e.nlink = r.nlink;
	w->e.uid = r.uid;
	w->e.gid = r.gid;
	w->e.size = r.size;
	w->e.mtime_ns = r.mtime_ns;
	w->e.ctime_ns = r.ctime_ns;
	w->e.ino = r.ino;
	w->e.dev = r.dev;
	w->e.rdev = r.rdev;
	w->e.path = take_str(&p, r.pathlen);
	w->e.uname = take_str(&p, r.unamelen);
	w->e.gname = take_str(&p, r.gnamelen);
	w->e.target = take_str(&p, r.targetlen);
	w->e.xattrs = r.xattrslen > 0 ? p : NULL;
	w->e.xattrs_len = r.xattrslen;
	p += r.xattrslen;
	w->e.acl = take_str(&p, r.acllen);
	if (r.has_content) {
		w->hash = cat_spool_hash(row);
		w->has_content = 1;
		w->csize = r.csize;
		w->nchunks = r.nchunks;
		w->chunks = p;
	}
}

const char *
cat_spool_path(const uint8_t *p)
{
	return ((const char *)p + sizeof(struct spool_row));
}

const uint8_t *
cat_spool_hash(const uint8_t *p)
{
	uint32_t has;

	memcpy(&has, p + offsetof(struct spool_row, has_content),
	    sizeof(has));
	return (has ? p + offsetof(struct spool_row, hash) : NULL);
}

/* Chunk k of a row: its id, offset and length. */
void
cat_spool_chunk(const struct cat_spool_row *w, size_t k, const uint8_t **cid,
    uint64_t *file_offset, uint32_t *len)
{
	struct spool_chunk ch;

	memcpy(&ch, w->chunks + k * sizeof(ch), sizeof(ch));
	*cid = w->chunks + k * sizeof(ch);	/* cid is the first member */
	*file_offset = ch.file_offset;
	*len = ch.len;
}
