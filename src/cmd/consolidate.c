#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine.h"
#include "coffer/json.h"
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
	int ch, st, rc, json = 0;

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
	if ((rc = catalog_snapshot_find(c, argv[optind], &src)) <= 0) {
		st = rc < 0 ? STATUS_REPO : STATUS_USAGE;
		goto out;
	}
	if ((st = cmd_status(engine_consolidate(r, c, &src, &res))) !=
	    STATUS_OK)
		goto out;
	if (json) {
		printf("{\"snapshot\":\"%s\",\"source\":\"%s\",\"dataset\":",
		    res.sid, src.sid);
		json_str(stdout, src.dataset);
		printf(",\"level\":\"full\",\"files\":%lld,\"dirs\":%lld,"
		    "\"others\":%lld,\"bytes_stored\":%lld,\"seconds\":%.3f}\n",
		    (long long)res.files, (long long)res.dirs,
		    (long long)res.others, (long long)res.bytes_stored,
		    res.seconds);
	} else if (log_level >= 0) {
		/* The new id is the result: print it even under cron. */
		printf("%s\n", res.sid);
		if (isatty(STDOUT_FILENO) || log_level > 0)
			fprintf(stderr, "synthetic full %.12s of %.12s "
			    "(chain depth %d): %lld files, %lld dirs\n",
			    res.sid, src.sid, src.depth,
			    (long long)res.files, (long long)res.dirs);
	}
out:
	catalog_snapshot_release(&src);
	cmd_close(r, c);
	return (st);
}
