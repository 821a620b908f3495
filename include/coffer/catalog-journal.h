/*
 * The journal (journal.c): what the catalog alone would lose with the
 * host, carried in the repository as signed journal records.
 * doc/format.md, "Journal records".
 */
#ifndef COFFER_CATALOG_JOURNAL_H
#define COFFER_CATALOG_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/catalog.h"

/*
 * The journal (journal.c): drill results, failed or interrupted
 * snapshots and forgotten ones, which the catalog alone would lose with
 * the host, carried in the repository as signed journal records.
 *
 * catalog_journal_export: the rows not yet in the repository as a journal
 * image appended to out, or with all every row (prune's merge of journal
 * packs); *n how many (0: nothing to write, out unchanged) and *upto what
 * catalog_journal_mark needs to mark exactly those.  Key uses alone make a
 * record only when one is new to the repository: the key's newest use
 * there is a day older or more, or there is none; otherwise they wait for
 * the next record written for something else, so that a host backing up
 * hourly adds no record per run.
 * catalog_journal_mark: they are now in pack (durable), in the caller's
 * transaction.
 * catalog_journal_import: the rows of a journal image stored in pack
 * (signature checked by the caller) that the catalog lacks; *added how
 * many.  Outside any
 * transaction.  0 or -1 (reported).
 */
struct catalog_journal_upto {
	int64_t drill;			/* drill rows up to this id */
	int64_t snapshot;		/* failed snapshots up to this id */
	int64_t forgotten;		/* forgotten snapshots up to this id */
	int64_t bundle;			/* bundles up to this id */
	int64_t run;			/* runs up to this id */
	int64_t key_use;		/* key uses up to this id */
	int64_t verify;			/* verify runs up to this id */
};
int catalog_journal_export(struct catalog *c, int all, struct buf *out,
    size_t *n, struct catalog_journal_upto *upto);
int catalog_journal_mark(struct catalog *c, const char *pack,
    const struct catalog_journal_upto *upto);
/* 1 if this coffer imports every row of journal image img (a format it
 * knows), 0 if not (a later format, or not an image), -1 on error. */
int catalog_journal_known(const uint8_t *img, size_t len);
/* authority: the record is the authority's (view.c), so its drills and
 * verifies count; otherwise they are left out, with a warning. */
int catalog_journal_import(struct catalog *c, const uint8_t *img,
    size_t len, const char *pack, int authority, size_t *added);

/*
 * What a catalog rebuild would lose to damaged journal records (verify):
 * catalog_journal_cover notes the rows of each journal record that reads
 * (temporary tables of this connection; a format this coffer does not
 * import notes nothing); catalog_journal_lost then calls fn for each row
 * the repository held (in_repo) that no noted record holds: its kind
 * ("drill", "run", "failed snapshot", "forgotten snapshot", "bundle",
 * "key use"), its time and what names it, and forgets the notes.  fn's
 * non-zero return stops it and is returned.  0 or -1 (reported).
 */
typedef int catalog_lost_fn(void *arg, const char *kind, int64_t time_ns,
    const char *name);
int catalog_journal_cover(struct catalog *c, const uint8_t *img,
    size_t len);
int catalog_journal_lost(struct catalog *c, catalog_lost_fn *fn, void *arg);
/*
 * The packs of journal records (drills, failed runs, forgets, bundles,
 * runs, key uses) that the catalog lists, whoever wrote them, sorted,
 * malloc'd (names_free, coffer/name.h): the packs whose journal record
 * was written here (catalog_journal_mark) or whose index says they hold
 * one (catalog_pack_import).  An export carries them all, unread.  0 or
 * -1 (reported).
 */
int catalog_journal_packs(struct catalog *c, char ***packs, size_t *n);

#endif
