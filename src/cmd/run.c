/*
 * coffer run --policy FILE [--dry-run] [--now TIME] [--json]
 *            [--metrics-file FILE]
 *
 * What a policy says is due (policy_due, src/policy/due.c, from the
 * history engine_run_history reads and the run's clock), done in its
 * order by the engines in this process (engine_run_action), under the
 * repository's writer lock for the whole run, so that two runs never
 * overlap and the second decides only after the first is done.  This
 * file parses the options, opens, prints and gives the exit status.
 *
 * What the unlocked key cannot do is refused before anything runs, at
 * the line that asks for it: a write-only key backs up and exports, and
 * nothing else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-keys.h"
#include "coffer/engine-run.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/status.h"

struct run {
	struct engine_run e;
	struct engine_history h;	/* the plan points into it */
	struct policy_plan plan;
	struct engine_run_step *v;	/* the plan's due actions */
	size_t n;
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

static const char *
level_name(int level)
{
	return (level >= 0 ? catalog_level_name(level) : NULL);
}

static const char *
subject(const struct policy_action *a)
{
	return (a->subject[0] ? fmt_text(a->subject) : "-");
}

/*
 * For --dry-run: each job due, with its slot and when it was last done;
 * with --verbose also those not due, and why not.
 */
static void
print_plan(const struct policy_plan *pl)
{
	const struct policy_action *a;
	size_t i;

	if (pl->ndue == 0 && log_level >= 0)
		printf("nothing is due\n");
	for (i = 0; i < pl->n; i++) {
		a = &pl->v[i];
		if (a->warn || (!a->due && log_level <= 0))
			continue;
		printf("%s %-7s %-24s %-13s %s\n", a->due ? "would" : "not  ",
		    policy_job_name(a->job), subject(a), a->level >= 0 ?
		    level_name(a->level) : "-", fmt_text(a->reason));
	}
}

/* One line: kind, subject, level, status, what came of it. */
static void
print_step(const struct engine_run_step *s)
{
	char t[32];

	cmd_fmt_seconds(t, sizeof(t), s->seconds);
	printf("%-7s %-24s %-13s %-8s %s (%s)\n", policy_job_name(s->a->job),
	    subject(s->a), s->level >= 0 ? level_name(s->level) : "-",
	    s->status == STATUS_OK ? "ok" : s->status == STATUS_WARN ?
	    "warning" : "FAILED", fmt_text(s->detail), t);
	fflush(stdout);
}

static void
print_json(const struct run *run, int dry_run, int status, double seconds)
{
	char when[32];
	struct jw j;
	size_t i;

	jw_init(&j, stdout);
	jw_begin_object(&j);
	fmt_time(when, sizeof(when), run->e.now);
	jw_str(jw_key(&j, "time"), when);
	jw_str(jw_key(&j, "policy"), run->e.p->file);
	jw_bool(jw_key(&j, "dry_run"), dry_run);
	if (!dry_run) {
		jw_int(jw_key(&j, "status"), status);
		jw_double(jw_key(&j, "seconds"), seconds, 3);
	}
	jw_begin_array_lines(jw_key(&j, "actions"));
	for (i = 0; i < run->n; i++) {
		const struct engine_run_step *s = &run->v[i];

		jw_begin_object(&j);
		jw_str(jw_key(&j, "action"), policy_job_name(s->a->job));
		jw_str(jw_key(&j, "subject"), s->a->subject);
		jw_str(jw_key(&j, "level"), level_name(s->level));
		fmt_time(when, sizeof(when), s->a->slot);
		jw_str(jw_key(&j, "slot"), when);
		jw_str(jw_key(&j, "reason"), s->a->reason);
		if (!dry_run) {
			jw_int(jw_key(&j, "status"), s->status);
			jw_double(jw_key(&j, "seconds"), s->seconds, 3);
			jw_str(jw_key(&j, "detail"), s->detail);
		}
		jw_end_object(&j);
	}
	jw_end_array(&j);
	jw_end_object(&j);
}

/*
 * What is due, from the catalog's history and the run's clock: the due
 * actions into run->v, in order; a dataset a section names that the
 * repository lacks said at its line.  0 or -1.
 */
static int
plan(struct run *run)
{
	const struct policy_plan *pl = &run->plan;
	size_t i;
	int rc;

	if (engine_run_history(run->e.c, &run->h))
		return (-1);
	rc = policy_due(run->e.p, run->e.now, run->h.v, run->h.n, &run->plan);
	if (rc == 0 && (run->v = calloc(pl->ndue + 1, sizeof(*run->v))) ==
	    NULL) {
		log_error("out of memory");
		rc = -1;
	}
	for (i = 0; rc == 0 && i < pl->n; i++) {
		if (pl->v[i].warn)
			log_warn("%s:%d: %s", run->e.p->file, pl->v[i].line,
			    pl->v[i].reason);
		if (pl->v[i].due) {
			run->v[run->n].a = &pl->v[i];
			run->v[run->n++].level = pl->v[i].level;
		}
	}
	return (rc);
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

	if (!engine_key_write_only(r))
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
			if (cmd_parse_time("--now", optarg, &run.e.now))
				return (STATUS_USAGE);
			run.e.fake_clock = 1;
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
	if (!run.e.fake_clock)
		run.e.now = wall;
	run.e.p = p;
	run.e.wait = pg.wait;
	run.e.forget_wait = cmd_forget_wait(&pg);
	run.e.open_scratch = cmd_open_scratch;
	run.e.arg = &pg;
	signals_install();
	if (engine_lock_datasets(p)) {
		st = STATUS_ERROR;
		goto out;
	}
	/*
	 * A run holds the catalog's writer lock from before it decides until
	 * it is done: a second run of this host waits (--wait) and then finds
	 * done what the first did, or fails at once with --no-wait.  The
	 * repository's writer lock it holds shared, and exclusive for its
	 * forget and prune steps.  A dry run writes nothing and takes no
	 * lock.
	 */
	if ((st = cmd_open_checked(&pg, dry_run ? OPEN_KEYS :
	    OPEN_KEYS | OPEN_WRITE, check_key, p, &run.e.r, &run.e.c)) !=
	    STATUS_OK)
		goto out;
	if (plan(&run)) {
		st = STATUS_ERROR;
		goto close;
	}
	if (dry_run) {
		if (json)
			print_json(&run, 1, 0, 0);
		else
			print_plan(&run.plan);
		st = STATUS_OK;
		goto close;
	}
	shown = !json && log_level >= 0 && (log_level > 0 ||
	    isatty(STDOUT_FILENO));
	for (i = 0; i < run.n; i++) {
		struct engine_run_step *s = &run.v[i];
		double t0 = now_monotonic();

		if (signals_caught())
			break;
		s->status = cmd_status(engine_run_action(&run.e, s));
		s->ran = 1;
		s->seconds = now_monotonic() - t0;
		worst = cmd_run_worst(worst, s->status);
		/* Quiet under cron: a line for a person, or a problem. */
		if (shown || (!json && s->status != STATUS_OK))
			print_step(s);
	}
	if (run.plan.warned)
		worst = cmd_run_worst(worst, STATUS_WARN);
	if (signals_caught())
		worst = cmd_run_worst(worst, 128 + signals_caught());
	secs = (double)(now_realtime_ns() - wall) / 1e9;
	/* A run that did nothing leaves no trace: cron calls it hourly. */
	if (run.n > 0 && engine_run_record(&run.e, wall, secs, worst, run.v,
	    run.n))
		worst = cmd_run_worst(worst, STATUS_ERROR);
	if (json)
		print_json(&run, 0, worst, secs);
	if (metrics != NULL && cmd_run_metrics(run.e.c, p, metrics, run.e.now,
	    worst, secs))
		worst = cmd_run_worst(worst, STATUS_ERROR);
	st = worst;
close:
	cmd_close(run.e.r, run.e.c);
out:
	free(run.v);
	policy_plan_release(&run.plan);
	engine_run_history_release(&run.h);
	policy_free(p);
	return (st);
}
