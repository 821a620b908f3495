/*
 * Restore: materialize a snapshot's resolved chain under a target through
 * archive_write_disk (fs_restore), verifying every chunk before its bytes
 * are written.  A file whose data cannot be read is named, removed and
 * counted; the others are restored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/status.h"

#define READER_CACHE 16

struct cached_reader {
	char name[PACK_NAME_LEN + 1];
	struct pack_reader *pr;		/* NULL: the pack could not be opened */
	uint64_t used;
};

struct restore {
	struct repo *repo;
	struct catalog *cat;
	struct fs_restore *fr;
	struct restore_result *res;
	const struct restore_opts *opts;
	struct compressor *z;
	struct buf chunk;
	struct cached_reader cache[READER_CACHE];
	uint64_t tick;
	/* Hardlink groups: (dev, ino, content) -> index into link_paths. */
	struct hmap links;
	char **link_paths;
	size_t nlinks, caplinks;
	int64_t missing;		/* requested paths not in the snapshot */
	struct progress progress;
};

/*
 * The reader of a pack, opened once and kept in a small LRU.  A pack that
 * failed to open is remembered as such, so that its error is reported once.
 * Returns NULL for a bad pack.
 */
static struct pack_reader *
get_reader(struct restore *rs, const char *name)
{
	struct cached_reader *victim = &rs->cache[0];
	size_t i;

	for (i = 0; i < READER_CACHE; i++) {
		struct cached_reader *c = &rs->cache[i];

		if (c->used && strcmp(c->name, name) == 0) {
			c->used = ++rs->tick;
			return (c->pr);
		}
		if (c->used < victim->used)
			victim = c;
	}
	pack_reader_close(victim->pr);
	memcpy(victim->name, name, PACK_NAME_LEN + 1);
	victim->pr = pack_reader_open(rs->repo, name);
	victim->used = ++rs->tick;
	return (victim->pr);
}

/* Write one file's content.  0, or -1 when its data is damaged/missing. */
static int
restore_content(struct restore *rs, const struct entry *e)
{
	struct catalog_chunk_loc *locs = NULL;
	struct pack_reader *pr;
	struct pack_entry pe;
	size_t n = 0, i;
	int rc = -1;

	if (catalog_content_chunks(rs->cat, e->content_id, &locs, &n))
		return (-2);
	for (i = 0; i < n; i++) {
		if (locs[i].pack[0] == '\0') {
			log_error("chunk of '%s' at offset %llu is in no pack",
			    e->path, (unsigned long long)locs[i].file_offset);
			goto out;
		}
		if ((pr = get_reader(rs, locs[i].pack)) == NULL)
			goto out;
		memcpy(pe.id, locs[i].cid, CRYPTO_ID_BYTES);
		pe.type = locs[i].type;
		pe.flags = locs[i].flags;
		pe.offset = locs[i].pack_offset;
		pe.plain_len = locs[i].plain_len;
		pe.stored_len = locs[i].stored_len;
		if (pe.type != PACK_REC_DATA) {
			log_error("chunk of '%s' is not a data record",
			    e->path);
			goto out;
		}
		if (pack_reader_get(pr, &pe, rs->z, &rs->chunk))
			goto out;
		if (fs_restore_data(rs->fr, rs->chunk.data, rs->chunk.len,
		    (int64_t)locs[i].file_offset))
			goto out;
		rs->res->bytes += (int64_t)rs->chunk.len;
		progress_update(&rs->progress, 0, rs->chunk.len);
	}
	rc = 0;
out:
	free(locs);
	return (rc);
}

/* A second name of an inode restored earlier in this run? */
static const char *
link_target(struct restore *rs, const struct entry *e)
{
	uint8_t key[24];
	int64_t idx;

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (NULL);
	put_u64(key, e->dev);
	put_u64(key + 8, e->ino);
	put_u64(key + 16, (uint64_t)e->content_id);
	if (hmap_get(&rs->links, key, &idx))
		return (rs->link_paths[idx]);
	return (NULL);
}

static int
remember_link(struct restore *rs, const struct entry *e)
{
	uint8_t key[24];
	char **p;

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (0);
	if (rs->nlinks == rs->caplinks) {
		size_t cap = rs->caplinks ? rs->caplinks * 2 : 64;

		if ((p = reallocarray(rs->link_paths, cap, sizeof(*p))) ==
		    NULL) {
			log_error("out of memory");
			return (-1);
		}
		rs->link_paths = p;
		rs->caplinks = cap;
	}
	if ((rs->link_paths[rs->nlinks] = strdup(e->path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	put_u64(key, e->dev);
	put_u64(key + 8, e->ino);
	put_u64(key + 16, (uint64_t)e->content_id);
	if (hmap_put(&rs->links, key, (int64_t)rs->nlinks))
		return (-1);
	rs->nlinks++;
	return (0);
}

/* 0 restored, 1 failed (counted, go on), -1 fatal. */
static int
restore_entry(struct restore *rs, const struct entry *e)
{
	const char *first;
	int rc;

	if ((first = link_target(rs, e)) != NULL) {
		if (fs_restore_hardlink(rs->fr, e, first))
			return (1);
		rs->res->files++;
		return (0);
	}
	if (fs_restore_begin(rs->fr, e))
		return (1);
	if (e->kind == ENTRY_FILE && e->content_id != 0) {
		rc = restore_content(rs, e);
		if (rc == -2)
			return (-1);
		if (rc < 0) {
			fs_restore_discard(rs->fr);
			log_error("cannot restore '%s': its data is damaged or "
			    "missing", e->path);
			return (1);
		}
	}
	if (fs_restore_finish(rs->fr))
		return (1);
	if (remember_link(rs, e))
		return (-1);
	rs->res->files++;
	progress_update(&rs->progress, 1, 0);
	return (0);
}

static int
restore_under(struct restore *rs, int64_t snapshot_id, const char *under)
{
	struct catalog_iter *it;
	struct entry e;
	int rc, seen = 0;

	if ((it = catalog_entries(rs->cat, snapshot_id, under)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		seen = 1;
		if (rs->opts->filter &&
		    !rs->opts->filter(rs->opts->filter_arg, &e))
			continue;
		rc = restore_entry(rs, &e);
		if (rc < 0)
			break;
		if (rc > 0)
			rs->res->failed++;
	}
	catalog_iter_free(it);
	if (rc < 0)
		return (-1);
	if (under && !seen) {
		log_error("'%s' is not in the snapshot", under);
		rs->missing++;
	}
	return (0);
}

int
engine_restore(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct restore_opts *o,
    struct restore_result *res)
{
	struct restore rs;
	double t0 = now_monotonic();
	int status = STATUS_ERROR, empty;
	size_t i;

	memset(res, 0, sizeof(*res));
	memset(&rs, 0, sizeof(rs));
	rs.repo = r;
	rs.cat = c;
	rs.res = res;
	rs.opts = o;
	hmap_init(&rs.links, 24);
	progress_init(&rs.progress, "restore", (uint64_t)s->bytes_read);

	if (s->state != SNAP_COMPLETE) {
		log_error("snapshot %s is %s, not complete", s->sid,
		    catalog_state_name(s->state));
		return (STATUS_USAGE);
	}
	if (!o->force) {
		if ((empty = fsutil_dir_is_empty(o->target, 1)) < 0)
			return (STATUS_ERROR);
		if (!empty) {
			log_error("target '%s' is not empty (use --force)",
			    o->target);
			return (STATUS_USAGE);
		}
	}
	if ((rs.z = compressor_new(1)) == NULL)
		goto out;
	if ((rs.fr = fs_restore_open(o->target,
	    (geteuid() == 0 ? FS_RESTORE_OWNER : 0) |
	    (o->force ? FS_RESTORE_FORCE : 0))) == NULL)
		goto out;
	if (o->npaths == 0) {
		if (restore_under(&rs, s->id, NULL))
			goto out;
	} else {
		for (i = 0; i < o->npaths; i++)
			if (restore_under(&rs, s->id, o->paths[i]))
				goto out;
	}
	if (fs_restore_close(rs.fr)) {
		rs.fr = NULL;
		goto out;
	}
	rs.fr = NULL;
	status = res->failed ? STATUS_INTEGRITY :
	    rs.missing ? STATUS_USAGE : STATUS_OK;
out:
	progress_done(&rs.progress);
	if (rs.fr)
		fs_restore_close(rs.fr);
	for (i = 0; i < READER_CACHE; i++)
		pack_reader_close(rs.cache[i].pr);
	for (i = 0; i < rs.nlinks; i++)
		free(rs.link_paths[i]);
	free(rs.link_paths);
	hmap_release(&rs.links);
	compressor_free(rs.z);
	buf_release(&rs.chunk);
	res->seconds = now_monotonic() - t0;
	return (status);
}
