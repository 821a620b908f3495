/*
 * Backup: walk the source, cut files into chunks, store the chunks that
 * are new to the repository (the packer), record entries in the catalog,
 * and finish with a signed snapshot record.
 *
 * Levels (DESIGN.md): a full reads every file and stores every entry; a
 * differential or an incremental compares each walked entry with the view
 * of its base (the dataset's last full, or its previous snapshot), reads
 * and stores only what changed, and adds a tombstone for each path of the
 * view that is gone.  The snapshot turns complete in the last transaction,
 * after its last pack is durable.
 */
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
#include "engine-int.h"

struct backup {
	struct repo *repo;
	struct catalog *cat;
	const struct backup_opts *opts;
	struct backup_result *res;
	struct packer packer;
	struct chunker *chunker;
	uint32_t max_chunk;
	int level;
	int64_t dataset_id;

	/*
	 * The view a changed entry is compared with: the base of a
	 * differential or incremental.  For a full, the dataset's previous
	 * snapshot, consulted only for files that keep changing while read.
	 */
	struct catalog_resolver *view;
	int64_t view_id;		/* 0: none */

	struct hmap links;		/* (dev, ino) -> content id */
	struct fs_walk *walk;

	/* The file being stored. */
	struct buf seg;			/* data not yet chunked */
	size_t seg_start;		/* first unchunked byte in seg */
	int64_t seg_offset;		/* file offset of seg.data[seg_start] */
	struct catalog_chunk_ref *refs;
	size_t nrefs, caprefs;
	struct crypto_hash_state content_hash;

	struct progress progress;
};

/* One chunk of the current file: stored if new, and its place noted. */
static int
add_chunk(struct backup *b, const uint8_t *data, size_t len, int64_t off)
{
	uint8_t id[CRYPTO_ID_BYTES], lenoff[16];
	struct catalog_chunk_ref *ref;
	int64_t rowid;

	crypto_chunk_id(repo_keys(b->repo), data, len, id);
	if (packer_chunk(&b->packer, id, data, len, &rowid))
		return (-1);
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

enum { STORED = 0, SKIPPED = 1, CHANGING = 2 };

/* Read the file once, chunking it.  1 done, FS_WALK_CHANGED, -1 skip
 * (warned), -2 fatal. */
static int
read_file(struct backup *b, struct fs_walk *w)
{
	const void *data;
	int64_t off, next = 0;
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
				return (-2);
			b->seg_offset = off;
		}
		if (buf_append(&b->seg, data, len))
			return (-2);
		next = off + (int64_t)len;
		b->res->bytes_read += (int64_t)len;
		progress_update(&b->progress, 0, len);
		if (b->seg.len - b->seg_start >= b->max_chunk &&
		    chunk_segment(b, 0))
			return (-2);
	}
	if (rc == FS_WALK_CHANGED)
		return (rc);
	if (rc < 0)
		return (-1);
	if (chunk_segment(b, 1))
		return (-2);
	return (1);
}

/*
 * Read and store one regular file.  STORED with *content_id set, SKIPPED
 * when it could not be read (warned), CHANGING when it kept changing while
 * read (a torn file is never recorded), -1 on a fatal error.
 */
static int
store_file(struct backup *b, struct fs_walk *w, struct entry *e,
    int64_t *content_id)
{
	uint8_t hash[32];
	int rc;

	rc = read_file(b, w);
	if (rc == FS_WALK_CHANGED) {
		/* Written to while we read it: once more, from its new
		 * state.  A checkpoint being saved usually settles. */
		if (fs_walk_reread(w, e))
			return (SKIPPED);
		rc = read_file(b, w);
		if (rc == FS_WALK_CHANGED)
			return (CHANGING);
	}
	if (rc == -2)
		return (-1);
	if (rc < 0)
		return (SKIPPED);
	crypto_hash_final(&b->content_hash, hash);
	if (catalog_content_put(b->cat, hash, (uint64_t)e->size, b->refs,
	    b->nrefs, content_id))
		return (-1);
	if (packer_maybe_flush(&b->packer))
		return (-1);
	return (STORED);
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
same_str(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a == b);
	return (strcmp(a, b) == 0);
}

/* DESIGN.md's "changed": any of these differs from the base's entry. */
static int
unchanged(const struct entry *n, const struct entry *o)
{
	return (n->kind == o->kind && n->size == o->size &&
	    n->mtime_ns == o->mtime_ns && n->ctime_ns == o->ctime_ns &&
	    n->ino == o->ino && n->mode == o->mode && n->uid == o->uid &&
	    n->gid == o->gid && same_str(n->target, o->target) &&
	    (n->kind != ENTRY_FILE || n->size == 0 || o->content_id != 0));
}

static int
open_view(struct backup *b)
{
	if (b->view == NULL && b->view_id != 0 &&
	    (b->view = catalog_resolver_new(b->cat, b->view_id)) == NULL)
		return (-1);
	return (0);
}

/*
 * A file kept changing while it was read.  Keep the previous version: for
 * a differential or incremental, by storing nothing (the base's entry
 * stays in the view); for a full, by copying the previous snapshot's entry.
 * 0 or -1.
 */
static int
keep_previous(struct backup *b, int64_t snapshot_id, const struct entry *e,
    int had_base)
{
	struct entry old;
	int found = had_base;

	if (b->level == LEVEL_FULL) {
		if (open_view(b))
			return (-1);
		found = 0;
		if (b->view && (found = catalog_resolver_get(b->view, e->path,
		    &old)) < 0)
			return (-1);
		if (found && old.kind == ENTRY_FILE) {
			if (catalog_entry_add(b->cat, snapshot_id, &old))
				return (-1);
			count_entry(b->res, old.kind);
		} else
			found = 0;
	}
	if (found)
		log_warn("'%s' changed during the backup; kept its previous "
		    "version", fs_walk_source_path(b->walk));
	else
		log_warn("'%s' changed during the backup; not stored (no "
		    "earlier version)", fs_walk_source_path(b->walk));
	b->res->changing++;
	return (0);
}

static int
walk_source(struct backup *b, int64_t snapshot_id)
{
	struct fs_walk *w;
	struct entry e, old;
	uint8_t key[16];
	int64_t cid;
	int rc, had_base = 0;

	if ((w = fs_walk_open(b->opts->source, &b->opts->walk)) == NULL)
		return (-1);
	b->walk = w;
	while ((rc = fs_walk_next(w, &e)) == 1) {
		if (b->level != LEVEL_FULL) {
			if ((had_base = catalog_resolver_get(b->view, e.path,
			    &old)) < 0) {
				rc = -1;
				break;
			}
			if (had_base && unchanged(&e, &old)) {
				if (e.kind == ENTRY_FILE && e.nlink > 1) {
					put_u64(key, e.dev);
					put_u64(key + 8, e.ino);
					if (hmap_put(&b->links, key,
					    old.content_id)) {
						rc = -1;
						break;
					}
				}
				b->res->unchanged++;
				progress_update(&b->progress, 1, 0);
				continue;
			}
		}
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
				if (rc == SKIPPED)
					continue;
				if (rc == CHANGING) {
					if (keep_previous(b, snapshot_id, &e,
					    had_base)) {
						rc = -1;
						break;
					}
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
	b->walk = NULL;
	fs_walk_close(w);
	return (rc < 0 ? -1 : 0);
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

/*
 * Decide the level and the base.  An incremental or differential without
 * a complete full to build on becomes a full, as Bacula does.
 */
static int
choose_level(struct backup *b, struct catalog_snapshot *s,
    struct catalog_snapshot *base)
{
	int level = b->opts->level, found;

	if (level == LEVEL_AUTO) {
		if ((found = catalog_snapshot_base(b->cat, b->dataset_id,
		    LEVEL_DIFFERENTIAL, base)) < 0)
			return (-1);
		catalog_snapshot_release(base);
		level = found ? LEVEL_INCREMENTAL : LEVEL_FULL;
	}
	if (level != LEVEL_FULL) {
		if ((found = catalog_snapshot_base(b->cat, b->dataset_id,
		    level, base)) < 0)
			return (-1);
		if (!found) {
			if (log_level >= 0 && isatty(STDERR_FILENO))
				fprintf(stderr, "no complete full of '%s' "
				    "yet: taking a full\n", b->opts->dataset);
			level = LEVEL_FULL;
		}
	}
	s->level = level;
	if (level == LEVEL_FULL) {
		/* Only for files that keep changing: the latest view. */
		if ((found = catalog_snapshot_base(b->cat, b->dataset_id,
		    LEVEL_INCREMENTAL, base)) < 0)
			return (-1);
		b->view_id = found ? base->id : 0;
		return (0);
	}
	s->parent_id = base->id;
	s->full_id = base->full_id;
	s->depth = base->depth + 1;
	memcpy(s->parent_sid, base->sid, sizeof(s->parent_sid));
	b->view_id = base->id;
	return (0);
}

int
engine_backup(struct repo *r, struct catalog *c,
    const struct backup_opts *o, struct backup_result *res)
{
	struct catalog_snapshot s, base;
	struct backup b;
	uint8_t sid[SNAPSHOT_ID_HEX / 2];
	unsigned long warn0 = log_warnings;
	double t0 = now_monotonic();
	int64_t deleted = 0;
	int status = STATUS_ERROR, in_txn = 0;

	memset(res, 0, sizeof(*res));
	memset(&b, 0, sizeof(b));
	memset(&s, 0, sizeof(s));
	memset(&base, 0, sizeof(base));
	b.repo = r;
	b.cat = c;
	b.opts = o;
	b.res = res;
	b.max_chunk = repo_chunker_params(r)->max;
	hmap_init(&b.links, 16);
	progress_init(&b.progress, "backup", 0);

	if (packer_init(&b.packer, r, c, o->compress_level) ||
	    (b.chunker = chunker_new(repo_chunker_params(r),
	    crypto_keys_chunker_key(repo_keys(r)))) == NULL)
		goto out;

	crypto_random(sid, sizeof(sid));
	hex_encode(s.sid, sid, sizeof(sid));
	if (catalog_begin(c))
		goto out;
	in_txn = 1;
	if (catalog_dataset_id(c, o->dataset, 1, &b.dataset_id) < 0)
		goto out;
	s.dataset_id = b.dataset_id;
	if (choose_level(&b, &s, &base))
		goto out;
	b.level = s.level;
	s.state = SNAP_RUNNING;
	s.started_ns = now_realtime_ns();
	s.host = engine_host_name();
	s.source = realpath(o->source, NULL);
	if (s.source == NULL) {
		log_errno("cannot open '%s'", o->source);
		goto out;
	}
	if (catalog_snapshot_create(c, &s))
		goto out;
	if (s.level == LEVEL_FULL)
		s.full_id = s.id;
	/* Commit the running row: after a crash it is found and failed. */
	if (catalog_commit(c) || catalog_begin(c))
		goto out;
	if (b.level != LEVEL_FULL && open_view(&b))
		goto out;

	if (walk_source(&b, s.id))
		goto out;
	progress_done(&b.progress);
	if (b.level != LEVEL_FULL &&
	    catalog_resolver_tombstones(b.view, s.id, &deleted))
		goto out;

	s.state = SNAP_COMPLETE;
	s.finished_ns = now_realtime_ns();
	s.files = res->files;
	s.dirs = res->dirs;
	s.others = res->others;
	s.deleted = res->deleted = deleted;
	s.bytes_read = res->bytes_read;
	s.bytes_new = b.packer.bytes_new;
	s.warnings = (int64_t)(log_warnings - warn0);
	if (catalog_snapshot_update(c, &s))
		goto out;
	if (packer_snapshot_record(&b.packer, &s))
		goto out;
	/* Count the record too: this is what the run added to packs. */
	s.bytes_stored = b.packer.bytes_stored;
	if (catalog_snapshot_update(c, &s))
		goto out;
	/* The last pack holds the record; its commit completes the run. */
	if (packer_flush(&b.packer))
		goto out;
	if (catalog_commit(c))
		goto out;
	in_txn = 0;

	memcpy(res->sid, s.sid, sizeof(res->sid));
	memcpy(res->parent_sid, s.parent_sid, sizeof(res->parent_sid));
	res->level = s.level;
	res->depth = s.depth;
	res->bytes_new = s.bytes_new;
	res->bytes_stored = s.bytes_stored;
	res->packs = b.packer.packs;
	res->warnings = s.warnings;
	status = res->warnings ? STATUS_WARN : STATUS_OK;
out:
	progress_done(&b.progress);
	catalog_resolver_free(b.view);
	if (in_txn)
		catalog_rollback(c);
	res->seconds = now_monotonic() - t0;
	packer_release(&b.packer);
	chunker_free(b.chunker);
	hmap_release(&b.links);
	buf_release(&b.seg);
	free(b.refs);
	catalog_snapshot_release(&s);
	catalog_snapshot_release(&base);
	return (status);
}
