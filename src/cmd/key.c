/*
 * coffer key list | add | passwd | remove | export | import: the key
 * slots of a repository and the forms its key travels in (a key file, a
 * paper key).  Every slot wraps the same key material, so none of this
 * rewrites a pack.  See coffer-key(1) and doc/format.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog.h"
#include "coffer/crypto.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/repo-keys.h"
#include "coffer/status.h"

/* A key file or paper key is a few hundred bytes; anything larger is
 * not one. */
#define KEY_TEXT_MAX 65536

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
	if (repo_slot_add(r, pass, passlen, mem, wo, name))
		st = STATUS_ERROR;
	else
		printf("added key slot %s (%s)\n", name, wo ? "write-only" :
		    "full");
	cmd_passphrase_free(pass, passlen);
	return (st);
}

/* Open, unlock and take the writer lock: slots change one at a time. */
static int
open_locked(const struct global_opts *g, struct repo **r)
{
	int st;

	if ((st = cmd_open(g, OPEN_KEYS, r, NULL)) != STATUS_OK)
		return (st);
	if (repo_lock(*r, g->wait)) {
		repo_close(*r);
		*r = NULL;
		return (STATUS_REPO);
	}
	return (STATUS_OK);
}

static const char *
kind_name(int kind)
{
	switch (kind) {
	case CCRYPTO_SLOT_FULL: return ("full*");
	case CCRYPTO_SLOT_HOLDER: return ("full");
	case CCRYPTO_SLOT_WRITE_ONLY: return ("write-only");
	default: return ("unreadable");
	}
}

/* Each key's last use to write, from the catalog's key_use rows. */
struct key_uses {
	struct key_use {
		char key[CATALOG_KEY_NAME_MAX + 1];
		int64_t ns;
	} *v;
	size_t n, cap;
};

static int
key_use_cb(void *arg, const char *key, int64_t ns, const char *host)
{
	struct key_uses *u = arg;

	(void)host;
	if (array_grow(&u->v, &u->cap, u->n, sizeof(*u->v), 8)) {
		log_errno("out of memory");
		return (-1);
	}
	snprintf(u->v[u->n].key, sizeof(u->v[u->n].key), "%s", key);
	u->v[u->n++].ns = ns;
	return (0);
}

/* key's last use, formatted into when; 0 when never (when is "never"). */
static int64_t
last_use(const struct key_uses *u, const char *key, char *when, size_t size)
{
	size_t i;

	for (i = 0; i < u->n; i++)
		if (strcmp(u->v[i].key, key) == 0) {
			fmt_time(when, size, u->v[i].ns);
			return (u->v[i].ns);
		}
	snprintf(when, size, "never");
	return (0);
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
    struct key_uses *u, int *known)
{
	struct repo *kr = NULL;
	struct catalog *c = NULL;
	struct stat sb;
	char *path;
	int rc;

	if (g->key_file || g->passphrase_file || g->env_pass) {
		if (cmd_open(g, OPEN_KEYS, &kr, &c) != STATUS_OK)
			return (-1);
	} else {
		if ((path = g->catalog ? strdup(g->catalog) :
		    catalog_default_path(repo_id_hex(r),
		    repo_path(r))) == NULL)
			return (-1);
		rc = stat(path, &sb);
		if (rc == 0)
			c = catalog_open(path);
		free(path);
		if (rc != 0)
			return (0);	/* no catalog: no use known here */
		if (c == NULL)
			return (-1);
	}
	*known = 1;
	rc = catalog_key_use_last(c, key_use_cb, u);
	cmd_close(kr, c);
	return (rc ? -1 : 0);
}

/*
 * The key epochs (coffer.conf's, readable without a key) with the number
 * of packs sealed to each, from their headers: as JSON into j, or a
 * table.  0 or -1 (reported).
 */
static int
list_epochs(struct repo *r, struct jw *j)
{
	const struct repo_epoch *ep;
	uint32_t nums[REPO_EPOCHS_MAX + 1];
	size_t counts[REPO_EPOCHS_MAX + 1], i, n, other;
	char when[32], retired[32];

	repo_epochs(r, &ep, &n);
	nums[0] = 1;
	for (i = 0; i < n; i++)
		nums[i + 1] = ep[i].epoch;
	if (engine_key_epoch_packs(r, nums, counts, n + 1, &other))
		return (-1);
	if (j != NULL)
		jw_begin_array(jw_key(j, "epochs"));
	else
		printf("\n%-6s %-8s %-21s %s\n", "EPOCH", "PACKS",
		    "CREATED", "RETIRED");
	for (i = 0; i < n + 1; i++) {
		/* Epoch 1 is as old as the repository, which records no
		 * date: coffer.conf's lines are for later epochs. */
		int64_t ret = i > 0 ? ep[i - 1].retired_ns :
		    repo_epoch1_retired(r);

		if (i > 0)
			fmt_time(when, sizeof(when), ep[i - 1].created_ns);
		if (ret != 0)
			fmt_time(retired, sizeof(retired), ret);
		if (j != NULL) {
			jw_begin_object(j);
			jw_uint(jw_key(j, "epoch"), nums[i]);
			jw_bool(jw_key(j, "retired"), ret != 0);
			if (i > 0)
				jw_str(jw_key(j, "created"), when);
			else
				jw_null(jw_key(j, "created"));
			if (ret != 0)
				jw_str(jw_key(j, "retired_at"), retired);
			jw_uint(jw_key(j, "packs"), counts[i]);
			jw_bool(jw_key(j, "newest"), i == n);
			jw_end_object(j);
		} else {
			printf("%-6u %-8zu %-21s %s%s\n", (unsigned)nums[i],
			    counts[i], i > 0 ? when : "-",
			    ret != 0 ? retired : "-",
			    i == n ? "  (new packs)" : "");
		}
	}
	if (j != NULL)
		jw_end_array(j);
	if (other > 0)
		log_warn("%zu pack%s whose header could not be read", other,
		    other == 1 ? "" : "s");
	return (0);
}

/*
 * The keys the keyring lists (coffer-key(1), REVOKING A KEY): a slot's
 * (listed above), a key file's or paper key's, and "master" while keys
 * that hold the master secret (slots marked full*, key files and paper
 * keys of version 1) still read.  As JSON into j ("keyring": [{"id",
 * "holder"}]), or rows for what is not a slot.  0 or -1.
 */
static int
list_keyring(struct repo *r, const struct repo_slot *v, size_t n,
    struct jw *j)
{
	char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1];
	const char *what;
	size_t i, k, k2, nn;
	int legacy;

	if ((names = calloc(CCRYPTO_RECIPIENTS_MAX, sizeof(*names))) == NULL) {
		log_errno("out of memory");
		return (-1);
	}
	if (repo_keyring_names(r, names, CCRYPTO_RECIPIENTS_MAX, &nn,
	    &legacy)) {
		free(names);
		return (-1);
	}
	if (legacy)
		snprintf(names[nn++], sizeof(names[0]), "%s",
		    CCRYPTO_RECIPIENT_MASTER);
	if (j != NULL)
		jw_begin_array(jw_key(j, "keyring"));
	for (i = 0; i < nn; i++) {
		for (k = 0; k < n && strcmp(v[k].name, names[i]) != 0; k++)
			;
		/* A name listed twice: a passphrase change cut short. */
		for (k2 = 0; k2 < i && strcmp(names[k2], names[i]) != 0; k2++)
			;
		if (k2 < i)
			continue;
		what = k < n ? "slot" : strcmp(names[i],
		    CCRYPTO_RECIPIENT_MASTER) == 0 ? "master secret" :
		    "key file";
		if (j != NULL) {
			jw_begin_object(j);
			jw_str(jw_key(j, "id"), names[i]);
			jw_str(jw_key(j, "holder"), what);
			jw_end_object(j);
		} else if (k == n)
			printf("%-17s %-11s %s\n", fmt_text(names[i]), "full",
			    strcmp(what, "key file") == 0 ? "key file or "
			    "paper key (coffer key remove revokes it)" :
			    "keys holding the master secret: slots marked "
			    "full*, key files and paper keys of version 1");
	}
	if (j != NULL)
		jw_end_array(j);
	free(names);
	return (0);
}

int
cmd_key_list(int argc, char **argv, const struct global_opts *g)
{
	static const char *const files[][2] = {
		{ ENGINE_KEY_FILE_FULL, "full" },
		{ ENGINE_KEY_FILE_WRITE_ONLY, "write-only" },
	};
	struct key_uses uses = { NULL, 0, 0 };
	struct repo_slot *v;
	struct repo *r;
	struct jw j;
	char when[32], used[32];
	size_t i, n, unreadable = 0;
	int ch, json = 0, known = 0, st = STATUS_OK;

	while ((ch = cmd_getopt(argc, argv, cmd_key_list_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("key list"));
		json = 1;
	}
	if (optind != argc)
		return (cmd_usage_error("key list"));
	if (g->repo == NULL) {
		log_error("no repository given: use -r REPO or COFFER_REPO");
		return (STATUS_USAGE);
	}
	/* Slot headers are not secret: no key is needed to list them. */
	if ((r = repo_open(g->repo)) == NULL)
		return (STATUS_REPO);
	if (repo_slots(r, &v, &n)) {
		repo_close(r);
		return (STATUS_REPO);
	}
	if (key_uses_read(g, r, &uses, &known)) {
		free(v);
		repo_close(r);
		return (STATUS_REPO);
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
		fmt_time(when, sizeof(when), v[i].mtime_ns);
		if (v[i].kind == 0) {
			st = STATUS_INTEGRITY;
			unreadable++;
		}
		if (json) {
			jw_begin_object(&j);
			jw_str(jw_key(&j, "id"), v[i].name);
			jw_str(jw_key(&j, "kind"), "passphrase");
			jw_str(jw_key(&j, "capability"), v[i].kind ==
			    CCRYPTO_SLOT_FULL ? "full" : kind_name(v[i].kind));
			jw_bool(jw_key(&j, "master_secret"), v[i].kind ==
			    CCRYPTO_SLOT_FULL);
			if (v[i].kind != 0) {
				jw_uint(jw_key(&j, "kdf_memory_mib"),
				    v[i].memlimit >> 20);
				jw_uint(jw_key(&j, "kdf_passes"),
				    v[i].opslimit);
			}
			jw_str(jw_key(&j, "created"), when);
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
			printf("%-17s %-11s %-17s %-21s %s\n",
			    fmt_text(v[i].name),
			    kind_name(v[i].kind), cost, when, used);
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
	if (list_keyring(r, v, n, json ? &j : NULL))
		st = STATUS_REPO;
	if (list_epochs(r, json ? &j : NULL))
		st = STATUS_REPO;
	if (json) {
		jw_end_object(&j);
	} else if (n == 0 && log_level >= 0) {
		fprintf(stderr, "repository '%s' has no key slot: it opens "
		    "with a key file only\n", repo_path(r));
	}
	if (!json && !known)
		log_note("no catalog of this repository on this host: last "
		    "uses are read from the repository with a key (--key-file, "
		    "--passphrase-file or COFFER_PASSPHRASE)");
	/* Each was named above, as a warning (the listing went on). */
	if (unreadable > 0)
		log_error("repository '%s': %zu key slot%s cannot be read "
		    "(listed as unreadable)", repo_path(r), unreadable,
		    unreadable == 1 ? "" : "s");
	free(uses.v);
	free(v);
	repo_close(r);
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
	if (!wo && ccrypto_keys_write_only(repo_keys(r))) {
		log_error("this key is write-only: it can add write-only slots "
		    "only (--write-only)");
		st = STATUS_USAGE;
		goto out;
	}
	st = add_slot(r, newfile, mem, wo);
out:
	repo_close(r);
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
	if (slot == NULL && (slot = repo_unlocked_slot(r)) == NULL) {
		log_error("unlocked with a key file: name the slot to change "
		    "(coffer key list)");
		st = STATUS_USAGE;
		goto out;
	}
	if ((st = new_passphrase(newfile, &pass, &passlen)) != STATUS_OK)
		goto out;
	if (repo_slot_passwd(r, slot, pass, passlen, mem))
		st = STATUS_ERROR;
	else
		printf("changed key slot %s\n", strncmp(slot, "keys/", 5) ?
		    slot : slot + 5);
out:
	cmd_passphrase_free(pass, passlen);
	repo_close(r);
	return (st);
}

int
cmd_key_remove(int argc, char **argv, const struct global_opts *g)
{
	struct repo *r;
	int st;

	static const struct cmd_option none[] = { CMD_OPT_END };

	if (cmd_getopt(argc, argv, none) != -1 || argc - optind != 1)
		return (cmd_usage_error("key remove"));
	if ((st = open_locked(g, &r)) != STATUS_OK)
		return (st);
	if (ccrypto_keys_write_only(repo_keys(r))) {
		log_error("this key is write-only: it cannot remove key slots");
		st = STATUS_USAGE;
	} else if (repo_slot_remove(r, argv[optind]))
		st = STATUS_REPO;
	else
		printf("removed key %s\n", strncmp(argv[optind], "keys/",
		    5) ? argv[optind] : argv[optind] + 5);
	repo_close(r);
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

/* Key material passes through plain buffers briefly: wipe them. */
static void
wipe(struct buf *b)
{
	if (b->data != NULL)
		explicit_bzero(b->data, b->cap);
	buf_release(b);
}

int
cmd_key_export(int argc, char **argv, const struct global_opts *g)
{
	const struct ccrypto_keys *k;
	struct ccrypto_keys *w = NULL;
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
	k = repo_keys(r);
	if (!wo && ccrypto_keys_write_only(k)) {
		log_error("this key is write-only: it exports as a write-only "
		    "key file only (--write-only --to FILE)");
		st = STATUS_USAGE;
		goto out;
	}
	if (wo && !ccrypto_keys_write_only(k) &&
	    (k = w = ccrypto_keys_writer(k)) == NULL) {
		st = STATUS_ERROR;
		goto out;
	}
	if (!wo) {
		if (repo_key_file_new(r, &w, name)) {
			st = STATUS_ERROR;
			goto out;
		}
		k = w;
	}
	if (paper ? ccrypto_paper_encode(k, repo_id(r), &out) :
	    ccrypto_keyfile_encode(k, repo_id(r), &out)) {
		st = STATUS_ERROR;
		goto out;
	}
	st = emit(to, &out);
	if (st != STATUS_OK && !wo)
		repo_key_file_drop(r, name);
	if (st == STATUS_OK && to != NULL && log_level >= 0)
		fprintf(stderr, "wrote %s%s '%s'\n", wo ? "write-only " : "",
		    paper ? "paper key" : "key file", to);
	if (st == STATUS_OK && !wo && log_level >= 0)
		fprintf(stderr, "its name in the keyring is %s: 'coffer key "
		    "remove %s' revokes it\n", name, name);
out:
	wipe(&out);
	ccrypto_keys_free(w);
	repo_close(r);
	return (st);
}

/*
 * A key file or paper key from path ("-": standard input) into locked
 * memory: a regular file must be private, as key files are.
 */
static int
read_key_text(const char *path, uint8_t **text, size_t *len)
{
	struct stat st;
	ssize_t got;
	uint8_t *p;
	size_t n = 0;
	int fd;

	if (strcmp(path, "-") == 0)
		fd = STDIN_FILENO;
	else if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1) {
		log_errno("cannot open '%s'", path);
		return (-1);
	}
	if (fd != STDIN_FILENO && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		log_error("'%s' is not a regular file", path);
		goto err0;
	}
	if (fd != STDIN_FILENO && (st.st_mode & 077)) {
		log_error("'%s' can be read or written by others (mode %04o): "
		    "refused; chmod 600 it", path,
		    (unsigned)(st.st_mode & 07777));
		goto err0;
	}
	if ((p = ccrypto_secret_new(KEY_TEXT_MAX + 1)) == NULL)
		goto err0;
	for (;;) {
		got = read(fd, p + n, KEY_TEXT_MAX + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			log_errno("cannot read '%s'", path);
			goto err1;
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n > KEY_TEXT_MAX) {
			log_error("'%s' is too large for a key", path);
			goto err1;
		}
	}
	if (fd != STDIN_FILENO)
		close(fd);
	*text = p;
	*len = n;
	return (0);
err1:
	ccrypto_secret_free(p);
err0:
	if (fd != STDIN_FILENO)
		close(fd);
	return (-1);
}

int
cmd_key_import(int argc, char **argv, const struct global_opts *g)
{
	uint8_t id[CCRYPTO_REPO_ID_BYTES], *text = NULL;
	const char *to = NULL, *newfile = NULL, *src;
	struct ccrypto_keys *k;
	struct buf out = BUF_INIT;
	struct repo *r = NULL;
	uint64_t mem = 0;
	char what[300];
	size_t len;
	int ch, st = STATUS_ERROR, wo;

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
	src = argv[optind];
	if (to == NULL && g->repo == NULL) {
		log_error("no repository given: use -r REPO, or --to FILE for "
		    "a key file");
		return (STATUS_USAGE);
	}
	if (read_key_text(src, &text, &len))
		return (STATUS_USAGE);
	snprintf(what, sizeof(what), "the key in '%s'", src);
	k = ccrypto_paper_is(text, len) ? ccrypto_paper_decode(text, len, id) :
	    ccrypto_keyfile_decode(text, len, id);
	ccrypto_secret_free(text);
	if (k == NULL) {
		log_error("cannot use %s", what);
		return (STATUS_USAGE);
	}
	wo = ccrypto_keys_write_only(k);
	/* With a repository, the whole key is checked: coffer.conf's MAC. */
	if (g->repo != NULL) {
		if ((r = repo_open(g->repo)) == NULL) {
			ccrypto_keys_free(k);
			return (STATUS_REPO);
		}
		if (repo_unlock_with(r, k, id, what)) {
			st = STATUS_REPO;
			goto out;
		}
	}
	if (to != NULL) {
		if (ccrypto_keyfile_encode(r != NULL ? repo_keys(r) : k, id,
		    &out))
			goto out;
		if ((st = emit(to, &out)) == STATUS_OK && log_level >= 0)
			fprintf(stderr, "wrote %skey file '%s'\n", wo ?
			    "write-only " : "", to);
		goto out;
	}
	if (repo_lock(r, g->wait)) {
		st = STATUS_REPO;
		goto out;
	}
	st = add_slot(r, newfile, mem, wo);
out:
	if (r == NULL)
		ccrypto_keys_free(k);
	wipe(&out);
	repo_close(r);
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
	if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE |
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
	if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE,
	    cmd_open_need_read, "key retire", &r, &c)) != STATUS_OK)
		return (st);
	st = cmd_status(engine_key_retire(r, c, (uint32_t)v));
	if (st == STATUS_OK)
		printf("key epoch %lu retired: its secret is gone\n", v);
	cmd_close(r, c);
	return (st);
}
