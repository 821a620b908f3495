#ifndef COFFER_BLAKE2B_H
#define COFFER_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

/*
 * Private to src/crypto: BLAKE2b (RFC 7693), equal in output to libsodium's
 * crypto_generichash for the same key, input and output length.
 * outlen is 1..64 and keylen 0..64; the callers pass constants.
 */
#define BLAKE2B_BLOCK 128
#define BLAKE2B_OUT_MAX 64

struct blake2b_state {
	uint64_t h[8];
	uint64_t t[2];
	uint8_t buf[BLAKE2B_BLOCK];
	size_t buflen;
	size_t outlen;
};

extern const uint64_t blake2b_iv[8];

/*
 * The twelve rounds, each as R(the round's row of sigma), for the
 * compression functions (one input, or eight side by side): every message
 * index a constant (RFC 7693 section 2.7).
 */
#define BLAKE2B_ROUNDS(R) do {						\
	R(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);	\
	R(14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3);	\
	R(11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4);	\
	R(7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8);	\
	R(9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13);	\
	R(2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9);	\
	R(12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11);	\
	R(13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10);	\
	R(6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5);	\
	R(10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0);	\
	R(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);	\
	R(14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3);	\
} while (0)

void blake2b_init(struct blake2b_state *s, size_t outlen, const void *key,
    size_t keylen);
/*
 * More input follows for certain: a full buffer (the key block, after
 * blake2b_init) is compressed now, leaving the state at a block boundary
 * with nothing buffered.
 */
void blake2b_continue(struct blake2b_state *s);
void blake2b_update(struct blake2b_state *s, const void *in, size_t n);
/* Writes outlen bytes to out and wipes the state. */
void blake2b_final(struct blake2b_state *s, uint8_t *out);
void blake2b(uint8_t *out, size_t outlen, const void *in, size_t n,
    const void *key, size_t keylen);

/*
 * out + i * outlen = blake2b(in[i], len[i]) under one key (keylen > 0),
 * for i < n: eight inputs side by side where the processor has AVX-512
 * (blake2b-x8.c), one after another elsewhere.
 */
void blake2b_many(uint8_t *out, size_t outlen, size_t n,
    const uint8_t *const *in, const size_t *len, const void *key,
    size_t keylen);

#endif
