/*
 * coffer forget [rules | SNAPSHOT...] [--dataset D] [--dry-run] [--prune]
 * coffer prune [--max-unused P%] [--dry-run] [--json]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-retention.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

static int
parse_count(const char *opt, const char *arg, int *out)
{
	long long v = cmd_parse_num(opt, arg);

	if (v < 0)
		return (-1);
	if (v == 0 || v > 1000000) {
		log_error("%s takes a count from 1 to 1000000", opt);
		return (-1);
	}
	*out = (int)v;
	return (0);
}

static void
print_plan(const struct forget_result *res, int json, int dry_run)
{
	const struct forget_item *it;
	char when[32], why[96];
	size_t i;

	if (json) {
		struct jw j;

		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_bool(jw_key(&j, "dry_run"), dry_run);
		jw_uint(jw_key(&j, "forget"), res->forget);
		jw_uint(jw_key(&j, "forgotten"), res->forgotten);
		jw_begin_array_lines(jw_key(&j, "snapshots"));
		for (i = 0; i < res->n; i++) {
			it = &res->items[i];
			fmt_time(when, sizeof(when), it->time_ns);
			retention_reasons(it->reasons, why, sizeof(why));
			jw_begin_object(&j);
			jw_str(jw_key(&j, "id"), it->sid);
			jw_str(jw_key(&j, "dataset"), it->dataset);
			jw_str(jw_key(&j, "level"),
			    catalog_level_name(it->level));
			jw_str(jw_key(&j, "parent"),
			    it->parent_sid[0] ? it->parent_sid : NULL);
			jw_str(jw_key(&j, "time"), when);
			jw_bool(jw_key(&j, "keep"), it->keep);
			jw_str(jw_key(&j, "reasons"), why);
			jw_str(jw_key(&j, "needed_by"),
			    it->needed_by[0] ? it->needed_by : NULL);
			jw_str(jw_key(&j, "rebase"), it->rebase ?
			    catalog_level_name(it->rebase_level) : NULL);
			jw_str(jw_key(&j, "onto"), it->rebase &&
			    it->onto[0] ? it->onto : NULL);
			jw_end_object(&j);
		}
		jw_end_array(&j);
		jw_uint(jw_key(&j, "rebase"), res->rebase);
		jw_uint(jw_key(&j, "rebased"), res->rebased);
		jw_end_object(&j);
		return;
	}
	/* Quiet under cron unless asked: the plan is for a person. */
	if (log_level < 0 || (log_level == 0 && !dry_run &&
	    !isatty(STDOUT_FILENO)))
		return;
	for (i = 0; i < res->n; i++) {
		it = &res->items[i];
		fmt_time(when, sizeof(when), it->time_ns);
		retention_reasons(it->reasons, why, sizeof(why));
		/* A rebased one says what it becomes: "rebase full", or
		 * "rebase incremental on 0123abcd4567". */
		printf("%-6s  %.12s  %-16s  %-12s  %-20s  %s%s%.12s%s"
		    "%s%s%s%.12s\n",
		    it->keep ? "keep" : "forget", fmt_text(it->sid),
		    fmt_text(it->dataset), catalog_level_name(it->level), when,
		    it->keep ? why : "", it->needed_by[0] ? " (for " : "",
		    fmt_text(it->needed_by),
		    it->needed_by[0] ? ")" : "",
		    it->rebase ? "  rebase " : "",
		    it->rebase ? catalog_level_name(it->rebase_level) : "",
		    it->rebase && it->onto[0] ? " on " : "",
		    it->rebase ? fmt_text(it->onto) : "");
	}
	if (res->rebase > 0)
		printf("%s%zu snapshot%s onto the links that stay\n",
		    dry_run ? "would rebase " : "rebased ",
		    dry_run ? res->rebase : res->rebased,
		    (dry_run ? res->rebase : res->rebased) == 1 ? "" : "s");
	printf("%s%zu of %zu snapshot%s\n", dry_run ? "would forget " :
	    "forgot ", dry_run ? res->forget : res->forgotten, res->n,
	    res->n == 1 ? "" : "s");
}

static void
print_prune(const struct prune_result *res, int json, int dry_run)
{
	char del[32], wr[32], before[32];

	if (json) {
		struct jw j;

		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_bool(jw_key(&j, "dry_run"), dry_run);
		jw_int(jw_key(&j, "packs"), res->packs);
		jw_int(jw_key(&j, "packs_deleted"), res->packs_deleted);
		jw_int(jw_key(&j, "packs_repacked"), res->packs_repacked);
		jw_int(jw_key(&j, "packs_written"), res->packs_written);
		jw_int(jw_key(&j, "chunks_moved"), res->chunks_moved);
		jw_int(jw_key(&j, "chunks_checked"), res->chunks_checked);
		jw_int(jw_key(&j, "packs_marked"), res->packs_marked);
		jw_int(jw_key(&j, "packs_waiting"), res->packs_waiting);
		jw_uint(jw_key(&j, "bytes_waiting"), res->bytes_waiting);
		jw_uint(jw_key(&j, "bytes_before"), res->bytes_before);
		jw_uint(jw_key(&j, "bytes_deleted"), res->bytes_deleted);
		jw_uint(jw_key(&j, "bytes_written"), res->bytes_written);
		jw_uint(jw_key(&j, "bytes_read"), res->bytes_read);
		jw_double(jw_key(&j, "seconds"), res->seconds, 3);
		jw_end_object(&j);
		return;
	}
	if (log_level < 0 || (log_level == 0 && !dry_run &&
	    !isatty(STDOUT_FILENO)))
		return;
	fmt_bytes(del, sizeof(del), (double)res->bytes_deleted);
	fmt_bytes(wr, sizeof(wr), (double)res->bytes_written);
	fmt_bytes(before, sizeof(before), (double)res->bytes_before);
	printf("%s %lld of %lld packs (%s of %s), %lld repacked into %lld "
	    "new (%s written), %.1f s\n", dry_run ? "would delete" :
	    "deleted", (long long)(res->packs_deleted + res->packs_repacked),
	    (long long)res->packs, del, before, (long long)res->packs_repacked,
	    (long long)res->packs_written, wr, res->seconds);
	if (res->packs_waiting > 0) {
		fmt_bytes(del, sizeof(del), (double)res->bytes_waiting);
		printf("%lld packs (%s) %s condemned, to be deleted by a prune "
		    "once the writers beside this one have ended\n",
		    (long long)res->packs_waiting, del, dry_run ?
		    "would be" : "are");
	}
}

static int
run_prune(struct repo *r, struct catalog *c, double max_unused, int dry_run,
    int json)
{
	struct prune_opts po;
	struct prune_result pr;
	int st;

	/* Its plan reads each pack's index and records; repacking, more. */
	if (engine_need_read(r, "prune"))
		return (STATUS_USAGE);
	memset(&po, 0, sizeof(po));
	po.max_unused = max_unused;
	po.dry_run = dry_run;
	st = cmd_status(engine_prune(r, c, &po, &pr));
	if (st == STATUS_OK)
		print_prune(&pr, json, dry_run);
	return (st);
}

const struct cmd_option cmd_forget_options[] = {
	CMD_OPT_VALUE('l', "keep-last", "N", "keep the N newest snapshots"),
	CMD_OPT_VALUE('H', "keep-hourly", "N",
	    "keep the newest of each of the N last hours"),
	CMD_OPT_VALUE('d', "keep-daily", "N",
	    "keep the newest of each of the N last days"),
	CMD_OPT_VALUE('w', "keep-weekly", "N",
	    "keep the newest of each of the N last weeks"),
	CMD_OPT_VALUE('m', "keep-monthly", "N",
	    "keep the newest of each of the N last months"),
	CMD_OPT_VALUE('y', "keep-yearly", "N",
	    "keep the newest of each of the N last years"),
	CMD_OPT_VALUE('W', "keep-within", "DURATION",
	    "keep those within DURATION of the newest"),
	CMD_OPT_VALUE('t', "keep-tag", "TAG",
	    "keep those tagged TAG (repeatable)"),
	CMD_OPT_FLAG('f', "force",
	    "forget named snapshots even if marked kept"),
	CMD_OPT_VALUE('D', "dataset", "DATASET",
	    "judge this dataset's snapshots only"),
	CMD_OPT_LETTER_FLAG('n', "dry-run",
	    "print the plan; change nothing"),
	CMD_OPT_FLAG('p', "prune", "prune after forgetting"),
	CMD_OPT_VALUE('u', "max-unused", "P%",
	    "with --prune: as prune's --max-unused"),
	CMD_OPT_FLAG('j', "json", "print the plan as JSON"),
	CMD_OPT_END
};

int
cmd_forget(int argc, char **argv, const struct global_opts *g)
{
	struct forget_opts o;
	struct forget_result res;
	struct repo *r;
	struct catalog *c;
	double pct = 10;
	char **tags = NULL;
	size_t ntags = 0;
	int ch, st, json = 0, prune = 0;

	memset(&o, 0, sizeof(o));
	o.wait = cmd_forget_wait(g);
	while ((ch = cmd_getopt(argc, argv, cmd_forget_options)) != -1) {
		switch (ch) {
		case 'l': st = parse_count("--keep-last", optarg,
		    &o.rules.last); break;
		case 'H': st = parse_count("--keep-hourly", optarg,
		    &o.rules.hourly); break;
		case 'd': st = parse_count("--keep-daily", optarg,
		    &o.rules.daily); break;
		case 'w': st = parse_count("--keep-weekly", optarg,
		    &o.rules.weekly); break;
		case 'm': st = parse_count("--keep-monthly", optarg,
		    &o.rules.monthly); break;
		case 'y': st = parse_count("--keep-yearly", optarg,
		    &o.rules.yearly); break;
		case 'W': st = cmd_parse_duration("--keep-within", optarg,
		    &o.rules.within); break;
		case 't': st = cmd_push_arg(&tags, &ntags, optarg) ?
		    STATUS_ERROR : 0; break;
		case 'f': o.force = 1; st = 0; break;
		case 'D': o.dataset = optarg; st = 0; break;
		case 'n': o.dry_run = 1; st = 0; break;
		case 'p': prune = 1; st = 0; break;
		case 'u': st = cmd_parse_percent("--max-unused", optarg, 1, &pct);
		    break;
		case 'j': json = 1; st = 0; break;
		default:
			return (cmd_usage_error("forget"));
		}
		if (st) {
			free(tags);
			return (st == STATUS_ERROR ? st : STATUS_USAGE);
		}
	}
	o.rules.tags = (const char *const *)tags;
	o.rules.ntags = ntags;
	o.sids = (const char *const *)argv + optind;
	o.nsids = (size_t)(argc - optind);
	if ((o.nsids > 0) == retention_any(&o.rules)) {
		log_error(o.nsids > 0 ? "give snapshots or --keep rules, not "
		    "both" : "no --keep rule and no snapshot given: nothing "
		    "to decide (see 'coffer help forget')");
		free(tags);
		return (STATUS_USAGE);
	}
	signals_install();
	/* Forgetting is not appending: the authority's decision.  A key
	 * that cannot is refused before anything is forgotten. */
	if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE,
	    cmd_open_need_full, "forget", &r, &c)) != STATUS_OK) {
		free(tags);
		return (st);
	}
	st = cmd_status(engine_forget(r, c, &o, &res));
	/* With --prune, --json prints prune's object alone: one document. */
	if (st == STATUS_OK && !(json && prune))
		print_plan(&res, json, o.dry_run);
	engine_forget_result_release(&res);
	if (st == STATUS_OK && prune)
		st = run_prune(r, c, pct / 100, o.dry_run, json);
	cmd_close(r, c);
	free(tags);
	return (st);
}

const struct cmd_option cmd_prune_options[] = {
	CMD_OPT_VALUE('u', "max-unused", "P%",
	    "repack packs more than P% unused (10%)"),
	CMD_OPT_LETTER_FLAG('n', "dry-run",
	    "say what would be deleted; change nothing"),
	CMD_OPT_FLAG('j', "json", "print the result as JSON"),
	CMD_OPT_END
};

int
cmd_prune(int argc, char **argv, const struct global_opts *g)
{
	struct repo *r;
	struct catalog *c;
	double pct = 10;
	int ch, st, json = 0, dry_run = 0;

	while ((ch = cmd_getopt(argc, argv, cmd_prune_options)) != -1) {
		switch (ch) {
		case 'u':
			if (cmd_parse_percent("--max-unused", optarg, 1, &pct))
				return (STATUS_USAGE);
			break;
		case 'n':
			dry_run = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return (cmd_usage_error("prune"));
		}
	}
	if (optind != argc)
		return (cmd_usage_error("prune"));
	signals_install();
	if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE,
	    cmd_open_need_read, "prune", &r, &c)) != STATUS_OK)
		return (st);
	st = run_prune(r, c, pct / 100, dry_run, json);
	cmd_close(r, c);
	return (st);
}
