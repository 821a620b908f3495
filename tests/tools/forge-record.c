/*
 * forge-record REPO KEYFILE ID LEN: write a new pack into REPO holding one
 * raw data record of LEN bytes (0xa5) sealed under chunk id ID (64 hex
 * digits), and print "NAME OFFSET LEN SIZE" (the pack, the record's
 * offset and length, the pack's size).  The record authenticates, as only
 * a holder of the keys can make one, but its content is not what ID
 * hashes: what a bug or a misbehaving writer with the keys would leave,
 * and what the keyed hash, checked after decrypting, must catch.  Links
 * libcoffer (a rule of its own in the Makefile).
 *
 * forge-record swap-part REPO KEYFILE PACK_X PACK_Y IDX: read the head of
 * a snapshot record in parts from PACK_X (the last snapshot record
 * there), point its part IDX at part IDX of the head in PACK_Y, sign it
 * again with the repository's key and write it to a new pack; print the
 * pack's name.  A signed head that names another snapshot's part: what
 * only a writer with the keys could make, and what a reader must refuse,
 * part by part.  PACK_Y = PACK_X makes a good head again (a control).
 *
 * forge-record parts REPO KEYFILE PACK DIR: write the image of the last
 * snapshot record's head in PACK to DIR/head.db and the image of each part
 * it names to DIR/part-IDX.db, for sqlite3 to look into (a part must hold
 * every content it names, with all of that content's chunks).
 *
 * forge-record index REPO KEYFILE PACK: print "OFFSET TYPE STORED_LEN ID"
 * of each record in PACK's index (to find a record to damage).
 *
 * forge-record forget REPO KEYFILE CATALOG SID...: a journal record that
 * forgets each SID, signed with KEYFILE's signing key and written to a
 * new pack by coffer's own journal writer (CATALOG: a scratch catalog to
 * hold the rows): what a write-only key holder can make.  The authority's
 * signature it cannot make, so readers must not forget for it.
 *
 * forge-record drill REPO KEYFILE CATALOG DATASET SID: the same for a
 * drill of snapshot SID of DATASET that passed: a recovery test that
 * never ran, reported by a write-only key holder.
 * forge-record revise REPO KEYFILE PACK REV [bad-authority]: the last
 * snapshot record in PACK (a head of one part) as a record of revision
 * REV, one of its files left out (another tree), signed with the
 * repository's key alone, or, with bad-authority, as a record that claims
 * the authority's signature (its byte after the magic 2) but carries the
 * ordinary one there (what a write-only key can make); written to a new
 * pack, whose name is printed.  A reader must never let it replace the
 * snapshot.
 *
 * forge-record format REPO KEYFILE PACK N: the last snapshot record in
 * PACK (a head of one part) with its image's format row set to N, signed
 * with the repository's key, written to a new pack, whose name is
 * printed: a record of another format, which a reader must refuse,
 * named, not misread.
 *
 * forge-record conf REPO KEYFILE: coffer.conf of REPO, from standard input
 * (without its mac line), authenticated with KEYFILE's meta key and
 * written in place: what a write-only key can make of coffer.conf.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "coffer/buf.h"
#include "coffer/catalog-history.h"
#include "coffer/catalog-journal.h"
#include "coffer/catalog-prune.h"
#include "coffer/crypto.h"
#include "coffer/hex.h"
#include "coffer/repo.h"
#include "coffer/catalog.h"
#include "../../src/engine/engine-int.h"

#define REC_HEADER (4 + 1 + CCRYPTO_SIG_BYTES)
static const char record_ctx[] = "coffer-snapshot";

/* The repository at path, unlocked with the key file; NULL on error. */
static struct repo *
open_repo(const char *path, const char *keyfile)
{
	struct repo *r;

	if (ccrypto_init() || (r = repo_open(path)) == NULL)
		return (NULL);
	if (repo_unlock(r, keyfile, NULL, 0)) {
		repo_close(r);
		return (NULL);
	}
	return (r);
}

/* The image of the last snapshot record in pack name (malloc'd). */
static uint8_t *
read_head(struct repo *r, const char *name, size_t *len)
{
	struct pack_reader *pr;
	struct pack_entry *ents = NULL, *e = NULL;
	struct buf b = BUF_INIT;
	uint8_t *img = NULL;
	size_t i, n;

	if ((pr = pack_reader_open(r, name)) == NULL)
		return (NULL);
	if (pack_reader_index(pr, &ents, &n)) {
		pack_reader_close(pr);
		return (NULL);
	}
	for (i = 0; i < n; i++)
		if (ents[i].type == PACK_REC_SNAPSHOT)
			e = &ents[i];
	if (e != NULL && pack_reader_get(pr, e, NULL, &b) == 0 &&
	    b.len > REC_HEADER && (img = malloc(b.len - REC_HEADER)) != NULL) {
		*len = b.len - REC_HEADER;
		memcpy(img, b.data + REC_HEADER, *len);
	}
	buf_release(&b);
	free(ents);
	pack_reader_close(pr);
	return (img);
}

static sqlite3 *
open_image(const uint8_t *img, size_t len)
{
	sqlite3 *db;
	unsigned char *copy;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    (copy = sqlite3_malloc64(len)) == NULL)
		return (NULL);
	memcpy(copy, img, len);
	if (sqlite3_deserialize(db, "main", copy, (sqlite3_int64)len,
	    (sqlite3_int64)len, SQLITE_DESERIALIZE_FREEONCLOSE |
	    SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK)
		return (NULL);
	return (db);
}

static int
swap_part(int argc, char **argv)
{
	struct pack_writer *w;
	struct pack_entry e;
	struct pack_info info;
	struct repo *r;
	struct buf rec = BUF_INIT;
	sqlite3 *x, *y;
	sqlite3_stmt *get, *set;
	uint8_t *ix, *iy, *img, sig[CCRYPTO_SIG_BYTES], id[CCRYPTO_ID_BYTES];
	sqlite3_int64 size;
	size_t lx, ly;

	if (argc != 7) {
		fprintf(stderr, "usage: forge-record swap-part REPO KEYFILE "
		    "PACK_X PACK_Y IDX\n");
		return (2);
	}
	if ((r = open_repo(argv[2], argv[3])) == NULL)
		return (1);
	if ((ix = read_head(r, argv[4], &lx)) == NULL ||
	    (iy = read_head(r, argv[5], &ly)) == NULL ||
	    (x = open_image(ix, lx)) == NULL || (y = open_image(iy, ly)) == NULL)
		return (1);
	if (sqlite3_prepare_v2(y, "SELECT pack, rid FROM part WHERE idx = ?1",
	    -1, &get, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(x, "UPDATE part SET pack = ?1, rid = ?2"
	    " WHERE idx = ?3", -1, &set, NULL) != SQLITE_OK)
		return (1);
	sqlite3_bind_int64(get, 1, atoll(argv[6]));
	if (sqlite3_step(get) != SQLITE_ROW)
		return (1);
	sqlite3_bind_value(set, 1, sqlite3_column_value(get, 0));
	sqlite3_bind_value(set, 2, sqlite3_column_value(get, 1));
	sqlite3_bind_int64(set, 3, atoll(argv[6]));
	if (sqlite3_step(set) != SQLITE_DONE || sqlite3_changes(x) != 1)
		return (1);
	sqlite3_finalize(get);
	sqlite3_finalize(set);
	if ((img = sqlite3_serialize(x, "main", &size, 0)) == NULL)
		return (1);
	/* As packer.c signs: context, repository id, image. */
	if (buf_append(&rec, record_ctx, sizeof(record_ctx)) ||
	    buf_append(&rec, repo_id(r), CCRYPTO_REPO_ID_BYTES) ||
	    buf_append(&rec, img, (size_t)size))
		return (1);
	ccrypto_sign(repo_keys(r), rec.data, rec.len, sig);
	buf_reset(&rec);
	if (buf_append(&rec, "CFSN\1", 5) ||
	    buf_append(&rec, sig, sizeof(sig)) ||
	    buf_append(&rec, img, (size_t)size))
		return (1);
	ccrypto_chunk_id(repo_keys(r), rec.data, rec.len, id);
	if ((w = pack_writer_new(r)) == NULL ||
	    pack_writer_add(w, PACK_REC_SNAPSHOT, 0, id, rec.data, rec.len,
	    (uint32_t)rec.len, &e) || pack_writer_finish(w, &info))
		return (1);
	printf("%s\n", info.name);
	pack_writer_free(w);
	sqlite3_free(img);
	sqlite3_close(x);
	sqlite3_close(y);
	free(ix);
	free(iy);
	buf_release(&rec);
	repo_close(r);
	return (0);
}

/* Sign image x as packer.c does (with bad_auth, as a record that claims
 * the authority's signature and carries the ordinary one twice), write
 * it to a new pack and print the pack's name. */
static int
write_image(struct repo *r, sqlite3 *x, int bad_auth)
{
	struct pack_writer *w;
	struct pack_entry e;
	struct pack_info info;
	struct buf rec = BUF_INIT;
	uint8_t *img, sig[CCRYPTO_SIG_BYTES], id[CCRYPTO_ID_BYTES];
	sqlite3_int64 size;

	if ((img = sqlite3_serialize(x, "main", &size, 0)) == NULL)
		return (1);
	/* As packer.c signs: context, repository id, image. */
	if (buf_append(&rec, record_ctx, sizeof(record_ctx)) ||
	    buf_append(&rec, repo_id(r), CCRYPTO_REPO_ID_BYTES) ||
	    buf_append(&rec, img, (size_t)size))
		return (1);
	ccrypto_sign(repo_keys(r), rec.data, rec.len, sig);
	buf_reset(&rec);
	if (buf_append(&rec, bad_auth ? "CFSN\2" : "CFSN\1", 5) ||
	    buf_append(&rec, sig, sizeof(sig)) ||
	    (bad_auth && buf_append(&rec, sig, sizeof(sig))) ||
	    buf_append(&rec, img, (size_t)size))
		return (1);
	ccrypto_chunk_id(repo_keys(r), rec.data, rec.len, id);
	if ((w = pack_writer_new(r)) == NULL ||
	    pack_writer_add(w, PACK_REC_SNAPSHOT, 0, id, rec.data, rec.len,
	    (uint32_t)rec.len, &e) || pack_writer_finish(w, &info))
		return (1);
	printf("%s\n", info.name);
	pack_writer_free(w);
	sqlite3_free(img);
	buf_release(&rec);
	return (0);
}

/* Set meta key of image x to v. */
static int
set_meta(sqlite3 *x, const char *key, int64_t v)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(x, "INSERT OR REPLACE INTO meta VALUES"
	    " (?1, ?2)", -1, &st, NULL) != SQLITE_OK)
		return (1);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, v);
	rc = sqlite3_step(st) != SQLITE_DONE;
	sqlite3_finalize(st);
	return (rc);
}

static int
revise(int argc, char **argv)
{
	struct repo *r;
	sqlite3 *x;
	uint8_t *ih;
	size_t lh;
	int bad_auth, rc;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: forge-record revise REPO KEYFILE PACK "
		    "REV [bad-authority]\n");
		return (2);
	}
	bad_auth = argc == 7 && strcmp(argv[6], "bad-authority") == 0;
	if ((r = open_repo(argv[2], argv[3])) == NULL)
		return (1);
	if ((ih = read_head(r, argv[4], &lh)) == NULL ||
	    (x = open_image(ih, lh)) == NULL)
		return (1);
	if (set_meta(x, "revision", atoll(argv[5])))
		return (1);
	if (sqlite3_exec(x, "DELETE FROM entry WHERE path = (SELECT max(path)"
	    " FROM entry WHERE kind = 1)", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_changes(x) != 1)
		return (1);
	rc = write_image(r, x, bad_auth);
	sqlite3_close(x);
	free(ih);
	repo_close(r);
	return (rc);
}

static int
reformat(int argc, char **argv)
{
	struct repo *r;
	sqlite3 *x;
	uint8_t *ih;
	size_t lh;
	int rc;

	if (argc != 6) {
		fprintf(stderr, "usage: forge-record format REPO KEYFILE PACK "
		    "N\n");
		return (2);
	}
	if ((r = open_repo(argv[2], argv[3])) == NULL)
		return (1);
	if ((ih = read_head(r, argv[4], &lh)) == NULL ||
	    (x = open_image(ih, lh)) == NULL ||
	    set_meta(x, "format", atoll(argv[5])))
		return (1);
	rc = write_image(r, x, 0);
	sqlite3_close(x);
	free(ih);
	repo_close(r);
	return (rc);
}

static int
forge_conf(int argc, char **argv)
{
	uint8_t mac[CCRYPTO_MAC_BYTES], rid[CCRYPTO_REPO_ID_BYTES];
	char hex[2 * CCRYPTO_MAC_BYTES + 1], key[4096], path[4096];
	struct buf body = BUF_INIT;
	struct ccrypto_keys *k;
	size_t n;
	FILE *f;
	int c;

	if (argc != 4 || ccrypto_init()) {
		fprintf(stderr, "usage: forge-record conf REPO KEYFILE\n");
		return (2);
	}
	if ((f = fopen(argv[3], "r")) == NULL)
		return (1);
	n = fread(key, 1, sizeof(key), f);
	fclose(f);
	if ((k = ccrypto_keyfile_decode((uint8_t *)key, n, rid)) == NULL)
		return (1);
	while ((c = getchar()) != EOF)
		if (buf_put_u8(&body, (uint8_t)c))
			return (1);
	ccrypto_meta_mac(k, body.data, body.len, mac);
	hex_encode(hex, mac, sizeof(mac));
	snprintf(path, sizeof(path), "%s/coffer.conf", argv[2]);
	if ((f = fopen(path, "w")) == NULL ||
	    fwrite(body.data, 1, body.len, f) != body.len ||
	    fprintf(f, "mac %s\n", hex) < 0 || fclose(f))
		return (1);
	ccrypto_keys_free(k);
	buf_release(&body);
	return (0);
}

/* The record of id in pack name, its header cut off, into out. */
static int
read_record(struct repo *r, const char *name, const void *id, int idlen,
    struct buf *out)
{
	struct pack_reader *pr;
	struct pack_entry *ents = NULL;
	size_t i, n;
	int rc = -1;

	if (idlen != CCRYPTO_ID_BYTES || (pr = pack_reader_open(r, name)) ==
	    NULL)
		return (-1);
	if (pack_reader_index(pr, &ents, &n) == 0)
		for (i = 0; i < n; i++)
			if (memcmp(ents[i].id, id, CCRYPTO_ID_BYTES) == 0) {
				rc = pack_reader_get(pr, &ents[i], NULL, out);
				break;
			}
	free(ents);
	pack_reader_close(pr);
	return (rc == 0 && out->len > REC_HEADER ? 0 : -1);
}

static int
write_file(const char *dir, const char *base, const void *p, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, base);
	if ((f = fopen(path, "wb")) == NULL || fwrite(p, 1, len, f) != len ||
	    fclose(f) != 0)
		return (-1);
	return (0);
}

static int
dump_parts(int argc, char **argv)
{
	struct repo *r;
	struct buf rec = BUF_INIT;
	sqlite3 *head;
	sqlite3_stmt *st;
	uint8_t *img;
	char base[64];
	size_t len;

	if (argc != 6) {
		fprintf(stderr, "usage: forge-record parts REPO KEYFILE PACK "
		    "DIR\n");
		return (2);
	}
	if ((r = open_repo(argv[2], argv[3])) == NULL)
		return (1);
	if ((img = read_head(r, argv[4], &len)) == NULL ||
	    write_file(argv[5], "head.db", img, len) ||
	    (head = open_image(img, len)) == NULL ||
	    sqlite3_prepare_v2(head, "SELECT idx, pack, rid FROM part", -1,
	    &st, NULL) != SQLITE_OK)
		return (1);
	while (sqlite3_step(st) == SQLITE_ROW) {
		buf_reset(&rec);
		snprintf(base, sizeof(base), "part-%lld.db",
		    (long long)sqlite3_column_int64(st, 0));
		if (read_record(r, (const char *)sqlite3_column_text(st, 1),
		    sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2),
		    &rec) || write_file(argv[5], base, rec.data + REC_HEADER,
		    rec.len - REC_HEADER))
			return (1);
	}
	sqlite3_finalize(st);
	sqlite3_close(head);
	buf_release(&rec);
	free(img);
	repo_close(r);
	return (0);
}

/* index REPO KEYFILE PACK: "OFFSET TYPE STORED_LEN ID" of each record. */
static int
list_index(int argc, char **argv)
{
	struct pack_reader *pr;
	struct pack_entry *ents = NULL;
	struct repo *r;
	size_t i, n;
	int rc = 1;

	if (argc != 5) {
		fprintf(stderr, "usage: forge-record index REPO KEYFILE "
		    "PACK\n");
		return (2);
	}
	if ((r = open_repo(argv[2], argv[3])) == NULL)
		return (1);
	if ((pr = pack_reader_open(r, argv[4])) != NULL &&
	    pack_reader_index(pr, &ents, &n) == 0) {
		for (i = 0; i < n; i++) {
			char hex[2 * CCRYPTO_ID_BYTES + 1];

			hex_encode(hex, ents[i].id, CCRYPTO_ID_BYTES);
			printf("%llu %u %u %s\n",
			    (unsigned long long)ents[i].offset,
			    (unsigned)ents[i].type,
			    (unsigned)ents[i].stored_len, hex);
		}
		rc = 0;
	}
	free(ents);
	pack_reader_close(pr);
	repo_close(r);
	return (rc);
}

static int
drill(int argc, char **argv)
{
	struct catalog_journal_upto upto;
	struct catalog_drill d;
	struct pack_info info;
	struct catalog *c;
	struct repo *r;
	size_t n;

	if (argc != 7 || (r = open_repo(argv[2], argv[3])) == NULL ||
	    (c = catalog_open(argv[4])) == NULL)
		return (1);
	memset(&d, 0, sizeof(d));
	d.time_ns = 1;
	if (catalog_dataset_id(c, argv[5], 1, &d.dataset_id) < 0)
		return (1);
	snprintf(d.sid, sizeof(d.sid), "%s", argv[6]);
	d.sample = 100;
	d.files = 1;
	d.verdict = "pass";
	if (catalog_drill_add(c, &d) ||
	    journal_write(r, c, 0, &info, &upto, &n) || n == 0)
		return (1);
	printf("%s\n", info.name);
	catalog_close(c);
	repo_close(r);
	return (0);
}

static int
forget(int argc, char **argv)
{
	struct catalog_journal_upto upto;
	struct pack_info info;
	struct catalog *c;
	struct repo *r;
	size_t gone, n;

	if (argc < 6 || (r = open_repo(argv[2], argv[3])) == NULL ||
	    (c = catalog_open(argv[4])) == NULL)
		return (1);
	if (catalog_forget(c, (const char *const *)argv + 5,
	    (size_t)(argc - 5), 1, &gone) ||
	    journal_write(r, c, 0, &info, &upto, &n) || n == 0)
		return (1);
	printf("%s\n", info.name);
	catalog_close(c);
	repo_close(r);
	return (0);
}

int
main(int argc, char **argv)
{
	uint8_t id[CCRYPTO_ID_BYTES];
	struct pack_writer *w;
	struct pack_entry e;
	struct pack_info info;
	struct repo *r;
	uint8_t *data;
	long len;

	if (argc > 1 && strcmp(argv[1], "swap-part") == 0)
		return (swap_part(argc, argv));
	if (argc > 1 && strcmp(argv[1], "forget") == 0)
		return (forget(argc, argv));
	if (argc > 1 && strcmp(argv[1], "drill") == 0)
		return (drill(argc, argv));
	if (argc > 1 && strcmp(argv[1], "revise") == 0)
		return (revise(argc, argv));
	if (argc > 1 && strcmp(argv[1], "conf") == 0)
		return (forge_conf(argc, argv));
	if (argc > 1 && strcmp(argv[1], "parts") == 0)
		return (dump_parts(argc, argv));
	if (argc > 1 && strcmp(argv[1], "format") == 0)
		return (reformat(argc, argv));
	if (argc > 1 && strcmp(argv[1], "index") == 0)
		return (list_index(argc, argv));
	if (argc != 5 || strlen(argv[3]) != 2 * CCRYPTO_ID_BYTES ||
	    hex_decode(id, CCRYPTO_ID_BYTES, argv[3]) ||
	    (len = atol(argv[4])) <= 0) {
		fprintf(stderr, "usage: forge-record REPO KEYFILE ID LEN\n");
		return (2);
	}
	if ((r = open_repo(argv[1], argv[2])) == NULL)
		return (1);
	if ((data = malloc((size_t)len)) == NULL)
		return (1);
	memset(data, 0xa5, (size_t)len);
	if ((w = pack_writer_new(r)) == NULL ||
	    pack_writer_add(w, PACK_REC_DATA, 0, id, data, (size_t)len,
	    (uint32_t)len, &e) || pack_writer_finish(w, &info))
		return (1);
	printf("%s %llu %ld %llu\n", info.name, (unsigned long long)e.offset,
	    len, (unsigned long long)info.size);
	pack_writer_free(w);
	repo_close(r);
	free(data);
	return (0);
}
