/*
 * Where the backups stand, read from the catalog
 * (include/coffer/engine-status.h): each dataset's newest complete
 * snapshot and last drill, each target's newest exported bundle, the
 * newest verify run.  One pass over each table's list, whatever the
 * number of datasets asked for.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/engine-status.h"
#include "coffer/log.h"
#include "coffer/policy.h"

/* A pass over one list: the report it fills, and whether a name the
 * selection did not give is added (the catalog's every name) or left. */
struct pass {
	struct engine_status *st;
	int add;
};

/*
 * The entry called name of the array *vp of *n entries of size bytes,
 * each starting with its malloc'd name; with add, a new one (zeroed but
 * for its name) when none is.  NULL when there is none, or no memory
 * (reported, *err set).
 */
static void *
entry_at(void **vp, size_t *n, size_t size, const char *name, int add,
    int *err)
{
	char *p = *vp, *dup;
	size_t i;

	for (i = 0; i < *n; i++, p += size)
		if (strcmp(*(char **)(void *)p, name) == 0)
			return (p);
	if (!add)
		return (NULL);
	if ((dup = strdup(name)) == NULL ||
	    (p = reallocarray(*vp, *n + 1, size)) == NULL) {
		free(dup);
		log_error("out of memory");
		*err = 1;
		return (NULL);
	}
	*vp = p;
	p += *n * size;
	memset(p, 0, size);
	memcpy(p, &dup, sizeof(dup));
	(*n)++;
	return (p);
}

_Static_assert(offsetof(struct engine_status_dataset, name) == 0 &&
    offsetof(struct engine_status_target, name) == 0,
    "a report's entries start with their names");

/* The report's dataset, or target, called name (entry_at). */
static struct engine_status_dataset *
dataset_find(struct pass *ps, const char *name, int *err)
{
	void *v = ps->st->datasets;
	struct engine_status_dataset *d;

	d = entry_at(&v, &ps->st->ndatasets, sizeof(*d), name, ps->add, err);
	ps->st->datasets = v;
	return (d);
}

static struct engine_status_target *
target_find(struct pass *ps, const char *name, int *err)
{
	void *v = ps->st->targets;
	struct engine_status_target *t;

	t = entry_at(&v, &ps->st->ntargets, sizeof(*t), name, ps->add, err);
	ps->st->targets = v;
	return (t);
}

/* The newest complete snapshot: the list is oldest first. */
static int
newest(void *arg, const struct catalog_snapshot *s)
{
	struct engine_status_dataset *d;
	int err = 0;

	if ((d = dataset_find(arg, s->dataset, &err)) != NULL &&
	    s->state == SNAP_COMPLETE &&
	    (!d->have || s->started_ns >= d->last.started_ns)) {
		memcpy(d->last.sid, s->sid, sizeof(d->last.sid));
		d->last.level = s->level;
		d->last.started_ns = s->started_ns;
		d->last.finished_ns = s->finished_ns;
		d->last.bytes_read = s->bytes_read;
		d->last.bytes_new = s->bytes_new;
		d->last.bytes_stored = s->bytes_stored;
		d->last.warnings = s->warnings;
		d->have = 1;
	}
	return (err ? -1 : 0);
}

/* Each dataset's last drill: the list gives only those. */
static int
last_drill(void *arg, const struct catalog_drill *dr)
{
	struct engine_status_dataset *d;
	int err = 0;

	if ((d = dataset_find(arg, dr->dataset, &err)) != NULL) {
		d->drilled = 1;
		d->drill.time_ns = dr->time_ns;
		d->drill.seconds = dr->seconds;
		snprintf(d->drill.verdict, sizeof(d->drill.verdict), "%s",
		    dr->verdict ? dr->verdict : "");
	}
	return (err ? -1 : 0);
}

static int
newest_bundle(void *arg, const struct catalog_bundle *b)
{
	struct engine_status_target *t;
	int err = 0;

	if ((t = target_find(arg, b->target, &err)) != NULL &&
	    b->created_ns > t->last_ns)
		t->last_ns = b->created_ns;
	return (err ? -1 : 0);
}

/* The newest verify run: the list is oldest first. */
static int
last_verify(void *arg, const struct catalog_verify_run *v)
{
	struct engine_status_verify *vs = arg;

	vs->have = 1;
	vs->time_ns = v->time_ns;
	snprintf(vs->mode, sizeof(vs->mode), "%s", v->mode ? v->mode : "");
	vs->complete = v->complete;
	vs->damage = v->damage;
	snprintf(vs->verdict, sizeof(vs->verdict), "%s",
	    v->verdict ? v->verdict : "");
	return (0);
}

/* Each dataset's newest capture by coffer watch. */
static int
captures(struct catalog *c, struct engine_status *st)
{
	struct engine_status_dataset *d;
	int64_t marked, end;
	size_t i;
	int rc;

	for (i = 0; i < st->ndatasets; i++) {
		d = &st->datasets[i];
		if ((rc = catalog_run_capture(c, d->name, &marked, &end)) < 0)
			return (-1);
		d->captured = rc == 1;
		d->capture_delay = rc == 1 && end > marked ?
		    (double)(end - marked) / 1e9 : 0;
	}
	return (0);
}

/* Whether drill dr of the policy covers dataset name. */
static int
drill_covers(const struct policy_drill *dr, const char *name)
{
	size_t i;

	if (dr->ndatasets == 0)
		return (1);
	for (i = 0; i < dr->ndatasets; i++)
		if (strcmp(dr->datasets[i], name) == 0)
			return (1);
	return (0);
}

/*
 * When a job with schedule s, last done at last_ns (0: never), was next
 * due: the first slot after it, or the newest at or before now when it
 * was never done (coffer run does it at its first run after a slot); 0
 * when s has no slot then.  *due is lowered to it: of several schedules,
 * the first due.
 */
static void
next_due(const struct schedule *s, int64_t last_ns, int64_t now,
    int64_t *due)
{
	int64_t t;

	if (s->kind == SCHED_NONE)
		return;
	t = last_ns > 0 ? schedule_next(s, last_ns) : schedule_last(s, now);
	if (t == INT64_MIN || t == INT64_MAX || t <= 0)
		return;
	if (*due == 0 || t < *due)
		*due = t;
}

/* Lower *v to x (x > 0); 0 is none. */
static void
smallest(double *v, double x)
{
	if (x > 0 && (!(*v > 0) || x < *v))
		*v = x;
}

static void
objectives(const struct policy *p, int64_t now, struct engine_status *st)
{
	struct engine_status_dataset *d;
	struct engine_status_target *t;
	const struct policy_export *e;
	size_t i, j;
	int l;

	for (i = 0; i < st->ndatasets; i++) {
		d = &st->datasets[i];
		for (j = 0; j < p->ndrills; j++) {
			if (!drill_covers(&p->drills[j], d->name))
				continue;
			smallest(&d->rpo, p->drills[j].rpo);
			smallest(&d->rto, p->drills[j].rto);
			if (now > 0)
				next_due(&p->drills[j].sched, d->drilled ?
				    d->drill.time_ns : 0, now,
				    &d->drill_due_ns);
		}
	}
	for (i = 0; now > 0 && i < st->ntargets; i++) {
		t = &st->targets[i];
		if ((e = policy_export_find(p, t->name)) == NULL)
			continue;
		for (l = 0; l < 3; l++)
			next_due(&e->sched[l], t->last_ns, now, &t->due_ns);
	}
}

static int
cmp_dataset(const void *a, const void *b)
{
	return (strcmp(((const struct engine_status_dataset *)a)->name,
	    ((const struct engine_status_dataset *)b)->name));
}

/* The datasets and targets asked for, each once, before the passes
 * fill them. */
static int
select_names(const struct engine_status_opts *o, struct engine_status *st)
{
	const struct policy *p = o->policy;
	struct pass ps = { st, 1 };
	size_t i;
	int err = 0;

	for (i = 0; i < o->ndatasets && !err; i++)
		(void)dataset_find(&ps, o->datasets[i], &err);
	for (i = 0; o->ndatasets == 0 && p != NULL && i < p->ndatasets &&
	    !err; i++)
		(void)dataset_find(&ps, p->datasets[i].name, &err);
	for (i = 0; i < o->ntargets && !err; i++)
		(void)target_find(&ps, o->targets[i], &err);
	for (i = 0; o->ntargets == 0 && p != NULL && i < p->nexports &&
	    !err; i++)
		(void)target_find(&ps, p->exports[i].target, &err);
	return (err ? -1 : 0);
}

int
engine_status(struct catalog *c, const struct engine_status_opts *o,
    struct engine_status *st)
{
	static const struct engine_status_opts all;
	struct pass ps = { st, 0 };
	int all_datasets, all_targets;

	if (o == NULL)
		o = &all;
	memset(st, 0, sizeof(*st));
	/* A policy without datasets (a host that only drills or verifies)
	 * drills the repository's: those are the ones to report. */
	all_datasets = o->ndatasets == 0 &&
	    (o->policy == NULL || o->policy->ndatasets == 0);
	all_targets = o->ntargets == 0 && o->policy == NULL;
	if (select_names(o, st))
		goto err;
	ps.add = all_datasets;
	if (catalog_snapshot_list(c, NULL, newest, &ps) ||
	    catalog_drill_list(c, NULL, 1, last_drill, &ps))
		goto err;
	if (all_datasets && st->ndatasets > 1)
		qsort(st->datasets, st->ndatasets, sizeof(*st->datasets),
		    cmp_dataset);
	ps.add = all_targets;
	if (catalog_bundle_list(c, 1, NULL, newest_bundle, &ps) ||
	    catalog_verify_run_list(c, last_verify, &st->verify) ||
	    captures(c, st))
		goto err;
	if (o->policy != NULL)
		objectives(o->policy, o->now, st);
	return (0);
err:
	engine_status_release(st);
	return (-1);
}

void
engine_status_release(struct engine_status *st)
{
	size_t i;

	for (i = 0; i < st->ndatasets; i++)
		free(st->datasets[i].name);
	for (i = 0; i < st->ntargets; i++)
		free(st->targets[i].name);
	free(st->datasets);
	free(st->targets);
	memset(st, 0, sizeof(*st));
}
