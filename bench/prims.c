/*
 * bench/prims.c: single-core throughput of the primitives a backup is made
 * of, on this machine, for `make bench`: keyed BLAKE2b (coffer's chunk id,
 * and libsodium's crypto_generichash for comparison), XChaCha20-Poly1305
 * encryption (coffer's, through OpenSSL where it can, and libsodium's for
 * comparison), zstd levels 1 and 3
 * on text and on bf16 tensor data, and coffer's chunker (chunker_next with
 * chunker_params_default and a random key, from build/libcoffer.a).
 *
 *   prims TEXT_SAMPLE BF16_SAMPLE
 *
 * Each sample is read whole into memory; work is done in 1 MiB pieces (the
 * chunker's average chunk) and repeated until at least 0.3 s has passed;
 * the best of 3 such rounds is reported.
 * Prints one line per measurement: NAME MB_PER_S [RATIO], with MB = 1e6
 * bytes of input and RATIO = output bytes / input bytes for zstd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>
#include <zstd.h>

#include "coffer/chunk.h"
#include "coffer/crypto.h"

#define PIECE (1024 * 1024)
#define MIN_SECONDS 0.3

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "prims: %s: %s\n", path,
		    f ? "empty or unreadable" : strerror(errno));
		exit(1);
	}
	p = malloc((size_t)n);
	if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "prims: %s: read error\n", path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)n;
	return p;
}

static volatile uint64_t sink;
static double avg_chunk;

/* The best of ROUNDS rounds: the limit is what the core can do, and the
 * machine may be shared. */
#define ROUNDS 3
#define MAXRES 16
static struct result {
	const char *name;
	double mbps, ratio;
} results[MAXRES];
static int nresults;

static void
report(const char *name, size_t bytes, double secs, double ratio)
{
	double mbps = (double)bytes / secs / 1e6;
	int i;

	for (i = 0; i < nresults; i++)
		if (!strcmp(results[i].name, name))
			break;
	if (i == nresults) {
		if (nresults == MAXRES)
			return;
		results[nresults++] = (struct result){ name, 0, 0 };
	}
	if (mbps > results[i].mbps) {
		results[i].mbps = mbps;
		results[i].ratio = ratio;
	}
}

static void
print_results(void)
{
	for (int i = 0; i < nresults; i++) {
		if (results[i].ratio > 0)
			printf("%s %.1f %.3f\n", results[i].name,
			    results[i].mbps, results[i].ratio);
		else
			printf("%s %.1f\n", results[i].name, results[i].mbps);
	}
}

/* Time piece() over buf in PIECE-sized pieces, again and again until
 * MIN_SECONDS have passed, and report it as name. */
static void
timed_pieces(const char *name, const uint8_t *buf, size_t len,
    void (*piece)(void *, const uint8_t *, size_t), void *arg)
{
	size_t done = 0;
	double t0 = now(), t;

	do {
		for (size_t off = 0; off < len; off += PIECE) {
			size_t n = len - off < PIECE ? len - off : PIECE;

			piece(arg, buf + off, n);
			done += n;
		}
	} while ((t = now() - t0) < MIN_SECONDS);
	report(name, done, t, 0);
}

struct hash_arg {
	const struct ccrypto_keys *k;
	uint8_t key[32];
};

static void
hash_coffer(void *arg, const uint8_t *p, size_t n)
{
	uint8_t out[32];

	ccrypto_chunk_id(((struct hash_arg *)arg)->k, p, n, out);
	sink += out[0];
}

static void
hash_libsodium(void *arg, const uint8_t *p, size_t n)
{
	const uint8_t *key = ((struct hash_arg *)arg)->key;
	uint8_t out[32];

	crypto_generichash(out, sizeof out, p, n, key, 32);
	sink += out[0];
}

/*
 * Keyed BLAKE2b-256 two ways: coffer's chunk id (its own RFC 7693 code,
 * src/crypto/blake2b.c) and libsodium's crypto_generichash, which gives
 * the same output.
 */
static void
bench_hash(const uint8_t *buf, size_t len, const struct ccrypto_keys *k)
{
	struct hash_arg a = { .k = k };

	randombytes_buf(a.key, sizeof a.key);
	timed_pieces("blake2b_keyed", buf, len, hash_coffer, &a);
	timed_pieces("blake2b_keyed_libsodium", buf, len, hash_libsodium, &a);
}

struct aead_arg {
	uint8_t key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
	uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
	uint8_t ad[64];
	uint8_t *out;
};

static void
aead_coffer(void *arg, const uint8_t *p, size_t n)
{
	struct aead_arg *a = arg;

	ccrypto_aead_encrypt(a->key, a->nonce, a->ad, sizeof a->ad, p, n,
	    a->out);
	sink += a->out[0];
}

static void
aead_libsodium(void *arg, const uint8_t *p, size_t n)
{
	struct aead_arg *a = arg;
	unsigned long long clen;

	randombytes_buf(a->nonce, sizeof a->nonce);
	crypto_aead_xchacha20poly1305_ietf_encrypt(a->out, &clen, p, n, a->ad,
	    sizeof a->ad, NULL, a->nonce, a->key);
	sink += a->out[0];
}

/* XChaCha20-Poly1305 two ways: coffer's records' (ccrypto_aead_encrypt,
 * src/crypto/aead.c, which OpenSSL computes) and libsodium's, which gives
 * the same output. */
static void
bench_aead(const uint8_t *buf, size_t len)
{
	struct aead_arg a;

	if ((a.out = malloc(PIECE +
	    crypto_aead_xchacha20poly1305_ietf_ABYTES)) == NULL)
		exit(1);
	crypto_aead_xchacha20poly1305_ietf_keygen(a.key);
	randombytes_buf(a.ad, sizeof a.ad);
	timed_pieces("xchacha20poly1305_encrypt", buf, len, aead_coffer, &a);
	timed_pieces("xchacha20poly1305_encrypt_libsodium", buf, len,
	    aead_libsodium, &a);
	free(a.out);
}

static void
bench_zstd(const char *name, int level, const uint8_t *buf, size_t len)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	size_t cap = ZSTD_compressBound(PIECE);
	uint8_t *out = malloc(cap);
	size_t done = 0, outbytes = 0;
	double t0 = now(), t;

	if (!cc || !out)
		exit(1);
	do {
		for (size_t off = 0; off < len; off += PIECE) {
			size_t n = len - off < PIECE ? len - off : PIECE;
			size_t r = ZSTD_compressCCtx(cc, out, cap, buf + off, n,
			    level);

			if (ZSTD_isError(r)) {
				fprintf(stderr, "prims: zstd: %s\n",
				    ZSTD_getErrorName(r));
				exit(1);
			}
			done += n;
			outbytes += r;
		}
	} while ((t = now() - t0) < MIN_SECONDS);
	report(name, done, t, (double)outbytes / (double)done);
	ZSTD_freeCCtx(cc);
	free(out);
}

static void
bench_chunker(const char *name, const uint8_t *buf, size_t len)
{
	struct chunker_params p;
	struct chunker *c;
	uint8_t key[32];
	size_t done = 0, chunks = 0;
	double t0, t;

	chunker_params_default(&p);
	randombytes_buf(key, sizeof key);
	if (!(c = chunker_new(&p, key)))
		exit(1);
	t0 = now();
	do {
		size_t off = 0;

		while (off < len) {
			size_t n = chunker_next(c, buf + off, len - off, 1);

			if (n == 0)
				break;
			off += n;
			chunks++;
		}
		done += len;
	} while ((t = now() - t0) < MIN_SECONDS);
	report(name, done, t, 0);
	avg_chunk = (double)done / (double)chunks;
	chunker_free(c);
}

int
main(int argc, char **argv)
{
	uint8_t master[CCRYPTO_KEY_BYTES];
	struct ccrypto_keys *keys;
	size_t tlen, blen;
	uint8_t *text, *bf16;

	if (argc != 3) {
		fprintf(stderr, "usage: prims TEXT_SAMPLE BF16_SAMPLE\n");
		return 2;
	}
	if (ccrypto_init() < 0)
		return 1;
	randombytes_buf(master, sizeof master);
	if ((keys = ccrypto_keys_from_master(master)) == NULL)
		return 1;
	text = slurp(argv[1], &tlen);
	bf16 = slurp(argv[2], &blen);

	for (int round = 0; round < ROUNDS; round++) {
		bench_hash(bf16, blen, keys);
		bench_aead(bf16, blen);
		bench_zstd("zstd1_text", 1, text, tlen);
		bench_zstd("zstd3_text", 3, text, tlen);
		bench_zstd("zstd1_bf16", 1, bf16, blen);
		bench_zstd("zstd3_bf16", 3, bf16, blen);
		bench_chunker("chunker", bf16, blen);
	}
	print_results();
	printf("chunker_avg_chunk_bytes %.0f\n", avg_chunk);
	ccrypto_keys_free(keys);
	free(text);
	free(bf16);
	return 0;
}
