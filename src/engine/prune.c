/*
 * prune: reclaim the space of what no snapshot needs.
 *
 * From the catalog (brought up to date first, and with the journal
 * written, so that every forget is in the repository before any data
 * goes): the chunks an entry of a remaining snapshot uses are live.  A
 * pack with no live chunk is deleted; a pack whose live share leaves more
 * than max_unused of it unused is repacked: its live records are copied,
 * authenticated and still compressed, into new packs (sealed with their
 * own keys: a record cannot move between packs unread), and the pack is
 * deleted.  A pack that holds a live snapshot or journal record is kept
 * as it is: a snapshot record's head names the packs of its parts.
 * Packs of journal records alone (one per run that wrote rows) are
 * merged once there are JOURNAL_MERGE_MIN of them: one new record of
 * every journal row of the catalog (brought up to date, so it holds what
 * each of them holds), and they go.  Importing a journal row twice adds
 * nothing, so a crash on either side of the commit leaves copies the next
 * prune merges again.
 *
 * Order, so that kill -9 anywhere leaves a repository whose every kept
 * snapshot restores and that the next prune finishes: new packs durable;
 * then one catalog transaction (new packs, the moved chunks' places,
 * what is gone); then the old packs are deleted.  A crash before the
 * commit leaves new packs the next sync reads and the next prune finds
 * unneeded; one after it leaves old packs that hold nothing needed, whose
 * records of forgotten snapshots the journal keeps forgotten.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/catalog-journal.h"
#include "coffer/catalog-prune.h"
#include "coffer/catalog-record.h"
#include "coffer/engine-retention.h"
#include "coffer/engine.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "engine-int.h"

enum fate { KEEP, DELETE, REPACK, MERGE };

/* Journal packs merged from this many on (an hourly cron job that prunes
 * daily merges 24 a day into one, and a prune rewrites every journal row,
 * a few hundred bytes each). */
#define JOURNAL_MERGE_MIN 16

struct moved {
	int64_t rowid;			/* chunk row */
	size_t pack;			/* index into the new packs */
	struct pack_entry ent;		/* where it is now */
};

struct prune {
	struct repo *repo;
	struct catalog *cat;
	const struct prune_opts *o;
	struct prune_result *res;
	struct buf data, scratch;
	struct compressor *z;
	struct progress progress;
	const char *crash_at;		/* tests: COFFER_TEST_PRUNE_CRASH */

	struct pack_writer *w;
	struct pack_info *made;		/* new packs, durable */
	size_t nmade, capmade;
	struct moved *moved;
	size_t nmoved, capmoved;

	/* The merged journal, when packs of journal records are merged. */
	struct pack_info journal;
	struct catalog_journal_upto journal_upto;
	int merged;
};

/* Tests only: die here as kill -9 would, to prove each step safe. */
static void
crash_point(struct prune *p, const char *step)
{
	if (p->crash_at != NULL && strcmp(p->crash_at, step) == 0)
		raise(SIGKILL);
}

/*
 * Does pack pk hold a record that must stay (a journal record, or a
 * snapshot record of a snapshot the catalog holds, at the revision it
 * holds)?  1, 0, or -1.
 */
static int
live_records(struct prune *p, struct pack_reader *pr,
    const struct pack_entry *ents, size_t n)
{
	struct catalog_record_info ri;
	struct catalog_snapshot s;
	const uint8_t *img;
	const char *why;
	size_t i, len;
	int found;

	for (i = 0; i < n; i++) {
		if (ents[i].type == PACK_REC_JOURNAL)
			return (1);
		if (ents[i].type != PACK_REC_SNAPSHOT)
			continue;
		/* Read to learn whose it is: kept if unreadable. */
		if (pack_reader_get(pr, &ents[i], p->z, &p->data))
			return (1);
		p->res->bytes_read += ents[i].stored_len;
		if (snapshot_record_open(p->repo, p->data.data, p->data.len,
		    &img, &len, &why) != 1 ||
		    catalog_record_info(img, len, &ri))
			return (1);
		memset(&s, 0, sizeof(s));
		found = catalog_snapshot_find_sid(p->cat, ri.sid, &s);
		catalog_record_info_release(&ri);
		if (found < 0)
			return (1);
		if (found > 0) {
			/* A revision a rebase replaced is not the
			 * snapshot's record any more. */
			found = s.revision == ri.revision;
			catalog_snapshot_release(&s);
			if (found)
				return (1);
		}
	}
	return (0);
}

/*
 * May pack pr of journal records go into a merged one?  Only if every row
 * of it is in the catalog: each record authentic and of a format this
 * coffer imports whole (a later coffer's rows would be lost).  1, 0, -1.
 */
static int
mergeable(struct prune *p, struct pack_reader *pr,
    const struct pack_entry *ents, size_t n)
{
	const uint8_t *img;
	const char *why;
	size_t i, len;
	int rc;

	for (i = 0; i < n; i++) {
		if (ents[i].type != PACK_REC_JOURNAL)
			continue;	/* its view: the merged one has its own */
		if (pack_reader_get(pr, &ents[i], p->z, &p->data))
			return (0);
		p->res->bytes_read += ents[i].stored_len;
		if ((rc = journal_record_open(p->repo, p->data.data,
		    p->data.len, &p->scratch, &img, &len, &why)) != 1)
			return (rc < 0 ? -1 : 0);
		if ((rc = catalog_journal_known(img, len)) != 1)
			return (rc);
	}
	return (1);
}

/* Decide each pack's fate; reads the indexes (and the records) of the
 * packs that hold something unneeded. */
static int
plan(struct prune *p, struct catalog_prune_pack *pk, size_t n,
    enum fate *fate)
{
	struct pack_reader *pr;
	struct pack_entry *ents;
	size_t i, nents;
	uint64_t used;
	size_t njournal = 0, j;
	int lr, mr;

	for (i = 0; i < n; i++) {
		fate[i] = KEEP;
		p->res->bytes_before += pk[i].size;
		if (pk[i].chunks > 0 && pk[i].live_chunks == pk[i].chunks)
			continue;	/* all of it needed */
		if ((pr = pack_reader_open(p->repo, pk[i].name)) == NULL)
			continue;	/* reported; left alone */
		ents = NULL;
		if (pack_reader_index(pr, &ents, &nents) == 0) {
			p->res->bytes_read += PACK_HEADER_BYTES +
			    (uint64_t)nents * (CCRYPTO_ID_BYTES + 18);
			lr = live_records(p, pr, ents, nents);
			/* Journal records alone (and their view). */
			for (j = 0; j < nents &&
			    (ents[j].type == PACK_REC_JOURNAL ||
			    ents[j].type == PACK_REC_VIEW); j++)
				;
			if (nents > 0 && j == nents && pk[i].chunks == 0 &&
			    (mr = mergeable(p, pr, ents, nents)) != 0) {
				if (mr < 0) {
					free(ents);
					pack_reader_close(pr);
					return (-1);
				}
				fate[i] = MERGE;	/* if enough: below */
				njournal++;
			} else if (lr == 0 && pk[i].live_chunks == 0)
				fate[i] = DELETE;
			else if (lr == 0) {
				used = pk[i].live_bytes + (uint64_t)
				    pk[i].live_chunks * (PACK_RECORD_HEADER_BYTES +
				    CCRYPTO_TAG_BYTES);
				if (pk[i].size > 0 && (double)(pk[i].size -
				    (used < pk[i].size ? used : pk[i].size)) /
				    (double)pk[i].size > p->o->max_unused)
					fate[i] = REPACK;
			}
		}
		free(ents);
		pack_reader_close(pr);
		progress_update(&p->progress, 1, 0);
	}
	if (njournal < JOURNAL_MERGE_MIN)
		for (i = 0; i < n; i++)
			if (fate[i] == MERGE)
				fate[i] = KEEP;
	return (0);
}

static int
finish_writer(struct prune *p)
{
	struct pack_info info;

	if (p->w == NULL)
		return (0);
	if (pack_writer_finish(p->w, &info))
		return (-1);
	pack_writer_free(p->w);
	p->w = NULL;
	if (array_grow(&p->made, &p->capmade, p->nmade, sizeof(*p->made), 8))
		return (-1);
	p->made[p->nmade++] = info;
	p->res->packs_written++;
	p->res->bytes_written += info.size;
	return (0);
}

static const struct catalog_prune_chunk *
chunk_at(const struct catalog_prune_chunk *v, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (v[mid].offset < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < n && v[lo].offset == off ? &v[lo] : NULL);
}

/* Copy pack pk's live chunks into the new packs. */
static int
repack(struct prune *p, const struct catalog_prune_pack *pk)
{
	struct catalog_prune_chunk *ch = NULL;
	const struct catalog_prune_chunk *c;
	struct pack_reader *pr;
	struct pack_entry *ents = NULL, e;
	size_t i, nents, nch;
	int rc = -1;

	if ((pr = pack_reader_open(p->repo, pk->name)) == NULL)
		return (-1);
	if (pack_reader_index(pr, &ents, &nents) ||
	    catalog_prune_chunks(p->cat, pk->id, &ch, &nch))
		goto out;
	for (i = 0; i < nents; i++) {
		if (signals_caught())
			goto out;
		if (ents[i].type != PACK_REC_DATA ||
		    (c = chunk_at(ch, nch, ents[i].offset)) == NULL ||
		    !c->live)
			continue;
		if (pack_reader_get_stored(pr, &ents[i], &p->data))
			goto out;
		p->res->bytes_read += ents[i].stored_len;
		if (p->w == NULL && (p->w = pack_writer_new(p->repo)) == NULL)
			goto out;
		if (pack_writer_add(p->w, ents[i].type, ents[i].flags,
		    ents[i].id, p->data.data, p->data.len, ents[i].plain_len,
		    &e))
			goto out;
		if (array_grow(&p->moved, &p->capmoved, p->nmoved,
		    sizeof(*p->moved), 1024))
			goto out;
		p->moved[p->nmoved].rowid = c->rowid;
		p->moved[p->nmoved].pack = p->nmade;
		p->moved[p->nmoved].ent = e;
		p->nmoved++;
		p->res->chunks_moved++;
		if ((pack_writer_size(p->w) >= PACK_TARGET_SIZE ||
		    pack_writer_count(p->w) >= PACK_TARGET_RECORDS) &&
		    finish_writer(p))
			goto out;
	}
	rc = 0;
out:
	free(ents);
	free(ch);
	pack_reader_close(pr);
	return (rc);
}

/* Every journal row in one new pack, which commit records. */
static int
merge_journal(struct prune *p)
{
	size_t rows;

	if (journal_write(p->repo, p->cat, 1, &p->journal, &p->journal_upto,
	    &rows))
		return (-1);
	if (rows == 0)
		return (0);
	if (array_grow(&p->made, &p->capmade, p->nmade, sizeof(*p->made), 8))
		return (-1);
	p->made[p->nmade++] = p->journal;
	p->merged = 1;
	p->res->packs_written++;
	p->res->bytes_written += p->journal.size;
	return (0);
}

/* The one transaction: new packs, moved chunks, what is gone. */
static int
commit(struct prune *p, const struct catalog_prune_pack *pk, size_t n,
    const enum fate *fate)
{
	struct catalog_chunk_loc loc;
	int64_t *rows = NULL, *doomed = NULL;
	size_t i, k = 0;
	int rc = -1;

	if ((rows = calloc(p->nmade + 1, sizeof(*rows))) == NULL ||
	    (doomed = calloc(n + 1, sizeof(*doomed))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		if (fate[i] != KEEP)
			doomed[k++] = pk[i].id;
	if (catalog_begin(p->cat))
		goto out;
	for (i = 0; i < p->nmade; i++)
		if (catalog_pack_add(p->cat, p->made[i].name, p->made[i].size,
		    p->made[i].hash, &rows[i]))
			goto rollback;
	for (i = 0; i < p->nmoved; i++) {
		memset(&loc, 0, sizeof(loc));
		loc.pack_offset = p->moved[i].ent.offset;
		loc.plain_len = p->moved[i].ent.plain_len;
		loc.stored_len = p->moved[i].ent.stored_len;
		loc.type = p->moved[i].ent.type;
		loc.flags = p->moved[i].ent.flags;
		if (catalog_chunk_locate(p->cat, p->moved[i].rowid,
		    rows[p->moved[i].pack], &loc))
			goto rollback;
	}
	if (p->merged && catalog_journal_mark(p->cat, p->journal.name,
	    &p->journal_upto))
		goto rollback;
	if (catalog_prune_drop(p->cat, doomed, k) || catalog_commit(p->cat))
		goto rollback;
	rc = 0;
	goto out;
rollback:
	catalog_rollback(p->cat);
out:
	free(rows);
	free(doomed);
	return (rc);
}

enum engine_result
engine_prune(struct repo *r, struct catalog *c, const struct prune_opts *o,
    struct prune_result *res)
{
	struct catalog_prune_pack *pk = NULL;
	enum fate *fate = NULL;
	struct prune p;
	double t0 = now_monotonic();
	size_t i, n = 0;
	int st = ENGINE_ERROR, merge = 0;

	memset(res, 0, sizeof(*res));
	memset(&p, 0, sizeof(p));
	p.repo = r;
	p.cat = c;
	p.o = o;
	p.res = res;
	p.crash_at = tuning_get()->test_prune_crash;
	progress_init(&p.progress, "prune", 0);
	p.progress.unit = "packs";
	/* Every forget in the repository before any data goes. */
	if (!o->dry_run && engine_journal_flush(r, c))
		goto out;
	if ((p.z = compressor_new(1)) == NULL ||
	    catalog_prune_begin(c) || catalog_prune_packs(c, &pk, &n))
		goto out;
	if (n > 0 && (fate = calloc(n, sizeof(*fate))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	if (plan(&p, pk, n, fate))
		goto out;
	res->packs = (int64_t)n;
	for (i = 0; i < n; i++) {
		if (fate[i] == DELETE) {
			res->packs_deleted++;
			res->bytes_deleted += pk[i].size;
		} else if (fate[i] == REPACK || fate[i] == MERGE) {
			res->packs_repacked++;
			res->bytes_deleted += pk[i].size;
			merge |= fate[i] == MERGE;
		}
	}
	if (o->dry_run || res->packs_deleted + res->packs_repacked == 0) {
		st = ENGINE_OK;
		goto out;
	}
	for (i = 0; i < n; i++)
		if (fate[i] == REPACK && repack(&p, &pk[i]))
			goto out;
	if (finish_writer(&p))
		goto out;
	if (merge && merge_journal(&p))
		goto out;
	crash_point(&p, "repacked");
	if (signals_caught()) {
		log_error("prune interrupted by %s: nothing was removed",
		    signals_name(signals_caught()));
		st = ENGINE_INTERRUPTED;
		goto out;
	}
	if (commit(&p, pk, n, fate))
		goto out;
	crash_point(&p, "committed");
	/* From here on the catalog no longer knows the old packs: a
	 * failure to delete one leaves garbage the next prune removes. */
	st = ENGINE_OK;
	for (i = 0; i < n; i++) {
		if (fate[i] == KEEP)
			continue;
		if (repo_pack_remove(r, pk[i].name))
			st = ENGINE_ERROR;
		crash_point(&p, "removing");
	}
out:
	progress_done(&p.progress);
	res->seconds = now_monotonic() - t0;
	pack_writer_free(p.w);
	compressor_free(p.z);
	buf_release(&p.data);
	buf_release(&p.scratch);
	free(p.made);
	free(p.moved);
	free(fate);
	free(pk);
	return (st);
}
