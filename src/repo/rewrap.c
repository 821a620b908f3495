/*
 * Key rotation in place (coffer key rotate --rewrap): pack headers resealed
 * to the newest epoch, made crash-safe by the rewrap intent (REPO/rewrap).
 * See doc/format.md ("Rewrap intent").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/tuning.h"
#include "repo-int.h"

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
	return (rp_read_in(r, r->dfd, REPO_INTENT, REPO_INTENT, INTENT_MAX,
	    data, len) ? -1 : 1);
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
pack_epoch(struct repo *r, const char *name, uint32_t *epoch)
{
	uint8_t hdr[PACK_HEADER_BYTES];
	char *path;
	int fd, rc = -1;

	if ((path = repo_pack_path(r, name)) == NULL)
		return (-1);
	if ((fd = repo_pack_open(r, name, 0)) != -1 &&
	    fsutil_pread_all(fd, hdr, sizeof(hdr), 0, path) == 0 &&
	    rp_header_check(r, hdr, name, path, epoch) == 0)
		rc = 0;
	if (fd != -1)
		close(fd);
	free(path);
	return (rc);
}

/*
 * The rewrap intent (doc/format.md, "Rewrap intent"):
 *   "CFRW" | u8 version 1 | u8[3] zero | u32 count |
 *   count x (pack id[16] | old header[120] | new header[120])
 */
#define INTENT_MAGIC "CFRW"
#define INTENT_VERSION 1
enum {
	INTENT_HEAD = 12,
	INTENT_ENTRY = 16 + 2 * PACK_HEADER_BYTES,
};

/* Write hdr over the header of the pack open at fd, durably. */
static int
header_write(int fd, const uint8_t *hdr, const char *path)
{
	ssize_t n;

	do
		n = pwrite(fd, hdr, PACK_HEADER_BYTES, 0);
	while (n < 0 && errno == EINTR);
	if (n != PACK_HEADER_BYTES) {
		log_errno("cannot write the header of pack '%s'", path);
		return (-1);
	}
	if (fdatasync(fd)) {
		log_errno("fdatasync of pack '%s' failed", path);
		return (-1);
	}
	return (0);
}

int
pack_rewrap(struct repo *r, char **names, size_t n, int *changed)
{
	const struct ccrypto_keys *k = repo_keys(r);
	uint8_t *key = NULL, *ent;
	struct buf intent = BUF_INIT;
	uint32_t epoch, seal = ccrypto_keys_seal_epoch(k);
	char **paths = NULL;
	int *fds = NULL, rc = -1, urc;
	size_t i, count = 0;

	if (n > PACK_REWRAP_BATCH || ccrypto_keys_write_only(k)) {
		log_error("internal error: bad rewrap");
		return (-1);
	}
	if ((fds = malloc(n * sizeof(*fds))) == NULL ||
	    (paths = calloc(n, sizeof(*paths))) == NULL ||
	    (key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    buf_reserve(&intent, INTENT_HEAD + n * INTENT_ENTRY)) {
		log_error("out of memory");
		goto out;
	}
	for (i = 0; i < n; i++)
		fds[i] = -1;
	memcpy(intent.data, INTENT_MAGIC, 4);
	intent.data[4] = INTENT_VERSION;
	intent.data[5] = intent.data[6] = intent.data[7] = 0;
	intent.len = INTENT_HEAD;
	for (i = 0; i < n; i++) {
		changed[i] = 0;
		ent = intent.data + intent.len;
		if ((paths[i] = repo_pack_path(r, names[i])) == NULL ||
		    (fds[i] = repo_pack_open_rw(r, names[i])) == -1 ||
		    fsutil_pread_all(fds[i], ent + 16, PACK_HEADER_BYTES, 0,
		    paths[i]) ||
		    rp_header_check(r, ent + 16, names[i], paths[i], &epoch))
			goto out;
		if (epoch == seal) {
			close(fds[i]);
			fds[i] = -1;
			continue;
		}
		/* Left as it is, and named: the others go on. */
		if ((urc = ccrypto_pack_key_unseal_epoch(k, epoch,
		    ent + 16 + SEALED_OFF, key)) != 0) {
			rp_unseal_error(paths[i], epoch, urc);
			changed[i] = -1;
			close(fds[i]);
			fds[i] = -1;
			continue;
		}
		/* The same pack key, sealed anew: records and index stay. */
		memcpy(ent, ent + 16 + 24, 16);
		memcpy(ent + 16 + PACK_HEADER_BYTES, ent + 16,
		    PACK_HEADER_BYTES);
		rp_header_set_epoch(ent + 16 + PACK_HEADER_BYTES,
		    ccrypto_pack_key_seal(k, key,
		    ent + 16 + PACK_HEADER_BYTES + SEALED_OFF));
		intent.len += INTENT_ENTRY;
		changed[i] = 1;
		count++;
	}
	if (count == 0) {
		rc = 0;
		goto out;
	}
	put_u32(intent.data + 8, (uint32_t)count);
	/*
	 * The intent is durable before any header changes, and goes only
	 * after every new header is: a crash at any point leaves each pack
	 * with its old header or its new one, both of which open (the old
	 * epoch is not retired while an intent names it), and the next
	 * rewrap or retire finishes what the intent lists.
	 */
	if (repo_intent_write(r, intent.data, intent.len))
		goto out;
	tuning_raise_at("rewrap-intent");
	for (i = 0, ent = intent.data + INTENT_HEAD; i < n; i++) {
		if (changed[i] != 1)
			continue;
		if (header_write(fds[i], ent + 16 + PACK_HEADER_BYTES,
		    paths[i]))
			goto out;
		ent += INTENT_ENTRY;
		tuning_raise_at("rewrap-header");
	}
	if (repo_intent_remove(r))
		goto out;
	rc = 0;
out:
	for (i = 0; fds != NULL && i < n; i++)
		if (fds[i] != -1)
			close(fds[i]);
	for (i = 0; paths != NULL && i < n; i++)
		free(paths[i]);
	free(paths);
	free(fds);
	ccrypto_secret_free(key);
	buf_release(&intent);
	return (rc);
}

int
pack_rewrap_recover(struct repo *r, char ***names, size_t *nnames)
{
	const struct ccrypto_keys *k = repo_keys(r);
	uint8_t cur[PACK_HEADER_BYTES], *key = NULL;
	const uint8_t *ent, *old, *new;
	unsigned char *data = NULL;
	char name[PACK_NAME_LEN + 1], *path = NULL, **v = NULL;
	uint32_t count, epoch, oepoch;
	size_t len, i, nv = 0;
	int fd = -1, rc = -1, found;

	*names = NULL;
	*nnames = 0;
	if ((found = repo_intent_read(r, &data, &len)) <= 0)
		return (found);
	if (len < INTENT_HEAD || memcmp(data, INTENT_MAGIC, 4) != 0 ||
	    data[4] != INTENT_VERSION || (count = get_u32(data + 8)) == 0 ||
	    count > PACK_REWRAP_BATCH ||
	    len != INTENT_HEAD + (size_t)count * INTENT_ENTRY) {
		log_error("repository '%s': '%s' is malformed: left alone",
		    repo_path(r), REPO_INTENT);
		goto out;
	}
	if ((v = calloc(count, sizeof(*v))) == NULL ||
	    (key = ccrypto_secret_new(2 * CCRYPTO_KEY_BYTES)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	/*
	 * Every entry is checked before any header is written: whoever can
	 * write the repository can write an intent, and a new header that
	 * seals another key (one of theirs) to the published epoch key would
	 * make the pack unreadable.  A header is finished only when both the
	 * old and the new one open, to the same pack key, and that key is the
	 * pack's own (its MAC checks under it).
	 */
	for (i = 0; i < count; i++) {
		ent = data + INTENT_HEAD + i * INTENT_ENTRY;
		old = ent + 16;
		new = old + PACK_HEADER_BYTES;
		hex_encode(name, ent, 16);
		free(path);
		if ((path = repo_pack_path(r, name)) == NULL)
			goto out;
		if (rp_header_check(r, old, name, path, &oepoch) ||
		    rp_header_check(r, new, name, path, &epoch) ||
		    ccrypto_pack_key_unseal_epoch(k, epoch, new + SEALED_OFF,
		    key) != 0 || ccrypto_pack_key_unseal_epoch(k, oepoch,
		    old + SEALED_OFF, key + CCRYPTO_KEY_BYTES) != 0) {
			log_error("repository '%s': '%s' names a header of "
			    "pack '%s' that does not open: left alone",
			    repo_path(r), REPO_INTENT, name);
			goto out;
		}
		if (memcmp(key, key + CCRYPTO_KEY_BYTES, CCRYPTO_KEY_BYTES) ||
		    rp_pack_key_is_own(r, name, path, old, key)) {
			log_error("repository '%s': '%s' would give pack '%s' "
			    "another pack key than its own (forged?): left "
			    "alone, no pack changed; remove '%s' once checked",
			    repo_path(r), REPO_INTENT, name, REPO_INTENT);
			goto out;
		}
	}
	for (i = 0; i < count; i++) {
		ent = data + INTENT_HEAD + i * INTENT_ENTRY;
		new = ent + 16 + PACK_HEADER_BYTES;
		hex_encode(name, ent, 16);
		free(path);
		if ((path = repo_pack_path(r, name)) == NULL)
			goto out;
		if ((fd = repo_pack_open_rw(r, name)) == -1) {
			if (errno == ENOENT)
				continue;	/* pruned since */
			goto out;
		}
		if (fsutil_pread_all(fd, cur, sizeof(cur), 0, path))
			goto out;
		/* Old, new or torn between them: the new one, whole. */
		if (memcmp(cur, new, sizeof(cur)) != 0 &&
		    header_write(fd, new, path))
			goto out;
		close(fd);
		fd = -1;
		if ((v[nv] = strdup(name)) == NULL) {
			log_error("out of memory");
			goto out;
		}
		nv++;
	}
	if (repo_intent_remove(r))
		goto out;
	log_warn("a key rewrap was cut short: finished it (%zu packs)", nv);
	*names = v;
	*nnames = nv;
	v = NULL;
	rc = 1;
out:
	if (fd != -1)
		close(fd);
	for (i = 0; v != NULL && i < nv; i++)
		free(v[i]);
	free(v);
	free(path);
	free(data);
	ccrypto_secret_free(key);
	return (rc);
}

/*
 * The header of pack name from a rewrap intent left behind, new or old,
 * whichever opens: into hdr, its epoch and pack key.  0, or -1 (there is
 * none that opens; nothing reported).
 */
int
rp_intent_header(struct repo *r, const char *name, uint8_t *hdr,
    uint32_t *epoch, uint8_t *key)
{
	const uint8_t *ent, *h;
	unsigned char *data = NULL;
	char ename[PACK_NAME_LEN + 1];
	uint32_t count, i, e;
	size_t len;
	int which, rc = -1;

	if (repo_intent_read(r, &data, &len) <= 0)
		return (-1);
	if (len < INTENT_HEAD || memcmp(data, INTENT_MAGIC, 4) != 0 ||
	    data[4] != INTENT_VERSION || (count = get_u32(data + 8)) >
	    PACK_REWRAP_BATCH || len != INTENT_HEAD + (size_t)count *
	    INTENT_ENTRY)
		goto out;
	for (i = 0; i < count && rc != 0; i++) {
		ent = data + INTENT_HEAD + (size_t)i * INTENT_ENTRY;
		hex_encode(ename, ent, 16);
		if (strcmp(ename, name) != 0)
			continue;
		for (which = 1; which >= 0 && rc != 0; which--) {
			h = ent + 16 + (size_t)which * PACK_HEADER_BYTES;
			if (rp_header_check(r, h, name, name, &e) == 0 &&
			    ccrypto_pack_key_unseal_epoch(repo_keys(r), e,
			    h + SEALED_OFF, key) == 0) {
				memcpy(hdr, h, PACK_HEADER_BYTES);
				*epoch = e;
				rc = 0;
			}
		}
	}
out:
	free(data);
	return (rc);
}
