#ifndef COFFER_ENGINE_STATUS_H
#define COFFER_ENGINE_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"

/*
 * Where the backups stand, from the catalog alone (src/engine/status.c):
 * what coffer run's metrics file and a monitoring check report.  It only
 * reads: no lock, no write, no key; a read of the catalog's history
 * tables and snapshot rows, never of entries, so its cost does not grow
 * with the files backed up.  Times are ns since the epoch (0: none);
 * ages are the caller's, against its own clock.
 */

/* One dataset: its newest complete snapshot and its last drill. */
struct engine_status_dataset {
	char *name;			/* malloc'd */
	int have;			/* a complete snapshot exists */
	struct {
		char sid[SNAPSHOT_ID_HEX + 1];
		int level;		/* enum snapshot_level */
		int64_t started_ns, finished_ns;
		int64_t bytes_read, bytes_new, bytes_stored, warnings;
	} last;				/* the newest complete one, if have */
	double rpo, rto;		/* seconds: the smallest rpo, rto of
					 * the policy's drills that cover it;
					 * 0 none */
	int64_t drill_due_ns;		/* with a policy and opts' now: the
					 * first slot of its drills' schedules
					 * after its last drill (never
					 * drilled: the newest slot at or
					 * before now); 0 none */
	int drilled;			/* a drill is recorded */
	struct {
		int64_t time_ns;	/* when it started */
		double seconds;		/* its restore (or stream) time */
		char verdict[24];	/* "pass", "fail", "missed-objective" */
	} drill;			/* the last one, if drilled */
	int captured;			/* coffer watch captured a step */
	double capture_delay;		/* seconds from that capture's first
					 * marker to its snapshot, if
					 * captured */
};

/* One export target: when its newest exported bundle was written. */
struct engine_status_target {
	char *name;			/* malloc'd */
	int64_t last_ns;		/* 0: nothing exported to it */
	int64_t due_ns;			/* with a policy and opts' now: the
					 * first slot of the export's
					 * schedules after last_ns (nothing
					 * exported: the newest at or before
					 * now); 0 none */
};

/* The newest verify run of the repository (verify is not per dataset). */
struct engine_status_verify {
	int have;			/* one is recorded */
	int64_t time_ns;		/* when it started */
	char mode[32];			/* "structure", "read-data=1/7", ... */
	int complete;			/* 0: stopped by its time limit */
	int64_t damage;			/* problems it found */
	char verdict[8];		/* "pass" or "fail" */
};

struct engine_status {
	struct engine_status_dataset *datasets;
	size_t ndatasets;
	struct engine_status_target *targets;
	size_t ntargets;
	struct engine_status_verify verify;
};

/*
 * Which datasets and targets to report, in this order: those named, else
 * the policy's (its datasets, its exports' targets), else every dataset
 * the catalog holds a snapshot or a drill of and every target it has
 * exported to, by name; a policy without datasets reports the catalog's,
 * as its drills cover them.  A dataset or target named that the catalog does
 * not know is reported with nothing (have, drilled, last_ns 0).  With a
 * policy, each dataset's rpo and rto are its drills'; with a clock too,
 * when its next drill, and each target's next export, was due: what a
 * monitor compares with its own clock to see one missing.
 */
struct engine_status_opts {
	const struct policy *policy;	/* NULL: none */
	const char *const *datasets;
	size_t ndatasets;
	const char *const *targets;
	size_t ntargets;
	int64_t now;			/* ns; 0: no due times */
};

/*
 * Fill *st as o says (o NULL: everything).  0, or -1 (reported; *st is
 * released).  engine_status_release frees what it holds; *st may be
 * released twice.
 */
int engine_status(struct catalog *c, const struct engine_status_opts *o,
    struct engine_status *st);
void engine_status_release(struct engine_status *st);

#endif
