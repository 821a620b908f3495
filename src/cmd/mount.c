#include <getopt.h>
#include <signal.h>
#include <string.h>

#include "cmd.h"
#include "coffer/engine-mount.h"
#include "coffer/log.h"
#include "coffer/status.h"

const struct cmd_option cmd_mount_options[] = {
	CMD_OPT_FLAG('a', "allow-other",
	    "let other users in (root, or user_allow_other in fuse.conf)"),
	CMD_OPT_END
};

int
cmd_mount(int argc, char **argv, const struct global_opts *g)
{
	struct mount_opts o;
	struct mount_result res;
	struct repo *r;
	struct catalog *c;
	int ch, st;

	memset(&o, 0, sizeof(o));
	while ((ch = cmd_getopt(argc, argv, cmd_mount_options)) != -1) {
		switch (ch) {
		case 'a':
			o.allow_other = 1;
			break;
		default:
			return (cmd_usage_error("mount"));
		}
	}
	if (argc - optind != 1)
		return (cmd_usage_error("mount"));
	o.mountpoint = argv[optind];
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	log_note("serving the snapshots at '%s' until it is unmounted "
	    "(fusermount3 -u)", o.mountpoint);
	st = cmd_status(engine_mount(r, c, &o, &res));
	if (st == STATUS_OK || res.damaged > 0)
		log_info("unmounted '%s'%s%s", o.mountpoint,
		    res.signal ? " on " : "",
		    res.signal ? strsignal(res.signal) : "");
	cmd_close(r, c);
	return (st);
}
