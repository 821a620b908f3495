#ifndef COFFER_ENGINE_RETENTION_H
#define COFFER_ENGINE_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"

/* Forget and prune: what retention keeps, and the space the rest held (src/engine/forget.c, prune.c). */

/*
 * Retention (forget.c): which complete snapshots the rules (or names) keep
 * and which go.  With rules, a kept snapshot whose parent goes is first
 * rebased (catalog_snapshot_rebase, records only) onto its nearest kept
 * ancestor, or made a full, and written again as a record of the next
 * revision signed by the authority (a full key only: ENGINE_REFUSED
 * otherwise), so that only what the rules keep stays.  A named one that a
 * kept one builds on is refused (ENGINE_REFUSED, naming them).  Unless
 * dry_run, the rest are forgotten: their rows leave the catalog and their
 * ids go to the repository's journal (the writer locks are held).  Data
 * goes with engine_prune.  ENGINE_OK, ENGINE_REFUSED or ENGINE_ERROR.
 */
struct forget_opts {
	struct retention rules;
	const char *dataset;		/* NULL: every dataset */
	const char *const *sids;	/* names to forget instead of rules */
	size_t nsids;
	int dry_run;
	int force;			/* forget named ones marked kept too */
	double wait;			/* for the forget lock (another forget,
					 * a writer's catalog catch-up):
					 * seconds, < 0 for ever, 0 not at
					 * all */
};
struct forget_item {
	char sid[SNAPSHOT_ID_HEX + 1];
	char parent_sid[SNAPSHOT_ID_HEX + 1];
	char *dataset;
	char *tags;			/* "a,keep" or NULL */
	int level;
	int64_t time_ns;
	int64_t finished_ns;
	int keep;
	unsigned reasons;		/* RETAIN_* */
	char needed_by[SNAPSHOT_ID_HEX + 1];	/* RETAIN_CHAIN: for whom */
	/* Kept, its parent not: rebased to rebase_level on onto ("" for a
	 * full). */
	int rebase;
	int rebase_level;
	char onto[SNAPSHOT_ID_HEX + 1];
};
struct forget_result {
	struct forget_item *items;	/* by dataset, newest first */
	size_t n;
	size_t forget;			/* items not kept */
	size_t forgotten;		/* of those, removed (not dry_run) */
	size_t rebase;			/* items kept to be rebased */
	size_t rebased;			/* of those, rebased (not dry_run) */
};
enum engine_result engine_forget(struct repo *r, struct catalog *c,
    const struct forget_opts *o, struct forget_result *res);
void engine_forget_result_release(struct forget_result *res);

/*
 * Prune (prune.c): delete the packs no remaining snapshot needs anything
 * of, and repack those whose unneeded share is above max_unused (live
 * chunks copied into new packs), in the crash-safe order prune.c
 * describes.  The writer locks are held.  With dry_run, only the plan.
 * ENGINE_OK, ENGINE_ERROR or ENGINE_INTERRUPTED.
 */
struct prune_opts {
	double max_unused;		/* 0..1: repack above this share */
	int dry_run;
};
struct prune_result {
	int64_t packs;			/* in the catalog before */
	int64_t packs_deleted;		/* nothing needed: deleted */
	int64_t packs_repacked;		/* live chunks moved, then deleted */
	int64_t packs_written;		/* new packs */
	int64_t chunks_moved;
	int64_t chunks_checked;		/* copies read before trusting one */
	int64_t packs_marked;		/* condemned by this prune */
	int64_t packs_waiting;		/* condemned, not yet deleted */
	uint64_t bytes_waiting;		/* of those */
	uint64_t bytes_before;		/* of all packs */
	uint64_t bytes_deleted;		/* of the packs deleted or repacked */
	uint64_t bytes_written;		/* of the new packs */
	uint64_t bytes_read;		/* indexes, records, moved chunks */
	double seconds;
};
enum engine_result engine_prune(struct repo *r, struct catalog *c,
    const struct prune_opts *o, struct prune_result *res);

#endif
