#ifndef COFFER_ENGINE_RUN_H
#define COFFER_ENGINE_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"
#include "coffer/policy.h"

/*
 * coffer run on the engines (src/engine/run.c): the history that
 * policy_due judges, each action of its plan done by its engine, and the
 * run recorded.
 */

/*
 * The history of a policy's jobs, from the catalog: for each dataset and
 * level the newest complete snapshot and the newest failed one, for each
 * target and level the newest exported bundle, for each kind and subject
 * of a run's action the newest done and the newest not done.  0, or -1
 * (reported); engine_run_history_release frees it (and accepts one that
 * failed).
 */
struct engine_history {
	struct policy_event *v;
	size_t n, cap;
};
int engine_run_history(struct catalog *c, struct engine_history *h);
void engine_run_history_release(struct engine_history *h);

/*
 * A run: now is its clock; fake_clock says it came from --now, and the
 * engines then take it as theirs (a snapshot's time, a bundle's, a
 * drill's, a verify's).  open_scratch and arg: as drill_bundles_opts's,
 * for a drill from an export target's bundles.
 */
struct engine_run {
	struct repo *r;
	struct catalog *c;
	const struct policy *p;
	int64_t now;
	int fake_clock;
	double wait;			/* for the writer lock, as --wait */
	double forget_wait;		/* for the forget lock */
	int (*open_scratch)(void *arg, const char *repo,
	    const char *catalog, struct repo **r, struct catalog **c);
	void *arg;
};

/*
 * One action of the plan, done: status is the exit status the command
 * gave it (the run records it), done whether it counts as done for its
 * schedule (a backup with warnings, a drill or a verify whatever its
 * verdict), level the level it ran at (an export's bundle's), detail what
 * came of it, for people and the run's record.
 */
struct engine_run_step {
	const struct policy_action *a;
	int status, done, level, ran;
	double seconds;
	char detail[256];
};

/*
 * Do the due action s->a by its engine, filling s (but status and
 * seconds).  ENGINE_REFUSED when a drill or an export of one dataset
 * finds no complete snapshot of it.
 */
enum engine_result engine_run_action(const struct engine_run *run,
    struct engine_run_step *s);

/*
 * Record the run in the catalog and journal it to the repository: its
 * clock, when it started by the host's (wall_ns), how long it took, its
 * exit status, and the n steps that ran, with this host's name and the
 * user's.  0 or -1 (reported).
 */
int engine_run_record(const struct engine_run *run, int64_t wall_ns,
    double seconds, int status, const struct engine_run_step *v, size_t n);

#endif
