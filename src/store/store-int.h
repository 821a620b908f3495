#ifndef COFFER_STORE_STORE_INT_H
#define COFFER_STORE_STORE_INT_H

/*
 * Private to src/store: what storage.c lends the stores, and the read
 * cache (blocks.c) a store where a request costs a round trip sets as
 * its base's blocks.
 */
#include <stddef.h>
#include <stdint.h>

#include "coffer/storage.h"

/* Read on from off until len bytes or the end of o (a read of nothing),
 * through its store's read: 0, or -1 (storage_fail said why). */
int storage_read_on(struct storage_obj *o, uint64_t off, void *buf,
    size_t len, size_t *got);

/*
 * A cache of n aligned blocks of block bytes, shared by every thread
 * reading the store: NULL without memory.  storage_blocks_read reads as
 * storage_read does (short only at the end of o), from the blocks,
 * fetching a missing one whole; storage_blocks_forget drops the blocks of
 * an object that was written or deleted.
 */
struct storage_blocks *storage_blocks_new(size_t block, unsigned n);
void storage_blocks_free(struct storage_blocks *b);
size_t storage_blocks_size(const struct storage_blocks *b);
int storage_blocks_read(struct storage_blocks *b, struct storage_obj *o,
    uint64_t off, void *buf, size_t len, size_t *got);
void storage_blocks_forget(struct storage_blocks *b, const char *name);

/*
 * Locks: the suffix of the name under locks/ where the local and lease
 * stores keep a lock's shared holders (locks/NAME.shared/TOKEN), which
 * no lock name may end with.  store_busy_line: the holder line of a
 * busy lock, first's info and " (and N more)" when more block it.
 * store_holder_add: one more holder at the end of *v: 0 or -1
 * (storage_fail).
 */
#define STORE_SHARED ".shared"
/* storage_holder_gone_fn's judgement of a holder's info line: 1 gone. */
int store_holder_gone(const char *info);
void store_busy_line(char *out, size_t size, const char *first,
    size_t more);
int store_holder_add(struct storage_holder **v, size_t *n,
    const char *info, int shared, long long expires);

/*
 * Whether location is "mem:NAME" with NAME a memory store this process
 * named (storage_mem_named); store_mem_open: a new handle on it, NULL
 * (reported) without memory.  Where no test named one, as in coffer
 * itself, "mem:..." stays a directory's path.
 */
int store_mem_is(const char *location);
struct storage *store_mem_open(const char *location);

#endif
