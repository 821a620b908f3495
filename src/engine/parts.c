/*
 * A full's record parts built while its run goes on.  Each part the
 * spool closes is built from its rows (catalog_part_maker), signed and
 * compressed by a thread of its own, so that a run of many small files is
 * not left, once its walk is over, with all of its record to build: only
 * what the thread has not built, and the head, by the export as before
 * (packer_snapshot_record).
 *
 * The run never waits for the thread: one part at a time is handed over
 * and back through an atomic state, the thread sleeps on a semaphore
 * that the run's side posts, and at the end the part being built is
 * cancelled rather than waited for (the export builds it).  The
 * thread keeps the run's priority: at a lower one (SCHED_IDLE, nice) it
 * would be set aside inside malloc, whose two arenas (src/main.c) it
 * shares with the walk and the recorder, and stall them until it ran.
 *
 * The thread touches neither the catalog nor the packer.  The part it
 * has made is added to the open pack by the packer's holder between two
 * batches (parts_take) and listed in the catalog at the end of the run
 * (parts_end), in the run's last transaction, as the export's own parts
 * are.  A run that dies leaves them as parts without a head, which are
 * nothing (doc/format.md).
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/catalog-record.h"
#include "coffer/chunk.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/tuning.h"
#include "engine-int.h"

/* Whose the part's fields are: the run's (IDLE, READY, FAILED) or the
 * thread's (BUILDING). */
enum { PART_IDLE, PART_BUILDING, PART_READY, PART_FAILED };

struct parts {
	struct repo *repo;
	const struct catalog_spool *sp;	/* the run's: its closed parts */
	struct catalog_part_maker *maker;
	struct compressor *z;
	pthread_t th;
	int started;
	sem_t wake;			/* a part to build, or the end */
	sem_t made;			/* the part built (or not): "wait" */
	int wait;			/* COFFER_RECORD_PARTS_EARLY=wait */
	int state;			/* atomic: PART_* */
	int stop;			/* atomic */
	/* The part: which, from which rows, and what was made of it. */
	size_t i;
	struct catalog_spool_range r;
	struct buf rec, zbuf;
	struct packed_record pr;	/* in rec or zbuf */
	uint8_t rid[CCRYPTO_ID_BYTES];
	/* The run's: the parts in the pack (0..ndone-1) and their places. */
	size_t ndone;
	struct catalog_record_part *where;
	size_t capwhere;
};

static int
state_get(const struct parts *w)
{
	return (__atomic_load_n(&w->state, __ATOMIC_ACQUIRE));
}

static void
state_set(struct parts *w, int state)
{
	__atomic_store_n(&w->state, state, __ATOMIC_RELEASE);
}

/* Part w->i, of rows w->r: built, signed and compressed.  Its rows and
 * image go as soon as they are used: the walk goes on beside. */
static int
make_part(struct parts *w)
{
	if (catalog_part_maker_build(w->maker, w->i, &w->r, &w->rec) ||
	    catalog_part_maker_cancelled(w->maker) ||
	    packer_record_sign(w->repo, &w->rec, w->rid) ||
	    catalog_part_maker_cancelled(w->maker) ||
	    packer_record_compress(w->z, &w->rec, &w->zbuf, &w->pr))
		return (-1);
	return (0);
}

static void *
parts_main(void *arg)
{
	struct parts *w = arg;

	thread_name("parts");
	for (;;) {
		if (sem_wait(&w->wake) != 0 && errno == EINTR)
			continue;
		if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
			break;
		if (state_get(w) != PART_BUILDING)
			continue;
		if (make_part(w) != 0) {
			buf_release(&w->rec);
			buf_release(&w->zbuf);
			/* Cancelled: the part is the export's. */
			if (!catalog_part_maker_cancelled(w->maker))
				state_set(w, PART_FAILED);
			(void)sem_post(&w->made);
			break;
		}
		state_set(w, PART_READY);
		(void)sem_post(&w->made);
	}
	return (NULL);
}

/* The thread cancelled and ended: what it was building is dropped. */
static void
parts_stop(struct parts *w)
{
	if (!w->started)
		return;
	catalog_part_maker_cancel(w->maker);
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	(void)sem_post(&w->wake);
	pthread_join(w->th, NULL);
	w->started = 0;
	if (state_get(w) == PART_BUILDING) {
		buf_release(&w->rec);
		buf_release(&w->zbuf);
		state_set(w, PART_IDLE);
	}
}

void
parts_free(struct parts *w)
{
	if (w == NULL)
		return;
	parts_stop(w);
	sem_destroy(&w->wake);
	sem_destroy(&w->made);
	catalog_part_maker_free(w->maker);
	compressor_free(w->z);
	buf_release(&w->rec);
	buf_release(&w->zbuf);
	free(w->where);
	free(w);
}

struct parts *
parts_start(struct packer *p, int64_t snapshot_id,
    const struct catalog_spool *sp)
{
	struct parts *w;
	sigset_t all, old;
	int rc;

	if (!catalog_spool_usable(sp) ||
	    tuning_get()->record_parts_early == TUNING_PARTS_EARLY_OFF)
		return (NULL);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	w->repo = p->repo;
	w->sp = sp;
	w->wait = tuning_get()->record_parts_early == TUNING_PARTS_EARLY_WAIT;
	buf_init(&w->rec);
	buf_init(&w->zbuf);
	if (sem_init(&w->wake, 0, 0) != 0) {
		log_errno("cannot start a thread to build record parts");
		free(w);
		return (NULL);
	}
	if (sem_init(&w->made, 0, 0) != 0) {
		log_errno("cannot start a thread to build record parts");
		sem_destroy(&w->wake);
		free(w);
		return (NULL);
	}
	if ((w->maker = catalog_part_maker_new(p->cat, snapshot_id, sp,
	    SNAPSHOT_RECORD_HEADER)) == NULL ||
	    (w->z = compressor_new(p->zstd_level)) == NULL)
		goto fail;
	/* Its signals blocked: the run's threads take them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->th, NULL, parts_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_error("cannot start a thread to build record parts");
		goto fail;
	}
	w->started = 1;
	return (w);
fail:
	parts_free(w);
	return (NULL);
}

void
parts_poll(struct parts *w)
{
	if (w == NULL || !w->started || state_get(w) != PART_IDLE ||
	    !catalog_spool_closed(w->sp, w->ndone, &w->r))
		return;
	w->i = w->ndone;
	state_set(w, PART_BUILDING);
	(void)sem_post(&w->wake);
	while (w->wait && sem_wait(&w->made) != 0 && errno == EINTR)
		;
}

int
parts_take(struct parts *w, struct packer *p)
{
	struct catalog_record_part *at;
	int rc = -1;

	if (w == NULL)
		return (0);
	switch (state_get(w)) {
	case PART_READY:
		break;
	case PART_FAILED:
		return (-1);		/* reported */
	default:
		return (0);
	}
	if (array_grow(&w->where, &w->capwhere, w->ndone, sizeof(*w->where),
	    16))
		return (-1);
	at = &w->where[w->ndone];
	memset(at, 0, sizeof(*at));
	memcpy(at->rid, w->rid, sizeof(at->rid));
	if (packer_add_record(p, PACK_REC_SNAPSHOT, w->rid, &w->pr,
	    NULL) == 0) {
		memcpy(at->pack, pack_writer_name(p->pw), PACK_NAME_LEN + 1);
		w->ndone++;
		rc = 0;
		tuning_raise_at("backup-early-part");
	}
	buf_release(&w->rec);
	buf_release(&w->zbuf);
	state_set(w, rc == 0 ? PART_IDLE : PART_FAILED);
	/* The next, if closed already. */
	if (rc == 0)
		parts_poll(w);
	return (rc);
}

int
parts_end(struct parts *w, struct packer *p, struct catalog_record_part **where,
    size_t *capwhere, size_t *nparts)
{
	*nparts = 0;
	if (w == NULL)
		return (0);
	/* A part made is taken; the rest is the export's. */
	parts_stop(w);
	if (parts_take(w, p) || packer_part_added(p))
		return (-1);
	if (w->ndone > 0) {
		free(*where);
		*where = w->where;
		*capwhere = w->capwhere;
		w->where = NULL;
		w->capwhere = 0;
	}
	*nparts = w->ndone;
	return (0);
}
