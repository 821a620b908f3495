/*
 * Restore: materialize a snapshot's resolved chain under a target through
 * archive_write_disk (fs_restore), verifying every chunk before its bytes
 * are written.  A file whose data cannot be read is named, removed and
 * counted; the others are restored.
 *
 * Pipeline: entries are taken in path order into a window, with their
 * chunks' locations (up to WINDOW_BYTES of content; a bigger file goes on
 * in the next window).  The window's chunks are read, authenticated,
 * decompressed and re-hashed on all threads, each with its own pack
 * readers, into the window's buffer; then one thread writes the entries
 * in order (libarchive's disk writer is not shared between threads).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/progress.h"
#include "coffer/status.h"

#define READER_CACHE 4
#define WINDOW_BYTES (8u << 20)
#define WINDOW_ENTRIES 4096

struct cached_reader {
	char name[PACK_NAME_LEN + 1];
	struct pack_reader *pr;		/* NULL: the pack could not be opened */
	uint64_t used;
};

/* Per-thread: pack readers, a decompressor, a chunk buffer. */
struct rworker {
	struct cached_reader cache[READER_CACHE];
	uint64_t tick;
	struct compressor *z;
	struct buf chunk;
};

/* An entry of the window, copied out of the catalog's iterator. */
struct wentry {
	struct entry e;
	void *mem;
	size_t first, njobs;		/* its jobs in this window */
	int last;			/* its last chunk is in this window */
	int begun;			/* fs_restore_begin done (continues) */
	int failed;
	int link;			/* a second name of an earlier inode */
};

/* One chunk of the window. */
struct rjob {
	struct catalog_chunk_loc loc;
	size_t off;			/* its bytes in the window's buffer */
	int rc;
};

struct restore {
	struct repo *repo;
	struct catalog *cat;
	struct fs_restore *fr;
	struct restore_result *res;
	const struct restore_opts *opts;
	struct pool *pool;
	struct rworker *workers;
	/* The window. */
	struct wentry *ents;
	size_t nents, capents;
	struct rjob *jobs;
	size_t njobs, capjobs;
	struct buf data;
	/* Hardlink groups: (dev, ino, content) -> index into link_paths. */
	struct hmap links;
	struct hmap planned;		/* groups whose first name is taken */
	char **link_paths;
	size_t nlinks, caplinks;
	int64_t missing;		/* requested paths not in the snapshot */
	struct progress progress;
};

/*
 * A worker's reader of a pack, opened once and kept in a small LRU.  A
 * pack that failed to open is remembered as such.  NULL for a bad pack.
 */
static struct pack_reader *
get_reader(struct restore *rs, struct rworker *w, const char *name)
{
	struct cached_reader *victim = &w->cache[0];
	size_t i;

	for (i = 0; i < READER_CACHE; i++) {
		struct cached_reader *c = &w->cache[i];

		if (c->used && strcmp(c->name, name) == 0) {
			c->used = ++w->tick;
			return (c->pr);
		}
		if (c->used < victim->used)
			victim = c;
	}
	pack_reader_close(victim->pr);
	memcpy(victim->name, name, PACK_NAME_LEN + 1);
	victim->pr = pack_reader_open(rs->repo, name);
	victim->used = ++w->tick;
	return (victim->pr);
}

/* Read and verify one chunk into the window (a pool job). */
static void
fetch_job(void *arg, size_t i, int worker)
{
	struct restore *rs = arg;
	struct rjob *j = &rs->jobs[i];
	struct rworker *w = &rs->workers[worker];
	struct pack_reader *pr;
	struct pack_entry pe;

	j->rc = -1;
	if (j->loc.pack[0] == '\0') {
		log_error("a chunk at offset %llu is in no pack",
		    (unsigned long long)j->loc.file_offset);
		return;
	}
	if (j->loc.type != PACK_REC_DATA) {
		log_error("a chunk at offset %llu is not a data record",
		    (unsigned long long)j->loc.file_offset);
		return;
	}
	if ((pr = get_reader(rs, w, j->loc.pack)) == NULL)
		return;
	memcpy(pe.id, j->loc.cid, CRYPTO_ID_BYTES);
	pe.type = j->loc.type;
	pe.flags = j->loc.flags;
	pe.offset = j->loc.pack_offset;
	pe.plain_len = j->loc.plain_len;
	pe.stored_len = j->loc.stored_len;
	if (pack_reader_get(pr, &pe, w->z, &w->chunk))
		return;
	memcpy(rs->data.data + j->off, w->chunk.data, w->chunk.len);
	j->rc = 0;
}

/* The key of a hardlink group: inode and content. */
static void
link_key(uint8_t key[24], const struct entry *e)
{
	put_u64(key, e->dev);
	put_u64(key + 8, e->ino);
	put_u64(key + 16, (uint64_t)e->content_id);
}

/* A second name of an inode restored earlier in this run? */
static const char *
link_target(struct restore *rs, const struct entry *e)
{
	uint8_t key[24];
	int64_t idx;

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (NULL);
	link_key(key, e);
	if (hmap_get(&rs->links, key, &idx))
		return (rs->link_paths[idx]);
	return (NULL);
}

static int
remember_link(struct restore *rs, const struct entry *e)
{
	uint8_t key[24];
	char **p;

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (0);
	if (rs->nlinks == rs->caplinks) {
		size_t cap = rs->caplinks ? rs->caplinks * 2 : 64;

		if ((p = reallocarray(rs->link_paths, cap, sizeof(*p))) ==
		    NULL) {
			log_error("out of memory");
			return (-1);
		}
		rs->link_paths = p;
		rs->caplinks = cap;
	}
	if ((rs->link_paths[rs->nlinks] = strdup(e->path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	link_key(key, e);
	if (hmap_put(&rs->links, key, (int64_t)rs->nlinks))
		return (-1);
	rs->nlinks++;
	return (0);
}

/*
 * Write one entry of the window (or the part of a file the window holds).
 * 0 done or going on, 1 failed (counted), -1 fatal.
 */
static int
write_entry(struct restore *rs, struct wentry *we)
{
	const struct entry *e = &we->e;
	const char *first;
	size_t i;

	if (we->link) {
		/* Its first name was restored, or failed (then so does it). */
		if ((first = link_target(rs, e)) == NULL) {
			log_error("cannot restore '%s': its data is damaged or "
			    "missing", e->path);
			return (1);
		}
		if (fs_restore_hardlink(rs->fr, e, first))
			return (1);
		rs->res->files++;
		return (0);
	}
	if (!we->begun) {
		we->begun = 1;
		if (fs_restore_begin(rs->fr, e)) {
			we->failed = 1;
			return (1);
		}
	}
	if (we->failed)
		return (0);	/* counted when it failed */
	for (i = we->first; i < we->first + we->njobs; i++) {
		struct rjob *j = &rs->jobs[i];

		if (j->rc != 0 || fs_restore_data(rs->fr, rs->data.data +
		    j->off, j->loc.plain_len, (int64_t)j->loc.file_offset)) {
			fs_restore_discard(rs->fr);
			log_error("cannot restore '%s': its data is damaged or "
			    "missing", e->path);
			we->failed = 1;
			return (1);
		}
		rs->res->bytes += (int64_t)j->loc.plain_len;
		progress_update(&rs->progress, 0, j->loc.plain_len);
	}
	if (!we->last)
		return (0);
	if (fs_restore_finish(rs->fr))
		return (1);
	if (remember_link(rs, e))
		return (-1);
	rs->res->files++;
	progress_update(&rs->progress, 1, 0);
	return (0);
}

/*
 * Fetch the window's chunks on the pool, write its entries in order, and
 * empty it; an unfinished file (its last chunk still to come) stays as
 * the window's first entry.
 */
static int
flush_window(struct restore *rs)
{
	struct wentry keep;
	size_t i;
	int rc, carry = 0;

	pool_run(rs->pool, rs->njobs, fetch_job, rs);
	for (i = 0; i < rs->nents; i++) {
		rc = write_entry(rs, &rs->ents[i]);
		if (rc < 0)
			return (-1);
		if (rc > 0)
			rs->res->failed++;
	}
	if (rs->nents > 0 && !rs->ents[rs->nents - 1].last) {
		keep = rs->ents[rs->nents - 1];
		carry = 1;
		rs->nents--;
	}
	for (i = 0; i < rs->nents; i++)
		free(rs->ents[i].mem);
	rs->nents = 0;
	if (carry) {
		keep.first = 0;
		keep.njobs = 0;
		rs->ents[rs->nents++] = keep;
	}
	rs->njobs = 0;
	buf_reset(&rs->data);
	return (0);
}

/* Take one entry into the window, flushing it as it fills. */
static int
add_entry(struct restore *rs, const struct entry *e)
{
	struct catalog_chunk_loc *locs = NULL;
	struct wentry *we;
	size_t n = 0, i;

	if (rs->nents == WINDOW_ENTRIES && flush_window(rs))
		return (-1);
	if (rs->nents == rs->capents) {
		size_t cap = rs->capents ? rs->capents * 2 : 256;

		if ((we = reallocarray(rs->ents, cap, sizeof(*we))) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		rs->ents = we;
		rs->capents = cap;
	}
	we = &rs->ents[rs->nents];
	memset(we, 0, sizeof(*we));
	if (entry_dup(&we->e, &we->mem, e))
		return (-1);
	rs->nents++;
	we->first = rs->njobs;
	we->last = 1;
	if (e->kind == ENTRY_FILE && e->nlink > 1) {
		uint8_t key[24];
		int64_t one;

		link_key(key, e);
		if (hmap_get(&rs->planned, key, &one)) {
			we->link = 1;
			return (0);
		}
		if (hmap_put(&rs->planned, key, 1))
			return (-1);
	}
	if (e->kind != ENTRY_FILE || e->content_id == 0)
		return (0);
	if (catalog_content_chunks(rs->cat, e->content_id, &locs, &n))
		return (-1);
	for (i = 0; i < n; i++) {
		struct rjob *j;

		if (rs->data.len + locs[i].plain_len > WINDOW_BYTES &&
		    rs->njobs > 0) {
			/* This file goes on in the next window. */
			rs->ents[rs->nents - 1].last = 0;
			if (flush_window(rs)) {
				free(locs);
				return (-1);
			}
			we = &rs->ents[rs->nents - 1];
			we->first = 0;
			we->last = 1;
		}
		if (rs->njobs == rs->capjobs) {
			size_t cap = rs->capjobs ? rs->capjobs * 2 : 256;

			if ((j = reallocarray(rs->jobs, cap, sizeof(*j))) ==
			    NULL) {
				log_error("out of memory");
				free(locs);
				return (-1);
			}
			rs->jobs = j;
			rs->capjobs = cap;
		}
		if (buf_reserve(&rs->data, locs[i].plain_len)) {
			free(locs);
			return (-1);
		}
		j = &rs->jobs[rs->njobs++];
		j->loc = locs[i];
		j->off = rs->data.len;
		j->rc = -1;
		rs->data.len += locs[i].plain_len;
		rs->ents[rs->nents - 1].njobs++;
	}
	free(locs);
	return (0);
}

static int
restore_under(struct restore *rs, int64_t snapshot_id, const char *under)
{
	struct catalog_iter *it;
	struct entry e;
	int rc, seen = 0;

	if ((it = catalog_entries(rs->cat, snapshot_id, under)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		seen = 1;
		if (rs->opts->filter &&
		    !rs->opts->filter(rs->opts->filter_arg, &e))
			continue;
		if (add_entry(rs, &e)) {
			rc = -1;
			break;
		}
	}
	catalog_iter_free(it);
	if (rc < 0 || flush_window(rs))
		return (-1);
	if (under && !seen) {
		log_error("'%s' is not in the snapshot", under);
		rs->missing++;
	}
	return (0);
}

int
engine_restore(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct restore_opts *o,
    struct restore_result *res)
{
	struct restore rs;
	double t0 = now_monotonic();
	int status = STATUS_ERROR, empty, t;
	size_t i;

	memset(res, 0, sizeof(*res));
	memset(&rs, 0, sizeof(rs));
	rs.repo = r;
	rs.cat = c;
	rs.res = res;
	rs.opts = o;
	hmap_init(&rs.links, 24);
	hmap_init(&rs.planned, 24);
	/* A full's bytes read are its content; other levels store only a
	 * delta, so no total (and no ETA) rather than a wrong one. */
	progress_init(&rs.progress, "restore", s->level == LEVEL_FULL &&
	    o->npaths == 0 && o->filter == NULL ? (uint64_t)s->bytes_read : 0);

	if (s->state != SNAP_COMPLETE) {
		log_error("snapshot %s is %s, not complete", s->sid,
		    catalog_state_name(s->state));
		return (STATUS_USAGE);
	}
	if (!o->force) {
		if ((empty = fsutil_dir_is_empty(o->target, 1)) < 0)
			return (STATUS_ERROR);
		if (!empty) {
			log_error("target '%s' is not empty (use --force)",
			    o->target);
			return (STATUS_USAGE);
		}
	}
	if ((rs.pool = pool_new(o->threads > 0 ? o->threads :
	    pool_default_threads())) == NULL)
		goto out;
	if ((rs.workers = calloc((size_t)pool_threads(rs.pool),
	    sizeof(*rs.workers))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	for (t = 0; t < pool_threads(rs.pool); t++)
		if ((rs.workers[t].z = compressor_new(1)) == NULL)
			goto out;
	if ((rs.fr = fs_restore_open(o->target,
	    (geteuid() == 0 ? FS_RESTORE_OWNER : 0) |
	    (o->force ? FS_RESTORE_FORCE : 0))) == NULL)
		goto out;
	if (o->npaths == 0) {
		if (restore_under(&rs, s->id, NULL))
			goto out;
	} else {
		for (i = 0; i < o->npaths; i++)
			if (restore_under(&rs, s->id, o->paths[i]))
				goto out;
	}
	if (fs_restore_close(rs.fr)) {
		rs.fr = NULL;
		goto out;
	}
	rs.fr = NULL;
	status = res->failed ? STATUS_INTEGRITY :
	    rs.missing ? STATUS_USAGE : STATUS_OK;
out:
	progress_done(&rs.progress);
	if (rs.fr)
		fs_restore_close(rs.fr);
	if (rs.workers) {
		for (t = 0; t < pool_threads(rs.pool); t++) {
			for (i = 0; i < READER_CACHE; i++)
				pack_reader_close(rs.workers[t].cache[i].pr);
			compressor_free(rs.workers[t].z);
			buf_release(&rs.workers[t].chunk);
		}
		free(rs.workers);
	}
	pool_free(rs.pool);
	for (i = 0; i < rs.nents; i++)
		free(rs.ents[i].mem);
	free(rs.ents);
	free(rs.jobs);
	buf_release(&rs.data);
	for (i = 0; i < rs.nlinks; i++)
		free(rs.link_paths[i]);
	free(rs.link_paths);
	hmap_release(&rs.links);
	hmap_release(&rs.planned);
	res->seconds = now_monotonic() - t0;
	return (status);
}
