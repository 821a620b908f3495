/*
 * Internal to src/engine: what verify, audit and drill share.
 */
#ifndef COFFER_INTEGRITY_INT_H
#define COFFER_INTEGRITY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/catalog.h"
#include "coffer/crypto.h"

/*
 * Does the file open at fd hold exactly the content of a catalog entry:
 * its chunks (locs, n, in file order) and its size?  Each chunk's keyed id
 * is recomputed from the bytes at the chunk's offset, and every byte
 * outside the chunks must be zero (a hole).  That proves the bytes equal,
 * whatever the file system made of the holes.  tmp is scratch space;
 * *bytes (may be NULL) grows by the chunk bytes read.  1 yes, 0 no
 * (*where: where the first chunk or hole that differs starts), -1 read
 * error (errno set; not reported).
 */
int integrity_content_matches(const struct ccrypto_keys *k, int fd,
    const struct catalog_chunk_loc *locs, size_t n, int64_t size,
    struct buf *tmp, int64_t *where, int64_t *bytes);

#endif
