/*
 * Key slots and key files: unlocking the repository with a passphrase or
 * a key file, and the slots in keys/ that coffer key lists and changes.
 * See doc/format.md ("Key slots", "Key files").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "repo-int.h"

/* read(2) up to size bytes into buf (no stdio copy); *len what came. */
static int
read_secret(int fd, unsigned char *buf, size_t size, size_t *len,
    const char *what)
{
	ssize_t got;

	*len = 0;
	while (*len < size) {
		got = read(fd, buf + *len, size - *len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			log_errno("cannot read '%s'", what);
			return (-1);
		}
		if (got == 0)
			break;
		*len += (size_t)got;
	}
	return (0);
}

static int
unlock_keyfile(struct repo *r, const char *key_file)
{
	uint8_t id[CCRYPTO_REPO_ID_BYTES];
	unsigned char *data;
	struct stat st;
	size_t len;
	int fd, rc;

	if ((fd = open(key_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1) {
		log_errno("cannot open key file '%s'", key_file);
		return (-1);
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		log_error("key file '%s' is not a regular file", key_file);
		close(fd);
		return (-1);
	}
	/* As ssh does with a private key: a secret others can read is not
	 * one any more, and saying so early beats a silent leak. */
	if (st.st_mode & 077) {
		log_error("key file '%s' can be read or written by others "
		    "(mode %04o): refused; chmod 600 it", key_file,
		    (unsigned)(st.st_mode & 07777));
		close(fd);
		return (-1);
	}
	/* Read into locked memory (sodium_malloc: no swap, no core). */
	if ((data = ccrypto_secret_new(KEYFILE_MAX + 1)) == NULL) {
		log_error("out of memory");
		close(fd);
		return (-1);
	}
	rc = read_secret(fd, data, KEYFILE_MAX + 1, &len, key_file);
	close(fd);
	if (rc == 0 && len > KEYFILE_MAX) {
		log_error("key file '%s' is too large", key_file);
		rc = -1;
	}
	if (rc) {
		ccrypto_secret_free(data);
		return (-1);
	}
	r->keys = ccrypto_keyfile_decode(data, len, id);
	ccrypto_secret_free(data);
	if (r->keys == NULL) {
		log_error("cannot use key file '%s'", key_file);
		return (-1);
	}
	if (memcmp(id, r->id, sizeof(id)) != 0) {
		log_error("key file '%s' belongs to another repository",
		    key_file);
		ccrypto_keys_free(r->keys);
		r->keys = NULL;
		return (-1);
	}
	return (0);
}

/*
 * The names in keys/, sorted (the order slots are tried in does not depend
 * on the file system's).  0, or -1 (reported): more than SLOT_FILES_MAX.
 */
/* One entry under keys/: a slot's name, at most SLOT_FILES_MAX. */
static int
slot_found(void *arg, const char *name, uint64_t size)
{
	struct rp_names *nl = arg;
	const char *leaf = name + sizeof(KEYS_DIR);

	/* Not a slot: deeper than keys/NAME, or keys/ itself (empty).  A
	 * slot's name that is no object (a link, a FIFO, a directory) is
	 * listed: reading it refuses it, naming it. */
	(void)size;
	if (strncmp(name, KEYS_DIR "/", sizeof(KEYS_DIR)) != 0 ||
	    strchr(leaf, '/') != NULL)
		return (0);
	if (nl->n == SLOT_FILES_MAX) {
		log_error("repository '%s': more than %d files in 'keys': "
		    "refused (a repository holds a few key slots; remove what "
		    "is not one)", nl->r->path, SLOT_FILES_MAX);
		return (-1);
	}
	return (rp_names_add(nl, leaf));
}

/*
 * The names in keys/, sorted (the order slots are tried in does not depend
 * on the store's).  0, or -1 (reported): more than SLOT_FILES_MAX.
 */
int
rp_slot_names(struct repo *r, char ***names, size_t *n)
{
	return (rp_list_names(r, KEYS_DIR, slot_found, names, n));
}

/*
 * The preferred slot when the listing did not name it (i == n): tried
 * first all the same, since a listing may miss an object, and one that
 * is not a slot (a directory in its place) is then refused, named.  Its
 * name is one component (the catalog's, never a path).  0 or -1.
 */
static int
prefer_missing(struct repo *r, char ***names, size_t *n, size_t i)
{
	char rel[NAME_MAX + 8], **v = *names, *t;

	snprintf(rel, sizeof(rel), KEYS_DIR "/%s", r->prefer);
	if (r->prefer[0] == '\0' || i < *n || *n == SLOT_FILES_MAX ||
	    strchr(r->prefer, '/') != NULL || !storage_name_ok(rel))
		return (0);
	if ((v = reallocarray(v, *n + 1, sizeof(*v))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	*names = v;
	if ((v[*n] = strdup(r->prefer)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	t = v[*n];
	memmove(v + 1, v, *n * sizeof(*v));
	v[0] = t;
	(*n)++;
	*names = v;
	return (0);
}

static int
unlock_passphrase(struct repo *r, const char *pass, size_t passlen)
{
	unsigned char *slot;
	char **names, rel[NAME_MAX + 8];
	size_t i, n, len;
	int why, slots = 0, tried = 0;

	if (rp_slot_names(r, &names, &n))
		return (-1);
	/* The preferred slot first (it is in the list: never a path). */
	for (i = 0; i < n && r->prefer[0] != '\0'; i++)
		if (strcmp(names[i], r->prefer) == 0) {
			char *t = names[i];

			memmove(names + 1, names, i * sizeof(*names));
			names[0] = t;
			break;
		}
	if (prefer_missing(r, &names, &n, i)) {
		names_free(names, n);
		return (-1);
	}
	/* A slot that cannot be read is an error only if none opens. */
	log_hold();
	for (i = 0; i < n && r->keys == NULL; i++) {
		snprintf(rel, sizeof(rel), "keys/%s", names[i]);
		if (rp_get(r, rel, SLOT_MAX, &slot, &len, 0))
			continue;	/* reported; another slot may open */
		slots++;
		/* Refused and damaged slots are reported, naming them. */
		r->keys = ccrypto_slot_unwrap_named(rel, slot, len, r->id, pass,
		    passlen, &why);
		if (r->keys != NULL || why == CCRYPTO_SLOT_WRONG)
			tried++;
		if (r->keys != NULL)
			snprintf(r->slot, sizeof(r->slot), "%s", names[i]);
		explicit_bzero(slot, len);
		free(slot);
	}
	names_free(names, n);
	log_release(r->keys != NULL);
	if (r->keys != NULL)
		return (0);
	if (slots == 0)
		log_error("repository '%s' has no passphrase key slot (use "
		    "--key-file)", r->path);
	else if (tried == 0)
		log_error("repository '%s': no key slot could be tried (see "
		    "above)", r->path);
	else
		log_error("wrong passphrase for repository '%s'", r->path);
	return (-1);
}

void
repo_slot_prefer(struct repo *r, const char *name)
{
	snprintf(r->prefer, sizeof(r->prefer), "%s", name != NULL ? name : "");
}

int
repo_unlock(struct repo *r, const char *key_file, const char *pass,
    size_t passlen)
{
	int rc;

	if (r->keys)
		return (0);
	if (key_file)
		rc = unlock_keyfile(r, key_file);
	else
		rc = unlock_passphrase(r, pass, passlen);
	if (rc == 0 && rp_verify_conf(r)) {
		ccrypto_keys_free(r->keys);
		r->keys = NULL;
		rc = -1;
	}
	return (rc);
}

const char *
repo_unlocked_slot(const struct repo *r)
{
	return (r->keys != NULL && r->slot[0] != '\0' ? r->slot : NULL);
}

const char *
repo_unlocked_name(const struct repo *r)
{
	return (r->keys != NULL ? ccrypto_recipient_self(r->keys) : NULL);
}

int
repo_unlock_with(struct repo *r, struct ccrypto_keys *k,
    const uint8_t id[CCRYPTO_REPO_ID_BYTES], const char *what)
{
	if (memcmp(id, r->id, CCRYPTO_REPO_ID_BYTES) != 0) {
		log_error("%s belongs to another repository than '%s'", what,
		    r->path);
		ccrypto_keys_free(k);
		return (-1);
	}
	ccrypto_keys_free(r->keys);
	r->keys = k;
	r->slot[0] = '\0';
	if (rp_verify_conf(r)) {
		ccrypto_keys_free(r->keys);
		r->keys = NULL;
		return (-1);
	}
	return (0);
}

/*
 * Key slots, managed (coffer key).  A slot is written whole under a
 * temporary name in keys/ (O_EXCL, never through a link), fsynced and
 * renamed into place, and keys/ fsynced: a crash leaves the old slot or
 * the new one, never half of one.  No pack is touched: every slot wraps
 * the same key material.
 */

/* A slot name as keys/ holds it: 1-64 of [0-9a-z], "keys/" allowed. */
static const char *
slot_name_ok(const char *name)
{
	size_t i, n;

	if (strncmp(name, "keys/", 5) == 0)
		name += 5;
	n = strlen(name);
	if (n == 0 || n > 64)
		return (NULL);
	for (i = 0; i < n; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'z')))
			return (NULL);
	return (name);
}

int
repo_slots(struct repo *r, struct repo_slot **slots, size_t *n)
{
	struct ccrypto_slot_info info;
	struct repo_slot *v = NULL;
	unsigned char *data;
	char **names, rel[NAME_MAX + 8];
	size_t i, nn, len;
	int rc;

	*slots = NULL;
	*n = 0;
	if (rp_slot_names(r, &names, &nn))
		return (-1);
	if (nn > 0 && (v = calloc(nn, sizeof(*v))) == NULL) {
		log_error("out of memory");
		goto err;
	}
	for (i = 0; i < nn; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%s", names[i]);
		v[i].kind = 0;
		v[i].unlocked = strcmp(names[i], r->slot) == 0 &&
		    r->keys != NULL;
		snprintf(rel, sizeof(rel), "keys/%s", names[i]);
		/* A warning: it is listed as unreadable, the rest goes on. */
		log_hold();
		rc = rp_get(r, rel, SLOT_MAX, &data, &len, 0);
		log_release(1);
		if (rc != 0)
			continue;
		if (ccrypto_slot_info(rel, data, len, &info) == 0) {
			v[i].kind = info.kind;
			v[i].opslimit = info.opslimit;
			v[i].memlimit = info.memlimit;
		}
		free(data);
	}
	names_free(names, nn);
	*slots = v;
	*n = nn;
	return (0);
err:
	names_free(names, nn);
	return (-1);
}

/*
 * A new full key over r's material with a recipient of its own, named
 * name in the keyring, which is written (under the lock) before the key
 * is handed out: a key never exists that the keyring does not list.
 * NULL on error (reported; the keyring is as it was).
 */
static int
holder_list(struct repo *r, const char *name, struct ccrypto_keys *h)
{
	if (r->lock == NULL || ccrypto_keys_write_only(r->keys)) {
		log_error("internal error: a new full key needs the lock and "
		    "a full key");
		return (-1);
	}
	if (ccrypto_recipient_add(r->keys, name, ccrypto_keys_recipient_pk(h))
	    == 0 && rp_write_keyring(r) == 0)
		return (0);
	(void)ccrypto_recipient_forget(r->keys, name,
	    ccrypto_keys_recipient_pk(h));
	return (-1);
}

static struct ccrypto_keys *
holder_listed(struct repo *r, const char *name)
{
	struct ccrypto_keys *h;

	if ((h = ccrypto_keys_holder_new(r->keys)) == NULL)
		return (NULL);
	if (holder_list(r, name, h) == 0)
		return (h);
	ccrypto_keys_free(h);
	return (NULL);
}

/* Take name out of the keyring again (a key that was not handed out). */
static void
holder_unlist(struct repo *r, const char *name)
{
	if (ccrypto_recipient_remove(r->keys, name) == 0 && rp_write_keyring(r))
		log_warn("repository '%s': the keyring still lists '%s', "
		    "which holds nothing (coffer key remove %s)", r->path, name,
		    name);
}

/*
 * Wrap a key into keys/name, replacing an old one: the write-only part of
 * r's key, or a full key of its own (listed in the keyring as name once
 * wrapped, before the slot is written).
 */
static int
slot_write(struct repo *r, const char *name, int write_only,
    const char *pass, size_t passlen, uint64_t memlimit, int replace)
{
	struct ccrypto_keys *w = NULL;
	struct buf slot = BUF_INIT;
	char rel[NAME_MAX + 8];
	int rc = -1, full, writer;

	snprintf(rel, sizeof(rel), "keys/%s", name);
	/* A full key of its own, or the write-only part of r's (a
	 * write-only key wraps r's as it is). */
	full = !write_only;
	writer = write_only && !ccrypto_keys_write_only(r->keys);
	if (full)
		w = ccrypto_keys_holder_new(r->keys);
	else if (writer)
		w = ccrypto_keys_writer(r->keys);
	if (w == NULL && (full || writer))
		return (-1);
	if (ccrypto_slot_wrap(w != NULL ? w : r->keys, r->id, pass, passlen,
	    memlimit, &slot) || (full && holder_list(r, name, w)))
		goto out;
	if (storage_put(r->st, rel, slot.data, slot.len, replace ? 0 :
	    STORAGE_PUT_NEW) == 0)
		rc = 0;
	/*
	 * A full slot's new recipient is listed beside its old one: the old
	 * goes once the new slot is in place.  On an error the new one stays
	 * listed whenever the slot may hold it (the write can fail after its
	 * rename, at the directory's fsync); a new slot that is not there
	 * takes it out again.
	 */
	if (full && rc == 0 && ccrypto_recipient_keep(r->keys, name,
	    ccrypto_keys_recipient_pk(w)) == 0 && rp_write_keyring(r))
		log_warn("repository '%s': the keyring still lists the old key "
		    "of slot '%s' too", r->path, name);
	if (full && rc != 0 && !replace && rp_exists(r, rel) == 0) {
		if (ccrypto_recipient_forget(r->keys, name,
		    ccrypto_keys_recipient_pk(w)) == 0 && rp_write_keyring(r))
			log_warn("repository '%s': the keyring lists a key of "
			    "slot '%s', which was not written (coffer key "
			    "remove %s)", r->path, name, name);
	} else if (full && rc != 0)
		log_warn("repository '%s': the keyring lists a new key for "
		    "slot '%s', which may not be in place (coffer key list)",
		    r->path, name);
out:
	rp_wipe_release(&slot);
	ccrypto_keys_free(w);
	return (rc);
}

int
repo_key_file_new(struct repo *r, struct ccrypto_keys **k,
    char name[REPO_SLOT_NAME_MAX])
{
	rp_key_name_new(name);
	return ((*k = holder_listed(r, name)) != NULL ? 0 : -1);
}

void
repo_key_file_drop(struct repo *r, const char *name)
{
	holder_unlist(r, name);
}

int
repo_slot_add(struct repo *r, const char *pass, size_t passlen,
    uint64_t memlimit, int write_only, char name[REPO_SLOT_NAME_MAX])
{
	struct repo_slot *v;
	size_t n;

	if (r->keys == NULL)
		return (-1);
	if (!write_only && ccrypto_keys_write_only(r->keys)) {
		log_error("a write-only key can only add write-only slots "
		    "(--write-only)");
		return (-1);
	}
	if (repo_slots(r, &v, &n))
		return (-1);
	free(v);
	if (n >= SLOT_FILES_MAX) {
		log_error("repository '%s' has %d key slots, the most it may "
		    "hold: remove one first", r->path, SLOT_FILES_MAX);
		return (-1);
	}
	rp_key_name_new(name);
	return (slot_write(r, name, write_only, pass, passlen, memlimit, 0));
}

/* The slot called name among v[0..n), or NULL (reported). */
static const struct repo_slot *
slot_find(struct repo *r, const struct repo_slot *v, size_t n,
    const char *name)
{
	const char *base = slot_name_ok(name);
	size_t i;

	for (i = 0; base != NULL && i < n; i++)
		if (strcmp(v[i].name, base) == 0)
			return (&v[i]);
	log_error("repository '%s' has no key slot '%s' (see 'coffer key "
	    "list')", r->path, name);
	return (NULL);
}

int
repo_slot_passwd(struct repo *r, const char *name, const char *pass,
    size_t passlen, uint64_t memlimit)
{
	const struct repo_slot *s;
	struct repo_slot *v;
	size_t n;
	int rc = -1;

	if (r->keys == NULL || repo_slots(r, &v, &n))
		return (-1);
	if ((s = slot_find(r, v, n, name)) == NULL)
		goto out;
	if (s->kind == 0) {
		log_error("key slot 'keys/%s' is not one this coffer reads: "
		    "remove it, or add a new one", s->name);
		goto out;
	}
	if (s->kind != CCRYPTO_SLOT_WRITE_ONLY &&
	    ccrypto_keys_write_only(r->keys)) {
		log_error("key slot 'keys/%s' holds the full key: a write-only "
		    "key cannot change it", s->name);
		goto out;
	}
	/* Its cost stays what it was unless more is asked for. */
	if (memlimit == 0)
		memlimit = s->memlimit;
	rc = slot_write(r, s->name, s->kind == CCRYPTO_SLOT_WRITE_ONLY, pass,
	    passlen, memlimit, 1);
out:
	free(v);
	return (rc);
}

/* Whether the keyring lists name. */
static int
listed(const struct repo *r, const char *name)
{
	const char *rn;
	size_t i;

	for (i = 0; (rn = ccrypto_recipient_name(r->keys, i)) != NULL; i++)
		if (strcmp(rn, name) == 0)
			return (1);
	return (0);
}

/* Whether name is a key file's in the keyring (listed, and no slot). */
static int
key_file_listed(const struct repo *r, const struct repo_slot *v, size_t n,
    const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return (0);
	return (listed(r, name));
}

/*
 * Whether the slot v[i] reads: a full slot the keyring lists.  A slot's
 * header alone proves nothing: whoever writes the storage can plant one.
 */
static int
slot_reads(const struct repo *r, const struct repo_slot *s)
{
	return (s->kind == CCRYPTO_SLOT_HOLDER && listed(r, s->name));
}

int
repo_slot_remove(struct repo *r, const char *name)
{
	const struct repo_slot *s = NULL;
	struct repo_slot *v;
	const char *rn;
	char rel[NAME_MAX + 8];
	size_t n, i, readers = 0;
	int rc = -1, file;

	if (r->keys == NULL || repo_slots(r, &v, &n))
		return (-1);
	if (ccrypto_keys_write_only(r->keys)) {
		log_error("a write-only key cannot remove keys");
		goto out;
	}
	file = key_file_listed(r, v, n, name);
	if (!file && (s = slot_find(r, v, n, name)) == NULL)
		goto out;
	if (!file)
		name = s->name;
	/* What still reads after: full slots, and key files listed. */
	for (i = 0; i < n; i++)
		if (&v[i] != s && slot_reads(r, &v[i]))
			readers++;
	for (i = 0; (rn = ccrypto_recipient_name(r->keys, i)) != NULL; i++)
		if (strcmp(rn, name) != 0 && key_file_listed(r, v, n, rn))
			readers++;
	if ((file || s->kind != CCRYPTO_SLOT_WRITE_ONLY) && readers == 0) {
		log_error("key '%s' is the last one that can read the "
		    "repository: refused (add another first: coffer key add)",
		    name);
		goto out;
	}
	/*
	 * Out of the keyring first, under a new keyring key: from then on a
	 * copy of the slot or key file opens nothing written after (what it
	 * could read before, it could have copied; coffer key rotate then
	 * shuts it out of new packs too).
	 */
	if (ccrypto_recipient_remove(r->keys, name) == 0 && rp_write_keyring(r))
		goto out;
	if (!file) {
		snprintf(rel, sizeof(rel), KEYS_DIR "/%s", s->name);
		if (storage_delete(r->st, rel))
			goto out;
	}
	rc = 0;
out:
	free(v);
	return (rc);
}
