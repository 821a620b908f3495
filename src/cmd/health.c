/*
 * coffer health [--policy FILE] [--rpo DURATION] [--json] [DATASET...]:
 * one check for Nagios, Icinga and Zabbix, after the monitoring-plugins
 * conventions: one status line "COFFER OK|WARNING|CRITICAL|UNKNOWN - ..."
 * with perfdata after a '|', and exit 0, 1, 2 or 3.  It reads what
 * engine_status reads (the catalog's history and snapshot rows, no
 * entries, no lock, no key), so it stays fast on any catalog.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "coffer/buf.h"
#include "coffer/engine-status.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/progress.h"
#include "coffer/status.h"

/* The monitoring-plugins exit statuses, worst last. */
enum { H_OK, H_WARNING, H_CRITICAL, H_UNKNOWN };

static const char *const hname[] = { "OK", "WARNING", "CRITICAL",
	"UNKNOWN" };

const struct cmd_option cmd_health_options[] = {
	CMD_OPT_VALUE('p', "policy", "FILE",
	    "the policy: its datasets, targets and drills' rpo"),
	CMD_OPT_VALUE('R', "rpo", "DURATION",
	    "the recovery point objective of every dataset checked"),
	CMD_OPT_FLAG('j', "json", "print one JSON object"),
	CMD_OPT_END
};

struct health {
	int status;			/* H_* */
	struct buf msg, perf;
	int err;
};

/* How long past its due time an export may still be under way. */
#define EXPORT_GRACE_NS (6 * 3600 * INT64_C(1000000000))

static void worse(struct health *h, int s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Raise h's status to s and add a problem to its message. */
static void
worse(struct health *h, int s, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (s > h->status)
		h->status = s;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	h->err |= buf_printf(&h->msg, "%s%s", h->msg.len ? "; " : "", line);
}

/* "NAME: snapshot AGE old, rpo RPO" at status s. */
static void
too_old(struct health *h, int s, const char *name, double age, double rpo)
{
	char t1[32], t2[32];

	cmd_fmt_seconds(t1, sizeof(t1), age);
	cmd_fmt_seconds(t2, sizeof(t2), rpo);
	worse(h, s, "%s: snapshot %s old, rpo %s", fmt_text(name), t1, t2);
}

/* The status of one dataset: WARNING past its RPO, CRITICAL past twice
 * it, or with no complete snapshot, or when its last drill failed. */
static int
dataset_status(const struct engine_status_dataset *d, double rpo,
    double age, struct health *h)
{
	int s = H_OK;

	if (!d->have) {
		worse(h, H_CRITICAL, "%s: no complete snapshot",
		    fmt_text(d->name));
		s = H_CRITICAL;
	} else if (rpo > 0 && age > 2 * rpo) {
		too_old(h, H_CRITICAL, d->name, age, rpo);
		s = H_CRITICAL;
	} else if (rpo > 0 && age > rpo) {
		too_old(h, H_WARNING, d->name, age, rpo);
		s = H_WARNING;
	}
	if (d->drilled && strcmp(d->drill.verdict, "fail") == 0) {
		worse(h, H_CRITICAL, "%s: last drill failed",
		    fmt_text(d->name));
		s = H_CRITICAL;
	} else if (d->drilled && strcmp(d->drill.verdict, "pass") != 0) {
		worse(h, H_WARNING, "%s: last drill missed its objective",
		    fmt_text(d->name));
		if (s < H_WARNING)
			s = H_WARNING;
	}
	return (s);
}

static double
age_of(int64_t now, int64_t t)
{
	double a = (double)(now - t) / 1e9;

	return (a < 0 ? 0 : a);
}

/* A perfdata label: quoted, its quotes doubled, no '=' nor '|'. */
static int
perf_label(struct buf *b, const char *name, const char *suffix)
{
	const char *p;
	int err = buf_printf(b, "%s'", b->len ? " " : "");

	for (p = name; *p; p++) {
		if (*p == '\'')
			err |= buf_printf(b, "''");
		else if (*p == '=' || *p == '|' || (unsigned char)*p < 0x20)
			err |= buf_printf(b, "_");
		else
			err |= buf_printf(b, "%c", *p);
	}
	return (err | buf_printf(b, "%s'=", suffix));
}

/* What report judged of one dataset, for the text and the JSON alike. */
struct judged {
	int status;			/* H_* */
	double rpo;			/* seconds; 0: none */
	double age;			/* of its newest snapshot; 0: none */
};

static int unknown(int json, const char *why);

static void
json_dataset(struct jw *j, const struct engine_status_dataset *d,
    const struct judged *jd)
{
	double rpo = jd->rpo, age = jd->age;
	int s = jd->status;

	char when[32];

	jw_begin_object(j);
	jw_str(jw_key(j, "dataset"), d->name);
	jw_str(jw_key(j, "status"), hname[s]);
	if (d->have) {
		jw_str(jw_key(j, "snapshot"), d->last.sid);
		fmt_time(when, sizeof(when), d->last.started_ns);
		jw_str(jw_key(j, "time"), when);
		jw_double(jw_key(j, "age"), age, 3);
	} else {
		jw_null(jw_key(j, "snapshot"));
		jw_null(jw_key(j, "age"));
	}
	if (rpo > 0)
		jw_double(jw_key(j, "rpo"), rpo, 3);
	else
		jw_null(jw_key(j, "rpo"));
	if (d->drilled)
		jw_str(jw_key(j, "drill"), d->drill.verdict);
	else
		jw_null(jw_key(j, "drill"));
	jw_end_object(j);
}

static int
report(const struct engine_status *st, double rpo_opt, int json)
{
	struct health h = { .status = H_OK, .msg = BUF_INIT,
		.perf = BUF_INIT };
	int64_t now = now_realtime_ns();
	const struct engine_status_verify *v = &st->verify;
	struct judged *ds, *jd;
	struct jw j;
	size_t i;
	double rpo, age;

	if ((ds = calloc(st->ndatasets + 1, sizeof(*ds))) == NULL) {
		log_error("out of memory");
		return (unknown(json, "out of memory"));
	}
	for (i = 0; i < st->ndatasets; i++) {
		const struct engine_status_dataset *d = &st->datasets[i];

		jd = &ds[i];
		jd->rpo = rpo = rpo_opt > 0 ? rpo_opt : d->rpo;
		jd->age = age = d->have ? age_of(now, d->last.started_ns) : 0;
		jd->status = dataset_status(d, rpo, age, &h);
		if (!d->have)
			continue;
		h.err |= perf_label(&h.perf, d->name, "_age");
		h.err |= buf_printf(&h.perf, "%.0fs", age);
		if (rpo > 0)
			h.err |= buf_printf(&h.perf, ";%.0f;%.0f;0;", rpo,
			    2 * rpo);
		else
			h.err |= buf_printf(&h.perf, ";;;0;");
	}
	for (i = 0; i < st->ntargets; i++) {
		const struct engine_status_target *t = &st->targets[i];
		char when[32];

		/* As contrib/monitoring's CofferExportStale: a bundle of a
		 * large snapshot takes hours. */
		if (t->due_ns > 0 && now - t->due_ns > EXPORT_GRACE_NS) {
			fmt_time(when, sizeof(when), t->due_ns);
			worse(&h, H_WARNING, "export to %s overdue since %s",
			    fmt_text(t->name), when);
		}
		if (st->targets[i].last_ns <= 0)
			continue;
		h.err |= perf_label(&h.perf, st->targets[i].name,
		    "_export_age");
		h.err |= buf_printf(&h.perf, "%.0fs;;;0;",
		    age_of(now, st->targets[i].last_ns));
	}
	if (v->have && (v->damage > 0 || strcmp(v->verdict, "pass") != 0))
		worse(&h, H_CRITICAL, "the last verify found damage");
	if (st->ndatasets == 0)
		worse(&h, H_UNKNOWN, "no dataset to check");
	if (h.msg.len == 0)
		h.err |= buf_printf(&h.msg, "%zu dataset%s checked, no problem",
		    st->ndatasets, st->ndatasets == 1 ? "" : "s");
	if (h.err) {
		log_error("out of memory");
		h.status = H_UNKNOWN;
	}
	if (json) {
		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_str(jw_key(&j, "status"), hname[h.status]);
		jw_int(jw_key(&j, "exit"), h.status);
		jw_str(jw_key(&j, "message"), (const char *)h.msg.data);
		jw_begin_array(jw_key(&j, "data"));
		for (i = 0; i < st->ndatasets; i++) {
			jw_begin_object(&j);
			jw_str(jw_key(&j, "{#DATASET}"), st->datasets[i].name);
			jw_end_object(&j);
		}
		jw_end_array(&j);
		jw_begin_array(jw_key(&j, "datasets"));
		for (i = 0; i < st->ndatasets; i++)
			json_dataset(&j, &st->datasets[i], &ds[i]);
		jw_end_array(&j);
		jw_begin_array(jw_key(&j, "targets"));
		for (i = 0; i < st->ntargets; i++) {
			jw_begin_object(&j);
			jw_str(jw_key(&j, "target"), st->targets[i].name);
			if (st->targets[i].last_ns > 0)
				jw_double(jw_key(&j, "age"), age_of(now,
				    st->targets[i].last_ns), 3);
			else
				jw_null(jw_key(&j, "age"));
			jw_end_object(&j);
		}
		jw_end_array(&j);
		if (v->have) {
			jw_begin_object(jw_key(&j, "verify"));
			jw_str(jw_key(&j, "verdict"), v->verdict);
			jw_int(jw_key(&j, "damage"), v->damage);
			jw_double(jw_key(&j, "age"), age_of(now, v->time_ns),
			    3);
			jw_end_object(&j);
		} else
			jw_null(jw_key(&j, "verify"));
		jw_end_object(&j);
	} else
		printf("COFFER %s - %s%s%s\n", hname[h.status],
		    (const char *)h.msg.data,
		    h.perf.len ? " | " : "",
		    h.perf.len ? (const char *)h.perf.data : "");
	free(ds);
	buf_release(&h.msg);
	buf_release(&h.perf);
	return (h.status);
}

static int
unknown(int json, const char *why)
{
	if (json)
		printf("{\"status\":\"UNKNOWN\",\"exit\":3,\"message\":\"%s\","
		    "\"data\":[]}\n", why);
	else
		printf("COFFER UNKNOWN - %s\n", why);
	return (H_UNKNOWN);
}

int
cmd_health(int argc, char **argv, const struct global_opts *g)
{
	struct engine_status_opts o = { .policy = NULL };
	struct engine_status st;
	struct policy *p = NULL;
	const char *policy = NULL;
	struct repo *r;
	struct catalog *c;
	double rpo = 0;
	int ch, json = 0, rc;

	while ((ch = cmd_getopt(argc, argv, cmd_health_options)) != -1) {
		switch (ch) {
		case 'p':
			policy = optarg;
			break;
		case 'R':
			if (cmd_parse_duration("--rpo", optarg, &rpo))
				return (H_UNKNOWN);
			break;
		case 'j':
			json = 1;
			break;
		default:
			cmd_usage_error("health");
			return (H_UNKNOWN);
		}
	}
	if (policy != NULL && (p = policy_load(policy)) == NULL)
		return (unknown(json, "cannot read the policy"));
	if (cmd_open(g, 0, &r, &c) != STATUS_OK) {
		policy_free(p);
		return (unknown(json, "cannot open the repository"));
	}
	o.policy = p;
	o.now = now_realtime_ns();	/* when exports were due */
	o.datasets = (const char *const *)argv + optind;
	o.ndatasets = (size_t)(argc - optind);
	if (engine_status(c, &o, &st))
		rc = unknown(json, "cannot read the catalog");
	else {
		rc = report(&st, rpo, json);
		engine_status_release(&st);
	}
	cmd_close(r, c);
	policy_free(p);
	return (rc);
}
