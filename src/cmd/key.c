/*
 * coffer key list | add | passwd | remove | export | import | rotate |
 * retire: options, the engine (src/engine/keyslots.c, keys.c), what came
 * of it printed.  See coffer-key(1) and doc/format.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "coffer/engine-keys.h"
#include "coffer/engine-open.h"
#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

const struct cmd_option cmd_key_list_options[] = {
	CMD_OPT_FLAG('j', "json", "print the slots and epochs as JSON"),
	CMD_OPT_END
};

const struct cmd_option cmd_key_add_options[] = {
	CMD_OPT_VALUE('N', "new-passphrase-file", "PATH",
	    "the new slot's passphrase, from a file's first line"),
	CMD_OPT_VALUE('m', "kdf-memory", "MIB",
	    "Argon2id memory, 8 to 4096 MiB (64)"),
	CMD_OPT_FLAG('W', "write-only", "a slot that can back up but not read"),
	CMD_OPT_END
};

const struct cmd_option cmd_key_passwd_options[] = {
	CMD_OPT_VALUE('N', "new-passphrase-file", "PATH",
	    "the new slot's passphrase, from a file's first line"),
	CMD_OPT_VALUE('m', "kdf-memory", "MIB",
	    "Argon2id memory, 8 to 4096 MiB (64)"),
	CMD_OPT_END
};

const struct cmd_option cmd_key_export_options[] = {
	CMD_OPT_FLAG('p', "paper", "the key as text to print and type back"),
	CMD_OPT_VALUE('t', "to", "FILE", "write to a new file (mode 0600)"),
	CMD_OPT_FLAG('W', "write-only", "a key file that can back up but not "
	    "read"),
	CMD_OPT_END
};

const struct cmd_option cmd_key_rotate_options[] = {
	CMD_OPT_FLAG('w', "rewrap", "no new epoch: reseal old packs' keys to "
	    "the newest (headers only)"),
	CMD_OPT_END
};

const struct cmd_option cmd_key_import_options[] = {
	CMD_OPT_VALUE('t', "to", "FILE", "write to a new file (mode 0600)"),
	CMD_OPT_VALUE('N', "new-passphrase-file", "PATH",
	    "the new slot's passphrase, from a file's first line"),
	CMD_OPT_VALUE('m', "kdf-memory", "MIB",
	    "Argon2id memory, 8 to 4096 MiB (64)"),
	CMD_OPT_END
};

/* The new passphrase: from file, else the terminal, twice. */
static int
new_passphrase(const char *file, char **pass, size_t *len)
{
	struct global_opts ng;

	memset(&ng, 0, sizeof(ng));
	ng.passphrase_file = file;
	return (cmd_passphrase(&ng, "new passphrase: ", 1, pass, len));
}

/* A new slot for r's key under a new passphrase, named on stdout. */
static int
add_slot(struct repo *r, const char *newfile, uint64_t mem, int wo)
{
	char name[REPO_SLOT_NAME_MAX], *pass = NULL;
	size_t passlen = 0;
	int st;

	if ((st = new_passphrase(newfile, &pass, &passlen)) != STATUS_OK)
		return (st);
	if ((st = cmd_status(engine_key_add(r, pass, passlen, mem, wo,
	    name))) == STATUS_OK)
		printf("added key slot %s (%s)\n", name, wo ? "write-only" :
		    "full");
	cmd_passphrase_free(pass, passlen);
	return (st);
}

/* Open, unlock and take the writer lock: slots change one at a time. */
static int
open_locked(const struct global_opts *g, struct repo **r)
{
	struct engine_store_mark m;
	int st;

	if ((st = cmd_open(g, OPEN_KEYS, r, NULL)) != STATUS_OK)
		return (st);
	engine_store_mark(&m);
	if (engine_key_lock(*r, g->wait)) {
		cmd_close(*r, NULL);
		*r = NULL;
		return (cmd_repo_failure(&m));
	}
	return (STATUS_OK);
}

static const char *
kind_name(int kind)
{
	switch (kind) {
	case CCRYPTO_SLOT_HOLDER: return ("full");
	case CCRYPTO_SLOT_WRITE_ONLY: return ("write-only");
	default: return ("unreadable");
	}
}

/* key's last use, formatted into when; 0 when never (when is "never"). */
static int64_t
last_use(const struct engine_key_uses *u, const char *key, char *when,
    size_t size)
{
	int64_t ns = engine_key_last_use(u, key);

	if (ns != 0)
		fmt_time(when, size, ns);
	else
		snprintf(when, size, "never");
	return (ns);
}

/*
 * The keys' last uses, from the catalog.  With a key given without a
 * terminal (a key file, a passphrase file or COFFER_PASSPHRASE) the
 * catalog is first brought up to date from the repository's journal;
 * without one, this host's catalog is read as it is, and a host without
 * a catalog knows of no use.  0 or -1.
 */
static int
key_uses_read(const struct global_opts *g, struct repo *r,
    struct engine_key_uses *u, int *known, char self[REPO_SLOT_NAME_MAX])
{
	struct repo *kr = NULL;
	struct catalog *c = NULL;
	const char *name;
	int rc;

	self[0] = '\0';
	if (!g->key_file && !g->passphrase_file && !g->env_pass)
		return (engine_key_uses_local(r, g->catalog, u, known));
	if (cmd_open(g, OPEN_KEYS, &kr, &c) != STATUS_OK)
		return (-1);
	/* The entry this key is: what a leaked key file's owner looks for. */
	if ((name = engine_key_self(kr)) != NULL)
		snprintf(self, REPO_SLOT_NAME_MAX, "%s", name);
	*known = 1;
	rc = engine_key_uses_read(c, u);
	cmd_close(kr, c);
	return (rc);
}

/*
 * The key epochs with the number of packs sealed to each: as JSON into
 * j, or a table.  0 or -1 (reported).
 */
static int
list_epochs(struct repo *r, struct jw *j)
{
	struct engine_key_epoch *ep;
	char when[32], retired[32];
	size_t i, n, other;

	if (engine_key_epochs(r, &ep, &n, &other))
		return (-1);
	if (j != NULL)
		jw_begin_array(jw_key(j, "epochs"));
	else
		printf("\n%-6s %-8s %-21s %s\n", "EPOCH", "PACKS",
		    "CREATED", "RETIRED");
	for (i = 0; i < n; i++) {
		if (ep[i].created_ns != 0)
			fmt_time(when, sizeof(when), ep[i].created_ns);
		if (ep[i].retired_ns != 0)
			fmt_time(retired, sizeof(retired), ep[i].retired_ns);
		if (j != NULL) {
			jw_begin_object(j);
			jw_uint(jw_key(j, "epoch"), ep[i].epoch);
			jw_bool(jw_key(j, "retired"), ep[i].retired_ns != 0);
			if (ep[i].created_ns != 0)
				jw_str(jw_key(j, "created"), when);
			else
				jw_null(jw_key(j, "created"));
			if (ep[i].retired_ns != 0)
				jw_str(jw_key(j, "retired_at"), retired);
			jw_uint(jw_key(j, "packs"), ep[i].packs);
			jw_bool(jw_key(j, "newest"), ep[i].newest);
			jw_end_object(j);
		} else {
			printf("%-6u %-8zu %-21s %s%s\n", (unsigned)ep[i].epoch,
			    ep[i].packs, ep[i].created_ns != 0 ? when : "-",
			    ep[i].retired_ns != 0 ? retired : "-",
			    ep[i].newest ? "  (new packs)" : "");
		}
	}
	if (j != NULL)
		jw_end_array(j);
	if (other > 0)
		log_warn("%zu pack%s whose header could not be read", other,
		    other == 1 ? "" : "s");
	free(ep);
	return (0);
}

/*
 * The keys the keyring lists: as JSON into j ("keyring": [{"id",
 * "holder"}]), or rows for what is not a slot (slots are listed above).
 * 0 or -1.
 */
static int
list_keyring(struct repo *r, const struct repo_slot *v, size_t n,
    const char *self, struct jw *j)
{
	struct engine_keyring_entry *e;
	size_t i, ne;

	if (engine_keyring(r, v, n, &e, &ne))
		return (-1);
	if (j != NULL)
		jw_begin_array(jw_key(j, "keyring"));
	for (i = 0; i < ne; i++) {
		if (j != NULL) {
			jw_begin_object(j);
			jw_str(jw_key(j, "id"), e[i].id);
			jw_str(jw_key(j, "holder"), e[i].holder);
			jw_bool(jw_key(j, "this_key"), strcmp(e[i].id,
			    self) == 0);
			jw_end_object(j);
		} else if (strcmp(e[i].holder, "slot") != 0)
			printf("%-17s %-11s %s%s\n", fmt_text(e[i].id), "full",
			    strcmp(e[i].holder, "key file") == 0 ? "key file "
			    "or paper key (coffer key remove revokes it)" :
			    e[i].holder,
			    strcmp(e[i].id, self) == 0 ? "  <- this key" : "");
	}
	if (j != NULL)
		jw_end_array(j);
	free(e);
	return (0);
}

int
cmd_key_list(int argc, char **argv, const struct global_opts *g)
{
	static const char *const files[][2] = {
		{ ENGINE_KEY_FILE_FULL, "full" },
		{ ENGINE_KEY_FILE_WRITE_ONLY, "write-only" },
	};
	struct engine_key_uses uses = { NULL, 0, 0 };
	struct engine_store_mark m;
	struct repo_slot *v;
	struct repo *r;
	struct jw j;
	char when[32], used[32], self[REPO_SLOT_NAME_MAX];
	size_t i, n, unreadable = 0;
	int ch, json = 0, known = 0, st = STATUS_OK;

	while ((ch = cmd_getopt(argc, argv, cmd_key_list_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("key list"));
		json = 1;
	}
	if (optind != argc)
		return (cmd_usage_error("key list"));
	/* Slot headers are not secret: no key is needed to list them. */
	if ((st = cmd_open(g, 0, &r, NULL)) != STATUS_OK)
		return (st);
	engine_store_mark(&m);
	if (engine_key_slots(r, &v, &n)) {
		cmd_close(r, NULL);
		return (cmd_repo_failure(&m));
	}
	if (key_uses_read(g, r, &uses, &known, self)) {
		free(v);
		engine_key_uses_release(&uses);
		cmd_close(r, NULL);
		return (cmd_repo_failure(&m));
	}
	if (json) {
		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_begin_array(jw_key(&j, "slots"));
	} else if (n > 0) {
		printf("%-17s %-11s %-17s %-21s %s\n", "SLOT", "CAPABILITY",
		    "ARGON2ID", "WRITTEN", "LAST USED");
	}
	for (i = 0; i < n; i++) {
		/* Not known (0) where the store does not say. */
		if (v[i].mtime_ns != 0)
			fmt_time(when, sizeof(when), v[i].mtime_ns);
		else
			snprintf(when, sizeof(when), "-");
		if (v[i].kind == 0) {
			st = STATUS_INTEGRITY;
			unreadable++;
		}
		if (json) {
			jw_begin_object(&j);
			jw_str(jw_key(&j, "id"), v[i].name);
			jw_str(jw_key(&j, "kind"), "passphrase");
			jw_str(jw_key(&j, "capability"), kind_name(v[i].kind));
			if (v[i].kind != 0) {
				jw_uint(jw_key(&j, "kdf_memory_mib"),
				    v[i].memlimit >> 20);
				jw_uint(jw_key(&j, "kdf_passes"),
				    v[i].opslimit);
			}
			if (v[i].mtime_ns != 0)
				jw_str(jw_key(&j, "created"), when);
			else
				jw_null(jw_key(&j, "created"));
			jw_bool(jw_key(&j, "this_key"), strcmp(v[i].name,
			    self) == 0);
			if (last_use(&uses, v[i].name, used, sizeof(used)))
				jw_str(jw_key(&j, "last_used"), used);
			else
				jw_null(jw_key(&j, "last_used"));
			jw_end_object(&j);
		} else {
			char cost[32] = "-";

			if (v[i].kind != 0)
				snprintf(cost, sizeof(cost), "%llu MiB, %llu",
				    (unsigned long long)(v[i].memlimit >> 20),
				    (unsigned long long)v[i].opslimit);
			(void)last_use(&uses, v[i].name, used, sizeof(used));
			printf("%-17s %-11s %-17s %-21s %s%s\n",
			    fmt_text(v[i].name),
			    kind_name(v[i].kind), cost, when, used,
			    strcmp(v[i].name, self) == 0 ? "  <- this key" :
			    "");
		}
	}
	/* Key files are not in the repository: only their uses are known. */
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (json) {
			if (i == 0) {
				jw_end_array(&j);
				jw_begin_array(jw_key(&j, "key_files"));
			}
			jw_begin_object(&j);
			jw_str(jw_key(&j, "capability"), files[i][1]);
			if (last_use(&uses, files[i][0], used, sizeof(used)))
				jw_str(jw_key(&j, "last_used"), used);
			else
				jw_null(jw_key(&j, "last_used"));
			jw_end_object(&j);
		} else if (last_use(&uses, files[i][0], used, sizeof(used)))
			printf("%-17s %-11s %-17s %-21s %s\n", "key file",
			    files[i][1], "-", "-", used);
	}
	if (json)
		jw_end_array(&j);
	if (list_keyring(r, v, n, self, json ? &j : NULL))
		st = cmd_repo_failure(&m);
	if (list_epochs(r, json ? &j : NULL))
		st = cmd_repo_failure(&m);
	if (json) {
		jw_end_object(&j);
	} else if (n == 0 && log_level >= 0) {
		fprintf(stderr, "repository '%s' has no key slot: it opens "
		    "with a key file only\n", engine_repo_path(r));
	}
	if (!json && !known)
		log_note("no catalog of this repository on this host: last "
		    "uses are read from the repository with a key (--key-file, "
		    "--passphrase-file or COFFER_PASSPHRASE)");
	/* Each was named above, as a warning (the listing went on). */
	if (unreadable > 0)
		log_error("repository '%s': %zu key slot%s cannot be read "
		    "(listed as unreadable)", engine_repo_path(r), unreadable,
		    unreadable == 1 ? "" : "s");
	engine_key_uses_release(&uses);
	free(v);
	cmd_close(r, NULL);
	return (st);
}

int
cmd_key_add(int argc, char **argv, const struct global_opts *g)
{
	const char *newfile = NULL;
	uint64_t mem = 0;
	struct repo *r;
	int ch, st, wo = 0;

	while ((ch = cmd_getopt(argc, argv, cmd_key_add_options)) != -1) {
		switch (ch) {
		case 'N':
			newfile = optarg;
			break;
		case 'm':
			if (cmd_parse_kdf_memory(optarg, &mem))
				return (STATUS_USAGE);
			break;
		case 'W':
			wo = 1;
			break;
		default:
			return (cmd_usage_error("key add"));
		}
	}
	if (optind != argc)
		return (cmd_usage_error("key add"));
	if ((st = open_locked(g, &r)) != STATUS_OK)
		return (st);
	st = add_slot(r, newfile, mem, wo);
	cmd_close(r, NULL);
	return (st);
}

int
cmd_key_passwd(int argc, char **argv, const struct global_opts *g)
{
	const char *newfile = NULL, *slot = NULL;
	char *pass = NULL;
	uint64_t mem = 0;
	size_t passlen = 0;
	struct repo *r;
	int ch, st;

	while ((ch = cmd_getopt(argc, argv, cmd_key_passwd_options)) != -1) {
		switch (ch) {
		case 'N':
			newfile = optarg;
			break;
		case 'm':
			if (cmd_parse_kdf_memory(optarg, &mem))
				return (STATUS_USAGE);
			break;
		default:
			return (cmd_usage_error("key passwd"));
		}
	}
	if (argc - optind > 1)
		return (cmd_usage_error("key passwd"));
	if (optind < argc)
		slot = argv[optind];
	if ((st = open_locked(g, &r)) != STATUS_OK)
		return (st);
	if (slot == NULL && (slot = engine_key_passwd_slot(r)) == NULL) {
		st = STATUS_USAGE;
		goto out;
	}
	if ((st = new_passphrase(newfile, &pass, &passlen)) != STATUS_OK)
		goto out;
	if ((st = cmd_status(engine_key_passwd(r, slot, pass, passlen,
	    mem))) == STATUS_OK)
		printf("changed key slot %s\n", strncmp(slot, "keys/", 5) ?
		    slot : slot + 5);
out:
	cmd_passphrase_free(pass, passlen);
	cmd_close(r, NULL);
	return (st);
}

int
cmd_key_remove(int argc, char **argv, const struct global_opts *g)
{
	struct engine_store_mark m;
	enum engine_result er;
	struct repo *r;
	int st;

	static const struct cmd_option none[] = { CMD_OPT_END };

	if (cmd_getopt(argc, argv, none) != -1 || argc - optind != 1)
		return (cmd_usage_error("key remove"));
	if ((st = open_locked(g, &r)) != STATUS_OK)
		return (st);
	engine_store_mark(&m);
	er = engine_key_remove(r, argv[optind]);
	/* A name the repository does not hold is the repository's error. */
	st = er == ENGINE_ERROR ? cmd_repo_failure(&m) : cmd_status(er);
	if (st == STATUS_OK)
		printf("removed key %s\n", strncmp(argv[optind], "keys/",
		    5) ? argv[optind] : argv[optind] + 5);
	cmd_close(r, NULL);
	return (st);
}

/* out to path (new, mode 0600), or to stdout when path is NULL. */
static int
emit(const char *path, const struct buf *out)
{
	if (path != NULL)
		return (fsutil_write_file(path, out->data, out->len, 0600, 0) ?
		    STATUS_ERROR : STATUS_OK);
	if (fwrite(out->data, 1, out->len, stdout) != out->len ||
	    fflush(stdout)) {
		log_errno("cannot write to standard output");
		return (STATUS_ERROR);
	}
	return (STATUS_OK);
}

int
cmd_key_export(int argc, char **argv, const struct global_opts *g)
{
	const char *to = NULL;
	char name[REPO_SLOT_NAME_MAX];
	struct buf out = BUF_INIT;
	struct repo *r;
	int ch, st, paper = 0, wo = 0;

	while ((ch = cmd_getopt(argc, argv, cmd_key_export_options)) != -1) {
		switch (ch) {
		case 'p':
			paper = 1;
			break;
		case 't':
			to = optarg;
			break;
		case 'W':
			wo = 1;
			break;
		default:
			return (cmd_usage_error("key export"));
		}
	}
	if (optind != argc || (!paper && to == NULL) || (paper && wo))
		return (cmd_usage_error("key export"));
	/* A full key is a new one, listed in the keyring: under the lock. */
	if ((st = wo ? cmd_open(g, OPEN_KEYS, &r, NULL) : open_locked(g, &r)) !=
	    STATUS_OK)
		return (st);
	if ((st = cmd_status(engine_key_export(r, paper, wo, &out, name))) !=
	    STATUS_OK)
		goto out;
	st = emit(to, &out);
	if (st != STATUS_OK)
		engine_key_export_undo(r, name);
	if (st == STATUS_OK && to != NULL && log_level >= 0)
		fprintf(stderr, "wrote %s%s '%s'\n", wo ? "write-only " : "",
		    paper ? "paper key" : "key file", to);
	if (st == STATUS_OK && !wo && log_level >= 0)
		fprintf(stderr, "its name in the keyring is %s: 'coffer key "
		    "remove %s' revokes it\n", name, name);
out:
	engine_key_wipe(&out);
	cmd_close(r, NULL);
	return (st);
}

int
cmd_key_import(int argc, char **argv, const struct global_opts *g)
{
	const char *to = NULL, *newfile = NULL;
	struct engine_key_import ki;
	struct engine_store_mark m;
	enum engine_result er;
	struct buf out = BUF_INIT;
	struct repo *r = NULL;
	uint64_t mem = 0;
	int ch, st;

	while ((ch = cmd_getopt(argc, argv, cmd_key_import_options)) != -1) {
		switch (ch) {
		case 't':
			to = optarg;
			break;
		case 'N':
			newfile = optarg;
			break;
		case 'm':
			if (cmd_parse_kdf_memory(optarg, &mem))
				return (STATUS_USAGE);
			break;
		default:
			return (cmd_usage_error("key import"));
		}
	}
	if (argc - optind != 1)
		return (cmd_usage_error("key import"));
	if (to == NULL && g->repo == NULL) {
		log_error("no repository given: use -r REPO, or --to FILE for "
		    "a key file");
		return (STATUS_USAGE);
	}
	/* With a repository, the whole key is checked against it. */
	if (g->repo != NULL && (st = cmd_open(g, 0, &r, NULL)) != STATUS_OK)
		return (st);
	engine_store_mark(&m);
	if ((er = engine_key_import(argv[optind], r, &ki)) != ENGINE_OK) {
		st = er == ENGINE_ERROR ? cmd_repo_failure(&m) : cmd_status(er);
		goto out;
	}
	if (to != NULL) {
		if ((st = cmd_status(engine_key_import_file(r, &ki, &out))) ==
		    STATUS_OK && (st = emit(to, &out)) == STATUS_OK &&
		    log_level >= 0)
			fprintf(stderr, "wrote %skey file '%s'\n", ki.write_only ?
			    "write-only " : "", to);
		goto out;
	}
	engine_store_mark(&m);
	if (engine_key_lock(r, g->wait)) {
		st = cmd_repo_failure(&m);
		goto out;
	}
	st = add_slot(r, newfile, mem, ki.write_only);
out:
	engine_key_import_release(&ki);
	engine_key_wipe(&out);
	cmd_close(r, NULL);
	return (st);
}

int
cmd_key_rotate(int argc, char **argv, const struct global_opts *g)
{
	struct key_rewrap_result res;
	struct catalog *c = NULL;
	struct repo *r;
	uint32_t epoch;
	enum engine_result er;
	int ch, st, rewrap = 0;

	while ((ch = cmd_getopt(argc, argv, cmd_key_rotate_options)) != -1) {
		if (ch != 'w')
			return (cmd_usage_error("key rotate"));
		rewrap = 1;
	}
	if (optind != argc)
		return (cmd_usage_error("key rotate"));
	if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE | OPEN_EXCL |
	    (rewrap ? 0 : OPEN_ROTATE), cmd_open_need_read,
	    rewrap ? "key rotate --rewrap" : "key rotate", &r, &c)) !=
	    STATUS_OK)
		return (st);
	if (!rewrap) {
		if ((st = cmd_status(engine_key_rotate(r, &epoch))) ==
		    STATUS_OK)
			printf("key epoch %u: new packs are sealed to it\n",
			    (unsigned)epoch);
		goto out;
	}
	er = engine_key_rewrap(r, c, &res);
	if (er == ENGINE_OK)
		printf("rewrapped %llu of %llu packs: all are sealed to key "
		    "epoch %u\n", (unsigned long long)res.rewrapped,
		    (unsigned long long)res.packs, (unsigned)res.epoch);
	else if (er == ENGINE_DAMAGED)
		printf("rewrapped %llu of %llu packs to key epoch %u; %llu "
		    "could not be opened (named above) and are as they were\n",
		    (unsigned long long)res.rewrapped,
		    (unsigned long long)res.packs, (unsigned)res.epoch,
		    (unsigned long long)res.skipped);
	st = cmd_status(er);
out:
	cmd_close(r, c);
	return (st);
}

int
cmd_key_retire(int argc, char **argv, const struct global_opts *g)
{
	struct catalog *c = NULL;
	struct repo *r;
	unsigned long v;
	char *end;
	int st;

	static const struct cmd_option none[] = { CMD_OPT_END };

	if (cmd_getopt(argc, argv, none) != -1 || argc - optind != 1)
		return (cmd_usage_error("key retire"));
	v = strtoul(argv[optind], &end, 10);
	if (argv[optind][0] < '0' || argv[optind][0] > '9' || *end != '\0' ||
	    v < 1 || v > CCRYPTO_EPOCH_MAX) {
		log_error("'%s' is not a key epoch (coffer key list)",
		    argv[optind]);
		return (STATUS_USAGE);
	}
	if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE | OPEN_EXCL,
	    cmd_open_need_read, "key retire", &r, &c)) != STATUS_OK)
		return (st);
	st = cmd_status(engine_key_retire(r, c, (uint32_t)v));
	if (st == STATUS_OK)
		printf("key epoch %lu retired: its secret is gone\n", v);
	cmd_close(r, c);
	return (st);
}
