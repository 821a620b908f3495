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
 *
 * Prune shares the writer lock with backups, so it deletes in two phases
 * (doc/design.md, "Many writers"): a pack found unneeded is first
 * condemned, by a mark (a pack with a view record the authority signs)
 * that every writer's sync learns and that stops it counting on the
 * pack's chunks; the pack goes (its live chunks, if a snapshot that
 * completed since uses some, copied out first) only once every writer
 * that may not have seen the mark has ended: no other holder of the lock
 * began before the mark plus the margin.  Packs this catalog learnt of
 * after the oldest writer beside it began may be that writer's, not yet
 * in a snapshot: they are not condemned yet.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/catalog-journal.h"
#include "coffer/catalog-prune.h"
#include "coffer/catalog-record.h"
#include "coffer/catalog-known.h"
#include "coffer/engine-open.h"
#include "coffer/engine-retention.h"
#include "coffer/engine.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "engine-int.h"

enum fate { KEEP, DELETE, REPACK, MERGE, MARK, UNMARK };

static int
goes(enum fate f)
{
	return (f == DELETE || f == REPACK || f == MERGE || f == UNMARK);
}

/* The margin of a mark: how much later than it a writer beside a prune
 * must have begun, by its own clock, to be sure to have seen it (clocks
 * apart, listings late), unless COFFER_PRUNE_MARGIN says.  On object
 * storage it is also how long a mark waits before its packs may go, as
 * a listing may be that late. */
#define MARGIN_SECONDS 60

int64_t
engine_margin_ns(void)
{
	double margin = tuning_get()->prune_margin;

	return ((int64_t)((margin < 0 ? MARGIN_SECONDS : margin) * 1e9));
}

/* Journal packs merged from this many on (an hourly cron job that prunes
 * daily merges 24 a day into one, and a prune rewrites every journal row,
 * a few hundred bytes each). */
#define JOURNAL_MERGE_MIN 16

struct moved {
	int64_t rowid;			/* chunk row */
	size_t pack;			/* index into the new packs, */
	int64_t pack_id;		/* or an old pack's row (not 0) */
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

	/* The writers beside this prune (repo_lock_list). */
	size_t others;
	int64_t oldest_ns;
	int64_t margin_ns, lag_ns;
	/* This run's mark: its time, and when its put was done. */
	int64_t mark_ns, mark_done_ns;
	int phase2;			/* plan: the condemned packs' fates */
	const struct catalog_prune_pack *pk;	/* for marks_live */
	const enum fate *fate;		/* phase 2's, for marks_live */
	size_t npk;
	int marks_live;
	/* Chunk ids copied out, or found whole in a place not condemned:
	 * data packs go in one apply (phase 2), after the last mark of
	 * the run, so such a place stays uncondemned while it counts. */
	struct hmap copied;
	struct place_check check;	/* of the places of chunks */
	size_t *badi;			/* place_check_first's bad */
	size_t capbadi;
	struct {
		int64_t chunk, pack;
	} *bad;				/* copies read and found forged */
	size_t nbad, capbad;
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
			 * snapshot's record any more; a later one than
			 * this catalog holds (another host's forget, not
			 * taken in yet) is. */
			found = ri.revision >= s.revision;
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

static int
cmp_pack_name(const void *key, const void *elem)
{
	return (strcmp(key, ((const struct catalog_prune_pack *)elem)->name));
}

static int
mark_names(void *arg, const char *pack, int64_t time_ns)
{
	struct prune *p = arg;

	(void)time_ns;
	const struct catalog_prune_pack *k;

	/* Live while a pack it names stays (in phase 2: is not going). */
	if ((k = bsearch(pack, p->pk, p->npk, sizeof(*p->pk),
	    cmp_pack_name)) != NULL && (p->fate == NULL ||
	    !goes(p->fate[k - p->pk])))
		p->marks_live = 1;
	return (0);
}

static int
skip_snapshot(void *arg, const struct catalog_known *k)
{
	(void)arg;
	(void)k;
	return (0);
}

static int
skip_forgotten(void *arg, const char *sid, int64_t time_ns)
{
	(void)arg;
	(void)sid;
	(void)time_ns;
	return (0);
}

/*
 * Does a pack of views alone (a prune's mark) still condemn a pack the
 * catalog has?  Then it stays, so that a catalog made anew learns the
 * mark; once its packs are gone, it goes.  1, 0 (or unreadable: kept).
 */
static int
marks_live(struct prune *p, struct pack_reader *pr,
    const struct pack_entry *ents, size_t n)
{
	struct view_sink sink = { skip_snapshot, skip_forgotten, NULL, NULL,
	    mark_names };
	size_t i;

	sink.arg = p;
	p->marks_live = 0;
	for (i = 0; i < n; i++) {
		if (pack_reader_get(pr, &ents[i], p->z, &p->data) ||
		    view_parse(p->repo, p->data.data, p->data.len,
		    pack_reader_name(pr), &sink) != 0)
			return (1);
		p->res->bytes_read += ents[i].stored_len;
	}
	return (p->marks_live);
}

/* Did this catalog learn of pack k after the oldest writer beside this
 * prune began (less the margin)?  Then it may be that writer's, its
 * snapshot not yet written: not condemned now. */
static int
young(const struct prune *p, const struct catalog_prune_pack *k)
{
	return (p->others > 0 && k->seen_ns >= p->oldest_ns - p->margin_ns);
}

/* When a mark of time t was in the repository: its time is taken before
 * its put, which the margin covers; of this run's own mark, when the put
 * was done, so that a writer that began during the put counts as before
 * it, whatever the margin. */
static int64_t
mark_time(const struct prune *p, int64_t t)
{
	return (p->mark_ns != 0 && t == p->mark_ns ? p->mark_done_ns : t);
}

/* Did every other writer begin after time t plus the margin (so its
 * sync saw a mark of time t)? */
static int
writers_after(const struct prune *p, int64_t t)
{
	return (p->others == 0 || p->oldest_ns >= t + p->margin_ns);
}

/* May the packs a mark of time t condemned go now?  Every other writer
 * saw it, and on object storage the mark is the margin old (every
 * listing shows it). */
static int
mark_ripe(const struct prune *p, int64_t t)
{
	t = mark_time(p, t);
	return (now_realtime_ns() >= t + p->lag_ns && writers_after(p, t));
}

/* Decide each pack's fate; reads the indexes (and the records) of the
 * packs that hold something unneeded.  First (phase2 0): what becomes
 * condemned (MARK), and the journal packs merged; then (phase2 1): the
 * fate of each condemned pack whose mark is ripe. */
static int
plan(struct prune *p, struct catalog_prune_pack *pk, size_t n,
    enum fate *fate)
{
	struct pack_reader *pr;
	struct pack_entry *ents;
	size_t i, nents;
	uint64_t used;
	size_t njournal = 0, j, nj;
	int lr, mr;

	for (i = 0; i < n; i++) {
		int ripe = 0;

		fate[i] = KEEP;
		if (!p->phase2)
			p->res->bytes_before += pk[i].size;
		if (pk[i].condemned_ns > 0) {
			/* Its fate is phase 2's, when its mark is ripe. */
			if (!p->phase2 || !mark_ripe(p, pk[i].condemned_ns))
				continue;
			ripe = 1;
		} else if (p->phase2)
			continue;
		else if (pk[i].chunks > 0 &&
		    pk[i].live_chunks == pk[i].chunks)
			continue;	/* all of it needed */
		if ((pr = pack_reader_open(p->repo, pk[i].name)) == NULL)
			continue;	/* reported; left alone */
		ents = NULL;
		if (pack_reader_index(pr, &ents, &nents) == 0) {
			p->res->bytes_read += PACK_HEADER_BYTES +
			    (uint64_t)nents * (CCRYPTO_ID_BYTES + 18);
			lr = live_records(p, pr, ents, nents);
			/* Journal records alone (and their view). */
			for (j = 0, nj = 0; j < nents &&
			    (ents[j].type == PACK_REC_JOURNAL ||
			    ents[j].type == PACK_REC_VIEW); j++)
				nj += ents[j].type == PACK_REC_JOURNAL;
			if (ripe) {
				/* What a snapshot needs of it and no other
				 * pack surely holds is copied out first. */
				fate[i] = lr ? KEEP : REPACK;
			} else if (nents > 0 && j == nents && nj == 0 &&
			    pk[i].chunks == 0) {
				/* A mark: no chunk in it to count on, so it
				 * goes at once, once its packs are gone. */
				if (!p->phase2 && !marks_live(p, pr, ents,
				    nents))
					fate[i] = DELETE;
			} else if (nents > 0 && j == nents && pk[i].chunks == 0 &&
			    (mr = mergeable(p, pr, ents, nents)) != 0) {
				if (mr < 0) {
					free(ents);
					pack_reader_close(pr);
					return (-1);
				}
				fate[i] = MERGE;	/* if enough: below */
				njournal++;
			} else if (p->phase2 || lr != 0 || young(p, &pk[i]))
				;
			else if (pk[i].live_chunks == 0)
				fate[i] = MARK;
			else {
				used = pk[i].live_bytes + (uint64_t)
				    pk[i].live_chunks * (PACK_RECORD_HEADER_BYTES +
				    CCRYPTO_TAG_BYTES);
				if (pk[i].size > 0 && (double)(pk[i].size -
				    (used < pk[i].size ? used : pk[i].size)) /
				    (double)pk[i].size > p->o->max_unused)
					fate[i] = MARK;
			}
		}
		free(ents);
		pack_reader_close(pr);
		progress_update(&p->progress, 1, 0);
	}
	if (njournal < JOURNAL_MERGE_MIN || p->phase2)
		for (i = 0; i < n; i++)
			if (fate[i] == MERGE)
				fate[i] = KEEP;
	return (0);
}

/* Phase 2: the marks whose packs all go now go last (UNMARK). */
static void
unmark(struct prune *p, const struct catalog_prune_pack *pk, size_t n,
    enum fate *fate)
{
	struct pack_reader *pr;
	struct pack_entry *ents;
	size_t i, j, nents;

	p->fate = fate;
	for (i = 0; i < n; i++) {
		if (pk[i].chunks > 0 || pk[i].condemned_ns > 0 ||
		    fate[i] != KEEP ||
		    (pr = pack_reader_open(p->repo, pk[i].name)) == NULL)
			continue;
		ents = NULL;
		if (pack_reader_index(pr, &ents, &nents) == 0 && nents > 0) {
			for (j = 0; j < nents && ents[j].type == PACK_REC_VIEW;
			    j++)
				;
			if (j == nents && !marks_live(p, pr, ents, nents))
				fate[i] = UNMARK;
		}
		free(ents);
		pack_reader_close(pr);
	}
	p->fate = NULL;
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

/*
 * *k: which of the places catalog_prune_copy named holds the chunk, read
 * (place_check_first), or -1 when none does: the chunk is copied out,
 * and each copy that is not the chunk is noted in p->bad, to be
 * forgotten at the commit.  0 or -1.
 */
static int
held_elsewhere(struct prune *p, const struct catalog_chunk_place *pl,
    size_t n, int *k)
{
	uint64_t bytes = 0;
	size_t i, nbad;

	*k = -1;
	if (n == 0)
		return (0);
	if (array_grow(&p->badi, &p->capbadi, n, sizeof(*p->badi), 4) ||
	    array_grow(&p->bad, &p->capbad, p->nbad + n, sizeof(*p->bad), 8))
		return (-1);
	*k = place_check_first(&p->check, pl, n, p->badi, &nbad, &bytes);
	p->res->bytes_read += bytes;
	p->res->chunks_checked += (int64_t)nbad + (*k >= 0);
	for (i = 0; i < nbad; i++) {
		p->bad[p->nbad].chunk = pl[p->badi[i]].loc.rowid;
		p->bad[p->nbad].pack = pl[p->badi[i]].pack_id;
		p->nbad++;
	}
	return (0);
}

/* The chunk row lives in pack pl's place from the commit on. */
static int
relocate(struct prune *p, const struct catalog_chunk_place *pl)
{
	struct moved *m;

	if (array_grow(&p->moved, &p->capmoved, p->nmoved, sizeof(*p->moved),
	    1024))
		return (-1);
	m = &p->moved[p->nmoved++];
	memset(m, 0, sizeof(*m));
	m->rowid = pl->loc.rowid;
	m->pack_id = pl->pack_id;
	loc_entry(&pl->loc, &m->ent);
	return (0);
}

/* Copy out of pack pk, before it goes, each chunk a snapshot needs that
 * no other pack holds, read to be sure (catalog_prune_copy). */
static int
repack(struct prune *p, const struct catalog_prune_pack *pk)
{
	struct catalog_chunk_place *places = NULL;
	struct pack_reader *pr;
	struct pack_entry *ents = NULL, e;
	size_t i, nents, nplaces;
	int64_t row;
	int rc = -1, need, k;

	if ((pr = pack_reader_open(p->repo, pk->name)) == NULL)
		return (-1);
	if (pack_reader_index(pr, &ents, &nents))
		goto out;
	for (i = 0; i < nents; i++) {
		if (signals_caught())
			goto out;
		if (ents[i].type != PACK_REC_DATA)
			continue;
		/* Once: two condemned packs may hold a chunk both. */
		if (hmap_get(&p->copied, ents[i].id, &row))
			continue;
		free(places);
		places = NULL;
		if ((need = catalog_prune_copy(p->cat, pk->id, ents[i].id,
		    &row, &places, &nplaces)) < 0)
			goto out;
		if (!need)
			continue;
		if (hmap_put(&p->copied, ents[i].id, row))
			goto out;
		if (held_elsewhere(p, places, nplaces, &k))
			goto out;
		if (k >= 0) {
			/* A copy it was not located in is its place now. */
			if (!places[k].located && relocate(p, &places[k]))
				goto out;
			continue;
		}
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
		memset(&p->moved[p->nmoved], 0, sizeof(*p->moved));
		p->moved[p->nmoved].rowid = row;
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
	free(places);
	free(ents);
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
		if (goes(fate[i]))
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
		    p->moved[i].pack_id != 0 ? p->moved[i].pack_id :
		    rows[p->moved[i].pack], &loc))
			goto rollback;
	}
	for (i = 0; i < p->nbad; i++)
		if (catalog_chunk_copy_drop(p->cat, p->bad[i].chunk,
		    p->bad[i].pack))
			goto rollback;
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

/* The mark of the packs fated MARK: durable, then in the catalog. */
static int
mark(struct prune *p, const struct catalog_prune_pack *pk, size_t n,
    const enum fate *fate)
{
	struct pack_writer *w = NULL;
	struct pack_info info;
	struct buf v = BUF_INIT;
	const char **names;
	int64_t t = now_realtime_ns(), row;
	size_t i, k = 0;
	int rc = -1;

	if ((names = calloc(n + 1, sizeof(*names))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < n; i++)
		if (fate[i] == MARK)
			names[k++] = pk[i].name;
	if (view_note_condemned(p->repo, t, names, k, &v) ||
	    (w = pack_writer_new(p->repo)) == NULL ||
	    view_write(w, p->repo, &v) || pack_writer_finish(w, &info))
		goto out;
	p->mark_ns = t;
	p->mark_done_ns = now_realtime_ns();
	p->res->packs_written++;
	p->res->bytes_written += info.size;
	if (catalog_begin(p->cat))
		goto out;
	if (catalog_pack_add(p->cat, info.name, info.size, info.hash, &row))
		goto rollback;
	for (i = 0; i < k; i++)
		if (catalog_condemn(p->cat, names[i], t))
			goto rollback;
	if (catalog_commit(p->cat))
		goto rollback;
	rc = 0;
	goto out;
rollback:
	catalog_rollback(p->cat);
out:
	pack_writer_free(w);
	buf_release(&v);
	free(names);
	return (rc);
}

/* What the fates say: the live chunks of the packs repacked copied, the
 * journal packs merged, the catalog told, then the packs deleted. */
static enum engine_result
apply(struct prune *p, const struct catalog_prune_pack *pk, size_t n,
    const enum fate *fate)
{
	enum engine_result st;
	size_t i;
	int merge = 0, pass;

	for (i = 0; i < n; i++) {
		int64_t moved = p->res->chunks_moved;

		if (fate[i] == REPACK && repack(p, &pk[i]))
			return (ENGINE_ERROR);
		if (!goes(fate[i]))
			continue;
		p->res->bytes_deleted += pk[i].size;
		/* A pack nothing was copied out of was deleted. */
		if (fate[i] == MERGE || p->res->chunks_moved > moved)
			p->res->packs_repacked++;
		else
			p->res->packs_deleted++;
		merge |= fate[i] == MERGE;
	}
	if (finish_writer(p))
		return (ENGINE_ERROR);
	if (merge && merge_journal(p))
		return (ENGINE_ERROR);
	crash_point(p, "repacked");
	if (signals_caught()) {
		log_error("prune interrupted by %s: nothing was removed",
		    signals_name(signals_caught()));
		return (ENGINE_INTERRUPTED);
	}
	if (commit(p, pk, n, fate))
		return (ENGINE_ERROR);
	crash_point(p, "committed");
	/* From here on the catalog no longer knows the old packs: a
	 * failure to delete one leaves garbage the next prune removes. */
	st = ENGINE_OK;
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			/* The marks after the packs they name. */
			if (!goes(fate[i]) || (fate[i] == UNMARK) != pass)
				continue;
			tuning_raise_at("prune-deleting");
			if (repo_pack_remove(p->repo, pk[i].name))
				st = ENGINE_ERROR;
			crash_point(p, "removing");
		}
	p->nmade = p->nmoved = p->nbad = 0;
	p->merged = 0;
	return (st);
}

/* How many writers run beside this prune, and since when the oldest. */
static int
writers_beside(struct prune *p)
{
	struct repo_lock_who *w;
	size_t i;

	if (repo_lock_list(p->repo, 1, &w, &p->others))
		return (-1);
	p->oldest_ns = INT64_MAX;
	for (i = 0; i < p->others; i++)
		if (w[i].since_ns < p->oldest_ns)
			p->oldest_ns = w[i].since_ns;
	free(w);
	return (0);
}

/* The packs and their live chunks, as the repository is now; the
 * writers beside this prune listed first (repo_lock_list), so that
 * one that ended before has its snapshot in the catalog. */
static int
survey(struct prune *p, struct catalog_prune_pack **pk, size_t *n,
    enum fate **fate)
{
	struct sync_result sr;

	free(*pk);
	free(*fate);
	*pk = NULL;
	*fate = NULL;
	*n = 0;
	if (writers_beside(p) || engine_sync(p->repo, p->cat, &sr) < 0 ||
	    catalog_prune_begin(p->cat) ||
	    catalog_prune_packs(p->cat, pk, n))
		return (-1);
	if ((*fate = calloc(*n + 1, sizeof(**fate))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	p->pk = *pk;
	p->npk = *n;
	return (0);
}

/* The condemned packs (pk[i], fate) that still wait; *soonest: when the
 * first of them that only waits for its age may go (0: none). */
static size_t
waiting(const struct prune *p, const struct catalog_prune_pack *pk,
    size_t n, const enum fate *fate, uint64_t *bytes, int64_t *soonest)
{
	size_t i, k = 0;
	int64_t t;

	*bytes = 0;
	*soonest = 0;
	for (i = 0; i < n; i++) {
		if (fate[i] != MARK && (pk[i].condemned_ns == 0 ||
		    goes(fate[i])))
			continue;
		k++;
		*bytes += pk[i].size;
		t = fate[i] == MARK ? now_realtime_ns() :
		    mark_time(p, pk[i].condemned_ns);
		if (writers_after(p, t) &&
		    (*soonest == 0 || t + p->lag_ns < *soonest))
			*soonest = t + p->lag_ns;
	}
	return (k);
}

enum engine_result
engine_prune(struct repo *r, struct catalog *c, const struct prune_opts *o,
    struct prune_result *res)
{
	struct catalog_prune_pack *pk = NULL;
	enum fate *fate = NULL;
	struct prune p;
	double t0 = now_monotonic();
	int64_t soonest;
	size_t i, n = 0, marked = 0;
	int st = ENGINE_ERROR;

	memset(res, 0, sizeof(*res));
	memset(&p, 0, sizeof(p));
	p.repo = r;
	p.cat = c;
	p.o = o;
	p.res = res;
	p.crash_at = tuning_get()->test_prune_crash;
	hmap_init(&p.copied, CCRYPTO_ID_BYTES);
	p.check.repo = r;
	p.check.out = &p.scratch;
	p.margin_ns = engine_margin_ns();
	p.lag_ns = engine_repo_is_remote(repo_path(r)) ? p.margin_ns : 0;
	progress_init(&p.progress, "prune", 0);
	p.progress.unit = "packs";
	/* Every forget in the repository before any data goes. */
	if (!o->dry_run && engine_journal_flush(r, c))
		goto out;
	if ((p.z = compressor_new(1)) == NULL || survey(&p, &pk, &n, &fate))
		goto out;
	p.check.z = p.z;
	/* Phase 1: condemn what no snapshot needs; merge the journal. */
	if (plan(&p, pk, n, fate))
		goto out;
	tuning_raise_at("prune-planned");
	res->packs = (int64_t)n;
	for (i = 0; i < n; i++)
		marked += fate[i] == MARK;
	res->packs_marked = (int64_t)marked;
	if (o->dry_run) {
		for (i = 0; i < n; i++)
			if (fate[i] == MARK || pk[i].condemned_ns > 0) {
				res->packs_waiting++;
				res->bytes_waiting += pk[i].size;
			}
		st = ENGINE_OK;
		goto out;
	}
	for (i = 0; i < n && !goes(fate[i]); i++)
		;
	if (i < n && (st = apply(&p, pk, n, fate)) != ENGINE_OK)
		goto out;
	st = ENGINE_ERROR;
	if (marked > 0 && mark(&p, pk, n, fate))
		goto out;
	tuning_raise_at("prune-marked");
	/* Phase 2: the condemned packs whose marks are ripe go. */
	if (waiting(&p, pk, n, fate, &res->bytes_waiting, &soonest) == 0) {
		st = ENGINE_OK;
		goto out;
	}
	if (soonest > now_realtime_ns()) {
		/* Only the mark's age on object storage: wait it out. */
		log_info("waiting %.0f s for the mark to reach every listing",
		    (double)(soonest - now_realtime_ns()) / 1e9);
		while (now_realtime_ns() < soonest && !signals_caught())
			nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	}
	if (survey(&p, &pk, &n, &fate))
		goto out;
	p.phase2 = 1;
	if (plan(&p, pk, n, fate))
		goto out;
	unmark(&p, pk, n, fate);
	if ((st = apply(&p, pk, n, fate)) != ENGINE_OK)
		goto out;
	res->packs_waiting = (int64_t)waiting(&p, pk, n, fate,
	    &res->bytes_waiting, &soonest);
out:
	progress_done(&p.progress);
	res->seconds = now_monotonic() - t0;
	pack_writer_free(p.w);
	compressor_free(p.z);
	buf_release(&p.data);
	buf_release(&p.scratch);
	free(p.made);
	free(p.moved);
	free(p.bad);
	free(p.badi);
	place_check_release(&p.check);
	hmap_release(&p.copied);
	free(fate);
	free(pk);
	return (st);
}
