/*
 * The table of commands: main.c dispatches through it (cmd_run), and
 * help, usage errors and the overview are printed from it and from each
 * command's table of options, so that what help says is what is parsed.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "coffer/engine-open.h"
#include "coffer/log.h"
#include "coffer/status.h"

#ifndef COFFER_VERSION
#define COFFER_VERSION "0.1.0"
#endif

/* The environment variables a command reads, for its help. */
enum {
	ENV_REPO = 1 << 0,
	ENV_KEY_FILE = 1 << 1,
	ENV_PASSPHRASE = 1 << 2,
	ENV_KDF_MAX_MEMORY = 1 << 3,
	ENV_CATALOG = 1 << 4,
	ENV_XDG_STATE_HOME = 1 << 5,
	ENV_TMPDIR = 1 << 6
};
/* What cmd_open reads: the repository, its key, its catalog. */
#define ENV_OPEN (ENV_REPO | ENV_KEY_FILE | ENV_PASSPHRASE | \
	ENV_KDF_MAX_MEMORY | ENV_CATALOG | ENV_XDG_STATE_HOME)

/*
 * Those a user sets; the tuning switches and test hooks (COFFER_AEAD,
 * COFFER_READ_BACK, COFFER_TEST_*, ...) are in coffer(1) only.
 */
static const struct {
	unsigned bit;
	const char *name, *help;
} envs[] = {
	{ ENV_REPO, "COFFER_REPO", "the repository, when -r is not given" },
	{ ENV_KEY_FILE, "COFFER_KEY_FILE",
	  "the key file, when --key-file is not given" },
	{ ENV_PASSPHRASE, "COFFER_PASSPHRASE",
	  "the passphrase, without a key or passphrase file" },
	{ ENV_KDF_MAX_MEMORY, "COFFER_KDF_MAX_MEMORY",
	  "most MiB a key slot's Argon2id may use (1024)" },
	{ ENV_CATALOG, "COFFER_CATALOG",
	  "the catalog, when --catalog is not given" },
	{ ENV_XDG_STATE_HOME, "XDG_STATE_HOME",
	  "where catalogs are kept (~/.local/state)" },
	{ ENV_TMPDIR, "TMPDIR",
	  "where the scratch directory goes without --scratch" },
};
#define NENVS (sizeof(envs) / sizeof(envs[0]))

static int cmd_help(int argc, char **argv, const struct global_opts *g);

/*
 * A subcommand is a command of two words ("catalog check"); the words
 * before it name its group, for help and usage errors.
 */
static const struct command {
	const char *name;
	int (*fn)(int, char **, const struct global_opts *);
	const struct cmd_option *opts;	/* NULL: none */
	const char *args;		/* the operands, after the options */
	const char *summary;
	unsigned env;			/* ENV_* it reads */
	int page;			/* 1: coffer-NAME(1) exists */
} commands[] = {
	{ "init", cmd_init, cmd_init_options, "[REPO]",
	  "create a repository",
	  ENV_REPO | ENV_KEY_FILE | ENV_PASSPHRASE | ENV_KDF_MAX_MEMORY, 1 },
	{ "backup", cmd_backup, cmd_backup_options,
	  "DATASET PATH | --from-tar FILE DATASET",
	  "take a snapshot of a dataset", ENV_OPEN, 1 },
	{ "snapshots", cmd_snapshots, cmd_listing_options, "[DATASET]",
	  "list snapshots", ENV_OPEN, 1 },
	{ "ls", cmd_ls, cmd_ls_options, "SNAPSHOT [PATH]",
	  "list the entries of a snapshot", ENV_OPEN, 1 },
	{ "diff", cmd_diff, cmd_diff_options, "SNAPSHOT_A SNAPSHOT_B",
	  "show what changed between two snapshots", ENV_OPEN, 1 },
	{ "consolidate", cmd_consolidate, cmd_consolidate_options, "SNAPSHOT",
	  "make a synthetic full of a snapshot's chain", ENV_OPEN, 1 },
	{ "restore", cmd_restore, cmd_restore_options,
	  "SNAPSHOT TARGET [PATH...]", "restore a snapshot, or part of it",
	  ENV_OPEN, 1 },
	{ "dump", cmd_dump, cmd_dump_options, "SNAPSHOT [PATH...]",
	  "write a snapshot, or part of it, as a tar stream", ENV_OPEN, 1 },
	{ "mount", cmd_mount, cmd_mount_options, "MOUNTPOINT",
	  "browse the snapshots as a read-only file system", ENV_OPEN, 1 },
	{ "verify", cmd_verify, cmd_verify_options, NULL,
	  "check that the repository holds what snapshots need", ENV_OPEN,
	  1 },
	{ "verify history", cmd_verify_history, cmd_listing_options, NULL,
	  "list the verify runs recorded, from every host", ENV_OPEN, 1 },
	{ "audit", cmd_audit, cmd_audit_options, "DATASET [SNAPSHOT]",
	  "rehash the live data and compare it with a snapshot", ENV_OPEN,
	  1 },
	{ "drill", cmd_drill, cmd_drill_options, "SNAPSHOT",
	  "rehearse a recovery and record it", ENV_OPEN | ENV_TMPDIR, 1 },
	{ "drill history", cmd_drill_history, cmd_listing_options,
	  "[DATASET]", "list the drills recorded", ENV_OPEN, 1 },
	{ "forget", cmd_forget, cmd_forget_options, "[SNAPSHOT...]",
	  "forget snapshots by retention rules, chain-aware", ENV_OPEN, 1 },
	{ "prune", cmd_prune, cmd_prune_options, NULL,
	  "delete and repack packs no snapshot needs", ENV_OPEN, 1 },
	{ "catalog rebuild", cmd_catalog_rebuild, cmd_catalog_options, NULL,
	  "rebuild the catalog from the repository", ENV_OPEN, 1 },
	{ "catalog check", cmd_catalog_check, cmd_catalog_options, NULL,
	  "compare the catalog with the repository", ENV_OPEN, 1 },
	{ "catalog path", cmd_catalog_path, NULL, NULL,
	  "print where the repository's catalog is", ENV_REPO, 1 },
	{ "export", cmd_export, cmd_export_options,
	  "--target NAME --to DEST (SNAPSHOT | --all)",
	  "write an encrypted bundle for offsite storage", ENV_OPEN, 1 },
	{ "import", cmd_import, cmd_import_options, "SOURCE",
	  "bring bundles back into a repository, or make one of them",
	  ENV_OPEN, 1 },
	{ "bundles", cmd_bundles, cmd_bundles_options, NULL,
	  "list the bundles exported to each target", ENV_OPEN, 1 },
	{ "locks", cmd_locks, cmd_locks_options, NULL,
	  "show who holds the repository's writer lock", ENV_REPO, 1 },
	{ "key list", cmd_key_list, cmd_key_list_options, NULL,
	  "list the key slots, the keys the keyring lists and key epochs",
	  ENV_REPO, 1 },
	{ "key add", cmd_key_add, cmd_key_add_options, NULL,
	  "add a passphrase slot that reads the same packs", ENV_OPEN, 1 },
	{ "key passwd", cmd_key_passwd, cmd_key_passwd_options, "[SLOT]",
	  "change a slot's passphrase or its Argon2id cost", ENV_OPEN, 1 },
	{ "key remove", cmd_key_remove, NULL, "NAME",
	  "remove a slot or key file: it opens nothing more", ENV_OPEN, 1 },
	{ "key export", cmd_key_export, cmd_key_export_options, NULL,
	  "write the key as a key file or a paper key", ENV_OPEN, 1 },
	{ "key import", cmd_key_import, cmd_key_import_options, "SOURCE",
	  "a key file or paper key into a new slot or a key file", ENV_OPEN,
	  1 },
	{ "key rotate", cmd_key_rotate, cmd_key_rotate_options, NULL,
	  "start a key epoch for new packs; --rewrap reseals old packs to it",
	  ENV_OPEN, 1 },
	{ "key retire", cmd_key_retire, NULL, "EPOCH",
	  "remove an old key epoch's secret once no pack needs it", ENV_OPEN,
	  1 },
	{ "run", cmd_run_policy, cmd_run_options, "--policy FILE",
	  "do what a policy says is due: backups, exports, retention, drills",
	  ENV_OPEN | ENV_TMPDIR, 1 },
	{ "watch", cmd_watch, cmd_watch_options, "--policy FILE",
	  "back up each checkpoint step as soon as it is complete",
	  ENV_OPEN, 1 },
	{ "log", cmd_log, cmd_log_options, NULL,
	  "list what each coffer run did", ENV_OPEN, 1 },
	{ "health", cmd_health, cmd_health_options,
	  "[DATASET...]", "one monitoring check: Nagios, Icinga, Zabbix",
	  ENV_OPEN, 1 },
	{ "cron", cmd_cron, cmd_cron_options, "--policy FILE",
	  "print a crontab line and systemd units that run a policy", 0, 1 },
	{ "help", cmd_help, NULL, "[COMMAND]",
	  "list the commands, or a command's options", 0, 0 },
	{ "version", cmd_version, NULL, NULL, "print the version", 0, 0 },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

const struct cmd_option cmd_global_options[] = {
	CMD_OPT_LETTER_VALUE('r', "repo", "REPO",
	    "the repository (COFFER_REPO)"),
	CMD_OPT_VALUE('K', "key-file", "PATH",
	    "unlock with a key file (COFFER_KEY_FILE)"),
	CMD_OPT_VALUE('P', "passphrase-file", "PATH",
	    "read the passphrase from a file's first line"),
	CMD_OPT_VALUE('C', "catalog", "PATH",
	    "the catalog database (COFFER_CATALOG)"),
	CMD_OPT_VALUE('A', "cacert", "FILE",
	    "CA certificates for an https: S3 endpoint (COFFER_CACERT)"),
	CMD_OPT_LETTER_FLAG('q', "quiet", "warnings and errors only"),
	CMD_OPT_LETTER_FLAG('v', "verbose", "say more, on standard error"),
	CMD_OPT_VALUE('w', "wait", "DURATION",
	    "wait at most this long for a lock (1h)"),
	CMD_OPT_FLAG('W', "no-wait", "fail at once when a lock is held"),
	CMD_OPT_LETTER_FLAG('h', "help", "list the commands and options"),
	CMD_OPT_FLAG('V', "version", "print the version"),
	CMD_OPT_END
};

/* Whether command c is name, or a subcommand of the group name. */
static int
in_group(const struct command *c, const char *name)
{
	size_t n = strlen(name);

	return (strncmp(c->name, name, n) == 0 &&
	    (c->name[n] == '\0' || c->name[n] == ' '));
}

static int
is_group(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (in_group(&commands[i], name))
			return (1);
	return (0);
}

/* The command argv names, and in *words how many words name it. */
static const struct command *
find(int argc, char **argv, int *words)
{
	size_t i, n = strlen(argv[0]);

	for (i = 0; argc > 1 && i < NCOMMANDS; i++)
		if (strncmp(commands[i].name, argv[0], n) == 0 &&
		    commands[i].name[n] == ' ' &&
		    strcmp(commands[i].name + n + 1, argv[1]) == 0) {
			*words = 2;
			return (&commands[i]);
		}
	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, argv[0]) == 0) {
			*words = 1;
			return (&commands[i]);
		}
	return (NULL);
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

/* "'NAME' is not a coffer command", with the one most likely meant. */
static int
unknown(const char *name)
{
	char word[32];
	const char *best = NULL;
	size_t i, d, bestd = 3;

	for (i = 0; i < NCOMMANDS; i++) {
		/* A group's name: the first word. */
		snprintf(word, sizeof(word), "%.*s",
		    (int)strcspn(commands[i].name, " "), commands[i].name);
		d = distance(name, word);
		if (strncmp(name, word, strlen(name)) == 0 &&
		    strlen(name) >= 2)
			d = 1;
		if (d < bestd) {
			bestd = d;
			best = commands[i].name;
		}
	}
	if (best != NULL)
		log_error("'%s' is not a coffer command; did you mean '%.*s'?",
		    name, (int)strcspn(best, " "), best);
	else
		log_error("'%s' is not a coffer command (see 'coffer help')",
		    name);
	return (STATUS_USAGE);
}

/*
 * "drill histroy": a command that takes a snapshot and has subcommands
 * would look the typo up as a snapshot name.  A word that cannot name a
 * snapshot (no hex id, no '@') and is one or two edits from a subcommand
 * is a usage error that names it.  The subcommand's full name, or NULL.
 */
static const char *
near_subcommand(const char *group, const char *arg)
{
	size_t i, n = strlen(group), len = strlen(arg);

	if (len < 3 || strchr(arg, '@') != NULL ||
	    strspn(arg, "0123456789abcdefABCDEF") == len)
		return (NULL);
	for (i = 0; i < NCOMMANDS; i++)
		if (strncmp(commands[i].name, group, n) == 0 &&
		    commands[i].name[n] == ' ' &&
		    distance(arg, commands[i].name + n + 1) <= 2)
			return (commands[i].name);
	return (NULL);
}

/* "usage: coffer NAME ..." and "   or: ..." for the commands of a group. */
static void
print_usage(FILE *f, const char *name)
{
	char opts[160], line[256];
	const char *lead = "usage:";
	size_t i;

	for (i = 0; i < NCOMMANDS; i++) {
		const struct command *c = &commands[i];

		if (!in_group(c, name))
			continue;
		opts[0] = '\0';
		/* Options spelled out when the line fits, else [OPTIONS]. */
		if (c->opts != NULL && (cmd_options_usage(opts, sizeof(opts),
		    c->opts, c->args) || strlen(lead) + strlen(c->name) + strlen(opts) +
		    (c->args ? strlen(c->args) : 0) + 10 > 80))
			snprintf(opts, sizeof(opts), "[OPTIONS]");
		snprintf(line, sizeof(line), "coffer %s%s%s%s%s", c->name,
		    opts[0] ? " " : "", opts, c->args ? " " : "",
		    c->args ? c->args : "");
		fprintf(f, "%s %s\n", lead, line);
		lead = "   or:";
	}
}

/* The options of the commands of a group, one line each. */
static void
print_options(FILE *f, const char *name)
{
	const struct cmd_option *tables[NCOMMANDS];
	size_t i, n = 0;

	for (i = 0; i < NCOMMANDS; i++)
		if (in_group(&commands[i], name) && commands[i].opts)
			tables[n++] = commands[i].opts;
	if (n == 0)
		return;
	fprintf(f, "\noptions:\n");
	cmd_options_help(f, tables, n);
}

/* coffer NAME --help: usage, options, environment, the manual page. */
static int
print_help(const char *name)
{
	unsigned env = 0;
	size_t i;
	int page = 0;

	for (i = 0; i < NCOMMANDS; i++)
		if (in_group(&commands[i], name)) {
			env |= commands[i].env;
			page |= commands[i].page;
		}
	print_usage(stdout, name);
	print_options(stdout, name);
	if (env)
		printf("\nenvironment:\n");
	for (i = 0; i < NENVS; i++)
		if (env & envs[i].bit)
			printf("  %-26s%s\n", envs[i].name, envs[i].help);
	if (page)
		printf("\nSee coffer-%.*s(1).\n", (int)strcspn(name, " "),
		    name);
	else
		printf("\nSee coffer(1).\n");
	return (STATUS_OK);
}

int
cmd_usage_error(const char *name)
{
	print_usage(stderr, name);
	print_options(stderr, name);
	return (STATUS_USAGE);
}

void
cmd_overview(FILE *f)
{
	const struct cmd_option *g = cmd_global_options;
	size_t i;

	fprintf(f, "usage: coffer [OPTIONS] COMMAND [ARGS]\n\ncommands:\n");
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-17s %s\n", commands[i].name,
		    commands[i].summary);
	fprintf(f, "\noptions, before or after the command:\n");
	cmd_options_help(f, &g, 1);
	fprintf(f, "\n'coffer help COMMAND' or 'coffer COMMAND --help' "
	    "lists a command's options;\ncoffer(1) and coffer-COMMAND(1) "
	    "have the rest.\n");
}

/* coffer help [COMMAND [SUBCOMMAND]] */
static int
cmd_help(int argc, char **argv, const struct global_opts *g)
{
	const struct command *c;
	int words;

	if (argc < 2) {
		cmd_overview(stdout);
		return (STATUS_OK);
	}
	if ((c = find(argc - 1, argv + 1, &words)) != NULL && words == 2)
		return (print_help(c->name));
	if (!is_group(argv[1]))
		return (unknown(argv[1]));
	return (print_help(argv[1]));
}

int
cmd_version(int argc, char **argv, const struct global_opts *g)
{
	printf("coffer %s\n", COFFER_VERSION);
	return (STATUS_OK);
}

int
cmd_run(int argc, char **argv, const struct global_opts *g)
{
	const struct command *c;
	const char *near;
	int words, st;

	if ((c = find(argc, argv, &words)) == NULL) {
		/* A group without a subcommand ("coffer catalog"). */
		if (!is_group(argv[0]))
			return (unknown(argv[0]));
		if (cmd_options_want_help(argc, argv, NULL))
			return (print_help(argv[0]));
		if (argc > 1)
			log_error("'%s' is not a '%s' command", argv[1],
			    argv[0]);
		return (cmd_usage_error(argv[0]));
	}
	if (words == 1 && argc > 1 && (near = near_subcommand(argv[0],
	    argv[1])) != NULL) {
		log_error("'%s' is not a '%s' command; did you mean "
		    "'coffer %s'?", argv[1], argv[0], near);
		return (STATUS_USAGE);
	}
	if (cmd_options_want_help(argc - (words - 1), argv + (words - 1),
	    c->opts))
		/* What was typed: "drill" is drill and drill history. */
		return (print_help(words == 2 ? c->name : argv[0]));
	/* Each command runs getopt from the start. */
	optind = 0;
	engine_lock_purpose(c->name);
	st = c->fn(argc - (words - 1), argv + (words - 1), g);
	/* What the catalog update could not read (a damaged or forged
	 * pack, reported) was left out: the run did not end clean. */
	if ((st == STATUS_OK || st == STATUS_WARN) && cmd_catalog_damaged())
		st = STATUS_INTEGRITY;
	return (st);
}
