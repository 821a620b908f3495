/*
 * Unit tests for engine_status, the read model of where the backups
 * stand: the newest complete snapshot of each dataset (failed and running
 * ones skipped), its last drill, the newest bundle exported to each
 * target (imports left out), the newest verify run; every name the
 * catalog knows, names given (each once), or a policy's, with the
 * objectives of its drills and when its next drill and export were due.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/engine-status.h"
#include "coffer/fsutil.h"
#include "tap.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/t-status-XXXXXX";

/* Snapshot n of dataset ds (on parent, a full's row, when not 0): its
 * row, or 0. */
static int64_t
snapshot(struct catalog *c, int64_t ds, unsigned n, int64_t parent,
    int64_t started, int state)
{
	struct catalog_snapshot s;

	memset(&s, 0, sizeof(s));
	snprintf(s.sid, sizeof(s.sid), "%032x", n);
	s.dataset_id = ds;
	s.level = parent ? LEVEL_INCREMENTAL : LEVEL_FULL;
	s.parent_id = parent;
	s.full_id = parent;
	s.depth = parent ? 1 : 0;
	s.state = SNAP_RUNNING;
	s.started_ns = started;
	if (catalog_snapshot_create(c, &s))
		return (0);
	s.state = state;
	s.finished_ns = started + 10;
	s.bytes_read = 100 * n;
	if (state != SNAP_RUNNING && catalog_snapshot_update(c, &s))
		return (0);
	return (s.id);
}

static int
drill(struct catalog *c, int64_t ds, int64_t time_ns, const char *verdict)
{
	struct catalog_drill d;

	memset(&d, 0, sizeof(d));
	d.time_ns = time_ns;
	d.dataset_id = ds;
	snprintf(d.sid, sizeof(d.sid), "%032x", 1);
	d.sample = 100;
	d.estimate_seconds = d.rto_seconds = d.rpo_seconds = -1;
	d.verdict = verdict;
	return (catalog_drill_add(c, &d));
}

static int
bundle(struct catalog *c, int exported, const char *target, uint32_t seq,
    int64_t created_ns)
{
	struct catalog_bundle b;

	memset(&b, 0, sizeof(b));
	b.exported = exported;
	snprintf(b.target, sizeof(b.target), "%s", target);
	b.seq = seq;
	snprintf(b.name, sizeof(b.name), "%s-%u", target, seq);
	b.created_ns = created_ns;
	return (catalog_bundle_add(c, &b, NULL, 0));
}

static int
verify_run(struct catalog *c, int64_t time_ns, int64_t damage)
{
	struct catalog_verify_run v;

	memset(&v, 0, sizeof(v));
	v.time_ns = time_ns;
	v.mode = "structure";
	v.complete = 1;
	v.damage = damage;
	v.verdict = damage ? "fail" : "pass";
	return (catalog_verify_run_add(c, &v));
}

/* ds-a: a full, a newer incremental, a failed and a running one after
 * it, a failed drill then a passed one; ds-b: a failed full only. */
static int
fill(struct catalog *c)
{
	int64_t a, b, f;

	return (catalog_dataset_id(c, "ds-a", 1, &a) < 0 ||
	    catalog_dataset_id(c, "ds-b", 1, &b) < 0 ||
	    (f = snapshot(c, a, 1, 0, 1000, SNAP_COMPLETE)) == 0 ||
	    !snapshot(c, b, 2, 0, 2000, SNAP_FAILED) ||
	    !snapshot(c, a, 3, f, 3000, SNAP_COMPLETE) ||
	    !snapshot(c, a, 4, f, 5000, SNAP_FAILED) ||
	    !snapshot(c, a, 5, 0, 5500, SNAP_RUNNING) ||
	    drill(c, a, 6000, "fail") || drill(c, a, 7000, "pass") ||
	    bundle(c, 1, "off", 1, 100) || bundle(c, 1, "off", 2, 900) ||
	    bundle(c, 0, "in", 1, 950) ||
	    verify_run(c, 400, 0) || verify_run(c, 800, 3) ? -1 : 0);
}

static void
test_all(struct catalog *c)
{
	struct engine_status st;
	const struct engine_status_dataset *a, *b;

	if (engine_status(c, NULL, &st)) {
		ok(0, "everything: read");
		return;
	}
	ok(st.ndatasets == 2 && strcmp(st.datasets[0].name, "ds-a") == 0 &&
	    strcmp(st.datasets[1].name, "ds-b") == 0,
	    "every dataset, by name: %zu", st.ndatasets);
	a = &st.datasets[0];
	b = &st.datasets[1];
	ok(st.ndatasets == 2 && a->have && a->last.started_ns == 3000 &&
	    a->last.finished_ns == 3010 &&
	    a->last.level == LEVEL_INCREMENTAL && a->last.bytes_read == 300 &&
	    strcmp(a->last.sid, "00000000000000000000000000000003") == 0,
	    "the newest complete snapshot, not the failed or running ones");
	ok(st.ndatasets == 2 && a->drilled && a->drill.time_ns == 7000 &&
	    strcmp(a->drill.verdict, "pass") == 0, "the last drill");
	ok(st.ndatasets == 2 && !b->have && !b->drilled && b->rpo == 0,
	    "a dataset of failed runs only: no snapshot, no drill");
	ok(st.ntargets == 1 && strcmp(st.targets[0].name, "off") == 0 &&
	    st.targets[0].last_ns == 900,
	    "the newest bundle of each export target, imports left out");
	ok(st.verify.have && st.verify.time_ns == 800 &&
	    st.verify.damage == 3 && st.verify.complete &&
	    strcmp(st.verify.verdict, "fail") == 0 &&
	    strcmp(st.verify.mode, "structure") == 0, "the newest verify");
	engine_status_release(&st);
	engine_status_release(&st);
	ok(st.ndatasets == 0 && st.datasets == NULL, "released twice");
}

static void
test_named(struct catalog *c)
{
	static const char *const ds[] = { "ds-b", "nope", "ds-b", "ds-a" };
	static const char *const tg[] = { "none", "off" };
	struct engine_status_opts o = { NULL, ds, 4, tg, 2, 0 };
	struct engine_status st;

	if (engine_status(c, &o, &st)) {
		ok(0, "named: read");
		return;
	}
	ok(st.ndatasets == 3 && strcmp(st.datasets[0].name, "ds-b") == 0 &&
	    strcmp(st.datasets[1].name, "nope") == 0 &&
	    strcmp(st.datasets[2].name, "ds-a") == 0,
	    "the datasets named, in their order, each once");
	ok(st.ndatasets == 3 && !st.datasets[1].have &&
	    !st.datasets[1].drilled && st.datasets[2].have &&
	    st.datasets[2].last.started_ns == 3000,
	    "one the catalog does not know is there with nothing");
	ok(st.ntargets == 2 && st.targets[0].last_ns == 0 &&
	    st.targets[1].last_ns == 900, "the targets named");
	engine_status_release(&st);
}

/* *p: a policy of the arrays given, nothing else. */
#define POLICY_OF(p, ds, dr, ex) do {					\
	memset((p), 0, sizeof(*(p)));					\
	(p)->datasets = (ds);						\
	(p)->ndatasets = sizeof(ds) / sizeof((ds)[0]);			\
	(p)->drills = (dr);						\
	(p)->ndrills = sizeof(dr) / sizeof((dr)[0]);			\
	(p)->exports = (ex);						\
	(p)->nexports = sizeof(ex) / sizeof((ex)[0]);			\
} while (0)

static void
test_policy(struct catalog *c)
{
	static char a[] = "ds-a", b[] = "ds-b", gone[] = "gone";
	static char *only_a[] = { a };
	struct policy_dataset pds[] = { { .name = a }, { .name = b } };
	struct policy_drill pdr[] = {
		{ .rpo = 3600, .datasets = only_a, .ndatasets = 1 },
		{ .rpo = 7200 },
		{ .rpo = 0 },
	};
	struct policy_export pex[] = { { .target = gone } };
	struct policy p;
	struct engine_status_opts o = { .policy = &p };
	struct engine_status st;

	POLICY_OF(&p, pds, pdr, pex);
	if (engine_status(c, &o, &st)) {
		ok(0, "policy: read");
		return;
	}
	ok(st.ndatasets == 2 && st.datasets[0].rpo == 3600 &&
	    st.datasets[1].rpo == 7200,
	    "the objective: the smallest rpo of the drills covering it");
	ok(st.ntargets == 1 && strcmp(st.targets[0].name, "gone") == 0 &&
	    st.targets[0].last_ns == 0, "the policy's targets only");
	ok(st.ndatasets == 2 && st.datasets[0].drill_due_ns == 0 &&
	    st.targets[0].due_ns == 0, "no clock: no due times");
	engine_status_release(&st);
}

#define MINUTES(x) ((int64_t)(x) * 60 * 1000000000)
#define H(x) MINUTES((x) * 60)

/*
 * When the next drill and export were due: the first slot after the last
 * one, of the first schedule due, or, never done, the newest slot before
 * the clock.  The catalog's times are a few ns after the epoch.
 */
static void
test_due(struct catalog *c)
{
	static char a[] = "ds-a", b[] = "ds-b", off[] = "off", nev[] = "never";
	static char *only_a[] = { a };
	struct policy_dataset pds[] = { { .name = a }, { .name = b } };
	struct policy_drill pdr[] = {
		{ .rto = 600, .datasets = only_a, .ndatasets = 1,
		  .sched = { .kind = SCHED_HOURLY } },
		{ .rto = 300, .sched = { .kind = SCHED_DAILY, .hour = 6,
		  .minute = 30 } },
	};
	struct policy_export pex[] = {
		{ .target = off, .sched = { [LEVEL_INCREMENTAL] = {
		  .kind = SCHED_DAILY, .hour = 3 } } },
		{ .target = nev, .sched = { [LEVEL_FULL] = {
		  .kind = SCHED_DAILY, .hour = 3 } } },
	};
	struct policy p;
	struct engine_status_opts o = { .policy = &p, .now = H(55) };
	struct engine_status st;

	POLICY_OF(&p, pds, pdr, pex);
	if (engine_status(c, &o, &st)) {
		ok(0, "due: read");
		return;
	}
	ok(st.ndatasets == 2 && st.datasets[0].rto == 300 &&
	    st.datasets[1].rto == 300, "the rto: the smallest of its drills");
	ok(st.ndatasets == 2 && st.datasets[0].drill_due_ns == H(1),
	    "drilled: the first slot after, of its hourly and daily drills");
	ok(st.ndatasets == 2 &&
	    st.datasets[1].drill_due_ns == H(54) + MINUTES(30),
	    "never drilled: the newest slot before the clock");
	ok(st.ntargets == 2 && st.targets[0].due_ns == H(3) &&
	    st.targets[1].due_ns == H(48 + 3),
	    "exports: the next slot after the newest bundle, or the last");
	engine_status_release(&st);
}

int
main(void)
{
	struct catalog *c;
	char *db;

	if (mkdtemp(tmpdir) == NULL)
		return (1);
	db = fsutil_join(tmpdir, "catalog.db");
	c = db != NULL ? catalog_open(db) : NULL;
	ok(c != NULL && fill(c) == 0, "a catalog with a history");
	if (c != NULL) {
		test_all(c);
		test_named(c);
		test_policy(c);
		test_due(c);
		catalog_close(c);
	}
	free(db);
	rm_tree(tmpdir);
	return (tap_done());
}
