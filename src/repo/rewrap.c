/*
 * Key rotation (coffer key rotate --rewrap): pack headers resealed to the
 * newest epoch, each pack put anew whole under its own name, made
 * crash-safe by the rewrap intent (REPO/rewrap).
 * See doc/format.md ("Rewrap intent").
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/tuning.h"
#include "repo-int.h"

int
repo_intent_write(struct repo *r, const void *data, size_t len)
{
	return (storage_put(r->st, REPO_INTENT, data, len, 0));
}

int
repo_intent_read(struct repo *r, unsigned char **data, size_t *len)
{
	int rc;

	if ((rc = rp_get(r, REPO_INTENT, INTENT_MAX, data, len, 1)) ==
	    STORAGE_MISSING)
		return (0);
	return (rc ? -1 : 1);
}

int
pack_rewrap_pending(struct repo *r)
{
	return (rp_exists(r, REPO_INTENT));
}

int
repo_intent_remove(struct repo *r)
{
	return (storage_delete(r->st, REPO_INTENT));
}

/*
 * Open pack name (its object into obj, its path for messages into
 * *path, malloc'd) and read its header: 0, STORAGE_MISSING (not
 * reported) or -1 (reported).
 */
static int
header_read(struct repo *r, const char *name, char obj[RP_PACK_OBJ_MAX],
    char **path, struct storage_obj **o, uint64_t *size, uint8_t *hdr)
{
	int rc;

	*o = NULL;
	if (rp_pack_object(name, obj, 0) ||
	    (*path = repo_pack_path(r, name)) == NULL)
		return (-1);
	if ((rc = storage_open(r->st, obj, o, size)) != 0)
		return (rc);
	if (*size < PACK_HEADER_BYTES) {
		log_error("pack '%s' is truncated", *path);
		return (-1);
	}
	return (storage_read_all(*o, 0, hdr, PACK_HEADER_BYTES));
}

int
pack_epoch(struct repo *r, const char *name, uint32_t *epoch)
{
	uint8_t hdr[PACK_HEADER_BYTES];
	char obj[RP_PACK_OBJ_MAX], *path = NULL;
	struct storage_obj *o;
	uint64_t size;
	int rc;

	if ((rc = header_read(r, name, obj, &path, &o, &size, hdr)) ==
	    STORAGE_MISSING)
		log_error("pack '%s' is missing", path);
	if (rc == 0 && rp_header_check(r, hdr, name, path, epoch))
		rc = -1;
	storage_obj_close(o);
	free(path);
	return (rc ? -1 : 0);
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

#define COPY_BYTES (1u << 20)

/*
 * Pack name written anew under its own name: hdr, then the rest of the
 * pack as it is, copied in ranged reads, committed (which replaces it
 * whole: no write in place, none through another name of it).  Unless
 * force, a pack whose header is hdr already is left as it is.  0,
 * STORAGE_MISSING (gone: pruned since), -1 (reported).
 */
static int
header_put(struct repo *r, const char *name, const uint8_t *hdr, int force)
{
	uint8_t cur[PACK_HEADER_BYTES], *b = NULL;
	char obj[RP_PACK_OBJ_MAX], *path = NULL;
	struct storage_put *p = NULL;
	struct storage_obj *o;
	uint64_t size, off;
	size_t n;
	int rc;

	if ((rc = header_read(r, name, obj, &path, &o, &size, cur)) != 0 ||
	    (!force && memcmp(cur, hdr, sizeof(cur)) == 0))
		goto out;
	rc = -1;
	if ((b = malloc(COPY_BYTES)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	if (storage_put_begin(r->st, obj, 0, &p) ||
	    storage_put_write(p, hdr, PACK_HEADER_BYTES))
		goto out;
	for (off = PACK_HEADER_BYTES; off < size; off += n) {
		n = size - off < COPY_BYTES ? (size_t)(size - off) : COPY_BYTES;
		if (storage_read_all(o, off, b, n) ||
		    storage_put_write(p, b, n))
			goto out;
	}
	tuning_raise_at("rewrap-put");
	rc = storage_put_commit(p);
	p = NULL;
out:
	storage_put_abort(p);
	storage_obj_close(o);
	free(b);
	free(path);
	return (rc);
}

int
pack_rewrap(struct repo *r, char **names, size_t n, int *changed)
{
	const struct ccrypto_keys *k = repo_keys(r);
	uint8_t *key = NULL, *ent;
	struct buf intent = BUF_INIT;
	uint32_t epoch, seal = ccrypto_keys_seal_epoch(k);
	char obj[RP_PACK_OBJ_MAX], *path = NULL;
	struct storage_obj *o = NULL;
	uint64_t size;
	int rc = -1, urc;
	size_t i, count = 0;

	if (n > PACK_REWRAP_BATCH || ccrypto_keys_write_only(k)) {
		log_error("internal error: bad rewrap");
		return (-1);
	}
	if ((key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    buf_reserve(&intent, INTENT_HEAD + n * INTENT_ENTRY)) {
		log_error("out of memory");
		goto out;
	}
	memcpy(intent.data, INTENT_MAGIC, 4);
	intent.data[4] = INTENT_VERSION;
	intent.data[5] = intent.data[6] = intent.data[7] = 0;
	intent.len = INTENT_HEAD;
	for (i = 0; i < n; i++) {
		changed[i] = 0;
		ent = intent.data + intent.len;
		free(path);
		path = NULL;
		if ((urc = header_read(r, names[i], obj, &path, &o, &size,
		    ent + 16)) == STORAGE_MISSING)
			log_error("pack '%s' is missing", path);
		storage_obj_close(o);
		o = NULL;
		if (urc != 0 ||
		    rp_header_check(r, ent + 16, names[i], path, &epoch))
			goto out;
		if (epoch == seal)
			continue;
		/* Left as it is, and named: the others go on. */
		if ((urc = ccrypto_pack_key_unseal_epoch(k, epoch,
		    ent + 16 + SEALED_OFF, key)) != 0) {
			rp_unseal_error(path, epoch, urc);
			changed[i] = -1;
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
	 * The intent is durable before any pack is put anew, and goes only
	 * after every put is committed: a crash at any point leaves each
	 * pack whole with its old header or its new one (a put replaces it
	 * whole; a torn header, of a write in place before, is read through
	 * the intent too), both of which open (the old
	 * epoch is not retired while an intent names it), and the next
	 * rewrap or retire finishes what the intent lists.
	 */
	if (repo_intent_write(r, intent.data, intent.len))
		goto out;
	tuning_raise_at("rewrap-intent");
	for (i = 0, ent = intent.data + INTENT_HEAD; i < n; i++) {
		if (changed[i] != 1)
			continue;
		/* Pruned since (not under this lock): nothing to put. */
		if (header_put(r, names[i], ent + 16 + PACK_HEADER_BYTES, 1) <
		    0)
			goto out;
		ent += INTENT_ENTRY;
		tuning_raise_at("rewrap-header");
	}
	if (repo_intent_remove(r))
		goto out;
	rc = 0;
out:
	free(path);
	ccrypto_secret_free(key);
	buf_release(&intent);
	return (rc);
}

int
pack_rewrap_recover(struct repo *r, char ***names, size_t *nnames)
{
	const struct ccrypto_keys *k = repo_keys(r);
	uint8_t *key = NULL;
	const uint8_t *ent, *old, *new;
	unsigned char *data = NULL;
	char name[PACK_NAME_LEN + 1], *path = NULL, **v = NULL;
	uint32_t count, epoch, oepoch;
	size_t len, i, nv = 0;
	int rc = -1, found;

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
		/* Old, new or torn between them: the new one, put whole. */
		if ((found = header_put(r, name, new, 0)) == STORAGE_MISSING)
			continue;	/* pruned since */
		if (found < 0)
			goto out;
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
