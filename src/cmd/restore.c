#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

const struct cmd_option cmd_restore_options[] = {
	CMD_OPT_FLAG('f', "force", "restore into a TARGET that is not empty"),
	CMD_OPT_FLAG('R', "root-metadata",
	    "with --force: give TARGET the root's metadata"),
	CMD_OPT_VALUE('t', "threads", "N",
	    "threads that read, check and write chunks"),
	CMD_OPT_END
};

int
cmd_restore(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot s;
	struct restore_opts o;
	struct restore_result res;
	struct repo *r;
	struct catalog *c;
	char sz[32];
	int ch, st;

	memset(&o, 0, sizeof(o));
	while ((ch = cmd_getopt(argc, argv, cmd_restore_options)) != -1) {
		switch (ch) {
		case 'f':
			o.force = 1;
			break;
		case 'R':
			o.root_metadata = 1;
			break;
		case 't':
			if ((o.threads = cmd_parse_threads(optarg)) < 0)
				return (STATUS_USAGE);
			break;
		default:
			return (cmd_usage_error("restore"));
		}
	}
	if (argc - optind < 2)
		return (cmd_usage_error("restore"));
	o.target = argv[optind + 1];
	o.paths = argv + optind + 2;
	o.npaths = (size_t)(argc - optind - 2);
	if (cmd_snapshot_paths(argv + optind + 2, o.npaths) != STATUS_OK)
		return (STATUS_USAGE);
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	memset(&s, 0, sizeof(s));
	if ((st = cmd_snapshot(c, argv[optind], &s)) != STATUS_OK)
		goto out;
	signals_install();	/* stops between files; what is written is whole */
	st = cmd_status(engine_restore(r, c, &s, &o, &res));
	if (res.failed)
		log_error("%lld file%s could not be restored",
		    (long long)res.failed, res.failed == 1 ? "" : "s");
	if ((st == STATUS_OK || st == STATUS_WARN) && log_level >= 0 &&
	    (log_level > 0 || isatty(STDOUT_FILENO))) {
		fmt_bytes(sz, sizeof(sz), (double)res.bytes);
		printf("restored %.12s to '%s': %lld entries, %s in %.1f s",
		    fmt_text(s.sid), fmt_text(o.target), (long long)res.files,
		    sz, res.seconds);
		if (res.reused > 0) {
			fmt_bytes(sz, sizeof(sz), (double)res.reused);
			printf(" (%s of it shared, read back)", sz);
		}
		printf("\n");
	}
out:
	catalog_snapshot_release(&s);
	cmd_close(r, c);
	return (st);
}
