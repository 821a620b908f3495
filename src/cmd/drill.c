#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "coffer/buf.h"
#include "coffer/engine-check.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/prom.h"
#include "coffer/status.h"

static double
mb_per_s(int64_t bytes, double seconds)
{
	return (seconds > 0 ? (double)bytes / seconds / 1e6 : 0.0);
}

/* Seconds, or null for "none" (negative). */
static void
put_seconds(struct jw *j, const char *key, double v)
{
	if (v >= 0)
		jw_double(jw_key(j, key), v, 3);
	else
		jw_null(jw_key(j, key));
}

/* The members a drill's JSON and each row of its history share. */
static void
drill_members(struct jw *j, const struct catalog_drill *d)
{
	char when[32];

	fmt_time(when, sizeof(when), d->time_ns);
	jw_str(jw_key(j, "time"), when);
	jw_int(jw_key(j, "time_ns"), d->time_ns);
	jw_str(jw_key(j, "dataset"), d->dataset);
	jw_str(jw_key(j, "snapshot"), d->sid);
	jw_str(jw_key(j, "mode"), d->no_write ? "no-write" : "restore");
	jw_double(jw_key(j, "sample"), d->sample, -1);
	jw_int(jw_key(j, "files"), d->files);
	jw_int(jw_key(j, "bytes"), d->bytes);
	jw_int(jw_key(j, "failures"), d->failures);
	jw_double(jw_key(j, "seconds"), d->seconds, 3);
	jw_double(jw_key(j, "check_seconds"), d->check_seconds, 3);
	jw_double(jw_key(j, "mb_per_s"), mb_per_s(d->bytes, d->seconds), 3);
	put_seconds(j, "estimate_seconds", d->estimate_seconds);
	put_seconds(j, "rto_seconds", d->rto_seconds);
	put_seconds(j, "rpo_seconds", d->rpo_seconds);
	put_seconds(j, "rpo_age_seconds", d->rpo_age_seconds);
	jw_str(jw_key(j, "verdict"), d->verdict);
	jw_str(jw_key(j, "source"), d->source);
}

static void
print_json(const struct drill_result *res)
{
	struct jw j;
	size_t i;

	jw_init(&j, stdout);
	jw_begin_object(&j);
	drill_members(&j, &res->rec);
	jw_str(jw_key(&j, "scratch"), res->scratch);
	jw_bool(jw_key(&j, "scratch_kept"), res->scratch_kept);
	jw_int(jw_key(&j, "entries_total"), res->entries_total);
	jw_bool(jw_key(&j, "rto_missed"), res->rto_missed);
	jw_bool(jw_key(&j, "rpo_missed"), res->rpo_missed);
	jw_begin_array(jw_key(&j, "problems"));
	for (i = 0; i < res->nfailures; i++) {
		jw_begin_object(&j);
		jw_str(jw_key(&j, "path"), res->failures[i].path);
		jw_str(jw_key(&j, "problem"), res->failures[i].what);
		jw_end_object(&j);
	}
	jw_end_array(&j);
	jw_end_object(&j);
}

static void
print_text(const struct drill_result *res, const struct drill_opts *o)
{
	const struct catalog_drill *d = &res->rec;
	char sz[32], t[32], t2[32];
	size_t i;

	printf("drill of snapshot %.12s of '%s'", fmt_text(d->sid),
	    fmt_text(d->dataset));
	if (d->sample < 100)
		printf(", a %g%% sample", d->sample);
	printf(":\n");
	fmt_bytes(sz, sizeof(sz), (double)d->bytes);
	cmd_fmt_seconds(t, sizeof(t), d->seconds);
	if (d->no_write)
		printf("  streamed   %lld of %lld entries, %s, verified in %s "
		    "(%.1f MB/s), nothing written\n", (long long)d->files,
		    (long long)res->entries_total, sz, t,
		    mb_per_s(d->bytes, d->seconds));
	else
		printf("  restored   %lld of %lld entries, %s, in %s "
		    "(%.1f MB/s) into '%s'%s\n", (long long)d->files,
		    (long long)res->entries_total, sz, t,
		    mb_per_s(d->bytes, d->seconds),
		    res->scratch ? fmt_text(res->scratch) : "?",
		    res->scratch_kept ? ", kept" : ", removed");
	if (!d->no_write) {
		cmd_fmt_seconds(t, sizeof(t), d->check_seconds);
		printf("  checked    content and metadata of %lld entries in "
		    "%s\n", (long long)d->files, t);
	}
	if (d->estimate_seconds >= 0) {
		cmd_fmt_seconds(t, sizeof(t), d->estimate_seconds);
		printf("  estimate   %s for the whole snapshot, from the "
		    "sample\n", t);
	}
	if (d->rto_seconds >= 0) {
		cmd_fmt_seconds(t, sizeof(t), d->rto_seconds);
		cmd_fmt_seconds(t2, sizeof(t2), d->estimate_seconds >= 0 ?
		    d->estimate_seconds : d->seconds);
		printf("  RTO        %s: %s (restore %s)\n", t,
		    res->rto_missed ? "MISSED" : "met", t2);
	}
	cmd_fmt_seconds(t2, sizeof(t2), d->rpo_age_seconds);
	if (d->rpo_seconds >= 0) {
		cmd_fmt_seconds(t, sizeof(t), d->rpo_seconds);
		printf("  RPO        %s: %s (newest snapshot %s old)\n", t,
		    res->rpo_missed ? "MISSED" : "met", t2);
	} else {
		printf("  RPO age    %s (newest complete snapshot)\n", t2);
	}
	for (i = 0; i < res->nfailures; i++) {
		printf("  FAILED     ");
		fmt_path(stdout, res->failures[i].path);
		printf(": %s\n", fmt_text(res->failures[i].what));
	}
	if (d->source != NULL)
		printf("  source     %s\n", fmt_text(d->source));
	printf("  failures   %lld\n", (long long)d->failures);
	printf("  verdict    %s\n", fmt_text(d->verdict));
}

/* The newest drill of each dataset, gathered for the metrics file. */
struct latest {
	char *dataset;
	int64_t time_ns;
	int pass;
	double seconds;
	int64_t bytes, failures;
	int64_t newest_ns;
};

struct latest_list {
	struct latest *v;
	size_t n;
};

static int
collect_latest(void *arg, const struct catalog_drill *d)
{
	struct latest_list *l = arg;
	struct latest *p;

	if ((p = reallocarray(l->v, l->n + 1, sizeof(*p))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	l->v = p;
	p = &l->v[l->n];
	if ((p->dataset = strdup(d->dataset)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	p->time_ns = d->time_ns;
	p->pass = strcmp(d->verdict, "pass") == 0;
	p->seconds = d->seconds;
	p->bytes = d->bytes;
	p->failures = d->failures;
	p->newest_ns = d->newest_ns;
	l->n++;
	return (0);
}

enum metric {
	M_TIME, M_SUCCESS, M_DURATION, M_BYTES, M_FAILURES, M_RPO, M__COUNT
};

static const struct {
	const char *name;
	const char *help;
} metrics[M__COUNT] = {
	{ "coffer_drill_last_timestamp_seconds",
	  "When the last recovery drill of the dataset started, in seconds "
	  "since the epoch." },
	{ "coffer_drill_success",
	  "1 if the last drill passed, 0 if it failed or missed an "
	  "objective." },
	{ "coffer_drill_duration_seconds",
	  "Wall time of the last drill's restore (or verified stream)." },
	{ "coffer_drill_bytes",
	  "File content restored and checked by the last drill." },
	{ "coffer_drill_failures",
	  "Entries that failed a check in the last drill." },
	{ "coffer_rpo_age_seconds",
	  "Age of the dataset's newest complete snapshot when the metrics "
	  "were written." },
};

/*
 * The Prometheus textfile for node_exporter: each dataset's newest drill
 * (not only this one: the file is replaced whole, and the other datasets'
 * series must not vanish from it).  Written atomically: a collector never
 * reads half a file.
 */
static int
write_metrics(struct catalog *c, const char *path)
{
	struct latest_list l = { NULL, 0 };
	struct buf b = BUF_INIT;
	int64_t now = now_realtime_ns();
	size_t i;
	int m, rc = -1, err = 0;

	if (engine_drill_list(c, NULL, 1, collect_latest, &l))
		goto out;
	for (m = 0; m < M__COUNT; m++) {
		err |= prom_family(&b, metrics[m].name, "gauge",
		    metrics[m].help);
		for (i = 0; i < l.n; i++) {
			const struct latest *p = &l.v[i];
			double v;
			int decimals = 3;

			if (m == M_RPO && p->newest_ns == 0)
				continue;
			switch (m) {
			case M_TIME:
				v = (double)p->time_ns / 1e9;
				break;
			case M_SUCCESS:
				v = p->pass;
				decimals = 0;
				break;
			case M_DURATION:
				v = p->seconds;
				break;
			case M_BYTES:
				v = (double)p->bytes;
				decimals = 0;
				break;
			case M_FAILURES:
				v = (double)p->failures;
				decimals = 0;
				break;
			default:
				v = now > p->newest_ns ?
				    (double)(now - p->newest_ns) / 1e9 : 0.0;
			}
			err |= prom_sample(&b, metrics[m].name, "dataset",
			    p->dataset, v, decimals);
		}
	}
	if (err)
		goto out;
	rc = fsutil_write_file(path, b.data, b.len, 0644, 1);
out:
	for (i = 0; i < l.n; i++)
		free(l.v[i].dataset);
	free(l.v);
	buf_release(&b);
	return (rc);
}

static int
print_history(void *arg, const struct catalog_drill *d)
{
	struct cmd_listing *h = arg;
	char when[32], sz[32], t[32];

	fmt_time(when, sizeof(when), d->time_ns);
	if (h->json) {
		jw_begin_object(&h->j);
		drill_members(&h->j, d);
		jw_end_object(&h->j);
	} else {
		if (h->n == 0)
			printf("%-20s  %-16s  %-12s  %-16s  %6s  %9s  %10s  "
			    "%5s  %9s  %8s  %s\n", "TIME", "DATASET",
			    "SNAPSHOT", "VERDICT", "SAMPLE", "FILES", "BYTES",
			    "FAIL", "DURATION", "MB/S", "SOURCE");
		fmt_bytes(sz, sizeof(sz), (double)d->bytes);
		cmd_fmt_seconds(t, sizeof(t), d->seconds);
		printf("%-20s  %-16s  %-12.12s  %-16s  %5g%%  %9lld  %10s  "
		    "%5lld  %9s  %8.1f  %s\n", when, fmt_text(d->dataset),
		    fmt_text(d->sid), fmt_text(d->verdict), d->sample, (long long)d->files, sz,
		    (long long)d->failures, t, mb_per_s(d->bytes, d->seconds),
		    d->source ? fmt_text(d->source) : "repository");
	}
	h->n++;
	return (0);
}

static int
list_drills(struct catalog *c, const char *dataset, struct cmd_listing *ls)
{
	return (engine_drill_list(c, dataset, 0, print_history, ls));
}

int
cmd_drill_history(int argc, char **argv, const struct global_opts *g)
{
	return (cmd_listing(argc, argv, g, "drill history", list_drills));
}

const struct cmd_option cmd_drill_options[] = {
	CMD_OPT_VALUE('s', "sample", "P%",
	    "check a fixed P% of the files (at least one)"),
	CMD_OPT_VALUE('S', "scratch", "DIR",
	    "restore into a scratch directory in DIR"),
	CMD_OPT_FLAG('n', "no-write", "read and check the chunks only"),
	CMD_OPT_FLAG('k', "keep", "keep the scratch directory"),
	CMD_OPT_VALUE('T', "rto", "DURATION", "the recovery time objective"),
	CMD_OPT_VALUE('P', "rpo", "DURATION",
	    "the recovery point objective"),
	CMD_OPT_FLAG('j', "json", "print the result as JSON"),
	CMD_OPT_VALUE('m', "metrics-file", "FILE",
	    "write Prometheus metrics to FILE"),
	CMD_OPT_VALUE('B', "from-bundles", "SOURCE",
	    "recover from offsite bundles alone (directory, -, rclone:...)"),
	CMD_OPT_END
};

int
cmd_drill(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot s;
	struct drill_opts o;
	struct drill_result res;
	struct repo *r;
	struct catalog *c;
	const char *metrics_file = NULL, *from = NULL;
	char *source = NULL;
	int ch, st, json = 0;

	memset(&o, 0, sizeof(o));
	while ((ch = cmd_getopt(argc, argv, cmd_drill_options)) != -1) {
		switch (ch) {
		case 'B':
			from = optarg;
			break;
		case 's':
			if (cmd_parse_percent("--sample", optarg, 0, &o.sample))
				return (STATUS_USAGE);
			break;
		case 'S':
			o.scratch = optarg;
			break;
		case 'n':
			o.no_write = 1;
			break;
		case 'k':
			o.keep = 1;
			break;
		case 'T':
			if (cmd_parse_duration("--rto", optarg, &o.rto))
				return (STATUS_USAGE);
			break;
		case 'P':
			if (cmd_parse_duration("--rpo", optarg, &o.rpo))
				return (STATUS_USAGE);
			break;
		case 'j':
			json = 1;
			break;
		case 'm':
			metrics_file = optarg;
			break;
		default:
			return (cmd_usage_error("drill"));
		}
	}
	if (argc - optind != 1)
		return (cmd_usage_error("drill"));
	if (o.no_write && (o.scratch || o.keep)) {
		log_error("--no-write writes nothing: it takes neither "
		    "--scratch nor --keep");
		return (STATUS_USAGE);
	}
	if (metrics_file && *metrics_file == '\0') {
		log_error("empty --metrics-file");
		return (STATUS_USAGE);
	}
	/* No writer lock: a drill reads the repository, restores outside
	 * it and adds one catalog row. */
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	memset(&s, 0, sizeof(s));
	if (from != NULL) {
		struct drill_bundles_opts bo;
		struct import_result imp;

		if (asprintf(&source, "bundles:%s", from) < 0) {
			source = NULL;
			st = STATUS_ERROR;
			goto out;
		}
		memset(&bo, 0, sizeof(bo));
		bo.from = from;
		bo.snapshot = argv[optind];
		bo.source = source;
		bo.drill = &o;
		bo.open_scratch = cmd_open_scratch;
		bo.arg = (void *)(uintptr_t)g;
		st = cmd_status(engine_drill_bundles(c, &bo, &s, &res,
		    &imp));
	} else if ((st = cmd_snapshot(c, argv[optind], &s)) != STATUS_OK)
		goto out;
	else
		st = cmd_status(engine_drill(r, c, &s, &o, &res));
	if (res.rec.verdict != NULL) {
		if (json)
			print_json(&res);
		else if (log_level >= 0 || st != STATUS_OK)
			print_text(&res, &o);
		if (metrics_file && write_metrics(c, metrics_file) &&
		    st == STATUS_OK)
			st = STATUS_ERROR;
	}
	engine_drill_result_release(&res);
out:
	free(source);
	catalog_snapshot_release(&s);
	cmd_close(r, c);
	return (st);
}
