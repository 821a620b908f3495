/*
 * coffer run on the engines (include/coffer/engine-run.h): the history a
 * policy's schedules are judged on, read from the catalog; each action of
 * a plan (policy_due) done by its engine; the run recorded in the runs
 * table and the journal.  What is due is decided in src/policy/due.c,
 * from what this file reads, and nowhere else.
 */
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/engine-check.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine-retention.h"
#include "coffer/engine-run.h"
#include "coffer/fmt.h"
#include "coffer/hex.h"
#include "coffer/log.h"

void
engine_run_history_release(struct engine_history *h)
{
	size_t i;

	for (i = 0; i < h->n; i++)
		free((char *)h->v[i].subject);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/*
 * Keep the newest event of each job, subject, level and outcome: the
 * schedules need no more, and a catalog of years of snapshots stays a
 * few events a dataset.
 */
static int
note(struct engine_history *h, int job, const char *subject, int level,
    int64_t time_ns, int ok)
{
	struct policy_event *e;
	size_t i;

	if (subject == NULL)
		subject = "";
	for (i = 0; i < h->n; i++) {
		e = &h->v[i];
		if (e->job == job && e->level == level && e->ok == ok &&
		    strcmp(e->subject, subject) == 0) {
			if (time_ns > e->time_ns)
				e->time_ns = time_ns;
			return (0);
		}
	}
	if (array_grow(&h->v, &h->cap, h->n, sizeof(*h->v), 16)) {
		log_error("out of memory");
		return (-1);
	}
	e = &h->v[h->n];
	if ((e->subject = strdup(subject)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	h->n++;
	e->job = job;
	e->level = level;
	e->time_ns = time_ns;
	e->ok = ok;
	return (0);
}

static int
snapshot_event(void *arg, const struct catalog_snapshot *s)
{
	if (s->state == SNAP_RUNNING || s->dataset == NULL)
		return (0);
	return (note(arg, POLICY_BACKUP, s->dataset, s->level, s->started_ns,
	    s->state == SNAP_COMPLETE));
}

static int
bundle_event(void *arg, const struct catalog_bundle *b)
{
	return (note(arg, POLICY_EXPORT, b->target, b->level, b->created_ns,
	    1));
}

/* A backup's and an export's history is their snapshots' and bundles'. */
static int
run_event(void *arg, const char *kind, const char *subject, int done,
    int64_t time_ns)
{
	int job;

	for (job = POLICY_FORGET; job < POLICY_JOBS; job++)
		if (kind != NULL && strcmp(kind, policy_job_name(job)) == 0)
			return (note(arg, job, subject, -1, time_ns, done));
	return (0);
}

int
engine_run_history(struct catalog *c, struct engine_history *h)
{
	memset(h, 0, sizeof(*h));
	if (catalog_snapshot_list(c, NULL, snapshot_event, h) < 0 ||
	    catalog_bundle_list(c, 1, NULL, bundle_event, h) < 0 ||
	    catalog_run_newest(c, run_event, h) < 0) {
		engine_run_history_release(h);
		return (-1);
	}
	return (0);
}

static enum engine_result
run_backup(const struct engine_run *run, struct engine_run_step *s)
{
	const struct policy_dataset *d = s->a->ds;
	struct backup_opts o;
	struct backup_result res;
	enum engine_result er;
	char rd[32], nw[32], held[48];

	memset(&o, 0, sizeof(o));
	o.dataset = d->name;
	o.source = d->path;
	o.level = s->a->level;
	o.walk.root = 1;
	o.walk.one_file_system = d->one_file_system;
	o.walk.excludes = d->excludes;
	o.walk.nexcludes = d->nexcludes;
	o.time_ns = run->fake_clock ? run->now : 0;
	o.settle = d->settle;
	o.require = d->require;
	o.checkpoints = d->checkpoints;
	o.ncheckpoints = d->ncheckpoints;
	er = engine_backup(run->r, run->c, &o, &res);
	s->done = er == ENGINE_OK || er == ENGINE_WARN;
	if (!s->done) {
		snprintf(s->detail, sizeof(s->detail), "no snapshot");
		return (er);
	}
	fmt_bytes(rd, sizeof(rd), (double)res.bytes_read);
	fmt_bytes(nw, sizeof(nw), (double)res.bytes_new);
	snprintf(held, sizeof(held), ", %lld held back",
	    (long long)res.held_back);
	snprintf(s->detail, sizeof(s->detail), "snapshot %.12s, %s read, %s "
	    "new%s", res.sid, rd, nw, res.held_back ? held : "");
	return (er);
}

/* The newest complete snapshot of dataset into *snap: 1, else 0 (said in
 * s->detail) or -1. */
static int
latest(const struct engine_run *run, const char *dataset,
    struct catalog_snapshot *snap, struct engine_run_step *s)
{
	char name[160];
	int rc;

	snprintf(name, sizeof(name), "%s@latest", dataset);
	if ((rc = catalog_snapshot_find(run->c, name, snap)) <= 0)
		snprintf(s->detail, sizeof(s->detail), "no complete snapshot "
		    "of '%s'", dataset);
	return (rc);
}

static enum engine_result
run_export(const struct engine_run *run, struct engine_run_step *s)
{
	struct catalog_snapshot snap;
	struct export_opts o;
	struct export_result res;
	enum engine_result er;
	char sz[32];
	int rc;

	memset(&o, 0, sizeof(o));
	memset(&snap, 0, sizeof(snap));
	o.target = s->a->ex->target;
	o.to = s->a->ex->to;
	o.level = s->a->level;
	o.now_ns = run->fake_clock ? run->now : 0;
	if (s->a->dataset != NULL) {
		if ((rc = latest(run, s->a->dataset, &snap, s)) <= 0)
			return (rc < 0 ? ENGINE_ERROR : ENGINE_REFUSED);
		o.snapshot = &snap;
	}
	er = engine_export(run->r, run->c, &o, &res);
	catalog_snapshot_release(&snap);
	s->done = er == ENGINE_OK;
	if (!s->done) {
		snprintf(s->detail, sizeof(s->detail), "no bundle");
		return (er);
	}
	s->level = res.level;
	fmt_bytes(sz, sizeof(sz), (double)res.bytes);
	snprintf(s->detail, sizeof(s->detail), "bundle %s, %zu packs, %s",
	    res.name, res.packs, sz);
	return (er);
}

static enum engine_result
run_forget(const struct engine_run *run, struct engine_run_step *s)
{
	struct forget_opts o;
	struct forget_result res;
	enum engine_result er;

	memset(&o, 0, sizeof(o));
	o.rules = s->a->ds != NULL ? *policy_retention(run->p, s->a->ds) :
	    run->p->keep;
	o.dataset = s->a->dataset;
	o.wait = run->forget_wait;
	er = engine_forget(run->r, run->c, &o, &res);
	s->done = er == ENGINE_OK;
	if (s->done)
		snprintf(s->detail, sizeof(s->detail), "forgot %zu of %zu "
		    "snapshots", res.forgotten, res.n);
	else
		snprintf(s->detail, sizeof(s->detail), "nothing forgotten");
	engine_forget_result_release(&res);
	return (er);
}

static enum engine_result
run_prune(const struct engine_run *run, struct engine_run_step *s)
{
	struct prune_opts o;
	struct prune_result res;
	enum engine_result er;
	char del[32];

	memset(&o, 0, sizeof(o));
	o.max_unused = run->p->max_unused;
	er = engine_prune(run->r, run->c, &o, &res);
	s->done = er == ENGINE_OK;
	if (!s->done) {
		snprintf(s->detail, sizeof(s->detail), "nothing deleted");
		return (er);
	}
	fmt_bytes(del, sizeof(del), (double)res.bytes_deleted);
	snprintf(s->detail, sizeof(s->detail), "%lld of %lld packs deleted "
	    "(%s), %lld repacked, %lld condemned", (long long)
	    (res.packs_deleted + res.packs_repacked), (long long)res.packs,
	    del, (long long)res.packs_repacked, (long long)res.packs_waiting);
	return (er);
}

static enum engine_result
run_drill(const struct engine_run *run, struct engine_run_step *s)
{
	const struct policy_drill *dr = s->a->dr;
	struct catalog_snapshot snap;
	struct drill_opts o;
	struct drill_result res;
	struct drill_bundles_opts bo;
	struct import_result imp;
	enum engine_result er;
	char name[160], *source = NULL;
	int rc;

	memset(&o, 0, sizeof(o));
	memset(&snap, 0, sizeof(snap));
	memset(&res, 0, sizeof(res));
	o.sample = dr->sample;
	o.rto = dr->rto;
	o.rpo = dr->rpo;
	o.no_write = dr->no_write;
	o.now_ns = run->fake_clock ? run->now : 0;
	snprintf(name, sizeof(name), "%s@latest", s->a->dataset);
	if (dr->from != NULL) {
		/* The policy checked that the target exists. */
		const struct policy_export *e = policy_export_find(run->p,
		    dr->from);

		if (asprintf(&source, "bundles:%s", e->to) < 0) {
			log_error("out of memory");
			return (ENGINE_ERROR);
		}
		memset(&bo, 0, sizeof(bo));
		bo.from = e->to;
		bo.snapshot = name;
		bo.source = source;
		bo.drill = &o;
		bo.open_scratch = run->open_scratch;
		bo.arg = run->arg;
		er = engine_drill_bundles(run->c, &bo, &snap, &res, &imp);
	} else if ((rc = latest(run, s->a->dataset, &snap, s)) <= 0)
		return (rc < 0 ? ENGINE_ERROR : ENGINE_REFUSED);
	else
		er = engine_drill(run->r, run->c, &snap, &o, &res);
	/* A drill that ran is done, whatever its verdict. */
	s->done = res.rec.verdict != NULL;
	if (s->done)
		snprintf(s->detail, sizeof(s->detail), "snapshot %.12s: %s, "
		    "%lld files checked%s", res.rec.sid, res.rec.verdict,
		    (long long)res.rec.files, dr->from ? ", from bundles" :
		    "");
	else
		snprintf(s->detail, sizeof(s->detail), "no drill");
	engine_drill_result_release(&res);
	catalog_snapshot_release(&snap);
	free(source);
	return (er);
}

static enum engine_result
run_verify(const struct engine_run *run, struct engine_run_step *s)
{
	const struct policy_verify *vf = s->a->vf;
	struct verify_opts o;
	struct verify_result res;
	enum engine_result er;
	char sz[32], what[64];
	size_t problems;

	memset(&o, 0, sizeof(o));
	o.record = 1;
	o.max_seconds = vf->max_seconds;
	o.now_ns = run->fake_clock ? run->now : 0;
	switch (vf->read) {
	case POLICY_READ_ALL:
		o.read = VERIFY_READ_ALL;
		break;
	case POLICY_READ_PERCENT:
		o.read = VERIFY_READ_PERCENT;
		o.percent = vf->percent;
		break;
	case POLICY_READ_SLICE:
		/* The next of the M slices, from the journaled results of
		 * every host: M runs read every pack. */
		o.read = VERIFY_READ_SLICE;
		o.slice_m = vf->slices;
		if (catalog_verify_next_slice(run->c, vf->slices,
		    &o.slice_n)) {
			snprintf(s->detail, sizeof(s->detail), "no verify");
			return (ENGINE_ERROR);
		}
		break;
	default:
		o.read = VERIFY_STRUCTURE;
	}
	er = engine_verify(run->r, run->c, &o, &res);
	/* A verify that ran is done, whatever it found. */
	s->done = er == ENGINE_OK || er == ENGINE_DAMAGED;
	if (!s->done) {
		snprintf(s->detail, sizeof(s->detail), "no verify");
		engine_verify_result_release(&res);
		return (er);
	}
	fmt_bytes(sz, sizeof(sz), (double)res.bytes_read);
	problems = res.ndamage + res.nbad_records + res.nbad_packs +
	    res.meta_errors;
	snprintf(what, sizeof(what), "%zu problem%s", problems,
	    problems == 1 ? "" : "s");
	snprintf(s->detail, sizeof(s->detail), "%s: %lld packs checked, "
	    "%lld read (%s)%s: %s", res.mode, (long long)res.packs,
	    (long long)res.packs_read, sz, res.complete ? "" :
	    ", stopped at its time limit", er == ENGINE_OK ? "no errors" :
	    what);
	engine_verify_result_release(&res);
	return (er);
}

enum engine_result
engine_run_action(const struct engine_run *run, struct engine_run_step *s)
{
	s->done = 0;
	s->level = s->a->level;
	s->detail[0] = '\0';
	switch (s->a->job) {
	case POLICY_BACKUP:
		return (run_backup(run, s));
	case POLICY_EXPORT:
		return (run_export(run, s));
	case POLICY_FORGET:
	case POLICY_PRUNE:
		return (s->a->job == POLICY_FORGET ? run_forget(run, s) :
		    run_prune(run, s));
	case POLICY_DRILL:
		return (run_drill(run, s));
	case POLICY_VERIFY:
		return (run_verify(run, s));
	}
	log_error("no engine for a job of kind %d", s->a->job);
	return (ENGINE_ERROR);
}

/* The run's host and user, for the runs table. */
static void
who(char *host, size_t hsize, char *user, size_t usize)
{
	struct passwd *pw = getpwuid(geteuid());

	if (gethostname(host, hsize) != 0)
		snprintf(host, hsize, "?");
	host[hsize - 1] = '\0';
	snprintf(user, usize, "%s", pw != NULL ? pw->pw_name : "?");
}

int
engine_run_record(const struct engine_run *run, int64_t wall_ns,
    double seconds, int status, const struct engine_run_step *v, size_t n)
{
	struct catalog_run_action *acts;
	struct catalog_run cr;
	char host[256], user[64], path[PATH_MAX];
	uint8_t rid[SNAPSHOT_ID_HEX / 2];
	size_t i, k = 0;
	int rc;

	if ((acts = calloc(n + 1, sizeof(*acts))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < n; i++) {
		if (!v[i].ran)
			continue;
		acts[k].kind = policy_job_name(v[i].a->job);
		acts[k].subject = v[i].a->subject;
		acts[k].level = v[i].level >= 0 ?
		    catalog_level_name(v[i].level) : NULL;
		acts[k].slot_ns = v[i].a->slot;
		acts[k].status = v[i].status;
		acts[k].done = v[i].done;
		acts[k].seconds = v[i].seconds;
		acts[k].detail = v[i].detail;
		k++;
	}
	memset(&cr, 0, sizeof(cr));
	ccrypto_random(rid, sizeof(rid));
	hex_encode(cr.rid, rid, sizeof(rid));
	cr.time_ns = run->now;
	cr.wall_ns = wall_ns;
	cr.seconds = seconds;
	who(host, sizeof(host), user, sizeof(user));
	cr.host = host;
	cr.user = user;
	cr.policy = realpath(run->p->file, path) ? path : run->p->file;
	cr.status = status;
	rc = catalog_run_add(run->c, &cr, acts, k);
	free(acts);
	if (rc == 0)
		rc = engine_journal_flush(run->r, run->c);
	return (rc);
}
