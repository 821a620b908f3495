/*
 * Where the backups stand, read from the catalog
 * (include/coffer/engine-status.h): each dataset's newest complete
 * snapshot and last drill, each target's newest exported bundle, the
 * newest verify run.  One pass over each table's list, whatever the
 * number of datasets asked for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/engine-status.h"
#include "coffer/log.h"

/* A pass over one list: the report it fills, and whether a name the
 * selection did not give is added (the catalog's every name) or left. */
struct pass {
	struct engine_status *st;
	int add;
};

static int
grow(void *vp, size_t n, size_t size, void **out)
{
	void *p;

	if ((p = reallocarray(vp, n + 1, size)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	*out = p;
	return (0);
}

static struct engine_status_dataset *
dataset_add(struct engine_status *st, const char *name)
{
	struct engine_status_dataset *d;
	void *p;

	if (grow(st->datasets, st->ndatasets, sizeof(*d), &p))
		return (NULL);
	st->datasets = p;
	d = &st->datasets[st->ndatasets];
	memset(d, 0, sizeof(*d));
	if ((d->name = strdup(name)) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	st->ndatasets++;
	return (d);
}

static struct engine_status_target *
target_add(struct engine_status *st, const char *name)
{
	struct engine_status_target *t;
	void *p;

	if (grow(st->targets, st->ntargets, sizeof(*t), &p))
		return (NULL);
	st->targets = p;
	t = &st->targets[st->ntargets];
	memset(t, 0, sizeof(*t));
	if ((t->name = strdup(name)) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	st->ntargets++;
	return (t);
}

/* The report's dataset called name; with add, a new one when there is
 * none.  NULL when there is none (or no memory: *err). */
static struct engine_status_dataset *
dataset_find(struct pass *ps, const char *name, int *err)
{
	struct engine_status *st = ps->st;
	struct engine_status_dataset *d;
	size_t i;

	for (i = 0; i < st->ndatasets; i++)
		if (strcmp(st->datasets[i].name, name) == 0)
			return (&st->datasets[i]);
	if (!ps->add)
		return (NULL);
	*err = (d = dataset_add(st, name)) == NULL;
	return (d);
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
		snprintf(d->drill.verdict, sizeof(d->drill.verdict), "%s",
		    dr->verdict ? dr->verdict : "");
	}
	return (err ? -1 : 0);
}

/* The report's target called name; with add, a new one when there is
 * none.  NULL when there is none or no memory (reported). */
static struct engine_status_target *
target_find(struct pass *ps, const char *name)
{
	struct engine_status *st = ps->st;
	size_t i;

	for (i = 0; i < st->ntargets; i++)
		if (strcmp(st->targets[i].name, name) == 0)
			return (&st->targets[i]);
	return (ps->add ? target_add(st, name) : NULL);
}

static int
newest_bundle(void *arg, const struct catalog_bundle *b)
{
	struct pass *ps = arg;
	struct engine_status_target *t;

	if ((t = target_find(ps, b->target)) == NULL)
		return (ps->add ? -1 : 0);
	if (b->created_ns > t->last_ns)
		t->last_ns = b->created_ns;
	return (0);
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

static void
objectives(const struct policy *p, struct engine_status *st)
{
	struct engine_status_dataset *d;
	size_t i, j;

	for (i = 0; i < st->ndatasets; i++) {
		d = &st->datasets[i];
		for (j = 0; j < p->ndrills; j++)
			if (p->drills[j].rpo > 0 &&
			    drill_covers(&p->drills[j], d->name) &&
			    (!(d->rpo > 0) || p->drills[j].rpo < d->rpo))
				d->rpo = p->drills[j].rpo;
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
		err = target_find(&ps, o->targets[i]) == NULL;
	for (i = 0; o->ntargets == 0 && p != NULL && i < p->nexports &&
	    !err; i++)
		err = target_find(&ps, p->exports[i].target) == NULL;
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
	all_datasets = o->ndatasets == 0 && o->policy == NULL;
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
	    catalog_verify_run_list(c, last_verify, &st->verify))
		goto err;
	if (o->policy != NULL)
		objectives(o->policy, st);
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
