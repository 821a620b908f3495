/*
 * Audit: the integrity of the live data, not of the backup.  Walk the
 * dataset's source and compare it with a snapshot's view.  A regular file
 * whose size and mtime still match its entry should still have the same
 * content; it is read and cut into chunks exactly as backup cuts it (the
 * repository's keyed chunker, chunks never spanning a hole, keyed chunk
 * ids).  When the chunk list differs from the entry's and the bytes
 * differ too (confirm()), that is silent corruption: bit rot, a bad disk
 * or controller, a write that bypassed the file system's timestamps.  A
 * file whose size or mtime changed was modified by someone and is not
 * read.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/engine-check.h"
#include "coffer/engine.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "integrity-int.h"

/* An entry of the snapshot's view. */
struct old {
	char *path;
	char *target;
	int kind;
	int64_t size, mtime_ns;
	int64_t content_id;
	int seen;
};

struct change {
	char *path;
	int change;
	int kind;
	int64_t offset;
};

struct audit {
	struct repo *repo;
	struct catalog *cat;
	struct audit_result *res;
	struct chunker *chunker;
	uint32_t max_chunk;

	struct old *olds;
	size_t nolds;
	struct hmap by_path;		/* hash of the path -> index in olds */

	struct change *changes;
	size_t nchanges, capchanges;

	/* Rechunking the current file. */
	struct buf tmp;			/* for confirm() */
	struct catalog_chunk_loc *want;	/* the entry's chunks */
	size_t nwant, wanti;
	int64_t differs;		/* first difference, or -1 */

	struct progress progress;
};

static void
path_key(const char *path, uint8_t key[32])
{
	ccrypto_plain_hash(path, strlen(path), key);
}

static int
add_change(struct audit *a, int change, const char *path, int kind,
    int64_t offset)
{
	struct change *c;

	if (array_grow(&a->changes, &a->capchanges, a->nchanges,
	    sizeof(*a->changes), 64))
		return (-1);
	c = &a->changes[a->nchanges];
	if ((c->path = strdup(path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	c->change = change;
	c->kind = kind;
	c->offset = offset;
	a->nchanges++;
	switch (change) {
	case AUDIT_CORRUPT:
		a->res->corrupt++;
		break;
	case AUDIT_MODIFIED:
		a->res->modified++;
		break;
	case AUDIT_MISSING:
		a->res->missing++;
		break;
	case AUDIT_NEW:
		a->res->added++;
		break;
	default:
		a->res->unreadable++;
	}
	return (0);
}

/* The snapshot's view, in memory, findable by path. */
static int
load_view(struct audit *a, int64_t snapshot_id)
{
	struct catalog_iter *it;
	struct entry e;
	struct old *o;
	uint8_t key[32];
	size_t cap = 0;
	int rc;

	if ((it = catalog_entries(a->cat, snapshot_id, NULL)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		if (array_grow(&a->olds, &cap, a->nolds, sizeof(*a->olds),
		    1024)) {
			rc = -1;
			break;
		}
		o = &a->olds[a->nolds];
		memset(o, 0, sizeof(*o));
		o->kind = e.kind;
		o->size = e.size;
		o->mtime_ns = e.mtime_ns;
		o->content_id = e.content_id;
		o->path = strdup(e.path);
		o->target = e.target ? strdup(e.target) : NULL;
		if (o->path == NULL || (e.target && o->target == NULL)) {
			free(o->path);
			log_error("out of memory");
			rc = -1;
			break;
		}
		a->nolds++;
		path_key(e.path, key);
		if (hmap_put(&a->by_path, key, (int64_t)(a->nolds - 1))) {
			rc = -1;
			break;
		}
	}
	catalog_iter_free(it);
	return (rc < 0 ? -1 : 0);
}

/*
 * One chunk of the live file against the next chunk of the entry.  1 at
 * the first difference (a->differs: where): that decides, stop reading.
 */
static int
compare_chunk(void *arg, const uint8_t *data, size_t len, int64_t off)
{
	struct audit *a = arg;
	uint8_t id[CCRYPTO_ID_BYTES];
	const struct catalog_chunk_loc *w;

	ccrypto_chunk_id(repo_keys(a->repo), data, len, id);
	if (a->wanti >= a->nwant) {
		a->differs = off;
		return (1);
	}
	w = &a->want[a->wanti++];
	if ((int64_t)w->file_offset != off || w->plain_len != len ||
	    memcmp(w->cid, id, sizeof(id)) != 0) {
		a->differs = off < (int64_t)w->file_offset ? off :
		    (int64_t)w->file_offset;
		return (1);
	}
	return (0);
}

/*
 * Rehash the current file of the walk against entry o, cut as backup
 * cuts it (chunk_stream).  0 compared (a->differs is -1 or where it
 * differs), 1 unreadable (warned), -1 fatal.
 */
static int
rehash(struct audit *a, struct fs_walk *w, const struct old *o)
{
	struct chunk_stream *cs;
	const void *data;
	int64_t off;
	size_t len;
	int rc, fed = 0;

	free(a->want);
	a->want = NULL;
	a->nwant = a->wanti = 0;
	a->differs = -1;
	if (o->content_id != 0 && catalog_content_chunks(a->cat,
	    o->content_id, &a->want, &a->nwant))
		return (-1);
	if ((cs = chunk_stream_new(a->chunker, a->max_chunk,
	    (uint64_t)o->size, compare_chunk, a)) == NULL)
		return (-1);
	a->res->files++;
	while ((rc = fs_walk_read(w, &data, &len, &off)) == 1) {
		a->res->bytes += (int64_t)len;
		progress_update(&a->progress, 0, len);
		/* The first difference decides: no need to read on. */
		if ((fed = chunk_stream_feed(cs, data, len, off)) != 0)
			break;
	}
	if (rc == 0 && fed == 0)
		fed = chunk_stream_finish(cs);
	chunk_stream_free(cs);
	if (fed < 0)
		return (-1);
	if (fed == 0 && rc < 0)
		return (1);
	if (a->differs < 0 && a->wanti < a->nwant)
		a->differs = (int64_t)a->want[a->wanti].file_offset;
	return (0);
}

/*
 * The chunks differ: make sure the bytes do.  The same bytes cut
 * differently are the same content with its holes mapped differently (a
 * copy that filled them with zeros, a file system that reports zeroed
 * blocks as holes): not corruption.  So compare once more at the entry's
 * own chunk boundaries, holes as zeros.  0 compared (a->differs is -1 or
 * where the bytes differ), 1 unreadable (warned).
 */
static int
confirm(struct audit *a, struct fs_walk *w, const struct entry *e)
{
	const char *path = fs_walk_source_path(w);
	int64_t where = 0;
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		log_warn_errno("cannot read '%s'", path);
		return (1);
	}
	rc = integrity_content_matches(repo_keys(a->repo), fd, a->want,
	    a->nwant, e->size, &a->tmp, &where, NULL);
	close(fd);
	if (rc < 0) {
		log_warn_errno("cannot read '%s'", path);
		return (1);
	}
	a->differs = rc ? -1 : where;
	if (rc) {
		a->res->recut++;
		log_info("audit: '%s': the same bytes, cut into other chunks "
		    "(holes mapped differently)", path);
	}
	return (0);
}

/* One live entry against the view. */
static int
audit_entry(struct audit *a, struct fs_walk *w, const struct entry *e)
{
	struct old *o;
	uint8_t key[32];
	int64_t idx;
	int rc;

	a->res->entries++;
	progress_update(&a->progress, 1, 0);
	path_key(e->path, key);
	if (!hmap_get(&a->by_path, key, &idx) ||
	    strcmp(a->olds[idx].path, e->path) != 0)
		return (add_change(a, AUDIT_NEW, e->path, e->kind, -1));
	o = &a->olds[idx];
	o->seen = 1;
	if (o->kind != e->kind)
		return (add_change(a, AUDIT_MODIFIED, e->path, e->kind, -1));
	if (e->kind == ENTRY_SYMLINK) {
		if (o->target == NULL || e->target == NULL ||
		    strcmp(o->target, e->target) != 0)
			return (add_change(a, AUDIT_MODIFIED, e->path, e->kind,
			    -1));
		return (0);
	}
	if (e->kind != ENTRY_FILE)
		return (0);
	if (o->size != e->size || o->mtime_ns != e->mtime_ns)
		return (add_change(a, AUDIT_MODIFIED, e->path, e->kind, -1));
	if (e->size == 0)
		return (0);
	if ((rc = rehash(a, w, o)) < 0)
		return (-1);
	if (rc == 0 && a->differs >= 0)
		rc = confirm(a, w, e);
	if (rc > 0)
		return (add_change(a, AUDIT_UNREADABLE, e->path, e->kind, -1));
	if (a->differs >= 0)
		return (add_change(a, AUDIT_CORRUPT, e->path, e->kind,
		    a->differs));
	return (0);
}

static int
by_path(const void *x, const void *y)
{
	return (strcmp(((const struct change *)x)->path,
	    ((const struct change *)y)->path));
}

enum engine_result
engine_audit(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct audit_opts *o,
    struct audit_result *res)
{
	struct audit a;
	struct fs_walk *w = NULL;
	struct entry e;
	const char *source = o->source ? o->source : s->source;
	unsigned long warn0 = log_warning_count();
	double t0 = now_monotonic();
	size_t i;
	int status = ENGINE_ERROR, rc;

	memset(res, 0, sizeof(*res));
	memset(&a, 0, sizeof(a));
	a.repo = r;
	a.cat = c;
	a.res = res;
	a.max_chunk = repo_chunker_params(r)->max;
	hmap_init(&a.by_path, 32);
	buf_init(&a.tmp);
	progress_init(&a.progress, "audit", 0);

	if (engine_need_complete(s))
		return (ENGINE_REFUSED);
	if (source == NULL || *source == '\0') {
		log_error("snapshot %s does not say where its data was read "
		    "from", s->sid);
		return (ENGINE_REFUSED);
	}
	if (strncmp(source, ENGINE_TAR_SOURCE,
	    strlen(ENGINE_TAR_SOURCE)) == 0) {
		log_error("snapshot %s was taken of a tar stream ('%s'): there "
		    "is no tree to audit", s->sid, source);
		return (ENGINE_REFUSED);
	}
	if ((a.chunker = chunker_new(repo_chunker_params(r),
	    ccrypto_keys_chunker_key(repo_keys(r)))) == NULL)
		goto out;
	if (load_view(&a, s->id))
		goto out;
	if ((w = fs_walk_open(source, &o->walk)) == NULL)
		goto out;
	while ((rc = fs_walk_next(w, &e)) == 1)
		if (audit_entry(&a, w, &e))
			goto out;
	if (rc < 0)
		goto out;
	progress_done(&a.progress);
	/* What the walk was told to leave out is not missing. */
	for (i = 0; i < a.nolds; i++)
		if (!a.olds[i].seen &&
		    !fs_walk_excluded(&o->walk, a.olds[i].path) &&
		    add_change(&a, AUDIT_MISSING, a.olds[i].path,
		    a.olds[i].kind, -1))
			goto out;

	if (a.nchanges)
		qsort(a.changes, a.nchanges, sizeof(*a.changes), by_path);
	for (i = 0; i < a.nchanges; i++) {
		const struct change *ch = &a.changes[i];

		if (ch->change == AUDIT_CORRUPT)
			log_error("silent corruption: '%s/%s' has changed "
			    "although its size and mtime have not (first "
			    "difference in the chunk at offset %lld)", source,
			    ch->path, (long long)ch->offset);
		if (o->report && (rc = o->report(o->arg, ch->change, ch->path,
		    ch->kind, ch->offset)) != 0)
			goto out;
	}
	status = res->corrupt ? ENGINE_CORRUPTION :
	    (res->unreadable || log_warning_count() != warn0) ? ENGINE_WARN :
	    ENGINE_OK;
out:
	progress_done(&a.progress);
	res->seconds = now_monotonic() - t0;
	fs_walk_close(w);
	chunker_free(a.chunker);
	for (i = 0; i < a.nolds; i++) {
		free(a.olds[i].path);
		free(a.olds[i].target);
	}
	free(a.olds);
	for (i = 0; i < a.nchanges; i++)
		free(a.changes[i].path);
	free(a.changes);
	free(a.want);
	hmap_release(&a.by_path);
	buf_release(&a.tmp);
	return (status);
}
