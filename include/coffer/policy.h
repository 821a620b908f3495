#ifndef COFFER_POLICY_H
#define COFFER_POLICY_H

#include <stddef.h>
#include <stdint.h>

/*
 * Retention rules, as restic and borg define them, evaluated on snapshot
 * times (UTC):
 *   last N     the N newest;
 *   hourly N   the newest of each of the N newest hours that have one,
 *   daily, weekly (ISO weeks), monthly, yearly likewise;
 *   within D   every snapshot less than D seconds older than the newest;
 *   tag T      every snapshot tagged T;
 * and, whatever the rules, every snapshot marked kept (the tag "keep").
 * A snapshot is kept when any rule keeps it.  Rules count per dataset.
 */
enum retention_reason {
	RETAIN_LAST = 1 << 0,
	RETAIN_HOURLY = 1 << 1,
	RETAIN_DAILY = 1 << 2,
	RETAIN_WEEKLY = 1 << 3,
	RETAIN_MONTHLY = 1 << 4,
	RETAIN_YEARLY = 1 << 5,
	RETAIN_WITHIN = 1 << 6,
	RETAIN_CHAIN = 1 << 7,		/* a kept snapshot restores from it */
	RETAIN_TAG = 1 << 8,
	RETAIN_MARK = 1 << 9,		/* marked kept at backup (--keep) */
	RETAIN_RUNNING = 1 << 10	/* a backup running beside the forget
					 * may build on it */
};

struct retention {
	int last, hourly, daily, weekly, monthly, yearly;	/* 0: unset */
	double within;			/* seconds; 0: unset */
	const char *const *tags;	/* keep those with one of these */
	size_t ntags;
};

struct retention_snap {
	int64_t time_ns;		/* in */
	const char *tags;		/* in: "a,keep" or NULL */
	unsigned reasons;		/* out: RETAIN_* that keep it, or 0 */
};

#define RETENTION_KEEP_TAG "keep"	/* the mark of --keep */

/* 1 if tags ("a,b,keep"; NULL: none) holds tag. */
int retention_has_tag(const char *tags, const char *tag);

/* 1 if any rule is set (the keep mark is not a rule: it always holds). */
int retention_any(const struct retention *r);

/*
 * Set each snapshot's reasons.  v holds one dataset's snapshots, newest
 * first (the caller sorts; equal times keep their order).
 */
void retention_apply(const struct retention *r, struct retention_snap *v,
    size_t n);

/* The names of the reasons set in mask, comma-separated, into out. */
void retention_reasons(unsigned mask, char *out, size_t size);

/*
 * Durations in policy files and options: a number and a unit (ms, s, m,
 * h, d, w), repeated ("1h30m"), or a bare number of seconds; above 0.
 * 0, or -1 (nothing reported: the caller says where).
 */
int policy_parse_duration(const char *s, double *secs);

/*
 * Percentages in policy files and options: a number from 0 (only when
 * zero_ok) or above 0, to 100, with or without "%".  0, or -1 (nothing
 * reported).
 */
int policy_parse_percent(const char *s, int zero_ok, double *pct);

/*
 * Schedules (coffer-policy(5)), evaluated in UTC:
 *   hourly [:MM]                      every hour at minute MM (00)
 *   daily [HH:MM]                     every day (00:00)
 *   weekly DAY [HH:MM]                DAY: monday ... sunday (or mon ...)
 *   monthly N [HH:MM]                 on day N (1-31) of the months that
 *                                     have one
 *   monthly ORD DAY [HH:MM]           ORD: first, second, third, fourth or
 *                                     last DAY of the month
 * A schedule is a series of instants, its slots.
 */
enum schedule_kind {
	SCHED_NONE = 0,
	SCHED_HOURLY,
	SCHED_DAILY,
	SCHED_WEEKLY,
	SCHED_MONTHLY
};
struct schedule {
	int kind;			/* SCHED_* */
	int hour, minute;
	int wday;			/* 0 Sunday .. 6 Saturday */
	int mday;			/* monthly on a day: 1-31; 0 by weekday */
	int nth;			/* monthly by weekday: 1-4, or -1 last */
};
/* Parse s into *out: 0, or -1 with *why a static message. */
int schedule_parse(const char *s, struct schedule *out, const char **why);
/* The newest slot at or before t (ns since the epoch); INT64_MIN when
 * there is none in the two years before t. */
int64_t schedule_last(const struct schedule *s, int64_t t);
/* The first slot after t; INT64_MAX when none in the two years after. */
int64_t schedule_next(const struct schedule *s, int64_t t);
/* The schedule in the syntax above, normalized, into out. */
void schedule_format(const struct schedule *s, char *out, size_t size);

/*
 * What is due for a job with a schedule per level (index LEVEL_FULL,
 * LEVEL_DIFFERENTIAL, LEVEL_INCREMENTAL; kind SCHED_NONE where none):
 * done[i] is the newest time (ns) a run at level i or a higher one (a
 * lower index) was done, 0 when never.  A level is due when its newest
 * slot at or before now is later than done[level]; the highest level due
 * is returned (-1 when none) with that slot in *slot.  A job never done
 * at full gets a full, whatever its schedules say, as soon as any level
 * is due or nothing at all was ever done.
 */
int schedule_due(const struct schedule sched[3], const int64_t done[3],
    int64_t now, int64_t *slot);

/*
 * A policy file (coffer-policy(5)): INI, parsed with libinih.
 */
struct policy_dataset {
	char *name;
	char *path;
	char **excludes;
	size_t nexcludes;
	int one_file_system;
	struct schedule sched[3];	/* by level; SCHED_NONE: none */
	struct retention keep;		/* its own rules, else the policy's */
	double settle;			/* seconds; 0: none */
	char *require;			/* marker file name, or NULL */
	char **checkpoints;		/* globs of checkpoint directories */
	size_t ncheckpoints;
	int line, require_line;		/* of its section, of require */
	int keep_line;			/* of its first keep- rule, or 0 */
};

struct policy_export {
	char *target;
	char *to;
	struct schedule sched[3];
	char **datasets;		/* none: every dataset, one bundle */
	size_t ndatasets;
	int line, datasets_line, to_line;
};

struct policy_drill {
	char *name;
	char **datasets;		/* of the repository; none: every
					 * dataset of the policy, or of the
					 * repository when the policy has
					 * none */
	size_t ndatasets;
	struct schedule sched;
	double sample;			/* percent; 0: every file */
	double rto, rpo;		/* seconds; 0: none */
	int no_write;
	char *from;			/* NULL: the repository; else an
					 * export target's name */
	int line, datasets_line, from_line;
};

/*
 * [verify NAME]: a scheduled verify of the whole repository.  read:
 * POLICY_READ_NONE checks indexes and records only; ALL reads every
 * pack's data; PERCENT a random share; SLICE a different 1/slices of the
 * packs each run, in turn, so that `slices` runs read them all.
 */
enum policy_read {
	POLICY_READ_NONE = 0,
	POLICY_READ_ALL,
	POLICY_READ_PERCENT,
	POLICY_READ_SLICE
};
struct policy_verify {
	char *name;
	struct schedule sched;
	int read;			/* enum policy_read */
	double percent;			/* POLICY_READ_PERCENT */
	unsigned slices;		/* POLICY_READ_SLICE: M */
	double max_seconds;		/* 0: no limit */
	int line;
};

struct policy {
	char *file;
	char *repo, *key_file, *passphrase_file, *catalog;
	char *metrics_file;
	struct retention keep;		/* [retention]: every dataset's */
	char **keep_datasets;		/* [retention] datasets: the
					 * repository's datasets it judges
					 * besides the policy's own */
	size_t nkeep_datasets;
	int retention_line, keep_datasets_line;
	struct schedule prune_sched;	/* forget, then prune */
	int prune;			/* prune after forgetting (yes) */
	double max_unused;		/* 0..1 */
	struct policy_dataset *datasets;
	size_t ndatasets;
	struct policy_export *exports;
	size_t nexports;
	struct policy_drill *drills;
	size_t ndrills;
	struct policy_verify *verifies;
	size_t nverifies;
};

/*
 * Read and check the policy file path.  Every problem is reported, each
 * as "PATH:LINE: message" (log_error), before NULL is returned: an
 * unknown section or key, a bad value, a duration or schedule that does
 * not parse, a dataset path that is not a directory, a dataset without a
 * schedule, a name used twice, a reference to what the file does not
 * define, a file with nothing to do.  Any subset of the sections is a
 * policy: a backup host's may back up nothing and keep, drill and verify
 * the datasets that other hosts back up.  policy_free accepts NULL.
 */
struct policy *policy_load(const char *path);
void policy_free(struct policy *p);
/* A dataset's retention rules: its own, else the policy's. */
const struct retention *policy_retention(const struct policy *p,
    const struct policy_dataset *d);
/*
 * What the policy asks for that needs the key that reads (decrypts) the
 * repository: fn is called with the line of each section or key that asks
 * (forget and prune in [retention], a dataset's keep- rules, each [drill]
 * and [verify]) and what it is, in file order by kind.  A write-only key
 * can back up and export only.
 */
void policy_needs_read(const struct policy *p,
    void (*fn)(void *arg, int line, const char *what), void *arg);
/* The dataset named, or NULL. */
const struct policy_dataset *policy_dataset_find(const struct policy *p,
    const char *name);
/* The export target named, or NULL. */
const struct policy_export *policy_export_find(const struct policy *p,
    const char *target);

/*
 * What a policy has due at a time (src/policy/due.c): a pure function of
 * the policy, the clock and the history, which reads no catalog, no clock
 * and prints nothing, so that months of schedules run on a fake clock in a
 * unit test (tests/unit/t-schedule.c).  The engine fills the history from
 * the catalog (engine_run_history); coffer run does what comes out.
 */
enum policy_job {
	POLICY_BACKUP,
	POLICY_EXPORT,
	POLICY_FORGET,
	POLICY_PRUNE,
	POLICY_DRILL,
	POLICY_VERIFY
};
#define POLICY_JOBS 6
/* "backup", "export", "forget", "prune", "drill", "verify". */
const char *policy_job_name(int job);

/*
 * One thing done, or tried, in the history.  subject: the dataset of a
 * backup or forget, the target of an export, "DRILL/DATASET" for a drill,
 * the [verify] name, "" for a prune.  time_ns: a backup's snapshot start,
 * an export's bundle creation, the run's clock (--now) for the others.
 * ok: a complete snapshot, a bundle, an action that counts as done; 0: one
 * that failed (said in the reasons, never counted as done).
 */
struct policy_event {
	int job;			/* enum policy_job */
	const char *subject;
	int level;			/* backup, export: 0 full, 1
					 * differential, 2 incremental; else
					 * -1 */
	int64_t time_ns;
	int ok;
};

/*
 * A job policy_due looked at.  due: to be done now, at level, for slot
 * (the newest slot at or before now), last done at last (0: never).  Not
 * due: slot is the next slot (INT64_MAX: none) and reason says why.
 * warn: a dataset that a [retention] or [drill] section names at line
 * `line` and the repository does not hold (yet); reason says so and the
 * run ends with a warning.  Pointers point into the policy and the
 * history given.
 */
struct policy_action {
	int job;			/* enum policy_job */
	int due, warn, line;
	const struct policy_dataset *ds;	/* backup; forget of its own */
	const struct policy_export *ex;		/* export */
	const struct policy_drill *dr;		/* drill */
	const struct policy_verify *vf;		/* verify */
	const char *dataset;		/* export, forget, drill: one dataset
					 * (an export of all: NULL) */
	char subject[160];		/* as in struct policy_event */
	int level;			/* backup, export; else -1 */
	int64_t slot, last;
	char reason[320];
};
struct policy_plan {
	struct policy_action *v;	/* in the order to do them: backups,
					 * exports, forgets, prune, drills,
					 * verifies */
	size_t n, ndue;
	int warned;			/* an action with warn set */
};

/*
 * Every job of p at now, given the history h (n events, in any order),
 * into *out: those due (due = 1) with their slot, "slot T, last done T"
 * or "slot T, never done" as reason, and those not due with why.  A job
 * is due as schedule_due says; a dataset of the repository is one with a
 * complete snapshot in h.  0, or -1 out of memory (reported);
 * policy_plan_release frees *out.
 */
int policy_due(const struct policy *p, int64_t now,
    const struct policy_event *h, size_t n, struct policy_plan *out);
void policy_plan_release(struct policy_plan *plan);

/*
 * What coffer watch captures (src/policy/watch.c): a pure function of a
 * checkpoint dataset's steps as last seen, its newest complete snapshot
 * and the clock, so that markers, settle times and late markers run on a
 * fake clock in a unit test (tests/unit/t-watch.c).  Times are ns since
 * the epoch, the host's clock (the one file times are set by).
 *
 * A step (a directory a `checkpoints` glob matches) is complete once its
 * marker is there and nothing in it changed for `settle`: ready at
 * max(marked_ns, changed_ns) + settle.  A step without its marker is
 * never complete.  A complete step is captured by a snapshot that started
 * at or after it was ready (the backup then found it settled and took it
 * whole); one ready later is due.  Steps that go away are simply not in
 * the list.
 */
struct policy_watch_step {
	int marked;			/* its marker file is there */
	int64_t marked_ns;		/* the marker's newest of mtime and
					 * ctime */
	int64_t changed_ns;		/* the newest change in the step (0:
					 * not read: only its marker counts) */
};
struct policy_watch_verdict {
	size_t ndue;			/* complete steps not captured yet */
	int capture;			/* back the dataset up now */
	int64_t first_ready_ns;		/* of the due: the earliest ready */
	int64_t first_marked_ns;	/* of the due: the earliest marker */
	int64_t next_ns;		/* when to look again: the next
					 * marked step to become ready, or
					 * the end of the debounce;
					 * INT64_MAX when none */
};
/*
 * Judge the n steps v of a dataset at now: settle in seconds, captured_ns
 * the start of its newest complete snapshot (0: none).  Steps that become
 * ready within debounce seconds of each other are taken in one snapshot:
 * capture is held while another marked step becomes ready within
 * debounce of now, but never past 2 * debounce after the first due one
 * was ready.
 */
void policy_watch_due(const struct policy_watch_step *v, size_t n,
    double settle, double debounce, int64_t captured_ns, int64_t now,
    struct policy_watch_verdict *out);
/* The time a marked step is complete (ready) at. */
int64_t policy_watch_ready(const struct policy_watch_step *s, double settle);

#endif
