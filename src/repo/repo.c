/*
 * The repository directory: coffer.conf, key slots, locks, tmp/.
 * See DESIGN.md "Repository and catalog on disk".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/json.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/repo.h"

#define CONF_MAX 4096
#define SLOT_MAX 65536
#define KEYFILE_MAX 4096

struct repo {
	char *path;
	uint8_t id[CRYPTO_REPO_ID_BYTES];
	char id_hex[2 * CRYPTO_REPO_ID_BYTES + 1];
	struct chunker_params chunker;
	/* coffer.conf up to (not including) its "mac" line, and the MAC. */
	unsigned char *conf;
	size_t conf_body_len;
	uint8_t mac[CRYPTO_MAC_BYTES];
	struct crypto_keys *keys;
	int lock_fd;
};

static char *
repo_file(const char *path, const char *name)
{
	char *p = fsutil_join(path, name);

	if (p == NULL)
		log_error("out of memory");
	return (p);
}

/* The text of coffer.conf without its mac line. */
static int
conf_body(struct buf *b, const uint8_t *id, const struct chunker_params *c)
{
	char idhex[2 * CRYPTO_REPO_ID_BYTES + 1];

	hex_encode(idhex, id, CRYPTO_REPO_ID_BYTES);
	return (buf_printf(b,
	    "# coffer repository: do not edit, the mac line authenticates "
	    "this file\n"
	    "format %d\n"
	    "id %s\n"
	    "chunker fastcdc %u %u %u\n",
	    REPO_FORMAT_VERSION, idhex, c->min, c->avg, c->max));
}

static int
mkdirs(const char *path, const char *const *names)
{
	char *p;

	for (; *names; names++) {
		if ((p = repo_file(path, *names)) == NULL)
			return (-1);
		if (mkdir(p, 0700)) {
			log_errno("cannot create directory '%s'", p);
			free(p);
			return (-1);
		}
		free(p);
	}
	return (0);
}

static void
remove_tree_known(const char *path)
{
	static const char *const dirs[] = { "keys", "packs", "tmp", "locks",
		NULL };
	const char *const *d;
	struct dirent *de;
	char *p, *f;
	DIR *dir;

	for (d = dirs; *d; d++) {
		if ((p = fsutil_join(path, *d)) == NULL)
			continue;
		if ((dir = opendir(p)) != NULL) {
			while ((de = readdir(dir)) != NULL) {
				if (de->d_name[0] == '.')
					continue;
				if ((f = fsutil_join(p, de->d_name)) != NULL)
					unlink(f);
				free(f);
			}
			closedir(dir);
		}
		rmdir(p);
		free(p);
	}
	if ((p = fsutil_join(path, "coffer.conf")) != NULL)
		unlink(p);
	free(p);
}

/* Key material passes through plain buffers briefly: wipe them. */
static void
wipe_release(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_release(b);
}

int
repo_init(const char *path, const struct repo_init_opts *o)
{
	static const char *const dirs[] = { "keys", "packs", "tmp", "locks",
		NULL };
	struct chunker_params cp;
	uint8_t id[CRYPTO_REPO_ID_BYTES], mac[CRYPTO_MAC_BYTES], kid[8];
	char machex[2 * CRYPTO_MAC_BYTES + 1], kidhex[17];
	struct crypto_keys *k = NULL;
	struct buf conf = BUF_INIT, slot = BUF_INIT;
	char *p = NULL, *kf;
	int created = 0, wrote_keyfile = 0, e;

	if (o->chunker)
		cp = *o->chunker;
	else
		chunker_params_default(&cp);
	if (chunker_params_check(&cp)) {
		log_error("bad chunker parameters %u/%u/%u", cp.min, cp.avg,
		    cp.max);
		return (-1);
	}
	if ((e = fsutil_dir_is_empty(path, 1)) < 0)
		return (-1);
	if (e == 0) {
		log_error("'%s' is not empty: a repository needs a new or "
		    "empty directory", path);
		return (-1);
	}
	if (mkdir(path, 0700) == 0)
		created = 1;
	else if (errno != EEXIST) {
		log_errno("cannot create directory '%s'", path);
		return (-1);
	}
	if (crypto_init() || (k = crypto_keys_generate()) == NULL)
		goto err;
	crypto_random(id, sizeof(id));
	if (mkdirs(path, dirs))
		goto err;

	/* Key material first: a coffer.conf without a key is a lost repo. */
	if (o->key_file) {
		if (crypto_keyfile_encode(k, id, &slot))
			goto err;
		if (fsutil_write_file(o->key_file, slot.data, slot.len, 0600,
		    0))
			goto err;
		wrote_keyfile = 1;
	} else {
		if (crypto_slot_wrap(k, id, o->passphrase, o->passlen,
		    o->kdf_memory, &slot))
			goto err;
		crypto_random(kid, sizeof(kid));
		hex_encode(kidhex, kid, sizeof(kid));
		if ((kf = fsutil_join("keys", kidhex)) == NULL ||
		    (p = repo_file(path, kf)) == NULL) {
			free(kf);
			goto err;
		}
		free(kf);
		if (fsutil_write_file(p, slot.data, slot.len, 0600, 0))
			goto err;
		free(p);
		p = NULL;
	}
	if (conf_body(&conf, id, &cp))
		goto err;
	crypto_meta_mac(k, conf.data, conf.len, mac);
	hex_encode(machex, mac, sizeof(mac));
	if (buf_printf(&conf, "mac %s\n", machex))
		goto err;
	if ((p = repo_file(path, "coffer.conf")) == NULL)
		goto err;
	if (fsutil_write_file(p, conf.data, conf.len, 0644, 0))
		goto err;
	if (fsutil_fsync_dir(path))
		goto err;
	free(p);
	buf_release(&conf);
	wipe_release(&slot);
	crypto_keys_free(k);
	return (0);
err:
	if (o->key_file && wrote_keyfile)
		unlink(o->key_file);
	free(p);
	buf_release(&conf);
	wipe_release(&slot);
	crypto_keys_free(k);
	remove_tree_known(path);
	if (created)
		rmdir(path);
	return (-1);
}

/* Parse coffer.conf (untrusted until the MAC is checked by repo_unlock). */
static int
conf_parse(struct repo *r, unsigned char *text, size_t len)
{
	char *line, *next, *end = (char *)text + len;
	char idhex[64], machex[130];
	int format = -1, have_id = 0, have_chunker = 0, have_mac = 0;
	unsigned min, avg, max;

	if (memchr(text, '\0', len) != NULL)
		goto bad;
	for (line = (char *)text; line < end; line = next) {
		if ((next = memchr(line, '\n', (size_t)(end - line))) == NULL)
			goto bad;
		*next++ = '\0';
		if (have_mac)
			goto bad;	/* nothing may follow the mac */
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (sscanf(line, "format %d", &format) == 1)
			continue;
		if (sscanf(line, "id %63s", idhex) == 1) {
			if (strlen(idhex) != 2 * CRYPTO_REPO_ID_BYTES ||
			    hex_decode(r->id, CRYPTO_REPO_ID_BYTES, idhex))
				goto bad;
			have_id = 1;
			continue;
		}
		if (sscanf(line, "chunker fastcdc %u %u %u", &min, &avg,
		    &max) == 3) {
			r->chunker.min = min;
			r->chunker.avg = avg;
			r->chunker.max = max;
			have_chunker = 1;
			continue;
		}
		if (sscanf(line, "mac %129s", machex) == 1) {
			if (strlen(machex) != 2 * CRYPTO_MAC_BYTES ||
			    hex_decode(r->mac, CRYPTO_MAC_BYTES, machex))
				goto bad;
			r->conf_body_len = (size_t)(line - (char *)text);
			have_mac = 1;
			continue;
		}
		goto bad;
	}
	if (format != REPO_FORMAT_VERSION) {
		if (format > REPO_FORMAT_VERSION)
			log_error("repository '%s' has format %d; this coffer "
			    "reads format %d (upgrade coffer)", r->path,
			    format, REPO_FORMAT_VERSION);
		else
			log_error("repository '%s': bad format in coffer.conf",
			    r->path);
		return (-1);
	}
	if (!have_id || !have_chunker || !have_mac ||
	    chunker_params_check(&r->chunker))
		goto bad;
	hex_encode(r->id_hex, r->id, CRYPTO_REPO_ID_BYTES);
	return (0);
bad:
	log_error("repository '%s': coffer.conf is malformed", r->path);
	return (-1);
}

struct repo *
repo_open(const char *path)
{
	struct repo *r;
	struct stat st;
	char *conf;
	size_t len;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	r->lock_fd = -1;
	if ((r->path = strdup(path)) == NULL ||
	    (conf = repo_file(path, "coffer.conf")) == NULL) {
		log_error("out of memory");
		goto err;
	}
	if (stat(conf, &st)) {
		if (errno == ENOENT || errno == ENOTDIR)
			log_error("'%s' is not a coffer repository", path);
		else
			log_errno("cannot open repository '%s'", path);
		free(conf);
		goto err;
	}
	if (fsutil_read_file(conf, CONF_MAX, &r->conf, &len)) {
		free(conf);
		goto err;
	}
	free(conf);
	/* Absolute from here on: a restore moves the working directory
	 * into its target while packs are still being opened. */
	free(r->path);
	if ((r->path = realpath(path, NULL)) == NULL) {
		log_errno("cannot open repository '%s'", path);
		goto err;
	}
	/* Copy: parsing writes NULs into the text, the MAC needs it whole. */
	{
		unsigned char *copy = malloc(len + 1);

		if (copy == NULL) {
			log_error("out of memory");
			goto err;
		}
		memcpy(copy, r->conf, len + 1);
		if (conf_parse(r, copy, len)) {
			free(copy);
			goto err;
		}
		free(copy);
	}
	if (crypto_init())
		goto err;
	return (r);
err:
	repo_close(r);
	return (NULL);
}

static int
verify_conf(struct repo *r)
{
	if (crypto_meta_mac_verify(r->keys, r->conf, r->conf_body_len,
	    r->mac)) {
		log_error("repository '%s': coffer.conf failed authentication "
		    "(it was altered, or the key is not this repository's)",
		    r->path);
		return (-1);
	}
	return (0);
}

static int
unlock_keyfile(struct repo *r, const char *key_file)
{
	uint8_t id[CRYPTO_REPO_ID_BYTES];
	unsigned char *data;
	size_t len;

	if (fsutil_read_file(key_file, KEYFILE_MAX, &data, &len))
		return (-1);
	r->keys = crypto_keyfile_decode(data, len, id);
	explicit_bzero(data, len);
	free(data);
	if (r->keys == NULL) {
		log_error("cannot use key file '%s'", key_file);
		return (-1);
	}
	if (memcmp(id, r->id, sizeof(id)) != 0) {
		log_error("key file '%s' belongs to another repository",
		    key_file);
		crypto_keys_free(r->keys);
		r->keys = NULL;
		return (-1);
	}
	return (0);
}

static int
unlock_passphrase(struct repo *r, const char *pass, size_t passlen)
{
	struct dirent *de;
	unsigned char *slot;
	char *dir, *p;
	size_t len;
	int wrong, slots = 0;
	DIR *d;

	if ((dir = repo_file(r->path, "keys")) == NULL)
		return (-1);
	if ((d = opendir(dir)) == NULL) {
		log_errno("cannot open key directory '%s'", dir);
		free(dir);
		return (-1);
	}
	while (r->keys == NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if ((p = fsutil_join(dir, de->d_name)) == NULL)
			break;
		if (fsutil_read_file(p, SLOT_MAX, &slot, &len) == 0) {
			slots++;
			r->keys = crypto_slot_unwrap(slot, len, r->id, pass,
			    passlen, &wrong);
			if (r->keys == NULL && !wrong)
				log_warn("key slot '%s' is damaged", p);
			free(slot);
		}
		free(p);
	}
	closedir(d);
	free(dir);
	if (r->keys != NULL)
		return (0);
	if (slots == 0)
		log_error("repository '%s' has no passphrase key slot (use "
		    "--key-file)", r->path);
	else
		log_error("wrong passphrase for repository '%s'", r->path);
	return (-1);
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
	if (rc == 0 && verify_conf(r)) {
		crypto_keys_free(r->keys);
		r->keys = NULL;
		rc = -1;
	}
	return (rc);
}

void
repo_close(struct repo *r)
{
	if (r == NULL)
		return;
	if (r->lock_fd != -1)
		close(r->lock_fd);
	crypto_keys_free(r->keys);
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

const struct crypto_keys *
repo_keys(const struct repo *r)
{
	return (r->keys);
}

int
repo_lock(struct repo *r, int wait)
{
	char info[256] = "", host[HOST_NAME_MAX + 1] = "?", when[32];
	char *p;
	ssize_t n;
	int fd;

	if (r->lock_fd != -1)
		return (0);
	if ((p = repo_file(r->path, "locks/writer")) == NULL)
		return (-1);
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
		log_errno("cannot open lock '%s'", p);
		free(p);
		return (-1);
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK) {
			log_errno("cannot lock '%s'", p);
			goto err;
		}
		n = pread(fd, info, sizeof(info) - 1, 0);
		info[n > 0 ? n : 0] = '\0';
		info[strcspn(info, "\n")] = '\0';
		if (!wait) {
			log_error("repository '%s' is locked by another "
			    "writer (%s)", r->path, info[0] ? info : "unknown");
			goto err;
		}
		if (log_level >= 0 && isatty(STDERR_FILENO))
			fprintf(stderr, "waiting for the lock on '%s' (%s)\n",
			    r->path, info[0] ? info : "unknown");
		while (flock(fd, LOCK_EX)) {
			if (errno != EINTR) {
				log_errno("cannot lock '%s'", p);
				goto err;
			}
		}
	}
	/* Who holds it, for the message a blocked writer prints. */
	gethostname(host, sizeof(host) - 1);
	fmt_time(when, sizeof(when), now_realtime_ns());
	snprintf(info, sizeof(info), "host %s pid %ld since %s\n", host,
	    (long)getpid(), when);
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, info, strlen(info), 0);
	free(p);
	r->lock_fd = fd;
	return (0);
err:
	close(fd);
	free(p);
	return (-1);
}

int
repo_clean_tmp(struct repo *r)
{
	struct dirent *de;
	char *dir, *p;
	int rc = 0;
	DIR *d;

	if ((dir = repo_file(r->path, "tmp")) == NULL)
		return (-1);
	if ((d = opendir(dir)) == NULL) {
		log_errno("cannot open '%s'", dir);
		free(dir);
		return (-1);
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((p = fsutil_join(dir, de->d_name)) == NULL) {
			rc = -1;
			break;
		}
		if (unlink(p) && errno != ENOENT) {
			log_errno("cannot remove leftover '%s'", p);
			rc = -1;
		} else
			log_info("removed leftover '%s'", p);
		free(p);
	}
	closedir(d);
	free(dir);
	return (rc);
}

char *
repo_pack_path(const struct repo *r, const char *name)
{
	size_t n = strlen(r->path) + strlen(name) + 16;
	char *p;

	if ((p = malloc(n)) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	snprintf(p, n, "%s/packs/%.2s/%s", r->path, name, name);
	return (p);
}
