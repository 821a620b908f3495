/*
 * Drill: rehearse a recovery the way a bad day would need it, and keep
 * the result.
 *
 * The snapshot's view (or a deterministic sample of its files) is
 * restored by engine_restore into a scratch directory made for the drill,
 * then every restored entry is checked against the catalog: type, mode,
 * mtime, size, symlink target, owner (as root), extended attributes, and
 * content.  Content is
 * checked chunk by chunk at the catalog's own boundaries: each chunk's
 * keyed id recomputed from the restored bytes, every byte between chunks
 * zero (a hole), the size exact.  That is the same proof as cutting the
 * file again with the chunker, without depending on how the scratch file
 * system maps holes (a hole that came back as data would make the chunker
 * cut differently and report a sound file as damaged).  With --no-write,
 * every chunk of the sample is read and verified (AEAD, keyed hash)
 * without writing anything.  Times are measured, compared with the
 * objectives, and recorded in the drill table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/catalog-history.h"
#include "coffer/chunk.h"
#include "coffer/engine-check.h"
#include "coffer/engine.h"
#include "coffer/fs.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/tuning.h"
#include "engine-int.h"
#include "integrity-int.h"

#define READERS 16

struct reader_slot {
	char name[PACK_NAME_LEN + 1];
	struct pack_reader *pr;		/* NULL: could not be opened */
	uint64_t used;
};

struct drill {
	struct repo *repo;
	struct catalog *cat;
	const struct catalog_snapshot *snap;
	const struct drill_opts *o;
	struct drill_result *res;

	/* The sample: non-directories whose key is at most cut. */
	int sampling;
	uint64_t cut;
	int64_t total_bytes;		/* file content of the whole view */

	char *scratch;
	struct fs_compare_opts cmp;	/* what the restore could give back */
	gid_t *groups;			/* our gids: cmp.groups */

	struct compressor *z;
	struct buf chunk;
	struct reader_slot readers[READERS];
	uint64_t tick;
	struct progress progress;
};

static uint64_t
sample_key(const struct drill *d, const char *path)
{
	struct buf b = BUF_INIT;
	uint8_t out[32];
	uint64_t k = 0;

	/* Deterministic: the same snapshot and share give the same files. */
	if (buf_append(&b, d->snap->sid, SNAPSHOT_ID_HEX + 1) == 0 &&
	    buf_puts(&b, path) == 0) {
		ccrypto_plain_hash(b.data, b.len, out);
		k = get_u64(out);
	}
	buf_release(&b);
	return (k);
}

static int
in_sample(void *arg, const struct entry *e)
{
	struct drill *d = arg;

	if (!d->sampling)
		return (1);
	return (e->kind != ENTRY_DIR && sample_key(d, e->path) <= d->cut);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/*
 * One pass over the view: count it, and for a sample find the key below
 * which exactly the asked share of its non-directories lies (at least
 * one).
 */
static int
plan_sample(struct drill *d)
{
	struct catalog_iter *it;
	struct entry e;
	uint64_t *keys = NULL;
	size_t n = 0, cap = 0, k;
	double want;
	int rc;

	if ((it = catalog_entries(d->cat, d->snap->id, NULL)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		d->res->entries_total++;
		if (e.kind == ENTRY_FILE)
			d->total_bytes += e.size;
		if (!d->sampling || e.kind == ENTRY_DIR)
			continue;
		if (array_grow(&keys, &cap, n, sizeof(*keys), 1024)) {
			rc = -1;
			break;
		}
		keys[n++] = sample_key(d, e.path);
	}
	catalog_iter_free(it);
	if (rc < 0) {
		free(keys);
		return (-1);
	}
	if (d->sampling) {
		want = d->o->sample * (double)n / 100.0;
		k = (size_t)want;
		if ((double)k < want || k == 0)
			k++;
		if (n == 0 || k >= n) {
			d->cut = UINT64_MAX;
		} else {
			qsort(keys, n, sizeof(*keys), cmp_u64);
			d->cut = keys[k - 1];
		}
	}
	free(keys);
	return (0);
}

static int
fail(struct drill *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A check failed: remember it (path order: the view's order). */
static int
fail(struct drill *d, const char *path, const char *fmt, ...)
{
	struct drill_result *res = d->res;
	struct drill_failure *f;
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	f = reallocarray(res->failures, res->nfailures + 1, sizeof(*f));
	if (f == NULL) {
		log_error("out of memory");
		return (-1);
	}
	res->failures = f;
	f = &res->failures[res->nfailures];
	f->path = strdup(path);
	f->what = strdup(what);
	if (f->path == NULL || f->what == NULL) {
		free(f->path);
		free(f->what);
		log_error("out of memory");
		return (-1);
	}
	res->nfailures++;
	log_error("drill: '%s': %s", path, what);
	return (0);
}

static struct pack_reader *
reader(struct drill *d, const char *name)
{
	struct reader_slot *victim = &d->readers[0];
	size_t i;

	for (i = 0; i < READERS; i++) {
		struct reader_slot *s = &d->readers[i];

		if (s->used && strcmp(s->name, name) == 0) {
			s->used = ++d->tick;
			return (s->pr);
		}
		if (s->used < victim->used)
			victim = s;
	}
	pack_reader_close(victim->pr);
	memcpy(victim->name, name, PACK_NAME_LEN + 1);
	victim->pr = pack_reader_open(d->repo, name);
	victim->used = ++d->tick;
	return (victim->pr);
}

/* The restored content of e at fd, against its chunks. */
static int
check_content(struct drill *d, const struct entry *e, int fd)
{
	struct catalog_chunk_loc *locs = NULL;
	int64_t where = 0, before = d->res->rec.bytes;
	size_t n = 0;
	int rc;

	if (e->content_id != 0 &&
	    catalog_content_chunks(d->cat, e->content_id, &locs, &n))
		return (-1);
	rc = integrity_content_matches(repo_keys(d->repo), fd, locs, n,
	    e->size, &d->chunk, &where, &d->res->rec.bytes);
	progress_update(&d->progress, 0,
	    (uint64_t)(d->res->rec.bytes - before));
	free(locs);
	if (rc < 0)
		return (fail(d, e->path, "cannot be read back: %s",
		    strerror(errno)));
	if (rc == 0)
		return (fail(d, e->path, "content differs from the snapshot "
		    "at offset %lld", (long long)where));
	return (0);
}

/*
 * Open a restored file for reading.  Without root, a file restored with
 * mode 0000 (or without read permission) cannot be opened: it is ours, so
 * open it up for the moment; its mode has been checked already.
 */
static int
open_file(const struct drill *d, const char *path, const struct stat *st)
{
	int fd, e;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd != -1 || errno != EACCES || d->cmp.owner ||
	    st->st_uid != d->cmp.euid)
		return (fd);
	if (chmod(path, (st->st_mode & 07777) | S_IRUSR))
		return (-1);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	e = errno;
	(void)chmod(path, st->st_mode & 07777);
	errno = e;
	return (fd);
}

/* One restored entry against the catalog. */
static int
check_entry(struct drill *d, const struct entry *e)
{
	struct stat st;
	char *path, msg[320];
	int fd = -1, rc;

	if ((path = fsutil_join(d->scratch, e->path)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	d->res->rec.files++;
	progress_update(&d->progress, 1, 0);
	rc = fs_compare(path, e, &d->cmp, &st, msg, sizeof(msg));
	if (rc < 0)
		rc = fail(d, e->path, errno == ENOENT ? "missing: it was not "
		    "restored" : "cannot be examined: %s", strerror(errno));
	else if (rc > 0)
		rc = fail(d, e->path, "%s", msg);
	else if (e->kind == ENTRY_FILE) {
		if ((fd = open_file(d, path, &st)) == -1) {
			rc = fail(d, e->path, "cannot be opened: %s",
			    strerror(errno));
		} else {
			(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
			rc = check_content(d, e, fd);
			close(fd);
		}
	}
	free(path);
	return (rc);
}

/* --no-write: read and verify every chunk of e's content. */
static int
stream_entry(struct drill *d, const struct entry *e)
{
	struct catalog_chunk_loc *locs = NULL;
	struct pack_reader *pr;
	struct pack_entry pe;
	uint64_t end = 0;
	size_t n = 0, i;
	int rc = -1;

	d->res->rec.files++;
	progress_update(&d->progress, 1, 0);
	if (e->kind != ENTRY_FILE || e->content_id == 0)
		return (0);
	if (catalog_content_chunks(d->cat, e->content_id, &locs, &n))
		return (-1);
	for (i = 0; i < n; i++) {
		const struct catalog_chunk_loc *l = &locs[i];

		if (l->file_offset < end ||
		    l->file_offset + l->plain_len > (uint64_t)e->size) {
			rc = fail(d, e->path, "its chunk list does not fit "
			    "its size");
			goto out;
		}
		end = l->file_offset + l->plain_len;
		if (l->pack[0] == '\0') {
			rc = fail(d, e->path, "the chunk at offset %llu is in "
			    "no pack", (unsigned long long)l->file_offset);
			goto out;
		}
		if ((pr = reader(d, l->pack)) == NULL) {
			rc = fail(d, e->path, "the chunk at offset %llu is in "
			    "a missing or damaged pack",
			    (unsigned long long)l->file_offset);
			goto out;
		}
		loc_entry(l, &pe);
		if (pe.type != PACK_REC_DATA ||
		    pack_reader_get(pr, &pe, d->z, &d->chunk)) {
			rc = fail(d, e->path, "the chunk at offset %llu is "
			    "damaged", (unsigned long long)l->file_offset);
			goto out;
		}
		d->res->rec.bytes += l->plain_len;
		progress_update(&d->progress, 0, l->plain_len);
	}
	rc = 0;
out:
	free(locs);
	return (rc);
}

/*
 * Tests only (COFFER_TEST_BEFORE_DRILL_CHECK): a shell command run between
 * the restore and its check, with the scratch directory in
 * COFFER_TEST_SCRATCH, to alter what was restored as a faulty restore
 * would.
 */
static void
test_hook(const struct drill *d)
{
	tuning_run_hook("COFFER_TEST_BEFORE_DRILL_CHECK",
	    tuning_get()->test_before_drill_check, "COFFER_TEST_SCRATCH",
	    d->scratch);
}

/* Check (or stream) every entry of the sample, in path order. */
static int
check_all(struct drill *d)
{
	struct catalog_iter *it;
	struct entry e;
	int rc;

	if ((it = catalog_entries(d->cat, d->snap->id, NULL)) == NULL)
		return (-1);
	while ((rc = catalog_iter_next(it, &e)) == 1) {
		if (!in_sample(d, &e))
			continue;
		if ((d->o->no_write ? stream_entry(d, &e) :
		    check_entry(d, &e)) < 0) {
			rc = -1;
			break;
		}
	}
	catalog_iter_free(it);
	return (rc < 0 ? -1 : 0);
}

static int
make_scratch(struct drill *d)
{
	const char *parent = d->o->scratch;
	char *tmpl;

	if (parent == NULL || *parent == '\0') {
		parent = getenv("TMPDIR");
		if (parent == NULL || *parent == '\0')
			parent = "/tmp";
	} else if (fsutil_mkdir_p(parent, 0700)) {
		return (-1);
	}
	if ((tmpl = fsutil_join(parent, "coffer-drill.XXXXXX")) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if (mkdtemp(tmpl) == NULL) {
		log_errno("cannot make a scratch directory in '%s'", parent);
		free(tmpl);
		return (-1);
	}
	d->scratch = tmpl;
	return (0);
}

static void
drill_release(struct drill *d)
{
	size_t i;

	for (i = 0; i < READERS; i++)
		pack_reader_close(d->readers[i].pr);
	compressor_free(d->z);
	buf_release(&d->chunk);
	free(d->groups);
}

/* The RPO: age of the dataset's newest complete snapshot. */
static double
rpo_age(struct catalog *c, const char *dataset, int64_t now)
{
	struct catalog_snapshot s;
	struct buf name = BUF_INIT;
	double age = -1;

	memset(&s, 0, sizeof(s));
	if (buf_printf(&name, "%s@latest", dataset) == 0 &&
	    catalog_snapshot_find(c, (const char *)name.data, &s) == 1) {
		age = (double)(now - s.started_ns) / 1e9;
		if (age < 0)
			age = 0;
		catalog_snapshot_release(&s);
	}
	buf_release(&name);
	return (age);
}

enum engine_result
engine_drill(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct drill_opts *o,
    struct drill_result *res)
{
	struct catalog_drill *rec = &res->rec;
	struct restore_result rr;
	struct restore_opts ro;
	struct drill d;
	double t0;
	int status = ENGINE_ERROR, rst = ENGINE_OK, n;

	memset(res, 0, sizeof(*res));
	if (engine_need_read(r, "drill"))
		return (ENGINE_REFUSED);
	memset(&d, 0, sizeof(d));
	d.repo = r;
	d.cat = c;
	d.snap = s;
	d.o = o;
	d.res = res;
	d.sampling = o->sample > 0 && o->sample < 100;
	d.cmp.euid = geteuid();
	d.cmp.owner = d.cmp.euid == 0;
	rec->time_ns = o->now_ns ? o->now_ns : now_realtime_ns();
	rec->dataset_id = s->dataset_id;
	rec->dataset = s->dataset;
	rec->snapshot_id = s->id;
	memcpy(rec->sid, s->sid, sizeof(rec->sid));
	rec->no_write = o->no_write;
	rec->sample = d.sampling ? o->sample : 100;
	rec->estimate_seconds = -1;
	rec->rto_seconds = o->rto > 0 ? o->rto : -1;
	rec->rpo_seconds = o->rpo > 0 ? o->rpo : -1;

	if (engine_need_complete(s))
		return (ENGINE_REFUSED);
	if ((n = getgroups(0, NULL)) > 0) {
		if ((d.groups = calloc((size_t)n, sizeof(*d.groups))) ==
		    NULL) {
			log_error("out of memory");
			goto out;
		}
		if ((n = getgroups(n, d.groups)) > 0) {
			d.cmp.groups = d.groups;
			d.cmp.ngroups = (size_t)n;
		}
	}
	if ((d.z = compressor_new(1)) == NULL)
		goto out;
	if (plan_sample(&d))
		goto out;

	/* The recovery itself, timed. */
	if (o->no_write) {
		progress_init(&d.progress, "drill", (uint64_t)d.total_bytes);
		t0 = now_monotonic();
		if (check_all(&d))
			goto out;
		rec->seconds = now_monotonic() - t0;
		progress_done(&d.progress);
	} else {
		if (make_scratch(&d))
			goto out;
		if ((res->scratch = strdup(d.scratch)) == NULL)
			goto out;
		memset(&ro, 0, sizeof(ro));
		ro.target = d.scratch;
		ro.filter = in_sample;
		ro.filter_arg = &d;
		rst = engine_restore(r, c, s, &ro, &rr);
		rec->seconds = rr.seconds;
		if (rst != ENGINE_OK && rst != ENGINE_WARN &&
		    rst != ENGINE_DAMAGED &&
		    !(rst == ENGINE_ERROR && rr.complete)) {
			/* A restore that cannot run is a failed drill; one
			 * that could not write some files (a full scratch
			 * disk) is checked, and fails on them. */
			if (fail(&d, ".", "%s", rst == ENGINE_INTERRUPTED ?
			    "the restore was interrupted" :
			    "the restore failed"))
				goto out;
		} else {
			test_hook(&d);
			progress_init(&d.progress, "check",
			    (uint64_t)rr.bytes);
			t0 = now_monotonic();
			if (check_all(&d))
				goto out;
			rec->check_seconds = now_monotonic() - t0;
			progress_done(&d.progress);
		}
	}

	/* A sample predicts the whole restore by its throughput. */
	if (d.sampling && rec->seconds > 0) {
		if (rec->bytes > 0)
			rec->estimate_seconds = rec->seconds *
			    (double)d.total_bytes / (double)rec->bytes;
		else if (rec->files > 0)
			rec->estimate_seconds = rec->seconds *
			    (double)res->entries_total / (double)rec->files;
	}
	rec->rpo_age_seconds = rpo_age(c, s->dataset, rec->time_ns);
	if (o->rto > 0)
		res->rto_missed = (rec->estimate_seconds >= 0 ?
		    rec->estimate_seconds : rec->seconds) > o->rto;
	if (o->rpo > 0)
		res->rpo_missed = rec->rpo_age_seconds < 0 ||
		    rec->rpo_age_seconds > o->rpo;
	rec->failures = (int64_t)res->nfailures;
	if (res->nfailures > 0) {
		rec->verdict = "fail";
		status = rst == ENGINE_ERROR || rst == ENGINE_INTERRUPTED ?
		    rst : ENGINE_DAMAGED;
	} else if (res->rto_missed || res->rpo_missed) {
		rec->verdict = "missed-objective";
		status = ENGINE_OBJECTIVE;
	} else {
		rec->verdict = "pass";
		status = ENGINE_OK;
	}
	if (catalog_drill_add(c, rec))
		status = ENGINE_ERROR;
	/* The result is evidence: into the repository too, now if no
	 * writer holds it, else by the next one. */
	else if (engine_journal_flush_try(d.repo, c))
		log_warn("the drill's result could not be written to the "
		    "repository; the next backup tries again");
out:
	progress_done(&d.progress);
	if (d.scratch != NULL) {
		res->scratch_kept = o->keep ||
		    fsutil_remove_tree(AT_FDCWD, d.scratch, d.scratch) != 0;
		free(d.scratch);
	}
	drill_release(&d);
	return (status);
}

void
engine_drill_result_release(struct drill_result *res)
{
	size_t i;

	for (i = 0; i < res->nfailures; i++) {
		free(res->failures[i].path);
		free(res->failures[i].what);
	}
	free(res->failures);
	free(res->scratch);
	res->failures = NULL;
	res->nfailures = 0;
	res->scratch = NULL;
}
