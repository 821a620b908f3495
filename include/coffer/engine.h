#ifndef COFFER_ENGINE_H
#define COFFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/catalog.h"
#include "coffer/fs.h"
#include "coffer/repo.h"

/*
 * The pipelines that commands run: backup, restore.  They take an unlocked
 * repository and an open catalog, report their own errors, and return a
 * status from coffer/status.h.
 */

/*
 * Before writing: take the repository's and the catalog's writer locks,
 * remove what a crashed run left in tmp/, mark its snapshots failed.
 */
int engine_prepare_write(struct repo *r, struct catalog *c, int wait);

struct backup_opts {
	const char *dataset;
	const char *source;		/* the dataset's root directory */
	int level;			/* LEVEL_FULL (others: later) */
	struct fs_walk_opts walk;
	int compress_level;		/* zstd level; 0 = default */
};

struct backup_result {
	char sid[SNAPSHOT_ID_HEX + 1];
	int level;
	int64_t files, dirs, others;
	int64_t bytes_read, bytes_new, bytes_stored;
	int64_t warnings;
	int64_t packs;
	double seconds;
};

/*
 * Take a snapshot of o->source as dataset o->dataset.  Durability order as
 * in DESIGN.md: packs are durable before the catalog rows that use them
 * commit; the snapshot becomes complete in the last transaction.
 * STATUS_OK, STATUS_WARN (some entries skipped), or STATUS_ERROR.
 */
int engine_backup(struct repo *r, struct catalog *c,
    const struct backup_opts *o, struct backup_result *res);

struct restore_opts {
	const char *target;
	char *const *paths;		/* subset; NULL/0 = everything */
	size_t npaths;
	int force;			/* target may be non-empty */
};

struct restore_result {
	int64_t files;			/* entries restored */
	int64_t bytes;			/* file content written */
	int64_t failed;			/* files that could not be restored */
	double seconds;
};

/*
 * Restore snapshot s (its resolved chain) into o->target.  Every chunk is
 * authenticated and its keyed hash checked before it is written; a file
 * whose data is damaged or missing is named, removed, and the rest goes on.
 * STATUS_OK, STATUS_INTEGRITY (some files failed), STATUS_USAGE (target
 * not empty), or STATUS_ERROR.
 */
int engine_restore(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct restore_opts *o,
    struct restore_result *res);

#endif
