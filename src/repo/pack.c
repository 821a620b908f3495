/*
 * Packs: immutable files of encrypted records with an encrypted index
 * trailer (format in include/coffer/repo.h).  Packs are hostile input when
 * read: every length is checked against the file before it is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/repo.h"
#include "coffer/repo-keys.h"
#include "coffer/tuning.h"
#include "repo-int.h"

#define PACK_MAGIC "CFPK"
#define INDEX_MAGIC "CFPI"
#define PACK_VERSION 1		/* bytes 5..7: the key epoch, u24 */
#define PACK_MAC_BYTES 32
/* The end of a pack: mac[32] | u32 L | "CFPI". */
#define TRAILER_END (PACK_MAC_BYTES + 4 + 4)
#define MAC_PIECE (64u << 10)
#define INDEX_ENTRY_BYTES (CCRYPTO_ID_BYTES + 1 + 1 + 8 + 4 + 4)
#define RECORD_AD_BYTES (CCRYPTO_ID_BYTES + 1 + CCRYPTO_REPO_ID_BYTES + 1 + 4)
#define WBUF_SIZE (2u << 20)

/*
 * Appends fill a buffer that the appending thread writes when full: a
 * hand-over to another thread cost more than the write (bench/README.md,
 * "The last two threads").  Making a finished pack durable (fsync,
 * rename, fsync of the directory) waits on the disk, so it runs on a
 * thread of its own while the caller fills the next pack.
 */
struct pack_writer {
	struct repo *repo;
	char name[PACK_NAME_LEN + 1];
	uint8_t pack_id[16];
	struct storage_put *put;	/* packs/ab/<name>, until committed */
	uint8_t *key;			/* sodium_malloc'd */
	uint8_t *ikey;			/* the index key, sodium_malloc'd */
	struct ccrypto_hash_state hash;
	uint64_t size;			/* bytes written incl. buffered */
	struct buf wbuf;		/* being filled by appends */
	struct pack_entry *ents;
	size_t nents, cap;
	int failed;			/* seen by the caller */
	struct pack_info info;		/* filled when finishing starts */

	/* The durability thread, from finish_start to its join. */
	pthread_t io;
	int io_running;
	int io_failed;			/* written by the thread, read after
					 * the join */
	atomic_int io_done;		/* the thread is about to end */
};

struct pack_reader {
	struct repo *repo;
	char name[PACK_NAME_LEN + 1];
	char *path;			/* for messages */
	struct storage_obj *obj;
	uint64_t size;
	uint8_t pack_id[16];
	uint8_t *key;			/* NULL: opened for its index only */
	uint8_t *ikey;			/* the index key */
	uint8_t hdr[PACK_HEADER_BYTES];
	uint8_t hash[32];		/* of header and index trailer */
	int have_hash;
	uint8_t mac[PACK_MAC_BYTES];	/* checked when opened */
	int quiet;			/* a bad record is a warning */
	uint32_t index_len;		/* L, as the MAC covers it */
};

/* A damaged record: an error, or a warning once the caller said so. */
#define rec_error(p, ...) \
	((p)->quiet ? log_warn(__VA_ARGS__) : log_error(__VA_ARGS__))

static void
record_ad(uint8_t *ad, const struct repo *r, const uint8_t *id, uint8_t type,
    uint8_t flags, uint32_t plain_len)
{
	memcpy(ad, id, CCRYPTO_ID_BYTES);
	ad[CCRYPTO_ID_BYTES] = type;
	memcpy(ad + CCRYPTO_ID_BYTES + 1, repo_id(r), CCRYPTO_REPO_ID_BYTES);
	ad[CCRYPTO_ID_BYTES + 1 + CCRYPTO_REPO_ID_BYTES] = flags;
	put_u32(ad + CCRYPTO_ID_BYTES + 2 + CCRYPTO_REPO_ID_BYTES, plain_len);
}

static void
index_ad(uint8_t *ad, const struct repo *r, const uint8_t *pack_id)
{
	memcpy(ad, INDEX_MAGIC, 4);
	memcpy(ad + 4, repo_id(r), CCRYPTO_REPO_ID_BYTES);
	memcpy(ad + 4 + CCRYPTO_REPO_ID_BYTES, pack_id, 16);
}

/* The epoch bytes of a header sealed to epoch. */
void
rp_header_set_epoch(uint8_t *hdr, uint32_t epoch)
{
	hdr[5] = (uint8_t)epoch;
	hdr[6] = (uint8_t)(epoch >> 8);
	hdr[7] = (uint8_t)(epoch >> 16);
}

/*
 * The pack's MAC (doc/format.md, "Packs"): keyed BLAKE2b-256 under the id
 * key of "CFPK" | repository id | pack id | pack key | the index trailer
 * from its nonce to its tag | u32 L; mac_start hashes what comes before
 * the trailer.  Every writer, write-only ones too, holds the id key and
 * whoever can only write the storage does not: a pack sealed to an epoch
 * key that coffer.conf publishes fails the MAC before anything in it is
 * decrypted past its key.  The pack key is covered, so a genuine trailer
 * under a header resealed to a key of the forger's fails too.  Version,
 * epoch and sealed key are not: a rewrap rewrites them in place, and
 * keeps the pack key and the trailer.
 */
static void
mac_start(const struct repo *r, const uint8_t *pack_id, const uint8_t *key,
    struct ccrypto_hash_state *h)
{
	ccrypto_hash_init(repo_keys(r), h);
	ccrypto_hash_update(h, PACK_MAGIC, 4);
	ccrypto_hash_update(h, repo_id(r), CCRYPTO_REPO_ID_BYTES);
	ccrypto_hash_update(h, pack_id, 16);
	ccrypto_hash_update(h, key, CCRYPTO_KEY_BYTES);
}

/*
 * Check a header read from pack name (path for messages) against r and
 * name; its epoch to *epoch.  0 or -1 (reported).
 */
int
rp_header_check(const struct repo *r, const uint8_t *hdr, const char *name,
    const char *path, uint32_t *epoch)
{
	uint8_t id[16];

	if (memcmp(hdr, PACK_MAGIC, 4) != 0) {
		log_error("'%s' is not a pack (bad magic)", path);
		return (-1);
	}
	if (hdr[4] != PACK_VERSION) {
		log_error("pack '%s' has format %u; this coffer reads format "
		    "%d (upgrade coffer)", path, hdr[4], PACK_VERSION);
		return (-1);
	}
	*epoch = hdr[5] | (uint32_t)hdr[6] << 8 | (uint32_t)hdr[7] << 16;
	if (*epoch < 1) {
		log_error("pack '%s': bad key epoch %u", path,
		    (unsigned)*epoch);
		return (-1);
	}
	if (memcmp(hdr + 8, repo_id(r), CCRYPTO_REPO_ID_BYTES) != 0) {
		log_error("pack '%s' belongs to another repository", path);
		return (-1);
	}
	if (hex_decode(id, 16, name) ||
	    memcmp(hdr + 8 + CCRYPTO_REPO_ID_BYTES, id, 16) != 0) {
		log_error("pack '%s' has the id of another pack", path);
		return (-1);
	}
	return (0);
}

/* The error for a pack key that does not open (rc from unseal_epoch). */
void
rp_unseal_error(const char *path, uint32_t epoch, int rc)
{
	if (rc == CCRYPTO_NO_EPOCH)
		log_error("pack '%s' is sealed to key epoch %u, which this key "
		    "does not hold (retired?)", path, (unsigned)epoch);
	else
		log_error("pack '%s': header is damaged (its key does not "
		    "open)", path);
}

/*
 * Buffers outlive their pack.  A backup starts a pack every 64 MiB, and
 * restore and verify open each pack on every thread: fresh buffers each
 * time cost a page fault per 4 KiB put in them (bench/README.md).  So a
 * few finished ones wait here for the next writer or read.
 */
#define NSPARE 4
#define SPARE_CAP_MAX (8u << 20)
static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static struct buf spare[NSPARE];
static int nspare;

static void
spare_take(struct buf *b)
{
	pthread_mutex_lock(&spare_mu);
	if (nspare > 0)
		*b = spare[--nspare];
	else
		buf_init(b);
	pthread_mutex_unlock(&spare_mu);
	b->len = 0;
}

/* Keep b's memory for the next taker, or free it; b is left empty. */
static void
spare_give(struct buf *b)
{
	pthread_mutex_lock(&spare_mu);
	if (b->data != NULL && nspare < NSPARE && b->cap <= SPARE_CAP_MAX) {
		spare[nspare++] = *b;
		buf_init(b);
	}
	pthread_mutex_unlock(&spare_mu);
	buf_release(b);
}

static int make_durable(struct pack_writer *w);

static void *
io_main(void *arg)
{
	struct pack_writer *w = arg;

	thread_name("io");
	w->io_failed = make_durable(w) != 0;
	atomic_store(&w->io_done, 1);
	return (NULL);
}

/* Write the filled buffer, on the appending thread. */
static int
wflush(struct pack_writer *w)
{
	if (w->wbuf.len == 0)
		return (0);
	if (storage_put_write(w->put, w->wbuf.data, w->wbuf.len)) {
		w->failed = 1;
		return (-1);
	}
	buf_reset(&w->wbuf);
	return (0);
}

static int
wappend(struct pack_writer *w, const void *p, size_t n)
{
	w->size += n;
	if (w->wbuf.len + n > WBUF_SIZE && wflush(w))
		return (-1);
	if (buf_append(&w->wbuf, p, n)) {
		w->failed = 1;
		return (-1);
	}
	if (w->wbuf.len >= WBUF_SIZE && wflush(w))
		return (-1);
	return (0);
}

struct pack_writer *
pack_writer_new(struct repo *r)
{
	uint8_t hdr[PACK_HEADER_BYTES];
	struct pack_writer *w;

	if ((w = calloc(1, sizeof(*w))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	w->repo = r;
	spare_take(&w->wbuf);
	ccrypto_random(w->pack_id, sizeof(w->pack_id));
	hex_encode(w->name, w->pack_id, sizeof(w->pack_id));
	if ((w->key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    (w->ikey = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	if (ccrypto_index_key(repo_keys(r), repo_id(r), w->pack_id, w->ikey))
		goto err;
	if (repo_pack_stage(r, w->name, &w->put))
		goto err;
	ccrypto_random(w->key, CCRYPTO_KEY_BYTES);
	ccrypto_hash_init(repo_keys(r), &w->hash);

	memcpy(hdr, PACK_MAGIC, 4);
	hdr[4] = PACK_VERSION;
	memcpy(hdr + 8, repo_id(r), CCRYPTO_REPO_ID_BYTES);
	memcpy(hdr + 8 + CCRYPTO_REPO_ID_BYTES, w->pack_id, 16);
	rp_header_set_epoch(hdr, ccrypto_pack_key_seal(repo_keys(r), w->key,
	    hdr + SEALED_OFF));
	ccrypto_hash_update(&w->hash, hdr, sizeof(hdr));
	if (wappend(w, hdr, sizeof(hdr)))
		goto err;
	return (w);
err:
	pack_writer_free(w);
	return (NULL);
}

/* The index entry of the next record, at the current end of the pack. */
static struct pack_entry *
next_entry(struct pack_writer *w, const uint8_t *id, uint8_t type,
    uint8_t flags, uint32_t plain_len, uint32_t stored_len)
{
	struct pack_entry *ent;

	if (array_grow(&w->ents, &w->cap, w->nents, sizeof(*w->ents), 256))
		return (NULL);
	ent = &w->ents[w->nents];
	memcpy(ent->id, id, CCRYPTO_ID_BYTES);
	ent->type = type;
	ent->flags = flags;
	ent->offset = w->size;
	ent->plain_len = plain_len;
	ent->stored_len = stored_len;
	return (ent);
}

void
pack_writer_seal(const struct pack_writer *w, uint8_t type, uint8_t flags,
    const uint8_t id[CCRYPTO_ID_BYTES], const void *payload, size_t stored_len,
    uint32_t plain_len, uint8_t *out)
{
	uint8_t ad[RECORD_AD_BYTES];

	out[0] = type;
	out[1] = flags;
	put_u32(out + 2, plain_len);
	put_u32(out + 6, (uint32_t)stored_len);
	record_ad(ad, w->repo, id, type, flags, plain_len);
	/* The view is for every key to read, like the index. */
	ccrypto_aead_encrypt(type == PACK_REC_VIEW ? w->ikey : w->key,
	    out + 10, ad, sizeof(ad), payload, stored_len,
	    out + PACK_RECORD_HEADER_BYTES);
}

int
pack_writer_append(struct pack_writer *w, const uint8_t id[CCRYPTO_ID_BYTES],
    const uint8_t *rec, size_t len, struct pack_entry *e)
{
	struct pack_entry *ent;
	uint32_t stored;

	if (w->failed)
		return (-1);
	stored = get_u32(rec + 6);
	if (len < PACK_RECORD_HEADER_BYTES + CCRYPTO_TAG_BYTES ||
	    stored > PACK_RECORD_MAX || len != PACK_RECORD_SIZE(stored)) {
		log_error("internal error: bad sealed record");
		return (-1);
	}
	if ((ent = next_entry(w, id, rec[0], rec[1], get_u32(rec + 2),
	    stored)) == NULL || wappend(w, rec, len))
		return (-1);
	w->nents++;
	if (e)
		*e = *ent;
	return (0);
}

int
pack_writer_add(struct pack_writer *w, uint8_t type, uint8_t flags,
    const uint8_t id[CCRYPTO_ID_BYTES], const void *payload, size_t stored_len,
    uint32_t plain_len, struct pack_entry *e)
{
	struct pack_entry *ent;
	size_t len = PACK_RECORD_SIZE(stored_len);

	if (w->failed)
		return (-1);
	if (stored_len > PACK_RECORD_MAX) {
		log_error("record of %zu bytes is too large for a pack",
		    stored_len);
		return (-1);
	}
	if ((ent = next_entry(w, id, type, flags, plain_len,
	    (uint32_t)stored_len)) == NULL)
		return (-1);
	/* Seal straight into the write buffer: no extra copy. */
	if (w->wbuf.len + len > WBUF_SIZE && wflush(w))
		return (-1);
	if (buf_reserve(&w->wbuf, len)) {
		w->failed = 1;
		return (-1);
	}
	pack_writer_seal(w, type, flags, id, payload, stored_len, plain_len,
	    w->wbuf.data + w->wbuf.len);
	w->wbuf.len += len;
	w->size += len;
	if (w->wbuf.len >= WBUF_SIZE && wflush(w))
		return (-1);
	w->nents++;
	if (e)
		*e = *ent;
	return (0);
}

uint64_t
pack_writer_size(const struct pack_writer *w)
{
	return (w->size);
}

const char *
pack_writer_name(const struct pack_writer *w)
{
	return (w->name);
}

uint32_t
pack_writer_count(const struct pack_writer *w)
{
	return ((uint32_t)w->nents);
}

int
pack_writer_finish_start(struct pack_writer *w)
{
	uint8_t nonce[CCRYPTO_NONCE_BYTES], ad[4 + CCRYPTO_REPO_ID_BYTES + 16];
	uint8_t tail[8], mac[PACK_MAC_BYTES];
	struct ccrypto_hash_state mh;
	struct buf idx = BUF_INIT, ct = BUF_INIT;
	size_t i;
	int rc = -1;

	if (w->failed)
		return (-1);
	if (buf_put_u32(&idx, (uint32_t)w->nents))
		goto out;
	for (i = 0; i < w->nents; i++) {
		struct pack_entry *e = &w->ents[i];

		if (buf_append(&idx, e->id, CCRYPTO_ID_BYTES) ||
		    buf_put_u8(&idx, e->type) || buf_put_u8(&idx, e->flags) ||
		    buf_put_u64(&idx, e->offset) ||
		    buf_put_u32(&idx, e->plain_len) ||
		    buf_put_u32(&idx, e->stored_len))
			goto out;
	}
	if (buf_reserve(&ct, idx.len + CCRYPTO_TAG_BYTES))
		goto out;
	index_ad(ad, w->repo, w->pack_id);
	ccrypto_aead_encrypt(w->ikey, nonce, ad, sizeof(ad), idx.data, idx.len,
	    ct.data);
	ct.len = idx.len + CCRYPTO_TAG_BYTES;
	put_u32(tail, (uint32_t)(sizeof(nonce) + ct.len));
	memcpy(tail + 4, INDEX_MAGIC, 4);
	mac_start(w->repo, w->pack_id, w->key, &mh);
	ccrypto_hash_update(&mh, nonce, sizeof(nonce));
	ccrypto_hash_update(&mh, ct.data, ct.len);
	ccrypto_hash_update(&mh, tail, 4);
	ccrypto_hash_final(&mh, mac);
	ccrypto_hash_update(&w->hash, nonce, sizeof(nonce));
	ccrypto_hash_update(&w->hash, ct.data, ct.len);
	ccrypto_hash_update(&w->hash, mac, sizeof(mac));
	ccrypto_hash_update(&w->hash, tail, sizeof(tail));
	if (wappend(w, nonce, sizeof(nonce)) || wappend(w, ct.data, ct.len) ||
	    wappend(w, mac, sizeof(mac)) || wappend(w, tail, sizeof(tail)) ||
	    wflush(w))
		goto out;
	spare_give(&w->wbuf);	/* empty now */
	memcpy(w->info.name, w->name, sizeof(w->info.name));
	w->info.size = w->size;
	w->info.count = (uint32_t)w->nents;
	ccrypto_hash_final(&w->hash, w->info.hash);
	if (pthread_create(&w->io, NULL, io_main, w)) {
		log_error("cannot start a thread to make pack '%s' durable",
		    w->name);
		goto out;
	}
	w->io_running = 1;
	rc = 0;
out:
	if (rc)
		w->failed = 1;
	buf_release(&idx);
	buf_release(&ct);
	return (rc);
}

int
pack_writer_finish_wait(struct pack_writer *w, struct pack_info *info)
{
	int failed;

	if (w->failed || !w->io_running)
		return (-1);
	pthread_join(w->io, NULL);
	w->io_running = 0;
	failed = w->io_failed;
	if (failed) {
		w->failed = 1;
		return (-1);
	}
	if (info)
		*info = w->info;
	return (0);
}

int
pack_writer_finish_ready(struct pack_writer *w)
{
	if (w->failed || !w->io_running)
		return (0);
	return (atomic_load(&w->io_done));
}

int
pack_writer_finish(struct pack_writer *w, struct pack_info *info)
{
	if (pack_writer_finish_start(w))
		return (-1);
	return (pack_writer_finish_wait(w, info));
}

/* Durability order (doc/design.md): on the writer's thread. */
static int
make_durable(struct pack_writer *w)
{
	struct storage_put *p = w->put;

	/* The put is freed, committed or not. */
	w->put = NULL;
	return (storage_put_commit(p));
}

void
pack_writer_free(struct pack_writer *w)
{
	if (w == NULL)
		return;
	/* A pack being made durable is left to end: its publication is
	 * harmless, as any pack no record names is to prune. */
	if (w->io_running)
		pthread_join(w->io, NULL);
	storage_put_abort(w->put);
	ccrypto_secret_free(w->key);
	ccrypto_secret_free(w->ikey);
	spare_give(&w->wbuf);
	free(w->ents);
	free(w);
}

int
pack_cached(const struct repo *r, const char *name, uint64_t off,
    uint64_t len)
{
	char obj[RP_PACK_OBJ_MAX];
	struct storage_obj *o;
	uint64_t size;
	int cached;

	if (len == 0 || !storage_knows_cached(r->st) ||
	    rp_pack_object(name, obj, 1))
		return (0);
	/* A hint: a pack that does not open is a warning here, and an
	 * error where it is read. */
	log_hold();
	cached = storage_open(r->st, obj, &o, &size);
	log_release(1);
	if (cached != 0)
		return (0);
	cached = storage_cached(o, off, len);
	storage_obj_close(o);
	return (cached);
}

/*
 * Check the pack's MAC (mac_start) once its key is known, before anything
 * else in it is read: the index trailer is hashed in pieces, so a forged
 * pack costs a read of its trailer and no memory in proportion to it.
 * The pack hash (struct pack_info) is computed on the way.  Opened for
 * its index only (no pack key: a write-only key), there is no MAC to
 * check: the index's own seal under the index key authenticates it.  0
 * or -1 (reported).
 */
static int
trailer_check(struct pack_reader *p)
{
	uint8_t end[TRAILER_END], mac[PACK_MAC_BYTES], *piece;
	struct ccrypto_hash_state m, h;
	uint64_t at, left;
	uint32_t len;
	size_t n;
	int rc = -1;

	if (p->size < PACK_HEADER_BYTES + TRAILER_END ||
	    storage_read_all(p->obj, p->size - sizeof(end), end, sizeof(end)))
		goto bad;
	len = get_u32(end + PACK_MAC_BYTES);
	if (memcmp(end + PACK_MAC_BYTES + 4, INDEX_MAGIC, 4) != 0 ||
	    len < CCRYPTO_NONCE_BYTES + CCRYPTO_TAG_BYTES + 4 ||
	    len > p->size - PACK_HEADER_BYTES - sizeof(end))
		goto bad;
	if ((piece = malloc(MAC_PIECE)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if (p->key != NULL)
		mac_start(p->repo, p->pack_id, p->key, &m);
	ccrypto_hash_init(repo_keys(p->repo), &h);
	ccrypto_hash_update(&h, p->hdr, sizeof(p->hdr));
	at = p->size - sizeof(end) - len;
	for (left = len; left > 0; left -= n, at += n) {
		n = left < MAC_PIECE ? (size_t)left : MAC_PIECE;
		if (storage_read_all(p->obj, at, piece, n))
			goto out;
		if (p->key != NULL)
			ccrypto_hash_update(&m, piece, n);
		ccrypto_hash_update(&h, piece, n);
	}
	if (p->key != NULL) {
		ccrypto_hash_update(&m, end + PACK_MAC_BYTES, 4);
		ccrypto_hash_final(&m, mac);
	}
	if (p->key != NULL && !ccrypto_equal(mac, end, PACK_MAC_BYTES)) {
		log_error("pack '%s' failed authentication: not written with "
		    "this repository's keys (forged or damaged)", p->path);
		goto out;
	}
	ccrypto_hash_update(&h, end, sizeof(end));
	ccrypto_hash_final(&h, p->hash);
	p->have_hash = 1;
	memcpy(p->mac, end, PACK_MAC_BYTES);
	p->index_len = len;
	rc = 0;
out:
	free(piece);
	return (rc);
bad:
	log_error("pack '%s': index trailer is damaged (truncated?)",
	    p->path);
	return (-1);
}

/* with_key: unseal the pack key (a full key); else the index only, and
 * the index and view records only (the index key).  gone: not NULL, a
 * missing pack is not reported but said there. */
static struct pack_reader *
reader_open(struct repo *r, const char *name, int with_key, int *gone)
{
	uint8_t hdr[PACK_HEADER_BYTES], id[16];
	char obj[RP_PACK_OBJ_MAX];
	struct pack_reader *p;
	uint32_t epoch;
	int rc;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	p->repo = r;
	if (rp_pack_object(name, obj, 0) || hex_decode(id, 16, name))
		goto err;
	memcpy(p->name, name, PACK_NAME_LEN + 1);
	if ((p->path = repo_pack_path(r, name)) == NULL ||
	    (rc = storage_open(r->st, obj, &p->obj, &p->size)) < 0)
		goto err;
	if (rc == STORAGE_MISSING) {
		if (gone != NULL)
			*gone = 1;
		else
			log_error("pack '%s' is missing", p->path);
		goto err;
	}
	if (p->size < sizeof(hdr)) {
		log_error("pack '%s' is truncated", p->path);
		goto err;
	}
	if (storage_read_all(p->obj, 0, hdr, sizeof(hdr)))
		goto err;
	memcpy(p->hdr, hdr, sizeof(hdr));
	if (rp_header_check(r, hdr, name, p->path, &epoch))
		goto err;
	memcpy(p->pack_id, hdr + 8 + CCRYPTO_REPO_ID_BYTES, 16);
	if ((p->ikey = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    ccrypto_index_key(repo_keys(r), repo_id(r), p->pack_id, p->ikey))
		goto err;
	if (!with_key) {
		if (trailer_check(p))
			goto err;
		return (p);
	}
	if ((p->key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	/* Callers ask engine_need_read first; this names the cause if not. */
	if (ccrypto_keys_write_only(repo_keys(r))) {
		log_error("pack '%s': not read: this key is write-only",
		    p->path);
		goto err;
	}
	if ((rc = ccrypto_pack_key_unseal_epoch(repo_keys(r), epoch,
	    hdr + SEALED_OFF, p->key)) != 0) {
		/* A header torn by a rewrap cut short: its intent has both. */
		if (rc == -1 && rp_intent_header(r, name, p->hdr, &epoch,
		    p->key) == 0)
			log_warn("pack '%s': its header was torn by a key "
			    "rewrap cut short; read through the rewrap intent "
			    "(the next writer mends it)", p->path);
		else {
			rp_unseal_error(p->path, epoch, rc);
			goto err;
		}
	}
	if (trailer_check(p))
		goto err;
	return (p);
err:
	pack_reader_close(p);
	return (NULL);
}

struct pack_reader *
pack_reader_open(struct repo *r, const char *name)
{
	return (reader_open(r, name, 1, NULL));
}

struct pack_reader *
pack_reader_open_index(struct repo *r, const char *name)
{
	return (reader_open(r, name, !ccrypto_keys_write_only(repo_keys(r)),
	    NULL));
}

struct pack_reader *
pack_reader_open_listed(struct repo *r, const char *name, int index_only,
    int *gone)
{
	*gone = 0;
	return (reader_open(r, name, !index_only ||
	    !ccrypto_keys_write_only(repo_keys(r)), gone));
}

/*
 * A data record holds one chunk, which the chunker cuts at its max (at
 * most 64 MiB): a larger plain length is refused before anything is
 * reserved for it.  Snapshot and journal records may be larger (up to
 * PACK_RECORD_MAX).
 */
static int
record_too_large(const struct pack_reader *p, const struct pack_entry *e)
{
	return (e->type == PACK_REC_DATA &&
	    e->plain_len > repo_chunker_params(p->repo)->max);
}

/*
 * The record is read into a spare buffer taken for this call only (a
 * reader holds no memory between reads: restore keeps several open per
 * thread), and a compressed one is decrypted in place there.  With
 * check_id, the plaintext is hashed and compared with e->id.
 */
enum { READ_PLAIN, READ_UNHASHED, READ_STORED };

static int
read_record(struct pack_reader *p, const struct pack_entry *e,
    struct compressor *z, uint8_t *out, int how)
{
	uint8_t ad[RECORD_AD_BYTES], id[CCRYPTO_ID_BYTES];
	struct compressor *own = NULL;
	const uint8_t *key;
	struct buf ct;
	uint8_t *rh;
	uint64_t need;
	size_t ctlen;
	int rc = -1;

	if (e->stored_len > PACK_RECORD_MAX || e->plain_len > PACK_RECORD_MAX ||
	    record_too_large(p, e)) {
		rec_error(p, "pack '%s': record at offset %llu is too large",
		    p->path, (unsigned long long)e->offset);
		return (-1);
	}
	ctlen = (size_t)e->stored_len + CCRYPTO_TAG_BYTES;
	need = PACK_RECORD_HEADER_BYTES + (uint64_t)ctlen;
	if (e->offset < PACK_HEADER_BYTES || e->offset > p->size ||
	    need > p->size - e->offset) {
		rec_error(p, "pack '%s': record at offset %llu lies beyond the "
		    "end of the pack (truncated?)", p->path,
		    (unsigned long long)e->offset);
		return (-1);
	}
	spare_take(&ct);
	if (buf_reserve(&ct, (size_t)need) ||
	    storage_read_all(p->obj, e->offset, ct.data, (size_t)need))
		goto out;
	rh = ct.data;
	if (rh[0] != e->type || rh[1] != e->flags ||
	    get_u32(rh + 2) != e->plain_len ||
	    get_u32(rh + 6) != e->stored_len) {
		rec_error(p, "pack '%s': record at offset %llu: header does not "
		    "match the index", p->path, (unsigned long long)e->offset);
		goto out;
	}
	record_ad(ad, p->repo, e->id, e->type, e->flags, e->plain_len);
	if ((key = e->type == PACK_REC_VIEW ? p->ikey : p->key) == NULL) {
		rec_error(p, "pack '%s': record at offset %llu: not read: this "
		    "key is write-only", p->path,
		    (unsigned long long)e->offset);
		goto out;
	}
	if (how == READ_STORED) {
		/* Authenticated, still compressed: for copying it into
		 * another pack (prune) without recompressing. */
		if (ccrypto_aead_decrypt(key, rh + 10, ad, sizeof(ad),
		    rh + PACK_RECORD_HEADER_BYTES, ctlen, out))
			goto auth;
		rc = 0;
		goto out;
	}
	if (e->flags & PACK_FLAG_ZSTD) {
		uint8_t *payload = rh + PACK_RECORD_HEADER_BYTES;

		if (ccrypto_aead_decrypt(key, rh + 10, ad, sizeof(ad),
		    payload, ctlen, payload))
			goto auth;
		if (z == NULL && (own = z = compressor_new(1)) == NULL)
			goto out;
		if (compressor_decompress(z, payload, e->stored_len, out,
		    e->plain_len)) {
			rec_error(p, "pack '%s': record at offset %llu does not "
			    "decompress", p->path,
			    (unsigned long long)e->offset);
			goto out;
		}
	} else {
		if (e->plain_len != e->stored_len) {
			rec_error(p, "pack '%s': record at offset %llu has "
			    "inconsistent lengths", p->path,
			    (unsigned long long)e->offset);
			goto out;
		}
		if (ccrypto_aead_decrypt(key, rh + 10, ad, sizeof(ad),
		    rh + PACK_RECORD_HEADER_BYTES, ctlen, out))
			goto auth;
	}
	if (how == READ_PLAIN) {
		ccrypto_chunk_id(repo_keys(p->repo), out, e->plain_len, id);
		if (memcmp(id, e->id, CCRYPTO_ID_BYTES) != 0) {
			rec_error(p, "pack '%s': record at offset %llu: content "
			    "does not match its id", p->path,
			    (unsigned long long)e->offset);
			goto out;
		}
	}
	rc = 0;
	goto out;
auth:
	rec_error(p, "pack '%s': record at offset %llu failed authentication "
	    "(damaged or tampered with)", p->path,
	    (unsigned long long)e->offset);
out:
	compressor_free(own);
	spare_give(&ct);
	return (rc);
}

int
pack_reader_read(struct pack_reader *p, const struct pack_entry *e,
    struct compressor *z, uint8_t *out)
{
	return (read_record(p, e, z, out, READ_PLAIN));
}

int
pack_reader_read_unhashed(struct pack_reader *p,
    const struct pack_entry *e, struct compressor *z, uint8_t *out)
{
	return (read_record(p, e, z, out, READ_UNHASHED));
}

int
pack_reader_get_stored(struct pack_reader *p, const struct pack_entry *e,
    struct buf *out)
{
	buf_reset(out);
	if (e->stored_len > PACK_RECORD_MAX) {
		rec_error(p, "pack '%s': record at offset %llu is too large",
		    p->path, (unsigned long long)e->offset);
		return (-1);
	}
	if (buf_reserve(out, e->stored_len) ||
	    read_record(p, e, NULL, out->data, READ_STORED))
		return (-1);
	out->len = e->stored_len;
	return (0);
}

void
pack_report_mismatch(const char *pack, uint64_t offset)
{
	log_error("pack '%s': record at offset %llu: content does not match "
	    "its id", pack, (unsigned long long)offset);
}

/*
 * A compressed record that declares more than this is first
 * decompressed into its id check alone, in pieces, and its plain length
 * reserved only once the id matches: a zstd frame of a few KiB may
 * declare 1 GiB.  Snapshot parts and journal records are far smaller.
 */
#define STREAM_CHECK_MIN (16u << 20)

static int
hash_sink(void *arg, const void *p, size_t n)
{
	ccrypto_hash_update(arg, p, n);
	return (0);
}

static int
stream_check(struct pack_reader *p, const struct pack_entry *e,
    struct compressor *z)
{
	struct ccrypto_hash_state h;
	struct compressor *own = NULL;
	struct buf st = BUF_INIT;
	uint8_t id[CCRYPTO_ID_BYTES];
	int rc = -1;

	if (pack_reader_get_stored(p, e, &st))
		goto out;
	if (z == NULL && (own = z = compressor_new(1)) == NULL)
		goto out;
	ccrypto_hash_init(repo_keys(p->repo), &h);
	if (compressor_decompress_stream(z, st.data, st.len, e->plain_len,
	    hash_sink, &h)) {
		rec_error(p, "pack '%s': record at offset %llu does not "
		    "decompress", p->path, (unsigned long long)e->offset);
		goto out;
	}
	ccrypto_hash_final(&h, id);
	if (memcmp(id, e->id, CCRYPTO_ID_BYTES) != 0) {
		rec_error(p, "pack '%s': record at offset %llu: content does "
		    "not match its id", p->path,
		    (unsigned long long)e->offset);
		goto out;
	}
	rc = 0;
out:
	compressor_free(own);
	buf_release(&st);
	return (rc);
}

int
pack_reader_get(struct pack_reader *p, const struct pack_entry *e,
    struct compressor *z, struct buf *out)
{
	buf_reset(out);
	if (e->plain_len > PACK_RECORD_MAX || record_too_large(p, e)) {
		rec_error(p, "pack '%s': record at offset %llu is too large",
		    p->path, (unsigned long long)e->offset);
		return (-1);
	}
	if ((e->flags & PACK_FLAG_ZSTD) && e->plain_len > STREAM_CHECK_MIN &&
	    stream_check(p, e, z))
		return (-1);
	if (buf_reserve(out, e->plain_len))
		return (-1);
	if (pack_reader_read(p, e, z, out->data))
		return (-1);
	out->len = e->plain_len;
	return (0);
}

/*
 * The records an index names must follow one another in the pack, as a
 * writer appends them, between the header and the trailer: no two
 * overlap, so that no byte of the pack is read for two records (a forged
 * index could otherwise name one record a million times).  One pass.
 */
static int
index_check(const struct pack_reader *p, const struct pack_entry *v,
    uint32_t count)
{
	uint64_t next = PACK_HEADER_BYTES, end, len;
	uint32_t i;

	end = p->size - TRAILER_END - p->index_len;
	for (i = 0; i < count; i++) {
		len = PACK_RECORD_HEADER_BYTES + (uint64_t)v[i].stored_len +
		    CCRYPTO_TAG_BYTES;
		if (v[i].offset < next || v[i].offset > end ||
		    len > end - v[i].offset ||
		    v[i].stored_len > PACK_RECORD_MAX ||
		    v[i].plain_len > PACK_RECORD_MAX) {
			log_error("pack '%s': index is damaged (record %u at "
			    "offset %llu overlaps another or lies outside "
			    "the records)", p->path, (unsigned)i,
			    (unsigned long long)v[i].offset);
			return (-1);
		}
		next = v[i].offset + len;
	}
	return (0);
}

int
pack_reader_index(struct pack_reader *p, struct pack_entry **ents,
    size_t *n)
{
	uint8_t end[TRAILER_END], mac[PACK_MAC_BYTES];
	uint8_t ad[4 + CCRYPTO_REPO_ID_BYTES + 16];
	struct ccrypto_hash_state m;
	struct pack_entry *v = NULL;
	struct buf ct = BUF_INIT, pt = BUF_INIT;
	struct reader rd;
	uint32_t len, count, i;

	/* The trailer the MAC was checked on when the pack was opened,
	 * checked again in memory: the file may have changed since. */
	len = p->index_len;
	if (storage_read_all(p->obj, p->size - sizeof(end), end, sizeof(end)))
		goto err;
	if (get_u32(end + PACK_MAC_BYTES) != len ||
	    (p->key != NULL && !ccrypto_equal(end, p->mac, PACK_MAC_BYTES)))
		goto changed;
	if (buf_reserve(&ct, len) || buf_reserve(&pt, len))
		goto err;
	if (storage_read_all(p->obj, p->size - sizeof(end) - len, ct.data,
	    len))
		goto err;
	if (p->key != NULL) {
		mac_start(p->repo, p->pack_id, p->key, &m);
		ccrypto_hash_update(&m, ct.data, len);
		ccrypto_hash_update(&m, end + PACK_MAC_BYTES, 4);
		ccrypto_hash_final(&m, mac);
		if (!ccrypto_equal(mac, p->mac, PACK_MAC_BYTES))
			goto changed;
	}
	index_ad(ad, p->repo, p->pack_id);
	if (ccrypto_aead_decrypt(p->ikey, ct.data, ad, sizeof(ad),
	    ct.data + CCRYPTO_NONCE_BYTES, len - CCRYPTO_NONCE_BYTES,
	    pt.data)) {
		log_error("pack '%s': index failed authentication", p->path);
		goto err;
	}
	pt.len = len - CCRYPTO_NONCE_BYTES - CCRYPTO_TAG_BYTES;
	reader_init(&rd, pt.data, pt.len);
	if (reader_u32(&rd, &count) ||
	    (uint64_t)count * INDEX_ENTRY_BYTES != rd.len)
		goto bad;
	if (count && (v = calloc(count, sizeof(*v))) == NULL) {
		log_error("out of memory");
		goto err;
	}
	for (i = 0; i < count; i++) {
		reader_copy(&rd, v[i].id, CCRYPTO_ID_BYTES);
		reader_u8(&rd, &v[i].type);
		reader_u8(&rd, &v[i].flags);
		reader_u64(&rd, &v[i].offset);
		reader_u32(&rd, &v[i].plain_len);
		reader_u32(&rd, &v[i].stored_len);
	}
	if (rd.err)
		goto bad;
	if (index_check(p, v, count))
		goto err;
	*ents = v;
	*n = count;
	buf_release(&ct);
	buf_release(&pt);
	return (0);
changed:
	log_error("pack '%s' changed while it was read (its trailer no "
	    "longer authenticates)", p->path);
	goto err;
bad:
	log_error("pack '%s': index is damaged", p->path);
err:
	free(v);
	buf_release(&ct);
	buf_release(&pt);
	return (-1);
}

void
pack_reader_set_quiet(struct pack_reader *p, int quiet)
{
	p->quiet = quiet;
}

const uint8_t *
pack_reader_hash(const struct pack_reader *p)
{
	return (p->have_hash ? p->hash : NULL);
}

uint64_t
pack_reader_size(const struct pack_reader *p)
{
	return (p->size);
}

const char *
pack_reader_name(const struct pack_reader *p)
{
	return (p->name);
}

void
pack_reader_close(struct pack_reader *p)
{
	if (p == NULL)
		return;
	storage_obj_close(p->obj);
	ccrypto_secret_free(p->key);
	ccrypto_secret_free(p->ikey);
	free(p->path);
	free(p);
}

/*
 * Whether key is pack name's own: the pack's MAC, which covers its key,
 * checks under it (a header from a rewrap intent could seal any key).
 * hdr is a header of the pack that seals key.  0 yes (or the pack is
 * gone: pruned since), -1 no or unreadable (reported).
 */
int
rp_pack_key_is_own(struct repo *r, const char *name, const char *path,
    const uint8_t *hdr, uint8_t *key)
{
	char obj[RP_PACK_OBJ_MAX];
	struct pack_reader p;
	int rc;

	memset(&p, 0, sizeof(p));
	p.repo = r;
	memcpy(p.name, name, PACK_NAME_LEN + 1);
	p.path = (char *)path;
	p.key = key;
	memcpy(p.hdr, hdr, PACK_HEADER_BYTES);
	memcpy(p.pack_id, hdr + 8 + CCRYPTO_REPO_ID_BYTES, 16);
	if (rp_pack_object(name, obj, 0) ||
	    (rc = storage_open(r->st, obj, &p.obj, &p.size)) < 0)
		return (-1);
	if (rc == STORAGE_MISSING)
		return (0);
	rc = trailer_check(&p);
	storage_obj_close(p.obj);
	return (rc);
}
