/*
 * Packs: round trip, and every kind of tampering a hostile store can do to
 * a record is refused: a flipped bit, two records swapped, a record's type
 * changed, a record moved in from another repository, a damaged index, a
 * truncated pack.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "coffer/chunk.h"
#include "coffer/crypto.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/repo.h"
#include "coffer/storage.h"
#include "tap.h"
#include "testutil.h"

#define NREC 4
#define RECLEN 5000

static char tmpdir[] = "/tmp/coffer-t-pack.XXXXXX";

/* Write NREC records of RECLEN random bytes (raw) plus one compressed. */
static int
write_pack(struct repo *r, struct pack_info *info, struct pack_entry *ents,
    uint8_t data[][RECLEN])
{
	struct pack_writer *w;
	int i;

	if ((w = pack_writer_new(r)) == NULL)
		return (-1);
	for (i = 0; i < NREC; i++) {
		ccrypto_random(data[i], RECLEN);
		ccrypto_chunk_id(repo_keys(r), data[i], RECLEN, ents[i].id);
		if (pack_writer_add(w, PACK_REC_DATA, 0, ents[i].id, data[i],
		    RECLEN, RECLEN, &ents[i]))
			return (-1);
	}
	if (pack_writer_finish(w, info))
		return (-1);
	pack_writer_free(w);
	return (0);
}

static int
patch(struct repo *r, const char *name, off_t off, const void *p, size_t n)
{
	char *path = repo_pack_path(r, name);
	int fd, rc;

	fd = open(path, O_WRONLY);
	free(path);
	if (fd == -1)
		return (-1);
	rc = pwrite(fd, p, n, off) == (ssize_t)n ? 0 : -1;
	close(fd);
	return (rc);
}

static int
peek(struct repo *r, const char *name, off_t off, void *p, size_t n)
{
	char *path = repo_pack_path(r, name);
	int fd, rc;

	fd = open(path, O_RDONLY);
	free(path);
	if (fd == -1)
		return (-1);
	rc = pread(fd, p, n, off) == (ssize_t)n ? 0 : -1;
	close(fd);
	return (rc);
}

/* Field by field: the struct has padding. */
static int
same_entry(const struct pack_entry *a, const struct pack_entry *b)
{
	return (memcmp(a->id, b->id, sizeof(a->id)) == 0 &&
	    a->type == b->type && a->flags == b->flags &&
	    a->offset == b->offset && a->plain_len == b->plain_len &&
	    a->stored_len == b->stored_len);
}

static int
get(struct repo *r, const char *name, const struct pack_entry *e,
    struct buf *out)
{
	struct pack_reader *p;
	int rc;

	if ((p = pack_reader_open(r, name)) == NULL)
		return (-1);
	rc = pack_reader_get(p, e, NULL, out);
	pack_reader_close(p);
	return (rc);
}

int
main(void)
{
	static uint8_t data[NREC][RECLEN], data2[NREC][RECLEN];
	struct pack_entry ents[NREC], ents2[NREC], *idx = NULL, e;
	struct pack_info info, info2;
	struct pack_reader *p;
	struct buf out = BUF_INIT;
	struct repo *r, *r2;
	uint8_t rec[PACK_RECORD_HEADER_BYTES + RECLEN + CCRYPTO_TAG_BYTES];
	uint8_t rec2[sizeof(rec)], byte;
	size_t n = 0;
	int i, all;
	char cmd[300];

	if (ccrypto_init() || mkdtemp(tmpdir) == NULL)
		return (1);
	r = test_repo_make(tmpdir, "a");
	r2 = test_repo_make(tmpdir, "b");
	ok(r && r2, "two repositories created");
	if (!r || !r2)
		return (tap_done());
	ok(write_pack(r, &info, ents, data) == 0, "pack written");
	ok(write_pack(r2, &info2, ents2, data2) == 0, "pack in repo b");

	all = 1;
	for (i = 0; i < NREC; i++)
		all &= get(r, info.name, &ents[i], &out) == 0 &&
		    out.len == RECLEN && memcmp(out.data, data[i], RECLEN) == 0;
	ok(all, "every record reads back and verifies");

	/* In the page cache after reading; not once dropped from it. */
	{
		char *path = repo_pack_path(r, info.name);
		int fd = path ? open(path, O_RDONLY) : -1;
		struct statfs sf;

		ok(pack_cached(r, info.name, ents[1].offset, ents[1].stored_len),
		    "a record just read is in memory");
		if (fd != -1 && fstatfs(fd, &sf) == 0 &&
		    sf.f_type == 0x01021994)
			skip("a record dropped from memory: tmpfs keeps it");
		else {
			/* DONTNEED is advice: a page still under writeback
			 * on a loaded machine stays; ask again once it is
			 * written, a few times. */
			int tries, gone = 0;

			for (tries = 0; fd != -1 && !gone && tries < 20;
			    tries++) {
				if (tries > 0)
					usleep(50000);
				gone = fdatasync(fd) == 0 &&
				    posix_fadvise(fd, 0, 0,
				    POSIX_FADV_DONTNEED) == 0 &&
				    !pack_cached(r, info.name,
				    ents[1].offset, ents[1].stored_len);
			}
			ok(gone, "a record dropped from memory is not");
		}
		ok(!pack_cached(r, "not-a-pack", 0, 10) &&
		    !pack_cached(r, info.name, 0, 0), "nonsense is not");
		if (fd != -1)
			close(fd);
		free(path);
	}

	/* A store with no memory of its objects (object storage) is not
	 * asked: a HEAD a chunk that a restore could read back. */
	{
		static uint8_t data3[NREC][RECLEN];
		struct pack_entry ents3[NREC];
		struct pack_info info3;
		struct repo_init_opts o;
		struct storage *ms = storage_mem_named("t-pack");
		struct repo *rm = NULL;
		unsigned long opens;
		char key[300];

		snprintf(key, sizeof(key), "%s/mem.key", tmpdir);
		memset(&o, 0, sizeof(o));
		o.key_file = key;
		if (ms != NULL && repo_init("mem:t-pack", &o) == 0 &&
		    (rm = repo_open("mem:t-pack")) != NULL &&
		    repo_unlock(rm, key, NULL, 0) == 0 &&
		    write_pack(rm, &info3, ents3, data3) == 0 &&
		    get(rm, info3.name, &ents3[1], &out) == 0) {
			opens = storage_mem_calls(ms, STORAGE_OP_OPEN);
			ok(!pack_cached(rm, info3.name, ents3[1].offset,
			    ents3[1].stored_len) &&
			    storage_mem_calls(ms, STORAGE_OP_OPEN) == opens,
			    "a pack on a store that keeps nothing in memory is "
			    "not opened to ask");
		} else
			ok(0, "a repository on a memory store");
		repo_close(rm);
		storage_mem_drop("t-pack");
		if (ms != NULL)
			storage_close(ms);
	}

	p = pack_reader_open(r, info.name);
	ok(p && pack_reader_index(p, &idx, &n) == 0 && n == NREC &&
	    same_entry(&idx[2], &ents[2]), "index decrypts and matches");
	free(idx);
	pack_reader_close(p);

	/* A compressed record round-trips too. */
	{
		struct compressor *z = compressor_new(3);
		static uint8_t text[100000], zb[200000];
		struct pack_writer *w = pack_writer_new(r);
		struct pack_info zi;
		size_t zl;

		memset(text, 'a', sizeof(text));
		ccrypto_chunk_id(repo_keys(r), text, sizeof(text), e.id);
		zl = compressor_compress(z, text, sizeof(text), zb, sizeof(zb));
		ok(zl > 0 && zl < sizeof(text) && w &&
		    pack_writer_add(w, PACK_REC_DATA, PACK_FLAG_ZSTD, e.id, zb,
		    zl, sizeof(text), &e) == 0 &&
		    pack_writer_finish(w, &zi) == 0 &&
		    get(r, zi.name, &e, &out) == 0 && out.len == sizeof(text) &&
		    memcmp(out.data, text, sizeof(text)) == 0,
		    "compressed record round-trips");
		/* Flipping the compression flag in index and header fails. */
		e.flags = 0;
		byte = 0;
		patch(r, zi.name, (off_t)e.offset + 1, &byte, 1);
		ok(get(r, zi.name, &e, &out) != 0, "flag flip is rejected");
		pack_writer_free(w);
		compressor_free(z);
	}

	/* Wrong id for a good record. */
	e = ents[0];
	e.id[0] ^= 1;
	ok(get(r, info.name, &e, &out) != 0, "record under another id fails");

	/* Record 1: flip one bit of its ciphertext. */
	peek(r, info.name, (off_t)ents[1].offset + 100, &byte, 1);
	byte ^= 0x10;
	patch(r, info.name, (off_t)ents[1].offset + 100, &byte, 1);
	ok(get(r, info.name, &ents[1], &out) != 0, "flipped bit is rejected");
	ok(get(r, info.name, &ents[0], &out) == 0,
	    "its neighbour still reads");

	/* Records 2 and 3: swap them (same length). */
	peek(r, info.name, (off_t)ents[2].offset, rec, sizeof(rec));
	peek(r, info.name, (off_t)ents[3].offset, rec2, sizeof(rec2));
	patch(r, info.name, (off_t)ents[2].offset, rec2, sizeof(rec2));
	patch(r, info.name, (off_t)ents[3].offset, rec, sizeof(rec));
	ok(get(r, info.name, &ents[2], &out) != 0 &&
	    get(r, info.name, &ents[3], &out) != 0, "swapped records fail");
	e = ents[2];
	e.offset = ents[3].offset;
	ok(get(r, info.name, &e, &out) == 0,
	    "the moved record is intact where it went (sanity)");

	/* Record 0: change its type (in index view and header). */
	e = ents[0];
	e.type = PACK_REC_SNAPSHOT;
	byte = PACK_REC_SNAPSHOT;
	patch(r, info.name, (off_t)e.offset, &byte, 1);
	ok(get(r, info.name, &e, &out) != 0, "retyped record is rejected");

	/* A record of repository b moved into a's pack. */
	peek(r2, info2.name, (off_t)ents2[0].offset, rec, sizeof(rec));
	patch(r, info.name, (off_t)ents[0].offset, rec, sizeof(rec));
	e = ents[0];
	memcpy(e.id, ents2[0].id, sizeof(e.id));
	ok(get(r, info.name, &e, &out) != 0,
	    "record from another repository is rejected");

	/* b's whole pack copied into a. */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/a/packs/%.2s && cp %s/b/packs/%.2s/%s %s/a/packs/%.2s/",
	    tmpdir, info2.name, tmpdir, info2.name, info2.name, tmpdir,
	    info2.name);
	ok(system(cmd) == 0 && pack_reader_open(r, info2.name) == NULL,
	    "pack from another repository is refused");

	/* Index: flip a byte inside the trailer. */
	{
		char *path = repo_pack_path(r, info.name);
		struct stat st;

		stat(path, &st);
		free(path);
		peek(r, info.name, st.st_size - 20, &byte, 1);
		byte ^= 1;
		patch(r, info.name, st.st_size - 20, &byte, 1);
		p = pack_reader_open(r, info.name);
		ok(p == NULL, "damaged index is refused by the pack's MAC");
		pack_reader_close(p);
		patch(r, info.name, st.st_size - 20, &byte, 1);
		byte ^= 1;
		patch(r, info.name, st.st_size - 20, &byte, 1);

		/* The MAC itself. */
		peek(r, info.name, st.st_size - 9, &byte, 1);
		byte ^= 1;
		patch(r, info.name, st.st_size - 9, &byte, 1);
		ok(pack_reader_open(r, info.name) == NULL,
		    "damaged MAC is refused");

		/* Truncate: the last record lies beyond the end. */
		path = repo_pack_path(r, info.name);
		ok(truncate(path, (off_t)ents[3].offset + 50) == 0 &&
		    get(r, info.name, &ents[3], &out) != 0,
		    "record of a truncated pack is rejected");
		free(path);
	}

	/* A damaged header: the sealed key no longer opens.  Flip a bit
	 * rather than write a constant: the byte is random, and one time
	 * in 256 it already was the constant. */
	peek(r, info.name, 60, &byte, 1);
	byte ^= 0x80;
	patch(r, info.name, 60, &byte, 1);
	ok(pack_reader_open(r, info.name) == NULL, "damaged header refused");

	buf_release(&out);
	repo_close(r);
	repo_close(r2);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		diag("could not remove %s", tmpdir);
	return (tap_done());
}
