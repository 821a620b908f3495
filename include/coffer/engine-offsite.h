#ifndef COFFER_ENGINE_OFFSITE_H
#define COFFER_ENGINE_OFFSITE_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"
#include "coffer/engine-check.h"

/* Offsite bundles: export, import, a drill from bundles alone (src/engine/export.c, import.c, offsite.c). */

/*
 * Offsite export (export.c): a bundle of what target lacks for the chain
 * of snapshot (NULL: every complete snapshot), written to to (a
 * directory, "-", "rclone:REMOTE:PATH"; remote.h), with a .b2sum sidecar
 * where it is not a pipe, then recorded in the catalog.  No record is
 * decrypted (the catalog knows every pack a record's parts are in), so a
 * write-only key exports; with one, a snapshot whose parts' packs the
 * catalog does not know (kept since schema 9) is ENGINE_REFUSED.
 */
struct export_opts {
	const char *target;		/* the target's name */
	const char *to;			/* where the bundle goes */
	const struct catalog_snapshot *snapshot;	/* NULL: all */
	int level;			/* LEVEL_* or LEVEL_AUTO */
	int64_t now_ns;			/* the bundle's time; 0 now */
};
struct export_result {
	char name[128];			/* TARGET-NNNN.cfb */
	uint32_t seq, base_seq;
	int level;
	size_t snapshots;		/* in the manifest */
	size_t packs;			/* carried */
	size_t journal_packs;		/* of those, packs of the journal */
	uint64_t pack_bytes;		/* their size */
	uint64_t needed_bytes;		/* of that, what the snapshots need:
					 * the rest is other snapshots' data
					 * that shares their packs */
	uint64_t bytes;			/* the bundle's size */
	uint8_t manifest[32];
	char sum[2 * 64 + 1];		/* BLAKE2b-512, hex (the sidecar's) */
	double seconds;
};
enum engine_result engine_export(struct repo *r, struct catalog *c,
    const struct export_opts *o, struct export_result *res);

/*
 * Import (import.c): bundles from a directory, a pipe or an rclone
 * remote, each checked whole (signature, repository, every member's
 * name, size and hash, its place in the target's chain) before any pack
 * of it is made visible; then the catalog is brought up to date.  With
 * init, the repository at init_path is first created from the first
 * bundle (coffer.conf and key slots) and opened by open_new, which
 * unlocks it with the user's key and opens its catalog.
 */
struct import_opts {
	const char *from;		/* directory, "-", rclone:... */
	const char *init_path;		/* import --init: the new repo */
	int (*open_new)(void *arg, const char *path, struct repo **r,
	    struct catalog **c);
	void *arg;
};
struct import_result {
	size_t bundles;			/* imported */
	size_t skipped;			/* already imported */
	size_t packs;			/* made visible */
	uint64_t bytes;			/* read from bundles */
	double seconds;
	struct sync_result sync;
};
enum engine_result engine_import(struct repo **r, struct catalog **c,
    const struct import_opts *o, struct import_result *res);

/*
 * A drill from offsite bundles alone (offsite.c): the bundles at from are
 * imported into a scratch repository and catalog (under drill->scratch,
 * else $TMPDIR, else /tmp; removed afterwards unless drill->keep), which
 * open_scratch opens with the user's key at repo and catalog; the
 * snapshot named there (into *s, which the caller releases) is drilled
 * as engine_drill does, and the result also recorded in host's drill
 * history with source.  engine_drill's results, or those of
 * engine_import when the bundles would not import.
 */
struct drill_bundles_opts {
	const char *from;		/* directory, "-", rclone:... */
	const char *snapshot;		/* its name there: DATASET@latest */
	const char *source;		/* for the history: "bundles:FROM" */
	const struct drill_opts *drill;
	int (*open_scratch)(void *arg, const char *repo,
	    const char *catalog, struct repo **r, struct catalog **c);
	void *arg;
};
enum engine_result engine_drill_bundles(struct catalog *host,
    const struct drill_bundles_opts *o, struct catalog_snapshot *s,
    struct drill_result *res, struct import_result *imp);

#endif
