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

/* The number of online processors (at least 1). */
int pool_default_threads(void);

#endif
