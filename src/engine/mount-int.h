/*
 * coffer mount's chunk cache (mount-cache.c), used by mount.c's reads.
 */
#ifndef COFFER_ENGINE_MOUNT_INT_H
#define COFFER_ENGINE_MOUNT_INT_H

#include <pthread.h>

#include "restore-int.h"

/*
 * Decrypted chunks by catalog row, least recently used evicted first,
 * their bytes at most bound.  Slots are few (a chunk is at least the
 * chunker's minimum, or a small file's whole content), so they are
 * searched in a line rather than hashed.
 */
#define MCACHE_SLOTS 1024
/* Chunks fetched ahead of a sequential reader, at most. */
#define MCACHE_AHEAD 4

enum { MC_EMPTY, MC_LOADING, MC_READY, MC_BAD };

struct mslot {
	int64_t rowid;
	int state;			/* MC_* */
	uint8_t *data;			/* len bytes, while not MC_EMPTY */
	uint32_t len;
	uint64_t used;			/* the tick of its last use */
	struct catalog_chunk_loc loc;	/* what the read-ahead fetches */
};

/*
 * Only the serving thread takes slots and evicts them; the read-ahead
 * thread fills the slots queued for it (MC_LOADING), whose memory stays
 * put until it is done.  So a ready slot's data may be read without the
 * lock by the serving thread.
 */
struct mcache {
	struct repo *repo;
	size_t bound, bytes;
	struct mslot slot[MCACHE_SLOTS];
	uint64_t tick;
	struct rworker w;		/* the serving thread's */
	pthread_mutex_t mu;
	pthread_cond_t done;		/* a load finished */
	pthread_cond_t work;		/* something queued, or quit */
	int queue[MCACHE_AHEAD];
	size_t nqueue;
	int quit;
	int started;
	pthread_t th;
	struct rworker aw;		/* the read-ahead thread's */
};

/* Set up with the read-ahead thread started.  0 or -1 (reported). */
int mcache_init(struct mcache *mc, struct repo *r, size_t bound);
void mcache_release(struct mcache *mc);
/*
 * The plaintext of loc's chunk (loc->plain_len bytes), read through the
 * cache; valid until the next mcache call.  NULL when it is damaged or
 * missing (reported by the reader) or memory ran out.
 */
const uint8_t *mcache_get(struct mcache *mc,
    const struct catalog_chunk_loc *loc);
/* Queue loc's chunk for the read-ahead thread, unless it is cached or
 * the queue or the cache is full. */
void mcache_ahead(struct mcache *mc, const struct catalog_chunk_loc *loc);

#endif
