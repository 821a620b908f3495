/*
 * coffer run --metrics-file: the Prometheus textfile (node_exporter's
 * textfile collector) of a policy's datasets and targets, as
 * engine_status reads them from the catalog, and of the run that wrote
 * it (coffer watch --metrics-file: all but the run's).  Replaced whole
 * and atomically at every run, so a series never vanishes because a run
 * had nothing to do, and a collector never reads half a file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "coffer/buf.h"
#include "coffer/engine-status.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/prom.h"

enum {
	M_BACKUP_TIME, M_BACKUP_LEVEL, M_READ, M_NEW, M_STORED, M_DURATION,
	M_WARNINGS, M_RPO_AGE, M_RPO_OK, M_RPO_OBJ, M_RTO_OBJ, M_DRILL_DUE,
	M_DRILL_TIME, M_DRILL_OK, M_DRILL_DURATION, M_CAPTURE, M__DATASET
};

/* What a dataset's sample needs: nothing, a complete snapshot, a drill,
 * a capture by coffer watch. */
enum { NEED_NONE, NEED_SNAPSHOT, NEED_DRILL, NEED_CAPTURE };

static const struct {
	const char *name, *help;
	int decimals, need;
} dsm[M__DATASET] = {
	{ "coffer_backup_last_success_timestamp_seconds",
	  "Start of the dataset's newest complete snapshot, in seconds since "
	  "the epoch.", 3, NEED_SNAPSHOT },
	{ "coffer_backup_last_level",
	  "Level of that snapshot: 0 full, 1 differential, 2 incremental.", 0,
	  NEED_SNAPSHOT },
	{ "coffer_backup_last_bytes_read",
	  "File content that snapshot read from the source.", 0,
	  NEED_SNAPSHOT },
	{ "coffer_backup_last_bytes_new",
	  "Plaintext of the chunks that snapshot added to the repository.", 0,
	  NEED_SNAPSHOT },
	{ "coffer_backup_last_bytes_stored",
	  "What those chunks took in packs.", 0, NEED_SNAPSHOT },
	{ "coffer_backup_last_duration_seconds",
	  "Wall time of that snapshot, start to finish.", 3, NEED_SNAPSHOT },
	{ "coffer_backup_last_warnings",
	  "Warnings of that snapshot (files skipped or kept at their "
	  "previous version).", 0, NEED_SNAPSHOT },
	{ "coffer_rpo_age_seconds",
	  "Age of the dataset's newest complete snapshot at the run.", 3,
	  NEED_SNAPSHOT },
	{ "coffer_rpo_ok",
	  "1 if the newest complete snapshot is within the objective.", 0,
	  NEED_SNAPSHOT },
	{ "coffer_rpo_objective_seconds",
	  "The dataset's recovery point objective (the smallest rpo of its "
	  "drills).", 3, NEED_NONE },
	{ "coffer_rto_objective_seconds",
	  "The dataset's recovery time objective (the smallest rto of its "
	  "drills).", 3, NEED_NONE },
	{ "coffer_drill_due_timestamp_seconds",
	  "When the dataset's next drill was due: the first slot of its "
	  "drills' schedules after its last drill (never drilled: the newest "
	  "slot before the run).", 3, NEED_NONE },
	{ "coffer_drill_last_timestamp_seconds",
	  "When the dataset's last recovery drill started.", 3, NEED_DRILL },
	{ "coffer_drill_success",
	  "1 if the dataset's last drill passed.", 0, NEED_DRILL },
	{ "coffer_drill_duration_seconds",
	  "Wall time of the last drill's restore (or verified stream).", 3,
	  NEED_DRILL },
	{ "coffer_watch_capture_delay_seconds",
	  "Seconds from a checkpoint step's marker to the snapshot that "
	  "coffer watch took of it, at its newest capture.", 3, NEED_CAPTURE },
};

/* Dataset m's sample of metric k into *v: 1, or 0 when it has none. */
static int
dataset_value(const struct engine_status_dataset *m, int k, int64_t now,
    double *v)
{
	double age = m->have ? (double)(now - m->last.started_ns) / 1e9 : 0;

	if (age < 0)
		age = 0;
	if ((dsm[k].need == NEED_SNAPSHOT && !m->have) ||
	    (dsm[k].need == NEED_DRILL && !m->drilled) ||
	    (dsm[k].need == NEED_CAPTURE && !m->captured))
		return (0);
	switch (k) {
	case M_BACKUP_TIME: *v = (double)m->last.started_ns / 1e9; break;
	case M_BACKUP_LEVEL: *v = m->last.level; break;
	case M_READ: *v = (double)m->last.bytes_read; break;
	case M_NEW: *v = (double)m->last.bytes_new; break;
	case M_STORED: *v = (double)m->last.bytes_stored; break;
	case M_DURATION:
		*v = m->last.finished_ns > m->last.started_ns ?
		    (double)(m->last.finished_ns - m->last.started_ns) / 1e9 :
		    0;
		break;
	case M_WARNINGS: *v = (double)m->last.warnings; break;
	case M_RPO_AGE: *v = age; break;
	case M_RPO_OK: *v = age <= m->rpo; return (m->rpo > 0);
	case M_RPO_OBJ: *v = m->rpo; return (m->rpo > 0);
	case M_RTO_OBJ: *v = m->rto; return (m->rto > 0);
	case M_DRILL_DUE:
		*v = (double)m->drill_due_ns / 1e9;
		return (m->drill_due_ns > 0);
	case M_DRILL_TIME: *v = (double)m->drill.time_ns / 1e9; break;
	case M_DRILL_OK: *v = strcmp(m->drill.verdict, "pass") == 0; break;
	case M_DRILL_DURATION: *v = m->drill.seconds; break;
	default: *v = m->capture_delay;
	}
	return (1);
}

/* A family of each target's time: its newest bundle's, or (due) when
 * its next export was due; a target without one has no sample. */
static int
target_family(struct buf *b, const struct engine_status *st, int due,
    const char *name, const char *help)
{
	size_t i;
	int64_t t;
	int err;

	err = prom_family(b, name, "gauge", help);
	for (i = 0; i < st->ntargets; i++) {
		t = due ? st->targets[i].due_ns : st->targets[i].last_ns;
		if (t > 0)
			err |= prom_sample(b, name, "target",
			    st->targets[i].name, (double)t / 1e9, 3);
	}
	return (err);
}

static int
target_metrics(struct buf *b, const struct engine_status *st)
{
	return (target_family(b, st, 0,
	    "coffer_export_last_timestamp_seconds",
	    "When the newest bundle for the target was written.") |
	    target_family(b, st, 1, "coffer_export_due_timestamp_seconds",
	    "When the target's next export was due: the first slot of its "
	    "schedules after its newest bundle (none yet: the newest slot "
	    "before the run)."));
}

/* The newest verify run's families, when one is recorded: a verify
 * checks the whole repository, so they carry no label. */
static int
verify_metrics(struct buf *b, const struct engine_status_verify *v)
{
	int err = 0;

	if (!v->have)
		return (0);
	err |= prom_family(b, "coffer_verify_last_timestamp_seconds", "gauge",
	    "When the newest verify of the repository started.");
	err |= prom_sample(b, "coffer_verify_last_timestamp_seconds", NULL,
	    NULL, (double)v->time_ns / 1e9, 3);
	err |= prom_family(b, "coffer_verify_last_damage", "gauge",
	    "Problems that verify found: chunks damaged or missing, records "
	    "that fail their checks.");
	err |= prom_sample(b, "coffer_verify_last_damage", NULL, NULL,
	    (double)v->damage, 0);
	err |= prom_family(b, "coffer_verify_last_success", "gauge",
	    "1 if that verify passed and found no damage.");
	err |= prom_sample(b, "coffer_verify_last_success", NULL, NULL,
	    v->damage == 0 && strcmp(v->verdict, "pass") == 0, 0);
	err |= prom_family(b, "coffer_verify_last_complete", "gauge",
	    "1 if that verify checked all it was asked to (0: stopped by its "
	    "time limit, to resume).");
	err |= prom_sample(b, "coffer_verify_last_complete", NULL, NULL,
	    v->complete != 0, 0);
	return (err);
}

int
cmd_run_metrics(struct catalog *c, const struct policy *p, const char *path,
    int64_t now, int status, double seconds)
{
	struct engine_status_opts o = { .policy = p, .now = now };
	struct engine_status st;
	struct buf b = BUF_INIT;
	size_t i;
	int k, err = 0, rc = -1;
	double v;

	if (engine_status(c, &o, &st))
		return (-1);
	for (k = 0; k < M__DATASET; k++) {
		err |= prom_family(&b, dsm[k].name, "gauge", dsm[k].help);
		for (i = 0; i < st.ndatasets; i++)
			if (dataset_value(&st.datasets[i], k, now, &v))
				err |= prom_sample(&b, dsm[k].name, "dataset",
				    st.datasets[i].name, v, dsm[k].decimals);
	}
	err |= target_metrics(&b, &st);
	err |= verify_metrics(&b, &st.verify);
	if (status < 0)
		goto write;
	err |= prom_family(&b, "coffer_run_timestamp_seconds", "gauge",
	    "The clock of the last coffer run (its --now, if given).");
	err |= prom_sample(&b, "coffer_run_timestamp_seconds", NULL, NULL,
	    (double)now / 1e9, 3);
	err |= prom_family(&b, "coffer_run_exit_status", "gauge",
	    "Exit status of the last coffer run (0 ok; coffer-run(1)).");
	err |= prom_sample(&b, "coffer_run_exit_status", NULL, NULL, status, 0);
	err |= prom_family(&b, "coffer_run_duration_seconds", "gauge",
	    "Wall time of the last coffer run.");
	err |= prom_sample(&b, "coffer_run_duration_seconds", NULL, NULL,
	    seconds, 3);
write:
	if (err)
		goto out;
	rc = fsutil_write_file(path, b.data, b.len, 0644, 1);
out:
	engine_status_release(&st);
	buf_release(&b);
	return (rc);
}
