/*
 * coffer watch --policy FILE [--metrics-file FILE]
 *
 * Runs in the foreground (a systemd service: coffer cron --unit watch)
 * and backs each checkpoint dataset of the policy up as soon as a step of
 * it is complete (engine_watch, src/engine/watch.c).  Each capture is a
 * line on stdout with the time, a run in coffer log, and, with
 * --metrics-file, that file written again: a file of its own, beside
 * coffer run's (the policy's metrics-file), since each replaces its file
 * whole and only coffer run's has the run's gauges.  SIGTERM or SIGINT stop it: a backup under
 * way stops as coffer run's do, marked failed, and watch exits 0.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-watch.h"
#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/progress.h"
#include "coffer/signals.h"
#include "coffer/status.h"
#include "coffer/tuning.h"

const struct cmd_option cmd_watch_options[] = {
	CMD_OPT_VALUE('p', "policy", "FILE", "the policy file"),
	CMD_OPT_VALUE('m', "metrics-file", "FILE",
	    "write Prometheus metrics to FILE after each capture"),
	CMD_OPT_END
};

/* A lock wait longer than this is said in the log. */
#define LONG_WAIT 10.0

struct watch_cmd {
	struct global_opts g;
	const struct policy *p;
	const char *metrics;
};

static void
stamp(void)
{
	char t[32];

	fmt_time(t, sizeof(t), now_realtime_ns());
	printf("%s ", t);
}

static int
open_repo(void *arg, int write, struct repo **r, struct catalog **c)
{
	struct watch_cmd *w = arg;

	return (cmd_open(&w->g, write ? OPEN_KEYS | OPEN_WRITE : OPEN_KEYS, r,
	    c) == STATUS_OK ? 0 : -1);
}

static void
close_repo(void *arg, struct repo *r, struct catalog *c)
{
	struct watch_cmd *w = arg;

	if (w->metrics != NULL && c != NULL && cmd_run_metrics(c, w->p,
	    w->metrics, now_realtime_ns(), -1, 0))
		log_warn("the metrics file '%s' was not written",
		    w->metrics);
	cmd_close(r, c);
}

static void
say(void *arg, const char *dataset, const char *line)
{
	(void)arg;
	if (log_level < 0)
		return;
	stamp();
	printf("%s: %s\n", fmt_text(dataset), line);
	fflush(stdout);
}

static void
captured(void *arg, const struct engine_watch_capture *cap)
{
	char t[32], d[32];

	(void)arg;
	if (cap->lock_wait >= LONG_WAIT) {
		cmd_fmt_seconds(t, sizeof(t), cap->lock_wait);
		stamp();
		printf("%s: waited %s for the writer lock\n",
		    fmt_text(cap->dataset), t);
	}
	if (log_level < 0 && cap->status == STATUS_OK)
		return;
	cmd_fmt_seconds(t, sizeof(t), cap->s->seconds);
	cmd_fmt_seconds(d, sizeof(d), cap->delay);
	stamp();
	printf("%s: %s %s: %s (%s; %s after the first marker)\n",
	    fmt_text(cap->dataset), catalog_level_name(cap->s->level),
	    cap->status == STATUS_OK ? "ok" : cap->status == STATUS_WARN ?
	    "warning" : "FAILED", fmt_text(cap->s->detail), t, d);
	fflush(stdout);
}

int
cmd_watch(int argc, char **argv, const struct global_opts *g)
{
	struct engine_watch_opts o;
	struct watch_cmd w;
	struct policy *p;
	const char *policy = NULL;
	enum engine_result er;
	int ch;

	memset(&w, 0, sizeof(w));
	w.g = *g;
	while ((ch = cmd_getopt(argc, argv, cmd_watch_options)) != -1) {
		switch (ch) {
		case 'p':
			policy = optarg;
			break;
		case 'm':
			if (*optarg == '\0') {
				log_error("empty --metrics-file");
				return (STATUS_USAGE);
			}
			w.metrics = optarg;
			break;
		default:
			return (cmd_usage_error("watch"));
		}
	}
	if (optind != argc || policy == NULL)
		return (cmd_usage_error("watch"));
	if ((p = policy_load(policy)) == NULL)
		return (STATUS_USAGE);
	if (p->repo)
		w.g.repo = p->repo;
	if (p->key_file)
		w.g.key_file = p->key_file;
	if (p->passphrase_file)
		w.g.passphrase_file = p->passphrase_file;
	if (p->catalog)
		w.g.catalog = p->catalog;
	if (engine_lock_datasets(p)) {
		policy_free(p);
		return (STATUS_ERROR);
	}
	/* It opens the repository at each capture: nobody is there to
	 * type a passphrase each time. */
	if (w.g.key_file == NULL && w.g.passphrase_file == NULL &&
	    w.g.env_pass == NULL) {
		log_error("coffer watch needs a key file, a passphrase file or "
		    "COFFER_PASSPHRASE: it opens the repository at each "
		    "capture");
		policy_free(p);
		return (STATUS_USAGE);
	}
	w.p = p;
	memset(&o, 0, sizeof(o));
	o.p = p;
	o.inotify = !tuning_get()->watch_no_inotify;
	o.open = open_repo;
	o.close = close_repo;
	o.status = cmd_status;
	o.say = say;
	o.captured = captured;
	o.arg = &w;
	signals_install();
	er = engine_watch(&o);
	policy_free(p);
	/* Stopped by a signal is how a watch ends. */
	return (er == ENGINE_OK ? STATUS_OK : cmd_status(er));
}
