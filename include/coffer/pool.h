#ifndef COFFER_POOL_H
#define COFFER_POOL_H

#include <stddef.h>

/*
 * A fixed pool of threads for data-parallel loops: pool_run spreads the
 * indexes 0..n-1 over the workers and the calling thread, and returns
 * when all are done.  The worker number (0..pool_threads-1) lets a caller
 * keep per-thread state (a compressor, a scratch buffer).
 */
struct pool;

/* threads >= 1 (the caller counts as one); NULL on error (reported). */
struct pool *pool_new(int threads);
void pool_free(struct pool *p);
int pool_threads(const struct pool *p);
void pool_run(struct pool *p, size_t n,
    void (*fn)(void *arg, size_t i, int worker), void *arg);

/*
 * The same loop in two halves, so that the calling thread can do serial
 * work (read the next batch, write the last one) while the workers run:
 * pool_start hands the loop to the worker threads and returns at once;
 * pool_wait joins in as worker 0 and returns when every index of every
 * loop started is done.  Loops queue (up to 4; one more runs the queue
 * first): a later loop's indexes are handed out once the earlier one's
 * are all taken, so its first ones may run beside the earlier one's last
 * ones.  A pool without worker threads runs the loops in pool_wait.
 */
void pool_start(struct pool *p, size_t n,
    void (*fn)(void *arg, size_t i, int worker), void *arg);
void pool_wait(struct pool *p);

/*
 * pool_wait, but returning once every loop but the last keep started is
 * done; those may still run (and this thread may have run some of their
 * indexes meanwhile).  So a caller can queue its next loop before waiting
 * for the ones it needs finished, and no thread idles at that wait while
 * another finishes the last index.
 */
void pool_wait_but(struct pool *p, size_t keep);

/* The number of online processors (at least 1). */
int pool_default_threads(void);

/*
 * Name the calling thread "coffer/ROLE" (at most 8 bytes of role: the
 * kernel keeps 15), so that top -H, ps -L, perf and gdb tell coffer's
 * threads apart.  Best effort.
 */
void thread_name(const char *role);

#endif
