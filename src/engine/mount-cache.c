/*
 * coffer mount's chunk cache and read-ahead (mount-int.h).  A chunk is
 * read as restore and dump read one (rst_read_chunk: authenticated,
 * decompressed, its keyed hash checked) into a slot of the cache, whose
 * bytes are bounded however large the files read are.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/log.h"
#include "mount-int.h"

static struct mslot *
find(struct mcache *mc, int64_t rowid)
{
	size_t i;

	for (i = 0; i < MCACHE_SLOTS; i++)
		if (mc->slot[i].state != MC_EMPTY &&
		    mc->slot[i].rowid == rowid)
			return (&mc->slot[i]);
	return (NULL);
}

/* Take slot s off the read-ahead queue: 1 if it was there (not begun). */
static int
unqueue(struct mcache *mc, struct mslot *s)
{
	size_t i;

	for (i = 0; i < mc->nqueue; i++)
		if (&mc->slot[mc->queue[i]] == s) {
			memmove(mc->queue + i, mc->queue + i + 1,
			    (--mc->nqueue - i) * sizeof(mc->queue[0]));
			return (1);
		}
	return (0);
}

static void
drop(struct mcache *mc, struct mslot *s)
{
	free(s->data);
	mc->bytes -= s->len;
	memset(s, 0, sizeof(*s));
}

/*
 * An empty slot with len bytes, evicting the least recently used ready
 * ones until they fit.  NULL when they cannot yet (chunks being fetched
 * hold the room; wait decides whether to wait for them) or memory ran
 * out.  Under mc->mu.
 */
static struct mslot *
take(struct mcache *mc, uint32_t len, int wait)
{
	struct mslot *s, *free_slot, *lru;
	size_t i, loading;

	for (;;) {
		free_slot = lru = NULL;
		loading = 0;
		for (i = 0; i < MCACHE_SLOTS; i++) {
			s = &mc->slot[i];
			if (s->state == MC_EMPTY) {
				if (free_slot == NULL)
					free_slot = s;
			} else if (s->state == MC_LOADING)
				loading++;
			else if (lru == NULL || s->used < lru->used)
				lru = s;
		}
		/* A chunk larger than the bound (a repository chunked
		 * coarser than it) is taken into an empty cache. */
		if (free_slot != NULL && (mc->bytes + len <= mc->bound ||
		    mc->bytes == 0))
			break;
		if (lru != NULL) {
			drop(mc, lru);
			continue;
		}
		/* The bound is larger than a chunk: once what is being
		 * fetched is in, it can be evicted. */
		if (!wait || loading == 0)
			return (NULL);
		pthread_cond_wait(&mc->done, &mc->mu);
	}
	if ((free_slot->data = malloc(len ? len : 1)) == NULL)
		return (NULL);
	free_slot->len = len;
	mc->bytes += len;
	return (free_slot);
}

static void *
ahead_main(void *arg)
{
	struct mcache *mc = arg;
	struct catalog_chunk_loc loc;
	struct mslot *s;
	int rc;

	pthread_mutex_lock(&mc->mu);
	for (;;) {
		while (mc->nqueue == 0 && !mc->quit)
			pthread_cond_wait(&mc->work, &mc->mu);
		if (mc->quit)
			break;
		s = &mc->slot[mc->queue[0]];
		memmove(mc->queue, mc->queue + 1, --mc->nqueue *
		    sizeof(mc->queue[0]));
		loc = s->loc;
		pthread_mutex_unlock(&mc->mu);
		/* A damaged chunk is an error when a read needs it, which
		 * names the file; met ahead, it is a warning. */
		(void)log_hold();
		rc = rst_read_chunk(mc->repo, &mc->aw, &loc, s->data, 1);
		log_release(1);
		pthread_mutex_lock(&mc->mu);
		s->state = rc == 0 ? MC_READY : MC_BAD;
		pthread_cond_broadcast(&mc->done);
	}
	pthread_mutex_unlock(&mc->mu);
	return (NULL);
}

int
mcache_init(struct mcache *mc, struct repo *r, size_t bound)
{
	sigset_t all, old;
	int rc;

	memset(mc, 0, sizeof(*mc));
	mc->repo = r;
	mc->bound = bound;
	pthread_mutex_init(&mc->mu, NULL);
	pthread_cond_init(&mc->done, NULL);
	pthread_cond_init(&mc->work, NULL);
	if ((mc->w.z = compressor_new(1)) == NULL ||
	    (mc->aw.z = compressor_new(1)) == NULL)
		goto err;
	/* Signals go to the serving thread, whose wait for the kernel
	 * they interrupt (libfuse's handlers end the loop). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&mc->th, NULL, ahead_main, mc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_error("cannot start the read-ahead thread: %s",
		    strerror(rc));
		goto err;
	}
	mc->started = 1;
	return (0);
err:
	mcache_release(mc);
	return (-1);
}

void
mcache_release(struct mcache *mc)
{
	size_t i;

	if (mc->started) {
		pthread_mutex_lock(&mc->mu);
		mc->quit = 1;
		pthread_cond_signal(&mc->work);
		pthread_mutex_unlock(&mc->mu);
		pthread_join(mc->th, NULL);
	}
	for (i = 0; i < MCACHE_SLOTS; i++)
		if (mc->slot[i].state != MC_EMPTY)
			drop(mc, &mc->slot[i]);
	rst_worker_release(&mc->w);
	rst_worker_release(&mc->aw);
	pthread_mutex_destroy(&mc->mu);
	pthread_cond_destroy(&mc->done);
	pthread_cond_destroy(&mc->work);
}

const uint8_t *
mcache_get(struct mcache *mc, const struct catalog_chunk_loc *loc)
{
	struct mslot *s;
	int rc;

	pthread_mutex_lock(&mc->mu);
	/* Queued ahead but not begun: read here, rather than wait for the
	 * chunks queued before it. */
	if ((s = find(mc, loc->rowid)) != NULL && s->state == MC_LOADING &&
	    s->len == loc->plain_len && unqueue(mc, s))
		goto read;
	while ((s = find(mc, loc->rowid)) != NULL && s->state == MC_LOADING)
		pthread_cond_wait(&mc->done, &mc->mu);
	/* Fetched ahead and found bad (said as a warning then): this
	 * read fails, and the next one reads it again. */
	if (s != NULL && s->state == MC_BAD) {
		drop(mc, s);
		pthread_mutex_unlock(&mc->mu);
		return (NULL);
	}
	if (s != NULL && s->len != loc->plain_len) {
		drop(mc, s);
		s = NULL;
	}
	if (s != NULL) {
		s->used = ++mc->tick;
		pthread_mutex_unlock(&mc->mu);
		return (s->data);
	}
	if ((s = take(mc, loc->plain_len, 1)) == NULL) {
		pthread_mutex_unlock(&mc->mu);
		log_error("out of memory");
		return (NULL);
	}
	s->rowid = loc->rowid;
	s->state = MC_LOADING;
read:
	pthread_mutex_unlock(&mc->mu);
	rc = rst_read_chunk(mc->repo, &mc->w, loc, s->data, 1);
	pthread_mutex_lock(&mc->mu);
	if (rc == 0) {
		s->state = MC_READY;
		s->used = ++mc->tick;
	} else
		drop(mc, s);
	pthread_cond_broadcast(&mc->done);
	pthread_mutex_unlock(&mc->mu);
	return (rc == 0 ? s->data : NULL);
}

void
mcache_ahead(struct mcache *mc, const struct catalog_chunk_loc *loc)
{
	struct mslot *s;

	pthread_mutex_lock(&mc->mu);
	if (mc->nqueue < MCACHE_AHEAD && find(mc, loc->rowid) == NULL &&
	    (s = take(mc, loc->plain_len, 0)) != NULL) {
		s->rowid = loc->rowid;
		s->state = MC_LOADING;
		s->used = ++mc->tick;
		s->loc = *loc;
		mc->queue[mc->nqueue++] = (int)(s - mc->slot);
		pthread_cond_signal(&mc->work);
	}
	pthread_mutex_unlock(&mc->mu);
}
