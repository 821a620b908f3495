#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-dump.h"
#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

const struct cmd_option cmd_dump_options[] = {
	CMD_OPT_LETTER_VALUE('o', "output", "FILE",
	    "write to FILE (made anew, mode 0600), not standard output"),
	CMD_OPT_FLAG('T', "tar", "a tar stream even for one regular file"),
	CMD_OPT_END
};

int
cmd_dump(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot s;
	struct dump_opts o;
	struct dump_result res;
	struct repo *r;
	struct catalog *c;
	const char *out = NULL;
	char sz[32];
	int ch, st;

	memset(&o, 0, sizeof(o));
	while ((ch = cmd_getopt(argc, argv, cmd_dump_options)) != -1) {
		switch (ch) {
		case 'o':
			out = optarg;
			break;
		case 'T':
			o.tar = 1;
			break;
		default:
			return (cmd_usage_error("dump"));
		}
	}
	if (argc - optind < 1)
		return (cmd_usage_error("dump"));
	o.paths = argv + optind + 1;
	o.npaths = (size_t)(argc - optind - 1);
	if (cmd_snapshot_paths(argv + optind + 1, o.npaths) != STATUS_OK)
		return (STATUS_USAGE);
	/* A stream of file data is no use on a terminal (tar refuses
	 * too). */
	if (out == NULL && isatty(STDOUT_FILENO)) {
		log_error("refusing to write a snapshot to a terminal "
		    "(redirect it, or -o FILE)");
		return (STATUS_USAGE);
	}
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		return (st);
	memset(&s, 0, sizeof(s));
	if ((st = cmd_snapshot(c, argv[optind], &s)) != STATUS_OK)
		goto out;
	o.fd = STDOUT_FILENO;
	o.what = "standard output";
	if (out != NULL) {
		if ((o.fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600)) == -1) {
			log_errno("cannot create '%s'", out);
			st = errno == EEXIST ? STATUS_USAGE : STATUS_ERROR;
			goto out;
		}
		o.what = out;
	}
	signals_install();	/* stops between chunks; the stream is cut */
	st = cmd_status(engine_dump(r, c, &s, &o, &res));
	if (st == STATUS_OK || st == STATUS_WARN) {
		/* Standard output is the stream: -v says so on stderr. */
		fmt_bytes(sz, sizeof(sz), (double)res.bytes);
		log_info("dumped %.12s to %s: %lld entr%s, %s of content in "
		    "%.1f s", fmt_text(s.sid), fmt_text(o.what),
		    (long long)res.entries, res.entries == 1 ? "y" : "ies",
		    sz, res.seconds);
	}
	if (out != NULL) {
		if (st == STATUS_OK || st == STATUS_WARN) {
			if (fsync(o.fd) == -1) {
				log_errno("cannot write '%s'", out);
				st = STATUS_ERROR;
			}
		}
		if (close(o.fd) == -1 && st != STATUS_ERROR) {
			log_errno("cannot write '%s'", out);
			st = STATUS_ERROR;
		}
		/* What a failed dump wrote is not the snapshot. */
		if (st != STATUS_OK && st != STATUS_WARN)
			(void)unlink(out);
	}
out:
	catalog_snapshot_release(&s);
	cmd_close(r, c);
	return (st);
}
