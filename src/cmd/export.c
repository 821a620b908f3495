#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/bundle.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/hex.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/signals.h"
#include "coffer/status.h"

const struct cmd_option cmd_export_options[] = {
	CMD_OPT_VALUE('t', "target", "NAME",
	    "the offsite target: its bundles form one chain"),
	CMD_OPT_VALUE('o', "to", "DEST",
	    "a directory, - (standard output) or rclone:REMOTE:PATH"),
	CMD_OPT_VALUE('l', "level", "LEVEL",
	    "full, differential or incremental (default: from the target)"),
	CMD_OPT_FLAG('a', "all", "every complete snapshot, not one chain"),
	CMD_OPT_FLAG('j', "json", "print the bundle as JSON"),
	CMD_OPT_END
};

static void
print_result(const struct export_opts *o, const struct export_result *res,
    int json)
{
	char size[32], need[32], hex[2 * BUNDLE_HASH_BYTES + 1];

	if (json) {
		struct jw j;

		hex_encode(hex, res->manifest, sizeof(res->manifest));
		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_str(jw_key(&j, "bundle"), res->name);
		jw_str(jw_key(&j, "target"), o->target);
		jw_uint(jw_key(&j, "sequence"), res->seq);
		jw_str(jw_key(&j, "level"), catalog_level_name(res->level));
		if (res->base_seq)
			jw_uint(jw_key(&j, "base_sequence"), res->base_seq);
		else
			jw_null(jw_key(&j, "base_sequence"));
		jw_str(jw_key(&j, "snapshot"), o->snapshot ?
		    o->snapshot->sid : NULL);
		jw_uint(jw_key(&j, "snapshots"), res->snapshots);
		jw_uint(jw_key(&j, "packs"), res->packs);
		jw_uint(jw_key(&j, "journal_packs"), res->journal_packs);
		jw_uint(jw_key(&j, "pack_bytes"), res->pack_bytes);
		jw_uint(jw_key(&j, "needed_bytes"), res->needed_bytes);
		jw_uint(jw_key(&j, "bytes"), res->bytes);
		jw_str(jw_key(&j, "manifest"), hex);
		jw_str(jw_key(&j, "b2sum"), res->sum);
		jw_double(jw_key(&j, "seconds"), res->seconds, 3);
		jw_end_object(&j);
		return;
	}
	/* Quiet under cron; standard output may be the bundle itself. */
	if (log_level < 0 || (log_level == 0 && !isatty(STDERR_FILENO)))
		return;
	fmt_bytes(size, sizeof(size), (double)res->bytes);
	fmt_bytes(need, sizeof(need), (double)res->needed_bytes);
	fprintf(stderr, "bundle %s (%s, target '%s'): %zu packs (%zu of the "
	    "journal), %s (%s of it needed by its snapshots and the "
	    "journal), %.1f s (%.0f MB/s)\n",
	    fmt_text(res->name), catalog_level_name(res->level),
	    fmt_text(o->target), res->packs, res->journal_packs, size, need,
	    res->seconds, res->seconds > 0 ?
	    (double)res->bytes / res->seconds / 1e6 : 0.0);
}

int
cmd_export(int argc, char **argv, const struct global_opts *g)
{
	struct export_opts o;
	struct export_result res;
	struct catalog_snapshot snap;
	struct repo *r;
	struct catalog *c;
	int ch, st, json = 0, all = 0;

	memset(&o, 0, sizeof(o));
	memset(&snap, 0, sizeof(snap));
	o.level = LEVEL_AUTO;
	while ((ch = cmd_getopt(argc, argv, cmd_export_options)) != -1) {
		switch (ch) {
		case 't':
			o.target = optarg;
			break;
		case 'o':
			o.to = optarg;
			break;
		case 'l':
			if ((o.level = catalog_level_parse(optarg)) < 0) {
				log_error("unknown level '%s' (full, "
				    "differential, incremental)", optarg);
				return (STATUS_USAGE);
			}
			break;
		case 'a':
			all = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return (cmd_usage_error("export"));
		}
	}
	if (argc - optind != (all ? 0 : 1) || o.target == NULL ||
	    o.to == NULL)
		return (cmd_usage_error("export"));
	if (!name_ok(o.target, BUNDLE_TARGET_MAX)) {
		log_error("bad target name '%s' (letters, digits, '.', '_', "
		    "'-'; at most %d)", o.target, BUNDLE_TARGET_MAX);
		return (STATUS_USAGE);
	}
	if (json && strcmp(o.to, "-") == 0) {
		log_error("--json needs standard output, which --to - gives "
		    "the bundle");
		return (STATUS_USAGE);
	}
	signals_install();	/* the engine stops between packs */
	if ((st = cmd_open(g, OPEN_KEYS | OPEN_WRITE, &r, &c)) != STATUS_OK)
		return (st);
	if (!all) {
		if ((st = cmd_snapshot(c, argv[optind], &snap)) != STATUS_OK)
			goto out;
		o.snapshot = &snap;
	}
	if ((st = cmd_status(engine_export(r, c, &o, &res))) == STATUS_OK)
		print_result(&o, &res, json);
out:
	catalog_snapshot_release(&snap);
	cmd_close(r, c);
	return (st);
}
