/*
 * The journal: what the catalog knows that must outlive the host besides
 * snapshots (drill results, failed and interrupted runs), written to the
 * repository as signed journal records, so that a catalog rebuilt on a
 * new host (engine_sync) shows the same drill history and the same failed
 * runs.
 *
 * journal record := "CFJN" | u8 version | Ed25519 signature | image
 * (catalog_journal_export), the signature over "coffer-journal\0" |
 * repository id | image: it cannot pass for a snapshot record, nor move to
 * another repository.
 *
 * A record is written by whoever holds the repository's writer lock: a
 * writer as it starts (engine_prepare_write), and a drill right after it
 * recorded its result when the lock is free; otherwise the rows wait in
 * the catalog for the next writer.  Each record goes in a pack of its own
 * (a few hundred bytes), and prune merges such packs into one record of
 * every row once there are many (prune.c), so that hourly runs do not
 * leave thousands of them.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/catalog-journal.h"
#include "coffer/engine.h"
#include "coffer/log.h"
#include "engine-int.h"

#define JOURNAL_MAGIC "CFJN"
#define JOURNAL_VERSION 1
#define JOURNAL_HEADER (4 + 1 + CCRYPTO_SIG_BYTES)

static const char journal_ctx[] = "coffer-journal";

static int
signed_message(struct buf *msg, const struct repo *r, const uint8_t *img,
    size_t len)
{
	buf_reset(msg);
	return (buf_append(msg, journal_ctx, sizeof(journal_ctx)) ||
	    buf_append(msg, repo_id(r), CCRYPTO_REPO_ID_BYTES) ||
	    buf_append(msg, img, len) ? -1 : 0);
}

int
journal_record_open(const struct repo *r, const uint8_t *rec, size_t len,
    struct buf *scratch, const uint8_t **img, size_t *imglen,
    const char **why)
{
	if (len <= JOURNAL_HEADER || memcmp(rec, JOURNAL_MAGIC, 4) != 0 ||
	    rec[4] != JOURNAL_VERSION) {
		*why = "is malformed";
		return (0);
	}
	if (signed_message(scratch, r, rec + JOURNAL_HEADER,
	    len - JOURNAL_HEADER))
		return (-1);
	if (ccrypto_verify(repo_keys(r), scratch->data, scratch->len,
	    rec + 5)) {
		*why = "has a bad signature";
		return (0);
	}
	*img = rec + JOURNAL_HEADER;
	*imglen = len - JOURNAL_HEADER;
	return (1);
}

/*
 * The rows (all, or those not in the repository yet) as one signed record
 * in a pack of its own, durable; the catalog is not told (*info and *upto
 * say what to tell it).  *n 0: nothing to write, no pack.  0 or -1.
 */
int
journal_write(struct repo *r, struct catalog *c, int all,
    struct pack_info *info, struct catalog_journal_upto *upto, size_t *n)
{
	struct pack_writer *w = NULL;
	struct buf img = BUF_INIT, msg = BUF_INIT, rec = BUF_INIT;
	struct buf view = BUF_INIT;
	uint8_t sig[CCRYPTO_SIG_BYTES], id[CCRYPTO_ID_BYTES];
	int rc = -1;

	if (catalog_journal_export(c, all, &img, n, upto))
		return (-1);
	if (*n == 0) {
		rc = 0;
		goto out;
	}
	if (signed_message(&msg, r, img.data, img.len))
		goto out;
	ccrypto_sign(repo_keys(r), msg.data, msg.len, sig);
	if (buf_append(&rec, JOURNAL_MAGIC, 4) ||
	    buf_put_u8(&rec, JOURNAL_VERSION) ||
	    buf_append(&rec, sig, sizeof(sig)) ||
	    buf_append(&rec, img.data, img.len))
		goto out;
	if (rec.len > PACK_RECORD_MAX) {
		log_error("journal record is too large (%zu bytes)", rec.len);
		goto out;
	}
	ccrypto_chunk_id(repo_keys(r), rec.data, rec.len, id);
	/* The forgets in it, for write-only keys to read too (view.c). */
	if ((w = pack_writer_new(r)) == NULL ||
	    pack_writer_add(w, PACK_REC_JOURNAL, 0, id, rec.data, rec.len,
	    (uint32_t)rec.len, NULL) ||
	    view_note_forgotten(r, c, all, upto, &view) ||
	    view_note_journal(r, id, img.data, img.len, &view) ||
	    view_write(w, r, &view) || pack_writer_finish(w, info))
		goto out;
	rc = 0;
out:
	pack_writer_free(w);
	buf_release(&img);
	buf_release(&msg);
	buf_release(&rec);
	buf_release(&view);
	return (rc);
}

int
engine_journal_flush(struct repo *r, struct catalog *c)
{
	struct catalog_journal_upto upto;
	struct pack_info info;
	int64_t pack;
	size_t n;

	/* Durable first (doc/design.md's order), then the catalog says so. */
	if (journal_write(r, c, 0, &info, &upto, &n))
		return (-1);
	if (n == 0)
		return (0);
	if (catalog_begin(c))
		return (-1);
	if (catalog_pack_add(c, info.name, info.size, info.hash, &pack) ||
	    catalog_journal_mark(c, info.name, &upto) || catalog_commit(c)) {
		catalog_rollback(c);
		return (-1);
	}
	log_info("journal: %zu row%s written to pack %.12s", n,
	    n == 1 ? "" : "s", info.name);
	return (0);
}

static int
flush_try(struct repo *r, struct catalog *c)
{
	int held;

	if ((held = repo_lock_try(r)) <= 0)
		return (held < 0 ? -1 : 0);
	/* It writes the repository: the key that does goes with it, as for
	 * every writer (engine_prepare_write). */
	if (engine_key_use_add(r, c))
		return (-1);
	/* What a crashed writer left in tmp/ would be removed by the next
	 * backup; a new pack has a name of its own. */
	return (engine_journal_flush(r, c));
}

/*
 * The rows stay in the catalog for the next writer when this fails: the
 * command got over it, so what went wrong (the store's error, a lock
 * that could not be taken) is said as warnings, and the caller's
 * warning says what it means.
 */
int
engine_journal_flush_try(struct repo *r, struct catalog *c)
{
	int rc;

	(void)log_hold();
	rc = flush_try(r, c);
	log_release(1);
	return (rc);
}
