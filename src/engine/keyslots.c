/*
 * Key slots, key files and paper keys (coffer key list, add, passwd,
 * remove, export, import; include/coffer/engine-keys.h): what the key
 * allows, the listing's facts, the forms a key travels in.  Every slot
 * wraps the same key material, so none of this rewrites a pack.  See
 * coffer-key(1) and doc/format.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/engine-keys.h"
#include "coffer/engine-catalog.h"
#include "coffer/log.h"

/* A key file or paper key is a few hundred bytes; anything larger is
 * not one. */
#define KEY_TEXT_MAX 65536

int
engine_key_write_only(const struct repo *r)
{
	return (ccrypto_keys_write_only(repo_keys(r)));
}

const char *
engine_key_self(const struct repo *r)
{
	return (repo_unlocked_name(r));
}

int
engine_key_lock(struct repo *r, double wait)
{
	return (repo_lock(r, wait));
}

int
engine_key_slots(struct repo *r, struct repo_slot **v, size_t *n)
{
	return (repo_slots(r, v, n));
}

static int
use_cb(void *arg, const char *key, int64_t ns, const char *host)
{
	struct engine_key_uses *u = arg;

	(void)host;
	if (array_grow(&u->v, &u->cap, u->n, sizeof(*u->v), 8)) {
		log_errno("out of memory");
		return (-1);
	}
	snprintf(u->v[u->n].key, sizeof(u->v[u->n].key), "%s", key);
	u->v[u->n++].ns = ns;
	return (0);
}

int
engine_key_uses_read(struct catalog *c, struct engine_key_uses *u)
{
	return (catalog_key_use_last(c, use_cb, u) ? -1 : 0);
}

int
engine_key_uses_local(struct repo *r, const char *catalog,
    struct engine_key_uses *u, int *known)
{
	struct catalog *c;
	struct stat sb;
	char *path, aside[PATH_MAX];
	int rc;

	*known = 0;
	if ((path = engine_catalog_path(r, catalog)) == NULL)
		return (-1);
	/*
	 * A damaged catalog, or one of another format, is moved aside as
	 * every command does; the next run with a key rebuilds it.  Until
	 * then this host knows of no use.
	 */
	rc = stat(path, &sb);
	c = rc == 0 ? catalog_open_or_reset(path, aside, sizeof(aside)) :
	    NULL;
	free(path);
	if (rc != 0)
		return (0);		/* no catalog: no use known here */
	if (c == NULL)
		return (-1);
	*known = aside[0] == '\0';
	rc = engine_key_uses_read(c, u);
	catalog_close(c);
	return (rc);
}

int64_t
engine_key_last_use(const struct engine_key_uses *u, const char *key)
{
	size_t i;

	for (i = 0; i < u->n; i++)
		if (strcmp(u->v[i].key, key) == 0)
			return (u->v[i].ns);
	return (0);
}

void
engine_key_uses_release(struct engine_key_uses *u)
{
	free(u->v);
	memset(u, 0, sizeof(*u));
}

int
engine_keyring(struct repo *r, const struct repo_slot *v, size_t n,
    struct engine_keyring_entry **out, size_t *nout)
{
	char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1];
	struct engine_keyring_entry *e;
	size_t i, k, k2, nn;

	*out = NULL;
	*nout = 0;
	if ((names = calloc(CCRYPTO_RECIPIENTS_MAX, sizeof(*names))) ==
	    NULL || (e = calloc(CCRYPTO_RECIPIENTS_MAX, sizeof(*e))) == NULL) {
		free(names);
		log_errno("out of memory");
		return (-1);
	}
	if (repo_keyring_names(r, names, CCRYPTO_RECIPIENTS_MAX, &nn)) {
		free(names);
		free(e);
		return (-1);
	}
	for (i = 0; i < nn; i++) {
		/* A name listed twice: a passphrase change cut short. */
		for (k2 = 0; k2 < i && strcmp(names[k2], names[i]) != 0; k2++)
			;
		if (k2 < i)
			continue;
		for (k = 0; k < n && strcmp(v[k].name, names[i]) != 0; k++)
			;
		snprintf(e[*nout].id, sizeof(e[0].id), "%s", names[i]);
		e[(*nout)++].holder = k < n ? "slot" : "key file";
	}
	free(names);
	*out = e;
	return (0);
}

int
engine_key_epochs(struct repo *r, struct engine_key_epoch **v, size_t *n,
    size_t *unreadable)
{
	const struct repo_epoch *ep;
	struct engine_key_epoch *e;
	uint32_t nums[REPO_EPOCHS_MAX + 1];
	size_t counts[REPO_EPOCHS_MAX + 1], i, ne;

	repo_epochs(r, &ep, &ne);
	nums[0] = 1;
	for (i = 0; i < ne; i++)
		nums[i + 1] = ep[i].epoch;
	if (engine_key_epoch_packs(r, nums, counts, ne + 1, unreadable))
		return (-1);
	if ((e = calloc(ne + 1, sizeof(*e))) == NULL) {
		log_errno("out of memory");
		return (-1);
	}
	for (i = 0; i < ne + 1; i++) {
		e[i].epoch = nums[i];
		e[i].created_ns = i > 0 ? ep[i - 1].created_ns : 0;
		e[i].retired_ns = i > 0 ? ep[i - 1].retired_ns :
		    repo_epoch1_retired(r);
		e[i].packs = counts[i];
		e[i].newest = i == ne;
	}
	*v = e;
	*n = ne + 1;
	return (0);
}

enum engine_result
engine_key_add(struct repo *r, const char *pass, size_t passlen,
    uint64_t memlimit, int write_only, char name[REPO_SLOT_NAME_MAX])
{
	if (!write_only && engine_key_write_only(r)) {
		log_error("this key is write-only: it can add write-only slots "
		    "only (--write-only)");
		return (ENGINE_REFUSED);
	}
	return (repo_slot_add(r, pass, passlen, memlimit, write_only, name) ?
	    ENGINE_ERROR : ENGINE_OK);
}

const char *
engine_key_passwd_slot(struct repo *r)
{
	const char *slot;

	if ((slot = repo_unlocked_slot(r)) == NULL)
		log_error("unlocked with a key file: name the slot to change "
		    "(coffer key list)");
	return (slot);
}

enum engine_result
engine_key_passwd(struct repo *r, const char *slot, const char *pass,
    size_t passlen, uint64_t memlimit)
{
	return (repo_slot_passwd(r, slot, pass, passlen, memlimit) ?
	    ENGINE_ERROR : ENGINE_OK);
}

enum engine_result
engine_key_remove(struct repo *r, const char *name)
{
	if (engine_key_write_only(r)) {
		log_error("this key is write-only: it cannot remove key slots");
		return (ENGINE_REFUSED);
	}
	/* Not a slot or key file of this repository: a repository error. */
	return (repo_slot_remove(r, name) ? ENGINE_ERROR : ENGINE_OK);
}

enum engine_result
engine_key_export(struct repo *r, int paper, int write_only,
    struct buf *out, char name[REPO_SLOT_NAME_MAX])
{
	const struct ccrypto_keys *k = repo_keys(r);
	struct ccrypto_keys *w = NULL;
	enum engine_result er = ENGINE_ERROR;

	name[0] = '\0';
	if (!write_only && ccrypto_keys_write_only(k)) {
		log_error("this key is write-only: it exports as a write-only "
		    "key file only (--write-only --to FILE)");
		return (ENGINE_REFUSED);
	}
	if (write_only && !ccrypto_keys_write_only(k) &&
	    (k = w = ccrypto_keys_writer(k)) == NULL)
		return (ENGINE_ERROR);
	/* A full key is a new one, listed in the keyring. */
	if (!write_only) {
		if (repo_key_file_new(r, &w, name))
			return (ENGINE_ERROR);
		k = w;
	}
	if (paper ? ccrypto_paper_encode(k, repo_id(r), out) :
	    ccrypto_keyfile_encode(k, repo_id(r), out)) {
		if (!write_only)
			engine_key_export_undo(r, name);
	} else
		er = ENGINE_OK;
	ccrypto_keys_free(w);
	return (er);
}

void
engine_key_export_undo(struct repo *r, const char *name)
{
	if (name[0] != '\0')
		repo_key_file_drop(r, name);
}

void
engine_key_wipe(struct buf *b)
{
	if (b->data != NULL)
		explicit_bzero(b->data, b->cap);
	buf_release(b);
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

enum engine_result
engine_key_import(const char *path, struct repo *r,
    struct engine_key_import *ki)
{
	struct ccrypto_keys *k;
	char what[300];
	uint8_t *text;
	size_t len;

	memset(ki, 0, sizeof(*ki));
	if (read_key_text(path, &text, &len))
		return (ENGINE_REFUSED);
	snprintf(what, sizeof(what), "the key in '%s'", path);
	ki->k = ccrypto_paper_is(text, len) ? ccrypto_paper_decode(text, len,
	    ki->id) : ccrypto_keyfile_decode(text, len, ki->id);
	ccrypto_secret_free(text);
	if (ki->k == NULL) {
		log_error("cannot use %s", what);
		return (ENGINE_REFUSED);
	}
	ki->write_only = ccrypto_keys_write_only(ki->k);
	if (r == NULL)
		return (ENGINE_OK);
	/* The whole key is checked: coffer.conf's MAC.  r takes it. */
	k = ki->k;
	ki->k = NULL;
	return (repo_unlock_with(r, k, ki->id, what) ? ENGINE_ERROR :
	    ENGINE_OK);
}

enum engine_result
engine_key_import_file(struct repo *r, const struct engine_key_import *ki,
    struct buf *out)
{
	return (ccrypto_keyfile_encode(r != NULL ? repo_keys(r) : ki->k,
	    ki->id, out) ? ENGINE_ERROR : ENGINE_OK);
}

void
engine_key_import_release(struct engine_key_import *ki)
{
	ccrypto_keys_free(ki->k);
	ki->k = NULL;
}
