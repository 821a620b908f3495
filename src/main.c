/*
 * coffer: backup and integrity for AI training servers.
 * The global options, then the command, through the table of commands
 * (src/cmd/commands.c); each command lives in src/cmd/<name>.c.
 */
#include <locale.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "coffer/crypto.h"
#include "coffer/engine-open.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"
#include "coffer/tuning.h"

/* Global option ch (cmd_global_options' val) with its value v. */
static int
set_global(int ch, const char *v, struct global_opts *g)
{
	switch (ch) {
	case 'r':
		g->repo = v;
		break;
	case 'K':
		g->key_file = v;
		break;
	case 'P':
		g->passphrase_file = v;
		break;
	case 'C':
		g->catalog = v;
		break;
	case 'A':
		engine_set_cacert(v);
		break;
	case 'q':
		log_level = -1;
		break;
	case 'v':
		log_level++;
		break;
	case 'W':
		g->wait = 0;
		break;
	case 'w':
		if (cmd_parse_duration("--wait", v, &g->wait))
			return (-1);
		break;
	}
	return (0);
}

/*
 * Global options after the command too (coffer backup -q ...), as restic
 * takes them: taken out of the command's arguments before it parses them.
 * Up to a "--".  -h and --version there are the command's: left.  0, or
 * -1 (reported).
 */
static int
take_globals(int *argc, char **argv, struct global_opts *g)
{
	const struct cmd_option *o;
	const char *v;
	int i, k, n = *argc;

	for (i = k = 1; i < n; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < n)
				argv[k++] = argv[i++];
			break;
		}
		o = cmd_option_find(cmd_global_options, argv[i], &v);
		if (o == NULL || o->val == 'h' || o->val == 'V') {
			argv[k++] = argv[i];
			continue;
		}
		if (o->has_arg == required_argument && v == NULL) {
			if (i + 1 >= n) {
				log_error("option '%s' needs a value", argv[i]);
				return (-1);
			}
			v = argv[++i];
		}
		if (set_global(o->val, v, g))
			return (-1);
	}
	argv[k] = NULL;
	*argc = k;
	return (0);
}

/*
 * Tests only (COFFER_TEST_EXITS, coffer(1)'s TEST HOOKS): one line
 * appended to that file per run, "STATUS RETURNED ERRORS COMMAND ARGS...",
 * the exit status, what the command itself returned, the number of
 * "error:" lines; tests/lib.sh fails a script in which a command printed
 * an error and returned success.
 */
static void
test_record_exit(int argc, char **argv, int ret, int st)
{
	const char *path = tuning_get()->test_exits;
	FILE *f;
	int i;

	if (path == NULL || (f = fopen(path, "ae")) == NULL)
		return;
	fprintf(f, "%d %d %lu", st, ret, log_errors);
	for (i = 0; i < argc && i < 8; i++)
		fprintf(f, " %.64s", argv[i]);
	fputc('\n', f);
	fclose(f);
}

int
main(int argc, char **argv)
{
	struct global_opts g;
	int ch, st, ret;

	/* Names are bytes: keep libarchive from converting them. */
	setlocale(LC_ALL, "C");
	/*
	 * Chunk buffers (up to the 8 MiB maximum chunk, and more) come and
	 * go for every file.  glibc's dynamic mmap threshold would move them
	 * into the heap after the first free, where they fragment, and each
	 * pool thread would get an arena of its own: together about 10 MiB
	 * more peak RSS in a backup.  Mapped above 1 MiB, they go back to the
	 * system when freed.
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_ARENA_MAX, 2);
	signal(SIGPIPE, SIG_IGN);
	memset(&g, 0, sizeof(g));
	g.wait = WAIT_DEFAULT;
	if (cmd_secrets_init(&g))
		return (STATUS_ERROR);
	g.repo = getenv("COFFER_REPO");
	g.key_file = getenv("COFFER_KEY_FILE");
	g.catalog = getenv("COFFER_CATALOG");
	if (g.repo && !*g.repo)
		g.repo = NULL;
	if (g.key_file && !*g.key_file)
		g.key_file = NULL;
	if (g.catalog && !*g.catalog)
		g.catalog = NULL;
	if (getenv("COFFER_CACERT") != NULL && *getenv("COFFER_CACERT"))
		engine_set_cacert(getenv("COFFER_CACERT"));

	/* Up to the command: its options are its own. */
	while ((ch = cmd_getopt_ordered(argc, argv, cmd_global_options)) !=
	    -1) {
		switch (ch) {
		case 'h':
			cmd_overview(stdout);
			return (STATUS_OK);
		case 'V':
			return (cmd_version(0, NULL, &g));
		case '?':
			cmd_overview(stderr);
			return (STATUS_USAGE);
		default:
			if (set_global(ch, optarg, &g))
				return (STATUS_USAGE);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		cmd_overview(stderr);
		return (STATUS_USAGE);
	}
	if (take_globals(&argc, argv, &g))
		return (STATUS_USAGE);
	if (ccrypto_init())
		return (STATUS_ERROR);
	/* Tests only (COFFER_TEST_ERROR, coffer(1)): the rule below. */
	if (tuning_get()->test_error)
		log_error("COFFER_TEST_ERROR is set: an error for the test of "
		    "the exit status");
	st = ret = cmd_run(argc, argv, &g);
	cmd_secrets_release(&g);
	/*
	 * An "error:" line means something failed, whatever the command
	 * concluded: a run that got over a problem says "warning:".  Each
	 * command maps its failures onto the table in coffer(1); one that
	 * printed an error and still returned success (0, or 1: success
	 * with warnings) gets the catch-all status, said in one more line,
	 * rather than a success a script would trust.
	 */
	if (log_errors > 0 && (st == STATUS_OK || st == STATUS_WARN)) {
		log_error("'%s' reported %s above: exit status %d, not %d",
		    argv[0], log_errors == 1 ? "an error" : "errors",
		    STATUS_ERROR, st);
		st = STATUS_ERROR;
	}
	/* Stopped by a signal: the status a shell expects. */
	if (signals_caught() && st != STATUS_OK)
		st = 128 + signals_caught();
	test_record_exit(argc, argv, ret, st);
	return (st);
}
