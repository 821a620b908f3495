/*
 * The recorder (backup-int.h): a backup's catalog work on a thread of its
 * own while the walk reads on, and the recording of a file's entry once
 * its chunks are all in the pack.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/log.h"
#include "backup-int.h"

/*
 * A further name of a file already recorded goes into the spool with its
 * content's hash and chunk list, read back from the catalog: the part
 * that holds this name may not hold the first, and a part must carry the
 * chunks of every content it names.  Where that cannot be done (a content
 * whose size is not the entry's: the file changed between its names),
 * the spool is turned off and the record read from the catalog.
 */
static void
spool_link(struct backup *b, const struct entry *e)
{
	struct catalog_chunk_loc *locs = NULL;
	struct catalog_chunk_ref *refs = NULL;
	uint8_t hash[32], (*cids)[32] = NULL;
	uint64_t size;
	size_t i, n = 0;

	if (!catalog_spool_usable(b->spool))
		return;
	if (catalog_content_info(b->cat, e->content_id, hash, &size) ||
	    size != (uint64_t)e->size ||
	    catalog_content_chunks(b->cat, e->content_id, &locs, &n) ||
	    (n > 0 && ((refs = calloc(n, sizeof(*refs))) == NULL ||
	    (cids = calloc(n, sizeof(*cids))) == NULL))) {
		catalog_spool_off(b->spool);
		goto out;
	}
	for (i = 0; i < n; i++) {
		memcpy(cids[i], locs[i].cid, sizeof(cids[i]));
		refs[i].chunk_rowid = locs[i].rowid;
		refs[i].file_offset = locs[i].file_offset;
		refs[i].len = locs[i].plain_len;
	}
	catalog_spool_entry(b->spool, e, hash, (const uint8_t (*)[32])cids,
	    refs, n);
out:
	free(locs);
	free(refs);
	free(cids);
}

int
backup_links_get(struct backup *b, const uint8_t key[16], int64_t *cid)
{
	int found;

	pthread_mutex_lock(&b->links_mu);
	found = hmap_get(&b->links, key, cid);
	pthread_mutex_unlock(&b->links_mu);
	return (found);
}

int
backup_links_put(struct backup *b, const uint8_t key[16], int64_t cid)
{
	int rc;

	pthread_mutex_lock(&b->links_mu);
	rc = hmap_put(&b->links, key, cid);
	pthread_mutex_unlock(&b->links_mu);
	return (rc);
}

/*
 * All of a file's chunks are resolved: its content's identity (hash)
 * and row.  A further name of a file recorded earlier has its content.
 */
static int
pfile_content(struct backup *b, struct pfile *f, uint8_t hash[32])
{
	/* Zeroed only for cppcheck, which cannot see init set it. */
	struct ccrypto_hash_state hs = { 0 };
	uint8_t lenoff[16];
	size_t i;

	if (f->link)
		return (0);
	/* The content's identity: its chunks and where they sit. */
	ccrypto_hash_init(repo_keys(b->repo), &hs);
	for (i = 0; i < f->nrefs; i++) {
		put_u64(lenoff, f->refs[i].file_offset);
		put_u64(lenoff + 8, f->refs[i].len);
		ccrypto_hash_update(&hs, lenoff, sizeof(lenoff));
		ccrypto_hash_update(&hs, f->ids[i], CCRYPTO_ID_BYTES);
	}
	ccrypto_hash_final(&hs, hash);
	return (catalog_content_put(b->cat, hash, (uint64_t)f->e.size,
	    f->refs, f->nrefs, &f->e.content_id));
}

/* The file's entry is in: its record's rows spooled, the file counted
 * and, with other names to come, known by its inode. */
static int
pfile_entered(struct backup *b, struct pfile *f, const uint8_t hash[32])
{
	uint8_t key[16];

	if (f->link) {
		spool_link(b, &f->e);
		count_entry(b->res, f->e.kind);
		return (0);
	}
	catalog_spool_entry(b->spool, &f->e, hash,
	    (const uint8_t (*)[32])f->ids, f->refs, f->nrefs);
	count_entry(b->res, f->e.kind);
	if (f->e.nlink > 1) {
		link_key(key, &f->e);
		if (backup_links_put(b, key, f->e.content_id))
			return (-1);
	}
	return (0);
}

/* Record a file whose chunks are all resolved: content, entry, the rest. */
int
backup_pfile_finish(struct backup *b, struct pfile *f)
{
	uint8_t hash[32];

	if (pfile_content(b, f, hash) ||
	    catalog_entry_add(b->cat, b->snapshot_id, &f->e))
		return (-1);
	return (pfile_entered(b, f, hash));
}

/* backup_pfile_finish for the recorder's batch (qnext), the entries added
 * several to a statement. */
static int
pfiles_finish(struct backup *b, struct pfile *batch)
{
	const struct entry *es[RECORD_AT_ONCE] = { NULL };
	uint8_t hash[RECORD_AT_ONCE][32];
	struct pfile *f;
	size_t n;

	for (f = batch, n = 0; f != NULL; f = f->qnext, n++) {
		if (n == RECORD_AT_ONCE) {
			log_error("internal error: a recorder's batch too long");
			return (-1);
		}
		es[n] = &f->e;
		if (pfile_content(b, f, hash[n]))
			return (-1);
	}
	if (catalog_entries_add(b->cat, b->snapshot_id, es, n))
		return (-1);
	for (f = batch, n = 0; f != NULL; f = f->qnext, n++)
		if (pfile_entered(b, f, hash[n]))
			return (-1);
	return (0);
}

/* The walk's thread takes the catalog (waiting for the recorder's few
 * files), and gives it back. */
void
recorder_enter(struct backup *b)
{
	struct recorder *r = &b->rec;

	if (!r->started || r->depth++ > 0)
		return;
	pthread_mutex_lock(&r->mu);
	r->wants++;
	while (r->owner == OWN_RECORDER)
		pthread_cond_wait(&r->cv, &r->mu);
	r->wants--;
	r->owner = OWN_WALK;
	pthread_mutex_unlock(&r->mu);
}

void
recorder_leave(struct backup *b)
{
	struct recorder *r = &b->rec;

	if (!r->started || --r->depth > 0)
		return;
	pthread_mutex_lock(&r->mu);
	r->owner = OWN_NONE;
	/* Woken only with work to do: an unchanged tree gives the catalog
	 * back once an entry, and a wakeup each time is a system call. */
	if (r->head != NULL || r->task)
		pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void *
recorder_main(void *arg)
{
	struct backup *b = arg;
	struct recorder *r = &b->rec;
	struct pfile *batch, *f;
	int n, failed;

	thread_name("record");
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!(r->head == NULL && !r->task && r->stop) &&
		    ((r->head == NULL && !r->task) ||
		    r->owner != OWN_NONE || r->wants > 0))
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->head == NULL && !r->task)
			break;
		r->owner = OWN_RECORDER;
		if (r->task) {
			failed = r->failed;
			pthread_mutex_unlock(&r->mu);
			if (!failed && backup_step_task(b))
				failed = 1;
			pthread_mutex_lock(&r->mu);
			r->failed |= failed;
			r->task = 0;
			/* The walk waits for it (recorder_task_wait) or asks for the
			 * catalog: told now, before files are recorded. */
			r->owner = OWN_NONE;
			pthread_cond_broadcast(&r->cv);
			continue;
		}
		batch = r->head;
		for (f = batch, n = 1; f->qnext != NULL && n < RECORD_AT_ONCE;
		    f = f->qnext, n++)
			;
		r->head = f->qnext;
		if (r->head == NULL)
			r->tail = &r->head;
		f->qnext = NULL;
		r->nqueued -= (size_t)n;
		failed = r->failed;
		pthread_mutex_unlock(&r->mu);
		/* Not in the step's task, which the walk waits for. */
		if (!failed && packer_locate_ready(&b->packer))
			failed = 1;
		if (!failed && pfiles_finish(b, batch))
			failed = 1;
		pthread_mutex_lock(&r->mu);
		for (f = batch; f != NULL; f = f->qnext)
			f->state = FINISHED;
		r->failed |= failed;
		r->owner = OWN_NONE;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return (NULL);
}

int
recorder_start(struct backup *b)
{
	struct recorder *r = &b->rec;

	r->tail = &r->head;
	r->owner = OWN_WALK;
	r->depth = 1;
	if (pthread_mutex_init(&r->mu, NULL) != 0 ||
	    pthread_cond_init(&r->cv, NULL) != 0 ||
	    pthread_create(&r->th, NULL, recorder_main, b) != 0) {
		log_error("cannot start a thread");
		return (-1);
	}
	r->started = 1;
	return (0);
}

/* Queue a file whose chunks are all in the pack.  The walk has the
 * catalog: the recorder is woken when it gives it back. */
void
recorder_queue(struct backup *b, struct pfile *f)
{
	struct recorder *r = &b->rec;

	f->state = RECORDING;
	f->qnext = NULL;
	pthread_mutex_lock(&r->mu);
	*r->tail = f;
	r->tail = &f->qnext;
	r->nqueued++;
	pthread_mutex_unlock(&r->mu);
}

/*
 * Hand the step's task to the recorder.  It runs once the walk gives the
 * catalog back: at once, unless the step was taken inside the walk's own
 * catalog work (a drain for a hardlink), then at the next recorder_task_wait.
 */
void
recorder_task_post(struct backup *b)
{
	struct recorder *r = &b->rec;

	pthread_mutex_lock(&r->mu);
	r->task = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/*
 * The step's task is done (or the recorder failed: -1).  The walk may
 * have the catalog (a drain from inside its own catalog work): it lends
 * it meanwhile, and has it back after.
 */
int
recorder_task_wait(struct backup *b)
{
	struct recorder *r = &b->rec;
	int lent = 0, failed;

	pthread_mutex_lock(&r->mu);
	if (r->owner == OWN_WALK) {
		lent = 1;
		r->owner = OWN_NONE;
		pthread_cond_broadcast(&r->cv);
	}
	while (r->task && !r->failed)
		pthread_cond_wait(&r->cv, &r->mu);
	if (lent) {
		r->wants++;
		while (r->owner == OWN_RECORDER)
			pthread_cond_wait(&r->cv, &r->mu);
		r->wants--;
		r->owner = OWN_WALK;
	}
	failed = r->failed;
	pthread_mutex_unlock(&r->mu);
	return (failed ? -1 : 0);
}

/* At most left files queued (0: every queued file recorded); the walk
 * has the catalog before and after.  -1 if one could not be. */
int
recorder_wait(struct backup *b, size_t left)
{
	struct recorder *r = &b->rec;
	int failed;

	pthread_mutex_lock(&r->mu);
	r->owner = OWN_NONE;
	pthread_cond_broadcast(&r->cv);
	while ((r->nqueued > left && !r->failed) ||
	    r->owner == OWN_RECORDER)
		pthread_cond_wait(&r->cv, &r->mu);
	r->owner = OWN_WALK;
	failed = r->failed;
	pthread_mutex_unlock(&r->mu);
	return (failed ? -1 : 0);
}

/* The walk is over (or failed): the thread ends once its queue is
 * recorded; the walk keeps the catalog. */
int
recorder_stop(struct backup *b, int failed)
{
	struct recorder *r = &b->rec;

	if (!r->started)
		return (0);
	pthread_mutex_lock(&r->mu);
	r->failed |= failed;	/* then the queue is dropped, not recorded */
	r->stop = 1;
	r->owner = OWN_NONE;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->th, NULL);
	r->started = 0;
	r->owner = OWN_WALK;
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	return (r->failed ? -1 : 0);
}

size_t
recorder_backlog(struct backup *b)
{
	struct recorder *r = &b->rec;
	size_t n;

	if (!r->started)
		return (0);
	pthread_mutex_lock(&r->mu);
	n = r->nqueued;
	pthread_mutex_unlock(&r->mu);
	return (n);
}

int
recorder_failed(struct backup *b)
{
	struct recorder *r = &b->rec;
	int failed;

	if (!r->started)
		return (0);
	pthread_mutex_lock(&r->mu);
	failed = r->failed;
	pthread_mutex_unlock(&r->mu);
	return (failed);
}

