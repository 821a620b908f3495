#ifndef COFFER_CMD_H
#define COFFER_CMD_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coffer/engine-check.h"
#include "coffer/engine-open.h"
#include "coffer/engine-query.h"
#include "coffer/engine.h"
#include "coffer/jw.h"

/* Options that come before or after the command (and their environment
 * twins). */
#define WAIT_DEFAULT 3600.0		/* an hour: cron runs do not pile up */
/* A writer for a forget, with --no-wait: longer than the lease (15
 * minutes) a forget that died on object storage leaves behind. */
#define FORGET_WAIT 1200.0
struct global_opts {
	const char *repo;		/* -r, COFFER_REPO */
	const char *key_file;		/* --key-file, COFFER_KEY_FILE */
	const char *passphrase_file;	/* --passphrase-file */
	const char *catalog;		/* --catalog, COFFER_CATALOG */
	double wait;			/* --wait, --no-wait: seconds for
					 * the writer locks (< 0: for ever) */
	char *env_pass;			/* COFFER_PASSPHRASE (locked memory) */
	size_t env_passlen;
};

/*
 * First thing in main: no core dumps or ptrace from here on, and
 * COFFER_PASSPHRASE moved from the environment (wiped and unset, so that
 * no child inherits it) into g->env_pass.  0, or -1 (reported) when there
 * is no memory for it.  cmd_secrets_release wipes and frees g->env_pass.
 */
int cmd_secrets_init(struct global_opts *g);
void cmd_secrets_release(struct global_opts *g);

/*
 * One option of a command, in the one table per command that cmd_getopt
 * parses with and the command's help prints, so that the two cannot
 * drift apart (git's parse-options).  A table ends with CMD_OPT_END.
 */
struct cmd_option {
	const char *name;	/* the long name, without "--" */
	int has_arg;		/* no_argument, required_argument or
				 * optional_argument */
	int val;		/* what cmd_getopt returns for it */
	int letter;		/* 1: -val is the option too (-x) */
	const char *arg;	/* its value's name in help ("N", "GLOB") */
	const char *help;	/* one line, lowercase, no full stop */
};
#define CMD_OPT_FLAG(val, name, help) \
	{ (name), no_argument, (val), 0, NULL, (help) }
#define CMD_OPT_LETTER_FLAG(val, name, help) \
	{ (name), no_argument, (val), 1, NULL, (help) }
#define CMD_OPT_VALUE(val, name, arg, help) \
	{ (name), required_argument, (val), 0, (arg), (help) }
#define CMD_OPT_LETTER_VALUE(val, name, arg, help) \
	{ (name), required_argument, (val), 1, (arg), (help) }
#define CMD_OPT_OPTIONAL_VALUE(val, name, arg, help) \
	{ (name), optional_argument, (val), 0, (arg), (help) }
#define CMD_OPT_END { NULL, 0, 0, 0, NULL, NULL }

/*
 * getopt_long over a table of options (src/cmd/options.c): the next
 * option's val, with optarg as getopt_long sets it; '?' for an unknown
 * option or a missing value (getopt_long has said which); -1 after the
 * last.  Options and operands may be mixed; cmd_getopt_ordered stops at
 * the first operand instead (the global options, before the command).
 * optind is getopt's: 0 before the first call starts afresh.
 */
int cmd_getopt(int argc, char **argv, const struct cmd_option *opts);
int cmd_getopt_ordered(int argc, char **argv, const struct cmd_option *opts);

/*
 * The option of opts that the word arg names: "-x", "--name" or
 * "--name=VALUE" (then *value points after the '='; else NULL).  NULL
 * when none does.
 */
const struct cmd_option *cmd_option_find(const struct cmd_option *opts,
    const char *arg, const char **value);

/* The options that come before or after the command (-r, --key-file,
 * ...): main.c parses them, help lists them. */
extern const struct cmd_option cmd_global_options[];

/*
 * The options tables of the commands, each next to the switch that
 * handles its values; the table of commands (src/cmd/commands.c) gives
 * them to help.
 */
extern const struct cmd_option cmd_init_options[];
extern const struct cmd_option cmd_backup_options[];
extern const struct cmd_option cmd_listing_options[];
extern const struct cmd_option cmd_ls_options[];
extern const struct cmd_option cmd_diff_options[];
extern const struct cmd_option cmd_consolidate_options[];
extern const struct cmd_option cmd_restore_options[];
extern const struct cmd_option cmd_dump_options[];
extern const struct cmd_option cmd_mount_options[];
extern const struct cmd_option cmd_verify_options[];
extern const struct cmd_option cmd_audit_options[];
extern const struct cmd_option cmd_drill_options[];
extern const struct cmd_option cmd_forget_options[];
extern const struct cmd_option cmd_prune_options[];
extern const struct cmd_option cmd_catalog_options[];
extern const struct cmd_option cmd_export_options[];
extern const struct cmd_option cmd_import_options[];
extern const struct cmd_option cmd_bundles_options[];
extern const struct cmd_option cmd_run_options[];
extern const struct cmd_option cmd_log_options[];
extern const struct cmd_option cmd_health_options[];
extern const struct cmd_option cmd_cron_options[];
extern const struct cmd_option cmd_watch_options[];
extern const struct cmd_option cmd_key_list_options[];
extern const struct cmd_option cmd_key_add_options[];
extern const struct cmd_option cmd_key_passwd_options[];
extern const struct cmd_option cmd_key_export_options[];
extern const struct cmd_option cmd_key_import_options[];
extern const struct cmd_option cmd_key_rotate_options[];

/*
 * The help of the options of tables[0..n), one line each (an option
 * that several tables share, once), on f.
 */
void cmd_options_help(FILE *f, const struct cmd_option *const *tables,
    size_t n);
/*
 * The options of opts for a usage line, "[--json] [-n|--dry-run]", in
 * buf (len bytes), leaving out those the command's arguments (args, or
 * NULL) already require ("--policy FILE"): 0, or -1 when they do not fit.
 */
int cmd_options_usage(char *buf, size_t len, const struct cmd_option *opts,
    const char *args);
/*
 * 1 when argv[1..argc) asks for help (-h or --help before any "--",
 * not as the value of an option of opts), else 0.
 */
int cmd_options_want_help(int argc, char **argv,
    const struct cmd_option *opts);

/*
 * Run the command that argv[0] names (with argv[1], a subcommand:
 * "catalog check"), after the global options were taken out: its help
 * when it is asked for (-h, --help), else the command, with getopt
 * reset.  An unknown command is reported, with a guess at the one meant.
 * A status from coffer/status.h.  (src/cmd/commands.c)
 */
int cmd_run(int argc, char **argv, const struct global_opts *g);
/* The usage of coffer, its global options and its commands, on f. */
void cmd_overview(FILE *f);

/* Each command parses its own options (argv[0] is its name) and returns
 * a status from coffer/status.h. */
int cmd_init(int argc, char **argv, const struct global_opts *g);
int cmd_backup(int argc, char **argv, const struct global_opts *g);
int cmd_snapshots(int argc, char **argv, const struct global_opts *g);
int cmd_locks(int argc, char **argv, const struct global_opts *g);
extern const struct cmd_option cmd_locks_options[];
int cmd_ls(int argc, char **argv, const struct global_opts *g);
int cmd_restore(int argc, char **argv, const struct global_opts *g);
int cmd_dump(int argc, char **argv, const struct global_opts *g);
int cmd_mount(int argc, char **argv, const struct global_opts *g);
int cmd_diff(int argc, char **argv, const struct global_opts *g);
int cmd_consolidate(int argc, char **argv, const struct global_opts *g);
int cmd_version(int argc, char **argv, const struct global_opts *g);
int cmd_verify(int argc, char **argv, const struct global_opts *g);
int cmd_audit(int argc, char **argv, const struct global_opts *g);
int cmd_drill(int argc, char **argv, const struct global_opts *g);
int cmd_drill_history(int argc, char **argv, const struct global_opts *g);
int cmd_verify_history(int argc, char **argv, const struct global_opts *g);
int cmd_catalog_rebuild(int argc, char **argv, const struct global_opts *g);
int cmd_catalog_check(int argc, char **argv, const struct global_opts *g);
int cmd_catalog_path(int argc, char **argv, const struct global_opts *g);
int cmd_forget(int argc, char **argv, const struct global_opts *g);
int cmd_prune(int argc, char **argv, const struct global_opts *g);
int cmd_export(int argc, char **argv, const struct global_opts *g);
int cmd_import(int argc, char **argv, const struct global_opts *g);
int cmd_bundles(int argc, char **argv, const struct global_opts *g);
int cmd_run_policy(int argc, char **argv, const struct global_opts *g);
int cmd_log(int argc, char **argv, const struct global_opts *g);
int cmd_health(int argc, char **argv, const struct global_opts *g);
int cmd_cron(int argc, char **argv, const struct global_opts *g);
int cmd_watch(int argc, char **argv, const struct global_opts *g);
int cmd_key_list(int argc, char **argv, const struct global_opts *g);
int cmd_key_add(int argc, char **argv, const struct global_opts *g);
int cmd_key_passwd(int argc, char **argv, const struct global_opts *g);
int cmd_key_remove(int argc, char **argv, const struct global_opts *g);
int cmd_key_export(int argc, char **argv, const struct global_opts *g);
int cmd_key_import(int argc, char **argv, const struct global_opts *g);
int cmd_key_rotate(int argc, char **argv, const struct global_opts *g);
int cmd_key_retire(int argc, char **argv, const struct global_opts *g);

/*
 * coffer run (src/cmd/run.c, runmetrics.c): of two exit statuses, the
 * worse (0 < 1 < 6 < 2 < 4 < 7 < 3 < 5 < 128 + a signal); and the
 * Prometheus textfile of a policy's datasets, targets and this run
 * (status < 0: no run, for coffer watch), replaced atomically.  0, or -1
 * (reported).
 */
struct policy;
int cmd_run_worst(int a, int b);
int cmd_run_metrics(struct catalog *c, const struct policy *p,
    const char *path, int64_t now, int status, double seconds);

/*
 * verify's report (catalog check prints it too): as text when j is NULL,
 * else as one JSON object written to j, a document of its own or the
 * value of a member.
 */
struct verify_result;
void cmd_verify_print(const struct verify_result *res, struct jw *j);

/* "usage: coffer NAME ..." on stderr, a line for each form of the
 * command ("drill": drill and drill history); returns STATUS_USAGE. */
int cmd_usage_error(const char *name);

enum {
	OPEN_KEYS = 1,		/* unlock the keys */
	OPEN_WRITE = 2,		/* writer: locks, crash recovery */
	OPEN_ROTATE = 4,	/* a key rotation: it may mend a keyring
				 * epoch that coffer.conf does not list */
	OPEN_EXCL = 8		/* a writer of shared state in place (keys,
				 * forget, prune): the writer lock exclusive */
};

/*
 * Open the repository named by the global options, unlock it (asking for
 * a passphrase if needed) and open its catalog: engine_open
 * (engine-open.h) with the global options.  Returns STATUS_OK, or the
 * status to exit with (the error is reported): STATUS_ERROR when its
 * store could not be reached or read, STATUS_REPO for the repository's
 * own errors (not one, a wrong key, locked, ...).
 */
int cmd_open(const struct global_opts *g, int flags, struct repo **r,
    struct catalog **c);
/*
 * cmd_open, with check called once the key is unlocked and before
 * anything is written or locked (a writer's lock, the key's use, the
 * catalog): a command whose key cannot do its work is refused before it
 * counts as the key's use.  check returns STATUS_OK, or the status to
 * exit with (reported).  cmd_open_need_read is such a check: arg names
 * the work ("prune") that needs the full key.
 */
int cmd_open_checked(const struct global_opts *g, int flags,
    int (*check)(const void *arg, struct repo *r), const void *arg,
    struct repo **r, struct catalog **c);
int cmd_open_need_read(const void *arg, struct repo *r);
/* The same for what only a full key decides (forget). */
int cmd_open_need_full(const void *arg, struct repo *r);
/* How long a writer or a forget waits for the forget lock: --wait, and
 * with --no-wait still FORGET_WAIT, as a forget holds it for seconds and
 * a writer for its catalog's catch-up (--no-wait is about writers). */
double cmd_forget_wait(const struct global_opts *g);
void cmd_close(struct repo *r, struct catalog *c);
/* 1 when a cmd_open's catalog update left out what it could not read
 * (reported): cmd_run then ends a command that succeeded with
 * STATUS_INTEGRITY. */
int cmd_catalog_damaged(void);

/*
 * A drill from bundles' open_scratch (engine.h): the scratch repository
 * repo and its catalog, opened as a writer with the key of the global
 * options at arg (a const struct global_opts *).  0, or -1 (reported).
 */
int cmd_open_scratch(void *arg, const char *repo, const char *catalog,
    struct repo **r, struct catalog **c);

/*
 * Paths in a snapshot as a user gives them (restore, dump): trailing
 * slashes dropped in place; each must be relative to the snapshot's root
 * (entry_path_is_safe).  STATUS_OK, or STATUS_USAGE (reported).
 */
int cmd_snapshot_paths(char **paths, size_t n);

/*
 * The snapshot called name ("DATASET@latest", an id prefix, ...) into *s:
 * STATUS_OK, STATUS_USAGE when there is none (reported), STATUS_REPO on
 * an error (engine_snapshot_find).  catalog_snapshot_release frees *s,
 * also after a failure.
 */
int cmd_snapshot(struct catalog *c, const char *name,
    struct catalog_snapshot *s);

/*
 * The exit status of an engine's result (coffer/status.h, man/coffer.1):
 * the one place where the library's outcomes become the command line's.
 * ENGINE_INTERRUPTED is 128 + the signal, as a shell reports it.
 */
int cmd_status(enum engine_result res);
/*
 * The exit status of a repository step that failed after the open (a key
 * change, a rebuild), m marked before it: STATUS_ERROR when the store
 * failed meanwhile (a server gone, a disk that fails), else STATUS_REPO.
 */
int cmd_repo_failure(const struct engine_store_mark *m);

/*
 * A passphrase from --passphrase-file (its first line; refused unless the
 * file is closed to group and others), COFFER_PASSPHRASE (as taken by
 * cmd_secrets_init) or the terminal (no echo; asked twice when confirm).
 * *pass is locked memory, freed (and wiped) with cmd_passphrase_free.
 * STATUS_OK or a status.
 */
int cmd_passphrase(const struct global_opts *g, const char *prompt,
    int confirm, char **pass, size_t *len);
void cmd_passphrase_free(char *pass, size_t len);

/* Append arg to a growing array of option values (--exclude ...).
 * 0, or -1 on ENOMEM (reported).  Free *v when done. */
int cmd_push_arg(char ***v, size_t *n, char *arg);

/* Parse a non-negative decimal option value; -1 on error (reported). */
long long cmd_parse_num(const char *opt, const char *s);

/* --kdf-memory: 8 to 4096 MiB into bytes; 0, or -1 (reported). */
int cmd_parse_kdf_memory(const char *s, uint64_t *bytes);

/* --threads: 1 to 64, or -1 (reported). */
int cmd_parse_threads(const char *s);

/* A listing's state, for its row printer: a JSON array or a table. */
struct cmd_listing {
	int json;			/* --json: rows go to j */
	struct jw j;
	int n;				/* rows printed so far */
};

/*
 * The catalog listings (snapshots, drill history): "NAME [--json]
 * [DATASET]" (cmd_listing_options; NAME for usage errors), from the
 * catalog alone (no key).  list() prints each row of dataset (or of all,
 * when NULL) and returns < 0 on error; JSON rows become the members of
 * one array.  A status.
 */
int cmd_listing(int argc, char **argv, const struct global_opts *g,
    const char *name, int (*list)(struct catalog *c, const char *dataset,
    struct cmd_listing *ls));

/*
 * Durations: a number and a unit (ms, s, m, h, d, w), repeated ("1h30m"),
 * or a bare number of seconds; must be above 0.  Percentages: a number in
 * (0, 100], or [0, 100] when zero_ok, "%" optional.  0, or -1 (reported).
 * (src/cmd/duration.c)
 */
int cmd_parse_duration(const char *opt, const char *s, double *secs);
int cmd_parse_percent(const char *opt, const char *s, int zero_ok,
    double *pct);
/* A time in UTC (--time): 2026-11-01T02:15:00Z, as ns since the epoch. */
int cmd_parse_time(const char *opt, const char *s, int64_t *ns);
/* --since: a duration ago from now_ns, or a time in UTC (reported). */
int cmd_parse_since(const char *opt, const char *s, int64_t now_ns,
    int64_t *ns);
/* Seconds for people: "4.2 s", "12m05s", "3h20m", "2d04h"; "-" if < 0. */
void cmd_fmt_seconds(char *out, size_t len, double s);

#endif
