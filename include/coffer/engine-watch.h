#ifndef COFFER_ENGINE_WATCH_H
#define COFFER_ENGINE_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine-run.h"
#include "coffer/engine.h"
#include "coffer/policy.h"

/*
 * coffer watch on the engines (src/engine/watch.c): each dataset of a
 * policy that has checkpoints, watched (src/fs/watch.c), judged
 * (policy_watch_due) and backed up at its incremental level as soon as a
 * step is complete, the capture recorded as a run of one backup, as
 * coffer run records its backups.
 *
 * The repository is opened for each capture and closed after it, so
 * that the writer lock is held only while a capture is under way and
 * coffer run takes it in between.  open(arg, write, &r, &c) opens it (a
 * writer: the locks, waited for; else the catalog only) and returns 0,
 * or -1 (reported); close(arg, r, c) closes it.
 */
struct engine_watch_capture {
	const char *dataset;
	const char *step;		/* the newest step captured */
	size_t nsteps;
	int status;			/* the backup's, as coffer run's */
	const struct engine_run_step *s;	/* what came of it */
	double delay;			/* seconds from the first marker to
					 * the snapshot complete */
	double lock_wait;		/* seconds waited for the lock */
};

struct engine_watch_opts {
	const struct policy *p;
	int inotify;			/* 0: periodic scans only */
	int (*open)(void *arg, int write, struct repo **r,
	    struct catalog **c);
	void (*close)(void *arg, struct repo *r, struct catalog *c);
	int (*status)(enum engine_result er);	/* cmd_status */
	/* A line for the log: a dataset scanned only and why, once. */
	void (*say)(void *arg, const char *dataset, const char *line);
	/* Each capture, done or failed. */
	void (*captured)(void *arg, const struct engine_watch_capture *cap);
	void *arg;
};

/*
 * Watch until a signal (signals_caught): ENGINE_OK then, ENGINE_REFUSED
 * when the policy has no dataset with checkpoints (reported), ENGINE_ERROR
 * when the repository cannot be opened at the start (reported).  A
 * capture that fails is said (captured) and tried again at the next
 * change or scan; it does not end the watch.
 */
enum engine_result engine_watch(const struct engine_watch_opts *o);

#endif
