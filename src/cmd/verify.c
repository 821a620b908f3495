#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "coffer/engine-check.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/hex.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

/* --read-data's value: "" (all), "P%", or "N/M". */
static int
parse_read(const char *s, struct verify_opts *o)
{
	long long n, m;
	const char *slash;
	char *end;

	if (s == NULL || *s == '\0') {
		o->read = VERIFY_READ_ALL;
		return (0);
	}
	if ((slash = strchr(s, '/')) != NULL) {
		n = strtoll(s, &end, 10);
		if (end != slash || s[0] < '0' || s[0] > '9')
			goto bad;
		m = strtoll(slash + 1, &end, 10);
		if (*end != '\0' || slash[1] < '0' || slash[1] > '9' ||
		    m < 1 || m > 1000000 || n < 1 || n > m)
			goto bad;
		o->read = VERIFY_READ_SLICE;
		o->slice_n = (unsigned)n;
		o->slice_m = (unsigned)m;
		return (0);
	}
	if (strchr(s, '%') == NULL)
		goto bad;
	if (cmd_parse_percent("--read-data", s, 0, &o->percent))
		return (-1);
	o->read = o->percent >= 100 ? VERIFY_READ_ALL : VERIFY_READ_PERCENT;
	return (0);
bad:
	log_error("option '--read-data' takes P%% (a random share of the "
	    "packs) or N/M (1 <= N <= M), not '%s'", s);
	return (-1);
}

static const char *
record_type(int type)
{
	return (type == PACK_REC_SNAPSHOT ? "snapshot" :
	    type == PACK_REC_JOURNAL ? "journal" : "data");
}

static void
print_json(const struct verify_result *res, struct jw *j)
{
	char h[65];
	size_t i, k;

	jw_begin_object(j);
	jw_str(jw_key(j, "mode"), res->mode);
	jw_bool(jw_key(j, "complete"), res->complete);
	jw_bool(jw_key(j, "resumed"), res->resumed);
	jw_int(jw_key(j, "packs_total"), res->packs_total);
	jw_int(jw_key(j, "packs"), res->packs);
	jw_int(jw_key(j, "packs_read"), res->packs_read);
	jw_int(jw_key(j, "chunks"), res->chunks);
	jw_int(jw_key(j, "chunks_read"), res->chunks_read);
	jw_int(jw_key(j, "bytes_read"), res->bytes_read);
	jw_int(jw_key(j, "records"), res->records);
	jw_int(jw_key(j, "earlier_packs"), res->earlier_packs);
	jw_int(jw_key(j, "earlier_errors"), res->earlier_errors);
	jw_double(jw_key(j, "seconds"), res->seconds, 3);
	jw_str(jw_key(j, "resume_after"),
	    res->complete ? NULL : res->last_pack);
	jw_uint(jw_key(j, "errors"), res->ndamage + res->nbad_records +
	    res->nbad_packs + res->meta_errors);
	jw_uint(jw_key(j, "damaged_chunks"), res->ndamage);
	jw_uint(jw_key(j, "chunks_from_copies"), res->from_copies);
	jw_int(jw_key(j, "damaged_packs"), res->damaged_packs);
	jw_int(jw_key(j, "broken_snapshots"), res->broken_snapshots);
	jw_begin_array(jw_key(j, "damaged"));
	for (i = 0; i < res->ndamage; i++) {
		const struct verify_damage *d = &res->damage[i];

		hex_encode(h, d->cid, 32);
		jw_begin_object(j);
		jw_str(jw_key(j, "chunk"), h);
		if (d->pack[0]) {
			jw_str(jw_key(j, "pack"), d->pack);
			jw_uint(jw_key(j, "offset"), d->offset);
		} else {
			jw_null(jw_key(j, "pack"));
			jw_null(jw_key(j, "offset"));
		}
		jw_str(jw_key(j, "problem"), d->problem);
		jw_str(jw_key(j, "copy"), d->copy[0] ? d->copy : NULL);
		jw_end_object(j);
	}
	jw_end_array(j);
	/* A snapshot once, with the paths it loses (broken[] is sorted). */
	jw_begin_array(jw_key(j, "broken"));
	for (i = 0; i < res->nbroken; i = k) {
		const struct verify_broken *b = &res->broken[i];

		jw_begin_object(j);
		jw_str(jw_key(j, "snapshot"), b->sid);
		jw_str(jw_key(j, "dataset"), b->dataset);
		jw_begin_array(jw_key(j, "paths"));
		for (k = i; k < res->nbroken &&
		    strcmp(res->broken[k].sid, b->sid) == 0; k++)
			jw_str(j, res->broken[k].path);
		jw_end_array(j);
		jw_end_object(j);
	}
	jw_end_array(j);
	jw_begin_array(jw_key(j, "bad_records"));
	for (i = 0; i < res->nbad_records; i++) {
		const struct verify_record *b = &res->bad_records[i];

		jw_begin_object(j);
		jw_str(jw_key(j, "snapshot"), b->sid);
		jw_str(jw_key(j, "dataset"), b->dataset);
		jw_str(jw_key(j, "pack"), b->pack[0] ? b->pack : NULL);
		jw_str(jw_key(j, "problem"), b->problem);
		jw_end_object(j);
	}
	jw_end_array(j);
	jw_begin_array(jw_key(j, "refused_packs"));
	for (i = 0; i < res->nbad_packs; i++)
		jw_str(j, res->bad_packs[i].pack);
	jw_end_array(j);
	jw_begin_array(jw_key(j, "damaged_records"));
	for (i = 0; i < res->nbad_meta; i++) {
		const struct verify_meta *m = &res->bad_meta[i];

		jw_begin_object(j);
		jw_str(jw_key(j, "pack"), m->pack);
		jw_uint(jw_key(j, "offset"), m->offset);
		jw_str(jw_key(j, "type"), record_type(m->type));
		jw_str(jw_key(j, "loses"), m->loses);
		jw_end_object(j);
	}
	jw_end_array(j);
	jw_end_object(j);
}

static void
print_text(const struct verify_result *res)
{
	const struct verify_meta *m;
	char sz[32], what[160], tail[256];
	size_t stale = res->nbad_meta - res->meta_errors;
	int n;
	size_t i;

	/* What breaks, by snapshot: the chunks themselves were named on
	 * standard error as they were found. */
	for (i = 0; i < res->nbroken; i++) {
		const struct verify_broken *b = &res->broken[i];

		if (i == 0 || strcmp(res->broken[i - 1].sid, b->sid) != 0)
			printf("snapshot %.12s of '%s' is damaged:\n",
			    fmt_text(b->sid), fmt_text(b->dataset));
		fputs("  ", stdout);
		fmt_path(stdout, b->path);
		putchar('\n');
	}
	for (i = 0; i < res->nbad_records; i++)
		printf("snapshot %.12s of '%s': signed record %s\n",
		    fmt_text(res->bad_records[i].sid),
		    fmt_text(res->bad_records[i].dataset),
		    fmt_text(res->bad_records[i].problem));
	for (i = 0; i < res->nbad_packs; i++)
		printf("pack %s: refused: it does not open with this "
		    "repository's keys (forged or damaged)\n",
		    res->bad_packs[i].pack);
	for (i = 0; i < res->nbad_meta; i++) {
		m = &res->bad_meta[i];
		if (m->type == PACK_REC_DATA)
			printf("pack %s: data record at offset %llu is "
			    "damaged; %s\n", m->pack,
			    (unsigned long long)m->offset,
			    m->loses ? fmt_text(m->loses) : "");
		else
			printf("pack %s: %s record at offset %llu is damaged: "
			    "a catalog rebuild would lose %s\n", m->pack,
			    record_type(m->type),
			    (unsigned long long)m->offset,
			    m->loses ? fmt_text(m->loses) : "what it holds");
	}

	if (res->packs_read > 0 || strcmp(res->mode, "structure") != 0) {
		fmt_bytes(sz, sizeof(sz), (double)res->bytes_read);
		snprintf(what, sizeof(what), "%lld pack%s, %lld chunk%s, %s",
		    (long long)res->packs, res->packs == 1 ? "" : "s",
		    (long long)res->chunks, res->chunks == 1 ? "" : "s", sz);
	} else {
		snprintf(what, sizeof(what), "%lld pack%s, %lld chunk%s "
		    "(structure)", (long long)res->packs,
		    res->packs == 1 ? "" : "s", (long long)res->chunks,
		    res->chunks == 1 ? "" : "s");
	}
	if (res->ndamage == 0 && res->nbad_records == 0 &&
	    res->nbad_packs == 0 && res->meta_errors == 0) {
		n = snprintf(tail, sizeof(tail), "no errors");
	} else {
		n = snprintf(tail, sizeof(tail), "%zu damaged or missing "
		    "chunk%s in %lld pack%s", res->ndamage,
		    res->ndamage == 1 ? "" : "s",
		    (long long)res->damaged_packs,
		    res->damaged_packs == 1 ? "" : "s");
		if (res->from_copies && n > 0 && (size_t)n < sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n,
			    " (%zu found whole in another pack)",
			    res->from_copies);
		if (n > 0 && (size_t)n < sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n,
			    " break%s %lld snapshot%s",
			    res->ndamage == 1 ? "s" : "",
			    (long long)res->broken_snapshots,
			    res->broken_snapshots == 1 ? "" : "s");

		if (res->nbad_records && n > 0 && (size_t)n < sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n,
			    "; %zu bad snapshot record%s", res->nbad_records,
			    res->nbad_records == 1 ? "" : "s");
		if (res->meta_errors && n > 0 && (size_t)n < sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n,
			    "; %zu damaged record%s", res->meta_errors,
			    res->meta_errors == 1 ? "" : "s");
		if (res->nbad_packs && n > 0 && (size_t)n < sizeof(tail))
			snprintf(tail + n, sizeof(tail) - (size_t)n,
			    "; %zu refused pack%s", res->nbad_packs,
			    res->nbad_packs == 1 ? "" : "s");
	}
	n = (int)strlen(tail);
	if (stale && (size_t)n < sizeof(tail))
		snprintf(tail + n, sizeof(tail) - (size_t)n, "; %zu damaged "
		    "record%s no snapshot needs", stale, stale == 1 ? "" : "s");
	if (res->resumed)
		printf("resumed the %s pass after %lld packs checked before "
		    "(%lld errors found then)\n", res->mode,
		    (long long)res->earlier_packs,
		    (long long)res->earlier_errors);
	if (res->complete)
		printf("verified %s: %s\n", what, tail);
	else
		printf("stopped at the time limit: verified %s of %lld: %s; "
		    "the next run resumes after pack %.12s\n", what,
		    (long long)res->packs_total, tail, res->last_pack);
}

void
cmd_verify_print(const struct verify_result *res, struct jw *j)
{
	if (j)
		print_json(res, j);
	else
		print_text(res);
}

const struct cmd_option cmd_verify_options[] = {
	CMD_OPT_OPTIONAL_VALUE('R', "read-data", "P%|N/M",
	    "read and check the chunks too (of a share)"),
	CMD_OPT_VALUE('D', "max-duration", "DURATION",
	    "stop after DURATION; the next run resumes"),
	CMD_OPT_FLAG('j', "json", "print the report as JSON"),
	CMD_OPT_END
};

int
cmd_verify(int argc, char **argv, const struct global_opts *g)
{
	struct verify_opts o;
	struct verify_result res;
	struct jw j;
	struct repo *r;
	struct catalog *c;
	int ch, st, json = 0;

	memset(&o, 0, sizeof(o));
	o.record = 1;
	while ((ch = cmd_getopt(argc, argv, cmd_verify_options)) != -1) {
		switch (ch) {
		case 'R':
			if (parse_read(optarg, &o))
				return (STATUS_USAGE);
			break;
		case 'D':
			if (cmd_parse_duration("--max-duration", optarg,
			    &o.max_seconds))
				return (STATUS_USAGE);
			break;
		case 'j':
			json = 1;
			break;
		default:
			return (cmd_usage_error("verify"));
		}
	}
	if (optind != argc)
		return (cmd_usage_error("verify"));
	/* The keys open packs; no writer lock: verify only reads the
	 * repository and writes its own catalog rows. */
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	signals_install();	/* stops after the pack it is on */
	st = cmd_status(engine_verify(r, c, &o, &res));
	if (st == STATUS_OK || st == STATUS_INTEGRITY) {
		if (json) {
			jw_init(&j, stdout);
			print_json(&res, &j);
		} else if (log_level >= 0 || st != STATUS_OK)
			print_text(&res);
	}
	engine_verify_result_release(&res);
	cmd_close(r, c);
	return (st);
}

static int
print_history(void *arg, const struct catalog_verify_run *v)
{
	struct cmd_listing *h = arg;
	char when[32], sz[32], t[32];

	fmt_time(when, sizeof(when), v->time_ns);
	if (h->json) {
		jw_begin_object(&h->j);
		jw_str(jw_key(&h->j, "time"), when);
		jw_str(jw_key(&h->j, "host"), v->host);
		jw_str(jw_key(&h->j, "mode"), v->mode);
		if (v->slice_m > 0) {
			jw_int(jw_key(&h->j, "slice"), v->slice_n);
			jw_int(jw_key(&h->j, "slices"), v->slice_m);
		} else {
			jw_null(jw_key(&h->j, "slice"));
			jw_null(jw_key(&h->j, "slices"));
		}
		jw_bool(jw_key(&h->j, "complete"), v->complete);
		jw_int(jw_key(&h->j, "packs"), v->packs);
		jw_int(jw_key(&h->j, "packs_read"), v->packs_read);
		jw_int(jw_key(&h->j, "bytes_read"), v->bytes_read);
		jw_int(jw_key(&h->j, "errors"), v->damage);
		jw_double(jw_key(&h->j, "seconds"), v->seconds, 3);
		jw_str(jw_key(&h->j, "verdict"), v->verdict);
		jw_end_object(&h->j);
	} else {
		if (h->n == 0)
			printf("%-20s  %-20s  %-8s  %6s  %6s  %10s  %6s  %9s  "
			    "%s\n", "TIME", "MODE", "VERDICT", "PACKS", "READ",
			    "BYTES", "ERRORS", "DURATION", "HOST");
		fmt_bytes(sz, sizeof(sz), (double)v->bytes_read);
		cmd_fmt_seconds(t, sizeof(t), v->seconds);
		printf("%-20s  %-20s  %-8s  %6lld  %6lld  %10s  %6lld  %9s  "
		    "%s%s\n", when, fmt_text(v->mode), fmt_text(v->verdict),
		    (long long)v->packs, (long long)v->packs_read, sz,
		    (long long)v->damage, t, v->host ? fmt_text(v->host) : "-",
		    v->complete ? "" : " (stopped; resumed next)");
	}
	h->n++;
	return (0);
}

static int
list_verifies(struct catalog *c, const char *dataset, struct cmd_listing *ls)
{
	/* A verify is of the whole repository. */
	if (dataset != NULL) {
		log_error("verify history takes no dataset");
		return (-1);
	}
	return (engine_verify_run_list(c, print_history, ls));
}

int
cmd_verify_history(int argc, char **argv, const struct global_opts *g)
{
	return (cmd_listing(argc, argv, g, "verify history", list_verifies));
}
