/*
 * The repository: made (init, import --init), opened and closed; what a
 * bare machine needs besides packs.  See doc/format.md ("Repository
 * layout") and doc/design.md ("Threat model").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "repo-int.h"

/* Key material passes through plain buffers briefly: wipe them. */
void
rp_wipe_release(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_release(b);
}

/* A new key's name, slot's or key file's: 16 hex digits, at random. */
void
rp_key_name_new(char name[17])
{
	uint8_t kid[8];

	ccrypto_random(kid, sizeof(kid));
	hex_encode(name, kid, sizeof(kid));
}

int
rp_get(const struct repo *r, const char *name, size_t max,
    unsigned char **data, size_t *len, int missing_ok)
{
	int rc;

	if ((rc = storage_get(r->st, name, max, data, len)) ==
	    STORAGE_MISSING && !missing_ok)
		log_error("repository '%s': '%s' is missing", r->path, name);
	return (rc);
}

int
rp_exists(const struct repo *r, const char *name)
{
	uint64_t size;
	int rc;

	if ((rc = storage_stat(r->st, name, &size)) < 0)
		return (-1);
	return (rc == 0);
}

static int store_unmake(struct storage *st, const char *path, int created);

int
rp_names_add(struct rp_names *nl, const char *name)
{
	char **nv;

	if (nl->n == nl->cap) {
		nl->cap = nl->cap ? 2 * nl->cap : 64;
		if ((nv = reallocarray(nl->v, nl->cap, sizeof(*nv))) == NULL)
			goto nomem;
		nl->v = nv;
	}
	if ((nl->v[nl->n] = strdup(name)) == NULL)
		goto nomem;
	nl->n++;
	return (0);
nomem:
	log_error("out of memory");
	return (-1);
}

int
rp_list_names(const struct repo *r, const char *dir,
    int (*fn)(void *, const char *, uint64_t), char ***names, size_t *n)
{
	struct rp_names nl = { r, NULL, 0, 0 };

	*names = NULL;
	*n = 0;
	if (storage_list(r->st, dir, fn, &nl)) {
		names_free(nl.v, nl.n);
		return (-1);
	}
	if (nl.n > 0)
		qsort(nl.v, nl.n, sizeof(*nl.v), rp_cmp_names);
	*names = nl.v;
	*n = nl.n;
	return (0);
}

/*
 * A new repository's store at path, a directory or object storage (new
 * or empty: STORAGE_CREATE); *created when a directory was not there.
 * NULL (reported).
 */
static struct storage *
store_new(const char *path, int *created)
{
	struct storage *st;
	struct stat sb;

	*created = !storage_is_remote(path) && lstat(path, &sb) != 0 &&
	    errno == ENOENT;
	if ((st = storage_open_location(path, STORAGE_CREATE)) == NULL)
		return (NULL);
	/* The layout a user sees (doc/format.md), where there are
	 * directories. */
	if (storage_mkdir(st, KEYS_DIR) || storage_mkdir(st, PACKS_DIR)) {
		(void)store_unmake(st, path, *created);
		return (NULL);
	}
	return (st);
}

/*
 * Undo a failed init (init, import --init): every object written,
 * then the directories the store made; the directory itself when
 * init made it.  Closes st.
 */
static int
store_unmake(struct storage *st, const char *path, int created)
{
	struct storage_entry *v = NULL;
	struct stat sb;
	size_t n = 0, i;
	int rc = 0;

	if (st == NULL && !storage_is_remote(path) && lstat(path, &sb) &&
	    errno == ENOENT)
		return (0);	/* nothing made is left */
	if (st == NULL && (st = storage_open_location(path, 0)) == NULL)
		return (-1);
	if (storage_list_all(st, "", &v, &n))
		rc = -1;
	for (i = 0; i < n; i++)
		if (storage_delete(st, v[i].name))
			rc = -1;
	storage_entries_free(v, n);
	storage_close(st);
	/* Object storage has no directories; a bucket made is kept. */
	if (!storage_is_remote(path) && storage_local_unmake(path, !created))
		rc = -1;
	return (rc);
}

int
repo_init(const char *path, const struct repo_init_opts *o)
{
	struct chunker_params cp;
	uint8_t id[CCRYPTO_REPO_ID_BYTES], kmac[CCRYPTO_MAC_BYTES];
	char kidhex[17], rel[32];
	struct ccrypto_keys *k = NULL, *h = NULL;
	struct buf conf = BUF_INIT, slot = BUF_INIT, ring = BUF_INIT;
	struct storage *st;
	int created = 0, wrote_keyfile = 0;

	if (o->chunker)
		cp = *o->chunker;
	else
		chunker_params_default(&cp);
	if (chunker_params_check(&cp)) {
		log_error("bad chunker parameters %u/%u/%u", cp.min, cp.avg,
		    cp.max);
		return (-1);
	}
	if ((st = store_new(path, &created)) == NULL)
		return (-1);
	if (ccrypto_init() || (k = ccrypto_keys_generate()) == NULL)
		goto err;
	ccrypto_random(id, sizeof(id));
	rp_key_name_new(kidhex);

	/*
	 * Key material first: a coffer.conf without a key is a lost repo.
	 * The master secret is kept nowhere: the first key (slot or key
	 * file) holds the material and a recipient of its own, the keyring
	 * epoch 1's secret, so that epoch can be retired and the key
	 * removed (doc/format.md, "Key epochs").
	 */
	if ((h = ccrypto_keys_holder_new(k)) == NULL ||
	    ccrypto_recipient_add(k, kidhex, ccrypto_keys_recipient_pk(h)) ||
	    ccrypto_keyring_seal(k, id, 1, &ring) ||
	    storage_put(st, REPO_KEYRING, ring.data, ring.len,
	    STORAGE_PUT_NEW))
		goto err;
	if (o->key_file) {
		if (ccrypto_keyfile_encode(h, id, &slot))
			goto err;
		if (fsutil_write_file(o->key_file, slot.data, slot.len, 0600,
		    0))
			goto err;
		wrote_keyfile = 1;
	} else {
		if (ccrypto_slot_wrap(h, id, o->passphrase,
		    o->passlen, o->kdf_memory, &slot))
			goto err;
		snprintf(rel, sizeof(rel), KEYS_DIR "/%s", kidhex);
		if (storage_put(st, rel, slot.data, slot.len, STORAGE_PUT_NEW))
			goto err;
	}
	if (ccrypto_keyring_line_mac(k, id, 1, kmac) ||
	    rp_conf_text(&conf, k, id, &cp, NULL, 0, 0, 1, kmac))
		goto err;
	if (storage_put(st, CONF_NAME, conf.data, conf.len, STORAGE_PUT_NEW))
		goto err;
	if (o->key_name != NULL)
		memcpy(o->key_name, kidhex, sizeof(kidhex));
	storage_close(st);
	buf_release(&conf);
	rp_wipe_release(&slot);
	rp_wipe_release(&ring);
	ccrypto_keys_free(h);
	ccrypto_keys_free(k);
	return (0);
err:
	if (o->key_file && wrote_keyfile)
		unlink(o->key_file);
	buf_release(&conf);
	rp_wipe_release(&slot);
	rp_wipe_release(&ring);
	ccrypto_keys_free(h);
	ccrypto_keys_free(k);
	(void)store_unmake(st, path, created);
	return (-1);
}

struct repo *
repo_open(const char *path)
{
	struct repo *r;
	unsigned char *copy;
	struct stat sb;
	uint64_t size;
	size_t len;
	int i;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	/* As before a store is opened: nothing there is no repository. */
	if (!storage_is_remote(path) && stat(path, &sb) &&
	    (errno == ENOENT || errno == ENOTDIR)) {
		log_error("'%s' is not a coffer repository", path);
		goto err;
	}
	if ((r->st = storage_open_location(path, 0)) == NULL)
		goto err;
	if ((r->path = strdup(storage_where(r->st))) == NULL) {
		log_error("out of memory");
		goto err;
	}
	if ((i = storage_stat(r->st, CONF_NAME, &size)) != 0) {
		if (i == STORAGE_MISSING)
			log_error("'%s' is not a coffer repository", path);
		goto err;
	}
	if (rp_get(r, CONF_NAME, CONF_MAX, &r->conf, &len, 0))
		goto err;
	r->conf_len = len;
	/* Copy: parsing writes NULs into the text, the MAC needs it whole. */
	if ((copy = malloc(len + 1)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	memcpy(copy, r->conf, len + 1);
	i = rp_conf_parse(r, copy, len);
	free(copy);
	if (i || ccrypto_init())
		goto err;
	return (r);
err:
	repo_close(r);
	return (NULL);
}

int
rp_cmp_names(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

void
repo_close(struct repo *r)
{
	if (r == NULL)
		return;
	storage_unlock(r->lock);
	storage_unlock(r->forget_lock);
	storage_close(r->st);
	ccrypto_keys_free(r->keys);
	free(r->conf);
	free(r->path);
	free(r);
}

const char *
repo_path(const struct repo *r)
{
	return (r->path);
}

const uint8_t *
repo_id(const struct repo *r)
{
	return (r->id);
}

const char *
repo_id_hex(const struct repo *r)
{
	return (r->id_hex);
}

const struct chunker_params *
repo_chunker_params(const struct repo *r)
{
	return (&r->chunker);
}

const struct ccrypto_keys *
repo_keys(const struct repo *r)
{
	return (r->keys);
}

void
repo_files_free(struct repo_file *files, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (files[i].data)
			explicit_bzero(files[i].data, files[i].len);
		free(files[i].data);
	}
	free(files);
}

int
repo_meta_files(struct repo *r, struct repo_file **files, size_t *n)
{
	struct repo_file *v;
	char **names;
	size_t k = 0, nn;
	int i;

	*files = NULL;
	*n = 0;
	if (rp_slot_names(r, &names, &nn))
		return (-1);
	if ((v = calloc(nn + 2, sizeof(*v))) == NULL) {
		log_errno("out of memory");
		goto err;
	}
	snprintf(v[0].name, sizeof(v[0].name), "coffer.conf");
	if (rp_get(r, CONF_NAME, CONF_MAX, &v[0].data, &v[0].len, 0))
		goto err;
	for (k = 1; k <= nn; k++) {
		if (strlen(names[k - 1]) > 64) {
			log_error("repository '%s': key slot name 'keys/%s' is "
			    "too long", r->path, names[k - 1]);
			goto err;
		}
		snprintf(v[k].name, sizeof(v[k].name), "keys/%s",
		    names[k - 1]);
		if (rp_get(r, v[k].name, SLOT_MAX, &v[k].data, &v[k].len,
		    0))
			goto err;
	}
	names_free(names, nn);
	*files = v;
	*n = nn + 1;
	/* The keyring, when keys have rotated: a bare machine needs it. */
	if ((i = rp_get(r, REPO_KEYRING, KEYRING_MAX, &v[nn + 1].data,
	    &v[nn + 1].len, 1)) != STORAGE_MISSING) {
		snprintf(v[nn + 1].name, sizeof(v[nn + 1].name), "%s",
		    REPO_KEYRING);
		if (i != 0) {
			repo_files_free(v, nn + 2);
			*files = NULL;
			*n = 0;
			return (-1);
		}
		*n = nn + 2;
	}
	return (0);
err:
	names_free(names, nn);
	if (v)
		repo_files_free(v, nn + 2);
	return (-1);
}

int
repo_init_from(const char *path, const struct repo_file *files, size_t n)
{
	struct storage *st;
	int created = 0, conf = -1, ring = -1;
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(files[i].name, CONF_NAME) == 0)
			conf = (int)i;
		else if (strcmp(files[i].name, REPO_KEYRING) == 0 && ring < 0)
			ring = (int)i;
		else if (strncmp(files[i].name, "keys/", 5) != 0 ||
		    strchr(files[i].name + 5, '/') ||
		    !storage_name_ok(files[i].name)) {
			log_error("bad repository file name '%s'",
			    files[i].name);
			return (-1);
		}
	}
	if (conf < 0 || n - 1 - (ring >= 0) > SLOT_FILES_MAX) {
		log_error("no coffer.conf, or too many key slots, to make a "
		    "repository of");
		return (-1);
	}
	if ((st = store_new(path, &created)) == NULL)
		return (-1);
	/* Key slots first, as init: a coffer.conf without a key is lost. */
	for (i = 0; i < n; i++)
		if ((int)i != conf && (int)i != ring &&
		    storage_put(st, files[i].name, files[i].data,
		    files[i].len, STORAGE_PUT_NEW))
			goto err;
	if (ring >= 0 && storage_put(st, REPO_KEYRING, files[ring].data,
	    files[ring].len, STORAGE_PUT_NEW))
		goto err;
	if (storage_put(st, CONF_NAME, files[conf].data, files[conf].len,
	    STORAGE_PUT_NEW))
		goto err;
	storage_close(st);
	return (0);
err:
	(void)store_unmake(st, path, created);
	return (-1);
}

int
repo_remove_made(const char *path)
{
	return (store_unmake(NULL, path, 1));
}
