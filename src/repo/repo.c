/*
 * The repository directory: coffer.conf, key slots, locks, tmp/.
 * See doc/format.md ("Repository layout") and doc/design.md ("Threat model").
 */
#include <ctype.h>
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
#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/progress.h"
#include "coffer/repo.h"
#include "coffer/repo-keys.h"
#include "coffer/tuning.h"

/* coffer.conf: a few lines, and one of about 130 bytes per key epoch. */
#define CONF_MAX 16384
#define KEYRING_MAX 65536
#define INTENT_MAX (1u << 20)
#define SLOT_MAX 65536
#define KEYFILE_MAX 4096
/*
 * Files in keys/ tried with a passphrase.  Each costs an Argon2id run:
 * whoever can write the repository must not be able to make opening it
 * arbitrarily slow.
 */
#define SLOT_FILES_MAX 32

/* The directories of a repository, opened once, never through a link. */
enum repo_dir { DIR_KEYS, DIR_PACKS, DIR_TMP, DIR_LOCKS, NDIRS };
static const char *const dir_names[NDIRS] = { "keys", "packs", "tmp",
	"locks" };

struct repo {
	char *path;			/* for messages */
	int dfd;			/* the repository's directory */
	int dirs[NDIRS];
	uint8_t id[CCRYPTO_REPO_ID_BYTES];
	char id_hex[2 * CCRYPTO_REPO_ID_BYTES + 1];
	struct chunker_params chunker;
	/* coffer.conf up to (not including) its "mac" line, and the MAC. */
	unsigned char *conf;
	size_t conf_len, conf_body_len;
	uint8_t mac[CCRYPTO_MAC_BYTES];
	struct ccrypto_keys *keys;
	/* The key epochs from 2 on that coffer.conf lists (format 2). */
	struct repo_epoch epochs[REPO_EPOCHS_MAX];
	size_t nepochs;
	int64_t retired1_ns;		/* epoch 1 retired (format 3); 0 */
	uint64_t keyring_gen;		/* its keyring's (format 3); 0 */
	uint8_t keyring_mac[CCRYPTO_MAC_BYTES];	/* of that line */
	int keyring_bad;		/* there, and did not open */
	/* Format 4: the authority's signature of the bytes before its line. */
	uint8_t auth_sig[CCRYPTO_SIG_BYTES];
	size_t auth_body_len;
	int conf_signed;
	char slot[NAME_MAX + 1];	/* the slot that unlocked; "" else */
	char prefer[NAME_MAX + 1];	/* the slot to try first; "" */
	int allow_unlisted;		/* a rotation may mend the keyring's
					 * epoch that coffer.conf lacks */
	int lock_fd;
};

static int write_keyring(struct repo *r);

/* What is at name in dirfd, for a message ("a symbolic link"). */
static const char *
kind_at(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return ("missing");
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: return ("a regular file");
	case S_IFDIR: return ("a directory");
	case S_IFLNK: return ("a symbolic link");
	case S_IFIFO: return ("a FIFO");
	case S_IFSOCK: return ("a socket");
	default: return ("a device");
	}
}

/*
 * Open name, one component of the repository in dirfd, as a regular file
 * (want S_IFREG, flags O_RDONLY or O_RDWR | O_CREAT) or a directory (want
 * S_IFDIR).  Never through a symlink, never blocking on a FIFO, and
 * anything that is not what is expected is refused, naming it by rel (its
 * path in the repository).  An fd, or -1 (reported unless quiet; errno
 * ENOENT when it does not exist).
 */
static int
open_in(const struct repo *r, int dirfd, const char *name, const char *rel,
    int flags, mode_t want, int quiet)
{
	struct stat st;
	int fd, e;

	flags |= O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	if (want == S_IFDIR)
		flags |= O_DIRECTORY;
	if ((fd = openat(dirfd, name, flags, 0600)) == -1) {
		e = errno;
		if (!quiet && (e == ELOOP || e == ENOTDIR || e == EISDIR))
			log_error("repository '%s': '%s' is %s where %s "
			    "belongs: refused", r->path, rel,
			    kind_at(dirfd, name), want == S_IFDIR ?
			    "a directory" : "a regular file");
		else if (!quiet) {
			errno = e;
			log_errno("repository '%s': cannot open '%s'", r->path,
			    rel);
		}
		errno = e;
		return (-1);
	}
	if (fstat(fd, &st)) {
		e = errno;
		if (!quiet)
			log_errno("repository '%s': cannot stat '%s'", r->path,
			    rel);
		close(fd);
		errno = e;
		return (-1);
	}
	if ((st.st_mode & S_IFMT) != want) {
		if (!quiet)
			log_error("repository '%s': '%s' is %s where %s "
			    "belongs: refused", r->path, rel,
			    kind_at(dirfd, name), want == S_IFDIR ?
			    "a directory" : "a regular file");
		close(fd);
		errno = EINVAL;
		return (-1);
	}
	/* Reads of a regular file block as they should. */
	if (want == S_IFREG && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK &
	    (O_APPEND | O_NONBLOCK)) == -1) {
		e = errno;
		close(fd);
		errno = e;
		return (-1);
	}
	return (fd);
}

/* Read a small regular file of the repository, at most max bytes. */
static int
read_in(const struct repo *r, int dirfd, const char *name, const char *rel,
    size_t max, unsigned char **data, size_t *len)
{
	int fd, rc;

	if ((fd = open_in(r, dirfd, name, rel, O_RDONLY, S_IFREG, 0)) == -1)
		return (-1);
	rc = fsutil_read_fd(fd, max, data, len, rel);
	close(fd);
	return (rc);
}

/*
 * The text of coffer.conf without its mac line: format 1, or format 2
 * with the epoch lines of the nepochs epochs in ep (doc/format.md).
 */
static int
conf_body(struct buf *b, const uint8_t *id, const struct chunker_params *c,
    const struct repo_epoch *ep, size_t nepochs, int64_t retired1,
    uint64_t keyring_gen, const uint8_t *keyring_mac)
{
	char idhex[2 * CCRYPTO_REPO_ID_BYTES + 1], pkhex[65];
	char khex[2 * CCRYPTO_MAC_BYTES + 1];
	size_t i;

	hex_encode(idhex, id, CCRYPTO_REPO_ID_BYTES);
	if (buf_printf(b,
	    "# coffer repository: do not edit, the mac line authenticates "
	    "this file\n"
	    "format %d\n"
	    "id %s\n"
	    "chunker fastcdc %u %u %u\n",
	    keyring_gen > 0 ? REPO_FORMAT_SIGNED : nepochs > 0 ?
	    REPO_FORMAT_EPOCHS : REPO_FORMAT_VERSION, idhex,
	    c->min, c->avg, c->max))
		return (-1);
	if (keyring_gen > 0) {
		hex_encode(khex, keyring_mac, CCRYPTO_MAC_BYTES);
		if (buf_printf(b, "keyring %llu %s\n",
		    (unsigned long long)keyring_gen, khex))
			return (-1);
	}
	if (retired1 != 0 && buf_printf(b, "epoch 1 retired %lld\n",
	    (long long)retired1))
		return (-1);
	for (i = 0; i < nepochs; i++) {
		hex_encode(pkhex, ep[i].pk, sizeof(ep[i].pk));
		if (buf_printf(b, "epoch %u %s created %lld",
		    (unsigned)ep[i].epoch, pkhex,
		    (long long)ep[i].created_ns) ||
		    (ep[i].retired_ns != 0 && buf_printf(b, " retired %lld",
		    (long long)ep[i].retired_ns)) || buf_printf(b, "\n"))
			return (-1);
	}
	return (0);
}

/*
 * The whole of coffer.conf: conf_body, then (with a keyring: format 4)
 * the authority's signature of it, which only a full key can make, then
 * the mac line.  0 or -1 (reported).
 */
static int
conf_text(struct buf *b, const struct ccrypto_keys *k, const uint8_t *id,
    const struct chunker_params *c, const struct repo_epoch *ep,
    size_t nepochs, int64_t retired1, uint64_t keyring_gen,
    const uint8_t *keyring_mac)
{
	uint8_t sig[CCRYPTO_SIG_BYTES], mac[CCRYPTO_MAC_BYTES];
	char sighex[2 * CCRYPTO_SIG_BYTES + 1];
	char machex[2 * CCRYPTO_MAC_BYTES + 1];

	if (conf_body(b, id, c, ep, nepochs, retired1, keyring_gen,
	    keyring_mac))
		return (-1);
	if (keyring_gen > 0) {
		if (ccrypto_conf_sign(k, id, b->data, b->len, sig))
			return (-1);
		hex_encode(sighex, sig, sizeof(sig));
		if (buf_printf(b, "auth %s\n", sighex))
			return (-1);
	}
	ccrypto_meta_mac(k, b->data, b->len, mac);
	hex_encode(machex, mac, sizeof(mac));
	return (buf_printf(b, "mac %s\n", machex));
}

/*
 * One "epoch N <pk hex> created NS [retired NS]" line, exactly (no other
 * spacing, nothing after).  0 or -1.
 */
static int
epoch_line(const char *line, struct repo_epoch *e)
{
	unsigned n;
	long long created, retired = 0;
	char pkhex[65];
	const char *rest;
	int end = -1, end2 = -1;

	memset(e, 0, sizeof(*e));
	if (sscanf(line, "epoch %u %64s created %lld%n", &n, pkhex, &created,
	    &end) != 3 || end < 0)
		return (-1);
	rest = line + end;
	if (*rest != '\0' && (sscanf(rest, " retired %lld%n", &retired,
	    &end2) != 1 || end2 < 0 || rest[end2] != '\0' || retired <= 0))
		return (-1);
	if (n < 2 || n > CCRYPTO_EPOCH_MAX || created <= 0 ||
	    strlen(pkhex) != 64 || hex_decode(e->pk, sizeof(e->pk), pkhex) ||
	    !ccrypto_pk_ok(e->pk))
		return (-1);
	e->epoch = n;
	e->created_ns = created;
	e->retired_ns = retired;
	return (0);
}

/* Undo a failed init: what init creates, and nothing else (failures
 * reported; path, the repository, names it). */
static void
remove_made(int dfd, const char *path)
{
	const char *const *d;

	for (d = dir_names; d < dir_names + NDIRS; d++)
		(void)fsutil_remove_tree(dfd, *d, path);
	unlinkat(dfd, REPO_KEYRING, 0);
	unlinkat(dfd, "coffer.conf", 0);
}

static void unmake_layout(int dfd, const char *path, int created);

/*
 * The layout of a new repository at path, which must be new or empty:
 * the directory (made if missing: *created) and its subdirectories.  Its
 * descriptor, or -1 (reported; nothing made is left).
 */
static int
make_layout(const char *path, int *created)
{
	const char *const *d;
	int dfd, e;

	*created = 0;
	if ((e = fsutil_dir_is_empty(path, 1)) < 0)
		return (-1);
	if (e == 0) {
		log_error("'%s' is not empty: a repository needs a new or "
		    "empty directory", path);
		return (-1);
	}
	if (mkdir(path, 0700) == 0)
		*created = 1;
	else if (errno != EEXIST) {
		log_errno("cannot create directory '%s'", path);
		return (-1);
	}
	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open directory '%s'", path);
		goto err;
	}
	for (d = dir_names; d < dir_names + NDIRS; d++)
		if (mkdirat(dfd, *d, 0700)) {
			log_errno("cannot create directory '%s/%s'", path, *d);
			goto err;
		}
	return (dfd);
err:
	unmake_layout(dfd, path, *created);
	return (-1);
}

/* Undo make_layout and what was written into it; closes dfd. */
static void
unmake_layout(int dfd, const char *path, int created)
{
	if (dfd != -1) {
		remove_made(dfd, path);
		close(dfd);
	}
	if (created)
		rmdir(path);
}

/* Key material passes through plain buffers briefly: wipe them. */
static void
wipe_release(struct buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	buf_release(b);
}

/* A new key's name, slot's or key file's: 16 hex digits, at random. */
static void
key_name_new(char name[17])
{
	uint8_t kid[8];

	ccrypto_random(kid, sizeof(kid));
	hex_encode(name, kid, sizeof(kid));
}

int
repo_init(const char *path, const struct repo_init_opts *o)
{
	struct chunker_params cp;
	uint8_t id[CCRYPTO_REPO_ID_BYTES], kmac[CCRYPTO_MAC_BYTES];
	char kidhex[17], rel[32];
	struct ccrypto_keys *k = NULL, *h = NULL;
	struct buf conf = BUF_INIT, slot = BUF_INIT, ring = BUF_INIT;
	int created = 0, wrote_keyfile = 0, dfd = -1, kfd = -1;

	if (o->chunker)
		cp = *o->chunker;
	else
		chunker_params_default(&cp);
	if (chunker_params_check(&cp)) {
		log_error("bad chunker parameters %u/%u/%u", cp.min, cp.avg,
		    cp.max);
		return (-1);
	}
	if ((dfd = make_layout(path, &created)) == -1)
		return (-1);
	if (ccrypto_init() || (k = ccrypto_keys_generate()) == NULL)
		goto err;
	ccrypto_random(id, sizeof(id));
	key_name_new(kidhex);

	/*
	 * Key material first: a coffer.conf without a key is a lost repo.
	 * The master secret is kept nowhere: the first key (slot or key
	 * file) holds the material and a recipient of its own, the keyring
	 * epoch 1's secret, so that epoch can be retired and the key
	 * removed (doc/format.md, "Key epochs").
	 */
	if (!tuning_get()->test_legacy_keys) {
		if ((h = ccrypto_keys_holder_new(k)) == NULL ||
		    ccrypto_recipient_add(k, kidhex,
		    ccrypto_keys_recipient_pk(h)) ||
		    ccrypto_recipient_remove(k, CCRYPTO_RECIPIENT_MASTER) < 0 ||
		    ccrypto_keyring_seal(k, id, 1, &ring) ||
		    fsutil_write_file_at(dfd, REPO_KEYRING, REPO_KEYRING,
		    ring.data, ring.len, 0600, 0))
			goto err;
	}
	if (o->key_file) {
		if (ccrypto_keyfile_encode(h != NULL ? h : k, id, &slot))
			goto err;
		if (fsutil_write_file(o->key_file, slot.data, slot.len, 0600,
		    0))
			goto err;
		wrote_keyfile = 1;
	} else {
		if (ccrypto_slot_wrap(h != NULL ? h : k, id, o->passphrase,
		    o->passlen, o->kdf_memory, &slot))
			goto err;
		snprintf(rel, sizeof(rel), "keys/%s", kidhex);
		if ((kfd = openat(dfd, "keys", O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1) {
			log_errno("cannot open '%s/keys'", path);
			goto err;
		}
		if (fsutil_write_file_at(kfd, kidhex, rel, slot.data, slot.len,
		    0600, 0))
			goto err;
	}
	if (h != NULL && ccrypto_keyring_line_mac(k, id, 1, kmac))
		goto err;
	if (conf_text(&conf, k, id, &cp, NULL, 0, 0, h != NULL ? 1 : 0, kmac))
		goto err;
	if (fsutil_write_file_at(dfd, "coffer.conf", "coffer.conf", conf.data,
	    conf.len, 0644, 0))
		goto err;
	if (kfd != -1)
		close(kfd);
	close(dfd);
	buf_release(&conf);
	wipe_release(&slot);
	wipe_release(&ring);
	ccrypto_keys_free(h);
	ccrypto_keys_free(k);
	return (0);
err:
	if (o->key_file && wrote_keyfile)
		unlink(o->key_file);
	buf_release(&conf);
	wipe_release(&slot);
	wipe_release(&ring);
	ccrypto_keys_free(h);
	ccrypto_keys_free(k);
	if (kfd != -1)
		close(kfd);
	unmake_layout(dfd, path, created);
	return (-1);
}

/*
 * The rest of a "keyring GEN MAC" line: GEN a decimal from 1 to 2^53 with
 * no leading zero, MAC 64 hex digits.  0 or -1.
 */
#define KEYRING_GEN_MAX (1ULL << 53)
static int
keyring_line(const char *p, uint64_t *gen, uint8_t mac[CCRYPTO_MAC_BYTES])
{
	unsigned long long g;
	char *end;

	if (*p < '1' || *p > '9')
		return (-1);
	errno = 0;
	g = strtoull(p, &end, 10);
	if (errno || g == 0 || g > KEYRING_GEN_MAX || *end != ' ' ||
	    strlen(end + 1) != 2 * CCRYPTO_MAC_BYTES ||
	    hex_decode(mac, CCRYPTO_MAC_BYTES, end + 1))
		return (-1);
	*gen = g;
	return (0);
}

/* Parse coffer.conf (untrusted until the MAC is checked by repo_unlock). */
static int
conf_parse(struct repo *r, unsigned char *text, size_t len)
{
	char *line, *next, *end = (char *)text + len;
	char idhex[64], machex[130], sighex[2 * CCRYPTO_SIG_BYTES + 2];
	int format = -1, have_id = 0, have_chunker = 0, have_mac = 0;
	int have_auth = 0;
	unsigned min, avg, max;

	r->nepochs = 0;
	r->retired1_ns = 0;
	r->keyring_gen = 0;
	r->conf_signed = 0;
	if (memchr(text, '\0', len) != NULL)
		goto bad;
	for (line = (char *)text; line < end; line = next) {
		if ((next = memchr(line, '\n', (size_t)(end - line))) == NULL)
			goto bad;
		*next++ = '\0';
		if (have_mac)
			goto bad;	/* nothing may follow the mac */
		/* The signature covers every byte before it: only the mac
		 * may follow. */
		if (have_auth && strncmp(line, "mac ", 4) != 0)
			goto bad;
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (sscanf(line, "format %d", &format) == 1) {
			/* It comes first: a later format's other lines
			 * are never met, and never called malformed. */
			if (format > REPO_FORMAT_SIGNED)
				break;
			continue;
		}
		if (strncmp(line, "auth ", 5) == 0) {
			if (sscanf(line, "auth %129s", sighex) != 1 ||
			    strlen(sighex) != 2 * CCRYPTO_SIG_BYTES ||
			    hex_decode(r->auth_sig, CCRYPTO_SIG_BYTES, sighex))
				goto bad;
			r->auth_body_len = (size_t)(line - (char *)text);
			have_auth = 1;
			continue;
		}
		if (strncmp(line, "keyring ", 8) == 0) {
			if (r->keyring_gen != 0 || r->nepochs > 0 ||
			    keyring_line(line + 8, &r->keyring_gen,
			    r->keyring_mac))
				goto bad;
			continue;
		}
		if (strncmp(line, "epoch 1 retired ", 16) == 0) {
			long long ns;
			int end1 = -1;

			if (r->retired1_ns != 0 || r->nepochs > 0 ||
			    sscanf(line, "epoch 1 retired %lld%n", &ns,
			    &end1) != 1 || end1 < 0 || line[end1] != '\0' ||
			    ns <= 0)
				goto bad;
			r->retired1_ns = ns;
			continue;
		}
		if (strncmp(line, "epoch ", 6) == 0) {
			/* Increasing: the last is the one to seal to. */
			if (r->nepochs == REPO_EPOCHS_MAX ||
			    epoch_line(line, &r->epochs[r->nepochs]) ||
			    (r->nepochs > 0 && r->epochs[r->nepochs].epoch <=
			    r->epochs[r->nepochs - 1].epoch))
				goto bad;
			r->nepochs++;
			continue;
		}
		if (sscanf(line, "id %63s", idhex) == 1) {
			if (strlen(idhex) != 2 * CCRYPTO_REPO_ID_BYTES ||
			    hex_decode(r->id, CCRYPTO_REPO_ID_BYTES, idhex))
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
			if (strlen(machex) != 2 * CCRYPTO_MAC_BYTES ||
			    hex_decode(r->mac, CCRYPTO_MAC_BYTES, machex))
				goto bad;
			r->conf_body_len = (size_t)(line - (char *)text);
			have_mac = 1;
			continue;
		}
		goto bad;
	}
	if (format < REPO_FORMAT_VERSION || format > REPO_FORMAT_SIGNED) {
		if (format > REPO_FORMAT_SIGNED)
			log_error("repository '%s' has format %d; this coffer "
			    "reads formats %d to %d (upgrade coffer)", r->path,
			    format, REPO_FORMAT_VERSION, REPO_FORMAT_SIGNED);
		else
			log_error("repository '%s': bad format in coffer.conf",
			    r->path);
		return (-1);
	}
	/* Formats 3 and 4 name their keyring's generation, and only they
	 * do (and may say epoch 1 is retired, once a later one is listed);
	 * format 4 is signed, and only it is; format 2 has epoch lines,
	 * format 1 none. */
	if ((format >= REPO_FORMAT_KEYRING) != (r->keyring_gen != 0) ||
	    (format == REPO_FORMAT_SIGNED) != have_auth ||
	    (format == REPO_FORMAT_EPOCHS && r->nepochs == 0) ||
	    (format == REPO_FORMAT_VERSION && r->nepochs > 0) ||
	    (r->retired1_ns != 0 && r->nepochs == 0))
		goto bad;
	if (!have_id || !have_chunker || !have_mac ||
	    chunker_params_check(&r->chunker))
		goto bad;
	hex_encode(r->id_hex, r->id, CCRYPTO_REPO_ID_BYTES);
	r->conf_signed = have_auth;
	return (0);
bad:
	log_error("repository '%s': coffer.conf is malformed", r->path);
	return (-1);
}

struct repo *
repo_open(const char *path)
{
	struct repo *r;
	unsigned char *copy;
	size_t len;
	int i;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	r->lock_fd = -1;
	r->dfd = -1;
	for (i = 0; i < NDIRS; i++)
		r->dirs[i] = -1;
	/* Absolute, for messages: the working directory may change. */
	if ((r->path = realpath(path, NULL)) == NULL &&
	    (r->path = strdup(path)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	/* The repository's own path may be a link (a mount point's); nothing
	 * below it is followed. */
	if ((r->dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			log_error("'%s' is not a coffer repository", path);
		else
			log_errno("cannot open repository '%s'", path);
		goto err;
	}
	if (fstatat(r->dfd, "coffer.conf", &(struct stat){ 0 },
	    AT_SYMLINK_NOFOLLOW) && errno == ENOENT) {
		log_error("'%s' is not a coffer repository", path);
		goto err;
	}
	if (read_in(r, r->dfd, "coffer.conf", "coffer.conf", CONF_MAX,
	    &r->conf, &len))
		goto err;
	r->conf_len = len;
	/* Copy: parsing writes NULs into the text, the MAC needs it whole. */
	if ((copy = malloc(len + 1)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	memcpy(copy, r->conf, len + 1);
	i = conf_parse(r, copy, len);
	free(copy);
	if (i)
		goto err;
	for (i = 0; i < NDIRS; i++)
		if ((r->dirs[i] = open_in(r, r->dfd, dir_names[i],
		    dir_names[i], O_RDONLY, S_IFDIR, 0)) == -1)
			goto err;
	if (ccrypto_init())
		goto err;
	return (r);
err:
	repo_close(r);
	return (NULL);
}

/*
 * The key epochs into r->keys: the public keys coffer.conf lists (now
 * authenticated) and, for a full key, the secrets in the keyring.  A
 * keyring that does not open is reported and left out: packs of the first
 * epoch still open, and those of the others name their epoch.
 */
/* r's key as coffer.conf alone makes it: the epochs' public keys. */
static int
conf_epochs(struct repo *r)
{
	size_t i;

	ccrypto_keys_ring_reset(r->keys);
	for (i = 0; i < r->nepochs; i++)
		if (ccrypto_keys_set_epoch(r->keys, r->epochs[i].epoch,
		    r->epochs[i].pk))
			return (-1);
	return (0);
}

static int
load_epochs(struct repo *r)
{
	unsigned char *kr = NULL;
	uint64_t gen;
	uint32_t listed;
	size_t len;
	int rc, holder;

	/* From nothing: a keyring read before (another run's since) is
	 * not this one. */
	if (conf_epochs(r))
		return (-1);
	r->keyring_bad = 0;
	if (ccrypto_keys_write_only(r->keys))
		return (0);
	holder = ccrypto_keys_kind(r->keys) == CCRYPTO_KEY_HOLDER;
	/* The keyring line says which keyring is current: a full key's. */
	if (r->keyring_gen > 0) {
		if (ccrypto_keyring_line_verify(r->keys, r->id, r->keyring_gen,
		    r->keyring_mac)) {
			log_error("repository '%s': coffer.conf's keyring line "
			    "failed authentication (written by a key that "
			    "cannot read, or by someone without a key)",
			    r->path);
			r->keyring_bad = 1;
			goto bad;
		}
	}
	if (fstatat(r->dfd, REPO_KEYRING, &(struct stat){ 0 },
	    AT_SYMLINK_NOFOLLOW) && errno == ENOENT) {
		/* coffer.conf says there is one (format 3), or the key
		 * reads through it: missing is not "none yet". */
		if (holder || r->keyring_gen > 0 || r->nepochs > 0) {
			r->keyring_bad = 1;
			log_warn("repository '%s': its keyring is missing", r->path);
			goto bad;
		}
		return (0);
	}
	if (read_in(r, r->dfd, REPO_KEYRING, REPO_KEYRING, KEYRING_MAX, &kr,
	    &len) == 0) {
		rc = ccrypto_keyring_open(r->keys, r->id, kr, len, 0);
		explicit_bzero(kr, len);
		free(kr);
		/* Removed (coffer key remove, or the master secret's after
		 * key retire 1): the key is refused, not half used. */
		if (rc == CCRYPTO_NOT_LISTED) {
			log_error("repository '%s': its keyring does not list "
			    "this key (removed by coffer key remove%s, or the "
			    "keyring was altered): refused", r->path,
			    ccrypto_keys_kind(r->keys) == CCRYPTO_KEY_MASTER ?
			    ", or by key retire 1 for keys holding the master "
			    "secret" : "");
			return (-1);
		}
		r->keyring_bad = rc != 0;
	} else
		r->keyring_bad = 1;
	/*
	 * Not older than coffer.conf says: a keyring put back from an
	 * earlier copy (with a key since removed in it) is not used, nor
	 * written over.  Newer is a write cut short before coffer.conf.
	 */
	gen = ccrypto_keys_ring_gen(r->keys);
	if (!r->keyring_bad && gen < r->keyring_gen) {
		log_error("repository '%s': its keyring is older than "
		    "coffer.conf says (generation %llu, not %llu): put back "
		    "from an earlier copy? not used", r->path,
		    (unsigned long long)gen,
		    (unsigned long long)r->keyring_gen);
		if (conf_epochs(r))
			return (-1);
		r->keyring_bad = 1;
	}
	if (r->keyring_bad)
		goto bad;
	/* Never seal to an epoch whose secret this key cannot see. */
	if ((listed = ccrypto_keys_seal_held(r->keys)) > 0)
		log_warn("repository '%s': coffer.conf lists key epoch %u, "
		    "whose secret the keyring does not hold (written by a "
		    "write-only key, or someone without a key?): new packs "
		    "are sealed to epoch %u", r->path, (unsigned)listed,
		    (unsigned)ccrypto_keys_seal_epoch(r->keys));
	return (0);
bad:
	log_warn("repository '%s': %s", r->path, holder ?
	    "no pack will open with this key" :
	    "packs sealed to key epochs after 1 will not open");
	return (0);
}

/*
 * coffer.conf's MAC (any key of the repository), then its signature: what
 * it says of the key epochs and the keyring is taken only from a full
 * key's hand.  A write-only key can make the MAC, so without the
 * signature it could list an epoch of its own and read what is sealed to
 * it; it can never make the signature.
 */
static int
verify_conf(struct repo *r)
{
	int rc;

	if (ccrypto_meta_mac_verify(r->keys, r->conf, r->conf_body_len,
	    r->mac)) {
		log_error("repository '%s': coffer.conf failed authentication "
		    "(it was altered, or the key is not this repository's)",
		    r->path);
		return (-1);
	}
	if (r->conf_signed) {
		rc = ccrypto_conf_verify(r->keys, r->id, r->conf,
		    r->auth_body_len, r->auth_sig);
		if (rc == CCRYPTO_AUTH_UNKNOWN) {
			log_error("repository '%s': this write-only key "
			    "cannot check coffer.conf's signature (it was "
			    "exported before coffer.conf was signed): export "
			    "a new one with a full key (coffer key export "
			    "--write-only)", r->path);
			return (-1);
		}
		if (rc) {
			log_error("repository '%s': coffer.conf's signature "
			    "does not check: it was not written by a full key "
			    "(altered by a write-only key, or by someone "
			    "without a key): refused", r->path);
			return (-1);
		}
	} else if (ccrypto_keys_write_only(r->keys)) {
		log_error("repository '%s': coffer.conf is not signed (made "
		    "by an older coffer), so this write-only key cannot tell "
		    "whom to seal to: refused until a full key writes "
		    "(any backup with a full key signs it)", r->path);
		return (-1);
	}
	return (load_epochs(r));
}

/*
 * What a writer checks under the lock, after reading coffer.conf anew: a
 * full key writes only with its keyring open (it decides whom to seal
 * to and what the next keyring holds), seals only to an epoch whose
 * secret the keyring holds, and signs an unsigned coffer.conf (one from
 * an older coffer) before anything else is written.  0 or -1 (reported).
 */
static int
writer_ready(struct repo *r)
{
	uint32_t newest;

	if (r->keys == NULL || ccrypto_keys_write_only(r->keys))
		return (0);
	if (r->keyring_bad) {
		log_error("repository '%s': its keyring did not open (see "
		    "above): nothing is written with this key until it "
		    "does (restore the keyring from a copy, or import from "
		    "a bundle)", r->path);
		return (-1);
	}
	/* load_epochs sealed to the newest held; the newest listed is
	 * the one to seal to. */
	newest = r->nepochs > 0 ? r->epochs[r->nepochs - 1].epoch : 1;
	if (ccrypto_keys_seal_epoch(r->keys) != newest ||
	    !ccrypto_keys_has_epoch(r->keys, newest)) {
		log_error("repository '%s': coffer.conf lists key epoch %u, "
		    "whose secret the keyring does not hold: nothing is "
		    "written to it (coffer.conf altered, or the keyring put back "
		    "from an older copy?)", r->path, (unsigned)newest);
		return (-1);
	}
	/*
	 * A keyring with an epoch past coffer.conf's newest: coffer.conf
	 * put back from before a rotation (which would seal to an epoch the
	 * rotation meant to leave), or a rotation cut short between its two
	 * writes.  Only a rotation goes on from there (past that epoch).
	 */
	if (ccrypto_keys_max_epoch(r->keys) > newest && !r->allow_unlisted) {
		log_error("repository '%s': the keyring holds key epoch %u, "
		    "which coffer.conf does not list: coffer.conf was put "
		    "back from an older copy, or a key rotation was cut "
		    "short; nothing is written until the newer coffer.conf "
		    "is put back or a full key rotates (coffer key rotate)",
		    r->path, (unsigned)ccrypto_keys_max_epoch(r->keys));
		return (-1);
	}
	if (!r->conf_signed) {
		if (write_keyring(r) || load_epochs(r))
			return (-1);
		log_info("repository '%s': coffer.conf signed by this full "
		    "key (keyring generation %llu)", r->path,
		    (unsigned long long)r->keyring_gen);
	}
	return (0);
}

/*
 * Read coffer.conf again (under the writer lock: a rotation may have
 * changed it since repo_open) and, with a key, check it and load the
 * epochs and the keyring anew, whether or not coffer.conf changed (a key
 * change rewrites the keyring).  0 or -1 (reported).
 */
static int
reload_conf(struct repo *r)
{
	unsigned char *text = NULL, *copy;
	size_t len;
	int rc;

	if (read_in(r, r->dfd, "coffer.conf", "coffer.conf", CONF_MAX, &text,
	    &len))
		return (-1);
	if (r->conf != NULL && r->conf_len == len &&
	    memcmp(text, r->conf, len) == 0) {
		free(text);
		return (r->keys != NULL ? load_epochs(r) : 0);
	}
	if ((copy = malloc(len + 1)) == NULL) {
		free(text);
		log_error("out of memory");
		return (-1);
	}
	memcpy(copy, text, len + 1);
	free(r->conf);
	r->conf = text;
	r->conf_len = len;
	rc = conf_parse(r, copy, len);
	free(copy);
	if (rc == 0 && r->keys != NULL)
		rc = verify_conf(r);
	return (rc);
}

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

static int
cmp_names(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

/*
 * The names in keys/, sorted (the order slots are tried in does not depend
 * on the file system's).  0, or -1 (reported): more than SLOT_FILES_MAX.
 */
static int
slot_names(struct repo *r, char ***names, size_t *n)
{
	struct dirent *de;
	char **v = NULL;
	size_t k = 0;
	DIR *d;
	int fd;

	*names = NULL;
	*n = 0;
	if ((fd = dup(r->dirs[DIR_KEYS])) == -1 || (d = fdopendir(fd)) ==
	    NULL) {
		log_errno("repository '%s': cannot read 'keys'", r->path);
		if (fd != -1)
			close(fd);
		return (-1);
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (k == SLOT_FILES_MAX) {
			log_error("repository '%s': more than %d files in "
			    "'keys': refused (a repository holds a few key "
			    "slots; remove what is not one)", r->path,
			    SLOT_FILES_MAX);
			goto err;
		}
		if (v == NULL && (v = calloc(SLOT_FILES_MAX,
		    sizeof(*v))) == NULL)
			goto nomem;
		if ((v[k] = strdup(de->d_name)) == NULL)
			goto nomem;
		k++;
	}
	closedir(d);
	if (k > 0)
		qsort(v, k, sizeof(*v), cmp_names);
	*names = v;
	*n = k;
	return (0);
nomem:
	log_error("out of memory");
err:
	closedir(d);
	while (k > 0)
		free(v[--k]);
	free(v);
	return (-1);
}

static int
unlock_passphrase(struct repo *r, const char *pass, size_t passlen)
{
	unsigned char *slot;
	char **names, rel[NAME_MAX + 8];
	size_t i, n, len;
	int why, slots = 0, tried = 0;

	if (slot_names(r, &names, &n))
		return (-1);
	/* The preferred slot first (it is in the list: never a path). */
	for (i = 1; i < n && r->prefer[0] != '\0'; i++)
		if (strcmp(names[i], r->prefer) == 0) {
			char *t = names[i];

			memmove(names + 1, names, i * sizeof(*names));
			names[0] = t;
			break;
		}
	/* A slot that cannot be read is an error only if none opens. */
	log_hold();
	for (i = 0; i < n && r->keys == NULL; i++) {
		snprintf(rel, sizeof(rel), "keys/%s", names[i]);
		if (read_in(r, r->dirs[DIR_KEYS], names[i], rel, SLOT_MAX,
		    &slot, &len))
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
repo_allow_unlisted(struct repo *r)
{
	r->allow_unlisted = 1;
}

void
repo_slot_prefer(struct repo *r, const char *name)
{
	snprintf(r->prefer, sizeof(r->prefer), "%s", name != NULL ? name : "");
}

uint64_t
repo_generation(const struct repo *r)
{
	return (r->keyring_gen);
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
		ccrypto_keys_free(r->keys);
		r->keys = NULL;
		rc = -1;
	}
	return (rc);
}

void
repo_close(struct repo *r)
{
	int i;

	if (r == NULL)
		return;
	if (r->lock_fd != -1)
		close(r->lock_fd);
	for (i = 0; i < NDIRS; i++)
		if (r->dirs[i] != -1)
			close(r->dirs[i]);
	if (r->dfd != -1)
		close(r->dfd);
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

const char *
repo_unlocked_slot(const struct repo *r)
{
	return (r->keys != NULL && r->slot[0] != '\0' ? r->slot : NULL);
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
	if (verify_conf(r)) {
		ccrypto_keys_free(r->keys);
		r->keys = NULL;
		return (-1);
	}
	return (0);
}

enum { LOCK_WAIT, LOCK_FAIL, LOCK_QUIET };
static int lock_writer(struct repo *r, int how, double timeout);

/* Text read from the repository goes to a terminal: no control bytes. */
static void
sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

int
repo_lock(struct repo *r, double wait)
{
	return (lock_writer(r, wait != 0 ? LOCK_WAIT : LOCK_FAIL, wait) == 1 ?
	    0 : -1);
}

int
repo_lock_try(struct repo *r)
{
	return (lock_writer(r, LOCK_QUIET, 0));
}

/* LOCK_WAIT (timeout seconds, < 0 for ever), LOCK_FAIL (reported),
 * LOCK_QUIET (0 when busy). */
static int
lock_writer(struct repo *r, int how, double timeout)
{
	char info[256] = "", host[HOST_NAME_MAX + 1] = "?", when[32];
	struct stat st;
	ssize_t n;
	int fd;

	if (r->lock_fd != -1)
		return (1);
	if ((fd = open_in(r, r->dirs[DIR_LOCKS], "writer", "locks/writer",
	    O_RDWR | O_CREAT, S_IFREG, 0)) == -1)
		return (-1);
	/* The lock is written to: a second name for another file (a hard
	 * link planted in the repository) must not be. */
	if (fstat(fd, &st) || st.st_nlink != 1) {
		log_error("repository '%s': 'locks/writer' has other names "
		    "(a hard link): refused", r->path);
		goto err;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK) {
			log_errno("repository '%s': cannot lock 'locks/writer'",
			    r->path);
			goto err;
		}
		n = pread(fd, info, sizeof(info) - 1, 0);
		info[n > 0 ? n : 0] = '\0';
		info[strcspn(info, "\n")] = '\0';
		sanitize(info);
		if (how == LOCK_QUIET) {
			close(fd);
			return (0);
		}
		if (how == LOCK_FAIL) {
			log_error("repository '%s' is locked by another "
			    "writer (%s)", r->path, info[0] ? info : "unknown");
			goto err;
		}
		log_note("waiting for the lock on '%s' (%s)", r->path,
		    info[0] ? info : "unknown");
		switch (fsutil_flock_wait(fd, timeout)) {
		case 0:
			break;
		case 1:
			log_error("repository '%s' is still locked by another "
			    "writer after %.0f s (%s)", r->path, timeout,
			    info[0] ? info : "unknown");
			goto err;
		default:
			log_errno("repository '%s': cannot lock "
			    "'locks/writer'", r->path);
			goto err;
		}
	}
	/* Who holds it, for the message a blocked writer prints. */
	gethostname(host, sizeof(host) - 1);
	fmt_time(when, sizeof(when), now_realtime_ns());
	snprintf(info, sizeof(info), "host %s pid %ld since %s\n", host,
	    (long)getpid(), when);
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, info, strlen(info), 0);
	r->lock_fd = fd;
	/*
	 * Writers seal to the newest epoch, as it is now, and whoever
	 * changes the keyring starts from it as it is now: another writer
	 * may have changed either since repo_open.
	 */
	if (reload_conf(r) || writer_ready(r)) {
		r->lock_fd = -1;
		goto err;
	}
	return (1);
err:
	close(fd);
	return (-1);
}

int
repo_clean_tmp(struct repo *r)
{
	struct dirent *de;
	struct stat st;
	int rc = 0, fd;
	DIR *d;

	if ((fd = dup(r->dirs[DIR_TMP])) == -1 || (d = fdopendir(fd)) ==
	    NULL) {
		log_errno("repository '%s': cannot read 'tmp'", r->path);
		if (fd != -1)
			close(fd);
		return (-1);
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* unlinkat removes a link itself, never what it names; a
		 * directory is not coffer's and is left alone. */
		if (fstatat(r->dirs[DIR_TMP], de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
			log_warn("repository '%s': 'tmp/%s' is a directory, "
			    "not a leftover of coffer's: left alone", r->path,
			    de->d_name);
			continue;
		}
		if (unlinkat(r->dirs[DIR_TMP], de->d_name, 0) &&
		    errno != ENOENT) {
			log_errno("repository '%s': cannot remove leftover "
			    "'tmp/%s'", r->path, de->d_name);
			rc = -1;
		} else
			log_info("removed leftover 'tmp/%s'", de->d_name);
	}
	closedir(d);
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

/* A pack's name is 32 lowercase hex digits: never a path. */
static int
pack_name_ok(const char *name)
{
	size_t i;

	for (i = 0; i < PACK_NAME_LEN; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'f')))
			return (0);
	return (name[i] == '\0');
}

/*
 * packs/ab/NAME opened with flags (O_RDONLY or O_RDWR), through no link;
 * its path for messages into rel.  -1 with errno (reported unless quiet).
 */
static int
pack_open_flags(const struct repo *r, const char *name, int flags, int quiet,
    char rel[PACK_NAME_LEN + 16])
{
	char fan[3];
	int dfd, fd, e;

	if (!pack_name_ok(name)) {
		if (!quiet)
			log_error("bad pack name '%s'", name);
		errno = EINVAL;
		return (-1);
	}
	memcpy(fan, name, 2);
	fan[2] = '\0';
	snprintf(rel, PACK_NAME_LEN + 16, "packs/%s", fan);
	if ((dfd = open_in(r, r->dirs[DIR_PACKS], fan, rel, O_RDONLY,
	    S_IFDIR, quiet)) == -1)
		return (-1);
	snprintf(rel, PACK_NAME_LEN + 16, "packs/%s/%s", fan, name);
	fd = open_in(r, dfd, name, rel, flags, S_IFREG, quiet);
	e = errno;
	close(dfd);
	errno = e;
	return (fd);
}

int
repo_pack_open(const struct repo *r, const char *name, int quiet)
{
	char rel[PACK_NAME_LEN + 16];

	return (pack_open_flags(r, name, O_RDONLY, quiet, rel));
}

int
repo_tmp_create(const struct repo *r, const char *name)
{
	int fd;

	/* O_EXCL: whatever already has the name, a link included, stays. */
	if ((fd = openat(r->dirs[DIR_TMP], name, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		log_errno("repository '%s': cannot create 'tmp/%s'", r->path,
		    name);
	return (fd);
}

void
repo_tmp_remove(const struct repo *r, const char *name)
{
	unlinkat(r->dirs[DIR_TMP], name, 0);
}

/*
 * Durability order (doc/design.md): the caller fsynced the pack in tmp/; it
 * is renamed into packs/ab/ (made, and packs/ fsynced, when new) and the
 * directory fsynced.  Only then may the catalog reference it.
 */
int
repo_pack_publish(const struct repo *r, const char *name)
{
	char fan[3], rel[16];
	int dfd, rc = -1;

	if (!pack_name_ok(name)) {
		log_error("bad pack name '%s'", name);
		return (-1);
	}
	memcpy(fan, name, 2);
	fan[2] = '\0';
	snprintf(rel, sizeof(rel), "packs/%s", fan);
	if (mkdirat(r->dirs[DIR_PACKS], fan, 0700) == 0) {
		if (fsync(r->dirs[DIR_PACKS])) {
			log_errno("repository '%s': fsync of 'packs' failed",
			    r->path);
			return (-1);
		}
	} else if (errno != EEXIST) {
		log_errno("repository '%s': cannot create '%s'", r->path, rel);
		return (-1);
	}
	if ((dfd = open_in(r, r->dirs[DIR_PACKS], fan, rel, O_RDONLY, S_IFDIR,
	    0)) == -1)
		return (-1);
	if (renameat(r->dirs[DIR_TMP], name, dfd, name)) {
		log_errno("repository '%s': cannot move 'tmp/%s' to '%s/%s'",
		    r->path, name, rel, name);
		goto out;
	}
	if (fsync(dfd)) {
		log_errno("repository '%s': fsync of '%s' failed", r->path,
		    rel);
		goto out;
	}
	rc = 0;
out:
	close(dfd);
	return (rc);
}

/* Append the packs of fan-out directory fan (open as dfd) to *v. */
static int
list_fan(const struct repo *r, int dfd, const char *fan, char ***v,
    size_t *n, size_t *cap)
{
	struct dirent *de;
	char **nv;
	DIR *d;

	if ((d = fdopendir(dfd)) == NULL) {
		log_errno("repository '%s': cannot read 'packs/%s'", r->path,
		    fan);
		close(dfd);
		return (-1);
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (!pack_name_ok(de->d_name) || memcmp(de->d_name, fan, 2)) {
			log_warn("repository '%s': 'packs/%s/%s' is not a pack "
			    "name: left out", r->path, fan, de->d_name);
			continue;
		}
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 256;
			if ((nv = reallocarray(*v, *cap, sizeof(**v))) == NULL)
				goto nomem;
			*v = nv;
		}
		if (((*v)[*n] = strdup(de->d_name)) == NULL)
			goto nomem;
		(*n)++;
	}
	closedir(d);
	return (0);
nomem:
	log_error("out of memory");
	closedir(d);
	return (-1);
}

int
repo_list_packs(const struct repo *r, char ***names, size_t *n)
{
	struct dirent *de;
	char **v = NULL, rel[16];
	size_t k = 0, cap = 0;
	int fd, dfd;
	DIR *d;

	*names = NULL;
	*n = 0;
	if ((fd = dup(r->dirs[DIR_PACKS])) == -1 || (d = fdopendir(fd)) ==
	    NULL) {
		log_errno("repository '%s': cannot read 'packs'", r->path);
		if (fd != -1)
			close(fd);
		return (-1);
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (strlen(de->d_name) != 2 || !isxdigit((unsigned char)
		    de->d_name[0]) || !isxdigit((unsigned char)de->d_name[1]) ||
		    isupper((unsigned char)de->d_name[0]) ||
		    isupper((unsigned char)de->d_name[1])) {
			log_warn("repository '%s': 'packs/%s' is not a fan-out "
			    "directory: left out", r->path, de->d_name);
			continue;
		}
		snprintf(rel, sizeof(rel), "packs/%.2s", de->d_name);
		if ((dfd = open_in(r, r->dirs[DIR_PACKS], de->d_name, rel,
		    O_RDONLY, S_IFDIR, 0)) == -1 ||
		    list_fan(r, dfd, de->d_name, &v, &k, &cap))
			goto err;
	}
	closedir(d);
	if (k > 0)
		qsort(v, k, sizeof(*v), cmp_names);
	*names = v;
	*n = k;
	return (0);
err:
	closedir(d);
	while (k > 0)
		free(v[--k]);
	free(v);
	return (-1);
}

int
repo_pack_remove(const struct repo *r, const char *name)
{
	char fan[3], rel[16];
	int dfd, rc = -1;

	if (!pack_name_ok(name)) {
		log_error("bad pack name '%s'", name);
		return (-1);
	}
	memcpy(fan, name, 2);
	fan[2] = '\0';
	snprintf(rel, sizeof(rel), "packs/%s", fan);
	if ((dfd = open_in(r, r->dirs[DIR_PACKS], fan, rel, O_RDONLY, S_IFDIR,
	    1)) == -1) {
		if (errno == ENOENT)
			return (0);
		log_errno("repository '%s': cannot open '%s'", r->path, rel);
		return (-1);
	}
	if (unlinkat(dfd, name, 0) && errno != ENOENT) {
		log_errno("repository '%s': cannot remove '%s/%s'", r->path,
		    rel, name);
		goto out;
	}
	if (fsync(dfd)) {
		log_errno("repository '%s': fsync of '%s' failed", r->path,
		    rel);
		goto out;
	}
	rc = 0;
out:
	close(dfd);
	return (rc);
}

int
repo_pack_exists(const struct repo *r, const char *name)
{
	int fd;

	if ((fd = repo_pack_open(r, name, 1)) != -1) {
		close(fd);
		return (1);
	}
	if (errno == ENOENT)
		return (0);
	log_errno("repository '%s': cannot open pack '%s'", r->path, name);
	return (-1);
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

	*files = NULL;
	*n = 0;
	if (slot_names(r, &names, &nn))
		return (-1);
	if ((v = calloc(nn + 2, sizeof(*v))) == NULL) {
		log_errno("out of memory");
		goto err;
	}
	snprintf(v[0].name, sizeof(v[0].name), "coffer.conf");
	if (read_in(r, r->dfd, "coffer.conf", "coffer.conf", CONF_MAX,
	    &v[0].data, &v[0].len))
		goto err;
	for (k = 1; k <= nn; k++) {
		if (strlen(names[k - 1]) > 64) {
			log_error("repository '%s': key slot name 'keys/%s' is "
			    "too long", r->path, names[k - 1]);
			goto err;
		}
		snprintf(v[k].name, sizeof(v[k].name), "keys/%s",
		    names[k - 1]);
		if (read_in(r, r->dirs[DIR_KEYS], names[k - 1], v[k].name,
		    SLOT_MAX, &v[k].data, &v[k].len))
			goto err;
	}
	names_free(names, nn);
	*files = v;
	*n = nn + 1;
	/* The keyring, when keys have rotated: a bare machine needs it. */
	if (fstatat(r->dfd, REPO_KEYRING, &(struct stat){ 0 },
	    AT_SYMLINK_NOFOLLOW) == 0) {
		snprintf(v[nn + 1].name, sizeof(v[nn + 1].name), "%s",
		    REPO_KEYRING);
		if (read_in(r, r->dfd, REPO_KEYRING, REPO_KEYRING, KEYRING_MAX,
		    &v[nn + 1].data, &v[nn + 1].len)) {
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
	int created = 0, dfd = -1, kfd = -1, conf = -1, ring = -1;
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcmp(files[i].name, "coffer.conf") == 0)
			conf = (int)i;
		else if (strcmp(files[i].name, REPO_KEYRING) == 0 && ring < 0)
			ring = (int)i;
		else if (strncmp(files[i].name, "keys/", 5) != 0 ||
		    strchr(files[i].name + 5, '/') ||
		    files[i].name[5] == '.' || files[i].name[5] == '\0') {
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
	if ((dfd = make_layout(path, &created)) == -1)
		return (-1);
	if ((kfd = openat(dfd, "keys", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		log_errno("cannot open '%s/keys'", path);
		goto err;
	}
	/* Key slots first, as init: a coffer.conf without a key is lost. */
	for (i = 0; i < n; i++)
		if ((int)i != conf && (int)i != ring &&
		    fsutil_write_file_at(kfd, files[i].name + 5, files[i].name,
		    files[i].data, files[i].len, 0600, 0))
			goto err;
	if (ring >= 0 && fsutil_write_file_at(dfd, REPO_KEYRING, REPO_KEYRING,
	    files[ring].data, files[ring].len, 0600, 0))
		goto err;
	if (fsutil_write_file_at(dfd, "coffer.conf", "coffer.conf",
	    files[conf].data, files[conf].len, 0644, 0))
		goto err;
	close(kfd);
	close(dfd);
	return (0);
err:
	if (kfd != -1)
		close(kfd);
	unmake_layout(dfd, path, created);
	return (-1);
}

int
repo_remove_made(const char *path)
{
	int dfd;

	if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return (-1);
	remove_made(dfd, path);
	close(dfd);
	/* Fails, leaving it, if anything else is there (not ours). */
	return (rmdir(path) == 0 || errno == ENOENT ? 0 : -1);
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
	struct stat st;
	unsigned char *data;
	char **names, rel[NAME_MAX + 8];
	size_t i, nn, len;
	int fd;

	*slots = NULL;
	*n = 0;
	if (slot_names(r, &names, &nn))
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
		fd = open_in(r, r->dirs[DIR_KEYS], names[i], rel, O_RDONLY,
		    S_IFREG, 0);
		log_release(1);
		if (fd == -1)
			continue;
		if (fstat(fd, &st) == 0)
			v[i].mtime_ns = (int64_t)st.st_mtim.tv_sec *
			    1000000000 + st.st_mtim.tv_nsec;
		if (fsutil_read_fd(fd, SLOT_MAX, &data, &len, rel) == 0) {
			if (ccrypto_slot_info(rel, data, len, &info) == 0) {
				v[i].kind = info.kind;
				v[i].opslimit = info.opslimit;
				v[i].memlimit = info.memlimit;
			}
			free(data);
		}
		close(fd);
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
	if (r->lock_fd == -1 || ccrypto_keys_write_only(r->keys)) {
		log_error("internal error: a new full key needs the lock and "
		    "a full key");
		return (-1);
	}
	if (ccrypto_recipient_add(r->keys, name, ccrypto_keys_recipient_pk(h))
	    == 0 && write_keyring(r) == 0)
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
	if (ccrypto_recipient_remove(r->keys, name) == 0 && write_keyring(r))
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
	 * write-only key and the legacy test hook wrap r's as it is). */
	full = !write_only && !(tuning_get()->test_legacy_keys &&
	    ccrypto_keys_kind(r->keys) == CCRYPTO_KEY_MASTER);
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
	if (fsutil_write_file_at(r->dirs[DIR_KEYS], name, rel, slot.data,
	    slot.len, 0600, replace) == 0)
		rc = 0;
	/*
	 * A full slot's new recipient is listed beside its old one: the old
	 * goes once the new slot is in place.  On an error the new one stays
	 * listed whenever the slot may hold it (the write can fail after its
	 * rename, at the directory's fsync); a new slot that is not there
	 * takes it out again.
	 */
	if (full && rc == 0 && ccrypto_recipient_keep(r->keys, name,
	    ccrypto_keys_recipient_pk(w)) == 0 && write_keyring(r))
		log_warn("repository '%s': the keyring still lists the old key "
		    "of slot '%s' too", r->path, name);
	if (full && rc != 0 && !replace && fstatat(r->dirs[DIR_KEYS], name,
	    &(struct stat){ 0 }, AT_SYMLINK_NOFOLLOW) && errno == ENOENT) {
		if (ccrypto_recipient_forget(r->keys, name,
		    ccrypto_keys_recipient_pk(w)) == 0 && write_keyring(r))
			log_warn("repository '%s': the keyring lists a key of "
			    "slot '%s', which was not written (coffer key "
			    "remove %s)", r->path, name, name);
	} else if (full && rc != 0)
		log_warn("repository '%s': the keyring lists a new key for "
		    "slot '%s', which may not be in place (coffer key list)",
		    r->path, name);
out:
	wipe_release(&slot);
	ccrypto_keys_free(w);
	return (rc);
}

int
repo_key_file_new(struct repo *r, struct ccrypto_keys **k,
    char name[REPO_SLOT_NAME_MAX])
{
	key_name_new(name);
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
	key_name_new(name);
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

/* Whether the keyring lists name (a master key: "master" until it goes). */
static int
listed(const struct repo *r, const char *name)
{
	const char *rn;
	size_t i;

	if (strcmp(name, CCRYPTO_RECIPIENT_MASTER) == 0 &&
	    ccrypto_recipients_master(r->keys))
		return (1);
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

	if (strcmp(name, CCRYPTO_RECIPIENT_MASTER) == 0)
		return (0);
	for (i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return (0);
	return (listed(r, name));
}

/*
 * Whether the slot v[i] reads: a full slot the keyring lists (a slot
 * holding the master secret, while "master" is listed).  A slot's header
 * alone proves nothing: whoever writes the storage can plant one.
 */
static int
slot_reads(const struct repo *r, const struct repo_slot *s)
{
	if (s->kind == CCRYPTO_SLOT_FULL)
		return (listed(r, CCRYPTO_RECIPIENT_MASTER));
	return (s->kind == CCRYPTO_SLOT_HOLDER && listed(r, s->name));
}

int
repo_slot_remove(struct repo *r, const char *name)
{
	const struct repo_slot *s = NULL;
	struct repo_slot *v;
	const char *rn;
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
	if (ccrypto_recipient_remove(r->keys, name) == 0 && write_keyring(r))
		goto out;
	/* unlinkat removes a link, never what it points to. */
	if (!file && unlinkat(r->dirs[DIR_KEYS], s->name, 0)) {
		log_errno("repository '%s': cannot remove 'keys/%s'", r->path,
		    s->name);
		goto out;
	}
	if (!file && fsync(r->dirs[DIR_KEYS])) {
		log_errno("repository '%s': fsync of 'keys' failed", r->path);
		goto out;
	}
	if (!file && s->kind == CCRYPTO_SLOT_FULL)
		log_warn("slot %s held the master secret, which other keys "
		    "hold too: a copy of it reads until key retire 1 "
		    "(coffer-key(1), REVOKING A KEY)", s->name);
	rc = 0;
out:
	free(v);
	return (rc);
}

/*
 * Key epochs (coffer key rotate, retire).  The order of writes keeps every
 * pack readable at each step: a new epoch's secret is in the keyring
 * before coffer.conf names its public key (a crash between leaves an
 * unused secret); a retired one's leaves the keyring before coffer.conf
 * says so (a crash between: retire again).
 */
int
repo_epochs(const struct repo *r, const struct repo_epoch **v, size_t *n)
{
	*v = r->epochs;
	*n = r->nepochs;
	return (0);
}

static int write_conf(struct repo *r);

/*
 * The keyring as r's key holds it, one generation on, then coffer.conf
 * naming that generation (a crash between leaves a keyring newer than
 * coffer.conf says, which reads).
 */
static int
write_keyring(struct repo *r)
{
	struct buf b = BUF_INIT;
	uint64_t gen;
	int rc;

	/* It may hold secrets this key could not read: never over it. */
	if (r->keyring_bad) {
		log_error("repository '%s': the keyring did not open (see "
		    "above): not rewritten", r->path);
		return (-1);
	}
	gen = ccrypto_keys_ring_gen(r->keys);
	if (gen < r->keyring_gen)
		gen = r->keyring_gen;
	if (gen >= KEYRING_GEN_MAX) {
		log_error("repository '%s': the keyring's generation is at its "
		    "end", r->path);
		return (-1);
	}
	gen++;
	rc = ccrypto_keyring_seal(r->keys, r->id, gen, &b) == 0 &&
	    fsutil_write_file_at(r->dfd, REPO_KEYRING, REPO_KEYRING, b.data,
	    b.len, 0600, 1) == 0 ? 0 : -1;
	wipe_release(&b);
	if (rc)
		return (-1);
	r->keyring_gen = gen;
	return (write_conf(r));
}

/* coffer.conf again, with r->epochs; then r holds what it wrote. */
static int
write_conf(struct repo *r)
{
	struct buf b = BUF_INIT;
	unsigned char *copy;
	size_t i;
	int rc = -1;

	/*
	 * What the authority signs is what writers seal to: never an epoch
	 * whose secret the keyring does not hold (listed by a write-only
	 * key in an unsigned coffer.conf, or lost), unless it is retired.
	 */
	for (i = 0; i < r->nepochs; i++)
		if (r->epochs[i].retired_ns == 0 &&
		    !ccrypto_keys_has_epoch(r->keys, r->epochs[i].epoch)) {
			log_error("repository '%s': coffer.conf lists key epoch "
			    "%u, whose secret the keyring does not hold: not "
			    "signed (was it added by a write-only key?)",
			    r->path, (unsigned)r->epochs[i].epoch);
			goto out;
		}
	/* The keyring line is a full key's to write (write-only keys can
	 * make coffer.conf's own MAC). */
	if (r->keyring_gen > 0 && ccrypto_keyring_line_mac(r->keys, r->id,
	    r->keyring_gen, r->keyring_mac))
		goto out;
	if (conf_text(&b, r->keys, r->id, &r->chunker, r->epochs, r->nepochs,
	    r->retired1_ns, r->keyring_gen, r->keyring_mac))
		goto out;
	if (b.len > CONF_MAX) {
		log_error("repository '%s': coffer.conf would exceed %d bytes",
		    r->path, CONF_MAX);
		goto out;
	}
	if (fsutil_write_file_at(r->dfd, "coffer.conf", "coffer.conf",
	    b.data, b.len, 0644, 1))
		goto out;
	if ((copy = malloc(b.len + 1)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	memcpy(copy, b.data, b.len);
	copy[b.len] = '\0';
	free(r->conf);
	r->conf = copy;
	r->conf_len = b.len;
	/* The same fields; parsing sets conf_body_len and the MAC. */
	if ((copy = malloc(b.len + 1)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	memcpy(copy, r->conf, b.len + 1);
	rc = conf_parse(r, copy, b.len);
	free(copy);
out:
	buf_release(&b);
	return (rc);
}

/* Changing the key epochs needs the writer lock and a key that reads. */
static int
locked_full(const struct repo *r)
{
	return (r->lock_fd != -1 && r->keys != NULL &&
	    !ccrypto_keys_write_only(r->keys));
}

int
repo_epoch_rotate(struct repo *r, uint32_t *epoch)
{
	struct repo_epoch *e;
	uint32_t n;

	if (!locked_full(r)) {
		log_error("internal error: rotation needs the lock and a full "
		    "key");
		return (-1);
	}
	if (r->nepochs == REPO_EPOCHS_MAX) {
		log_error("repository '%s' has %d key epochs already, the most "
		    "coffer.conf holds", r->path, REPO_EPOCHS_MAX + 1);
		return (-1);
	}
	/* Past any secret a crash left in the keyring unnamed. */
	n = ccrypto_keys_max_epoch(r->keys) + 1;
	if (r->nepochs > 0 && n <= r->epochs[r->nepochs - 1].epoch)
		n = r->epochs[r->nepochs - 1].epoch + 1;
	e = &r->epochs[r->nepochs];
	memset(e, 0, sizeof(*e));
	e->epoch = n;
	e->created_ns = now_realtime_ns();
	if (ccrypto_epoch_generate(r->keys, n, e->pk))
		return (-1);
	/* write_keyring writes the keyring, then coffer.conf listing it. */
	r->nepochs++;
	if (write_keyring(r)) {
		r->nepochs--;
		return (-1);
	}
	if (ccrypto_keys_set_epoch(r->keys, n, e->pk))
		return (-1);
	*epoch = n;
	return (0);
}

int64_t
repo_epoch1_retired(const struct repo *r)
{
	return (r->retired1_ns);
}

/*
 * Epoch 1: its secret, derived from the master secret, leaves the
 * keyring, and so does the master secret's recipient, then coffer.conf
 * says so (format 3).  The caller checked that no pack and no slot needs
 * either, and that r's key is not the master secret.
 */
static int
retire_first(struct repo *r)
{
	if (r->nepochs == 0) {
		log_error("key epoch 1 is the newest, the one new packs are "
		    "sealed to: rotate first");
		return (-1);
	}
	if (ccrypto_keys_kind(r->keys) != CCRYPTO_KEY_HOLDER) {
		log_error("internal error: retiring epoch 1 with the master "
		    "secret");
		return (-1);
	}
	/* The keyring without them, then coffer.conf saying so. */
	if (r->retired1_ns == 0)
		r->retired1_ns = now_realtime_ns();
	ccrypto_epoch_forget(r->keys, 1);
	(void)ccrypto_recipient_remove(r->keys, CCRYPTO_RECIPIENT_MASTER);
	return (write_keyring(r));
}

int
repo_epoch_retire(struct repo *r, uint32_t epoch)
{
	struct repo_epoch *e = NULL;
	size_t i;

	if (!locked_full(r)) {
		log_error("internal error: retiring needs the lock and a full "
		    "key");
		return (-1);
	}
	if (epoch == 1)
		return (retire_first(r));
	for (i = 0; i < r->nepochs; i++)
		if (r->epochs[i].epoch == epoch)
			e = &r->epochs[i];
	if (e == NULL) {
		log_error("repository '%s' has no key epoch %u", r->path,
		    (unsigned)epoch);
		return (-1);
	}
	if (epoch == r->epochs[r->nepochs - 1].epoch) {
		log_error("key epoch %u is the newest, the one new packs are "
		    "sealed to: rotate first", (unsigned)epoch);
		return (-1);
	}
	/* The keyring without its secret, then coffer.conf saying so (a
	 * crash between: retire again). */
	if (e->retired_ns != 0 && !ccrypto_keys_has_epoch(r->keys, epoch))
		return (0);
	if (e->retired_ns == 0)
		e->retired_ns = now_realtime_ns();
	/* A new generation either way: the change is one a rollback of
	 * coffer.conf must not undo unnoticed. */
	ccrypto_epoch_forget(r->keys, epoch);
	return (write_keyring(r));
}

int
repo_keyring_names(struct repo *r,
    char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1], size_t max, size_t *n,
    int *legacy)
{
	unsigned char *kr = NULL;
	size_t len;
	int rc;

	*n = 0;
	*legacy = 1;
	if (fstatat(r->dfd, REPO_KEYRING, &(struct stat){ 0 },
	    AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
		return (0);
	if (read_in(r, r->dfd, REPO_KEYRING, REPO_KEYRING, KEYRING_MAX, &kr,
	    &len))
		return (-1);
	rc = ccrypto_keyring_names(kr, len, names, max, n);
	free(kr);
	if (rc < 0) {
		log_error("repository '%s': the keyring is malformed",
		    r->path);
		return (-1);
	}
	*legacy = rc == 1;
	return (0);
}

int
repo_intent_write(struct repo *r, const void *data, size_t len)
{
	return (fsutil_write_file_at(r->dfd, REPO_INTENT, REPO_INTENT, data,
	    len, 0600, 1));
}

int
repo_intent_read(struct repo *r, unsigned char **data, size_t *len)
{
	if (fstatat(r->dfd, REPO_INTENT, &(struct stat){ 0 },
	    AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
		return (0);
	return (read_in(r, r->dfd, REPO_INTENT, REPO_INTENT, INTENT_MAX, data,
	    len) ? -1 : 1);
}

int
repo_intent_remove(struct repo *r)
{
	if (unlinkat(r->dfd, REPO_INTENT, 0) && errno != ENOENT) {
		log_errno("repository '%s': cannot remove '%s'", r->path,
		    REPO_INTENT);
		return (-1);
	}
	if (fsync(r->dfd)) {
		log_errno("repository '%s': fsync failed", r->path);
		return (-1);
	}
	return (0);
}

int
repo_pack_open_rw(const struct repo *r, const char *name)
{
	char rel[PACK_NAME_LEN + 16];
	struct stat st;
	int fd;

	fd = pack_open_flags(r, name, O_RDWR, 0, rel);
	/* Written in place: another name (a hard link) must not be. */
	if (fd != -1 && (fstat(fd, &st) || st.st_nlink != 1)) {
		log_error("repository '%s': '%s' has other names (a hard "
		    "link): refused", r->path, rel);
		close(fd);
		return (-1);
	}
	return (fd);
}

int
repo_adopt_epochs(struct repo *r, const struct repo_file *files, size_t n)
{
	const struct repo_file *conf = NULL, *ring = NULL;
	struct repo *t;
	unsigned char *copy;
	uint32_t ours, theirs;
	size_t i;
	int rc = -1;

	for (i = 0; i < n; i++) {
		if (strcmp(files[i].name, "coffer.conf") == 0)
			conf = &files[i];
		else if (strcmp(files[i].name, REPO_KEYRING) == 0)
			ring = &files[i];
	}
	if (conf == NULL || !locked_full(r))
		return (0);
	ours = r->nepochs > 0 ? r->epochs[r->nepochs - 1].epoch : 1;
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (copy = malloc(conf->len + 1)) == NULL) {
		free(t);
		log_error("out of memory");
		return (-1);
	}
	t->path = r->path;
	memcpy(copy, conf->data, conf->len);
	copy[conf->len] = '\0';
	if (conf_parse(t, copy, conf->len))
		goto out;
	theirs = t->nepochs > 0 ? t->epochs[t->nepochs - 1].epoch : 1;
	if (theirs <= ours) {
		rc = 0;
		goto out;
	}
	/* Newer than ours, and the same repository's, by its MAC. */
	if (memcmp(t->id, r->id, sizeof(r->id)) != 0 ||
	    memcmp(&t->chunker, &r->chunker, sizeof(r->chunker)) != 0 ||
	    ccrypto_meta_mac_verify(r->keys, conf->data, t->conf_body_len,
	    t->mac)) {
		log_error("repository '%s': a bundle's coffer.conf with key "
		    "epoch %u failed authentication: not taken", r->path,
		    (unsigned)theirs);
		goto out;
	}
	if (ring == NULL) {
		log_error("repository '%s': a bundle lists key epoch %u but "
		    "carries no keyring: not taken", r->path,
		    (unsigned)theirs);
		goto out;
	}
	/* As a rotation writes them: the secrets, then the public keys. */
	if (r->keyring_bad) {
		log_error("repository '%s': the keyring did not open (see "
		    "above): not replaced", r->path);
		goto out;
	}
	/*
	 * Their secrets join ours; which keys open this repository stays
	 * this repository's list (a key the source removed is removed here
	 * by coffer key remove; one the bundle lists that this repository
	 * does not gets nothing).  Then their epochs, in coffer.conf as
	 * this key writes it.
	 */
	if (ccrypto_keyring_open(r->keys, r->id, ring->data, ring->len, 1)) {
		log_error("repository '%s': a bundle's keyring does not open "
		    "with this key: not taken (import with a key of the "
		    "repository the bundle came from)", r->path);
		goto out;
	}
	/*
	 * What this repository retired stays retired (the bundle's secret
	 * for it is dropped); what it still holds is not retired here,
	 * whatever the bundle's coffer.conf says.
	 */
	for (i = 0; i < r->nepochs; i++)
		if (r->epochs[i].retired_ns != 0)
			ccrypto_epoch_forget(r->keys, r->epochs[i].epoch);
	if (r->retired1_ns != 0)
		ccrypto_epoch_forget(r->keys, 1);
	for (i = 0; i < t->nepochs; i++) {
		size_t j;
		int64_t mine = 0;

		for (j = 0; j < r->nepochs; j++)
			if (r->epochs[j].epoch == t->epochs[i].epoch)
				mine = r->epochs[j].retired_ns;
		if (ccrypto_keys_has_epoch(r->keys, t->epochs[i].epoch))
			t->epochs[i].retired_ns = 0;
		else if (mine != 0)
			t->epochs[i].retired_ns = mine;
	}
	memcpy(r->epochs, t->epochs, t->nepochs * sizeof(*r->epochs));
	r->nepochs = t->nepochs;
	if (write_keyring(r) || load_epochs(r))
		goto out;
	log_info("key epochs up to %u from a bundle", (unsigned)theirs);
	rc = 0;
out:
	free(copy);
	free(t);
	return (rc);
}
