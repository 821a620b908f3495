/*
 * The catalog as a cache of the repository (doc/design.md): every command
 * that opens a repository first brings its catalog up to date with what
 * the repository holds.
 *
 * What the catalog lacks is found by pack name: the packs in packs/ that
 * the catalog's pack table does not list.  Packs are immutable and named
 * at random, so a pack the catalog knows needs no second look, and an
 * up-to-date catalog costs one listing of packs/ and one query.  Of a new
 * pack only the index trailer and the snapshot records are read, never
 * data records.
 *
 * A snapshot recorded in parts (export.c) is imported from its head,
 * which names its other parts by pack and record id; they are read from
 * wherever they are, known pack or new, and a part met on its own is
 * nothing until its head comes.
 *
 * Order, so that a crash at any point leaves a catalog the next sync
 * completes: the snapshot records first (each in its own transaction; a
 * record's chunks are rows without a location until then), then the
 * packs with their chunks' locations (one transaction).  A pack row is
 * therefore written only after every record in it was imported, and a
 * pack without its row is read again next time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/catalog-journal.h"
#include "coffer/catalog-known.h"
#include "coffer/catalog-prune.h"
#include "coffer/catalog-record.h"
#include "coffer/engine-catalog.h"
#include "coffer/engine.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/progress.h"
#include "coffer/tuning.h"
#include "engine-int.h"

struct rec_ref {
	char pack[PACK_NAME_LEN + 1];
	struct pack_entry ent;
	int last;		/* the last snapshot record of its pack */
	char sid[SNAPSHOT_ID_HEX + 1];	/* waiting for its parent */
};

struct view_pack {
	struct sync *s;
	const char *pack;
};

struct sync {
	struct repo *repo;
	struct catalog *cat;
	struct sync_result *res;
	struct compressor *z;
	struct buf data, scratch;
	struct progress progress;
	/* The parts of records in parts, read for their heads. */
	struct record_reader parts;
	struct hmap parts_done;		/* record id -> 1 */
	/* The authority's signatures of journal records, from the views. */
	uint8_t (*jsigs)[CCRYPTO_SIG_BYTES];
	size_t njsigs, capjsigs;
	struct hmap jsig_ids;		/* record id -> index in jsigs */
};

/* The packs of a (repository, sorted) not in b (catalog, sorted), and
 * those of b not in a (into only_b, room for nb). */
static void
diff_sorted(char **a, size_t na, char **b, size_t nb, char ***only_a,
    size_t *n_only_a, char **only_b, size_t *n_only_b)
{
	size_t i = 0, j = 0, k = 0;
	int cmp;

	*n_only_b = 0;
	while (i < na || j < nb) {
		cmp = i == na ? 1 : j == nb ? -1 : strcmp(a[i], b[j]);
		if (cmp < 0)
			(*only_a)[k++] = a[i++];
		else if (cmp > 0) {
			only_b[(*n_only_b)++] = b[j];
			j++;
		} else {
			i++;
			j++;
		}
	}
	*n_only_a = k;
}

/*
 * Keep in gone only the packs that are not there: a listing may miss an
 * object (one just written, on object storage; what the local store
 * leaves out, a link or a FIFO where a pack belongs), and a pack that is
 * there is not gone, nor is one that cannot be looked at: that is an
 * error (reported), not a pack to drop.  0 or -1.
 */
static int
confirm_gone(struct repo *r, char **gone, size_t *ngone)
{
	size_t i, k = 0;
	int have;

	for (i = 0; i < *ngone; i++) {
		if ((have = repo_pack_exists(r, gone[i])) < 0)
			return (-1);
		if (!have)
			gone[k++] = gone[i];
	}
	*ngone = k;
	return (0);
}

static int
view_snapshot_skip(void *arg, const struct catalog_known *k)
{
	(void)arg;
	(void)k;
	return (0);	/* a full key reads the record itself */
}

static int
view_forget_ok(void *arg, const char *sid, int64_t time_ns)
{
	struct sync *s = arg;

	(void)time_ns;
	return (catalog_forget_ok_add(s->cat, sid));
}

static int
view_journal_sig(void *arg, const uint8_t *id, const uint8_t *sig)
{
	struct sync *s = arg;

	if (array_grow(&s->jsigs, &s->capjsigs, s->njsigs, sizeof(*s->jsigs),
	    16))
		return (-1);
	memcpy(s->jsigs[s->njsigs], sig, CCRYPTO_SIG_BYTES);
	if (hmap_put(&s->jsig_ids, id, (int64_t)s->njsigs))
		return (-1);
	s->njsigs++;
	return (0);
}

/* A prune's mark, from a view (any key: writers must know it). */
static int
view_condemned(void *arg, const char *pack, int64_t time_ns)
{
	struct sync *s = arg;

	s->res->condemned++;
	return (catalog_condemn(s->cat, pack, time_ns));
}

static int
view_pack_condemned(void *arg, const char *pack, int64_t time_ns)
{
	struct view_pack *vp = arg;

	return (view_condemned(vp->s, pack, time_ns));
}

/* 1 if the journal record (image img) of ref is the authority's. */
static int
journal_signed(struct sync *s, const struct rec_ref *ref, const uint8_t *img,
    size_t len)
{
	int64_t k;

	return (hmap_get(&s->jsig_ids, ref->ent.id, &k) &&
	    view_journal_signed(s->repo, s->jsigs[k], img, len));
}

/*
 * The forgets the authority signed in the new packs' views: a journal
 * record's forgotten rows count only if one of these lists them (a
 * write-only key signs journal records too).  0, or -1 when a view could
 * not be read (reported; its forgets wait for the next sync).
 */
static int
signed_forgets(struct sync *s, const struct rec_ref *recs, size_t n)
{
	struct view_sink sink = { view_snapshot_skip, view_forget_ok,
	    view_journal_sig, NULL, view_condemned };
	struct pack_reader *pr = NULL;
	size_t i;
	int rc = 0;

	sink.arg = s;
	for (i = 0; i < n; i++) {
		if (recs[i].ent.type != PACK_REC_VIEW)
			continue;
		if (pr == NULL || strcmp(pack_reader_name(pr),
		    recs[i].pack) != 0) {
			pack_reader_close(pr);
			if ((pr = pack_reader_open(s->repo, recs[i].pack)) ==
			    NULL) {
				rc = -1;
				continue;
			}
		}
		if (pack_reader_get(pr, &recs[i].ent, s->z, &s->data) ||
		    view_parse(s->repo, s->data.data, s->data.len,
		    recs[i].pack, &sink) != 0)
			rc = -1;
	}
	pack_reader_close(pr);
	return (rc);
}

/* Read, authenticate and verify the signature of a snapshot record;
 * *authority: it also carries the authority's (a rebase). */
static int
read_record(struct sync *s, struct pack_reader *pr, const struct rec_ref *rf,
    const uint8_t **img, size_t *len, int *authority)
{
	const char *why;
	int rc;

	if (pack_reader_get(pr, &rf->ent, s->z, &s->data))
		return (-1);
	s->res->bytes_read += rf->ent.stored_len;
	rc = snapshot_record_open_auth(s->repo, s->data.data, s->data.len,
	    img, len, authority, &why);
	if (rc == 0)
		log_error("pack '%s': a snapshot record %s: left out", rf->pack,
		    why);
	return (rc == 1 ? 0 : -1);
}

/* Journal records (drill results, failed runs), after the snapshots
 * they name. */
static void
import_journals(struct sync *s, const struct rec_ref *recs, size_t n)
{
	struct pack_reader *pr = NULL;
	const uint8_t *img;
	const char *why;
	size_t i, len, added;
	int rc;

	if (signed_forgets(s, recs, n))
		s->res->records_bad++;
	for (i = 0; i < n; i++) {
		if (recs[i].ent.type != PACK_REC_JOURNAL)
			continue;
		if (pr == NULL || strcmp(pack_reader_name(pr),
		    recs[i].pack) != 0) {
			pack_reader_close(pr);
			if ((pr = pack_reader_open(s->repo, recs[i].pack)) ==
			    NULL) {
				s->res->records_bad++;
				continue;
			}
		}
		if (pack_reader_get(pr, &recs[i].ent, s->z, &s->data)) {
			s->res->records_bad++;
			continue;
		}
		s->res->bytes_read += recs[i].ent.stored_len;
		rc = journal_record_open(s->repo, s->data.data, s->data.len,
		    &s->scratch, &img, &len, &why);
		if (rc != 1) {
			if (rc == 0)
				log_error("pack '%s': a journal record %s: "
				    "left out", recs[i].pack, why);
			s->res->records_bad++;
			continue;
		}
		if (catalog_journal_import(s->cat, img, len, recs[i].pack,
		    journal_signed(s, &recs[i], img, len), &added))
			s->res->records_bad++;
		else
			s->res->journal += added;
	}
	pack_reader_close(pr);
}

/* catalog_part_fetch_fn: a part its head names, from any pack. */
static int
fetch_part(void *arg, const struct catalog_record_part *where, int idx,
    const uint8_t **img, size_t *len)
{
	struct sync *s = arg;
	uint64_t before = s->parts.bytes_read;
	int rc;

	(void)idx;
	rc = record_reader_get(&s->parts, where->pack, where->rid, img, len);
	s->res->bytes_read += s->parts.bytes_read - before;
	if (rc != 1)
		return (-1);
	/* Read through its head: not again on its own. */
	if (hmap_put(&s->parts_done, where->rid, 1))
		return (-1);
	return (0);
}

/*
 * The order records are read in: a snapshot in parts is imported from
 * its head, which reads the parts it names; a part met before its head
 * is read for nothing (it says only that it is a part).  Heads are
 * written last, so the last snapshot record of each pack comes first;
 * then the others, in pack order.
 */
static int
heads_first(const void *a, const void *b)
{
	const struct rec_ref *x = a, *y = b;
	int c;

	if (x->last != y->last)
		return (x->last ? -1 : 1);
	if ((c = strcmp(x->pack, y->pack)) != 0)
		return (c);
	return (x->ent.offset < y->ent.offset ? -1 :
	    x->ent.offset > y->ent.offset);
}

/*
 * Import the records, parents before children: a record whose parent is
 * not there yet waits for the next pass; those still waiting when a pass
 * imports nothing have lost their parent.
 */
static int
import_records(struct sync *s, const struct rec_ref *all, size_t nall,
    struct rec_ref **waiting, size_t *nwaiting)
{
	struct catalog_record_meta m;
	struct pack_reader *pr = NULL;
	struct rec_ref *recs;
	const uint8_t *img;
	size_t i, k, n = 0, len, progress;
	uint64_t read0;
	int rc, authority;

	/* The snapshot records, in a list of their own that shrinks as
	 * they are imported; those left waiting go to *waiting. */
	*waiting = NULL;
	*nwaiting = 0;
	if (nall == 0)
		return (0);
	if ((recs = calloc(nall, sizeof(*recs))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < nall; i++)
		if (all[i].ent.type == PACK_REC_SNAPSHOT)
			recs[n++] = all[i];
	qsort(recs, n, sizeof(*recs), heads_first);
	do {
		progress = 0;
		for (i = k = 0; i < n; i++) {
			int64_t done;

			if (hmap_get(&s->parts_done, recs[i].ent.id, &done))
				continue;
			read0 = s->res->bytes_read;
			if (pr == NULL || strcmp(pack_reader_name(pr),
			    recs[i].pack) != 0) {
				pack_reader_close(pr);
				if ((pr = pack_reader_open(s->repo,
				    recs[i].pack)) == NULL) {
					s->res->records_bad++;
					continue;
				}
			}
			if (read_record(s, pr, &recs[i], &img, &len,
			    &authority) != 0) {
				s->res->records_bad++;
				continue;
			}
			rc = catalog_record_import(s->cat, img, len,
			    recs[i].pack, authority, fetch_part, s, &m);
			if (rc == 2) {
				memcpy(recs[i].sid, m.sid, sizeof(m.sid));
				recs[k++] = recs[i];	/* next pass */
				continue;
			}
			progress++;
			if (rc < 0) {
				if (m.sid[0])
					log_error("pack '%s': snapshot %s is "
					    "left out", recs[i].pack, m.sid);
				s->res->records_bad++;
			} else if (rc == 0)
				s->res->records++;
			progress_update(&s->progress, rc != 3,
			    s->res->bytes_read - read0);
		}
		n = k;
	} while (n > 0 && progress > 0);
	pack_reader_close(pr);
	*waiting = recs;
	*nwaiting = n;
	return (0);
}

/*
 * Records still waiting for their parent once the journal is in: those
 * of forgotten snapshots are nothing (their parent was forgotten and
 * pruned, the record left in a pack kept for its data, or carried in a
 * bundle of every pack); in a repository that bundles fill, neither are
 * those of snapshots no bundle was for (a bundle for one snapshot carries
 * whole packs, which may hold other snapshots' records); the others lost
 * their parent.
 */
static void
report_waiting(struct sync *s, const struct rec_ref *recs, size_t n)
{
	size_t i, partial = 0;
	int imported;

	imported = n > 0 ? catalog_bundles_imported(s->cat) : 0;
	for (i = 0; i < n; i++) {
		if (catalog_forgotten_has(s->cat, recs[i].sid) == 1)
			continue;
		if (imported == 1) {
			partial++;
			continue;
		}
		log_error("pack '%s': a snapshot record builds on a snapshot "
		    "that is not in the repository: left out", recs[i].pack);
		s->res->records_bad++;
	}
	if (partial > 0)
		log_info("catalog: %zu snapshot record%s in imported packs "
		    "build%s on snapshots no bundle brought: left out", partial,
		    partial == 1 ? "" : "s", partial == 1 ? "s" : "");
}

/* 1 if the index names a journal record (every bundle carries it). */
static int
index_journal(const struct pack_entry *ents, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ents[i].type == PACK_REC_JOURNAL)
			return (1);
	return (0);
}

/* The data chunks of an index, as catalog locations. */
static int
index_locs(const struct pack_entry *ents, size_t n,
    struct catalog_chunk_loc **locs, size_t *nlocs)
{
	struct catalog_chunk_loc *v;
	size_t i, k = 0;

	*locs = NULL;
	*nlocs = 0;
	if (n == 0)
		return (0);
	if ((v = calloc(n, sizeof(*v))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < n; i++) {
		if (ents[i].type != PACK_REC_DATA)
			continue;
		memcpy(v[k].cid, ents[i].id, sizeof(v[k].cid));
		v[k].pack_offset = ents[i].offset;
		v[k].plain_len = ents[i].plain_len;
		v[k].stored_len = ents[i].stored_len;
		v[k].type = ents[i].type;
		v[k].flags = ents[i].flags;
		k++;
	}
	*locs = v;
	*nlocs = k;
	return (0);
}

/* Read a new pack's index: its records go to *recs; 1 if the pack is
 * unreadable (reported, left out), 2 if it has gone since the listing (a
 * prune beside: not damage, not reported), 0, -1 on error. */
static int
scan_pack(struct sync *s, const char *name, struct rec_ref **recs,
    size_t *nrecs, size_t *cap)
{
	struct pack_reader *pr;
	struct pack_entry *ents = NULL;
	size_t i, n, last = SIZE_MAX;
	int rc = 1, gone;

	if ((pr = pack_reader_open_listed(s->repo, name, 0, &gone)) == NULL)
		return (gone ? 2 : 1);
	if (pack_reader_index(pr, &ents, &n))
		goto out;
	s->res->bytes_read += PACK_HEADER_BYTES + n * 46;
	for (i = 0; i < n; i++) {
		if (ents[i].type != PACK_REC_SNAPSHOT &&
		    ents[i].type != PACK_REC_JOURNAL &&
		    ents[i].type != PACK_REC_VIEW)
			continue;
		/* Only the pack's last snapshot record stays "last". */
		if (ents[i].type == PACK_REC_SNAPSHOT) {
			if (last != SIZE_MAX)
				(*recs)[last].last = 0;
			last = *nrecs;
		}
		if (array_grow(recs, cap, *nrecs, sizeof(**recs), 16)) {
			rc = -1;
			goto out;
		}
		memcpy((*recs)[*nrecs].pack, name, PACK_NAME_LEN + 1);
		(*recs)[*nrecs].ent = ents[i];
		(*recs)[*nrecs].last = ents[i].type == PACK_REC_SNAPSHOT;
		(*nrecs)++;
	}
	rc = 0;
out:
	free(ents);
	pack_reader_close(pr);
	return (rc);
}

/* Add the packs (read fine) with their chunks' places, in one commit. */
static int
import_packs(struct sync *s, char **names, const char *ok, size_t n)
{
	struct catalog_chunk_loc *locs = NULL;
	struct pack_reader *pr;
	struct pack_entry *ents;
	size_t i, nents, nlocs;
	int rc = -1, gone;

	if (catalog_begin(s->cat))
		return (-1);
	for (i = 0; i < n; i++) {
		if (!ok[i])
			continue;
		if ((pr = pack_reader_open_listed(s->repo, names[i], 0,
		    &gone)) == NULL)
			continue;
		ents = NULL;
		if (pack_reader_index(pr, &ents, &nents) == 0 &&
		    index_locs(ents, nents, &locs, &nlocs) == 0) {
			if (catalog_pack_import(s->cat, names[i],
			    pack_reader_size(pr), pack_reader_hash(pr), locs,
			    nlocs, index_journal(ents, nents))) {
				free(locs);
				free(ents);
				pack_reader_close(pr);
				goto out;
			}
			s->res->packs_new++;
		}
		free(locs);
		locs = NULL;
		free(ents);
		pack_reader_close(pr);
	}
	if (catalog_commit(s->cat))
		goto out;
	rc = 0;
out:
	if (rc)
		catalog_rollback(s->cat);
	return (rc);
}

/* The chunks of gone (or condemned) packs to their copies; drop the gone
 * packs nothing needs; count the others as missing. */
static int
drop_gone(struct sync *s, size_t ngone)
{
	size_t dropped;

	if (catalog_chunk_copies_place(s->cat))
		return (-1);
	if (ngone == 0)
		return (0);
	if (catalog_packs_gone_drop(s->cat, &dropped))
		return (-1);
	s->res->packs_dropped = dropped;
	s->res->packs_missing = ngone - dropped;
	return (0);
}

/* A view's items into the catalog (view_sink). */
static int
known_one(void *arg, const struct catalog_known *k)
{
	struct view_pack *vp = arg;

	if (catalog_known_add(vp->s->cat, k, vp->pack))
		return (-1);
	vp->s->res->known++;
	return (0);
}

static int
forgotten_one(void *arg, const char *sid, int64_t time_ns)
{
	struct view_pack *vp = arg;

	if (catalog_forgotten_import(vp->s->cat, sid, time_ns))
		return (-1);
	vp->s->res->forgotten++;
	return (0);
}

/*
 * One new pack as a write-only key sees it: its view (snapshots, forgets)
 * and its chunks' places, in one transaction, so that a crash leaves the
 * pack to be read again.  The places let this host deduplicate against
 * every host's chunks and follow a prune's repacks; the forgets stop it
 * counting on what prune removes.  0, 1 unreadable (reported), 2 gone
 * since the listing (scan_pack), -1.
 */
static int
view_pack(struct sync *s, const char *name)
{
	struct view_sink sink = { known_one, forgotten_one, NULL, NULL,
	    view_pack_condemned };
	struct catalog_chunk_loc *locs = NULL;
	struct pack_entry *ents = NULL;
	struct pack_reader *pr;
	struct view_pack vp;
	size_t i, n, nlocs;
	int rc = 1, st, gone;

	if ((pr = pack_reader_open_listed(s->repo, name, 1, &gone)) == NULL)
		return (gone ? 2 : 1);
	vp.s = s;
	vp.pack = name;
	sink.arg = &vp;
	if (pack_reader_index(pr, &ents, &n) ||
	    index_locs(ents, n, &locs, &nlocs))
		goto out;
	s->res->bytes_read += PACK_HEADER_BYTES + n * 46;
	rc = -1;
	if (catalog_begin(s->cat))
		goto out;
	for (i = 0; i < n; i++) {
		if (ents[i].type != PACK_REC_VIEW)
			continue;
		if (pack_reader_get(pr, &ents[i], s->z, &s->data)) {
			s->res->records_bad++;
			continue;
		}
		s->res->bytes_read += ents[i].stored_len;
		if ((st = view_parse(s->repo, s->data.data, s->data.len, name,
		    &sink)) < 0)
			goto rollback;
		if (st > 0)
			s->res->records_bad++;
	}
	if (catalog_pack_import(s->cat, name, pack_reader_size(pr),
	    pack_reader_hash(pr), locs, nlocs, index_journal(ents, n)) ||
	    catalog_commit(s->cat))
		goto rollback;
	s->res->packs_new++;
	rc = 0;
	goto out;
rollback:
	catalog_rollback(s->cat);
out:
	free(locs);
	free(ents);
	pack_reader_close(pr);
	return (rc);
}

/* The new packs, for a write-only key: see view_pack.  0 or -1. */
static int
sync_views(struct sync *s, char **fresh, size_t nfresh)
{
	size_t i, dropped;
	int st;

	if ((s->z = compressor_new(1)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	progress_init(&s->progress, "catalog: reading pack indexes", 0);
	s->progress.unit = "packs";
	for (i = 0; i < nfresh; i++) {
		if ((st = view_pack(s, fresh[i])) < 0)
			return (-1);
		if (st == 1)
			s->res->packs_bad++;
		progress_update(&s->progress, 1, 0);
	}
	progress_done(&s->progress);
	/* This host's own snapshots that the authority forgot go. */
	if (catalog_forget_apply(s->cat, &dropped))
		return (-1);
	return (0);
}

int
engine_sync(struct repo *r, struct catalog *c, struct sync_result *res)
{
	struct sync s;
	struct rec_ref *recs = NULL, *waiting = NULL;
	char **in_repo = NULL, **in_cat = NULL, **fresh = NULL, *ok = NULL;
	char **gone = NULL;
	size_t nrepo = 0, ncat = 0, nfresh = 0, nrecs = 0, cap = 0, i;
	size_t ngone = 0, dropped, nwaiting = 0;
	uint64_t read0;
	double t0 = now_monotonic();
	int rc = -1, st;

	memset(res, 0, sizeof(*res));
	memset(&s, 0, sizeof(s));
	s.repo = r;
	s.cat = c;
	s.res = res;
	record_reader_init(&s.parts, r);
	hmap_init(&s.parts_done, CCRYPTO_ID_BYTES);
	hmap_init(&s.jsig_ids, CCRYPTO_ID_BYTES);
	if (repo_list_packs(r, &in_repo, &nrepo) ||
	    catalog_pack_names(c, &in_cat, &ncat))
		goto out;
	tuning_raise_at("sync-listed");
	if (nrepo > 0 && (fresh = calloc(nrepo, sizeof(*fresh))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	if (ncat > 0 && (gone = calloc(ncat, sizeof(*gone))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	diff_sorted(in_repo, nrepo, in_cat, ncat, &fresh, &nfresh, gone,
	    &ngone);
	if (confirm_gone(r, gone, &ngone))
		goto out;
	/*
	 * Packs the catalog knows that the repository no longer has: pruned
	 * (by another host) or lost.  A new pack holding their chunks (a
	 * repack) takes them over; those nothing needs any more are dropped
	 * after the import; the rest are damage, left for verify to name.
	 */
	if (catalog_packs_gone(c, (const char *const *)gone, ngone))
		goto out;
	/* A write-only key reads indexes and views, never records. */
	if (nfresh > 0 && ccrypto_keys_write_only(repo_keys(r))) {
		if (sync_views(&s, fresh, nfresh) == 0)
			rc = drop_gone(&s, ngone);
		goto out;
	}
	if (nfresh == 0) {
		rc = drop_gone(&s, ngone);
		goto out;
	}
	if ((ok = calloc(nfresh, 1)) == NULL ||
	    (s.z = compressor_new(1)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	progress_init(&s.progress, "catalog: reading the repository", 0);
	s.progress.unit = "packs";
	for (i = 0; i < nfresh; i++) {
		read0 = res->bytes_read;
		if ((st = scan_pack(&s, fresh[i], &recs, &nrecs, &cap)) < 0)
			goto out;
		ok[i] = st == 0;
		if (st == 1)
			res->packs_bad++;
		progress_update(&s.progress, 1, res->bytes_read - read0);
	}
	progress_done(&s.progress);
	progress_init(&s.progress, "catalog: importing", 0);
	s.progress.unit = "snapshots";
	if (import_records(&s, recs, nrecs, &waiting, &nwaiting))
		goto out;
	import_journals(&s, recs, nrecs);
	report_waiting(&s, waiting, nwaiting);
	/* A record imported again after its snapshot was forgotten (a
	 * pack read anew, another host's forget) goes again. */
	if (catalog_forget_apply(c, &dropped))
		goto out;
	if (import_packs(&s, fresh, ok, nfresh))
		goto out;
	rc = drop_gone(&s, ngone);
out:
	progress_done(&s.progress);
	res->seconds = now_monotonic() - t0;
	compressor_free(s.z);
	record_reader_release(&s.parts);
	hmap_release(&s.parts_done);
	hmap_release(&s.jsig_ids);
	free(s.jsigs);
	buf_release(&s.data);
	buf_release(&s.scratch);
	free(recs);
	free(waiting);
	free(ok);
	free(fresh);
	free(gone);
	names_free(in_repo, nrepo);
	names_free(in_cat, ncat);
	return (rc);
}

int
engine_catalog_update(struct repo *r, struct catalog *c)
{
	struct sync_result res;
	int held, rc = 0;

	/* First the sync lock: a sync in progress (a rebuild takes a
	 * while) is waited for, never read half-made. */
	if (catalog_sync_begin(c))
		return (-1);
	if ((held = catalog_lock_try(c)) < 0) {
		catalog_sync_end(c);
		return (-1);
	}
	if (held == 0) {
		/* A writer on this host keeps the catalog in step. */
		log_info("catalog: another coffer process is writing it; "
		    "not brought up to date now");
		catalog_sync_end(c);
		return (0);
	}
	rc = engine_sync(r, c, &res);
	catalog_sync_end(c);
	if (held == 1)
		catalog_unlock(c);
	if (rc == 0 && res.records > 0) {
		if (log_level < 1)
			log_note("catalog: %zu snapshot%s added from the "
			    "repository (%zu pack%s read, %.1f s)",
			    res.records, res.records == 1 ? "" : "s",
			    res.packs_new, res.packs_new == 1 ? "" : "s",
			    res.seconds);
		else
			log_info("catalog: %zu snapshots added from the "
			    "repository (%zu packs, %llu bytes read, %.1f s)",
			    res.records, res.packs_new,
			    (unsigned long long)res.bytes_read, res.seconds);
	}
	if (rc == 0 && (res.packs_bad > 0 || res.records_bad > 0))
		rc = 1;
	return (rc);
}

int
engine_known_counts(struct catalog *c, struct catalog_known_counts *n)
{
	return (catalog_known_counts(c, n));
}
