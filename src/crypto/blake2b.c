/*
 * BLAKE2b (RFC 7693), the hash behind chunk ids, pack hashes and the meta
 * MAC.  Its output is bit-for-bit that of libsodium's crypto_generichash
 * (t-crypto compares the two on random keys, lengths and split points),
 * so the repository format does not change.
 *
 * Why not crypto_generichash itself: this plain 64-bit code, built with
 * the project's flags, hashes about twice as fast as the libsodium 1.0.18
 * that Debian ships, on x86-64 with AVX2 and AVX-512.  Every byte
 * backed up, restored or verified is hashed once, so the hash is the
 * largest single cost of restore and `verify --read-data`.  (GCC 12 with
 * -march set to an AVX-512 processor turns the rotations into vector
 * instructions and runs this 4x slower: build with the default flags.)
 *
 * BLAKE2b is add-rotate-xor: no table lookups and no branches on data or
 * key, so the speed does not come at the cost of timing leaks.
 */
#include <string.h>

#include <sodium.h>

#include "blake2b.h"

const uint64_t blake2b_iv[8] = {
	0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL,
	0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
	0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
	0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static inline uint64_t
load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return (v);
}

static inline void
store64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, sizeof(v));
}

static inline uint64_t
rotr64(uint64_t x, unsigned n)
{
	return ((x >> n) | (x << (64 - n)));
}

/* The mixing function G of RFC 7693 section 3.1. */
#define G(a, b, c, d, x, y) do {				\
	a = a + b + (x);	d = rotr64(d ^ a, 32);		\
	c = c + d;		b = rotr64(b ^ c, 24);		\
	a = a + b + (y);	d = rotr64(d ^ a, 16);		\
	c = c + d;		b = rotr64(b ^ c, 63);		\
} while (0)

/*
 * One round: columns, then diagonals, with the message words in the
 * order the round's row of sigma gives (RFC 7693 section 2.7).  Spelled
 * out per round so that every index is a constant and m[] and v[] live in
 * registers.
 */
#define ROUND(s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12,	\
    s13, s14, s15) do {							\
	G(v0, v4, v8, v12, m[s0], m[s1]);				\
	G(v1, v5, v9, v13, m[s2], m[s3]);				\
	G(v2, v6, v10, v14, m[s4], m[s5]);				\
	G(v3, v7, v11, v15, m[s6], m[s7]);				\
	G(v0, v5, v10, v15, m[s8], m[s9]);				\
	G(v1, v6, v11, v12, m[s10], m[s11]);				\
	G(v2, v7, v8, v13, m[s12], m[s13]);				\
	G(v3, v4, v9, v14, m[s14], m[s15]);				\
} while (0)

/*
 * The compression function F, over one 128-byte block.  A block from the
 * state's buffer may be the key block, so its words are wiped from the
 * stack afterwards; the caller's own data is left to the caller.
 */
static void
compress(struct blake2b_state *s, const uint8_t block[BLAKE2B_BLOCK],
    int last)
{
	uint64_t m[16];
	uint64_t v0, v1, v2, v3, v4, v5, v6, v7;
	uint64_t v8, v9, v10, v11, v12, v13, v14, v15;
	int i;

	for (i = 0; i < 16; i++)
		m[i] = load64(block + 8 * i);
	v0 = s->h[0]; v1 = s->h[1]; v2 = s->h[2]; v3 = s->h[3];
	v4 = s->h[4]; v5 = s->h[5]; v6 = s->h[6]; v7 = s->h[7];
	v8 = blake2b_iv[0]; v9 = blake2b_iv[1];
	v10 = blake2b_iv[2]; v11 = blake2b_iv[3];
	v12 = blake2b_iv[4] ^ s->t[0];
	v13 = blake2b_iv[5] ^ s->t[1];
	v14 = last ? ~blake2b_iv[6] : blake2b_iv[6];
	v15 = blake2b_iv[7];

	BLAKE2B_ROUNDS(ROUND);

	s->h[0] ^= v0 ^ v8;  s->h[1] ^= v1 ^ v9;
	s->h[2] ^= v2 ^ v10; s->h[3] ^= v3 ^ v11;
	s->h[4] ^= v4 ^ v12; s->h[5] ^= v5 ^ v13;
	s->h[6] ^= v6 ^ v14; s->h[7] ^= v7 ^ v15;
	if (block == s->buf)
		sodium_memzero(m, sizeof(m));
}

static void
count(struct blake2b_state *s, uint64_t n)
{
	s->t[0] += n;
	if (s->t[0] < n)
		s->t[1]++;
}

void
blake2b_init(struct blake2b_state *s, size_t outlen, const void *key,
    size_t keylen)
{
	int i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < 8; i++)
		s->h[i] = blake2b_iv[i];
	/* Parameter block: digest length, key length, fanout 1, depth 1. */
	s->h[0] ^= 0x01010000ULL ^ ((uint64_t)keylen << 8) ^ (uint64_t)outlen;
	s->outlen = outlen;
	if (keylen > 0) {
		/* The key, zero-padded to a block, is the first block. */
		memcpy(s->buf, key, keylen);
		s->buflen = BLAKE2B_BLOCK;
	}
}

void
blake2b_update(struct blake2b_state *s, const void *in, size_t n)
{
	const uint8_t *p = in;
	size_t fill;

	if (n == 0)
		return;
	/*
	 * The last block must go through compress with the final flag, so a
	 * full buffer is only compressed once more input is known to follow.
	 */
	fill = BLAKE2B_BLOCK - s->buflen;
	if (n > fill) {
		memcpy(s->buf + s->buflen, p, fill);
		count(s, BLAKE2B_BLOCK);
		compress(s, s->buf, 0);
		s->buflen = 0;
		p += fill;
		n -= fill;
		while (n > BLAKE2B_BLOCK) {
			count(s, BLAKE2B_BLOCK);
			compress(s, p, 0);
			p += BLAKE2B_BLOCK;
			n -= BLAKE2B_BLOCK;
		}
	}
	memcpy(s->buf + s->buflen, p, n);
	s->buflen += n;
}

void
blake2b_continue(struct blake2b_state *s)
{
	if (s->buflen == BLAKE2B_BLOCK) {
		count(s, BLAKE2B_BLOCK);
		compress(s, s->buf, 0);
		s->buflen = 0;
	}
}

void
blake2b_final(struct blake2b_state *s, uint8_t *out)
{
	uint8_t full[BLAKE2B_OUT_MAX];
	int i;

	count(s, s->buflen);
	memset(s->buf + s->buflen, 0, BLAKE2B_BLOCK - s->buflen);
	compress(s, s->buf, 1);
	for (i = 0; i < 8; i++)
		store64(full + 8 * i, s->h[i]);
	memcpy(out, full, s->outlen);
	sodium_memzero(full, sizeof(full));
	sodium_memzero(s, sizeof(*s));
}

void
blake2b(uint8_t *out, size_t outlen, const void *in, size_t n,
    const void *key, size_t keylen)
{
	struct blake2b_state s;

	blake2b_init(&s, outlen, key, keylen);
	blake2b_update(&s, in, n);
	blake2b_final(&s, out);
}
