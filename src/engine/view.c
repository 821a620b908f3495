/*
 * View records (doc/format.md, "View record"): what every key may read of
 * a pack besides its index, sealed like the index under the pack's index
 * key.  A write-only key reads no snapshot or journal record, yet needs
 * to know which snapshots exist, where each dataset is backed up from,
 * and which snapshots the authority forgot: to check a backup's source,
 * to list what an export carries, to stop deduplicating against what
 * prune removes.  File names and contents stay in the records.
 *
 *   view := "CFVW" | u8 version 1 | item*
 *   item := u8 kind | u32 length | body
 *   kind 1, a snapshot whose record's head is in this pack:
 *     sid[16] | parent sid[16] (zero for a full) | u8 level |
 *     u32 revision | u64 started_ns | u64 finished_ns |
 *     str dataset | str host | str source        (str := u16 n | bytes)
 *   kind 2, forgotten snapshots, signed by the authority (full keys
 *   only: forgetting is not appending):
 *     u32 n | n x (sid[16] | u64 time_ns) | signature[64] over the rest
 *     ("coffer-forgotten" context)
 *   kind 3, a journal record of this pack signed by the authority:
 *     record id[32] | signature[64] over its image ("coffer-journal-auth"
 *     context); its drills and verifies count (full keys read them)
 *   kind 4, packs a prune condemned (doc/design.md, "Many writers"),
 *   signed by the authority:
 *     u64 time_ns | u32 n | n x pack name[16] | signature[64] over the
 *     rest ("coffer-condemned" context)
 *
 * An item of a kind this coffer does not know is skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/catalog-journal.h"
#include "coffer/catalog-known.h"
#include "coffer/engine.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "engine-int.h"

#define VIEW_MAGIC "CFVW"
#define VIEW_VERSION 1
#define VIEW_STR_MAX 4096
#define VIEW_FORGOTTEN_CTX "coffer-forgotten"
#define VIEW_JOURNAL_CTX "coffer-journal-auth"
#define VIEW_CONDEMNED_CTX "coffer-condemned"

enum {
	ITEM_SNAPSHOT = 1, ITEM_FORGOTTEN = 2, ITEM_JOURNAL = 3,
	ITEM_CONDEMNED = 4
};

static int
put_str(struct buf *b, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (n > VIEW_STR_MAX)
		n = VIEW_STR_MAX;	/* a view, not the record */
	return (buf_put_u8(b, (uint8_t)(n & 0xff)) ||
	    buf_put_u8(b, (uint8_t)(n >> 8)) || buf_append(b, s, n) ? -1 : 0);
}

static int
put_sid(struct buf *b, const char *hex)
{
	uint8_t sid[SNAPSHOT_ID_HEX / 2];

	memset(sid, 0, sizeof(sid));
	if (hex != NULL && hex[0] != '\0' &&
	    hex_decode(sid, sizeof(sid), hex)) {
		log_error("internal error: bad snapshot id '%s'", hex);
		return (-1);
	}
	return (buf_append(b, sid, sizeof(sid)));
}

/* Item header with a length to fill in; returns its offset. */
static int
item_start(struct buf *b, uint8_t kind, size_t *at)
{
	if (b->len == 0 && (buf_append(b, VIEW_MAGIC, 4) ||
	    buf_put_u8(b, VIEW_VERSION)))
		return (-1);
	*at = b->len;
	return (buf_put_u8(b, kind) || buf_put_u32(b, 0) ? -1 : 0);
}

static void
item_end(struct buf *b, size_t at)
{
	put_u32(b->data + at + 1, (uint32_t)(b->len - at - 5));
}

int
view_note_snapshot(struct buf *v, const struct catalog_snapshot *s,
    uint32_t revision)
{
	size_t at;

	if (item_start(v, ITEM_SNAPSHOT, &at) || put_sid(v, s->sid) ||
	    put_sid(v, s->level == LEVEL_FULL ? NULL : s->parent_sid) ||
	    buf_put_u8(v, (uint8_t)s->level) || buf_put_u32(v, revision) ||
	    buf_put_u64(v, (uint64_t)s->started_ns) ||
	    buf_put_u64(v, (uint64_t)s->finished_ns) ||
	    put_str(v, s->dataset) || put_str(v, s->host) ||
	    put_str(v, s->source))
		return (-1);
	item_end(v, at);
	return (0);
}

struct forgot {
	struct buf *v;
	uint32_t n;
};

static int
forgot_one(void *arg, const char *sid, int64_t time_ns)
{
	struct forgot *f = arg;

	f->n++;
	return (put_sid(f->v, sid) || buf_put_u64(f->v, (uint64_t)time_ns));
}

int
view_note_forgotten(struct repo *r, struct catalog *c, int all,
    const struct catalog_journal_upto *upto, struct buf *v)
{
	uint8_t sig[CCRYPTO_SIG_BYTES];
	struct forgot f;
	size_t at, body, len0 = v->len;

	/* Only the authority forgets: a write-only key has none to sign. */
	if (ccrypto_keys_write_only(repo_keys(r)))
		return (0);
	if (item_start(v, ITEM_FORGOTTEN, &at) || buf_put_u32(v, 0))
		return (-1);
	body = at + 5;
	f.v = v;
	f.n = 0;
	if (catalog_journal_forgotten(c, all, upto, forgot_one, &f))
		return (-1);
	if (f.n == 0) {
		v->len = len0;
		return (0);
	}
	put_u32(v->data + body, f.n);
	if (ccrypto_auth_sign(repo_keys(r), VIEW_FORGOTTEN_CTX, repo_id(r),
	    v->data + body, v->len - body, sig) ||
	    buf_append(v, sig, sizeof(sig)))
		return (-1);
	item_end(v, at);
	return (0);
}

int
view_note_journal(struct repo *r, const uint8_t id[CCRYPTO_ID_BYTES],
    const uint8_t *img, size_t len, struct buf *v)
{
	uint8_t sig[CCRYPTO_SIG_BYTES];
	size_t at;

	if (ccrypto_keys_write_only(repo_keys(r)))
		return (0);
	if (ccrypto_auth_sign(repo_keys(r), VIEW_JOURNAL_CTX, repo_id(r), img,
	    len, sig) || item_start(v, ITEM_JOURNAL, &at) ||
	    buf_append(v, id, CCRYPTO_ID_BYTES) ||
	    buf_append(v, sig, sizeof(sig)))
		return (-1);
	item_end(v, at);
	return (0);
}

int
view_note_condemned(struct repo *r, int64_t time_ns, const char *const *packs,
    size_t n, struct buf *v)
{
	uint8_t sig[CCRYPTO_SIG_BYTES], name[PACK_NAME_LEN / 2];
	size_t at, body, i;

	if (n == 0)
		return (0);
	if (n > UINT32_MAX || time_ns <= 0) {
		log_error("cannot mark %zu packs", n);
		return (-1);
	}
	if (item_start(v, ITEM_CONDEMNED, &at) ||
	    buf_put_u64(v, (uint64_t)time_ns) || buf_put_u32(v, (uint32_t)n))
		return (-1);
	body = at + 5;
	for (i = 0; i < n; i++) {
		if (strlen(packs[i]) != PACK_NAME_LEN ||
		    hex_decode(name, sizeof(name), packs[i]) != 0) {
			log_error("bad pack name '%s'", packs[i]);
			return (-1);
		}
		if (buf_append(v, name, sizeof(name)))
			return (-1);
	}
	if (ccrypto_auth_sign(repo_keys(r), VIEW_CONDEMNED_CTX, repo_id(r),
	    v->data + body, v->len - body, sig) ||
	    buf_append(v, sig, sizeof(sig)))
		return (-1);
	item_end(v, at);
	return (0);
}

int
view_journal_signed(struct repo *r, const uint8_t *sig, const uint8_t *img,
    size_t len)
{
	return (ccrypto_auth_verify(repo_keys(r), VIEW_JOURNAL_CTX, repo_id(r),
	    img, len, sig) == 0);
}

int
view_write(struct pack_writer *w, struct repo *r, struct buf *v)
{
	uint8_t id[CCRYPTO_ID_BYTES];
	int rc;

	if (v->len == 0)
		return (0);
	ccrypto_chunk_id(repo_keys(r), v->data, v->len, id);
	rc = pack_writer_add(w, PACK_REC_VIEW, 0, id, v->data, v->len,
	    (uint32_t)v->len, NULL);
	buf_reset(v);
	return (rc);
}

static int
get_str(struct reader *rd, char **out)
{
	const uint8_t *p;
	uint8_t lo, hi;
	size_t n;

	*out = NULL;
	if (reader_u8(rd, &lo) || reader_u8(rd, &hi))
		return (-1);
	n = (size_t)lo | (size_t)hi << 8;
	if (n > VIEW_STR_MAX || reader_bytes(rd, n, &p) ||
	    memchr(p, '\0', n) != NULL || (*out = malloc(n + 1)) == NULL)
		return (-1);
	memcpy(*out, p, n);
	(*out)[n] = '\0';
	return (0);
}

static int
get_sid(struct reader *rd, char *hex)
{
	static const uint8_t zero[SNAPSHOT_ID_HEX / 2];
	const uint8_t *p;

	if (reader_bytes(rd, SNAPSHOT_ID_HEX / 2, &p))
		return (-1);
	if (memcmp(p, zero, sizeof(zero)) == 0)
		hex[0] = '\0';
	else
		hex_encode(hex, p, SNAPSHOT_ID_HEX / 2);
	return (0);
}

static int
parse_snapshot(struct reader *rd, const struct view_sink *sink)
{
	struct catalog_known k;
	char *dataset = NULL, *host = NULL, *source = NULL;
	uint64_t started, finished;
	uint8_t level;
	int rc = 1;

	memset(&k, 0, sizeof(k));
	if (get_sid(rd, k.sid) || get_sid(rd, k.parent_sid) ||
	    reader_u8(rd, &level) || reader_u32(rd, &k.revision) ||
	    reader_u64(rd, &started) || reader_u64(rd, &finished) ||
	    get_str(rd, &dataset) || get_str(rd, &host) ||
	    get_str(rd, &source) || rd->len != 0)
		goto out;
	if (k.sid[0] == '\0' || level > LEVEL_INCREMENTAL ||
	    (level == LEVEL_FULL) != (k.parent_sid[0] == '\0') ||
	    dataset[0] == '\0' || strpbrk(dataset, "@/") != NULL ||
	    started > INT64_MAX ||
	    finished > INT64_MAX)
		goto out;
	k.level = level;
	k.started_ns = (int64_t)started;
	k.finished_ns = (int64_t)finished;
	k.dataset = dataset;
	k.host = host;
	k.source = source;
	rc = sink->snapshot(sink->arg, &k) ? -1 : 0;
out:
	free(dataset);
	free(host);
	free(source);
	return (rc);
}

static int
parse_forgotten(struct repo *r, struct reader *rd,
    const struct view_sink *sink)
{
	const uint8_t *body = rd->p, *sig;
	char sid[SNAPSHOT_ID_HEX + 1];
	uint64_t t;
	uint32_t n, i;
	size_t len;

	if (reader_u32(rd, &n) ||
	    rd->len != (uint64_t)n * (SNAPSHOT_ID_HEX / 2 + 8) +
	    CCRYPTO_SIG_BYTES)
		return (1);
	len = rd->len - CCRYPTO_SIG_BYTES + 4;
	sig = body + len;
	/* Whoever writes the storage, or holds a write-only key, cannot
	 * make this signature: a forget without it is not one. */
	if (ccrypto_auth_verify(repo_keys(r), VIEW_FORGOTTEN_CTX, repo_id(r),
	    body, len, sig) != 0)
		return (2);
	for (i = 0; i < n; i++) {
		if (get_sid(rd, sid) || reader_u64(rd, &t) || sid[0] == '\0' ||
		    t > INT64_MAX)
			return (1);
		if (sink->forgotten(sink->arg, sid, (int64_t)t))
			return (-1);
	}
	return (0);
}

static int
parse_condemned(struct repo *r, struct reader *rd,
    const struct view_sink *sink)
{
	const uint8_t *body = rd->p, *sig, *name;
	char hex[PACK_NAME_LEN + 1];
	uint64_t t;
	uint32_t n, i;
	size_t len;

	if (reader_u64(rd, &t) || reader_u32(rd, &n) || t == 0 ||
	    t > INT64_MAX || rd->len != (uint64_t)n * (PACK_NAME_LEN / 2) +
	    CCRYPTO_SIG_BYTES)
		return (1);
	len = rd->len - CCRYPTO_SIG_BYTES + 12;
	sig = body + len;
	/* A mark makes every writer store again what the packs hold:
	 * only the authority (a full key's prune) makes one. */
	if (ccrypto_auth_verify(repo_keys(r), VIEW_CONDEMNED_CTX, repo_id(r),
	    body, len, sig) != 0)
		return (2);
	if (sink->condemned == NULL)
		return (0);
	for (i = 0; i < n; i++) {
		if (reader_bytes(rd, PACK_NAME_LEN / 2, &name))
			return (1);
		hex_encode(hex, name, PACK_NAME_LEN / 2);
		if (sink->condemned(sink->arg, hex, (int64_t)t))
			return (-1);
	}
	return (0);
}

int
view_parse(struct repo *r, const uint8_t *p, size_t len, const char *pack,
    const struct view_sink *sink)
{
	struct reader rd, item;
	const uint8_t *body;
	uint32_t n;
	uint8_t kind, version;
	int rc;

	reader_init(&rd, p, len);
	if (len < 5 || memcmp(p, VIEW_MAGIC, 4) != 0)
		goto bad;
	rd.p += 4;
	rd.len -= 4;
	if (reader_u8(&rd, &version) || version != VIEW_VERSION)
		goto bad;
	while (rd.len > 0) {
		if (reader_u8(&rd, &kind) || reader_u32(&rd, &n) ||
		    reader_bytes(&rd, n, &body))
			goto bad;
		reader_init(&item, body, n);
		if (kind == ITEM_SNAPSHOT)
			rc = parse_snapshot(&item, sink);
		else if (kind == ITEM_FORGOTTEN)
			rc = parse_forgotten(r, &item, sink);
		else if (kind == ITEM_CONDEMNED)
			rc = parse_condemned(r, &item, sink);
		else if (kind == ITEM_JOURNAL) {
			/* Checked against the record's image by the reader
			 * of the record (view_journal_signed). */
			if (item.len != CCRYPTO_ID_BYTES + CCRYPTO_SIG_BYTES)
				goto bad;
			rc = sink->journal == NULL ? 0 : sink->journal(
			    sink->arg, item.p, item.p + CCRYPTO_ID_BYTES);
			if (rc)
				return (-1);
		} else
			continue;
		if (rc < 0)
			return (-1);
		if (rc == 2) {
			log_warn("pack '%s': a %s not signed by a full key "
			    "(forged?): left out", pack, kind == ITEM_CONDEMNED ?
			    "prune's mark" : "forget");
			return (1);
		}
		if (rc == 1)
			goto bad;
	}
	return (0);
bad:
	log_warn("pack '%s': its view record is malformed: left out", pack);
	return (1);
}
