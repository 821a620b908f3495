#ifndef COFFER_ENGINE_QUERY_H
#define COFFER_ENGINE_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"

/*
 * What the listing commands show, read from an open catalog
 * (src/engine/query.c): snapshots and their entries, the changes between
 * two, drills, verify runs, coffer runs and bundles.  Readers only.
 * Each list calls cb for each row, with the row's strings valid during
 * the call, stops when cb returns non-zero and returns that value; else
 * 0, or -1 (reported).
 */

/*
 * The snapshot called name into *s: a unique prefix (4 hex digits or
 * more) of its id, "DATASET@latest" (the newest complete),
 * "DATASET@full" (the newest complete full).  1 found, 0 none or
 * ambiguous (reported), -1.  catalog_snapshot_release frees *s, also
 * after a failure.
 */
int engine_snapshot_find(struct catalog *c, const char *name,
    struct catalog_snapshot *s);

/* The snapshots of dataset (NULL: of all), oldest first. */
int engine_snapshot_list(struct catalog *c, const char *dataset,
    int (*cb)(void *arg, const struct catalog_snapshot *s), void *arg);

/*
 * The entries snapshot_id resolves to (its chain, newest entry per path,
 * no tombstones), in path order; under: NULL, or a relative path, only
 * it and what is below it.
 */
int engine_entry_list(struct catalog *c, int64_t snapshot_id,
    const char *under, int (*cb)(void *arg, const struct entry *e),
    void *arg);

/*
 * What changed from snapshot a to snapshot b (catalog ids), in path
 * order: change is an enum catalog_diff_kind; ea is the entry in a, eb
 * in b (NULL where there is none).
 */
int engine_diff(struct catalog *c, int64_t a, int64_t b,
    int (*cb)(void *arg, int change, const struct entry *ea,
    const struct entry *eb), void *arg);

/* The drills of dataset (NULL: of all), by dataset then time; with
 * latest, only each dataset's newest. */
int engine_drill_list(struct catalog *c, const char *dataset, int latest,
    int (*cb)(void *arg, const struct catalog_drill *d), void *arg);

/* The verify runs, oldest first. */
int engine_verify_run_list(struct catalog *c,
    int (*cb)(void *arg, const struct catalog_verify_run *v), void *arg);

/* The runs of coffer run whose clock is at or after since_ns (0: all),
 * oldest first, each with its n actions in order. */
int engine_run_list(struct catalog *c, int64_t since_ns,
    int (*cb)(void *arg, const struct catalog_run *r,
    const struct catalog_run_action *a, size_t n), void *arg);

/* The bundles exported (exported 1) or imported (0), of target (NULL:
 * of all), by target and sequence. */
int engine_bundle_list(struct catalog *c, int exported, const char *target,
    int (*cb)(void *arg, const struct catalog_bundle *b), void *arg);

#endif
