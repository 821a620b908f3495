/*
 * coffer run --policy FILE [--dry-run] [--now TIME] [--json]
 *            [--metrics-file FILE]
 *
 * What a policy says is due, decided from the catalog's history and the
 * clock, done in a fixed order (backups, exports, forget and prune,
 * drills, verifies) by the engines in this process, under the repository's writer
 * lock for the whole run, so that two runs never overlap and the second
 * decides only after the first is done.  What is due: a job's newest
 * slot at or before now is later than the last time it was done
 * (schedule_due): a snapshot's start for a backup, a bundle's creation
 * for an export, the run's clock for forget, prune and drills (the runs
 * table).  A missed slot is therefore done once, at the next run.
 *
 * A policy holds any subset of sections: [retention], [drill] and
 * [verify] act on the datasets of the repository, which a backup host
 * does not back up itself.  What the unlocked key cannot do is refused
 * before anything runs, at the line that asks for it: a write-only key
 * backs up and exports, and nothing else.
 */
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/buf.h"
#include "coffer/catalog-history.h"
#include "coffer/crypto.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/policy.h"
#include "coffer/repo.h"
#include "coffer/progress.h"
#include "coffer/prom.h"
#include "coffer/signals.h"
#include "coffer/status.h"

enum kind { A_BACKUP, A_EXPORT, A_FORGET, A_PRUNE, A_DRILL, A_VERIFY };
static const char *const kind_names[] = {
	"backup", "export", "forget", "prune", "drill", "verify"
};

struct action {
	enum kind kind;
	const struct policy_dataset *ds;	/* backup, forget */
	const struct policy_export *ex;		/* export */
	const struct policy_drill *dr;		/* drill */
	const struct policy_verify *vf;		/* verify */
	const char *dataset;			/* drill, export, forget: one
						 * dataset */
	int level;				/* backup, export; else -1 */
	int64_t slot, last;			/* why it is due */
	char subject[160];
	char detail[256];
	int status, done, ran;
	double seconds;
};

struct run {
	const struct policy *p;
	const struct global_opts *g;
	struct repo *r;
	struct catalog *c;
	int64_t now;			/* the run's clock */
	int fake_clock;			/* --now */
	struct action *v;
	size_t n;
	char **repo_datasets;		/* with a complete snapshot, sorted */
	size_t nrepo_datasets;
	int warned;			/* a name the repository lacks */
};

const struct cmd_option cmd_run_options[] = {
	CMD_OPT_VALUE('p', "policy", "FILE", "the policy file"),
	CMD_OPT_LETTER_FLAG('n', "dry-run",
	    "say what is due now, and why; do nothing"),
	CMD_OPT_VALUE('N', "now", "TIME",
	    "take TIME (UTC) as now, for the schedules"),
	CMD_OPT_FLAG('j', "json", "print the run as JSON"),
	CMD_OPT_VALUE('m', "metrics-file", "FILE",
	    "write Prometheus metrics to FILE"),
	CMD_OPT_END
};

/* The order of badness of exit statuses: the run exits with its worst. */
static int
rank(int st)
{
	static const int order[] = { STATUS_OK, STATUS_WARN, STATUS_OBJECTIVE,
		STATUS_USAGE, STATUS_INTEGRITY, STATUS_CORRUPTION,
		STATUS_REPO, STATUS_ERROR };
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (order[i] == st)
			return ((int)i);
	return (99);			/* 128 + a signal */
}

int
cmd_run_worst(int a, int b)
{
	return (rank(b) > rank(a) ? b : a);
}

static struct action *
add(struct run *run, enum kind k)
{
	struct action *p;

	if ((p = reallocarray(run->v, run->n + 1, sizeof(*p))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	run->v = p;
	p = &run->v[run->n++];
	memset(p, 0, sizeof(*p));
	p->kind = k;
	p->level = -1;
	return (p);
}

/* The newest complete snapshot times of a dataset, by level covered. */
static int
snap_done(void *arg, const struct catalog_snapshot *s)
{
	int64_t *done = arg;
	int l;

	if (s->state != SNAP_COMPLETE)
		return (0);
	for (l = s->level; l < 3; l++)
		if (s->started_ns > done[l])
			done[l] = s->started_ns;
	return (0);
}

static int
bundle_done(void *arg, const struct catalog_bundle *b)
{
	int64_t *done = arg;
	int l;

	for (l = b->level; l < 3; l++)
		if (b->created_ns > done[l])
			done[l] = b->created_ns;
	return (0);
}

static int
count_snapshot(void *arg, const struct catalog_snapshot *s)
{
	if (s->state == SNAP_COMPLETE)
		(*(int *)arg)++;
	return (0);
}

/* The datasets of the repository: those with a complete snapshot. */
static int
repo_dataset(void *arg, const struct catalog_snapshot *s)
{
	struct run *run = arg;
	char **v, *d;

	if (s->state != SNAP_COMPLETE || s->dataset == NULL)
		return (0);
	if (run->nrepo_datasets > 0 && strcmp(run->repo_datasets[
	    run->nrepo_datasets - 1], s->dataset) == 0)
		return (0);
	if ((d = strdup(s->dataset)) == NULL || (v = reallocarray(
	    run->repo_datasets, run->nrepo_datasets + 1, sizeof(*v))) ==
	    NULL) {
		free(d);
		log_error("out of memory");
		return (-1);
	}
	v[run->nrepo_datasets++] = d;
	run->repo_datasets = v;
	return (0);
}

static int
by_name(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

static int
load_repo_datasets(struct run *run)
{
	size_t i, j;

	if (catalog_snapshot_list(run->c, NULL, repo_dataset, run) < 0)
		return (-1);
	if (run->nrepo_datasets > 1)
		qsort(run->repo_datasets, run->nrepo_datasets,
		    sizeof(*run->repo_datasets), by_name);
	for (i = j = 0; i < run->nrepo_datasets; i++) {
		if (j > 0 && strcmp(run->repo_datasets[j - 1],
		    run->repo_datasets[i]) == 0) {
			free(run->repo_datasets[i]);
			continue;
		}
		run->repo_datasets[j++] = run->repo_datasets[i];
	}
	run->nrepo_datasets = j;
	return (0);
}

static int
in_repo(const struct run *run, const char *name)
{
	/* bsearch wants a base even for no element. */
	return (run->nrepo_datasets > 0 && bsearch(&name, run->repo_datasets,
	    run->nrepo_datasets, sizeof(*run->repo_datasets), by_name) !=
	    NULL);
}

static const struct policy_dataset *
own_dataset(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->ndatasets; i++)
		if (strcmp(p->datasets[i].name, name) == 0)
			return (&p->datasets[i]);
	return (NULL);
}

/*
 * A dataset a section names that is neither the policy's nor the
 * repository's (yet: another host may not have backed it up): said, and
 * left out; the run ends with a warning.
 */
static int
known(struct run *run, const char *name, int line, const char *what)
{
	if (own_dataset(run->p, name) != NULL || in_repo(run, name))
		return (1);
	log_warn("%s:%d: no dataset '%s' in the repository (yet): no %s "
	    "for it", run->p->file, line, name, what);
	run->warned = 1;
	return (0);
}

/* The jobs of kind k of subject with one schedule: due since slot? */
static int
plan_simple(struct run *run, enum kind k, const char *subject,
    const struct schedule *sched, struct action **out)
{
	int64_t last, slot;
	struct action *a;

	*out = NULL;
	if (catalog_run_last(run->c, kind_names[k], subject, &last) < 0)
		return (-1);
	slot = schedule_last(sched, run->now);
	if (slot == INT64_MIN || slot <= last)
		return (0);
	if ((a = add(run, k)) == NULL)
		return (-1);
	a->slot = slot;
	a->last = last;
	snprintf(a->subject, sizeof(a->subject), "%s", subject);
	*out = a;
	return (0);
}

static int
plan(struct run *run)
{
	const struct policy *p = run->p;
	struct action *a;
	int64_t done[3], slot;
	size_t i, j, nd;
	int lvl, nsnaps = 0;

	for (i = 0; i < p->ndatasets; i++) {
		const struct policy_dataset *d = &p->datasets[i];

		memset(done, 0, sizeof(done));
		if (catalog_snapshot_list(run->c, d->name, snap_done, done) < 0)
			return (-1);
		if ((lvl = schedule_due(d->sched, done, run->now, &slot)) < 0)
			continue;
		if ((a = add(run, A_BACKUP)) == NULL)
			return (-1);
		a->ds = d;
		a->level = lvl;
		a->slot = slot;
		a->last = done[lvl];
		snprintf(a->subject, sizeof(a->subject), "%s", d->name);
	}
	for (i = 0; i < p->ndatasets; i++)
		if (catalog_snapshot_list(run->c, p->datasets[i].name,
		    count_snapshot, &nsnaps) < 0)
			return (-1);
	for (i = 0; i < p->nexports; i++) {
		const struct policy_export *e = &p->exports[i];
		int backups = 0;

		for (j = 0; j < run->n; j++)
			backups += run->v[j].kind == A_BACKUP;
		/* Nothing to send yet, and none on its way. */
		if (nsnaps == 0 && backups == 0)
			continue;
		memset(done, 0, sizeof(done));
		if (catalog_bundle_list(run->c, 1, e->target, bundle_done,
		    done) < 0)
			return (-1);
		if ((lvl = schedule_due(e->sched, done, run->now, &slot)) < 0)
			continue;
		for (j = 0; j < (e->ndatasets ? e->ndatasets : 1); j++) {
			if ((a = add(run, A_EXPORT)) == NULL)
				return (-1);
			a->ex = e;
			a->dataset = e->ndatasets ? e->datasets[j] : NULL;
			a->level = lvl;
			a->slot = slot;
			a->last = done[lvl];
			snprintf(a->subject, sizeof(a->subject), "%s",
			    e->target);
		}
	}
	if (p->prune_sched.kind != SCHED_NONE) {
		for (i = 0; i < p->ndatasets; i++) {
			const struct policy_dataset *d = &p->datasets[i];

			if (!retention_any(policy_retention(p, d)))
				continue;
			if (plan_simple(run, A_FORGET, d->name,
			    &p->prune_sched, &a) < 0)
				return (-1);
			if (a != NULL) {
				a->ds = d;
				a->dataset = d->name;
			}
		}
		/*
		 * [retention]'s rules over the repository's datasets: those
		 * it names, or, in a policy that backs up nothing, every
		 * one.  The policy's own were planned above.
		 */
		nd = p->nkeep_datasets ? p->nkeep_datasets :
		    p->ndatasets == 0 && retention_any(&p->keep) ?
		    run->nrepo_datasets : 0;
		for (j = 0; j < nd; j++) {
			const char *ds = p->nkeep_datasets ?
			    p->keep_datasets[j] : run->repo_datasets[j];

			if (own_dataset(p, ds) != NULL || !known(run, ds,
			    p->keep_datasets_line, "retention"))
				continue;
			if (plan_simple(run, A_FORGET, ds, &p->prune_sched,
			    &a) < 0)
				return (-1);
			if (a != NULL)
				a->dataset = ds;
		}
		if (p->prune && plan_simple(run, A_PRUNE, "", &p->prune_sched,
		    &a) < 0)
			return (-1);
	}
	for (i = 0; i < p->ndrills; i++) {
		const struct policy_drill *dr = &p->drills[i];
		char subject[160];

		/* Those it names, else the policy's, else the
		 * repository's. */
		nd = dr->ndatasets ? dr->ndatasets : p->ndatasets ?
		    p->ndatasets : run->nrepo_datasets;
		for (j = 0; j < nd; j++) {
			const char *ds = dr->ndatasets ? dr->datasets[j] :
			    p->ndatasets ? p->datasets[j].name :
			    run->repo_datasets[j];

			if (dr->ndatasets && !known(run, ds,
			    dr->datasets_line, "drill"))
				continue;
			snprintf(subject, sizeof(subject), "%s/%s", dr->name,
			    ds);
			if (plan_simple(run, A_DRILL, subject, &dr->sched,
			    &a) < 0)
				return (-1);
			if (a != NULL) {
				a->dr = dr;
				a->dataset = ds;
			}
		}
	}
	for (i = 0; i < p->nverifies; i++) {
		if (plan_simple(run, A_VERIFY, p->verifies[i].name,
		    &p->verifies[i].sched, &a) < 0)
			return (-1);
		if (a != NULL)
			a->vf = &p->verifies[i];
	}
	return (0);
}

static const char *
level_name(int level)
{
	return (level >= 0 ? catalog_level_name(level) : NULL);
}

/* Why it is due, for --dry-run: its slot, and when it was last done. */
static void
reason(const struct action *a, char *out, size_t size)
{
	char slot[32], last[32];

	fmt_time(slot, sizeof(slot), a->slot);
	if (a->last > 0) {
		fmt_time(last, sizeof(last), a->last);
		snprintf(out, size, "slot %s, last done %s", slot, last);
	} else
		snprintf(out, size, "slot %s, never done", slot);
}

/* One line: kind, subject, level, status, what came of it. */
static void
print_line(const struct action *a, int dry_run)
{
	char why[128], t[32];

	if (dry_run) {
		reason(a, why, sizeof(why));
		printf("would %-7s %-24s %-13s %s\n", kind_names[a->kind],
		    a->subject[0] ? fmt_text(a->subject) : "-",
		    a->level >= 0 ? catalog_level_name(a->level) : "-", why);
		return;
	}
	cmd_fmt_seconds(t, sizeof(t), a->seconds);
	printf("%-7s %-24s %-13s %-8s %s (%s)\n", kind_names[a->kind],
	    a->subject[0] ? fmt_text(a->subject) : "-",
	    a->level >= 0 ? catalog_level_name(a->level) : "-",
	    a->status == STATUS_OK ? "ok" : a->status == STATUS_WARN ?
	    "warning" : "FAILED", fmt_text(a->detail), t);
	fflush(stdout);
}

static void
print_json(const struct run *run, int dry_run, int status, double seconds)
{
	char when[32], why[128];
	struct jw j;
	size_t i;

	jw_init(&j, stdout);
	jw_begin_object(&j);
	fmt_time(when, sizeof(when), run->now);
	jw_str(jw_key(&j, "time"), when);
	jw_str(jw_key(&j, "policy"), run->p->file);
	jw_bool(jw_key(&j, "dry_run"), dry_run);
	if (!dry_run) {
		jw_int(jw_key(&j, "status"), status);
		jw_double(jw_key(&j, "seconds"), seconds, 3);
	}
	jw_begin_array_lines(jw_key(&j, "actions"));
	for (i = 0; i < run->n; i++) {
		const struct action *a = &run->v[i];

		jw_begin_object(&j);
		jw_str(jw_key(&j, "action"), kind_names[a->kind]);
		jw_str(jw_key(&j, "subject"), a->subject);
		jw_str(jw_key(&j, "level"), level_name(a->level));
		fmt_time(when, sizeof(when), a->slot);
		jw_str(jw_key(&j, "slot"), when);
		reason(a, why, sizeof(why));
		jw_str(jw_key(&j, "reason"), why);
		if (!dry_run) {
			jw_int(jw_key(&j, "status"), a->status);
			jw_double(jw_key(&j, "seconds"), a->seconds, 3);
			jw_str(jw_key(&j, "detail"), a->detail);
		}
		jw_end_object(&j);
	}
	jw_end_array(&j);
	jw_end_object(&j);
}

static int
do_backup(struct run *run, struct action *a)
{
	const struct policy_dataset *d = a->ds;
	struct backup_opts o;
	struct backup_result res;
	char rd[32], nw[32], held[48];
	int st;

	memset(&o, 0, sizeof(o));
	o.dataset = d->name;
	o.source = d->path;
	o.level = a->level;
	o.walk.root = 1;
	o.walk.one_file_system = d->one_file_system;
	o.walk.excludes = d->excludes;
	o.walk.nexcludes = d->nexcludes;
	o.time_ns = run->fake_clock ? run->now : 0;
	o.settle = d->settle;
	o.require = d->require;
	o.checkpoints = d->checkpoints;
	o.ncheckpoints = d->ncheckpoints;
	st = cmd_status(engine_backup(run->r, run->c, &o, &res));
	a->done = st == STATUS_OK || st == STATUS_WARN;
	if (!a->done) {
		snprintf(a->detail, sizeof(a->detail), "no snapshot");
		return (st);
	}
	fmt_bytes(rd, sizeof(rd), (double)res.bytes_read);
	fmt_bytes(nw, sizeof(nw), (double)res.bytes_new);
	snprintf(held, sizeof(held), ", %lld held back",
	    (long long)res.held_back);
	snprintf(a->detail, sizeof(a->detail), "snapshot %.12s, %s read, %s "
	    "new%s", res.sid, rd, nw, res.held_back ? held : "");
	return (st);
}

static int
do_export(struct run *run, struct action *a)
{
	struct catalog_snapshot snap;
	struct export_opts o;
	struct export_result res;
	char sz[32], name[160];
	int st, rc;

	memset(&o, 0, sizeof(o));
	memset(&snap, 0, sizeof(snap));
	o.target = a->ex->target;
	o.to = a->ex->to;
	o.level = a->level;
	o.now_ns = run->fake_clock ? run->now : 0;
	if (a->dataset != NULL) {
		snprintf(name, sizeof(name), "%s@latest", a->dataset);
		if ((rc = catalog_snapshot_find(run->c, name, &snap)) <= 0) {
			snprintf(a->detail, sizeof(a->detail), "no complete "
			    "snapshot of '%s'", a->dataset);
			return (rc < 0 ? STATUS_REPO : STATUS_USAGE);
		}
		o.snapshot = &snap;
	}
	st = cmd_status(engine_export(run->r, run->c, &o, &res));
	catalog_snapshot_release(&snap);
	a->done = st == STATUS_OK;
	if (!a->done) {
		snprintf(a->detail, sizeof(a->detail), "no bundle");
		return (st);
	}
	a->level = res.level;
	fmt_bytes(sz, sizeof(sz), (double)res.bytes);
	snprintf(a->detail, sizeof(a->detail), "bundle %s, %zu packs, %s",
	    res.name, res.packs, sz);
	return (st);
}

static int
do_forget(struct run *run, struct action *a)
{
	struct forget_opts o;
	struct forget_result res;
	int st;

	memset(&o, 0, sizeof(o));
	o.rules = a->ds != NULL ? *policy_retention(run->p, a->ds) :
	    run->p->keep;
	o.dataset = a->dataset;
	st = cmd_status(engine_forget(run->r, run->c, &o, &res));
	a->done = st == STATUS_OK;
	if (a->done)
		snprintf(a->detail, sizeof(a->detail), "forgot %zu of %zu "
		    "snapshots", res.forgotten, res.n);
	else
		snprintf(a->detail, sizeof(a->detail), "nothing forgotten");
	engine_forget_result_release(&res);
	return (st);
}

static int
do_prune(struct run *run, struct action *a)
{
	struct prune_opts o;
	struct prune_result res;
	char del[32];
	int st;

	memset(&o, 0, sizeof(o));
	o.max_unused = run->p->max_unused;
	st = cmd_status(engine_prune(run->r, run->c, &o, &res));
	a->done = st == STATUS_OK;
	if (!a->done) {
		snprintf(a->detail, sizeof(a->detail), "nothing deleted");
		return (st);
	}
	fmt_bytes(del, sizeof(del), (double)res.bytes_deleted);
	snprintf(a->detail, sizeof(a->detail), "%lld of %lld packs deleted "
	    "(%s), %lld repacked", (long long)(res.packs_deleted +
	    res.packs_repacked), (long long)res.packs, del,
	    (long long)res.packs_repacked);
	return (st);
}

static int
do_drill(struct run *run, struct action *a)
{
	const struct policy_drill *dr = a->dr;
	struct catalog_snapshot s;
	struct drill_opts o;
	struct drill_result res;
	char name[160], *source = NULL;
	int st, rc;

	memset(&o, 0, sizeof(o));
	memset(&s, 0, sizeof(s));
	memset(&res, 0, sizeof(res));
	o.sample = dr->sample;
	o.rto = dr->rto;
	o.rpo = dr->rpo;
	o.no_write = dr->no_write;
	o.now_ns = run->fake_clock ? run->now : 0;
	snprintf(name, sizeof(name), "%s@latest", a->dataset);
	if (dr->from != NULL) {
		const struct policy_export *e = policy_export_find(run->p,
		    dr->from);
		struct drill_bundles_opts bo;
		struct import_result imp;

		if (asprintf(&source, "bundles:%s", e->to) < 0) {
			source = NULL;
			return (STATUS_ERROR);
		}
		memset(&bo, 0, sizeof(bo));
		bo.from = e->to;
		bo.snapshot = name;
		bo.source = source;
		bo.drill = &o;
		bo.open_scratch = cmd_open_scratch;
		bo.arg = (void *)(uintptr_t)run->g;
		st = cmd_status(engine_drill_bundles(run->c, &bo, &s, &res,
		    &imp));
	} else if ((rc = catalog_snapshot_find(run->c, name, &s)) <= 0) {
		snprintf(a->detail, sizeof(a->detail), "no complete snapshot "
		    "of '%s'", a->dataset);
		return (rc < 0 ? STATUS_REPO : STATUS_USAGE);
	} else
		st = cmd_status(engine_drill(run->r, run->c, &s, &o, &res));
	/* A drill that ran is done, whatever its verdict. */
	a->done = res.rec.verdict != NULL;
	if (a->done)
		snprintf(a->detail, sizeof(a->detail), "snapshot %.12s: %s, "
		    "%lld files checked%s", res.rec.sid, res.rec.verdict,
		    (long long)res.rec.files, dr->from ? ", from bundles" :
		    "");
	else
		snprintf(a->detail, sizeof(a->detail), "no drill");
	engine_drill_result_release(&res);
	catalog_snapshot_release(&s);
	free(source);
	return (st);
}

static int
do_verify(struct run *run, struct action *a)
{
	const struct policy_verify *vf = a->vf;
	struct verify_opts o;
	struct verify_result res;
	char sz[32], what[64];
	int st;

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
			snprintf(a->detail, sizeof(a->detail), "no verify");
			return (STATUS_REPO);
		}
		break;
	default:
		o.read = VERIFY_STRUCTURE;
	}
	st = cmd_status(engine_verify(run->r, run->c, &o, &res));
	/* A verify that ran is done, whatever it found. */
	a->done = st == STATUS_OK || st == STATUS_INTEGRITY;
	if (!a->done) {
		snprintf(a->detail, sizeof(a->detail), "no verify");
		engine_verify_result_release(&res);
		return (st);
	}
	fmt_bytes(sz, sizeof(sz), (double)res.bytes_read);
	snprintf(what, sizeof(what), "%zu problem%s", res.ndamage +
	    res.nbad_records + res.nbad_packs + res.meta_errors,
	    res.ndamage + res.nbad_records + res.nbad_packs +
	    res.meta_errors == 1 ? "" : "s");
	snprintf(a->detail, sizeof(a->detail), "%s: %lld packs checked, "
	    "%lld read (%s)%s: %s", res.mode, (long long)res.packs,
	    (long long)res.packs_read, sz, res.complete ? "" :
	    ", stopped at its time limit", st == STATUS_OK ? "no errors" :
	    what);
	engine_verify_result_release(&res);
	return (st);
}

/*
 * What the key cannot do, refused once it is unlocked and before any
 * lock, use or action: each section that asks, at its line.
 */
struct refusal {
	const char *file;
	int n;
};

static void
refuse(void *arg, int line, const char *what)
{
	struct refusal *rf = arg;

	log_error("%s:%d: %s needs the key that reads (decrypts) the "
	    "repository; this key is write-only: it can back up and export "
	    "only (move this to the policy of a host with the full key)",
	    rf->file, line, what);
	rf->n++;
}

static int
check_key(const void *arg, struct repo *r)
{
	const struct policy *p = arg;
	struct refusal rf;

	if (!ccrypto_keys_write_only(repo_keys(r)))
		return (STATUS_OK);
	rf.file = p->file;
	rf.n = 0;
	policy_needs_read(p, refuse, &rf);
	if (rf.n == 0)
		return (STATUS_OK);
	log_error("%s: %d section%s this key cannot run; nothing was run",
	    p->file, rf.n, rf.n == 1 ? "" : "s");
	return (STATUS_USAGE);
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

static int
record(struct run *run, int status, int64_t wall, double seconds)
{
	struct catalog_run_action *v;
	struct catalog_run cr;
	char host[256], user[64], path[PATH_MAX];
	uint8_t rid[SNAPSHOT_ID_HEX / 2];
	size_t i, n = 0;
	int rc;

	if ((v = calloc(run->n + 1, sizeof(*v))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < run->n; i++) {
		const struct action *a = &run->v[i];

		if (!a->ran)
			continue;
		v[n].kind = kind_names[a->kind];
		v[n].subject = a->subject;
		v[n].level = level_name(a->level);
		v[n].slot_ns = a->slot;
		v[n].status = a->status;
		v[n].done = a->done;
		v[n].seconds = a->seconds;
		v[n].detail = a->detail;
		n++;
	}
	memset(&cr, 0, sizeof(cr));
	ccrypto_random(rid, sizeof(rid));
	hex_encode(cr.rid, rid, sizeof(rid));
	cr.time_ns = run->now;
	cr.wall_ns = wall;
	cr.seconds = seconds;
	who(host, sizeof(host), user, sizeof(user));
	cr.host = host;
	cr.user = user;
	cr.policy = realpath(run->p->file, path) ? path : run->p->file;
	cr.status = status;
	rc = catalog_run_add(run->c, &cr, v, n);
	free(v);
	return (rc);
}

int
cmd_run_policy(int argc, char **argv, const struct global_opts *g)
{
	struct global_opts pg = *g;
	struct policy *p = NULL;
	struct run run;
	const char *policy = NULL, *metrics = NULL;
	int64_t wall;
	double secs;
	size_t i;
	int ch, st, worst = STATUS_OK, dry_run = 0, json = 0, shown;

	memset(&run, 0, sizeof(run));
	while ((ch = cmd_getopt(argc, argv, cmd_run_options)) != -1) {
		switch (ch) {
		case 'p':
			policy = optarg;
			break;
		case 'n':
			dry_run = 1;
			break;
		case 'N':
			if (cmd_parse_time("--now", optarg, &run.now))
				return (STATUS_USAGE);
			run.fake_clock = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'm':
			if (*optarg == '\0') {
				log_error("empty --metrics-file");
				return (STATUS_USAGE);
			}
			metrics = optarg;
			break;
		default:
			return (cmd_usage_error("run"));
		}
	}
	if (optind != argc || policy == NULL)
		return (cmd_usage_error("run"));
	if ((p = policy_load(policy)) == NULL)
		return (STATUS_USAGE);
	/* The policy's repository and key, else the command line's. */
	if (p->repo)
		pg.repo = p->repo;
	if (p->key_file)
		pg.key_file = p->key_file;
	if (p->passphrase_file)
		pg.passphrase_file = p->passphrase_file;
	if (p->catalog)
		pg.catalog = p->catalog;
	if (metrics == NULL)
		metrics = p->metrics_file;
	wall = now_realtime_ns();
	if (!run.fake_clock)
		run.now = wall;
	run.p = p;
	run.g = &pg;
	signals_install();
	/*
	 * A run holds the writer lock from before it decides until it is
	 * done: a second run waits (--wait) and then finds done what the
	 * first did, or fails at once with --no-wait.  A dry run writes
	 * nothing and takes no lock.
	 */
	if ((st = cmd_open_checked(&pg, dry_run ? OPEN_KEYS :
	    OPEN_KEYS | OPEN_WRITE, check_key, p, &run.r, &run.c)) !=
	    STATUS_OK)
		goto out;
	if (load_repo_datasets(&run) || plan(&run)) {
		st = STATUS_ERROR;
		goto close;
	}
	if (dry_run) {
		if (json)
			print_json(&run, 1, 0, 0);
		else if (run.n == 0 && log_level >= 0)
			printf("nothing is due\n");
		else
			for (i = 0; i < run.n; i++)
				print_line(&run.v[i], 1);
		st = STATUS_OK;
		goto close;
	}
	shown = !json && log_level >= 0 && (log_level > 0 ||
	    isatty(STDOUT_FILENO));
	for (i = 0; i < run.n; i++) {
		struct action *a = &run.v[i];
		double t0 = now_monotonic();

		if (signals_caught())
			break;
		switch (a->kind) {
		case A_BACKUP:
			a->status = do_backup(&run, a);
			break;
		case A_EXPORT:
			a->status = do_export(&run, a);
			break;
		case A_FORGET:
			a->status = do_forget(&run, a);
			break;
		case A_PRUNE:
			a->status = do_prune(&run, a);
			break;
		case A_DRILL:
			a->status = do_drill(&run, a);
			break;
		case A_VERIFY:
			a->status = do_verify(&run, a);
			break;
		}
		a->ran = 1;
		a->seconds = now_monotonic() - t0;
		worst = cmd_run_worst(worst, a->status);
		/* Quiet under cron: a line for a person, or a problem. */
		if (shown || (!json && a->status != STATUS_OK))
			print_line(a, 0);
	}
	if (run.warned)
		worst = cmd_run_worst(worst, STATUS_WARN);
	if (signals_caught())
		worst = cmd_run_worst(worst, 128 + signals_caught());
	secs = (double)(now_realtime_ns() - wall) / 1e9;
	/* A run that did nothing leaves no trace: cron calls it hourly. */
	if (run.n > 0 && (record(&run, worst, wall, secs) ||
	    engine_journal_flush(run.r, run.c)))
		worst = cmd_run_worst(worst, STATUS_ERROR);
	if (json)
		print_json(&run, 0, worst, secs);
	if (metrics != NULL && cmd_run_metrics(run.c, p, metrics, run.now,
	    worst, secs))
		worst = cmd_run_worst(worst, STATUS_ERROR);
	st = worst;
close:
	cmd_close(run.r, run.c);
out:
	free(run.v);
	names_free(run.repo_datasets, run.nrepo_datasets);
	policy_free(p);
	return (st);
}
