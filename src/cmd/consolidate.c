#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/fmt.h"
#include "coffer/engine.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

const struct cmd_option cmd_consolidate_options[] = {
	CMD_OPT_FLAG('j', "json", "print the new snapshot as JSON"),
	CMD_OPT_END
};

int
cmd_consolidate(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot src;
	struct consolidate_result res;
	struct repo *r;
	struct catalog *c;
	int ch, st, json = 0;

	while ((ch = cmd_getopt(argc, argv, cmd_consolidate_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("consolidate"));
		json = 1;
	}
	if (argc - optind != 1)
		return (cmd_usage_error("consolidate"));
	if ((st = cmd_open(g, OPEN_KEYS | OPEN_WRITE, &r, &c)) != STATUS_OK)
		return (st);
	memset(&src, 0, sizeof(src));
	if ((st = cmd_snapshot(c, argv[optind], &src)) != STATUS_OK)
		goto out;
	if ((st = cmd_status(engine_consolidate(r, c, &src, &res))) !=
	    STATUS_OK)
		goto out;
	if (json) {
		struct jw j;

		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_str(jw_key(&j, "snapshot"), res.sid);
		jw_str(jw_key(&j, "source"), src.sid);
		jw_str(jw_key(&j, "dataset"), src.dataset);
		jw_str(jw_key(&j, "level"), "full");
		jw_int(jw_key(&j, "files"), res.files);
		jw_int(jw_key(&j, "dirs"), res.dirs);
		jw_int(jw_key(&j, "others"), res.others);
		jw_int(jw_key(&j, "bytes_stored"), res.bytes_stored);
		jw_double(jw_key(&j, "seconds"), res.seconds, 3);
		jw_end_object(&j);
	} else if (log_level >= 0) {
		/* The new id is the result: print it even under cron. */
		printf("%s\n", fmt_text(res.sid));
		if (isatty(STDOUT_FILENO) || log_level > 0)
			fprintf(stderr, "synthetic full %.12s of %.12s "
			    "(chain depth %d): %lld files, %lld dirs\n",
			    fmt_text(res.sid), fmt_text(src.sid), src.depth,
			    (long long)res.files, (long long)res.dirs);
	}
out:
	catalog_snapshot_release(&src);
	cmd_close(r, c);
	return (st);
}
