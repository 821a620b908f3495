/*
 * coffer watch on the engines (include/coffer/engine-watch.h): the
 * checkpoint datasets of a policy watched, each step judged by
 * policy_watch_due and captured by a backup at the incremental level
 * (only what changed is read: the new step), recorded as coffer run
 * records a backup.  Between captures no repository is open and no lock
 * is held.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "coffer/catalog-history.h"
#include "coffer/engine-watch.h"
#include "coffer/fs-watch.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "engine-int.h"

#define NS 1000000000LL
/* Seconds between scans: a safety net where inotify watches (an event
 * lost to a full queue costs at most this), the only way elsewhere. */
#define SCAN_WATCHED 60
#define SCAN_POLLED 2
/* Steps ready within a second of each other go into one snapshot. */
#define DEBOUNCE 1.0
/* A capture that failed (the lock not had, a full disk) is tried again
 * no sooner than this. */
#define RETRY 10
/* The longest poll: signals interrupt it anyway; this bounds a clock
 * jump's effect. */
#define POLL_MAX_MS 1000

struct wds {
	const struct policy_dataset *d;
	struct fs_watch *w;
	struct policy_watch_step *v;
	size_t n, cap;
	int64_t now;			/* of the scan */
	int64_t captured_ns;		/* its newest complete snapshot */
	char newest[256];		/* the newest due step */
	int64_t newest_ns;
	int dirty, said;
	int64_t next_scan, retry;
	struct policy_watch_verdict verdict;
};

struct watch {
	const struct engine_watch_opts *o;
	struct wds *v;
	size_t n;
};

/*
 * A step's tree is read only while its marker is not yet older than the
 * newest snapshot by settle: a scan then costs a stat per step however
 * many steps are kept.  A step rewritten in place under an old marker is
 * left to the next coffer run, which holds it back until it settles.
 */
static int
want_tree(void *arg, const struct fs_watch_step *s)
{
	const struct wds *ds = arg;
	struct policy_watch_step st = { 1, s->marked_ns, 0 };

	return (policy_watch_ready(&st, ds->d->settle) > ds->captured_ns);
}

static int
add_step(void *arg, const struct fs_watch_step *s)
{
	struct wds *ds = arg;
	struct policy_watch_step *st;
	int64_t ready;

	if (!s->marked)
		return (0);
	if (array_grow(&ds->v, &ds->cap, ds->n, sizeof(*ds->v), 16)) {
		log_error("out of memory");
		return (-1);
	}
	st = &ds->v[ds->n++];
	st->marked = 1;
	st->marked_ns = s->marked_ns;
	st->changed_ns = s->changed_ns;
	ready = policy_watch_ready(st, ds->d->settle);
	if (ready > ds->captured_ns && ready <= ds->now &&
	    s->marked_ns >= ds->newest_ns) {
		ds->newest_ns = s->marked_ns;
		snprintf(ds->newest, sizeof(ds->newest), "%s", s->name);
	}
	return (0);
}

/* Look at the dataset's steps now: its verdict. */
static void
scan(struct watch *wt, struct wds *ds, int64_t now)
{
	const char *why;
	char line[256];

	ds->n = 0;
	ds->now = now;
	ds->newest_ns = 0;
	ds->newest[0] = '\0';
	ds->dirty = 0;
	if (fs_watch_scan(ds->w, ds->d->checkpoints, ds->d->ncheckpoints,
	    ds->d->require, want_tree, add_step, ds) != 0)
		ds->n = 0;
	why = fs_watch_polled(ds->w);
	if (why != NULL && !ds->said && wt->o->say != NULL) {
		snprintf(line, sizeof(line), "scanning '%s' every %d s: %s",
		    ds->d->path, SCAN_POLLED, why);
		wt->o->say(wt->o->arg, ds->d->name, line);
	}
	ds->said = why != NULL;
	ds->next_scan = now + (why != NULL ? SCAN_POLLED : SCAN_WATCHED) * NS;
	policy_watch_due(ds->v, ds->n, ds->d->settle, DEBOUNCE,
	    ds->captured_ns, now, &ds->verdict);
}

/*
 * A snapshot's time is the host's clock when it started, unless a run
 * took a clock of its own (--now): one in the future tells nothing of
 * what the backup found settled, and would hide every step until then.
 */
static int
newest_complete(void *arg, const struct catalog_snapshot *s)
{
	int64_t *t = arg;

	if (s->state == SNAP_COMPLETE && s->started_ns > *t &&
	    s->started_ns <= now_realtime_ns())
		*t = s->started_ns;
	return (0);
}

/* Each dataset's newest complete snapshot, from the catalog. */
static int
read_captured(struct watch *wt, struct catalog *c)
{
	size_t i;

	for (i = 0; i < wt->n; i++) {
		wt->v[i].captured_ns = 0;
		if (catalog_snapshot_list(c, wt->v[i].d->name,
		    newest_complete, &wt->v[i].captured_ns) < 0)
			return (-1);
	}
	return (0);
}

/* Back ds up under the lock held, record it and say it. */
static void
capture(struct watch *wt, struct wds *ds, struct repo *r, struct catalog *c,
    double lock_wait)
{
	const struct engine_watch_opts *o = wt->o;
	struct engine_watch_capture cap;
	struct policy_action a;
	struct engine_run run;
	struct engine_run_step s;
	char detail[sizeof(s.detail)];
	int64_t wall = now_realtime_ns();
	double t0 = now_monotonic();

	memset(&a, 0, sizeof(a));
	a.job = POLICY_BACKUP;
	a.due = 1;
	a.ds = ds->d;
	a.level = ds->captured_ns > 0 ? LEVEL_INCREMENTAL : LEVEL_FULL;
	a.slot = ds->verdict.first_marked_ns;
	snprintf(a.subject, sizeof(a.subject), "%s", ds->d->name);
	snprintf(a.reason, sizeof(a.reason), "%zu step%s complete",
	    ds->verdict.ndue, ds->verdict.ndue == 1 ? "" : "s");
	memset(&run, 0, sizeof(run));
	run.r = r;
	run.c = c;
	run.p = o->p;
	run.now = wall;
	memset(&s, 0, sizeof(s));
	s.a = &a;
	s.status = o->status(engine_run_action(&run, &s));
	s.ran = 1;
	s.seconds = now_monotonic() - t0;
	/* The newest step's name is cut before the backup's summary is. */
	snprintf(detail, sizeof(detail), "%s", s.detail);
	snprintf(s.detail, sizeof(s.detail), CATALOG_RUN_CAPTURE "%zu step%s "
	    "(%.64s): %.150s", ds->verdict.ndue, ds->verdict.ndue == 1 ? "" : "s",
	    ds->newest[0] ? ds->newest : "?", detail);
	if (engine_run_record(&run, wall, s.seconds, s.status, &s, 1) &&
	    s.status == 0)
		s.status = o->status(ENGINE_ERROR);
	memset(&cap, 0, sizeof(cap));
	cap.dataset = ds->d->name;
	cap.step = ds->newest;
	cap.nsteps = ds->verdict.ndue;
	cap.status = s.status;
	cap.s = &s;
	cap.delay = (double)(now_realtime_ns() -
	    ds->verdict.first_marked_ns) / 1e9;
	cap.lock_wait = lock_wait;
	if (o->captured != NULL)
		o->captured(o->arg, &cap);
	ds->retry = s.done ? 0 : now_realtime_ns() + RETRY * NS;
	ds->dirty = 1;
}

/*
 * The datasets whose verdict says capture, backed up under one hold of
 * the writer lock, each judged again once the lock is had (coffer run
 * may have taken the steps meanwhile).
 */
static void
capture_due(struct watch *wt)
{
	const struct engine_watch_opts *o = wt->o;
	struct repo *r;
	struct catalog *c;
	double t0 = now_monotonic(), waited;
	int64_t now;
	size_t i;

	if (o->open(o->arg, 1, &r, &c)) {
		for (i = 0; i < wt->n; i++)
			if (wt->v[i].verdict.capture)
				wt->v[i].retry = now_realtime_ns() + RETRY * NS;
		return;
	}
	waited = now_monotonic() - t0;
	if (read_captured(wt, c) == 0)
		for (i = 0; i < wt->n && !signals_caught(); i++) {
			struct wds *ds = &wt->v[i];

			if (!ds->verdict.capture)
				continue;
			now = now_realtime_ns();
			scan(wt, ds, now);
			if (ds->verdict.ndue > 0)
				capture(wt, ds, r, c, waited);
		}
	o->close(o->arg, r, c);
}

/* When to look next (ns), from every dataset's scans and verdicts. */
static int64_t
next_wake(const struct watch *wt)
{
	int64_t t = INT64_MAX;
	size_t i;

	for (i = 0; i < wt->n; i++) {
		const struct wds *ds = &wt->v[i];

		if (ds->next_scan < t)
			t = ds->next_scan;
		if (ds->verdict.next_ns < t)
			t = ds->verdict.next_ns;
		if (ds->verdict.capture && ds->retry < t)
			t = ds->retry;
	}
	return (t);
}

/* Wait for an event or the next wake; mark what changed. */
static void
wait_events(struct watch *wt, struct pollfd *pfd)
{
	int64_t now = now_realtime_ns(), wake = next_wake(wt), ms;
	size_t i;

	ms = wake <= now ? 0 : (wake - now + 999999) / 1000000;
	if (ms > POLL_MAX_MS)
		ms = POLL_MAX_MS;
	for (i = 0; i < wt->n; i++) {
		pfd[i].fd = fs_watch_fd(wt->v[i].w);
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
	}
	if (poll(pfd, wt->n, (int)ms) <= 0)
		return;
	for (i = 0; i < wt->n; i++)
		if ((pfd[i].revents & POLLIN) && fs_watch_drain(wt->v[i].w))
			wt->v[i].dirty = 1;
}

static void
loop(struct watch *wt, struct pollfd *pfd)
{
	int64_t now;
	size_t i;
	int due;

	while (!signals_caught()) {
		now = now_realtime_ns();
		due = 0;
		for (i = 0; i < wt->n; i++) {
			struct wds *ds = &wt->v[i];

			if (ds->dirty || now >= ds->next_scan ||
			    now >= ds->verdict.next_ns)
				scan(wt, ds, now);
			if (ds->verdict.capture && now >= ds->retry)
				due = 1;
		}
		if (due) {
			capture_due(wt);
			continue;
		}
		wait_events(wt, pfd);
	}
}

enum engine_result
engine_watch(const struct engine_watch_opts *o)
{
	struct watch wt;
	struct pollfd *pfd = NULL;
	struct repo *r;
	struct catalog *c;
	enum engine_result er = ENGINE_ERROR;
	size_t i;
	int rc;

	memset(&wt, 0, sizeof(wt));
	wt.o = o;
	if ((wt.v = calloc(o->p->ndatasets + 1, sizeof(*wt.v))) == NULL ||
	    (pfd = calloc(o->p->ndatasets + 1, sizeof(*pfd))) == NULL) {
		log_error("out of memory");
		goto out;
	}
	for (i = 0; i < o->p->ndatasets; i++) {
		const struct policy_dataset *d = &o->p->datasets[i];

		if (d->ncheckpoints == 0)
			continue;
		wt.v[wt.n].d = d;
		wt.v[wt.n].dirty = 1;
		if ((wt.v[wt.n++].w = fs_watch_open(d->path, o->inotify)) ==
		    NULL)
			goto out;
	}
	if (wt.n == 0) {
		log_error("policy '%s' has no dataset with checkpoints: "
		    "nothing to watch", o->p->file);
		er = ENGINE_REFUSED;
		goto out;
	}
	/* What was captured before: steps completed while no watch ran are
	 * due at the first scan. */
	if (o->open(o->arg, 0, &r, &c))
		goto out;
	rc = read_captured(&wt, c);
	o->close(o->arg, r, c);
	if (rc)
		goto out;
	loop(&wt, pfd);
	er = ENGINE_OK;
out:
	for (i = 0; i < wt.n; i++) {
		fs_watch_close(wt.v[i].w);
		free(wt.v[i].v);
	}
	free(wt.v);
	free(pfd);
	return (er);
}
