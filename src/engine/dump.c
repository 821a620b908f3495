/*
 * coffer dump: a snapshot as a pax tar stream (fs_tar_out), or one
 * regular file's content as it is.  Entries come from the resolved chain
 * in path order, as restore takes them; each chunk is read as restore
 * reads one (rst_read_chunk: authenticated, decompressed, its keyed hash
 * checked) into one buffer of the chunker's largest size, and written
 * before the next is read: memory does not grow with a file's size.  A
 * chunk that fails cuts the stream there, with no end of archive, so that
 * no reader takes what came before for the whole snapshot; the file is
 * named.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/engine-dump.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "restore-int.h"

/* Chunk locations read from the catalog at once (each_page). */
#define DUMP_PAGE 4096

/* A raw file's holes, written as zeros. */
static const uint8_t zeros[64 * 1024];

struct dump {
	struct repo *repo;
	struct catalog *cat;
	const struct catalog_snapshot *s;
	const struct dump_opts *o;
	struct dump_result *res;
	uint32_t chunk_max;
	struct rworker w;
	uint8_t *chunk;			/* chunk_max bytes */
	struct fs_tar_out *tar;		/* NULL: raw */
	/* Hardlink groups: (dev, ino, content) -> index into link_paths,
	 * the group's first name. */
	struct hmap links;
	char **link_paths;
	size_t nlinks, caplinks;
	int damaged;
	int missing;
};

/* A further name of a file written earlier: its first name, or NULL
 * (then e is remembered as the first of its group, if it has others).
 * -1 via *err when out of memory. */
static const char *
first_name(struct dump *d, const struct entry *e, int *err)
{
	uint8_t key[24];
	int64_t idx;

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (NULL);
	rst_link_key(key, e);
	if (hmap_get(&d->links, key, &idx))
		return (d->link_paths[idx]);
	if (array_grow(&d->link_paths, &d->caplinks, d->nlinks,
	    sizeof(*d->link_paths), 16) ||
	    (d->link_paths[d->nlinks] = strdup(e->path)) == NULL ||
	    hmap_put(&d->links, key, (int64_t)d->nlinks)) {
		log_error("out of memory");
		*err = 1;
		return (NULL);
	}
	d->nlinks++;
	return (NULL);
}

/*
 * Each page of e's chunks, checked (within the file, in order, across
 * pages too) before fn sees it: the list of a file of terabytes is not
 * held whole.  0, or -1 (reported; damage counted in d->damaged).
 */
typedef int (*page_fn)(struct dump *, const struct entry *,
    const struct catalog_chunk_loc *, size_t, void *);

static int
each_page(struct dump *d, const struct entry *e, page_fn fn, void *arg)
{
	struct catalog_chunk_loc *locs;
	int64_t seq = -1;
	uint64_t end = 0;
	size_t n;
	int rc;

	if (e->content_id == 0)
		return (0);
	do {
		if (catalog_content_chunks_page(d->cat, e->content_id, &seq,
		    DUMP_PAGE, &locs, &n))
			return (-1);
		if (!rst_locs_sane(d->s->sid, d->chunk_max, e, locs, n) ||
		    (n > 0 && locs[0].file_offset < end)) {
			if (n > 0 && locs[0].file_offset < end)
				log_error("snapshot %s: cannot restore '%s': "
				    "the catalog's chunks of it overlap",
				    d->s->sid, e->path);
			d->damaged = 1;
			free(locs);
			return (-1);
		}
		if (n > 0)
			end = locs[n - 1].file_offset + locs[n - 1].plain_len;
		rc = fn(d, e, locs, n, arg);
		free(locs);
		if (rc)
			return (-1);
	} while (n == DUMP_PAGE);
	return (0);
}

struct regions {
	struct fs_region *v;
	size_t n, cap;
};

/* A page's chunks into the file's data regions, merged where they
 * touch: as many as the file has holes, not chunks. */
static int
add_regions(struct dump *d, const struct entry *e,
    const struct catalog_chunk_loc *locs, size_t n, void *arg)
{
	struct regions *r = arg;
	size_t i;

	for (i = 0; i < n; i++) {
		int64_t off = (int64_t)locs[i].file_offset;

		if (r->n > 0 && r->v[r->n - 1].off + r->v[r->n - 1].len ==
		    off) {
			r->v[r->n - 1].len += locs[i].plain_len;
			continue;
		}
		if (array_grow(&r->v, &r->cap, r->n, sizeof(*r->v), 1))
			return (-1);
		r->v[r->n].off = off;
		r->v[r->n++].len = locs[i].plain_len;
	}
	return (0);
}

/* The data regions of a file with holes in *r; none (r->n 0) when it
 * has no hole or is empty.  0 or -1. */
static int
regions(struct dump *d, const struct entry *e, struct regions *r)
{
	memset(r, 0, sizeof(*r));
	if (e->size == 0)
		return (0);
	if (each_page(d, e, add_regions, r))
		return (-1);
	if (r->n == 1 && r->v[0].off == 0 && r->v[0].len == e->size)
		r->n = 0;
	else if (r->n == 0) {
		/* All hole: an empty region at its end, as GNU tar
		 * writes one. */
		if ((r->v = calloc(1, sizeof(*r->v))) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		r->v[0].off = e->size;
		r->n = 1;
	}
	return (0);
}

/* The raw stream's len bytes of buf, or zeros. */
static int
raw_put(struct dump *d, const void *buf, int64_t len)
{
	size_t step;

	if (buf != NULL)
		return (fsutil_write_all(d->o->fd, buf, (size_t)len,
		    d->o->what));
	for (; len > 0; len -= (int64_t)step) {
		step = len < (int64_t)sizeof(zeros) ? (size_t)len :
		    sizeof(zeros);
		if (fsutil_write_all(d->o->fd, zeros, step, d->o->what))
			return (-1);
	}
	return (0);
}

/* A page of a file's chunks, one by one, to the tar stream or raw;
 * *arg is where the last one ended. */
static int
put_chunks(struct dump *d, const struct entry *e,
    const struct catalog_chunk_loc *locs, size_t n, void *arg)
{
	int64_t *pos = arg;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct catalog_chunk_loc *l = &locs[i];

		if (signals_caught())
			return (-1);
		if (rst_read_chunk(d->repo, &d->w, l, d->chunk, 1)) {
			log_error("snapshot %s: '%s' is damaged at offset "
			    "%llu: the stream stops here", d->s->sid,
			    e->path, (unsigned long long)l->file_offset);
			(void)catalog_chunks_mark_damaged(d->cat, &l->rowid,
			    1);
			d->damaged = 1;
			return (-1);
		}
		if (d->tar != NULL ? fs_tar_out_data(d->tar, d->chunk,
		    l->plain_len, (int64_t)l->file_offset) :
		    (raw_put(d, NULL, (int64_t)l->file_offset - *pos) ||
		    raw_put(d, d->chunk, l->plain_len)))
			return (-1);
		*pos = (int64_t)(l->file_offset + l->plain_len);
		d->res->bytes += l->plain_len;
	}
	return (0);
}

/* A regular file's content, chunk by chunk.  0, or -1 (reported). */
static int
dump_content(struct dump *d, const struct entry *e)
{
	int64_t pos = 0;

	if (each_page(d, e, put_chunks, &pos))
		return (-1);
	if (d->tar != NULL)
		return (fs_tar_out_finish(d->tar));
	return (raw_put(d, NULL, e->size - pos));
}

/* One entry.  0, or -1 (reported). */
static int
dump_entry(struct dump *d, const struct entry *e)
{
	struct regions reg = { NULL, 0, 0 };
	const char *link;
	int err = 0, rc = -1;

	/* The catalog is not authenticated as the records are. */
	if (!entry_path_is_root(e->path) && !entry_path_is_safe(e->path)) {
		log_error("snapshot %s: refusing to write unsafe path '%s'",
		    d->s->sid, e->path);
		d->damaged = 1;
		return (-1);
	}
	link = first_name(d, e, &err);
	if (err)
		return (-1);
	/* A tar header holds the sparse map: the regions come first. */
	if (d->tar != NULL && e->kind == ENTRY_FILE && link == NULL &&
	    regions(d, e, &reg))
		goto out;
	if (d->tar != NULL && fs_tar_out_begin(d->tar, e, link,
	    reg.n > 0 ? reg.v : NULL, reg.n))
		goto out;
	if (e->kind == ENTRY_FILE && link == NULL && dump_content(d, e))
		goto out;
	d->res->entries++;
	rc = 0;
out:
	free(reg.v);
	return (rc);
}

/* Everything at or below under (NULL: the whole snapshot). */
static int
dump_under(struct dump *d, const char *under)
{
	struct catalog_iter *it;
	struct entry e;
	int rc, seen = 0;

	if ((it = catalog_entries(d->cat, d->s->id, under)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		seen = 1;
		if (signals_caught() || dump_entry(d, &e)) {
			rc = -1;
			break;
		}
	}
	catalog_iter_free(it);
	if (rc < 0)
		return (-1);
	if (under != NULL && !seen) {
		log_error("'%s' is not in snapshot %s", under, d->s->sid);
		d->missing = 1;
		return (-1);
	}
	return (0);
}

/* With one path and no --tar: 1 when it is a regular file (written raw),
 * 0 when not, -1 error. */
static int
one_file(struct dump *d, struct entry *e, void **mem)
{
	struct catalog_iter *it;
	int rc;

	*mem = NULL;
	if (d->o->npaths != 1 || d->o->tar)
		return (0);
	if ((it = catalog_entries(d->cat, d->s->id, d->o->paths[0])) ==
	    NULL)
		return (-1);
	if ((rc = catalog_iter_next(it, e)) == 1) {
		if (e->kind != ENTRY_FILE)
			rc = 0;
		else if (entry_dup(e, mem, e))
			rc = -1;
	}
	catalog_iter_free(it);
	return (rc);
}

enum engine_result
engine_dump(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct dump_opts *o,
    struct dump_result *res)
{
	struct dump d;
	struct entry one;
	void *mem = NULL;
	double t0 = now_monotonic();
	unsigned long warn0 = log_warning_count();
	int status = ENGINE_ERROR, rc = -1, raw;
	size_t i;

	memset(res, 0, sizeof(*res));
	if (engine_need_read(r, "dump"))
		return (ENGINE_REFUSED);
	if (engine_need_complete(s))
		return (ENGINE_REFUSED);
	memset(&d, 0, sizeof(d));
	d.repo = r;
	d.cat = c;
	d.s = s;
	d.o = o;
	d.res = res;
	d.chunk_max = repo_chunker_params(r)->max;
	hmap_init(&d.links, 24);
	if ((d.w.z = compressor_new(1)) == NULL)
		goto out;
	if ((d.chunk = malloc(d.chunk_max)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	if (catalog_set_cache(c, RESTORE_CATALOG_KIB))
		goto out;
	if ((raw = one_file(&d, &one, &mem)) < 0)
		goto out;
	if (raw) {
		res->raw = 1;
		rc = dump_entry(&d, &one);
	} else if ((d.tar = fs_tar_out_open(o->fd, o->what)) == NULL)
		goto out;
	else if (o->npaths == 0)
		rc = dump_under(&d, NULL);
	else
		for (i = 0, rc = 0; i < o->npaths && rc == 0; i++)
			rc = dump_under(&d, o->paths[i]);
	if (fs_tar_out_close(d.tar, rc == 0))
		rc = -1;
	d.tar = NULL;
	status = rc == 0 ? (log_warning_count() > warn0 ? ENGINE_WARN : ENGINE_OK) :
	    d.damaged ? ENGINE_DAMAGED :
	    d.missing ? ENGINE_REFUSED : ENGINE_ERROR;
out:
	(void)fs_tar_out_close(d.tar, 0);
	if (signals_caught() && status != ENGINE_OK &&
	    status != ENGINE_WARN) {
		log_error("dump interrupted by %s: the stream is cut short",
		    signals_name(signals_caught()));
		status = ENGINE_INTERRUPTED;
	}
	free(mem);
	free(d.chunk);
	rst_worker_release(&d.w);
	for (i = 0; i < d.nlinks; i++)
		free(d.link_paths[i]);
	free(d.link_paths);
	hmap_release(&d.links);
	if (catalog_set_cache(c, CATALOG_CACHE_KIB))
		status = ENGINE_ERROR;
	res->seconds = now_monotonic() - t0;
	return (status);
}
