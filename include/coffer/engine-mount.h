#ifndef COFFER_ENGINE_MOUNT_H
#define COFFER_ENGINE_MOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"

/*
 * coffer mount (src/engine/mount.c): the repository's complete snapshots
 * as a read-only file system, DATASET/SNAPSHOT-ID/... with DATASET/latest
 * and DATASET/full as symlinks, served through src/fs/fuse.c.
 */
struct mount_opts {
	const char *mountpoint;
	int allow_other;		/* others may enter it (fuse.conf) */
	size_t cache_bytes;		/* decrypted chunks kept; 0: the
					 * default, MOUNT_CACHE_BYTES */
};

/* The chunk cache's default bound: with the catalog's cache, pack
 * readers and buffers, the mount stays under 128 MiB. */
#define MOUNT_CACHE_BYTES (64u << 20)

struct mount_result {
	int signal;			/* that ended it; 0: unmounted */
	int64_t damaged;		/* reads failed on damaged chunks */
};

/*
 * Serve the mount at o->mountpoint on this thread until it is unmounted
 * or a signal (SIGINT, SIGTERM, SIGHUP) ends it.  Entries and a
 * directory's names come from the catalog a path or a page at a time,
 * never a snapshot whole; a read fetches, authenticates and decrypts the
 * chunks it touches (rst_read_chunk), kept in a cache of at most
 * o->cache_bytes, and a sequential read has the next chunks fetched on a
 * thread of their own.  A damaged or missing chunk fails that read with
 * EIO, reported with the file, and is marked damaged in the catalog.
 * ENGINE_OK (ended as asked), ENGINE_REFUSED (a write-only key),
 * ENGINE_ERROR (could not mount).
 */
enum engine_result engine_mount(struct repo *r, struct catalog *c,
    const struct mount_opts *o, struct mount_result *res);

#endif
