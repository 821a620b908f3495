/*
 * A restore's chunks (restore.c runs the pipeline): fetched from their
 * packs by the pool's threads, each with its pack readers (rworker), and
 * hashed in groups against their ids before a byte of them is written.
 *
 * Content that several files share (the frozen layers of consecutive
 * checkpoints) is fetched, decrypted and hashed once: a chunk of a large
 * file restored whole earlier in the run is read back from that file,
 * through the descriptor its writer kept (fs_restore_keep), not through
 * its name.  Up to REUSE_FILES such files are kept open, the latest (fewer
 * under a low limit of open files), and up to REUSE_CHUNKS of their chunks
 * remembered; a chunk that cannot be read back is fetched from its pack as
 * any other.  What is read back is hashed as what is fetched: by then the
 * file is its owner's, who may have changed it; a chunk that is not its
 * id is fetched after all.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "restore-int.h"

/*
 * A worker's reader of a pack, opened once and kept in a small LRU.  A
 * pack that failed to open is remembered as such.  NULL for a bad pack.
 */
static struct pack_reader *
get_reader(struct repo *r, struct rworker *w, const char *name)
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
	victim->pr = pack_reader_open(r, name);
	victim->used = ++w->tick;
	return (victim->pr);
}

void
rst_worker_release(struct rworker *w)
{
	size_t i;

	for (i = 0; i < READER_CACHE; i++)
		pack_reader_close(w->cache[i].pr);
	compressor_free(w->z);
	memset(w, 0, sizeof(*w));
}

int
rst_read_chunk(struct repo *r, struct rworker *w,
    const struct catalog_chunk_loc *loc, uint8_t *dst, int hashed)
{
	struct pack_reader *pr;
	struct pack_entry pe;

	if (loc->pack[0] == '\0') {
		log_error("a chunk at offset %llu is in no pack",
		    (unsigned long long)loc->file_offset);
		return (-1);
	}
	if (loc->type != PACK_REC_DATA) {
		log_error("a chunk at offset %llu is not a data record",
		    (unsigned long long)loc->file_offset);
		return (-1);
	}
	if ((pr = get_reader(r, w, loc->pack)) == NULL)
		return (-1);
	memcpy(pe.id, loc->cid, CCRYPTO_ID_BYTES);
	pe.type = loc->type;
	pe.flags = loc->flags;
	pe.offset = loc->pack_offset;
	pe.plain_len = loc->plain_len;
	pe.stored_len = loc->stored_len;
	return (hashed ? pack_reader_read(pr, &pe, w->z, dst) :
	    pack_reader_read_unhashed(pr, &pe, w->z, dst));
}

int
rst_locs_sane(const char *sid, uint32_t chunk_max, const struct entry *e,
    const struct catalog_chunk_loc *locs, size_t n)
{
	uint64_t end = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct catalog_chunk_loc *l = &locs[i];

		if (l->plain_len == 0 || l->plain_len > chunk_max ||
		    l->stored_len > PACK_RECORD_MAX || l->file_offset < end ||
		    e->size < (int64_t)l->plain_len ||
		    l->file_offset > (uint64_t)e->size - l->plain_len) {
			log_error("snapshot %s: cannot restore '%s': the "
			    "catalog's chunk %zu of it (%u bytes at offset "
			    "%llu, stored in %u) is out of bounds", sid,
			    e->path, i, l->plain_len,
			    (unsigned long long)l->file_offset,
			    l->stored_len);
			return (0);
		}
		end = l->file_offset + l->plain_len;
	}
	return (1);
}

/*
 * Read, authenticate and decompress one chunk into the window being
 * fetched; its id is checked with its group's (rst_verify_group), before the
 * window's files are written.
 */
void
rst_fetch_chunk(struct restore *rs, struct window *win, struct rjob *j,
    struct rworker *w)
{
	j->rc = -1;
	/* Written already: read back; if that failed, fetched after all.
	 * Waited for first: nothing may still write into the window once
	 * the loop is done. */
	if (j->src_fd != -1) {
		int rb;

		pthread_mutex_lock(&rs->rb.mu);
		while ((rb = j->rb) == RB_QUEUED)
			pthread_cond_wait(&rs->rb.cv, &rs->rb.mu);
		pthread_mutex_unlock(&rs->rb.mu);
		if (rb == RB_DONE) {
			j->rc = 0;
			return;
		}
	}
	if (rst_read_chunk(rs->repo, w, &j->loc, win->data.data + j->off, 0))
		return;
	j->rc = 0;
}

/*
 * A chunk read back that is not what its id says: the file it was read
 * from changed since it was restored (it is its owner's by then).  Fetched
 * from its pack after all, and checked there (pack_reader_read).
 */
static void
refetch_chunk(struct restore *rs, struct window *win, struct rjob *j,
    struct rworker *w)
{
	/* Not a warning: what this restore writes is still exact. */
	log_note("a chunk read back from a file restored earlier has "
	    "changed since; fetching it from pack '%s'", j->loc.pack);
	j->rc = rst_read_chunk(rs->repo, w, &j->loc, win->data.data + j->off,
	    1);
}

/*
 * Group g of the out window's chunks (order[g * HASH_GROUP] on): the keyed
 * hashes of those fetched or read back, taken together, must be their
 * ids.  A fetched chunk that differs is damaged (its job fails), as if
 * pack_reader_read had found it; one read back is fetched again
 * (refetch_chunk): a byte is written only if it was checked after it was
 * last read.  One whose fetch failed has failed already.
 */
void
rst_verify_group(struct restore *rs, struct window *win, size_t g,
    struct rworker *w)
{
	const uint8_t *in[HASH_GROUP];
	uint8_t ids[HASH_GROUP][CCRYPTO_ID_BYTES];
	size_t len[HASH_GROUP], at[HASH_GROUP], n = 0, k, q, end;

	end = (g + 1) * HASH_GROUP < win->njobs ? (g + 1) * HASH_GROUP :
	    win->njobs;
	for (q = g * HASH_GROUP; q < end; q++) {
		const struct rjob *j = &win->jobs[win->order[q]];

		if (j->rc != 0)
			continue;
		at[n] = win->order[q];
		in[n] = win->data.data + j->off;
		len[n++] = j->loc.plain_len;
	}
	ccrypto_chunk_ids(repo_keys(rs->repo), n, in, len, ids);
	for (k = 0; k < n; k++) {
		struct rjob *j = &win->jobs[at[k]];
		char *path;

		if (memcmp(ids[k], j->loc.cid, CCRYPTO_ID_BYTES) == 0)
			continue;
		if (j->rb == RB_DONE) {
			refetch_chunk(rs, win, j, w);
			continue;
		}
		path = repo_pack_path(rs->repo, j->loc.pack);
		pack_report_mismatch(path ? path : j->loc.pack,
		    j->loc.pack_offset);
		free(path);
		j->rc = -1;
	}
	pthread_mutex_lock(&rs->mu);
	if (++win->vdone == win->ngroups)
		pthread_cond_broadcast(&rs->verified);
	pthread_mutex_unlock(&rs->mu);
}

/* Is one of these n chunks (a file's part in a window) worth reading
 * back? */
int
rst_has_reusable(const struct rjob *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (jobs[i].loc.plain_len >= REUSE_MIN)
			return (1);
	return (0);
}

static void *
readback_main(void *arg)
{
	struct restore *rs = ((struct readback_start *)arg)->rs;
	struct fs_reader *rd = ((struct readback_start *)arg)->rd;
	struct readback *b = &rs->rb;
	struct rjob *j;
	int ok;

	thread_name("readback");
	free(arg);
	pthread_mutex_lock(&b->mu);
	for (;;) {
		while (b->next == b->n && !b->quit)
			pthread_cond_wait(&b->cv, &b->mu);
		if (b->next == b->n)
			break;
		j = &b->win->jobs[b->q[b->next++]];
		pthread_mutex_unlock(&b->mu);
		ok = fs_reader_read(rd, j->src_fd, b->win->data.data + j->off,
		    j->loc.plain_len, j->src_off) == 0;
		pthread_mutex_lock(&b->mu);
		j->rb = ok ? RB_DONE : RB_FAILED;
		if (ok)
			b->bytes += (int64_t)j->loc.plain_len;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
	return (NULL);
}

/*
 * Larger chunks first.  A window's chunks run from a few KiB to several
 * MiB (a whole tensor), and a loop ends when its last job does: taken in
 * file order, a big chunk met last keeps one thread busy while the others
 * wait.
 */
static int
larger_first(const void *x, const void *y, void *arg)
{
	const struct rjob *jobs = arg;
	uint32_t a = jobs[*(const size_t *)x].loc.plain_len;
	uint32_t b = jobs[*(const size_t *)y].loc.plain_len;

	return (a < b ? 1 : a > b ? -1 : 0);
}

/*
 * The window about to be fetched: the order the pool takes its jobs in
 * (the largest first, those read back last), and its chunks to read back
 * handed to the reading threads (idle: the last loop's jobs waited for
 * theirs), started the first time.  0, or -1 (out of memory, reported).
 */
int
rst_readback_start(struct restore *rs, struct window *win)
{
	struct readback *b = &rs->rb;
	size_t i, n = 0, k;

	while (win->caporder < win->njobs)
		if (array_grow(&win->order, &win->caporder, win->caporder,
		    sizeof(*win->order), win->njobs))
			return (-1);
	/* A record in memory costs no I/O: fetched rather than read back
	 * (right after a backup, on a host with memory to spare). */
	for (i = 0; i < win->njobs; i++) {
		struct rjob *j = &win->jobs[i];

		if (j->src_fd != -1 && !rs->read_back_always &&
		    pack_cached(rs->repo, j->loc.pack,
		    j->loc.pack_offset, j->loc.stored_len)) {
			close(j->src_fd);
			j->src_fd = -1;
		}
	}
	for (i = 0; i < win->njobs; i++)
		if (win->jobs[i].src_fd == -1)
			win->order[n++] = i;
	k = n;
	if (k > 1)	/* order is not allocated for an empty window */
		qsort_r(win->order, k, sizeof(*win->order), larger_first,
		    win->jobs);
	for (i = 0; i < win->njobs; i++)
		if (win->jobs[i].src_fd != -1) {
			win->order[n++] = i;
			win->jobs[i].rb = RB_QUEUED;
		}
	if (k == n)
		return (0);
	while (b->started < READBACK_THREADS) {
		struct readback_start *st;

		if ((st = malloc(sizeof(*st))) == NULL ||
		    (st->rd = fs_reader_new()) == NULL) {
			free(st);
			break;
		}
		st->rs = rs;
		/* The thread frees st: what is needed of it, first. */
		b->rd[b->started] = st->rd;
		if (pthread_create(&b->thread[b->started], NULL,
		    readback_main, st)) {
			fs_reader_free(b->rd[b->started]);
			b->rd[b->started] = NULL;
			free(st);
			break;
		}
		b->started++;
	}
	if (b->started == 0) {
		/* No thread to read back with: the jobs fetch. */
		for (i = k; i < n; i++)
			win->jobs[win->order[i]].rb = RB_NONE;
		return (0);
	}
	pthread_mutex_lock(&b->mu);
	b->win = win;
	b->q = win->order + k;
	b->n = n - k;
	b->next = 0;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	return (0);
}

/*
 * Tests only (COFFER_TEST_CHANGE_RESTORED): the first byte of the first
 * file kept to read back from is changed before its chunks are read back,
 * as the user it was restored for may change it meanwhile.
 */
static void
change_restored(int fd)
{
	unsigned char c;
	int fl;

	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl & ~O_DIRECT) == -1 ||
	    pread(fd, &c, 1, 0) != 1)
		return;
	c ^= 0xff;
	(void)pwrite(fd, &c, 1, 0);
}

/*
 * A file restored whole, and its descriptor kept: its chunks (those of
 * the pending list, then n jobs) may be read back from it.  It takes the
 * oldest file's slot.  Takes fd.  0, or -1 on a fatal error.
 */
int
rst_reuse_add(struct restore *rs, int fd, const struct rjob *jobs, size_t n)
{
	struct reuse_src *src = &rs->srcs[rs->next_src];
	uint32_t slot = (uint32_t)rs->next_src;
	size_t i, total = rs->npend + n;

	if (rs->nsrcs == 0 || (rs->npend == 0 && !rst_has_reusable(jobs, n))) {
		close(fd);	/* nothing worth reading back */
		return (0);
	}
	if (src->fd != -1)
		close(src->fd);
	src->fd = fd;
	if (rs->change_restored) {
		change_restored(fd);
		rs->change_restored = 0;
	}
	src->gen++;		/* the refs to the file it held are stale */
	rs->next_src = (rs->next_src + 1) % rs->nsrcs;
	for (i = 0; i < total; i++) {
		struct reuse_ref *ref;
		int64_t rowid, off, idx;

		if (i < rs->npend) {
			rowid = rs->pend[i].rowid;
			off = rs->pend[i].off;
		} else {
			const struct rjob *j = &jobs[i - rs->npend];

			if (j->loc.plain_len < REUSE_MIN)
				continue;
			rowid = j->loc.rowid;
			off = (int64_t)j->loc.file_offset;
		}
		if (hmap_get(&rs->seen, &rowid, &idx)) {
			ref = &rs->refs[idx];
			if (rs->srcs[ref->slot].gen == ref->gen &&
			    rs->srcs[ref->slot].fd != -1)
				continue;	/* an open file has it */
			ref->slot = slot;	/* its file was closed */
			ref->gen = src->gen;
			ref->off = off;
			continue;
		}
		if (rs->nrefs == REUSE_CHUNKS) {
			/* Full: start again from this file on. */
			hmap_clear(&rs->seen);
			rs->nrefs = 0;
		}
		if (array_grow(&rs->refs, &rs->caprefs, rs->nrefs,
		    sizeof(*rs->refs), 1024) ||
		    hmap_put(&rs->seen, &rowid, (int64_t)rs->nrefs))
			return (-1);
		ref = &rs->refs[rs->nrefs++];
		ref->slot = slot;
		ref->gen = src->gen;
		ref->off = off;
	}
	rs->npend = 0;
	return (0);
}

/* The file going on into the next window: remember its n chunks here. */
int
rst_reuse_pend(struct restore *rs, const struct rjob *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (jobs[i].loc.plain_len < REUSE_MIN ||
		    rs->npend == REUSE_CHUNKS)
			continue;
		if (array_grow(&rs->pend, &rs->cappend, rs->npend,
		    sizeof(*rs->pend), 256))
			return (-1);
		rs->pend[rs->npend].rowid = jobs[i].loc.rowid;
		rs->pend[rs->npend].off = (int64_t)jobs[i].loc.file_offset;
		rs->npend++;
	}
	return (0);
}

/* A restored file holding this chunk: a descriptor of it of the job's
 * own (the file's slot may be given to another before the job runs). */
void
rst_reuse_find(struct restore *rs, struct rjob *j)
{
	const struct reuse_ref *ref;
	const struct reuse_src *src;
	int64_t idx;

	j->src_fd = -1;
	if (rs->nsrcs == 0 || j->loc.plain_len < REUSE_MIN ||
	    !hmap_get(&rs->seen, &j->loc.rowid, &idx))
		return;
	ref = &rs->refs[idx];
	src = &rs->srcs[ref->slot];
	if (src->fd == -1 || src->gen != ref->gen)
		return;
	if ((j->src_fd = fcntl(src->fd, F_DUPFD_CLOEXEC, 0)) != -1)
		j->src_off = ref->off;
}

/*
 * How many restored files to keep open, within the limit of open files.
 * Besides them: each window's jobs may hold one descriptor per REUSE_MIN
 * bytes, and as many files just written are held until their window is
 * finished (write_file); each of the pool's threads keeps READER_CACHE
 * packs open and a writer (its file and the direct one); the rest of the
 * run (catalog, target, readers) needs some.  0 turns reading back off.
 */
size_t
rst_reuse_files(int threads)
{
	rlim_t need = 64 + (rlim_t)(READER_CACHE + 2) * (rlim_t)(threads + 1) +
	    4 * (WINDOW_BYTES / REUSE_MIN + 1);
	struct rlimit rl;
	rlim_t spare;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return (0);
	if (rl.rlim_cur == RLIM_INFINITY)
		return (REUSE_FILES);
	if (rl.rlim_cur < need)
		return (0);
	spare = (rl.rlim_cur - need) / 2;
	return (spare < REUSE_FILES ? (size_t)spare : REUSE_FILES);
}
