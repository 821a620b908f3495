/*
 * What a write-only key knows of the snapshots it cannot read
 * (src/catalog/known.c): their view records, and the forgets the
 * authority signed.
 */
#ifndef COFFER_CATALOG_KNOWN_H
#define COFFER_CATALOG_KNOWN_H

#include <stdint.h>

#include "coffer/catalog.h"

struct catalog_known {
	char sid[SNAPSHOT_ID_HEX + 1];
	const char *dataset;
	int level;
	char parent_sid[SNAPSHOT_ID_HEX + 1];	/* "" for a full */
	uint32_t revision;
	int64_t started_ns;
	int64_t finished_ns;
	const char *host;
	const char *source;
};

/*
 * known_add: note a snapshot from the view record of pack (nothing for
 * one whose rows the catalog has, or one forgotten; a higher revision
 * replaces a lower).  forgotten_import: a forget the authority signed,
 * as the repository holds it (in_repo), its known row dropped; the
 * caller then applies it (catalog_forget_apply).  dataset_source: the
 * source of the dataset's newest complete snapshot, read or known, into
 * *source (malloc'd): 1, 0 when it has none, -1.  known_list: fn for
 * each known snapshot (dataset, then time order); fn's non-zero stops
 * it with -1.  Others 0 or -1 (reported).
 */
int catalog_known_add(struct catalog *c, const struct catalog_known *k,
    const char *pack);
int catalog_forgotten_import(struct catalog *c, const char *sid,
    int64_t time_ns);
/* A forget the authority signed in a pack's view (for this connection):
 * catalog_journal_import takes only those of a record's forgotten rows. */
int catalog_forget_ok_add(struct catalog *c, const char *sid);
/* 1 if the catalog imported bundles (its repository may hold packs whose
 * other snapshots never came), 0 if not, -1 (reported). */
int catalog_bundles_imported(struct catalog *c);
int catalog_dataset_source(struct catalog *c, const char *dataset,
    char **source);
int catalog_known_list(struct catalog *c,
    int (*fn)(void *, const char *sid, const char *dataset), void *arg);

/*
 * What catalog check says with a write-only key: snapshots known by their
 * views only, complete snapshots whose rows the catalog holds, and of
 * those the chunks needed that no pack holds (lost, or pruned while the
 * snapshot was not forgotten) and the snapshots needing them.  0 or -1.
 */
struct catalog_known_counts {
	int64_t known;
	int64_t readable;
	int64_t chunks_unlocated;
	int64_t snapshots_broken;
};
int catalog_known_counts(struct catalog *c, struct catalog_known_counts *n);

/*
 * The forgotten rows journal record would hold (catalog_journal_export's
 * all and upto): fn(arg, sid, time_ns) for each.  0 or -1.
 */
struct catalog_journal_upto;
int catalog_journal_forgotten(struct catalog *c, int all,
    const struct catalog_journal_upto *upto,
    int (*fn)(void *, const char *sid, int64_t time_ns), void *arg);

#endif
