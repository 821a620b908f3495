/*
 * What a policy has due (include/coffer/policy.h, policy_due): the jobs of
 * its sections, each judged from its schedules, the clock and the history
 * given, in the order coffer run does them: backups, exports (so that they
 * carry the new snapshots), forgets and the prune, drills (so that they
 * test them), verifies.  No catalog, no clock, no output: the caller
 * brings the history, and the reasons are returned as text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/policy.h"

static const char *const job_names[POLICY_JOBS] = {
	"backup", "export", "forget", "prune", "drill", "verify"
};
static const char *const level_names[3] = {
	"full", "differential", "incremental"
};

struct due {
	const struct policy *p;
	int64_t now;
	const struct policy_event *h;
	size_t nh;
	const char **repo;		/* datasets with a complete snapshot,
					 * sorted, unique: into h */
	size_t nrepo;
	struct policy_plan *out;
};

const char *
policy_job_name(int job)
{
	return (job >= 0 && job < POLICY_JOBS ? job_names[job] : "?");
}

static struct policy_action *
add(struct due *d, int job, const char *subject)
{
	struct policy_plan *pl = d->out;
	struct policy_action *a;

	if ((a = reallocarray(pl->v, pl->n + 1, sizeof(*a))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	pl->v = a;
	a = &pl->v[pl->n++];
	memset(a, 0, sizeof(*a));
	a->job = job;
	a->level = -1;
	snprintf(a->subject, sizeof(a->subject), "%s", subject);
	return (a);
}

static void
set_due(struct due *d, struct policy_action *a, int64_t slot, int64_t last)
{
	char s[32], l[32];

	a->due = 1;
	a->slot = slot;
	a->last = last;
	d->out->ndue++;
	fmt_time(s, sizeof(s), slot);
	if (last > 0) {
		fmt_time(l, sizeof(l), last);
		snprintf(a->reason, sizeof(a->reason), "slot %s, last done %s",
		    s, l);
	} else
		snprintf(a->reason, sizeof(a->reason), "slot %s, never done",
		    s);
}

/* "last done T" or "never done", into out. */
static void
fmt_last(char *out, size_t size, int64_t last)
{
	char t[32];

	if (last > 0) {
		fmt_time(t, sizeof(t), last);
		snprintf(out, size, "last done %s", t);
	} else
		snprintf(out, size, "never done");
}

/* "next slot T (SCHEDULE)", or "no slot in two years (SCHEDULE)". */
static void
fmt_next(char *out, size_t size, const struct schedule *s, int64_t next)
{
	char t[32], f[48];

	schedule_format(s, f, sizeof(f));
	if (next == INT64_MAX) {
		snprintf(out, size, "no slot in two years (%s)", f);
		return;
	}
	fmt_time(t, sizeof(t), next);
	snprintf(out, size, "next slot %s (%s)", t, f);
}

/*
 * The newest time a job of subject was done, by level covered (a full
 * covers every level, a differential an incremental) for backups and
 * exports, in done[0] alone for the others; 0 when never.
 */
static void
last_done(const struct due *d, int job, const char *subject, int64_t done[3])
{
	const struct policy_event *e;
	size_t i;
	int l;

	memset(done, 0, 3 * sizeof(*done));
	for (i = 0; i < d->nh; i++) {
		e = &d->h[i];
		if (e->job != job || !e->ok || e->subject == NULL ||
		    strcmp(e->subject, subject) != 0)
			continue;
		if (job != POLICY_BACKUP && job != POLICY_EXPORT) {
			if (e->time_ns > done[0])
				done[0] = e->time_ns;
			continue;
		}
		for (l = e->level < 0 ? 0 : e->level; l < 3; l++)
			if (e->time_ns > done[l])
				done[l] = e->time_ns;
	}
}

/* Why a job of three schedules is not due: each level's last and next. */
static void
level_reason(struct policy_action *a, const struct schedule sched[3],
    const int64_t done[3], int64_t now)
{
	char last[48], next[112];
	size_t off = 0;
	int l;

	a->slot = INT64_MAX;
	for (l = 0; l < 3; l++) {
		int64_t nx;

		if (sched[l].kind == SCHED_NONE)
			continue;
		nx = schedule_next(&sched[l], now);
		if (nx < a->slot)
			a->slot = nx;
		fmt_last(last, sizeof(last), done[l]);
		fmt_next(next, sizeof(next), &sched[l], nx);
		off += (size_t)snprintf(a->reason + off, sizeof(a->reason) -
		    off, "%s%s: %s, %s", off ? "; " : "", level_names[l], last,
		    next);
		if (off >= sizeof(a->reason))
			break;
	}
}

/* A job at three levels (a dataset's backup, a target's export). */
static struct policy_action *
plan_levels(struct due *d, int job, const char *subject,
    const struct schedule sched[3])
{
	struct policy_action *a;
	int64_t done[3], slot;
	int lvl;

	last_done(d, job, subject, done);
	if ((a = add(d, job, subject)) == NULL)
		return (NULL);
	if ((lvl = schedule_due(sched, done, d->now, &slot)) < 0) {
		level_reason(a, sched, done, d->now);
		return (a);
	}
	a->level = lvl;
	set_due(d, a, slot, done[lvl]);
	return (a);
}

/* A job of one schedule: due when its newest slot is after its last. */
static struct policy_action *
plan_simple(struct due *d, int job, const char *subject,
    const struct schedule *sched)
{
	struct policy_action *a;
	int64_t done[3], slot;
	char last[48], next[112];

	last_done(d, job, subject, done);
	if ((a = add(d, job, subject)) == NULL)
		return (NULL);
	slot = schedule_last(sched, d->now);
	if (slot != INT64_MIN && slot > done[0]) {
		set_due(d, a, slot, done[0]);
		return (a);
	}
	a->last = done[0];
	a->slot = schedule_next(sched, d->now);
	fmt_last(last, sizeof(last), done[0]);
	fmt_next(next, sizeof(next), sched, a->slot);
	snprintf(a->reason, sizeof(a->reason), "%s, %s", last, next);
	return (a);
}

static int
by_name(const void *a, const void *b)
{
	return (strcmp(*(const char *const *)a, *(const char *const *)b));
}

/* The datasets of the repository: those with a complete snapshot. */
static int
repo_datasets(struct due *d)
{
	size_t i, j;

	if (d->nh == 0)
		return (0);
	if ((d->repo = calloc(d->nh, sizeof(*d->repo))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < d->nh; i++)
		if (d->h[i].job == POLICY_BACKUP && d->h[i].ok &&
		    d->h[i].subject != NULL)
			d->repo[d->nrepo++] = d->h[i].subject;
	if (d->nrepo > 1)
		qsort(d->repo, d->nrepo, sizeof(*d->repo), by_name);
	for (i = j = 0; i < d->nrepo; i++)
		if (j == 0 || strcmp(d->repo[j - 1], d->repo[i]) != 0)
			d->repo[j++] = d->repo[i];
	d->nrepo = j;
	return (0);
}

/*
 * A dataset a section names that is neither the policy's nor the
 * repository's (yet: another host may not have backed it up): a warning,
 * and no job for it.  1 known, 0 not, -1 out of memory.
 */
static int
known(struct due *d, int job, const char *name, int line)
{
	struct policy_action *a;

	/* bsearch wants a base even for no element. */
	if (policy_dataset_find(d->p, name) != NULL || (d->nrepo > 0 &&
	    bsearch(&name, d->repo, d->nrepo, sizeof(*d->repo), by_name) !=
	    NULL))
		return (1);
	if ((a = add(d, job, name)) == NULL)
		return (-1);
	a->warn = 1;
	a->line = line;
	a->dataset = name;
	a->slot = INT64_MAX;
	snprintf(a->reason, sizeof(a->reason), "no dataset '%s' in the "
	    "repository (yet): no %s for it", name, job == POLICY_FORGET ?
	    "retention" : job_names[job]);
	d->out->warned = 1;
	return (0);
}

static int
plan_backups(struct due *d)
{
	const struct policy *p = d->p;
	struct policy_action *a;
	size_t i;

	for (i = 0; i < p->ndatasets; i++) {
		if ((a = plan_levels(d, POLICY_BACKUP, p->datasets[i].name,
		    p->datasets[i].sched)) == NULL)
			return (-1);
		a->ds = &p->datasets[i];
		a->dataset = p->datasets[i].name;
	}
	return (0);
}

static int
plan_exports(struct due *d)
{
	const struct policy *p = d->p;
	struct policy_action *a, proto;
	size_t i, j, k, nsnaps = 0, backups = 0;

	/* A policy of no datasets (a backup host's) sends the repository's,
	 * as its retention and drills judge them. */
	if (p->ndatasets == 0)
		nsnaps = d->nrepo;
	else
		for (i = 0; i < d->nh; i++)
			if (d->h[i].job == POLICY_BACKUP && d->h[i].ok &&
			    d->h[i].subject != NULL &&
			    policy_dataset_find(p, d->h[i].subject) != NULL)
				nsnaps++;
	for (i = 0; i < d->out->n; i++)
		backups += d->out->v[i].job == POLICY_BACKUP &&
		    d->out->v[i].due;
	for (i = 0; i < p->nexports; i++) {
		const struct policy_export *e = &p->exports[i];

		/* Nothing to send yet, and none on its way. */
		if (nsnaps == 0 && backups == 0) {
			if ((a = add(d, POLICY_EXPORT, e->target)) == NULL)
				return (-1);
			a->ex = e;
			a->slot = INT64_MAX;
			snprintf(a->reason, sizeof(a->reason), "nothing to "
			    "send: no complete snapshot of the policy's "
			    "datasets (or the repository's, when it names "
			    "none), and no backup due");
			continue;
		}
		if ((a = plan_levels(d, POLICY_EXPORT, e->target, e->sched)) ==
		    NULL)
			return (-1);
		a->ex = e;
		a->dataset = e->ndatasets ? e->datasets[0] : NULL;
		if (!a->due || e->ndatasets < 2)
			continue;
		/* One bundle a dataset it names, each for the same slot. */
		proto = *a;
		for (k = 1; k < e->ndatasets; k++) {
			if ((a = add(d, POLICY_EXPORT, e->target)) == NULL)
				return (-1);
			j = d->out->n - 1;
			d->out->v[j] = proto;
			d->out->v[j].dataset = e->datasets[k];
			d->out->ndue++;
		}
	}
	return (0);
}

static int
plan_forgets(struct due *d)
{
	const struct policy *p = d->p;
	struct policy_action *a;
	const char *ds;
	size_t i, nd;
	int rc;

	if (p->prune_sched.kind == SCHED_NONE)
		return (0);
	for (i = 0; i < p->ndatasets; i++) {
		const struct policy_dataset *pd = &p->datasets[i];

		if (!retention_any(policy_retention(p, pd)))
			continue;
		if ((a = plan_simple(d, POLICY_FORGET, pd->name,
		    &p->prune_sched)) == NULL)
			return (-1);
		a->ds = pd;
		a->dataset = pd->name;
	}
	/*
	 * [retention]'s rules over the repository's datasets: those it
	 * names, or, in a policy that backs up nothing, every one.  The
	 * policy's own were planned above.
	 */
	nd = p->nkeep_datasets ? p->nkeep_datasets : p->ndatasets == 0 &&
	    retention_any(&p->keep) ? d->nrepo : 0;
	for (i = 0; i < nd; i++) {
		ds = p->nkeep_datasets ? p->keep_datasets[i] : d->repo[i];
		if (policy_dataset_find(p, ds) != NULL)
			continue;
		if ((rc = known(d, POLICY_FORGET, ds,
		    p->keep_datasets_line)) <= 0) {
			if (rc < 0)
				return (-1);
			continue;
		}
		if ((a = plan_simple(d, POLICY_FORGET, ds, &p->prune_sched)) ==
		    NULL)
			return (-1);
		a->dataset = ds;
	}
	if (p->prune && plan_simple(d, POLICY_PRUNE, "", &p->prune_sched) ==
	    NULL)
		return (-1);
	return (0);
}

static int
plan_drills(struct due *d)
{
	const struct policy *p = d->p;
	struct policy_action *a;
	char subject[160];
	const char *ds;
	size_t i, j, nd;
	int rc;

	for (i = 0; i < p->ndrills; i++) {
		const struct policy_drill *dr = &p->drills[i];

		/* Those it names, else the policy's, else the
		 * repository's. */
		nd = dr->ndatasets ? dr->ndatasets : p->ndatasets ?
		    p->ndatasets : d->nrepo;
		for (j = 0; j < nd; j++) {
			ds = dr->ndatasets ? dr->datasets[j] : p->ndatasets ?
			    p->datasets[j].name : d->repo[j];
			if (dr->ndatasets && (rc = known(d, POLICY_DRILL, ds,
			    dr->datasets_line)) <= 0) {
				if (rc < 0)
					return (-1);
				continue;
			}
			snprintf(subject, sizeof(subject), "%s/%s", dr->name,
			    ds);
			if ((a = plan_simple(d, POLICY_DRILL, subject,
			    &dr->sched)) == NULL)
				return (-1);
			a->dr = dr;
			a->dataset = ds;
		}
	}
	return (0);
}

static int
plan_verifies(struct due *d)
{
	const struct policy *p = d->p;
	struct policy_action *a;
	size_t i;

	for (i = 0; i < p->nverifies; i++) {
		if ((a = plan_simple(d, POLICY_VERIFY, p->verifies[i].name,
		    &p->verifies[i].sched)) == NULL)
			return (-1);
		a->vf = &p->verifies[i];
	}
	return (0);
}

int
policy_due(const struct policy *p, int64_t now, const struct policy_event *h,
    size_t n, struct policy_plan *out)
{
	struct due d;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&d, 0, sizeof(d));
	d.p = p;
	d.now = now;
	d.h = h;
	d.nh = n;
	d.out = out;
	rc = repo_datasets(&d) || plan_backups(&d) || plan_exports(&d) ||
	    plan_forgets(&d) || plan_drills(&d) || plan_verifies(&d) ? -1 : 0;
	free(d.repo);
	if (rc)
		policy_plan_release(out);
	return (rc);
}

void
policy_plan_release(struct policy_plan *plan)
{
	free(plan->v);
	memset(plan, 0, sizeof(*plan));
}
