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
 * A pack of the deterministic repository with a raw and a compressed
 * record, an empty pack, a truncated and a damaged one; its coffer.conf
 * and a broken one.
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
