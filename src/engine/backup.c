/*
 * Backup: walk the source, cut files into chunks, store the chunks that
 * are new to the repository in packs, record entries in the catalog, and
 * finish with a signed snapshot record.
 *
 * Durability (DESIGN.md): chunk rows get their pack location only in the
 * transaction that follows pack_writer_finish (the pack is then fsynced and
 * renamed into packs/), and the snapshot turns complete in the final
 * transaction, after its last pack.  A crash at any point leaves a catalog
 * whose complete snapshots reference only durable packs.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/engine.h"
#include "coffer/hex.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/status.h"

#define DEFAULT_ZSTD_LEVEL 3
#define SNAPSHOT_RECORD_MAGIC "CFSN"
#define SNAPSHOT_RECORD_VERSION 1

/* A chunk written to the open pack, waiting for the pack to be durable. */
struct pending {
	int64_t rowid;
	struct pack_entry ent;
};

struct backup {
	struct repo *repo;
	struct catalog *cat;
	const struct backup_opts *opts;
	struct backup_result *res;
	struct chunker *chunker;
	struct compressor *z;
	uint32_t max_chunk;

	struct pack_writer *pw;
	struct pending *pend;
	size_t npend, cappend;
	struct hmap pend_ids;		/* chunk id -> index in pend */

	struct hmap links;		/* (dev, ino) -> content id */

	struct buf seg;			/* file data not yet chunked */
	size_t seg_start;		/* first unchunked byte in seg */
	int64_t seg_offset;		/* file offset of seg.data[seg_start] */
	struct buf zbuf;		/* compressor output */
	struct catalog_chunk_ref *refs;
	size_t nrefs, caprefs;
	struct crypto_hash_state content_hash;

	struct progress progress;
};

static int
flush_pack(struct backup *b)
{
	struct catalog_chunk_loc loc;
	struct pack_info info;
	int64_t pack_rowid;
	size_t i;

	if (b->pw == NULL)
		return (0);
	if (pack_writer_count(b->pw) == 0) {
		pack_writer_free(b->pw);
		b->pw = NULL;
		return (0);
	}
	if (pack_writer_finish(b->pw, &info))
		return (-1);
	pack_writer_free(b->pw);
	b->pw = NULL;
	b->res->packs++;

	/* The pack is durable: now its chunks may be referenced. */
	if (catalog_pack_add(b->cat, info.name, info.size, info.hash,
	    &pack_rowid))
		return (-1);
	for (i = 0; i < b->npend; i++) {
		struct pack_entry *e = &b->pend[i].ent;

		memset(&loc, 0, sizeof(loc));
		loc.pack_offset = e->offset;
		loc.plain_len = e->plain_len;
		loc.stored_len = e->stored_len;
		loc.type = e->type;
		loc.flags = e->flags;
		if (catalog_chunk_locate(b->cat, b->pend[i].rowid, pack_rowid,
		    &loc))
			return (-1);
	}
	b->npend = 0;
	hmap_clear(&b->pend_ids);
	if (catalog_commit(b->cat) || catalog_begin(b->cat))
		return (-1);
	return (0);
}

/* Compress (when it pays) and append one record to the open pack. */
static int
write_record(struct backup *b, uint8_t type, const uint8_t *id,
    const void *data, size_t len, struct pack_entry *ent)
{
	const void *payload = data;
	size_t stored = len, zl;
	uint8_t flags = 0;

	if (b->pw == NULL && (b->pw = pack_writer_new(b->repo)) == NULL)
		return (-1);
	if (buf_reserve(&b->zbuf, compressor_bound(len)))
		return (-1);
	zl = compressor_compress(b->z, data, len, b->zbuf.data,
	    b->zbuf.cap);
	if (zl == (size_t)-1)
		return (-1);
	if (zl > 0) {
		payload = b->zbuf.data;
		stored = zl;
		flags |= PACK_FLAG_ZSTD;
	}
	if (pack_writer_add(b->pw, type, flags, id, payload, stored,
	    (uint32_t)len, ent))
		return (-1);
	b->res->bytes_stored += (int64_t)(stored + PACK_RECORD_HEADER_BYTES +
	    CRYPTO_TAG_BYTES);
	return (0);
}

/* One chunk of the current file: dedup, store if new, remember its ref. */
static int
add_chunk(struct backup *b, const uint8_t *data, size_t len, int64_t off)
{
	uint8_t id[CRYPTO_ID_BYTES], lenoff[16];
	struct catalog_chunk_ref *ref;
	int64_t rowid = 0, idx;
	int found;

	crypto_chunk_id(repo_keys(b->repo), data, len, id);
	if (hmap_get(&b->pend_ids, id, &idx)) {
		rowid = b->pend[idx].rowid;
	} else {
		if ((found = catalog_chunk_find(b->cat, id, &rowid)) < 0)
			return (-1);
		if (!found) {
			struct pending *p;

			if (rowid == 0 &&
			    catalog_chunk_add(b->cat, id, &rowid))
				return (-1);
			if (b->npend == b->cappend) {
				size_t cap = b->cappend ? b->cappend * 2 : 1024;

				p = reallocarray(b->pend, cap, sizeof(*p));
				if (p == NULL) {
					log_error("out of memory");
					return (-1);
				}
				b->pend = p;
				b->cappend = cap;
			}
			p = &b->pend[b->npend];
			p->rowid = rowid;
			if (write_record(b, PACK_REC_DATA, id, data, len,
			    &p->ent))
				return (-1);
			if (hmap_put(&b->pend_ids, id, (int64_t)b->npend))
				return (-1);
			b->npend++;
			b->res->bytes_new += (int64_t)len;
		}
	}
	if (b->nrefs == b->caprefs) {
		size_t cap = b->caprefs ? b->caprefs * 2 : 64;

		if ((ref = reallocarray(b->refs, cap, sizeof(*ref))) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		b->refs = ref;
		b->caprefs = cap;
	}
	ref = &b->refs[b->nrefs++];
	ref->chunk_rowid = rowid;
	ref->file_offset = (uint64_t)off;
	ref->len = (uint32_t)len;

	/* The content's identity: its chunks and where they sit. */
	put_u64(lenoff, (uint64_t)off);
	put_u64(lenoff + 8, (uint64_t)len);
	crypto_hash_update(&b->content_hash, lenoff, sizeof(lenoff));
	crypto_hash_update(&b->content_hash, id, sizeof(id));
	return (0);
}

/* Cut and store what is buffered; with eof, everything. */
static int
chunk_segment(struct backup *b, int eof)
{
	size_t avail, n;

	for (;;) {
		avail = b->seg.len - b->seg_start;
		if (avail == 0)
			break;
		n = chunker_next(b->chunker, b->seg.data + b->seg_start, avail,
		    eof);
		if (n == 0)
			break;
		if (add_chunk(b, b->seg.data + b->seg_start, n,
		    b->seg_offset))
			return (-1);
		b->seg_start += n;
		b->seg_offset += (int64_t)n;
	}
	/* Keep the unchunked tail at the front of the buffer. */
	if (b->seg_start > 0) {
		avail = b->seg.len - b->seg_start;
		memmove(b->seg.data, b->seg.data + b->seg_start, avail);
		b->seg.len = avail;
		b->seg_start = 0;
	}
	return (0);
}

/*
 * Read and store one regular file.  0 with *content_id set, 1 when the
 * file could not be read (warned: skip it), -1 on a fatal error.
 */
static int
store_file(struct backup *b, struct fs_walk *w, struct entry *e,
    int64_t *content_id)
{
	uint8_t hash[32];
	const void *data;
	int64_t off, next = 0, size = 0;
	size_t len;
	int rc;

	buf_reset(&b->seg);
	b->seg_start = 0;
	b->seg_offset = 0;
	b->nrefs = 0;
	crypto_hash_init(repo_keys(b->repo), &b->content_hash);
	while ((rc = fs_walk_read(w, &data, &len, &off)) == 1) {
		if (off != next) {
			/* A hole: what came before is a segment of its own,
			 * so chunks never span holes. */
			if (chunk_segment(b, 1))
				return (-1);
			b->seg_offset = off;
		}
		if (buf_append(&b->seg, data, len))
			return (-1);
		next = off + (int64_t)len;
		b->res->bytes_read += (int64_t)len;
		progress_update(&b->progress, 0, len);
		if (b->seg.len - b->seg_start >= b->max_chunk &&
		    chunk_segment(b, 0))
			return (-1);
	}
	if (rc < 0)
		return (1);
	if (chunk_segment(b, 1))
		return (-1);
	/* The entry describes what was stored: a file that grew while it
	 * was read keeps all the bytes that were read. */
	if (next > e->size)
		e->size = next;
	size = e->size;
	crypto_hash_final(&b->content_hash, hash);
	if (catalog_content_put(b->cat, hash, (uint64_t)size, b->refs,
	    b->nrefs, content_id))
		return (-1);
	if (b->pw && pack_writer_size(b->pw) >= PACK_TARGET_SIZE &&
	    flush_pack(b))
		return (-1);
	return (0);
}

/* Sign the snapshot's own catalog rows and store them as a record. */
static int
write_snapshot_record(struct backup *b, struct catalog_snapshot *s)
{
	static const char ctx[] = "coffer-snapshot";
	struct buf img = BUF_INIT, rec = BUF_INIT, msg = BUF_INIT;
	uint8_t sig[CRYPTO_SIG_BYTES], id[CRYPTO_ID_BYTES];
	int rc = -1;

	if (catalog_snapshot_export(b->cat, s->id, &img))
		goto out;
	if (buf_append(&msg, ctx, sizeof(ctx)) ||
	    buf_append(&msg, repo_id(b->repo), CRYPTO_REPO_ID_BYTES) ||
	    buf_append(&msg, img.data, img.len))
		goto out;
	crypto_sign_msg(repo_keys(b->repo), msg.data, msg.len, sig);
	if (buf_append(&rec, SNAPSHOT_RECORD_MAGIC, 4) ||
	    buf_put_u8(&rec, SNAPSHOT_RECORD_VERSION) ||
	    buf_append(&rec, sig, sizeof(sig)) ||
	    buf_append(&rec, img.data, img.len))
		goto out;
	if (rec.len > PACK_RECORD_MAX) {
		log_error("snapshot record is too large (%zu bytes)", rec.len);
		goto out;
	}
	crypto_chunk_id(repo_keys(b->repo), rec.data, rec.len, id);
	if (write_record(b, PACK_REC_SNAPSHOT, id, rec.data, rec.len, NULL))
		goto out;
	memcpy(s->record_pack, pack_writer_name(b->pw), PACK_NAME_LEN + 1);
	rc = 0;
out:
	buf_release(&img);
	buf_release(&rec);
	buf_release(&msg);
	return (rc);
}

int
engine_prepare_write(struct repo *r, struct catalog *c, int wait)
{
	int n = 0;

	if (repo_lock(r, wait) || catalog_lock(c, wait))
		return (-1);
	if (repo_clean_tmp(r))
		return (-1);
	if (catalog_snapshot_fail_running(c, &n))
		return (-1);
	if (n > 0)
		log_info("marked %d interrupted snapshot%s failed", n,
		    n == 1 ? "" : "s");
	return (0);
}

static void
count_entry(struct backup_result *res, int kind)
{
	if (kind == ENTRY_FILE)
		res->files++;
	else if (kind == ENTRY_DIR)
		res->dirs++;
	else
		res->others++;
}

static int
walk_source(struct backup *b, int64_t snapshot_id)
{
	struct fs_walk *w;
	struct entry e;
	uint8_t key[16];
	int64_t cid;
	int rc;

	if ((w = fs_walk_open(b->opts->source, &b->opts->walk)) == NULL)
		return (-1);
	while ((rc = fs_walk_next(w, &e)) == 1) {
		if (e.kind == ENTRY_FILE && e.size > 0) {
			put_u64(key, e.dev);
			put_u64(key + 8, e.ino);
			/* A hardlink's content is read once per run. */
			if (e.nlink > 1 && hmap_get(&b->links, key, &cid)) {
				e.content_id = cid;
			} else {
				rc = store_file(b, w, &e, &cid);
				if (rc < 0)
					break;
				if (rc > 0) {
					b->res->warnings++;
					continue;
				}
				e.content_id = cid;
				if (e.nlink > 1 &&
				    hmap_put(&b->links, key, cid)) {
					rc = -1;
					break;
				}
			}
		}
		if (catalog_entry_add(b->cat, snapshot_id, &e)) {
			rc = -1;
			break;
		}
		count_entry(b->res, e.kind);
		progress_update(&b->progress, 1, 0);
	}
	fs_walk_close(w);
	return (rc < 0 ? -1 : 0);
}

static char *
host_name(void)
{
	char host[HOST_NAME_MAX + 1] = "";

	gethostname(host, sizeof(host) - 1);
	return (strdup(host));
}

int
engine_backup(struct repo *r, struct catalog *c,
    const struct backup_opts *o, struct backup_result *res)
{
	struct catalog_snapshot s;
	struct backup b;
	uint8_t sid[SNAPSHOT_ID_HEX / 2];
	unsigned long warn0 = log_warnings;
	double t0 = now_monotonic();
	int status = STATUS_ERROR, in_txn = 0;

	memset(res, 0, sizeof(*res));
	memset(&b, 0, sizeof(b));
	memset(&s, 0, sizeof(s));
	b.repo = r;
	b.cat = c;
	b.opts = o;
	b.res = res;
	b.max_chunk = repo_chunker_params(r)->max;
	hmap_init(&b.pend_ids, CRYPTO_ID_BYTES);
	hmap_init(&b.links, 16);
	progress_init(&b.progress, "backup", 0);

	if (o->level != LEVEL_FULL) {
		log_error("only full snapshots are supported so far");
		return (STATUS_USAGE);
	}
	if ((b.chunker = chunker_new(repo_chunker_params(r),
	    crypto_keys_chunker_key(repo_keys(r)))) == NULL ||
	    (b.z = compressor_new(o->compress_level ? o->compress_level :
	    DEFAULT_ZSTD_LEVEL)) == NULL)
		goto out;

	crypto_random(sid, sizeof(sid));
	hex_encode(s.sid, sid, sizeof(sid));
	if (catalog_begin(c))
		goto out;
	in_txn = 1;
	if (catalog_dataset_id(c, o->dataset, 1, &s.dataset_id) < 0)
		goto out;
	s.level = o->level;
	s.state = SNAP_RUNNING;
	s.started_ns = now_realtime_ns();
	s.host = host_name();
	s.source = realpath(o->source, NULL);
	if (s.source == NULL) {
		log_errno("cannot open '%s'", o->source);
		goto out;
	}
	if (catalog_snapshot_create(c, &s))
		goto out;
	s.full_id = s.id;
	/* Commit the running row: after a crash it is found and failed. */
	if (catalog_commit(c) || catalog_begin(c))
		goto out;

	if (walk_source(&b, s.id))
		goto out;
	progress_done(&b.progress);

	s.state = SNAP_COMPLETE;
	s.finished_ns = now_realtime_ns();
	s.files = res->files;
	s.dirs = res->dirs;
	s.others = res->others;
	s.bytes_read = res->bytes_read;
	s.bytes_new = res->bytes_new;
	s.warnings = (int64_t)(log_warnings - warn0);
	if (catalog_snapshot_update(c, &s))
		goto out;
	if (write_snapshot_record(&b, &s))
		goto out;
	/* Count the record too: this is what the run added to packs. */
	s.bytes_stored = res->bytes_stored;
	if (catalog_snapshot_update(c, &s))
		goto out;
	/* The last pack holds the record; its commit completes the run. */
	if (flush_pack(&b))
		goto out;
	if (catalog_commit(c))
		goto out;
	in_txn = 0;

	memcpy(res->sid, s.sid, sizeof(res->sid));
	res->level = s.level;
	res->warnings = s.warnings;
	status = res->warnings ? STATUS_WARN : STATUS_OK;
out:
	progress_done(&b.progress);
	if (in_txn)
		catalog_rollback(c);
	res->seconds = now_monotonic() - t0;
	pack_writer_free(b.pw);
	chunker_free(b.chunker);
	compressor_free(b.z);
	hmap_release(&b.pend_ids);
	hmap_release(&b.links);
	buf_release(&b.seg);
	buf_release(&b.zbuf);
	free(b.pend);
	free(b.refs);
	catalog_snapshot_release(&s);
	return (status);
}
