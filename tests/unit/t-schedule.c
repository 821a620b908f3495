/*
 * Schedules and what a policy has due (src/policy/schedule.c, due.c), on a
 * fake clock: the slots of every schedule form, then months of runs of a
 * policy whose actions are "done" by adding them to the history, as the
 * engines and the catalog would: each slot met once, a host down for days
 * catching up once, a failed action due again, the repository's datasets
 * of a backup host, the reasons given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coffer/log.h"
#include "coffer/policy.h"
#include "tap.h"
#include "testutil.h"

#define NS 1000000000LL
#define MIN (60 * NS)
#define HOUR (3600 * NS)
#define DAY (86400 * NS)

static char dir[64];

/* "2026-11-01 02:00" (UTC) in ns. */
static int64_t
at(const char *s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%d-%d-%d %d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	    &tm.tm_hour, &tm.tm_min) != 5)
		abort();
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return ((int64_t)timegm(&tm) * NS);
}

static struct tm
utc(int64_t ns)
{
	time_t t = (time_t)(ns / NS);
	struct tm tm;

	gmtime_r(&t, &tm);
	return (tm);
}

/* A policy from text, every "@" replaced by a directory that exists. */
static struct policy *
load(const char *text)
{
	char path[96];
	struct policy *p;
	const char *c;
	FILE *f;

	snprintf(path, sizeof(path), "%s/test.policy", dir);
	if ((f = fopen(path, "w")) == NULL)
		return (NULL);
	for (c = text; *c != '\0'; c++)
		if (*c == '@')
			fputs(dir, f);
		else
			fputc(*c, f);
	fclose(f);
	p = policy_load(path);
	if (p == NULL)
		diag("policy does not load:\n%s", text);
	return (p);
}

/* ---- the slots of each form ---- */

static int64_t
last_of(const char *sched, const char *t)
{
	struct schedule s;
	const char *why;

	if (schedule_parse(sched, &s, &why)) {
		diag("'%s': %s", sched, why);
		return (-1);
	}
	return (schedule_last(&s, at(t)));
}

static int64_t
next_of(const char *sched, const char *t)
{
	struct schedule s;
	const char *why;

	if (schedule_parse(sched, &s, &why))
		return (-1);
	return (schedule_next(&s, at(t)));
}

static void
test_forms(void)
{
	static const struct {
		const char *sched, *now, *last, *next;
	} v[] = {
		{ "hourly", "2026-12-02 10:30", "2026-12-02 10:00",
		    "2026-12-02 11:00" },
		{ "hourly :15", "2026-12-02 10:14", "2026-12-02 09:15",
		    "2026-12-02 10:15" },
		{ "hourly :15", "2026-12-02 10:15", "2026-12-02 10:15",
		    "2026-12-02 11:15" },
		{ "daily", "2026-12-02 10:00", "2026-12-02 00:00",
		    "2026-12-03 00:00" },
		{ "daily 02:00", "2026-12-02 01:59", "2026-12-01 02:00",
		    "2026-12-02 02:00" },
		/* 2026-12-06 is a Sunday. */
		{ "weekly sunday 02:00", "2026-12-06 02:00",
		    "2026-12-06 02:00", "2026-12-13 02:00" },
		{ "weekly sun 02:00", "2026-12-06 01:00", "2026-11-29 02:00",
		    "2026-12-06 02:00" },
		{ "weekly Saturday 23:00", "2026-12-06 01:00",
		    "2026-12-05 23:00", "2026-12-12 23:00" },
		/* Months without a day 31 have no slot. */
		{ "monthly 31 01:00", "2026-12-02 00:00", "2026-10-31 01:00",
		    "2026-12-31 01:00" },
		{ "monthly 31 01:00", "2027-03-30 00:00", "2027-01-31 01:00",
		    "2027-03-31 01:00" },
		/* 2028 is a leap year, 2027 not. */
		{ "monthly 29", "2027-03-28 00:00", "2027-01-29 00:00",
		    "2027-03-29 00:00" },
		{ "monthly 29", "2028-03-01 00:00", "2028-02-29 00:00",
		    "2028-03-29 00:00" },
		{ "monthly 1 03:00", "2026-12-01 02:59", "2026-11-01 03:00",
		    "2026-12-01 03:00" },
		{ "monthly first sunday 02:00", "2026-12-02 00:00",
		    "2026-11-01 02:00", "2026-12-06 02:00" },
		{ "monthly second tuesday 12:00", "2026-12-09 00:00",
		    "2026-12-08 12:00", "2027-01-12 12:00" },
		{ "monthly third friday", "2026-12-02 00:00",
		    "2026-11-20 00:00", "2026-12-18 00:00" },
		{ "monthly fourth mon 06:00", "2026-12-02 00:00",
		    "2026-11-23 06:00", "2026-12-28 06:00" },
		/* The last Friday: 2026-11-27, 2026-12-25, 2027-01-29. */
		{ "monthly last friday 04:00", "2026-12-24 00:00",
		    "2026-11-27 04:00", "2026-12-25 04:00" },
		{ "monthly last friday 04:00", "2026-12-26 00:00",
		    "2026-12-25 04:00", "2027-01-29 04:00" },
	};
	static const char *const bad[] = {
		"", "yearly", "hourly 10:00", "daily 24:00", "daily 2:0x",
		"weekly", "weekly someday", "monthly", "monthly 0",
		"monthly 32", "monthly fifth sunday", "monthly last",
		"daily 02:00 extra",
	};
	struct schedule s;
	const char *why;
	char fmt[64];
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ok(last_of(v[i].sched, v[i].now) == at(v[i].last),
		    "'%s' at %s: last slot %s", v[i].sched, v[i].now,
		    v[i].last);
		ok(next_of(v[i].sched, v[i].now) == at(v[i].next),
		    "'%s' at %s: next slot %s", v[i].sched, v[i].now,
		    v[i].next);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(schedule_parse(bad[i], &s, &why) == -1 && why != NULL,
		    "'%s' is refused", bad[i]);
	ok(schedule_parse("monthly LAST Sun 07:05", &s, &why) == 0,
	    "words in any case");
	schedule_format(&s, fmt, sizeof(fmt));
	ok(strcmp(fmt, "monthly last sunday 07:05") == 0, "normalized: %s",
	    fmt);
}

/* ---- a simulated host ---- */

#define MAX_EVENTS 20000
#define MAX_DONE 20000

struct done {
	int job, level;
	char subject[160];
	int64_t time;			/* the run's clock */
	int64_t slot;
};

struct sim {
	struct policy *p;
	struct policy_event ev[MAX_EVENTS];
	size_t nev;
	struct done d[MAX_DONE];
	size_t nd;
	int runs;
	/* An action of this job and subject fails (once each time set). */
	int fail_job;
	const char *fail_subject;
};

static void
sim_init(struct sim *s, struct policy *p)
{
	memset(s, 0, sizeof(*s));
	s->p = p;
	s->fail_job = -1;
}

static void
sim_release(struct sim *s)
{
	size_t i;

	for (i = 0; i < s->nev; i++)
		free((char *)s->ev[i].subject);
	policy_free(s->p);
}

/* An event of the history, as the engine gives it. */
static void
sim_event(struct sim *s, int job, const char *subject, int level,
    int64_t t, int okay)
{
	struct policy_event *e;

	if (s->nev == MAX_EVENTS)
		abort();
	e = &s->ev[s->nev++];
	e->job = job;
	e->subject = strdup(subject);
	e->level = level;
	e->time_ns = t;
	e->ok = okay;
}

/* coffer run at now: each due action done (or failed) into the history. */
static int
sim_run(struct sim *s, int64_t now)
{
	struct policy_plan pl;
	const struct policy_action *a;
	size_t i;
	int okay;

	if (policy_due(s->p, now, s->ev, s->nev, &pl))
		return (-1);
	s->runs++;
	for (i = 0; i < pl.n; i++) {
		a = &pl.v[i];
		if (!a->due)
			continue;
		okay = !(a->job == s->fail_job && (s->fail_subject == NULL ||
		    strcmp(s->fail_subject, a->subject) == 0));
		if (!okay)
			s->fail_job = -1;
		/* A backup's time is its snapshot's start: the clock. */
		sim_event(s, a->job, a->subject, a->level, now, okay);
		if (!okay)
			continue;
		if (s->nd == MAX_DONE)
			abort();
		s->d[s->nd].job = a->job;
		s->d[s->nd].level = a->level;
		s->d[s->nd].time = now;
		s->d[s->nd].slot = a->slot;
		snprintf(s->d[s->nd].subject, sizeof(s->d[0].subject), "%s",
		    a->subject);
		s->nd++;
	}
	policy_plan_release(&pl);
	return (0);
}

/* Runs every step from t0 to t1 (excluded), but for [down0, down1). */
static int
sim_span(struct sim *s, int64_t t0, int64_t t1, int64_t step,
    int64_t down0, int64_t down1)
{
	int64_t t;

	for (t = t0; t < t1; t += step) {
		if (t >= down0 && t < down1)
			continue;
		if (sim_run(s, t))
			return (-1);
	}
	return (0);
}

/* How many actions of job and subject were done in [t0, t1). */
static int
count(const struct sim *s, int job, const char *subject, int level,
    int64_t t0, int64_t t1)
{
	size_t i;
	int n = 0;

	for (i = 0; i < s->nd; i++)
		if (s->d[i].job == job && strcmp(s->d[i].subject, subject) ==
		    0 && (level < 0 || s->d[i].level == level) &&
		    s->d[i].time >= t0 && s->d[i].time < t1)
			n++;
	return (n);
}

static const char training[] =
	"[dataset imagenet]\n"
	"path = @\n"
	"full = monthly first sunday 02:00\n"
	"differential = weekly sunday 02:00\n"
	"incremental = daily 02:00\n"
	"[dataset ckpt]\n"
	"path = @\n"
	"full = weekly saturday 22:00\n"
	"incremental = hourly :20\n"
	"keep-last = 48\n"
	"[retention]\n"
	"keep-daily = 7\n"
	"schedule = daily 05:00\n"
	"[export nas]\n"
	"to = @/nas\n"
	"full = monthly 1 03:00\n"
	"incremental = daily 03:00\n"
	"[export cloud]\n"
	"to = @/cloud\n"
	"datasets = imagenet ckpt\n"
	"incremental = weekly sunday 04:00\n"
	"[drill weekly]\n"
	"schedule = weekly sunday 06:00\n"
	"[verify monthly]\n"
	"schedule = monthly last friday 04:00\n"
	"read-data = all\n";

/*
 * Three months of runs every ten minutes: each job once a slot, at the
 * first run at or after it, at the level its calendar says.
 */
static void
test_months(void)
{
	int64_t t0 = at("2026-11-01 00:05"), t1 = at("2027-02-01 00:05"), t;
	struct sim *s = calloc(1, sizeof(*s));
	int bad_day = 0, bad_hour = 0, bad_level = 0, days = 0, n;
	struct tm tm;

	sim_init(s, load(training));
	if (s->p == NULL || sim_span(s, t0, t1, 10 * MIN, 0, 0)) {
		ok(0, "three months of runs");
		free(s);
		return;
	}
	ok(s->runs == (int)((t1 - t0) / (10 * MIN)), "%d runs", s->runs);
	/* Never backed up: a full at the first run. */
	ok(count(s, POLICY_BACKUP, "imagenet", 0, t0, t0 + 1) == 1 &&
	    count(s, POLICY_BACKUP, "ckpt", 0, t0, t0 + 1) == 1,
	    "a dataset never backed up gets a full at once");
	for (t = at("2026-11-02 00:00"); t < t1 - DAY; t += DAY) {
		int want;

		days++;
		tm = utc(t);
		want = tm.tm_wday != 0 ? 2 : tm.tm_mday <= 7 ? 0 : 1;
		n = count(s, POLICY_BACKUP, "imagenet", -1, t, t + DAY);
		if (n != 1 || count(s, POLICY_BACKUP, "imagenet", -1,
		    t + 2 * HOUR, t + 2 * HOUR + 10 * MIN) != 1)
			bad_day++;
		else if (count(s, POLICY_BACKUP, "imagenet", want, t, t +
		    DAY) != 1)
			bad_level++;
	}
	ok(bad_day == 0, "imagenet: one backup a day, at 02:00 (%d of %d "
	    "days wrong)", bad_day, days);
	ok(bad_level == 0, "imagenet: a full on first Sundays, a "
	    "differential on other Sundays, else an incremental (%d wrong)",
	    bad_level);
	for (t = at("2026-11-01 01:00"); t < t1 - HOUR; t += HOUR) {
		tm = utc(t);
		/* Saturday 22:20: the full at 22:00 covers it. */
		if (count(s, POLICY_BACKUP, "ckpt", -1, t + 20 * MIN,
		    t + 30 * MIN) != 1 && !(tm.tm_wday == 6 &&
		    tm.tm_hour == 22))
			bad_hour++;
	}
	ok(bad_hour == 0, "ckpt: an incremental every hour at :20 (%d hours "
	    "wrong)", bad_hour);
	ok(count(s, POLICY_BACKUP, "ckpt", 0, t0 + 1, t1) == 13,
	    "ckpt: a full every Saturday at 22:00 (%d)",
	    count(s, POLICY_BACKUP, "ckpt", 0, t0 + 1, t1));
	ok(count(s, POLICY_BACKUP, "ckpt", -1, at("2026-11-07 22:00"),
	    at("2026-11-07 23:00")) == 2, "ckpt: Saturday 22:00 a full, "
	    "22:20 an incremental on it");
	/* Retention: ckpt has rules of its own, imagenet the policy's. */
	ok(count(s, POLICY_FORGET, "ckpt", -1, t0, t1) == 93 &&
	    count(s, POLICY_FORGET, "imagenet", -1, t0, t1) == 93,
	    "forget at the first run, then once a day for each dataset "
	    "(%d, %d)",
	    count(s, POLICY_FORGET, "ckpt", -1, t0, t1),
	    count(s, POLICY_FORGET, "imagenet", -1, t0, t1));
	ok(count(s, POLICY_PRUNE, "", -1, t0, t1) == 93 &&
	    count(s, POLICY_PRUNE, "", -1, at("2026-12-24 05:00"),
	    at("2026-12-24 05:10")) == 1, "prune once a day, at 05:00");
	/* Exports: nas a full on the 1st, an incremental other days. */
	ok(count(s, POLICY_EXPORT, "nas", -1, t0, t1) == 93,
	    "nas: the first run exports, then once a day (%d)",
	    count(s, POLICY_EXPORT, "nas", -1, t0, t1));
	ok(count(s, POLICY_EXPORT, "nas", 0, at("2026-12-01 03:00"),
	    at("2026-12-01 03:10")) == 1 && count(s, POLICY_EXPORT, "nas", 0,
	    t0 + 1, t1) == 3, "nas: a full bundle on the 1st at 03:00");
	ok(count(s, POLICY_EXPORT, "nas", 2, at("2026-12-02 03:00"),
	    at("2026-12-02 03:10")) == 1, "nas: an incremental other days");
	/* No full schedule: the first bundle is a full, then incrementals,
	 * one per dataset it names. */
	ok(count(s, POLICY_EXPORT, "cloud", 0, t0, t1) == 2 &&
	    count(s, POLICY_EXPORT, "cloud", -1, t0, t1) == 2 + 2 * 14,
	    "cloud: a full of each dataset at the first run, then one "
	    "bundle per dataset each Sunday (%d)",
	    count(s, POLICY_EXPORT, "cloud", -1, t0, t1));
	/* Drills: the policy's datasets; verifies: last Fridays. */
	ok(count(s, POLICY_DRILL, "weekly/imagenet", -1, t0, t1) == 15 &&
	    count(s, POLICY_DRILL, "weekly/ckpt", -1, t0, t1) == 15,
	    "a drill of each dataset at the first run, then every Sunday");
	ok(count(s, POLICY_VERIFY, "monthly", -1, t0, t1) == 4 &&
	    count(s, POLICY_VERIFY, "monthly", -1, at("2026-12-25 04:00"),
	    at("2026-12-25 04:10")) == 1 && count(s, POLICY_VERIFY, "monthly",
	    -1, at("2027-01-29 04:00"), at("2027-01-29 04:10")) == 1,
	    "verify at the first run, then on the last Friday of each month");
	sim_release(s);
	free(s);
}

/*
 * Down from a Thursday to the next Tuesday: the first run back does each
 * job once, at the highest level missed, whatever the slots it missed.
 */
static void
test_down(void)
{
	int64_t t0 = at("2026-12-01 00:05"), down0 = at("2026-12-10 00:00"),
	    down1 = at("2026-12-15 09:05"), t1 = at("2026-12-20 00:05");
	struct sim *s = calloc(1, sizeof(*s));

	sim_init(s, load(training));
	if (s->p == NULL || sim_span(s, t0, t1, 10 * MIN, down0, down1)) {
		ok(0, "runs around a host down");
		free(s);
		return;
	}
	ok(count(s, POLICY_BACKUP, "imagenet", -1, down0, down1) == 0,
	    "nothing runs while the host is down");
	/* Sunday 2026-12-13 02:00 (a second Sunday) was missed. */
	ok(count(s, POLICY_BACKUP, "imagenet", -1, down1, down1 + 1) == 1 &&
	    count(s, POLICY_BACKUP, "imagenet", 1, down1, down1 + 1) == 1,
	    "imagenet: once, at the first run back, a differential for the "
	    "Sunday missed");
	ok(count(s, POLICY_BACKUP, "ckpt", -1, down1, down1 + 1) == 1 &&
	    count(s, POLICY_BACKUP, "ckpt", 0, down1, down1 + 1) == 1,
	    "ckpt: once, a full for the Saturday missed, not 129 hourlies");
	ok(count(s, POLICY_BACKUP, "ckpt", -1, down1 + 1, down1 + 20 * MIN) ==
	    0 && count(s, POLICY_BACKUP, "ckpt", 2, down1 + 20 * MIN,
	    down1 + 30 * MIN) == 1, "ckpt: then hourly again at :20");
	ok(count(s, POLICY_FORGET, "ckpt", -1, down1, down1 + 1) == 1 &&
	    count(s, POLICY_PRUNE, "", -1, down1, down1 + 1) == 1 &&
	    count(s, POLICY_EXPORT, "nas", -1, down1, down1 + 1) == 1 &&
	    count(s, POLICY_EXPORT, "cloud", -1, down1, down1 + 1) == 2 &&
	    count(s, POLICY_DRILL, "weekly/ckpt", -1, down1, down1 + 1) == 1,
	    "forget, prune, exports and the drill: once each, at once");
	ok(count(s, POLICY_VERIFY, "monthly", -1, down1, down1 + 1) == 0,
	    "the verify, whose slot was not missed, waits for it");
	ok(count(s, POLICY_BACKUP, "imagenet", -1, down1 + 1, at(
	    "2026-12-16 02:00")) == 0 && count(s, POLICY_BACKUP, "imagenet",
	    2, at("2026-12-16 02:00"), at("2026-12-16 02:10")) == 1,
	    "imagenet: the next slot as usual");
	sim_release(s);
	free(s);
}

/* The time of the newest failed event of job and subject, or 0. */
static int64_t
failed(const struct sim *s, int job, const char *subject)
{
	int64_t t = 0;
	size_t i;

	for (i = 0; i < s->nev; i++)
		if (s->ev[i].job == job && !s->ev[i].ok &&
		    strcmp(s->ev[i].subject, subject) == 0 &&
		    s->ev[i].time_ns > t)
			t = s->ev[i].time_ns;
	return (t);
}

/* The slot of the newest done action of job and subject, or 0. */
static int64_t
last_slot(const struct sim *s, int job, const char *subject)
{
	size_t i;

	for (i = s->nd; i-- > 0;)
		if (s->d[i].job == job && strcmp(s->d[i].subject, subject) ==
		    0)
			return (s->d[i].slot);
	return (0);
}

/* A failed action is not done: due again at the next run, same slot. */
static void
test_failed(void)
{
	struct sim *s = calloc(1, sizeof(*s));
	int64_t t = at("2026-12-02 02:05");

	sim_init(s, load(training));
	if (s->p == NULL || sim_run(s, at("2026-12-01 12:00"))) {
		ok(0, "a first run");
		free(s);
		return;
	}
	s->fail_job = POLICY_BACKUP;
	s->fail_subject = "imagenet";
	sim_run(s, t);
	ok(count(s, POLICY_BACKUP, "imagenet", -1, t, t + 1) == 0 &&
	    failed(s, POLICY_BACKUP, "imagenet") == t, "the backup fails");
	sim_run(s, t + 10 * MIN);
	ok(count(s, POLICY_BACKUP, "imagenet", 2, t + 10 * MIN,
	    t + 10 * MIN + 1) == 1 && last_slot(s, POLICY_BACKUP,
	    "imagenet") == at("2026-12-02 02:00"),
	    "due again at the next run, for its slot");
	sim_run(s, t + 20 * MIN);
	ok(count(s, POLICY_BACKUP, "imagenet", -1, t + 20 * MIN,
	    t + 20 * MIN + 1) == 0, "and not after it is done");
	sim_release(s);
	free(s);
}

static const struct policy_action *
find(const struct policy_plan *pl, int job, const char *subject)
{
	size_t i;

	for (i = 0; i < pl->n; i++)
		if (pl->v[i].job == job && strcmp(pl->v[i].subject, subject) ==
		    0)
			return (&pl->v[i]);
	return (NULL);
}

static void
test_reasons(void)
{
	struct policy *p = load(training);
	struct policy_event h[] = {
		{ POLICY_BACKUP, "imagenet", 0, 0, 1 },
		{ POLICY_BACKUP, "imagenet", 2, 0, 1 },
		{ POLICY_BACKUP, "imagenet", 2, 0, 0 },
		{ POLICY_VERIFY, "monthly", -1, 0, 1 },
	};
	const struct policy_action *a;
	struct policy_plan pl;

	if (p == NULL)
		return;
	h[0].time_ns = at("2026-12-06 02:01");	/* a first Sunday */
	h[1].time_ns = at("2026-12-07 02:01");
	h[2].time_ns = at("2026-12-08 02:01");	/* failed */
	h[3].time_ns = at("2026-11-27 04:00");
	if (policy_due(p, at("2026-12-08 12:00"), h, 4, &pl)) {
		ok(0, "policy_due");
		policy_free(p);
		return;
	}
	a = find(&pl, POLICY_BACKUP, "imagenet");
	ok(a != NULL && a->due && a->level == 2 && a->slot ==
	    at("2026-12-08 02:00") && a->last == at("2026-12-07 02:01") &&
	    strcmp(a->reason, "slot 2026-12-08T02:00:00Z, last done "
	    "2026-12-07T02:01:00Z") == 0, "due: its slot and last: %s",
	    a ? a->reason : "");
	a = find(&pl, POLICY_BACKUP, "ckpt");
	ok(a != NULL && a->due && a->level == 0 && strcmp(a->reason,
	    "slot 2026-12-05T22:00:00Z, never done") == 0,
	    "never backed up: a full, never done: %s", a ? a->reason : "");
	a = find(&pl, POLICY_VERIFY, "monthly");
	ok(a != NULL && !a->due && a->slot == at("2026-12-25 04:00") &&
	    strcmp(a->reason, "last done 2026-11-27T04:00:00Z, next slot "
	    "2026-12-25T04:00:00Z (monthly last friday 04:00)") == 0,
	    "not due: when last done, and the next slot: %s",
	    a ? a->reason : "");
	policy_plan_release(&pl);
	/* After the incremental of 12-08: not due, each level says why. */
	h[2].ok = 1;
	policy_due(p, at("2026-12-08 12:00"), h, 4, &pl);
	a = find(&pl, POLICY_BACKUP, "imagenet");
	ok(a != NULL && !a->due && a->slot == at("2026-12-09 02:00") &&
	    strcmp(a->reason, "full: last done 2026-12-06T02:01:00Z, next "
	    "slot 2027-01-03T02:00:00Z (monthly first sunday 02:00); "
	    "differential: last done 2026-12-06T02:01:00Z, next slot "
	    "2026-12-13T02:00:00Z (weekly sunday 02:00); incremental: last "
	    "done 2026-12-08T02:01:00Z, next slot 2026-12-09T02:00:00Z "
	    "(daily 02:00)") == 0, "not due, by level: %s",
	    a ? a->reason : "");
	ok(pl.ndue > 0 && !pl.warned, "no warning");
	policy_plan_release(&pl);
	policy_free(p);
}

static const char exporter[] =
	"[dataset d]\n"
	"path = @\n"
	"incremental = daily 02:00\n"
	"[export off]\n"
	"to = @/off\n"
	"incremental = daily 03:00\n";

/*
 * The levels: a full covers the levels below it; a dataset without a
 * complete full gets one, whatever level is due, and so does a target
 * without a full bundle.
 */
static void
test_levels(void)
{
	struct policy *p = load(training), *q = load(exporter);
	struct policy_event h[] = {
		{ POLICY_BACKUP, "imagenet", 0, 0, 1 },
		{ POLICY_BACKUP, "d", 2, 0, 1 },
		{ POLICY_EXPORT, "off", 2, 0, 1 },
		{ POLICY_BACKUP, "d", 0, 0, 1 },
	};
	const struct policy_action *a;
	struct policy_plan pl;

	if (p == NULL || q == NULL)
		return;
	h[0].time_ns = at("2026-12-08 02:30");	/* a Tuesday */
	policy_due(p, at("2026-12-08 10:00"), h, 1, &pl);
	a = find(&pl, POLICY_BACKUP, "imagenet");
	ok(a != NULL && !a->due, "a full covers the day's incremental");
	policy_plan_release(&pl);

	h[1].time_ns = at("2026-12-07 02:01");
	h[2].time_ns = at("2026-12-07 03:01");
	policy_due(q, at("2026-12-08 07:00"), h + 1, 2, &pl);
	a = find(&pl, POLICY_BACKUP, "d");
	ok(a != NULL && a->due && a->level == 0 && a->slot ==
	    at("2026-12-08 02:00"), "incrementals alone (the full forgotten): "
	    "the incremental's slot, at full");
	a = find(&pl, POLICY_EXPORT, "off");
	ok(a != NULL && a->due && a->level == 0, "no full bundle: a full");
	policy_plan_release(&pl);
	h[3].time_ns = at("2026-12-08 02:30");
	policy_due(q, at("2026-12-08 07:00"), h + 1, 3, &pl);
	a = find(&pl, POLICY_BACKUP, "d");
	ok(a != NULL && !a->due, "and nothing once it has one");
	policy_plan_release(&pl);
	policy_free(p);
	policy_free(q);
}

/*
 * A backup host's policy: no datasets of its own; retention and a drill
 * over the repository's datasets (those with a complete snapshot in the
 * history), a named dataset it lacks a warning at its line, exports with
 * nothing to send.
 */
static void
test_backup_host(void)
{
	static const char text[] =
		"[retention]\n"
		"keep-daily = 7\n"
		"schedule = daily 05:00\n"
		"[drill all]\n"
		"schedule = daily 06:00\n"
		"[drill named]\n"
		"datasets = corpus ghost\n"
		"schedule = daily 06:00\n"
		"[export offsite]\n"
		"to = /mnt/offsite\n"
		"full = daily 04:00\n";
	struct policy *p = load(text), *q;
	struct policy_event h[] = {
		{ POLICY_BACKUP, "ckpt", 0, 0, 1 },
		{ POLICY_BACKUP, "corpus", 0, 0, 1 },
		{ POLICY_BACKUP, "failed", 0, 0, 0 },
		{ POLICY_FORGET, "ckpt", -1, 0, 1 },
	};
	const struct policy_action *a;
	struct policy_plan pl;
	int64_t now = at("2026-12-08 07:00");
	size_t i, nforget = 0, nwarn = 0;

	if (p == NULL)
		return;
	h[0].time_ns = h[1].time_ns = h[2].time_ns = at("2026-12-08 02:00");
	h[3].time_ns = at("2026-12-08 05:00");
	policy_due(p, now, h, 4, &pl);
	for (i = 0; i < pl.n; i++) {
		nforget += pl.v[i].job == POLICY_FORGET;
		if (pl.v[i].warn) {
			nwarn++;
			ok(pl.v[i].job == POLICY_DRILL && pl.v[i].line == 7 &&
			    strcmp(pl.v[i].reason, "no dataset 'ghost' in the "
			    "repository (yet): no drill for it") == 0,
			    "a dataset it names and nobody backed up: said at "
			    "its line (%d): %s", pl.v[i].line, pl.v[i].reason);
		}
	}
	ok(nforget == 2 && (a = find(&pl, POLICY_FORGET, "corpus")) != NULL &&
	    a->due && (a = find(&pl, POLICY_FORGET, "ckpt")) != NULL &&
	    !a->due, "retention over the repository's datasets (%zu), a "
	    "failed backup's dataset not one", nforget);
	ok(find(&pl, POLICY_DRILL, "all/ckpt") != NULL && find(&pl,
	    POLICY_DRILL, "all/corpus") != NULL && find(&pl, POLICY_DRILL,
	    "named/corpus") != NULL && find(&pl, POLICY_DRILL,
	    "all/failed") == NULL, "drills of the repository's datasets");
	ok(nwarn == 1 && pl.warned, "one warning");
	ok((a = find(&pl, POLICY_PRUNE, "")) != NULL && a->due,
	    "a prune after forgetting (prune = yes)");
	ok((a = find(&pl, POLICY_EXPORT, "offsite")) != NULL && a->due &&
	    a->dataset == NULL, "an export of the repository's datasets, "
	    "one bundle");
	policy_plan_release(&pl);
	/* With no snapshot in the repository, nothing to send. */
	policy_due(p, now, NULL, 0, &pl);
	a = find(&pl, POLICY_EXPORT, "offsite");
	ok(a != NULL && !a->due && strncmp(a->reason, "nothing to send",
	    15) == 0, "no export before anything is backed up: %s",
	    a != NULL ? a->reason : "");
	policy_plan_release(&pl);
	policy_free(p);

	/* No snapshot yet, but the first backup is due before the export. */
	if ((q = load(exporter)) == NULL)
		return;
	policy_due(q, now, NULL, 0, &pl);
	ok(pl.ndue == 2 && pl.v[0].job == POLICY_BACKUP && pl.v[0].level ==
	    0 && (a = find(&pl, POLICY_EXPORT, "off")) != NULL && a->due &&
	    a->level == 0, "a first run: a full backup, then a full export");
	policy_plan_release(&pl);
	policy_free(q);
}

int
main(void)
{
	char tmpl[] = "/tmp/t-schedule.XXXXXX";

	log_level = -1;
	if (mkdtemp(tmpl) == NULL)
		return (1);
	snprintf(dir, sizeof(dir), "%s", tmpl);
	test_forms();
	test_months();
	test_down();
	test_failed();
	test_reasons();
	test_levels();
	test_backup_host();
	rm_tree(dir);
	return (tap_done());
}
