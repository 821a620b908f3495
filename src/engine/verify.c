/*
 * Verify: prove that what the catalog says the complete snapshots need is
 * in the repository.
 *
 * The pass goes over the catalog's packs in name order, reading each once:
 * its header (pack_reader_open), its index (pack_reader_index), checked
 * against where the catalog locates the chunks that complete snapshots
 * need, its snapshot records (signature and snapshot id), and, when asked,
 * the data of those chunks (pack_reader_get: AEAD and keyed hash) in
 * offset order, so that a pack is read front to back.  The needed chunks
 * come from one catalog query in the same (pack, offset) order, merged
 * with the pack list.  Everything found wrong is mapped at the end, by one
 * more query, to the snapshots and files it breaks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/catalog-history.h"
#include "coffer/catalog-journal.h"
#include "coffer/catalog-record.h"
#include "coffer/engine-check.h"
#include "coffer/engine.h"
#include "coffer/hex.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/pool.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "engine-int.h"


/* A complete snapshot and the pack that should hold its record. */
struct snaprec {
	char sid[SNAPSHOT_ID_HEX + 1];
	char *dataset;
	char pack[33];
	int found;
};

struct verify {
	struct repo *repo;
	struct catalog *cat;
	const struct verify_opts *o;
	struct verify_result *res;
	struct compressor *z;
	struct buf data, scratch;
	struct hmap index;		/* chunk id -> position in the index */
	int64_t started_ns;		/* this run's start (realtime) */
	int journals_bad;		/* damaged journal records met */
	struct rec_at *journals;	/* the journal records that read */
	size_t njournals, capjournals;

	/* The needed chunks, merged with the pack list. */
	struct catalog_chunk_iter *it;
	struct catalog_chunk_loc next;
	int have_next;
	struct catalog_chunk_loc *need;
	size_t nneed, capneed;

	struct snaprec *recs;		/* sorted by pack */
	size_t nrecs, reci;
	struct record_reader parts;	/* of records in parts */

	int64_t *bad_rows;		/* chunk rows of res->damage */
	char last_bad_pack[33];
	struct progress progress;

	/* Reading data: the pack's chunks are checked on all threads. */
	struct pool *pool;
	struct vworker *workers;
	const char *pack;		/* the pack being read */
	const uint8_t *ok;		/* which of need[] to read */
	int *rcs;			/* per need[]: 0 good, -1 damaged */
	size_t caprcs;
	struct pack_entry *extra;	/* data records no snapshot needs */
	size_t nextra, capextra;
};

/* Where a record is. */
struct rec_at {
	char pack[PACK_NAME_LEN + 1];
	struct pack_entry e;
};

/* Per-thread: a reader of the current pack, a decompressor, a buffer. */
struct vworker {
	struct pack_reader *pr;
	struct compressor *z;
	struct buf data;
};

static int
by_pack(const void *a, const void *b)
{
	const struct snaprec *x = a, *y = b;
	int c = strcmp(x->pack, y->pack);

	return (c ? c : strcmp(x->sid, y->sid));
}

static int
collect_snapshot(void *arg, const struct catalog_snapshot *s)
{
	struct verify *v = arg;
	struct snaprec *p;

	if (s->state != SNAP_COMPLETE)
		return (0);
	if ((p = reallocarray(v->recs, v->nrecs + 1, sizeof(*p))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	v->recs = p;
	p = &v->recs[v->nrecs];
	memset(p, 0, sizeof(*p));
	memcpy(p->sid, s->sid, sizeof(p->sid));
	memcpy(p->pack, s->record_pack, sizeof(p->pack));
	if ((p->dataset = strdup(s->dataset ? s->dataset : "")) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	v->nrecs++;
	return (0);
}

static int
add_bad_record(struct verify *v, struct snaprec *sr, const char *problem)
{
	struct verify_result *res = v->res;
	struct verify_record *p;

	p = reallocarray(res->bad_records, res->nbad_records + 1, sizeof(*p));
	if (p == NULL) {
		log_error("out of memory");
		return (-1);
	}
	res->bad_records = p;
	p = &res->bad_records[res->nbad_records];
	memset(p, 0, sizeof(*p));
	memcpy(p->sid, sr->sid, sizeof(p->sid));
	memcpy(p->pack, sr->pack, sizeof(p->pack));
	p->problem = problem;
	if ((p->dataset = strdup(sr->dataset)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	res->nbad_records++;
	if (sr->pack[0])
		log_error("snapshot %s of '%s': its signed record %s "
		    "(pack '%s')", sr->sid, sr->dataset, problem, sr->pack);
	else
		log_error("snapshot %s of '%s': its signed record %s",
		    sr->sid, sr->dataset, problem);
	return (0);
}

/* A needed chunk is damaged or missing; problem is reported here unless
 * the reader already did (quiet). */
static int
add_damage(struct verify *v, const struct catalog_chunk_loc *l,
    const char *problem, int quiet)
{
	struct verify_result *res = v->res;
	struct verify_damage *d;
	int64_t *rows;
	char h[17];

	d = reallocarray(res->damage, res->ndamage + 1, sizeof(*d));
	if (d == NULL) {
		log_error("out of memory");
		return (-1);
	}
	res->damage = d;
	rows = reallocarray(v->bad_rows, res->ndamage + 1, sizeof(*rows));
	if (rows == NULL) {
		log_error("out of memory");
		return (-1);
	}
	v->bad_rows = rows;
	d = &res->damage[res->ndamage];
	memset(d, 0, sizeof(*d));
	memcpy(d->cid, l->cid, sizeof(d->cid));
	memcpy(d->pack, l->pack, sizeof(d->pack));
	d->offset = l->pack_offset;
	d->problem = problem;
	rows[res->ndamage] = l->rowid;
	res->ndamage++;
	if (l->pack[0] && strcmp(l->pack, v->last_bad_pack) != 0) {
		res->damaged_packs++;
		memcpy(v->last_bad_pack, l->pack, sizeof(v->last_bad_pack));
	}
	if (!quiet) {
		hex_encode(h, l->cid, 8);
		if (l->pack[0])
			log_error("chunk %s at offset %llu of pack '%s': %s", h,
			    (unsigned long long)l->pack_offset, l->pack,
			    problem);
		else
			log_error("chunk %s: %s", h, problem);
	}
	return (0);
}

/*
 * The damaged chunks another pack holds too (place_take_copies): the
 * first whole copy of each is its place now, and it breaks nothing (the
 * damage stays reported: its old place is still damaged).  Only when
 * reading data: a copy is its index's word until it is read.
 * v->bad_rows keeps the rows of the others, *nrows of them.  0 or -1.
 */
static int
take_copies(struct verify *v, size_t *nrows)
{
	struct verify_result *res = v->res;
	struct place_check pc;
	char (*taken)[33];
	size_t i;
	int rc;

	*nrows = res->ndamage;
	if ((taken = calloc(res->ndamage, sizeof(*taken))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	memset(&pc, 0, sizeof(pc));
	pc.repo = v->repo;
	pc.z = v->z;
	pc.out = &v->scratch;
	rc = place_take_copies(&pc, v->cat, v->bad_rows, nrows, taken,
	    &res->from_copies);
	place_check_release(&pc);
	for (i = 0; i < res->ndamage; i++)
		memcpy(res->damage[i].copy, taken[i],
		    sizeof(res->damage[i].copy));
	free(taken);
	return (rc);
}

static int
advance(struct verify *v)
{
	int rc = catalog_chunk_iter_next(v->it, &v->next);

	v->have_next = rc == 1;
	return (rc < 0 ? -1 : 0);
}

/* Move the needed chunks of pack name from the stream into v->need. */
static int
take_needed(struct verify *v, const char *name)
{
	v->nneed = 0;
	while (v->have_next) {
		int c = strcmp(v->next.pack, name);

		if (c > 0)
			break;
		if (c < 0) {
			/* The pack list and the chunks come from the same
			 * snapshot of the catalog: only a pack row that
			 * vanished in between could get here. */
			if (add_damage(v, &v->next, "its pack is not in the "
			    "catalog", 0))
				return (-1);
		} else {
			if (array_grow(&v->need, &v->capneed, v->nneed,
			    sizeof(*v->need), 256))
				return (-1);
			v->need[v->nneed++] = v->next;
		}
		if (advance(v))
			return (-1);
	}
	return (0);
}

/*
 * A damaged record that no needed chunk accounts for: a snapshot or
 * journal record (loses: what a catalog rebuild would lose; NULL until
 * known) or a data record no snapshot needs.  Reported by the reader.
 */
static int
add_meta(struct verify *v, const char *pack, const struct pack_entry *e,
    const char *loses)
{
	struct verify_result *res = v->res;
	struct verify_meta *m;

	m = reallocarray(res->bad_meta, res->nbad_meta + 1, sizeof(*m));
	if (m == NULL) {
		log_error("out of memory");
		return (-1);
	}
	res->bad_meta = m;
	m = &res->bad_meta[res->nbad_meta];
	if (e->type != PACK_REC_DATA)
		res->meta_errors++;
	memset(m, 0, sizeof(*m));
	snprintf(m->pack, sizeof(m->pack), "%s", pack);
	m->offset = e->offset;
	m->type = e->type;
	res->nbad_meta++;
	if (loses != NULL && (m->loses = strdup(loses)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	return (0);
}

struct lost_list {
	struct buf b;
	size_t n;
};

static int
lost_snapshot(void *arg, const char *sid, const char *dataset)
{
	struct lost_list *l = arg;

	return (buf_printf(&l->b, "%ssnapshot %.12s of '%s'", l->n++ ?
	    ", " : "", sid, dataset) ? -1 : 0);
}

/*
 * What a rebuild loses with damaged snapshot record e of pack (its
 * heads there that did not read are recs[first, end) not found): the
 * snapshot of a part, or those heads, with what is built on them.
 */
static int
snapshot_loses(struct verify *v, const char *pack, const struct pack_entry *e,
    size_t first, size_t end)
{
	struct lost_list l;
	char sid[SNAPSHOT_ID_HEX + 1];
	size_t i;
	int rc;

	memset(&l, 0, sizeof(l));
	buf_init(&l.b);
	if ((rc = catalog_snapshot_of_part(v->cat, e->id, sid)) < 0)
		goto out;
	if (rc == 1)
		rc = catalog_snapshot_lost(v->cat, sid, lost_snapshot, &l);
	else
		for (i = first; i < end && rc == 0; i++)
			if (!v->recs[i].found)
				rc = catalog_snapshot_lost(v->cat,
				    v->recs[i].sid, lost_snapshot, &l);
	if (rc == 0 && l.n == 0)
		rc = buf_puts(&l.b, "no complete snapshot (the record of an "
		    "unfinished or forgotten one)");
	if (rc == 0)
		rc = buf_put_u8(&l.b, 0) || add_meta(v, pack, e,
		    (const char *)l.b.data) ? -1 : 0;
out:
	buf_release(&l.b);
	return (rc);
}

/*
 * A journal record: read and signed.  Where each good one is, is kept:
 * should another be damaged, they are read again at the end, to tell
 * what the damaged ones alone held.  0 or -1.
 */
static int
check_journal(struct verify *v, struct pack_reader *pr,
    const struct pack_entry *e)
{
	const uint8_t *img;
	const char *why;
	size_t len;
	int rc;

	if (pack_reader_get(pr, e, v->z, &v->data) == 0) {
		rc = journal_record_open(v->repo, v->data.data, v->data.len,
		    &v->scratch, &img, &len, &why);
		if (rc < 0)
			return (-1);
		if (rc == 1) {
			if (array_grow(&v->journals, &v->capjournals,
			    v->njournals, sizeof(*v->journals), 16))
				return (-1);
			snprintf(v->journals[v->njournals].pack,
			    sizeof(v->journals->pack), "%s",
			    pack_reader_name(pr));
			v->journals[v->njournals++].e = *e;
			return (0);
		}
		log_error("pack '%s': journal record at offset %llu %s",
		    pack_reader_name(pr), (unsigned long long)e->offset, why);
	}
	v->journals_bad++;
	return (add_meta(v, pack_reader_name(pr), e, NULL));
}

/* The rows of every journal record that read, as the catalog's cover. */
static int
cover_journals(struct verify *v)
{
	struct pack_reader *pr = NULL;
	const uint8_t *img;
	const char *why;
	size_t i, len;
	int rc = 0;

	for (i = 0; i < v->njournals && rc == 0; i++) {
		if (pr == NULL || strcmp(pack_reader_name(pr),
		    v->journals[i].pack) != 0) {
			pack_reader_close(pr);
			if ((pr = pack_reader_open(v->repo,
			    v->journals[i].pack)) == NULL)
				continue;
		}
		if (pack_reader_get(pr, &v->journals[i].e, v->z,
		    &v->data) != 0 || journal_record_open(v->repo,
		    v->data.data, v->data.len, &v->scratch, &img, &len,
		    &why) != 1)
			continue;
		rc = catalog_journal_cover(v->cat, img, len);
	}
	pack_reader_close(pr);
	return (rc);
}

static int
lost_row(void *arg, const char *kind, int64_t time_ns, const char *name)
{
	struct lost_list *l = arg;

	(void)time_ns;
	if (l->n++ == 20)
		return (buf_puts(&l->b, "; and more") ? -1 : 0);
	if (l->n > 20)
		return (0);
	return (buf_printf(&l->b, "%s%s %s", l->n > 1 ? "; " : "", kind,
	    name ? name : "") ? -1 : 0);
}

/*
 * After a whole pass: what the damaged journal records held that no
 * other does, from the rows this catalog has in the repository.
 */
static int
journal_loses(struct verify *v, int whole)
{
	struct verify_result *res = v->res;
	struct lost_list l;
	const char *text;
	size_t i;
	int rc = 0;

	memset(&l, 0, sizeof(l));
	buf_init(&l.b);
	if (whole && (rc = cover_journals(v)) == 0)
		rc = catalog_journal_lost(v->cat, lost_row, &l);
	if (rc == 0 && l.n == 0)
		rc = buf_puts(&l.b, whole ? "no row this catalog knows that "
		    "another journal record does not hold" : "the drill "
		    "results, runs and other journal rows it holds (a whole "
		    "pass names them)");
	if (rc == 0 && (rc = buf_put_u8(&l.b, 0)) == 0) {
		text = (const char *)l.b.data;
		for (i = 0; i < res->nbad_meta && rc == 0; i++)
			if (res->bad_meta[i].type == PACK_REC_JOURNAL &&
			    res->bad_meta[i].loses == NULL &&
			    (res->bad_meta[i].loses = strdup(text)) == NULL) {
				log_error("out of memory");
				rc = -1;
			}
	}
	buf_release(&l.b);
	return (rc);
}

/*
 * The packs in packs/ that the catalog lacks (packs, sorted by name): a
 * sync left them out because they do not open, which names them as it
 * goes; they are named again here, as the damage of this pass.
 */
static int
check_unknown_packs(struct verify *v, const struct catalog_pack *packs,
    size_t npacks)
{
	struct verify_result *res = v->res;
	struct pack_reader *pr;
	struct pack_entry *ents;
	struct verify_pack *b;
	char **names = NULL;
	size_t n = 0, i, j = 0, ne;
	int good, rc = -1;

	if (repo_list_packs(v->repo, &names, &n))
		return (-1);
	for (i = 0; i < n; i++) {
		while (j < npacks && strcmp(packs[j].name, names[i]) < 0)
			j++;
		if (j < npacks && strcmp(packs[j].name, names[i]) == 0)
			continue;
		ents = NULL;
		good = (pr = pack_reader_open(v->repo, names[i])) != NULL &&
		    pack_reader_index(pr, &ents, &ne) == 0;
		free(ents);
		pack_reader_close(pr);
		if (good)
			continue;	/* the next sync takes it in */
		b = reallocarray(res->bad_packs, res->nbad_packs + 1,
		    sizeof(*b));
		if (b == NULL) {
			log_error("out of memory");
			goto out;
		}
		res->bad_packs = b;
		snprintf(b[res->nbad_packs].pack, sizeof(b->pack), "%s",
		    names[i]);
		res->nbad_packs++;
	}
	rc = 0;
out:
	names_free(names, n);
	return (rc);
}

/*
 * The other parts of a snapshot record in parts (head ri): each one where
 * the head says, signed, of this snapshot and of its index.  Read out of
 * the pass's pack order, through a reader of their own: they are few per
 * snapshot and follow one another.  0, or -1 on a fatal error.
 */
static int
check_parts(struct verify *v, struct snaprec *sr,
    const struct catalog_record_info *head)
{
	struct catalog_record_info ri;
	const uint8_t *img;
	size_t len;
	int i, rc, good;

	for (i = 0; i + 1 < head->parts; i++) {
		rc = record_reader_get(&v->parts, head->partv[i].pack,
		    head->partv[i].rid, &img, &len);
		if (rc < 0)
			return (-1);
		good = rc == 1 && catalog_record_info(img, len, &ri) == 0;
		if (good) {
			good = ri.part == i &&
			    ri.parts == 0 && strcmp(ri.sid, head->sid) == 0;
			catalog_record_info_release(&ri);
		}
		if (!good) {
			record_reader_trim(&v->parts);
			return (add_bad_record(v, sr, "has a part that is "
			    "missing, damaged or another record's"));
		}
	}
	/* The pass reads other records before the next head. */
	record_reader_trim(&v->parts);
	return (0);
}

/* Check one snapshot record of the pack: signature, then whose it is.
 * 0, 1 when it does not read (reported), -1 on a fatal error. */
static int
check_record(struct verify *v, struct pack_reader *pr,
    const struct pack_entry *e, size_t first, size_t end)
{
	struct catalog_record_info ri;
	const uint8_t *img;
	const char *why;
	size_t i, imglen;
	int rc = 0;

	if (pack_reader_get(pr, e, v->z, &v->data))
		return (1);	/* reported; its snapshot shows as missing */
	switch (snapshot_record_open(v->repo, v->data.data, v->data.len,
	    &img, &imglen, &why)) {
	case -1:
		return (-1);
	case 0:
		log_error("pack '%s': snapshot record at offset %llu %s",
		    pack_reader_name(pr), (unsigned long long)e->offset, why);
		return (1);
	}
	rc = catalog_record_info(img, imglen, &ri);
	/* ri is a copy: the head's image goes before its parts are read. */
	buf_release(&v->data);
	if (rc)
		return (1);
	v->res->records++;
	/* A part that is not a head is checked through its head. */
	for (i = first; i < end && ri.parts > 0; i++) {
		if (strcmp(v->recs[i].sid, ri.sid) != 0 || v->recs[i].found)
			continue;
		v->recs[i].found = 1;
		if ((rc = check_parts(v, &v->recs[i], &ri)) != 0)
			break;
	}
	catalog_record_info_release(&ri);
	return (rc);
}

/* Read and check one needed chunk of the current pack (a pool job). */
static void
read_job(void *arg, size_t i, int worker)
{
	struct verify *v = arg;
	struct vworker *w = &v->workers[worker];
	const struct catalog_chunk_loc *l = &v->need[i];
	struct pack_entry pe;

	v->rcs[i] = 0;
	if (!v->ok[i])
		return;
	v->rcs[i] = -1;
	/* Each thread opens the pack once; a bad one fails every read. */
	if (w->pr == NULL && (w->pr = pack_reader_open(v->repo, v->pack)) ==
	    NULL)
		return;
	loc_entry(l, &pe);
	/* pack_reader_get says what is wrong. */
	if (pack_reader_get(w->pr, &pe, w->z, &w->data) == 0)
		v->rcs[i] = 0;
}

/* Read and check one data record no snapshot needs (a pool job). */
static void
extra_job(void *arg, size_t i, int worker)
{
	struct verify *v = arg;
	struct vworker *w = &v->workers[worker];

	v->rcs[i] = -1;
	if (w->pr == NULL) {
		if ((w->pr = pack_reader_open(v->repo, v->pack)) == NULL)
			return;
		/* Damage nothing needs costs nothing: a warning. */
		pack_reader_set_quiet(w->pr, 1);
	}
	if (pack_reader_get(w->pr, &v->extra[i], w->z, &w->data) == 0)
		v->rcs[i] = 0;
}

static int
grow_rcs(struct verify *v, size_t n)
{
	int *p;

	if (n <= v->caprcs)
		return (0);
	if ((p = reallocarray(v->rcs, n, sizeof(*p))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	v->rcs = p;
	v->caprcs = n;
	return (0);
}

/* The data records of the pack that no complete snapshot needs: read
 * too, so that every record of the pack is authenticated. */
static int
read_extra(struct verify *v, struct pack_reader *pr)
{
	size_t i;
	int t;

	if (v->nextra == 0)
		return (0);
	if (grow_rcs(v, v->nextra))
		return (-1);
	v->pack = pack_reader_name(pr);
	pool_run(v->pool, v->nextra, extra_job, v);
	for (t = 0; t < pool_threads(v->pool); t++) {
		pack_reader_close(v->workers[t].pr);
		v->workers[t].pr = NULL;
	}
	for (i = 0; i < v->nextra; i++) {
		if (v->rcs[i]) {
			if (add_meta(v, pack_reader_name(pr), &v->extra[i],
			    "no chunk a complete snapshot needs"))
				return (-1);
		} else
			v->res->bytes_read += (int64_t)v->extra[i].plain_len;
	}
	return (0);
}

static int
read_chunks(struct verify *v, struct pack_reader *pr, const uint8_t *ok)
{
	size_t i, n = 0;
	int t;

	if (grow_rcs(v, v->nneed))
		return (-1);
	v->pack = pack_reader_name(pr);
	v->ok = ok;
	pool_run(v->pool, v->nneed, read_job, v);
	for (t = 0; t < pool_threads(v->pool); t++) {
		pack_reader_close(v->workers[t].pr);
		v->workers[t].pr = NULL;
	}
	for (i = 0; i < v->nneed; i++) {
		const struct catalog_chunk_loc *l = &v->need[i];

		if (!ok[i])
			continue;
		if (v->rcs[i]) {
			if (add_damage(v, l, "its data does not verify", 1))
				return (-1);
		} else {
			v->res->chunks_read++;
			v->res->bytes_read += (int64_t)l->plain_len;
			n++;
		}
		progress_update(&v->progress, 0, (uint64_t)l->stored_len +
		    PACK_RECORD_HEADER_BYTES + CCRYPTO_TAG_BYTES);
	}
	log_info("verify: read pack %s: %zu chunks", pack_reader_name(pr), n);
	return (0);
}

/*
 * One pack: header, index against the needed chunks, records, and the
 * chunks' data when read is set.  0, or -1 on a fatal error (damage is
 * not one: it is recorded and the pass goes on).
 */
static int
check_pack(struct verify *v, const struct catalog_pack *pk, int read)
{
	struct pack_reader *pr;
	struct pack_entry *ents = NULL;
	uint8_t *ok = NULL, *covered = NULL;
	size_t n = 0, i, first, end, *bad = NULL, nbad = 0;
	int64_t pos;
	int rc = -1, st;
	const char *lost = NULL;

	/* The snapshots whose record should be in this pack. */
	while (v->reci < v->nrecs && strcmp(v->recs[v->reci].pack,
	    pk->name) < 0) {
		if (add_bad_record(v, &v->recs[v->reci], "is in a pack that "
		    "is not in the catalog"))
			return (-1);
		v->reci++;
	}
	first = end = v->reci;
	while (end < v->nrecs && strcmp(v->recs[end].pack, pk->name) == 0)
		end++;
	v->reci = end;

	if (take_needed(v, pk->name))
		return (-1);
	v->res->chunks += (int64_t)v->nneed;
	if (v->nneed && (ok = calloc(v->nneed, 1)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if ((pr = pack_reader_open(v->repo, pk->name)) == NULL)
		lost = "its pack is missing or unreadable";
	else if (pack_reader_index(pr, &ents, &n))
		lost = "its pack's index is damaged";
	if (lost != NULL) {
		/* Reported by the reader; each chunk is named below. */
		for (i = 0; i < v->nneed; i++)
			if (add_damage(v, &v->need[i], lost, 1))
				goto out;
		for (i = first; i < end; i++)
			if (add_bad_record(v, &v->recs[i], "is in a pack that "
			    "is missing or damaged"))
				goto out;
		progress_update(&v->progress, 1, read ? pk->size : 0);
		rc = 0;
		goto out;
	}

	if (n && ((covered = calloc(n, 1)) == NULL ||
	    (bad = calloc(n, sizeof(*bad))) == NULL)) {
		log_error("out of memory");
		goto out;
	}
	hmap_clear(&v->index);
	for (i = 0; i < n; i++)
		if (hmap_put(&v->index, ents[i].id, (int64_t)i))
			goto out;
	for (i = 0; i < v->nneed; i++) {
		const struct catalog_chunk_loc *l = &v->need[i];
		const struct pack_entry *e;

		if (!hmap_get(&v->index, l->cid, &pos)) {
			if (add_damage(v, l, "not in its pack's index", 0))
				goto out;
			continue;
		}
		e = &ents[pos];
		if (e->offset != l->pack_offset ||
		    e->plain_len != l->plain_len ||
		    e->stored_len != l->stored_len || e->type != l->type ||
		    e->flags != l->flags) {
			if (add_damage(v, l, "its pack's index and the catalog "
			    "disagree on where it is", 0))
				goto out;
			continue;
		}
		ok[i] = 1;
		covered[pos] = 1;
	}
	/* Every snapshot and journal record, in every pass: they are few
	 * and small, and a rebuild needs each one. */
	for (i = 0; i < n; i++) {
		if (ents[i].type == PACK_REC_SNAPSHOT) {
			if ((st = check_record(v, pr, &ents[i], first,
			    end)) < 0)
				goto out;
			if (st == 1)
				bad[nbad++] = i;
		} else if (ents[i].type == PACK_REC_JOURNAL &&
		    check_journal(v, pr, &ents[i]))
			goto out;
	}
	for (i = first; i < end; i++)
		if (!v->recs[i].found && add_bad_record(v, &v->recs[i],
		    "is missing from its pack or damaged"))
			goto out;
	for (i = 0; i < nbad; i++)
		if (snapshot_loses(v, pk->name, &ents[bad[i]], first, end))
			goto out;
	if (read) {
		if (read_chunks(v, pr, ok))
			goto out;
		v->nextra = 0;
		for (i = 0; i < n; i++) {
			if (ents[i].type != PACK_REC_DATA || covered[i])
				continue;
			if (array_grow(&v->extra, &v->capextra, v->nextra,
			    sizeof(*v->extra), 64))
				goto out;
			v->extra[v->nextra++] = ents[i];
		}
		if (read_extra(v, pr))
			goto out;
		v->res->packs_read++;
	}
	progress_update(&v->progress, 1, 0);
	rc = 0;
out:
	pack_reader_close(pr);
	free(ents);
	free(ok);
	free(covered);
	free(bad);
	return (rc);
}

/* A pack's place in a random share: a hash of the pass's seed and name. */
static uint64_t
pack_key(uint64_t seed, const char *name)
{
	uint8_t in[8 + 32], out[32];

	put_u64(in, seed);
	memcpy(in + 8, name, 32);
	ccrypto_plain_hash(in, sizeof(in), out);
	return (get_u64(out));
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/* A pack's name (hex, random) as a number: its first 48 bits. */
static uint64_t
name_number(const char *name)
{
	uint64_t v = 0;
	int i, d;

	for (i = 0; i < 12 && name[i] != '\0'; i++) {
		d = name[i] >= '0' && name[i] <= '9' ? name[i] - '0' :
		    name[i] >= 'a' && name[i] <= 'f' ? name[i] - 'a' + 10 : 0;
		v = v << 4 | (uint64_t)d;
	}
	return (v);
}

/* Which packs get their data read: sel[i] for the i-th pack by name. */
static int
select_packs(const struct verify_opts *o, uint64_t seed,
    const struct catalog_pack *packs, size_t n, uint8_t *sel)
{
	uint64_t *keys = NULL, *sorted = NULL, cut;
	double want;
	size_t i, k;

	for (i = 0; i < n; i++) {
		switch (o->read) {
		case VERIFY_STRUCTURE:
			sel[i] = 0;
			break;
		case VERIFY_READ_SLICE:
			/*
			 * By name, not by place in the list: the packs
			 * written between the runs of a rotation (their
			 * journal records among them) move no other pack
			 * to another slice, so M runs read every pack.
			 */
			sel[i] = name_number(packs[i].name) % o->slice_m ==
			    o->slice_n - 1;
			break;
		default:
			sel[i] = 1;
		}
	}
	if (o->read != VERIFY_READ_PERCENT || n == 0)
		return (0);
	/* Exactly the share asked for (at least one pack): the k packs
	 * whose keys are smallest. */
	want = o->percent * (double)n / 100.0;
	k = (size_t)want;
	if ((double)k < want || k == 0)
		k++;
	if (k >= n)
		return (0);
	if ((keys = calloc(n, sizeof(*keys))) == NULL ||
	    (sorted = calloc(n, sizeof(*sorted))) == NULL) {
		free(keys);
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < n; i++)
		sorted[i] = keys[i] = pack_key(seed, packs[i].name);
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	cut = sorted[k - 1];
	for (i = 0; i < n; i++)
		sel[i] = keys[i] <= cut;
	free(keys);
	free(sorted);
	return (0);
}

static void
mode_name(const struct verify_opts *o, char *out, size_t len)
{
	switch (o->read) {
	case VERIFY_READ_ALL:
		snprintf(out, len, "read-data");
		break;
	case VERIFY_READ_PERCENT:
		snprintf(out, len, "read-data=%g%%", o->percent);
		break;
	case VERIFY_READ_SLICE:
		snprintf(out, len, "read-data=%u/%u", o->slice_n, o->slice_m);
		break;
	default:
		snprintf(out, len, "structure");
	}
}

struct broken_state {
	struct verify_result *res;
	char last_sid[SNAPSHOT_ID_HEX + 1];
};

static int
collect_broken(void *arg, const char *sid, const char *dataset,
    const char *path)
{
	struct broken_state *bs = arg;
	struct verify_result *res = bs->res;
	struct verify_broken *b;

	b = reallocarray(res->broken, res->nbroken + 1, sizeof(*b));
	if (b == NULL) {
		log_error("out of memory");
		return (-1);
	}
	res->broken = b;
	b = &res->broken[res->nbroken];
	memset(b, 0, sizeof(*b));
	snprintf(b->sid, sizeof(b->sid), "%s", sid);
	b->dataset = strdup(dataset);
	b->path = strdup(path);
	res->nbroken++;
	if (b->dataset == NULL || b->path == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if (strcmp(bs->last_sid, sid) != 0) {
		res->broken_snapshots++;
		snprintf(bs->last_sid, sizeof(bs->last_sid), "%s", sid);
	}
	return (0);
}

/* Chunks needed but in no pack: they sort before every pack. */
static int
check_unlocated(struct verify *v)
{
	while (v->have_next && v->next.pack[0] == '\0') {
		v->res->chunks++;
		if (add_damage(v, &v->next, "needed but stored in no pack", 0))
			return (-1);
		if (advance(v))
			return (-1);
	}
	return (0);
}

/* Complete snapshots that have no record_pack at all. */
static int
check_unrecorded(struct verify *v)
{
	while (v->reci < v->nrecs && v->recs[v->reci].pack[0] == '\0') {
		if (add_bad_record(v, &v->recs[v->reci], "was never written"))
			return (-1);
		v->reci++;
	}
	return (0);
}

/*
 * The run's result into the catalog's verify table, then the repository
 * (a journal record, now if no writer holds it).  The row is this run's,
 * also when it resumed a pass.
 */
static int
record_run(struct verify *v, enum engine_result status, double t0)
{
	const struct verify_result *res = v->res;
	struct catalog_verify_run row;
	char *host;
	int rc;

	if ((host = engine_host_name()) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	memset(&row, 0, sizeof(row));
	row.time_ns = v->started_ns;
	row.host = host;
	row.mode = res->mode;
	if (v->o->read == VERIFY_READ_SLICE) {
		row.slice_n = v->o->slice_n;
		row.slice_m = v->o->slice_m;
	}
	row.complete = res->complete;
	row.packs = res->packs;
	row.packs_read = res->packs_read;
	row.bytes_read = res->bytes_read;
	row.damage = (int64_t)(res->ndamage + res->nbad_records +
	    res->nbad_packs + res->meta_errors);
	row.seconds = now_monotonic() - t0;
	row.verdict = status == ENGINE_OK ? "pass" : "fail";
	rc = catalog_verify_run_add(v->cat, &row);
	free(host);
	if (rc)
		return (-1);
	/*
	 * Evidence, as a drill's: into the repository too, once the pass is
	 * complete.  The row of a pass stopped at its time limit waits for
	 * the run that completes it (or the next writer): a pack written now
	 * would be one more for the pass it stopped to meet when it resumes.
	 */
	if (res->complete && engine_journal_flush_try(v->repo, v->cat))
		log_warn("the verify result could not be written to the "
		    "repository; the next writer tries again");
	return (0);
}

enum engine_result
engine_verify(struct repo *r, struct catalog *c, const struct verify_opts *o,
    struct verify_result *res)
{
	struct catalog_verify_state vs;
	struct catalog_pack *packs = NULL;
	struct broken_state bs;
	struct verify v;
	uint8_t *sel = NULL;
	uint64_t total = 0;
	size_t npacks = 0, i, start = 0, nrows;
	double t0 = now_monotonic();
	int status = ENGINE_ERROR, found, t;

	memset(res, 0, sizeof(*res));
	/* Even the structure pass decrypts each pack's index. */
	if (engine_need_read(r, o->read == VERIFY_STRUCTURE ? "verify" :
	    "verify --read-data"))
		return (ENGINE_REFUSED);
	memset(&v, 0, sizeof(v));
	v.repo = r;
	v.cat = c;
	v.o = o;
	v.res = res;
	v.started_ns = o->now_ns ? o->now_ns : now_realtime_ns();
	buf_init(&v.data);
	buf_init(&v.scratch);
	record_reader_init(&v.parts, r);
	hmap_init(&v.index, CCRYPTO_ID_BYTES);
	mode_name(o, res->mode, sizeof(res->mode));

	if ((found = catalog_verify_state_get(c, res->mode, &vs)) < 0)
		goto out;
	if (!found) {
		memset(&vs, 0, sizeof(vs));
		ccrypto_random(&vs.seed, sizeof(vs.seed));
		vs.started_ns = now_realtime_ns();
	} else {
		res->resumed = 1;
		res->earlier_packs = vs.packs;
		res->earlier_errors = vs.errors;
		log_info("verify: resuming the %s pass after pack %s",
		    res->mode, vs.last_pack);
	}
	if ((v.pool = pool_new(pool_default_threads())) == NULL)
		goto out;
	if ((v.workers = calloc((size_t)pool_threads(v.pool),
	    sizeof(*v.workers))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	for (t = 0; t < pool_threads(v.pool); t++)
		if ((v.workers[t].z = compressor_new(1)) == NULL)
			goto out;
	if ((v.z = compressor_new(1)) == NULL)
		goto out;
	if (catalog_packs(c, &packs, &npacks))
		goto out;
	res->packs_total = (int64_t)npacks;
	if (npacks && (sel = calloc(npacks, 1)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	if (select_packs(o, vs.seed, packs, npacks, sel))
		goto out;
	if (catalog_snapshot_list(c, NULL, collect_snapshot, &v))
		goto out;
	if (v.nrecs)
		qsort(v.recs, v.nrecs, sizeof(*v.recs), by_pack);

	if (found) {
		while (start < npacks &&
		    strcmp(packs[start].name, vs.last_pack) <= 0)
			start++;
		while (v.reci < v.nrecs &&
		    strcmp(v.recs[v.reci].pack, vs.last_pack) <= 0)
			v.reci++;
	}
	for (i = start; i < npacks; i++)
		if (sel[i])
			total += packs[i].size;
	progress_init(&v.progress, "verify", total);
	v.progress.unit = "packs";

	if ((v.it = catalog_needed_chunks(c, found ? vs.last_pack : NULL)) ==
	    NULL || advance(&v))
		goto out;
	if (!found && (check_unlocated(&v) || check_unrecorded(&v) ||
	    check_unknown_packs(&v, packs, npacks)))
		goto out;

	res->complete = 1;
	for (i = start; i < npacks; i++) {
		if (check_pack(&v, &packs[i], sel[i]))
			goto out;
		res->packs++;
		memcpy(res->last_pack, packs[i].name, sizeof(res->last_pack));
		tuning_raise_at("verify-pack");
		/* At least one pack per run, so that a pass always ends. */
		if (o->max_seconds > 0 && i + 1 < npacks &&
		    now_monotonic() - t0 >= o->max_seconds) {
			res->complete = 0;
			break;
		}
		/* Stopped by a signal: as at the time limit, the next run
		 * resumes after this pack. */
		if (signals_caught() && i + 1 < npacks) {
			res->complete = 0;
			break;
		}
	}
	if (res->complete) {
		/* Chunks of packs after the last one (a pack row that
		 * vanished while we ran). */
		if (take_needed(&v, "~"))
			goto out;
		while (v.reci < v.nrecs) {
			if (add_bad_record(&v, &v.recs[v.reci], "is in a pack "
			    "that is not in the catalog"))
				goto out;
			v.reci++;
		}
	}
	catalog_chunk_iter_free(v.it);
	v.it = NULL;
	progress_done(&v.progress);
	/* A pass that read every journal record knows what the damaged
	 * ones alone held. */
	if (v.journals_bad && journal_loses(&v, res->complete && !found))
		goto out;

	if (res->complete) {
		if (found && catalog_verify_state_clear(c, res->mode))
			goto out;
	} else {
		memcpy(vs.last_pack, res->last_pack, sizeof(vs.last_pack));
		vs.packs += res->packs;
		vs.chunks += res->chunks;
		vs.bytes += res->bytes_read;
		vs.errors += (int64_t)(res->ndamage + res->nbad_records +
		    res->nbad_packs + res->meta_errors);
		if (catalog_verify_state_put(c, res->mode, &vs))
			goto out;
	}

	nrows = res->ndamage;
	if (o->read != VERIFY_STRUCTURE && res->ndamage > 0 &&
	    take_copies(&v, &nrows))
		goto out;
	memset(&bs, 0, sizeof(bs));
	bs.res = res;
	if (catalog_chunks_break(c, v.bad_rows, nrows, collect_broken, &bs))
		goto out;
	/* So that the next backup that meets them stores them again. */
	if (catalog_chunks_mark_damaged(c, v.bad_rows, nrows))
		goto out;
	status = res->ndamage || res->nbad_records || res->nbad_packs ||
	    res->meta_errors ? ENGINE_DAMAGED : ENGINE_OK;
	if (o->record && record_run(&v, status, t0))
		status = ENGINE_ERROR;
	if (!res->complete && signals_caught()) {
		log_error("verify interrupted by %s after pack %.12s: the next "
		    "run resumes there", signals_name(signals_caught()),
		    res->last_pack);
		status = ENGINE_INTERRUPTED;
	}
out:
	progress_done(&v.progress);
	res->seconds = now_monotonic() - t0;
	catalog_chunk_iter_free(v.it);
	compressor_free(v.z);
	if (v.workers) {
		for (t = 0; t < pool_threads(v.pool); t++) {
			pack_reader_close(v.workers[t].pr);
			compressor_free(v.workers[t].z);
			buf_release(&v.workers[t].data);
		}
		free(v.workers);
	}
	pool_free(v.pool);
	free(v.rcs);
	free(v.extra);
	free(v.journals);
	buf_release(&v.data);
	buf_release(&v.scratch);
	record_reader_release(&v.parts);
	hmap_release(&v.index);
	for (i = 0; i < v.nrecs; i++)
		free(v.recs[i].dataset);
	free(v.recs);
	free(v.need);
	free(v.bad_rows);
	free(packs);
	free(sel);
	return (status);
}

void
engine_verify_result_release(struct verify_result *res)
{
	size_t i;

	for (i = 0; i < res->nbroken; i++) {
		free(res->broken[i].dataset);
		free(res->broken[i].path);
	}
	for (i = 0; i < res->nbad_records; i++)
		free(res->bad_records[i].dataset);
	for (i = 0; i < res->nbad_meta; i++)
		free(res->bad_meta[i].loses);
	free(res->bad_meta);
	free(res->bad_packs);
	res->bad_meta = NULL;
	res->bad_packs = NULL;
	res->nbad_meta = res->nbad_packs = res->meta_errors = 0;
	free(res->damage);
	free(res->broken);
	free(res->bad_records);
	res->damage = NULL;
	res->broken = NULL;
	res->bad_records = NULL;
	res->ndamage = res->nbroken = res->nbad_records = 0;
}
