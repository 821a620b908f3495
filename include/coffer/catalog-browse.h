/*
 * Browsing a snapshot's view a path and a directory at a time, and a
 * file's chunks from an offset (src/catalog/browse.c), for coffer mount:
 * what it answers costs what it returns, never the size of the snapshot
 * or of the file.
 */
#ifndef COFFER_CATALOG_BROWSE_H
#define COFFER_CATALOG_BROWSE_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/catalog.h"

/*
 * Single-path lookups in the views of any snapshots, by name or by the
 * path's catalog row (its id, stable for the catalog's life: coffer
 * mount numbers inodes with it).  The statements are prepared once.
 * catalog_browse_get: the newest row of path (name, or path_id when name
 * is NULL) in snapshot_id's chain, tombstones counting as absent; 1 found
 * (*e filled, e->path its name, *path_id its row; strings valid until the
 * next call on b), 0 absent, -1 error (reported).  The root's entry is
 * ENTRY_ROOT_PATH.
 */
struct catalog_browse;
struct catalog_browse *catalog_browse_new(struct catalog *c);
int catalog_browse_get(struct catalog_browse *b, int64_t snapshot_id,
    const char *name, int64_t *path_id, struct entry *e);
void catalog_browse_free(struct catalog_browse *b);

/*
 * The entries directly in directory dir ("" for the root; the root's own
 * entry is not one of them) of snapshot_id's view, in name order (memcmp),
 * from the first whose name is after after (NULL: from the start).  What
 * is below a child directory is skipped by seeking past it in the path
 * index, so listing a directory reads its children and not its subtree,
 * and the caller may stop at any point: a listing of a million names is
 * read a page at a time, each page from where the last ended.
 * catalog_children_next: 1 with *e (e->path the whole path) and *path_id,
 * 0 at the end, -1 error (reported).  Strings are valid until the next
 * call.
 */
struct catalog_children;
struct catalog_children *catalog_children(struct catalog *c,
    int64_t snapshot_id, const char *dir, const char *after);
int catalog_children_next(struct catalog_children *it, struct entry *e,
    int64_t *path_id);
void catalog_children_free(struct catalog_children *it);

/*
 * At most max chunks of a content in file order, starting with the last
 * one that begins at or before offset (found by bisection of the chunk
 * list, not by reading it), or with the first when none does.  locs
 * malloc'd, as catalog_content_chunks_page gives them.  0 or -1.
 */
int catalog_content_chunks_at(struct catalog *c, int64_t content_id,
    uint64_t offset, size_t max, struct catalog_chunk_loc **locs,
    size_t *n);

/* The bytes of a content that are data, not holes, in *bytes.  0 or -1. */
int catalog_content_data_bytes(struct catalog *c, int64_t content_id,
    uint64_t *bytes);

#endif
