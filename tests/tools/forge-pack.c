/*
 * forge-pack SHAPE REPO [COUNT]: write into REPO/packs/ a pack made with
 * no key material at all, from the repository's coffer.conf alone (its
 * repository id and the public key of its newest key epoch, which a
 * repository whose keys rotated lists), and print its name.  Whoever can
 * write the storage can do as much: a reader must refuse such a pack
 * before it decompresses anything, at a small bounded cost.
 *
 * The pack key is sealed to the epoch's public key and the records and
 * the index are encrypted under it, so everything but the keyed parts
 * (record ids, the pack's MAC) is what coffer itself would write.
 *
 * SHAPE:
 *   bomb      one snapshot, one journal and one data record, each a zstd
 *             frame of COUNT MiB of zeros (default 1024: the 1 GiB a
 *             record may declare) in a few KiB
 *   many      COUNT snapshot records of 16 bytes (default 100000)
 *   overlap   COUNT index entries (default 1000), snapshot and data,
 *             all naming one bomb of 1 GiB
 *   bigindex  an index of COUNT entries (default 2000000: about 100 MB)
 *             naming one small record
 * Each shape in the pack format of today (header version 1, a trailer
 * MAC: random bytes here, the forger lacks its key, and an index under a
 * key of the forger's, who lacks the index key) or, with SHAPE-old, under
 * a header of another version (2), without a MAC.
 *
 * Standalone on purpose (libsodium and libzstd, no libcoffer): it holds
 * no key of the repository because it has none to hold.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>
#include <zstd.h>

#define REC_HDR 34
#define ENTRY 50
#define TAG crypto_aead_xchacha20poly1305_ietf_ABYTES
#define NONCE crypto_aead_xchacha20poly1305_ietf_NPUBBYTES

static uint8_t repo_id[16], epoch_pk[32];
static uint32_t epoch;
static uint8_t key[32];

struct ent {
	uint8_t id[32];
	uint8_t type, flags;
	uint64_t offset;
	uint32_t plain, stored;
};

static void
die(const char *m)
{
	fprintf(stderr, "forge-pack: %s\n", m);
	exit(2);
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* The repository id and the newest epoch's public key, from coffer.conf. */
static void
read_conf(const char *repo)
{
	char path[4096], line[512], hex[65];
	unsigned long n;
	FILE *f;
	int have_id = 0;

	snprintf(path, sizeof(path), "%s/coffer.conf", repo);
	if ((f = fopen(path, "r")) == NULL)
		die("cannot open coffer.conf");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "id %32s", hex) == 1 &&
		    sodium_hex2bin(repo_id, 16, hex, 32, NULL, NULL, NULL) == 0)
			have_id = 1;
		if (sscanf(line, "epoch %lu %64s", &n, hex) == 2 &&
		    strlen(hex) == 64 && strstr(line, "retired") == NULL &&
		    sodium_hex2bin(epoch_pk, 32, hex, 64, NULL, NULL,
		    NULL) == 0)
			epoch = (uint32_t)n;
	}
	fclose(f);
	if (!have_id || epoch < 2)
		die("coffer.conf lists no key epoch (rotate the keys first)");
}

static FILE *out;
static uint64_t off;
static struct ent *ents;
static size_t nents, capents;

static void
wr(const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, out) != n)
		die("write failed");
	off += n;
}

static void
add_ent(const uint8_t *id, uint8_t type, uint8_t flags, uint64_t at,
    uint32_t plain, uint32_t stored)
{
	if (nents == capents) {
		capents = capents ? capents * 2 : 1024;
		if ((ents = realloc(ents, capents * sizeof(*ents))) == NULL)
			die("out of memory");
	}
	memcpy(ents[nents].id, id, 32);
	ents[nents].type = type;
	ents[nents].flags = flags;
	ents[nents].offset = at;
	ents[nents].plain = plain;
	ents[nents].stored = stored;
	nents++;
}

/* A record as coffer seals one (an id of our choosing); its offset. */
static uint64_t
record(uint8_t type, uint8_t flags, const uint8_t *payload, size_t stored,
    uint32_t plain, uint8_t *id_out)
{
	uint8_t hdr[REC_HDR], ad[32 + 1 + 16 + 1 + 4], id[32], *ct;
	uint64_t at = off;

	randombytes_buf(id, sizeof(id));
	hdr[0] = type;
	hdr[1] = flags;
	put32(hdr + 2, plain);
	put32(hdr + 6, (uint32_t)stored);
	randombytes_buf(hdr + 10, NONCE);
	memcpy(ad, id, 32);
	ad[32] = type;
	memcpy(ad + 33, repo_id, 16);
	ad[49] = flags;
	put32(ad + 50, plain);
	if ((ct = malloc(stored + TAG)) == NULL)
		die("out of memory");
	crypto_aead_xchacha20poly1305_ietf_encrypt(ct, NULL, payload, stored,
	    ad, sizeof(ad), NULL, hdr + 10, key);
	wr(hdr, sizeof(hdr));
	wr(ct, stored + TAG);
	free(ct);
	if (id_out)
		memcpy(id_out, id, 32);
	add_ent(id, type, flags, at, plain, (uint32_t)stored);
	return (at);
}

/* A zstd frame of mib MiB of zeros (its content size in the header). */
static uint8_t *
bomb(uint32_t mib, size_t *n)
{
	static uint8_t zero[1 << 20];
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t cap = 1 << 20, len = 0, r;
	uint8_t *z = malloc(cap);
	uint32_t i;

	if (c == NULL || z == NULL)
		die("out of memory");
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 19);
	ZSTD_CCtx_setPledgedSrcSize(c, (unsigned long long)mib << 20);
	for (i = 0; i <= mib; i++) {
		ZSTD_inBuffer in = { zero, i < mib ? sizeof(zero) : 0, 0 };

		do {
			ZSTD_outBuffer o;

			if (cap - len < (1 << 16) &&
			    (z = realloc(z, cap *= 2)) == NULL)
				die("out of memory");
			o.dst = z + len;
			o.size = cap - len;
			o.pos = 0;
			r = ZSTD_compressStream2(c, &o, &in, i < mib ?
			    ZSTD_e_continue : ZSTD_e_end);
			if (ZSTD_isError(r))
				die("zstd failed");
			len += o.pos;
		} while (in.pos < in.size || (i == mib && r != 0));
	}
	ZSTD_freeCCtx(c);
	*n = len;
	return (z);
}

int
main(int argc, char **argv)
{
	uint8_t hdr[120], pack_id[16], tail[8], mac[32], nonce[NONCE];
	uint8_t *idx, *ct, small[16], id[32];
	const char *shape, *repo;
	char name[33], path[4096];
	size_t i, zn, idxlen;
	unsigned long count = 0;
	uint64_t at;
	uint8_t *z;
	int old;

	if (argc < 3 || argc > 4)
		die("usage: forge-pack SHAPE[-old] REPO [COUNT]");
	if (sodium_init() < 0)
		die("libsodium failed");
	shape = argv[1];
	repo = argv[2];
	if (argc == 4)
		count = strtoul(argv[3], NULL, 10);
	old = strlen(shape) > 4 && strcmp(shape + strlen(shape) - 4,
	    "-old") == 0;
	read_conf(repo);

	randombytes_buf(pack_id, sizeof(pack_id));
	sodium_bin2hex(name, sizeof(name), pack_id, sizeof(pack_id));
	snprintf(path, sizeof(path), "%s/packs/%.2s", repo, name);
	if (mkdir(path, 0700) && errno != EEXIST)
		die("cannot make the fan-out directory");
	snprintf(path, sizeof(path), "%s/packs/%.2s/%s", repo, name, name);
	if ((out = fopen(path, "wbx")) == NULL)
		die("cannot create the pack");

	randombytes_buf(key, sizeof(key));
	memcpy(hdr, "CFPK", 4);
	hdr[4] = old ? 2 : 1;
	hdr[5] = (uint8_t)epoch;
	hdr[6] = (uint8_t)(epoch >> 8);
	hdr[7] = (uint8_t)(epoch >> 16);
	memcpy(hdr + 8, repo_id, 16);
	memcpy(hdr + 24, pack_id, 16);
	crypto_box_seal(hdr + 40, key, sizeof(key), epoch_pk);
	wr(hdr, sizeof(hdr));

	if (strncmp(shape, "bomb", 4) == 0) {
		z = bomb(count ? (uint32_t)count : 1024, &zn);
		for (i = 1; i <= 3; i++)
			record((uint8_t)(i == 3 ? 1 : i + 1), 1, z, zn,
			    (uint32_t)((count ? count : 1024) << 20), NULL);
		free(z);
	} else if (strncmp(shape, "many", 4) == 0) {
		for (i = 0; i < (count ? count : 100000); i++) {
			randombytes_buf(small, sizeof(small));
			record(2, 0, small, sizeof(small), sizeof(small),
			    NULL);
		}
	} else if (strncmp(shape, "overlap", 7) == 0) {
		z = bomb(1024, &zn);
		at = record(2, 1, z, zn, 1u << 30, id);
		free(z);
		for (i = 1; i < (count ? count : 1000); i++)
			add_ent(id, (uint8_t)(i % 2 ? 1 : 2), 1, at, 1u << 30,
			    (uint32_t)zn);
	} else if (strncmp(shape, "bigindex", 8) == 0) {
		randombytes_buf(small, sizeof(small));
		at = record(2, 0, small, sizeof(small), sizeof(small), id);
		for (i = 1; i < (count ? count : 2000000); i++)
			add_ent(id, 2, 0, at, sizeof(small), sizeof(small));
	} else
		die("unknown shape");

	/* The index, under the forger's pack key (coffer's is under the
	 * index key, which the forger lacks). */
	idxlen = 4 + nents * ENTRY;
	if ((idx = malloc(idxlen)) == NULL ||
	    (ct = malloc(idxlen + TAG)) == NULL)
		die("out of memory");
	put32(idx, (uint32_t)nents);
	for (i = 0; i < nents; i++) {
		uint8_t *e = idx + 4 + i * ENTRY;

		memcpy(e, ents[i].id, 32);
		e[32] = ents[i].type;
		e[33] = ents[i].flags;
		put64(e + 34, ents[i].offset);
		put32(e + 42, ents[i].plain);
		put32(e + 46, ents[i].stored);
	}
	{
		uint8_t ad[4 + 16 + 16];

		memcpy(ad, "CFPI", 4);
		memcpy(ad + 4, repo_id, 16);
		memcpy(ad + 20, pack_id, 16);
		randombytes_buf(nonce, sizeof(nonce));
		crypto_aead_xchacha20poly1305_ietf_encrypt(ct, NULL, idx,
		    idxlen, ad, sizeof(ad), NULL, nonce, key);
	}
	wr(nonce, sizeof(nonce));
	wr(ct, idxlen + TAG);
	if (!old) {
		/* The MAC needs the id key, which nothing here holds. */
		randombytes_buf(mac, sizeof(mac));
		wr(mac, sizeof(mac));
	}
	put32(tail, (uint32_t)(sizeof(nonce) + idxlen + TAG));
	memcpy(tail + 4, "CFPI", 4);
	wr(tail, sizeof(tail));
	if (fclose(out))
		die("write failed");
	free(idx);
	free(ct);
	free(ents);
	printf("%s\n", name);
	return (0);
}
