/*
 * Restore: materialize a snapshot's resolved chain under a target through
 * archive_write_disk (fs_restore), verifying every chunk before its bytes
 * are written.  A file whose data cannot be read is named, removed and
 * counted; the others are restored.
 *
 * Pipeline: entries are taken in path order into a window, with their
 * chunks' locations (up to WINDOW_BYTES of content; a bigger file goes on
 * in the next window).  Directories are all created first, in a pass of
 * their own (make_dirs); symlinks and devices are created as they are
 * taken, in order, by the first writer.  A full window is
 * handed to the pool in one loop together with the previous window: the
 * window's chunks are read, authenticated and decompressed while the
 * previous window's chunks are re-hashed (eight at a time, side by side
 * where the processor can: ccrypto_chunk_ids) and then its files written,
 * each file by one of a few writers (an archive_write_disk each;
 * libarchive's writer is not shared between threads).  Meanwhile this
 * thread takes entries into a third window (the catalog is read on this
 * thread only), and a fourth rests (NWINDOWS).  Hard links, counts and
 * progress follow on this thread, in order, once a window is written.  A
 * directory is always taken before what it holds, so it exists before its
 * files are written; its own times and mode are applied when the first
 * writer closes, after all the others.  So are the target's, from the
 * snapshot's root entry (".", FS_ROOT_PATH), when the target is the
 * restore's own: made by it or empty, or --root-metadata.  A window's
 * chunks are fetched, verified or read back by restore-read.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/tuning.h"
#include "engine-int.h"
#include "restore-int.h"

/*
 * An idle file writer, or a new one.  NULL (reported).  Each running job
 * holds one, and one more may wait between loops for a file that goes on
 * in the next window: capwriters is the pool's threads plus one.
 */
static struct fs_restore *
writer_get(struct restore *rs)
{
	struct fs_restore *w = NULL;

	pthread_mutex_lock(&rs->mu);
	if (rs->nidle > 0)
		w = rs->idle[--rs->nidle];
	else if (rs->nwriters == rs->capwriters)
		log_error("internal error: every restore writer is in use");
	else if ((w = fs_restore_dup(rs->fr)) != NULL)
		rs->writers[rs->nwriters++] = w;
	pthread_mutex_unlock(&rs->mu);
	return (w);
}

static void
writer_put(struct restore *rs, struct fs_restore *w)
{
	pthread_mutex_lock(&rs->mu);
	rs->idle[rs->nidle++] = w;
	pthread_mutex_unlock(&rs->mu);
}

/* Write a regular file's part held by the window (a pool job). */
static void
write_file(struct restore *rs, struct window *win, struct wentry *we)
{
	struct fs_restore *w;
	size_t i, k;

	/* Not a byte before its window's chunks are verified: their
	 * groups were handed out first, and are done or being done. */
	pthread_mutex_lock(&rs->mu);
	while (win->vdone < win->ngroups)
		pthread_cond_wait(&rs->verified, &rs->mu);
	pthread_mutex_unlock(&rs->mu);
	we->rc = WR_OK;
	if (we->bad) {
		/* Said why when it was taken; nothing at its path is
		 * touched. */
		we->rc = WR_DAMAGED;
		return;
	}
	if (we->cont) {
		if ((w = rs->carry_in) == NULL) {
			we->rc = WR_FAILED_BEFORE;
			return;
		}
	} else {
		if ((w = writer_get(rs)) == NULL) {
			we->rc = WR_FAILED;
			return;
		}
		if (fs_restore_begin(w, &we->e)) {
			writer_put(rs, w);
			we->rc = WR_FAILED;
			return;
		}
	}
	for (i = we->first; i < we->first + we->njobs; i++)
		if (win->jobs[i].rc != 0) {
			fs_restore_discard(w);
			writer_put(rs, w);
			log_error("cannot restore '%s': its data is damaged or "
			    "missing", we->e.path);
			we->rc = WR_DAMAGED;
			return;
		}
	/* Lent in runs of contiguous chunks (a hole ends one). */
	for (i = we->first; i < we->first + we->njobs; i = k) {
		const struct rjob *j = &win->jobs[i];
		size_t len = j->loc.plain_len;

		for (k = i + 1; k < we->first + we->njobs &&
		    win->jobs[k].loc.file_offset == j->loc.file_offset + len &&
		    win->jobs[k].off == j->off + len; k++)
			len += win->jobs[k].loc.plain_len;
		if (fs_restore_data_lent(w, win->data.data + j->off, len,
		    (int64_t)j->loc.file_offset)) {
			/* It has said why (a full disk). */
			fs_restore_discard(w);
			writer_put(rs, w);
			we->rc = WR_FAILED;
			return;
		}
		we->bytes += (int64_t)len;
	}
	if (!we->last) {
		rs->carry_out = w;	/* one such file per window */
		win->lent_to = w;
		win->lent_ticket = fs_restore_ticket(w);
		return;
	}
	/* Tests: its data is written, it is not finished. */
	tuning_raise_at("restore-write");
	if (fs_restore_finish(w))
		we->rc = WR_FAILED;
	else {
		we->has_id = fs_restore_file_id(w, &we->id) == 0;
		/* At most one per REUSE_MIN of the window, and the file
		 * going on from the last one, are held until it finishes. */
		if (rs->nsrcs > 0 && (we->cont ||
		    rst_has_reusable(&win->jobs[we->first], we->njobs)))
			we->keep_fd = fs_restore_keep(w);
	}
	writer_put(rs, w);
}

/*
 * Index i of a step: the out window's chunks to verify, in groups; the
 * first FETCH_HEAD of the fetch window's chunks (the largest); the out
 * window's files, which wait for the groups; the rest of the fetch
 * window's chunks, those read back last.  While one thread hashes a group
 * (a checkpoint's window is one group of its five to eight chunks), the
 * other fetches, rather than wait to write; the files are written in the
 * middle of the loop, so that their writes to the disk are well on by
 * the next; and the loop ends on the smallest chunks, which the threads
 * finish about together.
 */
static void
step_job(void *arg, size_t i, int worker)
{
	struct restore *rs = arg;
	struct window *out = rs->out, *fetch = rs->fetch;
	size_t head = rs->head;

	if (i < out->ngroups) {
		rst_verify_group(rs, out, i, &rs->workers[worker]);
		return;
	}
	i -= out->ngroups;
	if (i >= head && i < head + out->nfiles) {
		write_file(rs, out, &out->ents[out->files[i - head]]);
		return;
	}
	if (i >= head)
		i -= out->nfiles;
	rst_fetch_chunk(rs, fetch, &fetch->jobs[fetch->order[i]],
	    &rs->workers[worker]);
}

/* A second name of an inode restored earlier in this run?  Its first
 * name, and in *id the inode restored there. */
static const char *
link_target(struct restore *rs, const struct entry *e,
    const struct fs_file_id **id)
{
	uint8_t key[24];
	int64_t idx;

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (NULL);
	rst_link_key(key, e);
	if (hmap_get(&rs->links, key, &idx)) {
		*id = rs->link_ids[idx].ino != 0 ? &rs->link_ids[idx] : NULL;
		return (rs->link_paths[idx]);
	}
	return (NULL);
}

static int
remember_link(struct restore *rs, const struct wentry *we)
{
	const struct entry *e = &we->e;
	uint8_t key[24];

	if (e->kind != ENTRY_FILE || e->nlink < 2)
		return (0);
	if (array_grow(&rs->link_paths, &rs->caplinks, rs->nlinks,
	    sizeof(*rs->link_paths), 64) ||
	    array_grow(&rs->link_ids, &rs->capids, rs->nlinks,
	    sizeof(*rs->link_ids), 64))
		return (-1);
	/* Inode 0: not known (fs_restore_hardlink refuses to link it). */
	if (we->has_id)
		rs->link_ids[rs->nlinks] = we->id;
	else
		memset(&rs->link_ids[rs->nlinks], 0,
		    sizeof(rs->link_ids[rs->nlinks]));
	if ((rs->link_paths[rs->nlinks] = strdup(e->path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	rst_link_key(key, e);
	if (hmap_put(&rs->links, key, (int64_t)rs->nlinks))
		return (-1);
	rs->nlinks++;
	return (0);
}

/* A window's descriptors: its jobs' and its finished files'. */
static void
window_close_fds(struct window *win)
{
	size_t i;

	for (i = 0; i < win->njobs; i++) {
		if (win->jobs[i].src_fd != -1)
			close(win->jobs[i].src_fd);
		win->jobs[i].src_fd = -1;
	}
	for (i = 0; i < win->nents; i++) {
		if (win->ents[i].keep_fd != -1)
			close(win->ents[i].keep_fd);
		win->ents[i].keep_fd = -1;
	}
}

/* The chunks of a damaged file that failed: to be marked damaged. */
static void
note_damaged(struct restore *rs, const struct rjob *jobs, size_t n)
{
	size_t i;

	pthread_mutex_lock(&rs->bad_mu);
	for (i = 0; i < n; i++) {
		if (jobs[i].rc == 0 || jobs[i].loc.rowid == 0)
			continue;
		if (array_grow(&rs->bad_rows, &rs->capbad, rs->nbad,
		    sizeof(*rs->bad_rows), 16))
			break;
		rs->bad_rows[rs->nbad++] = jobs[i].loc.rowid;
	}
	pthread_mutex_unlock(&rs->bad_mu);
}


static int
cmp_row(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return ((x > y) - (x < y));
}

/*
 * The damaged chunks another pack holds whole (place_take_copies): their
 * place is that copy from now on, and the files they broke restore at
 * the next try; the others are marked damaged, so that the next backup
 * that meets them stores them again.
 */
static void
damaged_chunks(struct restore *rs, struct catalog *c)
{
	struct place_check pc;
	struct buf chunk = BUF_INIT;
	size_t i, k = 0, ntaken = 0;

	qsort(rs->bad_rows, rs->nbad, sizeof(*rs->bad_rows), cmp_row);
	for (i = 0; i < rs->nbad; i++)
		if (i == 0 || rs->bad_rows[i] != rs->bad_rows[k - 1])
			rs->bad_rows[k++] = rs->bad_rows[i];
	rs->nbad = k;
	memset(&pc, 0, sizeof(pc));
	pc.repo = rs->repo;
	pc.out = &chunk;
	/* Not when asked to stop: that is for the next restore.  What it
	 * took before an error is taken all the same. */
	if (!signals_caught())
		(void)place_take_copies(&pc, c, rs->bad_rows, &rs->nbad, NULL,
		    &ntaken);
	place_check_release(&pc);
	buf_release(&chunk);
	if (ntaken > 0)
		log_warn("%zu damaged chunk%s found whole in another pack: "
		    "restoring again restores what %s broke", ntaken,
		    ntaken == 1 ? "" : "s", ntaken == 1 ? "it" : "they");
	if (rs->nbad > 0)
		(void)catalog_chunks_mark_damaged(c, rs->bad_rows, rs->nbad);
}

/*
 * The out window is written: link second names, count, remember what
 * may be read back, and empty it.  0, or -1 on a fatal error.
 */
static int
finish_window(struct restore *rs, struct window *win)
{
	const struct fs_file_id *id = NULL;
	const char *first;
	size_t i;

	for (i = 0; i < win->nents; i++) {
		struct wentry *we = &win->ents[i];

		if (we->link) {
			/* Its first name was restored, or failed (then so
			 * does it; that failure was counted and said why). */
			if ((first = link_target(rs, &we->e, &id)) == NULL) {
				log_error("cannot restore '%s': the file it is "
				    "a hard link to could not be restored",
				    we->e.path);
				rs->res->failed++;
			} else if (fs_restore_hardlink(rs->fr, &we->e, first,
			    id))
				rs->res->failed++;
			else
				rs->res->files++;
		} else if (we->e.kind == ENTRY_FILE) {
			rs->res->bytes += we->bytes;
			progress_update(&rs->progress, 0, (uint64_t)we->bytes);
			if (!we->cont || we->rc != WR_OK)
				rs->npend = 0;	/* another file, or failed */
			if (we->rc == WR_OK && !we->last &&
			    rst_reuse_pend(rs, &win->jobs[we->first], we->njobs))
				return (-1);
			if (we->keep_fd != -1) {
				int fd = we->keep_fd;

				we->keep_fd = -1;
				if (rst_reuse_add(rs, fd, &win->jobs[we->first],
				    we->njobs))
					return (-1);
			}
			if (we->rc == WR_FAILED || we->rc == WR_DAMAGED) {
				rs->res->failed++;
				if (we->rc == WR_DAMAGED) {
					rs->res->damaged++;
					note_damaged(rs, &win->jobs[we->first],
					    we->njobs);
				}
			} else if (we->rc == WR_OK && we->last) {
				if (remember_link(rs, we))
					return (-1);
				rs->res->files++;
				progress_update(&rs->progress, 1, 0);
				tuning_raise_at("restore-file");
			}
		}
		free(we->mem);
		we->mem = NULL;	/* a failure above leaves nents as it is */
	}
	window_close_fds(win);
	win->nents = win->nfiles = win->njobs = 0;
	buf_reset(&win->data);
	return (0);
}

/* Nothing is written from the window's memory any more. */
static void
window_settle(struct window *win)
{
	if (win->lent_to != NULL)
		fs_restore_wait(win->lent_to, win->lent_ticket);
	win->lent_to = NULL;
}

/* Room for n more bytes of chunks in the window, which is aligned
 * (malloc's is not): 0, or -1 (reported). */
static int
window_reserve(struct window *win, size_t n)
{
	struct buf *b = &win->data;
	size_t cap;
	uint8_t *p;

	if (n <= b->cap - b->len)
		return (0);
	window_settle(win);	/* its memory moves */
	cap = b->cap ? b->cap : WINDOW_BYTES + (1u << 20);
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2) {
			log_error("out of memory");
			return (-1);
		}
		cap *= 2;
	}
	if ((p = aligned_alloc(4096, cap)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if (b->len > 0)
		memcpy(p, b->data, b->len);
	free(b->data);
	b->data = p;
	b->cap = cap;
	return (0);
}

/* The pool's loop done, if one runs. */
static void
wait_loop(struct restore *rs)
{
	if (rs->running)
		pool_wait(rs->pool);
	rs->running = 0;
}

/*
 * One step of the pipeline: once the pool has written the out window's
 * files and fetched the fetch window's chunks, finish the out window; the
 * fetch window becomes the one to write and the fill window the one to
 * fetch, in the pool's next loop, and this thread goes on taking entries
 * into the window just finished.
 */
static int
step(struct restore *rs)
{
	struct window *w;
	size_t n;

	wait_loop(rs);
	rs->carry_in = rs->carry_out;
	rs->carry_out = NULL;
	if (finish_window(rs, rs->out))
		return (-1);
	w = rs->out;
	rs->out = rs->fetch;
	rs->fetch = rs->fill;
	rs->fill = rs->spare;
	rs->spare = w;
	/* Its chunks go where a file going on may still be written from
	 * (by now, two loops ago, it is). */
	window_settle(rs->fetch);
	if (rst_readback_start(rs, rs->fetch))
		return (-1);
	/* The written window's groups to hash, in its fetch order. */
	rs->out->ngroups = (rs->out->njobs + HASH_GROUP - 1) / HASH_GROUP;
	rs->out->vdone = 0;
	rs->head = rs->out->ngroups == 0 ? 0 :
	    rs->fetch->njobs < FETCH_HEAD ? rs->fetch->njobs : FETCH_HEAD;
	if ((n = rs->out->ngroups + rs->out->nfiles + rs->fetch->njobs) > 0) {
		pool_start(rs->pool, n, step_job, rs);
		rs->running = 1;
	}
	return (0);
}

/* Everything taken is written: through fetch and out, and finished. */
static int
drain(struct restore *rs)
{
	return (step(rs) || step(rs) || step(rs) ? -1 : 0);
}

/*
 * The snapshot's root entry (a backup stores it as FS_ROOT_PATH; older ones
 * have none): its metadata is the target's, set after everything in it,
 * when the target is the restore's own (see engine_restore).
 */
static void
root_entry(struct restore *rs, const struct entry *e)
{
	if (rs->root_done)
		return;
	rs->root_done = 1;
	if (!rs->root_ok) {
		log_info("'%s' keeps its own mode, owner and times: it was "
		    "not empty (--root-metadata gives it the snapshot's)",
		    rs->opts->target);
		return;
	}
	if (fs_restore_root(rs->fr, e))
		rs->res->failed++;
	else
		rs->res->files++;
}

/* A directory, symlink, device or socket: created now, in order. */
static void
create_now(struct restore *rs, const struct entry *e)
{
	if (fs_restore_begin(rs->fr, e) || fs_restore_finish(rs->fr))
		rs->res->failed++;
	else
		rs->res->files++;
}

/* A new entry at the end of the fill window (its entry copied). */
static struct wentry *
take(struct restore *rs, const struct entry *e)
{
	struct window *win = rs->fill;
	struct wentry *we;

	if (array_grow(&win->ents, &win->capents, win->nents,
	    sizeof(*win->ents), 256))
		return (NULL);
	we = &win->ents[win->nents];
	memset(we, 0, sizeof(*we));
	if (entry_dup(&we->e, &we->mem, e))
		return (NULL);
	win->nents++;
	we->first = win->njobs;
	we->last = 1;
	we->keep_fd = -1;
	return (we);
}

/* The entry just taken is a file the pool writes. */
static int
mark_file(struct window *win)
{
	if (array_grow(&win->files, &win->capfiles, win->nfiles,
	    sizeof(*win->files), 256))
		return (-1);
	win->files[win->nfiles++] = win->nents - 1;
	return (0);
}

static struct rjob *
new_job(struct window *win)
{
	if (array_grow(&win->jobs, &win->capjobs, win->njobs,
	    sizeof(*win->jobs), 256))
		return (NULL);
	return (&win->jobs[win->njobs++]);
}

/* Take one entry into the fill window, stepping as windows fill up. */
static int
add_entry(struct restore *rs, const struct entry *e)
{
	struct catalog_chunk_loc *locs = NULL;
	struct wentry *we;
	struct rjob *j;
	size_t n = 0, i;

	if (strcmp(e->path, FS_ROOT_PATH) == 0) {
		root_entry(rs, e);
		return (0);
	}
	if (e->kind == ENTRY_DIR && rs->dirs_made)
		return (0);
	if (e->kind != ENTRY_FILE) {
		create_now(rs, e);
		return (0);
	}
	if (rs->fill->nents == WINDOW_ENTRIES && step(rs))
		return (-1);
	if ((we = take(rs, e)) == NULL)
		return (-1);
	if (e->nlink > 1) {
		uint8_t key[24];
		int64_t one;

		rst_link_key(key, e);
		if (hmap_get(&rs->planned, key, &one)) {
			we->link = 1;
			return (0);
		}
		if (hmap_put(&rs->planned, key, 1))
			return (-1);
	}
	if (mark_file(rs->fill))
		return (-1);
	if (e->content_id == 0)
		return (0);
	if (catalog_content_chunks(rs->cat, e->content_id, &locs, &n))
		return (-1);
	if (!rst_locs_sane(rs->sid, rs->chunk_max, e, locs, n)) {
		we->bad = 1;
		free(locs);
		return (0);
	}
	for (i = 0; i < n; i++) {
		struct window *win = rs->fill;

		if (win->data.len + locs[i].plain_len > WINDOW_BYTES &&
		    win->njobs > 0) {
			/* This file goes on in the next window. */
			win->ents[win->nents - 1].last = 0;
			if (step(rs) || (we = take(rs, e)) == NULL ||
			    mark_file(rs->fill))
				goto err;
			we->cont = 1;
			win = rs->fill;
		}
		/* A large file's part starts aligned as in the file. */
		if (win->ents[win->nents - 1].njobs == 0 &&
		    e->size >= FS_RESTORE_DIRECT_MIN) {
			size_t pad = (size_t)((locs[i].file_offset -
			    win->data.len) % 4096);

			if (window_reserve(win, pad))
				goto err;
			win->data.len += pad;
		}
		if (window_reserve(win, locs[i].plain_len) ||
		    (j = new_job(win)) == NULL)
			goto err;
		j->loc = locs[i];
		j->off = win->data.len;
		j->rc = -1;
		j->rb = RB_NONE;
		rst_reuse_find(rs, j);
		win->data.len += locs[i].plain_len;
		win->ents[win->nents - 1].njobs++;
	}
	free(locs);
	return (0);
err:
	free(locs);
	return (-1);
}

/* 1 if dir was made already by make_above, else remembered as made now;
 * -1 out of memory (reported). */
static int
made_already(struct restore *rs, const char *dir)
{
	size_t i;

	for (i = 0; i < rs->nmade; i++)
		if (strcmp(rs->made[i], dir) == 0)
			return (1);
	if (array_grow(&rs->made, &rs->capmade, rs->nmade,
	    sizeof(*rs->made), 8))
		return (-1);
	if ((rs->made[rs->nmade] = strdup(dir)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	rs->nmade++;
	return (0);
}

/*
 * Before a subset: the snapshot's directories above it, made with their
 * own metadata (set at close, as every directory's) rather than made by
 * libarchive with default metadata; and the root's.  Nothing when the
 * path is not in the snapshot (restore_under says so).  0, or -1.
 */
static int
make_above(struct restore *rs, int64_t snapshot_id, const char *path)
{
	struct catalog_resolver *cr;
	struct entry e;
	char *dir;
	size_t n;
	int rc = -1, found, done;

	if ((dir = strdup(path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if ((cr = catalog_resolver_new(rs->cat, snapshot_id)) == NULL)
		goto out;
	if ((found = catalog_resolver_get(cr, path, &e)) <= 0) {
		rc = found;
		goto out;
	}
	if ((found = catalog_resolver_get(cr, FS_ROOT_PATH, &e)) < 0)
		goto out;
	if (found && (rs->opts->filter == NULL ||
	    rs->opts->filter(rs->opts->filter_arg, &e)))
		root_entry(rs, &e);
	/* Each directory above path, from the top. */
	for (n = 0; dir[n] != '\0'; n++) {
		if (dir[n] != '/')
			continue;
		dir[n] = '\0';
		if ((done = made_already(rs, dir)) < 0)
			goto out;
		if (!done) {
			if ((found = catalog_resolver_get(cr, dir, &e)) < 0)
				goto out;
			if (found && e.kind == ENTRY_DIR &&
			    (rs->opts->filter == NULL ||
			    rs->opts->filter(rs->opts->filter_arg, &e)))
				create_now(rs, &e);
		}
		dir[n] = '/';
	}
	rc = 0;
out:
	catalog_resolver_free(cr);
	free(dir);
	return (rc);
}

/*
 * Every directory at or below under, in path order, before any file: a
 * pass of its own over the entries.  ext4 places a new directory by
 * Orlov's rule and a new file in its directory's group; made in between
 * the files, directories follow the files into the groups that a tree
 * deleted moments ago (rm -rf of the last restore) has just freed, where
 * without a journal each inode allocation steps over every inode of the
 * group freed in the last 60 seconds (300 while its inode table is not
 * written back: recently_deleted), which makes a restore of many small
 * files after an rm -rf several times slower; restic makes directories
 * first too (measured in bench/README.md).  Their metadata is still set
 * last, at close.  0, or -1 (reported).
 */
static int
make_dirs(struct restore *rs, int64_t snapshot_id, const char *under)
{
	struct catalog_iter *it;
	struct entry e;
	int rc;

	if ((it = catalog_entries(rs->cat, snapshot_id, under)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		if (signals_caught())
			break;	/* restore_under says so */
		if (e.kind != ENTRY_DIR ||
		    strcmp(e.path, FS_ROOT_PATH) == 0 ||
		    (rs->opts->filter &&
		    !rs->opts->filter(rs->opts->filter_arg, &e)))
			continue;
		create_now(rs, &e);
	}
	catalog_iter_free(it);
	if (rc < 0)
		return (-1);
	rs->dirs_made = 1;
	return (0);
}

static int
restore_under(struct restore *rs, int64_t snapshot_id, const char *under)
{
	struct catalog_iter *it;
	struct entry e;
	int rc, seen = 0;

	rs->dirs_made = 0;
	if (make_dirs(rs, snapshot_id, under))
		return (-1);
	if ((it = catalog_entries(rs->cat, snapshot_id, under)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		seen = 1;
		/* Stopped by a signal: what is written is whole. */
		if (signals_caught()) {
			log_error("restore interrupted by %s: the files "
			    "restored so far are whole, the rest are missing",
			    signals_name(signals_caught()));
			rc = -1;
			break;
		}
		if (rs->opts->filter &&
		    !rs->opts->filter(rs->opts->filter_arg, &e))
			continue;
		if (add_entry(rs, &e)) {
			rc = -1;
			break;
		}
	}
	catalog_iter_free(it);
	if (rc < 0 || drain(rs))
		return (-1);
	if (under && !seen) {
		log_error("'%s' is not in the snapshot", under);
		rs->missing++;
	}
	return (0);
}

enum engine_result
engine_restore(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct restore_opts *o,
    struct restore_result *res)
{
	struct restore rs;
	double t0 = now_monotonic();
	int status = ENGINE_ERROR, empty, t, w;
	size_t i;

	memset(res, 0, sizeof(*res));
	if (engine_need_read(r, "restore"))
		return (ENGINE_REFUSED);
	memset(&rs, 0, sizeof(rs));
	rs.repo = r;
	rs.cat = c;
	rs.sid = s->sid;
	rs.chunk_max = repo_chunker_params(r)->max;
	rs.res = res;
	rs.opts = o;
	rs.fill = &rs.win[0];
	rs.fetch = &rs.win[1];
	rs.out = &rs.win[2];
	rs.spare = &rs.win[3];
	pthread_mutex_init(&rs.mu, NULL);
	pthread_mutex_init(&rs.bad_mu, NULL);
	pthread_cond_init(&rs.verified, NULL);
	hmap_init(&rs.links, 24);
	hmap_init(&rs.planned, 24);
	hmap_init(&rs.seen, sizeof(int64_t));
	pthread_mutex_init(&rs.rb.mu, NULL);
	pthread_cond_init(&rs.rb.cv, NULL);
	for (i = 0; i < REUSE_FILES; i++)
		rs.srcs[i].fd = -1;
	/* A full's bytes read are its content; other levels store only a
	 * delta, so no total (and no ETA) rather than a wrong one. */
	progress_init(&rs.progress, "restore", s->level == LEVEL_FULL &&
	    o->npaths == 0 && o->filter == NULL ? (uint64_t)s->bytes_read : 0);

	if (engine_need_complete(s))
		return (ENGINE_REFUSED);
	if ((empty = fsutil_dir_is_empty(o->target, 1)) < 0)
		return (ENGINE_ERROR);
	if (!empty && !o->force) {
		log_error("target '%s' is not empty (use --force)",
		    o->target);
		return (ENGINE_REFUSED);
	}
	/*
	 * A target that the restore makes, or that is empty, is the
	 * snapshot's root: it takes the root's mode, owner, times, xattrs
	 * and ACL (a 0750 dataset must not come back 0755).  A tree that was
	 * there (--force) keeps its own unless asked: its mode and owner may
	 * be what lets others reach the rest of it, as for a mount point.
	 */
	rs.root_ok = empty || o->root_metadata;
	if ((rs.pool = pool_new(o->threads > 0 ? o->threads :
	    pool_default_threads())) == NULL)
		goto out;
	rs.capwriters = (size_t)pool_threads(rs.pool) + 1;
	rs.nsrcs = rst_reuse_files(pool_threads(rs.pool));
	/* Tests read back what the page cache holds; "never" turns it off
	 * (to compare). */
	if (tuning_get()->read_back == TUNING_READ_BACK_NEVER)
		rs.nsrcs = 0;
	rs.read_back_always = tuning_get()->read_back ==
	    TUNING_READ_BACK_ALWAYS;
	rs.change_restored = tuning_get()->test_change_restored;
	if ((rs.workers = calloc((size_t)pool_threads(rs.pool),
	    sizeof(*rs.workers))) == NULL ||
	    (rs.writers = calloc(rs.capwriters, sizeof(*rs.writers))) ==
	    NULL ||
	    (rs.idle = calloc(rs.capwriters, sizeof(*rs.idle))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	for (t = 0; t < pool_threads(rs.pool); t++)
		if ((rs.workers[t].z = compressor_new(1)) == NULL)
			goto out;
	if (catalog_set_cache(c, RESTORE_CATALOG_KIB))
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
			if (make_above(&rs, s->id, o->paths[i]) ||
			    restore_under(&rs, s->id, o->paths[i]))
				goto out;
	}
	/* Damaged data first: the repository needs attention; then files
	 * that could not be written (a full disk, say). */
	res->complete = 1;
	status = res->damaged ? ENGINE_DAMAGED : res->failed ? ENGINE_ERROR :
	    rs.missing ? ENGINE_REFUSED : ENGINE_OK;
out:
	/* A failed step or take may leave the pool's loop running. */
	wait_loop(&rs);
	/* The loop's jobs waited for what they read back: the reading
	 * thread is idle. */
	pthread_mutex_lock(&rs.rb.mu);
	rs.rb.quit = 1;
	pthread_cond_broadcast(&rs.rb.cv);
	pthread_mutex_unlock(&rs.rb.mu);
	for (t = 0; t < rs.rb.started; t++) {
		pthread_join(rs.rb.thread[t], NULL);
		fs_reader_free(rs.rb.rd[t]);
	}
	res->reused = rs.rb.bytes;
	pthread_cond_destroy(&rs.rb.cv);
	pthread_mutex_destroy(&rs.rb.mu);
	progress_done(&rs.progress);
	/* The file writers first: the first one sets directory times.  A
	 * failed run leaves no file half written that looks whole. */
	for (i = 0; i < rs.nwriters; i++) {
		if (!res->complete)
			fs_restore_discard(rs.writers[i]);
		if ((t = fs_restore_close(rs.writers[i])) < 0)
			status = ENGINE_ERROR;
		else if (t > 0 && status == ENGINE_OK)
			status = ENGINE_WARN;
	}
	if (rs.fr && (t = fs_restore_close(rs.fr)) != 0) {
		if (t < 0)
			status = ENGINE_ERROR;
		else if (status == ENGINE_OK)
			status = ENGINE_WARN;
	}
	if (rs.workers) {
		for (t = 0; t < pool_threads(rs.pool); t++)
			rst_worker_release(&rs.workers[t]);
		free(rs.workers);
	}
	pool_free(rs.pool);
	for (w = 0; w < NWINDOWS; w++) {
		struct window *win = &rs.win[w];

		window_close_fds(win);
		for (i = 0; i < win->nents; i++)
			free(win->ents[i].mem);
		free(win->ents);
		free(win->files);
		free(win->jobs);
		free(win->order);
		buf_release(&win->data);
	}
	free(rs.writers);
	free(rs.idle);
	pthread_cond_destroy(&rs.verified);
	pthread_mutex_destroy(&rs.mu);
	if (rs.nbad > 0)
		damaged_chunks(&rs, c);
	free(rs.bad_rows);
	pthread_mutex_destroy(&rs.bad_mu);
	for (i = 0; i < rs.nlinks; i++)
		free(rs.link_paths[i]);
	free(rs.link_paths);
	free(rs.link_ids);
	for (i = 0; i < rs.nmade; i++)
		free(rs.made[i]);
	free(rs.made);
	hmap_release(&rs.links);
	hmap_release(&rs.planned);
	hmap_release(&rs.seen);
	for (i = 0; i < REUSE_FILES; i++)
		if (rs.srcs[i].fd != -1)
			close(rs.srcs[i].fd);
	free(rs.refs);
	free(rs.pend);
	if (catalog_set_cache(c, CATALOG_CACHE_KIB))
		status = ENGINE_ERROR;
	if (status == ENGINE_ERROR && !res->complete && signals_caught())
		status = ENGINE_INTERRUPTED;
	res->seconds = now_monotonic() - t0;
	return (status);
}
