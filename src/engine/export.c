/*
 * Export: a bundle (include/coffer/bundle.h) of what a target lacks for a
 * snapshot's chain, or for every snapshot, written in one pass: packs are
 * copied verbatim, never decrypted, and hashed as they are copied.  What
 * a chain needs comes from the catalog alone, the packs of its records'
 * parts included, so a host with a write-only key exports.
 *
 * Every bundle carries the packs of the journal too (journal_needs), so
 * that what the repository decided (forgets, drills, runs) goes offsite
 * with the snapshots, whichever host exports.
 *
 * Levels per target, as for snapshots: a full carries every pack the
 * chain needs; a differential those the target's last full bundle does
 * not hold; an incremental those no bundle since that full holds.  The
 * journal's packs follow the same rules.  "What
 * the target holds" is by pack name, so a pack that prune replaced
 * locally (its live chunks repacked under a new name) is sent again when
 * a chain needs it, while packs the target already has are never resent.
 *
 * Nothing is recorded until the bundle is complete where it goes (the
 * directory's rename, rclone's exit status): a failed export leaves the
 * catalog as it was, and the next export sends the same again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/bundle.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog-journal.h"
#include "coffer/catalog-known.h"
#include "coffer/catalog-record.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/progress.h"
#include "coffer/remote.h"
#include "coffer/signals.h"
#include "engine-int.h"

/* A pack the bundle's snapshots need, and how much of it they need
 * (UINT64_MAX: all of it, or unknown). */
struct need {
	char *pack;
	uint64_t bytes;
};

struct export {
	struct repo *repo;
	struct catalog *cat;
	const struct export_opts *o;
	struct export_result *res;
	struct need *need;		/* packs the bundle needs */
	size_t nneed, capneed;
	char **journal;			/* the packs of journal records */
	size_t njournal;
	char **send;			/* of those, what the target lacks */
	uint64_t *send_bytes;		/* and how much of each they need */
	size_t nsend;
	struct bundle_manifest m;
	struct progress progress;
};

static int
cmp_need(const void *a, const void *b)
{
	return (strcmp(((const struct need *)a)->pack,
	    ((const struct need *)b)->pack));
}

static int
need_add(struct export *x, const char *pack, uint64_t bytes)
{
	if (array_grow(&x->need, &x->capneed, x->nneed, sizeof(*x->need),
	    64) || (x->need[x->nneed].pack = strdup(pack)) == NULL) {
		log_errno("out of memory");
		return (-1);
	}
	x->need[x->nneed++].bytes = bytes;
	return (0);
}

/* Sort need and merge duplicates (a part's pack may hold chunks too). */
static void
need_unique(struct export *x)
{
	size_t i, k = 0;

	if (x->nneed == 0)
		return;
	qsort(x->need, x->nneed, sizeof(*x->need), cmp_need);
	for (i = 1; i < x->nneed; i++) {
		if (strcmp(x->need[i].pack, x->need[k].pack) == 0) {
			if (x->need[i].bytes == UINT64_MAX)
				x->need[k].bytes = UINT64_MAX;
			else if (x->need[k].bytes != UINT64_MAX)
				x->need[k].bytes += x->need[i].bytes;
			free(x->need[i].pack);
		} else
			x->need[++k] = x->need[i];
	}
	x->nneed = k + 1;
}

/*
 * The packs of the parts of snapshot s's record, read from its head (in
 * s->record_pack), for a snapshot whose parts the catalog does not know
 * (snapshot.parts NULL); the catalog keeps them from now on.  0 or -1.
 */
static int
head_part_packs(struct export *x, const struct catalog_snapshot *s)
{
	struct pack_reader *pr;
	struct pack_entry *ents = NULL;
	struct catalog_record_info ri;
	struct compressor *z = NULL;
	struct buf data = BUF_INIT;
	const uint8_t *img;
	const char *why;
	size_t i, j, n, imglen;
	int rc = -1, found = 0;

	if (s->record_pack[0] == '\0')
		return (0);
	if ((pr = pack_reader_open(x->repo, s->record_pack)) == NULL)
		return (-1);
	if ((z = compressor_new(0)) == NULL || pack_reader_index(pr, &ents,
	    &n))
		goto out;
	/* From the end: a head is written after its parts. */
	for (i = n; i-- > 0 && !found; ) {
		if (ents[i].type != PACK_REC_SNAPSHOT ||
		    pack_reader_get(pr, &ents[i], z, &data) ||
		    snapshot_record_open(x->repo, data.data, data.len,
		    &img, &imglen, &why) != 1 ||
		    catalog_record_info(img, imglen, &ri))
			continue;
		if (strcmp(ri.sid, s->sid) == 0 && ri.parts > 0) {
			found = 1;
			for (j = 0; ri.parts > 1 && j + 1 < (size_t)ri.parts;
			    j++)
				if (need_add(x, ri.partv[j].pack, 0)) {
					catalog_record_info_release(&ri);
					goto out;
				}
			if (catalog_snapshot_parts_set(x->cat, s->id,
			    ri.parts, ri.partv)) {
				catalog_record_info_release(&ri);
				goto out;
			}
		}
		catalog_record_info_release(&ri);
	}
	if (!found) {
		log_error("snapshot %s: its record is not in pack '%s'",
		    s->sid, s->record_pack);
		goto out;
	}
	rc = 0;
out:
	free(ents);
	buf_release(&data);
	compressor_free(z);
	pack_reader_close(pr);
	return (rc);
}

/*
 * The packs of the parts of snapshot s's record other than its head's
 * (which the chain's packs include): from the catalog, so that a
 * write-only key, which opens no record, exports.  0, 1 refused
 * (reported), -1.
 */
static int
part_packs(struct export *x, const struct catalog_snapshot *s)
{
	char **packs;
	size_t i, n;
	int rc = 0;

	if (s->parts == 0) {
		if (!ccrypto_keys_write_only(repo_keys(x->repo)))
			return (head_part_packs(x, s) ? -1 : 0);
		log_error("snapshot %s: the catalog does not know which packs "
		    "hold its record and this key is write-only: it cannot "
		    "read the record to find out; run `coffer catalog "
		    "rebuild` or an export with a key that reads, once",
		    s->sid);
		return (1);
	}
	if (catalog_snapshot_part_packs(x->cat, s->id, &packs, &n))
		return (-1);
	for (i = 0; i < n && rc == 0; i++)
		rc = need_add(x, packs[i], 0);
	names_free(packs, n);
	return (rc);
}

/* Every pack the chain of snap needs, and its snapshots' ids.  0, 1
 * refused (reported), -1. */
static int
chain_needs(struct export *x, const struct catalog_snapshot *snap)
{
	struct catalog_snapshot s;
	char **packs;
	uint64_t *need;
	size_t i, n;
	int64_t id;
	int rc;

	if (catalog_chain_packs(x->cat, snap->id, PACK_RECORD_SIZE(0), &packs,
	    &need, &n))
		return (-1);
	for (i = 0; i < n; i++)
		if (need_add(x, packs[i], need[i])) {
			names_free(packs, n);
			free(need);
			return (-1);
		}
	names_free(packs, n);
	free(need);
	for (id = snap->id; id != 0; id = s.parent_id) {
		memset(&s, 0, sizeof(s));
		if (catalog_snapshot_get(x->cat, id, &s))
			return (-1);
		if ((rc = part_packs(x, &s)) == 0 &&
		    bundle_manifest_add_snapshot(&x->m, s.sid))
			rc = -1;
		catalog_snapshot_release(&s);
		if (rc)
			return (rc);
	}
	return (0);
}

/* With every pack carried, the parts' packs need not be looked up. */
static int
add_complete(void *arg, const struct catalog_snapshot *s)
{
	struct export *x = arg;

	if (s->state != SNAP_COMPLETE)
		return (0);
	return (bundle_manifest_add_snapshot(&x->m, s->sid));
}

static int
add_known(void *arg, const char *sid, const char *dataset)
{
	struct export *x = arg;

	(void)dataset;
	return (bundle_manifest_add_snapshot(&x->m, sid));
}

/* Every pack the repository holds, and every complete snapshot. */
static int
all_needs(struct export *x)
{
	struct catalog_pack *v;
	size_t i, n;
	int rc = 0;

	if (catalog_packs(x->cat, &v, &n))
		return (-1);
	for (i = 0; i < n && rc == 0; i++)
		rc = need_add(x, v[i].name, UINT64_MAX);
	free(v);
	/* And those a write-only key knows by their views alone. */
	if (rc || catalog_snapshot_list(x->cat, NULL, add_complete, x) ||
	    catalog_known_list(x->cat, add_known, x))
		return (-1);
	return (0);
}

/*
 * The packs of the journal, whoever wrote them: what the repository knows
 * besides snapshots (forgets, drills, failed runs, runs, bundles, key
 * uses) goes to every target with its next bundle, whatever the bundle is
 * for, so that an import lists the snapshots the repository lists, with
 * their history, and none it forgot.  Copied unread, as every pack is;
 * plan() leaves out those the target holds.  0 or -1.
 */
static int
journal_needs(struct export *x)
{
	size_t i;

	if (catalog_journal_packs(x->cat, &x->journal, &x->njournal))
		return (-1);
	for (i = 0; i < x->njournal; i++)
		if (need_add(x, x->journal[i], UINT64_MAX))
			return (-1);
	return (0);
}

static int
cmp_name(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

/*
 * The level, the base and what to send.  A target without a full gets a
 * full; a differential or incremental asked for without one too (as
 * backup does).  0 or -1.
 */
static int
plan(struct export *x)
{
	struct catalog_bundle last, full;
	char **held = NULL;
	size_t nheld = 0, i, j;
	int lvl = x->o->level, hl, hf, rc = -1;

	memset(&last, 0, sizeof(last));
	memset(&full, 0, sizeof(full));
	if ((hl = catalog_bundle_last(x->cat, 1, x->o->target, 0, &last)) < 0 ||
	    (hf = catalog_bundle_last(x->cat, 1, x->o->target, 1, &full)) < 0)
		goto out;
	if (lvl == LEVEL_AUTO)
		lvl = hf ? LEVEL_INCREMENTAL : LEVEL_FULL;
	if (!hf && lvl != LEVEL_FULL) {
		log_info("target '%s' holds no full bundle: exporting a full",
		    x->o->target);
		lvl = LEVEL_FULL;
	}
	x->m.level = lvl;
	x->m.seq = hl ? last.seq + 1 : 1;
	if (lvl == LEVEL_DIFFERENTIAL) {
		x->m.base_seq = full.seq;
		memcpy(x->m.base_hash, full.manifest, sizeof(full.manifest));
		if (catalog_bundle_held(x->cat, x->o->target, full.seq,
		    full.seq, &held, &nheld))
			goto out;
	} else if (lvl == LEVEL_INCREMENTAL) {
		x->m.base_seq = last.seq;
		memcpy(x->m.base_hash, last.manifest, sizeof(last.manifest));
		if (catalog_bundle_held(x->cat, x->o->target, full.seq,
		    last.seq, &held, &nheld))
			goto out;
	}
	if ((x->send = calloc(x->nneed + 1, sizeof(*x->send))) == NULL ||
	    (x->send_bytes = calloc(x->nneed + 1,
	    sizeof(*x->send_bytes))) == NULL) {
		log_errno("out of memory");
		goto out;
	}
	/* need and held are sorted: a merge. */
	for (i = j = 0; i < x->nneed; i++) {
		while (j < nheld && strcmp(held[j], x->need[i].pack) < 0)
			j++;
		if (j < nheld && strcmp(held[j], x->need[i].pack) == 0)
			continue;
		x->send[x->nsend] = x->need[i].pack;
		x->send_bytes[x->nsend++] = x->need[i].bytes;
	}
	rc = 0;
out:
	names_free(held, nheld);
	catalog_bundle_release(&last);
	catalog_bundle_release(&full);
	return (rc);
}

/* Write the bundle to w; fills the manifest's files as it goes. */
static int
write_bundle(struct export *x, struct bundle_writer *w, struct buf *text)
{
	struct repo_file *files = NULL;
	uint8_t h[BUNDLE_HASH_BYTES], sig[CCRYPTO_SIG_BYTES];
	char member[64];
	uint64_t size;
	size_t i, nfiles = 0;
	int rc = -1;

	if (repo_meta_files(x->repo, &files, &nfiles))
		return (-1);
	for (i = 0; i < nfiles; i++)
		if (bundle_writer_add_mem(w, files[i].name, files[i].data,
		    files[i].len, h) || bundle_manifest_add_file(&x->m,
		    files[i].name, files[i].len, h))
			goto out;
	for (i = 0; i < x->nsend; i++) {
		if (signals_caught())
			goto out;
		snprintf(member, sizeof(member), "packs/%.2s/%s", x->send[i],
		    x->send[i]);
		if (bundle_writer_add_pack(w, x->repo, x->send[i], &size, h) ||
		    bundle_manifest_add_file(&x->m, member, size, h))
			goto out;
		x->res->packs++;
		x->res->pack_bytes += size;
		if (bsearch(&x->send[i], x->journal, x->njournal,
		    sizeof(*x->journal), cmp_name) != NULL)
			x->res->journal_packs++;
		/* Record heads and parts, and --all: the whole pack. */
		x->res->needed_bytes += x->send_bytes[i] == UINT64_MAX ||
		    x->send_bytes[i] == 0 ? size :
		    x->send_bytes[i] < size ? x->send_bytes[i] : size;
		progress_update(&x->progress, x->res->packs, x->res->pack_bytes);
	}
	if (bundle_manifest_encode(&x->m, text))
		goto out;
	bundle_manifest_sign(repo_keys(x->repo), text->data, text->len, sig);
	if (bundle_writer_add_mem(w, BUNDLE_MANIFEST, text->data, text->len,
	    NULL) || bundle_writer_add_mem(w, BUNDLE_SIG, sig, sizeof(sig),
	    NULL))
		goto out;
	rc = 0;
out:
	repo_files_free(files, nfiles);
	return (rc);
}

/* NAME.b2sum beside NAME: "HEX  NAME\n", as b2sum -c reads it. */
static int
write_sum(struct export *x, const struct remote *t)
{
	struct remote_stream s;
	char name[160], line[2 * BUNDLE_SUM_BYTES + 160];
	int n, ok;

	snprintf(name, sizeof(name), "%s.b2sum", x->res->name);
	n = snprintf(line, sizeof(line), "%s  %s\n", x->res->sum, x->res->name);
	if (remote_put_begin(t, name, &s))
		return (-1);
	ok = fsutil_write_all(s.fd, line, (size_t)n, name) == 0;
	return (remote_put_end(&s, ok));
}

int
engine_bundle_record(struct catalog *c, const struct bundle_manifest *m,
    int exported, const uint8_t hash[BUNDLE_HASH_BYTES], const char *name,
    uint64_t size, char *const *packs, size_t npacks, int64_t ncarried)
{
	struct catalog_bundle b;
	struct buf sids = BUF_INIT;
	size_t i;
	int rc = -1;

	memset(&b, 0, sizeof(b));
	for (i = 0; i < m->nsnapshots; i++)
		if (buf_printf(&sids, "%s%s", i ? " " : "", m->snapshots[i]))
			goto out;
	if (buf_put_u8(&sids, 0))
		goto out;
	b.exported = exported;
	snprintf(b.target, sizeof(b.target), "%s", m->target);
	b.seq = m->seq;
	b.level = m->level;
	b.base_seq = m->base_seq;
	memcpy(b.manifest, hash, sizeof(b.manifest));
	snprintf(b.name, sizeof(b.name), "%s", name);
	b.size = size;
	b.packs = ncarried;
	b.snapshots = (char *)sids.data;
	b.created_ns = m->created_ns;
	rc = catalog_bundle_add(c, &b, packs, npacks);
out:
	buf_release(&sids);
	return (rc);
}

enum engine_result
engine_export(struct repo *r, struct catalog *c, const struct export_opts *o,
    struct export_result *res)
{
	struct export x;
	struct remote t;
	struct remote_stream s;
	struct bundle_writer *w = NULL;
	struct buf text = BUF_INIT;
	uint8_t sum[BUNDLE_SUM_BYTES];
	double t0 = now_monotonic();
	enum engine_result st = ENGINE_ERROR;
	size_t i;
	int put = 0, ok = 0, rc;

	memset(res, 0, sizeof(*res));
	memset(&x, 0, sizeof(x));
	x.repo = r;
	x.cat = c;
	x.o = o;
	x.res = res;
	if (remote_parse(o->to, &t))
		return (ENGINE_REFUSED);
	if (o->snapshot && engine_need_complete(o->snapshot)) {
		st = ENGINE_REFUSED;
		goto out;
	}
	x.m.format = BUNDLE_FORMAT;
	memcpy(x.m.repo_id, repo_id(r), sizeof(x.m.repo_id));
	snprintf(x.m.target, sizeof(x.m.target), "%s", o->target);
	x.m.created_ns = o->now_ns ? o->now_ns : now_realtime_ns();
	if ((rc = o->snapshot ? chain_needs(&x, o->snapshot) :
	    all_needs(&x)) != 0) {
		if (rc > 0)
			st = ENGINE_REFUSED;
		goto out;
	}
	if (journal_needs(&x))
		goto out;
	need_unique(&x);
	if (plan(&x))
		goto out;
	snprintf(res->name, sizeof(res->name), "%s-%04u%s", o->target,
	    (unsigned)x.m.seq, BUNDLE_SUFFIX);
	res->seq = x.m.seq;
	res->level = x.m.level;
	res->base_seq = x.m.base_seq;
	res->snapshots = x.m.nsnapshots;
	progress_init(&x.progress, "export", 0);
	if (remote_put_begin(&t, res->name, &s))
		goto out;
	put = 1;
	if ((w = bundle_writer_new(s.fd, t.kind == REMOTE_PIPE ?
	    "standard output" : res->name)) == NULL)
		goto out;
	if (t.kind == REMOTE_RCLONE)
		bundle_writer_quiet_pipe(w);
	if (write_bundle(&x, w, &text) ||
	    bundle_writer_finish(w, sum, &res->bytes))
		goto out;
	ok = 1;
out:
	if (put && remote_put_end(&s, ok))
		ok = 0;
	progress_done(&x.progress);
	if (ok && res->pack_bytes > 2 * res->needed_bytes &&
	    res->pack_bytes - res->needed_bytes > (64u << 20))
		/* Dedup across datasets: their chunks sit in other runs'
		 * packs, which travel whole. */
		log_info("bundle %s: %llu MB of its %llu MB of packs is data "
		    "of other snapshots that shares their packs (export "
		    "--all sends each pack once for every snapshot; prune "
		    "repacks packs that are mostly unused)", res->name,
		    (unsigned long long)((res->pack_bytes -
		    res->needed_bytes) / 1000000),
		    (unsigned long long)(res->pack_bytes / 1000000));
	if (ok) {
		bundle_manifest_hash(text.data, text.len, res->manifest);
		hex_encode(res->sum, sum, sizeof(sum));
		if ((t.kind == REMOTE_PIPE || write_sum(&x, &t) == 0) &&
		    engine_bundle_record(c, &x.m, 1, res->manifest, res->name,
		    res->bytes, x.send, x.nsend, (int64_t)x.nsend) == 0) {
			st = ENGINE_OK;
			/* What the target holds outlives this catalog. */
			if (engine_journal_flush(r, c))
				log_warn("the journal could not be written to "
				    "the repository; the next run tries "
				    "again");
		}
	} else if (signals_caught())
		st = ENGINE_INTERRUPTED;
	res->seconds = now_monotonic() - t0;
	bundle_writer_free(w);
	buf_release(&text);
	bundle_manifest_release(&x.m);
	for (i = 0; i < x.nneed; i++)
		free(x.need[i].pack);
	free(x.need);
	names_free(x.journal, x.njournal);
	free(x.send);
	free(x.send_bytes);
	remote_release(&t);
	return (st);
}
