/*
 * coffer: backup and integrity for AI training servers.
 * The command table and the global options; each command lives in
 * src/cmd/<name>.c.
 */
#include <getopt.h>
#include <locale.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "coffer/crypto.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

#ifndef COFFER_VERSION
#define COFFER_VERSION "0.1.0"
#endif

static const struct command {
	const char *name;
	int (*fn)(int, char **, const struct global_opts *);
	const char *usage;
	const char *summary;
} commands[] = {
	{ "init", cmd_init, "init [--key-file PATH] [--kdf-memory MIB] [REPO]",
	  "create a repository" },
	{ "backup", cmd_backup,
	  "backup [--level full|differential|incremental] [--exclude GLOB]... "
	  "[--one-file-system] [--compression N] [--threads N] [--new-source] "
	  "[--time TIME] [--json] DATASET PATH",
	  "take a snapshot of a dataset" },
	{ "snapshots", cmd_snapshots, "snapshots [--json] [DATASET]",
	  "list snapshots" },
	{ "ls", cmd_ls, "ls [--json] SNAPSHOT [PATH]",
	  "list the entries of a snapshot" },
	{ "diff", cmd_diff, "diff [--json] SNAPSHOT_A SNAPSHOT_B",
	  "show what changed between two snapshots" },
	{ "consolidate", cmd_consolidate, "consolidate [--json] SNAPSHOT",
	  "make a synthetic full of a snapshot's chain" },
	{ "restore", cmd_restore,
	  "restore [--force] [--root-metadata] [--threads N] SNAPSHOT TARGET "
	  "[PATH...]",
	  "restore a snapshot, or part of it" },
	{ "verify", cmd_verify,
	  "verify [--read-data[=P%|=N/M]] [--max-duration DUR] [--json]",
	  "check that the repository holds what snapshots need" },
	{ "audit", cmd_audit,
	  "audit [--exclude GLOB]... [--one-file-system] [--json] DATASET "
	  "[SNAPSHOT]",
	  "rehash the live data and compare it with a snapshot" },
	{ "drill", cmd_drill,
	  "drill [--sample P%] [--scratch DIR | --no-write] [--keep] "
	  "[--rto DUR] [--rpo DUR] [--json] [--metrics-file FILE] SNAPSHOT\n"
	  "       coffer drill history [--json] [DATASET]",
	  "rehearse a recovery and record it" },
	{ "forget", cmd_forget,
	  "forget [--keep-last N] [--keep-hourly N] [--keep-daily N] "
	  "[--keep-weekly N] [--keep-monthly N] [--keep-yearly N] "
	  "[--keep-within DUR] [--dataset D] [--dry-run] [--prune "
	  "[--max-unused P%]] [--json]\n"
	  "       coffer forget [--dry-run] [--prune] SNAPSHOT...",
	  "forget snapshots by retention rules, chain-aware" },
	{ "prune", cmd_prune, "prune [--max-unused P%] [--dry-run] [--json]",
	  "delete and repack packs no snapshot needs" },
	{ "catalog", cmd_catalog, "catalog rebuild [--json]\n"
	  "       coffer catalog check [--json]",
	  "rebuild the catalog from the repository, or check it" },
	{ "help", cmd_help, "help [COMMAND]", "show help" },
	{ "version", cmd_version, "version", "print the version" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

const char *
cmd_usage(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return (commands[i].usage);
	return (NULL);
}

int
cmd_usage_error(const char *name)
{
	const char *u = cmd_usage(name);

	if (u)
		fprintf(stderr, "usage: coffer %s\n", u);
	return (STATUS_USAGE);
}

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f,
	    "usage: coffer [-r REPO] [--key-file PATH] [--passphrase-file PATH]\n"
	    "              [--catalog PATH] [-q] [-v] [--no-wait] COMMAND [ARGS]\n"
	    "\ncommands:\n");
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-12s %s\n", commands[i].name,
		    commands[i].summary);
	fprintf(f, "\n'coffer help COMMAND' shows a command's options; "
	    "man coffer has the rest.\n");
}

int
cmd_help(int argc, char **argv, const struct global_opts *g)
{
	const char *u;

	if (argc < 2) {
		usage(stdout);
		return (STATUS_OK);
	}
	if ((u = cmd_usage(argv[1])) == NULL) {
		log_error("no command '%s'", argv[1]);
		return (STATUS_USAGE);
	}
	printf("usage: coffer %s\n", u);
	return (STATUS_OK);
}

int
cmd_version(int argc, char **argv, const struct global_opts *g)
{
	printf("coffer %s\n", COFFER_VERSION);
	return (STATUS_OK);
}

/* Levenshtein distance of two short words (commands), capped. */
static size_t
distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j, d[32], prev, t;

	if (la >= 31 || lb >= 31)
		return (99);
	for (j = 0; j <= lb; j++)
		d[j] = j;
	for (i = 1; i <= la; i++) {
		prev = d[0];
		d[0] = i;
		for (j = 1; j <= lb; j++) {
			t = d[j];
			d[j] = prev + (a[i - 1] != b[j - 1]);
			if (d[j - 1] + 1 < d[j])
				d[j] = d[j - 1] + 1;
			if (t + 1 < d[j])
				d[j] = t + 1;
			prev = t;
		}
	}
	return (d[lb]);
}

/* The command a mistyped one most likely meant, or NULL. */
static const char *
nearest_command(const char *name)
{
	const char *best = NULL;
	size_t i, d, bestd = 3;

	for (i = 0; i < NCOMMANDS; i++) {
		d = distance(name, commands[i].name);
		if (strncmp(name, commands[i].name, strlen(name)) == 0 &&
		    strlen(name) >= 2)
			d = 1;
		if (d < bestd) {
			bestd = d;
			best = commands[i].name;
		}
	}
	return (best);
}

/*
 * Global options after the command too (coffer backup -q ...), as restic
 * takes them: taken out of the command's arguments before it parses them.
 * Up to a "--".  0, or -1 (reported).
 */
static int
take_globals(int *argc, char **argv, struct global_opts *g)
{
	const char *v, *opt;
	int i, k, n = *argc, val;

	for (i = k = 1; i < n; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < n)
				argv[k++] = argv[i++];
			break;
		}
		val = 0;
		v = NULL;
		if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
			log_level = -1;
		else if (!strcmp(argv[i], "-v") ||
		    !strcmp(argv[i], "--verbose"))
			log_level++;
		else if (!strcmp(argv[i], "--no-wait"))
			g->wait = 0;
		else if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "--repo") ||
		    !strcmp(argv[i], "--key-file") ||
		    !strcmp(argv[i], "--passphrase-file") ||
		    !strcmp(argv[i], "--catalog") ||
		    !strcmp(argv[i], "--wait"))
			val = 1;
		else if (!strncmp(argv[i], "--repo=", 7) ||
		    !strncmp(argv[i], "--key-file=", 11) ||
		    !strncmp(argv[i], "--passphrase-file=", 18) ||
		    !strncmp(argv[i], "--catalog=", 10) ||
		    !strncmp(argv[i], "--wait=", 7))
			v = strchr(argv[i], '=') + 1;
		else {
			argv[k++] = argv[i];
			continue;
		}
		if (val) {
			if (i + 1 >= n) {
				log_error("option '%s' needs a value", argv[i]);
				return (-1);
			}
			v = argv[++i];
		}
		if (v == NULL)
			continue;
		/* The option's first letter: -r, --repo, --key-file... */
		opt = argv[i - val];
		switch (opt[1] == '-' ? opt[2] : opt[1]) {
		case 'r':
			g->repo = v;
			break;
		case 'k':
			g->key_file = v;
			break;
		case 'p':
			g->passphrase_file = v;
			break;
		case 'c':
			g->catalog = v;
			break;
		case 'w':
			if (cmd_parse_duration("--wait", v, &g->wait))
				return (-1);
			break;
		}
	}
	argv[k] = NULL;
	*argc = k;
	return (0);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "repo", required_argument, NULL, 'r' },
		{ "key-file", required_argument, NULL, 'K' },
		{ "passphrase-file", required_argument, NULL, 'P' },
		{ "catalog", required_argument, NULL, 'C' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "no-wait", no_argument, NULL, 'W' },
		{ "wait", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct global_opts g;
	const char *near;
	size_t i;
	int ch, st;

	/* Names are bytes: keep libarchive from converting them. */
	setlocale(LC_ALL, "C");
	/*
	 * Chunk buffers (up to the 8 MiB maximum chunk, and more) come and
	 * go for every file.  glibc's dynamic mmap threshold would move them
	 * into the heap after the first free, where they fragment, and each
	 * pool thread would get an arena of its own: together 10 MiB of peak
	 * RSS on the benchmark tree.  Mapped above 1 MiB, they go back to the
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

	/* '+': stop at the command; its options are its own. */
	while ((ch = getopt_long(argc, argv, "+r:qvh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			g.repo = optarg;
			break;
		case 'K':
			g.key_file = optarg;
			break;
		case 'P':
			g.passphrase_file = optarg;
			break;
		case 'C':
			g.catalog = optarg;
			break;
		case 'q':
			log_level = -1;
			break;
		case 'v':
			log_level++;
			break;
		case 'W':
			g.wait = 0;
			break;
		case 'w':
			if (cmd_parse_duration("--wait", optarg, &g.wait))
				return (STATUS_USAGE);
			break;
		case 'h':
			usage(stdout);
			return (STATUS_OK);
		case 'V':
			return (cmd_version(0, NULL, &g));
		default:
			usage(stderr);
			return (STATUS_USAGE);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return (STATUS_USAGE);
	}
	if (take_globals(&argc, argv, &g))
		return (STATUS_USAGE);
	if (crypto_init())
		return (STATUS_ERROR);
	for (i = 0; i < NCOMMANDS; i++) {
		if (strcmp(commands[i].name, argv[0]) == 0) {
			/* Each command runs getopt_long from the start. */
			optind = 0;
			st = commands[i].fn(argc, argv, &g);
			cmd_secrets_release(&g);
			/* Stopped by a signal: the status a shell expects. */
			if (signals_caught() && st != STATUS_OK)
				st = 128 + signals_caught();
			return (st);
		}
	}
	if ((near = nearest_command(argv[0])) != NULL)
		log_error("'%s' is not a coffer command; did you mean '%s'?",
		    argv[0], near);
	else
		log_error("'%s' is not a coffer command (see 'coffer help')",
		    argv[0]);
	return (STATUS_USAGE);
}
