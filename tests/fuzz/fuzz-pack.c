/*
 * libFuzzer target: hostile packs and coffer.conf files.
 * The first input byte picks the target; the rest is the file.
 *   0: a pack file, opened, its index read and each indexed record read
 *   1: a coffer.conf, opened and, when it parses, unlocked with the key
 *      of the repository below (its MAC checked)
 * Build and run: make fuzz (seeds: tests/fuzz/corpus/pack, written by
 * fuzz_seeds below through make fuzz-corpus).
 *
 * The repository the packs are read from is made with a deterministic
 * random source, so that it has the same keys in every run and a seed
 * pack written by fuzz_seeds decrypts: mutations then reach the records
 * and the index, not only the header.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <zstd.h>

#include "coffer/chunk.h"
#include "coffer/crypto.h"
#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/repo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[512];
static char rpath[600], key_path[600], conf_dir[600];
static struct repo *repo;
static char name[PACK_NAME_LEN + 1];

/* Offset of the pack id in a pack header (include/coffer/repo.h). */
#define PACK_ID_OFF (4 + 4 + CCRYPTO_REPO_ID_BYTES)

/* Not random at all: the same bytes in every run (see above). */
static uint64_t rnd_count;

static void
rnd_buf(void *buf, size_t n)
{
	uint8_t seed[randombytes_SEEDBYTES] = "coffer fuzz-pack";

	memcpy(seed + 24, &rnd_count, sizeof(rnd_count));
	rnd_count++;
	randombytes_buf_deterministic(buf, n, seed);
}

static uint32_t
rnd_random(void)
{
	uint32_t v;

	rnd_buf(&v, sizeof(v));
	return (v);
}

static const char *
rnd_name(void)
{
	return ("fuzz-deterministic");
}

static struct randombytes_implementation rnd_impl = {
	.implementation_name = rnd_name,
	.random = rnd_random,
	.buf = rnd_buf,
};

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	remove(path);
	return (0);
}

static void
cleanup(void)
{
	repo_close(repo);
	repo = NULL;
	if (dir[0] != '\0')
		nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int
setup(void)
{
	static const char *const dirs[] = { "keys", "packs", "tmp", "locks" };
	const char *tmp = getenv("TMPDIR");
	struct repo_init_opts o;
	int i;
	uint8_t id[16];
	char sub[700];

	if (randombytes_set_implementation(&rnd_impl) || ccrypto_init())
		return (-1);
	snprintf(dir, sizeof(dir), "%s/coffer-fuzz-pack.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		return (-1);
	atexit(cleanup);
	snprintf(rpath, sizeof(rpath), "%s/repo", dir);
	snprintf(key_path, sizeof(key_path), "%s/key", dir);
	snprintf(conf_dir, sizeof(conf_dir), "%s/conf", dir);
	memset(&o, 0, sizeof(o));
	o.key_file = key_path;
	if (repo_init(rpath, &o) || (repo = repo_open(rpath)) == NULL ||
	    repo_unlock(repo, key_path, NULL, 0))
		return (-1);
	ccrypto_random(id, sizeof(id));
	hex_encode(name, id, sizeof(id));
	snprintf(sub, sizeof(sub), "%s/packs/%.2s", rpath, name);
	if (fsutil_mkdir_p(sub, 0700))
		return (-1);
	for (i = 0; i < 4; i++) {
		snprintf(sub, sizeof(sub), "%s/%s", conf_dir, dirs[i]);
		if (fsutil_mkdir_p(sub, 0700))
			return (-1);
	}
	return (0);
}

static void
write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd == -1)
		abort();
	if (n && write(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

/*
 * The name to store a pack under: the id in its header when it has one,
 * so that a pack written elsewhere (a seed) is not refused for its name.
 */
static const char *
pack_name(const uint8_t *p, size_t n)
{
	static char hex[PACK_NAME_LEN + 1];
	char sub[700];

	if (n < PACK_ID_OFF + 16)
		return (name);
	hex_encode(hex, p + PACK_ID_OFF, 16);
	snprintf(sub, sizeof(sub), "%s/packs/%.2s", rpath, hex);
	if (fsutil_mkdir_p(sub, 0700))
		abort();
	return (hex);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct pack_reader *p;
	struct pack_entry *ents = NULL;
	struct buf out = BUF_INIT;
	const char *pn;
	char *path;
	size_t n = 0, i;

	if (!ready) {
		if (setup())
			abort();
		log_level = -1;
		ready = 1;
	}
	if (size < 1)
		return (0);
	if (data[0] == 0) {
		pn = pack_name(data + 1, size - 1);
		path = repo_pack_path(repo, pn);
		write_file(path, data + 1, size - 1);
		if ((p = pack_reader_open(repo, pn)) != NULL) {
			if (pack_reader_index(p, &ents, &n) == 0) {
				for (i = 0; i < n && i < 64; i++)
					pack_reader_get(p, &ents[i], NULL, &out);
				free(ents);
			}
			pack_reader_close(p);
		}
		unlink(path);
		free(path);
	} else {
		char conf[700];
		struct repo *r;

		snprintf(conf, sizeof(conf), "%s/coffer.conf", conf_dir);
		write_file(conf, data + 1, size - 1);
		if ((r = repo_open(conf_dir)) != NULL) {
			repo_unlock(r, key_path, NULL, 0);
			repo_close(r);
		}
	}
	buf_release(&out);
	return (0);
}

#ifdef FUZZ_REPLAY
#include "replay.h"

/* 0 or -1: dir/name is 1 byte of mode and the file at path. */
static int
seed_file(const char *dir_out, const char *sname, uint8_t mode,
    const char *path, size_t cut, size_t flip)
{
	unsigned char *d;
	struct buf b = BUF_INIT;
	size_t n;
	int rc;

	if (fsutil_read_file(path, 1 << 20, &d, &n))
		return (-1);
	if (cut != 0 && cut < n)
		n = cut;
	if (flip != 0 && flip < n)
		d[flip] ^= 0x20;
	rc = buf_put_u8(&b, mode) || buf_append(&b, d, n) ||
	    fuzz_write_seed(dir_out, sname, b.data, b.len);
	free(d);
	buf_release(&b);
	return (rc ? -1 : 0);
}

/*
 * Forged packs (tests/tools/forge-pack.c does the same without any key,
 * for the e2e test t0345): a pack key of the forger's sealed to the
 * repository's public key, records and index encrypted under it, as
 * whoever can write the storage can make them once coffer.conf lists an
 * epoch key.  mac: 1 random bytes (the forger lacks the id key, and the
 * index key: the index is under the pack key), 2 the right MAC and the
 * index under the index key (what only a writer with the keys, a
 * write-only one say, can make).
 * shape: 0 a snapshot and a data record, zstd bombs declaring 1 GiB; 1
 * many small entries; 2 many entries naming one bomb.
 */
#define F_ENTRY 50

static void
f_record(struct buf *pack, struct buf *idx, const uint8_t *key, uint8_t type,
    uint8_t flags, const uint8_t *payload, size_t n, uint32_t plain,
    uint64_t *at, uint8_t *id)
{
	uint8_t hdr[PACK_RECORD_HEADER_BYTES], ad[32 + 1 + 16 + 1 + 4];

	ccrypto_random(id, 32);
	hdr[0] = type;
	hdr[1] = flags;
	put_u32(hdr + 2, plain);
	put_u32(hdr + 6, (uint32_t)n);
	memcpy(ad, id, 32);
	ad[32] = type;
	memcpy(ad + 33, repo_id(repo), 16);
	ad[49] = flags;
	put_u32(ad + 50, plain);
	*at = pack->len - 1;	/* the mode byte is not the pack's */
	if (buf_append(pack, hdr, 10) || buf_reserve(pack, 24 + n + 16))
		abort();
	ccrypto_aead_encrypt(key, pack->data + pack->len, ad, sizeof(ad),
	    payload, n, pack->data + pack->len + 24);
	pack->len += 24 + n + 16;
	if (buf_append(idx, id, 32) || buf_put_u8(idx, type) ||
	    buf_put_u8(idx, flags) || buf_put_u64(idx, *at) ||
	    buf_put_u32(idx, plain) || buf_put_u32(idx, (uint32_t)n))
		abort();
}

static uint8_t *
f_bomb(size_t *n)
{
	size_t cap = 64 << 10, len = 0, r;
	ZSTD_CCtx *c = ZSTD_createCCtx();
	uint8_t *z = malloc(cap), *zero = calloc(1, 1 << 20);
	int i;

	if (c == NULL || z == NULL || zero == NULL)
		abort();
	ZSTD_CCtx_setPledgedSrcSize(c, 1ull << 30);
	for (i = 0; i <= 1024; i++) {
		ZSTD_inBuffer in = { zero, i < 1024 ? 1 << 20 : 0, 0 };

		do {
			ZSTD_outBuffer o;

			if (cap - len < (16 << 10) &&
			    (z = realloc(z, cap *= 2)) == NULL)
				abort();
			o.dst = z + len;
			o.size = cap - len;
			o.pos = 0;
			r = ZSTD_compressStream2(c, &o, &in, i < 1024 ?
			    ZSTD_e_continue : ZSTD_e_end);
			if (ZSTD_isError(r))
				abort();
			len += o.pos;
		} while (in.pos < in.size || (i == 1024 && r != 0));
	}
	ZSTD_freeCCtx(c);
	free(zero);
	*n = len;
	return (z);
}

static int
forge_seed(const char *dir_out, const char *sname, int shape, int mac)
{
	uint8_t key[CCRYPTO_KEY_BYTES], pack_id[16], id[32], small[16];
	uint8_t ad[4 + 16 + 16], nonce_tag[24], m[32], *z = NULL;
	uint8_t ikey[CCRYPTO_KEY_BYTES];
	struct buf pack = BUF_INIT, idx = BUF_INIT, ct = BUF_INIT;
	struct ccrypto_hash_state h;
	uint32_t epoch, count = 0;
	uint64_t at;
	size_t zn = 0;
	int rc;

	ccrypto_random(key, sizeof(key));
	ccrypto_random(pack_id, sizeof(pack_id));
	/* Mode byte 0 (a pack), then the pack. */
	if (buf_put_u8(&pack, 0) || buf_reserve(&pack, PACK_HEADER_BYTES))
		abort();
	memset(pack.data + 1, 0, PACK_HEADER_BYTES);
	memcpy(pack.data + 1, "CFPK", 4);
	epoch = ccrypto_pack_key_seal(repo_keys(repo), key, pack.data + 41);
	pack.data[5] = 1;
	pack.data[6] = (uint8_t)epoch;
	pack.data[7] = (uint8_t)(epoch >> 8);
	pack.data[8] = (uint8_t)(epoch >> 16);
	memcpy(pack.data + 9, repo_id(repo), 16);
	memcpy(pack.data + 25, pack_id, 16);
	pack.len = 1 + PACK_HEADER_BYTES;
	if (buf_put_u32(&idx, 0))
		abort();
	if (shape != 1)
		z = f_bomb(&zn);
	if (shape == 0) {
		f_record(&pack, &idx, key, PACK_REC_SNAPSHOT, PACK_FLAG_ZSTD,
		    z, zn, 1u << 30, &at, id);
		f_record(&pack, &idx, key, PACK_REC_DATA, PACK_FLAG_ZSTD, z,
		    zn, 1u << 30, &at, id);
		count = 2;
	} else if (shape == 1) {
		for (count = 0; count < 2000; count++) {
			ccrypto_random(small, sizeof(small));
			f_record(&pack, &idx, key, PACK_REC_SNAPSHOT, 0, small,
			    sizeof(small), sizeof(small), &at, id);
		}
	} else {
		f_record(&pack, &idx, key, PACK_REC_DATA, PACK_FLAG_ZSTD, z,
		    zn, 1u << 30, &at, id);
		for (count = 1; count < 1000; count++)
			if (buf_append(&idx, id, 32) ||
			    buf_put_u8(&idx, count % 2 ? PACK_REC_SNAPSHOT :
			    PACK_REC_DATA) || buf_put_u8(&idx, PACK_FLAG_ZSTD) ||
			    buf_put_u64(&idx, at) ||
			    buf_put_u32(&idx, 1u << 30) ||
			    buf_put_u32(&idx, (uint32_t)zn))
				abort();
	}
	put_u32(idx.data, count);
	memcpy(ad, "CFPI", 4);
	memcpy(ad + 4, repo_id(repo), 16);
	memcpy(ad + 20, pack_id, 16);
	if (buf_reserve(&ct, idx.len + 16))
		abort();
	if (mac == 2 && ccrypto_index_key(repo_keys(repo), repo_id(repo),
	    pack_id, ikey))
		abort();
	ccrypto_aead_encrypt(mac == 2 ? ikey : key, nonce_tag, ad, sizeof(ad),
	    idx.data, idx.len, ct.data);
	ct.len = idx.len + 16;
	if (buf_append(&pack, nonce_tag, 24) ||
	    buf_append(&pack, ct.data, ct.len))
		abort();
	put_u32(small, (uint32_t)(24 + ct.len));
	memcpy(small + 4, "CFPI", 4);
	if (mac == 1)
		ccrypto_random(m, sizeof(m));
	else if (mac == 2) {
		/* doc/format.md, "Packs": the MAC. */
		ccrypto_hash_init(repo_keys(repo), &h);
		ccrypto_hash_update(&h, "CFPK", 4);
		ccrypto_hash_update(&h, repo_id(repo), 16);
		ccrypto_hash_update(&h, pack_id, 16);
		ccrypto_hash_update(&h, key, sizeof(key));
		ccrypto_hash_update(&h, nonce_tag, 24);
		ccrypto_hash_update(&h, ct.data, ct.len);
		ccrypto_hash_update(&h, small, 4);
		ccrypto_hash_final(&h, m);
	}
	if (buf_append(&pack, m, sizeof(m)) ||
	    buf_append(&pack, small, 8))
		abort();
	rc = fuzz_write_seed(dir_out, sname, pack.data, pack.len);
	free(z);
	buf_release(&pack);
	buf_release(&idx);
	buf_release(&ct);
	return (rc);
}

/*
 * A pack of the deterministic repository with a raw and a compressed
 * record, an empty pack, a truncated and a damaged one, forged ones
 * (forge_seed); its coffer.conf and a broken one.
 */
int
fuzz_seeds(const char *dir_out)
{
	static const char text[] = "a record the fuzzer can read; a record "
	    "the fuzzer can read; a record the fuzzer can read\n";
	uint8_t id[CCRYPTO_ID_BYTES], z[512];
	struct pack_writer *w;
	struct pack_info info, empty;
	struct compressor *c;
	char *path = NULL, *epath = NULL, conf[700];
	size_t zn;
	int rc = -1;

	log_level = -1;
	if (setup() || (c = compressor_new(3)) == NULL)
		return (-1);
	zn = compressor_compress(c, text, sizeof(text), z, sizeof(z));
	compressor_free(c);
	if (zn == 0 || zn == (size_t)-1 || (w = pack_writer_new(repo)) == NULL)
		return (-1);
	ccrypto_chunk_id(repo_keys(repo), text, 10, id);
	if (pack_writer_add(w, PACK_REC_DATA, 0, id, text, 10, 10, NULL))
		goto out;
	ccrypto_chunk_id(repo_keys(repo), text, sizeof(text), id);
	if (pack_writer_add(w, PACK_REC_SNAPSHOT, PACK_FLAG_ZSTD, id, z, zn,
	    sizeof(text), NULL) || pack_writer_finish(w, &info))
		goto out;
	pack_writer_free(w);
	if ((w = pack_writer_new(repo)) == NULL ||
	    pack_writer_finish(w, &empty))
		goto out;
	if ((path = repo_pack_path(repo, info.name)) == NULL ||
	    (epath = repo_pack_path(repo, empty.name)) == NULL)
		goto out;
	snprintf(conf, sizeof(conf), "%s/coffer.conf", rpath);
	if (seed_file(dir_out, "pack", 0, path, 0, 0) ||
	    seed_file(dir_out, "pack-empty", 0, epath, 0, 0) ||
	    seed_file(dir_out, "pack-truncated", 0, path, info.size - 10, 0) ||
	    seed_file(dir_out, "pack-damaged-record", 0, path, 0,
	    PACK_HEADER_BYTES + PACK_RECORD_HEADER_BYTES + 2) ||
	    seed_file(dir_out, "pack-other-version", 0, path, 0, 4) ||
	    forge_seed(dir_out, "forged-bomb", 0, 1) ||
	    forge_seed(dir_out, "forged-many", 1, 1) ||
	    forge_seed(dir_out, "forged-overlap", 2, 1) ||
	    forge_seed(dir_out, "writer-bomb", 0, 2) ||
	    forge_seed(dir_out, "writer-many", 1, 2) ||
	    forge_seed(dir_out, "writer-overlap", 2, 2) ||
	    seed_file(dir_out, "conf", 1, conf, 0, 0) ||
	    seed_file(dir_out, "conf-damaged", 1, conf, 0, 12))
		goto out;
	rc = 0;
out:
	pack_writer_free(w);
	free(path);
	free(epath);
	return (rc);
}
#endif
