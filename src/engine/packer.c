/*
 * The packer: deduplicates chunks against the catalog, compresses and
 * appends new ones to the open pack, and makes packs durable before the
 * catalog rows that use them commit.
 *
 * Durability (doc/design.md): a chunk row gets its pack location only after
 * the pack is fsynced, renamed into packs/ and its directory fsynced
 * (pack_writer_finish_wait).  A full pack is made durable by its writer's
 * thread while the run goes on, and located once it is (backup's recorder,
 * between files: packer_locate_ready) or at the latest when the next pack
 * fills;
 * the final packer_flush makes every pack durable before its one commit,
 * the one that completes a snapshot.  A crash at any point leaves a
 * catalog whose complete snapshots reference only durable packs.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/catalog-record.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/tuning.h"
#include "engine-int.h"

#define SNAPSHOT_RECORD_MAGIC "CFSN"
/* The byte after the magic: which of format 1's two variants. */
#define SNAPSHOT_RECORD_SIGNED 1

/* What a snapshot record's signature covers: context, repository, rows,
 * so that a record cannot be replayed into another repository or passed
 * off as another kind of signed thing. */
static const char record_ctx[] = "coffer-snapshot";

/*
 * The variant that rewrites a snapshot (a rebase): the header also holds
 * the authority's signature over the image, with its own context, after
 * the ordinary one.  A write-only key signs ordinary
 * records with the signing key every key shares, so only the authority's
 * signature may let a record replace a snapshot a catalog has.
 */
#define SNAPSHOT_RECORD_AUTHORITY 2
#define SNAPSHOT_RECORD_HEADER_AUTH (SNAPSHOT_RECORD_HEADER + CCRYPTO_SIG_BYTES)

int
snapshot_record_open_auth(const struct repo *r, uint8_t *rec, size_t len,
    const uint8_t **img, size_t *imglen, int *authority, const char **why)
{
	const size_t pre = sizeof(record_ctx) + CCRYPTO_REPO_ID_BYTES;
	uint8_t sig[CCRYPTO_SIG_BYTES], asig[CCRYPTO_SIG_BYTES];
	size_t hdr;
	uint8_t *msg;
	int authed;

	if (authority != NULL)
		*authority = 0;
	if (len < 5 || memcmp(rec, SNAPSHOT_RECORD_MAGIC, 4) != 0 ||
	    (rec[4] != SNAPSHOT_RECORD_SIGNED &&
	    rec[4] != SNAPSHOT_RECORD_AUTHORITY)) {
		*why = "is malformed";
		return (0);
	}
	authed = rec[4] == SNAPSHOT_RECORD_AUTHORITY;
	hdr = authed ? SNAPSHOT_RECORD_HEADER_AUTH : SNAPSHOT_RECORD_HEADER;
	if (len <= hdr) {
		*why = "is malformed";
		return (0);
	}
	/* The signed message is built where the header was, as
	 * store_record built it: a part is not copied to be checked. */
	msg = rec + hdr - pre;
	memcpy(sig, rec + 5, sizeof(sig));
	if (authed)
		memcpy(asig, rec + SNAPSHOT_RECORD_HEADER, sizeof(asig));
	memcpy(msg, record_ctx, sizeof(record_ctx));
	memcpy(msg + sizeof(record_ctx), repo_id(r), CCRYPTO_REPO_ID_BYTES);
	if (ccrypto_verify(repo_keys(r), msg, len - hdr + pre, sig)) {
		*why = "has a bad signature";
		return (0);
	}
	*img = rec + hdr;
	*imglen = len - hdr;
	if (authed) {
		switch (ccrypto_auth_verify(repo_keys(r), SNAPSHOT_REBASE_CTX,
		    repo_id(r), *img, *imglen, asig)) {
		case 0:
			if (authority != NULL)
				*authority = 1;
			break;
		case CCRYPTO_AUTH_UNKNOWN:
			/* Not checked: it replaces nothing here. */
			break;
		default:
			*why = "has a bad authority signature";
			return (0);
		}
	}
	return (1);
}

int
snapshot_record_open(const struct repo *r, uint8_t *rec, size_t len,
    const uint8_t **img, size_t *imglen, const char **why)
{
	return (snapshot_record_open_auth(r, rec, len, img, imglen, NULL,
	    why));
}

int
packer_init(struct packer *p, struct repo *r, struct catalog *c,
    int zstd_level)
{
	memset(p, 0, sizeof(*p));
	p->repo = r;
	p->cat = c;
	hmap_init(&p->pend_ids, CCRYPTO_ID_BYTES);
	p->target_size = PACK_TARGET_SIZE;
	/* Tests shrink packs to get many of them from little data. */
	if (tuning_get()->pack_size > 0)
		p->target_size = tuning_get()->pack_size;
	p->zstd_level = zstd_level ? zstd_level : DEFAULT_ZSTD_LEVEL;
	if ((p->z = compressor_new(p->zstd_level)) == NULL)
		return (-1);
	return (0);
}

void
packer_release(struct packer *p)
{
	pack_writer_free(p->finishing);
	pack_writer_free(p->pw);
	compressor_free(p->z);
	hmap_release(&p->pend_ids);
	buf_release(&p->zbuf);
	buf_release(&p->view);
	free(p->pend);
	memset(p, 0, sizeof(*p));
}

/*
 * Wait until the finishing pack is durable, then record it and locate its
 * chunks (in the open transaction: the caller commits), max of them at
 * most, from where the last call stopped: 1 once all are located and
 * forgotten (the chunks of the open pack then move to the front of pend),
 * 0 while some are left, -1 on error.
 */
static int
locate_some(struct packer *p, size_t max)
{
	struct catalog_chunk_loc loc;
	struct pack_info info;
	int64_t idx;
	size_t i, n = p->nfinishing;

	if (p->finishing == NULL)
		return (1);
	if (p->fin_pack == 0) {
		if (pack_writer_finish_wait(p->finishing, &info))
			return (-1);
		p->packs++;
		p->uncommitted += info.size;
		if (catalog_pack_add(p->cat, info.name, info.size, info.hash,
		    &p->fin_pack))
			return (-1);
	}
	for (; p->nlocated < n && max > 0; p->nlocated++, max--) {
		struct pack_entry *e = &p->pend[p->nlocated].ent;

		memset(&loc, 0, sizeof(loc));
		loc.pack_offset = e->offset;
		loc.plain_len = e->plain_len;
		loc.stored_len = e->stored_len;
		loc.type = e->type;
		loc.flags = e->flags;
		if (catalog_chunk_locate(p->cat, p->pend[p->nlocated].rowid,
		    p->fin_pack, &loc))
			return (-1);
	}
	if (p->nlocated < n)
		return (0);
	pack_writer_free(p->finishing);
	p->finishing = NULL;
	p->fin_pack = 0;
	p->nlocated = 0;
	/* Located chunks are found in the catalog from now on. */
	if (p->npend > n)
		memmove(p->pend, p->pend + n,
		    (p->npend - n) * sizeof(*p->pend));
	p->npend -= n;
	p->nfinishing = 0;
	hmap_clear(&p->pend_ids);
	for (i = 0; i < p->npend; i++) {
		idx = (int64_t)i;
		if (hmap_put(&p->pend_ids, p->pend[i].id, idx))
			return (-1);
	}
	return (1);
}

static int
locate_finished(struct packer *p)
{
	return (locate_some(p, SIZE_MAX) < 0 ? -1 : 0);
}

/* Hand the open pack to its thread to be made durable (none finishing). */
static int
finish_start(struct packer *p)
{
	if (p->pw == NULL)
		return (0);
	if (pack_writer_count(p->pw) == 0) {
		pack_writer_free(p->pw);
		p->pw = NULL;
		return (0);
	}
	tuning_raise_at("backup-pack");
	if (view_write(p->pw, p->repo, &p->view) ||
	    pack_writer_finish_start(p->pw))
		return (-1);
	p->finishing = p->pw;
	p->nfinishing = p->npend;
	p->pw = NULL;
	return (0);
}

/*
 * Both packs durable and located before the one commit: the caller's
 * transaction may hold what must not commit before them (a snapshot
 * turning complete, its record's pack).
 */
int
packer_flush(struct packer *p)
{
	if (locate_finished(p) || finish_start(p) || locate_finished(p))
		return (-1);
	if (catalog_commit(p->cat) || catalog_begin(p->cat))
		return (-1);
	p->uncommitted = 0;
	return (0);
}

/* The open pack has reached its size or its number of records. */
static int
pack_full(const struct packer *p)
{
	return (p->pw != NULL &&
	    (pack_writer_size(p->pw) >= p->target_size ||
	    pack_writer_count(p->pw) >= PACK_TARGET_RECORDS));
}

/*
 * Once a pack is located: what the run has done so far (its snapshot is
 * still running) is committed once COMMIT_PACKS packs' worth (1 GiB at
 * the default size) wait for it, not at every pack.  A commit writes
 * again every catalog page dirtied since the last one, and the chunk and
 * content indexes, keyed by hash, spread a run of small files' inserts
 * over all their pages: with a million files a commit rewrites hundreds
 * of MB of catalog, whatever it commits.  Waiting costs little: a crash
 * loses only the catalog's rows of durable packs, which the next
 * command's sync reads back from their indexes (sync.c), and the WAL
 * holds at most the pages dirtied meanwhile, up to the catalog's size.
 */
#define COMMIT_PACKS 16

static int
commit_due(struct packer *p)
{
	if (p->uncommitted >= COMMIT_PACKS * p->target_size) {
		if (catalog_commit(p->cat) || catalog_begin(p->cat))
			return (-1);
		p->uncommitted = 0;
	}
	return (0);
}

/* Mid-run: a full pack starts finishing, the one before located first. */
int
packer_maybe_flush(struct packer *p)
{
	if (!pack_full(p))
		return (0);
	if (p->finishing != NULL && (locate_finished(p) || commit_due(p)))
		return (-1);
	return (finish_start(p));
}

int
packer_locate_ready(struct packer *p)
{
	int rc;

	if (p->finishing == NULL || (p->fin_pack == 0 &&
	    !pack_writer_finish_ready(p->finishing)))
		return (0);
	if ((rc = locate_some(p, LOCATE_AT_ONCE)) <= 0)
		return (rc);
	return (commit_due(p));
}

/*
 * Compress (when it pays) and append one record to the open pack (started
 * if there is none), counted stored.  The data's buffer is released once
 * compressed: records are large.
 */
static int
write_record(struct packer *p, uint8_t type, const uint8_t *id,
    struct buf *data, struct pack_entry *ent)
{
	const void *payload = data->data;
	size_t len = data->len, stored = len, zl;
	uint32_t plain_len = (uint32_t)len;
	uint8_t flags = 0;
	int rc = -1;

	if (buf_reserve(&p->zbuf, compressor_bound(len)))
		goto out;
	zl = compressor_compress(p->z, data->data, len, p->zbuf.data,
	    p->zbuf.cap);
	if (zl == (size_t)-1)
		goto out;
	if (zl > 0) {
		buf_release(data);
		payload = p->zbuf.data;
		stored = zl;
		flags = PACK_FLAG_ZSTD;
	}
	if (packer_writer(p) == NULL ||
	    pack_writer_add(p->pw, type, flags, id, payload, stored,
	    plain_len, ent))
		goto out;
	p->bytes_stored += (int64_t)(stored + PACK_RECORD_HEADER_BYTES +
	    CCRYPTO_TAG_BYTES);
	rc = 0;
out:
	buf_release(&p->zbuf);
	return (rc);
}

int
packer_lookup(struct packer *p, const uint8_t id[CCRYPTO_ID_BYTES],
    int64_t *rowidp)
{
	struct pending *pe;
	int64_t rowid = 0, idx;
	int found;

	if (hmap_get(&p->pend_ids, id, &idx)) {
		*rowidp = p->pend[idx].rowid;
		return (1);
	}
	if ((found = catalog_chunk_claim(p->cat, id, &rowid)) < 0)
		return (-1);
	if (found) {
		*rowidp = rowid;
		return (1);
	}
	/* New to the repository (or a leftover row of a crashed run). */
	if (array_grow(&p->pend, &p->cappend, p->npend,
	    sizeof(*p->pend), 1024))
		return (-1);
	pe = &p->pend[p->npend];
	memset(pe, 0, sizeof(*pe));
	memcpy(pe->id, id, CCRYPTO_ID_BYTES);
	pe->rowid = rowid;
	if (hmap_put(&p->pend_ids, id, (int64_t)p->npend))
		return (-1);
	p->npend++;
	*rowidp = rowid;
	return (0);
}

struct pack_writer *
packer_writer(struct packer *p)
{
	if (p->pw == NULL)
		p->pw = pack_writer_new(p->repo);
	return (p->pw);
}

int
packer_append(struct packer *p, const uint8_t id[CCRYPTO_ID_BYTES],
    const uint8_t *rec, size_t len, uint32_t plain_len)
{
	int64_t idx;

	if (!hmap_get(&p->pend_ids, id, &idx)) {
		log_error("internal error: appending a chunk not reserved");
		return (-1);
	}
	if (pack_writer_append(p->pw, id, rec, len, &p->pend[idx].ent))
		return (-1);
	p->bytes_new += plain_len;
	p->bytes_stored += (int64_t)len;
	return (0);
}

/*
 * rec holds SNAPSHOT_RECORD_HEADER bytes of room, then the image; the
 * signed message (record_ctx, repository id, image) is built in place, in
 * the room's last bytes, and the record's header then takes the place of
 * the context and id: the image is not copied.
 */
static int
record_sign(struct repo *r, struct buf *rec,
    uint8_t rid[CCRYPTO_ID_BYTES])
{
	const size_t pre = sizeof(record_ctx) + CCRYPTO_REPO_ID_BYTES;
	const size_t pad = SNAPSHOT_RECORD_HEADER - pre;
	uint8_t sig[CCRYPTO_SIG_BYTES];

	if (rec->len < SNAPSHOT_RECORD_HEADER) {
		log_error("internal error: a snapshot record without room");
		return (-1);
	}
	memset(rec->data, 0, pad);
	memcpy(rec->data + pad, record_ctx, sizeof(record_ctx));
	memcpy(rec->data + pad + sizeof(record_ctx), repo_id(r),
	    CCRYPTO_REPO_ID_BYTES);
	ccrypto_sign(repo_keys(r), rec->data + pad, rec->len - pad, sig);
	memcpy(rec->data, SNAPSHOT_RECORD_MAGIC, 4);
	rec->data[4] = SNAPSHOT_RECORD_SIGNED;
	memcpy(rec->data + 5, sig, sizeof(sig));
	if (rec->len > PACK_RECORD_MAX) {
		log_error("snapshot record is too large (%zu bytes)", rec->len);
		return (-1);
	}
	ccrypto_chunk_id(repo_keys(r), rec->data, rec->len, rid);
	return (0);
}

/*
 * Sign rec as record_sign does, then as the authority (the variant
 * above): the image moves 64 bytes down, so it is copied once; records
 * signed so are rebases, few.
 */
static int
record_sign_authority(struct repo *r, struct buf *rec,
    uint8_t rid[CCRYPTO_ID_BYTES])
{
	struct buf out = BUF_INIT;
	size_t imglen;

	if (record_sign(r, rec, rid))
		return (-1);
	imglen = rec->len - SNAPSHOT_RECORD_HEADER;
	if (buf_reserve(&out, SNAPSHOT_RECORD_HEADER_AUTH + imglen))
		return (-1);
	memcpy(out.data, rec->data, SNAPSHOT_RECORD_HEADER);
	out.data[4] = SNAPSHOT_RECORD_AUTHORITY;
	if (ccrypto_auth_sign(repo_keys(r), SNAPSHOT_REBASE_CTX, repo_id(r),
	    rec->data + SNAPSHOT_RECORD_HEADER, imglen,
	    out.data + SNAPSHOT_RECORD_HEADER)) {
		buf_release(&out);
		return (-1);
	}
	memcpy(out.data + SNAPSHOT_RECORD_HEADER_AUTH,
	    rec->data + SNAPSHOT_RECORD_HEADER, imglen);
	out.len = SNAPSHOT_RECORD_HEADER_AUTH + imglen;
	if (out.len > PACK_RECORD_MAX) {
		log_error("snapshot record is too large (%zu bytes)", out.len);
		buf_release(&out);
		return (-1);
	}
	buf_release(rec);
	*rec = out;
	ccrypto_chunk_id(repo_keys(r), rec->data, rec->len, rid);
	return (0);
}

/* Sign rec as a snapshot record and add it to the open pack; its id and
 * pack in *where.  rec is released once compressed (write_record). */
static int
store_record(struct packer *p, struct buf *rec,
    struct catalog_record_part *where)
{
	if ((p->authority ? record_sign_authority(p->repo, rec, where->rid) :
	    record_sign(p->repo, rec, where->rid)) ||
	    write_record(p, PACK_REC_SNAPSHOT, where->rid, rec, NULL))
		return (-1);
	memcpy(where->pack, pack_writer_name(p->pw), PACK_NAME_LEN + 1);
	return (0);
}

/*
 * The view of snapshot s, whose head just went into the open pack: what
 * a write-only key may know of it (view.c).  A row made by a caller that
 * did not fill in the names (consolidate) is read back for them.
 */
static int
note_view(struct packer *p, const struct catalog_snapshot *s)
{
	struct catalog_snapshot t;
	int rc;

	if (s->dataset != NULL && (s->level == LEVEL_FULL ||
	    s->parent_sid[0] != '\0'))
		return (view_note_snapshot(&p->view, s,
		    (uint32_t)s->revision));
	memset(&t, 0, sizeof(t));
	if (catalog_snapshot_get(p->cat, s->id, &t))
		return (-1);
	t.state = s->state;
	t.finished_ns = s->finished_ns;
	rc = view_note_snapshot(&p->view, &t, (uint32_t)s->revision);
	catalog_snapshot_release(&t);
	return (rc);
}

struct part_emit {
	struct packer *p;
	struct catalog_snapshot *s;
	size_t nparts;			/* stored */
	struct catalog_record_part *where;	/* where each stored part is */
	size_t capwhere;
};

/*
 * One part of the record (catalog_part_emit_fn), stored as it comes; rec
 * NULL asks for the stored parts' places (before the head is built).  A
 * pack that fills is made durable as the parts go on, but not committed:
 * the caller's transaction already holds the snapshot complete, and must
 * commit only after its head is durable (packer_flush).
 */
static int
emit_part(void *arg, struct buf *rec, size_t room, int part, int head,
    struct catalog_record_part *where)
{
	struct part_emit *pe = arg;
	struct packer *p = pe->p;

	(void)room;	/* SNAPSHOT_RECORD_HEADER, as asked */
	if (rec == NULL) {
		if ((size_t)part != pe->nparts) {
			log_error("internal error: %d record parts asked, %zu "
			    "stored", part, pe->nparts);
			return (-1);
		}
		if (pe->nparts > 0)
			memcpy(where, pe->where, pe->nparts * sizeof(*where));
		return (0);
	}
	if (store_record(p, rec, where))
		return (-1);
	if (head) {
		if (note_view(p, pe->s))
			return (-1);
		tuning_raise_at("backup-part");
		pe->nparts++;
		memcpy(pe->s->record_pack, where->pack, PACK_NAME_LEN + 1);
		pe->s->parts = (int)pe->nparts;
		return (0);
	}
	if (array_grow(&pe->where, &pe->capwhere, pe->nparts,
	    sizeof(*pe->where), 16))
		return (-1);
	pe->where[pe->nparts] = *where;
	tuning_raise_at("backup-part");
	pe->nparts++;
	/* Where the part is, for an export that cannot read the head. */
	if (catalog_snapshot_part_add(p->cat, pe->s->id, part, where))
		return (-1);
	if (pack_full(p) && (locate_finished(p) || finish_start(p)))
		return (-1);
	return (0);
}

/* Tests: COFFER_RECORD_PART_ENTRIES sets the entries per part (a test
 * makes many parts of a few hundred files). */
static size_t
part_entries(size_t dflt)
{
	if (tuning_get()->record_part_entries > 0)
		return (tuning_get()->record_part_entries);
	return (dflt);
}

struct catalog_spool *
packer_record_spool(struct packer *p)
{
	return (catalog_spool_new(p->cat,
	    part_entries(CATALOG_SPOOL_PART_ENTRIES),
	    CATALOG_SPOOL_PART_BYTES));
}

int
packer_snapshot_record(struct packer *p, struct catalog_snapshot *s,
    struct catalog_spool *sp)
{
	struct part_emit pe;
	int rc, spooled;

	memset(&pe, 0, sizeof(pe));
	pe.p = p;
	pe.s = s;
	catalog_spool_finish(sp);
	spooled = catalog_spool_usable(sp);
	log_info("snapshot record: %s", spooled ?
	    "built from the rows spooled as they were recorded" :
	    "read from the catalog");
	if (spooled)
		rc = catalog_snapshot_export_spool(p->cat, s->id, sp,
		    SNAPSHOT_RECORD_HEADER, emit_part, &pe);
	else
		rc = catalog_snapshot_export_parts(p->cat, s->id,
		    part_entries(CATALOG_RECORD_PART_ENTRIES),
		    CATALOG_RECORD_PART_BYTES, SNAPSHOT_RECORD_HEADER,
		    emit_part, &pe);
	free(pe.where);
	return (rc);
}

void
record_reader_init(struct record_reader *rr, struct repo *r)
{
	memset(rr, 0, sizeof(*rr));
	rr->repo = r;
	buf_init(&rr->data);
}

void
record_reader_release(struct record_reader *rr)
{
	pack_reader_close(rr->pr);
	free(rr->ents);
	compressor_free(rr->z);
	buf_release(&rr->data);
	memset(rr, 0, sizeof(*rr));
}

void
record_reader_trim(struct record_reader *rr)
{
	buf_release(&rr->data);
}

int
record_reader_get(struct record_reader *rr, const char *pack,
    const uint8_t rid[CCRYPTO_ID_BYTES], const uint8_t **img, size_t *len)
{
	const struct pack_entry *e = NULL;
	const char *why;
	size_t i;

	/* The parts of a snapshot follow one another in few packs: the
	 * last pack stays open with its index. */
	if (rr->pr == NULL || strcmp(pack_reader_name(rr->pr), pack) != 0) {
		pack_reader_close(rr->pr);
		free(rr->ents);
		rr->ents = NULL;
		rr->nents = 0;
		if ((rr->pr = pack_reader_open(rr->repo, pack)) == NULL)
			return (0);
		if (pack_reader_index(rr->pr, &rr->ents, &rr->nents)) {
			pack_reader_close(rr->pr);
			rr->pr = NULL;
			return (0);
		}
	}
	for (i = 0; i < rr->nents && e == NULL; i++)
		if (rr->ents[i].type == PACK_REC_SNAPSHOT &&
		    memcmp(rr->ents[i].id, rid, CCRYPTO_ID_BYTES) == 0)
			e = &rr->ents[i];
	if (e == NULL) {
		log_error("pack '%s': a snapshot record part is not in its "
		    "index", pack);
		return (0);
	}
	if (rr->z == NULL && (rr->z = compressor_new(1)) == NULL)
		return (-1);
	if (pack_reader_get(rr->pr, e, rr->z, &rr->data))
		return (0);
	rr->bytes_read += e->stored_len;
	switch (snapshot_record_open(rr->repo, rr->data.data, rr->data.len,
	    img, len, &why)) {
	case -1:
		return (-1);
	case 0:
		log_error("pack '%s': a snapshot record part %s", pack, why);
		return (0);
	}
	return (1);
}

char *
engine_host_name(void)
{
	char host[HOST_NAME_MAX + 1] = "";

	gethostname(host, sizeof(host) - 1);
	return (strdup(host));
}
