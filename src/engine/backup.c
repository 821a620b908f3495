/*
 * Backup: walk the source, cut files into chunks, store the chunks that
 * are new to the repository (the packer), record entries in the catalog,
 * and finish with a signed snapshot record.
 *
 * Levels (doc/design.md): a full reads every file and stores every entry; a
 * differential or an incremental compares each walked entry with the view
 * of its base (the dataset's last full, or its previous snapshot), reads
 * and stores only what changed, and adds a tombstone for each path of the
 * view that is gone.  The snapshot turns complete in the last transaction,
 * after its last pack is durable.
 *
 * Pipeline: the walk reads files on the calling thread straight into a
 * batch, where they are cut in place (many small files share a batch).  A
 * full batch goes through four steps, one batch per step at a time: its
 * chunk ids are hashed on the pool; then each id is looked up in the
 * catalog, in order; then its new chunks are compressed and sealed on the
 * pool; then they are appended to the pack in order, on the calling
 * thread (advance).  The catalog's work is done by a thread of its own
 * (the recorder, recorder.c) while the walk reads on: the lookups of a
 * batch (with the locating of a pack made durable, and the commits), then
 * the content and entry rows of each file whose chunks are all in the
 * pack.
 * The catalog's connection goes from one thread to the other, never used
 * by both at once.  A huge checkpoint is cut sequentially, but its
 * chunks are hashed, compressed and encrypted in parallel like anyone
 * else's.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/catalog-record.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "backup-int.h"

static void
pfile_free(struct pfile *f)
{
	if (f == NULL)
		return;
	free(f->mem);
	free(f->refs);
	free(f->ids);
	free(f);
}

/* A pending file with its own copy of e (the walker's strings go away). */
static struct pfile *
pfile_new(const struct entry *e)
{
	struct pfile *f;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	if (entry_dup(&f->e, &f->mem, e)) {
		free(f);
		return (NULL);
	}
	return (f);
}

static int lookup_batch(struct backup *, struct batch *);
static void seal_loop(void *, size_t, int);

/*
 * A step's task, the recorder's with the catalog: the packer's flush of
 * a full pack (the pack before located, the commit that is due), then the
 * lookups of the batch to seal (b->sealing, set by the step), whose
 * sealing then starts on the pool.
 */
int
backup_step_task(struct backup *b)
{
	if (packer_maybe_flush(&b->packer))
		return (-1);
	if (b->sealing == NULL)
		return (0);
	if (lookup_batch(b, b->sealing))
		return (-1);
	/* The pool's queue holds the walk's hashing, this sealing and the
	 * next hashing at most: it never fills, so pool_start does not run
	 * loops on this thread (as a second worker 0). */
	pool_start(b->pool, b->sealing->njobs, seal_loop, b->sealing);
	return (0);
}

static void
hash_job(struct backup *b, struct batch *bt, struct job *j)
{
	ccrypto_chunk_id(repo_keys(b->repo), bt->data.data + j->off, j->len,
	    j->id);
}

/*
 * Compress a new chunk straight into its record's place (a result is only
 * kept when smaller than the chunk, so it fits), then encrypt it there.
 */
static void
seal_job(struct backup *b, struct batch *bt, struct job *j, int worker)
{
	struct worker *wk = &b->workers[worker];
	const uint8_t *src = bt->data.data + j->off;
	uint8_t *rec = b->recs.data + j->rec_off;
	uint8_t *payload = rec + PACK_RECORD_HEADER_BYTES;
	size_t zl;

	if (!j->isnew)
		return;
	zl = compressor_compress(wk->z, src, j->len, payload, j->len);
	if (zl == (size_t)-1) {
		j->failed = 1;
		return;
	}
	if (zl > 0) {
		pack_writer_seal(b->packer.pw, PACK_REC_DATA, PACK_FLAG_ZSTD,
		    j->id, payload, zl, j->len, rec);
		j->rec_len = PACK_RECORD_SIZE(zl);
	} else {
		pack_writer_seal(b->packer.pw, PACK_REC_DATA, 0, j->id, src,
		    j->len, j->len, rec);
		j->rec_len = PACK_RECORD_SIZE(j->len);
	}
}

/*
 * Split the batch's jobs into the hashing's groups: runs of up to
 * HASH_GROUP small chunks, and each large one alone.  -1 out of memory.
 */
static int
hash_groups(struct batch *bt)
{
	size_t i, n = 0;

	while (bt->capgroups <= bt->njobs)
		if (array_grow(&bt->groups, &bt->capgroups, bt->capgroups,
		    sizeof(*bt->groups), 64))
			return (-1);
	for (i = 0; i < bt->njobs; i++)
		if (n == 0 || i - bt->groups[n - 1] >= HASH_GROUP ||
		    bt->jobs[i].len >= HASH_SMALL ||
		    bt->jobs[i - 1].len >= HASH_SMALL)
			bt->groups[n++] = i;
	bt->groups[n] = bt->njobs;
	bt->ngroups = n;
	return (0);
}

/* The pool loops, over one batch: hash a group of its chunks, or seal
 * one. */
static void
hash_loop(void *arg, size_t i, int worker)
{
	struct batch *bt = arg;
	struct backup *b = bt->b;
	const uint8_t *in[HASH_GROUP];
	size_t len[HASH_GROUP], k, lo = bt->groups[i], n;
	uint8_t ids[HASH_GROUP][CCRYPTO_ID_BYTES];

	(void)worker;
	n = bt->groups[i + 1] - lo;
	if (n == 1) {
		hash_job(b, bt, &bt->jobs[lo]);
		return;
	}
	for (k = 0; k < n; k++) {
		in[k] = bt->data.data + bt->jobs[lo + k].off;
		len[k] = bt->jobs[lo + k].len;
	}
	ccrypto_chunk_ids(repo_keys(b->repo), n, in, len, ids);
	for (k = 0; k < n; k++)
		memcpy(bt->jobs[lo + k].id, ids[k], CCRYPTO_ID_BYTES);
}

static void
seal_loop(void *arg, size_t i, int worker)
{
	struct batch *bt = arg;

	seal_job(bt->b, bt, &bt->jobs[i], worker);
}

/* Look the hashed batch's ids up, in order; room for the new ones. */
static int
lookup_batch(struct backup *b, struct batch *bt)
{
	size_t i, need = 0;
	int k;

	for (i = 0; i < bt->njobs; i++) {
		struct job *j = &bt->jobs[i];

		if ((k = packer_lookup(&b->packer, j->id, &j->rowid)) < 0)
			return (-1);
		j->isnew = k == 0;
		if (j->isnew) {
			j->rec_off = need;
			need += PACK_RECORD_SIZE(j->len);
		}
	}
	buf_reset(&b->recs);
	if (need > 0 && (packer_writer(&b->packer) == NULL ||
	    buf_reserve(&b->recs, need)))
		return (-1);
	return (0);
}

/* Append the sealed batch's new chunks, in order; resolve its chunks. */
static int
append_batch(struct backup *b, struct batch *bt)
{
	struct pfile *f;
	size_t i;

	for (i = 0; i < bt->njobs; i++) {
		struct job *j = &bt->jobs[i];

		if (j->isnew) {
			if (j->failed) {
				log_error("cannot compress a chunk of '%s'",
				    j->f->e.path);
				return (-1);
			}
			if (packer_append(&b->packer, j->id,
			    b->recs.data + j->rec_off, j->rec_len, j->len))
				return (-1);
		}
		f = j->f;
		f->inflight--;
		if (j->gen != f->gen || f->state == DEAD)
			continue;	/* from an abandoned read */
		f->refs[j->ref].chunk_rowid = j->rowid;
		memcpy(f->ids[j->ref], j->id, CCRYPTO_ID_BYTES);
		f->outstanding--;
	}
	bt->njobs = 0;
	/* Room for a full batch stays; what a huge chunk took goes back. */
	buf_trim(&bt->data, 2 * BATCH_BYTES);
	buf_trim(&b->recs, 2 * BATCH_BYTES);
	return (0);
}

/*
 * Record the files whose chunks are all in the pack, and forget the ones
 * no batch points at any more.
 */
static int
finish_files(struct backup *b)
{
	struct pfile **fp, *f;

	for (fp = &b->pending; (f = *fp) != NULL;) {
		if (f->state == CLOSED && f->outstanding == 0) {
			if (b->rec.started)
				recorder_queue(b, f);
			else if (backup_pfile_finish(b, f))
				return (-1);
			else
				f->state = FINISHED;
		}
		if ((f->state == DEAD || f->state == FINISHED) &&
		    f->inflight == 0) {
			*fp = f->next;
			pfile_free(f);
		} else
			fp = &f->next;
	}
	b->links_waiting = 0;
	hmap_clear(&b->pending_links);
	for (f = b->pending; f; f = f->next) {
		uint8_t key[16];

		if (f->e.nlink > 1 && f->state != FINISHED &&
		    f->state != DEAD) {
			link_key(key, &f->e);
			if (hmap_put(&b->pending_links, key, 1))
				return (-1);
		}
	}
	return (0);
}

/* What finish_files does, then the walk held back while the recorder is
 * far behind.  The walk has the catalog. */
static int
hand_on_files(struct backup *b)
{
	if (finish_files(b))
		return (-1);
	if (recorder_backlog(b) > RECORD_QUEUE_MAX &&
	    recorder_wait(b, RECORD_QUEUE_MAX / 2))
		return (-1);
	return (0);
}

/*
 * One step of the pipeline.  The last step's task is waited for (its
 * sealing must be queued before this step's hashing, for the wait
 * below); the filled batch is queued for hashing; then the last step's
 * loops (hashing and sealing) are waited for, this thread joining in, so
 * the pool works on the new hashing while this thread appends the sealed
 * batch to the pack (queueing the files it completes for the recorder).
 * The hashed one is then handed to the recorder to be looked up and
 * sealed (backup_step_task), and all of that runs while the walk fills the
 * batch just appended.
 */
static int
advance_step(struct backup *b)
{
	struct batch *hashing = NULL;

	if (recorder_task_wait(b))
		return (-1);
	/* Queued before the wait: whichever thread is done with the last
	 * step's loops first goes on with it instead of idling. */
	if (b->fill->njobs > 0) {
		hashing = b->fill;
		if (hash_groups(hashing))
			return (-1);
		pool_start(b->pool, hashing->ngroups, hash_loop, hashing);
	}
	if (b->running)
		pool_wait_but(b->pool, hashing != NULL);
	b->running = hashing != NULL;
	recorder_enter(b);
	if (b->sealing) {
		if (append_batch(b, b->sealing))
			goto fail;
		b->sealing = NULL;
	}
	if (hand_on_files(b))
		goto fail;
	b->sealing = b->hashed;
	b->hashed = NULL;
	recorder_leave(b);
	recorder_task_post(b);
	/* The sealing's loop is started (or will be, by the task, before
	 * the next step's recorder_task_wait returns). */
	if (b->sealing)
		b->running = 1;
	if (hashing) {
		b->hashed = hashing;
		/* The walk goes on in the one batch in no step. */
		for (b->fill = b->batches; b->fill == b->hashed ||
		    b->fill == b->sealing; b->fill++)
			;
	}
	return (0);
fail:
	recorder_leave(b);
	return (-1);
}

/*
 * A failed step leaves the batches half moved on (a loop may still be
 * queued on the filling one): the run is over, and every later step
 * fails too.
 */
static int
advance(struct backup *b)
{
	if (b->failed || recorder_failed(b) || advance_step(b)) {
		b->failed = 1;
		return (-1);
	}
	return (0);
}

/* Their memory, once no loop runs on them. */
static void
release_batches(struct backup *b)
{
	int i;

	buf_release(&b->recs);
	for (i = 0; i < NBATCH; i++) {
		buf_release(&b->batches[i].data);
		free(b->batches[i].jobs);
		b->batches[i].jobs = NULL;
		b->batches[i].njobs = b->batches[i].capjobs = 0;
		free(b->batches[i].groups);
		b->batches[i].groups = NULL;
		b->batches[i].ngroups = b->batches[i].capgroups = 0;
	}
}

/* Everything queued is in the pack, and its files recorded. */
static int
drain(struct backup *b)
{
	int rc = 0;

	recorder_enter(b);
	while (b->running || b->sealing || b->hashed || b->fill->njobs > 0)
		if (advance(b)) {
			rc = -1;
			break;
		}
	if (rc == 0 && b->rec.started && (recorder_task_wait(b) ||
	    recorder_wait(b, 0) || finish_files(b)))
		rc = -1;
	recorder_leave(b);
	return (rc);
}

/* Queue one chunk of the file being read. */
static int
queue_chunk(struct backup *b, const uint8_t *data, size_t len, int64_t off)
{
	struct pfile *f = b->cur;
	struct batch *bt = b->fill;
	struct job *j;

	/* The stream cut it in place, in the filling batch (read_file). */
	if (data < bt->data.data || len > bt->data.len ||
	    (size_t)(data - bt->data.data) > bt->data.len - len) {
		log_error("internal error: a chunk outside its batch");
		return (-1);
	}
	if (array_grow(&bt->jobs, &bt->capjobs, bt->njobs,
	    sizeof(*bt->jobs), 256))
		return (-1);
	if (f->nrefs == f->caprefs) {
		/* Most files are one chunk: start with room for one. */
		size_t cap = f->caprefs ? f->caprefs * 2 : 1;
		struct catalog_chunk_ref *r;
		uint8_t (*ids)[CCRYPTO_ID_BYTES];

		if ((r = reallocarray(f->refs, cap, sizeof(*r))) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		f->refs = r;
		if ((ids = reallocarray(f->ids, cap, sizeof(*ids))) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		f->ids = ids;
		f->caprefs = cap;
	}
	j = &bt->jobs[bt->njobs];
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->gen = f->gen;
	j->ref = f->nrefs;
	j->off = (size_t)(data - bt->data.data);
	j->len = (uint32_t)len;
	f->refs[f->nrefs].chunk_rowid = 0;
	f->refs[f->nrefs].file_offset = (uint64_t)off;
	f->refs[f->nrefs].len = (uint32_t)len;
	f->nrefs++;
	f->outstanding++;
	f->inflight++;
	bt->njobs++;
	return (0);
}

/* chunk_stream's emit: queue the chunk it cut. */
static int
emit_chunk(void *arg, const uint8_t *data, size_t len, int64_t off)
{
	return (queue_chunk(arg, data, len, off));
}

enum { STORED = 0, SKIPPED = 1, CHANGING = 2, INCOMPLETE = 3 };

/* Start (or restart) reading b->cur.  0 or -1. */
static int
begin_read(struct backup *b)
{
	/* Chunks queued by an earlier attempt are ignored when resolved. */
	b->cur->gen++;
	b->cur->nrefs = 0;
	b->cur->outstanding = 0;
	if (b->cs != NULL)
		chunk_stream_reset(b->cs, (uint64_t)b->cur->e.size);
	else if ((b->cs = chunk_stream_new(b->chunker, b->max_chunk,
	    (uint64_t)b->cur->e.size, emit_chunk, b)) == NULL)
		return (-1);
	return (chunk_stream_use(b->cs, &b->fill->data));
}

/*
 * Room for the next read in the filling batch.  A full one (BATCH_BYTES
 * or BATCH_JOBS) moves on (advance), and the stream's uncut tail moves
 * with the walk to the next.  A batch with no chunk yet grows instead: it
 * holds one long chunk.
 */
static uint8_t *
read_room(struct backup *b)
{
	if ((b->fill->data.len + READ_BYTES > BATCH_BYTES ||
	    b->fill->njobs >= BATCH_JOBS) && b->fill->njobs > 0 &&
	    (advance(b) || chunk_stream_use(b->cs, &b->fill->data)))
		return (NULL);
	return (chunk_stream_space(b->cs, READ_BYTES));
}

/* read_file's fatal error: not FS_WALK_CHANGED (-2), not a skip (-1). */
#define READ_FATAL (-3)
/* A safetensors file shorter than its header declares (being written). */
#define READ_SHORT (-4)

/*
 * Read the file once, cutting it exactly as audit and drill will (one
 * rule: chunk_stream).  1 done, FS_WALK_CHANGED, -1 skip (warned),
 * READ_FATAL.
 */
static int
read_file(struct backup *b, struct fs_walk *w)
{
	uint8_t *p;
	int64_t off;
	size_t len;
	int rc;

	if (begin_read(b))
		return (READ_FATAL);
	for (;;) {
		if (signals_caught())
			return (READ_FATAL);	/* reported by the walk */
		if ((p = read_room(b)) == NULL)
			return (READ_FATAL);
		if ((rc = fs_walk_read_into(w, p, READ_BYTES, &len, &off)) != 1)
			break;
		b->res->bytes_read += (int64_t)len;
		progress_update(&b->progress, 0, len);
		if (chunk_stream_wrote(b->cs, len, off))
			return (READ_FATAL);
		if (chunk_stream_short(b->cs)) {
			chunk_stream_abandon(b->cs);
			return (READ_SHORT);
		}
	}
	if (rc < 0)
		chunk_stream_abandon(b->cs);
	if (rc == FS_WALK_CHANGED)
		return (rc);
	if (rc < 0)
		return (-1);
	if (chunk_stream_finish(b->cs))
		return (READ_FATAL);
	return (1);
}

/*
 * Read and queue one regular file.  STORED (its entry follows when its
 * chunks are resolved), SKIPPED when it could not be read (warned),
 * CHANGING when it kept changing while read (a torn file is never
 * recorded), -1 on a fatal error.
 */
static int
store_file(struct backup *b, struct fs_walk *w, struct pfile *f)
{
	int rc;

	b->cur = f;
	rc = read_file(b, w);
	if (rc == FS_WALK_CHANGED) {
		/* Written to while we read it: once more, from its new
		 * state.  A checkpoint being saved usually settles. */
		if (fs_walk_reread(w, &f->e))
			return (SKIPPED);
		rc = read_file(b, w);
		if (rc == FS_WALK_CHANGED)
			return (CHANGING);
	}
	if (rc == READ_FATAL)
		return (-1);
	if (rc == READ_SHORT)
		return (INCOMPLETE);
	if (rc < 0)
		return (SKIPPED);
	return (STORED);
}

static int
same_str(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a == b);
	return (strcmp(a, b) == 0);
}

/* doc/design.md's "changed": any of these differs from the base's entry. */
static int
unchanged(const struct entry *n, const struct entry *o)
{
	return (n->kind == o->kind && n->size == o->size &&
	    n->mtime_ns == o->mtime_ns && n->ctime_ns == o->ctime_ns &&
	    n->ino == o->ino && n->mode == o->mode && n->uid == o->uid &&
	    n->gid == o->gid && same_str(n->target, o->target) &&
	    (n->kind != ENTRY_FILE || n->size == 0 || o->content_id != 0));
}

static int
open_view(struct backup *b)
{
	if (b->view == NULL && b->view_id != 0 &&
	    (b->view = catalog_resolver_new(b->cat, b->view_id)) == NULL)
		return (-1);
	return (0);
}

/*
 * A file kept changing while it was read, or is a checkpoint still being
 * written (incomplete).  Keep the previous version: for
 * a differential or incremental, by storing nothing (the base's entry
 * stays in the view); for a full, by copying the previous snapshot's entry.
 * 0 or -1.
 */
static int
keep_previous(struct backup *b, const struct entry *e, int had_base,
    int incomplete, const char *held)
{
	const char *why = held != NULL ? held : incomplete ? "is shorter "
	    "than its safetensors header declares (still being written?)" :
	    "changed during the backup";
	struct entry old;
	int found = had_base;

	/* A copied entry, or none: the record's rows are the catalog's. */
	catalog_spool_off(b->spool);
	if (b->level == LEVEL_FULL) {
		if (open_view(b))
			return (-1);
		found = 0;
		if (b->view && (found = catalog_resolver_get(b->view, e->path,
		    &old)) < 0)
			return (-1);
		if (found && old.kind == ENTRY_FILE) {
			if (catalog_entry_add(b->cat, b->snapshot_id, &old))
				return (-1);
			count_entry(b->res, old.kind);
		} else
			found = 0;
	}
	if (held != NULL) {
		/* Settling (coffer-policy(5)) is expected, not a problem. */
		log_note("'%s' %s; held back%s", fs_walk_source_path(b->walk),
		    why, found ? " (its previous version kept)" : "");
		b->res->held_back++;
		return (0);
	}
	if (found)
		log_warn("'%s' %s; kept its previous version",
		    fs_walk_source_path(b->walk), why);
	else
		log_warn("'%s' %s; not stored (no earlier version)",
		    fs_walk_source_path(b->walk), why);
	b->res->changing++;
	return (0);
}

/*
 * A file of a checkpoint directory changed after the walk found the
 * directory settled: the checkpoint is being written again, and a
 * snapshot holds either all of it or none of it.  Note the directory to
 * be put back whole at the end of the walk (hold_back_all), when the
 * entries of its files still queued are recorded too.  1 held, 0 not in
 * a checkpoint, -1 error.
 */
static int
hold_checkpoint(struct backup *b, const char *path, const char *why)
{
	char **v;
	size_t len, i;

	if (!checkpoint_within(b->opts, path, &len))
		return (0);
	log_note("'%s' %s; its checkpoint '%s/%.*s' is held back whole",
	    fs_walk_source_path(b->walk), why, b->opts->source, (int)len,
	    path);
	for (i = 0; i < b->nheld; i++)
		if (strlen(b->held[i]) == len &&
		    memcmp(b->held[i], path, len) == 0)
			return (1);
	if ((v = realloc(b->held, (b->nheld + 1) * sizeof(*v))) == NULL ||
	    (v[b->nheld] = strndup(path, len)) == NULL) {
		if (v != NULL)
			b->held = v;
		log_errno("out of memory");
		return (-1);
	}
	b->held = v;
	b->nheld++;
	b->res->held_back++;
	return (1);
}

/* A held checkpoint as the view has it: a differential or incremental
 * falls through to its base, a full copies the previous snapshot's. */
static int
put_back(struct backup *b, const char *dir)
{
	int64_t d[ENTRY_SOCK + 1];
	int k;

	catalog_spool_off(b->spool);
	if (b->level == LEVEL_FULL && open_view(b))
		return (-1);
	if (catalog_put_back(b->cat, b->view, b->snapshot_id, dir,
	    b->level == LEVEL_FULL, d))
		return (-1);
	for (k = 0; k <= ENTRY_SOCK; k++)
		if (k == ENTRY_FILE)
			b->res->files += d[k];
		else if (k == ENTRY_DIR)
			b->res->dirs += d[k];
		else if (k != ENTRY_TOMBSTONE)
			b->res->others += d[k];
	return (0);
}

static int
hold_back_all(struct backup *b)
{
	size_t i;

	for (i = 0; i < b->nheld; i++)
		if (put_back(b, b->held[i]))
			return (-1);
	return (0);
}

/* A hardlink to an inode stored earlier in this run: its content id. */
static int
known_link(struct backup *b, const struct entry *e, int64_t *cid)
{
	uint8_t key[16];
	int64_t one;

	if (e->nlink < 2)
		return (0);
	link_key(key, e);
	if (backup_links_get(b, key, cid))
		return (1);
	/* Its first name is still on its way: finish that first. */
	if (hmap_get(&b->pending_links, key, &one)) {
		if (drain(b))
			return (-1);
		if (backup_links_get(b, key, cid))
			return (1);
	}
	return (0);
}

/*
 * A further name of a file recorded (content cid): the recorder adds its
 * entry among the files it records.  It has no data, so no step comes to
 * hand it on: every LINKS_AT_ONCE such names the walk does, or a tree of
 * links would pile up in memory.
 */
static int
queue_link(struct backup *b, const struct entry *e, int64_t cid)
{
	struct pfile *f;
	int rc;

	if ((f = pfile_new(e)) == NULL)
		return (-1);
	f->e.content_id = cid;
	f->link = 1;
	f->state = CLOSED;
	f->next = b->pending;
	b->pending = f;
	if (++b->links_waiting < LINKS_AT_ONCE)
		return (0);
	recorder_enter(b);
	rc = hand_on_files(b);
	recorder_leave(b);
	return (rc);
}

/* Store one regular file with content.  0 or -1. */
static int
walk_file(struct backup *b, struct fs_walk *w, struct entry *e,
    int had_base)
{
	struct pfile *f;
	uint8_t key[16];
	int64_t cid;
	int rc, held;

	if (e->nlink > 1) {
		/* Its first name recorded (no catalog needed to know), or
		 * still on its way: known_link finishes that first. */
		link_key(key, e);
		if ((rc = backup_links_get(b, key, &cid)) == 0) {
			recorder_enter(b);
			rc = known_link(b, e, &cid);
			recorder_leave(b);
		}
		if (rc < 0)
			return (-1);
		if (rc > 0)
			return (queue_link(b, e, cid));
	}
	if ((f = pfile_new(e)) == NULL)
		return (-1);
	f->state = READING;
	f->next = b->pending;
	b->pending = f;
	rc = store_file(b, w, f);
	b->cur = NULL;
	if (rc < 0)
		return (-1);
	if (rc != STORED) {
		f->state = DEAD;
		if (rc != CHANGING && rc != INCOMPLETE)
			return (0);
		if ((held = hold_checkpoint(b, f->e.path, rc == INCOMPLETE ?
		    "is shorter than its safetensors header declares" :
		    "changed while it was read")) != 0)
			return (held < 0 ? -1 : 0);
		recorder_enter(b);
		rc = keep_previous(b, &f->e, had_base, rc == INCOMPLETE, NULL);
		recorder_leave(b);
		return (rc);
	}
	f->state = CLOSED;
	if (f->e.nlink > 1) {
		link_key(key, &f->e);
		if (hmap_put(&b->pending_links, key, 1))
			return (-1);
	}
	return (0);
}

/*
 * fs_walk's skip_dir, on the walk's thread: a checkpoint directory still
 * being written is held back whole.
 */
static int
held_dir(void *arg, const char *rel, const char **why)
{
	struct backup *b = arg;

	return (checkpoint_held(b->opts, rel, why) == 1);
}

/* fs_walk's skipped_dir: ... as the view has it (put_back). */
static void
put_back_dir(void *arg, const char *rel, const char *why)
{
	struct backup *b = arg;

	recorder_enter(b);
	if (put_back(b, rel))
		b->hold_failed = 1;
	recorder_leave(b);
	log_note("'%s/%s' %s; held back", b->opts->source, rel, why);
	b->res->held_back++;
}

/* The entry this snapshot resolves at path, copied (free *mem): 1, 0
 * none, -1 error. */
static int
resolved_entry(struct backup *b, const char *path, struct entry *e,
    void **mem)
{
	struct catalog_iter *it;
	int rc;

	*mem = NULL;
	if ((it = catalog_entries(b->cat, b->snapshot_id, path)) == NULL)
		return (-1);
	if ((rc = catalog_iter_next(it, e)) == 1 &&
	    strcmp(e->path, path) != 0)
		rc = 0;
	if (rc == 1 && entry_dup(e, mem, e))
		rc = -1;
	catalog_iter_free(it);
	return (rc);
}

/*
 * The further names a tar stream gave as hard links, once every file is
 * recorded (the walk has the catalog alone): each takes the content of
 * the name it links to, and both an inode number of their group's own
 * and a link count, so that restore makes them one file.  The name linked
 * to was recorded with a count of 1 (a stream says nothing of later
 * names), so its row is written again, and the record is read from the
 * catalog rather than the spool.  0 or -1.
 */
static int
record_links(struct backup *b, struct fs_walk *w)
{
	struct entry l, x, old;
	const char *to;
	uint64_t groups = 0;
	void *mem;
	int rc;

	while ((rc = fs_walk_link_next(w, &l, &to)) == 1) {
		/* Seen: no tombstone for it. */
		if (b->level != LEVEL_FULL &&
		    catalog_resolver_get(b->view, l.path, &old) < 0)
			return (-1);
		if ((rc = resolved_entry(b, to, &x, &mem)) < 0)
			return (-1);
		if (rc == 0 || x.kind != ENTRY_FILE) {
			log_warn("'%s' is a hard link to '%s', which is not "
			    "stored: left out", l.path, to);
			free(mem);
			continue;
		}
		catalog_spool_off(b->spool);
		if (x.nlink < 2 || x.ino == 0) {
			/* Above any inode number a walk of the same
			 * dataset gave (restore groups by them). */
			x.ino = (UINT64_C(1) << 62) | ++groups;
			x.nlink = 2;
		} else
			x.nlink++;
		l.kind = ENTRY_FILE;
		l.size = x.size;
		l.content_id = x.content_id;
		l.ino = x.ino;
		l.dev = x.dev;
		l.nlink = x.nlink;
		rc = catalog_entry_replace(b->cat, b->snapshot_id, &x) ||
		    catalog_entry_add(b->cat, b->snapshot_id, &l) ? -1 : 0;
		free(mem);
		if (rc < 0)
			return (-1);
		count_entry(b->res, ENTRY_FILE);
	}
	return (rc);
}

static int
walk_source(struct backup *b)
{
	struct fs_walk_opts wo = b->opts->walk;
	struct fs_walk *w;
	struct entry e, old;
	uint8_t key[16];
	int rc, had_base = 0;

	if (b->opts->ncheckpoints > 0) {
		wo.skip_dir = held_dir;
		wo.skipped_dir = put_back_dir;
		wo.skip_arg = b;
	}
	if ((w = b->opts->from_tar != NULL ?
	    fs_walk_open_tar(b->opts->from_tar, &wo) :
	    fs_walk_open(b->opts->source, &wo)) == NULL)
		return (-1);
	b->walk = w;
	if (recorder_start(b)) {
		fs_walk_close(w);
		return (-1);
	}
	/* The walk takes the catalog only for its own work from here on. */
	recorder_leave(b);
	while ((rc = fs_walk_next(w, &e)) == 1) {
		if (signals_caught()) {
			rc = -1;
			break;
		}
		if (b->level != LEVEL_FULL) {
			int same;

			recorder_enter(b);
			if ((had_base = catalog_resolver_get(b->view, e.path,
			    &old)) < 0)
				rc = -1;
			same = had_base > 0 && unchanged(&e, &old);
			if (same && e.kind == ENTRY_FILE && e.nlink > 1) {
				link_key(key, &e);
				if (backup_links_put(b, key, old.content_id))
					rc = -1;
			}
			recorder_leave(b);
			if (rc < 0)
				break;
			if (same) {
				b->res->unchanged++;
				progress_update(&b->progress, 1, 0);
				continue;
			}
		}
		if (e.kind == ENTRY_FILE &&
		    checkpoint_unsettled(b->opts, e.mtime_ns, e.ctime_ns)) {
			const char *why = "was written to within the settle "
			    "time";

			int held = hold_checkpoint(b, e.path, why);

			if (held == 0) {
				recorder_enter(b);
				held = keep_previous(b, &e, had_base, 0, why);
				recorder_leave(b);
			}
			if (held < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		if (fs_walk_details(w, &e)) {
			rc = -1;
			break;
		}
		if (e.kind == ENTRY_FILE && e.size > 0) {
			if (walk_file(b, w, &e, had_base)) {
				rc = -1;
				break;
			}
		} else {
			recorder_enter(b);
			if (catalog_entry_add(b->cat, b->snapshot_id, &e))
				rc = -1;
			else {
				catalog_spool_entry(b->spool, &e, NULL, NULL,
				    NULL, 0);
				count_entry(b->res, e.kind);
			}
			recorder_leave(b);
			if (rc < 0)
				break;
		}
		progress_update(&b->progress, 1, 0);
	}
	/* The last batches: every file is then recorded. */
	if (rc == 0 && (b->hold_failed || drain(b)))
		rc = -1;
	/* The walk has the catalog again, and alone. */
	recorder_enter(b);
	if (recorder_stop(b, rc != 0))
		rc = -1;
	if (rc == 0 && hold_back_all(b))
		rc = -1;
	if (rc == 0 && record_links(b, w))
		rc = -1;
	b->walk = NULL;
	fs_walk_close(w);
	/* A signal that came as the walk ended stops the run all the
	 * same: the message says the snapshot is marked failed, and so
	 * it must be. */
	if (signals_caught()) {
		log_error("backup of '%s' interrupted by %s: the snapshot is "
		    "marked failed", b->opts->dataset,
		    signals_name(signals_caught()));
		rc = -1;
	}
	return (rc < 0 ? -1 : 0);
}

static int
is_tar_source(const char *s)
{
	return (strncmp(s, ENGINE_TAR_SOURCE, strlen(ENGINE_TAR_SOURCE)) ==
	    0);
}

/*
 * A dataset is one tree: a backup from another root than its newest
 * snapshot's (a typo in a cron line) would make @latest another tree,
 * with a tombstone for every file of the old one.  Refused unless
 * --new-source says it is meant (then a full starts the new chain when no
 * level is asked).  0, 1 refused (reported), -1 error.
 */
static int
check_source(struct backup *b, const char *source)
{
	struct stat st;
	char *prev;
	int found, rc = 0;

	/* Before any snapshot row, as the walk would refuse them: a file
	 * is no dataset, and the root's symlink is not followed (a failed
	 * snapshot for a mistyped argument would stay as history). */
	if (b->opts->from_tar == NULL && lstat(b->opts->source, &st) == 0 &&
	    !S_ISDIR(st.st_mode)) {
		log_error("'%s' is not a directory%s", b->opts->source,
		    S_ISLNK(st.st_mode) ? " (it is a symbolic link)" : "");
		return (1);
	}
	/* The newest snapshot's, read or known by its view: a host whose
	 * catalog is new, with a write-only key, checks it too. */
	if ((found = catalog_dataset_source(b->cat, b->opts->dataset,
	    &prev)) < 0)
		return (-1);
	/* Tar streams of a dataset are one tree whatever their names. */
	if (found && strcmp(prev, source) != 0 &&
	    !(is_tar_source(prev) && is_tar_source(source))) {
		if (!b->opts->new_source) {
			log_error("dataset '%s' is backed up from '%s', not "
			    "'%s' (--new-source if it moved)",
			    b->opts->dataset, prev, source);
			rc = 1;
		} else if (b->opts->level == LEVEL_AUTO)
			b->force_full = 1;
	}
	free(prev);
	return (rc);
}

/*
 * The snapshot's source: the root's real path, or "tar:" and the stream's
 * (a path's real path, "-" for standard input).  NULL with errno.
 */
static char *
source_name(const struct backup_opts *o)
{
	char *p, *s;
	size_t n;

	if (o->from_tar == NULL)
		return (realpath(o->source, NULL));
	if (strcmp(o->from_tar, "-") == 0)
		return (strdup(ENGINE_TAR_SOURCE "-"));
	if ((p = realpath(o->from_tar, NULL)) == NULL)
		return (NULL);
	n = strlen(ENGINE_TAR_SOURCE) + strlen(p) + 1;
	if ((s = malloc(n)) != NULL)
		snprintf(s, n, "%s%s", ENGINE_TAR_SOURCE, p);
	free(p);
	return (s);
}

struct estimate {
	int level;
	int64_t bytes;			/* the newest's; -1 none */
};

static int
newest_of_level(void *arg, const struct catalog_snapshot *s)
{
	struct estimate *e = arg;

	/* Listed oldest first: the last one seen is the newest. */
	if (s->state == SNAP_COMPLETE && s->level == e->level)
		e->bytes = s->bytes_read;
	return (0);
}

/*
 * What this backup will read, for the progress line's ETA: what the
 * dataset's newest complete snapshot of the same level read (a full
 * reads the tree, an hourly incremental one checkpoint step).  0 when
 * there is none, or nothing to go by: no ETA.
 */
static uint64_t
estimate_read(struct backup *b, int level)
{
	struct estimate e = { level, -1 };

	if (catalog_snapshot_list(b->cat, b->opts->dataset, newest_of_level,
	    &e) < 0 || e.bytes <= 0)
		return (0);
	return ((uint64_t)e.bytes);
}

/*
 * Decide the level and the base.  An incremental or differential without
 * a complete full to build on becomes a full, as Bacula does.
 */
static int
choose_level(struct backup *b, struct catalog_snapshot *s,
    struct catalog_snapshot *base)
{
	int level = b->opts->level, found;

	if (level == LEVEL_AUTO && b->force_full)
		level = LEVEL_FULL;
	if (level == LEVEL_AUTO) {
		if ((found = catalog_snapshot_base(b->cat, b->dataset_id,
		    LEVEL_DIFFERENTIAL, base)) < 0)
			return (-1);
		catalog_snapshot_release(base);
		level = found ? LEVEL_INCREMENTAL : LEVEL_FULL;
	}
	if (level != LEVEL_FULL) {
		if ((found = catalog_snapshot_base(b->cat, b->dataset_id,
		    level, base)) < 0)
			return (-1);
		if (!found) {
			log_note("no complete full of '%s' yet: taking a "
			    "full", b->opts->dataset);
			level = LEVEL_FULL;
		}
	}
	s->level = level;
	if (level == LEVEL_FULL) {
		/* Only for files that keep changing: the latest view. */
		if ((found = catalog_snapshot_base(b->cat, b->dataset_id,
		    LEVEL_INCREMENTAL, base)) < 0)
			return (-1);
		b->view_id = found ? base->id : 0;
		return (0);
	}
	s->parent_id = base->id;
	s->full_id = base->full_id;
	s->depth = base->depth + 1;
	memcpy(s->parent_sid, base->sid, sizeof(s->parent_sid));
	b->view_id = base->id;
	return (0);
}

enum engine_result
engine_backup(struct repo *r, struct catalog *c,
    const struct backup_opts *o, struct backup_result *res)
{
	struct catalog_snapshot s, base;
	struct backup b;
	uint8_t sid[SNAPSHOT_ID_HEX / 2];
	unsigned long warn0 = log_warning_count();
	double t0 = now_monotonic();
	int64_t deleted = 0;
	int status = ENGINE_ERROR, in_txn = 0, running = 0, i;

	memset(res, 0, sizeof(*res));
	memset(&b, 0, sizeof(b));
	memset(&s, 0, sizeof(s));
	memset(&base, 0, sizeof(base));
	b.repo = r;
	b.cat = c;
	b.opts = o;
	b.res = res;
	b.max_chunk = repo_chunker_params(r)->max;
	hmap_init(&b.links, 16);
	pthread_mutex_init(&b.links_mu, NULL);
	hmap_init(&b.pending_links, 16);
	progress_init(&b.progress, "backup", 0);

	if (packer_init(&b.packer, r, c, o->compress_level) ||
	    (b.chunker = chunker_new(repo_chunker_params(r),
	    ccrypto_keys_chunker_key(repo_keys(r)))) == NULL ||
	    (b.pool = pool_new(o->threads > 0 ? o->threads :
	    pool_default_threads())) == NULL)
		goto out;
	if ((b.workers = calloc((size_t)pool_threads(b.pool),
	    sizeof(*b.workers))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	for (i = 0; i < pool_threads(b.pool); i++)
		if ((b.workers[i].z = compressor_new(o->compress_level ?
		    o->compress_level : DEFAULT_ZSTD_LEVEL)) == NULL)
			goto out;
	for (i = 0; i < NBATCH; i++)
		b.batches[i].b = &b;
	b.fill = &b.batches[0];

	ccrypto_random(sid, sizeof(sid));
	hex_encode(s.sid, sid, sizeof(sid));
	if (catalog_begin(c))
		goto out;
	in_txn = 1;
	if (catalog_dataset_id(c, o->dataset, 1, &b.dataset_id) < 0)
		goto out;
	s.dataset_id = b.dataset_id;
	if ((s.source = source_name(o)) == NULL) {
		/* Nothing there is a mistake in the arguments, 2 as a file
		 * is; an unreadable disk stays an error. */
		if (errno == ENOENT || errno == ENOTDIR)
			status = ENGINE_REFUSED;
		log_errno("cannot open '%s'", o->from_tar != NULL ?
		    o->from_tar : o->source);
		goto out;
	}
	if ((i = check_source(&b, s.source)) != 0) {
		if (i > 0)
			status = ENGINE_REFUSED;
		goto out;
	}
	if (choose_level(&b, &s, &base))
		goto out;
	b.level = s.level;
	b.progress.total_bytes = estimate_read(&b, s.level);
	s.state = SNAP_RUNNING;
	s.started_ns = o->time_ns ? o->time_ns : now_realtime_ns();
	s.host = engine_host_name();
	if (o->tags != NULL && *o->tags && (s.tags = strdup(o->tags)) == NULL) {
		log_errno("out of memory");
		goto out;
	}
	if (catalog_snapshot_create(c, &s))
		goto out;
	if (s.level == LEVEL_FULL)
		s.full_id = s.id;
	/* Commit the running row: after a crash it is found and failed. */
	if (catalog_commit(c))
		goto out;
	running = 1;
	tuning_raise_at("backup-synced");
	/*
	 * The walk's commits need not be durable: one lost with power is a
	 * run that crashed earlier, its packs durable before, as always; an
	 * fsync each is time the walk waits for.  Nor need SQLite check the
	 * walk's foreign keys: every row it writes names a row the run has
	 * just found or written, under the writer's lock, and it deletes
	 * none that others name.  The transaction that completes the run is
	 * begun durable and checked again, after the walk.
	 */
	if (catalog_set_durable(c, 0) || catalog_set_checked(c, 0) ||
	    catalog_begin(c))
		goto out;
	if (b.level != LEVEL_FULL && open_view(&b))
		goto out;

	b.snapshot_id = s.id;
	if (b.level == LEVEL_FULL) {
		b.spool = packer_record_spool(&b.packer);
	}
	if (walk_source(&b))
		goto out;
	if (catalog_commit(c) || catalog_set_durable(c, 1) ||
	    catalog_set_checked(c, 1) || catalog_begin(c))
		goto out;
	/* The record is built next, at the run's peak: drop what the
	 * walk no longer needs first. */
	release_batches(&b);
	chunk_stream_free(b.cs);
	b.cs = NULL;
	progress_done(&b.progress);
	if (b.level != LEVEL_FULL &&
	    catalog_resolver_tombstones(b.view, s.id, &deleted))
		goto out;

	s.state = SNAP_COMPLETE;
	/* Finished = started + the run's length, also when --time gave
	 * the start: the wall clock is another time line then, and the
	 * duration (metrics, `log`) is what must stay true. */
	s.finished_ns = s.started_ns +
	    (int64_t)((now_monotonic() - t0) * 1e9);
	s.files = res->files;
	s.dirs = res->dirs;
	s.others = res->others;
	s.deleted = res->deleted = deleted;
	s.bytes_read = res->bytes_read;
	s.bytes_new = b.packer.bytes_new;
	/* The record carries what the data took; it cannot count itself. */
	s.bytes_stored = b.packer.bytes_stored;
	s.warnings = (int64_t)(log_warning_count() - warn0);
	if (catalog_snapshot_update(c, &s))
		goto out;
	if (packer_snapshot_record(&b.packer, &s, b.spool))
		goto out;
	catalog_spool_free(b.spool);
	b.spool = NULL;
	/* Here the record counts too: this is what the run added to packs. */
	s.bytes_stored = b.packer.bytes_stored;
	if (catalog_snapshot_update(c, &s))
		goto out;
	/* The last pack holds the record; its commit completes the run. */
	if (engine_lock_kept(r) || packer_flush(&b.packer))
		goto out;
	if (catalog_commit(c))
		goto out;
	in_txn = 0;

	memcpy(res->sid, s.sid, sizeof(res->sid));
	memcpy(res->parent_sid, s.parent_sid, sizeof(res->parent_sid));
	res->level = s.level;
	res->depth = s.depth;
	res->bytes_new = s.bytes_new;
	res->bytes_stored = s.bytes_stored;
	res->packs = b.packer.packs;
	res->warnings = s.warnings;
	status = res->warnings ? ENGINE_WARN : ENGINE_OK;
out:
	/* A failed run may leave the pool on the batches. */
	if (b.running)
		pool_wait(b.pool);
	progress_done(&b.progress);
	catalog_resolver_free(b.view);
	if (in_txn)
		catalog_rollback(c);
	(void)catalog_set_durable(c, 1);
	(void)catalog_set_checked(c, 1);
	/* A run that failed says so now, not at the next run (a crash
	 * leaves that to it). */
	if (running && status == ENGINE_ERROR)
		(void)catalog_snapshot_fail(c, s.id, now_realtime_ns());
	if (status == ENGINE_ERROR && signals_caught())
		status = ENGINE_INTERRUPTED;
	res->seconds = now_monotonic() - t0;
	catalog_spool_free(b.spool);
	packer_release(&b.packer);
	chunker_free(b.chunker);
	hmap_release(&b.links);
	pthread_mutex_destroy(&b.links_mu);
	hmap_release(&b.pending_links);
	while (b.nheld > 0)
		free(b.held[--b.nheld]);
	free(b.held);
	chunk_stream_free(b.cs);
	release_batches(&b);
	while (b.pending) {
		struct pfile *f = b.pending;

		b.pending = f->next;
		pfile_free(f);
	}
	if (b.workers)
		for (i = 0; i < pool_threads(b.pool); i++)
			compressor_free(b.workers[i].z);
	free(b.workers);
	pool_free(b.pool);
	catalog_snapshot_release(&s);
	catalog_snapshot_release(&base);
	return (status);
}
